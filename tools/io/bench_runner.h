// tools/io/bench_runner.h: `kiln bench`'s measurement: load an artifact, prepare inputs
// (from a folder, or seeded random ones), warm up, then time calls of Run + Synchronize.
//
//   kiln::io::BenchConfig config;
//   config.artifact = "model.kiln";
//   config.random = true;
//   KILN_ASSIGN_OR_RETURN(kiln::io::BenchResult r, kiln::io::RunBench(config, nullptr));
//
// Inputs are host tensors, so on the CUDA backend each call includes their upload; outputs
// stay in the context's memory (no copy to the host is timed). On the CUDA backend every call
// runs on the context's own non-blocking stream (CudaOptions::own_stream; CUDA graphs need
// a non-null one).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/io/bench_report.h"
#include "kiln/runtime.h"

namespace kiln::io {

struct BenchConfig {
  std::string artifact;
  // Inputs: a folder (io::ReadInputDir), or random (io::ResolveInputShapes, io::RandomInputs).
  std::string inputs_dir;
  bool random = false;
  std::map<std::string, std::vector<int64_t>> shapes;  // --shape, for random inputs
  uint64_t seed = 1;
  Device device = Device::kAuto;
  int threads = 0;  // CpuOptions::threads
  bool onednn = true;  // CpuOptions::onednn
  bool native_code = true;  // LoadOptions::native_code
  bool cuda_graphs = false;
  bool profile = false;
  // ExecutionContext::Warm at the inputs' shapes after Create (not with --generate, whose calls
  // change shape): the first call then does only what every call does.
  bool warm = true;
  int warmup = 10;
  int64_t iterations = 100;  // timed calls, when duration_s is 0
  double duration_s = 0;     // > 0: time calls until this many seconds have passed
  size_t trace_runs = 20;    // the last profiled runs kept for the trace
  // > 0: a decoder with a KV cache (tools/io/kv_decoder.h), timed per generated token: each
  // warm-up and timed iteration is one greedy generation of a prompt of `prompt_tokens` random
  // ids (from `seed`) and then `generate` tokens; no inputs are read or made.
  int generate = 0;
  int prompt_tokens = 8;
};

// Where the run is, for a progress line: after every call.
struct BenchProgress {
  bool warmup = false;   // still warming up
  int64_t done = 0;      // calls done in this phase
  double elapsed_s = 0;  // since the timed phase began (0 in warm-up)
};

// A --seed value: decimal digits that fit uint64, 0..18446744073709551615, with no sign or
// spaces ("-1" is refused, not read as 2^64 - 1). nullopt otherwise.
std::optional<uint64_t> ParseSeed(std::string_view text);

// Errors are those of Model::Load, the input readers, ExecutionContext::Create, Run and
// Synchronize, unchanged; kInvalidArgument for neither or both of inputs_dir and random (or,
// with `generate`, either of them), and those of FindKvDecoder and Generate.
Result<BenchResult> RunBench(const BenchConfig& config, const std::function<void(const BenchProgress&)>& progress);

}  // namespace kiln::io
