// Hand-built fused programs for the codegen tests: one per kernel shape the emitter has
// (broadcast, vectorised, two-pass softmax, per-row sums over leading/middle axes, gather
// with an index check, casts, symbolic sizes, and every op), built node by node without
// the fusion stage's builder so the tests depend only on program.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "runtime/fused/program.h"

namespace kiln::testing {

class ProgramMaker {
 public:
  using Op = fused::Op;
  using T = fused::ScalarType;

  fused::Program p;

  int32_t Node(Op op, T type, int32_t a = -1, int32_t b = -1, int32_t c = -1, int64_t i = 0, double f = 0.0) {
    p.nodes.push_back({op, type, a, b, c, i, f});
    return static_cast<int32_t>(p.nodes.size()) - 1;
  }
  T TypeOf(int32_t n) const { return p.nodes[n].type; }
  int32_t I(int64_t v) { return Node(Op::kConst, T::kI64, -1, -1, -1, v); }
  int32_t F(double v) { return Node(Op::kConst, T::kF32, -1, -1, -1, 0, static_cast<float>(v)); }
  int32_t D(double v) { return Node(Op::kConst, T::kF64, -1, -1, -1, 0, v); }
  int32_t Coord(int axis) { return Node(Op::kCoord, T::kI64, -1, -1, -1, axis); }
  int32_t Linear() { return Node(Op::kLinear, T::kI64); }
  int32_t Size(int k) { return Node(Op::kSize, T::kI64, -1, -1, -1, k); }
  int32_t Input(DType dtype, std::vector<int64_t> dims) {
    p.inputs.push_back({dtype, std::move(dims)});
    return static_cast<int32_t>(p.inputs.size()) - 1;
  }
  int32_t Load(int input, int32_t index) {
    T t = T::kI64;
    fused::ComputeTypeOf(p.inputs[input].dtype, &t);
    return Node(Op::kLoad, t, index, -1, -1, input);
  }
  int32_t Un(Op op, int32_t x) {
    const T t = (op == Op::kIsNaN) ? T::kI64 : TypeOf(x);
    return Node(op, t, x);
  }
  int32_t Bin(Op op, int32_t x, int32_t y) {
    const bool cmp = op == Op::kEq || op == Op::kLt || op == Op::kLe;
    return Node(op, cmp ? T::kI64 : TypeOf(x), x, y);
  }
  int32_t Select(int32_t c, int32_t x, int32_t y) { return Node(Op::kSelect, TypeOf(x), c, x, y); }
  int32_t Cast(int32_t x, DType to) {
    T t = T::kI64;
    fused::ComputeTypeOf(to, &t);
    return Node(Op::kCast, t, x, -1, -1, static_cast<int64_t>(to));
  }
  int32_t Check(int32_t x, int32_t bound, std::string what) {
    p.checks.push_back(std::move(what));
    return Node(Op::kCheckIndex, T::kI64, x, bound, -1, static_cast<int64_t>(p.checks.size()) - 1);
  }
  int32_t Reduce(fused::ReduceOp op, int32_t value) {
    p.reductions.push_back({op, value});
    return Node(Op::kAcc, TypeOf(value), -1, -1, -1, static_cast<int64_t>(p.reductions.size()) - 1);
  }
  void Out(DType dtype, std::vector<int64_t> dims, int32_t value, bool per_row = false) {
    p.outputs.push_back({{dtype, std::move(dims)}, value, per_row});
  }
};

// out[i, j] = max(a[i, j] + b[j], 0) over [3, 5]: a broadcast, 15 elements (no vector path).
inline fused::Program BroadcastProgram() {
  ProgramMaker m;
  m.p.domain = {3, 5};
  const int a = m.Input(DType::kFloat32, {3, 5}), b = m.Input(DType::kFloat32, {5});
  const int32_t sum = m.Bin(fused::Op::kAdd, m.Load(a, m.Linear()), m.Load(b, m.Coord(1)));
  m.Out(DType::kFloat32, {3, 5}, m.Bin(fused::Op::kMax, sum, m.F(0)));
  return m.p;
}

// Over [2, 64]: out0 = a * 0.5 + float(k) + c[j] (float32), out1 = k * 3 - i (int32), where
// a (float32) and k (int32) are read at the linear index (vectorisable) and c at j (scalar).
inline fused::Program VectorProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {2, 64};
  const int a = m.Input(DType::kFloat32, {2, 64}), k = m.Input(DType::kInt32, {2, 64});
  const int c = m.Input(DType::kFloat32, {64});
  const int32_t lin = m.Linear();
  const int32_t kv = m.Load(k, lin);
  int32_t x = m.Bin(Op::kMul, m.Load(a, lin), m.F(0.5));
  x = m.Bin(Op::kAdd, x, m.Cast(kv, DType::kFloat32));
  x = m.Bin(Op::kAdd, x, m.Load(c, m.Coord(1)));
  m.Out(DType::kFloat32, {2, 64}, x);
  m.Out(DType::kInt32, {2, 64}, m.Bin(Op::kSub, m.Bin(Op::kMul, kv, m.I(3)), m.Coord(0)));
  return m.p;
}

// Softmax over the last axis of [rows, cols] (encoded dims: constants or size arguments),
// plus the per-row log-sum-exp: acc0 = max x, acc1 = sum exp(x - acc0), out0 = exp(x -
// acc0) / acc1, out1[row] = log(acc1) + acc0. x and both outputs are stored as `dtype`
// (float16 / bfloat16: loaded into and computed in float, as the precision stage's kernels).
inline fused::Program SoftmaxProgram(int64_t rows, int64_t cols, int32_t num_sizes,
                                     DType dtype = DType::kFloat32) {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {rows, cols};
  m.p.reduce_axes = 2;
  m.p.num_sizes = num_sizes;
  const int in = m.Input(dtype, {rows, cols});
  const int32_t x = m.Load(in, m.Linear());
  const int32_t mx = m.Reduce(fused::ReduceOp::kMax, x);
  const int32_t e = m.Un(Op::kExp, m.Bin(Op::kSub, x, mx));
  const int32_t sum = m.Reduce(fused::ReduceOp::kSum, e);
  m.Out(dtype, {rows, cols}, m.Bin(Op::kDiv, e, sum));
  m.Out(dtype, {rows}, m.Bin(Op::kAdd, m.Un(Op::kLog, sum), mx), /*per_row=*/true);
  return m.p;
}

// Reductions over the leading axis of [6, 4]: per column, the float sum of a, the int64 sum
// and max of k (int64), and a full output a - sum / 6.
inline fused::Program LeadingReduceProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {6, 4};
  m.p.reduce_axes = 1;
  const int a = m.Input(DType::kFloat32, {6, 4}), k = m.Input(DType::kInt64, {6, 4});
  const int32_t lin = m.Linear();
  const int32_t av = m.Load(a, lin), kv = m.Load(k, lin);
  const int32_t sum = m.Reduce(fused::ReduceOp::kSum, av);
  const int32_t isum = m.Reduce(fused::ReduceOp::kSum, kv);
  const int32_t imax = m.Reduce(fused::ReduceOp::kMax, kv);
  m.Out(DType::kFloat32, {4}, sum, true);
  m.Out(DType::kInt64, {4}, isum, true);
  m.Out(DType::kInt64, {4}, imax, true);
  m.Out(DType::kFloat32, {6, 4}, m.Bin(Op::kSub, av, m.Bin(Op::kMul, sum, m.F(1.0 / 6.0))));
  return m.p;
}

// Reductions over the middle axis of [2, 5, 3] (neither leading nor trailing): per (i, k),
// mean and product and min over j, and the full output x - mean, also reading the coordinates.
inline fused::Program MiddleReduceProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {2, 5, 3};
  m.p.reduce_axes = 2;
  const int a = m.Input(DType::kFloat32, {2, 5, 3});
  const int32_t x = m.Load(a, m.Linear());
  const int32_t sum = m.Reduce(fused::ReduceOp::kSum, x);
  const int32_t prod = m.Reduce(fused::ReduceOp::kProd, x);
  const int32_t mn = m.Reduce(fused::ReduceOp::kMin, x);
  const int32_t mean = m.Bin(Op::kMul, sum, m.F(0.2));
  m.Out(DType::kFloat32, {2, 3}, mean, true);
  m.Out(DType::kFloat32, {2, 3}, prod, true);
  m.Out(DType::kFloat32, {2, 3}, mn, true);
  // + 100 * coord(1) + 10 * coord(2): checks the coordinates inside the column loop.
  const int32_t co = m.Bin(Op::kAdd, m.Bin(Op::kMul, m.Coord(1), m.I(100)), m.Bin(Op::kMul, m.Coord(2), m.I(10)));
  m.Out(DType::kFloat32, {2, 5, 3}, m.Bin(Op::kAdd, m.Bin(Op::kSub, x, mean), m.Cast(co, DType::kFloat32)));
  return m.p;
}

// Gather(data [5, 3], indices [4], axis 0) -> [4, 3], negative indices counted from the end,
// each index checked (check 0).
inline fused::Program GatherProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {4, 3};
  const int data = m.Input(DType::kFloat32, {5, 3}), idx = m.Input(DType::kInt64, {4});
  const int32_t raw = m.Load(idx, m.Coord(0));
  const int32_t five = m.I(5);
  const int32_t wrapped = m.Select(m.Bin(Op::kLt, raw, m.I(0)), m.Bin(Op::kAdd, raw, five), raw);
  const int32_t row = m.Check(wrapped, five, "Gather 'g' input 'indices'");
  const int32_t at = m.Bin(Op::kAdd, m.Bin(Op::kMul, row, m.I(3)), m.Coord(1));
  m.Out(DType::kFloat32, {4, 3}, m.Load(data, at));
  return m.p;
}

// Casts over 16 elements: inputs h (float16), x (float32), b (bfloat16), k (int64).
inline fused::Program CastProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {16};
  const int h = m.Input(DType::kFloat16, {16}), xi = m.Input(DType::kFloat32, {16});
  const int b = m.Input(DType::kBFloat16, {16}), k = m.Input(DType::kInt64, {16});
  const int32_t lin = m.Linear();
  const int32_t x = m.Load(xi, lin), kv = m.Load(k, lin);
  m.Out(DType::kFloat32, {16}, m.Bin(Op::kMul, m.Load(h, lin), m.F(2)));                // 0: float16 load
  m.Out(DType::kFloat16, {16}, m.Bin(Op::kMul, x, m.F(3)));                               // 1: float16 store
  m.Out(DType::kInt8, {16}, m.Cast(m.Bin(Op::kMul, x, m.F(100)), DType::kInt8));         // 2: saturating
  m.Out(DType::kUInt8, {16}, m.Cast(m.Bin(Op::kMul, x, m.F(100)), DType::kUInt8));       // 3
  m.Out(DType::kInt16, {16}, m.Cast(kv, DType::kInt16));                                  // 4: wraps
  m.Out(DType::kBool, {16}, m.Cast(x, DType::kBool));                                     // 5
  m.Out(DType::kBFloat16, {16}, m.Bin(Op::kAdd, m.Load(b, lin), m.F(1)));                 // 6: bfloat16
  m.Out(DType::kInt32, {16}, m.Cast(m.Un(Op::kRound, m.Bin(Op::kMul, x, m.F(10))), DType::kInt32));  // 7
  m.Out(DType::kFloat32, {16}, m.Cast(x, DType::kFloat16));                               // 8: rounding only
  m.Out(DType::kInt64, {16}, m.Cast(m.Bin(Op::kMul, x, m.F(1e19)), DType::kInt64));      // 9: saturating
  m.Out(DType::kFloat64, {16}, m.Bin(Op::kAdd, m.Cast(kv, DType::kFloat64), m.D(0.25)));  // 10
  m.Out(DType::kUInt32, {16}, m.Cast(m.Bin(Op::kMul, x, m.F(1e9)), DType::kUInt32));     // 11
  return m.p;
}

// Over [s0, 8]: out = sigmoid(a[i, j]) * c[j] + float(i) + float(s0), sizes symbolic.
inline fused::Program SymbolicProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {-1, 8};
  m.p.num_sizes = 1;
  const int a = m.Input(DType::kFloat32, {-1, 8}), c = m.Input(DType::kFloat32, {8});
  int32_t v = m.Bin(Op::kMul, m.Un(Op::kSigmoid, m.Load(a, m.Linear())), m.Load(c, m.Coord(1)));
  v = m.Bin(Op::kAdd, v, m.Cast(m.Bin(Op::kAdd, m.Coord(0), m.Size(0)), DType::kFloat32));
  m.Out(DType::kFloat32, {-1, 8}, v);
  return m.p;
}

// Every unary, binary and ternary op once, over [24], on float32 x, y and int64 k, j.
inline fused::Program AllOpsProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {24};
  const int xi = m.Input(DType::kFloat32, {24}), yi = m.Input(DType::kFloat32, {24});
  const int ki = m.Input(DType::kInt64, {24}), ji = m.Input(DType::kInt64, {24});
  const int32_t lin = m.Linear();
  const int32_t x = m.Load(xi, lin), y = m.Load(yi, lin), k = m.Load(ki, lin), j = m.Load(ji, lin);
  const int32_t ax = m.Un(Op::kAbs, x);
  const int32_t unit = m.Bin(Op::kMul, m.Un(Op::kTanh, x), m.F(0.99));  // in (-1, 1)
  for (Op op : {Op::kNeg, Op::kAbs, Op::kSign, Op::kFloor, Op::kCeil, Op::kRound, Op::kExp, Op::kErf, Op::kTanh,
                Op::kSigmoid, Op::kSin, Op::kCos, Op::kTan, Op::kAtan, Op::kSinh, Op::kCosh, Op::kReciprocal}) {
    m.Out(DType::kFloat32, {24}, m.Un(op, x));
  }
  m.Out(DType::kFloat32, {24}, m.Un(Op::kSqrt, ax));
  m.Out(DType::kFloat32, {24}, m.Un(Op::kLog, m.Bin(Op::kAdd, ax, m.F(0.5))));
  m.Out(DType::kFloat32, {24}, m.Un(Op::kAsin, unit));
  m.Out(DType::kFloat32, {24}, m.Un(Op::kAcos, unit));
  m.Out(DType::kInt64, {24}, m.Un(Op::kIsNaN, x));
  for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kMod, Op::kFmod, Op::kMin, Op::kMax}) {
    m.Out(DType::kFloat32, {24}, m.Bin(op, x, y));
  }
  m.Out(DType::kFloat32, {24}, m.Bin(Op::kPow, m.Bin(Op::kAdd, ax, m.F(0.25)), y));
  for (Op op : {Op::kEq, Op::kLt, Op::kLe}) m.Out(DType::kBool, {24}, m.Bin(op, x, y));
  for (Op op : {Op::kNeg, Op::kAbs, Op::kSign}) m.Out(DType::kInt64, {24}, m.Un(op, k));
  for (Op op : {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kFloorDiv, Op::kMod, Op::kFmod, Op::kMin, Op::kMax,
                Op::kEq, Op::kLt, Op::kLe}) {
    m.Out(DType::kInt64, {24}, m.Bin(op, k, j));
  }
  const int32_t kb = m.Bin(Op::kLt, k, m.I(0)), jb = m.Bin(Op::kLt, j, m.I(0));
  for (Op op : {Op::kAnd, Op::kOr, Op::kXor}) m.Out(DType::kBool, {24}, m.Bin(op, kb, jb));
  m.Out(DType::kBool, {24}, m.Un(Op::kNot, kb));
  m.Out(DType::kFloat32, {24}, m.Select(kb, x, y));
  m.Out(DType::kFloat64, {24}, m.Un(Op::kExp, m.Cast(x, DType::kFloat64)));
  m.Out(DType::kFloat64, {24}, m.Bin(Op::kMax, m.Cast(x, DType::kFloat64), m.Cast(y, DType::kFloat64)));
  return m.p;
}

// Index arithmetic of static shapes, as fusion emits it: over [2, 6, 4, 4], channels 0..2
// are a nearest 2x upsample of a [2, 3, 2, 2] and channels 3..5 read b [2, 4, 4, 3] (NHWC)
// transposed (out0, float32); out1 (int32) unravels the linear index by floor division and
// modulo ((lin // 16) % 6 * 100 + (lin % 16) // 4 * 10 + lin % 4); out2 (int64) is
// lin / 7 + fmod(lin, 5) (truncating division and C modulo).
inline fused::Program IndexMathProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {2, 6, 4, 4};
  const int a = m.Input(DType::kFloat32, {2, 3, 2, 2}), b = m.Input(DType::kFloat32, {2, 4, 4, 3});
  const int32_t n = m.Coord(0), c = m.Coord(1), h = m.Coord(2), w = m.Coord(3);
  const int32_t two = m.I(2), three = m.I(3), four = m.I(4);
  auto fma = [&](int32_t x, int32_t k, int32_t y) { return m.Bin(Op::kAdd, m.Bin(Op::kMul, x, k), y); };
  const int32_t ca = m.Bin(Op::kMin, c, two);
  int32_t ia = fma(fma(fma(n, three, ca), two, m.Bin(Op::kFloorDiv, h, two)), two, m.Bin(Op::kFloorDiv, w, two));
  const int32_t cb = m.Bin(Op::kMax, m.Bin(Op::kSub, c, three), m.I(0));
  const int32_t ib = fma(fma(fma(n, four, h), four, w), three, cb);
  m.Out(DType::kFloat32, {2, 6, 4, 4}, m.Select(m.Bin(Op::kLt, c, three), m.Load(a, ia), m.Load(b, ib)));
  const int32_t lin = m.Linear(), sixteen = m.I(16);
  const int32_t q = m.Bin(Op::kMod, m.Bin(Op::kFloorDiv, lin, sixteen), m.I(6));
  const int32_t r = m.Bin(Op::kMod, lin, sixteen);
  int32_t v = fma(q, m.I(100), m.Bin(Op::kMul, m.Bin(Op::kFloorDiv, r, four), m.I(10)));
  v = m.Bin(Op::kAdd, v, m.Bin(Op::kMod, lin, four));
  m.Out(DType::kInt32, {2, 6, 4, 4}, m.Cast(v, DType::kInt32));
  m.Out(DType::kInt64, {2, 6, 4, 4}, m.Bin(Op::kAdd, m.Bin(Op::kDiv, lin, m.I(7)), m.Bin(Op::kFmod, lin, m.I(5))));
  return m.p;
}

// Gather with a loaded int64 index used directly: over [4, 3], out0 = data[(idx[i] mod 5),
// j] (Python modulo, then checked: check 0) from data [5, 3]; out1 (int64) = idx[i] // 2 *
// 10 + fmod(idx[i], 3); out2 (int64) = idx[i] / (j + 1) (truncating).
inline fused::Program LoadedIndexProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {4, 3};
  const int data = m.Input(DType::kFloat32, {5, 3}), idx = m.Input(DType::kInt64, {4});
  const int32_t raw = m.Load(idx, m.Coord(0));
  const int32_t five = m.I(5);
  const int32_t row = m.Check(m.Bin(Op::kMod, raw, five), five, "Gather 'g' input 'indices'");
  m.Out(DType::kFloat32, {4, 3}, m.Load(data, m.Bin(Op::kAdd, m.Bin(Op::kMul, row, m.I(3)), m.Coord(1))));
  const int32_t half = m.Bin(Op::kFloorDiv, raw, m.I(2));
  m.Out(DType::kInt64, {4, 3},
        m.Bin(Op::kAdd, m.Bin(Op::kMul, half, m.I(10)), m.Bin(Op::kFmod, raw, m.I(3))));
  m.Out(DType::kInt64, {4, 3}, m.Bin(Op::kDiv, raw, m.Bin(Op::kAdd, m.Coord(1), m.I(1))));
  return m.p;
}

// Index values that go negative, over [3, 8] (i, j): d = j - 5 in [-5, 2]. Each int64 output
// is one way of dividing: d // 3, d mod 3, d / -2, fmod(d, 3) (small signed values, constant
// divisors), d // (j - 3) (a divisor that may be 0 or -1), k mod d and k // 4 (k: int64
// data), and -d * 7 + sign(d) + |d| * 100 and max(min(d, 1), -2) + i.
inline fused::Program SignedIndexProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {3, 8};
  const int ki = m.Input(DType::kInt64, {3, 8});
  const int32_t i = m.Coord(0), j = m.Coord(1), k = m.Load(ki, m.Linear());
  const int32_t d = m.Bin(Op::kSub, j, m.I(5)), three = m.I(3);
  const std::vector<int64_t> dims = {3, 8};
  m.Out(DType::kInt64, dims, m.Bin(Op::kFloorDiv, d, three));
  m.Out(DType::kInt64, dims, m.Bin(Op::kMod, d, three));
  m.Out(DType::kInt64, dims, m.Bin(Op::kDiv, d, m.I(-2)));
  m.Out(DType::kInt64, dims, m.Bin(Op::kFmod, d, three));
  m.Out(DType::kInt64, dims, m.Bin(Op::kFloorDiv, d, m.Bin(Op::kSub, j, three)));
  m.Out(DType::kInt64, dims, m.Bin(Op::kMod, k, d));
  m.Out(DType::kInt64, dims, m.Bin(Op::kFloorDiv, k, m.I(4)));
  int32_t v = m.Bin(Op::kMul, m.Un(Op::kNeg, d), m.I(7));
  v = m.Bin(Op::kAdd, m.Bin(Op::kAdd, v, m.Un(Op::kSign, d)), m.Bin(Op::kMul, m.Un(Op::kAbs, d), m.I(100)));
  m.Out(DType::kInt64, dims, v);
  m.Out(DType::kInt64, dims, m.Bin(Op::kAdd, m.Bin(Op::kMax, m.Bin(Op::kMin, d, m.I(1)), m.I(-2)), i));
  return m.p;
}

// Division by size arguments over [s0, 6]: out0 = (j * 5) // s0 (s0 is an extent of the
// domain: >= 1 wherever the body runs), out1 = (i + 3) mod s1 and out2 = (i * 6 + j) // s1
// (s1 is read by no dim: any value, 0 included).
inline fused::Program SizeDivisorProgram() {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {-1, 6};
  m.p.num_sizes = 2;
  const int32_t i = m.Coord(0), j = m.Coord(1);
  m.Out(DType::kInt64, {-1, 6}, m.Bin(Op::kFloorDiv, m.Bin(Op::kMul, j, m.I(5)), m.Size(0)));
  m.Out(DType::kInt64, {-1, 6}, m.Bin(Op::kMod, m.Bin(Op::kAdd, i, m.I(3)), m.Size(1)));
  m.Out(DType::kInt64, {-1, 6}, m.Bin(Op::kFloorDiv, m.Linear(), m.Size(1)));
  return m.p;
}

// Index arithmetic in a row reduction over [s0, cols] (reduced axis 1; cols constant or
// size 1): acc0 = sum over j of (j * 3) mod 5, acc1 = max over j of k[i, j] // 3 (k int32);
// per-row out0 = acc0 * 100 + i // s1 and out1 = acc1 (int64); the full out2
// (int64) = lin mod 7 + i // 2. With cols = -2, s1 is the reduced extent, which may be 0:
// the per-row outputs are still evaluated then, so s1 cannot be assumed >= 1.
inline fused::Program RowIndexProgram(int64_t cols) {
  using fused::Op;
  ProgramMaker m;
  m.p.domain = {-1, cols};
  m.p.reduce_axes = 2;
  m.p.num_sizes = 2;
  const int k = m.Input(DType::kInt32, {-1, cols});
  const int32_t i = m.Coord(0), j = m.Coord(1), lin = m.Linear();
  const int32_t acc0 = m.Reduce(fused::ReduceOp::kSum, m.Bin(Op::kMod, m.Bin(Op::kMul, j, m.I(3)), m.I(5)));
  const int32_t acc1 = m.Reduce(fused::ReduceOp::kMax, m.Bin(Op::kFloorDiv, m.Load(k, lin), m.I(3)));
  const int32_t per = m.Bin(Op::kFloorDiv, i, m.Size(1));
  m.Out(DType::kInt64, {-1}, m.Bin(Op::kAdd, m.Bin(Op::kMul, acc0, m.I(100)), per), true);
  m.Out(DType::kInt64, {-1}, acc1, true);
  m.Out(DType::kInt64, {-1, cols}, m.Bin(Op::kAdd, m.Bin(Op::kMod, lin, m.I(7)), m.Bin(Op::kFloorDiv, i, m.I(2))));
  return m.p;
}

// A random integer program over [3, 5] (or [s0, 5] when `symbolic`; size 1 is read by no
// dim): leaves are the coordinates, the linear index, both sizes, constants (small ones
// and int32/int64 extremes) and loads of int8, uint8, int32 and int64 inputs at the linear
// index; then `count` random integer ops, casts and selects over earlier nodes (recent ones
// favoured, so chains form). Conditions (And/Or/Xor/Not operands, Select's first) are
// comparison results. Every integer node is also an int64 output.
inline fused::Program RandomIntProgram(uint32_t seed, bool symbolic, int count = 28) {
  using fused::Op;
  std::mt19937 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(std::uniform_int_distribution<size_t>(0, n - 1)(rng)); };
  ProgramMaker m;
  const int64_t rows = symbolic ? -1 : 3;
  const std::vector<int64_t> dims = {rows, 5};
  m.p.domain = dims;
  m.p.num_sizes = 2;
  std::vector<int32_t> pool = {m.Coord(0), m.Coord(1), m.Linear(), m.Size(0), m.Size(1)};
  for (int64_t c : {0LL, 1LL, 2LL, 3LL, -1LL, -2LL, 5LL, 7LL, -7LL, 100LL, 2147483647LL, 2147483648LL,
                    -2147483648LL, 1LL << 40}) {
    pool.push_back(m.I(c));
  }
  pool.push_back(m.I(INT64_MAX));
  pool.push_back(m.I(INT64_MIN));
  for (DType dt : {DType::kInt8, DType::kUInt8, DType::kInt32, DType::kInt64}) {
    pool.push_back(m.Load(m.Input(dt, dims), m.Linear()));
  }
  std::vector<int32_t> flags;
  auto operand = [&]() {
    if (pick(2) == 0) return pool[pool.size() - 1 - pick(std::min<size_t>(6, pool.size()))];
    return pool[pick(pool.size())];
  };
  auto flag = [&]() {
    if (flags.empty() || pick(3) == 0) {
      const Op cmp[] = {Op::kEq, Op::kLt, Op::kLe};
      flags.push_back(m.Bin(cmp[pick(3)], operand(), operand()));
      pool.push_back(flags.back());
    }
    return flags[pick(flags.size())];
  };
  const Op binary[] = {Op::kAdd, Op::kSub, Op::kMul, Op::kDiv, Op::kFloorDiv, Op::kMod, Op::kFmod, Op::kMin, Op::kMax};
  const Op unary[] = {Op::kNeg, Op::kAbs, Op::kSign};
  const DType casts[] = {DType::kInt8, DType::kUInt8, DType::kInt16, DType::kInt32, DType::kUInt32, DType::kBool,
                         DType::kInt64};
  for (int step = 0; step < count; ++step) {
    int32_t node = -1;
    switch (pick(10)) {
      case 0: node = m.Un(unary[pick(3)], operand()); break;
      case 1: node = m.Cast(operand(), casts[pick(7)]); break;
      case 2: node = m.Select(flag(), operand(), operand()); break;
      case 3: {
        const Op logic[] = {Op::kAnd, Op::kOr, Op::kXor, Op::kNot};
        const Op op = logic[pick(4)];
        node = op == Op::kNot ? m.Un(op, flag()) : m.Bin(op, flag(), flag());
        flags.push_back(node);
        break;
      }
      default: node = m.Bin(binary[pick(9)], operand(), operand()); break;
    }
    pool.push_back(node);
  }
  for (size_t n = 0; n < m.p.nodes.size(); ++n) {
    if (m.p.nodes[n].type == fused::ScalarType::kI64) m.Out(DType::kInt64, dims, static_cast<int32_t>(n));
  }
  return m.p;
}

}  // namespace kiln::testing
