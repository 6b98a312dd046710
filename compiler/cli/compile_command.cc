#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>

#include <fmt/format.h>

#include "compiler/cli/commands.h"
#include "tools/cli/shape_option.h"
#include "compiler/codegen/nvrtc_compiler.h"
#include "compiler/codegen/cpu/targets.h"
#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "tools/io/replace_file.h"
#include "compiler/validate/precision_report.h"

namespace kiln::cli {
namespace {

struct CompileFlags {
  std::string model, output;
  std::vector<std::string> shapes;
  std::vector<std::string> profiles;
  std::vector<std::string> constant_inputs;
  bool quiet = false;
  bool no_fuse = false;
  std::string archs = "sm_80,sm_86,sm_87,sm_89,sm_90";
  std::string cpu_targets = "host";
  std::string cpu_layout = "nhwc";
  std::string kernel_cache;
  bool no_kernel_cache = false;
  int jobs = 0;
  int64_t loop_scan_bound = 0;
  std::string precision = "fp32";
  std::vector<std::string> keep_fp32;
  std::string io_precision = "declared";
  std::string validate;
  std::string to = "serialize";
};

// "sm_80,sm_86" -> cubin archs plus PTX of the newest ("compute_86"); "none" -> {}.
bool ParseArchs(const std::string& text, std::vector<std::string>& archs, std::string& error) {
  archs.clear();
  if (text == "none") return true;
  int newest = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string a = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (a == "none") {
      error = "'none' (a CPU-only artifact) cannot be combined with archs in '" + text + "'";
      return false;
    }
    int cc = 0;
    char* end = nullptr;
    if (a.rfind("sm_", 0) == 0) cc = static_cast<int>(std::strtol(a.c_str() + 3, &end, 10));
    if (cc < 50 || cc > 200 || end == nullptr || *end != '\0') {
      error = "'" + a + "' is not an arch such as sm_80 or sm_90 (or use 'none' for a CPU-only artifact)";
      return false;
    }
    if (std::find(archs.begin(), archs.end(), a) == archs.end()) archs.push_back(a);
    newest = std::max(newest, cc);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  archs.push_back("compute_" + std::to_string(newest));
  return true;
}

// A usage error: the message on stderr, exit status 2.
void UsageError(const std::string& message) {
  std::cerr << "kiln compile: " << message << "\n";
  SetExitCode(2);
}

// --to's output: each entry's trace of the stage the compile stopped after, headed by its name.
void PrintStageTraces(const compiler::CompileSummary& summary) {
  for (size_t i = 0; i < summary.entries.size(); ++i)
    std::cout << (i ? "\n" : "") << "# entry '" << summary.entries[i].name << "'"
              << (summary.entries[i].backend.empty() ? "" : " (" + summary.entries[i].backend + " plan)") << "\n"
              << summary.entries[i].last_trace;
}

void RunCompile(const CompileFlags& f) {
  const std::string& model = f.model;
  const std::string& output = f.output;
  const std::vector<std::string>& shapes = f.shapes;
  const bool quiet = f.quiet;
  compiler::CompileOptions options;
  options.stop_after = *compiler::ParseStage(f.to);  // checked by the option's validator
  const bool artifact = options.stop_after == compiler::Stage::kSerialize;
  if (artifact && output.empty())
    return UsageError("-o/--output is required: the artifact to write (--to STAGE prints a stage's traces instead)");
  if (!artifact && !output.empty())
    return UsageError("--to " + f.to + " writes no artifact (its traces go to standard output): leave out -o");
  if (!artifact && !f.validate.empty())
    return UsageError("--validate runs the artifact, which --to " + f.to + " does not write");
  options.fuse = !f.no_fuse;
  options.kernel_cache_dir = f.kernel_cache;
  options.use_kernel_cache = !f.no_kernel_cache;
  options.jobs = f.jobs;
  options.loop_scan_bound = f.loop_scan_bound;
  if (std::string error; !ParseArchs(f.archs, options.archs, error)) {
    std::cerr << "kiln compile: --arch: " << error << "\n";
    SetExitCode(2);
    return;
  }
  if (auto targets = codegen::cpu::ParseCpuTargets(f.cpu_targets); !targets.ok()) {
    std::cerr << "kiln compile: " << targets.status().message() << "\n";
    SetExitCode(2);
    return;
  }
  options.cpu_targets = f.cpu_targets;
  options.cpu_channels_last = f.cpu_layout == "nhwc";
  options.precision.precision = f.precision == "fp16"   ? passes::Precision::kFp16
                                : f.precision == "bf16" ? passes::Precision::kBf16
                                                        : passes::Precision::kFp32;
  options.precision.io_dtype = f.io_precision == "fp16"   ? DType::kFloat16
                               : f.io_precision == "bf16" ? DType::kBFloat16
                                                          : DType::kFloat32;
  options.precision.keep_fp32 = f.keep_fp32;
  if (Status st = compiler::CheckStopAfter(options); !st.ok())
    return UsageError("--to " + f.to + ": " + std::string(st.message()));
  if (!f.keep_fp32.empty() && f.precision == "fp32")
    std::cerr << "kiln compile: warning: --keep-fp32 has no effect with --precision fp32 (the model stays float32)\n";
  if (!quiet) options.kernel_progress = codegen::TerminalProgress();
  for (const std::string& s : shapes) {
    std::string name, error;
    std::vector<int64_t> dims;
    if (!ParseShape(s, name, dims, error)) {
      std::cerr << "kiln compile: --shape: " << error << "\n";
      SetExitCode(2);
      return;
    }
    if (!options.input_shapes.emplace(name, dims).second) {
      std::cerr << "kiln compile: --shape: input '" << name << "' is given more than once\n";
      SetExitCode(2);
      return;
    }
  }
  for (const std::string& text : f.constant_inputs) {
    const size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "kiln compile: --constant-input: expected NAME=FILE (.pb or .npy), got '" << text << "'\n";
      SetExitCode(2);
      return;
    }
    const std::string name = text.substr(0, eq), file = text.substr(eq + 1);
    auto t = file.size() > 4 && file.substr(file.size() - 4) == ".npy" ? io::ReadNpyFile(file)
                                                                       : io::ReadTensorProtoFile(file);
    if (!t.ok()) {
      std::cerr << "kiln compile: --constant-input " << name << ": " << t.status().ToString() << "\n";
      SetExitCode(2);
      return;
    }
    auto data = std::make_shared<ir::ConstData>();
    data->dtype = t->dtype;
    data->dims = t->dims;
    data->bytes = std::move(t->bytes);
    if (!options.constant_inputs.emplace(name, std::move(data)).second) {
      std::cerr << "kiln compile: --constant-input: input '" << name << "' is given more than once\n";
      SetExitCode(2);
      return;
    }
  }
  for (const std::string& text : f.profiles) {
    auto p = compiler::ParseProfile(text);
    if (!p.ok()) {
      std::cerr << "kiln compile: --profile: " << p.status().message() << "\n";
      SetExitCode(2);
      return;
    }
    options.profiles.push_back(std::move(*p));
  }
  const auto start = std::chrono::steady_clock::now();
  if (!quiet)
    options.log = [start](const std::string& line) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::cerr << fmt::format("[{:7.3f}s] {}\n", s, line);
    };
  compiler::CompileSummary summary;
  auto bytes = compiler::CompileOnnxFile(model, options, &summary);
  if (!bytes.ok()) {
    std::cerr << "kiln compile: " << model << ": " << bytes.status().ToString() << "\n";
    SetExitCode(1);
    return;
  }
  if (!artifact) return PrintStageTraces(summary);
  if (Status written = io::WriteArtifactFile(output, *bytes); !written.ok()) {
    std::cerr << "kiln compile: " << written.message() << "\n";
    SetExitCode(1);
    return;
  }
  std::cout << fmt::format("wrote {} ({} bytes, {} entr{}) in {:.3f} s\n", output, bytes->size(),
                           summary.entries.size(), summary.entries.size() == 1 ? "y" : "ies", summary.total_ns / 1e9);
  for (const auto& e : summary.entries) {
    std::cout << fmt::format("  entry '{}'{}: {} instructions, arena {}", e.name,
                             e.backend.empty() ? "" : " (" + e.backend + " plan)", e.instructions, e.arena_bytes);
    if (e.lower_bound_bytes >= 0) std::cout << fmt::format(" (lower bound {} bytes)", e.lower_bound_bytes);
    std::cout << "\n";
    // The stage times, which the artifact does not keep (docs/reproducibility.md).
    std::string stages;
    for (const compiler::EntrySummary::StageTime& st : e.stages)
      stages += fmt::format("{}{} {:.1f} ms", stages.empty() ? "" : ", ", st.name, st.time_ns / 1e6);
    if (!stages.empty()) std::cout << "    stages: " << stages << "\n";
  }
  if (options.fuse)
    std::cout << fmt::format("  fusion: {} ops -> {} ({} distinct generated kernels)\n", summary.ops_before_fusion,
                             summary.ops_after_fusion, summary.kernels);
  if (summary.compile_jobs > 0)
    std::cout << fmt::format("  NVRTC: {} jobs ({} cached) in {:.3f} s\n", summary.compile_jobs, summary.cached_jobs,
                             summary.nvrtc_ns / 1e9);
  if (!f.validate.empty()) {
    auto report = validate::ValidatePrecision(model, options, *bytes, f.validate);
    if (!report.ok()) {
      std::cerr << "kiln compile: --validate: " << report.status().ToString() << "\n";
      SetExitCode(1);
      return;
    }
    std::cout << validate::FormatPrecisionReport(*report);
  }
}

}  // namespace

void AddCompileCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("compile", "Compile an ONNX model into a .kiln artifact");
  auto f = std::make_shared<CompileFlags>();
  cmd->add_option("model", f->model, "ONNX model file (.onnx); external-data files are read from its folder")
      ->required()->check(CLI::ExistingFile);
  cmd->add_option("-o,--output", f->output, "artifact to write (.kiln); required, except with --to before serialize");
  cmd->add_option("--shape", f->shapes,
                  "fix an input's shape, NAME:DIMS such as images:1x3x224x224 ('?' or -1 keeps a dim symbolic); "
                  "repeatable. Without it, symbolic dims stay symbolic.");
  cmd->add_option("--constant-input", f->constant_inputs,
                  "bind a runtime input to a constant, NAME=FILE (an ONNX TensorProto .pb or a .npy); repeatable. "
                  "For inputs that only carry axes, pads, scales or sizes: shapes computed from them become known "
                  "at compile time, and the input is no longer passed to kiln run");
  cmd->add_option("--profile", f->profiles,
                  "a shape specialisation, compiled as its own entry; repeatable. INPUT:DIM=VALUE[,DIM=VALUE...] "
                  "with DIM a symbol the model declares (N) or a position (0), VALUE a number (1), a range "
                  "(1..64, or 8.. for no upper bound) or either with ':K' for multiples of K (32..1024:32); "
                  "0 is an empty tensor; a symbol the profile does not restrict takes any size, 0 included; "
                  "';' separates inputs; 'default' is the model's own shapes. INPUT=V or INPUT=[V,...] fixes "
                  "the values of an int32, int64, bool or floating-point input of at most 64 elements (sr=16000, "
                  "axes=[0,2], axes=[], scales=[1,1,2,2], M=10 for a Loop's trip count): the entry is compiled "
                  "for them, the input stays, and the prologue checks them at each call (floating-point ones bit "
                  "for bit, after rounding V to the input's dtype; the input must be in host memory). Run tries "
                  "the entries in the "
                  "order given, except that one whose shapes all fit inside another's goes first, and rejects "
                  "inputs that fit none. Without it: one entry, symbolic where the model is, where every symbolic "
                  "dim may be 0 (an empty batch, a decoder's empty cache) unless the model's rules refuse it at "
                  "run time. Example: --profile 'images:N=1' --profile 'images:N=1..64,H=32..1024:32' "
                  "--profile 'sr=16000;x:1=512'");
  cmd->add_option("--arch", f->archs,
                  "GPU archs to compile the generated kernels for, comma-separated; PTX of the newest is added "
                  "for newer GPUs. GPU archs need CUDA's NVRTC, opened at run time (libnvrtc.so.13; "
                  "KILN_NVRTC_LIBRARY names another file): without it the compile fails saying how to get it. 'none': a CPU-only artifact holding the portable programs alone, with every activation folded into Conv/MatMul/Gemm epilogues and 2-D Convs in NHWC (a GPU artifact folds only those cuDNN/cuBLASLt apply in its CUDA plan and keeps NCHW there, and carries a CPU plan with them all folded and NHWC Convs where the two differ)")
      ->capture_default_str();
  cmd->add_option("--cpu-layout", f->cpu_layout,
                  "the CPU plan's layout of 2-D Convs: nhwc (default) for oneDNN's convolutions, which run "
                  "NHWC, with the ops between them following; nchw as ONNX has it, for a runtime without "
                  "oneDNN (a selective one, docs/edge.md), where NHWC Convs would run on transposed copies")
      ->check(CLI::IsMember({"nhwc", "nchw"}))
      ->capture_default_str();
  cmd->add_option("--cpu-targets", f->cpu_targets,
                  "CPU targets to compile the generated kernels' native code for, comma-separated: x86-64 "
                  "(baseline), x86-64-v3 (AVX2, FMA, F16C), x86-64-v4 (AVX-512), aarch64 (NEON); 'host' is this "
                  "machine's family (the three x86-64 levels, or aarch64); 'none' keeps the portable programs "
                  "alone. The runtime runs the best target the CPU supports and interprets the programs where "
                  "none fits or a kernel has no native code")
      ->capture_default_str();
  cmd->add_option("--precision", f->precision,
                  "the type of weights and activations: fp32, or fp16 / bf16 with float32 accumulation. GEMM and "
                  "conv accumulate in float32; reductions, Softmax and normalisations compute in float32 and "
                  "store the precision type; Exp, Pow, Log, ReduceSum, CumSum, recurrent and detection ops stay "
                  "float32 (the table in docs/precision.md); integer and shape paths are untouched. "
                  "The 'precision' trace of `kiln inspect` shows the Casts")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--keep-fp32", f->keep_fp32,
                  "keep a node (by ONNX node name) or every node of an op type (Softmax) in float32, whatever the "
                  "table says, e.g. a detector's box decoding; repeatable. A name matching nothing is an error");
  cmd->add_option("--io-precision", f->io_precision,
                  "the dtype of the model's float32 inputs and outputs: 'declared' keeps float32 (the artifact "
                  "converts at its edges), fp16 or bf16 makes callers pass and receive that type")
      ->check(CLI::IsMember({"declared", "fp16", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--validate", f->validate,
                  "after writing the artifact, run it and a float32 compile of the model on the CPU backend over "
                  "the inputs in DIR (input_N.pb or NAME.npy as for `kiln run --inputs`, or a model folder whose "
                  "test_data_set_* are each run) and print each output's max abs and rel error and cosine "
                  "similarity, and a 'warning:' line for each value that overflowed (inf or NaN where float32 "
                  "has none; compile with --no-fuse as well to locate it to one op). For a quantized model, an output "
                  "the graph writes quantized also gets its max error in quantization steps, against the graph's "
                  "QuantizeLinear and DequantizeLinear computed op by op (one step is rounding). Warnings keep exit "
                  "status 0; unreadable or mismatched inputs exit 1")
      ->type_name("DIR")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--loop-scan-bound", f->loop_scan_bound,
                  "fixed room for N iterations in the scan outputs of a run-time Loop whose trip count bounds "
                  "nothing (a while loop as PyTorch exports it, M = INT64_MAX, or M computed from data), and at "
                  "most N where M is an input's value; a call whose loop runs more iterations fails with "
                  "RESOURCE_EXHAUSTED naming the loop. Without it such a loop's scan outputs start with room for "
                  "16 iterations, and a call that needs more doubles the room and runs again (the context keeps "
                  "the room, within LoadOptions::max_context_bytes)")
      ->type_name("N")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  cmd->add_flag("--no-fuse", f->no_fuse, "skip the fusion stage: one instruction per op (a reference for checking fusion)");
  cmd->add_option("--kernel-cache", f->kernel_cache,
                  "folder of the kernel cache (NVRTC's cubins and PTX, LLVM's native CPU objects), keyed by "
                  "content hash (default: $XDG_CACHE_HOME/kiln/kernels or ~/.cache/kiln/kernels)");
  cmd->add_flag("--no-kernel-cache", f->no_kernel_cache, "compile every kernel afresh, neither reading nor writing the cache");
  cmd->add_option("-j,--jobs", f->jobs, "NVRTC threads (default: one per core)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("-q,--quiet", f->quiet, "do not print progress to stderr");
  std::string stages;
  for (const compiler::StageDef& s : compiler::Stages())
    stages += fmt::format("{}{}: {}", stages.empty() ? "" : "; ", s.name, s.description);
  cmd->add_option("--to", f->to,
                  "stop after STAGE and write no artifact: print each entry's trace of that stage to standard "
                  "output instead (each headed \"# entry 'NAME'\"; import prints one per profile), as "
                  "`kiln inspect` shows the traces of an artifact. Leave out -o (and --validate). The stages, in "
                  "order: " + stages + ". The default, serialize, is the whole compile. precision runs only with "
                  "--precision or --io-precision fp16/bf16, fusion not with --no-fuse")
      ->type_name("STAGE")
      ->check([](const std::string& name) {
        auto stage = compiler::ParseStage(name);
        return stage.ok() ? std::string() : std::string(stage.status().message());
      })
      ->capture_default_str();
  cmd->callback([=] { RunCompile(*f); });
}

}  // namespace kiln::cli
