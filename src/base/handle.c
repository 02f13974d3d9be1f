/* SPDX-License-Identifier: Apache-2.0 */
/* Slot table behind value handles. */
#include <stdlib.h>

#include "base/status_internal.h"
#include "base/handle.h"

#define KD_H_INDEX_BITS 24
#define KD_H_GEN_BITS 20
#define KD_H_KIND_BITS 4
#define KD_H_INDEX_MASK ((1u << KD_H_INDEX_BITS) - 1)
#define KD_H_GEN_MASK ((1u << KD_H_GEN_BITS) - 1)

static uint64_t pack(uint32_t serial, uint32_t kind, uint32_t gen, uint32_t index) {
  return (uint64_t)(serial & 0xffff) << 48 | (uint64_t)(kind & 0xf) << 44 |
         (uint64_t)(gen & KD_H_GEN_MASK) << KD_H_INDEX_BITS | (uint64_t)(index + 1);
}

void kd_handle_table_init(kd_handle_table *t, uint32_t serial) {
  t->slots = NULL;
  t->count = t->cap = t->free_head = t->live = 0;
  t->serial = serial & 0xffff;
}

void kd_handle_table_fini(kd_handle_table *t) {
  free(t->slots);
  t->slots = NULL;
  t->count = t->cap = t->free_head = t->live = 0;
}

kd_status kd_handle_alloc(kd_handle_table *t, kd_handle_kind kind, void *obj,
                          uint64_t *out, const char *op) {
  uint32_t index;
  if (t->free_head) {
    index = t->free_head - 1;
    t->free_head = t->slots[index].next_free;
  } else {
    if (t->count == KD_H_INDEX_MASK)
      return kd_fail(KD_ERR_RESOURCE_EXHAUSTED, "%s: the session holds %u live handles, the most it can",
                     op, t->count);
    if (t->count == t->cap) {
      uint32_t cap = t->cap ? t->cap * 2 : 64;
      kd_handle_slot *grown = realloc(t->slots, (size_t)cap * sizeof *grown);
      if (!grown) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the handle table", op);
      t->slots = grown;
      t->cap = cap;
    }
    index = t->count++;
    t->slots[index].gen = 1;
  }
  kd_handle_slot *s = &t->slots[index];
  s->obj = obj;
  s->kind = (uint8_t)kind;
  s->next_free = 0;
  s->live = pack(t->serial, kind, s->gen, index);
  t->live++;
  *out = s->live;
  return KD_OK;
}

static const char *kind_name(uint32_t k) {
  return k == KD_HANDLE_TENSOR ? "tensor" : k == KD_HANDLE_MODULE ? "module" : "unknown";
}

kd_status kd_handle_get_checked(const kd_handle_table *t, uint64_t h, kd_handle_kind kind,
                                void **obj, const char *op, const char *what) {
  uint32_t serial = (uint32_t)(h >> 48);
  uint32_t hkind = (uint32_t)(h >> 44) & 0xf;
  uint32_t gen = (uint32_t)(h >> KD_H_INDEX_BITS) & KD_H_GEN_MASK;
  uint32_t index1 = (uint32_t)h & KD_H_INDEX_MASK;
  *obj = NULL;
  if (h == 0 || index1 == 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is not a kdag %s handle (0x%016llx)",
                   op, what, kind_name(kind), (unsigned long long)h);
  if (serial != t->serial)
    return kd_fail(KD_ERR_WRONG_SESSION,
                   "%s: argument %s is a handle of another session (session #%u, this is #%u)",
                   op, what, serial, t->serial);
  if (hkind != (uint32_t)kind)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is a %s handle, expected a %s", op,
                   what, kind_name(hkind), kind_name(kind));
  uint32_t index = index1 - 1;
  if (index >= t->count)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s (0x%016llx) names no slot of this session",
                   op, what, (unsigned long long)h);
  const kd_handle_slot *s = &t->slots[index];
  if (!s->obj || (s->gen & KD_H_GEN_MASK) != gen || s->kind != (uint8_t)kind)
    return kd_fail(KD_ERR_RELEASED, "%s: argument %s: the %s was already released", op, what,
                   kind_name(kind));
  *obj = s->obj;
  return KD_OK;
}

void kd_handle_free(kd_handle_table *t, uint64_t h) {
  uint32_t index = ((uint32_t)h & KD_H_INDEX_MASK) - 1;
  kd_handle_slot *s = &t->slots[index];
  s->obj = NULL;
  s->live = 0;
  t->live--;
  /* A slot that has used every generation is retired, not reused: a new
   * generation would repeat an old one, and a kept copy of that old handle
   * would name the new object. */
  if (s->gen == KD_H_GEN_MASK) return;
  s->gen++;
  s->next_free = t->free_head;
  t->free_head = index + 1;
}

void kd_handle_each(kd_handle_table *t, kd_handle_kind kind,
                    void (*fn)(void *ctx, void *obj, uint64_t handle), void *ctx) {
  for (uint32_t i = 0; i < t->count; ++i) {
    kd_handle_slot *s = &t->slots[i];
    if (s->obj && s->kind == (uint8_t)kind)
      fn(ctx, s->obj, pack(t->serial, s->kind, s->gen, i));
  }
}
