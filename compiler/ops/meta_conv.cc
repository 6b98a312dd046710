// Meta functions of Conv and ConvTranspose (1-D, 2-D and 3-D). Conv also takes the
// epilogue-annotated form of passes/epilogue.h: Conv(X, W[, B[, residual]]).
#include "compiler/ops/families.h"
#include "compiler/ops/meta_epilogue.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

struct ConvInputs {
  const Value* X;
  const Value* W;
  const Value* B;
  int n;  // spatial rank
  int64_t group;
  std::vector<int64_t> kernel;
};

Result<ConvInputs> ReadConvInputs(MetaContext& ctx) {
  ConvInputs c;
  KILN_ASSIGN_OR_RETURN(c.X, Need(ctx, 0, "X"));
  KILN_ASSIGN_OR_RETURN(c.W, Need(ctx, 1, "W"));
  c.B = ctx.input(2);
  KILN_RETURN_IF_ERROR(CheckDType(*c.X, "X", kFloats));
  KILN_RETURN_IF_ERROR(CheckSameDType(*c.X, "X", *c.W, "W"));
  KILN_RETURN_IF_ERROR(CheckRank(*c.X, "input X", 3, 1000));
  c.n = c.X->rank() - 2;
  if (c.n > 3)
    return Unimplemented("expected 1, 2 or 3 spatial dims, found " + std::to_string(c.n) +
                         " (X " + Str(c.X->shape) + ")");
  if (c.W->rank() != c.X->rank())
    return InvalidArgument("input W: expected rank " + std::to_string(c.X->rank()) +
                           " (the rank of X " + Str(c.X->shape) + "), found rank " +
                           std::to_string(c.W->rank()) + " " + Str(c.W->shape));
  c.group = ctx.attrs().GetInt("group", 1);
  if (c.group < 1) return InvalidArgument("group: expected >= 1, found " + std::to_string(c.group));
  // Kernel shape: from W (which must be static there), checked against the attribute.
  for (int i = 0; i < c.n; ++i) {
    auto k = c.W->shape[2 + i].value();
    if (!k)
      return Unimplemented("expected static kernel dims in W, found " + Str(c.W->shape));
    c.kernel.push_back(*k);
  }
  if (ctx.attrs().Has("kernel_shape")) {
    const auto& ks = ctx.attrs().GetInts("kernel_shape");
    if (ks != c.kernel)
      return InvalidArgument("kernel_shape: expected " + Str(c.kernel) + " (from W " +
                             Str(c.W->shape) + "), found " + Str(ks));
  }
  if (c.B) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*c.X, "X", *c.B, "B"));
    KILN_RETURN_IF_ERROR(CheckRank(*c.B, "input B", 1, 1));
  }
  return c;
}

Status ConvMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(ConvInputs c, ReadConvInputs(ctx));
  const Sym& C = c.X->shape[1];
  const Sym& M = c.W->shape[0];
  const Sym& Cg = c.W->shape[1];
  if (auto cv = C.value(); cv && *cv % c.group != 0)
    return InvalidArgument("input channels " + std::to_string(*cv) + " not divisible by group " +
                           std::to_string(c.group));
  if (auto mv = M.value(); mv && *mv % c.group != 0)
    return InvalidArgument("output channels " + std::to_string(*mv) + " (W dim 0) not divisible by group " +
                           std::to_string(c.group));
  Sym expect_c = Cg * Sym(c.group);
  if (!C.Same(expect_c)) {
    if (C.is_const() && expect_c.is_const())
      return InvalidArgument("input channels: expected " + expect_c.ToString() + " (W " +
                             Str(c.W->shape) + " dim 1 x group " + std::to_string(c.group) +
                             "), found " + C.ToString() + " (X " + Str(c.X->shape) + ")");
    AddGuard(ctx, Eq(C, expect_c));
  }
  if (c.B) KILN_RETURN_IF_ERROR(Unify(ctx, M, c.B->shape[0], "input B dim 0 (output channels)"));
  KILN_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx.attrs(), c.kernel, true));
  SymShape in(c.X->shape.begin() + 2, c.X->shape.end());
  KILN_ASSIGN_OR_RETURN(SymShape sp, WindowOutput(ctx, in, w));
  SymShape out = {c.X->shape[0], M};
  out.insert(out.end(), sp.begin(), sp.end());
  KILN_RETURN_IF_ERROR(CheckEpilogue(ctx, out, c.X->dtype));
  ctx.SetOutput(0, c.X->dtype, out);
  return Status::Ok();
}

Status ConvTransposeMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(ConvInputs c, ReadConvInputs(ctx));
  const Sym& C = c.X->shape[1];
  KILN_RETURN_IF_ERROR(Unify(ctx, c.W->shape[0], C, "input channels (W dim 0 vs X dim 1)"));
  if (auto cv = C.value(); cv && *cv % c.group != 0)
    return InvalidArgument("input channels " + std::to_string(*cv) + " not divisible by group " +
                           std::to_string(c.group));
  Sym M = c.W->shape[1] * Sym(c.group);
  if (c.B) KILN_RETURN_IF_ERROR(Unify(ctx, M, c.B->shape[0], "input B dim 0 (output channels)"));
  KILN_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx.attrs(), c.kernel, true));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> opad, IntsAttr(ctx.attrs(), "output_padding", c.n, 0));
  for (int i = 0; i < c.n; ++i)
    if (opad[i] < 0 || opad[i] >= std::max(w.strides[i], w.dilations[i]))
      return InvalidArgument("output_padding: expected values in [0, max(stride, dilation)), found " +
                             Str(opad) + " (strides " + Str(w.strides) + ")");
  SymShape out = {c.X->shape[0], M};
  const auto& os = ctx.attrs().GetInts("output_shape");
  if (!os.empty()) {
    if (static_cast<int>(os.size()) != c.n && static_cast<int>(os.size()) != c.n + 2)
      return InvalidArgument("output_shape: expected " + std::to_string(c.n) + " values, found " +
                             Str(os));
    for (int i = 0; i < c.n; ++i) {
      int64_t v = os[os.size() - c.n + i];
      if (v < 1) return InvalidArgument("output_shape: expected positive values, found " + Str(os));
      out.push_back(Sym(v));
    }
  } else {
    for (int i = 0; i < c.n; ++i) {
      const Sym& x = c.X->shape[2 + i];
      int64_t s = w.strides[i];
      Sym o;
      if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
        o = x * Sym(s);
      } else {
        // s * (x - 1) + output_padding + keff - pads, keff = dilation * (kernel - 1) + 1; the
        // constant part checked for int64 overflow (the factors were checked to be >= 0).
        const bool valid = w.auto_pad == "VALID";
        int64_t keff, pads = 0, k;
        if (__builtin_mul_overflow(w.dilations[i], w.kernel[i] - 1, &keff) || __builtin_add_overflow(keff, 1, &keff) ||
            (!valid && __builtin_add_overflow(w.pads[i], w.pads[i + c.n], &pads)) ||
            __builtin_add_overflow(opad[i], keff, &k) || __builtin_sub_overflow(k, pads, &k) ||
            __builtin_sub_overflow(k, s, &k))
          return InvalidArgument("spatial dim " + std::to_string(i) + ": kernel_shape " + std::to_string(w.kernel[i]) +
                                 ", dilation " + std::to_string(w.dilations[i]) + ", stride " + std::to_string(s) +
                                 " and pads " + Str(w.pads) + " overflow int64 in the output size");
        o = AddC(x * Sym(s), k);
      }
      if (auto v = o.value(); v && *v < 1)
        return InvalidArgument("spatial dim " + std::to_string(i) + ": expected an output size >= 1, found " +
                               std::to_string(*v));
      out.push_back(o);
    }
  }
  ctx.SetOutput(0, c.X->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterConvOps(std::vector<OpDef>& ops) {
  Def(ops, "Conv", ConvMeta);
  Def(ops, "ConvTranspose", ConvTransposeMeta);
}

}  // namespace kiln::ir
