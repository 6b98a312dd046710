/* kiln/kiln.h: the C API of the Kiln runtime (C99 or later, and C++), for other languages and a
 * stable ABI. A thin layer over kiln/runtime.h: the same models, contexts, checks and messages.
 *
 *   kiln_model* model;
 *   if (kiln_model_load_file("silero_vad.kiln", NULL, &model) != KILN_STATUS_OK) {
 *     fprintf(stderr, "%s\n", kiln_model_last_error(model));  // a failed load still gives a handle
 *     kiln_model_destroy(model);
 *     return 1;
 *   }
 *   kiln_context* ctx;
 *   kiln_status st = kiln_context_create(model, NULL, &ctx);  // NULL: default options
 *   kiln_tensor in[3] = {{audio, KILN_DTYPE_FLOAT32, 2, {1, 576}, KILN_MEMORY_HOST}, ...};
 *   kiln_tensor out[2];                                     // filled with views of the context's memory
 *   if (st == KILN_STATUS_OK) st = kiln_context_run(ctx, in, 3, out, 2, NULL);
 *   if (st != KILN_STATUS_OK) fprintf(stderr, "%s: %s\n", kiln_status_name(st), kiln_context_last_error(ctx));
 *   kiln_context_destroy(ctx);                              // destroy functions accept NULL
 *   kiln_model_destroy(model);
 *
 * Errors. Every function that can fail returns a kiln_status and never throws, aborts or
 * longjmps: C++ exceptions inside (std::bad_alloc included) become KILN_STATUS_RESOURCE_EXHAUSTED
 * or KILN_STATUS_INTERNAL. The message of a failed call is kept by the handle it was made on
 * (never in global state) and read with kiln_model_last_error or kiln_context_last_error; the
 * message of a failed create is kept by the handle it returns. A call that has no handle to
 * keep a message (a NULL handle or a NULL `out`) returns its code only. Successful calls leave
 * the last message unchanged. Invalid arguments (a NULL handle, a NULL array with a nonzero
 * count, a rank outside 0..KILN_MAX_RANK, a negative dim, a value outside an enum) are
 * KILN_STATUS_INVALID_ARGUMENT, and the message names the function, the argument, the value
 * found and what was expected.
 *
 * Threads. A kiln_model is immutable and thread-safe like kiln::Model: any number of threads
 * may call its functions and create contexts from it at once, and each thread reads its own
 * last error. A kiln_context is thread-compatible like kiln::ExecutionContext: one thread at a
 * time (create one per thread to serve calls concurrently).
 *
 * ABI. Enum values and struct layouts below are fixed for a SONAME: libkiln_runtime.so.MAJOR.MINOR
 * before 1.0 (a minor version may change them, as 0.1, unreleased, still does), .so.MAJOR from
 * 1.0 on. A program checks kiln_version() against KILN_VERSION_* at start; the numeric
 * values of kiln_status and kiln_dtype are those of kiln::StatusCode and kiln::DType (ONNX's
 * TensorProto.DataType). Enum-typed struct fields are int32_t so their size never depends on
 * the compiler.
 */
#ifndef KILN_KILN_H_
#define KILN_KILN_H_

#include <stddef.h>
#include <stdint.h>

#include "kiln/export.h"
#include "kiln/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* KILN_VERSION_MAJOR, _MINOR, _PATCH (kiln/version.h) are the version of these headers;
 * kiln_version() gives the library's. */

/* Status codes: kiln::StatusCode's values. The detail is always in the handle's last error. */
typedef enum kiln_status {
  KILN_STATUS_OK = 0,
  KILN_STATUS_INVALID_ARGUMENT = 1,    /* a caller's input is wrong (tensor shape, dtype, option value) */
  KILN_STATUS_NOT_FOUND = 2,           /* a file does not exist */
  KILN_STATUS_OUT_OF_RANGE = 3,        /* an index is outside its valid range */
  KILN_STATUS_RESOURCE_EXHAUSTED = 4,  /* memory or a configured limit is exhausted */
  KILN_STATUS_FAILED_PRECONDITION = 5, /* not possible in this state (no CUDA device; a failed load) */
  KILN_STATUS_DATA_LOSS = 6,           /* an artifact is corrupt or truncated */
  KILN_STATUS_INCOMPATIBLE = 7,        /* a valid artifact this build cannot run (newer format, missing arch) */
  KILN_STATUS_UNIMPLEMENTED = 8,       /* a feature Kiln does not support yet */
  KILN_STATUS_INTERNAL = 9,            /* a Kiln bug: an invariant did not hold */
  KILN_STATUS_DEVICE_ERROR = 10        /* a CUDA driver or library call failed */
} kiln_status;

/* Element types: kiln::DType's values. */
typedef enum kiln_dtype {
  KILN_DTYPE_UNDEFINED = 0,
  KILN_DTYPE_FLOAT32 = 1,
  KILN_DTYPE_UINT8 = 2,
  KILN_DTYPE_INT8 = 3,
  KILN_DTYPE_UINT16 = 4,
  KILN_DTYPE_INT16 = 5,
  KILN_DTYPE_INT32 = 6,
  KILN_DTYPE_INT64 = 7,
  KILN_DTYPE_BOOL = 9, /* one byte per element, 0 or 1 */
  KILN_DTYPE_FLOAT16 = 10,
  KILN_DTYPE_FLOAT64 = 11,
  KILN_DTYPE_UINT32 = 12,
  KILN_DTYPE_UINT64 = 13,
  KILN_DTYPE_BFLOAT16 = 16
} kiln_dtype;

/* Where a tensor's bytes live: kiln::MemoryKind's values. */
typedef enum kiln_memory_kind {
  KILN_MEMORY_HOST = 0,  /* ordinary CPU memory */
  KILN_MEMORY_DEVICE = 1 /* CUDA device memory (CUDA backend) */
} kiln_memory_kind;

/* The backend a context runs on: kiln::Device's values. */
typedef enum kiln_device {
  KILN_DEVICE_CPU = 0,
  KILN_DEVICE_CUDA = 1,
  KILN_DEVICE_AUTO = 2 /* CUDA when a usable device is present, else CPU */
} kiln_device;

#define KILN_MAX_RANK 8

/* A dense, row-major (C order) tensor the caller describes: never owned by Kiln. Inputs are
 * only read. `dtype` is a kiln_dtype, `memory` a kiln_memory_kind; dims[0..rank) are used, the
 * rest ignored; a scalar has rank 0. Data must be aligned to the dtype's size. */
typedef struct kiln_tensor {
  void* data;
  int32_t dtype;
  int32_t rank;
  int64_t dims[KILN_MAX_RANK];
  int32_t memory;
} kiln_tensor;

/* A model input or output as the artifact declares it. All pointers point into the model
 * handle and stay valid until it is destroyed. dims[i] is the constant, or -1 where the dim is
 * symbolic, and then dim_symbols[i] is its text: a symbol ("N"), an expression over symbols for
 * an output ("((H+1) floordiv 2)"), or the values the entries fix joined by '|' ("1|4");
 * dim_symbols[i] is NULL for a constant dim. Inputs are as the model declares them, before any
 * compile profile (kiln::TensorInfo). */
typedef struct kiln_tensor_info {
  const char* name;
  int32_t dtype; /* kiln_dtype */
  int32_t rank;
  const int64_t* dims;           /* rank values */
  const char* const* dim_symbols; /* rank pointers, NULL for a constant dim */
} kiln_tensor_info;

/* What runs an instruction on one backend (kiln::InstructionPlacement, kiln/library.h). */
typedef struct kiln_placement {
  const char* backend; /* "cuda", "cpu": as in kiln_context_options' device */
  const char* library; /* "cpu" (Kiln's CPU kernel; on a device, a CPU fallback on the host), "generated",
                          "onednn", "cublaslt", "cudnn", "control" (a run-time Loop's control) */
} kiln_placement;

/* One instruction of an entry, as the artifact records it (kiln::InstructionInfo). All pointers
 * point into the model handle and stay valid until it is destroyed; none is NULL. */
typedef struct kiln_instruction_info {
  const char* name;     /* the source node's name */
  const char* op;       /* ONNX op type, or "kiln.Fused" for a generated kernel */
  size_t num_placements;
  const kiln_placement* placements; /* one per backend, as the compiler's executors stage chose */
  const char* kernel;   /* kiln.Fused: the generated kernel's name, "kiln_<16 hex digits>"; else "" */
  size_t num_member_ops;
  const char* const* member_ops; /* kiln.Fused: the ONNX ops it replaced, in trace order */
} kiln_instruction_info;

/* kiln::LoadOptions::weights_key for encrypted weights (`kiln sign --encrypt-weights`): writes
 * the 32-byte AES-256 key that `key_id` names (NUL-terminated text, at most 32 bytes, possibly
 * empty) to `key` and returns KILN_STATUS_OK, or returns another status, which fails the load with
 * a message naming it. Called at most once per load, on the loading thread, during the
 * kiln_model_load_* call; `key` is valid only during the call and wiped after. */
typedef kiln_status (*kiln_weights_key_fn)(void* user_data, const char* key_id, uint8_t* key);

/* kiln::LoadOptions: limits for an artifact from an untrusted source, in bytes, and the keys of
 * signed artifacts (docs/security.md). Start from kiln_load_options_init; passing NULL options
 * means those defaults. */
typedef struct kiln_load_options {
  /* Largest artifact accepted (the file's size, or `size` for bytes), checked before it is
   * mapped or copied; UINT64_MAX (the default): no limit. Above it: RESOURCE_EXHAUSTED. */
  uint64_t max_artifact_bytes;
  /* Largest arena plus kernel workspace one context of this model may hold; 0 (the default):
   * the host's physical memory. A constant arena above it fails the load, and a run whose
   * shapes need more fails before allocating; both RESOURCE_EXHAUSTED. */
  uint64_t max_context_bytes;
  /* kiln::LoadOptions::trusted_public_keys: num_trusted_public_keys Ed25519 public keys, each
   * NUL-terminated PEM text (`openssl pkey -pubout`), read during the load call only. Nonzero
   * count: the load requires a valid signature by one of them (FAILED_PRECONDITION: unsigned or
   * another signer; DATA_LOSS: changed after signing; INVALID_ARGUMENT: a key that is not an
   * Ed25519 PEM public key, or a NULL array or entry). Default: NULL, 0. */
  const char* const* trusted_public_keys;
  size_t num_trusted_public_keys;
  /* kiln::LoadOptions::weights_key, called with weights_key_user_data. Default: NULL, NULL. */
  kiln_weights_key_fn weights_key;
  void* weights_key_user_data;
} kiln_load_options;

/* kiln::ContextOptions. Start from kiln_context_options_init; passing NULL options means
 * those defaults. */
typedef struct kiln_context_options {
  int32_t device;         /* kiln_device; default KILN_DEVICE_AUTO */
  int32_t device_ordinal; /* which CUDA device; default 0 */
  int32_t cuda_graphs;    /* nonzero: capture and replay CUDA graphs (needs a non-NULL stream); default 0 */
  int32_t profile;        /* nonzero: time every instruction; default 0 */
  /* CPU backend: threads per run, the caller's included, 0..256; 0 (the default): one per CPU
   * this process may run on. The results are the same bits at every count. */
  int32_t cpu_threads;
  /* The most iterations one run's run-time Loops may take, all together, at least 1; default
   * 10^7. Past it the run fails with RESOURCE_EXHAUSTED naming the loop. */
  int64_t max_loop_iterations;
  /* nonzero: kiln::CudaOptions::require_device_resident, fail closed rather than copy tensor
   * data to the host: create fails (FAILED_PRECONDITION) when the context would not run on a CUDA
   * device or an entry places an instruction on the host; a run fails (INVALID_ARGUMENT) for an
   * input or output in host memory, or (FAILED_PRECONDITION) when a library refuses an
   * instruction at its shapes. Default 0. */
  int32_t require_device_resident;
  /* kiln::ContextOptions::warm_runs: the CPU warm-up's runs at most, 0..100; default 5. */
  int32_t warm_runs;
} kiln_context_options;

/* A context's statistics (kiln::Stats). Times are durations in nanoseconds of the last run
 * (0 for a phase it did not reach: the prologue and computation of a miss). */
typedef struct kiln_stats {
  uint64_t calls;        /* runs, successful or not */
  uint64_t cache_hits;   /* runs whose inputs passed some entry's prologue */
  uint64_t cache_misses; /* runs whose inputs passed none */
  int32_t last_entry;    /* the entry the last hit chose, -1 before any hit */
  int64_t last_host_ns;         /* the whole run */
  int64_t last_cache_lookup_ns; /* finding the entry, failed prologues included */
  int64_t last_prologue_ns;     /* the prologue that passed */
  int64_t last_computation_ns;  /* executing (CPU) or enqueueing (CUDA) the instructions */
  int64_t total_computation_ns; /* summed over successful runs */
  int64_t last_gpu_ns;          /* CUDA: GPU time of the last run once synchronized; -1 otherwise */
  uint64_t graph_hits;          /* CUDA graph replays */
  uint64_t graph_misses;        /* CUDA graph captures */
  /* A device backend's copies in the last run, bytes: inputs staged, CPU regions' tensors, the
   * outputs copied to the host, control transfers included; 0 on the CPU backend. */
  uint64_t last_host_to_device_bytes;
  uint64_t last_device_to_host_bytes;
  uint64_t last_control_transfers; /* of those, the executor's small ones (a condition, a size) */
  int64_t last_cpu_region_ns;      /* host time of the last run's CPU regions on a device backend */
} kiln_stats;

/* The library's version and the artifact format versions its runtime reads. */
typedef struct kiln_version_info {
  uint32_t major, minor, patch;
  uint32_t min_format_version; /* kiln::kMinFormatVersion */
  uint32_t max_format_version; /* kiln::kFormatVersion */
} kiln_version_info;

typedef struct kiln_model kiln_model;     /* opaque; thread-safe */
typedef struct kiln_context kiln_context; /* opaque; one thread at a time */

/* ---- Library ---------------------------------------------------------------------------- */

/* Fills *out. Errors: INVALID_ARGUMENT when out is NULL. */
KILN_API kiln_status kiln_version(kiln_version_info* out);

/* "OK", "INVALID_ARGUMENT", ... ("UNKNOWN" for a value outside kiln_status). Static storage;
 * never fails. */
KILN_API const char* kiln_status_name(kiln_status status);

/* The defaults listed with each struct. Errors: INVALID_ARGUMENT when options is NULL. */
KILN_API kiln_status kiln_load_options_init(kiln_load_options* options);
KILN_API kiln_status kiln_context_options_init(kiln_context_options* options);

/* ---- Model ------------------------------------------------------------------------------- */

/* Loads and verifies an artifact (kiln::Model::Load): the file at `path` is mapped read-only;
 * `bytes` are copied, so the caller may free them on return. `options` may be NULL.
 * *out always receives a new handle, also when the load fails (then it holds only the error:
 * kiln_model_last_error gives it, every other model function returns FAILED_PRECONDITION),
 * except when out is NULL (INVALID_ARGUMENT) or the handle cannot be allocated (*out = NULL,
 * RESOURCE_EXHAUSTED). The caller destroys it with kiln_model_destroy.
 * Errors: INVALID_ARGUMENT (path NULL; bytes NULL with size > 0), NOT_FOUND (no file),
 * DATA_LOSS (corrupt or truncated; the message names the section and offset), INCOMPATIBLE (a
 * format version outside kiln_version's range), RESOURCE_EXHAUSTED (over a limit). */
KILN_API kiln_status kiln_model_load_file(const char* path, const kiln_load_options* options, kiln_model** out);
KILN_API kiln_status kiln_model_load_bytes(const void* bytes, size_t size, const kiln_load_options* options,
                                           kiln_model** out);

/* Frees the handle. Contexts created from it stay valid (they share the loaded artifact).
 * NULL is allowed. No call on the handle may be running or follow. */
KILN_API void kiln_model_destroy(kiln_model* model);

/* The message of the calling thread's latest failed call on this handle (or of the failed
 * load that made it); "" if there is none. Valid until this thread's next failed call on
 * the handle, or its destruction. NULL gives "model handle is NULL". Never fails. */
KILN_API const char* kiln_model_last_error(const kiln_model* model);

/* Counts of the model's inputs and outputs. Errors: INVALID_ARGUMENT (a NULL argument),
 * FAILED_PRECONDITION (the handle's load failed). */
KILN_API kiln_status kiln_model_num_inputs(const kiln_model* model, size_t* out);
KILN_API kiln_status kiln_model_num_outputs(const kiln_model* model, size_t* out);

/* Input or output `index` (model order, the order kiln_context_run takes and gives them).
 * Errors: INVALID_ARGUMENT (a NULL argument), OUT_OF_RANGE (index >= the count),
 * FAILED_PRECONDITION (the handle's load failed). */
KILN_API kiln_status kiln_model_input(const kiln_model* model, size_t index, kiln_tensor_info* out);
KILN_API kiln_status kiln_model_output(const kiln_model* model, size_t index, kiln_tensor_info* out);

/* The artifact's format version and the Kiln version that wrote it ("kiln 0.1.0"; valid
 * until the handle is destroyed). Errors as kiln_model_num_inputs. */
KILN_API kiln_status kiln_model_format_version(const kiln_model* model, uint32_t* out);
KILN_API kiln_status kiln_model_producer(const kiln_model* model, const char** out);
/* The `kiln compile --precision` of the artifact (kiln::Model::precision): "fp32", "fp16" or
 * "bf16", valid until the handle is destroyed. Errors as kiln_model_num_inputs. */
KILN_API kiln_status kiln_model_precision(const kiln_model* model, const char** out);

/* The artifact's entries (kiln::Model::entries(), in the order a run tries them) and their
 * instructions (the order a run executes them). Errors: INVALID_ARGUMENT (a NULL argument),
 * OUT_OF_RANGE (entry or index >= its count), FAILED_PRECONDITION (the handle's load failed). */
KILN_API kiln_status kiln_model_num_entries(const kiln_model* model, size_t* out);
KILN_API kiln_status kiln_model_num_instructions(const kiln_model* model, size_t entry, size_t* out);
KILN_API kiln_status kiln_model_instruction(const kiln_model* model, size_t entry, size_t index,
                                            kiln_instruction_info* out);

/* ---- Context ----------------------------------------------------------------------------- */

/* Creates an execution context (kiln::ExecutionContext::Create): its arena, scratch, threads
 * and stats. `options` may be NULL. Like a load, *out always receives a new handle, also when
 * creation fails (then it holds only the error: kiln_context_last_error gives it, every other
 * context function returns FAILED_PRECONDITION), unless out is NULL (INVALID_ARGUMENT) or the
 * handle cannot be allocated (*out = NULL, RESOURCE_EXHAUSTED).
 * The context does not need `model` to stay alive. Destroy it with kiln_context_destroy.
 * Errors: INVALID_ARGUMENT (model NULL; an option outside its enum or range: cpu_threads
 * outside 0..256, max_loop_iterations below 1), FAILED_PRECONDITION (the model's load failed; KILN_DEVICE_CUDA without a
 * CUDA build, driver or device), INCOMPATIBLE (no kernel image for the device),
 * RESOURCE_EXHAUSTED (memory, threads), DEVICE_ERROR. */
KILN_API kiln_status kiln_context_create(const kiln_model* model, const kiln_context_options* options,
                                         kiln_context** out);

/* Frees the handle, its memory and threads; views it returned become invalid. NULL is
 * allowed. */
KILN_API void kiln_context_destroy(kiln_context* context);

/* The message of the latest failed call on this handle (or of its failed creation); "" if
 * there is none. Valid until the next failed call on the handle, or its destruction. NULL gives
 * "context handle is NULL". Never fails. */
KILN_API const char* kiln_context_last_error(const kiln_context* context);

/* Runs the model on `inputs` (in model input order; num_inputs must be the model's input
 * count) and fills
 * outputs[0..num_outputs) with views of the results in memory the context owns: data, dtype,
 * rank, dims, memory (KILN_MEMORY_HOST on the CPU backend; KILN_MEMORY_DEVICE on CUDA). The
 * views stay valid until the next run on this context (successful or not) or its
 * destruction. num_outputs must be the model's output count. `stream` is a cudaStream_t for
 * the CUDA backend (work is enqueued on it; see kiln_context_synchronize), ignored on the CPU
 * backend, which finishes before returning.
 * Errors: INVALID_ARGUMENT (context NULL; inputs or outputs NULL with a nonzero count;
 * num_inputs or num_outputs not the model's count; an input's rank outside
 * 0..KILN_MAX_RANK, a negative dim, a dtype or memory outside its enum; inputs that pass no
 * entry's prologue, which kiln_context_stats counts as a cache miss: one line per entry naming
 * the input, the check, the value expected and the value found), RESOURCE_EXHAUSTED (over
 * max_context_bytes, or out of memory), DATA_LOSS (a corrupt memory plan),
 * FAILED_PRECONDITION (the handle's creation failed), and the codes kernels report (naming
 * the instruction and op). On an error `outputs` are unchanged. */
KILN_API kiln_status kiln_context_run(kiln_context* context, const kiln_tensor* inputs, size_t num_inputs,
                                      kiln_tensor* outputs, size_t num_outputs, void* stream);

/* Prepares the context for inputs of these dtypes, shapes and memory kinds, as their first run
 * would, and on the CPU runs the model on them a few times (kiln::ExecutionContext::Warm, which
 * says what it does): the next run with such inputs then does no more work than a steady one. It
 * ends the last run's output views. kiln_context_create already warmed
 * the entries whose input shapes are fixed; call this for a model with symbolic shapes, once per
 * shape to serve. num_inputs must be the model's input count; an input's data may be NULL unless
 * an entry's prologue reads that input's values. It counts no run, hit or miss in
 * kiln_context_stats. Errors: INVALID_ARGUMENT (context NULL; inputs NULL with a nonzero count;
 * num_inputs not the model's count; an input's rank, dim, dtype or memory out of range; inputs
 * that pass no entry's prologue, one line per entry), RESOURCE_EXHAUSTED (over
 * max_context_bytes, or out of memory), DATA_LOSS (a corrupt memory plan), DEVICE_ERROR,
 * FAILED_PRECONDITION (the handle's creation failed). */
KILN_API kiln_status kiln_context_warm(kiln_context* context, const kiln_tensor* inputs, size_t num_inputs);

/* Same, but the results are copied into the caller's buffers: outputs[i] (num_outputs = the
 * model's output count) gives data, dtype, rank and dims matching output i as computed for
 * these inputs, and memory (host, or device on the CUDA backend). Errors as kiln_context_run,
 * plus INVALID_ARGUMENT when an output's dtype, shape or memory does not match (the message
 * names the output, the value expected and the value found); outputs are then unchanged. */
KILN_API kiln_status kiln_context_run_into(kiln_context* context, const kiln_tensor* inputs, size_t num_inputs,
                                           const kiln_tensor* outputs, size_t num_outputs, void* stream);

/* Copies the outputs of the last run, which must have succeeded, into the caller's buffers
 * (kiln::ExecutionContext::CopyOutputs): outputs[i] (num_outputs = the model's output count)
 * gives data, dtype, rank and dims of output i as that run computed it (the views
 * kiln_context_run gave), and memory (host, or device on the CUDA backend). On CUDA the copies
 * are enqueued on `stream`: kiln_context_synchronize before reading host memory. For a caller
 * that learnt the shapes from kiln_context_run's views and needs the results in its own
 * buffers, without running again. Errors: INVALID_ARGUMENT (context NULL, outputs NULL with a
 * nonzero count, a count, dtype, shape or memory that does not match: nothing is written
 * then), FAILED_PRECONDITION (the last run failed or there was none; the handle's creation
 * failed), DEVICE_ERROR. */
KILN_API kiln_status kiln_context_copy_outputs(kiln_context* context, const kiln_tensor* outputs, size_t num_outputs,
                                               void* stream);

/* One KV cache kept in the caller's buffer from run to run (kiln::ExecutionContext::CacheBinding):
 * model input `past_input` ([batch, heads, past, head size], float32) and model output
 * `present_output` (its present, [batch, heads, past + seq, head size]) share one buffer of
 * `capacity` rows per head, laid out [batch, heads, capacity, head size]. */
typedef struct kiln_cache_binding {
  int32_t past_input;
  int32_t present_output;
  int64_t capacity;
} kiln_cache_binding;

/* Binds caches[0..count) to the context, replacing earlier bindings (count 0: none)
 * (kiln::ExecutionContext::BindCache, which says how a run then reads and appends the rows).
 * A run of a context with bound caches must be kiln_context_run_into, the views of each bound
 * past and its present pointing at the buffer. Errors: INVALID_ARGUMENT (context NULL, caches
 * NULL with a nonzero count, an index out of range, a capacity below 1, a pair bound twice, a
 * model whose entries do not compute each present with an Attention that reads its past, the
 * message naming the entry and the tensor), FAILED_PRECONDITION (another backend than the CPU's;
 * the handle's creation failed). On an error the earlier bindings stay. */
KILN_API kiln_status kiln_context_bind_cache(kiln_context* context, const kiln_cache_binding* caches, size_t count);

/* Waits for the work of earlier runs enqueued on `stream` (CUDA; returns at once on the CPU
 * backend). Errors: INVALID_ARGUMENT (context NULL), FAILED_PRECONDITION (the handle's
 * creation failed), DEVICE_ERROR. */
KILN_API kiln_status kiln_context_synchronize(kiln_context* context, void* stream);

/* The context's statistics so far. Errors: INVALID_ARGUMENT (a NULL argument),
 * FAILED_PRECONDITION (the handle's creation failed). */
KILN_API kiln_status kiln_context_stats(const kiln_context* context, kiln_stats* out);

/* The backend the context runs on (KILN_DEVICE_CPU or KILN_DEVICE_CUDA, never AUTO) and in
 * words why ("CPU backend, 2 threads"; valid until the handle is destroyed). Either out
 * pointer may be NULL. Errors: INVALID_ARGUMENT (context NULL), FAILED_PRECONDITION (the
 * handle's creation failed). */
KILN_API kiln_status kiln_context_device(const kiln_context* context, int32_t* device, const char** note);

/* Memory the context holds now, in bytes (kiln::ExecutionContext::MemoryUsage): host (arena,
 * kernel scratch) and device (0 on the CPU backend). It only grows, so it is also the peak so
 * far. Either out pointer may be NULL. Errors: INVALID_ARGUMENT (context NULL),
 * FAILED_PRECONDITION (the handle's creation failed). */
KILN_API kiln_status kiln_context_memory(const kiln_context* context, uint64_t* host_bytes, uint64_t* device_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KILN_KILN_H_ */
