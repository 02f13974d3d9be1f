/* Host implementations of the built-in kernels (the HOST backend's code and
 * the reference tests compare with). */
#ifndef KDAG_KERNELS_HOST_H
#define KDAG_KERNELS_HOST_H

#include <stdint.h>

/* out[i] = lhs[i] + rhs[i]; out may alias neither input. */
void kd_host_add_f32(float *out, const float *lhs, const float *rhs, int64_t n);

#endif
