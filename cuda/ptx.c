/* PTX text: the seed's NUL rules, the ISA version, .entry signatures. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/ptx.h"
#include "cuda/status_internal.h"

kd_status kd_ptx_check_text(const char *op, const char *ptx, size_t len) {
  if (!ptx) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument ptx is NULL", op);
  if (len == 0 || ptx[len - 1] != '\0')
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: argument ptx: missing terminating NUL (len %zu must count it)", op, len);
  const char *nul = memchr(ptx, '\0', len - 1);
  if (nul)
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: argument ptx contains an interior NUL at byte %zu of %zu", op,
                   (size_t)(nul - ptx), len);
  return KD_OK;
}

kd_status kd_ptx_check_isa(const char *op, int isa, int max_isa, int driver_version) {
  if (max_isa > 0 && isa > max_isa)
    return kd_fail(KD_ERR_UNSUPPORTED_PTX,
                   "%s: PTX ISA %d.%d is newer than this driver (CUDA %d.%d) accepts "
                   "(at most %d.%d); it was produced by a newer compiler. Compile "
                   "to CUBIN for the target GPU, or use a toolkit no newer than the driver",
                   op, isa / 10, isa % 10, driver_version / 1000, (driver_version % 1000) / 10,
                   max_isa / 10, max_isa % 10);
  return KD_OK;
}

static const char *skip_space_and_comments(const char *p) {
  for (;;) {
    while (*p && isspace((unsigned char)*p)) ++p;
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') ++p;
    } else if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      p = e ? e + 2 : p + strlen(p);
    } else {
      return p;
    }
  }
}

static const char *read_word(const char *p, char *buf, size_t len) {
  size_t n = 0;
  while (*p && (isalnum((unsigned char)*p) || *p == '_' || *p == '.' || *p == '$' || *p == '%')) {
    if (n + 1 < len) buf[n++] = *p;
    ++p;
  }
  buf[n] = '\0';
  return p;
}

/* Bytes of a PTX scalar type (.u64, .b8, .f32, ...); 0 if not one. */
static uint32_t type_size(const char *t) {
  if (t[0] != '.' || !strchr("usbf", t[1])) return 0;
  int bits = atoi(t + 2);
  if (t[1] == 'f' && bits == 16 && t[4] == 'x') bits = 32; /* .f16x2 */
  return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (uint32_t)bits / 8 : 0;
}

/* Parses "(.param .u64 a, .param .align 8 .b8 b[24], ...)" at p. */
static kd_status parse_params(const char *op, const char *p, kd_ptx_entry *e) {
  p = skip_space_and_comments(p);
  if (*p != '(') return KD_OK; /* no parameter list */
  ++p;
  for (;;) {
    p = skip_space_and_comments(p);
    if (*p == ')') return KD_OK;
    char word[128];
    uint32_t size = 0;
    int saw_param = 0;
    /* Words up to the parameter's name. */
    for (;;) {
      p = skip_space_and_comments(p);
      if (*p != '.') break;
      p = read_word(p, word, sizeof word);
      if (strcmp(word, ".param") == 0) saw_param = 1;
      else if (strcmp(word, ".align") == 0 || strcmp(word, ".ptr") == 0) {
        p = skip_space_and_comments(p);
        while (isdigit((unsigned char)*p)) ++p;
      } else if (type_size(word)) size = type_size(word);
    }
    p = read_word(p, word, sizeof word); /* the name */
    if (!saw_param || !size || !word[0])
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: malformed parameter %u of .entry %s",
                     op, e->param_count, e->name);
    if (*p == '[') {
      long count = strtol(p + 1, (char **)&p, 10);
      if (count <= 0 || *p != ']')
        return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: malformed array parameter of .entry %s", op, e->name);
      ++p;
      size *= (uint32_t)count;
    }
    if (e->param_count == KD_PTX_MAX_PARAMS)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: .entry %s has more than %d parameters",
                     op, e->name, KD_PTX_MAX_PARAMS);
    e->param_sizes[e->param_count++] = size;
    p = skip_space_and_comments(p);
    if (*p == ',') ++p;
    else if (*p != ')')
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: malformed parameter list of .entry %s", op, e->name);
  }
}

kd_status kd_ptx_parse(const char *op, const char *ptx, kd_ptx_info *out) {
  memset(out, 0, sizeof *out);
  size_t cap = 0;
  for (const char *p = ptx; (p = skip_space_and_comments(p)) && *p;) {
    char word[256];
    if (*p != '.') {
      while (*p && *p != '\n') ++p;
      continue;
    }
    const char *after = read_word(p, word, sizeof word);
    if (after == p) ++after;
    p = after;
    if (strcmp(word, ".version") == 0) {
      int major = 0, minor = 0;
      if (sscanf(p, " %d.%d", &major, &minor) == 2) out->isa = major * 10 + minor;
    } else if (strcmp(word, ".target") == 0 && !out->target[0]) {
      p = skip_space_and_comments(p);
      p = read_word(p, out->target, sizeof out->target);
    } else if (strcmp(word, ".entry") == 0) {
      if (out->entry_count == cap) {
        size_t ncap = cap ? cap * 2 : 8;
        kd_ptx_entry *grown = realloc(out->entries, ncap * sizeof *grown);
        if (!grown) {
          kd_ptx_info_free(out);
          return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory parsing PTX", op);
        }
        out->entries = grown;
        cap = ncap;
      }
      kd_ptx_entry *e = &out->entries[out->entry_count];
      memset(e, 0, sizeof *e);
      p = skip_space_and_comments(p);
      const char *name = p;
      while (*p && (isalnum((unsigned char)*p) || *p == '_' || *p == '$')) ++p;
      e->name = strndup(name, (size_t)(p - name));
      if (!e->name) {
        kd_ptx_info_free(out);
        return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory parsing PTX", op);
      }
      out->entry_count++; /* counted now so kd_ptx_info_free frees its name */
      kd_status st = parse_params(op, p, e);
      if (st) {
        kd_ptx_info_free(out);
        return st;
      }
    }
  }
  if (!out->isa) {
    kd_ptx_info_free(out);
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument ptx is not PTX (no .version directive)", op);
  }
  return KD_OK;
}

void kd_ptx_info_free(kd_ptx_info *info) {
  for (size_t i = 0; i < info->entry_count; ++i) free(info->entries[i].name);
  free(info->entries);
  info->entries = NULL;
  info->entry_count = 0;
}

const kd_ptx_entry *kd_ptx_find(const kd_ptx_info *info, const char *name) {
  for (size_t i = 0; i < info->entry_count; ++i)
    if (strcmp(info->entries[i].name, name) == 0) return &info->entries[i];
  return NULL;
}
