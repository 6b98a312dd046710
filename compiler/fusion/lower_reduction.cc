// Lowerings of the reduction families: Softmax, LogSoftmax, LayerNormalization,
// GroupNormalization, InstanceNormalization, the Reduce* ops and the global pools. Each
// names its iteration domain (the input's shape, or for GroupNormalization the channels
// split into groups) and its reduced axes; its LowerFn adds the row's reductions and
// returns the output element from them. Statistics are two-pass (mean, then the sum of
// squared deviations), like the CPU kernels, in the input's compute type.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "compiler/fusion/rules.h"
#include "compiler/ops/meta_util.h"

namespace kiln::fusion {
namespace {

using fused::Op;
using fused::ReduceOp;
using fused::ScalarType;

const ir::Value& In(const ir::Trace& t, const ir::Node& n, int i) { return t.value(n.inputs[i]); }

uint32_t AxesFrom(int first, int rank) {
  uint32_t mask = 0;
  for (int a = first; a < rank; ++a) mask |= 1u << a;
  return mask;
}

Status NeedFloat(const ir::Value& x, const ir::Node& n) {
  ScalarType t;
  if (!fused::ComputeTypeOf(x.dtype, &t) || t == ScalarType::kI64)
    return Unimplemented(n.op + " of " + std::string(DTypeName(x.dtype)) + " has no fused form");
  return Status::Ok();
}

int Axis(int64_t a, int rank) { return static_cast<int>(a < 0 ? a + rank : a); }

// The product of the reduced dims, in the type of `like`.
int32_t Count(ProgramBuilder& b, const fused::Program& p, uint32_t mask, ScalarType type) {
  int32_t n = b.ConstI(1);
  for (size_t a = 0; a < p.domain.size(); ++a) {
    if (!(mask >> a & 1)) continue;
    const int64_t d = p.domain[a];
    n = b.Binary(Op::kMul, n, d >= 0 ? b.ConstI(d) : b.Emit({Op::kSize, ScalarType::kI64, -1, -1, -1, -(d + 1), 0.0}));
  }
  return b.Convert(n, type);
}

// ---- Softmax, LogSoftmax ----------------------------------------------------------------

Result<ReductionDomain> SoftDomain(const ir::Trace& t, const ir::Node& n) {
  const ir::Value& x = In(t, n, 0);
  KILN_RETURN_IF_ERROR(NeedFloat(x, n));
  const int rank = x.rank();
  if (rank == 0) return Unimplemented(n.op + " of a scalar has no fused form");
  const bool coerce = n.attrs.GetInt("coerce_2d", 0) != 0;
  const int axis = Axis(n.attrs.GetInt("axis", coerce ? 1 : -1), rank);
  if (axis < 0 || axis >= rank) return Unimplemented(n.op + " axis out of range has no fused form");
  return ReductionDomain{x.shape, coerce ? AxesFrom(axis, rank) : 1u << axis};
}

template <bool kLog>
Result<int32_t> Soft(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  KILN_ASSIGN_OR_RETURN(int32_t xr, ctx.ValueAt(n.inputs[0], ctx.DomainCoords()));
  const int32_t m = b.AddReduction(ReduceOp::kMax, xr);
  const int32_t s = b.AddReduction(ReduceOp::kSum, b.Unary(Op::kExp, b.Binary(Op::kSub, xr, m)));
  KILN_ASSIGN_OR_RETURN(int32_t x, ctx.ValueAt(n.inputs[0], c));
  const int32_t shifted = b.Binary(Op::kSub, x, m);
  if (kLog) return b.Binary(Op::kSub, shifted, b.Unary(Op::kLog, s));
  return b.Binary(Op::kDiv, b.Unary(Op::kExp, shifted), s);
}

// ---- Normalisations -------------------------------------------------------------------

// (x - mean) * 1/sqrt(var + eps) for the current row, with x read at `x_at`.
struct Stats {
  int32_t mean, inv_std;
};
Stats RowStats(ProgramBuilder& b, int32_t x_row, uint32_t mask, float eps) {
  const ScalarType t = b.TypeOf(x_row);
  const int32_t count = Count(b, b.program(), mask, t);
  const int32_t mean = b.Binary(Op::kDiv, b.AddReduction(ReduceOp::kSum, x_row), count);
  const int32_t d = b.Binary(Op::kSub, x_row, mean);
  const int32_t var = b.Binary(Op::kDiv, b.AddReduction(ReduceOp::kSum, b.Binary(Op::kMul, d, d)), count);
  const int32_t inv = b.Binary(Op::kDiv, b.ConstF(1, t), b.Unary(Op::kSqrt, b.Binary(Op::kAdd, var, b.ConstF(eps, t))));
  return {mean, inv};
}

Result<ReductionDomain> LayerNormDomain(const ir::Trace& t, const ir::Node& n) {
  const ir::Value& x = In(t, n, 0);
  KILN_RETURN_IF_ERROR(NeedFloat(x, n));
  for (size_t k = 1; k < n.outputs.size(); ++k)
    if (n.outputs[k] != ir::kNoValue) return Unimplemented("LayerNormalization's Mean/InvStdDev outputs have no fused form");
  const int axis = Axis(n.attrs.GetInt("axis", -1), x.rank());
  if (axis < 0 || axis >= x.rank()) return Unimplemented("LayerNormalization axis out of range");
  return ReductionDomain{x.shape, AxesFrom(axis, x.rank())};
}

Result<int32_t> LayerNorm(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = In(ctx.trace(), n, 0);
  const int axis = Axis(n.attrs.GetInt("axis", -1), x.rank());
  KILN_ASSIGN_OR_RETURN(int32_t xr, ctx.ValueAt(n.inputs[0], ctx.DomainCoords()));
  const Stats st = RowStats(b, xr, AxesFrom(axis, x.rank()), n.attrs.GetFloat("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int32_t xv, ctx.ValueAt(n.inputs[0], c));
  int32_t y = b.Binary(Op::kMul, b.Binary(Op::kSub, xv, st.mean), st.inv_std);
  const ir::SymShape normalized(x.shape.begin() + axis, x.shape.end());
  std::span<const int32_t> inner = c.subspan(axis);
  for (int i = 1; i <= 2; ++i) {
    if (i >= static_cast<int>(n.inputs.size()) || n.inputs[i] == ir::kNoValue) continue;
    const ir::Value& p = In(ctx.trace(), n, i);
    KILN_ASSIGN_OR_RETURN(int32_t v, ctx.ValueAt(n.inputs[i], BroadcastCoords(b, inner, normalized, p.shape)));
    y = b.Binary(i == 1 ? Op::kMul : Op::kAdd, y, b.Convert(v, b.TypeOf(y)));
  }
  return y;
}

// GroupNormalization splits channels into groups: domain [N, G, C/G, spatial...].
Result<ReductionDomain> GroupNormDomain(const ir::Trace& t, const ir::Node& n) {
  const ir::Value& x = In(t, n, 0);
  KILN_RETURN_IF_ERROR(NeedFloat(x, n));
  if (x.rank() < 2) return Unimplemented(n.op + " of rank < 2 has no fused form");
  const int64_t groups = n.op == "InstanceNormalization" ? -1 : n.attrs.GetInt("num_groups", 0);
  if (groups == -1) return ReductionDomain{x.shape, AxesFrom(2, x.rank())};
  if (groups < 1) return Unimplemented("GroupNormalization num_groups < 1");
  if (x.rank() + 1 > kMaxRank) return Unimplemented("GroupNormalization of rank 8 has no fused form");
  if (const auto c = x.shape[1].value(); !c || *c % groups != 0)
    return Unimplemented("GroupNormalization with channels not a constant multiple of num_groups");
  ir::SymShape dims = {x.shape[0], ir::Sym(groups), ir::FloorDiv(x.shape[1], ir::Sym(groups))};
  dims.insert(dims.end(), x.shape.begin() + 2, x.shape.end());
  return ReductionDomain{dims, AxesFrom(2, static_cast<int>(dims.size()))};
}

Result<int32_t> GroupNorm(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t> c) {
  ProgramBuilder& b = ctx.builder();
  const ir::Value& x = In(ctx.trace(), n, 0);
  std::vector<int32_t> d = ctx.DomainCoords();
  std::vector<int32_t> xc;
  uint32_t mask = AxesFrom(2, x.rank());
  if (n.op == "GroupNormalization") {
    const int64_t groups = n.attrs.GetInt("num_groups", 1);
    const int32_t cg = b.ConstI(*x.shape[1].value() / groups);
    xc = {d[0], b.Binary(Op::kAdd, b.Binary(Op::kMul, d[1], cg), d[2])};
    xc.insert(xc.end(), d.begin() + 3, d.end());
    mask = AxesFrom(2, x.rank() + 1);
  } else {
    xc = d;
  }
  KILN_ASSIGN_OR_RETURN(int32_t xr, ctx.ValueAt(n.inputs[0], xc));
  const Stats st = RowStats(b, xr, mask, n.attrs.GetFloat("epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(int32_t xv, ctx.ValueAt(n.inputs[0], c));
  const int32_t ch[1] = {c[1]};
  KILN_ASSIGN_OR_RETURN(int32_t scale, ctx.ValueAt(n.inputs[1], ch));
  KILN_ASSIGN_OR_RETURN(int32_t bias, ctx.ValueAt(n.inputs[2], ch));
  const int32_t y = b.Binary(Op::kMul, b.Binary(Op::kSub, xv, st.mean), st.inv_std);
  return b.Binary(Op::kAdd, b.Binary(Op::kMul, y, b.Convert(scale, b.TypeOf(y))), b.Convert(bias, b.TypeOf(y)));
}

// ---- Reduce*, global pools ----------------------------------------------------------------

Result<uint32_t> ReduceMask(const ir::Trace& t, const ir::Node& n) {
  const ir::Value& x = In(t, n, 0);
  if (n.op.rfind("Global", 0) == 0) return AxesFrom(2, x.rank());
  std::vector<int64_t> axes;
  if (n.inputs.size() > 1 && n.inputs[1] != ir::kNoValue) {
    KILN_ASSIGN_OR_RETURN(axes, ir::meta::NeedConstInts(In(t, n, 1), "axes"));
  }
  if (axes.empty()) {
    if (n.attrs.GetInt("noop_with_empty_axes", 0) != 0) return Unimplemented(n.op + " with no axes is a copy");
    return AxesFrom(0, x.rank());
  }
  uint32_t mask = 0;
  for (int64_t a : axes) mask |= 1u << Axis(a, x.rank());
  return mask;
}

Result<ReductionDomain> ReduceDomain(const ir::Trace& t, const ir::Node& n) {
  const ir::Value& x = In(t, n, 0);
  ScalarType type;
  if (!fused::ComputeTypeOf(x.dtype, &type)) return Unimplemented(n.op + " of this dtype has no fused form");
  if (x.rank() == 0) return Unimplemented(n.op + " of a scalar is a copy");
  KILN_ASSIGN_OR_RETURN(uint32_t mask, ReduceMask(t, n));
  const bool float_only = n.op != "ReduceSum" && n.op != "ReduceMax" && n.op != "ReduceMin" && n.op != "ReduceProd" &&
                          n.op != "ReduceMean" && n.op != "GlobalMaxPool";
  if (float_only) KILN_RETURN_IF_ERROR(NeedFloat(x, n));
  return ReductionDomain{x.shape, mask};
}

// The range of an integer or bool dtype narrower than int64, or false.
bool NarrowRange(DType d, int64_t* lo, int64_t* hi) {
  switch (d) {
    case DType::kBool: *lo = 0; *hi = 1; return true;
    case DType::kInt8: *lo = INT8_MIN; *hi = INT8_MAX; return true;
    case DType::kUInt8: *lo = 0; *hi = UINT8_MAX; return true;
    case DType::kInt16: *lo = INT16_MIN; *hi = INT16_MAX; return true;
    case DType::kUInt16: *lo = 0; *hi = UINT16_MAX; return true;
    case DType::kInt32: *lo = INT32_MIN; *hi = INT32_MAX; return true;
    case DType::kUInt32: *lo = 0; *hi = UINT32_MAX; return true;
    default: return false;
  }
}

// Max or Min accumulated in int64 for a narrower dtype: an empty row must give the dtype's
// identity (docs/semantics.md: ReduceMax of nothing is the dtype's lowest value, false for
// bool), not the int64 accumulator's start narrowed. Rows with values are already in range.
int32_t IdentityInDType(ProgramBuilder& b, int32_t r, bool max, DType out) {
  int64_t lo = 0, hi = 0;
  if (b.TypeOf(r) != ScalarType::kI64 || !NarrowRange(out, &lo, &hi)) return r;
  return max ? b.Binary(Op::kMax, r, b.ConstI(lo)) : b.Binary(Op::kMin, r, b.ConstI(hi));
}

Result<int32_t> Reduce(LowerContext& ctx, const ir::Node& n, int, std::span<const int32_t>) {
  ProgramBuilder& b = ctx.builder();
  const DType out = ctx.trace().value(n.outputs[0]).dtype;
  KILN_ASSIGN_OR_RETURN(uint32_t mask, ReduceMask(ctx.trace(), n));
  KILN_ASSIGN_OR_RETURN(int32_t v, ctx.ValueAt(n.inputs[0], ctx.DomainCoords()));
  const ScalarType t = b.TypeOf(v);
  const std::string& op = n.op;
  auto narrow = [&](int32_t r) { return t == ScalarType::kI64 ? b.Cast(r, out) : r; };
  if (op == "ReduceSum") return narrow(b.AddReduction(ReduceOp::kSum, v));
  if (op == "ReduceProd") return narrow(b.AddReduction(ReduceOp::kProd, v));
  if (op == "ReduceMax" || op == "GlobalMaxPool") return IdentityInDType(b, b.AddReduction(ReduceOp::kMax, v), true, out);
  if (op == "ReduceMin") return IdentityInDType(b, b.AddReduction(ReduceOp::kMin, v), false, out);
  if (op == "ReduceMean" || op == "GlobalAveragePool") {
    const int32_t sum = b.AddReduction(ReduceOp::kSum, v);
    if (t != ScalarType::kI64) return b.Binary(Op::kDiv, sum, Count(b, b.program(), mask, t));
    // Integer means divide the sum, wrapped in the output dtype as ReduceSum's is, in double
    // and truncate, as the CPU kernel does.
    const int32_t q = b.Binary(Op::kDiv, b.Convert(narrow(sum), ScalarType::kF64), Count(b, b.program(), mask, ScalarType::kF64));
    return b.Cast(q, out);
  }
  if (op == "ReduceSumSquare") return b.AddReduction(ReduceOp::kSum, b.Binary(Op::kMul, v, v));
  if (op == "ReduceL1") return b.AddReduction(ReduceOp::kSum, b.Unary(Op::kAbs, v));
  if (op == "ReduceL2") return b.Unary(Op::kSqrt, b.AddReduction(ReduceOp::kSum, b.Binary(Op::kMul, v, v)));
  if (op == "ReduceLogSum") return b.Unary(Op::kLog, b.AddReduction(ReduceOp::kSum, v));
  if (op == "ReduceLogSumExp") {
    const int32_t m = b.AddReduction(ReduceOp::kMax, v);
    // An infinite max shifts by 0, as the CPU kernel does, so exp(-inf - -inf) is not NaN.
    const int32_t inf = b.ConstF(std::numeric_limits<double>::infinity(), t);
    const int32_t shift = b.Select(b.Binary(Op::kEq, b.Unary(Op::kAbs, m), inf), b.ConstF(0, t), m);
    const int32_t s = b.AddReduction(ReduceOp::kSum, b.Unary(Op::kExp, b.Binary(Op::kSub, v, shift)));
    return b.Binary(Op::kAdd, shift, b.Unary(Op::kLog, s));
  }
  if (op == "GlobalLpPool") {
    const int32_t p = b.ConstF(static_cast<double>(n.attrs.GetInt("p", 2)), t);
    const int32_t s = b.AddReduction(ReduceOp::kSum, b.Binary(Op::kPow, b.Unary(Op::kAbs, v), p));
    return b.Binary(Op::kPow, s, b.Binary(Op::kDiv, b.ConstF(1, t), p));
  }
  return Internal("no reduction lowering for " + op);
}

constexpr Lowering kLowerings[] = {
    {"GlobalAveragePool", Reduce, ReduceDomain},
    {"GlobalLpPool", Reduce, ReduceDomain},
    {"GlobalMaxPool", Reduce, ReduceDomain},
    {"GroupNormalization", GroupNorm, GroupNormDomain},
    {"InstanceNormalization", GroupNorm, GroupNormDomain},
    {"LayerNormalization", LayerNorm, LayerNormDomain},
    {"LogSoftmax", Soft<true>, SoftDomain},
    {"ReduceL1", Reduce, ReduceDomain},
    {"ReduceL2", Reduce, ReduceDomain},
    {"ReduceLogSum", Reduce, ReduceDomain},
    {"ReduceLogSumExp", Reduce, ReduceDomain},
    {"ReduceMax", Reduce, ReduceDomain},
    {"ReduceMean", Reduce, ReduceDomain},
    {"ReduceMin", Reduce, ReduceDomain},
    {"ReduceProd", Reduce, ReduceDomain},
    {"ReduceSum", Reduce, ReduceDomain},
    {"ReduceSumSquare", Reduce, ReduceDomain},
    {"Softmax", Soft<false>, SoftDomain},
};

}  // namespace

std::span<const Lowering> ReductionLowerings() { return kLowerings; }

}  // namespace kiln::fusion
