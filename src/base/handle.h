/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: value handles with generation checks.
 *
 * A handle is 64 bits: session serial (16) | kind (4) | generation (20) |
 * slot index + 1 (24). A slot's generation is bumped when its handle is
 * freed, so every copy of a released handle is recognised as stale, and the
 * serial tells a handle of another session apart (base/serial.h: no two
 * live sessions share one). A slot that has used all 2^20 - 1 generations is
 * retired rather than reused, so a stale handle never names a new object. */
#ifndef KDAG_GRAPH_HANDLE_H
#define KDAG_GRAPH_HANDLE_H

#include <stdint.h>

#include "kdag/status.h"

typedef enum kd_handle_kind {
  KD_HANDLE_TENSOR = 1,
  KD_HANDLE_MODULE = 2
} kd_handle_kind;

typedef struct kd_handle_slot {
  void *obj;          /* NULL when free */
  uint64_t live;      /* the handle naming obj; 0 when free (one compare resolves a handle) */
  uint32_t gen;
  uint32_t next_free; /* index + 1 of the next free slot; 0 ends the list */
  uint8_t kind;
} kd_handle_slot;

typedef struct kd_handle_table {
  kd_handle_slot *slots;
  uint32_t count, cap;
  uint32_t free_head;  /* index + 1; 0: none */
  uint32_t serial;     /* of the owning session, 16 bits */
  uint32_t live;
} kd_handle_table;

void kd_handle_table_init(kd_handle_table *t, uint32_t serial);
void kd_handle_table_fini(kd_handle_table *t);

/* Errors: KD_ERR_RESOURCE_EXHAUSTED (2^24 live handles), KD_ERR_OUT_OF_MEMORY. */
kd_status kd_handle_alloc(kd_handle_table *t, kd_handle_kind kind, void *obj,
                          uint64_t *out, const char *op);

/* kd_handle_get's checks one by one, each failure with its own message. */
kd_status kd_handle_get_checked(const kd_handle_table *t, uint64_t handle, kd_handle_kind kind,
                                void **obj, const char *op, const char *what);

/* Resolves a handle of the given kind. what names the argument ("tensor",
 * "args[2].tensor") for the message. Errors: KD_ERR_INVALID_ARGUMENT (0 or
 * not a handle of that kind), KD_ERR_WRONG_SESSION, KD_ERR_RELEASED.
 * Inline: every access of every graph node resolves one. A live handle is
 * its slot's live value, whose bits hold the session, kind and generation. */
static inline kd_status kd_handle_get(const kd_handle_table *t, uint64_t handle, kd_handle_kind kind,
                                      void **obj, const char *op, const char *what) {
  uint32_t index = ((uint32_t)handle & ((1u << 24) - 1)) - 1; /* wraps for index 0: no slot */
  if (index < t->count && t->slots[index].live == handle && ((handle >> 44) & 0xf) == (uint64_t)kind) {
    *obj = t->slots[index].obj;
    return KD_OK;
  }
  return kd_handle_get_checked(t, handle, kind, obj, op, what);
}

/* The slot index a handle names (meaningful once kd_handle_get accepted it). */
static inline uint32_t kd_handle_index(uint64_t handle) { return ((uint32_t)handle & ((1u << 24) - 1)) - 1; }

/* Frees the slot of a live handle (resolved first with kd_handle_get). */
void kd_handle_free(kd_handle_table *t, uint64_t handle);

/* Calls fn on every live object of a kind (used at session teardown). */
void kd_handle_each(kd_handle_table *t, kd_handle_kind kind,
                    void (*fn)(void *ctx, void *obj, uint64_t handle), void *ctx);

#endif
