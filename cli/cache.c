/* SPDX-License-Identifier: Apache-2.0 */
/* kdag cache list|stats|prune|clear: the module cache's folder. */
#include <string.h>
#include <time.h>

#include "base/size.h"
#include "cli/cli.h"
#include "kdag/kdag.h"

static int add_entry(void *user, const kd_cache_entry_info *e) {
  json_t *entry = json_object();
  char when[32];
  time_t t = (time_t)e->last_use;
  struct tm tm;
  strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
  json_object_set_new(entry, "key", json_string(e->key));
  json_object_set_new(entry, "kind", json_string(e->kind));
  json_object_set_new(entry, "bytes", json_integer((json_int_t)e->bytes));
  json_object_set_new(entry, "last_use", json_string(when));
  json_array_append_new(user, entry);
  return 0;
}

static json_int_t total_bytes(json_t *entries) {
  json_int_t sum = 0;
  size_t i;
  json_t *e;
  json_array_foreach(entries, i, e) sum += json_integer_value(json_object_get(e, "bytes"));
  return sum;
}

int cmd_cache(cli *c, int argc, char **argv) {
  if (argc < 1) return cli_usage_error(c, "cache", "which one: list, stats, prune or clear?");
  const char *what = argv[0], *dir = NULL, *max_text = NULL;
  int prune = strcmp(what, "prune") == 0, clear = strcmp(what, "clear") == 0;
  if (!prune && !clear && strcmp(what, "list") != 0 && strcmp(what, "stats") != 0)
    return cli_usage_error(c, "cache", "unknown subcommand '%s' (list, stats, prune or clear)", what);
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) dir = argv[++i];
    else if (prune && strcmp(argv[i], "--max-size") == 0 && i + 1 < argc) max_text = argv[++i];
    else return cli_usage_error(c, "cache", "%s: unexpected argument '%s'", what, argv[i]);
  }
  uint64_t max = 0;
  if (prune && !max_text) return cli_usage_error(c, "cache", "prune needs --max-size SIZE");
  if (prune && !kd_size_parse(max_text, &max))
    return cli_usage_error(c, "cache", "--max-size '%s' is not a size (bytes, or with K, M, G: 512M, 2G)", max_text);
  kd_cubin_cache *cache;
  if (kd_cubin_cache_create(dir, &cache) != KD_OK) return cli_fail(c, "cache", "%s", kd_last_error());
  if (!*kd_cubin_cache_dir(cache)) {
    kd_cubin_cache_destroy(cache);
    return cli_fail(c, "cache", "the cache is memory-only (KDAG_CACHE_DIR is \"\"): no folder to look at");
  }
  json_t *a = json_object();
  json_object_set_new(a, "dir", json_string(kd_cubin_cache_dir(cache)));
  int rc = KDAG_EXIT_OK;
  if (prune || clear) {
    uint64_t removed = 0, bytes = 0;
    if (kd_cubin_cache_prune(cache, max, &removed, &bytes) != KD_OK) {
      rc = cli_fail(c, "cache", "%s", kd_last_error());
    } else {
      json_object_set_new(a, "removed", json_integer((json_int_t)removed));
      json_object_set_new(a, "removed_bytes", json_integer((json_int_t)bytes));
    }
  }
  json_t *entries = json_array();
  if (!rc && kd_cubin_cache_list(cache, add_entry, entries) != KD_OK) rc = cli_fail(c, "cache", "%s", kd_last_error());
  kd_cubin_cache_stats st;
  kd_cubin_cache_stats_get(cache, &st);
  kd_cubin_cache_destroy(cache);
  if (rc) {
    json_decref(entries);
    json_decref(a);
    return rc;
  }
  json_object_set_new(a, "entries", json_integer((json_int_t)json_array_size(entries)));
  json_object_set_new(a, "bytes", json_integer(total_bytes(entries)));
  json_object_set_new(a, "max_size", json_integer((json_int_t)st.max_size));
  char b[32], m[32];
  if (strcmp(what, "list") == 0) {
    if (!c->json) {
      size_t i;
      json_t *e;
      json_array_foreach(entries, i, e) {
        cli_bytes(b, sizeof b, (double)json_integer_value(json_object_get(e, "bytes")));
        printf("%s.%-5s %10s  %s\n", json_string_value(json_object_get(e, "key")),
               json_string_value(json_object_get(e, "kind")), b, json_string_value(json_object_get(e, "last_use")));
      }
    }
    json_object_set_new(a, "list", entries);
  } else {
    json_decref(entries);
  }
  if (c->json) {
    cli_print_json(a);
    return KDAG_EXIT_OK;
  }
  cli_bytes(b, sizeof b, (double)json_integer_value(json_object_get(a, "bytes")));
  cli_bytes(m, sizeof m, (double)st.max_size);
  if (prune || clear) {
    char r[32];
    cli_bytes(r, sizeof r, (double)json_integer_value(json_object_get(a, "removed_bytes")));
    printf("removed %lld entries (%s); ", (long long)json_integer_value(json_object_get(a, "removed")), r);
  }
  if (strcmp(what, "list") != 0 || !json_array_size(json_object_get(a, "list")))
    printf("%s: %lld entries, %s (cap %s)\n", json_string_value(json_object_get(a, "dir")),
           (long long)json_integer_value(json_object_get(a, "entries")), b, st.max_size ? m : "none");
  json_decref(a);
  return KDAG_EXIT_OK;
}
