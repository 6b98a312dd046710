// kiln/compile.h: compile an ONNX model into a .kiln artifact in this process, as `kiln compile`
// does (docs/architecture.md, "Compiler stages"). Part of libkiln_compiler (Kiln::compiler), which
// links ONNX and protobuf and opens NVRTC with dlopen for GPU archs; the runtime (kiln/runtime.h)
// needs none of them.
//
//   kiln::OnnxCompileOptions options;
//   options.profiles = {"x:N=1..64"};
//   options.archs = std::vector<std::string>{};          // a CPU-only artifact (--arch none)
//   kiln::CompileReport report;
//   kiln::Result<std::vector<uint8_t>> artifact = kiln::CompileOnnx("model.onnx", options, &report);
//   // *artifact: the .kiln bytes, for kiln::Model::Load or a file.
//
// Thread safety: calls may run concurrently; each reads only its own options. NVRTC's compiled
// kernels are cached in a folder shared by every process (OnnxCompileOptions::kernel_cache_dir).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

namespace kiln {

// The options of CompileOnnx, one per `kiln compile` flag (`kiln compile --help` says more).
struct OnnxCompileOptions {
  // Input dims fixed at compile time (--shape): input name -> its dims, -1 keeping a dim
  // symbolic.
  std::map<std::string, std::vector<int64_t>> shapes;
  // Shape and value specialisations in --profile syntax ("x:N=1", "x:N=1..64,H=32..1024:32",
  // "sr=16000"): one artifact entry each, tried in this order (one whose shapes fit inside
  // another's first). Empty: one entry, symbolic where the model is.
  std::vector<std::string> profiles;
  // Inputs bound to constants (--constant-input): input name -> a tensor in host memory, whose
  // bytes are copied during the call (the caller keeps ownership).
  std::map<std::string, TensorView> constant_inputs;
  // --precision: "fp32" (default), "fp16" or "bf16"; --keep-fp32: op types that stay float32;
  // --io-precision: "declared" (the inputs and outputs keep their float32), "fp16" or "bf16".
  std::string precision = "fp32";
  std::vector<std::string> keep_fp32;
  std::string io_precision = "declared";
  // NVRTC targets: "sm_NN" cubins and "compute_NN" PTX. nullopt: `kiln compile`'s default
  // (sm_80, sm_86, sm_87, sm_89, sm_90 and compute_90); empty: a CPU-only artifact (--arch none).
  // Any arch needs NVRTC at run time: without it the compile fails with kFailedPrecondition
  // naming the files looked for and how to install it (docs/cli.md, --arch).
  std::optional<std::vector<std::string>> archs;
  // Native CPU code (--cpu-targets): comma-separated x86-64, x86-64-v3, x86-64-v4, aarch64;
  // "host" (default) this machine's family; "none" the portable programs alone.
  std::string cpu_targets = "host";
  // --cpu-layout: the CPU plan's layout of 2-D Convs, "nhwc" (default: oneDNN's convolutions run
  // NHWC) or "nchw" (as ONNX has it: for a runtime without oneDNN, such as a selective one).
  std::string cpu_layout = "nhwc";
  bool fuse = true;                // false: --no-fuse
  int64_t loop_scan_bound = 0;     // --loop-scan-bound (0: rooms that grow)
  std::string kernel_cache_dir;    // --kernel-cache (cubins, PTX, native CPU objects); empty: ~/.cache/kiln/kernels
  bool use_kernel_cache = true;    // false: --no-kernel-cache
  int jobs = 0;                    // NVRTC threads; 0: one per core
  // Called with each line of the compile log as it is written (progress, fusion regions and
  // cuts, dropped entries), on the calling thread; may be empty. CompileReport::log keeps them.
  std::function<void(const std::string&)> log;
  // Called as NVRTC jobs finish: jobs done, jobs in all, how many came from the cache.
  std::function<void(int done, int total, int cached)> kernel_progress;
};

// What a compile made, besides the artifact.
struct CompileReport {
  struct Entry {
    std::string name;                // "default", "N=1", "N in 1..64"
    int instructions = 0;
    std::string arena_bytes;         // a number, or an expression over the symbols
    int64_t lower_bound_bytes = -1;  // static entries: the least any plan could use; else -1
    // The backend whose plan it is ("cuda", "cpu"; EntryInfo::backend), or empty for every
    // backend. With GPU archs, an entry whose CPU plan folds more activations into epilogues
    // than the CUDA libraries apply is compiled twice, "cuda" then "cpu".
    std::string backend;
    // The stages it went through, in order (docs/architecture.md, "Compiler stages"): "import",
    // "canonical", "precision" (with fp16/bf16), "fusion" (not with fuse = false), "executors",
    // "plan", "codegen". The artifact keeps each stage's trace and op count, but not its time, so
    // that its bytes are the same at every compile (docs/reproducibility.md).
    struct Stage {
      std::string name;
      int64_t time_ns = 0;  // wall time; 'import' is shared by one profile's entries, 'codegen' by all
      int ops = -1;         // ops in the stage's output trace
    };
    std::vector<Stage> stages;
  };
  std::vector<Entry> entries;
  int64_t total_ns = 0;        // the whole compile
  int ops_before_fusion = 0;   // the first entry's ops in its canonical trace
  int ops_after_fusion = 0;    // ... and after fusion (generated kernels and unfused ops)
  int kernels = 0;             // distinct generated kernels in the artifact
  int compile_jobs = 0;        // NVRTC (kernel, arch) jobs, of which cached_jobs came from the cache
  int cached_jobs = 0;
  int64_t nvrtc_ns = 0;        // wall time of code generation and NVRTC
  // The compile log, one line per element, as OnnxCompileOptions::log received it. Lines of
  // an entry start "entry 'NAME': ", or "entry 'NAME' (cpu plan): " for an entry of one
  // backend (CompileReport::Entry::backend); its fusion lines then "fusion: " and "region '...'",
  // "cut after ...", "unfused ..." or a folded epilogue; "entry 'NAME' dropped: WHY" for an
  // entry the model cannot take.
  std::vector<std::string> log;
};

// Compiles the ONNX model at `path` (its external data beside it) into artifact bytes.
// `report`, when not null, is filled on success and keeps the log lines written before a failure.
// Errors, never thrown: kInvalidArgument for options that do not parse (a profile, a precision,
// an arch, a constant input whose data is null or in device memory, naming it) and for a model
// Kiln cannot compile (naming the node, value or file); kNotFound for a missing file;
// kUnimplemented for an op or attribute Kiln does not implement; kResourceExhausted over a limit
// or out of memory; with GPU archs and no NVRTC, kFailedPrecondition (kIncompatible for another
// major version of it) before any stage runs.
KILN_API Result<std::vector<uint8_t>> CompileOnnx(const std::string& path, const OnnxCompileOptions& options,
                                                  CompileReport* report = nullptr);

}  // namespace kiln
