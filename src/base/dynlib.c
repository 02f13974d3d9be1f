/* SPDX-License-Identifier: Apache-2.0 */
/* Search for a dynamically loaded toolkit library, and its identity (the
 * resolved file's path, size, modification time and a hash of its first and
 * last bytes) for cache keys, computed without loading it. */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "base/dynlib.h"
#include "base/status_internal.h"

#ifndef KDAG_CUDA_TOOLKIT_LIBDIR
#define KDAG_CUDA_TOOLKIT_LIBDIR "/usr/local/cuda/lib64"
#endif

static void *try_open(const char *path, char *tried, size_t tried_len,
                      char *found, size_t found_len) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  size_t used = strlen(tried);
  if (used + 1 < tried_len)
    snprintf(tried + used, tried_len - used, "%s%s", used ? ", " : "", path);
  if (h) snprintf(found, found_len, "%s", path);
  return h;
}

static int is_file(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* soname in dir, if that is a regular file (symlinks followed). */
static int try_dir(const char *dir, const char *soname, char *found, size_t found_len) {
  char path[1024];
  if (!dir || !*dir) return 0;
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, soname) >= sizeof path) return 0;
  if (!is_file(path)) return 0;
  snprintf(found, found_len, "%s", path);
  return 1;
}

/* soname in a folder named by /etc/ld.so.conf.d/ *.conf (one folder per
 * line; comments and include lines skipped). */
static int try_ld_conf(const char *soname, char *found, size_t found_len) {
  DIR *d = opendir("/etc/ld.so.conf.d");
  if (!d) return 0;
  int hit = 0;
  struct dirent *e;
  while (!hit && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 5, ".conf")) continue;
    char path[1024], line[1024];
    if ((size_t)snprintf(path, sizeof path, "/etc/ld.so.conf.d/%s", e->d_name) >= sizeof path) continue;
    FILE *f = fopen(path, "r");
    if (!f) continue;
    while (!hit && fgets(line, sizeof line, f)) {
      line[strcspn(line, "#\r\n")] = '\0';
      char *dir = line + strspn(line, " \t");
      dir[strcspn(dir, " \t")] = '\0';
      if (*dir == '/') hit = try_dir(dir, soname, found, found_len);
    }
    fclose(f);
  }
  closedir(d);
  return hit;
}

int kd_dynlib_locate(const char *env_override, const char *soname, const char *wheel_dir,
                     char *found, size_t found_len) {
  found[0] = '\0';
  const char *ov = env_override ? getenv(env_override) : NULL;
  if (ov && *ov) {
    if (!strchr(ov, '/') || !is_file(ov)) return 0; /* the loader decides (or fails) */
    snprintf(found, found_len, "%s", ov);
    return 1;
  }
  int hit = 0;
  const char *ld = getenv("LD_LIBRARY_PATH");
  if (ld && *ld) {
    char *copy = strdup(ld), *save = NULL;
    for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !hit; dir = strtok_r(NULL, ":", &save))
      hit = try_dir(dir, soname, found, found_len);
    free(copy);
    if (hit) return 1;
  }
  /* The loader's default folders (what ld.so.cache lists on common
   * distributions), then the toolkit kdag was built against. */
  static const char *const sys[] = {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                    "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                    "/lib64", "/usr/lib64", "/lib", "/usr/lib"};
  for (size_t i = 0; i < sizeof sys / sizeof sys[0]; ++i)
    if (try_dir(sys[i], soname, found, found_len)) return 1;
  /* The folders ldconfig was told about: a CUDA install adds its library
   * folder there (zz-cuda-13-0.conf, 988_cuda-13.conf), which is how the
   * loader finds NVRTC on a machine other than the one kdag was built on. */
  if (try_ld_conf(soname, found, found_len)) return 1;
  if (try_dir(KDAG_CUDA_TOOLKIT_LIBDIR, soname, found, found_len)) return 1;
  if (try_dir("/usr/local/cuda/lib64", soname, found, found_len)) return 1;
  const char *site = getenv("KDAG_PYTHON_SITE");
  if (site && *site) {
    char *copy = strdup(site), *save = NULL;
    char sub[1024];
    for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !hit; dir = strtok_r(NULL, ":", &save)) {
      snprintf(sub, sizeof sub, "%s/nvidia/cu13/lib", dir);
      hit = try_dir(sub, soname, found, found_len);
      if (hit) break;
      snprintf(sub, sizeof sub, "%s/nvidia/%s/lib", dir, wheel_dir);
      hit = try_dir(sub, soname, found, found_len);
    }
    free(copy);
  }
  return hit;
}

int kd_dynlib_identity(const char *path, char *out, size_t out_len) {
  char real[4096];
  if (!realpath(path, real)) return -1;
  int fd = open(real, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return -1;
  }
  /* 64 KiB from each end: the ELF header and section table, the build's
   * notes and version strings; with size and mtime, enough to tell two
   * builds apart without reading ~100 MB. */
  enum { KD_ID_CHUNK = 64 * 1024 };
  unsigned char *buf = malloc(2 * KD_ID_CHUNK);
  if (!buf) {
    close(fd);
    return -1;
  }
  size_t size = (size_t)sb.st_size, head = size < KD_ID_CHUNK ? size : KD_ID_CHUNK;
  size_t tail = size - head < KD_ID_CHUNK ? size - head : KD_ID_CHUNK;
  int ok = pread(fd, buf, head, 0) == (ssize_t)head &&
           pread(fd, buf + head, tail, (off_t)(size - tail)) == (ssize_t)tail;
  close(fd);
  uint64_t h = ok ? XXH3_64bits(buf, head + tail) : 0;
  free(buf);
  if (!ok) return -1;
  int n = snprintf(out, out_len, "%s|%llu|%lld.%09ld|%016llx", real, (unsigned long long)sb.st_size,
                   (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec, (unsigned long long)h);
  return n > 0 && (size_t)n < out_len ? 0 : -1;
}

void *kd_dynlib_open(const char *env_override, const char *soname,
                     const char *wheel_dir, char *tried, size_t tried_len,
                     char *found, size_t found_len) {
  char path[1024];
  void *h;
  tried[0] = '\0';
  found[0] = '\0';
  /* The file kd_dynlib_locate names, alone when it names one: its identity
   * went into cache keys, so another file loaded in its place (the loader's
   * pick after this one failed) would build entries stored under the wrong
   * key. tried says why it failed. */
  if (kd_dynlib_locate(env_override, soname, wheel_dir, path, sizeof path))
    return try_open(path, tried, tried_len, found, found_len);
  const char *ov = env_override ? getenv(env_override) : NULL;
  if (ov && *ov) {
    tried[0] = '\0';
    return try_open(ov, tried, tried_len, found, found_len);
  }
  if ((h = try_open(soname, tried, tried_len, found, found_len))) return h;
  snprintf(path, sizeof path, "%s/%s", KDAG_CUDA_TOOLKIT_LIBDIR, soname);
  if ((h = try_open(path, tried, tried_len, found, found_len))) return h;
  const char *site = getenv("KDAG_PYTHON_SITE");
  if (site && *site) {
    char *copy = strdup(site);
    char *save = NULL;
    for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !h;
         dir = strtok_r(NULL, ":", &save)) {
      snprintf(path, sizeof path, "%s/nvidia/cu13/lib/%s", dir, soname);
      if ((h = try_open(path, tried, tried_len, found, found_len))) break;
      snprintf(path, sizeof path, "%s/nvidia/%s/lib/%s", dir, wheel_dir, soname);
      h = try_open(path, tried, tried_len, found, found_len);
    }
    free(copy);
  }
  return h;
}

/* Resolves every name of lib in h; on failure writes lib->msg. */
static int resolve(kd_dynlib_lib *lib, void *h, const char *path) {
  void **slots = lib->fns; /* the owner's struct: one function pointer per name */
  for (size_t i = 0; i < lib->count; ++i) {
    void *fn = dlsym(h, lib->names[i]);
    if (!fn) {
      snprintf(lib->msg, sizeof lib->msg, "%s lacks the symbol %s: not a usable %s", path, lib->names[i], lib->what);
      return 0;
    }
    memcpy(&slots[i], &fn, sizeof fn);
  }
  return 1;
}

kd_status kd_dynlib_load(kd_dynlib_lib *lib, const char *op) {
  pthread_mutex_lock(&lib->lock);
  if (!lib->tried) {
    char tried[1536];
    lib->handle = kd_dynlib_open(lib->env, lib->soname, lib->wheel, tried, sizeof tried, lib->path, sizeof lib->path);
    if (!lib->handle) {
      lib->status = KD_ERR_LIBRARY_MISSING;
      snprintf(lib->msg, sizeof lib->msg, "%s (%s) not found; tried %s. %s", lib->what, lib->soname, tried, lib->hint);
    } else {
      lib->status = resolve(lib, lib->handle, lib->path) ? KD_OK : KD_ERR_LIBRARY_MISSING;
    }
    __atomic_store_n(&lib->tried, 1, __ATOMIC_RELEASE);
  }
  kd_status st = lib->status;
  pthread_mutex_unlock(&lib->lock);
  return st ? kd_fail(st, "%s: %s", op, lib->msg) : KD_OK;
}

kd_status kd_dynlib_load_file(kd_dynlib_lib *lib, const char *path, const char *op) {
  pthread_mutex_lock(&lib->lock);
  kd_status st = KD_OK;
  __atomic_store_n(&lib->tried, 1, __ATOMIC_RELEASE);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    st = kd_fail(KD_ERR_LIBRARY_MISSING, "%s: dlopen(%s) failed: %s", op, path, dlerror());
  } else if (!resolve(lib, h, path)) {
    dlclose(h);
    st = kd_fail(KD_ERR_LIBRARY_MISSING, "%s: %s", op, lib->msg);
  } else {
    lib->handle = h;
    lib->status = KD_OK;
    snprintf(lib->path, sizeof lib->path, "%s", path);
  }
  pthread_mutex_unlock(&lib->lock);
  return st;
}

int kd_dynlib_tried(kd_dynlib_lib *lib) { return __atomic_load_n(&lib->tried, __ATOMIC_ACQUIRE); }

kd_status kd_dynlib_identify(kd_dynlib_lib *lib, const char *op, const char **out) {
  char path[1024];
  pthread_mutex_lock(&lib->lock);
  int done = lib->id_done;
  pthread_mutex_unlock(&lib->lock);
  if (!done) {
    int found = kd_dynlib_locate(lib->env, lib->soname, lib->wheel, path, sizeof path);
    if (!found) {
      /* Not found on disk by name: load it and identify the loaded file. */
      kd_status st = kd_dynlib_load(lib, op);
      if (st) return st;
      Dl_info di;
      void *sym = NULL;
      memcpy(&sym, lib->fns, sizeof sym); /* the first symbol's address names the file */
      found = dladdr(sym, &di) && di.dli_fname;
      if (found) snprintf(path, sizeof path, "%s", di.dli_fname);
    }
    pthread_mutex_lock(&lib->lock);
    if (!lib->id_done && (!found || kd_dynlib_identity(path, lib->id, sizeof lib->id) != 0)) lib->id[0] = '\0';
    lib->id_done = 1;
    pthread_mutex_unlock(&lib->lock);
  }
  if (lib->id[0]) {
    *out = lib->id;
    return KD_OK;
  }
  kd_status st = kd_dynlib_load(lib, op);
  if (st) return st;
  return kd_fail(KD_ERR_LIBRARY_MISSING, "%s: cannot read the %s library file %s", op, lib->what, lib->path);
}
