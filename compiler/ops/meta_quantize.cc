// Meta functions of the integer quantization ops: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and QLinearConv.
// Kiln's quantized types are int8, uint8, int16 and uint16 (it has no int4, float8 or
// float4 dtypes); scales are float32, float16 or bfloat16.
#include <cmath>
#include <utility>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

bool IsQuantType(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16;
}
bool IsScaleType(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

// A constant scale's elements must be finite and nonzero: a zero scale divides by zero in
// QuantizeLinear, and makes every dequantized value 0.
Status CheckScaleValues(const Value& v, std::string_view what) {
  if (!v.is_const()) return Status::Ok();
  for (int64_t i = 0; i < v.data->num_elements(); ++i)
    if (const double s = v.data->FloatAt(i); s == 0 || !std::isfinite(s))
      return InvalidArgument("input " + std::string(what) + ": element " + std::to_string(i) + " is " +
                             std::to_string(s) + "; a scale must be finite and nonzero");
  return Status::Ok();
}

Status CheckScaleType(const Value& v, std::string_view what) {
  if (!IsScaleType(v.dtype))
    return InvalidArgument("input " + std::string(what) + ": expected float32, float16 or bfloat16, found " +
                           DTypeStr(v.dtype));
  return CheckScaleValues(v, what);
}

// A scalar or a one-element tensor: one scale (or zero point) for the whole tensor.
bool IsPerTensor(const Value& v) {
  if (v.rank() == 0) return true;
  auto n = StaticCount(v);
  return n && *n == 1;
}

// Checks a scale or zero point `p` of QuantizeLinear/DequantizeLinear against x: per
// tensor (one element), per axis (1-D of x.shape[axis] elements) or blocked (x's shape
// with ceil(x.shape[axis] / block_size) along the axis).
Status CheckQuantParam(MetaContext& ctx, const Value& x, const Value& p, std::string_view what, int axis,
                       int64_t block_size) {
  if (IsPerTensor(p)) return Status::Ok();
  if (block_size == 0) {
    if (p.rank() != 1)
      return InvalidArgument("input " + std::string(what) + ": expected a scalar or a 1-D tensor along axis " +
                             std::to_string(axis) + " (or attribute block_size for blocked quantization), found " +
                             Str(p.shape));
    return Unify(ctx, x.shape[axis], p.shape[0],
                 "input " + std::string(what) + " dim 0 (x dim " + std::to_string(axis) + ")");
  }
  if (p.rank() != x.rank())
    return InvalidArgument("input " + std::string(what) + ": blocked quantization (block_size " +
                           std::to_string(block_size) + ") expects the rank of x " + Str(x.shape) + ", found " +
                           Str(p.shape));
  for (int d = 0; d < x.rank(); ++d) {
    Sym want = d == axis ? CeilDiv(x.shape[d], Sym(block_size)) : x.shape[d];
    KILN_RETURN_IF_ERROR(Unify(ctx, want, p.shape[d], "input " + std::string(what) + " dim " + std::to_string(d)));
  }
  return Status::Ok();
}

struct QuantAxis {
  int axis = 0;
  int64_t block_size = 0;
};

Result<QuantAxis> ReadQuantAxis(MetaContext& ctx, const Value& x, const Value& scale, const Value* zp) {
  QuantAxis q;
  q.block_size = ctx.attrs().GetInt("block_size", 0);
  if (q.block_size < 0)
    return InvalidArgument("attribute 'block_size': expected >= 0, found " + std::to_string(q.block_size));
  // The axis only matters for per-axis or blocked parameters: with per-tensor ones the
  // default axis 1 is valid even for an x of rank 0 or 1.
  if (IsPerTensor(scale) && (!zp || IsPerTensor(*zp))) return q;
  KILN_ASSIGN_OR_RETURN(q.axis, NormAxis(ctx.attrs().GetInt("axis", 1), x.rank(), "attribute 'axis'"));
  return q;
}

// The element type an `output_dtype` attribute names, or kUndefined when it is absent or 0.
Result<DType> OutputDTypeAttr(MetaContext& ctx) {
  int64_t v = ctx.attrs().GetInt("output_dtype", 0);
  if (v == 0) return DType::kUndefined;
  if (v < 0 || v > 1000 || !IsValidDType(static_cast<int32_t>(v)))
    return Unimplemented("attribute 'output_dtype': ONNX type " + std::to_string(v) +
                         " is not a type Kiln has");
  return static_cast<DType>(v);
}

Status QuantizeLinearMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "x"));
  KILN_ASSIGN_OR_RETURN(const Value* scale, Need(ctx, 1, "y_scale"));
  const Value* zp = ctx.input(2);
  if (!IsFloat(x->dtype) && x->dtype != DType::kInt32)
    return InvalidArgument("input x: expected a float type or int32, found " + DTypeStr(x->dtype));
  KILN_RETURN_IF_ERROR(CheckScaleType(*scale, "y_scale"));
  if (int64_t p = ctx.attrs().GetInt("precision", 0); p != 0 && p != static_cast<int64_t>(scale->dtype))
    return Unimplemented("attribute 'precision': only the precision of y_scale (" + DTypeStr(scale->dtype) +
                         ") is supported, found ONNX type " + std::to_string(p));
  KILN_ASSIGN_OR_RETURN(QuantAxis q, ReadQuantAxis(ctx, *x, *scale, zp));
  KILN_ASSIGN_OR_RETURN(DType out, OutputDTypeAttr(ctx));
  if (zp) {
    if (out != DType::kUndefined && out != zp->dtype)
      return InvalidArgument("attribute 'output_dtype' (" + DTypeStr(out) + ") differs from y_zero_point's dtype (" +
                             DTypeStr(zp->dtype) + ")");
    out = zp->dtype;
  }
  if (out == DType::kUndefined) out = DType::kUInt8;
  if (!IsQuantType(out))
    return Unimplemented("output dtype " + DTypeStr(out) + ": Kiln quantizes to int8, uint8, int16 and uint16");
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, *x, *scale, "y_scale", q.axis, q.block_size));
  if (zp) KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, *x, *zp, "y_zero_point", q.axis, q.block_size));
  ctx.SetOutput(0, out, x->shape);
  return Status::Ok();
}

Status DequantizeLinearMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "x"));
  KILN_ASSIGN_OR_RETURN(const Value* scale, Need(ctx, 1, "x_scale"));
  const Value* zp = ctx.input(2);
  if (!IsQuantType(x->dtype) && x->dtype != DType::kInt32)
    return Unimplemented("input x: Kiln dequantizes int8, uint8, int16, uint16 and int32, found " + DTypeStr(x->dtype));
  KILN_RETURN_IF_ERROR(CheckScaleType(*scale, "x_scale"));
  if (zp) KILN_RETURN_IF_ERROR(CheckSameDType(*x, "x", *zp, "x_zero_point"));
  KILN_ASSIGN_OR_RETURN(QuantAxis q, ReadQuantAxis(ctx, *x, *scale, zp));
  KILN_ASSIGN_OR_RETURN(DType out, OutputDTypeAttr(ctx));
  if (out == DType::kUndefined) out = scale->dtype;
  if (!IsScaleType(out))
    return InvalidArgument("attribute 'output_dtype': expected float32, float16 or bfloat16, found " + DTypeStr(out));
  KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, *x, *scale, "x_scale", q.axis, q.block_size));
  if (zp) KILN_RETURN_IF_ERROR(CheckQuantParam(ctx, *x, *zp, "x_zero_point", q.axis, q.block_size));
  ctx.SetOutput(0, out, x->shape);
  return Status::Ok();
}

Status DynamicQuantizeLinearMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 3));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "x"));
  if (x->dtype != DType::kFloat32)
    return InvalidArgument("input x: expected float32, found " + DTypeStr(x->dtype));
  ctx.SetOutput(0, DType::kUInt8, x->shape);
  ctx.SetOutput(1, DType::kFloat32, {});
  ctx.SetOutput(2, DType::kUInt8, {});
  return Status::Ok();
}

Status CheckInt8(const Value& v, std::string_view what) {
  if (v.dtype != DType::kInt8 && v.dtype != DType::kUInt8)
    return InvalidArgument("input " + std::string(what) + ": expected int8 or uint8, found " + DTypeStr(v.dtype));
  return Status::Ok();
}

// A matmul parameter (scale or zero point) of operand A (`rows`: per row of A, dim M) or
// B (per column of B, dim N): one element, or a 1-D tensor along that dim.
Status CheckMatMulParam(MetaContext& ctx, const Value* p, std::string_view what, const Sym& dim,
                        std::string_view dim_name) {
  if (!p || IsPerTensor(*p)) return Status::Ok();
  if (p->rank() != 1)
    return Unimplemented("input " + std::string(what) + ": expected a scalar or a 1-D tensor of " +
                         std::string(dim_name) + " elements, found " + Str(p->shape));
  return Unify(ctx, dim, p->shape[0], "input " + std::string(what) + " dim 0 (" + std::string(dim_name) + ")");
}

// The output shape of MatMul(A, B) for the integer matmuls: A and B of rank >= 2 (rank 1
// is promoted and the promoted dim dropped, as for MatMul), batch dims broadcast.
Result<SymShape> MatMulShape(MetaContext& ctx, const Value& A, const Value& B) {
  KILN_RETURN_IF_ERROR(CheckRank(A, "input A", 1, 1000));
  KILN_RETURN_IF_ERROR(CheckRank(B, "input B", 1, 1000));
  SymShape a = A.shape, b = B.shape;
  if (a.size() == 1) a.insert(a.begin(), Sym(1));
  if (b.size() == 1) b.push_back(Sym(1));
  KILN_RETURN_IF_ERROR(Unify(ctx, a[a.size() - 1], b[b.size() - 2], "inner dims of A " + Str(A.shape) + " and B " +
                                                                         Str(B.shape)));
  auto batch = Broadcast(ctx, SymShape(a.begin(), a.end() - 2), SymShape(b.begin(), b.end() - 2));
  if (!batch.ok())
    return InvalidArgument("batch dims of A " + Str(A.shape) + " and B " + Str(B.shape) +
                           " do not broadcast: " + batch.status().message());
  SymShape out = *batch;
  if (A.rank() > 1) out.push_back(a[a.size() - 2]);
  if (B.rank() > 1) out.push_back(b[b.size() - 1]);
  return out;
}

Sym RowsOf(const Value& A) { return A.rank() > 1 ? A.shape[A.rank() - 2] : Sym(1); }
Sym ColsOf(const Value& B) { return B.rank() > 1 ? B.shape[B.rank() - 1] : Sym(1); }

Status MatMulIntegerMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* A, Need(ctx, 0, "A"));
  KILN_ASSIGN_OR_RETURN(const Value* B, Need(ctx, 1, "B"));
  KILN_RETURN_IF_ERROR(CheckInt8(*A, "A"));
  KILN_RETURN_IF_ERROR(CheckInt8(*B, "B"));
  const Value* azp = ctx.input(2);
  const Value* bzp = ctx.input(3);
  if (azp) KILN_RETURN_IF_ERROR(CheckSameDType(*A, "A", *azp, "a_zero_point"));
  if (bzp) KILN_RETURN_IF_ERROR(CheckSameDType(*B, "B", *bzp, "b_zero_point"));
  KILN_ASSIGN_OR_RETURN(SymShape out, MatMulShape(ctx, *A, *B));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, azp, "a_zero_point", RowsOf(*A), "rows of A"));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, bzp, "b_zero_point", ColsOf(*B), "columns of B"));
  ctx.SetOutput(0, DType::kInt32, out);
  return Status::Ok();
}

Status QLinearMatMulMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* A, Need(ctx, 0, "a"));
  KILN_ASSIGN_OR_RETURN(const Value* as, Need(ctx, 1, "a_scale"));
  KILN_ASSIGN_OR_RETURN(const Value* B, Need(ctx, 3, "b"));
  KILN_ASSIGN_OR_RETURN(const Value* bs, Need(ctx, 4, "b_scale"));
  KILN_ASSIGN_OR_RETURN(const Value* ys, Need(ctx, 6, "y_scale"));
  KILN_ASSIGN_OR_RETURN(const Value* yzp, Need(ctx, 7, "y_zero_point"));
  const Value* azp = ctx.input(2);
  const Value* bzp = ctx.input(5);
  KILN_RETURN_IF_ERROR(CheckInt8(*A, "a"));
  KILN_RETURN_IF_ERROR(CheckInt8(*B, "b"));
  KILN_RETURN_IF_ERROR(CheckInt8(*yzp, "y_zero_point"));
  KILN_RETURN_IF_ERROR(CheckScaleType(*as, "a_scale"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*as, "a_scale", *bs, "b_scale"));
  KILN_RETURN_IF_ERROR(CheckSameDType(*as, "a_scale", *ys, "y_scale"));
  KILN_RETURN_IF_ERROR(CheckScaleValues(*bs, "b_scale"));
  KILN_RETURN_IF_ERROR(CheckScaleValues(*ys, "y_scale"));
  if (azp) KILN_RETURN_IF_ERROR(CheckSameDType(*A, "a", *azp, "a_zero_point"));
  if (bzp) KILN_RETURN_IF_ERROR(CheckSameDType(*B, "b", *bzp, "b_zero_point"));
  KILN_ASSIGN_OR_RETURN(SymShape out, MatMulShape(ctx, *A, *B));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, as, "a_scale", RowsOf(*A), "rows of a"));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, azp, "a_zero_point", RowsOf(*A), "rows of a"));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, bs, "b_scale", ColsOf(*B), "columns of b"));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, bzp, "b_zero_point", ColsOf(*B), "columns of b"));
  if (!IsPerTensor(*ys)) return Unimplemented("input y_scale: expected one element, found " + Str(ys->shape));
  if (!IsPerTensor(*yzp)) return Unimplemented("input y_zero_point: expected one element, found " + Str(yzp->shape));
  ctx.SetOutput(0, yzp->dtype, out);
  return Status::Ok();
}

// ConvInteger and QLinearConv: X [N, C, spatial...], W [M, C/group, kernel...], output
// [N, M, window output...]. `w_params` are the per-output-channel (or per-tensor)
// parameters of W; `x_params` those of X and Y, which must be per tensor.
Result<SymShape> IntConvShape(MetaContext& ctx, const Value& X, const Value& W,
                              std::initializer_list<std::pair<const Value*, std::string_view>> w_params,
                              std::initializer_list<std::pair<const Value*, std::string_view>> x_params) {
  KILN_RETURN_IF_ERROR(CheckRank(X, "input x", 3, 5));
  if (W.rank() != X.rank())
    return InvalidArgument("input w: expected rank " + std::to_string(X.rank()) + " (the rank of x " +
                           Str(X.shape) + "), found " + Str(W.shape));
  int64_t group = ctx.attrs().GetInt("group", 1);
  if (group < 1) return InvalidArgument("attribute 'group': expected >= 1, found " + std::to_string(group));
  std::vector<int64_t> kernel;
  for (int i = 2; i < W.rank(); ++i) {
    auto k = W.shape[i].value();
    if (!k) return Unimplemented("expected static kernel dims in w, found " + Str(W.shape));
    kernel.push_back(*k);
  }
  if (ctx.attrs().Has("kernel_shape") && ctx.attrs().GetInts("kernel_shape") != kernel)
    return InvalidArgument("attribute 'kernel_shape': expected " + Str(kernel) + " (from w " + Str(W.shape) +
                           "), found " + Str(ctx.attrs().GetInts("kernel_shape")));
  const Sym& M = W.shape[0];
  if (auto m = M.value(); m && *m % group != 0)
    return InvalidArgument("output channels " + std::to_string(*m) + " (w dim 0) not divisible by group " +
                           std::to_string(group));
  KILN_RETURN_IF_ERROR(Unify(ctx, W.shape[1] * Sym(group), X.shape[1], "input channels (w dim 1 x group)"));
  for (auto [p, what] : w_params) {
    if (!p || IsPerTensor(*p)) continue;
    if (p->rank() != 1)
      return InvalidArgument("input " + std::string(what) + ": expected a scalar or a 1-D tensor of output channels, "
                             "found " + Str(p->shape));
    KILN_RETURN_IF_ERROR(Unify(ctx, M, p->shape[0], "input " + std::string(what) + " dim 0 (output channels)"));
  }
  for (auto [p, what] : x_params)
    if (p && !IsPerTensor(*p))
      return InvalidArgument("input " + std::string(what) + ": expected one element, found " + Str(p->shape));
  KILN_ASSIGN_OR_RETURN(Window w, ReadWindow(ctx.attrs(), kernel, true));
  KILN_ASSIGN_OR_RETURN(SymShape sp, WindowOutput(ctx, SymShape(X.shape.begin() + 2, X.shape.end()), w));
  SymShape out = {X.shape[0], M};
  out.insert(out.end(), sp.begin(), sp.end());
  return out;
}

Status ConvIntegerMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "x"));
  KILN_ASSIGN_OR_RETURN(const Value* W, Need(ctx, 1, "w"));
  const Value* xzp = ctx.input(2);
  const Value* wzp = ctx.input(3);
  KILN_RETURN_IF_ERROR(CheckInt8(*X, "x"));
  KILN_RETURN_IF_ERROR(CheckInt8(*W, "w"));
  if (xzp) KILN_RETURN_IF_ERROR(CheckSameDType(*X, "x", *xzp, "x_zero_point"));
  if (wzp) KILN_RETURN_IF_ERROR(CheckSameDType(*W, "w", *wzp, "w_zero_point"));
  KILN_ASSIGN_OR_RETURN(SymShape out, IntConvShape(ctx, *X, *W, {{wzp, "w_zero_point"}}, {{xzp, "x_zero_point"}}));
  ctx.SetOutput(0, DType::kInt32, out);
  return Status::Ok();
}

Status QLinearConvMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* X, Need(ctx, 0, "x"));
  KILN_ASSIGN_OR_RETURN(const Value* xs, Need(ctx, 1, "x_scale"));
  KILN_ASSIGN_OR_RETURN(const Value* W, Need(ctx, 3, "w"));
  KILN_ASSIGN_OR_RETURN(const Value* ws, Need(ctx, 4, "w_scale"));
  KILN_ASSIGN_OR_RETURN(const Value* ys, Need(ctx, 6, "y_scale"));
  const Value* xzp = ctx.input(2);
  const Value* wzp = ctx.input(5);
  const Value* yzp = ctx.input(7);
  const Value* bias = ctx.input(8);
  KILN_RETURN_IF_ERROR(CheckInt8(*X, "x"));
  KILN_RETURN_IF_ERROR(CheckInt8(*W, "w"));
  if (xs->dtype != DType::kFloat32) return InvalidArgument("input x_scale: expected float32, found " + DTypeStr(xs->dtype));
  KILN_RETURN_IF_ERROR(CheckSameDType(*xs, "x_scale", *ws, "w_scale"));
  for (const auto& [v, what] : {std::pair{xs, "x_scale"}, {ws, "w_scale"}, {ys, "y_scale"}})
    KILN_RETURN_IF_ERROR(CheckScaleValues(*v, what));
  KILN_RETURN_IF_ERROR(CheckSameDType(*xs, "x_scale", *ys, "y_scale"));
  if (xzp) KILN_RETURN_IF_ERROR(CheckSameDType(*X, "x", *xzp, "x_zero_point"));
  if (wzp) KILN_RETURN_IF_ERROR(CheckSameDType(*W, "w", *wzp, "w_zero_point"));
  if (yzp) KILN_RETURN_IF_ERROR(CheckInt8(*yzp, "y_zero_point"));
  if (bias) {
    if (bias->dtype != DType::kInt32) return InvalidArgument("input B: expected int32, found " + DTypeStr(bias->dtype));
    KILN_RETURN_IF_ERROR(CheckRank(*bias, "input B", 1, 1));
    KILN_RETURN_IF_ERROR(Unify(ctx, W->shape[0], bias->shape[0], "input B dim 0 (output channels)"));
  }
  KILN_ASSIGN_OR_RETURN(SymShape out, IntConvShape(ctx, *X, *W, {{ws, "w_scale"}, {wzp, "w_zero_point"}},
                                                   {{xs, "x_scale"}, {xzp, "x_zero_point"}, {ys, "y_scale"},
                                                    {yzp, "y_zero_point"}}));
  ctx.SetOutput(0, yzp ? yzp->dtype : X->dtype, out);
  return Status::Ok();
}

// onnxruntime's com.microsoft QGemm (docs/ContribOperators.md in its repository): Y = alpha *
// a_scale * b_scale * ((A' - a_zero_point) (B' - b_zero_point) + C), requantized by y_scale and
// y_zero_point, or float32 without them. A and B 2-D (transA, transB), C int32 broadcast to
// [M, N] (in the scale alpha * a_scale * b_scale, zero point 0); b_scale and b_zero_point one
// or N elements. What the fusion stage folds DequantizeLinear -> Gemm -> QuantizeLinear into.
Status QGemmMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* A, Need(ctx, 0, "A"));
  KILN_ASSIGN_OR_RETURN(const Value* as, Need(ctx, 1, "a_scale"));
  KILN_ASSIGN_OR_RETURN(const Value* B, Need(ctx, 3, "B"));
  KILN_ASSIGN_OR_RETURN(const Value* bs, Need(ctx, 4, "b_scale"));
  const Value *azp = ctx.input(2), *bzp = ctx.input(5), *C = ctx.input(6), *ys = ctx.input(7), *yzp = ctx.input(8);
  KILN_RETURN_IF_ERROR(CheckInt8(*A, "A"));
  KILN_RETURN_IF_ERROR(CheckInt8(*B, "B"));
  KILN_RETURN_IF_ERROR(CheckRank(*A, "input A", 2, 2));
  KILN_RETURN_IF_ERROR(CheckRank(*B, "input B", 2, 2));
  for (const Value* v : {as, bs, ys})
    if (v && v->dtype != DType::kFloat32)
      return InvalidArgument("QGemm's scales must be float32, found " + DTypeStr(v->dtype));
  for (const auto& [v, what] : {std::pair{as, "a_scale"}, {bs, "b_scale"}, {ys, "y_scale"}})
    if (v) KILN_RETURN_IF_ERROR(CheckScaleValues(*v, what));
  if (azp) KILN_RETURN_IF_ERROR(CheckSameDType(*A, "A", *azp, "a_zero_point"));
  if (bzp) KILN_RETURN_IF_ERROR(CheckSameDType(*B, "B", *bzp, "b_zero_point"));
  if (yzp && !ys) return InvalidArgument("input y_zero_point without y_scale");
  if (yzp) KILN_RETURN_IF_ERROR(CheckInt8(*yzp, "y_zero_point"));
  const bool ta = ctx.attrs().GetInt("transA", 0) != 0, tb = ctx.attrs().GetInt("transB", 0) != 0;
  const Sym M = A->shape[ta ? 1 : 0], K = A->shape[ta ? 0 : 1], N = B->shape[tb ? 0 : 1];
  KILN_RETURN_IF_ERROR(Unify(ctx, K, B->shape[tb ? 1 : 0], "inner dims of A " + Str(A->shape) + " and B " +
                                                               Str(B->shape)));
  for (const auto& [v, what] : {std::pair{azp, "a_zero_point"}, {ys, "y_scale"}, {yzp, "y_zero_point"}, {as, "a_scale"}})
    if (v && !IsPerTensor(*v))
      return InvalidArgument("input " + std::string(what) + ": expected one element, found " + Str(v->shape));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, bs, "b_scale", N, "columns of B"));
  KILN_RETURN_IF_ERROR(CheckMatMulParam(ctx, bzp, "b_zero_point", N, "columns of B"));
  if (C) {
    if (C->dtype != DType::kInt32) return InvalidArgument("input C: expected int32, found " + DTypeStr(C->dtype));
    KILN_RETURN_IF_ERROR(CheckRank(*C, "input C", 0, 2));
    // Unidirectional broadcasting to [M, N]: each dim 1 or the output's.
    const auto dim = [&](const Sym& c, const Sym& want, const char* what) {
      return c.value() == 1 ? Status::Ok() : Unify(ctx, want, c, what);
    };
    if (C->rank() >= 1) KILN_RETURN_IF_ERROR(dim(C->shape[C->rank() - 1], N, "input C's last dim (N)"));
    if (C->rank() == 2) KILN_RETURN_IF_ERROR(dim(C->shape[0], M, "input C's first dim (M)"));
  }
  ctx.SetOutput(0, ys ? (yzp ? yzp->dtype : DType::kUInt8) : DType::kFloat32, {M, N});
  return Status::Ok();
}

}  // namespace

void RegisterQuantizeOps(std::vector<OpDef>& ops) {
  Def(ops, "QGemm", QGemmMeta);
  Def(ops, "QuantizeLinear", QuantizeLinearMeta);
  Def(ops, "DequantizeLinear", DequantizeLinearMeta);
  Def(ops, "DynamicQuantizeLinear", DynamicQuantizeLinearMeta);
  Def(ops, "MatMulInteger", MatMulIntegerMeta);
  Def(ops, "QLinearMatMul", QLinearMatMulMeta);
  Def(ops, "ConvInteger", ConvIntegerMeta);
  Def(ops, "QLinearConv", QLinearConvMeta);
}

}  // namespace kiln::ir
