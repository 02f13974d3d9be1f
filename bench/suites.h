/* SPDX-License-Identifier: Apache-2.0 */
/* bench/suites.h — kdag-bench's built-in suites. Each registration returns
 * 0, or -1 when the harness refused it (duplicate name, no memory). */
#ifndef KDAG_BENCH_SUITES_H
#define KDAG_BENCH_SUITES_H

#include "bench/harness.h"

/* copy: device-to-device copy bandwidth, the run's bandwidth reference. */
int kb_register_copy_suite(kb_harness *h);
/* launch: a chain of N empty kernels: raw launches, a hand-built graph,
 * kdag EAGER and GRAPH. */
int kb_register_launch_suite(kb_harness *h);
/* fanout: W independent small kernels: a serial stream, a hand-built graph,
 * kdag EAGER and GRAPH. */
int kb_register_fanout_suite(kb_harness *h);
/* rebind: re-submitting a GRAPH-mode chain, with tensors rebound between
 * submissions, against a hand-built graph's relaunch. */
int kb_register_rebind_suite(kb_harness *h);
/* oneshot: create, declare, submit, wait, destroy a graph of N nodes. */
int kb_register_oneshot_suite(kb_harness *h);
/* pipeline: 4 bandwidth-bound built-in stages, share of the copy bandwidth. */
int kb_register_pipeline_suite(kb_harness *h);
/* module: NVRTC compile / CUBIN load / PTX JIT, each up to a finished first
 * launch, through kdag's raw scope. */
int kb_register_module_suite(kb_harness *h);
/* nvrtc (CPU): kd_nvrtc_compile of the add kernel. */
int kb_register_nvrtc_suite(kb_harness *h);
/* graph (CPU): declaring graphs of N nodes. */
int kb_register_graph_suite(kb_harness *h);
/* hostexec (CPU): the HOST executor's cost per node, chains and roots. */
int kb_register_hostexec_suite(kb_harness *h);
/* hostops (CPU): the HOST built-ins against single- and two-thread C loops. */
int kb_register_hostops_suite(kb_harness *h);

/* dx: cuBLASDx GEMM and cuSOLVERDx potrf kernel nodes against cuBLAS and
 * cuSOLVER batched, and the MathDx module's cold and warm start. */
int kb_register_dx_suite(kb_harness *h);

/* workloads_*: Jacobi (built-ins, and an NVRTC kernel), CG and an image
 * pipeline against a cuLaunchKernel loop and a hand-built CUDA graph of
 * the same kernels; workloads_declare (CPU): declaring the Jacobi. */
int kb_register_workloads_suites(kb_harness *h);

/* pdl: a chain of dependent kernels with and without programmatic
 * dependent launch: hand-built graphs, kdag GRAPH, and launches queued
 * behind a blocking kernel (driver and kdag EAGER). */
int kb_register_pdl_suite(kb_harness *h);
/* Suites "loops_cg" and "loops_jacobi": solvers until they converge, the loop on the device or driven from
 * the host (suites_loops.c). */
int kb_register_loops_suites(kb_harness *h);

/* interop: wrapping memory, DLPack import and export, per operation. */
int kb_register_interop_suite(kb_harness *h);
/* suites_collectives.c: "collectives" [GPU], an all-reduce through NCCL and through kdag. */
int kb_register_collectives_suite(kb_harness *h);

/* user: a kernel of the user's own (--kernel FILE:NAME, --grid, --block,
 * --shared, --arg; see suites_user.c). kb_user_kernel_parse takes those
 * flags out of argv (the rest stays for kb_main): 0 with *out NULL when
 * none is given, 0 with *out set, or -1 with a message in why. */
typedef struct kb_user_kernel kb_user_kernel;
int kb_user_kernel_parse(int *argc, char **argv, kb_user_kernel **out, char *why, size_t cap);
void kb_user_kernel_free(kb_user_kernel *k);
/* Registers suite "user" for k, which must outlive the harness. */
int kb_register_user_suite(kb_harness *h, kb_user_kernel *k);

/* Removes a scratch folder a suite made with mkdtemp (its whole tree); ""
 * does nothing. Returns 0, or -1 when it could not. */
int kb_remove_scratch_dir(const char *dir);

/* All of the above, and the copy suite as bandwidth reference. */
int kb_register_builtin_suites(kb_harness *h);

#endif /* KDAG_BENCH_SUITES_H */
