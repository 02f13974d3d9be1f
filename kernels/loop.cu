// SPDX-License-Identifier: Apache-2.0
// The kernels that drive a loop or conditional node of a GRAPH-mode CUDA
// graph (kd_graph_while_begin, kd_graph_if_begin): each sets the
// conditional node's handle from the condition tensor. One thread each
// (grid 1, block 1). cudaGraphSetConditional is a device function the
// driver resolves when it loads the module (CUDA 12.3+): no device runtime
// library is linked, and kdag loads this module apart from the built-ins,
// so a driver without conditional nodes refuses loops alone.
//
// cond and trips are one 4-byte integer each (KD_I32 or KD_U32); trips
// counts the trips completed (0 during the first; the total after).

// Before the conditional node: the first trip runs when the condition is
// nonzero and (a loop) its limit allows one.
extern "C" __global__ void kd_loop_head(cudaGraphConditionalHandle handle, const unsigned *cond, unsigned *trips,
                                        unsigned max_trips) {
  if (trips) *trips = 0u;
  cudaGraphSetConditional(handle, *cond != 0u && max_trips > 0u);
}

// The last node of a loop's body: one more trip done; the next runs when
// the condition the body wrote is nonzero and the limit allows it.
extern "C" __global__ void kd_loop_tail(cudaGraphConditionalHandle handle, const unsigned *cond, unsigned *trips,
                                        unsigned max_trips) {
  unsigned done = *trips + 1u;
  *trips = done;
  cudaGraphSetConditional(handle, *cond != 0u && done < max_trips);
}
