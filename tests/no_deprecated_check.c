/* SPDX-License-Identifier: Apache-2.0 */
/* Built with KDAG_NO_DEPRECATED (tests/CMakeLists.txt): the previous
 * release's names must then be gone, and the new ones all there. */
#include "kdag/kdag.h"

#if defined(kd_graph_add) || defined(kd_counters) || defined(kd_binary_free) || defined(kd_module_cache_open) || \
    defined(kd_dx_solver_release) || defined(kd_session_counters)
#error "KDAG_NO_DEPRECATED left a previous name defined"
#endif

/* Referenced, so a missing declaration fails the build. */
void *kdag_no_deprecated_names[] = {(void *)kd_graph_op_add, (void *)kd_session_stats_get, (void *)kd_binary_destroy,
                                    (void *)kd_cubin_cache_create, (void *)kd_dx_solver_destroy,
                                    (void *)kd_module_retain};
