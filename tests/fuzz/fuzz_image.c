/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: CUBIN and fatbin images. kdag reads an image's ELF or
 * fatbin headers on the CPU to name its architectures (compile/image.c) and
 * reads initialised globals out of a CUBIN's symbol table
 * (kd_binary_read_global), and `kdag inspect` lists a CUBIN's kernels and a
 * fatbin's entries (compile/image_kernels.c); the driver is handed an image
 * without its length, so no read may leave the bytes given. Properties: no read out of
 * bounds (ASan), counts within their arrays, a description that fits its
 * buffer, and every refusal a documented code with a message naming the
 * call. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "compile/image_kernels.h"
#include "compile/ptx.h"
#include "kdag/compile.h"
#include "tests/fuzz/fuzz.h"

static const char *const target = "kdf_image";

static void check_describe(const kd_image_info *info) {
  static const size_t lengths[] = {1, 2, 9, 64, 512};
  for (size_t i = 0; i < sizeof lengths / sizeof *lengths; ++i) {
    char buf[512 + 8];
    memset(buf, 'x', sizeof buf);
    kd_image_describe(info, buf, lengths[i]);
    if (strnlen(buf, lengths[i]) == lengths[i])
      kdf_violation(target, "kd_image_describe: no NUL within %zu bytes", lengths[i]);
    if (buf[lengths[i]] != 'x') kdf_violation(target, "kd_image_describe wrote past %zu bytes", lengths[i]);
  }
}

/* Reads, under each printable NUL-terminated name found in the image, a
 * 4- and an 8-byte global: the symbol table's own names reach its match
 * path, the rest its misses. */
static void read_globals(const uint8_t *data, size_t size, const kd_binary *cubin) {
  int tried = 0;
  for (size_t at = 0; at < size && tried < 24;) {
    size_t n = 0;
    while (at + n < size && isprint(data[at + n]) && n < 64) ++n;
    if (n && at + n < size && data[at + n] == '\0') {
      char name[65];
      memcpy(name, data + at, n);
      name[n] = '\0';
      ++tried;
      for (size_t bytes = 4; bytes <= 8; bytes += 4) {
        unsigned char dst[8], before[8];
        memset(dst, 0xa5, sizeof dst);
        memcpy(before, dst, sizeof dst);
        kd_status st = kd_binary_read_global(cubin, name, dst, bytes);
        if (st != KD_OK && st != KD_ERR_NOT_FOUND && st != KD_ERR_INVALID_ARGUMENT)
          kdf_violation(target, "kd_binary_read_global(%s): %s", name, kd_status_name(st));
        if (st && strncmp(kd_last_error(), "kd_binary_read_global: ", 23) != 0)
          kdf_violation(target, "kd_binary_read_global(%s): message %s", name, kd_last_error());
        if (st && memcmp(dst, before, sizeof dst) != 0)
          kdf_violation(target, "kd_binary_read_global(%s) failed and wrote dst", name);
      }
    }
    at += n + 1;
  }
}

/* What kdag inspect reads: each kernel and entry inside the image and its
 * arrays, every refusal KD_ERR_INVALID_ARGUMENT (or out of memory) naming
 * the call. */
static void inspect(const uint8_t *data, size_t size) {
  kd_image_kernel *k = NULL;
  size_t n = 0;
  kd_status st = kd_image_kernels("kdf_inspect", data, size, &k, &n);
  if (st == KD_OK) {
    for (size_t i = 0; i < n; ++i) {
      if (!k[i].name) kdf_violation(target, "kd_image_kernels: kernel %zu has no name", i);
      if (k[i].param_count < -1 || k[i].param_count > KD_IMAGE_MAX_PARAMS || k[i].registers < -1 ||
          k[i].shared_section_bytes < 0 || k[i].param_bytes < -1)
        kdf_violation(target, "kd_image_kernels: kernel %zu: %d params, %d registers, %lld shared, %lld param bytes",
                      i, k[i].param_count, k[i].registers, (long long)k[i].shared_section_bytes,
                      (long long)k[i].param_bytes);
    }
    kd_image_kernels_free(k, n);
  } else if ((st != KD_ERR_INVALID_ARGUMENT && st != KD_ERR_OUT_OF_MEMORY) ||
             strncmp(kd_last_error(), "kdf_inspect: ", 13) != 0) {
    kdf_violation(target, "kd_image_kernels: %s: %s", kd_status_name(st), kd_last_error());
  }
  kd_fatbin_entry *e = NULL;
  st = kd_fatbin_entries("kdf_inspect", data, size, &e, &n);
  if (st == KD_OK) {
    for (size_t i = 0; i < n; ++i)
      if (e[i].offset > size || e[i].size > size - e[i].offset)
        kdf_violation(target, "kd_fatbin_entries: entry %zu at %llu, %llu bytes, past the %zu-byte image", i,
                      (unsigned long long)e[i].offset, (unsigned long long)e[i].size, size);
    free(e);
  } else if ((st != KD_ERR_INVALID_ARGUMENT && st != KD_ERR_OUT_OF_MEMORY) ||
             strncmp(kd_last_error(), "kdf_inspect: ", 13) != 0) {
    kdf_violation(target, "kd_fatbin_entries: %s: %s", kd_status_name(st), kd_last_error());
  }
}

int kdf_image(const uint8_t *data, size_t size) {
  kd_image_info info = kd_image_inspect(data, size);
  if ((unsigned)info.kind > KD_IMAGE_TRUNCATED) kdf_violation(target, "kind %d", (int)info.kind);
  if (info.sm_count < 0 || info.sm_count > 16 || info.ptx_count < 0 || info.ptx_count > 16)
    kdf_violation(target, "%d sm and %d ptx architectures", info.sm_count, info.ptx_count);
  int runs = kd_image_runs_on(&info, 90);
  int known = info.kind == KD_IMAGE_CUBIN || info.kind == KD_IMAGE_FATBIN;
  if ((runs < 0) == known) kdf_violation(target, "kd_image_runs_on %d for kind %d", runs, (int)info.kind);
  check_describe(&info);
  inspect(data, size);
  if (!size) return 0;
  static const kd_binary_kind kinds[] = {KD_BINARY_PTX, KD_BINARY_CUBIN, KD_BINARY_FATBIN, KD_BINARY_LTOIR,
                                         KD_BINARY_LIBRARY};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; ++k) {
    kd_binary *b = NULL;
    kd_status st = kd_binary_from_memory(kinds[k], data, size, "sm_90", 0, &b);
    if (st == KD_OK) {
      if (!b || kd_binary_size(b) != size || memcmp(kd_binary_data(b), data, size) != 0)
        kdf_violation(target, "kd_binary_from_memory(kind %d) did not copy the bytes", (int)kinds[k]);
      if (kinds[k] == KD_BINARY_CUBIN) read_globals(data, size, b);
    } else if (st != KD_ERR_INVALID_ARGUMENT || b ||
               strncmp(kd_last_error(), "kd_binary_from_memory: ", 23) != 0) {
      kdf_violation(target, "kd_binary_from_memory(kind %d): %s: %s", (int)kinds[k], kd_status_name(st),
                    kd_last_error());
    }
    kd_binary_destroy(b);
  }
  return 0;
}
