/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: PTX text. kdag reads .version, .target and every .entry
 * signature of the PTX a caller hands it (compile/ptx.c), on the CPU, before
 * the driver sees it. Properties: the text checks refuse exactly the texts
 * with a NUL inside; a parse succeeds exactly when it found a version, and
 * what it lists is well formed (names, counts within bounds, sizes that
 * are PTX type sizes); a refusal says what and who refused. */
#include <stdlib.h>
#include <string.h>

#include "compile/ptx.h"
#include "kdag/status.h"
#include "tests/fuzz/fuzz.h"

static const char *const op = "kdf_ptx";

static void check_entries(const kd_ptx_info *info) {
  for (size_t i = 0; i < info->entry_count; ++i) {
    const kd_ptx_entry *e = &info->entries[i];
    if (!e->name) {
      kdf_violation(op, "entry %zu has no name", i);
      continue;
    }
    if (e->param_count > KD_PTX_MAX_PARAMS) kdf_violation(op, "entry %s: %u parameters", e->name, e->param_count);
    if (!e->params_known && e->param_count)
      kdf_violation(op, "entry %s: unknown parameters, yet %u counted", e->name, e->param_count);
    for (uint32_t k = 0; k < e->param_count && k < KD_PTX_MAX_PARAMS; ++k)
      if (!e->param_sizes[k] || e->param_sizes[k] > 8u * 0x10000u)
        kdf_violation(op, "entry %s: parameter %u of %u bytes", e->name, k, e->param_sizes[k]);
    const kd_ptx_entry *found = kd_ptx_find(info, e->name);
    if (!found || strcmp(found->name, e->name) != 0) kdf_violation(op, "entry %s is not found by name", e->name);
  }
  if (strnlen(info->target, sizeof info->target) == sizeof info->target)
    kdf_violation(op, "the target is not NUL-terminated");
}

int kdf_ptx(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  int inner_nul = memchr(data, '\0', size) != NULL;
  kd_status st = kd_ptx_check_text(op, text, size + 1);
  if (st != (inner_nul ? KD_ERR_INVALID_ARGUMENT : KD_OK))
    kdf_violation(op, "kd_ptx_check_text: %s for a text %s an interior NUL", kd_status_name(st),
                  inner_nul ? "with" : "without");
  if (st && !strstr(kd_last_error(), "interior NUL")) kdf_violation(op, "check message: %s", kd_last_error());
  /* The parser reads up to the first NUL, as it would after the check. */
  kd_ptx_info info;
  st = kd_ptx_parse(op, text, &info);
  if (st == KD_OK) {
    if (info.isa <= 0) kdf_violation(op, "parsed without a version (isa %d)", info.isa);
    check_entries(&info);
    kd_ptx_info_free(&info);
    if (info.entries || info.entry_count) kdf_violation(op, "kd_ptx_info_free left entries behind");
  } else if (st != KD_ERR_INVALID_ARGUMENT || strncmp(kd_last_error(), op, strlen(op)) != 0 ||
             !strstr(kd_last_error(), "not PTX")) {
    kdf_violation(op, "kd_ptx_parse: %s: %s", kd_status_name(st), kd_last_error());
  }
  free(text);
  return 0;
}
