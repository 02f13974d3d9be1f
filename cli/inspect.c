/* SPDX-License-Identifier: Apache-2.0 */
/* kdag inspect FILE: what a PTX, CUBIN or fatbin file holds, read on the
 * CPU as kdag reads it before loading (compile/ptx.h,
 * compile/image_kernels.h). What the file does not say is left out. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "base/file.h"
#include "cli/cli.h"
#include "compile/image_kernels.h"
#include "compile/ptx.h"
#include "kdag/kdag.h"

static json_t *ptx_part(const char *text, char *why, size_t cap) {
  kd_ptx_info info;
  if (kd_ptx_parse("kdag inspect", text, &info) != KD_OK) {
    snprintf(why, cap, "%s", kd_last_error());
    return NULL;
  }
  json_t *p = json_object();
  char isa[16];
  snprintf(isa, sizeof isa, "%d.%d", info.isa / 10, info.isa % 10);
  json_object_set_new(p, "ptx_isa", json_string(isa));
  json_object_set_new(p, "target", json_string(info.target));
  json_t *ks = json_array();
  for (size_t i = 0; i < info.entry_count; ++i) {
    const kd_ptx_entry *e = &info.entries[i];
    json_t *k = json_object();
    json_object_set_new(k, "name", json_string(e->name));
    if (e->params_known) {
      json_t *ps = json_array();
      for (uint32_t j = 0; j < e->param_count; ++j) {
        json_t *pj = json_object();
        json_object_set_new(pj, "size", json_integer(e->param_sizes[j]));
        json_array_append_new(ps, pj);
      }
      json_object_set_new(k, "param_count", json_integer(e->param_count));
      json_object_set_new(k, "params", ps);
    }
    json_array_append_new(ks, k);
  }
  json_object_set_new(p, "kernels", ks);
  kd_ptx_info_free(&info);
  return p;
}

static json_t *cubin_part(const unsigned char *data, size_t size, char *why, size_t cap) {
  kd_image_kernel *ks;
  size_t n;
  if (kd_image_kernels("kdag inspect", data, size, &ks, &n) != KD_OK) {
    snprintf(why, cap, "%s", kd_last_error());
    return NULL;
  }
  kd_image_info info = kd_image_inspect(data, size);
  json_t *c = json_object();
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d", info.sm[0]);
  json_object_set_new(c, "arch", json_string(arch));
  json_t *kj = json_array();
  for (size_t i = 0; i < n; ++i) {
    json_t *k = json_object();
    json_object_set_new(k, "name", json_string(ks[i].name));
    if (ks[i].registers >= 0) json_object_set_new(k, "registers", json_integer(ks[i].registers));
    json_object_set_new(k, "shared_section_bytes", json_integer(ks[i].shared_section_bytes));
    if (ks[i].param_count >= 0) {
      json_object_set_new(k, "param_count", json_integer(ks[i].param_count));
      json_t *ps = json_array();
      for (int j = 0; j < ks[i].param_count; ++j) {
        json_t *pj = json_object();
        json_object_set_new(pj, "offset", json_integer(ks[i].params[j].offset));
        json_object_set_new(pj, "size", json_integer(ks[i].params[j].size));
        json_array_append_new(ps, pj);
      }
      json_object_set_new(k, "params", ps);
    }
    if (ks[i].param_bytes >= 0) json_object_set_new(k, "param_bytes", json_integer(ks[i].param_bytes));
    json_array_append_new(kj, k);
  }
  json_object_set_new(c, "kernels", kj);
  kd_image_kernels_free(ks, n);
  return c;
}

/* A zstd frame of `want` bytes unpacked into *out (malloc'd): 0, or -1
 * with why said. */
static int unzstd(const unsigned char *in, size_t size, uint64_t want, unsigned char **out, char *why, size_t cap) {
  if (want > ((uint64_t)1 << 32)) {
    snprintf(why, cap, "its recorded size, %llu bytes, is not believable", (unsigned long long)want);
    return -1;
  }
  unsigned char *buf = malloc(want ? want : 1);
  if (!buf) return snprintf(why, cap, "no memory to unpack it"), -1;
  size_t frame = ZSTD_findFrameCompressedSize(in, size); /* the payload is padded past the frame */
  size_t got = ZSTD_isError(frame) ? frame : ZSTD_decompress(buf, want, in, frame);
  if (ZSTD_isError(got) || got != want) {
    snprintf(why, cap, "its zstd frame does not unpack to the %llu bytes recorded (%s)", (unsigned long long)want,
             ZSTD_isError(got) ? ZSTD_getErrorName(got) : "another size");
    free(buf);
    return -1;
  }
  *out = buf;
  return 0;
}

static json_t *fatbin_part(const unsigned char *data, size_t size, char *why, size_t cap) {
  kd_fatbin_entry *es;
  size_t n;
  if (kd_fatbin_entries("kdag inspect", data, size, &es, &n) != KD_OK) {
    snprintf(why, cap, "%s", kd_last_error());
    return NULL;
  }
  json_t *f = json_object(), *ej = json_array();
  for (size_t i = 0; i < n; ++i) {
    json_t *e = json_object();
    const kd_fatbin_entry *x = &es[i];
    char arch[24];
    snprintf(arch, sizeof arch, "%s_%d", x->kind == 1 ? "compute" : "sm", x->arch);
    json_object_set_new(e, "kind", json_string(x->kind == 1 ? "ptx" : x->kind == 2 ? "cubin" : "other"));
    json_object_set_new(e, "arch", json_string(arch));
    json_object_set_new(e, "bytes", json_integer((json_int_t)x->size));
    json_object_set_new(e, "compressed", json_boolean(x->compressed));
    if (x->uncompressed_size) json_object_set_new(e, "uncompressed_bytes", json_integer((json_int_t)x->uncompressed_size));
    char sub_why[512] = "";
    json_t *sub = NULL;
    const unsigned char *payload = data + x->offset;
    size_t payload_size = x->size;
    unsigned char *unpacked = NULL;
    if (x->compressed && x->zstd && x->uncompressed_size) { /* CUDA 13's default: read it unpacked */
      if (unzstd(payload, payload_size, x->uncompressed_size, &unpacked, sub_why, sizeof sub_why) == 0) {
        payload = unpacked;
        payload_size = x->uncompressed_size;
      }
    }
    if (x->compressed && !unpacked) {
      if (!*sub_why) snprintf(sub_why, sizeof sub_why, "compressed in a way kdag does not read");
    } else if (x->kind == 2) {
      sub = cubin_part(payload, payload_size, sub_why, sizeof sub_why);
    } else if (x->kind == 1) {
      char *text = malloc(payload_size + 1);
      if (text) {
        memcpy(text, payload, payload_size);
        text[payload_size] = 0;
        sub = ptx_part(text, sub_why, sizeof sub_why);
        free(text);
      }
    }
    free(unpacked);
    if (sub) {
      json_object_set(e, "kernels", json_object_get(sub, "kernels"));
      json_decref(sub);
    } else if (*sub_why) {
      json_object_set_new(e, "unreadable", json_string(sub_why));
    }
    json_array_append_new(ej, e);
  }
  free(es);
  json_object_set_new(f, "entries", ej);
  return f;
}

static void print_kernels(json_t *ks, const char *indent) {
  size_t i;
  json_t *k;
  json_array_foreach(ks, i, k) {
    printf("%skernel %s", indent, json_string_value(json_object_get(k, "name")));
    json_t *v;
    if ((v = json_object_get(k, "param_count")) && json_integer_value(v) == 0) {
      printf(": no parameters");
    } else if (v) {
      printf(": %lld params (", (long long)json_integer_value(v));
      size_t j;
      json_t *p;
      json_array_foreach(json_object_get(k, "params"), j, p) printf("%s%lld", j ? ", " : "", (long long)json_integer_value(json_object_get(p, "size")));
      printf(" bytes)");
    } else {
      printf(": parameters not recorded");
    }
    if ((v = json_object_get(k, "registers"))) printf(", %lld registers", (long long)json_integer_value(v));
    if ((v = json_object_get(k, "shared_section_bytes")) && json_integer_value(v))
      printf(", shared memory section %lld bytes", (long long)json_integer_value(v));
    printf("\n");
  }
}

int cmd_inspect(cli *c, int argc, char **argv) {
  if (argc == 0) return cli_usage_error(c, "inspect", "which FILE?");
  if (argc > 1) return cli_usage_error(c, "inspect", "one FILE, not %d", argc);
  const char *path = argv[0];
  unsigned char *data;
  size_t size;
  if (kd_file_read(path, &data, &size) != 0) return cli_fail(c, "inspect", "%s: %s", path, strerror(errno));
  kd_image_info info = kd_image_inspect(data, size);
  char why[512] = "";
  json_t *part = NULL;
  const char *format = NULL;
  if (info.kind == KD_IMAGE_CUBIN) {
    format = "cubin";
    part = cubin_part(data, size, why, sizeof why);
  } else if (info.kind == KD_IMAGE_FATBIN) {
    format = "fatbin";
    part = fatbin_part(data, size, why, sizeof why);
  } else if (info.kind == KD_IMAGE_TRUNCATED) {
    snprintf(why, sizeof why, "a CUBIN or fatbin whose headers reach past the file's %zu bytes", size);
  } else if (memchr(data, 0, size) == NULL) {
    format = "ptx";
    part = ptx_part((const char *)data, why, sizeof why);
  } else {
    snprintf(why, sizeof why, "neither PTX, a CUBIN nor a fatbin");
  }
  free(data);
  if (!part) return cli_fail(c, "inspect", "%s: %s", path, why);
  json_t *a = json_object();
  json_object_set_new(a, "file", json_string(path));
  json_object_set_new(a, "format", json_string(format));
  json_object_update(a, part);
  json_decref(part);
  if (c->json) {
    cli_print_json(a);
    return KDAG_EXIT_OK;
  }
  printf("%s: %s", path, format);
  if (json_object_get(a, "arch")) printf(" for %s", json_string_value(json_object_get(a, "arch")));
  if (json_object_get(a, "target"))
    printf(" (PTX ISA %s, target %s)", json_string_value(json_object_get(a, "ptx_isa")),
           json_string_value(json_object_get(a, "target")));
  printf("\n");
  print_kernels(json_object_get(a, "kernels"), "  ");
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(a, "entries"), i, e) {
    char b[32];
    cli_bytes(b, sizeof b, (double)json_integer_value(json_object_get(e, "bytes")));
    printf("  entry %zu: %s %s, %s%s\n", i, json_string_value(json_object_get(e, "kind")),
           json_string_value(json_object_get(e, "arch")), b,
           !json_is_true(json_object_get(e, "compressed")) ? ""
           : json_object_get(e, "unreadable")            ? ", compressed"
                                                           : ", compressed (zstd, read unpacked)");
    if (json_object_get(e, "unreadable")) printf("    unreadable: %s\n", json_string_value(json_object_get(e, "unreadable")));
    print_kernels(json_object_get(e, "kernels"), "    ");
  }
  json_decref(a);
  return KDAG_EXIT_OK;
}
