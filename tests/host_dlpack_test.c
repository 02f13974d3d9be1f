/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: DLPack import on a HOST session (kDLCPU). The legacy
 * DLManagedTensor comes from DLPack's own header (Debian's libdlpack-dev),
 * so its layout is checked against the real thing; the versioned struct,
 * which that header predates, from kdag's declaration of the spec. */
#include <dlpack/dlpack.h>

#include "kdag_test.h"
#include "session/dlpack.h"

static int deleted;
static void legacy_deleter(DLManagedTensor *self) { deleted++, (void)self; }
static void versioned_deleter(kd_dl_managed_versioned *self) { deleted++, (void)self; }

static DLManagedTensor legacy(float *data, int ndim, int64_t *shape, int64_t *strides) {
  DLManagedTensor m;
  memset(&m, 0, sizeof m);
  m.dl_tensor.data = data;
  m.dl_tensor.device.device_type = kDLCPU;
  m.dl_tensor.ndim = ndim;
  m.dl_tensor.dtype.code = kDLFloat;
  m.dl_tensor.dtype.bits = 32;
  m.dl_tensor.dtype.lanes = 1;
  m.dl_tensor.shape = shape;
  m.dl_tensor.strides = strides;
  m.deleter = legacy_deleter;
  return m;
}

/* Runs y *= alpha over the view on the session and waits. */
static void scale(kd_session *s, kd_view v, double alpha) {
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_scale(g, "scale", v, alpha, NULL));
  kd_ticket t;
  KDT_OK(kd_graph_submit(g, &t));
  int done = 0;
  while (!done) KDT_OK(kd_ticket_done(s, t, &done));
  kd_graph_destroy(g);
}

/* A C-contiguous 2 x 3 array arrives as a compact 3 x 2 tensor (axes
 * reversed), computed on in place; the deleter runs once kdag is done. */
Test(host_dlpack, a_row_major_array_arrives_compact_with_its_axes_reversed) {
  kd_session *s = kdt_host_session();
  float a[6] = {0, 1, 2, 3, 4, 5}; /* [[0, 1, 2], [3, 4, 5]] */
  int64_t shape[2] = {2, 3};
  DLManagedTensor m = legacy(a, 2, shape, NULL);
  deleted = 0;
  kd_tensor t;
  kd_view v;
  KDT_OK(kd_tensor_from_dlpack(s, &m, KD_DLPACK_LEGACY, NULL, &t, &v));
  kd_tensor_desc info;
  KDT_OK(kd_tensor_info(s, t, &info));
  cr_assert_eq(info.rank, 2);
  cr_assert(info.shape[0] == 3 && info.shape[1] == 2, "shape (%lld, %lld)", (long long)info.shape[0],
            (long long)info.shape[1]);
  cr_assert(v.rank == 2 && v.shape[0] == 3 && v.shape[1] == 2 && v.strides[0] == 1 && v.strides[1] == 3);
  /* Element (i, j) of the producer is (j, i) here: (1, 2) = 5 sits at
   * 2 + 1 * 3 = 5. */
  float back[6];
  KDT_OK(kd_tensor_download(s, t, back, sizeof back));
  cr_assert_eq(back[2 + 1 * 3], 5.0f);
  scale(s, v, 2.0);
  cr_assert_eq(a[5], 10.0f, "computed in the producer's memory");
  cr_assert_eq(deleted, 0);
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(deleted, 1);
  kd_session_destroy(s);
  cr_assert_eq(deleted, 1);
}

/* Two columns of a 4 x 4 row-major array: strided, so a view of a
 * one-dimensional tensor over its elements; only they change. */
Test(host_dlpack, a_strided_slice_arrives_as_a_view) {
  kd_session *s = kdt_host_session();
  float a[16];
  for (int i = 0; i < 16; ++i) a[i] = (float)i;
  int64_t shape[2] = {4, 2}, strides[2] = {4, 1};
  DLManagedTensor m = legacy(a, 2, shape, strides);
  m.dl_tensor.byte_offset = 1 * sizeof(float); /* columns 1 and 2 */
  deleted = 0;
  kd_tensor t;
  kd_view v;
  KDT_OK(kd_tensor_from_dlpack(s, &m, KD_DLPACK_LEGACY, NULL, &t, &v));
  cr_assert(v.rank == 2 && v.shape[0] == 2 && v.shape[1] == 4 && v.strides[0] == 1 && v.strides[1] == 4 &&
            v.offset == 0);
  kd_tensor_desc info;
  KDT_OK(kd_tensor_info(s, t, &info));
  cr_assert(info.rank == 1 && info.shape[0] == 14, "the elements from (0, 1) to (3, 2): %lld", (long long)info.shape[0]);
  scale(s, v, -1.0);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 4; ++c) {
      float want = (float)(r * 4 + c) * (c == 1 || c == 2 ? -1.0f : 1.0f);
      cr_assert_eq(a[r * 4 + c], want, "(%d, %d): %g", r, c, (double)a[r * 4 + c]);
    }
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(deleted, 1);
  kd_session_destroy(s);
}

static kd_dl_managed_versioned versioned(float *data, int64_t *shape) {
  kd_dl_managed_versioned m;
  memset(&m, 0, sizeof m);
  m.version.major = 1;
  m.version.minor = 1;
  m.dl_tensor.data = data;
  m.dl_tensor.device.device_type = KD_DL_CPU;
  m.dl_tensor.ndim = 1;
  m.dl_tensor.dtype = (kd_dl_dtype){KD_DL_FLOAT, 32, 1};
  m.dl_tensor.shape = shape;
  m.deleter = versioned_deleter;
  return m;
}

Test(host_dlpack, versioned_tensors_and_their_refusals) {
  kd_session *s = kdt_host_session();
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t shape[1] = {8};
  kd_tensor t = {7};
  kd_view v;
  deleted = 0;
  kd_dl_managed_versioned m = versioned(a, shape);
  m.version.major = 2;
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_VERSION_MISMATCH,
            "DLPack 2.1, kdag reads major version 1");
  cr_assert_eq(deleted, 1, "a consumer that cannot read it deletes it");
  cr_assert_eq(t.bits, 0);
  m = versioned(a, shape);
  m.dl_tensor.dtype.bits = 8; /* an 8-bit float: no kdag dtype */
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_INVALID_ARGUMENT,
            "code 2, 8 bits, 1 lanes");
  m = versioned(a, shape);
  m.dl_tensor.dtype.lanes = 4;
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_INVALID_ARGUMENT, "4 lanes");
  m = versioned(a, shape);
  m.dl_tensor.device.device_type = KD_DL_CUDA;
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_NOT_RESIDENT,
            "DLPack device type 2 on a HOST session");
  m = versioned(a, shape);
  int64_t negative[1] = {-1};
  m.dl_tensor.strides = negative;
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_INVALID_ARGUMENT,
            "strides[0] = -1 is negative");
  m = versioned(a, shape);
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, &m, &t, &v), KD_ERR_INVALID_ARGUMENT,
            "wait_event on a HOST session");
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, (kd_dlpack_kind)5, NULL, &t, &v), KD_ERR_INVALID_ARGUMENT, "kind 5");
  KDT_FAILS(kd_tensor_from_dlpack(s, NULL, KD_DLPACK_VERSIONED, NULL, &t, &v), KD_ERR_INVALID_ARGUMENT,
            "argument managed is NULL");
  KDT_FAILS(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, NULL), KD_ERR_INVALID_ARGUMENT,
            "argument out_view is NULL");
  cr_assert_eq(deleted, 1, "refusals after the version check leave the tensor the caller's");
  /* READ_ONLY: readable, never written. */
  m = versioned(a, shape);
  m.flags = KD_DL_FLAG_READ_ONLY;
  KDT_OK(kd_tensor_from_dlpack(s, &m, KD_DLPACK_VERSIONED, NULL, &t, &v));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  KDT_FAILS(kd_graph_op_scale(g, "in place", v, 2.0, NULL), KD_ERR_INVALID_ARGUMENT, "node 'in place' (#0)");
  cr_assert(strstr(kd_last_error(), "read-only"));
  float out[8];
  KDT_OK(kd_tensor_download(s, t, out, sizeof out));
  cr_assert_eq(out[7], 8.0f);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(deleted, 2);
  kd_session_destroy(s);
}

/* A kdag tensor out as DLPack (axes reversed back, strides given), into
 * kdag again, and the reference the export holds given back by the
 * consumer's deleter call. */
Test(host_dlpack, export_reverses_the_axes_back_and_holds_the_tensor_until_deleted) {
  kd_session *s = kdt_host_session();
  kd_tensor_desc d = {.dtype = KD_F64, .rank = 2, .shape = {3, 2}};
  double x[6] = {0, 1, 2, 3, 4, 5};
  kd_tensor t;
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &t));
  kd_graph *g; /* an in-flight write the export must wait for */
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_op_scale(g, "x *= 10", kd_whole(t), 10.0, NULL));
  KDT_OK(kd_graph_submit(g, NULL));
  void *managed = NULL, *event = &managed;
  KDT_FAILS(kd_tensor_to_dlpack(s, t, KD_DLPACK_VERSIONED, &event, &managed), KD_ERR_INVALID_ARGUMENT,
            "out_event on a HOST session");
  KDT_OK(kd_tensor_to_dlpack(s, t, KD_DLPACK_VERSIONED, NULL, &managed));
  kd_dl_managed_versioned *m = managed;
  cr_assert(m->version.major == 1 && m->flags == 0 && m->manager_ctx && m->deleter);
  cr_assert(m->dl_tensor.device.device_type == KD_DL_CPU && m->dl_tensor.ndim == 2);
  cr_assert(m->dl_tensor.dtype.code == KD_DL_FLOAT && m->dl_tensor.dtype.bits == 64 && m->dl_tensor.dtype.lanes == 1);
  cr_assert(m->dl_tensor.shape[0] == 2 && m->dl_tensor.shape[1] == 3, "DLPack (rows, cols) = kdag (cols, rows)");
  cr_assert(m->dl_tensor.strides[0] == 3 && m->dl_tensor.strides[1] == 1, "C-contiguous");
  const double *data = m->dl_tensor.data;
  cr_assert_eq(data[1 * 3 + 2], 50.0, "row 1, column 2 is kdag's (2, 1): the scale has run");
  KDT_OK(kd_tensor_release(s, t)); /* the export still holds it */
  /* Back into kdag: the same memory, the same shape. */
  kd_tensor back;
  kd_view v;
  KDT_OK(kd_tensor_from_dlpack(s, m, KD_DLPACK_VERSIONED, NULL, &back, &v));
  kd_tensor_desc info;
  KDT_OK(kd_tensor_info(s, back, &info));
  cr_assert(info.rank == 2 && info.shape[0] == 3 && info.shape[1] == 2 && info.dtype == KD_F64);
  double out[6];
  KDT_OK(kd_tensor_download(s, back, out, sizeof out));
  cr_assert_eq(out[5], 50.0);
  kd_graph_destroy(g);
  KDT_OK(kd_tensor_info(s, t, &info)); /* the export's reference keeps the handle */
  /* Releasing the import runs the export's deleter from kdag's own
   * release callback, which lets go of the tensor. */
  KDT_OK(kd_tensor_release(s, back));
  KDT_FAILS(kd_tensor_info(s, t, &info), KD_ERR_RELEASED, "kd_tensor_info");
  /* An import of an export left to kd_session_destroy: the deleter then
   * runs after the session is gone, and frees only its own struct. */
  KDT_OK(kd_tensor_from_host(s, &d, x, sizeof x, &t));
  KDT_OK(kd_tensor_to_dlpack(s, t, KD_DLPACK_LEGACY, NULL, &managed));
  KDT_OK(kd_tensor_from_dlpack(s, managed, KD_DLPACK_LEGACY, NULL, &back, &v));
  kd_session_destroy(s);
}

Test(host_dlpack, export_of_a_read_only_or_unwritten_tensor) {
  kd_session *s = kdt_host_session();
  float a[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  kd_dl_managed_versioned in = versioned(a, shape);
  in.flags = KD_DL_FLAG_READ_ONLY;
  deleted = 0;
  kd_tensor t, fresh;
  kd_view v;
  KDT_OK(kd_tensor_from_dlpack(s, &in, KD_DLPACK_VERSIONED, NULL, &t, &v));
  void *managed;
  KDT_OK(kd_tensor_to_dlpack(s, t, KD_DLPACK_LEGACY, NULL, &managed));
  DLManagedTensor *legacy_out = managed; /* checked against DLPack's own header */
  cr_assert_eq(legacy_out->dl_tensor.data, (void *)a, "no copy, either way");
  cr_assert_eq(legacy_out->dl_tensor.shape[0], 4);
  KDT_OK(kd_tensor_release(s, t));
  cr_assert_eq(deleted, 0, "the export holds it");
  legacy_out->deleter(legacy_out);
  cr_assert_eq(deleted, 1, "the consumer's deleter gave it back, and kdag its producer's");
  KDT_OK(kd_tensor_from_dlpack(s, &in, KD_DLPACK_VERSIONED, NULL, &t, &v));
  KDT_OK(kd_tensor_to_dlpack(s, t, KD_DLPACK_VERSIONED, NULL, &managed));
  cr_assert_eq(((kd_dl_managed_versioned *)managed)->flags, KD_DL_FLAG_READ_ONLY);
  ((kd_dl_managed_versioned *)managed)->deleter(managed);
  KDT_OK(kd_tensor_release(s, t));
  kd_tensor_desc d = {.dtype = KD_F32, .rank = 1, .shape = {4}};
  KDT_OK(kd_tensor_create(s, &d, &fresh));
  KDT_FAILS(kd_tensor_to_dlpack(s, fresh, KD_DLPACK_VERSIONED, NULL, &managed), KD_ERR_UNINITIALIZED, "never written");
  KDT_FAILS(kd_tensor_to_dlpack(s, fresh, KD_DLPACK_VERSIONED, NULL, NULL), KD_ERR_INVALID_ARGUMENT, "out_managed");
  KDT_OK(kd_tensor_release(s, fresh));
  KDT_FAILS(kd_tensor_to_dlpack(s, fresh, KD_DLPACK_VERSIONED, NULL, &managed), KD_ERR_RELEASED, "kd_tensor_to_dlpack");
  kd_session_destroy(s);
  cr_assert_eq(deleted, 2);
}
