// Hand-built fused programs shared by the program, interpreter and codegen tests.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/fused/program.h"

namespace kiln::fused::testing {

inline constexpr ScalarType kI64 = ScalarType::kI64;
inline constexpr ScalarType kF32 = ScalarType::kF32;
inline constexpr ScalarType kF64 = ScalarType::kF64;

// One node: N(Op::kAdd, kF32, 1, 3) is "add f32 %1, %3".
inline Node N(Op op, ScalarType type, int32_t a = -1, int32_t b = -1, int32_t c = -1, int64_t i = 0,
              double f = 0.0) {
  Node n;
  n.op = op;
  n.type = type;
  n.a = a;
  n.b = b;
  n.c = c;
  n.i = i;
  n.f = f;
  return n;
}
inline Node ConstI(int64_t v) { return N(Op::kConst, kI64, -1, -1, -1, v); }
inline Node ConstF(double v, ScalarType t = kF32) { return N(Op::kConst, t, -1, -1, -1, 0, v); }
inline Node Coord(int axis) { return N(Op::kCoord, kI64, -1, -1, -1, axis); }
inline Node Linear() { return N(Op::kLinear, kI64); }
inline Node Size(int k) { return N(Op::kSize, kI64, -1, -1, -1, k); }
inline Node Acc(int k, ScalarType t) { return N(Op::kAcc, t, -1, -1, -1, k); }
inline Node Load(int input, int32_t index, ScalarType t) { return N(Op::kLoad, t, index, -1, -1, input); }
inline Node Cast(int32_t x, DType to, ScalarType t) {
  return N(Op::kCast, t, x, -1, -1, static_cast<int64_t>(to));
}

// out[i, j] = max(x[i, j] + y[j], 0) over a [rows, cols] domain (program.h's example).
inline Program AddRelu(int64_t rows = 4, int64_t cols = 8) {
  Program p;
  p.domain = {rows, cols};
  p.inputs = {{DType::kFloat32, {rows, cols}}, {DType::kFloat32, {cols}}};
  p.nodes = {Linear(),  Load(0, 0, kF32),       Coord(1), Load(1, 2, kF32), N(Op::kAdd, kF32, 1, 3),
             ConstF(0), N(Op::kMax, kF32, 4, 5)};
  p.outputs = {{{DType::kFloat32, {rows, cols}}, 6, false}};
  return p;
}

// Softmax over the last axis of a [rows, cols] tensor: r0 = max x, r1 = sum exp(x - r0),
// out = exp(x - r0) / r1.
inline Program SoftmaxLastAxis(int64_t rows, int64_t cols) {
  Program p;
  p.domain = {rows, cols};
  p.reduce_axes = 0b10;
  p.inputs = {{DType::kFloat32, {rows, cols}}};
  p.nodes = {
      Linear(),     Load(0, 0, kF32),       Acc(0, kF32), N(Op::kSub, kF32, 1, 2), N(Op::kExp, kF32, 3),
      Acc(1, kF32), N(Op::kDiv, kF32, 4, 5)};
  p.reductions = {{ReduceOp::kMax, 1}, {ReduceOp::kSum, 4}};
  p.outputs = {{{DType::kFloat32, {rows, cols}}, 6, false}};
  return p;
}

}  // namespace kiln::fused::testing
