/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: what a completion waits for when the work is not on a CUDA
 * stream (a HOST run): an object whose first member is a kd_fence, whose
 * ops say whether it is done, wait for it and drop the completion's
 * reference. The completion ring sees only this, so it names no executor
 * (the HOST executor's runs are fences, exec/host.c). */
#ifndef KDAG_SESSION_FENCE_H
#define KDAG_SESSION_FENCE_H

typedef struct kd_fence kd_fence;

typedef struct kd_fence_ops {
  void (*release)(kd_fence *f); /* drops the reference the completion held; required */
  int (*done)(kd_fence *f);     /* 1 once the work is done, never blocking; required */
  void (*wait)(kd_fence *f);    /* blocks until it is; required */
} kd_fence_ops;

struct kd_fence {
  const kd_fence_ops *ops; /* first: the object it heads is the fence */
};

#endif
