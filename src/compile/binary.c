/* SPDX-License-Identifier: Apache-2.0 */
/* kd_binary: what every compile and link step returns, binaries from the
 * caller's memory, and reading initialised globals out of a CUBIN's ELF
 * symbol table (no GPU needed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/binary.h"
#include "compile/elf.h"
#include "compile/ptx.h"
#include "base/status_internal.h"

kd_binary *kd_binary_wrap(kd_binary_kind kind, void *data, size_t size,
                          char *log, const char *arch) {
  kd_binary *b = calloc(1, sizeof *b);
  if (!b) {
    free(data);
    free(log);
    return NULL;
  }
  b->kind = kind;
  b->data = data;
  b->size = size;
  b->log = log ? log : strdup("");
  snprintf(b->arch, sizeof b->arch, "%s", arch ? arch : "");
  b->producer_version = 0;
  return b;
}

const void *kd_binary_data(const kd_binary *b) { return b ? b->data : NULL; }
size_t kd_binary_size(const kd_binary *b) { return b ? b->size : 0; }
kd_binary_kind kd_binary_kind_of(const kd_binary *b) { return b ? b->kind : KD_BINARY_PTX; }
const char *kd_binary_log(const kd_binary *b) { return b && b->log ? b->log : ""; }
const char *kd_binary_arch(const kd_binary *b) { return b ? b->arch : ""; }
int kd_binary_producer_version(const kd_binary *b) { return b ? b->producer_version : 0; }

void kd_binary_destroy(kd_binary *b) {
  if (!b) return;
  free(b->data);
  free(b->log);
  free(b);
}


int kd_ltoir_has_magic(const void *data, size_t size) {
  return data && size >= 4 && kd_rd32(data) == KD_LTOIR_MAGIC;
}

kd_status kd_binary_arch_check(const char *op, const char *what, const char *arch) {
  if (arch && strlen(arch) >= KD_BINARY_ARCH_MAX)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: %s \"%.40s...\" is longer than %d characters", op, what, arch,
                   KD_BINARY_ARCH_MAX - 1);
  return KD_OK;
}

kd_status kd_binary_from_memory(kd_binary_kind kind, const void *data, size_t size,
                                const char *arch, int producer_version, kd_binary **out) {
  static const char *op = "kd_binary_from_memory";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_binary is NULL", op);
  *out = NULL;
  if (!data || !size) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument data is NULL or empty", op);
  if ((unsigned)kind > KD_BINARY_LIBRARY)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument kind %d is not a kd_binary_kind", op, (int)kind);
  if (kind == KD_BINARY_LTOIR && !kd_ltoir_has_magic(data, size))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the data (%zu bytes) is not LTO-IR: it lacks the "
                   "LTO-IR magic number", op, size);
  if (kind == KD_BINARY_PTX && ((const char *)data)[size - 1] != '\0')
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: PTX must end with its NUL (size counts it)", op);
  if (producer_version < 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument producer_version %d is negative", op,
                   producer_version);
  kd_status st = kd_binary_arch_check(op, "argument arch", arch);
  if (st) return st;
  void *copy = malloc(size);
  if (!copy) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for %zu bytes", op, size);
  memcpy(copy, data, size);
  *out = kd_binary_wrap(kind, copy, size, NULL, arch);
  if (!*out) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the binary", op);
  (*out)->producer_version = producer_version;
  return KD_OK;
}


kd_status kd_binary_read_global(const kd_binary *b, const char *name, void *dst, size_t size) {
  static const char *op = "kd_binary_read_global";
  if (!b || !name || !*name || !dst)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument %s is NULL%s", op,
                   !b ? "cubin" : !dst ? "dst" : "name", (!b || !dst) ? "" : " or empty");
  const unsigned char *p = b->data;
  kd_image_info info = kd_image_inspect(p, b->size);
  if (info.kind != KD_IMAGE_CUBIN)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the binary is not a CUBIN (%s); link it first",
                   op, info.kind == KD_IMAGE_TRUNCATED ? "truncated ELF" : "no ELF for one GPU");
  /* kd_image_inspect checked that every section lies inside the image. */
  uint64_t shoff = kd_rd64(p + 40);
  uint32_t shentsize = kd_rd16(p + 58), shnum = kd_rd16(p + 60);
  for (uint32_t i = 0; i < shnum; ++i) {
    const unsigned char *sh = p + shoff + (uint64_t)i * shentsize;
    if (kd_rd32(sh + 4) != KD_SHT_SYMTAB) continue;
    uint64_t off = kd_rd64(sh + 24), len = kd_rd64(sh + 32), entsize = kd_rd64(sh + 56);
    uint32_t strndx = kd_rd32(sh + 40);
    if (entsize < 24 || strndx >= shnum) continue;
    const unsigned char *strsh = p + shoff + (uint64_t)strndx * shentsize;
    /* Only a string table has its bytes in the image (bounds-checked by
     * kd_image_inspect); a NOBITS one could point anywhere. */
    if (kd_rd32(strsh + 4) != KD_SHT_STRTAB) continue;
    uint64_t stroff = kd_rd64(strsh + 24), strlen_ = kd_rd64(strsh + 32);
    for (uint64_t s = 0; s + entsize <= len; s += entsize) {
      const unsigned char *sym = p + off + s;
      uint32_t nm = kd_rd32(sym);
      if (nm >= strlen_) continue;
      const char *sname = (const char *)p + stroff + nm;
      size_t room = strlen_ - nm;
      if (strnlen(sname, room) == room || strcmp(sname, name) != 0) continue;
      uint16_t shndx = kd_rd16(sym + 6);
      uint64_t value = kd_rd64(sym + 8), ssize = kd_rd64(sym + 16);
      if (ssize != size)
        return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: global %s is %llu bytes, %zu requested", op,
                       name, (unsigned long long)ssize, size);
      if (shndx == 0 || shndx >= shnum)
        return kd_fail(KD_ERR_NOT_FOUND, "%s: global %s is not defined in this CUBIN", op, name);
      const unsigned char *dsh = p + shoff + (uint64_t)shndx * shentsize;
      uint64_t doff = kd_rd64(dsh + 24), dlen = kd_rd64(dsh + 32);
      if (kd_rd32(dsh + 4) == KD_SHT_NOBITS)
        return kd_fail(KD_ERR_NOT_FOUND, "%s: global %s has no initial value in the image "
                       "(zero-initialised .bss)", op, name);
      if (value > dlen || size > dlen - value)
        return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: global %s lies outside its section", op, name);
      memcpy(dst, p + doff + value, size);
      return KD_OK;
    }
  }
  return kd_fail(KD_ERR_NOT_FOUND, "%s: the CUBIN has no symbol %s (declare it extern \"C\" "
                 "__device__ or __constant__ with an initialiser)", op, name);
}
