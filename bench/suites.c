/* Registers every built-in suite. */
#include "bench/suites.h"

int kb_register_builtin_suites(kb_harness *h) {
  if (kb_register_copy_suite(h) || kb_register_launch_suite(h) || kb_register_fanout_suite(h) ||
      kb_register_rebind_suite(h) || kb_register_oneshot_suite(h) || kb_register_pipeline_suite(h) ||
      kb_register_module_suite(h) || kb_register_nvrtc_suite(h) || kb_register_graph_suite(h) || kb_register_dx_suite(h))
    return -1;
  return 0;
}
