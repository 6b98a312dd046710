// kiln bench's statistics: nearest-rank percentiles, label parsing, and the profile summed
// over runs, against hand-computed values.
#include "tools/io/bench_stats.h"

#include <doctest/doctest.h>

#include <cmath>

namespace kiln::io {
namespace {

TEST_CASE("bench stats: nearest-rank percentiles of known samples") {
  // 1..10 shuffled: rank ceil(p * 10 / 100): p50 -> 5th, p90 -> 9th, p99 -> 10th.
  LatencySummary s = Summarize({7, 3, 10, 1, 9, 2, 8, 5, 4, 6});
  CHECK(s.min == 1);
  CHECK(s.p50 == 5);
  CHECK(s.p90 == 9);
  CHECK(s.p99 == 10);
  CHECK(s.max == 10);
  CHECK(s.mean == doctest::Approx(5.5));
  CHECK(s.stddev == doctest::Approx(std::sqrt(8.25)));  // mean of (k - 5.5)^2 over 1..10 = 82.5 / 10
  // Three samples: p50 -> rank ceil(1.5) = 2, p90 -> ceil(2.7) = 3. No interpolation.
  s = Summarize({30, 10, 20});
  CHECK(s.p50 == 20);
  CHECK(s.p90 == 30);
  CHECK(s.p99 == 30);
  CHECK(s.mean == doctest::Approx(20));
  // 1..100: p99 is the 99th value, where p * n / 100 would read 98.99999 or 99.00001 if
  // computed as (p / 100) * n.
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i) hundred.push_back(i);
  s = Summarize(hundred);
  CHECK(s.p50 == 50);
  CHECK(s.p90 == 90);
  CHECK(s.p99 == 99);
  const std::vector<double> sorted = {1, 2, 3};
  CHECK(NearestRank(sorted, 0) == 1);
  CHECK(NearestRank(sorted, 100) == 3);
  CHECK(NearestRank(sorted, 34) == 2);  // ceil(1.02) = 2
  s = Summarize({4.5});
  CHECK((s.min == 4.5 && s.p50 == 4.5 && s.p99 == 4.5 && s.max == 4.5 && s.mean == 4.5 && s.stddev == 0));
  s = Summarize({});
  CHECK((s.min == 0 && s.max == 0 && s.mean == 0 && s.stddev == 0));
}

TEST_CASE("bench stats: the profile sums each instruction over runs and groups by op") {
  auto info = [](std::string name, std::string op) {
    kiln::InstructionInfo i;
    i.name = std::move(name);
    i.op = std::move(op);
    return i;
  };
  const std::vector<std::vector<kiln::InstructionInfo>> labels = {
      {info("c1", "Conv"), info("r1", "Relu"), info("c2", "Conv")},
      {info("c1", "Conv"), info("m", "MatMul")}};
  ProfileAccumulator acc;
  acc.Add(0, std::vector<int64_t>{100, 10, 300});
  acc.Add(0, std::vector<int64_t>{140, 30, 200});
  acc.Add(1, std::vector<int64_t>{20, 1000});
  acc.Add(-1, std::vector<int64_t>{5});  // no entry: ignored
  ProfileSummary p = acc.Summary(labels);
  CHECK(p.runs == 3);
  CHECK(p.total_ns == 100 + 10 + 300 + 140 + 30 + 200 + 20 + 1000);
  REQUIRE(p.instructions.size() == 5);
  // Largest total first: m 1000, c2 500, c1 (entry 0) 240, r1 40, c1 (entry 1) 20.
  CHECK(p.instructions[0].info.name == "m");
  CHECK(p.instructions[0].entry == 1);
  CHECK(p.instructions[0].calls == 1);
  CHECK(p.instructions[1].info.name == "c2");
  CHECK(p.instructions[1].index == 2);
  CHECK(p.instructions[1].total_ns == 500);
  CHECK(p.instructions[1].calls == 2);
  CHECK(p.instructions[2].total_ns == 240);
  CHECK(p.instructions[3].info.op == "Relu");
  CHECK(p.instructions[3].total_ns == 40);
  CHECK(p.instructions[4].entry == 1);
  CHECK(p.instructions[4].total_ns == 20);
  // Ops: MatMul 1000 (1 call), Conv 240 + 500 + 20 = 760 (5 calls), Relu 40 (2 calls).
  REQUIRE(p.ops.size() == 3);
  CHECK(p.ops[0].op == "MatMul");
  CHECK(p.ops[1].op == "Conv");
  CHECK(p.ops[1].total_ns == 760);
  CHECK(p.ops[1].calls == 5);
  CHECK(p.ops[2].op == "Relu");
  CHECK(p.ops[2].calls == 2);
  // Bytes: per instruction and op, and the portable programs by kind, from their member ops: a
  // reduction op anywhere makes a reduction; else an op that reads elsewhere (not a view such
  // as Reshape) makes data movement; else elementwise.
  const auto fused = [](std::vector<std::string> members) {
    kiln::InstructionInfo i;
    i.name = members.back();
    i.op = "kiln.Fused";
    i.member_ops = std::move(members);
    return i;
  };
  const std::vector<std::vector<kiln::InstructionInfo>> programs = {
      {fused({"Resize", "Resize", "Concat"}), fused({"Add", "Reshape", "Relu"}), fused({"Mul", "ReduceSum"}),
       fused({"Transpose", "Sigmoid"}), info("c", "Conv")}};
  ProfileAccumulator bytes;
  bytes.Add(0, std::vector<int64_t>{1000, 200, 300, 500, 4000}, std::vector<int64_t>{2000, 1600, 900, 500, 99});
  bytes.Add(0, std::vector<int64_t>{1000, 200, 300, 500, 4000}, std::vector<int64_t>{2000, 1600, 900, 500, 99});
  bytes.Add(0, std::vector<int64_t>{1000, 200, 300, 500, 4000});  // a backend that reports no bytes
  p = bytes.Summary(programs);
  REQUIRE(p.instructions.size() == 5);
  CHECK(p.instructions[0].info.op == "Conv");
  CHECK(p.instructions[0].total_bytes == 198);
  REQUIRE(p.program_kinds.size() == 3);
  CHECK(p.program_kinds[0].kind == "data movement");  // Resize/Concat 3000 ns + Transpose/Sigmoid 1500 ns
  CHECK(p.program_kinds[0].programs == 2);
  CHECK(p.program_kinds[0].calls == 6);
  CHECK(p.program_kinds[0].total_ns == 4500);
  CHECK(p.program_kinds[0].total_bytes == 5000);
  CHECK(p.program_kinds[1].kind == "reduction");
  CHECK(p.program_kinds[1].total_bytes == 1800);
  CHECK(p.program_kinds[2].kind == "elementwise");  // Reshape is a view
  CHECK(p.program_kinds[2].total_ns == 600);
  CHECK(p.program_kinds[2].total_bytes == 3200);
  CHECK(ProgramKind(info("c", "Conv")) == "elementwise");  // no members: nothing moves
  // An instruction without a label still counts.
  ProfileAccumulator unlabeled;
  unlabeled.Add(0, std::vector<int64_t>{7});
  p = unlabeled.Summary({});
  REQUIRE(p.instructions.size() == 1);
  CHECK(p.instructions[0].info.op == "?");
  CHECK(p.ops[0].total_ns == 7);
}

}  // namespace
}  // namespace kiln::io
