// Meta functions of the elementwise math in runtime/kernels/math.cc: Acosh/Asinh/Atanh,
// IsInf/IsNaN, Shrink, Swish, BitwiseAnd/Or/Xor/Not and BitShift.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// One input of a dtype in `set`; the output has its shape and `out` (kUndefined: its dtype).
MetaFn SameShape(unsigned set, DType out = DType::kUndefined) {
  return [=](MetaContext& ctx) -> Status {
    KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
    KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "X"));
    KILN_RETURN_IF_ERROR(CheckDType(*x, "X", set));
    ctx.SetOutput(0, out == DType::kUndefined ? x->dtype : out, x->shape);
    return Status::Ok();
  };
}

// Two inputs of one dtype in `set`, broadcast together.
Status IntBinaryMeta(MetaContext& ctx, unsigned set) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* a, Need(ctx, 0, "A"));
  KILN_ASSIGN_OR_RETURN(const Value* b, Need(ctx, 1, "B"));
  KILN_RETURN_IF_ERROR(CheckDType(*a, "A", set));
  KILN_RETURN_IF_ERROR(CheckSameDType(*a, "A", *b, "B"));
  KILN_ASSIGN_OR_RETURN(SymShape shape, Broadcast(ctx, a->shape, b->shape, BroadcastDims::kAtRunTime));
  ctx.SetOutput(0, a->dtype, shape);
  return Status::Ok();
}

Status BitShiftMeta(MetaContext& ctx) {
  const Attr* dir = ctx.attrs().Find("direction");
  if (!dir || dir->kind != Attr::Kind::kString || (dir->s != "LEFT" && dir->s != "RIGHT"))
    return InvalidArgument("attribute direction: expected \"LEFT\" or \"RIGHT\", found " +
                           (dir && dir->kind == Attr::Kind::kString ? "\"" + dir->s + "\"" : std::string("none")));
  return IntBinaryMeta(ctx, kUnsignedInts);
}

Status IsInfMeta(MetaContext& ctx) {
  for (const char* flag : {"detect_negative", "detect_positive"}) {
    const int64_t v = ctx.attrs().GetInt(flag, 1);
    if (v != 0 && v != 1)
      return InvalidArgument(std::string("attribute ") + flag + ": expected 0 or 1, found " + std::to_string(v));
  }
  return SameShape(kFloats, DType::kBool)(ctx);
}

}  // namespace

void RegisterMathOps(std::vector<OpDef>& ops) {
  for (const char* op : {"Acosh", "Asinh", "Atanh", "Swish"}) Def(ops, op, SameShape(kFloats));
  Def(ops, "IsNaN", SameShape(kFloats, DType::kBool));
  Def(ops, "IsInf", IsInfMeta);
  Def(ops, "Shrink", SameShape(kNumeric));
  Def(ops, "BitwiseNot", SameShape(kInts));
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"})
    Def(ops, op, [](MetaContext& c) { return IntBinaryMeta(c, kInts); });
  Def(ops, "BitShift", BitShiftMeta);
}

}  // namespace kiln::ir
