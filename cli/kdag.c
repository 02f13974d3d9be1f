/* SPDX-License-Identifier: Apache-2.0 */
/* kdag: look at the device, the module cache and kernel binaries.
 *
 *   kdag info [--json]
 *   kdag cache list|stats|clear [--dir DIR] [--json]
 *   kdag cache prune --max-size SIZE [--dir DIR] [--json]
 *   kdag inspect FILE [--json]
 */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kdag/kdag.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: kdag [--json] COMMAND [ARGS]\n"
          "\n"
          "  info                      the driver, each CUDA device, NVRTC, nvJitLink, MathDx,\n"
          "                            the module cache\n"
          "  cache list [--dir DIR]    the cache's entries, most recently used first\n"
          "  cache stats [--dir DIR]   its folder, entries, bytes and size cap\n"
          "  cache prune --max-size SIZE [--dir DIR]\n"
          "                            removes the least recently used entries down to SIZE\n"
          "                            (bytes, or with K, M, G: powers of 1024)\n"
          "  cache clear [--dir DIR]   removes every entry\n"
          "  inspect FILE              a PTX, CUBIN or fatbin file: architectures, kernels,\n"
          "                            parameters, registers and shared memory where it says\n"
          "\n"
          "  --json                    the answer as JSON on stdout (anywhere on the line)\n"
          "  --version, --help\n"
          "\n"
          "The cache folder: --dir, else $KDAG_CACHE_DIR, else $XDG_CACHE_HOME/kdag,\n"
          "else ~/.cache/kdag.\n"
          "\n"
          "Exit status: 0 done; 1 the operation failed (an unreadable file, a refused\n"
          "folder); 2 bad arguments; 3 (info) no usable CUDA device, reported with why.\n");
}

int cli_usage_error(const cli *c, const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s%s%s: ", c->prog, cmd ? " " : "", cmd ? cmd : "");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(%s --help for usage)\n", c->prog);
  return KDAG_EXIT_USAGE;
}

int cli_fail(const cli *c, const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s %s: ", c->prog, cmd);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return KDAG_EXIT_FAILED;
}

void cli_print_json(json_t *answer) {
  json_dumpf(answer, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  fputc('\n', stdout);
  json_decref(answer);
}

void cli_bytes(char *buf, size_t cap, double bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (u) snprintf(buf, cap, "%.1f %s", bytes, units[u]);
  else snprintf(buf, cap, "%.0f B", bytes);
}

int main(int argc, char **argv) {
  cli c = {0, "kdag"};
  /* --json may stand anywhere: take it out, keep the rest in order. */
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--json") == 0) c.json = 1;
    else argv[++n] = argv[i];
  }
  argc = n + 1;
  if (argc < 2) {
    usage(stderr);
    return KDAG_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return KDAG_EXIT_OK;
  }
  if (strcmp(cmd, "--version") == 0) {
    printf("kdag %s\n", kd_version_string());
    return KDAG_EXIT_OK;
  }
  if (strcmp(cmd, "info") == 0) return cmd_info(&c, argc - 2, argv + 2);
  if (strcmp(cmd, "cache") == 0) return cmd_cache(&c, argc - 2, argv + 2);
  if (strcmp(cmd, "inspect") == 0) return cmd_inspect(&c, argc - 2, argv + 2);
  return cli_usage_error(&c, NULL, "unknown command '%s'", cmd);
}
