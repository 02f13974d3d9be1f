/* SPDX-License-Identifier: Apache-2.0 */
/* PTX text: the seed's NUL rules, the ISA version, .entry signatures. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/ptx.h"
#include "base/status_internal.h"

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

/* ".version 9.0" as 90; 0 unless major.minor with a major of 1..99 and a
 * one-digit minor (every PTX ISA so far): sscanf's %d would overflow on a
 * long run of digits, and a wrapped number could pass the ISA check. */
static int read_version(const char *p) {
  p = skip_space_and_comments(p);
  int major = 0, digits = 0;
  for (; isdigit((unsigned char)*p) && digits < 3; ++p, ++digits) major = major * 10 + (*p - '0');
  if (!digits || digits > 2 || !major || p[0] != '.' || !isdigit((unsigned char)p[1]) ||
      isdigit((unsigned char)p[2]))
    return 0;
  return major * 10 + (p[1] - '0');
}

/* Bytes of a PTX scalar type (.u64, .b8, .f32, ...); 0 if not one. */
static uint32_t type_size(const char *t) {
  /* t[1] first: strchr also finds the terminating NUL, and then atoi would
   * read past the word (found by tests/fuzz/fuzz_ptx.c). */
  if (t[0] != '.' || !t[1] || !strchr("usbf", t[1])) return 0;
  int bits = atoi(t + 2);
  if (t[1] == 'f' && bits == 16 && t[4] == 'x') bits = 32; /* .f16x2 */
  return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (uint32_t)bits / 8 : 0;
}

/* A parameter list kdag cannot read: no sizes from the PTX. */
static void params_unknown(kd_ptx_entry *e) {
  e->params_known = 0;
  e->param_count = 0;
}

/* Parses "(.param .u64 a, .param .align 8 .b8 b[24], .param .u64
 * .ptr.global.align 16 c, ...)" at p. A list kdag cannot read (a type it
 * does not size, such as .texref, more than KD_PTX_MAX_PARAMS parameters,
 * or syntax it does not know) leaves params_known 0: the driver, which
 * loads the PTX, is the judge of it, and the sizes come from it instead. */
static void parse_params(const char *p, kd_ptx_entry *e) {
  e->params_known = 1;
  p = skip_space_and_comments(p);
  if (*p != '(') return; /* no parameter list */
  ++p;
  for (;;) {
    p = skip_space_and_comments(p);
    if (*p == ')') return;
    char word[128];
    uint32_t size = 0;
    int saw_param = 0;
    /* Words up to the parameter's name; a word may join several
     * (".ptr.global.align"), each part from its dot. */
    for (;;) {
      p = skip_space_and_comments(p);
      if (*p != '.') break;
      p = read_word(p, word, sizeof word);
      int align = 0;
      for (char *part = word; *part;) {
        char *next = strchr(part + 1, '.');
        if (next) *next = '\0';
        if (strcmp(part, ".param") == 0) saw_param = 1;
        else if (strcmp(part, ".align") == 0) align = 1;
        else if (type_size(part)) size = type_size(part);
        if (!next) break;
        *next = '.';
        part = next;
      }
      if (align) {
        p = skip_space_and_comments(p);
        while (isdigit((unsigned char)*p)) ++p;
      }
    }
    p = read_word(p, word, sizeof word); /* the name */
    if (!saw_param || !size || !word[0]) {
      params_unknown(e);
      return;
    }
    if (*p == '[') {
      long count = strtol(p + 1, (char **)&p, 10);
      if (count <= 0 || count > 0x10000 || *p != ']') {
        params_unknown(e);
        return;
      }
      ++p;
      size *= (uint32_t)count;
    }
    if (e->param_count == KD_PTX_MAX_PARAMS) {
      params_unknown(e);
      return;
    }
    e->param_sizes[e->param_count++] = size;
    p = skip_space_and_comments(p);
    if (*p == ',') ++p;
    else if (*p != ')') {
      params_unknown(e);
      return;
    }
  }
}

kd_status kd_ptx_parse(const char *op, const char *ptx, kd_ptx_info *out) {
  memset(out, 0, sizeof *out);
  size_t cap = 0;
  size_t in_entry = SIZE_MAX; /* the .entry whose body the text is in; SIZE_MAX in a .func or before any */
  /* Directives are words that start with a dot; everything else is
   * stepped over up to the next dot, quote or slash, so a comment that
   * opens mid-line is seen (and what it holds, a commented-out .entry too,
   * skipped). */
  for (const char *p = ptx; (p = skip_space_and_comments(p)) && *p;) {
    char word[256];
    if (*p == '"') { /* a string (.file): its text is no directive */
      const char *e = strchr(p + 1, '"');
      p = e ? e + 1 : p + strlen(p);
      continue;
    }
    if (*p != '.') { /* to the next dot, quote or slash (a slash that opens no comment: step over it) */
      p += *p == '/' ? 1 : strcspn(p, "./\"");
      continue;
    }
    const char *after = read_word(p, word, sizeof word);
    if (after == p) ++after;
    p = after;
    if (strcmp(word, ".wait") == 0 && after - ptx >= 19 && memcmp(after - 19, "griddepcontrol", 14) == 0 &&
        (after - ptx == 19 || !(isalnum((unsigned char)after[-20]) || after[-20] == '_'))) {
      if (in_entry != SIZE_MAX) out->entries[in_entry].grid_wait = 1;
      else out->func_grid_wait = 1;
    } else if (strcmp(word, ".func") == 0) {
      in_entry = SIZE_MAX;
    } else if (strcmp(word, ".version") == 0) {
      int isa = read_version(p);
      if (!out->isa) out->isa = isa; /* PTX has one; a second does not override it */
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
      parse_params(p, e);
      in_entry = out->entry_count - 1;
    }
  }
  if (!out->isa) {
    kd_ptx_info_free(out);
    return kd_fail(KD_ERR_INVALID_ARGUMENT,
                   "%s: argument ptx is not PTX (no .version directive of the form major.minor)", op);
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
