// Value-range analysis of integer nodes: hand-computed ranges for the index idioms fusion
// emits, and soundness on random programs: every value the CPU interpreter computes for a
// node lies in the node's range, extreme inputs included.
#include "compiler/codegen/index_ranges.h"

#include <doctest/doctest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "runtime/fused/interpreter.h"
#include "tests/compiler/codegen/test_programs.h"

namespace kiln {
namespace {

using codegen::AnalyseRanges;
using codegen::IndexRanges;
using codegen::IntRange;
using codegen::IntRep;
using fused::Op;
using fused::ScalarType;
using testing::ProgramMaker;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();

IndexRanges Analyse(const fused::Program& p, uint32_t nonempty = ~0u) {
  REQUIRE(fused::Validate(p).ok());
  std::vector<bool> checked(static_cast<size_t>(p.num_sizes), false);
  auto mark = [&](const std::vector<int64_t>& dims) {
    for (int64_t d : dims) {
      if (d < 0) checked[-(d + 1)] = true;
    }
  };
  mark(p.domain);
  for (const fused::TensorSpec& t : p.inputs) mark(t.dims);
  for (const fused::Output& o : p.outputs) mark(o.tensor.dims);
  return AnalyseRanges(p, nonempty, checked);
}

void CheckRange(const IndexRanges& r, int32_t node, int64_t lo, int64_t hi) {
  CAPTURE(node);
  CHECK(r.range[node].lo == lo);
  CHECK(r.range[node].hi == hi);
}

TEST_CASE("AnalyseRanges: index idioms of static shapes") {
  ProgramMaker m;
  m.p.domain = {2, 4420, 4};
  const int in = m.Input(DType::kFloat32, {160, 4});
  const int32_t c1 = m.Coord(1), c2 = m.Coord(2), lin = m.Linear();
  const int32_t shifted = m.Bin(Op::kSub, c1, m.I(4200));                  // [-4200, 219]
  const int32_t clamped = m.Bin(Op::kMin, m.Bin(Op::kMax, shifted, m.I(0)), m.I(159));  // [0, 159]
  const int32_t at = m.Bin(Op::kAdd, m.Bin(Op::kMul, clamped, m.I(4)), c2);   // [0, 639]
  const int32_t q = m.Bin(Op::kFloorDiv, at, m.I(8)), r = m.Bin(Op::kMod, at, m.I(8));
  const int32_t small = m.Bin(Op::kMod, c2, m.I(4));                        // c2 < 4: c2 itself
  const int32_t neg_div = m.Bin(Op::kFloorDiv, shifted, m.I(3));            // [-1400, 73]
  const int32_t neg_mod = m.Bin(Op::kMod, shifted, m.I(-3));                // [-2, 0]
  const int32_t fm = m.Bin(Op::kFmod, shifted, m.I(7));                     // [-6, 6]
  const int32_t lin_big = m.Bin(Op::kMul, lin, m.I(int64_t{1} << 40));      // [0, 35359 * 2^40]
  const int32_t wraps = m.Bin(Op::kMul, lin_big, m.I(int64_t{1} << 30));    // may wrap: full
  const int32_t x = m.Load(in, m.Bin(Op::kAdd, m.Bin(Op::kMul, clamped, m.I(4)), c2));
  m.Out(DType::kFloat32, {2, 4420, 4}, x);
  const IndexRanges a = Analyse(m.p);
  CheckRange(a, c1, 0, 4419);
  CheckRange(a, lin, 0, 2 * 4420 * 4 - 1);
  CheckRange(a, shifted, -4200, 219);
  CheckRange(a, clamped, 0, 159);
  CheckRange(a, at, 0, 639);
  CheckRange(a, q, 0, 79);
  CheckRange(a, r, 0, 7);
  CheckRange(a, small, 0, 3);
  CheckRange(a, neg_div, -1400, 73);
  CheckRange(a, neg_mod, -2, 0);
  CheckRange(a, fm, -6, 6);
  CheckRange(a, lin_big, 0, (2 * 4420 * 4 - 1) * (int64_t{1} << 40));
  CheckRange(a, wraps, kMin, kMax);
  CHECK(a.exact[lin_big]);
  CHECK(!a.exact[wraps]);
  CHECK(a.rep[at] == IntRep::kU32);
  CHECK(a.rep[shifted] == IntRep::kS32);
  CHECK(a.rep[lin_big] == IntRep::kS64);
  CHECK(!a.data[at]);
  CHECK(a.data[x]);
}

TEST_CASE("AnalyseRanges: sizes, loads, checks, casts") {
  ProgramMaker m;
  m.p.domain = {-1, 6, -2};
  m.p.reduce_axes = 4;  // axis 2 (extent s1) is reduced
  m.p.num_sizes = 4;    // s2 is read by the input's dims, s3 by none
  const int idx = m.Input(DType::kInt64, {-1, 6, -2}), u8 = m.Input(DType::kUInt8, {-3});
  const int32_t c0 = m.Coord(0), c1 = m.Coord(1);
  const int32_t s0 = m.Size(0), s1 = m.Size(1), s2 = m.Size(2), s3 = m.Size(3);
  const int32_t raw = m.Load(idx, m.Linear());
  const int32_t row = m.Check(raw, m.I(5), "rows");
  const int32_t byte = m.Load(u8, m.I(0));
  const int32_t narrowed = m.Cast(raw, DType::kInt16), same = m.Cast(byte, DType::kInt32);
  const int32_t div0 = m.Bin(Op::kFloorDiv, c1, s0), div1 = m.Bin(Op::kFloorDiv, c1, s1);
  const int32_t sel = m.Select(m.Bin(Op::kLt, raw, m.I(0)), c1, m.I(-3));
  const int32_t sum = m.Reduce(fused::ReduceOp::kSum, m.Bin(Op::kAdd, raw, c1));
  m.Out(DType::kInt64, {-1, 6}, m.Bin(Op::kAdd, sum, m.Bin(Op::kAdd, row, byte)), true);
  (void)c0;
  // Axes 0 and 1 are kept: never empty where nodes run; axis 2 may be.
  const IndexRanges a = Analyse(m.p, 0b011);
  CheckRange(a, s0, 1, kMax);    // the extent of a kept axis
  CheckRange(a, s1, 0, kMax);    // the extent of a reduced axis: per-row outputs run for 0
  CheckRange(a, s2, 0, kMax);    // read by a dim: checked by the kernel
  CheckRange(a, s3, kMin, kMax);  // read by no dim: any value
  CheckRange(a, c0, 0, kMax - 1);
  CheckRange(a, raw, kMin, kMax);
  CheckRange(a, row, 0, 4);
  CheckRange(a, byte, 0, 255);
  CheckRange(a, narrowed, -32768, 32767);
  CheckRange(a, same, 0, 255);
  CheckRange(a, div0, 0, 5);
  CheckRange(a, div1, 0, 5);
  CheckRange(a, sel, -3, 5);
  CheckRange(a, sum, kMin, kMax);
  CHECK(a.data[raw]);
  CHECK(!a.data[row]);  // a checked index depends on its bound only
  CHECK(a.rep[row] == IntRep::kU32);
  CHECK(a.rep[byte] == IntRep::kS64);  // data stays 64-bit
  CHECK(a.rep[sel] == IntRep::kS64);   // its condition reads data
  CHECK(a.rep[div0] == IntRep::kU32);
}

TEST_CASE("AnalyseRanges: division and wrapping corner cases") {
  ProgramMaker m;
  m.p.domain = {4};
  const int k = m.Input(DType::kInt64, {4});
  const int32_t x = m.Load(k, m.Linear());
  const int32_t minus_one = m.I(-1), lin = m.Linear();
  const int32_t neg_min = m.Un(Op::kNeg, m.I(kMin));                          // wraps to INT64_MIN
  const int32_t div_m1 = m.Bin(Op::kDiv, x, minus_one);                        // INT64_MIN / -1 wraps
  const int32_t by_any = m.Bin(Op::kFloorDiv, m.Bin(Op::kAdd, lin, m.I(10)), m.Bin(Op::kSub, lin, m.I(2)));
  const int32_t mod_any = m.Bin(Op::kMod, x, m.Bin(Op::kSub, lin, m.I(2)));     // y in [-2, 1]
  const int32_t fmod_min = m.Bin(Op::kFmod, x, m.I(kMin));
  const int32_t abs_small = m.Un(Op::kAbs, m.Bin(Op::kSub, lin, m.I(2)));
  m.Out(DType::kInt64, {4}, x);
  const IndexRanges a = Analyse(m.p);
  CheckRange(a, neg_min, kMin, kMax);
  CHECK(!a.exact[neg_min]);
  CheckRange(a, div_m1, kMin, kMax);
  CHECK(!a.exact[div_m1]);
  // x in [10, 13], y in [-2, 1]: y < 0 gives [-13, -5], y = 0 gives 0, y = 1 gives [10, 13].
  CheckRange(a, by_any, -13, 13);
  CheckRange(a, mod_any, -1, 0);
  CheckRange(a, fmod_min, kMin + 1, kMax);
  CheckRange(a, abs_small, 0, 2);
}

// Every value a random program's node takes (as the interpreter computes it) lies in its range.
TEST_CASE("AnalyseRanges: sound on random programs (values from the CPU interpreter)") {
  const int64_t extremes[] = {kMin, kMin + 1, -4294967296LL, -2147483649LL, -2147483648LL, -1, 0, 1,
                              2147483647LL, 2147483648LL, kMax - 1, kMax};
  int64_t checked = 0;
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    const bool symbolic = seed % 2 == 0;
    const fused::Program p = testing::RandomIntProgram(seed, symbolic);
    REQUIRE_MESSAGE(fused::Validate(p).ok(), fused::Validate(p).ToString());
    const IndexRanges a = Analyse(p);
    std::mt19937 rng(seed);
    for (int run = 0; run < 3; ++run) {
      const int64_t rows = symbolic ? 1 + run * 2 : 3;
      const int64_t s0 = symbolic ? rows : static_cast<int64_t>(rng() % 9);
      const std::vector<int64_t> sizes = {s0, static_cast<int64_t>(rng() % 9)};
      std::vector<std::vector<uint8_t>> in(p.inputs.size()), out(p.outputs.size());
      std::vector<std::vector<int64_t>> dims;
      std::vector<cpu::TensorRef> ins, outs;
      dims.reserve(p.inputs.size() + p.outputs.size());
      auto ref = [&](std::vector<uint8_t>& bytes, DType dt) {
        dims.push_back({rows, 5});
        bytes.assign(static_cast<size_t>(rows * 5) * DTypeSize(dt), 0);
        return cpu::TensorRef{bytes.data(), dt, 2, dims.back().data(), rows * 5};
      };
      for (size_t k = 0; k < p.inputs.size(); ++k) {
        ins.push_back(ref(in[k], p.inputs[k].dtype));
        for (int64_t e = 0; e < rows * 5; ++e) {
          const int64_t v = rng() % 3 == 0 ? extremes[rng() % std::size(extremes)]
                                           : static_cast<int64_t>(rng() % 41) - 20;
          const size_t w = DTypeSize(p.inputs[k].dtype);
          std::memcpy(in[k].data() + e * w, &v, w);  // little-endian: the low bytes
        }
      }
      for (size_t k = 0; k < p.outputs.size(); ++k) outs.push_back(ref(out[k], DType::kInt64));
      std::vector<uint8_t> ws(cpu::FusedWorkspaceBytes(p));
      const Status st = cpu::RunFused(p, ins, outs, sizes, ws.data(), ws.size());
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      for (size_t k = 0; k < p.outputs.size(); ++k) {
        const int32_t node = p.outputs[k].value;
        const IntRange r = a.range[node];
        for (int64_t e = 0; e < rows * 5; ++e) {
          int64_t v;
          std::memcpy(&v, out[k].data() + e * 8, 8);
          if (!r.Contains(v)) {
            const std::string op = fused::OpName(p.nodes[node].op);
            FAIL_CHECK("seed " << seed << " node " << node << " (" << op << ") value " << v << " outside [" << r.lo
                               << ", " << r.hi << "]\n"
                               << fused::Print(p));
          }
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 10000);
}

}  // namespace
}  // namespace kiln
