/* SPDX-License-Identifier: Apache-2.0 */
/* What the fuzz targets share (shared.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/shared.h"
#include "tests/null_driver.h"

int64_t kdf_number(kdf_input *in) {
  static const int64_t odd[] = {-1,           -2,           INT64_MIN, INT64_MAX,  INT64_MAX / 2, 1ll << 31,
                                (1ll << 31) - 1, 1ll << 32, 1ll << 62, (1ll << 62) - 1, 3037000499ll, 3037000500ll,
                                65536,        1ll << 40,    -(1ll << 62), 4096};
  uint8_t b = kdf_u8(in);
  if (b < 200) return b % 10;
  if (b < 200 + 16) return odd[b - 200];
  return (int64_t)kdf_u64(in);
}

kd_view kdf_wild_view(kdf_input *in, kd_tensor tensor, int rank) {
  kd_view v;
  memset(&v, 0, sizeof v);
  v.tensor = tensor;
  v.rank = rank;
  v.offset = kdf_number(in);
  for (int i = 0; i < KD_MAX_RANK; ++i) {
    v.shape[i] = kdf_number(in);
    v.strides[i] = kdf_number(in);
  }
  return v;
}

kd_session *kdf_null_session(const char *target, uint32_t ring, kdag_null_api *api) {
  static kd_session *s;
  if (!s) {
    setenv("KDAG_CUDA_DRIVER_PATH", KDAG_NULL_DRIVER, 1);
    kd_session_options o;
    kd_session_options_init(&o);
    o.backend = KD_BACKEND_CUDA;
    if (ring) o.completion_ring_capacity = ring;
    if (kd_session_create(&o, &s)) {
      kdf_violation(target, "kd_session_create: %s", kd_last_error());
      s = NULL;
    }
  }
  if (s && !kdag_null_api_get(KDAG_NULL_DRIVER, api)) kdf_violation(target, "the null driver is not loaded");
  return s;
}

static uint32_t launch_number(kdf_input *in) {
  static const uint32_t odd[] = {0, 1025, 2048, 65535, 65536, 1u << 31, UINT32_MAX, 49152, 49153, 1u << 20};
  uint8_t b = kdf_u8(in);
  return b < 200 ? 1u + b % 4u : odd[b % (sizeof odd / sizeof *odd)];
}

kd_launch_config kdf_launch_config(kdf_input *in) {
  kd_launch_config cfg;
  for (int i = 0; i < 3; ++i) {
    cfg.grid[i] = launch_number(in);
    cfg.block[i] = launch_number(in);
  }
  cfg.shared_bytes = kdf_u8(in) < 230 ? 0 : launch_number(in);
  uint8_t f = kdf_u8(in); /* mostly none, sometimes PDL, rarely an unknown bit */
  cfg.flags = f < 200 ? 0 : f < 250 ? KD_LAUNCH_PDL : 1u << (f % 32);
  return cfg;
}

kd_arg kdf_value(kdf_input *in) {
  static const unsigned char bytes[64];
  uint8_t b = kdf_u8(in);
  switch (b % 11) {
  case 0: return kd_arg_i32((int32_t)kdf_u8(in));
  case 1: return kd_arg_i64((int64_t)kdf_u64(in));
  case 2: return kd_arg_u32(kdf_u8(in));
  case 3: return kd_arg_u64(kdf_u64(in));
  case 4: return kd_arg_f32(1.5f);
  case 5: return kd_arg_f64(2.5);
  case 6: case 7: {
    size_t n = kdf_u8(in) % 41;
    return kd_arg_bytes(n || b % 2 ? bytes : NULL, n);
  }
  case 8: {
    kd_arg a = kd_arg_i32(0);
    a.kind = KD_ARG_TENSOR; /* a tensor kind passed as a value */
    return a;
  }
  default: {
    kd_arg a = kd_arg_i32(0);
    a.kind = (kd_arg_kind)(b % 2 ? -1 : 9); /* no kind */
    return a;
  }
  }
}

size_t kdf_value_size(const kd_arg *a) {
  switch (a->kind) {
  case KD_ARG_I32: case KD_ARG_U32: case KD_ARG_F32: return 4;
  case KD_ARG_BYTES: return a->v.bytes.size;
  default: return 8;
  }
}

int kdf_signature(kdf_input *in, uint32_t *sizes, int cap) {
  int count = kdf_u8(in) % (cap + 1);
  for (int i = 0; i < count; ++i) {
    uint8_t b = kdf_u8(in);
    sizes[i] = b % 3 == 0 ? 8u : b % 3 == 1 ? 4u : 1u + b % 40u;
  }
  return count;
}

void kdf_kernel_ptx(char *buf, size_t cap, int count, const uint32_t *sizes) {
  int at = snprintf(buf, cap, ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(");
  for (int i = 0; i < count && at >= 0 && (size_t)at < cap; ++i) {
    const char *type = sizes[i] == 8 ? ".u64" : sizes[i] == 4 ? ".u32" : NULL;
    if (type) at += snprintf(buf + at, cap - (size_t)at, "%s.param %s p%d", i ? ", " : "", type, i);
    else at += snprintf(buf + at, cap - (size_t)at, "%s.param .align 4 .b8 p%d[%u]", i ? ", " : "", i, sizes[i]);
  }
  if (at >= 0 && (size_t)at < cap) snprintf(buf + at, cap - (size_t)at, ")\n{\n\tret;\n}\n");
}

size_t kdf_call_length(const char *msg) {
  size_t n = 0;
  while (msg[n] == '_' || (msg[n] >= 'a' && msg[n] <= 'z') || (msg[n] >= '0' && msg[n] <= '9')) ++n;
  return msg[0] == 'k' && msg[1] == 'd' && msg[2] == '_' && msg[n] == ':' && msg[n + 1] == ' ' ? n : 0;
}
