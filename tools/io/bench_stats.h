// tools/io/bench_stats.h: the statistics of `kiln bench`: latency percentiles, and the
// per-instruction profile (Stats::last_instruction_ns) summed over many runs.
//
//   kiln::io::LatencySummary s = kiln::io::Summarize(latencies_ms);   // s.p99, s.mean, ...
//   kiln::io::ProfileAccumulator acc;
//   acc.Add(ctx.stats().last_entry, ctx.stats().last_instruction_ns);  // after each run
//   kiln::io::ProfileSummary p = acc.Summary(infos);  // infos[e] = entries()[e].instructions
//
// Thread-compatible; nothing here allocates on behalf of anyone else.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime.h"

namespace kiln::io {

// Nearest-rank percentile: the smallest sample with at least p percent of the samples at or
// below it, sorted[ceil(p * n / 100) - 1] (sorted[0] for p = 0). `sorted` is ascending and
// non-empty; p is in [0, 100]. No interpolation: the result is always one of the samples.
double NearestRank(std::span<const double> sorted, double p);

// Order statistics of a sample, in its unit, and its spread: the population standard
// deviation. All zero for an empty sample.
struct LatencySummary {
  double min = 0, p50 = 0, p90 = 0, p99 = 0, max = 0, mean = 0, stddev = 0;
};
LatencySummary Summarize(std::vector<double> samples);

// One instruction's time summed over the runs that executed it.
struct ProfileInstruction {
  int32_t entry = 0;  // entry index
  int32_t index = 0;  // instruction index within the entry
  InstructionInfo info;  // name, op, placements; "?" for name and op when the entry did not list it
  // What ran it in the last run added (Stats::last_instruction_library, LibraryTitle: "oneDNN",
  // "CPU kernel", ...); "?" where the backend reported none.
  std::string library = "?";
  int64_t calls = 0;
  int64_t total_ns = 0;
  int64_t total_bytes = 0;  // read and written over its calls (Stats::last_instruction_bytes); 0 where not reported
};

// One op kind (ONNX op type, or "kiln.Fused" for generated kernels) summed over its
// instructions and runs.
struct ProfileOp {
  std::string op;
  int64_t calls = 0;
  int64_t total_ns = 0;
  int64_t total_bytes = 0;
};

// The generated kernels' portable programs (kiln.Fused) of one kind, summed over their
// instructions and runs, for their throughput against the memory's bandwidth: "reduction" (a
// program with a reduction op), "data movement" (else one with an op that reads its input
// elsewhere: Concat, Split, Slice, Resize, Transpose, Gather...; not the views Reshape, Flatten,
// Squeeze, Unsqueeze and Identity) or "elementwise" (the rest).
struct ProfileProgramKind {
  std::string kind;
  int64_t programs = 0;  // distinct instructions
  int64_t calls = 0;
  int64_t total_ns = 0;
  int64_t total_bytes = 0;
};
// The kind of a kiln.Fused instruction's program, as above, from its member ops.
std::string_view ProgramKind(const InstructionInfo& info);

struct ProfileSummary {
  int64_t runs = 0;                              // runs added
  int64_t total_ns = 0;                          // all instruction time of all runs: the denominator of every share
  std::vector<ProfileInstruction> instructions;  // by total_ns, largest first; ties in entry/index order
  std::vector<ProfileOp> ops;                    // same order rule, ties by op name
  std::vector<ProfileProgramKind> program_kinds; // kiln.Fused only, by total_ns; empty without any
  double memcpy_gbps = 0;  // one thread's memcpy here (memcpy_bandwidth.h), set with program_kinds; 0: not measured
};

// Sums per-instruction times over runs.
class ProfileAccumulator {
 public:
  // One run of entry `entry`: `ns[k]` is instruction k's time, `bytes[k]` the bytes it read
  // and wrote (Stats::last_instruction_bytes; empty where the backend reports none), and
  // `libraries[k]` what ran it (Stats::last_instruction_library; empty where none is reported).
  void Add(int32_t entry, std::span<const int64_t> ns, std::span<const int64_t> bytes = {},
           std::span<const Library> libraries = {});
  // `instructions[e]` are entry e's instructions (EntryInfo::instructions); an instruction
  // beyond its entry's list reads "?" for name and op.
  // `fused_runner`, when given, says what ran a kiln.Fused instruction on the CPU ("native code
  // (x86-64-v3)" or "interpreter"): its rows' library reads that, and program_kinds are split by
  // it ("elementwise, native code (x86-64-v3)").
  ProfileSummary Summary(std::span<const std::vector<InstructionInfo>> instructions,
                         const std::function<std::string(const InstructionInfo&)>& fused_runner = {}) const;
  int64_t runs() const { return runs_; }

 private:
  struct Sum {
    int64_t calls = 0, ns = 0, bytes = 0;
    int library = -1;  // the last run's Library, -1 when none was reported
  };
  int64_t runs_ = 0;
  std::vector<std::vector<Sum>> sums_;  // [entry][instruction]
};

}  // namespace kiln::io
