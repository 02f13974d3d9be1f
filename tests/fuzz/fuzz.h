/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz targets: kdag's parsers of untrusted bytes (PTX text, CUBIN and
 * fatbin images), programs of graph calls (views with hostile numbers,
 * bad tensors, edges, rebinds, submissions) on a HOST session and on a
 * CUDA session over the null driver, and raw scopes on the null driver,
 * each a function of one input.
 *
 * Two drivers run them:
 *   - tools/fuzz.sh builds each target with clang's libFuzzer, ASan and
 *     UBSan (CMake option KDAG_FUZZERS) to search for new inputs; what it
 *     finds is minimised into tests/fuzz/corpus/<target>/;
 *   - tests/host_fuzz_test.c replays that corpus in every build (plain and
 *     sanitized), so an input that once crashed or broke a property stays a
 *     regression test.
 *
 * A target checks properties, not only the absence of crashes, and reports
 * a broken one through kdf_violation (the driver's: an abort under
 * libFuzzer, a failed assertion under Criterion). */
#ifndef KDAG_TESTS_FUZZ_H
#define KDAG_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Reports a broken property; defined by the driver. Does not return under
 * libFuzzer; under Criterion the target goes on (the test is failed). */
void kdf_violation(const char *target, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The targets. Each returns 0 (libFuzzer's convention); inputs of any size
 * and content are valid. */
int kdf_ptx(const uint8_t *data, size_t size);
int kdf_image(const uint8_t *data, size_t size);
int kdf_graph(const uint8_t *data, size_t size);
int kdf_cuda(const uint8_t *data, size_t size);
int kdf_raw(const uint8_t *data, size_t size);

/* The input, read a little at a time; past its end every read is 0. */
typedef struct kdf_input {
  const uint8_t *data;
  size_t size, at;
} kdf_input;

static inline uint8_t kdf_u8(kdf_input *in) { return in->at < in->size ? in->data[in->at++] : 0; }

static inline uint64_t kdf_u64(kdf_input *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= (uint64_t)kdf_u8(in) << (8 * i);
  return v;
}

static inline int kdf_done(const kdf_input *in) { return in->at >= in->size; }

#endif
