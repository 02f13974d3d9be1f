/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: graph programs (tests/fuzz/program.c) on a CUDA session over
 * the null driver (tests/null_driver.c), which runs no GPU work and proves
 * nothing about a GPU: what it exercises is the CUDA backend's bookkeeping,
 * the EAGER, GRAPH and AUTO executors with rebinding, re-pointed transfers,
 * in-place patches, release while work is in flight, and refusals.
 *
 * Kernels do nothing there while copies and host functions run, so the
 * reference runs the transfers alone: every sink and tensor must hold what
 * the uploads before it put there, in declaration order, through every
 * mode switch and rebinding. The driver counts lifetime violations itself
 * (a module unloaded or an executable graph destroyed before the launches
 * using it completed, pinned staging reused while a copy of it was
 * pending): there must be none. The backend's own calls: switch the
 * graph's execution mode, hold events pending (work stays in flight while
 * the program releases and rebinds) or let them finish, reap, arm a
 * one-time refusal of a driver call (after which a call may fail, with a
 * clear error, and the reference forgets what it knew), and user kernel
 * nodes against a kernel whose signature the input draws, with launch
 * configurations and arguments that may not fit it, kd_graph_set_arg and
 * the module's release (tests/fuzz/program.c). */
#include <stdlib.h>

#include "tests/fuzz/program.h"
#include "tests/fuzz/shared.h"
#include "tests/null_driver.h"

static const char *const target = "kdf_cuda";
static kdag_null_api nd;

/* Full-ring waits too: a ring of 8. */
static kd_session *null_session(void) { return kdf_null_session(target, 8, &nd); }

static void backend_op(kdf_program *f, uint8_t code) {
  /* The driver calls a test may refuse (null_driver.h), with a code that
   * is no device fault (a fault poisons the process for later inputs). */
  static const char *const entries[] = {"cuEventCreate",   "cuEventRecord",   "cuMemAllocFromPoolAsync",
                                        "cuMemHostAlloc",  "cuLaunchKernel",  "cuGraphInstantiateWithParams",
                                        "cuGraphLaunch",   "cuGraphExecKernelNodeSetParams",
                                        "cuGraphExecMemcpyNodeSetParams"};
  switch (code % 16) {
  case 0: case 1: case 2: {
    kd_status st = kd_graph_set_exec_mode(f->g, (kd_exec_mode)(code % 16));
    if (st) kdf_violation(target, "kd_graph_set_exec_mode(%d): %s", code % 16, kd_last_error());
    break;
  }
  case 3: nd.hold(1); break;
  case 4: nd.hold(0); break;
  case 5: {
    kd_status st = kd_session_reap(f->s, NULL);
    if (st) kdf_violation(target, "kd_session_reap: %s", kd_last_error());
    break;
  }
  case 6: {
    const char *entry = entries[kdf_u8(&f->in) % (sizeof entries / sizeof *entries)];
    uint32_t after = kdf_u8(&f->in) % 4, node = kdf_u8(&f->in) % 64;
    int cu = kdf_u8(&f->in) % 2 ? 2 /* CUDA_ERROR_OUT_OF_MEMORY */ : 1 /* CUDA_ERROR_INVALID_VALUE */;
    nd.fail(entry, after, cu, node);
    f->injected = 1;
    if (f->trace) fprintf(stderr, "refuse %s after %u more with %d\n", entry, after, cu);
    break;
  }
  case 7: /* a submission, left in flight */
    kdf_program_submit(f);
    break;
  case 8: case 9: case 10: case 11: case 12:
    if (f->node_count < MAX_NODES) kdf_program_kernel(f);
    break;
  case 13: case 14: kdf_program_set_arg(f); break;
  default: kdf_program_release_module(f); break;
  }
}

static void settle(kdf_program *f) {
  (void)f;
  nd.fail(NULL, 0, 0, 0);
  nd.hold(0);
}

static void end(kdf_program *f) {
  (void)f;
  kdag_null_calls c;
  nd.calls_get(&c);
  if (c.lifetime_violations) kdf_violation(target, "%llu lifetime violations", (unsigned long long)c.lifetime_violations);
}

int kdf_cuda(const uint8_t *data, size_t size) {
  static const kdf_backend cuda = {
      .target = "kdf_cuda", .session = null_session, .kernels_run = 0, .op = backend_op, .settle = settle, .end = end};
  kdf_program_run(&cuda, data, size);
  return 0;
}
