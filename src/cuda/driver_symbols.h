/* SPDX-License-Identifier: Apache-2.0 */
/* X-macro list of every CUDA driver entry point kdag uses. Each is resolved
 * once through cuGetProcAddress at the CUDA version of the headers kdag was
 * built with, so the ABI of each pointer matches its declaration here.
 * KD_CU_SYMBOL_OPTIONAL entries may be missing from older drivers. No
 * include guard: included once per expansion of the two macros. */
KD_CU_SYMBOL(cuInit)
KD_CU_SYMBOL(cuDriverGetVersion)
KD_CU_SYMBOL(cuGetErrorName)
KD_CU_SYMBOL(cuGetErrorString)
KD_CU_SYMBOL(cuDeviceGet)
KD_CU_SYMBOL(cuDeviceGetCount)
KD_CU_SYMBOL(cuDeviceGetName)
KD_CU_SYMBOL(cuDeviceGetAttribute)
KD_CU_SYMBOL(cuDeviceGetPCIBusId)
KD_CU_SYMBOL(cuDevicePrimaryCtxRetain)
KD_CU_SYMBOL(cuDevicePrimaryCtxRelease)
KD_CU_SYMBOL(cuCtxSetCurrent)
KD_CU_SYMBOL(cuCtxGetCurrent)
KD_CU_SYMBOL(cuStreamCreate)
KD_CU_SYMBOL(cuStreamDestroy)
KD_CU_SYMBOL(cuStreamSynchronize)
KD_CU_SYMBOL(cuStreamWaitEvent)
KD_CU_SYMBOL(cuEventCreate)
KD_CU_SYMBOL(cuEventDestroy)
KD_CU_SYMBOL(cuEventRecord)
KD_CU_SYMBOL(cuEventQuery)
KD_CU_SYMBOL(cuEventSynchronize)
KD_CU_SYMBOL(cuMemPoolCreate)
KD_CU_SYMBOL(cuMemPoolDestroy)
KD_CU_SYMBOL(cuMemPoolSetAttribute)
KD_CU_SYMBOL(cuMemAllocFromPoolAsync)
KD_CU_SYMBOL(cuMemFreeAsync)
KD_CU_SYMBOL(cuMemcpyHtoDAsync)
KD_CU_SYMBOL(cuMemcpyDtoHAsync)
KD_CU_SYMBOL(cuMemsetD8Async)
KD_CU_SYMBOL(cuMemsetD32Async)
KD_CU_SYMBOL(cuMemHostAlloc)
KD_CU_SYMBOL(cuMemFreeHost)
KD_CU_SYMBOL(cuMemHostRegister)
KD_CU_SYMBOL(cuMemHostUnregister)
KD_CU_SYMBOL(cuPointerGetAttributes)
KD_CU_SYMBOL(cuModuleLoadDataEx)
KD_CU_SYMBOL(cuModuleUnload)
KD_CU_SYMBOL(cuModuleGetFunction)
KD_CU_SYMBOL(cuFuncGetAttribute)
KD_CU_SYMBOL(cuFuncSetAttribute)
/* CUDA 12.4+: NULL on older drivers (parameter checks then rely on PTX). */
KD_CU_SYMBOL_OPTIONAL(cuFuncGetParamInfo)
KD_CU_SYMBOL(cuLaunchKernel)
/* Programmatic dependent launch (KD_LAUNCH_PDL): without either, every
 * edge stays a full dependency. cuGraphAddDependencies is the CUDA 12.3
 * version, with edge data. */
KD_CU_SYMBOL_OPTIONAL(cuLaunchKernelEx)
KD_CU_SYMBOL_OPTIONAL(cuGraphAddDependencies)
KD_CU_SYMBOL(cuLaunchHostFunc)
/* GRAPH mode (exec/cuda_graph.c). */
KD_CU_SYMBOL(cuGraphCreate)
KD_CU_SYMBOL(cuGraphDestroy)
KD_CU_SYMBOL(cuGraphAddKernelNode)
KD_CU_SYMBOL(cuGraphAddMemcpyNode)
KD_CU_SYMBOL(cuGraphAddHostNode)
KD_CU_SYMBOL(cuGraphAddEmptyNode)
KD_CU_SYMBOL(cuGraphAddChildGraphNode)
KD_CU_SYMBOL(cuGraphAddEventRecordNode)
KD_CU_SYMBOL(cuGraphInstantiateWithParams)
KD_CU_SYMBOL(cuGraphInstantiateWithFlags)
KD_CU_SYMBOL(cuGraphExecDestroy)
KD_CU_SYMBOL(cuGraphExecKernelNodeSetParams)
KD_CU_SYMBOL(cuGraphExecMemcpyNodeSetParams)
KD_CU_SYMBOL(cuGraphExecEventRecordNodeSetEvent)
KD_CU_SYMBOL(cuGraphExecChildGraphNodeSetParams)
KD_CU_SYMBOL(cuGraphLaunch)
KD_CU_SYMBOL(cuStreamBeginCapture)
KD_CU_SYMBOL(cuStreamEndCapture)
/* GRAPH-mode loops (kd_graph_while_begin): conditional nodes, CUDA 12.3+;
 * without them a loop is refused in GRAPH mode (AUTO runs it EAGER). */
KD_CU_SYMBOL_OPTIONAL(cuGraphConditionalHandleCreate)
KD_CU_SYMBOL_OPTIONAL(cuGraphAddNode)
/* kdag-bench (bench/): timing, plain allocations and device copies (its
 * hand-built CUDA graph baseline uses the GRAPH-mode entries above). */
KD_CU_SYMBOL(cuEventElapsedTime)
KD_CU_SYMBOL(cuMemAlloc)
KD_CU_SYMBOL(cuMemFree)
KD_CU_SYMBOL(cuMemcpyDtoDAsync)
KD_CU_SYMBOL(cuDeviceTotalMem)
KD_CU_SYMBOL_OPTIONAL(cuGraphAddMemsetNode) /* the loops suite's hand-built graph */
KD_CU_SYMBOL_OPTIONAL(cuDeviceCanAccessPeer) /* peer copies: direct where the devices allow it */
KD_CU_SYMBOL_OPTIONAL(cuCtxEnablePeerAccess)
