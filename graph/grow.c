/* Growable arrays: the heap while small, a mapping of their own once large. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "graph/grow.h"

static size_t mapped_size(size_t bytes) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (bytes + page - 1) / page * page;
}

int kd_grow(void **arr, uint32_t *cap, uint32_t need, size_t elem) {
  if (need <= *cap) return 1;
  uint64_t c = *cap ? *cap : 16;
  while (c < need) c *= 2;
  if (c > UINT32_MAX) c = UINT32_MAX;
  size_t old_bytes = (size_t)*cap * elem, bytes = (size_t)c * elem;
  void *grown;
  if (bytes < KD_GROW_MAPPED) {
    grown = realloc(*arr, bytes);
  } else if (old_bytes >= KD_GROW_MAPPED) {
    grown = mremap(*arr, mapped_size(old_bytes), mapped_size(bytes), MREMAP_MAYMOVE);
    if (grown == MAP_FAILED) grown = NULL;
  } else {
    grown = mmap(NULL, mapped_size(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (grown == MAP_FAILED) {
      grown = NULL;
    } else if (*arr) {
      memcpy(grown, *arr, old_bytes); /* once per array: the move off the heap */
      free(*arr);
    }
  }
  if (!grown) return 0;
  *arr = grown;
  *cap = (uint32_t)c;
  return 1;
}

void kd_grow_free(void *arr, uint32_t cap, size_t elem) {
  size_t bytes = (size_t)cap * elem;
  if (bytes >= KD_GROW_MAPPED) munmap(arr, mapped_size(bytes));
  else free(arr);
}
