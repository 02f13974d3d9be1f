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

/* Runs every file of corpus/<name> through fn; at least one must exist. */
static void replay(const char *name, int (*fn)(const uint8_t *, size_t)) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/%s", KDF_CORPUS, name);
  DIR *d = opendir(dir);
  cr_assert(d, "no corpus folder %s", dir);
  int inputs = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    static uint8_t buf[1 << 20];
    size_t size = fread(buf, 1, sizeof buf, f);
    cr_assert(feof(f), "%s is larger than %zu bytes", path, sizeof buf);
    fclose(f);
    current = e->d_name;
    fn(buf, size);
    inputs++;
  }
  closedir(d);
  cr_assert_gt(inputs, 0, "the corpus folder %s is empty", dir);
  cr_assert_eq(violations, 0, "%d properties broken over %d inputs of %s (logged above)", violations, inputs, name);
}

Test(host_fuzz, ptx_corpus) { replay("ptx", kdf_ptx); }
Test(host_fuzz, image_corpus) { replay("image", kdf_image); }
Test(host_fuzz, graph_corpus) { replay("graph", kdf_graph); }
Test(host_fuzz, cuda_corpus) { replay("cuda", kdf_cuda); }
