// tools/io/bench_report.h: the results of `kiln bench` (tools/io/bench_runner.h) and
// their three forms: the human report, the --json document, and the Chrome trace of the
// profiled runs (Trace Event Format, opened by Perfetto and chrome://tracing).
//
//   KILN_ASSIGN_OR_RETURN(kiln::io::BenchResult r, kiln::io::RunBench(config, nullptr));
//   kiln::io::PrintBenchReport(r, std::cout);
//   std::ofstream("bench.json") << kiln::io::BenchJson(r).dump(2);
//
// Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/io/bench_stats.h"

namespace kiln::io {

// One profiled run as the trace shows it. Stats give each instruction's duration, not its
// start, so the trace lays a run's instructions end to end from the start of its computation.
struct TracedRun {
  int64_t iteration = 0;             // timed iteration, from 0
  int64_t start_ns = 0;              // Run called (steady clock)
  int64_t wall_ns = 0;               // Run + Synchronize, as the latency counts it
  int64_t computation_start_ns = 0;  // Stats::last_computation_start
  int32_t entry = 0;
  std::vector<int64_t> instruction_ns;  // Stats::last_instruction_ns
  std::vector<Library> instruction_library;  // Stats::last_instruction_library
};

struct BenchInput {
  std::string name;
  std::string dtype;  // DTypeName
  std::vector<int64_t> shape;
};

// `kiln bench --generate`: time per generated token of a KV-cache decoder.
struct GenerateSummary {
  int prompt_tokens = 0;                // ids in the prompt (random, from the seed)
  int tokens = 0;                       // generated per iteration
  LatencySummary first_token_ms;        // the prompt's call, per timed generation
  std::vector<int64_t> generated_ids;   // of the last timed generation
  std::string cache;                    // how the KV cache was kept (kv_decoder.h, Generate's *cache)
};

struct BenchResult {
  std::string artifact;            // path as given
  std::string device;              // "cpu" or "cuda": the backend that ran
  std::string device_note;         // ExecutionContext::device_note()
  int threads = 0;                 // --threads as requested; 0 = one per core
  bool cuda_graphs = false;        // graphs in effect (requested, on CUDA, not profiling)
  std::vector<std::string> notes;  // options that had no effect, and why
  double load_ms = 0;              // Model::Load + ExecutionContext::Create
  double create_ms = 0;            // ExecutionContext::Create alone (part of load_ms)
  // The context's first Run + Synchronize (the first warm-up call, else the first timed one), ms;
  // unset with --generate (first_token_ms has the prompt's calls).
  std::optional<double> first_call_ms;
  int warmup = 0;
  int64_t iterations = 0;       // timed calls
  double timed_s = 0;           // wall time of the timed loop
  LatencySummary latency_ms;    // per call of Run + Synchronize, wall clock
  double throughput_per_s = 0;  // iterations / timed_s
  // Medians over the timed calls of Stats' host phases, microseconds.
  double lookup_us = 0, prologue_us = 0, computation_us = 0;
  std::optional<LatencySummary> gpu_ms;  // CUDA events (Stats::last_gpu_ns); mean unused
  uint64_t graph_hits = 0, graph_misses = 0;
  // The last call's transfers between host and device and its CPU regions' time (Stats); 0 on the CPU.
  uint64_t host_to_device_bytes = 0, device_to_host_bytes = 0, control_transfers = 0;
  double cpu_region_ms = 0;
  uint64_t host_bytes = 0, device_bytes = 0;  // ExecutionContext::memory_usage() after the runs
  uint64_t peak_rss_bytes = 0;                // getrusage: the whole process
  std::vector<BenchInput> inputs;
  std::optional<uint64_t> seed;  // of random inputs (--random --seed); none for inputs read from files
  std::string entry;  // name of the entry the last timed call used
  std::optional<ProfileSummary> profile;
  // With --generate: iterations, latency_ms and throughput_per_s count generated tokens (every
  // call after a prompt's), and this holds the rest.
  std::optional<GenerateSummary> generate;
  std::vector<TracedRun> trace;                              // the last profiled runs, oldest first
  std::vector<std::vector<InstructionInfo>> instructions;  // per entry: EntryInfo::instructions
};

// The --json document. Keys, exactly: artifact, device, device_note, threads, cuda_graphs,
// load_ms, create_ms, first_call_ms (or null), warmup, iterations, latency_ms {min, p50, p90, p99, max, mean, stddev (population)},
// throughput_per_s, host_us {lookup, prologue, computation} (zeros with --generate), gpu_ms {min, p50, p90, p99,
// max} or null, memory {host_bytes, device_bytes, peak_rss_bytes}, inputs [{name, dtype,
// shape}], seed (of random inputs, 0..2^64-1) or null, entry, profile null or {instructions [{name,
// op, library, member_ops, calls, total_ms, mean_us, share}], ops [{op, calls, total_ms, share}]}
// (share: fraction 0..1 of all instruction time; name, op, member_ops: the instruction's
// InstructionInfo; library: what ran it, Stats::last_instruction_library, as LibraryTitle names
// it), generate null or {prompt_tokens, tokens, first_token_ms {min, p50, p90, p99, max, mean,
// stddev}, generated_ids} (then iterations, latency_ms and throughput_per_s are per generated
// token). Names need not be UTF-8: dump with error_handler_t::replace.
nlohmann::json BenchJson(const BenchResult& r);

// Chrome trace of r.trace: {"traceEvents": [...], "displayTimeUnit": "ms"}. Per run, an "X"
// event on tid 1 ("calls") named "Run #i" spanning Run + Synchronize, and one "X" event per
// instruction on tid 2 ("instructions") named by the node, cat = the library that ran it, args {op, member_ops,
// entry, instruction, iteration}; ts and dur in microseconds from the first traced run's start.
nlohmann::json TraceJson(const BenchResult& r);

// The human report: device, load, inputs and entry, latency, throughput, host phases, GPU
// time, memory, then (with a profile) the op kinds and the slowest `top` instructions.
void PrintBenchReport(const BenchResult& r, std::ostream& out, size_t top = 25);

// True when a context's device_note names the emulated CUDA device of Kiln's tests
// (tests/emulated_cuda/): its times are the host's, and every report labels them so, never as
// a GPU's.
bool EmulatedDevice(std::string_view device_note);

}  // namespace kiln::io
