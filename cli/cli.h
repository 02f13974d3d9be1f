/* SPDX-License-Identifier: Apache-2.0 */
/* The kdag command-line tool: one file per subcommand (info.c, cache.c,
 * inspect.c), each building its answer as JSON, printed as JSON with
 * --json and as text otherwise. */
#ifndef KDAG_CLI_H
#define KDAG_CLI_H

#include <jansson.h>
#include <stdio.h>

/* Exit codes, for scripts (kdag --help lists them). */
enum {
  KDAG_EXIT_OK = 0,
  KDAG_EXIT_FAILED = 1,   /* the operation failed: an unreadable file, a cache folder refused */
  KDAG_EXIT_USAGE = 2,    /* bad arguments */
  KDAG_EXIT_NO_DEVICE = 3 /* kdag info: no usable CUDA device (the report says why) */
};

typedef struct cli {
  int json;               /* --json */
  const char *prog;
} cli;

int cmd_info(cli *c, int argc, char **argv);
int cmd_cache(cli *c, int argc, char **argv);
int cmd_inspect(cli *c, int argc, char **argv);

/* Prints a usage error naming the subcommand and returns KDAG_EXIT_USAGE. */
int cli_usage_error(const cli *c, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints "kdag CMD: message" to stderr and returns KDAG_EXIT_FAILED. */
int cli_fail(const cli *c, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prints the answer as JSON (stdout), takes the reference. */
void cli_print_json(json_t *answer);
/* "1.5 MiB" */
void cli_bytes(char *buf, size_t cap, double bytes);

#endif
