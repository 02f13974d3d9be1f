/* SPDX-License-Identifier: Apache-2.0 */
/* Pinned host staging for uploads and downloads, placed on the GPU's NUMA
 * node. Blocks come in power-of-two size classes and are reused, so steady
 * state never pins or unpins memory; unpinning (cuMemHostUnregister,
 * cuMemFreeHost) waits for all work in the context (tools/wait-probe), so
 * it happens only where a caller asked for a wait: kd_staging_trim and
 * kd_staging_fini. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "base/status_internal.h"
#include "cuda/cu_status.h"

#define KD_STAGING_MIN_SHIFT 16 /* 64 KiB */

static void placement(kd_device *d, const char *fmt, const char *detail) {
  snprintf(d->info.placement, sizeof d->info.placement, fmt, detail);
  kd_log(d->log, KD_LOG_INFO, "%s", d->info.placement);
}

/* Finds the NUMA nodes closest to the GPU through its PCI bus id. In a VM
 * hwloc often cannot see the GPU's PCI locality: then staging is pinned
 * without placement and the reason is recorded, not treated as an error. */
kd_status kd_staging_init(kd_device *d) {
  if (hwloc_topology_init(&d->topo) != 0) {
    d->topo = NULL;
    placement(d, "unplaced: %s", "hwloc_topology_init failed");
    return KD_OK;
  }
  hwloc_topology_set_io_types_filter(d->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  /* PCI locality is all kdag needs. The GPU-vendor plugins would initialise
   * CUDA, NVML or OpenCL inside hwloc (slow, and they keep memory for the
   * process), so they are switched off. */
  static const char *const skip[] = {"cuda", "nvml", "opencl", "rsmi", "levelzero", "gl"};
  for (size_t i = 0; i < sizeof skip / sizeof skip[0]; ++i)
    hwloc_topology_set_components(d->topo, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, skip[i]);
  if (hwloc_topology_load(d->topo) != 0) {
    hwloc_topology_destroy(d->topo);
    d->topo = NULL;
    placement(d, "unplaced: %s", "hwloc_topology_load failed");
    return KD_OK;
  }
  hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(d->topo, d->info.pci_bus_id);
  hwloc_obj_t near = pci ? hwloc_get_non_io_ancestor_obj(d->topo, pci) : NULL;
  if (!near || !near->nodeset || hwloc_bitmap_iszero(near->nodeset)) {
    char why[160];
    snprintf(why, sizeof why, "hwloc sees no PCI locality for GPU %s (typical in a VM)",
             d->info.pci_bus_id);
    placement(d, "unplaced (cuMemHostAlloc): %s", why);
    return KD_OK;
  }
  d->nodeset = hwloc_bitmap_dup(near->nodeset);
  if (!d->nodeset) {
    placement(d, "unplaced (cuMemHostAlloc): %s", "no memory to copy hwloc's NUMA node set");
    return KD_OK;
  }
  d->info.numa_node = hwloc_bitmap_first(d->nodeset);
  char nodes[64];
  hwloc_bitmap_list_snprintf(nodes, sizeof nodes, d->nodeset);
  placement(d, "bound to NUMA node(s) %s via hwloc, then cuMemHostRegister", nodes);
  return KD_OK;
}

/* Unpins and frees one block (a wait for the whole context). */
static void free_block(kd_device *d, kd_staging_block *b) {
  d->context_waits++;
  if (b->registered) {
    d->cu->cuMemHostUnregister(b->host);
    hwloc_free(d->topo, b->host, b->size);
  } else {
    d->cu->cuMemFreeHost(b->host);
  }
  d->staging_bytes -= b->size;
  d->staging_blocks--;
  free(b);
}

void kd_staging_trim(kd_device *d) {
  for (kd_staging_block **at = &d->staging_all; *at;) {
    kd_staging_block *b = *at;
    int idle = 0; /* in its class's free list */
    for (kd_staging_block *f = d->staging_free[b->size_class]; f && !idle; f = f->next) idle = f == b;
    if (!idle) {
      at = &b->all_next;
      continue;
    }
    *at = b->all_next;
    kd_staging_block **link = &d->staging_free[b->size_class];
    while (*link != b) link = &(*link)->next;
    *link = b->next;
    d->staging_idle_bytes -= b->size;
    free_block(d, b);
  }
}

void kd_staging_fini(kd_device *d) {
  for (kd_staging_block *b = d->staging_all, *next; b; b = next) {
    next = b->all_next;
    free_block(d, b);
  }
  d->staging_all = NULL;
  memset(d->staging_free, 0, sizeof d->staging_free);
  d->staging_bytes = d->staging_idle_bytes = 0;
  if (d->nodeset) hwloc_bitmap_free(d->nodeset);
  d->nodeset = NULL;
  if (d->topo) hwloc_topology_destroy(d->topo);
  d->topo = NULL;
}

static int size_class(size_t bytes) {
  int c = 0;
  while (((size_t)1 << (c + KD_STAGING_MIN_SHIFT)) < bytes && c + 1 < KD_STAGING_CLASSES) ++c;
  return c;
}

kd_status kd_staging_get(kd_device *d, const char *op, size_t bytes, kd_staging_block **out) {
  int c = size_class(bytes);
  size_t size = (size_t)1 << (c + KD_STAGING_MIN_SHIFT);
  if (size < bytes)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: transfer of %zu bytes is too large to stage", op, bytes);
  if (d->staging_free[c]) {
    kd_staging_block *b = d->staging_free[c];
    d->staging_free[c] = b->next;
    b->next = NULL;
    d->staging_idle_bytes -= b->size;
    *out = b;
    return KD_OK;
  }
  kd_staging_block *b = calloc(1, sizeof *b);
  if (!b) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no host memory for a staging block", op);
  b->size = size;
  b->size_class = c;
  if (d->nodeset) {
    b->host = hwloc_alloc_membind(d->topo, size, d->nodeset, HWLOC_MEMBIND_BIND,
                                  HWLOC_MEMBIND_BYNODESET);
    if (b->host) {
      CUresult r = d->cu->cuMemHostRegister(b->host, size, CU_MEMHOSTREGISTER_PORTABLE);
      if (r == CUDA_SUCCESS) {
        b->registered = 1;
      } else {
        hwloc_free(d->topo, b->host, size);
        b->host = NULL;
      }
    }
  }
  if (!b->host) {
    CUresult r = d->cu->cuMemHostAlloc(&b->host, size, CU_MEMHOSTALLOC_PORTABLE);
    if (r != CUDA_SUCCESS) {
      free(b);
      return kd_fail_cu(r, op, "cuMemHostAlloc");
    }
  }
  b->all_next = d->staging_all;
  d->staging_all = b;
  d->staging_bytes += size;
  d->staging_blocks++;
  d->staging_grows++;
  *out = b;
  return KD_OK;
}

void kd_staging_put(kd_device *d, kd_staging_block *b) {
  b->next = d->staging_free[b->size_class];
  d->staging_free[b->size_class] = b;
  d->staging_idle_bytes += b->size;
}
