// kiln/runtime.h: load a compiled .kiln artifact and run it.
//
//   auto model = kiln::Model::Load("silero_vad.kiln");          // mmap + verify
//   if (!model.ok()) return Fail(model.status());
//   auto ctx = kiln::ExecutionContext::Create(*model, {});      // CPU backend by default
//   if (!ctx.ok()) return Fail(ctx.status());
//   kiln::TensorView in[] = {kiln::TensorView::Host(audio, kiln::DType::kFloat32, {1, 576}), ...};
//   std::vector<kiln::TensorView> out;                          // empty: the context allocates
//   kiln::Status st = ctx->Run(in, out);
//   // out[i] now points into the context's memory, valid until the next Run, Warm or destruction.
//
// Errors: every call returns Status/Result and never throws or aborts. Load reports a
// corrupt or truncated artifact as kDataLoss and a newer format as kIncompatible; Run
// reports inputs that fit no entry as kInvalidArgument, one line per entry naming the input,
// the check, the expected value and the value found.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/export.h"
#include "kiln/library.h"
#include "kiln/stats.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

// The artifact format versions this runtime reads: [kMinFormatVersion, kFormatVersion].
inline constexpr uint32_t kFormatVersion = 10;
inline constexpr uint32_t kMinFormatVersion = 1;

// One dimension of a model input or output as declared by the artifact: a constant, or
// (then `value` is -1) a symbol such as "N", an expression over symbols for an output
// ("((H+1) floordiv 2)"), or where the entries fix it differently, their values joined by
// '|' ("1|4"). Inputs are as the model declares them, before any compile profile.
struct DimInfo {
  int64_t value = -1;
  std::string symbol;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<DimInfo> shape;
};

// Where one instruction runs on one backend, as the compiler's `executors` stage decided from
// that backend's claims (runtime/claims.h) and the artifact records it.
struct InstructionPlacement {
  std::string backend;  // "cpu", "cuda": a registered backend's name, as in --device
  Library library = Library::kCpuKernel;
};

// One instruction of an entry, as the artifact records it. `kiln run --profile`, `kiln bench
// --profile` and its Chrome trace group instruction times by these fields.
struct InstructionInfo {
  std::string name;  // the source node's name (a generated kernel: its region's last node)
  std::string op;    // ONNX op type, "kiln.Fused" for a generated kernel, or another "kiln.*" op
  // Where it runs on each backend, in the order RegisteredBackends lists them ("cuda", "cpu"):
  // what the compiler decided; a backend runs exactly that, or says why not in
  // Stats::last_fallbacks (a library that is missing or refuses the form: then the CPU kernel
  // runs it). On a device backend, consecutive instructions placed on kCpuKernel run as one CPU
  // fallback region, with one copy to the host and one back. Artifacts written before the field
  // get each backend's claims at load.
  std::vector<InstructionPlacement> placements;
  std::string kernel;                   // kiln.Fused: the generated kernel's name, "kiln_<16 hex digits>"
  std::vector<std::string> member_ops;  // kiln.Fused: the ONNX ops it replaced, in trace order
  // Its placement on `backend` ("cpu", "cuda"); kCpuKernel for a backend not listed.
  Library library(std::string_view backend) const {
    for (const InstructionPlacement& p : placements)
      if (p.backend == backend) return p.library;
    return Library::kCpuKernel;
  }
  // One line for messages: "'conv1' (Conv)".
  std::string label() const { return "'" + name + "' (" + op + ")"; }
};

// One dim of an entry's input as the entry's prologue checks it: a constant, or a symbol
// with its range and step (a compile profile's "N in 1..64:8", or the model's symbol with no
// bound). The entry's guards may still refuse shapes these accept.
struct DimCheckInfo {
  int64_t value = -1;    // the constant, or -1 for a symbol
  std::string symbol;    // the symbol ("N") where value is -1
  int64_t min = 1;       // the symbol's range, inclusive
  int64_t max = INT64_MAX;
  int64_t divisor = 1;   // the symbol is a multiple of it
  // Whether the check passes a dim of `v`.
  bool Accepts(int64_t v) const {
    return value >= 0 ? v == value : v >= min && v <= max && v % divisor == 0;
  }
};

// One entry of the artifact: a shape specialisation (a compile profile, or an outcome of a
// shape-dependent If) with its own prologue and instructions. Entries are listed in the
// order Run tries them: as the profiles were given, except that one whose shapes all fit inside
// another's comes before it.
struct EntryInfo {
  // The profile it was compiled for: "default" (the model's own shapes), "N=1",
  // "N in 1..64, H in 32..1024:32", then any If outcomes ("N=1; not (T > 1)").
  std::string name;
  // The backend whose plan it is: "cuda" or "cpu" (BackendRegistration::name), or empty for
  // every backend. An artifact compiled for GPU archs holds, where the CPU runs best with a
  // different plan (more activations folded into Conv, MatMul and Gemm epilogues, which the
  // CUDA libraries cannot apply), two entries with the same profile and prologue: "cuda", then
  // "cpu". A context runs the entries of its backend and the unnamed ones.
  std::string backend;
  EntryCompileStats compile;              // stage names, times and op counts; NVRTC time
  // The printed trace of each stage, in compile.stage_names order (Thunder's last_traces).
  std::vector<std::string> stage_traces;
  // The prologue as a readable trace, one check per line in the order Run performs them
  // (Thunder's last_prologue_traces); `kiln inspect` prints it. Empty in a selective runtime
  // (docs/edge.md), which leaves out the text that only tools read.
  std::string prologue_text;
  // Its prologue's dim checks: per model input (Model::inputs() order), one per dim.
  std::vector<std::vector<DimCheckInfo>> input_dims;
  std::string arena_bytes;                // arena size: a number, or an expression over symbols
  // Its run-time dims (format 5): sizes an instruction reports once it has run, such as
  // NonZero's count, one line each: "where.count <= N, set by instruction 1 'nonzero'
  // (NonZero)". The memory plan has room for the bound; a Run starts each at its bound and
  // evaluates every shape again when the instruction reports another size
  // (Stats::runtime_dim_binds). On the CUDA backend the instruction is a CPU fallback whose size
  // the host reads between the entry's segments of device work. A bound that is a room (format
  // 8: a while loop's iterations, "y.count <= y.rows, ...; room 16 at first, doubled when a
  // call needs more") is set by the context, which doubles it when a call needs more and runs
  // that call again (Stats::room_growths).
  std::vector<std::string> runtime_dims;
  int32_t num_instructions = 0;
  // Its instructions, in the order Run executes them.
  std::vector<InstructionInfo> instructions;
};

// One generated kernel of the artifact (the compiler's `fusion` stage made it from a fused
// region). The CPU backend runs its portable program; the CUDA backend loads the image for
// the device's arch, or JIT-compiles the PTX.
struct KernelInfo {
  std::string name;                  // CUDA entry point, "kiln_<16 hex digits>"
  std::vector<std::string> archs;    // "sm_90" cubins, "compute_90" PTX; empty: CPU-only artifact
  std::vector<uint64_t> image_bytes; // size of each image, same order as archs
  std::string source;                // CUDA C++ source as given to NVRTC
  std::string program;               // the portable program, printed (empty in a selective runtime, as launch is)
  std::string launch;                // launch rule, e.g. "elementwise, block 256, vector 4, 32-bit indices"
  int64_t bytes_moved = -1;          // input + output bytes per launch; -1 where shapes are symbolic
};

// Limits Model::Load enforces on an artifact from an untrusted source, and that the model's
// ExecutionContexts enforce on the memory its entries declare. Sizes in bytes. A declared
// size above a limit is refused before anything of that size is allocated.
struct LoadOptions {
  // Largest artifact accepted: the file's size (Load(path), checked before it is mapped) or
  // bytes.size() (Load(bytes), checked before the copy). Default: no limit beyond the
  // address space. Above it: kResourceExhausted.
  uint64_t max_artifact_bytes = UINT64_MAX;
  // Largest memory one ExecutionContext of this model may hold for its entries: the host
  // arena plus the kernel workspace, each as allocated (rounded up to 64 bytes); on the CUDA
  // backend it also bounds the device arena, which has the arena's size. 0, the default,
  // means the host's physical memory (sysconf), so a size no machine could hold never reaches
  // an allocation. Load refuses an entry whose arena size is a constant above the limit; Run
  // refuses, before allocating, a call whose shapes make an entry's arena plus workspace
  // exceed it (on the CUDA backend: the device arena before it runs, the host memory of CPU
  // fallback regions when the first region runs). All are kResourceExhausted naming the
  // entry, the size and the limit.
  uint64_t max_context_bytes = 0;
  // Run the generated kernels on the artifact's native CPU code (Artifact.native_code: machine
  // code `kiln compile` made for each CPU target, docs/architecture.md "Native CPU code") when
  // it has some this CPU runs. Load then verifies the chosen target's code (its calling
  // convention, size and kernel table: kDataLoss naming the field and the target when
  // malformed) and maps it read + execute; none of it runs before a context runs a kernel.
  // false: Load maps no code and the CPU backend interprets every generated kernel's portable
  // program (slower, the same results). Default: true. Native code is machine code: with it
  // allowed, a hostile artifact can run arbitrary code in the process (docs/security.md), so
  // set this to false for artifacts from a source you do not trust.
  // Model::native_code_target() and Stats::native_code_target say what was chosen, and why none.
  bool native_code = true;
  // Ed25519 public keys whose signature Load requires (docs/security.md, "Signed artifacts";
  // `kiln sign` makes one), each a PEM "PUBLIC KEY" block as `openssl pkey -pubout` writes it.
  // Empty (the default): a signature is neither required nor checked. Non-empty: Load reads
  // the file into private memory (never a mapping that a later write to the file could change),
  // and before it trusts any field beyond the section sizes in the header, checks that the file
  // ends with a signature trailer whose Ed25519 signature, over the SHA-256 digests of the
  // header, the FlatBuffer (which holds any native code) and the weights, verifies under one of
  // these keys. Errors, nothing else of the artifact read: kInvalidArgument (an entry is not an
  // Ed25519 public key in PEM), kFailedPrecondition (no signature, or one by a key not listed:
  // the message gives the signer's public key in hex), kDataLoss (the signature does not verify:
  // a section or the trailer changed after signing, or a truncated file), kUnimplemented (a
  // runtime built without libcrypto, as a selective one is: it verifies no signature; it also
  // decrypts no weights, and encrypted ones fail its weights checksum: kDataLoss). Read during
  // Load only.
  std::vector<std::string> trusted_public_keys{};
  // Encrypted weights (`kiln sign --encrypt-weights`, format version 10): called once per Load,
  // on the loading thread, with the key id the artifact names (text, up to 32 bytes, possibly
  // empty) and a 32-byte buffer to fill with the AES-256 key; it returns Ok, or an error that
  // Load returns with the artifact's path as context. Load then decrypts the weights with
  // AES-256-GCM in place, in the private copy the model runs from (the CPU backend reads them
  // there; the CUDA backend uploads that host copy), wipes the key buffer, and writes nothing to
  // disk. Setting it makes Load(path) read the file into private memory, as trusted_public_keys
  // does. Unset (the default) and an encrypted artifact: kFailedPrecondition. A key under which
  // the weights do not decrypt (the GCM tag does not match): kInvalidArgument when the signature
  // was verified (the weights are the signer's, so the key is wrong), else kDataLoss (a wrong
  // key or changed weights). An unencrypted artifact never calls it. Load keeps neither the
  // callback nor the key after it returns. Set in a runtime built without libcrypto:
  // kUnimplemented.
  std::function<Status(std::string_view key_id, std::span<uint8_t, 32> key)> weights_key{};
};

// One target of an artifact's native CPU code (Artifact.native_code), for inspection.
struct NativeCodeInfo {
  std::string target;            // "x86-64", "x86-64-v3", "x86-64-v4" or "aarch64"
  uint32_t abi = 0;              // its calling convention's version (runtime/cpu/native/abi.h)
  uint64_t code_bytes = 0;       // machine code and constants, bytes
  std::vector<uint32_t> kernels; // the generated kernels it has a function for (Model::kernels() indices)
};

// Where an artifact came from (Artifact.provenance; docs/reproducibility.md): what makes the
// same bytes again. Artifacts written before it have every field empty, and so does every
// artifact in a selective runtime (docs/edge.md), which leaves inspection to the full runtime.
struct ProvenanceInfo {
  std::string kiln_version;          // of the compiler that wrote it: "0.1.0"
  // The options that shaped the bytes, in `kiln compile` syntax and a fixed order, with
  // host-dependent defaults resolved: "--arch=sm_80,sm_86,sm_87,sm_89,sm_90,compute_90",
  // "--cpu-targets=x86-64,x86-64-v3,x86-64-v4", "--shape=x=1,3,224,224", a constant input as
  // "--constant-input=NAME=sha256:HEX" (its data's SHA-256, not its file's path).
  std::vector<std::string> flags;
  std::string model_sha256;          // the ONNX file's SHA-256, 64 lowercase hex digits; empty: traced
  // The libraries the compiler was built against or ran with, as (name, version):
  // "CUDA" (its headers), "NVRTC" (the library that made the cubins and PTX), "cuBLASLt" and
  // "cuDNN" (the headers the CUDA plans' descriptors follow), "LLVM" (the native CPU code),
  // "ONNX", "FlatBuffers"; those absent from the compiler's build are absent.
  std::vector<std::pair<std::string, std::string>> libraries;
};

struct CheckOptions;
struct CheckReport;
// The preflight, which reads a Model without its weights: kiln/check.h.
KILN_API Result<CheckReport> CheckArtifact(const std::string& path, const CheckOptions& options);

// A loaded, verified artifact. Immutable and thread-safe: copies are cheap (they share the
// mapped file and weights) and may be used from any thread. The mapping lives as long as
// the last copy and every ExecutionContext made from it.
class KILN_API Model {
 public:
  // Maps the file read-only and verifies it (FlatBuffers Verifier, then Kiln's semantic
  // checks, the memory plan where its sizes are constants, and the weights checksum); with
  // LoadOptions::trusted_public_keys or weights_key it reads the file into private memory instead,
  // checks the signature first and decrypts the weights (their errors are listed there).
  // Errors: kNotFound (no file), kDataLoss (corrupt or
  // truncated: the message names the section and file offset), kIncompatible (a well-formed
  // artifact of a format version outside [kMinFormatVersion, kFormatVersion]; a header whose
  // version field is damaged is kDataLoss), kResourceExhausted (over a LoadOptions limit).
  static Result<Model> Load(const std::string& path, const LoadOptions& options = {});
  // Same from bytes in memory. The bytes are copied into memory the Model owns, so the
  // caller may free them on return.
  static Result<Model> Load(std::span<const uint8_t> bytes, const LoadOptions& options = {});

  uint32_t format_version() const;
  std::string_view producer() const;  // Kiln version that wrote the artifact
  const ProvenanceInfo& provenance() const;
  // The `kiln compile --precision` of the artifact: "fp32", "fp16" or "bf16" (weights and
  // activations; inputs() and outputs() give the dtypes callers pass and receive). Artifacts
  // written before the field was filled read "fp32".
  std::string_view precision() const;
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  const std::vector<EntryInfo>& entries() const;
  const std::vector<KernelInfo>& kernels() const;
  uint64_t weights_bytes() const;
  // The artifact's native CPU code, one per target, in artifact order (empty: none). Listed
  // whether or not it was chosen or allowed (LoadOptions::native_code).
  const std::vector<NativeCodeInfo>& native_code() const;
  // The target whose native code the CPU backend runs the generated kernels with ("x86-64-v3"),
  // chosen at Load as the best of native_code() this CPU runs, capped by KILN_MAX_CPU_ISA
  // ("baseline": only "x86-64"; "avx2": up to "x86-64-v3"); empty when the portable programs
  // are interpreted. native_code_note() says why none ("the artifact has no native code",
  // "native code refused (LoadOptions::native_code is false)", "this CPU runs none of its
  // targets (x86-64-v4)", "x86-64-v3 left out by KILN_MAX_CPU_ISA=baseline", another calling
  // convention), or what the cap left out when one was chosen; empty when there is nothing to say.
  const std::string& native_code_target() const;
  const std::string& native_code_note() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  friend Result<CheckReport> CheckArtifact(const std::string& path, const CheckOptions& options);
  explicit Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

enum class Device : int32_t {
  kCpu = 0,
  kCuda = 1,
  kAuto = 2,  // CUDA when a usable device is present, else CPU
};

// Options of the CPU backend (runtime/cpu/), and of the CPU backend a device backend runs its
// CPU fallback regions on (one thread there, Kiln's kernels: these options do not apply to it).
// docs/cpu.md has the details.
struct CpuOptions {
  // Threads for a Run, the calling thread included (onnxruntime's intra_op_num_threads), 1 to
  // kMaxThreads; 0 means one per CPU this process may run on. Kiln's kernels give the same bits at
  // every count (oneDNN's may not). Creating a CPU context sets OpenBLAS's process-wide thread
  // count to 1. ExecutionContext::Create fails with kInvalidArgument outside [0, kMaxThreads].
  int threads = 0;
  static constexpr int kMaxThreads = 256;
  // Run Conv, MaxPool, AveragePool, MatMul, Gemm, LSTM, GRU and RNN on oneDNN where the runtime was built with it
  // (-DKILN_WITH_ONEDNN=ON) and it takes the form (runtime/cpu/claims.cc,
  // runtime/cpu/onednn/onednn.h), else on Kiln's kernels (Stats::last_fallbacks says why). The
  // first Run at a new binding (or Create, or ExecutionContext::Warm) plans the oneDNN ops; the plans
  // of the last 8 bindings are kept.
  // Kiln's kernels' GEMMs call oneDNN's dnnl_sgemm (or OpenBLAS) either way
  // (runtime/kernels/gemm.h).
  bool onednn = true;
};

// Options of the CUDA backend (runtime/cuda/). docs/architecture.md has the details.
struct CudaOptions {
  int device_ordinal = 0;  // which CUDA device (cuDeviceGet ordinal)
  // Capture each segment of an entry's device work (between the host's decisions and CPU fallback
  // regions) at each shape and buffer addresses as a CUDA graph once and replay it
  // (Stats::graph_hits/graph_misses). Needs a non-null stream (a caller's, or own_stream's): the
  // legacy default stream cannot capture. Not while profiling.
  bool graphs = false;
  // Create makes a non-blocking stream of the context's own (destroyed with it), which Run,
  // CopyOutputs and Synchronize use where their `stream` is null, so that contexts on one GPU
  // overlap and `graphs` captures without a caller's stream. Create fails with kDeviceError when
  // the stream cannot be made.
  bool own_stream = false;
  // Fail closed on placement (docs/architecture.md, "Device residency"): the context keeps every
  // tensor's data on the device, or refuses. ExecutionContext::Create fails with
  // kFailedPrecondition when the context would not run on a CUDA device (Device::kAuto finding
  // none) or when an entry it runs places an instruction on the host (a CPU region: an op no CUDA
  // library or generated kernel runs), naming the entry, the instruction, its ONNX node and op.
  // Run fails with kInvalidArgument for an input or a caller's output in host memory, and with
  // kFailedPrecondition, before the instruction runs, when a library refuses an instruction at
  // these shapes so that it would fall back to the host (naming it and the library's reason).
  // The executor's small control transfers (a run-time If's or Loop's condition, a run-time size,
  // the entry's symbol values) are allowed: Stats::last_control_transfers counts them.
  bool require_device_resident = false;
};

// Options of an ExecutionContext: the common ones, then one struct per backend; a backend reads
// its own and ignores the others.
struct ContextOptions {
  Device device = Device::kAuto;
  // Time every instruction (Stats::last_instruction_ns, last_instruction_library; a run-time
  // Loop's instructions summed over its iterations): a clock read (CPU) or a CUDA event (GPU) per
  // instruction; no CUDA graphs; on the CUDA backend a run-time Loop's jump back waits for the
  // stream, to read the iteration's events.
  bool profile = false;
  // The most iterations one Run's run-time Loops may take, all loops together (nested loops
  // multiply): past it the Run fails with kResourceExhausted naming the loop's instruction, so a
  // hostile model cannot spin forever. At least 1; Create fails with kInvalidArgument otherwise.
  int64_t max_loop_iterations = 10'000'000;
  // The CPU backend's warm-up runs (ExecutionContext::Warm, and Create's warm-up of fixed-shape
  // entries): at most this many runs on the warmed inputs, 0..100. 0: none, for a context that
  // runs once (a tool's single call), whose first Run then does the one-time work itself.
  // Create fails with kInvalidArgument outside the range.
  int32_t warm_runs = 5;
  CpuOptions cpu = {};
  CudaOptions cuda = {};
};

// Per-thread execution state over one Model: the memory arena, scratch, and Stats.
// Thread-compatible: use one context from one thread at a time; create one context per
// thread to serve calls concurrently. Memory is allocated at creation, at Warm, and when an
// entry first sees larger symbolic shapes, never in a steady-state Run. Create warms every
// entry whose input shapes are fixed (Warm), so that the first Run of such a model costs what
// the later ones do; a symbolic entry is warmed by Warm at the shapes the caller names, or by
// its first Run.
class KILN_API ExecutionContext {
 public:
  // kCuda: the CUDA backend on device_ordinal; kAuto: that, else the CPU backend (and
  // device_note() says why). Errors for kCuda: kFailedPrecondition when the runtime was
  // built without CUDA or there is no driver or device; kIncompatible when a generated
  // kernel has neither a cubin for the device's arch nor PTX; kResourceExhausted when the
  // weights do not fit; kDeviceError for other driver failures.
  // CPU kernels: a few have AVX2+FMA or AVX-512 versions besides the baseline x86-64 one,
  // chosen per process from the CPU (runtime/cpu/arch/x86/cpu_isa.h); the depthwise convolution's round
  // differently in the last bits, the others give the same bits. The environment variable
  // KILN_MAX_CPU_ISA=baseline makes every CPU run the baseline kernels (for tests, like
  // oneDNN's ONEDNN_MAX_CPU_ISA; "avx2": at most the AVX2+FMA ones; "avx512" or unset: the
  // best the CPU has), and when that is below what the CPU has, device_note() says so, e.g.
  // ", baseline x86-64 kernels (KILN_MAX_CPU_ISA=baseline)". It is read once per process.
  // Create fails with kInvalidArgument when it holds another value.
  // It caps Kiln's own kernels only: oneDNN (CpuOptions::onednn) reads ONEDNN_MAX_CPU_ISA.
  // Warm-up: Create then warms (Warm below) each entry of its backend whose every input dim is
  // a constant and whose prologue reads no input's values, at those shapes, as host inputs (not in
  // a selective runtime); on the CPU that includes Warm's runs on zeros, so Create takes two to
  // five Runs longer. The first CPU context of a process also runs the GEMM library's one-time
  // setup (oneDNN's dnnl_sgemm generates its kernels at its first call of each kind of product:
  // about 32 ms on this project's 2-core machine), which its kernels' first Run paid before.
  // A warm-up that fails (the shapes need more than LoadOptions::max_context_bytes, an
  // allocation fails) does not fail Create: the entry's first Run meets the same error and
  // returns it.
  static Result<ExecutionContext> Create(const Model& model, const ContextOptions& options);

  // Prepares the entry that Run would choose for `inputs` as its first Run with those shapes
  // would, without running any instruction, so that the next Run with inputs of the same
  // dtypes, shapes and memory kinds does no more work than a steady-state Run: it binds the
  // entry's shapes and memory plan; allocates the context's memory for them; plans the libraries
  // (oneDNN primitives on the CPU, with the model weights they read put in their layouts; on CUDA
  // the placement of cuBLASLt and cuDNN instructions, cuBLASLt's algorithms and cuDNN's
  // convolution and pooling algorithms); on the CPU, touches the arena and workspace pages and
  // starts the threads, and on CUDA reserves the device arena, input staging and library
  // workspace. On the CPU it then runs the entry on those inputs (zeros where `data` is null)
  // until a run is no more than 10% faster than the one before or the runs have taken 10 ms, at
  // most ContextOptions::warm_runs times, unless a KV
  // cache is bound or an instruction observer is set: what only an execution does (oneDNN's
  // first execution of a primitive, the first faults on native code, the caches' first fill)
  // is then done. Left to the first Run on CUDA: CUDA graph capture, cuDNN's SDPA and RNN plans
  // and RNN weight spaces. Run-time dims are
  // prepared at their bounds, as a Run starts them. For an entry
  // with symbolic dims (a compile profile's "N in 1..64"), call it once per shape to serve;
  // Create already warmed the entries with fixed shapes.
  // `inputs`: as Run's (count, dtypes, shapes, memory kinds). Their data is read only where an
  // entry's prologue reads input values (an int64 shape input, EntryInfo::prologue_text's value
  // checks): there it must be the real values; elsewhere `data` may be null (never dereferenced).
  // Stats: Warm is not a call: calls, cache_hits, cache_misses, the entries' hits and every
  // last_* figure stay as they were, except last_miss_reasons, which a miss sets as Run's does.
  // Warm changes no result: a Run gives the same outputs with or without it. It ends the last
  // Run's outputs as a Run does: their views are invalid after it, and CopyOutputs has nothing
  // to copy.
  // Errors: as Run's before it runs an instruction: kInvalidArgument (no entry's prologue passes,
  // one line per entry; shapes that cannot be computed), kResourceExhausted (over
  // LoadOptions::max_context_bytes, or an allocation failed), kDataLoss (a corrupt memory plan),
  // a library's planning error (kDeviceError on CUDA); kFailedPrecondition on a moved-from context.
  // Thread-compatible, as Run. A selective runtime (docs/edge.md) leaves the warm-up out: there
  // Create warms no entry and Warm is undefined (a program calling it does not link).
  Status Warm(std::span<const TensorView> inputs);

  // Runs the model. `inputs` are in the model's input order (Model::inputs()).
  // Entry selection: each entry's prologue (EntryInfo::prologue_text) is tried in order, and
  // the first that passes runs (a cache hit). A prologue checks the input count, then per
  // input: data non-null; memory kind (kHost on the CPU backend, kHost or kDevice on CUDA);
  // dtype; data aligned to the dtype's size; rank; each dim, a constant or a symbol bound at
  // its first use and equal at later ones, within its range and a multiple of its step;
  // then the entry's guards. Wider alignment is never required: generated kernels use
  // 16-byte vector loads when every pointer they touch allows it, scalar loads otherwise.
  // The prologues allocate nothing and throw nothing; a miss writes no output.
  // `outputs`: either empty, in which case it is filled with views into context-owned
  // memory, valid until the next Run or Warm or the context's destruction (passing back the
  // vector the last Run filled, unchanged, is the same as passing it empty); or one view per
  // model output with caller-owned `data`, dtype and shape matching the computed output,
  // into which the results are copied. `stream` is a cudaStream_t for the CUDA backend, ignored
  // by the CPU backend (which finishes before returning).
  // Errors: kInvalidArgument when the inputs pass no entry's prologue (one line per
  // entry) or a caller-supplied output does not match; errors from kernels keep their
  // code and name the instruction and op; kFailedPrecondition on a moved-from context;
  // kResourceExhausted when the entry's arena plus workspace for these shapes would exceed
  // LoadOptions::max_context_bytes, or its allocation fails; kDataLoss when the artifact's
  // memory plan for these shapes is corrupt (a tensor outside the arena, or two tensors live
  // at the same time sharing bytes).
  // Allocation: none in Kiln's code once an entry has seen its shapes; OpenBLAS's own
  // small-matrix GEMM path may still call malloc inside a GEMM, and oneDNN (CpuOptions::onednn)
  // allocates a few small blocks inside each of its calls (its map of the call's
  // arguments), the same number at every Run.
  Status Run(std::span<const TensorView> inputs, std::vector<TensorView>& outputs,
             void* stream = nullptr);

  // Copies the outputs of the last Run, which must have succeeded, into `outputs`: one view per
  // model output, with its dtype and shape (those of the views that Run handed out) and
  // caller-owned `data`, in host memory on the CPU backend, host or device memory on CUDA.
  // For a caller that took the context's own views (Run with empty `outputs`) to learn the
  // shapes, and needs the results in buffers of its own, such as a server's responses, without
  // running again. On the CUDA backend the copies are enqueued on `stream` (Synchronize before
  // reading host memory); the CPU backend copies before returning. Allocates nothing once it
  // has seen as many outputs.
  // Errors: kFailedPrecondition when the last Run failed or there was none, or a Warm came after
  // it (nothing to copy);
  // kInvalidArgument for a count, dtype, shape, memory kind or null `data` that does not fit,
  // before anything is written; a device copy's error.
  Status CopyOutputs(std::span<const TensorView> outputs, void* stream = nullptr);

  // A KV cache that stays in the caller's buffers from Run to Run, each step appending its rows
  // in place (onnxruntime-genai's past_present_share_buffer), for a decoder exported with its
  // cache as inputs and outputs (past_key_values.N.key -> present.N.key, Hugging Face Optimum's
  // layout): a Run then copies no part of the cache. One binding pairs a past input with the
  // present output the model computes from it.
  struct CacheBinding {
    int32_t past_input = -1;      // index in Model::inputs(): a float32 [batch, heads, past, head size]
    int32_t present_output = -1;  // index in Model::outputs(): that past and the new rows, [batch, heads, past + seq, head size]
    int64_t capacity = 0;         // rows per head of the caller's buffer: the longest past + seq
  };
  // Binds `caches` (replacing any earlier bindings; empty: none). After it, each Run takes, for
  // each binding, one caller buffer laid out [batch, heads, capacity, head size] (row r of head h
  // of batch item b at element ((b * heads + h) * capacity + r) * head size): the past input's
  // view and the present output's view both point at it, with dims [batch, heads, past, head size]
  // and [batch, heads, past + seq, head size] (the rows in use). Run reads the past from rows
  // [0, past) of each head, writes the new rows at [past, past + seq), and leaves the rest of the
  // buffer as it was, so the next step passes the same buffer with past + seq as its past. Run
  // then needs caller-owned `outputs`; it fails with kInvalidArgument, before it writes anything,
  // when a bound output's view is not the buffer its past's view points at, or past + seq exceeds
  // `capacity`. CopyOutputs fails with kFailedPrecondition while caches are bound (the present is
  // the caller's buffer already).
  // Only a model whose every entry computes each bound present with an Attention instruction that
  // reads that past and nothing else reads either (the compiler makes it of
  // present = Concat(past, new); compiler/passes/attention.h), in float32, on the CPU backend.
  // Errors: kInvalidArgument for an index out of range, a capacity below 1, an input or output
  // bound twice, or a binding the entries do not compute that way (the message names the entry,
  // the tensor and what computes or reads it); kFailedPrecondition on another backend than the
  // CPU's or a moved-from context. On an error the earlier bindings stay. A selective runtime
  // built without the Attention kernel (cmake/selective.cmake) has no BindCache.
  Status BindCache(std::span<const CacheBinding> caches);

  // Waits for work enqueued on `stream` (no-op on the CPU backend).
  Status Synchronize(void* stream = nullptr);

  const Stats& stats() const;
  // The backend this context runs on (kCpu or kCuda, never kAuto), and in words why: the
  // device's name, or why CUDA was not used ("CPU backend; CUDA unavailable: no CUDA
  // driver found (...)").
  Device device() const;
  const std::string& device_note() const;
  // Bytes of host memory held now: memory_usage().host_bytes.
  uint64_t arena_bytes() const;

  // Memory held by this context now, in bytes. Its buffers only grow (at Create and when an
  // entry first sees larger shapes) and live until the context is destroyed, so this is also
  // the peak over the context's life so far. A moved-from context reads zero.
  struct MemoryUsage {
    // Host: on the CPU backend, the arena and kernel workspace; on the CUDA backend, the host
    // arena and workspace of CPU fallback regions (none until a region runs) and the host
    // copies of device inputs they read. The Model's mapped weights are the Model's, not
    // counted.
    uint64_t host_bytes = 0;
    // Device (0 on the CPU backend): the device arena, input staging, symbolic values, error
    // words, the cuBLASLt/cuDNN workspace, cuDNN RNN's weight spaces (a copy of an LSTM's, GRU's
    // or RNN's W, R and B in cuDNN's layout), and the uploaded weights (shared by the contexts of
    // one Model on one device, so counted in each). Not counted: what the driver, cuBLASLt,
    // cuDNN and CUDA graphs allocate internally, and the loaded kernel modules.
    uint64_t device_bytes = 0;
  };
  MemoryUsage memory_usage() const;

  ExecutionContext(ExecutionContext&&) noexcept;
  ExecutionContext& operator=(ExecutionContext&&) noexcept;
  ~ExecutionContext();

  // Runtime-internal state (runtime/context_impl.h), for Kiln's own tools; not an API.
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  explicit ExecutionContext(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
