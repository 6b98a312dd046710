// The compiler driver: ONNX file (or any frontend's import) -> .kiln artifact bytes, through the
// stages of compiler/pipeline/pipeline.h (import, canonical, precision, fusion, executors, plan,
// codegen, serialize; docs/architecture.md says what each does).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/passes/attention.h"
#include "compiler/passes/epilogue.h"
#include "compiler/passes/precision.h"
#include "compiler/passes/qdq.h"
#include "compiler/pipeline/pipeline.h"
#include "compiler/profile.h"
#include "kiln/status.h"

namespace kiln::compiler {

struct CompileOptions {
  // Fixes dims of inputs (name -> dims, -1 keeps a dim symbolic), as `--shape`.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Binds runtime inputs to constants, as `--constant-input` (onnx_import::ImportOptions).
  std::map<std::string, std::shared_ptr<const ir::ConstData>> constant_inputs;
  // Shape specialisations (compiler/profile.h): one entry each, compiled for the shapes it
  // admits, in this order except that one whose shapes fit inside another's goes first
  // (TryOrder). Empty: one entry, symbolic where the model is.
  std::vector<Profile> profiles;
  // At most this many entries per profile are made by splitting on shape-dependent If
  // conditions.
  int max_entries = 8;
  // Called with one human-readable line per step (progress and the compile log).
  std::function<void(const std::string&)> log;
  // `--loop-scan-bound`: the iterations a run-time Loop's scan outputs have room for when its
  // trip count bounds nothing (PyTorch's while loop, M = INT64_MAX; M computed from data), and
  // at most this many where M is an input's value. A call that runs more fails with
  // kResourceExhausted naming the loop. 0: such a loop's scan outputs are room the runtime
  // grows: 16 rows at first, doubled when a call needs more (that call runs again). At most 2^24.
  int64_t loop_scan_bound = 0;
  // The fusion stage (epilogues on MatMul/Gemm/Conv, then fused regions). Off: every op
  // stays a separate instruction, as a reference for the fused artifact.
  bool fuse = true;
  // The `precision` stage (compiler/passes/precision.h): `--precision`, `--keep-fp32` and
  // `--io-precision`. The default keeps the model in float32.
  passes::PrecisionOptions precision;
  // NVRTC targets: "sm_NN" cubins and "compute_NN" PTX. Empty: a CPU-only artifact that
  // holds the portable programs alone (`--arch none`).
  std::vector<std::string> archs = {"sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "compute_90"};
  // The CPU targets of the kernels' native code (`--cpu-targets`; compiler/codegen/cpu/targets.h):
  // names separated by commas, "host" for this machine's family (x86-64, x86-64-v3 and
  // x86-64-v4 on x86-64; aarch64 on aarch64), or "none". Without LLVM in the build, none.
  std::string cpu_targets = "host";
  // The CPU plan's layout of 2-D Convs (`--cpu-layout`, passes/channels_last.h): true, NHWC, for
  // oneDNN's convolutions; false keeps NCHW, for a runtime without oneDNN (a selective one).
  bool cpu_channels_last = true;
  std::string kernel_cache_dir;  // empty: the default (~/.cache/kiln/kernels)
  bool use_kernel_cache = true;
  int jobs = 0;                  // NVRTC threads; 0: one per core
  // Called as kernel compile jobs finish: done, total, how many came from the cache.
  std::function<void(int, int, int)> kernel_progress;
  // The last stage to run (`--to`). Before serialize, no artifact is made: the compile returns
  // no bytes, and the summary holds each entry's trace of this stage (EntrySummary::last_trace;
  // for import, one per profile). A stage these options leave off (precision, fusion) is an
  // error (CheckStopAfter).
  Stage stop_after = Stage::kSerialize;
};

struct EntrySummary {
  std::string name;
  int instructions = 0;              // -1: stopped before the plan stage
  std::string arena_bytes;           // number or expression; empty before the plan stage
  int64_t lower_bound_bytes = -1;    // static entries only
  // Stopped before serialize (CompileOptions::stop_after): the entry's trace of that stage.
  std::string last_trace;
  std::string backend;  // the backend whose plan it is (EntryRecord::backend); empty: every one
  // Each stage the entry went through, in order: its name, wall time (ns; 'import' is shared by
  // the entries of one profile, 'codegen' by every entry) and ops in its output (-1: not counted).
  // The artifact records no times, so that its bytes are the same at every compile.
  struct StageTime {
    std::string name;
    int64_t time_ns = 0;
    int ops = -1;
  };
  std::vector<StageTime> stages;
};

struct CompileSummary {
  std::vector<EntrySummary> entries;
  int64_t total_ns = 0;
  int ops_before_fusion = 0;  // first entry: canonical ops
  int ops_after_fusion = 0;   // first entry: ops after fusion (kernels and unfused ops)
  int kernels = 0;            // distinct generated kernels in the artifact
  int compile_jobs = 0;       // (kernel, arch) NVRTC jobs
  int cached_jobs = 0;        // of which served from the cache
  int64_t nvrtc_ns = 0;       // wall time of code generation and NVRTC
};

// The `fusion` stage on its own: attention made one op, epilogues folded into MatMul/Gemm/Conv
// (compiler/passes/epilogue.h), with `channels_last` 2-D Convs in NHWC
// (compiler/passes/channels_last.h), then fused regions (compiler/fusion/fusion.h). `folded`,
// when not null, receives the trace the fusion read (after those two), the one whose node
// indices FusedKernel::member_nodes refer to. Appends the stage's log lines to `log`.
// `activations`: which activations fold into epilogues (kGpuLibraries for an artifact with GPU
// archs); `channels_last` is for the CPU backend's plan; `attention` makes recognised attentions
// one Attention op (compiler/passes/attention.h, run first), all of them, or with
// `attention_keep` set only those it keeps (the CUDA plan's: passes/cudnn_sdpa_filter.h).
// It starts with the quantized groups (compiler/passes/qdq.h): folded into QLinearConv and
// QLinearMatMul for QdqTarget::kCpu (the CPU backend's plan), on cuBLASLt's int8 GEMM for kCuda
// (the `cuda` plan's MatMuls), and the DequantizeLinear of every
// constant folded.
Result<ir::Trace> FusionStage(const ir::Trace& canonical, std::vector<std::string>* log, int* kernels,
                              ir::Trace* folded = nullptr,
                              passes::EpilogueActivations activations = passes::EpilogueActivations::kAny,
                              bool channels_last = false, bool attention = false,
                              const passes::AttentionFilter& attention_keep = {},
                              passes::QdqTarget qdq = passes::QdqTarget::kNone);

// A frontend's `import` stage: the trace of the model with the given input dims fixed (name ->
// dims, -1 keeps a dim as declared; empty: the model's own shapes). The driver calls it once,
// then once more per profile that fixes dims, so every stage sees static shapes there.
using ImportFn = std::function<Result<ir::Trace>(const std::map<std::string, std::vector<int64_t>>& input_shapes)>;

// The driver for any frontend: import, then every stage per profile, code generation and
// serialisation. `source` names the model in the log and the artifact ("model.onnx"), and
// `model_sha256` is its file's SHA-256 for the artifact's provenance (empty: not from a file;
// compiler/provenance.h). options.input_shapes are passed to `import` (options.constant_inputs
// are the ONNX frontend's, see CompileOnnxFile). Errors as CompileOnnxFile's. No bytes (an empty vector)
// when options.stop_after is before serialize. Never throws.
Result<std::vector<uint8_t>> CompileImported(const std::string& source, const std::string& model_sha256,
                                             const ImportFn& import, const CompileOptions& options,
                                             CompileSummary* summary);

// CompileImported with the ONNX importer. Errors name the node, value or file. Over a limit
// (ImportOptions' file size, constant bytes and subgraph nesting, passes::kMaxSymTreeSize, an
// arena over int64) or out of memory: kResourceExhausted; a size that overflows int64 is an
// error naming the node. Never throws.
Result<std::vector<uint8_t>> CompileOnnxFile(const std::string& path, const CompileOptions& options,
                                             CompileSummary* summary);

}  // namespace kiln::compiler
