/* SPDX-License-Identifier: Apache-2.0 */
/* kdag-bench: runs kdag's built-in benchmark suites (see --help).
 *
 * Without a usable GPU the GPU suites are skipped with the driver's reason
 * and the CPU suites still run; the exit status stays 0 (1 with
 * KDAG_REQUIRE_GPU=1, as on the GPU lane). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/gpu.h"
#include "bench/harness.h"
#include "bench/suites.h"

int main(int argc, char **argv) {
  /* A cold PTX JIT must really compile: keep the driver's JIT cache out of
   * it unless the caller decided otherwise. Set before the driver loads. */
  const char *cache = getenv("CUDA_CACHE_DISABLE");
  if (!cache) setenv("CUDA_CACHE_DISABLE", "1", 1);
  /* A kernel of the user's own: its flags leave argv for the suite. */
  kb_user_kernel *user = NULL;
  char why[KB_MESSAGE_MAX];
  if (kb_user_kernel_parse(&argc, argv, &user, why, sizeof why)) {
    fprintf(stderr, "kdag-bench: %s (see --help)\n", why);
    return 2;
  }
  kb_harness *h = kb_harness_create();
  if (!h || kb_register_builtin_suites(h) || (user && kb_register_user_suite(h, user))) {
    fprintf(stderr, "kdag-bench: registering the suites failed\n");
    kb_harness_destroy(h);
    kb_user_kernel_free(user);
    return 2;
  }
  kb_machine *m = kb_harness_machine(h);
  snprintf(m->notes, sizeof m->notes, "CUDA_CACHE_DISABLE=%s", cache ? cache : "1 (set by kdag-bench)");
  kb_gpu_describe_toolkit(m);
  int status = kb_main(h, argc, argv);
  /* The GPU lane sets KDAG_REQUIRE_GPU=1: there a skipped GPU suite is a
   * failure, as it is for the GPU tests. */
  const char *require = getenv("KDAG_REQUIRE_GPU");
  const kb_report *r = kb_harness_report(h);
  if (status == 0 && require && !strcmp(require, "1")) {
    for (size_t i = 0; i < r->skip_count; ++i) {
      if (!r->skips[i].needs_gpu || r->skips[i].not_applicable) continue;
      fprintf(stderr, "kdag-bench: KDAG_REQUIRE_GPU=1 but %s%s%s was skipped: %s\n", r->skips[i].suite,
              r->skips[i].case_name[0] ? "/" : "", r->skips[i].case_name, r->skips[i].reason);
      status = 1;
    }
  }
  kb_harness_destroy(h);
  kb_gpu_shutdown();
  kb_user_kernel_free(user);
  return status;
}
