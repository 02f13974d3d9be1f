/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: kdag's ranges in Nsight Systems and other NVTX tools.
 *
 * NVTX (nvtx3, header-only, from the CUDA toolkit) in the domain "kdag":
 * a range per submission, named after its graph (kd_graph_set_name), per
 * node of an EAGER submission, and per host wait. A tool attaches through
 * NVTX_INJECTION64_PATH, read at the process's first NVTX call; without
 * one the domain is NULL and every helper below returns after one branch,
 * so kdag costs nothing extra where nobody looks. Strings kdag names a
 * range with over and over (graph and node names) are registered with the
 * tool once, and the handle is kept by their owner. Thread-safe. */
#ifndef KDAG_BASE_NVTX_H
#define KDAG_BASE_NVTX_H

#include <stdint.h>

/* A string registered with the tool; NULL without one. */
typedef struct kd_nvtx_string_s *kd_nvtx_string;

/* Categories, named in the tool as "submit", "node", "wait". */
enum { KD_NVTX_SUBMIT = 1, KD_NVTX_NODE = 2, KD_NVTX_WAIT = 3 };

/* 1 when a tool is attached (the domain exists). The first call makes
 * NVTX load the tool, if one is named. */
int kd_nvtx_on(void);

/* Registers text with the tool: NULL without one, or when text is NULL. */
kd_nvtx_string kd_nvtx_register(const char *text);

/* Opens a range on the calling thread named by a registered string, or by
 * text (copied by the tool) when name is NULL. Ranges nest; each push is
 * matched by a kd_nvtx_pop on the same thread. */
void kd_nvtx_push(kd_nvtx_string name, const char *text, uint32_t category);
void kd_nvtx_pop(void);

#endif
