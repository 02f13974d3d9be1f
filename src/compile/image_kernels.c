/* SPDX-License-Identifier: Apache-2.0 */
/* What a CUBIN says of its kernels, and what a fatbin holds
 * (compile/image_kernels.h). Every offset is checked against the image:
 * kd_image_inspect has checked the ELF's headers and sections first. */
#include "compile/image_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status_internal.h"
#include "compile/elf.h"
#include "compile/ptx.h"


#define STT_FUNC 2
#define STO_CUDA_ENTRY 0x10 /* a symbol's st_other: a kernel (__global__) */
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_REGCOUNT 0x2f
#define EIFMT_NVAL 1
#define EIFMT_BVAL 2
#define EIFMT_HVAL 3
#define EIFMT_SVAL 4

typedef struct elf {
  const unsigned char *p;
  uint64_t shnum;
  const char *names;      /* the section-name table ("" without one in the image) */
  uint64_t names_size;
} elf;

static const unsigned char *section(const elf *e, uint64_t i) { return kd_elf_section(e->p, i); }

/* A NUL-terminated string at off of a table of len bytes, or NULL. */
static const char *string_at(const char *table, uint64_t len, uint64_t off) {
  if (off >= len || !memchr(table + off, 0, len - off)) return NULL;
  return table + off;
}

static const char *section_name(const elf *e, uint64_t i) { return string_at(e->names, e->names_size, kd_rd32(section(e, i))); }

static int section_named(const elf *e, const char *prefix, const char *name, uint64_t *out) {
  size_t plen = strlen(prefix);
  for (uint64_t i = 0; i < e->shnum; ++i) {
    const char *n = section_name(e, i);
    if (n && strncmp(n, prefix, plen) == 0 && strcmp(n + plen, name) == 0) {
      *out = i;
      return 1;
    }
  }
  return 0;
}

/* Calls fn on each record of an .nv.info section; stops at a format it
 * does not know (the rest of that section is then unread). Records start
 * on 4-byte boundaries: a bare attribute (NVAL, 2 bytes) is padded. */
static void records(const elf *e, uint64_t sec, void (*fn)(void *, unsigned attr, const unsigned char *, uint32_t),
                    void *user) {
  const unsigned char *r;
  uint64_t bytes;
  if (!kd_elf_section_bytes(e->p, sec, &r, &bytes)) return;
  const unsigned char *end = r + bytes;
  while (end - r >= 2) {
    unsigned fmt = r[0], attr = r[1];
    if (fmt == EIFMT_NVAL) {
      fn(user, attr, r + 2, 0);
      r += end - r >= 4 ? 4 : 2;
    } else if (fmt == EIFMT_BVAL || fmt == EIFMT_HVAL) {
      if (end - r < 4) return;
      fn(user, attr, r + 2, 2);
      r += 4;
    } else if (fmt == EIFMT_SVAL) {
      if (end - r < 4) return;
      uint32_t len = kd_rd16(r + 2);
      if ((uint64_t)(end - r - 4) < len) return;
      fn(user, attr, r + 4, len);
      r += 4 + len;
    } else {
      return;
    }
  }
}

static void kernel_record(void *user, unsigned attr, const unsigned char *v, uint32_t len) {
  kd_image_kernel *k = user;
  if (attr == EIATTR_CBANK_PARAM_SIZE && len == 2) k->param_bytes = kd_rd16(v);
  if (attr == EIATTR_KPARAM_INFO && len >= 12) {
    uint32_t ordinal = kd_rd16(v + 4);
    if (ordinal >= KD_IMAGE_MAX_PARAMS) return;
    k->params[ordinal] = (kd_image_param){ordinal, kd_rd16(v + 6), (kd_rd32(v + 8) >> 18) & 0x3fff};
    if ((int)ordinal + 1 > k->param_count) k->param_count = (int)ordinal + 1;
  }
}

typedef struct regcount {
  uint32_t symbol;
  int registers;
} regcount;

static void regcount_record(void *user, unsigned attr, const unsigned char *v, uint32_t len) {
  regcount *rc = user;
  if (attr == EIATTR_REGCOUNT && len == 8 && kd_rd32(v) == rc->symbol) rc->registers = (int)kd_rd32(v + 4);
}

void kd_image_kernels_free(kd_image_kernel *k, size_t count) {
  if (!k) return;
  for (size_t i = 0; i < count; ++i) free(k[i].name);
  free(k);
}

kd_status kd_image_kernels(const char *op, const void *image, size_t size, kd_image_kernel **out, size_t *count) {
  *out = NULL;
  *count = 0;
  kd_image_info info = kd_image_inspect(image, size);
  if (info.kind == KD_IMAGE_TRUNCATED)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the CUBIN's headers or sections reach past its %zu bytes", op, size);
  if (info.kind != KD_IMAGE_CUBIN) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: not a CUBIN (an ELF for CUDA)", op);
  elf e = {image, kd_rd16((const unsigned char *)image + 60), "", 0};
  if (!e.shnum) return KD_OK;
  const unsigned char *names;
  if (kd_elf_section_bytes(e.p, kd_rd16(e.p + 62), &names, &e.names_size)) e.names = (const char *)names;
  int old_abi = e.p[8] < 8;
  uint64_t symtab = UINT64_MAX, info_sec = UINT64_MAX;
  for (uint64_t i = 0; i < e.shnum; ++i) {
    if (kd_rd32(section(&e, i) + 4) == KD_SHT_SYMTAB) symtab = i;
    const char *n = section_name(&e, i);
    if (n && strcmp(n, ".nv.info") == 0) info_sec = i;
  }
  if (symtab == UINT64_MAX) return KD_OK; /* no symbols: no kernel to name */
  const unsigned char *st = section(&e, symtab);
  uint64_t sym_off = kd_rd64(st + 24), sym_size = kd_rd64(st + 32), sym_ent = kd_rd64(st + 56), str_index = kd_rd32(st + 40);
  /* As kd_binary_read_global: the names only from a string table, whose
   * bytes are in the image. */
  const unsigned char *strs;
  uint64_t symnames_size;
  if (sym_ent < 24 || str_index >= e.shnum || kd_rd32(section(&e, str_index) + 4) != KD_SHT_STRTAB ||
      !kd_elf_section_bytes(e.p, str_index, &strs, &symnames_size))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the CUBIN's symbol table is malformed", op);
  const char *symnames = (const char *)strs;
  kd_image_kernel *ks = NULL;
  size_t n = 0, cap = 0;
  for (uint64_t s = 0; s < sym_size / sym_ent; ++s) {
    const unsigned char *sym = e.p + sym_off + s * sym_ent;
    if ((sym[4] & 0xf) != STT_FUNC || !(sym[5] & STO_CUDA_ENTRY)) continue;
    const char *name = string_at(symnames, symnames_size, kd_rd32(sym));
    uint64_t text;
    if (!name || !section_named(&e, ".text.", name, &text)) continue;
    if (n == cap) {
      size_t grown_cap = cap ? 2 * cap : 8;
      kd_image_kernel *grown = realloc(ks, grown_cap * sizeof *grown);
      if (!grown) {
        kd_image_kernels_free(ks, n);
        return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the kernel list", op);
      }
      ks = grown;
      cap = grown_cap;
    }
    kd_image_kernel *k = &ks[n];
    memset(k, 0, sizeof *k);
    if (!(k->name = strdup(name))) {
      kd_image_kernels_free(ks, n);
      return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the kernel list", op);
    }
    ++n;
    k->param_count = -1;
    k->param_bytes = -1;
    regcount rc = {(uint32_t)s, -1};
    if (info_sec != UINT64_MAX) records(&e, info_sec, regcount_record, &rc);
    uint32_t text_info = kd_rd32(section(&e, text) + 44);
    k->registers = rc.registers >= 0 ? rc.registers : old_abi && (text_info >> 24) ? (int)(text_info >> 24) : -1;
    uint64_t sec;
    if (section_named(&e, ".nv.shared.", name, &sec)) k->shared_section_bytes = (int64_t)kd_rd64(section(&e, sec) + 32);
    if (section_named(&e, ".nv.info.", name, &sec)) {
      records(&e, sec, kernel_record, k);
      /* Its info without a parameter record: a kernel of no parameters
       * (nvcc writes both records for every kernel that has one). */
      if (k->param_count < 0 && k->param_bytes < 0) k->param_count = 0, k->param_bytes = 0;
    }
  }
  *out = ks;
  *count = n;
  return KD_OK;
}

#define FATBIN_MAGIC 0xBA55ED50u
/* An entry's flags: compressed (older toolkits), compressed with zstd
 * (CUDA 13's nvcc compresses entries by default). */
#define FATBIN_FLAG_COMPRESSED 0x2000u
#define FATBIN_FLAG_COMPRESSED_ZSTD 0x8000u

kd_status kd_fatbin_entries(const char *op, const void *image, size_t size, kd_fatbin_entry **out, size_t *count) {
  *out = NULL;
  *count = 0;
  const unsigned char *p = image;
  if (size < 16 || kd_rd32(p) != FATBIN_MAGIC) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: not a fatbin", op);
  size_t header = kd_rd16(p + 6);
  uint64_t body = kd_rd64(p + 8);
  if (header < 16 || header > size || body > size - header)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the fatbin's body reaches past its %zu bytes", op, size);
  kd_fatbin_entry *es = NULL;
  size_t n = 0, cap = 0, off = header, end = header + (size_t)body;
  while (off + 32 <= end) {
    const unsigned char *e = p + off;
    uint16_t kind = kd_rd16(e);
    uint32_t ehdr = kd_rd32(e + 4);
    uint64_t payload = kd_rd64(e + 8);
    if (!kind && !ehdr) break; /* padding after the last entry */
    if (ehdr < 32 || ehdr > end - off || payload > end - off - ehdr) {
      free(es);
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: fatbin entry %zu reaches past the fatbin's body", op, n);
    }
    if (n == cap) {
      size_t grown_cap = cap ? 2 * cap : 8;
      kd_fatbin_entry *grown = realloc(es, grown_cap * sizeof *grown);
      if (!grown) {
        free(es);
        return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the entry list", op);
      }
      es = grown;
      cap = grown_cap;
    }
    /* Past the first 32 bytes (kind, header size, payload size, arch at
     * 28): flags at 40 and the uncompressed size at 56, when the header
     * is that long. */
    uint64_t flags = ehdr >= 48 ? kd_rd64(e + 40) : 0;
    int compressed = (flags & (FATBIN_FLAG_COMPRESSED | FATBIN_FLAG_COMPRESSED_ZSTD)) != 0;
    es[n++] = (kd_fatbin_entry){kind, (int)kd_rd32(e + 28), off + ehdr, payload, compressed,
                                (flags & FATBIN_FLAG_COMPRESSED_ZSTD) != 0, compressed && ehdr >= 64 ? kd_rd64(e + 56) : 0};
    off += ehdr + (size_t)payload;
  }
  *out = es;
  *count = n;
  return KD_OK;
}
