/* SPDX-License-Identifier: Apache-2.0 */
/* Loops and conditionals (kd_graph_while_begin, kd_graph_if_begin,
 * kd_graph_end) on a HOST session: what they compute (trips, limits, zero
 * trips, nesting, ordering with the nodes around them, rebinding) and
 * every refusal. tests/gpu_loop_test.c runs the same loops on the GPU in
 * EAGER and GRAPH mode against HOST. */
#include <criterion/criterion.h>
#include <string.h>

#include "kdag/kdag.h"
#include "kdag_test.h"
#include "random_graph.h"

/* A countdown: c = c - 1 through a scratch tensor (a node may not write
 * a view it reads), y *= 2 each trip. */
typedef struct countdown {
  kd_tensor c, tmp, minus1, y, trips;
} countdown;

static countdown countdown_tensors(kd_session *s, int32_t start, float y0) {
  countdown d;
  kd_tensor_desc i1 = {.dtype = KD_I32, .rank = 1, .shape = {1}}, f4 = {.dtype = KD_F32, .rank = 1, .shape = {4}};
  int32_t m1 = -1;
  float y[4] = {y0, 2 * y0, 3 * y0, 4 * y0};
  KDT_OK(kd_tensor_from_host(s, &i1, &start, sizeof start, &d.c));
  KDT_OK(kd_tensor_create(s, &i1, &d.tmp));
  KDT_OK(kd_tensor_from_host(s, &i1, &m1, sizeof m1, &d.minus1));
  KDT_OK(kd_tensor_from_host(s, &f4, y, sizeof y, &d.y));
  KDT_OK(kd_tensor_create(s, &i1, &d.trips));
  return d;
}

static void countdown_body(kd_graph *g, const countdown *d) {
  KDT_OK(kd_graph_op_add(g, "tmp = c - 1", kd_whole(d->tmp), kd_whole(d->c), kd_whole(d->minus1), NULL));
  KDT_OK(kd_graph_op_copy(g, "c = tmp", kd_whole(d->c), kd_whole(d->tmp), NULL));
  KDT_OK(kd_graph_op_scale(g, "y *= 2", kd_whole(d->y), 2.0, NULL));
}

static void check_countdown(kd_session *s, const countdown *d, int32_t want_c, int32_t want_trips, float scale,
                            float y0) {
  int32_t c = -99, trips = -99;
  float y[4];
  KDT_OK(kd_tensor_download(s, d->c, &c, sizeof c));
  KDT_OK(kd_tensor_download(s, d->trips, &trips, sizeof trips));
  KDT_OK(kd_tensor_download(s, d->y, y, sizeof y));
  cr_assert_eq(c, want_c, "c = %d, want %d", c, want_c);
  cr_assert_eq(trips, want_trips, "trips = %d, want %d", trips, want_trips);
  for (int i = 0; i < 4; ++i) cr_assert_eq(y[i], scale * (float)(i + 1) * y0, "y[%d] = %g", i, y[i]);
}

Test(host_loop, a_while_loop_counts_down_to_its_condition) {
  kd_session *s = kdt_host_session();
  countdown d = countdown_tensors(s, 5, 1.5f);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node loop;
  KDT_OK(kd_graph_while_begin(g, "countdown", d.c, 100, d.trips, &loop));
  countdown_body(g, &d);
  KDT_OK(kd_graph_end(g, loop));
  KDT_OK(kd_graph_submit(g, NULL));
  check_countdown(s, &d, 0, 5, 32.0f, 1.5f);
  /* Again: c is 0, so no trip; trips is 0 again. */
  KDT_OK(kd_graph_submit(g, NULL));
  check_countdown(s, &d, 0, 0, 32.0f, 1.5f);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_loop, the_limit_stops_a_loop_and_trips_says_so) {
  kd_session *s = kdt_host_session();
  countdown d = countdown_tensors(s, 5, 1.0f);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node loop;
  KDT_OK(kd_graph_while_begin(g, "countdown", d.c, 3, d.trips, &loop));
  countdown_body(g, &d);
  KDT_OK(kd_graph_end(g, loop));
  KDT_OK(kd_graph_submit(g, NULL));
  check_countdown(s, &d, 2, 3, 8.0f, 1.0f); /* trips == max_trips: stopped by the limit */
  kd_graph_destroy(g);
  /* A limit of 0 runs no trip, whatever the condition. */
  KDT_OK(kd_graph_create(s, &g));
  KDT_OK(kd_graph_while_begin(g, "never", d.c, 0, d.trips, &loop));
  countdown_body(g, &d);
  KDT_OK(kd_graph_end(g, loop));
  KDT_OK(kd_graph_submit(g, NULL));
  check_countdown(s, &d, 2, 0, 8.0f, 1.0f);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_loop, nodes_around_a_loop_are_ordered_by_its_body) {
  kd_session *s = kdt_host_session();
  countdown d = countdown_tensors(s, 7, 1.0f);
  kd_tensor_desc f4 = {.dtype = KD_F32, .rank = 1, .shape = {4}};
  kd_tensor z;
  KDT_OK(kd_tensor_create(s, &f4, &z));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  /* Before: y = 1 (the loop's body reads and writes y: after this). */
  KDT_OK(kd_graph_op_fill(g, "y = 1", kd_whole(d.y), (float[]){1.0f}, NULL));
  kd_node loop;
  KDT_OK(kd_graph_while_begin(g, "countdown", d.c, 100, kd_no_tensor(), &loop));
  countdown_body(g, &d);
  KDT_OK(kd_graph_end(g, loop));
  /* After: z = y + y (reads what the loop wrote). */
  KDT_OK(kd_graph_op_add(g, "z = y + y", kd_whole(z), kd_whole(d.y), kd_whole(d.y), NULL));
  float got[4];
  kd_sink *sk;
  KDT_OK(kd_graph_sink(g, "z", z, got, sizeof got, &sk));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_sink_wait(sk));
  for (int i = 0; i < 4; ++i) cr_assert_eq(got[i], 256.0f, "z[%d] = %g, want 2 * 2^7", i, got[i]);
  /* The plan: fill -> loop -> add -> sink at the top level. */
  char *dot = kdt_dot_text(g);
  cr_assert(strstr(dot, "countdown"), "the loop node is in the DOT output");
  free(dot);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_loop, loops_nest_and_an_if_runs_its_body_once_or_not_at_all) {
  kd_session *s = kdt_host_session();
  kd_tensor_desc i1 = {.dtype = KD_I32, .rank = 1, .shape = {1}}, f1 = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  int32_t three = 3, m1 = -1, one = 1;
  float x0 = 1.0f;
  kd_tensor outer, inner, tmp, minus1, x, flag, trips;
  KDT_OK(kd_tensor_from_host(s, &i1, &three, sizeof three, &outer));
  KDT_OK(kd_tensor_create(s, &i1, &inner));
  KDT_OK(kd_tensor_create(s, &i1, &tmp));
  KDT_OK(kd_tensor_from_host(s, &i1, &m1, sizeof m1, &minus1));
  KDT_OK(kd_tensor_from_host(s, &f1, &x0, sizeof x0, &x));
  KDT_OK(kd_tensor_from_host(s, &i1, &one, sizeof one, &flag));
  KDT_OK(kd_tensor_create(s, &i1, &trips));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node lo, li, cond;
  KDT_OK(kd_graph_while_begin(g, "outer", outer, 10, kd_no_tensor(), &lo));
  KDT_OK(kd_graph_op_fill(g, "inner = 4", kd_whole(inner), (int32_t[]){4}, NULL));
  KDT_OK(kd_graph_while_begin(g, "inner", inner, 10, trips, &li));
  KDT_OK(kd_graph_op_add(g, "tmp = inner - 1", kd_whole(tmp), kd_whole(inner), kd_whole(minus1), NULL));
  KDT_OK(kd_graph_op_copy(g, "inner = tmp", kd_whole(inner), kd_whole(tmp), NULL));
  KDT_OK(kd_graph_op_scale(g, "x *= 2", kd_whole(x), 2.0, NULL));
  KDT_OK(kd_graph_end(g, li));
  KDT_OK(kd_graph_op_add(g, "tmp = outer - 1", kd_whole(tmp), kd_whole(outer), kd_whole(minus1), NULL));
  KDT_OK(kd_graph_op_copy(g, "outer = tmp", kd_whole(outer), kd_whole(tmp), NULL));
  KDT_OK(kd_graph_end(g, lo));
  KDT_OK(kd_graph_if_begin(g, "if flag", flag, &cond));
  KDT_OK(kd_graph_op_scale(g, "x *= 3", kd_whole(x), 3.0, NULL));
  KDT_OK(kd_graph_end(g, cond));
  KDT_OK(kd_graph_submit(g, NULL));
  float got = 0;
  int32_t t = -1;
  KDT_OK(kd_tensor_download(s, x, &got, sizeof got));
  KDT_OK(kd_tensor_download(s, trips, &t, sizeof t));
  cr_assert_eq(got, 3.0f * 4096.0f, "x = %g: 3 x 4 doublings, then the IF's x3", got);
  cr_assert_eq(t, 4, "the inner loop's last run made %d trips", t);
  /* The flag off: the IF skips its body. outer is 0 now: no loop trip. */
  int32_t zero = 0;
  KDT_OK(kd_tensor_upload(s, flag, &zero, sizeof zero));
  KDT_OK(kd_graph_submit(g, NULL));
  KDT_OK(kd_tensor_download(s, x, &got, sizeof got));
  cr_assert_eq(got, 3.0f * 4096.0f, "x = %g: neither the loop nor the IF ran", got);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

Test(host_loop, rebinding_the_condition_and_a_body_tensor_applies_to_the_next_submission) {
  kd_session *s = kdt_host_session();
  countdown d = countdown_tensors(s, 2, 1.0f), e = countdown_tensors(s, 4, 1.0f);
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node loop;
  KDT_OK(kd_graph_while_begin(g, "countdown", d.c, 100, d.trips, &loop));
  countdown_body(g, &d);
  KDT_OK(kd_graph_end(g, loop));
  KDT_OK(kd_graph_submit(g, NULL));
  check_countdown(s, &d, 0, 2, 4.0f, 1.0f);
  KDT_OK(kd_graph_rebind(g, d.c, e.c));
  KDT_OK(kd_graph_rebind(g, d.y, e.y));
  KDT_OK(kd_graph_submit(g, NULL));
  int32_t c = -1, trips = -1;
  float y[4];
  KDT_OK(kd_tensor_download(s, e.c, &c, sizeof c));
  KDT_OK(kd_tensor_download(s, d.trips, &trips, sizeof trips));
  KDT_OK(kd_tensor_download(s, e.y, y, sizeof y));
  cr_assert_eq(c, 0);
  cr_assert_eq(trips, 4);
  cr_assert_eq(y[0], 16.0f);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

static void nothing(void *user) { (void)user; }

Test(host_loop, every_bad_declaration_is_refused_naming_the_call_and_the_loop) {
  kd_session *s = kdt_host_session();
  countdown d = countdown_tensors(s, 3, 1.0f);
  kd_tensor_desc f1 = {.dtype = KD_F32, .rank = 1, .shape = {1}}, i2 = {.dtype = KD_I32, .rank = 1, .shape = {2}};
  kd_tensor fcond, wide;
  float f = 1.0f;
  int32_t w[2] = {1, 1};
  KDT_OK(kd_tensor_from_host(s, &f1, &f, sizeof f, &fcond));
  KDT_OK(kd_tensor_from_host(s, &i2, w, sizeof w, &wide));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node loop, other;
  /* The condition: a 4-byte integer, one element, written before. */
  KDT_FAILS(kd_graph_while_begin(g, "f", fcond, 10, kd_no_tensor(), NULL), KD_ERR_INVALID_ARGUMENT,
            "argument condition (tensor");
  KDT_FAILS(kd_graph_while_begin(g, "w", wide, 10, kd_no_tensor(), NULL), KD_ERR_INVALID_ARGUMENT, "with 2 elements");
  KDT_FAILS(kd_graph_while_begin(g, "t", d.c, 10, fcond, NULL), KD_ERR_INVALID_ARGUMENT, "argument trips");
  KDT_FAILS(kd_graph_while_begin(g, "u", d.tmp, 10, kd_no_tensor(), NULL), KD_ERR_UNINITIALIZED, "");
  KDT_FAILS(kd_graph_end(g, 0), KD_ERR_INVALID_ARGUMENT, "no loop or conditional is open");
  KDT_OK(kd_graph_while_begin(g, "loop", d.c, 10, kd_no_tensor(), &loop));
  /* Sinks, host functions and foreign nodes stay out of bodies. */
  float y[4];
  kd_sink *sk;
  KDT_FAILS(kd_graph_sink(g, "s", d.y, y, sizeof y, &sk), KD_ERR_INVALID_ARGUMENT, "body of loop 'loop' (#0)");
  KDT_FAILS(kd_graph_host(g, "h", nothing, NULL, NULL, 0, NULL), KD_ERR_INVALID_ARGUMENT, "not host functions");
  /* A WHILE whose body never writes its condition cannot end: refused,
   * and the loop stays open. */
  KDT_OK(kd_graph_op_scale(g, "y *= 2", kd_whole(d.y), 2.0, NULL));
  KDT_FAILS(kd_graph_end(g, loop), KD_ERR_INVALID_ARGUMENT, "no node of its body writes its condition");
  KDT_FAILS(kd_graph_submit(g, NULL), KD_ERR_INVALID_ARGUMENT, "loop 'loop' (#0) is still open");
  KDT_OK(kd_graph_if_begin(g, "inner", d.c, &other));
  KDT_FAILS(kd_graph_end(g, loop), KD_ERR_INVALID_ARGUMENT, "not the innermost open loop, 'inner'");
  KDT_OK(kd_graph_end(g, other));
  KDT_OK(kd_graph_op_add(g, "tmp = c - 1", kd_whole(d.tmp), kd_whole(d.c), kd_whole(d.minus1), NULL));
  kd_node copy;
  KDT_OK(kd_graph_op_copy(g, "c = tmp", kd_whole(d.c), kd_whole(d.tmp), &copy));
  KDT_OK(kd_graph_end(g, loop));
  /* An edge joins nodes of one level. */
  kd_node after;
  KDT_OK(kd_graph_op_scale(g, "after", kd_whole(d.y), 0.5, &after));
  KDT_FAILS(kd_graph_edge(g, copy, after), KD_ERR_INVALID_ARGUMENT, "different loop bodies");
  KDT_OK(kd_graph_edge(g, loop, after)); /* inferred already: dropped as a repeat */
  /* Nesting has a limit. */
  kd_node open[KD_GRAPH_MAX_DEPTH];
  for (int i = 0; i < KD_GRAPH_MAX_DEPTH; ++i) KDT_OK(kd_graph_if_begin(g, "nest", d.c, &open[i]));
  KDT_FAILS(kd_graph_if_begin(g, "deeper", d.c, NULL), KD_ERR_INVALID_ARGUMENT, "KD_GRAPH_MAX_DEPTH");
  for (int i = KD_GRAPH_MAX_DEPTH - 1; i >= 0; --i) KDT_OK(kd_graph_end(g, open[i]));
  KDT_OK(kd_graph_submit(g, NULL));
  kd_graph_destroy(g);
  kd_session_destroy(s);
}

/* Random graphs with a loop (and nested IFs) on HOST give the bits of the
 * same graphs with the body written out trip by trip. */
Test(host_loop, random_loops_equal_their_unrolling, .timeout = 120) {
  kd_session *a = kdt_host_session(), *b = kdt_host_session();
  const char *names[] = {"HOST"};
  rg_loop_differential(&a, names, 1, b, 0xC0FFEEull, 150);
  kd_session_destroy(a);
  kd_session_destroy(b);
}

/* An upload inside a body copies the bytes read at submit on every trip. */
Test(host_loop, an_upload_in_a_body_runs_every_trip) {
  kd_session *s = kdt_host_session();
  countdown d = countdown_tensors(s, 3, 1.0f);
  kd_tensor_desc f1 = {.dtype = KD_F32, .rank = 1, .shape = {1}};
  float zero = 0, hb = 2.5f, got = -1;
  kd_tensor u, acc, acc2;
  KDT_OK(kd_tensor_create(s, &f1, &u));
  KDT_OK(kd_tensor_from_host(s, &f1, &zero, sizeof zero, &acc));
  KDT_OK(kd_tensor_create(s, &f1, &acc2));
  kd_graph *g;
  KDT_OK(kd_graph_create(s, &g));
  kd_node loop;
  KDT_OK(kd_graph_while_begin(g, "sum", d.c, 10, d.trips, &loop));
  KDT_OK(kd_graph_upload(g, "u = hb", u, &hb, sizeof hb, NULL));
  KDT_OK(kd_graph_op_add(g, "acc2 = acc + u", kd_whole(acc2), kd_whole(acc), kd_whole(u), NULL));
  KDT_OK(kd_graph_op_copy(g, "acc = acc2", kd_whole(acc), kd_whole(acc2), NULL));
  countdown_body(g, &d);
  KDT_OK(kd_graph_end(g, loop));
  KDT_OK(kd_graph_submit(g, NULL));
  hb = 100.0f; /* read at submit: this submission is not affected */
  KDT_OK(kd_tensor_download(s, acc, &got, sizeof got));
  cr_assert_eq(got, 7.5f, "acc = %g after 3 trips of 2.5", got);
  kd_graph_destroy(g);
  kd_session_destroy(s);
}
