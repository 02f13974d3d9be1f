/* bench/suites.h — kdag-bench's built-in suites. Each registration returns
 * 0, or -1 when the harness refused it (duplicate name, no memory). */
#ifndef KDAG_BENCH_SUITES_H
#define KDAG_BENCH_SUITES_H

#include "bench/harness.h"

/* copy: device-to-device copy bandwidth, the run's bandwidth reference. */
int kb_register_copy_suite(kb_harness *h);
/* launch: a chain of N empty kernels, raw launches vs a hand-built graph. */
int kb_register_launch_suite(kb_harness *h);
/* module: NVRTC compile / CUBIN load / PTX JIT, each up to a finished first
 * launch, through kdag's raw scope. */
int kb_register_module_suite(kb_harness *h);
/* nvrtc (CPU): kd_nvrtc_compile of the add kernel. */
int kb_register_nvrtc_suite(kb_harness *h);
int kb_register_graph_suite(kb_harness *h);

/* All of the above, and the copy suite as bandwidth reference. */
int kb_register_builtin_suites(kb_harness *h);

#endif /* KDAG_BENCH_SUITES_H */
