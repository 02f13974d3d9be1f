/* SPDX-License-Identifier: Apache-2.0 */
/* Held sets: what a piece of work keeps alive until its completion
 * retires (session/held.h). */
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "session/session_impl.h"

kd_status kd_held_reserve(kd_held_set *set, uint32_t extra, const char *op) {
  uint32_t have = set->heap ? set->cap : KD_HELD_INLINE;
  if (set->count + extra <= have) return KD_OK;
  uint32_t cap = have * 2;
  while (cap < set->count + extra) cap *= 2;
  kd_held *grown = realloc(set->heap, cap * sizeof *grown);
  if (!grown) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory to retain objects", op);
  if (!set->heap) memcpy(grown, set->small, set->count * sizeof *grown);
  set->heap = grown;
  set->cap = cap;
  return KD_OK;
}

kd_status kd_held_reserve_warm(kd_session *s, kd_held_set *set, uint32_t extra, const char *op) {
  if (!set->heap && set->count + extra > KD_HELD_INLINE && s->held_spare_count) {
    struct kd_held_spare sp = s->held_spares[--s->held_spare_count];
    memcpy(sp.items, set->small, set->count * sizeof *sp.items);
    set->heap = sp.items;
    set->cap = sp.cap;
  }
  return kd_held_reserve(set, extra, op); /* grows it if it is too small */
}

void kd_held_spares_free(kd_session *s) {
  while (s->held_spare_count) free(s->held_spares[--s->held_spare_count].items);
}

kd_status kd_held_add(kd_held_set *set, kd_held_kind kind, void *obj, const char *op) {
  kd_status st = kd_held_reserve(set, 1, op);
  if (st) return st;
  kd_held *h = &kd_held_items(set)[set->count++];
  h->kind = kind;
  h->obj = obj;
  return KD_OK;
}

void kd_held_release_one(kd_session *s, const kd_held *h) {
  /* What may reach the driver, or a foreign release callback, should a
   * host-only call (kd_session_enter_host) release it; tensors and modules
   * see to it where their last reference goes. None does today: what
   * host-only calls release (kd_graph_rebind's old tensor, a refused
   * kernel node's module) their caller still holds a handle to. */
  if (h->kind == KD_HELD_STAGING || h->kind == KD_HELD_EVENT || h->kind == KD_HELD_DEVPTR ||
      h->kind == KD_HELD_RESOURCE)
    kd_session_device(s);
  switch (h->kind) {
    case KD_HELD_TENSOR: kd_tensor_unref(s, h->obj); break;
    case KD_HELD_MODULE: kd_module_unref(s, h->obj); break;
    case KD_HELD_STAGING: kd_staging_put(&s->dev, h->obj); break;
    case KD_HELD_EVENT: kd_event_release_to_pool(&s->dev, h->obj); break;
    case KD_HELD_DEVPTR: kd_device_free(&s->dev, (CUdeviceptr)(uintptr_t)h->obj); break;
    case KD_HELD_RESOURCE: ((kd_resource *)h->obj)->destroy(h->obj); break;
    case KD_HELD_MEMORY: free(h->obj); break;
  }
}

void kd_held_release_all(kd_session *s, kd_held_set *set) {
  kd_held *items = kd_held_items(set);
  for (uint32_t i = 0; i < set->count; ++i) kd_held_release_one(s, &items[i]);
  /* Only CUDA submissions take spares (HOST runs allocate their task
   * graphs anyway): a HOST session keeps none. */
  if (set->heap && s->has_device && s->held_spare_count < KD_REAP_EVERY && set->cap <= KD_HELD_SPARE_MAX)
    s->held_spares[s->held_spare_count++] = (struct kd_held_spare){set->heap, set->cap};
  else
    free(set->heap);
  set->heap = NULL;
  set->count = set->cap = 0;
}

kd_status kd_held_tensor_once(kd_held_set *set, kd_tensor_obj *o, uint64_t stamp, const char *op) {
  if (o->held_by_scope == stamp) return KD_OK;
  kd_status st = kd_held_add(set, KD_HELD_TENSOR, o, op);
  if (st) return st;
  kd_tensor_ref(o);
  o->held_by_scope = stamp;
  return KD_OK;
}

kd_status kd_held_module_once(kd_held_set *set, kd_module_obj *o, uint64_t stamp, const char *op) {
  if (o->held_by_scope == stamp) return KD_OK;
  kd_status st = kd_held_add(set, KD_HELD_MODULE, o, op);
  if (st) return st;
  kd_module_ref(o);
  o->held_by_scope = stamp;
  return KD_OK;
}

