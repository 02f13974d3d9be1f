/* SPDX-License-Identifier: Apache-2.0 */
/* Replays the fuzz corpus (tests/fuzz/corpus/<target>/, grown by
 * tools/fuzz.sh) through the fuzz targets in every build, the sanitized one
 * included: an input that once crashed a target or broke one of its
 * properties stays a test. Host lane. */
#include <dirent.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include <criterion/logging.h>

#include "kdag_test.h"
#include "tests/fuzz/fuzz.h"

static int violations;
static const char *current;

void kdf_violation(const char *target, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cr_log_error("%s, input %s: property broken: %s", target, current, msg);
  violations++;
}

static int visible(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Runs every file of corpus/<name> through fn, in name order (the targets
 * keep sessions across inputs, as under libFuzzer); at least one must
 * exist. Each input is a buffer of exactly its size, so ASan sees a read
 * past its end. */
static void replay(const char *name, int (*fn)(const uint8_t *, size_t)) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", KDF_CORPUS, name);
  struct dirent **files;
  int count = scandir(dir, &files, visible, alphasort);
  cr_assert_geq(count, 0, "no corpus folder %s", dir);
  for (int i = 0; i < count; ++i) {
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]->d_name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    rewind(f);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    cr_assert(buf && size >= 0);
    cr_assert_eq(fread(buf, 1, (size_t)size, f), (size_t)size, "reading %s", path);
    fclose(f);
    current = files[i]->d_name;
    fn(buf, (size_t)size);
    free(buf);
  }
  for (int i = 0; i < count; ++i) free(files[i]);
  free(files);
  cr_assert_gt(count, 0, "the corpus folder %s is empty", dir);
  cr_assert_eq(violations, 0, "%d properties broken over %d inputs of %s (logged above)", violations, count, name);
}

Test(host_fuzz, ptx_corpus) { replay("ptx", kdf_ptx); }
Test(host_fuzz, image_corpus) { replay("image", kdf_image); }
Test(host_fuzz, graph_corpus) { replay("graph", kdf_graph); }
Test(host_fuzz, cuda_corpus) { replay("cuda", kdf_cuda); }
Test(host_fuzz, raw_corpus) { replay("raw", kdf_raw); }
