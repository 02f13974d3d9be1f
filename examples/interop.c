/* SPDX-License-Identifier: Apache-2.0 */
/* examples/interop.c — memory that is not kdag's, in and out of a graph.
 *
 * A 2 x 3 row-major array, as NumPy, PyTorch or CuPy would hold it, enters
 * kdag without a copy: on a HOST session the caller's own memory, wrapped
 * with kd_tensor_wrap and handed back through a release callback; on a
 * CUDA session a DLPack tensor (kdag exports one of its own here, where a
 * program would take one from another library). kdag sees it column-major,
 * as a 3 x 2 tensor; a graph scales it in place; the result goes out as
 * DLPack again, row-major. (A program that links the CUDA driver would
 * also take an event for the consumer's stream: kd_tensor_to_dlpack's
 * out_event, destroyed with cuEventDestroy.) */
#include <stdio.h>
#include <kdag/kdag.h>

#define CHECK(call) do { kd_status st_ = (call); if (st_) { \
    fprintf(stderr, "%s: %s\n", kd_status_name(st_), kd_last_error()); return 1; } } while (0)

/* The two DLPack fields this example reads, at their offsets in
 * DLManagedTensorVersioned (a program would include dlpack.h instead). */
typedef struct { void *data; int32_t type, id; int32_t ndim; uint8_t code, bits; uint16_t lanes;
                 int64_t *shape, *strides; uint64_t byte_offset; } dl_tensor;
typedef struct dl_managed { uint32_t major, minor; void *ctx; void (*deleter)(struct dl_managed *);
                            uint64_t flags; dl_tensor t; } dl_managed;

static int handed_back;
static void give_back(void *user) { (void)user, handed_back++; }

int main(void) {
  float rows[2][3] = {{1, 2, 3}, {4, 5, 6}}; /* row-major, the producer's */
  kd_session *s;
  CHECK(kd_session_create(NULL, &s));
  int cuda = kd_session_backend(s) == KD_BACKEND_CUDA;
  kd_tensor t;
  if (!cuda) { /* the caller's memory itself */
    kd_external_desc d;
    kd_external_desc_init(&d);
    d.data = rows;
    d.dtype = KD_F32;
    d.rank = 2;
    d.shape[0] = 3, d.shape[1] = 2; /* row-major 2 x 3 is column-major 3 x 2 */
    d.release = give_back;
    CHECK(kd_tensor_wrap(s, &d, &t));
  } else { /* a DLPack tensor from "another library" */
    kd_tensor_desc d = {.dtype = KD_F32, .rank = 2, .shape = {3, 2}};
    kd_tensor mine;
    void *managed;
    kd_view v;
    CHECK(kd_tensor_from_host(s, &d, rows, sizeof rows, &mine));
    CHECK(kd_tensor_to_dlpack(s, mine, KD_DLPACK_VERSIONED, NULL, &managed));
    CHECK(kd_tensor_release(s, mine));
    CHECK(kd_tensor_from_dlpack(s, managed, KD_DLPACK_VERSIONED, NULL, &t, &v));
  }
  kd_graph *g;
  CHECK(kd_graph_create(s, &g));
  CHECK(kd_graph_op_scale(g, "x *= 10", kd_whole(t), 10.0, NULL));
  CHECK(kd_graph_submit(g, NULL));

  void *out;
  CHECK(kd_tensor_to_dlpack(s, t, KD_DLPACK_VERSIONED, NULL, &out));
  dl_managed *m = out;
  printf("%s backend, out: DLPack %u.%u, %d-d %lld x %lld, strides %lld %lld\n", cuda ? "CUDA" : "HOST", m->major,
         m->minor, m->t.ndim, (long long)m->t.shape[0], (long long)m->t.shape[1], (long long)m->t.strides[0],
         (long long)m->t.strides[1]);
  int shape_ok = m->t.ndim == 2 && m->t.shape[0] == 2 && m->t.shape[1] == 3 && m->t.strides[0] == 3;
  float back[2][3];
  CHECK(kd_tensor_download(s, t, back, sizeof back)); /* waits for the scale, as a consumer must */
  printf("row 1: %g %g %g\n", back[1][0], back[1][1], back[1][2]);
  m->deleter(m); /* the consumer is done with it */
  kd_graph_destroy(g);
  CHECK(kd_tensor_release(s, t));
  kd_session_destroy(s);
  int ok = back[1][2] == 60.0f && shape_ok && (cuda || (handed_back == 1 && rows[1][2] == 60.0f));
  printf("interop: %s\n", ok ? "ok" : "MISMATCH");
  return !ok;
}
