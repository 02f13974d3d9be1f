/* SPDX-License-Identifier: Apache-2.0 */
/* kdag info: what kdag finds on this machine. Each part says why when it
 * is missing; nothing here needs a GPU. */
#include <cuda.h>
#include <string.h>

#include "base/dynlib.h"
#include "cli/cli.h"
#include "kdag/kdag.h"

static json_t *driver_part(int *usable) {
  json_t *d = json_object();
  int count = 0;
  kd_status st = kd_device_count(&count);
  *usable = st == KD_OK && count > 0;
  json_object_set_new(d, "usable", json_boolean(*usable));
  if (st) {
    json_object_set_new(d, "reason", json_string(kd_last_error()));
    return d;
  }
  json_t *devices = json_array();
  for (int i = 0; i < count; ++i) {
    kd_device_info info;
    json_t *dev = json_object();
    json_object_set_new(dev, "ordinal", json_integer(i));
    if (kd_device_query(i, &info) != KD_OK) {
      json_object_set_new(dev, "error", json_string(kd_last_error()));
    } else {
      if (i == 0) {
        char v[16];
        snprintf(v, sizeof v, "%d.%d", info.driver_version / 1000, info.driver_version % 1000 / 10);
        json_object_set_new(d, "version", json_string(v));
      }
      char sm[16];
      snprintf(sm, sizeof sm, "sm_%d%d", info.cc_major, info.cc_minor);
      json_object_set_new(dev, "name", json_string(info.name));
      json_object_set_new(dev, "arch", json_string(sm));
      json_object_set_new(dev, "sm_count", json_integer(info.sm_count));
      json_object_set_new(dev, "memory_bytes", json_integer((json_int_t)info.memory_bytes));
      json_object_set_new(dev, "pci_bus_id", json_string(info.pci_bus_id));
      json_object_set_new(dev, "max_ptx_isa", json_integer(info.max_ptx_isa));
    }
    json_array_append_new(devices, dev);
  }
  json_object_set_new(d, "devices", devices);
  return d;
}

static json_t *library_part(kd_status (*version)(int *, int *), const kd_dynlib_lib *lib) {
  json_t *l = json_object();
  int major = 0, minor = 0;
  kd_status st = version(&major, &minor);
  json_object_set_new(l, "found", json_boolean(st == KD_OK));
  if (st) {
    json_object_set_new(l, "reason", json_string(kd_last_error()));
    return l;
  }
  char v[16];
  snprintf(v, sizeof v, "%d.%d", major, minor);
  json_object_set_new(l, "version", json_string(v));
  json_object_set_new(l, "path", json_string(lib->path));
  return l;
}

static json_t *mathdx_part(void) {
  json_t *m = json_object();
  kd_mathdx_info info;
  kd_status st = kd_mathdx_find(&info);
  json_object_set_new(m, "found", json_boolean(st == KD_OK));
  if (st) {
    json_object_set_new(m, "reason", json_string(kd_last_error()));
    return m;
  }
  json_object_set_new(m, "root", json_string(info.root));
  json_object_set_new(m, "headers_version", json_string(info.headers_version));
  json_object_set_new(m, "libmathdx_version", json_string(info.libmathdx_version));
  json_object_set_new(m, "libmathdx_path", json_string(info.libmathdx_path));
  return m;
}

typedef struct totals {
  uint64_t entries, bytes;
} totals;

static int add_entry(void *user, const kd_cache_entry_info *e) {
  totals *t = user;
  t->entries++;
  t->bytes += e->bytes;
  return 0;
}

static json_t *cache_part(void) {
  json_t *j = json_object();
  kd_cubin_cache *c;
  if (kd_cubin_cache_create(NULL, &c) != KD_OK) {
    json_object_set_new(j, "usable", json_false());
    json_object_set_new(j, "reason", json_string(kd_last_error()));
    return j;
  }
  json_object_set_new(j, "usable", json_true());
  json_object_set_new(j, "dir", json_string(kd_cubin_cache_dir(c)));
  kd_cubin_cache_stats st;
  kd_cubin_cache_stats_get(c, &st);
  json_object_set_new(j, "max_size", json_integer((json_int_t)st.max_size));
  totals t = {0, 0};
  if (*kd_cubin_cache_dir(c) && kd_cubin_cache_list(c, add_entry, &t) != KD_OK)
    json_object_set_new(j, "reason", json_string(kd_last_error()));
  json_object_set_new(j, "entries", json_integer((json_int_t)t.entries));
  json_object_set_new(j, "bytes", json_integer((json_int_t)t.bytes));
  kd_cubin_cache_destroy(c);
  return j;
}

static void print_library(const char *label, json_t *l) {
  if (json_is_true(json_object_get(l, "found")))
    printf("%-10s %s (%s)\n", label, json_string_value(json_object_get(l, "version")),
           json_string_value(json_object_get(l, "path")));
  else
    printf("%-10s not found: %s\n", label, json_string_value(json_object_get(l, "reason")));
}

static void print_text(json_t *a) {
  printf("kdag       %s\n", json_string_value(json_object_get(a, "kdag")));
  printf("toolkit    built against CUDA %s\n", json_string_value(json_object_get(a, "toolkit")));
  json_t *d = json_object_get(a, "driver");
  if (!json_is_true(json_object_get(d, "usable"))) {
    printf("driver     no usable CUDA device: %s\n", json_string_value(json_object_get(d, "reason")));
  } else {
    printf("driver     CUDA %s\n", json_string_value(json_object_get(d, "version")));
    size_t i;
    json_t *dev;
    json_array_foreach(json_object_get(d, "devices"), i, dev) {
      if (json_object_get(dev, "error")) {
        printf("device %zu   %s\n", i, json_string_value(json_object_get(dev, "error")));
        continue;
      }
      char mem[32];
      cli_bytes(mem, sizeof mem, (double)json_integer_value(json_object_get(dev, "memory_bytes")));
      printf("device %zu   %s, %s, %lld SMs, %s, PCI %s\n", i, json_string_value(json_object_get(dev, "name")),
             json_string_value(json_object_get(dev, "arch")), (long long)json_integer_value(json_object_get(dev, "sm_count")),
             mem, json_string_value(json_object_get(dev, "pci_bus_id")));
    }
  }
  print_library("nvrtc", json_object_get(a, "nvrtc"));
  print_library("nvjitlink", json_object_get(a, "nvjitlink"));
  json_t *m = json_object_get(a, "mathdx");
  if (json_is_true(json_object_get(m, "found")))
    printf("mathdx     %s in %s; libmathdx %s\n", json_string_value(json_object_get(m, "headers_version")),
           json_string_value(json_object_get(m, "root")),
           *json_string_value(json_object_get(m, "libmathdx_version")) ? json_string_value(json_object_get(m, "libmathdx_version"))
                                                                       : "not installed");
  else
    printf("mathdx     not found: %s\n", json_string_value(json_object_get(m, "reason")));
  json_t *c = json_object_get(a, "cache");
  if (!json_is_true(json_object_get(c, "usable"))) {
    printf("cache      unusable: %s\n", json_string_value(json_object_get(c, "reason")));
  } else {
    char bytes[32], cap[32];
    cli_bytes(bytes, sizeof bytes, (double)json_integer_value(json_object_get(c, "bytes")));
    json_int_t max = json_integer_value(json_object_get(c, "max_size"));
    cli_bytes(cap, sizeof cap, (double)max);
    const char *dir = json_string_value(json_object_get(c, "dir"));
    printf("cache      %s: %lld entries, %s (cap %s)\n", *dir ? dir : "(memory only)",
           (long long)json_integer_value(json_object_get(c, "entries")), bytes, max ? cap : "none");
  }
}

int cmd_info(cli *c, int argc, char **argv) {
  if (argc > 0) return cli_usage_error(c, "info", "unexpected argument '%s'", argv[0]);
  json_t *a = json_object();
  json_object_set_new(a, "kdag", json_string(kd_version_string()));
  char tk[16];
  snprintf(tk, sizeof tk, "%d.%d", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
  json_object_set_new(a, "toolkit", json_string(tk));
  int usable;
  json_object_set_new(a, "driver", driver_part(&usable));
  json_object_set_new(a, "nvrtc", library_part(kd_nvrtc_version, &kd_nvrtc_lib));
  json_object_set_new(a, "nvjitlink", library_part(kd_nvjitlink_version, &kd_nvjitlink_lib));
  json_object_set_new(a, "mathdx", mathdx_part());
  json_object_set_new(a, "cache", cache_part());
  if (c->json) cli_print_json(a);
  else {
    print_text(a);
    json_decref(a);
  }
  return usable ? KDAG_EXIT_OK : KDAG_EXIT_NO_DEVICE;
}
