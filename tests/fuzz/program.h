/* SPDX-License-Identifier: Apache-2.0 */
/* The graph program shared by the fuzz targets fuzz_graph (HOST) and
 * fuzz_cuda (CUDA on the null driver): its state, and what a backend adds
 * (tests/fuzz/program.c runs it). */
#ifndef KDAG_TESTS_FUZZ_PROGRAM_H
#define KDAG_TESTS_FUZZ_PROGRAM_H

#include <stdatomic.h>

#include "kdag/kdag.h"
#include "kernels/host.h"
#include "tests/fuzz/fuzz.h"

typedef struct kdf_program kdf_program;

/* What differs between the targets. */
typedef struct kdf_backend {
  const char *target;        /* "kdf_graph": names the target in reports */
  kd_session *(*session)(void); /* the session the programs run on, kept across inputs; NULL: none */
  int kernels_run;           /* 1: built-in nodes compute (HOST); 0: they do nothing (null driver) */
  void (*op)(kdf_program *p, uint8_t code); /* the backend's own call; NULL: a submission */
  void (*settle)(kdf_program *p); /* before the last submission: every call must work from here; may be NULL */
  void (*end)(kdf_program *p); /* after an input, its graph destroyed, tensors released; may be NULL */
} kdf_backend;

#define MAX_TENSORS 6
#define MAX_NODES 40
#define MAX_SINKS 8
#define MAX_UPLOADS 8
/* A graph with a view of more elements is declared but not run: a stride
 * of 0 lets a small tensor carry a view of 2^40 elements, which is valid
 * and would take hours. */
#define MAX_RUN_ELEMENTS (1 << 14)
#define MAX_OPS 96

typedef struct ften {
  kd_tensor h;
  int live;      /* the handle is still ours (not released) */
  int rank;
  int64_t shape[3];
  kd_dtype dtype;
  kd_residency residency;
  size_t esize, bytes;
  int64_t elements;
  int unknown;   /* the reference cannot know its content (made uninitialised) */
  unsigned char *ref;
} ften;

typedef enum nkind { N_FILL, N_COPY, N_ADD, N_AXPY, N_SCALE, N_SUM, N_UPLOAD, N_SINK, N_HOST, N_KERNEL } nkind;

#define MAX_KERNEL_ARGS 8

/* An accepted node as the reference runs it. */
typedef struct fnode {
  nkind kind;
  int count;     /* views */
  int t[3];      /* tensor index of each view */
  kd_view v[3];  /* resolved (kd_whole too); .tensor unused */
  kd_kpattern fill;
  double alpha;
  int slot;      /* N_UPLOAD: uploads[slot]; N_SINK: sinks[slot] */
  /* N_KERNEL (a user kernel: the reference runs nothing, as the null
   * driver does): its arguments, for kd_graph_set_arg's checks. */
  int arg_count;
  int arg_value[MAX_KERNEL_ARGS]; /* a value, not a tensor */
  kd_arg_kind arg_kind[MAX_KERNEL_ARGS];
  size_t arg_size[MAX_KERNEL_ARGS];
} fnode;

typedef struct fsink {
  kd_sink *sink;
  int t;
  size_t bytes;
  unsigned char *host, *expect;
  int known;     /* expect holds what the sink must deliver */
} fsink;

struct kdf_program {
  kdf_input in;
  kd_session *s;
  kd_graph *g;
  ften t[MAX_TENSORS];
  int tensor_count;
  fnode n[MAX_NODES];
  int node_count;
  fsink sinks[MAX_SINKS];
  int sink_count;
  unsigned char *uploads[MAX_UPLOADS];
  int upload_count;
  const kdf_backend *b;
  /* The user kernel "k" (CUDA backends), its signature drawn from the
   * input when first needed: kernel_state 1 loaded, -1 refused. */
  int kernel_state, module_live;
  kd_module module;
  kd_function fn;
  int param_count;
  uint32_t param_sizes[MAX_KERNEL_ARGS];
  int heavy;     /* some view is past MAX_RUN_ELEMENTS: do not run kernels */
  int injected;  /* the backend armed a driver refusal: calls may fail, contents are then unknown */
  kd_tensor witness; /* no node uses it: downloading it waits for every submission (HOST) */
  atomic_uint host_runs;
  int trace;     /* KDF_TRACE=1: each call and its result on stderr, to read a failing input */
  unsigned host_nodes, host_expected, submitted; /* host nodes declared; runs owed by submissions */
};

/* A call that must succeed unless the backend injected a refusal
 * (p->injected); a refusal must then be clear, and the reference forgets
 * what it knew. 1: st is KD_OK. */
int kdf_program_worked(kdf_program *p, const char *op, kd_status st);
/* Submits the graph and runs the reference for it, checking nothing yet
 * (the work may stay in flight). 1: submitted. */
int kdf_program_submit(kdf_program *p);

/* A user kernel node (kd_graph_kernel) with a launch configuration and
 * arguments drawn from the input, against the kernel "k" whose signature
 * the input drew: accepted only when the arguments match it. CUDA only. */
void kdf_program_kernel(kdf_program *p);
/* kd_graph_set_arg on a node and index drawn from the input: accepted only
 * for a value argument of a kernel node, of the same kind and size. */
void kdf_program_set_arg(kdf_program *p);
/* Releases the caller's reference to the kernel's module (the graph keeps
 * its own): later kernel nodes naming it are refused. */
void kdf_program_release_module(kdf_program *p);

/* Runs one input's program on b. */
void kdf_program_run(const kdf_backend *b, const uint8_t *data, size_t size);

#endif
