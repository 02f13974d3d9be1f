/* SPDX-License-Identifier: Apache-2.0 */
/* Suite "nvrtc" (CPU): kd_nvrtc_compile of the add kernel's source to PTX,
 * CUBIN and LTO-IR for the architecture of the embedded CUBINs. NVRTC runs
 * on the CPU, so this suite needs no GPU. */
#include <stdio.h>

#include "bench/suites.h"
#include "kdag/compile.h"
#include "kernels/embedded.h"

typedef struct nvrtc_target {
  int emit_ptx_arch; /* 1: compute_XX */
  int lto;
} nvrtc_target;

static kb_status nvrtc_init(kb_harness *h, void *user, void **state, char *why, size_t cap) {
  (void)user, (void)state;
  int major, minor;
  if (kd_nvrtc_version(&major, &minor) != KD_OK) {
    snprintf(why, cap, "%s", kd_last_error());
    return KB_SKIP;
  }
  kb_machine *m = kb_harness_machine(h);
  snprintf(m->nvrtc_version, sizeof m->nvrtc_version, "%d.%d", major, minor);
  return KB_OK;
}

static kb_status nvrtc_setup(kb_run *run, void **state) {
  (void)state;
  kb_run_per_iteration(run, 1, "compile");
  return KB_OK;
}

static kb_status nvrtc_batch(kb_run *run, void *state, uint64_t iterations, kb_timing *out) {
  (void)state;
  const nvrtc_target *t = kb_run_user(run);
  char arch[32];
  /* kd_kernel_arch is "sm_XX"; PTX targets the matching compute_XX. */
  snprintf(arch, sizeof arch, "%s%s", t->emit_ptx_arch ? "compute_" : "sm_", kd_kernel_arch + 3);
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = arch, .program_name = "add.cu", .lto = t->lto};
  uint64_t t0 = kb_now_ns();
  for (uint64_t i = 0; i < iterations; ++i) {
    kd_binary *bin = NULL;
    kd_status st = kd_nvrtc_compile((const char *)kd_kernel_add_source, &o, &bin);
    if (st != KD_OK) return kb_run_fail(run, "kd_nvrtc_compile(%s): %s: %s", arch, kd_status_name(st), kd_last_error());
    kd_binary_destroy(bin);
  }
  out->host_ns = (double)(kb_now_ns() - t0);
  return KB_OK;
}

int kb_register_nvrtc_suite(kb_harness *h) {
  kb_suite_desc sd = {.name = "nvrtc",
                      .description = "kd_nvrtc_compile of kernels/add.cu on the CPU (no GPU needed)",
                      .init = nvrtc_init};
  kb_suite *s = kb_suite_add(h, &sd);
  if (!s) return -1;
  static nvrtc_target ptx = {1, 0}, cubin = {0, 0}, ltoir = {0, 1};
  kb_case_desc to_ptx = {.name = "add_to_ptx", .description = "source to PTX (compute_XX)",
                         .baseline = 1, .setup = nvrtc_setup, .batch = nvrtc_batch, .user = &ptx};
  kb_case_desc to_cubin = {.name = "add_to_cubin", .description = "source to CUBIN (sm_XX)",
                           .setup = nvrtc_setup, .batch = nvrtc_batch, .user = &cubin};
  kb_case_desc to_ltoir = {.name = "add_to_ltoir", .description = "source to LTO-IR (-dlto, sm_XX)",
                           .setup = nvrtc_setup, .batch = nvrtc_batch, .user = &ltoir};
  if (kb_case_add(s, &to_ptx) || kb_case_add(s, &to_cubin) || kb_case_add(s, &to_ltoir)) return -1;
  return 0;
}
