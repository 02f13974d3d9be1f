/* SPDX-License-Identifier: Apache-2.0 */
/* Internal: reading a CUDA ELF (CUBIN) on the CPU: little-endian fields,
 * section headers, and the bytes of a section. kd_image_inspect checks
 * first that every header, and every section but NOBITS ones, lies inside
 * the image; a NOBITS section's offset and size mean nothing and could
 * point anywhere, so its bytes are never read. */
#ifndef KDAG_COMPILE_ELF_H
#define KDAG_COMPILE_ELF_H

#include <stddef.h>
#include <stdint.h>

#define KD_SHT_SYMTAB 2
#define KD_SHT_STRTAB 3
#define KD_SHT_NOBITS 8

static inline uint16_t kd_rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t kd_rd32(const unsigned char *p) { return (uint32_t)kd_rd16(p) | (uint32_t)kd_rd16(p + 2) << 16; }
static inline uint64_t kd_rd64(const unsigned char *p) { return (uint64_t)kd_rd32(p) | (uint64_t)kd_rd32(p + 4) << 32; }

/* Section i's header (i < e_shnum) of a checked image. */
static inline const unsigned char *kd_elf_section(const unsigned char *p, uint64_t i) {
  return p + kd_rd64(p + 40) + i * kd_rd16(p + 58);
}

/* Section i's bytes into *data and *len: 1, or 0 for a NOBITS section,
 * which has none in the image. */
static inline int kd_elf_section_bytes(const unsigned char *p, uint64_t i, const unsigned char **data, uint64_t *len) {
  const unsigned char *sh = kd_elf_section(p, i);
  if (kd_rd32(sh + 4) == KD_SHT_NOBITS) return 0;
  *data = p + kd_rd64(sh + 24);
  *len = kd_rd64(sh + 32);
  return 1;
}

#endif
