/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: the set of objects one piece of work keeps alive until it has
 * completed (a submission, a raw scope, an executable graph), released
 * when its completion retires. Objects of the layers above (executable
 * graphs, foreign resources) come as kd_resource: their destroy first, so
 * the set names no executor. Not thread-safe: the session lock guards
 * every set. */
#ifndef KDAG_SESSION_HELD_H
#define KDAG_SESSION_HELD_H

#include <stdint.h>

#include "kdag/status.h"

typedef struct kd_session kd_session;
struct kd_tensor_obj;
struct kd_module_obj;

/* An object a layer above the session keeps in held sets: destroy (or
 * drop a reference) first, as IREE's resources. */
typedef struct kd_resource {
  void (*destroy)(struct kd_resource *self);
} kd_resource;

typedef enum kd_held_kind {
  KD_HELD_TENSOR, KD_HELD_MODULE, KD_HELD_STAGING, KD_HELD_EVENT, KD_HELD_DEVPTR,
  KD_HELD_RESOURCE,         /* a kd_resource: its destroy */
  KD_HELD_MEMORY            /* a malloc'd block the driver may still read (kd_host_call): only deferred */
} kd_held_kind;

typedef struct kd_held {
  kd_held_kind kind;
  void *obj;
} kd_held;

/* A growable set of objects one piece of work keeps alive. The first few
 * live in the set itself: a typical submission holds one to three objects,
 * and then costs no allocation. Zero-initialized is empty; a set may be
 * moved by assignment (no pointer into itself). */
#define KD_HELD_INLINE 4

typedef struct kd_held_set {
  kd_held *heap;            /* NULL while the items fit in small */
  uint32_t count, cap;      /* cap: heap entries (0 while small is used) */
  kd_held small[KD_HELD_INLINE];
} kd_held_set;

static inline kd_held *kd_held_items(kd_held_set *set) { return set->heap ? set->heap : set->small; }

kd_status kd_held_add(kd_held_set *set, kd_held_kind kind, void *obj, const char *op);
/* Makes room for extra more adds, which then cannot fail. */
kd_status kd_held_reserve(kd_held_set *set, uint32_t extra, const char *op);
/* The same for a submission's set: an array a retired completion left is
 * taken before a new one is allocated. */
kd_status kd_held_reserve_warm(kd_session *s, kd_held_set *set, uint32_t extra, const char *op);
/* Releases every object of the set and empties it; on a CUDA session its
 * array is kept for later submissions (or freed: past KD_HELD_SPARE_MAX
 * entries, or with KD_REAP_EVERY kept already). */
void kd_held_release_all(kd_session *s, kd_held_set *set);
void kd_held_release_one(kd_session *s, const kd_held *h);
/* Frees the kept arrays (session destroy). */
void kd_held_spares_free(kd_session *s);
/* Adds an object to a held set once per stamp (a submission or scope),
 * taking a reference. */
kd_status kd_held_tensor_once(kd_held_set *set, struct kd_tensor_obj *o, uint64_t stamp, const char *op);
kd_status kd_held_module_once(kd_held_set *set, struct kd_module_obj *o, uint64_t stamp, const char *op);

#endif
