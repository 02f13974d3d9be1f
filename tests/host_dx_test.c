/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: nvJitLink linking and its errors, the module cache (keys,
 * corrupt entries), and MathDx kernels compiled and linked to sm_90 CUBINs
 * on the CPU (skipped with a reason when MathDx is not installed). */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/dynlib.h"
#include "examples/dx_kernels.h"
#include "kdag_test.h"

static const char tiny_src[] =
    "extern \"C\" __device__ const unsigned tiny_launch[4] = {64, 2, 1, 512};\n"
    "extern \"C\" __global__ void tiny(int *x) { x[threadIdx.x] = TINY_VALUE; }\n";

static kd_build_recipe tiny_recipe(const char **defs) {
  kd_build_recipe r;
  kd_build_recipe_init(&r);
  r.source = tiny_src;
  r.nvrtc.arch = "sm_90";
  defs[0] = "TINY_VALUE=7";
  r.nvrtc.defines = defs;
  r.nvrtc.define_count = 1;
  static const char *const host_vars[] = {"tiny_launch"};
  r.host_variables = host_vars;
  r.host_variable_count = 1;
  return r;
}


Test(host_dx, link_lto_and_read_launch_globals) {
  const char *defs[1];
  kd_build_recipe r = tiny_recipe(defs);
  kd_binary *cubin = NULL;
  kd_build_report rep;
  KDT_OK(kd_build_cubin(NULL, &r, &cubin, &rep));
  cr_assert_eq(rep.origin, KD_BUILD_COMPILED);
  cr_assert_eq(kd_binary_kind_of(cubin), KD_BINARY_CUBIN);
  cr_assert_str_eq(kd_binary_arch(cubin), "sm_90");
  unsigned v[4] = {0};
  KDT_OK(kd_binary_read_global(cubin, "tiny_launch", v, sizeof v));
  cr_assert(v[0] == 64 && v[1] == 2 && v[2] == 1 && v[3] == 512, "%u %u %u %u", v[0], v[1], v[2], v[3]);
  KDT_FAILS(kd_binary_read_global(cubin, "nope", v, sizeof v), KD_ERR_NOT_FOUND, "no symbol nope");
  KDT_FAILS(kd_binary_read_global(cubin, "tiny_launch", v, 8), KD_ERR_INVALID_ARGUMENT, "is 16 bytes");
  kd_binary_destroy(cubin);
}

/* kd_build_cubin drops device variables that no kernel references unless
 * the recipe names them (host_variables) or keeps them all. */
Test(host_dx, unreferenced_device_variables_are_dropped_unless_named) {
  static const char src[] = "extern \"C\" __device__ const unsigned kept_v[2] = {3, 4};\n"
                            "extern \"C\" __device__ const unsigned spare_v[2] = {5, 6};\n"
                            "extern \"C\" __global__ void k(unsigned *x) { x[0] = 1; }\n";
  kd_build_recipe r;
  kd_build_recipe_init(&r);
  r.source = src;
  r.nvrtc.arch = "sm_90";
  r.nvrtc.relocatable = 1;
  const char *names[] = {"kept_v"};
  r.host_variables = names;
  r.host_variable_count = 1;
  kd_binary *b = NULL;
  unsigned v[2] = {0};
  KDT_OK(kd_build_cubin(NULL, &r, &b, NULL));
  KDT_OK(kd_binary_read_global(b, "kept_v", v, sizeof v));
  cr_assert(v[0] == 3 && v[1] == 4);
  KDT_FAILS(kd_binary_read_global(b, "spare_v", v, sizeof v), KD_ERR_NOT_FOUND, "spare_v");
  kd_binary_destroy(b);
  kd_module_key dropped, kept_all;
  KDT_OK(kd_build_key(&r, &dropped));
  r.keep_unused_variables = 1;
  KDT_OK(kd_build_key(&r, &kept_all));
  cr_assert_str_neq(dropped.hex, kept_all.hex, "keeping the variables is another module");
  KDT_OK(kd_build_cubin(NULL, &r, &b, NULL));
  KDT_OK(kd_binary_read_global(b, "spare_v", v, sizeof v));
  cr_assert(v[0] == 5 && v[1] == 6);
  kd_binary_destroy(b);
  const char *bad[] = {"a,b"};
  r.host_variables = bad;
  KDT_FAILS(kd_build_cubin(NULL, &r, &b, NULL), KD_ERR_INVALID_ARGUMENT, "host_variables[0] (a,b)");
  r.host_variables = NULL;
  KDT_FAILS(kd_build_key(&r, &dropped), KD_ERR_INVALID_ARGUMENT, "host_variables is NULL");
  r.host_variables = names;
  r.nvrtc.arch = "sm_90_and_a_name_far_too_long_to_keep";
  KDT_FAILS(kd_build_key(&r, &dropped), KD_ERR_INVALID_ARGUMENT, "longer than 31 characters");
}

Test(host_dx, link_errors_carry_the_linker_log) {
  const char *src = "extern \"C\" __device__ float kd_missing_fn(float);\n"
                    "extern \"C\" __global__ void k(float *x) { x[0] = kd_missing_fn(x[1]); }\n";
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "sm_90", .lto = 1, .relocatable = 1};
  kd_binary *lto = NULL, *cubin = (kd_binary *)0x1;
  KDT_OK(kd_nvrtc_compile(src, &o, &lto));
  cr_assert_eq(kd_binary_kind_of(lto), KD_BINARY_LTOIR);
  cr_assert_geq(kd_binary_producer_version(lto), 13000);
  kd_link_input in = kd_link_input_of(lto, "missing.ltoir");
  kd_link_options lo = {.struct_size = sizeof(kd_link_options), .arch = "sm_90"};
  KDT_FAILS(kd_nvjitlink_link(&in, 1, &lo, &cubin), KD_ERR_LINK_FAILED, "kd_missing_fn");
  cr_assert_null(cubin);
  cr_assert(strstr(kd_last_error(), "nvJitLinkComplete"), "%s", kd_last_error());
  /* Bad arguments are refused before nvJitLink sees them. */
  lo.arch = "compute_90";
  KDT_FAILS(kd_nvjitlink_link(&in, 1, &lo, &cubin), KD_ERR_INVALID_ARGUMENT, "real architecture");
  lo.arch = "sm_90";
  KDT_FAILS(kd_nvjitlink_link(&in, 0, &lo, &cubin), KD_ERR_INVALID_ARGUMENT, "no inputs");
  kd_link_input junk = {.kind = KD_BINARY_LTOIR, .data = "abcdefgh", .size = 8, .name = "junk"};
  KDT_FAILS(kd_nvjitlink_link(&junk, 1, &lo, &cubin), KD_ERR_INVALID_ARGUMENT, "magic");
  /* LTO-IR from a newer compiler than this nvJitLink: a clear error. */
  in.producer_version = 99000;
  KDT_FAILS(kd_nvjitlink_link(&in, 1, &lo, &cubin), KD_ERR_LTO_VERSION, "CUDA 99.0, newer than this nvJitLink");
  kd_binary_destroy(lto);
}

Test(host_dx, compile_errors_through_the_cache_carry_the_log) {
  kd_build_recipe r;
  kd_build_recipe_init(&r);
  r.source = "extern \"C\" __global__ void k(float *x) { x[0] = not_declared; }\n";
  r.nvrtc.arch = "sm_90";
  r.nvrtc.program_name = "broken_dx.cu";
  kd_binary *b = (kd_binary *)0x1;
  KDT_FAILS(kd_build_cubin(NULL, &r, &b, NULL), KD_ERR_COMPILE_FAILED, "not_declared");
  cr_assert_null(b);
  cr_assert(strstr(kd_last_error(), "broken_dx.cu") && strstr(kd_last_error(), "kd_build_cubin"), "%s",
            kd_last_error());
  r.nvrtc.arch = "compute_90";
  KDT_FAILS(kd_build_cubin(NULL, &r, &b, NULL), KD_ERR_INVALID_ARGUMENT, "real architecture");
}

Test(host_dx, key_changes_when_any_input_changes) {
  const char *defs[1];
  kd_build_recipe base = tiny_recipe(defs);
  kd_module_key keys[24], k2;
  int n = 0;
  KDT_OK(kd_build_key(&base, &keys[n++]));
  KDT_OK(kd_build_key(&base, &k2));
  cr_assert_str_eq(keys[0].hex, k2.hex, "the key is deterministic");
  cr_assert_eq(strlen(keys[0].hex), 32);

  kd_build_recipe r = base;
  r.source = "extern \"C\" __global__ void tiny(int *x) { x[0] = TINY_VALUE + 1; }\n";
  KDT_OK(kd_build_key(&r, &keys[n++]));
  const char *defs2[] = {"TINY_VALUE=8"};
  r = base, r.nvrtc.defines = defs2;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  const char *inc[] = {"/opt/headers-v2"};
  r = base, r.nvrtc.include_paths = inc, r.nvrtc.include_path_count = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  r = base, r.nvrtc.std = "c++20";
  KDT_OK(kd_build_key(&r, &keys[n++]));
  r = base, r.nvrtc.arch = "sm_80";
  KDT_OK(kd_build_key(&r, &keys[n++]));
  const char *flags[] = {"-use_fast_math"};
  r = base, r.nvrtc.extra_flags = flags, r.nvrtc.extra_flag_count = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  const char *hn[] = {"mine.h"}, *hs[] = {"#define A 1\n"}, *hs2[] = {"#define A 2\n"};
  r = base, r.nvrtc.header_names = hn, r.nvrtc.header_sources = hs, r.nvrtc.header_count = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  r.nvrtc.header_sources = hs2;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  r = base, r.nvrtc.relocatable = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  const char *tags[] = {"mathdx-25.6.0+0123"}, *tags2[] = {"mathdx-25.6.0+0124"};
  r = base, r.key_tags = tags, r.key_tag_count = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  r.key_tags = tags2;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  unsigned char bytes[64];
  memset(bytes, 1, sizeof bytes);
  kd_link_input in = {.kind = KD_BINARY_FATBIN, .data = bytes, .size = sizeof bytes};
  r = base, r.inputs = &in, r.input_count = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  bytes[63] = 2; /* one byte of one link input */
  KDT_OK(kd_build_key(&r, &keys[n++]));
  const char *lflags[] = {"-O3"};
  r = base, r.link_flags = lflags, r.link_flag_count = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  const char *hv[] = {"tiny_launch", "other"};
  r = base, r.host_variables = hv, r.host_variable_count = 2;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  r = base, r.keep_unused_variables = 1;
  KDT_OK(kd_build_key(&r, &keys[n++]));
  cr_assert_leq(n, (int)(sizeof keys / sizeof keys[0]));
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j)
      cr_assert_str_neq(keys[i].hex, keys[j].hex, "recipes %d and %d share a key", i, j);

  r = base, r.inputs = NULL, r.input_count = 2;
  KDT_FAILS(kd_build_key(&r, &k2), KD_ERR_INVALID_ARGUMENT, "inputs is NULL");
  r = base, r.source = NULL;
  KDT_FAILS(kd_build_key(&r, &k2), KD_ERR_INVALID_ARGUMENT, "no source and no link inputs");
}

/* In a child process (a fresh library state): the tiny recipe's key with
 * KDAG_NVRTC_PATH / KDAG_NVJITLINK_PATH set to the given files. The child
 * reports "LOADED" instead if computing the key loaded either library. */
static void key_in_child(const char *nvrtc, const char *jl, kd_module_key *out) {
  int fds[2];
  cr_assert_eq(pipe(fds), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    setenv("KDAG_NVRTC_PATH", nvrtc, 1);
    setenv("KDAG_NVJITLINK_PATH", jl, 1);
    const char *defs[1];
    kd_build_recipe r = tiny_recipe(defs);
    kd_module_key k;
    memset(&k, 0, sizeof k);
    if (kd_build_key(&r, &k) != KD_OK) snprintf(k.hex, sizeof k.hex, "FAILED");
    if (kd_nvrtc_loaded() || kd_nvjitlink_loaded()) snprintf(k.hex, sizeof k.hex, "LOADED");
    ssize_t w = write(fds[1], k.hex, sizeof k.hex);
    _exit(w == (ssize_t)sizeof k.hex ? 0 : 1);
  }
  close(fds[1]);
  memset(out, 0, sizeof *out);
  cr_assert_eq(read(fds[0], out->hex, sizeof out->hex), (ssize_t)sizeof out->hex);
  close(fds[0]);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  cr_assert_str_neq(out->hex, "FAILED");
  cr_assert_str_neq(out->hex, "LOADED", "computing a key must not load NVRTC or nvJitLink");
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "%s", path);
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
}

/* The compiler and linker enter the key by file identity (no dlopen): any
 * file stands in for them here, and changing one changes the key. */
Test(host_dx, key_changes_when_the_compiler_or_linker_file_changes_without_loading_either) {
  char *dir = kdt_temp_dir();
  char a[256], b[256], c[256], d[256];
  snprintf(a, sizeof a, "%s/nvrtc-a.so", dir);
  snprintf(b, sizeof b, "%s/nvrtc-b.so", dir);
  snprintf(c, sizeof c, "%s/jl-c.so", dir);
  snprintf(d, sizeof d, "%s/jl-d.so", dir);
  write_file(a, "NVRTC build A");
  write_file(b, "NVRTC build B, longer");
  write_file(c, "nvJitLink build C");
  write_file(d, "nvJitLink build D");
  kd_module_key ac, ac2, bc, ad, ac_edited;
  key_in_child(a, c, &ac);
  key_in_child(a, c, &ac2);
  key_in_child(b, c, &bc);
  key_in_child(a, d, &ad);
  cr_assert_str_eq(ac.hex, ac2.hex, "the same files give the same key");
  cr_assert_str_neq(ac.hex, bc.hex, "another NVRTC must change the key");
  cr_assert_str_neq(ac.hex, ad.hex, "another nvJitLink must change the key");
  cr_assert_str_neq(bc.hex, ad.hex);
  write_file(a, "NVRTC build a"); /* same size, one byte differs */
  key_in_child(a, c, &ac_edited);
  cr_assert_str_neq(ac.hex, ac_edited.hex, "a rebuilt NVRTC of the same size must change the key");
  kdt_remove_dir(dir);
}

static kd_build_report build_in(const char *dir, const kd_build_recipe *r, kd_cubin_cache_stats *stats);

/* The warm start the module cache exists for: a fresh process reading a
 * valid disk entry never dlopens NVRTC or nvJitLink. */
Test(host_dx, warm_build_from_disk_loads_neither_nvrtc_nor_nvjitlink) {
  cr_assert_eq(kd_nvrtc_loaded() || kd_nvjitlink_loaded(), 0, "this test needs a fresh process");
  char *dir = kdt_temp_dir();
  pid_t pid = fork(); /* the cold build, in a child: it loads both libraries */
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    const char *defs[1];
    kd_build_recipe r = tiny_recipe(defs);
    kd_cubin_cache *c = NULL;
    kd_binary *b = NULL;
    kd_build_report rep;
    int ok = kd_cubin_cache_create(dir, &c) == KD_OK && kd_build_cubin(c, &r, &b, &rep) == KD_OK &&
             rep.origin == KD_BUILD_COMPILED && !rep.disk_write_failed;
    kd_binary_destroy(b);
    kd_cubin_cache_destroy(c);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the cold build failed in the child");
  const char *defs[1];
  kd_build_recipe r = tiny_recipe(defs);
  kd_build_report rep = build_in(dir, &r, NULL);
  cr_assert_eq(rep.origin, KD_BUILD_DISK);
  cr_assert_eq(kd_nvrtc_loaded(), 0, "a warm build loaded NVRTC");
  cr_assert_eq(kd_nvjitlink_loaded(), 0, "a warm build loaded nvJitLink");
  kdt_remove_dir(dir);
}

static void entry_path(const char *dir, const kd_module_key *k, char *path, size_t n) {
  snprintf(path, n, "%s/%s.cubin", dir, k->hex);
}

static kd_build_report build_in(const char *dir, const kd_build_recipe *r, kd_cubin_cache_stats *stats) {
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(dir, &c));
  kd_binary *b = NULL;
  kd_build_report rep;
  KDT_OK(kd_build_cubin(c, r, &b, &rep));
  unsigned v[4];
  KDT_OK(kd_binary_read_global(b, "tiny_launch", v, sizeof v)); /* whatever the origin, a whole CUBIN */
  cr_assert_eq(v[3], 512);
  kd_binary_destroy(b);
  if (stats) KDT_OK(kd_cubin_cache_stats_get(c, stats));
  kd_cubin_cache_destroy(c);
  return rep;
}

Test(host_dx, disk_cache_hits_and_rebuilds_corrupt_or_truncated_entries) {
  char *dir = kdt_temp_dir();
  const char *defs[1];
  kd_build_recipe r = tiny_recipe(defs);
  kd_cubin_cache_stats stats;
  kd_build_report rep = build_in(dir, &r, &stats);
  cr_assert_eq(rep.origin, KD_BUILD_COMPILED);
  cr_assert_eq(stats.builds, 1);
  cr_assert_eq(rep.disk_write_failed, 0);

  /* Same cache object: memory; a fresh one (a new process): disk. */
  {
    kd_cubin_cache *c;
    KDT_OK(kd_cubin_cache_create(dir, &c));
    kd_binary *b1, *b2;
    kd_build_report r1, r2;
    KDT_OK(kd_build_cubin(c, &r, &b1, &r1));
    KDT_OK(kd_build_cubin(c, &r, &b2, &r2));
    cr_assert_eq(r1.origin, KD_BUILD_DISK);
    cr_assert_eq(r2.origin, KD_BUILD_MEMORY);
    cr_assert_eq(kd_binary_size(b1), kd_binary_size(b2));
    cr_assert_eq(memcmp(kd_binary_data(b1), kd_binary_data(b2), kd_binary_size(b1)), 0);
    kd_binary_destroy(b1);
    kd_binary_destroy(b2);
    kd_cubin_cache_destroy(c);
  }
  char path[512];
  entry_path(dir, &rep.key, path, sizeof path);
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0, "entry %s missing", path);

  /* Truncated: header intact, payload cut. */
  cr_assert_eq(truncate(path, sb.st_size - 100), 0);
  rep = build_in(dir, &r, &stats);
  cr_assert_eq(rep.origin, KD_BUILD_COMPILED, "a truncated entry must not load");
  cr_assert_eq(rep.disk_entry_rejected, 1);
  cr_assert_eq(stats.corrupt_rebuilt, 1);
  rep = build_in(dir, &r, NULL);
  cr_assert_eq(rep.origin, KD_BUILD_DISK, "the rebuild replaced the entry");

  /* One flipped payload byte: the checksum catches it. */
  int fd = open(path, O_RDWR);
  cr_assert_geq(fd, 0);
  unsigned char byte;
  cr_assert_eq(pread(fd, &byte, 1, 64 + 200), 1);
  byte ^= 0x40;
  cr_assert_eq(pwrite(fd, &byte, 1, 64 + 200), 1);
  close(fd);
  rep = build_in(dir, &r, NULL);
  cr_assert_eq(rep.origin, KD_BUILD_COMPILED);
  cr_assert_eq(rep.disk_entry_rejected, 1);

  /* A header of another format version, and a file that is all garbage. */
  fd = open(path, O_RDWR);
  unsigned char ver = 99;
  cr_assert_eq(pwrite(fd, &ver, 1, 8), 1);
  close(fd);
  cr_assert_eq(build_in(dir, &r, NULL).origin, KD_BUILD_COMPILED);
  FILE *f = fopen(path, "wb");
  fputs("not a cache entry", f);
  fclose(f);
  cr_assert_eq(build_in(dir, &r, NULL).origin, KD_BUILD_COMPILED);
  cr_assert_eq(build_in(dir, &r, NULL).origin, KD_BUILD_DISK);

  /* A header claiming a payload of a TiB, with a (sparse) file to match:
   * refused and rebuilt, never allocated for. */
  fd = open(path, O_RDWR);
  cr_assert_geq(fd, 0);
  unsigned char huge[8] = {0, 0, 0, 0, 0, 1, 0, 0}; /* 2^40, little-endian */
  cr_assert_eq(pwrite(fd, huge, 8, 16), 8);
  close(fd);
  if (truncate(path, 64 + ((off_t)1 << 40)) == 0) {
    rep = build_in(dir, &r, NULL);
    cr_assert_eq(rep.origin, KD_BUILD_COMPILED, "an absurd entry size is corrupt: rebuilt");
    cr_assert_eq(rep.disk_entry_rejected, 1);
    cr_assert_eq(build_in(dir, &r, NULL).origin, KD_BUILD_DISK);
  } else {
    fprintf(stderr, "host_dx: this filesystem holds no 1 TiB sparse file; the huge-entry case did not run\n");
  }

  /* A link in the entry's place, even to a valid entry, is not followed:
   * refused, rebuilt and renamed over (the link goes, its target stays). */
  char elsewhere[600];
  snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", dir);
  cr_assert_eq(rename(path, elsewhere), 0);
  cr_assert_eq(symlink(elsewhere, path), 0);
  rep = build_in(dir, &r, NULL);
  cr_assert_eq(rep.origin, KD_BUILD_COMPILED, "an entry through a link must not load");
  cr_assert_eq(rep.disk_entry_rejected, 1);
  cr_assert_eq(lstat(path, &sb), 0);
  cr_assert(S_ISREG(sb.st_mode), "the rebuilt entry replaced the link");
  cr_assert_eq(build_in(dir, &r, NULL).origin, KD_BUILD_DISK);
  cr_assert_eq(unlink(elsewhere), 0);

  /* No temporary files are left behind. */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q tmp", dir);
  cr_assert_neq(system(cmd), 0, "a temporary file was left in %s", dir);
  kdt_remove_dir(dir);
}

Test(host_dx, cache_folder_comes_from_env_and_bad_folders_are_named) {
  kd_cubin_cache *c;
  char *dir = kdt_temp_dir();
  char sub[512];
  snprintf(sub, sizeof sub, "%s/a/b", dir);
  setenv("KDAG_CACHE_DIR", sub, 1);
  KDT_OK(kd_cubin_cache_create(NULL, &c));
  cr_assert_str_eq(kd_cubin_cache_dir(c), sub);
  kd_cubin_cache_destroy(c);
  KDT_OK(kd_cubin_cache_create("", &c));
  cr_assert_str_eq(kd_cubin_cache_dir(c), "");
  kd_cubin_cache_destroy(c);
  char file[512];
  snprintf(file, sizeof file, "%s/file", dir);
  kdt_write_file(file, "");
  KDT_FAILS(kd_cubin_cache_create(file, &c), KD_ERR_INVALID_ARGUMENT, file);
  /* kdag loads code from the folder: one others can write is refused, and
   * one of another user (checked where this test may chown: as root). */
  char shared[512];
  snprintf(shared, sizeof shared, "%s/shared", dir);
  cr_assert_eq(mkdir(shared, 0700), 0);
  cr_assert_eq(chmod(shared, 0777), 0);
  KDT_FAILS(kd_cubin_cache_create(shared, &c), KD_ERR_INVALID_ARGUMENT, "writable by its group or by others");
  cr_assert_eq(chmod(shared, 0770), 0);
  KDT_FAILS(kd_cubin_cache_create(shared, &c), KD_ERR_INVALID_ARGUMENT, "mode 770");
  cr_assert_eq(chmod(shared, 0755), 0);
  KDT_OK(kd_cubin_cache_create(shared, &c));
  kd_cubin_cache_destroy(c);
  if (geteuid() == 0) {
    cr_assert_eq(chown(shared, 65534, 65534), 0);
    KDT_FAILS(kd_cubin_cache_create(shared, &c), KD_ERR_INVALID_ARGUMENT, "belongs to uid 65534");
  }
  unsetenv("KDAG_CACHE_DIR");
  kdt_remove_dir(dir);
}

/* A temporary file a dead writer left (its name is the entry's key, then
 * ".tmp." and six characters) goes when a cache opens the folder, once it
 * is an hour old; a younger one may be another process's write, and stays,
 * as does anything else in the folder. */
Test(host_dx, opening_a_cache_removes_stale_temporary_files) {
  char *dir = kdt_temp_dir();
  const char *names[] = {".0123456789abcdef0123456789abcdef.tmp.AbC123", ".fedcba9876543210fedcba9876543210.tmp.xyz789",
                         "keep.tmp.AbC123"};
  char path[3][600];
  for (int i = 0; i < 3; ++i) {
    snprintf(path[i], sizeof path[i], "%s/%s", dir, names[i]);
    kdt_write_file(path[i], "partial");
  }
  struct timespec old[2] = {{.tv_sec = time(NULL) - 7200}, {.tv_sec = time(NULL) - 7200}};
  cr_assert_eq(utimensat(AT_FDCWD, path[0], old, 0), 0);
  cr_assert_eq(utimensat(AT_FDCWD, path[2], old, 0), 0);
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(dir, &c));
  kd_cubin_cache_destroy(c);
  cr_assert_neq(access(path[0], F_OK), 0, "the stale temporary file is still there");
  cr_assert_eq(access(path[1], F_OK), 0, "a fresh temporary file (a write in progress) was removed");
  cr_assert_eq(access(path[2], F_OK), 0, "a file that is no cache temporary was removed");
  kdt_remove_dir(dir);
}

/* The cache the MathDx tests share with the examples (ctest sets
 * KDAG_CACHE_DIR to a folder in the build tree), so the ASan run and later
 * runs reuse what the first one built. */
static kd_mathdx_info *mathdx_or_skip(void) {
  static kd_mathdx_info info;
  kd_status st = kd_mathdx_find(&info);
  if (st == KD_ERR_LIBRARY_MISSING) {
    /* The GPU lane carries MathDx: there a missing one is a broken bundle. */
    if (kdt_require_gpu()) cr_assert_fail("KDAG_REQUIRE_GPU=1 but MathDx is missing: %s", kd_last_error());
    cr_skip_test("MathDx not installed (tools/install-mathdx.sh): %s", kd_last_error());
  }
  KDT_OK(st);
  return &info;
}

/* mathdx_or_skip, and libmathdx too (the cuSOLVERDx tests). */
static kd_mathdx_info *libmathdx_or_skip(void) {
  kd_mathdx_info *mdx = mathdx_or_skip();
  if (!*mdx->libmathdx_path) {
    if (kdt_require_gpu()) cr_assert_fail("KDAG_REQUIRE_GPU=1 but libmathdx is missing");
    cr_skip_test("libmathdx not installed (tools/install-mathdx.sh)");
  }
  return mdx;
}

Test(host_dx, cublasdx_gemm_compiles_and_links_to_an_sm90_cubin) {
  kd_mathdx_info *mdx = mathdx_or_skip();
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(NULL, &c));
  for (int i = 0; i < 2; ++i) {
    kd_dtype t = i ? KD_F64 : KD_F32;
    kd_binary *cubin = NULL;
    kd_build_report rep;
    KDT_OK(dx_build_gemm(c, mdx, t, 90, &cubin, &rep));
    cr_log_info("cuBLASDx GEMM %s: %s, NVRTC %.0f ms, nvJitLink %.0f ms, total %.1f ms, %zu bytes", i ? "f64" : "f32",
                rep.origin == KD_BUILD_COMPILED ? "compiled" : rep.origin == KD_BUILD_DISK ? "disk" : "memory",
                rep.compile_ms, rep.link_ms, rep.total_ms, kd_binary_size(cubin));
    fprintf(stderr, "cuBLASDx GEMM %s: origin %d, NVRTC %.0f ms, nvJitLink %.0f ms, total %.1f ms\n",
            i ? "f64" : "f32", (int)rep.origin, rep.compile_ms, rep.link_ms, rep.total_ms);
    cr_assert_eq(kd_binary_kind_of(cubin), KD_BINARY_CUBIN);
    kd_launch_config cfg = {{0}, {0}, 0, 0};
    KDT_OK(dx_launch_config(cubin, "dx_gemm_launch", 10000, &cfg));
    cr_assert_eq(cfg.block[0], 256);
    cr_assert_eq(cfg.block[1] * cfg.block[2], 1);
    size_t es = i ? 8 : 4;
    cr_assert_geq(cfg.shared_bytes, 3 * 32 * 32 * es, "shared %u", cfg.shared_bytes);
    cr_assert_lt(cfg.shared_bytes, 3 * 32 * 32 * es + 1024);
    kd_binary_destroy(cubin);
  }
  kd_cubin_cache_destroy(c);
}

Test(host_dx, cusolverdx_cholesky_links_libmathdx_output) {
  (void)libmathdx_or_skip();
  kd_cubin_cache *c;
  KDT_OK(kd_cubin_cache_create(NULL, &c));
  kd_binary *cubin = NULL;
  kd_build_report rep;
  KDT_OK(dx_build_cholesky(c, 90, &cubin, &rep));
  fprintf(stderr, "cuSOLVERDx Cholesky: origin %d, NVRTC %.0f ms, nvJitLink %.0f ms, total %.1f ms\n",
          (int)rep.origin, rep.compile_ms, rep.link_ms, rep.total_ms);
  kd_launch_config cfg = {{0}, {0}, 0, 0};
  KDT_OK(dx_launch_config(cubin, "dx_potrf_launch", 100, &cfg));
  cr_assert_gt(cfg.block[0], 0);
  cr_assert_eq(cfg.shared_bytes, 32 * 32 * 8);
  KDT_OK(dx_launch_config(cubin, "dx_potrs_launch", 100, &cfg));
  cr_assert_eq(cfg.shared_bytes, (32 * 32 + 32) * 8);
  kd_binary_destroy(cubin);
  /* A description kdag can tell is wrong is refused before libmathdx sees it. */
  kd_dx_solver s;
  kd_dx_solver_desc d = {.function = KD_DX_POTRF, .dtype = KD_I32, .m = 32, .sm = 90};
  KDT_FAILS(kd_dx_solver_create(c, &d, &s), KD_ERR_INVALID_ARGUMENT, "KD_F32 or KD_F64");
  d.dtype = KD_F64;
  d.sm = 0;
  KDT_FAILS(kd_dx_solver_create(c, &d, &s), KD_ERR_INVALID_ARGUMENT, "desc->sm");
  kd_cubin_cache_destroy(c);
}

/* The solver key names the libmathdx file, and one libmathdx serves a
 * process: a copy of the library elsewhere (KDAG_LIBMATHDX_PATH) is another
 * key, so not a hit on the first one's entry, and is refused rather than
 * keyed as the copy while the first one builds. */
Test(host_dx, one_libmathdx_per_process_and_the_key_names_its_file) {
  kd_mathdx_info *mdx = libmathdx_or_skip();
  kd_cubin_cache *c;
  char *cache_dir = kdt_temp_dir(); /* empty: the first create calls libmathdx */
  KDT_OK(kd_cubin_cache_create(cache_dir, &c));
  kd_dx_solver_desc d = {.function = KD_DX_POTRF, .dtype = KD_F64, .m = 32, .sm = 90};
  kd_dx_solver s;
  KDT_OK(kd_dx_solver_create(c, &d, &s));
  cr_assert_eq(s.from_cache, 0);
  kd_dx_solver_destroy(&s);
  KDT_OK(kd_dx_solver_create(c, &d, &s));
  cr_assert_eq(s.from_cache, 1, "the same library and description: a hit");
  kd_dx_solver_destroy(&s);
  char *dir = kdt_temp_dir(), copy[512], cmd[2 * KD_MATHDX_PATH_MAX];
  snprintf(copy, sizeof copy, "%s/libmathdx.so.0", dir);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", mdx->libmathdx_path, copy);
  cr_assert_eq(system(cmd), 0);
  setenv("KDAG_LIBMATHDX_PATH", copy, 1);
  KDT_FAILS(kd_dx_solver_create(c, &d, &s), KD_ERR_INVALID_ARGUMENT, "one libmathdx per process");
  /* A link to the loaded file is that file: a new description builds. */
  char link[600];
  snprintf(link, sizeof link, "%s/link.so", dir);
  cr_assert_eq(symlink(mdx->libmathdx_path, link), 0);
  setenv("KDAG_LIBMATHDX_PATH", link, 1);
  kd_dx_solver_desc d16 = d;
  d16.m = 16;
  KDT_OK(kd_dx_solver_create(c, &d16, &s));
  cr_assert_eq(s.from_cache, 0);
  kd_dx_solver_destroy(&s);
  unsetenv("KDAG_LIBMATHDX_PATH");
  KDT_OK(kd_dx_solver_create(c, &d, &s));
  cr_assert_eq(s.from_cache, 1, "back to the first library: its entry again");
  kd_dx_solver_destroy(&s);
  kd_cubin_cache_destroy(c);
  kdt_remove_dir(dir);
  kdt_remove_dir(cache_dir);
}

/* A cache whose folder went away after it was opened still builds: the
 * entry is kept in memory, the failed write is reported and counted, and
 * the next build is a memory hit. A memory-only cache ("") touches no
 * folder at all. */
Test(host_dx, a_failed_disk_write_keeps_the_entry_in_memory_and_says_so) {
  char *dir = kdt_temp_dir();
  const char *defs[1];
  kd_build_recipe r = tiny_recipe(defs);
  kd_cubin_cache *caches[2];
  KDT_OK(kd_cubin_cache_create(dir, &caches[0]));
  KDT_OK(kd_cubin_cache_create("", &caches[1]));
  cr_assert_str_eq(kd_cubin_cache_dir(caches[1]), "");
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir); /* gone, even for root, whom permissions would not stop */
  cr_assert_eq(system(cmd), 0);
  for (int i = 0; i < 2; ++i) {
    kd_binary *b1, *b2;
    kd_build_report r1, r2;
    KDT_OK(kd_build_cubin(caches[i], &r, &b1, &r1));
    KDT_OK(kd_build_cubin(caches[i], &r, &b2, &r2));
    cr_assert_eq(r1.origin, KD_BUILD_COMPILED);
    cr_assert_eq(r1.disk_write_failed, i == 0, "cache %d: disk_write_failed %d", i, r1.disk_write_failed);
    cr_assert_eq(r2.origin, KD_BUILD_MEMORY, "cache %d: the second build comes from memory", i);
    kd_cubin_cache_stats st;
    KDT_OK(kd_cubin_cache_stats_get(caches[i], &st));
    cr_assert_eq(st.builds, 1);
    cr_assert_eq(st.memory_hits, 1);
    cr_assert_eq(st.disk_hits, 0);
    cr_assert_eq(st.entries, 1);
    cr_assert_eq(st.disk_write_failures, (uint64_t)(i == 0));
    kd_binary_destroy(b1);
    kd_binary_destroy(b2);
    kd_cubin_cache_destroy(caches[i]);
  }
  struct stat sb;
  cr_assert_neq(stat(dir, &sb), 0, "nothing recreated the folder");
  free(dir);
}
