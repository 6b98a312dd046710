// SimplifyIndices (compiler/codegen/cpu/index_simplify.h): a Reshape's unflattened and
// flattened-again index becomes affine, and every rewritten program computes what the original
// does, in the interpreter, bit for bit (int64 extremes included).
#include "compiler/codegen/cpu/index_simplify.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "runtime/fused/interpreter.h"
#include "tests/compiler/codegen/test_programs.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::codegen::cpu {
namespace {

using fused::Op;
using kiln::cpu::testing::TestTensor;

// Whether node `n`'s value depends on a kFloorDiv or kMod node.
bool Divides(const fused::Program& p, int32_t n) {
  if (n < 0) return false;
  const fused::Node& node = p.nodes[static_cast<size_t>(n)];
  if (node.op == Op::kFloorDiv || node.op == Op::kMod) return true;
  return Divides(p, node.a) || Divides(p, node.b) || Divides(p, node.c);
}

// Runs `p` in the interpreter on int64 inputs filled from `seed` (extremes among them) and
// returns every output's bytes.
std::vector<std::vector<int64_t>> Run(const fused::Program& p, uint32_t seed, std::vector<int64_t> sizes = {}) {
  REQUIRE(fused::Validate(p).ok());
  std::mt19937_64 rng(seed);
  const int64_t picks[] = {0, 1, -1, 7, -7, 19, -20, std::numeric_limits<int64_t>::max(),
                           std::numeric_limits<int64_t>::min()};
  auto count = [&](const fused::TensorSpec& t) {
    int64_t n = 1;
    for (int64_t d : t.dims) n *= d >= 0 ? d : sizes[static_cast<size_t>(-(d + 1))];
    return n;
  };
  std::vector<TestTensor> ins, outs;
  for (const fused::TensorSpec& t : p.inputs) {
    const int64_t n = count(t);
    ins.emplace_back(t.dtype, std::vector<int64_t>{n}, DTypeSize(t.dtype));
    auto* bytes = ins.back().data<uint8_t>();
    for (int64_t i = 0; i < n * static_cast<int64_t>(DTypeSize(t.dtype)); ++i) bytes[i] = static_cast<uint8_t>(rng());
    if (t.dtype == DType::kInt64)
      for (int64_t i = 0; i < n; i += 3) ins.back().data<int64_t>()[i] = picks[rng() % std::size(picks)];
  }
  for (const fused::Output& o : p.outputs) outs.emplace_back(o.tensor.dtype, std::vector<int64_t>{count(o.tensor)}, 8);
  std::vector<kiln::cpu::TensorRef> in, out;
  for (const TestTensor& t : ins) in.push_back(t.ref());
  for (const TestTensor& t : outs) out.push_back(t.ref());
  std::vector<uint8_t> ws(kiln::cpu::FusedWorkspaceBytes(p));
  const Status st = kiln::cpu::RunFused(p, in, out, sizes, ws.data(), ws.size());
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<std::vector<int64_t>> values;
  for (const TestTensor& t : outs) values.push_back(t.values<int64_t>());
  return values;
}

TEST_CASE("SimplifyIndices: a reshape read as ((c*20 + x//20)*20 + x%20) loads at c*400 + x") {
  // out[c, j] = in[c, 20, 20] at the flattened j - 16 (clamped at 0): YOLO's head concatenates
  // reshaped feature maps this way.
  testing::ProgramMaker m;
  m.p.domain = {4, 416};
  const int in = m.Input(DType::kInt64, {4, 20, 20});
  const int32_t c = m.Coord(0), j = m.Coord(1);
  const int32_t x = m.Bin(Op::kMax, m.Bin(Op::kSub, j, m.I(16)), m.I(0));
  const int32_t row = m.Bin(Op::kAdd, m.Bin(Op::kMul, c, m.I(20)), m.Bin(Op::kFloorDiv, x, m.I(20)));
  const int32_t index = m.Bin(Op::kAdd, m.Bin(Op::kMul, row, m.I(20)), m.Bin(Op::kMod, x, m.I(20)));
  m.Out(DType::kInt64, {4, 416}, m.Load(in, index));
  const fused::Program q = SimplifyIndices(m.p);
  const fused::Node& load = q.nodes[static_cast<size_t>(q.outputs[0].value)];
  REQUIRE(load.op == Op::kLoad);
  CHECK(Divides(m.p, m.p.nodes[static_cast<size_t>(m.p.outputs[0].value)].a));
  CHECK_FALSE(Divides(q, load.a));
  CHECK(Run(q, 1) == Run(m.p, 1));
}

TEST_CASE("SimplifyIndices: floordiv(x, d) * d + mod(x, d) is x for every divisor, int64 extremes included") {
  for (int64_t d : {int64_t{7}, int64_t{-7}, int64_t{1}, int64_t{-1}, int64_t{3} << 40,
                    std::numeric_limits<int64_t>::min()}) {
    CAPTURE(d);
    testing::ProgramMaker m;
    m.p.domain = {64};
    const int in = m.Input(DType::kInt64, {64});
    const int32_t x = m.Load(in, m.Linear());
    const int32_t v = m.Bin(Op::kAdd, m.Bin(Op::kMul, m.Bin(Op::kFloorDiv, x, m.I(d)), m.I(d)),
                            m.Bin(Op::kMod, x, m.I(d)));
    m.Out(DType::kInt64, {64}, v);
    // And 3 * (the same), written as mod * 3 + floordiv * (3d): the coefficients pair up too
    // (3d wraps, as the program's int64 does, for d = INT64_MIN).
    const int64_t three_d = static_cast<int64_t>(uint64_t{3} * static_cast<uint64_t>(d));
    m.Out(DType::kInt64, {64}, m.Bin(Op::kAdd, m.Bin(Op::kMul, m.Bin(Op::kMod, x, m.I(d)), m.I(3)),
                                     m.Bin(Op::kMul, m.Bin(Op::kFloorDiv, x, m.I(d)), m.I(three_d))));
    const fused::Program q = SimplifyIndices(m.p);
    CHECK(q.outputs[0].value == x);  // the load itself
    CHECK_FALSE(Divides(q, q.outputs[1].value));
    CHECK(Run(q, 2) == Run(m.p, 2));
  }
  // A divisor of 0 (floordiv and mod give 0) is no identity: left alone.
  testing::ProgramMaker m;
  m.p.domain = {8};
  const int32_t x = m.Load(m.Input(DType::kInt64, {8}), m.Linear());
  m.Out(DType::kInt64, {8}, m.Bin(Op::kAdd, m.Bin(Op::kMul, m.Bin(Op::kFloorDiv, x, m.I(0)), m.I(0)),
                                  m.Bin(Op::kMod, x, m.I(0))));
  const fused::Program q = SimplifyIndices(m.p);
  CHECK(Divides(q, q.outputs[0].value));
  CHECK(Run(q, 3) == Run(m.p, 3));
}

TEST_CASE("SimplifyAndMergeAxes: a 7x7 map merges into one axis of 49 where addresses stay affine, not where w is used alone") {
  // out[n, c, h, w] = x[n, c, h, w] * s[n, c] over [2, 3, 7, 7] (a squeeze-excitation scale).
  testing::ProgramMaker m;
  m.p.domain = {2, 3, 7, 7};
  const int x = m.Input(DType::kInt64, {2, 3, 7, 7}), s = m.Input(DType::kInt64, {2, 3});
  const int32_t n = m.Coord(0), c = m.Coord(1), h = m.Coord(2), w = m.Coord(3);
  const int32_t nc = m.Bin(Op::kAdd, m.Bin(Op::kMul, n, m.I(3)), c);
  const int32_t xi = m.Bin(Op::kAdd, m.Bin(Op::kMul, m.Bin(Op::kAdd, m.Bin(Op::kMul, nc, m.I(7)), h), m.I(7)), w);
  m.Out(DType::kInt64, {2, 3, 7, 7}, m.Bin(Op::kMul, m.Load(x, xi), m.Load(s, nc)));
  const fused::Program merged = SimplifyAndMergeAxes(m.p, 64);
  CHECK(merged.domain == std::vector<int64_t>{2, 3, 49});
  CHECK_FALSE(Divides(merged, merged.outputs[0].value));
  CHECK(Run(merged, 4) == Run(m.p, 4));
  // A minimum extent the last axis already reaches merges nothing.
  CHECK(SimplifyAndMergeAxes(m.p, 7).domain == m.p.domain);

  // out = w < 3 ? x : 0 reads w alone: merging would divide per element, so the axes stay.
  testing::ProgramMaker pad;
  pad.p.domain = {3, 7, 7};
  const int y = pad.Input(DType::kInt64, {3, 7, 7});
  pad.Out(DType::kInt64, {3, 7, 7}, pad.Select(pad.Bin(Op::kLt, pad.Coord(2), pad.I(3)), pad.Load(y, pad.Linear()), pad.I(0)));
  const fused::Program kept = SimplifyAndMergeAxes(pad.p, 64);
  CHECK(kept.domain == pad.p.domain);
  CHECK(Run(kept, 5) == Run(pad.p, 5));
}

TEST_CASE("SimplifyIndices: random integer programs compute the same values") {
  for (uint32_t seed = 100; seed < 160; ++seed) {
    CAPTURE(seed);
    const fused::Program p = testing::RandomIntProgram(seed, seed % 2 == 1);
    const std::vector<int64_t> sizes = {3, 2};
    CHECK(Run(SimplifyIndices(p), seed, sizes) == Run(p, seed, sizes));
    if (seed % 2 == 0) CHECK(Run(SimplifyAndMergeAxes(p, 64), seed, sizes) == Run(p, seed, sizes));  // [3, 5] -> [15] where affine
  }
}

}  // namespace
}  // namespace kiln::codegen::cpu
