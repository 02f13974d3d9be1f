/* kdag/kdag.h — umbrella header. kdag runs pipelines of custom CUDA kernels;
 * see README.md for the model and each header for ownership and threads. */
#ifndef KDAG_KDAG_H
#define KDAG_KDAG_H

#include "kdag/status.h"
#include "kdag/session.h"
#include "kdag/tensor.h"
#include "kdag/compile.h"
#include "kdag/cache.h"
#include "kdag/mathdx.h"
#include "kdag/kernel.h"
#include "kdag/raw.h"
#include "kdag/graph.h"

#endif /* KDAG_KDAG_H */
