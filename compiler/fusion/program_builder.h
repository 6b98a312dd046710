// Builds a fused::Program node by node. Nodes are hash-consed (an identical node is
// returned, not added twice) and folded where the result is known: constant arithmetic,
// x+0, x*1, x*0 for kI64, floordiv/mod by 1, min/max/select of constants, casts to the
// same dtype class. Index arithmetic over static shapes therefore collapses to constants
// and coordinates, which keeps the emitted CUDA small and lets the CUDA compiler see
// constant divisors.
//
//   ProgramBuilder b(&program);
//   int32_t i = b.Ravel({b.Coord(0), b.Coord(1)}, {Sym(4), Sym::Var("N")});
//   int32_t x = b.Load(b.AddInput(DType::kFloat, shape), i);
//
// Symbolic dims become size arguments: Dim(N) registers N once and returns a kSize node;
// sizes() lists them in argument order, for the instruction's `sizes`.
// Thread-compatible; the builder does not own the program.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "compiler/ir/sym.h"
#include "runtime/fused/program.h"

namespace kiln::fusion {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(fused::Program* program) : p_(program) {}

  // Any node; operands must exist. Hash-consed and folded.
  int32_t Emit(const fused::Node& n);
  fused::ScalarType TypeOf(int32_t node) const { return p_->nodes[node].type; }

  // Leaves.
  int32_t ConstI(int64_t v);
  int32_t ConstF(double v, fused::ScalarType type);  // kF32 rounds v to float
  int32_t Coord(int axis);
  int32_t Linear();
  // A dim as a node: a constant, or the size argument holding it.
  int32_t Dim(const ir::Sym& d);
  // A dim in the program's encoding (>= 0 constant, < 0 size argument).
  int64_t EncodeDim(const ir::Sym& d);
  int32_t Acc(int reduction);
  // Registers input tensor spec; returns the input index for Load.
  int32_t AddInput(DType dtype, const ir::SymShape& shape);
  int32_t Load(int input, int32_t index);
  // Adds reduction `op` over node `value`; returns its kAcc node.
  int32_t AddReduction(fused::ReduceOp op, int32_t value);
  void AddOutput(DType dtype, const ir::SymShape& shape, int32_t value, bool per_row);
  void SetDomain(const ir::SymShape& shape, uint32_t reduce_axes);

  // Arithmetic; operands must have matching types (use Cast).
  int32_t Unary(fused::Op op, int32_t x);
  int32_t Binary(fused::Op op, int32_t x, int32_t y);
  int32_t Select(int32_t cond, int32_t x, int32_t y);
  // x converted to `dtype` with ONNX Cast semantics; a no-op when x already has that
  // dtype's compute type and the dtype needs no rounding (float, double, int64).
  int32_t Cast(int32_t x, DType dtype);
  // x converted to a compute type, without the rounding a narrower dtype would add.
  int32_t Convert(int32_t x, fused::ScalarType type);
  int32_t CheckIndex(int32_t x, int32_t bound, std::string what);
  int32_t Clamp(int32_t x, int32_t lo, int32_t hi);  // kI64

  // Index helpers over kI64 nodes.
  int32_t Ravel(std::span<const int32_t> coords, const ir::SymShape& shape);
  std::vector<int32_t> Unravel(int32_t linear, const ir::SymShape& shape);

  // Drops nodes nothing stored or reduced depends on (lowering leaves some behind, e.g. the
  // coordinates of a view folded away) and renumbers the rest. Call last: the builder must
  // not be used afterwards.
  void Compact();

  // The symbolic value of each size argument, in argument order.
  const std::vector<ir::Sym>& sizes() const { return sizes_; }
  fused::Program& program() { return *p_; }

 private:
  int32_t Fold(const fused::Node& n);
  fused::Program* p_;
  std::vector<ir::Sym> sizes_;
  std::map<std::string, int32_t> size_index_;  // Sym::ToString -> size argument
  std::map<std::tuple<uint8_t, uint8_t, int32_t, int32_t, int32_t, int64_t, uint64_t>, int32_t> memo_;
};

}  // namespace kiln::fusion
