/* SPDX-License-Identifier: Apache-2.0 */
/* Registers every built-in suite; helpers they share. */
#include <stdio.h>
#include <stdlib.h>

#include "bench/suites.h"

int kb_remove_scratch_dir(const char *dir) {
  if (!dir || !*dir) return 0;
  char cmd[4200];
  if ((size_t)snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) >= sizeof cmd) return -1;
  return system(cmd) == 0 ? 0 : -1;
}

int kb_register_builtin_suites(kb_harness *h) {
  if (kb_register_copy_suite(h) || kb_register_launch_suite(h) || kb_register_pdl_suite(h) || kb_register_loops_suites(h) || kb_register_fanout_suite(h) ||
      kb_register_rebind_suite(h) || kb_register_oneshot_suite(h) || kb_register_pipeline_suite(h) ||
      kb_register_module_suite(h) || kb_register_nvrtc_suite(h) || kb_register_graph_suite(h) || kb_register_hostexec_suite(h) || kb_register_hostops_suite(h) || kb_register_interop_suite(h) || kb_register_collectives_suite(h) ||
      kb_register_dx_suite(h) || kb_register_workloads_suites(h))
    return -1;
  return 0;
}
