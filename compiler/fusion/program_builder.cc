#include "compiler/fusion/program_builder.h"

#include <bit>
#include <cmath>
#include <limits>

namespace kiln::fusion {
namespace {

using fused::Node;
using fused::Op;
using fused::ScalarType;

bool IsConst(const Node& n) { return n.op == Op::kConst; }

// Integer arithmetic folded only where it cannot overflow or divide by zero; the rest is
// left to run time, where the program's own rules (x / 0 = 0) apply.
bool FoldI64(Op op, int64_t x, int64_t y, int64_t* out) {
  switch (op) {
    case Op::kAdd: return !__builtin_add_overflow(x, y, out);
    case Op::kSub: return !__builtin_sub_overflow(x, y, out);
    case Op::kMul: return !__builtin_mul_overflow(x, y, out);
    case Op::kFloorDiv:
      if (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)) return false;
      *out = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
      return true;
    case Op::kMod:
      if (y == 0 || y == -1) return false;
      *out = x % y;
      if (*out != 0 && ((*out < 0) != (y < 0))) *out += y;
      return true;
    case Op::kMin: *out = std::min(x, y); return true;
    case Op::kMax: *out = std::max(x, y); return true;
    case Op::kEq: *out = x == y; return true;
    case Op::kLt: *out = x < y; return true;
    case Op::kLe: *out = x <= y; return true;
    case Op::kAnd: *out = (x != 0) && (y != 0); return true;
    case Op::kOr: *out = (x != 0) || (y != 0); return true;
    default: return false;
  }
}

}  // namespace

int32_t ProgramBuilder::Emit(const Node& n) {
  if (int32_t folded = Fold(n); folded >= 0) return folded;
  const auto key = std::make_tuple(static_cast<uint8_t>(n.op), static_cast<uint8_t>(n.type), n.a, n.b, n.c, n.i,
                                   std::bit_cast<uint64_t>(n.f));
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  p_->nodes.push_back(n);
  const int32_t id = static_cast<int32_t>(p_->nodes.size() - 1);
  // Loads, accumulators and checks are not pure functions of their operands alone, but
  // within one program the same (input, index) always reads the same element.
  memo_.emplace(key, id);
  return id;
}

// Returns an existing node equal to `n`, or -1 to emit `n` as is.
int32_t ProgramBuilder::Fold(const Node& n) {
  const auto& nodes = p_->nodes;
  auto is_int = [&](int32_t id, int64_t v) {
    return id >= 0 && IsConst(nodes[id]) && nodes[id].type == ScalarType::kI64 && nodes[id].i == v;
  };
  if (n.type == ScalarType::kI64 && n.a >= 0 && n.b >= 0 && n.c < 0 && IsConst(nodes[n.a]) && IsConst(nodes[n.b]) &&
      nodes[n.a].type == ScalarType::kI64 && nodes[n.b].type == ScalarType::kI64) {
    int64_t v;
    if (FoldI64(n.op, nodes[n.a].i, nodes[n.b].i, &v)) return ConstI(v);
  }
  if (n.type == ScalarType::kI64) {
    switch (n.op) {
      case Op::kAdd: {
        if (is_int(n.a, 0)) return n.b;
        if (is_int(n.b, 0)) return n.a;
        // (x floordiv d) * d + x mod d = x: a view's Ravel of its own Unravel.
        const Node& m = nodes[n.a];
        const Node& r = nodes[n.b];
        if (m.op == Op::kMul && r.op == Op::kMod && m.b == r.b) {
          const Node& q = nodes[m.a];
          if (q.op == Op::kFloorDiv && q.a == r.a && q.b == r.b) return r.a;
        }
        break;
      }
      case Op::kSub:
        if (is_int(n.b, 0)) return n.a;
        break;
      case Op::kMul:
        if (is_int(n.a, 1)) return n.b;
        if (is_int(n.b, 1)) return n.a;
        if (is_int(n.a, 0) || is_int(n.b, 0)) return ConstI(0);
        break;
      case Op::kFloorDiv:
        if (is_int(n.b, 1)) return n.a;
        if (is_int(n.a, 0)) return ConstI(0);
        break;
      case Op::kMod:
        if (is_int(n.b, 1) || is_int(n.a, 0)) return ConstI(0);
        break;
      case Op::kMin:
      case Op::kMax:
        if (n.a == n.b) return n.a;
        break;
      case Op::kSelect:
        if (n.a >= 0 && IsConst(nodes[n.a])) return nodes[n.a].i != 0 ? n.b : n.c;
        if (n.b == n.c) return n.b;
        break;
      default: break;
    }
  } else if (n.op == Op::kSelect) {
    if (IsConst(nodes[n.a])) return nodes[n.a].i != 0 ? n.b : n.c;
    if (n.b == n.c) return n.b;
  }
  return -1;
}

int32_t ProgramBuilder::ConstI(int64_t v) { return Emit({Op::kConst, ScalarType::kI64, -1, -1, -1, v, 0.0}); }

int32_t ProgramBuilder::ConstF(double v, ScalarType type) {
  if (type == ScalarType::kF32) v = static_cast<double>(static_cast<float>(v));
  return Emit({Op::kConst, type, -1, -1, -1, 0, v});
}

int32_t ProgramBuilder::Coord(int axis) { return Emit({Op::kCoord, ScalarType::kI64, -1, -1, -1, axis, 0.0}); }
int32_t ProgramBuilder::Linear() { return Emit({Op::kLinear, ScalarType::kI64, -1, -1, -1, 0, 0.0}); }

int64_t ProgramBuilder::EncodeDim(const ir::Sym& d) {
  if (d.is_const()) return *d.value();
  const std::string key = d.ToString();
  auto it = size_index_.find(key);
  if (it == size_index_.end()) {
    it = size_index_.emplace(key, static_cast<int32_t>(sizes_.size())).first;
    sizes_.push_back(d);
    p_->num_sizes = static_cast<int32_t>(sizes_.size());
  }
  return -(static_cast<int64_t>(it->second) + 1);
}

int32_t ProgramBuilder::Dim(const ir::Sym& d) {
  if (d.is_const()) return ConstI(*d.value());  // any constant, also a negative one
  const int64_t e = EncodeDim(d);
  if (e >= 0) return ConstI(e);
  return Emit({Op::kSize, ScalarType::kI64, -1, -1, -1, -(e + 1), 0.0});
}

int32_t ProgramBuilder::Acc(int reduction) {
  return Emit({Op::kAcc, p_->nodes[p_->reductions[reduction].value].type, -1, -1, -1, reduction, 0.0});
}

int32_t ProgramBuilder::AddInput(DType dtype, const ir::SymShape& shape) {
  fused::TensorSpec spec{dtype, {}};
  for (const ir::Sym& d : shape) spec.dims.push_back(EncodeDim(d));
  p_->inputs.push_back(std::move(spec));
  return static_cast<int32_t>(p_->inputs.size() - 1);
}

int32_t ProgramBuilder::Load(int input, int32_t index) {
  fused::ScalarType t = ScalarType::kF32;
  fused::ComputeTypeOf(p_->inputs[input].dtype, &t);
  return Emit({Op::kLoad, t, index, -1, -1, input, 0.0});
}

int32_t ProgramBuilder::AddReduction(fused::ReduceOp op, int32_t value) {
  // A reduction lowered again (its output read at another coordinate of the same row)
  // reuses the first: its value node is hash-consed, so equal reductions compare equal.
  for (size_t k = 0; k < p_->reductions.size(); ++k)
    if (p_->reductions[k].op == op && p_->reductions[k].value == value) return Acc(static_cast<int>(k));
  p_->reductions.push_back({op, value});
  return Acc(static_cast<int>(p_->reductions.size() - 1));
}

void ProgramBuilder::AddOutput(DType dtype, const ir::SymShape& shape, int32_t value, bool per_row) {
  fused::Output out;
  out.tensor.dtype = dtype;
  for (const ir::Sym& d : shape) out.tensor.dims.push_back(EncodeDim(d));
  out.value = value;
  out.per_row = per_row;
  p_->outputs.push_back(std::move(out));
}

void ProgramBuilder::SetDomain(const ir::SymShape& shape, uint32_t reduce_axes) {
  p_->domain.clear();
  for (const ir::Sym& d : shape) p_->domain.push_back(EncodeDim(d));
  p_->reduce_axes = reduce_axes;
}

int32_t ProgramBuilder::Unary(Op op, int32_t x) {
  const ScalarType t = op == Op::kIsNaN || op == Op::kNot ? ScalarType::kI64 : TypeOf(x);
  if (IsConst(p_->nodes[x]) && op == Op::kNeg && t == ScalarType::kI64) return ConstI(-p_->nodes[x].i);
  return Emit({op, t, x, -1, -1, 0, 0.0});
}

int32_t ProgramBuilder::Binary(Op op, int32_t x, int32_t y) {
  const bool compare = op == Op::kEq || op == Op::kLt || op == Op::kLe;
  return Emit({op, compare ? ScalarType::kI64 : TypeOf(x), x, y, -1, 0, 0.0});
}

int32_t ProgramBuilder::Select(int32_t cond, int32_t x, int32_t y) {
  return Emit({Op::kSelect, TypeOf(x), cond, x, y, 0, 0.0});
}

int32_t ProgramBuilder::Cast(int32_t x, DType dtype) {
  ScalarType t = ScalarType::kF32;
  fused::ComputeTypeOf(dtype, &t);
  // Casts that change nothing: to the full-width type of the same class.
  const bool exact = dtype == DType::kFloat32 || dtype == DType::kFloat64 || dtype == DType::kInt64;
  if (exact && TypeOf(x) == t) return x;
  if (IsConst(p_->nodes[x]) && TypeOf(x) == ScalarType::kI64 && t == ScalarType::kI64 && dtype != DType::kBool) {
    // Narrowing of a constant index is left to run time unless it fits.
    const int64_t v = p_->nodes[x].i;
    if (dtype == DType::kInt32 && v >= INT32_MIN && v <= INT32_MAX) return x;
  }
  return Emit({Op::kCast, t, x, -1, -1, static_cast<int64_t>(dtype), 0.0});
}

int32_t ProgramBuilder::Convert(int32_t x, ScalarType type) {
  if (TypeOf(x) == type) return x;
  const DType to = type == ScalarType::kI64 ? DType::kInt64 : type == ScalarType::kF32 ? DType::kFloat32 : DType::kFloat64;
  return Emit({Op::kCast, type, x, -1, -1, static_cast<int64_t>(to), 0.0});
}

int32_t ProgramBuilder::CheckIndex(int32_t x, int32_t bound, std::string what) {
  int32_t check = -1;
  for (size_t k = 0; k < p_->checks.size(); ++k)
    if (p_->checks[k] == what) check = static_cast<int32_t>(k);
  if (check < 0) {
    p_->checks.push_back(std::move(what));
    check = static_cast<int32_t>(p_->checks.size() - 1);
  }
  return Emit({Op::kCheckIndex, ScalarType::kI64, x, bound, -1, check, 0.0});
}

int32_t ProgramBuilder::Clamp(int32_t x, int32_t lo, int32_t hi) {
  return Binary(Op::kMin, Binary(Op::kMax, x, lo), hi);
}

int32_t ProgramBuilder::Ravel(std::span<const int32_t> coords, const ir::SymShape& shape) {
  // A tensor of the domain's shape read at the current element is read at kLinear: no
  // index arithmetic, and the CUDA emitter can vectorise such loads.
  if (coords.size() == p_->domain.size() && !coords.empty()) {
    bool same = true;
    for (size_t k = 0; k < coords.size() && same; ++k) {
      const fused::Node& c = p_->nodes[coords[k]];
      same = c.op == Op::kCoord && c.i == static_cast<int64_t>(k) && EncodeDim(shape[k]) == p_->domain[k];
    }
    if (same) return Linear();
  }
  int32_t index = ConstI(0);
  for (size_t k = 0; k < coords.size(); ++k) {
    // A dim of 1 contributes nothing: its coordinate is 0 in every valid program.
    if (shape[k].is_const() && *shape[k].value() == 1) continue;
    index = Binary(Op::kAdd, Binary(Op::kMul, index, Dim(shape[k])), coords[k]);
  }
  return index;
}

std::vector<int32_t> ProgramBuilder::Unravel(int32_t linear, const ir::SymShape& shape) {
  std::vector<int32_t> coords(shape.size());
  int32_t rest = linear;
  for (size_t k = shape.size(); k-- > 0;) {
    if (k == 0) {
      coords[k] = rest;
      break;
    }
    const int32_t d = Dim(shape[k]);
    coords[k] = Binary(Op::kMod, rest, d);
    rest = Binary(Op::kFloorDiv, rest, d);
  }
  return coords;
}

void ProgramBuilder::Compact() {
  std::vector<fused::Node>& nodes = p_->nodes;
  std::vector<char> live(nodes.size(), 0);
  for (const fused::Output& o : p_->outputs) live[o.value] = 1;
  for (const fused::Reduction& r : p_->reductions) live[r.value] = 1;
  for (size_t k = nodes.size(); k-- > 0;) {
    if (!live[k]) continue;
    for (int32_t x : {nodes[k].a, nodes[k].b, nodes[k].c})
      if (x >= 0) live[x] = 1;
  }
  std::vector<int32_t> remap(nodes.size(), -1);
  std::vector<fused::Node> kept;
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (!live[k]) continue;
    fused::Node n = nodes[k];
    for (int32_t* x : {&n.a, &n.b, &n.c})
      if (*x >= 0) *x = remap[*x];
    remap[k] = static_cast<int32_t>(kept.size());
    kept.push_back(n);
  }
  nodes = std::move(kept);
  for (fused::Output& o : p_->outputs) o.value = remap[o.value];
  for (fused::Reduction& r : p_->reductions) r.value = remap[r.value];
  memo_.clear();
}

}  // namespace kiln::fusion
