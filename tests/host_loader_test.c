/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: the dlopen'd driver and toolkit libraries fail cleanly.
 * Each Criterion test runs in its own process, so each can point the loader
 * somewhere before kdag's first use of it. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kdag_test.h"

#ifndef KDAG_TEST_STUB_LIBCUDA
#define KDAG_TEST_STUB_LIBCUDA "/usr/local/cuda/lib64/stubs/libcuda.so"
#endif

static kd_session *create(kd_backend b, kd_status *st) {
  kd_session_options o;
  kd_session_options_init(&o);
  o.backend = b;
  kd_session *s = NULL;
  *st = kd_session_create(&o, &s);
  return s;
}

Test(host_loader, missing_driver_is_driver_missing) {
  setenv("KDAG_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
  kd_status st;
  kd_session *s = create(KD_BACKEND_CUDA, &st);
  cr_assert_null(s);
  cr_assert_eq(st, KD_ERR_DRIVER_MISSING, "%s: %s", kd_status_name(st), kd_last_error());
  cr_assert(strstr(kd_last_error(), "kd_session_create") && strstr(kd_last_error(), "/nonexistent/libcuda.so.1"),
            "%s", kd_last_error());
  /* The same failure, with its message, on every later call. */
  s = create(KD_BACKEND_CUDA, &st);
  cr_assert_eq(st, KD_ERR_DRIVER_MISSING);
  cr_assert(strstr(kd_last_error(), "could not be loaded"));
}

Test(host_loader, auto_falls_back_to_host_with_reason) {
  setenv("KDAG_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
  kd_status st;
  kd_session *s = create(KD_BACKEND_AUTO, &st);
  cr_assert_eq(st, KD_OK);
  cr_assert_eq(kd_session_backend(s), KD_BACKEND_HOST);
  cr_assert(strstr(kd_session_backend_reason(s), "AUTO chose HOST") &&
            strstr(kd_session_backend_reason(s), "libcuda.so.1"),
            "%s", kd_session_backend_reason(s));
  kd_device_info info;
  KDT_FAILS(kd_session_device_info(s, &info), KD_ERR_WRONG_BACKEND, "not CUDA");
  kd_session_destroy(s);
}

Test(host_loader, toolkit_stub_is_recognised) {
  FILE *f = fopen(KDAG_TEST_STUB_LIBCUDA, "rb");
  if (!f) cr_skip_test("host lane: no toolkit stub at %s", KDAG_TEST_STUB_LIBCUDA);
  fclose(f);
  setenv("KDAG_CUDA_DRIVER_PATH", KDAG_TEST_STUB_LIBCUDA, 1);
  kd_status st;
  kd_session *s = create(KD_BACKEND_CUDA, &st);
  cr_assert_null(s);
  cr_assert_eq(st, KD_ERR_DRIVER_MISSING, "%s: %s", kd_status_name(st), kd_last_error());
  cr_assert(strstr(kd_last_error(), "CUDA_ERROR_STUB_LIBRARY") && strstr(kd_last_error(), "stub"),
            "%s", kd_last_error());
  s = create(KD_BACKEND_AUTO, &st);
  cr_assert_eq(st, KD_OK);
  cr_assert_eq(kd_session_backend(s), KD_BACKEND_HOST);
  cr_assert(strstr(kd_session_backend_reason(s), "STUB"), "%s", kd_session_backend_reason(s));
  kd_session_destroy(s);
}

Test(host_loader, missing_nvrtc_is_library_missing) {
  setenv("KDAG_NVRTC_PATH", "/nonexistent/libnvrtc.so.13", 1);
  int major, minor;
  KDT_FAILS(kd_nvrtc_version(&major, &minor), KD_ERR_LIBRARY_MISSING, "/nonexistent/libnvrtc.so.13");
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "compute_90"};
  kd_binary *b = (kd_binary *)0x1;
  KDT_FAILS(kd_nvrtc_compile("__global__ void k() {}", &o, &b), KD_ERR_LIBRARY_MISSING, "KDAG_NVRTC_PATH");
  cr_assert_null(b);
}

/* The NVRTC that cache keys name is the file kd_dynlib_locate finds: when
 * that one does not load, kdag says so rather than let the loader pick
 * another (which would then build entries stored under the first one's
 * identity). Here the file found first, in $LD_LIBRARY_PATH as read at the
 * call, is no library; the loader, which read the variable at process
 * start, would find the toolkit's. */
Test(host_loader, a_located_nvrtc_that_does_not_load_is_not_replaced) {
  char *dir = kdt_temp_dir();
  char fake[256];
  snprintf(fake, sizeof fake, "%s/libnvrtc.so.13", dir);
  kdt_write_file(fake, "not an ELF file\n");
  unsetenv("KDAG_NVRTC_PATH");
  setenv("LD_LIBRARY_PATH", dir, 1);
  int major, minor;
  KDT_FAILS(kd_nvrtc_version(&major, &minor), KD_ERR_LIBRARY_MISSING, fake);
  kdt_remove_dir(dir);
}

Test(host_loader, missing_nvjitlink_is_library_missing) {
  setenv("KDAG_NVJITLINK_PATH", "/nonexistent/libnvJitLink.so.13", 1);
  int major, minor;
  KDT_FAILS(kd_nvjitlink_version(&major, &minor), KD_ERR_LIBRARY_MISSING, "nvJitLink");
}

Test(host_loader, toolkit_libraries_load) {
  int major = 0, minor = 0;
  KDT_OK(kd_nvrtc_version(&major, &minor));
  cr_assert_geq(major, 12);
  KDT_OK(kd_nvjitlink_version(&major, &minor));
  cr_assert_geq(major, 12);
}
