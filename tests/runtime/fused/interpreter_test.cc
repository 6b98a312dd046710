// The fused-program interpreter against hand-computed values and against the CPU kernels
// the fused programs replace.
#include "runtime/fused/interpreter.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/half.h"
#include "tests/random_floats.h"
#include "tests/runtime/kernels/kernel_test_util.h"
#include "tests/runtime/fused/program_test_util.h"

namespace kiln::cpu::testing {
namespace {

namespace ft = kiln::fused::testing;
using ft::kF32;
using ft::kF64;
using ft::kI64;
using ft::N;
using fused::Op;
using fused::Program;
using fused::ReduceOp;
using kiln::testing::RandomFloats;

// Validates and runs `p` with a workspace of exactly FusedWorkspaceBytes, in every build of
// the interpreter this CPU runs (baseline, AVX2, AVX-512: cpu_isa.h), last in the active one;
// each must give the same status and the same output bytes as the baseline one (kInternal
// naming the build and the output otherwise).
Status RunProgram(const Program& p, std::vector<const TestTensor*> inputs,
                  std::vector<const TestTensor*> outputs, std::vector<int64_t> sizes = {}) {
  const Status valid = fused::Validate(p);
  if (!valid.ok()) return valid.WithContext("Validate");
  std::vector<TensorRef> in, out;
  for (auto* t : inputs) in.push_back(t->ref());
  for (auto* t : outputs) out.push_back(t->ref());
  const size_t bytes = FusedWorkspaceBytes(p);
  std::vector<uint8_t> ws(bytes);
  const auto run = [&](CpuIsa isa) {
    // Garbage, not zeros, so a read of scratch the interpreter did not write shows.
    std::fill(ws.begin(), ws.end(), 0xA5);
    return RunFused(p, in, out, sizes, ws.data(), bytes, nullptr, isa);
  };
  const Status base = run(CpuIsa::kBaseline);
  std::vector<std::vector<uint8_t>> base_bytes;
  for (const TensorRef& t : out) {
    const auto* b = static_cast<const uint8_t*>(t.data);
    base_bytes.emplace_back(b, b + static_cast<size_t>(t.num_elements) * DTypeSize(t.dtype));
  }
  for (CpuIsa isa : {CpuIsa::kAvx2Fma, CpuIsa::kAvx512}) {
    if (ActiveCpuIsa() < isa) break;
    const Status st = run(isa);
    const std::string name = CpuIsaName(isa);
    if (st.ToString() != base.ToString())
      return Internal("the " + name + " interpreter returned " + st.ToString() + ", the baseline one " +
                      base.ToString());
    for (size_t i = 0; i < out.size(); ++i) {
      const auto* b = static_cast<const uint8_t*>(out[i].data);
      if (!std::equal(base_bytes[i].begin(), base_bytes[i].end(), b))
        return Internal("output " + std::to_string(i) + ": the " + name +
                        " interpreter's bytes differ from the baseline one's");
    }
  }
  return base;
}

#define REQUIRE_OK(expr)                       \
  do {                                         \
    const ::kiln::Status st_ = (expr);         \
    REQUIRE_MESSAGE(st_.ok(), st_.ToString()); \
  } while (0)

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t c = 1;
  for (int64_t d : dims) c *= d;
  return c;
}

// |a - e| <= atol + rtol * |e| everywhere, NaN matching NaN.
void CheckFusedClose(const std::vector<float>& actual, const std::vector<float>& expected, double rtol = 1e-5,
                double atol = 1e-6) {
  REQUIRE(actual.size() == expected.size());
  int bad = 0;
  for (size_t i = 0; i < actual.size() && bad < 10; ++i) {
    const double a = actual[i], e = expected[i];
    const bool ok =
        (std::isnan(a) && std::isnan(e)) || a == e || std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (!ok) {
      ++bad;
      INFO("index " << i << ": got " << a << ", expected " << e);
      CHECK(ok);
    }
  }
  CHECK(bad == 0);
}

// ---- Elementwise ---------------------------------------------------------------------------

TEST_CASE("Fused broadcast add + relu: hand values and the Add/Relu kernels") {
  std::vector<float> x(32), y(8);
  for (int i = 0; i < 32; ++i) x[i] = i * 0.5f - 8.0f;
  for (int j = 0; j < 8; ++j) y[j] = j - 3.5f;
  auto tx = Floats({4, 8}, x), ty = Floats({8}, y);
  auto out = Output(DType::kFloat32, {4, 8});
  REQUIRE_OK(RunProgram(ft::AddRelu(4, 8), {&tx, &ty}, {&out}));
  const std::vector<float> got = out.values<float>();
  // Row 0: x = -8..-4.5, y = -3.5..3.5: all sums negative -> 0. Row 3, col 7: 7.5 + 3.5 = 11.
  CHECK(got[0] == 0.0f);
  CHECK(got[7] == 0.0f);
  CHECK(got[2 * 8 + 7] == 3.5f + 3.5f);  // x[23] = 3.5
  CHECK(got[31] == 11.0f);
  CHECK(got[3 * 8 + 0] == 0.5f);  // x[24] = 4, y[0] = -3.5
  for (int i = 0; i < 32; ++i) CHECK(got[i] == std::max(x[i] + y[i % 8], 0.0f));

  // Bigger than a block, with a partial last block: against the kernels.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 300}, {1, 1}, {3, 256}}) {
    auto bx = Floats({rows, cols}, RandomFloats(rows * cols, 1, -3.0f, 3.0f));
    auto by = Floats({cols}, RandomFloats(cols, 2, -3.0f, 3.0f));
    auto sum = Output(DType::kFloat32, {rows, cols});
    auto relu = Output(DType::kFloat32, {rows, cols});
    REQUIRE_OK(RunKernel("Add", {}, {&bx, &by}, {&sum}));
    REQUIRE_OK(RunKernel("Relu", {}, {&sum}, {&relu}));
    auto fused_out = Output(DType::kFloat32, {rows, cols});
    REQUIRE_OK(RunProgram(ft::AddRelu(rows, cols), {&bx, &by}, {&fused_out}));
    CHECK(fused_out.values<float>() == relu.values<float>());  // same float ops: bit-exact
  }
}

TEST_CASE("Fused transpose: an index map through coordinates, against the Transpose kernel") {
  // y[b, c, a] = x[a, b, c] with x [A, B, C] (perm = {1, 2, 0}).
  const int64_t A = 30, B = 17, C = 11;
  Program p;
  p.domain = {B, C, A};
  p.inputs = {{DType::kFloat32, {A, B, C}}};
  p.nodes = {ft::Coord(0),
             ft::Coord(1),
             ft::Coord(2),  // b, c, a
             ft::ConstI(B * C),
             N(Op::kMul, kI64, 2, 3),  // 4: a * B * C
             ft::ConstI(C),
             N(Op::kMul, kI64, 0, 5),  // 6: b * C
             N(Op::kAdd, kI64, 4, 6),
             N(Op::kAdd, kI64, 7, 1),  // 8: index
             ft::Load(0, 8, kF32)};
  p.outputs = {{{DType::kFloat32, {B, C, A}}, 9, false}};
  auto x = Floats({A, B, C}, RandomFloats(A * B * C, 3, -3.0f, 3.0f));
  auto expected = Output(DType::kFloat32, {B, C, A});
  AttrMap attrs;
  attrs.SetInts("perm", {1, 2, 0});
  REQUIRE_OK(RunKernel("Transpose", attrs, {&x}, {&expected}));
  auto y = Output(DType::kFloat32, {B, C, A});
  REQUIRE_OK(RunProgram(p, {&x}, {&y}));
  CHECK(y.values<float>() == expected.values<float>());
}

// out[i, j] = data[check(idx[i] < 0 ? idx[i] + 5 : idx[i]), j] over data [5, 3].
Program GatherWithCheckProgram(int64_t n) {
  Program p;
  p.domain = {n, 3};
  p.inputs = {{DType::kFloat32, {5, 3}}, {DType::kInt64, {n}}};
  p.checks = {"Gather 'g' input 'idx'"};
  p.nodes = {ft::Coord(0),                           // 0
             ft::Load(1, 0, kI64),                   // 1 idx[i]
             ft::ConstI(0),                          // 2
             N(Op::kLt, kI64, 1, 2),                 // 3 idx < 0
             ft::ConstI(5),                          // 4
             N(Op::kAdd, kI64, 1, 4),                // 5 idx + 5
             N(Op::kSelect, kI64, 3, 5, 1),          // 6
             N(Op::kCheckIndex, kI64, 6, 4, -1, 0),  // 7
             ft::ConstI(3),                          // 8
             N(Op::kMul, kI64, 7, 8),                // 9
             ft::Coord(1),                           // 10
             N(Op::kAdd, kI64, 9, 10),               // 11
             ft::Load(0, 11, kF32)};                 // 12
  p.outputs = {{{DType::kFloat32, {n, 3}}, 12, false}};
  return p;
}

TEST_CASE("Fused gather with an index check, against the Gather kernel") {
  auto data = Floats({5, 3}, RandomFloats(15, 4, -3.0f, 3.0f));
  auto idx = Int64s({6}, {4, 0, -1, 2, -5, 3});
  auto expected = Output(DType::kFloat32, {6, 3});
  REQUIRE_OK(RunKernel("Gather", {}, {&data, &idx}, {&expected}));
  auto y = Output(DType::kFloat32, {6, 3});
  REQUIRE_OK(RunProgram(GatherWithCheckProgram(6), {&data, &idx}, {&y}));
  CHECK(y.values<float>() == expected.values<float>());
  CHECK(y.values<float>()[2 * 3 + 1] == data.values<float>()[4 * 3 + 1]);  // idx -1 is row 4

  auto bad = Int64s({6}, {4, 0, 7, 2, -5, 3});
  Status st = RunProgram(GatherWithCheckProgram(6), {&data, &bad}, {&y});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "Gather 'g' input 'idx': index 7 is out of range [-5, 5)");
  auto neg = Int64s({6}, {4, 0, 1, 2, -6, 3});
  st = RunProgram(GatherWithCheckProgram(6), {&data, &neg}, {&y});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "Gather 'g' input 'idx': index -6 is out of range [-5, 5)");
}

// Concat of x [r0, c0] and y [r1, c1] along `axis` as the compiler lowers it: both branches
// read at clamped coordinates, a kSelect picks one.
Program ConcatProgram(int axis, int64_t r0, int64_t c0, int64_t r1, int64_t c1) {
  const int64_t rows = axis == 0 ? r0 + r1 : r0, cols = axis == 0 ? c0 : c0 + c1;
  const int64_t split = axis == 0 ? r0 : c0;
  Program p;
  p.domain = {rows, cols};
  p.inputs = {{DType::kFloat32, {r0, c0}}, {DType::kFloat32, {r1, c1}}};
  const int32_t along = axis, other = 1 - axis;
  p.nodes = {ft::Coord(along),         // 0
             ft::Coord(other),         // 1
             ft::ConstI(split - 1),    // 2
             N(Op::kMin, kI64, 0, 2),  // 3: clamped into x
             ft::ConstI(split),        // 4
             N(Op::kSub, kI64, 0, 4),  // 5
             ft::ConstI(0),            // 6
             N(Op::kMax, kI64, 5, 6),  // 7: clamped into y
             ft::ConstI(c0),           // 8
             ft::ConstI(c1),           // 9
             // x index: axis 0: i0 * c0 + j; axis 1: i * c0 + j0.
             axis == 0 ? N(Op::kMul, kI64, 3, 8) : N(Op::kMul, kI64, 1, 8),    // 10
             axis == 0 ? N(Op::kAdd, kI64, 10, 1) : N(Op::kAdd, kI64, 10, 3),  // 11
             ft::Load(0, 11, kF32),                                            // 12
             axis == 0 ? N(Op::kMul, kI64, 7, 9) : N(Op::kMul, kI64, 1, 9),    // 13
             axis == 0 ? N(Op::kAdd, kI64, 13, 1) : N(Op::kAdd, kI64, 13, 7),  // 14
             ft::Load(1, 14, kF32),                                            // 15
             N(Op::kLt, kI64, 0, 4),                                           // 16
             N(Op::kSelect, kF32, 16, 12, 15)};                                // 17
  p.outputs = {{{DType::kFloat32, {rows, cols}}, 17, false}};
  return p;
}

TEST_CASE("Fused concat through select, against the Concat kernel") {
  // Along rows, most blocks lie in one input (the other branch is skipped); along columns of
  // a long row, blocks straddle the boundary and take both.
  struct Case {
    int axis;
    int64_t r0, c0, r1, c1;
  };
  for (const Case& c :
       {Case{0, 300, 4, 200, 4}, Case{1, 2, 300, 2, 5}, Case{1, 700, 3, 700, 1}, Case{0, 1, 7, 2, 7}}) {
    INFO("axis " << c.axis << ": [" << c.r0 << ", " << c.c0 << "] + [" << c.r1 << ", " << c.c1 << "]");
    auto x = Floats({c.r0, c.c0}, RandomFloats(c.r0 * c.c0, 15, -3.0f, 3.0f));
    auto y = Floats({c.r1, c.c1}, RandomFloats(c.r1 * c.c1, 16, -3.0f, 3.0f));
    const Program p = ConcatProgram(c.axis, c.r0, c.c0, c.r1, c.c1);
    const std::vector<int64_t> dims = p.outputs[0].tensor.dims;
    auto expected = Output(DType::kFloat32, dims);
    AttrMap attrs;
    attrs.SetInt("axis", c.axis);
    REQUIRE_OK(RunKernel("Concat", attrs, {&x, &y}, {&expected}));
    auto out = Output(DType::kFloat32, dims);
    REQUIRE_OK(RunProgram(p, {&x, &y}, {&out}));
    CHECK(out.values<float>() == expected.values<float>());
  }
}

TEST_CASE("Fused load out of range is an internal error") {
  Program p;
  p.domain = {4};
  p.inputs = {{DType::kFloat32, {4}}};
  p.nodes = {ft::Linear(), ft::ConstI(1), N(Op::kAdd, kI64, 0, 1), ft::Load(0, 2, kF32)};
  p.outputs = {{{DType::kFloat32, {4}}, 3, false}};
  auto x = Floats({4}, {1, 2, 3, 4});
  auto y = Output(DType::kFloat32, {4});
  const Status st = RunProgram(p, {&x}, {&y});
  CHECK(st.code() == StatusCode::kInternal);
  CHECK(st.message().find("node 3 loads input 0 at index 4, but it has 4 elements") != std::string::npos);
  // A run starting below 0, and a strided gather (neither a run nor one repeated index)
  // whose fifth index is past the end: the message names the first bad index.
  for (auto [offset, scale, expected] : {std::tuple<int64_t, int64_t, const char*>{-2, 1, "at index -2,"},
                                         {0, 2, "at index 8,"}}) {
    Program q;
    q.domain = {6};
    q.inputs = {{DType::kFloat32, {8}}};
    q.nodes = {ft::Linear(), ft::ConstI(scale), N(Op::kMul, kI64, 0, 1), ft::ConstI(offset), N(Op::kAdd, kI64, 2, 3),
               ft::Load(0, 4, kF32)};
    q.outputs = {{{DType::kFloat32, {6}}, 5, false}};
    auto x8 = Floats({8}, {1, 2, 3, 4, 5, 6, 7, 8});
    auto y6 = Output(DType::kFloat32, {6});
    const Status bad = RunProgram(q, {&x8}, {&y6});
    CHECK(bad.code() == StatusCode::kInternal);
    CHECK_MESSAGE(bad.message().find(expected) != std::string::npos, bad.message());
  }
  // In range, the strided gather reads every other element.
  Program g;
  g.domain = {4};
  g.inputs = {{DType::kFloat32, {8}}};
  g.nodes = {ft::Linear(), ft::ConstI(2), N(Op::kMul, kI64, 0, 1), ft::Load(0, 2, kF32)};
  g.outputs = {{{DType::kFloat32, {4}}, 3, false}};
  auto x8 = Floats({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto y4 = Output(DType::kFloat32, {4});
  REQUIRE_OK(RunProgram(g, {&x8}, {&y4}));
  CHECK(y4.values<float>() == std::vector<float>{1, 3, 5, 7});
}

// Gathers long enough for the AVX2 and AVX-512 interpreters' gather instructions (4 and 8
// indices each) and their scalar tails: a permutation reads the right elements; an index past
// the end or below 0, first met inside a group of 8 or in the tail, is the one the error names.
TEST_CASE("Fused gathers in groups of 4 and 8 and a tail: values, and the first bad index") {
  std::vector<float> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f + static_cast<float>(i);
  auto x = Floats({64}, values);
  {  // x[(j * 7) mod 37] for j < 37: every group gathers scattered elements
    Program p;
    p.domain = {37};
    p.inputs = {{DType::kFloat32, {64}}};
    p.nodes = {ft::Linear(), ft::ConstI(7), N(Op::kMul, kI64, 0, 1), ft::ConstI(37), N(Op::kMod, kI64, 2, 3),
               ft::Load(0, 4, kF32)};
    p.outputs = {{{DType::kFloat32, {37}}, 5, false}};
    auto y = Output(DType::kFloat32, {37});
    REQUIRE_OK(RunProgram(p, {&x}, {&y}));
    std::vector<float> expected(37);
    for (size_t j = 0; j < expected.size(); ++j) expected[j] = values[j * 7 % 37];
    CHECK(y.values<float>() == expected);
  }
  // idx = scale * j + offset over `n` elements: the first index outside [0, 64).
  for (const auto& form : {std::tuple<int64_t, int64_t, int64_t, const char*>{40, 2, 0, "at index 64,"},
                           {37, 2, 0, "at index 64,"},
                           {40, -1, 20, "at index -1,"}}) {
    // Named copies, not a structured binding: clang 14 does not let doctest's CAPTURE lambdas see one.
    const int64_t n = std::get<0>(form), scale = std::get<1>(form), offset = std::get<2>(form);
    const char* expected = std::get<3>(form);
    CAPTURE(n);
    CAPTURE(offset);
    Program q;
    q.domain = {n};
    q.inputs = {{DType::kFloat32, {64}}};
    q.nodes = {ft::Linear(), ft::ConstI(scale), N(Op::kMul, kI64, 0, 1), ft::ConstI(offset), N(Op::kAdd, kI64, 2, 3),
               ft::Load(0, 4, kF32)};
    q.outputs = {{{DType::kFloat32, {n}}, 5, false}};
    auto y = Output(DType::kFloat32, {n});
    const Status bad = RunProgram(q, {&x}, {&y});
    CHECK(bad.code() == StatusCode::kInternal);
    CHECK_MESSAGE(bad.message().find(expected) != std::string::npos, bad.message());
  }
}

// ---- Reductions ------------------------------------------------------------------------------

TEST_CASE("Fused softmax over the last axis, against the Softmax kernel") {
  // Whole rows per block (several rows, one row, exactly a block, one column) and split rows.
  for (auto shape : {std::pair<int64_t, int64_t>{5, 7}, {37, 7}, {2, 2048}, {3, 5000}, {300, 1}, {2, 2049}}) {
    const int64_t rows = shape.first, cols = shape.second;
    INFO("shape [" << rows << ", " << cols << "]");
    auto x = Floats({rows, cols}, RandomFloats(rows * cols, 5, -10.0f, 10.0f));
    auto expected = Output(DType::kFloat32, {rows, cols});
    REQUIRE_OK(RunKernel("Softmax", {}, {&x}, {&expected}));
    auto y = Output(DType::kFloat32, {rows, cols});
    REQUIRE_OK(RunProgram(ft::SoftmaxLastAxis(rows, cols), {&x}, {&y}));
    CheckFusedClose(y.values<float>(), expected.values<float>(), 2e-6, 1e-9);
  }
  // Hand values: softmax([0, ln 3]) = [1/4, 3/4].
  auto x = Floats({1, 2}, {0.0f, std::log(3.0f)});
  auto y = Output(DType::kFloat32, {1, 2});
  REQUIRE_OK(RunProgram(ft::SoftmaxLastAxis(1, 2), {&x}, {&y}));
  CheckFusedClose(y.values<float>(), {0.25f, 0.75f}, 1e-6);
}

// out[rows] = reduce(x) over the axes in reduce_axes, as a per-row output.
Program ReduceAxes(const std::vector<int64_t>& dims, uint32_t reduce_axes, ReduceOp op) {
  Program p;
  p.domain = dims;
  p.reduce_axes = reduce_axes;
  p.inputs = {{DType::kFloat32, dims}};
  p.nodes = {ft::Linear(), ft::Load(0, 0, kF32), ft::Acc(0, kF32)};
  p.reductions = {{op, 1}};
  std::vector<int64_t> out_dims;
  for (size_t a = 0; a < dims.size(); ++a) out_dims.push_back((reduce_axes >> a) & 1u ? 1 : dims[a]);
  p.outputs = {{{DType::kFloat32, out_dims}, 2, true}};
  return p;
}

TEST_CASE("Fused ReduceSum/Max/Min/Prod over any axes, against the reduce kernels") {
  struct Case {
    std::vector<int64_t> dims;
    uint32_t reduce_axes;
    std::vector<int64_t> axes;
  };
  // Trailing axes (contiguous columns), then middle and mixed axes (strided columns), in whole-row
  // and split-row blocks.
  const Case cases[] = {{{6, 4, 5}, 0b110, {1, 2}}, {{3, 2100}, 0b10, {1}},   {{1, 40, 30}, 0b110, {1, 2}},
                        {{50, 3}, 0b10, {1}},       {{3, 4, 5}, 0b010, {1}}, {{4, 3000, 2}, 0b010, {1}},
                        {{4, 3, 5}, 0b101, {0, 2}}};
  const std::pair<ReduceOp, const char*> ops[] = {{ReduceOp::kSum, "ReduceSum"},
                                                  {ReduceOp::kMax, "ReduceMax"},
                                                  {ReduceOp::kMin, "ReduceMin"},
                                                  {ReduceOp::kProd, "ReduceProd"}};
  for (const Case& c : cases) {
    for (const auto& op_name : ops) {
      const auto op = op_name.first;
      const auto& name = op_name.second;
      INFO(name << " over " << c.dims.size() << "-d input of " << Count(c.dims) << " elements");
      // Products of many values need values near 1 to stay finite.
      const bool prod = op == ReduceOp::kProd;
      auto x = Floats(c.dims, RandomFloats(Count(c.dims), 6, prod ? 0.99f : -5.0f, prod ? 1.01f : 5.0f));
      auto axes = Int64s({static_cast<int64_t>(c.axes.size())}, c.axes);
      Program p = ReduceAxes(c.dims, c.reduce_axes, op);
      auto expected = Output(DType::kFloat32, p.outputs[0].tensor.dims);
      REQUIRE_OK(RunKernel(name, {}, {&x, &axes}, {&expected}));
      auto y = Output(DType::kFloat32, p.outputs[0].tensor.dims);
      REQUIRE_OK(RunProgram(p, {&x}, {&y}));
      // The kernel sums in float, the interpreter in double.
      CheckFusedClose(y.values<float>(), expected.values<float>(), 1e-5, 1e-4);
    }
  }
  // Hand values.
  auto x = Floats({2, 3}, {1, 2, 3, -4, 5, 0.5f});
  auto y = Output(DType::kFloat32, {2, 1});
  REQUIRE_OK(RunProgram(ReduceAxes({2, 3}, 0b10, ReduceOp::kSum), {&x}, {&y}));
  CHECK(y.values<float>() == std::vector<float>{6.0f, 1.5f});
  REQUIRE_OK(RunProgram(ReduceAxes({2, 3}, 0b10, ReduceOp::kProd), {&x}, {&y}));
  CHECK(y.values<float>() == std::vector<float>{6.0f, -10.0f});
}

TEST_CASE("Fused reduction over a leading axis with a full output reading the result") {
  // x [n, 3, 4]; mean over axis 0 (per-row [3, 4]) and centred = x - mean (full [n, 3, 4]).
  // n = 5 fits whole rows in a block, n = 3000 splits each row (strided columns both ways).
  // The load index is kLinear, or the ravel of the coordinates ((c0 * 3 + c1) * 4 + c2) as
  // the compiler writes it.
  for (auto n_ravel : {std::pair<int64_t, bool>{5, false}, {3000, false}, {5, true}, {3000, true}}) {
    const int64_t n = n_ravel.first;
    const bool ravel = n_ravel.second;
    INFO("n = " << n << (ravel ? ", ravel" : ", linear"));
    const std::vector<int64_t> dims = {n, 3, 4};
    Program p;
    p.domain = dims;
    p.reduce_axes = 0b001;
    p.inputs = {{DType::kFloat32, dims}};
    if (ravel) {
      p.nodes = {ft::Coord(0),
                 ft::ConstI(3),
                 N(Op::kMul, kI64, 0, 1),
                 ft::Coord(1),
                 N(Op::kAdd, kI64, 2, 3),
                 ft::ConstI(4),
                 N(Op::kMul, kI64, 4, 5),
                 ft::Coord(2),
                 N(Op::kAdd, kI64, 6, 7)};
    } else {
      p.nodes = {ft::Linear()};
    }
    const int32_t index = static_cast<int32_t>(p.nodes.size()) - 1, v = index + 1;
    p.nodes.push_back(ft::Load(0, index, kF32));            // v: x
    p.nodes.push_back(ft::Acc(0, kF32));                    // v + 1
    p.nodes.push_back(ft::ConstF(static_cast<double>(n)));  // v + 2
    p.nodes.push_back(N(Op::kDiv, kF32, v + 1, v + 2));     // v + 3: mean
    p.nodes.push_back(N(Op::kSub, kF32, v, v + 3));         // v + 4
    p.reductions = {{ReduceOp::kSum, v}};
    p.outputs = {{{DType::kFloat32, {3, 4}}, v + 3, true}, {{DType::kFloat32, dims}, v + 4, false}};
    const std::vector<float> xv = RandomFloats(n * 12, 7, -3.0f, 3.0f);
    auto x = Floats(dims, xv);
    auto mean = Output(DType::kFloat32, {3, 4});
    auto centred = Output(DType::kFloat32, dims);
    REQUIRE_OK(RunProgram(p, {&x}, {&mean, &centred}));

    auto axes = Int64s({1}, {0});
    auto sum = Output(DType::kFloat32, {3, 4});
    AttrMap attrs;
    attrs.SetInt("keepdims", 0);
    REQUIRE_OK(RunKernel("ReduceSum", attrs, {&x, &axes}, {&sum}));
    std::vector<float> expected_mean(12), expected_centred(n * 12);
    for (int k = 0; k < 12; ++k) expected_mean[k] = sum.values<float>()[k] / static_cast<float>(n);
    for (int i = 0; i < n * 12; ++i) expected_centred[i] = xv[i] - expected_mean[i % 12];
    CheckFusedClose(mean.values<float>(), expected_mean, 1e-5, 1e-5);
    CheckFusedClose(centred.values<float>(), expected_centred, 1e-5, 1e-5);
  }
}

TEST_CASE("Fused programs may repeat kLinear and kCoord nodes") {
  // out[i, j] = (coord1 + coord1') * 100 + linear' + coord0 over [3, 5], with duplicate leaves
  // (the interpreter keeps the first of each in place and copies it for the others).
  Program p;
  p.domain = {3, 5};
  p.nodes = {ft::Coord(1),
             ft::Linear(),
             ft::Coord(1),
             ft::Linear(),
             N(Op::kAdd, kI64, 0, 2),
             ft::ConstI(100),
             N(Op::kMul, kI64, 4, 5),
             N(Op::kAdd, kI64, 6, 3),
             ft::Coord(0),
             N(Op::kAdd, kI64, 7, 8)};
  p.outputs = {{{DType::kInt64, {3, 5}}, 9, false}, {{DType::kInt32, {3, 5}}, 1, false}};
  auto y = Output(DType::kInt64, {3, 5});
  auto lin = Output(DType::kInt32, {3, 5});
  REQUIRE_OK(RunProgram(p, {}, {&y, &lin}));
  std::vector<int64_t> expected(15);
  std::vector<int32_t> expected_lin(15);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 5; ++j) {
      expected[i * 5 + j] = 2 * j * 100 + (i * 5 + j) + i;
      expected_lin[i * 5 + j] = i * 5 + j;
    }
  }
  CHECK(y.values<int64_t>() == expected);
  CHECK(lin.values<int32_t>() == expected_lin);
}

// LayerNormalization over the last axis of [rows, cols] with Mean and InvStdDev per-row
// outputs. Reduction 1 reads reduction 0's result.
Program LayerNormProgram(int64_t rows, int64_t cols, float eps) {
  Program p;
  p.domain = {rows, cols};
  p.reduce_axes = 0b10;
  p.inputs = {{DType::kFloat32, {rows, cols}}, {DType::kFloat32, {cols}}, {DType::kFloat32, {cols}}};
  p.nodes = {ft::Linear(),                           // 0
             ft::Load(0, 0, kF32),                   // 1 x
             ft::Acc(0, kF32),                       // 2 sum x
             ft::ConstF(static_cast<double>(cols)),  // 3
             N(Op::kDiv, kF32, 2, 3),                // 4 mean
             N(Op::kSub, kF32, 1, 4),                // 5 d
             N(Op::kMul, kF32, 5, 5),                // 6 d^2
             ft::Acc(1, kF32),                       // 7 sum d^2
             N(Op::kDiv, kF32, 7, 3),                // 8 var
             ft::ConstF(eps),                        // 9
             N(Op::kAdd, kF32, 8, 9),                // 10
             N(Op::kSqrt, kF32, 10),                 // 11
             N(Op::kDiv, kF32, 5, 11),               // 12 normalized
             ft::Coord(1),                           // 13
             ft::Load(1, 13, kF32),                  // 14 scale
             N(Op::kMul, kF32, 12, 14),              // 15
             ft::Load(2, 13, kF32),                  // 16 bias
             N(Op::kAdd, kF32, 15, 16),              // 17
             N(Op::kReciprocal, kF32, 11)};          // 18 inv std
  p.reductions = {{ReduceOp::kSum, 1}, {ReduceOp::kSum, 6}};
  p.outputs = {{{DType::kFloat32, {rows, cols}}, 17, false},
               {{DType::kFloat32, {rows, 1}}, 4, true},
               {{DType::kFloat32, {rows, 1}}, 18, true}};
  return p;
}

TEST_CASE("Fused layer normalization, against the LayerNormalization kernel") {
  const float eps = 1e-5f;
  for (auto shape : {std::pair<int64_t, int64_t>{7, 16}, {3, 1000}, {2, 257}, {40, 1}}) {
    const int64_t rows = shape.first, cols = shape.second;
    INFO("shape [" << rows << ", " << cols << "]");
    auto x = Floats({rows, cols}, RandomFloats(rows * cols, 8, -4.0f, 6.0f));
    auto scale = Floats({cols}, RandomFloats(cols, 9, 0.5f, 1.5f));
    auto bias = Floats({cols}, RandomFloats(cols, 10, -3.0f, 3.0f));
    auto y = Output(DType::kFloat32, {rows, cols});
    auto mean = Output(DType::kFloat32, {rows, 1});
    auto inv = Output(DType::kFloat32, {rows, 1});
    auto ey = Output(DType::kFloat32, {rows, cols});
    auto emean = Output(DType::kFloat32, {rows, 1});
    auto einv = Output(DType::kFloat32, {rows, 1});
    AttrMap attrs;
    attrs.SetFloat("epsilon", eps);
    REQUIRE_OK(RunKernel("LayerNormalization", attrs, {&x, &scale, &bias}, {&ey, &emean, &einv}));
    REQUIRE_OK(RunProgram(LayerNormProgram(rows, cols, eps), {&x, &scale, &bias}, {&y, &mean, &inv}));
    CheckFusedClose(y.values<float>(), ey.values<float>(), 1e-4, 1e-5);
    CheckFusedClose(mean.values<float>(), emean.values<float>(), 1e-5, 1e-6);
    CheckFusedClose(inv.values<float>(), einv.values<float>(), 1e-4, 1e-5);
  }
}

TEST_CASE("Fused per-row outputs see every reduced coordinate as 0") {
  // Domain [3, 4] reducing axis 1: out[r] = sum_c x[r, c] + x[r, 0] + coord(1) + linear / 100.
  Program p;
  p.domain = {3, 4};
  p.reduce_axes = 0b10;
  p.inputs = {{DType::kFloat32, {3, 4}}};
  p.nodes = {ft::Linear(),
             ft::Load(0, 0, kF32),
             ft::Acc(0, kF32),
             N(Op::kAdd, kF32, 2, 1),
             ft::Coord(1),
             N(Op::kAdd, kI64, 4, 0),
             ft::Cast(5, DType::kFloat32, kF32),
             ft::ConstF(0.25),
             N(Op::kMul, kF32, 6, 7),
             N(Op::kAdd, kF32, 3, 8)};
  p.reductions = {{ReduceOp::kSum, 1}};
  p.outputs = {{{DType::kFloat32, {3}}, 9, true}};
  auto x = Floats({3, 4}, {1, 2, 3, 4, 10, 20, 30, 40, 100, 200, 300, 400});
  auto y = Output(DType::kFloat32, {3});
  REQUIRE_OK(RunProgram(p, {&x}, {&y}));
  // Row r: sum + x[r, 0] + (0 + 4r) * 0.25.
  CHECK(y.values<float>() == std::vector<float>{10 + 1 + 0, 100 + 10 + 1, 1000 + 100 + 2});

  // Reducing the leading axis of [2, 3]: the rows are the columns j, linear = j.
  Program q;
  q.domain = {2, 3};
  q.reduce_axes = 0b01;
  q.nodes = {ft::Linear(), ft::Coord(0), ft::ConstI(100), N(Op::kMul, kI64, 1, 2), N(Op::kAdd, kI64, 0, 3)};
  q.outputs = {{{DType::kInt64, {3}}, 4, true}};
  auto z = Output(DType::kInt64, {3});
  REQUIRE_OK(RunProgram(q, {}, {&z}));
  CHECK(z.values<int64_t>() == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("Fused reductions over empty rows give the identity, empty domains do nothing") {
  Program p;
  p.domain = {3, 0};
  p.reduce_axes = 0b10;
  p.inputs = {{DType::kFloat32, {3, 0}}};
  p.nodes = {ft::Linear(), ft::Load(0, 0, kF32), ft::Acc(0, kF32), ft::Acc(1, kF32), ft::Acc(2, kF32)};
  p.reductions = {{ReduceOp::kSum, 1}, {ReduceOp::kMax, 1}, {ReduceOp::kProd, 1}};
  p.outputs = {{{DType::kFloat32, {3}}, 2, true},
               {{DType::kFloat32, {3}}, 3, true},
               {{DType::kFloat32, {3}}, 4, true},
               {{DType::kFloat32, {3, 0}}, 1, false}};
  auto x = Floats({3, 0}, {});
  auto sum = Output(DType::kFloat32, {3}), mx = Output(DType::kFloat32, {3}),
       prod = Output(DType::kFloat32, {3});
  auto full = Output(DType::kFloat32, {3, 0});
  REQUIRE_OK(RunProgram(p, {&x}, {&sum, &mx, &prod, &full}));
  CHECK(sum.values<float>() == std::vector<float>{0, 0, 0});
  CHECK(prod.values<float>() == std::vector<float>{1, 1, 1});
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(mx.values<float>() == std::vector<float>{-inf, -inf, -inf});

  Program e = ft::AddRelu(0, 8);
  auto ex = Floats({0, 8}, {}), ey = Floats({8}, RandomFloats(8, 1, -3.0f, 3.0f));
  auto eo = Output(DType::kFloat32, {0, 8});
  CHECK(RunProgram(e, {&ex, &ey}, {&eo}).ok());
}

TEST_CASE("Fused max/min propagate NaN, elementwise and as reductions") {
  Program p;
  p.domain = {2, 3};
  p.reduce_axes = 0b10;
  p.inputs = {{DType::kFloat32, {2, 3}}, {DType::kFloat32, {2, 3}}};
  p.nodes = {ft::Linear(),
             ft::Load(0, 0, kF32),
             ft::Load(1, 0, kF32),
             N(Op::kMax, kF32, 1, 2),
             N(Op::kMin, kF32, 1, 2),
             ft::Acc(0, kF32),
             ft::Acc(1, kF32)};
  p.reductions = {{ReduceOp::kMax, 1}, {ReduceOp::kMin, 1}};
  p.outputs = {{{DType::kFloat32, {2, 3}}, 3, false},
               {{DType::kFloat32, {2, 3}}, 4, false},
               {{DType::kFloat32, {2}}, 5, true},
               {{DType::kFloat32, {2}}, 6, true}};
  auto a = Floats({2, 3}, {1, kNaN, 3, kNaN, 5, 6});
  auto b = Floats({2, 3}, {kNaN, 2, 1, 4, 7, 6});
  auto mx = Output(DType::kFloat32, {2, 3}), mn = Output(DType::kFloat32, {2, 3});
  auto rmx = Output(DType::kFloat32, {2}), rmn = Output(DType::kFloat32, {2});
  REQUIRE_OK(RunProgram(p, {&a, &b}, {&mx, &mn, &rmx, &rmn}));
  CheckFusedClose(mx.values<float>(), {kNaN, kNaN, 3, kNaN, 7, 6}, 0, 0);
  CheckFusedClose(mn.values<float>(), {kNaN, kNaN, 1, kNaN, 5, 6}, 0, 0);
  CheckFusedClose(rmx.values<float>(), {kNaN, kNaN}, 0, 0);  // NaN first in row 1, in the middle in row 0
  CheckFusedClose(rmn.values<float>(), {kNaN, kNaN}, 0, 0);
  // Against the kernels.
  auto axes = Int64s({1}, {1});
  AttrMap attrs;
  attrs.SetInt("keepdims", 0);
  auto kmx = Output(DType::kFloat32, {2});
  REQUIRE_OK(RunKernel("ReduceMax", attrs, {&a, &axes}, {&kmx}));
  CheckFusedClose(rmx.values<float>(), kmx.values<float>(), 0, 0);
  auto kmax = Output(DType::kFloat32, {2, 3});
  REQUIRE_OK(RunKernel("Max", {}, {&a, &b}, {&kmax}));
  CheckFusedClose(mx.values<float>(), kmax.values<float>(), 0, 0);
}

TEST_CASE("Fused int64 reductions wrap and use integer identities") {
  Program p;
  p.domain = {2, 3};
  p.reduce_axes = 0b10;
  p.inputs = {{DType::kInt64, {2, 3}}};
  p.nodes = {ft::Linear(),     ft::Load(0, 0, kI64), ft::Acc(0, kI64),       ft::Acc(1, kI64),
             ft::Acc(2, kI64), ft::Acc(3, kI64),     N(Op::kSub, kI64, 1, 5)};
  p.reductions = {{ReduceOp::kSum, 1}, {ReduceOp::kProd, 1}, {ReduceOp::kMax, 1}, {ReduceOp::kMin, 1}};
  p.outputs = {{{DType::kInt64, {2}}, 2, true},
               {{DType::kInt64, {2}}, 3, true},
               {{DType::kInt64, {2}}, 4, true},
               {{DType::kInt64, {2}}, 5, true},
               {{DType::kInt64, {2, 3}}, 6, false}};
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto x = Int64s({2, 3}, {3, -4, 5, big, 1, -7});
  auto s = Output(DType::kInt64, {2}), pr = Output(DType::kInt64, {2}), mx = Output(DType::kInt64, {2}),
       mn = Output(DType::kInt64, {2}), shifted = Output(DType::kInt64, {2, 3});
  REQUIRE_OK(RunProgram(p, {&x}, {&s, &pr, &mx, &mn, &shifted}));
  CHECK(s.values<int64_t>() == std::vector<int64_t>{4, big - 6});
  CHECK(pr.values<int64_t>()[0] == -60);
  CHECK(mx.values<int64_t>() == std::vector<int64_t>{5, big});
  CHECK(mn.values<int64_t>() == std::vector<int64_t>{-4, -7});
  CHECK(shifted.values<int64_t>() ==
        std::vector<int64_t>{7, 0, 9, std::numeric_limits<int64_t>::min() + 6, 8, 0});
}

// ---- Arithmetic, casts, dtypes ---------------------------------------------------------------

TEST_CASE("Fused int64 arithmetic: division, modulo, zero divisors") {
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  Program p;
  p.domain = {7};
  p.inputs = {{DType::kInt64, {7}}, {DType::kInt64, {7}}};
  p.nodes = {ft::Linear(),
             ft::Load(0, 0, kI64),
             ft::Load(1, 0, kI64),
             N(Op::kDiv, kI64, 1, 2),
             N(Op::kFloorDiv, kI64, 1, 2),
             N(Op::kMod, kI64, 1, 2),
             N(Op::kFmod, kI64, 1, 2),
             N(Op::kMul, kI64, 1, 2),
             N(Op::kAbs, kI64, 1),
             N(Op::kSign, kI64, 1),
             N(Op::kNeg, kI64, 1)};
  for (int32_t v = 3; v <= 10; ++v) p.outputs.push_back({{DType::kInt64, {7}}, v, false});
  auto x = Int64s({7}, {7, -7, 7, -7, 5, kMin, 0});
  auto y = Int64s({7}, {2, 2, -2, -2, 0, -1, 3});
  std::vector<TestTensor> outs;
  for (int k = 0; k < 8; ++k) outs.push_back(Output(DType::kInt64, {7}));
  std::vector<const TestTensor*> out_ptrs;
  for (auto& t : outs) out_ptrs.push_back(&t);
  REQUIRE_OK(RunProgram(p, {&x, &y}, out_ptrs));
  using V = std::vector<int64_t>;
  CHECK(outs[0].values<int64_t>() == V{3, -3, -3, 3, 0, kMin, 0});      // div truncates; x / 0 = 0
  CHECK(outs[1].values<int64_t>() == V{3, -4, -4, 3, 0, kMin, 0});      // floordiv
  CHECK(outs[2].values<int64_t>() == V{1, 1, -1, -1, 0, 0, 0});         // mod: sign of divisor
  CHECK(outs[3].values<int64_t>() == V{1, -1, 1, -1, 0, 0, 0});         // fmod: sign of dividend
  CHECK(outs[4].values<int64_t>() == V{14, -14, -14, 14, 0, kMin, 0});  // kMin * -1 wraps
  CHECK(outs[5].values<int64_t>() == V{7, 7, 7, 7, 5, kMin, 0});
  CHECK(outs[6].values<int64_t>() == V{1, -1, 1, -1, 1, -1, 0});
  CHECK(outs[7].values<int64_t>() == V{-7, 7, -7, 7, -5, kMin, 0});
}

TEST_CASE("Fused floordiv and mod by a constant or size power of two: floor and the divisor's sign") {
  // A divisor of 2^k (a constant or a size argument) is a shift and a mask inside the
  // interpreter; the results must be those of the general division. 3 is not a power of two.
  Program p;
  p.domain = {9};
  p.num_sizes = 1;
  p.inputs = {{DType::kInt64, {9}}};
  p.nodes = {ft::Linear(),                      // 0
             ft::Load(0, 0, kI64),              // 1 x
             ft::ConstI(4),                     // 2
             ft::Size(0),                       // 3 (8)
             ft::ConstI(3),                     // 4
             N(Op::kFloorDiv, kI64, 1, 2),      // 5
             N(Op::kMod, kI64, 1, 2),           // 6
             N(Op::kFloorDiv, kI64, 1, 3),      // 7
             N(Op::kMod, kI64, 1, 3),           // 8
             N(Op::kFloorDiv, kI64, 1, 4),      // 9
             N(Op::kMod, kI64, 1, 4)};          // 10
  for (int32_t v = 5; v <= 10; ++v) p.outputs.push_back({{DType::kInt64, {9}}, v, false});
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  auto x = Int64s({9}, {0, 1, 7, 8, -1, -7, -8, -9, kMin});
  std::vector<TestTensor> outs;
  for (int k = 0; k < 6; ++k) outs.push_back(Output(DType::kInt64, {9}));
  std::vector<const TestTensor*> out_ptrs;
  for (auto& t : outs) out_ptrs.push_back(&t);
  REQUIRE_OK(RunProgram(p, {&x}, out_ptrs, {8}));
  using V = std::vector<int64_t>;
  CHECK(outs[0].values<int64_t>() == V{0, 0, 1, 2, -1, -2, -2, -3, kMin / 4});
  CHECK(outs[1].values<int64_t>() == V{0, 1, 3, 0, 3, 1, 0, 3, 0});
  CHECK(outs[2].values<int64_t>() == V{0, 0, 0, 1, -1, -1, -1, -2, kMin / 8});
  CHECK(outs[3].values<int64_t>() == V{0, 1, 7, 0, 7, 1, 0, 7, 0});
  CHECK(outs[4].values<int64_t>() == V{0, 0, 2, 2, -1, -3, -3, -3, kMin / 3 - 1});
  CHECK(outs[5].values<int64_t>() == V{0, 1, 1, 2, 2, 2, 1, 0, 1});
}

TEST_CASE("Fused floordiv and mod of non-negative values by a constant or size that is not a power of two") {
  // Values in [0, 2^52) take the interpreter's double path; 2^52 and above the integer one.
  // Multiples of the divisor and their neighbours near 2^52 are where rounding would show.
  const int64_t two52 = int64_t{1} << 52;
  for (const int64_t top : {two52 - 1, two52, std::numeric_limits<int64_t>::max()}) {
    CAPTURE(top);
    std::vector<int64_t> xs = {0, 1, 2, 3, 6, 7, 20, 21, 22, top, top - 1, top - 2, top - 3};
    for (int64_t d : {int64_t{3}, int64_t{7}}) {
      const int64_t q = (top / d) * d;  // the largest multiple of d up to top
      xs.insert(xs.end(), {q, q - 1, q - d, q - d + 1});
    }
    const int64_t len = static_cast<int64_t>(xs.size());
    Program p;
    p.domain = {len};
    p.num_sizes = 1;
    p.inputs = {{DType::kInt64, {len}}};
    p.nodes = {ft::Linear(),                  // 0
               ft::Load(0, 0, kI64),          // 1 x
               ft::ConstI(3),                 // 2
               ft::Size(0),                   // 3 (7)
               N(Op::kFloorDiv, kI64, 1, 2),  // 4
               N(Op::kMod, kI64, 1, 2),       // 5
               N(Op::kFloorDiv, kI64, 1, 3),  // 6
               N(Op::kMod, kI64, 1, 3)};      // 7
    for (int32_t v = 4; v <= 7; ++v) p.outputs.push_back({{DType::kInt64, {len}}, v, false});
    auto x = Int64s({len}, xs);
    std::vector<TestTensor> outs;
    for (int k = 0; k < 4; ++k) outs.push_back(Output(DType::kInt64, {len}));
    std::vector<const TestTensor*> out_ptrs;
    for (auto& t : outs) out_ptrs.push_back(&t);
    REQUIRE_OK(RunProgram(p, {&x}, out_ptrs, {7}));
    std::vector<int64_t> q3, r3, q7, r7;
    for (int64_t v : xs) {  // non-negative: C++'s truncating / and % are floor and mod
      q3.push_back(v / 3);
      r3.push_back(v % 3);
      q7.push_back(v / 7);
      r7.push_back(v % 7);
    }
    CHECK(outs[0].values<int64_t>() == q3);
    CHECK(outs[1].values<int64_t>() == r3);
    CHECK(outs[2].values<int64_t>() == q7);
    CHECK(outs[3].values<int64_t>() == r7);
  }
}

TEST_CASE("Fused values uniform over a block (per channel) are exact whether blocks cross channels or not") {
  // x [2, 5, H, W] and a per-channel s [5]. Per channel: sqrt(s[c]) (uniform within a channel),
  // x * sqrt(s[c]) for c < 2 and -1 elsewhere (a select on a channel condition), the uniform
  // value itself as an output, float(c) (a cast of a coordinate), and a sum over the last
  // axis of x + sqrt(s[c]) (a reduction reading a uniform operand; without it, blocks are
  // runs of up to 2048 elements instead of whole rows). H x W = 41 x 130 puts many blocks
  // inside one channel and some across two; 3 x 7 puts several channels in every block.
  for (auto c : {std::tuple<int64_t, int64_t, bool>{41, 130, true}, {41, 130, false}, {3, 7, true}, {3, 7, false}}) {
    const int64_t h = std::get<0>(c), w = std::get<1>(c);
    const bool reduce = std::get<2>(c);
    CAPTURE(h);
    CAPTURE(reduce);
    const std::vector<int64_t> dims = {2, 5, h, w}, rows = {2, 5, h};
    const int64_t count = Count(dims);
    Program p;
    p.domain = dims;
    p.inputs = {{DType::kFloat32, dims}, {DType::kFloat32, {5}}};
    p.nodes = {ft::Coord(1),                                  // 0 c
               ft::Linear(),                                  // 1
               ft::Load(0, 1, kF32),                          // 2 x
               ft::Load(1, 0, kF32),                          // 3 s[c]
               N(Op::kSqrt, kF32, 3),                         // 4 sqrt(s[c])
               N(Op::kMul, kF32, 2, 4),                       // 5
               ft::ConstI(2),                                 // 6
               N(Op::kLt, kI64, 0, 6),                        // 7 c < 2
               ft::ConstF(-1),                                // 8
               N(Op::kSelect, kF32, 7, 5, 8),                 // 9
               ft::Cast(0, DType::kFloat32, kF32),            // 10 float(c)
               N(Op::kAdd, kF32, 2, 4),                       // 11 x + sqrt(s[c])
               ft::Acc(0, kF32)};                             // 12
    p.outputs = {{{DType::kFloat32, dims}, 9, false},
                 {{DType::kFloat32, dims}, 4, false},
                 {{DType::kFloat32, dims}, 10, false}};
    if (reduce) {
      p.reduce_axes = 0b1000;
      p.reductions = {{ReduceOp::kSum, 11}};
      p.outputs.push_back({{DType::kFloat32, rows}, 12, true});
    } else {
      p.nodes.pop_back();  // the kAcc
    }
    const std::vector<float> xv = RandomFloats(count, 11, -3.0f, 3.0f), sv = {0.25f, 2.0f, 9.0f, 0.5f, 7.0f};
    auto x = Floats(dims, xv);
    auto sc = Floats({5}, sv);
    auto sel = Output(DType::kFloat32, dims), root = Output(DType::kFloat32, dims), cf = Output(DType::kFloat32, dims),
         sum = Output(DType::kFloat32, rows);
    std::vector<const TestTensor*> outs = {&sel, &root, &cf};
    if (reduce) outs.push_back(&sum);
    REQUIRE_OK(RunProgram(p, {&x, &sc}, outs));
    std::vector<float> e_sel(count), e_root(count), e_cf(count), e_sum(Count(rows));
    for (int64_t i = 0; i < count; ++i) {
      const int64_t c = (i / (h * w)) % 5;
      const float r = std::sqrt(sv[c]);
      e_sel[i] = c < 2 ? xv[i] * r : -1.0f;
      e_root[i] = r;
      e_cf[i] = static_cast<float>(c);
    }
    for (int64_t row = 0; row < Count(rows); ++row) {
      double acc = 0;
      for (int64_t j = 0; j < w; ++j) acc += xv[row * w + j] + std::sqrt(sv[(row / h) % 5]);
      e_sum[row] = static_cast<float>(acc);
    }
    CHECK(sel.values<float>() == e_sel);
    CHECK(root.values<float>() == e_root);
    CHECK(cf.values<float>() == e_cf);
    if (reduce) CheckFusedClose(sum.values<float>(), e_sum, 1e-6, 1e-6);
  }
}

TEST_CASE("Fused per-channel values of an SE block are exact, per segment or not") {
  // x [2, 6, H, W] * HardSigmoid(s[n, c]) (s of shape [2, 6, 1, 1], read at n * 6 + c), the
  // HardSigmoid itself as an output, and s[n, c] > 0 ? x : s[c] (a select on a per-channel
  // condition; s[c] a load at a coordinate). H x W of 16 or more elements makes the per-channel
  // values one per channel segment of a block: 4 x 6 and 1 x 40 put several channels in a block,
  // 30 x 17 makes blocks start inside a channel, 41 x 130 puts most blocks inside one channel;
  // 3 x 5 is below the shortest segment, so it is computed per element.
  for (auto shape : {std::pair<int64_t, int64_t>{4, 6}, {1, 40}, {30, 17}, {41, 130}, {3, 5}}) {
    const int64_t h = shape.first, w = shape.second;
    CAPTURE(h);
    CAPTURE(w);
    const std::vector<int64_t> dims = {2, 6, h, w};
    const int64_t count = Count(dims);
    Program p;
    p.domain = dims;
    p.inputs = {{DType::kFloat32, dims}, {DType::kFloat32, {2, 6, 1, 1}}};
    p.nodes = {ft::Coord(0),                   // 0 n
               ft::Coord(1),                   // 1 c
               ft::ConstI(6),                  // 2
               N(Op::kMul, kI64, 0, 2),        // 3 n * 6
               N(Op::kAdd, kI64, 3, 1),        // 4 n * 6 + c
               ft::Linear(),                   // 5
               ft::Load(0, 5, kF32),           // 6 x
               ft::Load(1, 4, kF32),           // 7 s[n, c]
               ft::ConstF(0.2f),               // 8
               N(Op::kMul, kF32, 8, 7),        // 9
               ft::ConstF(0.5),                // 10
               N(Op::kAdd, kF32, 9, 10),       // 11
               ft::ConstF(0),                  // 12
               ft::ConstF(1),                  // 13
               N(Op::kMax, kF32, 11, 12),      // 14
               N(Op::kMin, kF32, 14, 13),      // 15 HardSigmoid(s[n, c])
               N(Op::kMul, kF32, 6, 15),       // 16
               ft::Load(1, 1, kF32),           // 17 s[c]
               N(Op::kLt, kI64, 12, 7),        // 18 0 < s[n, c]
               N(Op::kSelect, kF32, 18, 6, 17)};  // 19
    p.outputs = {{{DType::kFloat32, dims}, 16, false},
                 {{DType::kFloat32, dims}, 15, false},
                 {{DType::kFloat32, dims}, 19, false}};
    const std::vector<float> xv = RandomFloats(count, 21, -3.0f, 3.0f), sv = RandomFloats(12, 22, -6.0f, 6.0f);
    auto x = Floats(dims, xv);
    auto sc = Floats({2, 6, 1, 1}, sv);
    auto y = Output(DType::kFloat32, dims), hs = Output(DType::kFloat32, dims), sel = Output(DType::kFloat32, dims);
    REQUIRE_OK(RunProgram(p, {&x, &sc}, {&y, &hs, &sel}));
    std::vector<float> e_y(count), e_hs(count), e_sel(count);
    for (int64_t i = 0; i < count; ++i) {
      const int64_t nc = i / (h * w), c = nc % 6;
      const float v = std::min(std::max(0.2f * sv[nc] + 0.5f, 0.0f), 1.0f);
      e_y[i] = xv[i] * v;
      e_hs[i] = v;
      e_sel[i] = 0 < sv[nc] ? xv[i] : sv[c];
    }
    CHECK(y.values<float>() == e_y);
    CHECK(hs.values<float>() == e_hs);
    CHECK(sel.values<float>() == e_sel);
  }
}

TEST_CASE("Fused float arithmetic: mod, fmod, pow, comparisons, select and logic") {
  Program p;
  p.domain = {4};
  p.inputs = {{DType::kFloat32, {4}}, {DType::kFloat32, {4}}};
  p.nodes = {ft::Linear(),                          // 0
             ft::Load(0, 0, kF32),                  // 1 x
             ft::Load(1, 0, kF32),                  // 2 y
             N(Op::kMod, kF32, 1, 2),               // 3
             N(Op::kFmod, kF32, 1, 2),              // 4
             N(Op::kLt, kI64, 1, 2),                // 5
             N(Op::kEq, kI64, 1, 1),                // 6 false for NaN
             N(Op::kIsNaN, kI64, 1),                // 7
             N(Op::kSelect, kF32, 5, 1, 2),         // 8 x < y ? x : y
             N(Op::kNot, kI64, 5),                  // 9
             N(Op::kXor, kI64, 5, 6),               // 10
             N(Op::kAnd, kI64, 6, 9),               // 11
             N(Op::kOr, kI64, 7, 5),                // 12
             N(Op::kLe, kI64, 1, 2),                // 13
             ft::Cast(1, DType::kFloat64, kF64),    // 14
             ft::ConstF(0.5, kF64),                 // 15
             N(Op::kPow, kF64, 14, 15),             // 16 sqrt in double
             ft::Cast(16, DType::kFloat32, kF32)};  // 17
  p.outputs = {{{DType::kFloat32, {4}}, 3, false},
               {{DType::kFloat32, {4}}, 4, false},
               {{DType::kFloat32, {4}}, 8, false},
               {{DType::kFloat32, {4}}, 17, false},
               {{DType::kFloat64, {4}}, 16, false}};
  for (int32_t v : {5, 6, 7, 9, 10, 11, 12, 13}) p.outputs.push_back({{DType::kBool, {4}}, v, false});
  auto x = Floats({4}, {-7.5f, 7.5f, 4.0f, kNaN});
  auto y = Floats({4}, {2.0f, -2.0f, 4.0f, 1.0f});
  std::vector<TestTensor> outs;
  for (int k = 0; k < 4; ++k) outs.push_back(Output(DType::kFloat32, {4}));
  outs.push_back(Output(DType::kFloat64, {4}));
  for (int k = 0; k < 8; ++k) outs.push_back(Output(DType::kBool, {4}));
  std::vector<const TestTensor*> out_ptrs;
  for (auto& t : outs) out_ptrs.push_back(&t);
  REQUIRE_OK(RunProgram(p, {&x, &y}, out_ptrs));
  CheckFusedClose(outs[0].values<float>(), {0.5f, -0.5f, 0.0f, kNaN}, 0, 0);
  CheckFusedClose(outs[1].values<float>(), {-1.5f, 1.5f, 0.0f, kNaN}, 0, 0);
  CheckFusedClose(outs[2].values<float>(), {-7.5f, -2.0f, 4.0f, 1.0f}, 0, 0);
  CheckFusedClose(outs[3].values<float>(), {kNaN, std::sqrt(7.5f), 2.0f, kNaN}, 1e-7, 0);
  CHECK(outs[4].values<double>()[1] == std::pow(7.5, 0.5));
  using B = std::vector<uint8_t>;
  CHECK(outs[5].values<uint8_t>() == B{1, 0, 0, 0});   // lt
  CHECK(outs[6].values<uint8_t>() == B{1, 1, 1, 0});   // eq(x, x)
  CHECK(outs[7].values<uint8_t>() == B{0, 0, 0, 1});   // isnan
  CHECK(outs[8].values<uint8_t>() == B{0, 1, 1, 1});   // not lt
  CHECK(outs[9].values<uint8_t>() == B{0, 1, 1, 0});   // lt xor eq
  CHECK(outs[10].values<uint8_t>() == B{0, 1, 1, 0});  // eq and not lt
  CHECK(outs[11].values<uint8_t>() == B{1, 0, 0, 1});  // isnan or lt
  CHECK(outs[12].values<uint8_t>() == B{1, 0, 1, 0});  // le
}

// out = unary(x) for each float unary op, against the op's CPU kernel.
TEST_CASE("Fused float unary ops match the CPU kernels") {
  const std::pair<Op, const char*> ops[] = {
      {Op::kNeg, "Neg"},     {Op::kAbs, "Abs"},   {Op::kSign, "Sign"},
      {Op::kFloor, "Floor"}, {Op::kCeil, "Ceil"}, {Op::kRound, "Round"},
      {Op::kSqrt, "Sqrt"},   {Op::kExp, "Exp"},   {Op::kLog, "Log"},
      {Op::kErf, "Erf"},     {Op::kTanh, "Tanh"}, {Op::kSigmoid, "Sigmoid"},
      {Op::kSin, "Sin"},     {Op::kCos, "Cos"},   {Op::kTan, "Tan"},
      {Op::kAsin, "Asin"},   {Op::kAcos, "Acos"}, {Op::kAtan, "Atan"},
      {Op::kSinh, "Sinh"},   {Op::kCosh, "Cosh"}, {Op::kReciprocal, "Reciprocal"}};
  std::vector<float> xs = RandomFloats(300, 11, -0.99f, 0.99f);
  // Round halves to even; Sign of 0 is 0.
  const std::vector<float> specials = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0.0f, 3.49f, -3.51f};
  std::copy(specials.begin(), specials.end(), xs.begin());
  for (const auto& op_name : ops) {
    const auto op = op_name.first;
    const auto& name = op_name.second;
    INFO(name);
    const bool positive = op == Op::kSqrt || op == Op::kLog;
    std::vector<float> v = xs;
    if (positive)
      for (float& f : v) f = std::fabs(f) + 0.01f;
    auto x = Floats({300}, v);
    Program p;
    p.domain = {300};
    p.inputs = {{DType::kFloat32, {300}}};
    p.nodes = {ft::Linear(), ft::Load(0, 0, kF32), N(op, kF32, 1)};
    p.outputs = {{{DType::kFloat32, {300}}, 2, false}};
    auto y = Output(DType::kFloat32, {300});
    REQUIRE_OK(RunProgram(p, {&x}, {&y}));
    auto expected = Output(DType::kFloat32, {300});
    REQUIRE(FindKernel(name) != nullptr);
    REQUIRE_OK(RunKernel(name, {}, {&x}, {&expected}));
    CheckFusedClose(y.values<float>(), expected.values<float>(), 2e-7, 1e-7);
  }
  // Round, by hand.
  auto x = Floats({8}, specials);
  Program p;
  p.domain = {8};
  p.inputs = {{DType::kFloat32, {8}}};
  p.nodes = {ft::Linear(), ft::Load(0, 0, kF32), N(Op::kRound, kF32, 1)};
  p.outputs = {{{DType::kFloat32, {8}}, 2, false}};
  auto y = Output(DType::kFloat32, {8});
  REQUIRE_OK(RunProgram(p, {&x}, {&y}));
  CHECK(y.values<float>() == std::vector<float>{0, 2, 2, -0.0f, -2, 0, 3, -4});
}

// out_k = cast(x, to_k), stored as dtype store_k.
Program CastsProgram(DType in, int64_t n, const std::vector<std::pair<DType, DType>>& casts) {
  Program p;
  p.domain = {n};
  p.inputs = {{in, {n}}};
  fused::ScalarType t;
  fused::ComputeTypeOf(in, &t);
  p.nodes = {ft::Linear(), ft::Load(0, 0, t)};
  for (auto [to, store] : casts) {
    fused::ScalarType ct;
    fused::ComputeTypeOf(to, &ct);
    p.nodes.push_back(ft::Cast(1, to, ct));
    p.outputs.push_back({{store, {n}}, static_cast<int32_t>(p.nodes.size() - 1), false});
  }
  return p;
}

TEST_CASE("Fused casts follow ONNX Cast: truncation, saturation, NaN, rounding to half") {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> xv = {1.7f, -1.7f, 300.0f, -300.0f, kNaN, 127.5f, -128.9f, 0.0f, inf, -inf};
  auto x = Floats({10}, xv);
  Program p = CastsProgram(DType::kFloat32, 10,
                          {{DType::kInt8, DType::kInt8},
                           {DType::kUInt8, DType::kUInt8},
                           {DType::kInt64, DType::kInt64},
                           {DType::kBool, DType::kBool},
                           {DType::kInt32, DType::kInt32}});
  auto i8 = Output(DType::kInt8, {10}), u8 = Output(DType::kUInt8, {10}), i64 = Output(DType::kInt64, {10});
  auto b = Output(DType::kBool, {10}), i32 = Output(DType::kInt32, {10});
  REQUIRE_OK(RunProgram(p, {&x}, {&i8, &u8, &i64, &b, &i32}));
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  CHECK(i8.values<int8_t>() == std::vector<int8_t>{1, -1, 127, -128, 0, 127, -128, 0, 127, -128});
  CHECK(u8.values<uint8_t>() == std::vector<uint8_t>{1, 0, 255, 0, 0, 127, 0, 0, 255, 0});
  CHECK(i64.values<int64_t>() == std::vector<int64_t>{1, -1, 300, -300, 0, 127, -128, 0, hi, lo});
  CHECK(b.values<uint8_t>() == std::vector<uint8_t>{1, 1, 1, 1, 1, 1, 1, 0, 1, 1});
  CHECK(i32.values<int32_t>() ==
        std::vector<int32_t>{1, -1, 300, -300, 0, 127, -128, 0, INT32_MAX, INT32_MIN});
  // Where the target holds the value, the Cast kernel agrees.
  auto k8 = Output(DType::kInt8, {10});
  auto in_range = Floats({10}, {1.7f, -1.7f, 100.0f, -100.0f, 0.0f, 127.5f, -128.9f, 0.0f, 3.0f, -3.0f});
  REQUIRE_OK(RunKernel("Cast", {}, {&in_range}, {&k8}));
  REQUIRE_OK(RunProgram(p, {&in_range}, {&i8, &u8, &i64, &b, &i32}));
  CHECK(i8.values<int8_t>() == k8.values<int8_t>());

  // float -> float16 -> float: round to nearest even, overflow to inf; and a float16 store.
  const std::vector<float> hv = {1.0f / 3.0f, 65504.0f, 70000.0f, 1e-8f, 2049.0f,
                                 2051.0f,     -0.1f,    kNaN,     1e-6f};
  auto h = Floats({9}, hv);
  Program q = CastsProgram(DType::kFloat32, 9,
                          {{DType::kFloat16, DType::kFloat32},
                           {DType::kFloat32, DType::kFloat16},
                           {DType::kBFloat16, DType::kFloat32}});
  auto hf = Output(DType::kFloat32, {9}), hs = Output(DType::kFloat16, {9}),
       bf = Output(DType::kFloat32, {9});
  REQUIRE_OK(RunProgram(q, {&h}, {&hf, &hs, &bf}));
  const std::vector<float> got = hf.values<float>();
  CHECK(got[0] == HalfToFloat(0x3555));  // 0.33325195
  CHECK(got[1] == 65504.0f);
  CHECK(got[2] == inf);
  CHECK(got[3] == 0.0f);
  CHECK(got[4] == 2048.0f);  // tie -> even
  CHECK(got[5] == 2052.0f);  // tie -> even
  CHECK(std::isnan(got[7]));
  // Against the Cast kernel (float -> float16 -> float, and float -> bfloat16 -> float).
  auto k16 = Output(DType::kFloat16, {9}), kback = Output(DType::kFloat32, {9});
  REQUIRE_OK(RunKernel("Cast", {}, {&h}, {&k16}));
  REQUIRE_OK(RunKernel("Cast", {}, {&k16}, {&kback}));
  CheckFusedClose(got, kback.values<float>(), 0, 0);
  CHECK(hs.values<uint16_t>() == k16.values<uint16_t>());
  auto kb16 = Output(DType::kBFloat16, {9}), kbback = Output(DType::kFloat32, {9});
  REQUIRE_OK(RunKernel("Cast", {}, {&h}, {&kb16}));
  REQUIRE_OK(RunKernel("Cast", {}, {&kb16}, {&kbback}));
  CheckFusedClose(bf.values<float>(), kbback.values<float>(), 0, 0);

  // int -> bool, int -> narrower int wraps, int -> float.
  auto iv = Int64s({5}, {0, 5, -1, 300, -129});
  Program r = CastsProgram(DType::kInt64, 5,
                          {{DType::kBool, DType::kBool},
                           {DType::kInt8, DType::kInt64},
                           {DType::kUInt8, DType::kInt64},
                           {DType::kFloat32, DType::kFloat32}});
  auto rb = Output(DType::kBool, {5}), ri8 = Output(DType::kInt64, {5}), ru8 = Output(DType::kInt64, {5});
  auto rf = Output(DType::kFloat32, {5});
  REQUIRE_OK(RunProgram(r, {&iv}, {&rb, &ri8, &ru8, &rf}));
  CHECK(rb.values<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 1, 1});
  CHECK(ri8.values<int64_t>() == std::vector<int64_t>{0, 5, -1, 44, 127});
  CHECK(ru8.values<int64_t>() == std::vector<int64_t>{0, 5, 255, 44, 127});
  CHECK(rf.values<float>() == std::vector<float>{0, 5, -1, 300, -129});
  auto kb = Output(DType::kBool, {5});
  REQUIRE_OK(RunKernel("Cast", {}, {&iv}, {&kb}));
  CHECK(rb.values<uint8_t>() == kb.values<uint8_t>());
}

TEST_CASE("Fused loads and stores convert every dtype") {
  // Each input is loaded and stored unchanged into an output of a related dtype.
  Program p;
  p.domain = {3};
  p.inputs = {{DType::kFloat16, {3}}, {DType::kBFloat16, {3}}, {DType::kUInt8, {3}},   {DType::kBool, {3}},
              {DType::kInt32, {3}},   {DType::kInt64, {3}},    {DType::kFloat64, {3}}, {DType::kInt16, {3}},
              {DType::kUInt16, {3}},  {DType::kUInt32, {3}},   {DType::kInt8, {3}}};
  p.nodes = {ft::Linear()};
  const DType stores[] = {DType::kFloat32, DType::kFloat16, DType::kInt64,   DType::kInt32,
                          DType::kInt16,   DType::kInt64,   DType::kFloat64, DType::kInt64,
                          DType::kInt64,   DType::kInt64,   DType::kBool};
  for (int k = 0; k < 11; ++k) {
    fused::ScalarType t;
    fused::ComputeTypeOf(p.inputs[k].dtype, &t);
    p.nodes.push_back(ft::Load(k, 0, t));
    p.outputs.push_back({{stores[k], {3}}, k + 1, false});
  }
  TestTensor in[11];
  in[0] = Output(DType::kFloat16, {3});
  const uint16_t halves[] = {FloatToHalf(1.5f), FloatToHalf(-2.25f), FloatToHalf(65504.0f)};
  std::memcpy(in[0].data<uint16_t>(), halves, sizeof(halves));
  in[1] = Output(DType::kBFloat16, {3});
  const uint16_t bfs[] = {FloatToBF16(1.5f), FloatToBF16(-3.0f), FloatToBF16(256.0f)};
  std::memcpy(in[1].data<uint16_t>(), bfs, sizeof(bfs));
  in[2] = Make<uint8_t>({3}, {0, 200, 255});
  in[3] = Bools({3}, {true, false, true});
  in[4] = Int32s({3}, {-5, 7, 2147483647});
  // uint64 has no compute type (signed int64 would get its upper half wrong): int64 here.
  in[5] = Output(DType::kInt64, {3});
  const int64_t i64[] = {0, 1, std::numeric_limits<int64_t>::min()};
  std::memcpy(in[5].data<int64_t>(), i64, sizeof(i64));
  in[6] = Make<double>({3}, {0.1, -1e300, 3.5});
  in[7] = Output(DType::kInt16, {3});
  const int16_t i16[] = {-32768, 5, 32767};
  std::memcpy(in[7].data<int16_t>(), i16, sizeof(i16));
  in[8] = Output(DType::kUInt16, {3});
  const uint16_t u16[] = {0, 65535, 7};
  std::memcpy(in[8].data<uint16_t>(), u16, sizeof(u16));
  in[9] = Output(DType::kUInt32, {3});
  const uint32_t u32[] = {0, 4294967295u, 7};
  std::memcpy(in[9].data<uint32_t>(), u32, sizeof(u32));
  in[10] = Make<int8_t>({3}, {-128, 0, 3});
  std::vector<TestTensor> outs;
  for (DType d : stores) outs.push_back(Output(d, {3}));
  std::vector<const TestTensor*> ins, out_ptrs;
  for (auto& t : in) ins.push_back(&t);
  for (auto& t : outs) out_ptrs.push_back(&t);
  REQUIRE_OK(RunProgram(p, ins, out_ptrs));
  CHECK(outs[0].values<float>() == std::vector<float>{1.5f, -2.25f, 65504.0f});
  CHECK(outs[1].values<uint16_t>() ==
        std::vector<uint16_t>{FloatToHalf(1.5f), FloatToHalf(-3.0f), FloatToHalf(256.0f)});
  CHECK(outs[2].values<int64_t>() == std::vector<int64_t>{0, 200, 255});
  CHECK(outs[3].values<int32_t>() == std::vector<int32_t>{1, 0, 1});
  CHECK(outs[4].values<int16_t>() == std::vector<int16_t>{-5, 7, -1});  // narrowed on store: wraps
  CHECK(outs[5].values<int64_t>() == std::vector<int64_t>{0, 1, std::numeric_limits<int64_t>::min()});
  CHECK(outs[6].values<double>() == std::vector<double>{0.1, -1e300, 3.5});
  CHECK(outs[7].values<int64_t>() == std::vector<int64_t>{-32768, 5, 32767});
  CHECK(outs[8].values<int64_t>() == std::vector<int64_t>{0, 65535, 7});
  CHECK(outs[9].values<int64_t>() == std::vector<int64_t>{0, 4294967295LL, 7});
  CHECK(outs[10].values<uint8_t>() == std::vector<uint8_t>{1, 0, 1});
}

// ---- Sizes and argument checks -------------------------------------------------------------

// out[i, j] = x[i, j] + i * s0 over a [s0, 4] domain.
Program SymbolicSizeProgram() {
  Program p;
  p.domain = {-1, 4};
  p.num_sizes = 1;
  p.inputs = {{DType::kFloat32, {-1, 4}}};
  p.nodes = {ft::Linear(),
             ft::Load(0, 0, kF32),
             ft::Coord(0),
             ft::Size(0),
             N(Op::kMul, kI64, 2, 3),
             ft::Cast(4, DType::kFloat32, kF32),
             N(Op::kAdd, kF32, 1, 5)};
  p.outputs = {{{DType::kFloat32, {-1, 4}}, 6, false}};
  return p;
}

TEST_CASE("Fused symbolic sizes come from the size arguments") {
  std::vector<float> xv(12);
  for (int i = 0; i < 12; ++i) xv[i] = static_cast<float>(i);
  auto x = Floats({3, 4}, xv);
  auto y = Output(DType::kFloat32, {3, 4});
  REQUIRE_OK(RunProgram(SymbolicSizeProgram(), {&x}, {&y}, {3}));
  CHECK(y.values<float>() == std::vector<float>{0, 1, 2, 3, 7, 8, 9, 10, 14, 15, 16, 17});

  // The same program at s0 = 1000: several blocks.
  auto bx = Floats({1000, 4}, RandomFloats(4000, 12, -3.0f, 3.0f));
  auto by = Output(DType::kFloat32, {1000, 4});
  REQUIRE_OK(RunProgram(SymbolicSizeProgram(), {&bx}, {&by}, {1000}));
  CHECK(by.values<float>()[999 * 4 + 3] == bx.values<float>()[999 * 4 + 3] + 999.0f * 1000.0f);

  Status st = RunProgram(SymbolicSizeProgram(), {&x}, {&y}, {2});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "fused program: input 0 has 12 elements, expected 8 (shape [s0, 4] with s0 = 2)");
  st = RunProgram(SymbolicSizeProgram(), {&x}, {&y}, {-1});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  // A size argument may be negative (a symbolic pad amount); a dim that reads one may not.
  CHECK(st.message() == "fused program: input 0: shape [s0, 4] with s0 = -1 is negative or overflows int64");
  st = RunProgram(SymbolicSizeProgram(), {&x}, {&y}, {});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "fused program: 0 size arguments given, expected 1");
  st = RunProgram(SymbolicSizeProgram(), {&x}, {&y}, {1LL << 62});
  CHECK(st.code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Fused argument checks: dtypes, counts, workspace") {
  auto x = Floats({4, 8}, RandomFloats(32, 13, -3.0f, 3.0f));
  auto y = Floats({8}, RandomFloats(8, 14, -3.0f, 3.0f));
  auto out = Output(DType::kFloat32, {4, 8});
  auto wrong_dtype = Output(DType::kFloat64, {4, 8});
  Status st = RunProgram(ft::AddRelu(), {&x, &y}, {&wrong_dtype});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "fused program: output 0 has dtype float64, expected float32");
  auto small = Output(DType::kFloat32, {4, 7});
  st = RunProgram(ft::AddRelu(), {&x, &y}, {&small});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("output 0 has 28 elements, expected 32") != std::string::npos);
  auto yi = Int64s({8}, std::vector<int64_t>(8, 1));
  st = RunProgram(ft::AddRelu(), {&x, &yi}, {&out});
  CHECK(st.message() == "fused program: input 1 has dtype int64, expected float32");
  st = RunProgram(ft::AddRelu(), {&x}, {&out});
  CHECK(st.message() == "fused program: 1 inputs given, expected 2");

  const Program p = ft::AddRelu();
  const TensorRef in[] = {x.ref(), y.ref()}, o[] = {out.ref()};
  std::vector<uint8_t> ws(FusedWorkspaceBytes(p));
  st = RunFused(p, in, o, {}, ws.data(), ws.size() - 1);
  CHECK(st.code() == StatusCode::kInternal);
  CHECK(RunFused(p, in, o, {}, ws.data(), ws.size()).ok());
  // Any alignment of the workspace pointer works.
  std::vector<uint8_t> ws2(FusedWorkspaceBytes(p) + 8);
  CHECK(RunFused(p, in, o, {}, ws2.data() + 3, ws2.size() - 8).ok());
  CHECK(FusedWorkspaceBytes(p) == FusedWorkspaceBytes(ft::AddRelu(1000, 1000)));  // independent of sizes
}

}  // namespace
}  // namespace kiln::cpu::testing
