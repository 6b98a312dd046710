// Meta functions of MatMul (numpy matmul rules, including 1-D operands) and Gemm, with the
// epilogue-annotated forms of passes/epilogue.h: MatMul(A, B[, bias[, residual]]) and
// Gemm(A, B[, C[, residual]]).
#include "compiler/ops/families.h"
#include "compiler/ops/meta_epilogue.h"
#include "compiler/ops/meta_util.h"
#include "runtime/kernels/epilogue.h"

namespace kiln::ir {
using namespace meta;
namespace {

// Requires the inner dims a and b to agree; the message names both full shapes.
Status InnerDims(MetaContext& ctx, const Sym& a, const Sym& b, const SymShape& as,
                 const SymShape& bs) {
  if (a.Same(b)) return Status::Ok();
  if (a.is_const() && b.is_const())
    return InvalidArgument("inner dims differ: A " + Str(as) + " vs B " + Str(bs) + " (expected " +
                           a.ToString() + ", found " + b.ToString() + ")");
  AddGuard(ctx, Eq(a, b));
  return Status::Ok();
}

Status MatMulMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* A, Need(ctx, 0, "A"));
  KILN_ASSIGN_OR_RETURN(const Value* B, Need(ctx, 1, "B"));
  KILN_RETURN_IF_ERROR(CheckDType(*A, "A", kFloats | kInts));
  KILN_RETURN_IF_ERROR(CheckSameDType(*A, "A", *B, "B"));
  KILN_RETURN_IF_ERROR(CheckRank(*A, "input A", 1, 1000));
  KILN_RETURN_IF_ERROR(CheckRank(*B, "input B", 1, 1000));
  SymShape a = A->shape, b = B->shape;
  if (a.size() == 1) a.insert(a.begin(), Sym(1));
  if (b.size() == 1) b.push_back(Sym(1));
  KILN_RETURN_IF_ERROR(InnerDims(ctx, a[a.size() - 1], b[b.size() - 2], A->shape, B->shape));
  SymShape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  auto batch = Broadcast(ctx, ba, bb);
  if (!batch.ok())
    return InvalidArgument("batch dims of A " + Str(A->shape) + " and B " + Str(B->shape) +
                           " do not broadcast: " + batch.status().message());
  SymShape out = *batch;
  if (A->rank() > 1) out.push_back(a[a.size() - 2]);
  if (B->rank() > 1) out.push_back(b[b.size() - 1]);
  // The annotated form's bias: a vector along the output's last dim (B's columns).
  if (const Value* bias = ctx.input(static_cast<int>(cpu::kEpilogueBiasInput))) {
    if (!IsFloat(A->dtype))
      return InvalidArgument("input bias: expected float operands, found " + DTypeStr(A->dtype));
    KILN_RETURN_IF_ERROR(CheckSameDType(*A, "A", *bias, "bias"));
    if (B->rank() < 2)
      return InvalidArgument("input bias: expected B of rank >= 2 (the bias runs along its columns), "
                             "found B " + Str(B->shape));
    KILN_RETURN_IF_ERROR(CheckRank(*bias, "input bias", 1, 1));
    KILN_RETURN_IF_ERROR(Unify(ctx, out.back(), bias->shape[0], "input bias dim 0 (output columns)"));
  }
  KILN_RETURN_IF_ERROR(CheckEpilogue(ctx, out, A->dtype));
  ctx.SetOutput(0, A->dtype, out);
  return Status::Ok();
}

Status GemmMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* A, Need(ctx, 0, "A"));
  KILN_ASSIGN_OR_RETURN(const Value* B, Need(ctx, 1, "B"));
  const Value* C = ctx.input(2);
  KILN_RETURN_IF_ERROR(CheckDType(*A, "A", kFloats | kInts));
  KILN_RETURN_IF_ERROR(CheckSameDType(*A, "A", *B, "B"));
  KILN_RETURN_IF_ERROR(CheckRank(*A, "input A", 2, 2));
  KILN_RETURN_IF_ERROR(CheckRank(*B, "input B", 2, 2));
  bool ta = ctx.attrs().GetInt("transA", 0) != 0, tb = ctx.attrs().GetInt("transB", 0) != 0;
  Sym M = A->shape[ta ? 1 : 0], Ka = A->shape[ta ? 0 : 1];
  Sym Kb = B->shape[tb ? 1 : 0], N = B->shape[tb ? 0 : 1];
  if (!Ka.Same(Kb)) {
    if (Ka.is_const() && Kb.is_const())
      return InvalidArgument("inner dims differ: A " + Str(A->shape) + (ta ? " (transposed)" : "") +
                             " vs B " + Str(B->shape) + (tb ? " (transposed)" : "") +
                             " (expected " + Ka.ToString() + ", found " + Kb.ToString() + ")");
    AddGuard(ctx, Eq(Ka, Kb));
  }
  SymShape out = {M, N};
  if (C) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*A, "A", *C, "C"));
    KILN_RETURN_IF_ERROR(CheckRank(*C, "input C", 0, 2));
    for (int i = 0; i < C->rank(); ++i) {
      const Sym& c = C->shape[C->rank() - 1 - i];
      const Sym& o = out[1 - i];
      if (c.Same(o) || (c.is_const() && *c.value() == 1)) continue;
      if (c.is_const() && o.is_const())
        return InvalidArgument("input C: expected a shape broadcastable to " + Str(out) +
                               ", found " + Str(C->shape));
      AddGuard(ctx, Eq(c, o));
    }
  }
  KILN_RETURN_IF_ERROR(CheckEpilogue(ctx, out, A->dtype));
  ctx.SetOutput(0, A->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterMatMulOps(std::vector<OpDef>& ops) {
  Def(ops, "MatMul", MatMulMeta);
  Def(ops, "Gemm", GemmMeta);
}

}  // namespace kiln::ir
