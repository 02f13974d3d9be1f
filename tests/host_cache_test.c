/* SPDX-License-Identifier: Apache-2.0 */
/* The module cache's folder under a size cap: least recently used first,
 * with use recorded on every disk read; the cap applied after each write,
 * from KDAG_CACHE_MAX_SIZE or kd_cubin_cache_set_max_size; listing,
 * pruning and clearing; and two processes filling, reading and pruning one
 * small folder at once without a half-written or half-removed read. The
 * entries are blobs (the libmathdx tier), which take the same header,
 * checks, atomic write and cap as CUBINs, so no compiler runs here. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/size.h"
#include "compile/cache_internal.h"
#include "kdag_test.h"

static void key_of(unsigned char key[16], uint32_t who, uint32_t i) {
  memset(key, 0, 16);
  memcpy(key, &who, sizeof who);
  memcpy(key + 4, &i, sizeof i);
  key[15] = 0x5a;
}

static void key_hex(const unsigned char key[16], char hex[33]) {
  for (int i = 0; i < 16; ++i) snprintf(hex + 2 * i, 3, "%02x", key[i]);
}

/* A blob whose every byte follows from its key and size. */
static void fill(unsigned char *p, size_t n, const unsigned char key[16]) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(key[0] * 31 + key[4] * 7 + i * 13);
}

static void put(kd_cubin_cache *c, uint32_t who, uint32_t i, size_t n) {
  unsigned char key[16], *p = malloc(n);
  cr_assert(p);
  key_of(key, who, i);
  fill(p, n, key);
  cr_assert_eq(kd_cache_blob_put(c, key, p, n), 0);
  free(p);
}

/* Sets an entry's recorded use to `ago` seconds before now. */
static void used_ago(const char *dir, uint32_t who, uint32_t i, int ago) {
  unsigned char key[16];
  char hex[33], path[512];
  key_of(key, who, i);
  key_hex(key, hex);
  snprintf(path, sizeof path, "%s/%s.blob", dir, hex);
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= ago;
  t[1] = t[0];
  cr_assert_eq(utimensat(AT_FDCWD, path, t, 0), 0, "%s", path);
}

static int exists(const char *dir, uint32_t who, uint32_t i) {
  unsigned char key[16];
  char hex[33], path[512];
  key_of(key, who, i);
  key_hex(key, hex);
  snprintf(path, sizeof path, "%s/%s.blob", dir, hex);
  return access(path, F_OK) == 0;
}

typedef struct listing {
  char keys[8][33];
  uint64_t bytes[8];
  int n;
} listing;

static int keep_entry(void *user, const kd_cache_entry_info *e) {
  listing *l = user;
  cr_assert_str_eq(e->kind, "blob");
  if (l->n < 8) {
    memcpy(l->keys[l->n], e->key, 33);
    l->bytes[l->n] = e->bytes;
  }
  l->n++;
  return 0;
}

Test(host_cache, the_least_recently_used_go_first_and_a_read_is_a_use) {
  char *dir = kdt_temp_dir();
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(dir, &c));
  KDT_OK(kd_cubin_cache_set_max_size(c, 0)); /* no cap while filling */
  for (uint32_t i = 0; i < 3; ++i) put(c, 1, i, 1000);
  used_ago(dir, 1, 0, 300);
  used_ago(dir, 1, 1, 200);
  used_ago(dir, 1, 2, 100);
  /* Reading entry 0 makes it the most recently used. */
  unsigned char key[16];
  key_of(key, 1, 0);
  void *data;
  size_t size;
  cr_assert_eq(kd_cache_blob_get(c, key, &data, &size), 1);
  free(data);
  listing l = {0};
  KDT_OK(kd_cubin_cache_list(c, keep_entry, &l));
  cr_assert_eq(l.n, 3);
  char hex[33];
  key_hex(key, hex);
  cr_assert_str_eq(l.keys[0], hex, "the entry just read is listed first");
  cr_assert_eq(l.bytes[0], 64u + 1000u, "header and payload");
  uint64_t removed = 9, bytes = 9;
  KDT_OK(kd_cubin_cache_prune(c, 2 * 1064, &removed, &bytes));
  cr_assert_eq(removed, 1);
  cr_assert_eq(bytes, 1064);
  cr_assert(exists(dir, 1, 0) && !exists(dir, 1, 1) && exists(dir, 1, 2), "entry 1, the least recently used, went");
  kd_cubin_cache_stats st;
  KDT_OK(kd_cubin_cache_stats_get(c, &st));
  cr_assert_eq(st.pruned, 1);
  kd_cubin_cache_destroy(c);
  kdt_remove_dir(dir);
}

Test(host_cache, a_write_past_the_cap_prunes_and_the_environment_sets_it) {
  char *dir = kdt_temp_dir();
  setenv("KDAG_CACHE_MAX_SIZE", "3K", 1); /* 3072 bytes: two 1064-byte entries fit, three do not */
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(dir, &c));
  put(c, 2, 0, 1000);
  used_ago(dir, 2, 0, 100);
  put(c, 2, 1, 1000);
  cr_assert(exists(dir, 2, 0) && exists(dir, 2, 1));
  put(c, 2, 2, 1000);
  cr_assert(!exists(dir, 2, 0) && exists(dir, 2, 1) && exists(dir, 2, 2), "the oldest went when the cap was passed");
  /* Code's cap wins over the environment's. */
  KDT_OK(kd_cubin_cache_set_max_size(c, 0));
  for (uint32_t i = 3; i < 6; ++i) put(c, 2, i, 1000);
  listing l = {0};
  KDT_OK(kd_cubin_cache_list(c, keep_entry, &l));
  cr_assert_eq(l.n, 5, "no cap: nothing pruned");
  unsetenv("KDAG_CACHE_MAX_SIZE");
  kd_cubin_cache_destroy(c);
  kdt_remove_dir(dir);
}

Test(host_cache, clearing_leaves_what_is_not_an_entry) {
  char *dir = kdt_temp_dir();
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(dir, &c));
  for (uint32_t i = 0; i < 4; ++i) put(c, 3, i, 100 + i);
  char path[512];
  const char *others[] = {"README", ".0123456789abcdef0123456789abcdef.tmp.AbCdEf", "0123456789ABCDEF0123456789ABCDEF.cubin"};
  for (int i = 0; i < 3; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir, others[i]);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs("not an entry", f);
    fclose(f);
  }
  uint64_t removed, bytes;
  KDT_OK(kd_cubin_cache_prune(c, 0, &removed, &bytes));
  cr_assert_eq(removed, 4);
  cr_assert_eq(bytes, 4 * 64 + 100 + 101 + 102 + 103);
  for (int i = 0; i < 3; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir, others[i]);
    cr_assert_eq(access(path, F_OK), 0, "%s was left alone", others[i]);
  }
  listing l = {0};
  KDT_OK(kd_cubin_cache_list(c, keep_entry, &l));
  cr_assert_eq(l.n, 0);
  kd_cubin_cache_destroy(c);
  kdt_remove_dir(dir);
}

Test(host_cache, bad_arguments_are_named) {
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create("", &c));
  listing l = {0};
  KDT_FAILS(kd_cubin_cache_list(c, keep_entry, &l), KD_ERR_INVALID_ARGUMENT, "memory-only");
  KDT_FAILS(kd_cubin_cache_prune(c, 0, NULL, NULL), KD_ERR_INVALID_ARGUMENT, "kd_cubin_cache_prune");
  KDT_FAILS(kd_cubin_cache_list(NULL, keep_entry, &l), KD_ERR_INVALID_ARGUMENT, "argument cache is NULL");
  KDT_FAILS(kd_cubin_cache_set_max_size(NULL, 1), KD_ERR_INVALID_ARGUMENT, "argument cache is NULL");
  kd_cubin_cache_destroy(c);
  char *dir = kdt_temp_dir();
  KDT_OK(kd_cubin_cache_create(dir, &c));
  KDT_FAILS(kd_cubin_cache_list(c, NULL, NULL), KD_ERR_INVALID_ARGUMENT, "argument fn is NULL");
  kd_cubin_cache_destroy(c);
  kdt_remove_dir(dir);
}

Test(host_cache, sizes_parse_as_people_write_them) {
  uint64_t v;
  cr_assert(kd_size_parse("512", &v) && v == 512);
  cr_assert(kd_size_parse("4K", &v) && v == 4096);
  cr_assert(kd_size_parse("2MiB", &v) && v == 2u << 20);
  cr_assert(kd_size_parse("1g", &v) && v == 1u << 30);
  cr_assert(kd_size_parse("10b", &v) && v == 10);
  cr_assert_not(kd_size_parse("", &v));
  cr_assert_not(kd_size_parse("-1", &v));
  cr_assert_not(kd_size_parse("12Q", &v));
  cr_assert_not(kd_size_parse("1 G", &v));
  cr_assert_not(kd_size_parse("99999999999999999999", &v));
  cr_assert_not(kd_size_parse("17179869184G", &v), "past 2^64 bytes");
}

/* Two processes, one folder of a few dozen entries' room: each writes its
 * own entries and reads both its own and the other's, while every write
 * prunes. A read finds an entry whole or not at all. */
#define RACE_ROUNDS 1500
static int race(const char *dir, uint32_t who) {
  kd_cubin_cache *c;
  if (kd_cubin_cache_create(dir, &c)) return 2;
  kd_cubin_cache_set_max_size(c, 64 * 1024);
  uint64_t seed = who * 7919 + 1;
  int bad = 0;
  for (uint32_t i = 0; i < RACE_ROUNDS && !bad; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    size_t n = 512 + (size_t)(seed >> 33) % 8192;
    unsigned char key[16], *p = malloc(n);
    if (!p) return 3;
    key_of(key, who, i);
    fill(p, n, key);
    (void)kd_cache_blob_put(c, key, p, n);
    free(p);
    /* A recent entry of either process. */
    uint32_t other = (uint32_t)(seed >> 20) % 2 + 1, j = i > 8 ? i - (uint32_t)(seed >> 40) % 8 : i;
    key_of(key, other == who ? who : 3 - who, j);
    void *data;
    size_t size;
    int got = kd_cache_blob_get(c, key, &data, &size);
    if (got == 1) {
      unsigned char *want = malloc(size);
      if (!want) return 3;
      fill(want, size, key);
      bad = memcmp(want, data, size) != 0;
      free(want);
      free(data);
    } else if (got != 0) {
      bad = 1; /* refused: half-written or corrupt */
    }
  }
  kd_cubin_cache_stats st;
  kd_cubin_cache_stats_get(c, &st);
  kd_cubin_cache_destroy(c);
  if (st.corrupt_rebuilt) bad = 1;
  return bad ? 1 : 0;
}

Test(host_cache, two_processes_fill_read_and_prune_one_folder) {
  char *dir = kdt_temp_dir();
  pid_t pids[2];
  for (uint32_t w = 0; w < 2; ++w) {
    pids[w] = fork();
    cr_assert_geq(pids[w], 0);
    if (pids[w] == 0) _exit(race(dir, w + 1));
  }
  for (int w = 0; w < 2; ++w) {
    int status = 0;
    cr_assert_eq(waitpid(pids[w], &status, 0), pids[w]);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: exit %d (1: a read found a bad entry)", w,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(dir, &c));
  KDT_OK(kd_cubin_cache_set_max_size(c, 0));
  listing l = {0};
  KDT_OK(kd_cubin_cache_list(c, keep_entry, &l));
  cr_assert_gt(l.n, 0);
  cr_assert_lt(l.n, 2 * RACE_ROUNDS, "the cap pruned (%d entries left)", l.n);
  kd_cubin_cache_destroy(c);
  kdt_remove_dir(dir);
}
