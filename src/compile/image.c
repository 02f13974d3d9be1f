/* SPDX-License-Identifier: Apache-2.0 */
/* CUBIN and fatbin headers: which architectures an image carries. */
#include <stdio.h>
#include <string.h>

#include "compile/elf.h"
#include "compile/ptx.h"


#define KD_FATBIN_MAGIC 0xBA55ED50u
#define KD_ELF_HEADER_BYTES 64

#define KD_EM_CUDA 190

/* The driver takes a CUBIN without its length, so every header, section
 * and segment the ELF describes must lie inside the bytes the caller gave
 * (Elf64_Phdr is 56 bytes, Elf64_Shdr 64; the section-name table must be
 * one of the sections). */
static int elf_in_bounds(const unsigned char *p, size_t size) {
  uint64_t phoff = kd_rd64(p + 32), shoff = kd_rd64(p + 40);
  uint64_t phentsize = kd_rd16(p + 54), phnum = kd_rd16(p + 56);
  uint64_t shentsize = kd_rd16(p + 58), shnum = kd_rd16(p + 60), shstrndx = kd_rd16(p + 62);
  if (phoff > size || phentsize * phnum > size - phoff) return 0;
  if (shoff > size || shentsize * shnum > size - shoff) return 0;
  if ((phnum && phentsize < 56) || (shnum && shentsize < 64)) return 0;
  if (shnum && shstrndx >= shnum) return 0;
  for (uint64_t i = 0; i < phnum; ++i) {
    const unsigned char *ph = p + phoff + i * phentsize;
    uint64_t off = kd_rd64(ph + 8), len = kd_rd64(ph + 32); /* p_offset, p_filesz */
    if (off > size || len > size - off) return 0;
  }
  for (uint64_t i = 0; i < shnum; ++i) {
    const unsigned char *sh = p + shoff + i * shentsize;
    uint64_t off = kd_rd64(sh + 24), len = kd_rd64(sh + 32);
    if (kd_rd32(sh + 4) != KD_SHT_NOBITS && (off > size || len > size - off)) return 0;
  }
  return 1;
}

/* Adds arch to list[*count] unless it is there; *more when the list is full. */
static void arch_add(int *list, int *count, int *more, int arch) {
  for (int i = 0; i < *count; ++i)
    if (list[i] == arch) return;
  if (*count < 16) list[(*count)++] = arch;
  else *more = 1;
}

/* sm of a 64-bit CUDA ELF, -1 when it is one but truncated, 0 when not one.
 * ABI version 8 (CUDA 12.8+) moved the SM number into bits 8..15 of
 * e_flags; older images keep it in bits 0..7. */
static int elf_sm(const unsigned char *p, size_t size) {
  if (size < KD_ELF_HEADER_BYTES || memcmp(p, "\x7f" "ELF", 4) != 0 || p[4] != 2) return 0;
  if (kd_rd16(p + 18) != KD_EM_CUDA) return 0;
  if (!elf_in_bounds(p, size)) return -1;
  uint32_t flags = kd_rd32(p + 48);
  int abi_version = p[8];
  return abi_version >= 8 ? (int)((flags >> 8) & 0xff) : (int)(flags & 0xff);
}

kd_image_info kd_image_inspect(const void *image, size_t size) {
  kd_image_info info;
  memset(&info, 0, sizeof info);
  const unsigned char *p = image;
  if (!p || size < 16) return info;
  int sm = elf_sm(p, size);
  if (sm < 0) {
    info.kind = KD_IMAGE_TRUNCATED;
    return info;
  }
  if (sm) {
    info.kind = KD_IMAGE_CUBIN;
    info.sm[info.sm_count++] = sm;
    return info;
  }
  if (kd_rd32(p) != KD_FATBIN_MAGIC) return info;
  /* Fatbin: a 16-byte header (magic, version, header size, body size)
   * followed by entries, each with its own header: kind (1 PTX, 2 ELF),
   * header size, payload size, and the arch at byte 28. */
  size_t header = kd_rd16(p + 6);
  uint64_t body = kd_rd64(p + 8);
  if (header < 16 || header > size || body > size - header) return info;
  info.kind = KD_IMAGE_FATBIN;
  size_t off = header, end = header + (size_t)body;
  while (off + 32 <= end) {
    const unsigned char *e = p + off;
    uint16_t kind = kd_rd16(e);
    uint32_t ehdr = kd_rd32(e + 4);
    uint64_t payload = kd_rd64(e + 8);
    uint32_t arch = kd_rd32(e + 28);
    if (!kind && !ehdr) break; /* zero padding after the last entry */
    if (ehdr < 32 || ehdr > end - off || payload > end - off - ehdr) { /* the driver would read past the body */
      memset(&info, 0, sizeof info);
      info.kind = KD_IMAGE_TRUNCATED;
      return info;
    }
    if (kind == 2) arch_add(info.sm, &info.sm_count, &info.more, (int)arch);
    if (kind == 1) arch_add(info.ptx, &info.ptx_count, &info.more, (int)arch);
    off += ehdr + (size_t)payload;
  }
  return info;
}

int kd_image_runs_on(const kd_image_info *info, int sm) {
  if (info->kind == KD_IMAGE_UNKNOWN || info->kind == KD_IMAGE_TRUNCATED) return -1;
  for (int i = 0; i < info->sm_count; ++i)
    if (info->sm[i] / 10 == sm / 10 && info->sm[i] <= sm) return 1;
  for (int i = 0; i < info->ptx_count; ++i)
    if (info->ptx[i] <= sm) return 1;
  return info->more ? -1 : 0; /* an arch left out of the lists may be the one */
}

void kd_image_describe(const kd_image_info *info, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < info->sm_count && used < len; ++i)
    used += (size_t)snprintf(buf + used, len - used, "%ssm_%d", used ? " " : "", info->sm[i]);
  for (int i = 0; i < info->ptx_count && used < len; ++i)
    used += (size_t)snprintf(buf + used, len - used, "%scompute_%d", used ? " " : "", info->ptx[i]);
  if (info->more && used < len) snprintf(buf + used, len - used, " ...");
  if (!buf[0]) snprintf(buf, len, "no recognised architecture");
}
