#include "tools/io/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "runtime/op_table.h"

namespace kiln::io {

double NearestRank(std::span<const double> sorted, double p) {
  const size_t n = sorted.size();
  const double rank = std::ceil(p * static_cast<double>(n) / 100.0);  // p * n is exact: no 9.0000001
  const size_t k = rank < 1 ? 0 : std::min(n - 1, static_cast<size_t>(rank) - 1);
  return sorted[k];
}

LatencySummary Summarize(std::vector<double> samples) {
  LatencySummary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double v : samples) sum += v;
  s.min = samples.front();
  s.max = samples.back();
  s.p50 = NearestRank(samples, 50);
  s.p90 = NearestRank(samples, 90);
  s.p99 = NearestRank(samples, 99);
  s.mean = sum / static_cast<double>(samples.size());
  double squares = 0;
  for (double v : samples) squares += (v - s.mean) * (v - s.mean);
  s.stddev = std::sqrt(squares / static_cast<double>(samples.size()));
  return s;
}

void ProfileAccumulator::Add(int32_t entry, std::span<const int64_t> ns, std::span<const int64_t> bytes,
                             std::span<const Library> libraries) {
  if (entry < 0) return;
  ++runs_;
  if (sums_.size() <= static_cast<size_t>(entry)) sums_.resize(static_cast<size_t>(entry) + 1);
  std::vector<Sum>& sums = sums_[static_cast<size_t>(entry)];
  if (sums.size() < ns.size()) sums.resize(ns.size());
  for (size_t k = 0; k < ns.size(); ++k) {
    ++sums[k].calls;
    sums[k].ns += ns[k];
    if (k < bytes.size()) sums[k].bytes += bytes[k];
    if (k < libraries.size()) sums[k].library = static_cast<int>(libraries[k]);
  }
}

std::string_view ProgramKind(const InstructionInfo& info) {
  bool moves = false;
  for (const std::string& op : info.member_ops) {
    const OpInfo* row = FindOpInfo(op);
    if (row == nullptr) continue;
    if (row->fusion == FusionKind::kReduction) return "reduction";
    const bool view = op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity";
    moves = moves || (row->fusion == FusionKind::kIndexMap && !view);
  }
  return moves ? "data movement" : "elementwise";
}

// An instruction the entry did not list (an artifact and a profile that disagree).
InstructionInfo UnknownInstruction() {
  InstructionInfo i;
  i.name = i.op = "?";
  return i;
}

ProfileSummary ProfileAccumulator::Summary(std::span<const std::vector<InstructionInfo>> instructions,
                                           const std::function<std::string(const InstructionInfo&)>& fused_runner) const {
  ProfileSummary p;
  p.runs = runs_;
  std::map<std::string, ProfileOp> ops;
  std::map<std::string, ProfileProgramKind> kinds;
  for (size_t e = 0; e < sums_.size(); ++e) {
    for (size_t k = 0; k < sums_[e].size(); ++k) {
      const Sum& s = sums_[e][k];
      if (s.calls == 0) continue;
      ProfileInstruction row;
      row.entry = static_cast<int32_t>(e);
      row.index = static_cast<int32_t>(k);
      row.info = e < instructions.size() && k < instructions[e].size() ? instructions[e][k] : UnknownInstruction();
      row.calls = s.calls;
      row.total_ns = s.ns;
      row.total_bytes = s.bytes;
      if (s.library >= 0) row.library = LibraryTitle(static_cast<Library>(s.library));
      p.total_ns += s.ns;
      ProfileOp& op = ops[row.info.op];
      op.op = row.info.op;
      op.calls += s.calls;
      op.total_ns += s.ns;
      op.total_bytes += s.bytes;
      if (row.info.op == "kiln.Fused") {
        std::string name(ProgramKind(row.info));
        if (fused_runner && row.library == LibraryTitle(Library::kGenerated)) {
          row.library = fused_runner(row.info);
          name += ", " + row.library;
        }
        ProfileProgramKind& kind = kinds[name];
        kind.kind = name;
        ++kind.programs;
        kind.calls += s.calls;
        kind.total_ns += s.ns;
        kind.total_bytes += s.bytes;
      }
      p.instructions.push_back(std::move(row));
    }
  }
  std::stable_sort(p.instructions.begin(), p.instructions.end(),
                   [](const ProfileInstruction& a, const ProfileInstruction& b) { return a.total_ns > b.total_ns; });
  for (auto& [name, op] : ops) p.ops.push_back(std::move(op));
  std::stable_sort(p.ops.begin(), p.ops.end(),
                   [](const ProfileOp& a, const ProfileOp& b) { return a.total_ns > b.total_ns; });
  for (auto& [name, kind] : kinds) p.program_kinds.push_back(std::move(kind));
  std::stable_sort(p.program_kinds.begin(), p.program_kinds.end(),
                   [](const ProfileProgramKind& a, const ProfileProgramKind& b) { return a.total_ns > b.total_ns; });
  return p;
}

}  // namespace kiln::io
