/* SPDX-License-Identifier: Apache-2.0 */
/* The module cache: recipe keys (XXH3-128), in-memory entries, and disk
 * entries with a checked header, written atomically (temp file + rename). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "compile/binary.h"
#include "compile/cache_internal.h"
#include "base/options.h"
#include "base/dynlib.h"
#include "base/size.h"
#include "compile/ptx.h"
#include "base/status_internal.h"
#include "kdag/cache.h"

#define KD_CACHE_FORMAT 1u
#define KD_CACHE_HEADER 64u
/* No entry is larger (a CUBIN of a GiB is no module kdag builds): a header
 * claiming more is corrupt, so the entry is rebuilt, not allocated for. */
#define KD_CACHE_ENTRY_MAX ((uint64_t)1 << 30)
/* nvJitLink takes at most 62 extra flags in kd_nvjitlink_link (64 with -arch and -lto). */
#define KD_MAX_RECIPE_LINK_FLAGS 62
static const char kd_cache_magic[8] = {'K', 'D', 'A', 'G', 'C', 'U', 'B', '\0'};

typedef struct kd_cache_entry {
  unsigned char key[16];
  kd_binary *cubin;
} kd_cache_entry;

struct kd_cubin_cache {
  pthread_mutex_t lock;
  char *dir; /* "" memory only */
  kd_cache_entry *entries;
  size_t count, cap;
  kd_cubin_cache_stats stats;
  uint64_t max_size;   /* the disk cap; 0: none */
};

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- keys ------------------------------------------------------------- */

/* Every field is length-prefixed so that ("ab","c") and ("a","bc") differ. */
static void put(XXH3_state_t *h, const void *data, size_t n) {
  uint64_t len = n;
  XXH3_128bits_update(h, &len, sizeof len);
  if (n) XXH3_128bits_update(h, data, n);
}
static void put_str(XXH3_state_t *h, const char *s) {
  if (!s) {
    uint64_t none = UINT64_MAX; /* NULL differs from "" */
    XXH3_128bits_update(h, &none, sizeof none);
    return;
  }
  put(h, s, strlen(s));
}
static void put_int(XXH3_state_t *h, int64_t v) { XXH3_128bits_update(h, &v, sizeof v); }
static void put_strs(XXH3_state_t *h, const char *const *a, size_t n) {
  put_int(h, (int64_t)n);
  for (size_t i = 0; i < n; ++i) put_str(h, a[i]);
}

static kd_status check_array(const char *op, const char *what, const void *a, size_t n) {
  if (n && !a) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: recipe %s is NULL but its count is %zu", op, what, n);
  return KD_OK;
}

static kd_status key_raw(const char *op, const kd_build_recipe *r, unsigned char key[16]) {
  if (!r) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument recipe is NULL", op);
  const kd_nvrtc_options *o = &r->nvrtc;
  kd_status st = kd_options_check(op, "recipe->nvrtc.", "kd_nvrtc_options", o->struct_size, sizeof *o);
  if (st) return st;
  if (!o->arch || strncmp(o->arch, "sm_", 3) != 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: recipe nvrtc.arch must be a real architecture such "
                   "as \"sm_90\" (got %s)", op, o->arch ? o->arch : "NULL");
  /* As the compile and link calls do: a disk hit would otherwise hand back
   * a binary whose arch was cut to fit. */
  if (strlen(o->arch) >= KD_BINARY_ARCH_MAX)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: recipe nvrtc.arch \"%s\" is longer than %d characters", op,
                   o->arch, KD_BINARY_ARCH_MAX - 1);
  if (!r->source && r->input_count == 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the recipe has no source and no link inputs", op);
  if ((st = check_array(op, "inputs", r->inputs, r->input_count)) ||
      (st = check_array(op, "link_flags", r->link_flags, r->link_flag_count)) ||
      (st = check_array(op, "key_tags", r->key_tags, r->key_tag_count)) ||
      (st = check_array(op, "host_variables", r->host_variables, r->host_variable_count)) ||
      (st = check_array(op, "nvrtc.include_paths", o->include_paths, o->include_path_count)) ||
      (st = check_array(op, "nvrtc.defines", o->defines, o->define_count)) ||
      (st = check_array(op, "nvrtc.extra_flags", o->extra_flags, o->extra_flag_count)) ||
      (st = check_array(op, "nvrtc.header_names", o->header_names, o->header_count)) ||
      (st = check_array(op, "nvrtc.header_sources", o->header_sources, o->header_count)))
    return st;
  for (size_t i = 0; i < r->input_count; ++i)
    if (!r->inputs[i].data || !r->inputs[i].size)
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: recipe inputs[%zu] is NULL or empty", op, i);
  /* The limit first, each count alone (their sum could wrap), before the
   * loop below reads the arrays. */
  if (r->host_variable_count >= KD_MAX_RECIPE_LINK_FLAGS || r->link_flag_count >= KD_MAX_RECIPE_LINK_FLAGS ||
      r->host_variable_count + r->link_flag_count + 1 > KD_MAX_RECIPE_LINK_FLAGS)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: %zu link flags and %zu host variables, at most %d together",
                   op, r->link_flag_count, r->host_variable_count, KD_MAX_RECIPE_LINK_FLAGS - 1);
  for (size_t i = 0; i < r->host_variable_count; ++i) {
    const char *v = r->host_variables[i];
    if (!v || !*v || strchr(v, ','))
      return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: recipe host_variables[%zu] (%s) must be a non-empty "
                     "name without commas", op, i, v ? v : "NULL");
  }
  /* The compiler and linker by file identity (path, size, mtime, a hash of
   * both ends), found once per process without loading either: a warm start
   * never dlopens NVRTC or nvJitLink. A different build is a different file. */
  const char *nvrtc_id = NULL, *jl_id = NULL;
  if (r->source && (st = kd_nvrtc_identity(&nvrtc_id))) return kd_fail_context(st, "%s", op);
  if ((st = kd_nvjitlink_identity(&jl_id))) return kd_fail_context(st, "%s", op);

  XXH3_state_t *h = XXH3_createState();
  if (!h) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the hash state", op);
  XXH3_128bits_reset(h);
  put_str(h, "kdag module key");
  put_int(h, KD_CACHE_FORMAT);
  put_str(h, nvrtc_id); /* NULL (no source) differs from any file */
  put_str(h, jl_id);
  put_str(h, r->source);
  put_str(h, o->arch);
  put_str(h, o->std);
  put_strs(h, o->include_paths, o->include_path_count);
  put_strs(h, o->defines, o->define_count);
  put_strs(h, o->extra_flags, o->extra_flag_count);
  put_strs(h, o->header_names, o->header_count);
  put_strs(h, o->header_sources, o->header_count);
  put_int(h, o->relocatable);
  put_str(h, o->program_name); /* appears in the CUBIN's debug names */
  put_int(h, (int64_t)r->input_count);
  for (size_t i = 0; i < r->input_count; ++i) {
    const kd_link_input *in = &r->inputs[i];
    put_int(h, in->kind);
    put_int(h, in->producer_version);
    put(h, in->data, in->size);
  }
  put_strs(h, r->link_flags, r->link_flag_count);
  put_strs(h, r->key_tags, r->key_tag_count);
  put_int(h, r->keep_unused_variables != 0);
  put_strs(h, r->host_variables, r->host_variable_count);
  XXH128_hash_t d = XXH3_128bits_digest(h);
  XXH3_freeState(h);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, d);
  memcpy(key, c.digest, 16);
  return KD_OK;
}

static void key_hex(const unsigned char key[16], kd_module_key *out) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    out->hex[2 * i] = digits[key[i] >> 4];
    out->hex[2 * i + 1] = digits[key[i] & 15];
  }
  out->hex[32] = '\0';
}

void kd_build_recipe_init(kd_build_recipe *r) {
  if (!r) return;
  memset(r, 0, sizeof *r);
  kd_nvrtc_options_init(&r->nvrtc);
}

kd_status kd_build_key(const kd_build_recipe *r, kd_module_key *out) {
  static const char *op = "kd_build_key";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_key is NULL", op);
  unsigned char key[16];
  kd_status st = key_raw(op, r, key);
  if (!st) key_hex(key, out);
  return st;
}

/* ---- the cache object -------------------------------------------------- */

static kd_status ensure_dir(const char *op, const char *dir) {
  /* mkdir -p, one component at a time. */
  char *path = strdup(dir);
  if (!path) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
  for (char *p = path + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
      kd_status st = kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cannot create cache folder %s: %s", op,
                             path, strerror(errno));
      free(path);
      return st;
    }
    *p = '/';
  }
  free(path);
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cannot create cache folder %s: %s", op, dir, strerror(errno));
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cache folder %s is not a directory", op, dir);
  /* kdag loads and runs what it reads there: a folder another user can
   * write (a shared /tmp folder made by someone else, mode 0777) could hand
   * it a planted CUBIN whose header anyone can compute. */
  if (sb.st_uid != geteuid())
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cache folder %s belongs to uid %u, not to this process's uid %u: "
                   "kdag loads code from it, so it must be this user's own", op, dir, (unsigned)sb.st_uid,
                   (unsigned)geteuid());
  if (sb.st_mode & (S_IWGRP | S_IWOTH))
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cache folder %s is writable by its group or by others (mode %03o): "
                   "kdag loads code from it; chmod go-w it or choose another folder", op, dir,
                   (unsigned)(sb.st_mode & 0777));
  if (access(dir, W_OK | X_OK) != 0)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cache folder %s is not writable: %s", op, dir, strerror(errno));
  return KD_OK;
}

/* A writer that died between its temporary file and the rename leaves the
 * file behind (".<32 hex>.tmp.XXXXXX"); nothing else would remove it. Only
 * files older than this are taken: a younger one may be another process's
 * write in progress. */
#define KD_CACHE_STALE_TMP_S 3600

static void remove_stale_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  time_t now = time(NULL);
  for (struct dirent *e; (e = readdir(d));) {
    const char *n = e->d_name;
    if (n[0] != '.' || strlen(n) != 1 + 32 + 5 + 6 || strncmp(n + 33, ".tmp.", 5) != 0) continue;
    struct stat sb;
    if (fstatat(dirfd(d), n, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) &&
        now - sb.st_mtime > KD_CACHE_STALE_TMP_S)
      (void)unlinkat(dirfd(d), n, 0);
  }
  closedir(d);
}

kd_status kd_cubin_cache_create(const char *dir, kd_cubin_cache **out) {
  static const char *op = "kd_cubin_cache_create";
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_cache is NULL", op);
  *out = NULL;
  char path[4096];
  const char *env = getenv("KDAG_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  if (dir) snprintf(path, sizeof path, "%s", dir);
  else if (env) snprintf(path, sizeof path, "%s", env);
  else if (xdg && *xdg) snprintf(path, sizeof path, "%s/kdag", xdg);
  else if (home && *home) snprintf(path, sizeof path, "%s/.cache/kdag", home);
  else
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: no cache folder: dir is NULL and none of "
                   "KDAG_CACHE_DIR, XDG_CACHE_HOME, HOME is set (pass \"\" for memory only)", op);
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') path[--len] = '\0';
  if (len + 64 >= sizeof path)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cache folder path is too long (%zu bytes)", op, len);
  if (*path) {
    kd_status st = ensure_dir(op, path);
    if (st) return st;
    remove_stale_temporaries(path);
  }
  kd_cubin_cache *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(path))) {
    free(c);
    return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
  }
  pthread_mutex_init(&c->lock, NULL);
  c->max_size = KD_CUBIN_CACHE_DEFAULT_MAX_SIZE;
  /* An unreadable value keeps the default: the cache must open either way. */
  const char *cap = getenv("KDAG_CACHE_MAX_SIZE");
  uint64_t v;
  if (cap && kd_size_parse(cap, &v)) c->max_size = v;
  *out = c;
  return KD_OK;
}

void kd_cubin_cache_destroy(kd_cubin_cache *c) {
  if (!c) return;
  for (size_t i = 0; i < c->count; ++i) kd_binary_destroy(c->entries[i].cubin);
  free(c->entries);
  free(c->dir);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

const char *kd_cubin_cache_dir(const kd_cubin_cache *c) { return c ? c->dir : ""; }

kd_status kd_cubin_cache_stats_get(kd_cubin_cache *c, kd_cubin_cache_stats *out) {
  if (!c || !out)
    return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_cubin_cache_stats_get: argument %s is NULL", !c ? "cache" : "out_stats");
  pthread_mutex_lock(&c->lock);
  *out = c->stats;
  out->entries = c->count;
  out->max_size = c->max_size;
  pthread_mutex_unlock(&c->lock);
  return KD_OK;
}

static kd_status copy_binary(const char *op, const kd_binary *b, kd_binary **out) {
  kd_status st = kd_binary_from_memory(b->kind, b->data, b->size, b->arch, b->producer_version, out);
  return st ? kd_fail_context(st, "%s", op) : st;
}

/* ---- disk entries ------------------------------------------------------ */

static void wr32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i)); }
static void wr64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; ++i) p[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t rd32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; --i) v = v << 8 | p[i]; return v; }
static uint64_t rd64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; --i) v = v << 8 | p[i]; return v; }

/* Header: magic[8] format u32, header bytes u32, payload bytes u64,
 * XXH3-64 of the payload u64, key[16], zero padding to 64 bytes. */
static void entry_path(const kd_cubin_cache *c, const kd_module_key *k, const char *ext, char *path,
                       size_t n) {
  snprintf(path, n, "%s/%s.%s", c->dir, k->hex, ext);
}

/* 1: a valid entry was read into *out; 0: none (absent); -1: present but
 * refused (corrupt, truncated, other version or key); -2: out of memory. */
static int disk_read_raw(const kd_cubin_cache *c, const unsigned char key[16], const kd_module_key *k,
                         const char *ext, void **out, size_t *out_size) {
  char path[4200];
  entry_path(c, k, ext, path, sizeof path);
  /* Close-on-exec: a fork on another thread inherits nothing. Not through
   * a link, and only a plain file of this user: what is loaded as code must
   * be what this user wrote there (the folder was checked at open; this
   * holds each entry to the same rule). Anything else is refused, so it is
   * rebuilt and renamed over. */
  /* Non-blocking, so that a FIFO at an entry's name cannot hang the open
   * before fstat refuses it; reads of a regular file are unaffected. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT ? 0 : -1;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    return -1;
  }
  unsigned char h[KD_CACHE_HEADER];
  int result = -1;
  void *data = NULL;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || sb.st_size < (off_t)KD_CACHE_HEADER)
    goto done;
  if (fread(h, 1, sizeof h, f) != sizeof h) goto done;
  if (memcmp(h, kd_cache_magic, 8) != 0 || rd32(h + 8) != KD_CACHE_FORMAT || rd32(h + 12) != KD_CACHE_HEADER)
    goto done;
  uint64_t size = rd64(h + 16), sum = rd64(h + 24);
  if (memcmp(h + 32, key, 16) != 0) goto done;
  if (size == 0 || size > KD_CACHE_ENTRY_MAX || (uint64_t)sb.st_size != KD_CACHE_HEADER + size) goto done;
  data = malloc(size);
  if (!data) {
    result = -2;
    goto done;
  }
  if (fread(data, 1, size, f) != size) goto done;
  if (XXH3_64bits(data, size) != sum) goto done;
  /* The use, recorded: the size cap removes the least recently used
   * entries first (the owner may set the times of a read-only file). */
  (void)futimens(fd, NULL);
  *out = data;
  *out_size = size;
  data = NULL;
  result = 1;
done:
  free(data);
  fclose(f);
  return result;
}

static int disk_read(const kd_cubin_cache *c, const unsigned char key[16], const kd_module_key *k,
                     const char *arch, kd_binary **out) {
  void *data = NULL;
  size_t size = 0;
  int got = disk_read_raw(c, key, k, "cubin", &data, &size);
  if (got != 1) return got;
  /* A CUBIN entry must still look like one (the checksum covers bit rot,
   * this covers an entry written by something else under our name). */
  kd_image_info info = kd_image_inspect(data, size);
  if (info.kind != KD_IMAGE_CUBIN) {
    free(data);
    return -1;
  }
  *out = kd_binary_wrap(KD_BINARY_CUBIN, data, size, NULL, arch);
  return *out ? 1 : -2;
}

/* Writes the entry to a temporary file beside it and renames it into place.
 * Returns 0 on success, -1 on failure (the temporary file is removed). */
static int disk_write_raw(const kd_cubin_cache *c, const unsigned char key[16], const kd_module_key *k,
                          const char *ext, const void *payload, size_t payload_size) {
  if (payload_size > KD_CACHE_ENTRY_MAX) return -1; /* it could not be read back */
  char path[4200], tmp[4300];
  entry_path(c, k, ext, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", c->dir, k->hex);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) return -1;
  unsigned char h[KD_CACHE_HEADER];
  memset(h, 0, sizeof h);
  memcpy(h, kd_cache_magic, 8);
  wr32(h + 8, KD_CACHE_FORMAT);
  wr32(h + 12, KD_CACHE_HEADER);
  wr64(h + 16, payload_size);
  wr64(h + 24, XXH3_64bits(payload, payload_size));
  memcpy(h + 32, key, 16);
  int ok = 1;
  const unsigned char *parts[2] = {h, payload};
  size_t sizes[2] = {sizeof h, payload_size};
  for (int p = 0; p < 2 && ok; ++p) {
    size_t done = 0;
    while (done < sizes[p]) {
      ssize_t w = write(fd, parts[p] + done, sizes[p] - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ok = 0;
        break;
      }
      done += (size_t)w;
    }
  }
  /* fsync before rename: after a crash the name points at whole data. */
  if (ok && fsync(fd) != 0) ok = 0;
  if (close(fd) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  if (!ok) unlink(tmp);
  return ok ? 0 : -1;
}

/* ---- the folder's entries: listing and pruning ------------------------- */

typedef struct disk_entry {
  char name[40];          /* <32 hex>.cubin or .blob */
  uint64_t bytes;
  struct timespec used;   /* modification time: the last write or read */
} disk_entry;

/* 1 for a cache entry's file name ("<32 hex>.cubin" or ".blob"). */
static int entry_name(const char *n) {
  size_t len = strlen(n);
  if (len != 32 + 6 && len != 32 + 5) return 0;
  for (int i = 0; i < 32; ++i)
    if (!strchr("0123456789abcdef", n[i]) || !n[i]) return 0;
  return strcmp(n + 32, ".cubin") == 0 || strcmp(n + 32, ".blob") == 0;
}

/* The folder's entries (plain files of this user) into *out (malloc'd),
 * their sizes summed in *total: 0, -1 the folder unreadable, -2 no memory. */
static int scan(const char *dir, disk_entry **out, size_t *count, uint64_t *total) {
  *out = NULL;
  *count = 0;
  *total = 0;
  DIR *d = opendir(dir);
  if (!d) return -1;
  size_t cap = 0;
  int r = 0;
  for (struct dirent *e; (e = readdir(d));) {
    struct stat sb;
    if (!entry_name(e->d_name) || fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(sb.st_mode) || sb.st_uid != geteuid())
      continue; /* removed meanwhile, or not kdag's */
    if (*count == cap) {
      size_t grown_cap = cap ? 2 * cap : 64;
      disk_entry *grown = realloc(*out, grown_cap * sizeof *grown);
      if (!grown) {
        r = -2;
        break;
      }
      *out = grown;
      cap = grown_cap;
    }
    disk_entry *x = &(*out)[(*count)++];
    memcpy(x->name, e->d_name, strlen(e->d_name) + 1); /* entry_name: 37 or 38 bytes with the NUL */
    x->bytes = (uint64_t)sb.st_size;
    x->used = sb.st_mtim;
    *total += x->bytes;
  }
  closedir(d);
  if (r) {
    free(*out);
    *out = NULL;
    *count = 0;
  }
  return r;
}

/* Least recently used first; ties by name, so every process agrees. */
static int older_first(const void *pa, const void *pb) {
  const disk_entry *a = pa, *b = pb;
  if (a->used.tv_sec != b->used.tv_sec) return a->used.tv_sec < b->used.tv_sec ? -1 : 1;
  if (a->used.tv_nsec != b->used.tv_nsec) return a->used.tv_nsec < b->used.tv_nsec ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* Removes the least recently used entries until at most max bytes remain.
 * Another process pruning at once may remove some first: those count for
 * it, not here. 0, or scan's failure. */
static int prune_to(kd_cubin_cache *c, uint64_t max, uint64_t *removed, uint64_t *removed_bytes) {
  disk_entry *es;
  size_t n;
  uint64_t total;
  *removed = *removed_bytes = 0;
  int r = scan(c->dir, &es, &n, &total);
  if (r) return r;
  if (n) qsort(es, n, sizeof *es, older_first);
  for (size_t i = 0; i < n && total > max; ++i) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", c->dir, es[i].name);
    total -= es[i].bytes;
    if (unlink(path) == 0) {
      ++*removed;
      *removed_bytes += es[i].bytes;
    }
  }
  free(es);
  pthread_mutex_lock(&c->lock);
  c->stats.pruned += *removed;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

/* After a write: back under the cap, if it was passed. */
static void keep_under_cap(kd_cubin_cache *c) {
  pthread_mutex_lock(&c->lock);
  uint64_t max = c->max_size;
  pthread_mutex_unlock(&c->lock);
  uint64_t removed, bytes;
  if (max) (void)prune_to(c, max, &removed, &bytes);
}

kd_status kd_cubin_cache_set_max_size(kd_cubin_cache *c, uint64_t max) {
  if (!c) return kd_fail(KD_ERR_INVALID_ARGUMENT, "kd_cubin_cache_set_max_size: argument cache is NULL");
  pthread_mutex_lock(&c->lock);
  c->max_size = max;
  pthread_mutex_unlock(&c->lock);
  return KD_OK;
}

static kd_status folder_check(const char *op, kd_cubin_cache *c) {
  if (!c) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument cache is NULL", op);
  if (!*c->dir) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: the cache is memory-only: it has no folder", op);
  return KD_OK;
}

static kd_status scan_failed(const char *op, const kd_cubin_cache *c, int r) {
  if (r == -2) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory to list %s", op, c->dir);
  return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: cannot read the cache folder %s: %s", op, c->dir, strerror(errno));
}

kd_status kd_cubin_cache_list(kd_cubin_cache *c, kd_cache_entry_fn fn, void *user) {
  static const char *op = "kd_cubin_cache_list";
  kd_status st = folder_check(op, c);
  if (st) return st;
  if (!fn) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument fn is NULL", op);
  disk_entry *es;
  size_t n;
  uint64_t total;
  int r = scan(c->dir, &es, &n, &total);
  if (r) return scan_failed(op, c, r);
  if (n) qsort(es, n, sizeof *es, older_first);
  for (size_t i = n; i-- > 0;) {
    kd_cache_entry_info info;
    memcpy(info.key, es[i].name, 32);
    info.key[32] = 0;
    info.kind = strcmp(es[i].name + 32, ".cubin") == 0 ? "cubin" : "blob";
    info.bytes = es[i].bytes;
    info.last_use = (int64_t)es[i].used.tv_sec;
    if (fn(user, &info)) break;
  }
  free(es);
  return KD_OK;
}

kd_status kd_cubin_cache_prune(kd_cubin_cache *c, uint64_t max, uint64_t *out_removed, uint64_t *out_bytes) {
  static const char *op = "kd_cubin_cache_prune";
  kd_status st = folder_check(op, c);
  if (st) return st;
  uint64_t removed, bytes;
  int r = prune_to(c, max, &removed, &bytes);
  if (r) return scan_failed(op, c, r);
  if (out_removed) *out_removed = removed;
  if (out_bytes) *out_bytes = bytes;
  return KD_OK;
}

static int disk_write(kd_cubin_cache *c, const unsigned char key[16], const kd_module_key *k,
                      const kd_binary *b) {
  int r = disk_write_raw(c, key, k, "cubin", b->data, b->size);
  if (!r) keep_under_cap(c);
  return r;
}

int kd_cache_blob_get(kd_cubin_cache *c, const unsigned char key[16], void **data, size_t *size) {
  if (!c || !*c->dir) return 0;
  kd_module_key k;
  key_hex(key, &k);
  int got = disk_read_raw(c, key, &k, "blob", data, size);
  pthread_mutex_lock(&c->lock);
  if (got == 1) c->stats.disk_hits++;
  if (got == -1) c->stats.corrupt_rebuilt++;
  pthread_mutex_unlock(&c->lock);
  return got;
}

int kd_cache_blob_put(kd_cubin_cache *c, const unsigned char key[16], const void *data, size_t size) {
  if (!c || !*c->dir) return -1;
  kd_module_key k;
  key_hex(key, &k);
  int r = disk_write_raw(c, key, &k, "blob", data, size);
  if (!r) keep_under_cap(c);
  pthread_mutex_lock(&c->lock);
  if (r) c->stats.disk_write_failures++;
  pthread_mutex_unlock(&c->lock);
  return r;
}

/* ---- lookup and build -------------------------------------------------- */

static kd_binary *memory_find(kd_cubin_cache *c, const unsigned char key[16]) {
  for (size_t i = 0; i < c->count; ++i)
    if (memcmp(c->entries[i].key, key, 16) == 0) return c->entries[i].cubin;
  return NULL;
}

/* Takes ownership of cubin (freed if it cannot be stored or is a duplicate). */
static void memory_put(kd_cubin_cache *c, const unsigned char key[16], kd_binary *cubin) {
  if (memory_find(c, key)) {
    kd_binary_destroy(cubin);
    return;
  }
  if (c->count == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 16;
    kd_cache_entry *grown = realloc(c->entries, cap * sizeof *grown);
    if (!grown) {
      kd_binary_destroy(cubin); /* memory layer is best effort; disk still has it */
      return;
    }
    c->entries = grown;
    c->cap = cap;
  }
  memcpy(c->entries[c->count].key, key, 16);
  c->entries[c->count++].cubin = cubin;
}

kd_status kd_build_cubin(kd_cubin_cache *c, const kd_build_recipe *r, kd_binary **out,
                         kd_build_report *report) {
  static const char *op = "kd_build_cubin";
  double t0 = now_ms();
  kd_build_report rep;
  memset(&rep, 0, sizeof rep);
  if (!out) return kd_fail(KD_ERR_INVALID_ARGUMENT, "%s: argument out_binary is NULL", op);
  *out = NULL;
  unsigned char key[16];
  kd_status st = key_raw(op, r, key);
  if (st) return st;
  key_hex(key, &rep.key);
  rep.key_ms = now_ms() - t0;

  if (c) {
    pthread_mutex_lock(&c->lock);
    kd_binary *hit = memory_find(c, key);
    if (hit) {
      c->stats.memory_hits++;
      st = copy_binary(op, hit, out);
      pthread_mutex_unlock(&c->lock);
      rep.origin = KD_BUILD_MEMORY;
      rep.total_ms = now_ms() - t0;
      if (report) *report = rep;
      return st;
    }
    pthread_mutex_unlock(&c->lock);
    if (*c->dir) {
      kd_binary *disk = NULL;
      int got = disk_read(c, key, &rep.key, r->nvrtc.arch, &disk);
      if (got == -2) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory to read cache entry %s", op, rep.key.hex);
      if (got == 1) {
        pthread_mutex_lock(&c->lock);
        c->stats.disk_hits++;
        st = copy_binary(op, disk, out);
        memory_put(c, key, disk);
        pthread_mutex_unlock(&c->lock);
        rep.origin = KD_BUILD_DISK;
        rep.total_ms = now_ms() - t0;
        if (report) *report = rep;
        return st;
      }
      if (got == -1) {
        rep.disk_entry_rejected = 1;
        pthread_mutex_lock(&c->lock);
        c->stats.corrupt_rebuilt++;
        pthread_mutex_unlock(&c->lock);
      }
    }
  }

  /* Build: NVRTC to LTO-IR, then one nvJitLink over it and the inputs. */
  kd_binary *lto = NULL, *cubin = NULL;
  size_t n_in = r->input_count + (r->source ? 1 : 0);
  kd_link_input *ins = calloc(n_in ? n_in : 1, sizeof *ins);
  if (!ins) return kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory", op);
  if (r->source) {
    kd_nvrtc_options o = r->nvrtc;
    o.lto = 1;
    o.emit_ptx = 0;
    double t = now_ms();
    st = kd_nvrtc_compile(r->source, &o, &lto);
    rep.compile_ms = now_ms() - t;
    if (st) {
      free(ins);
      return kd_fail_context(st, "%s (key %s)", op, rep.key.hex);
    }
    ins[0] = kd_link_input_of(lto, o.program_name ? o.program_name : "source");
  }
  for (size_t i = 0; i < r->input_count; ++i) ins[i + (r->source ? 1 : 0)] = r->inputs[i];
  /* The recipe's flags, then the variable pruning (see host_variables). */
  const char *flags[KD_MAX_RECIPE_LINK_FLAGS];
  char *kept[KD_MAX_RECIPE_LINK_FLAGS];
  size_t nf = 0, nk = 0;
  for (size_t i = 0; i < r->link_flag_count; ++i) flags[nf++] = r->link_flags[i];
  if (!r->keep_unused_variables) {
    flags[nf++] = "-optimize-unused-variables";
    for (size_t i = 0; i < r->host_variable_count; ++i) {
      size_t len = strlen(r->host_variables[i]) + sizeof "-variables-used=";
      if (!(kept[nk] = malloc(len))) break;
      snprintf(kept[nk], len, "-variables-used=%s", r->host_variables[i]);
      flags[nf++] = kept[nk++];
    }
  }
  kd_link_options lo;
  kd_link_options_init(&lo);
  lo.arch = r->nvrtc.arch;
  lo.lto = 1;
  lo.extra_flags = flags;
  lo.extra_flag_count = nf;
  double t = now_ms();
  if (!r->keep_unused_variables && nk < r->host_variable_count)
    st = kd_fail(KD_ERR_OUT_OF_MEMORY, "%s: no memory for the link flags", op);
  else
    st = kd_nvjitlink_link(ins, n_in, &lo, &cubin);
  rep.link_ms = now_ms() - t;
  for (size_t i = 0; i < nk; ++i) free(kept[i]);
  free(ins);
  kd_binary_destroy(lto);
  if (st) return kd_fail_context(st, "%s (key %s)", op, rep.key.hex);

  if (c) {
    if (*c->dir && disk_write(c, key, &rep.key, cubin) != 0) rep.disk_write_failed = 1;
    kd_binary *mine = NULL;
    kd_fail_keep keep; /* no memory for the cache's copy only costs a rebuild later: the build succeeded */
    kd_fail_keep_begin(&keep);
    kd_status copied = copy_binary(op, cubin, &mine);
    kd_fail_keep_end(&keep);
    pthread_mutex_lock(&c->lock);
    c->stats.builds++; /* counted whether or not the memory tier keeps it */
    if (rep.disk_write_failed) c->stats.disk_write_failures++;
    if (copied == KD_OK) memory_put(c, key, mine);
    pthread_mutex_unlock(&c->lock);
  }
  rep.origin = KD_BUILD_COMPILED;
  rep.total_ms = now_ms() - t0;
  if (report) *report = rep;
  *out = cubin;
  return KD_OK;
}
