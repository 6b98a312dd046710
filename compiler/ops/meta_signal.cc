// Meta functions of the signal ops: DFT, STFT, the window generators (HannWindow,
// HammingWindow, BlackmanWindow) and MelWeightMatrix. Lengths and sizes given as inputs
// set output shapes: constant at compile time, or (a window's size) a value input's symbol.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// The single element of a scalar (or one-element) integer input that sets a shape.
Result<int64_t> ConstScalar(const Value& v, std::string_view what) {
  if (!IsInteger(v.dtype)) return InvalidArgument("input " + std::string(what) + ": expected an integer, found " + DTypeStr(v.dtype));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> e, NeedConstInts(v, "input " + std::string(what)));
  if (e.size() != 1) return InvalidArgument("input " + std::string(what) + ": expected one element, found " + Str(e));
  return e[0];
}

// The same, or a value symbol when the input is a value input (passes/value_inputs.h).
Result<Sym> ScalarElement(const Value& v, std::string_view what) {
  if (!IsInteger(v.dtype)) return InvalidArgument("input " + std::string(what) + ": expected an integer, found " + DTypeStr(v.dtype));
  KILN_ASSIGN_OR_RETURN(std::vector<Sym> e, NeedElements(v, "input " + std::string(what)));
  if (e.size() != 1) return InvalidArgument("input " + std::string(what) + ": expected one element, found " + Str(e));
  return e[0];
}

Status CheckSignalDType(const Value& v, std::string_view what) {
  if (v.dtype != DType::kFloat32 && v.dtype != DType::kFloat64)
    return Unimplemented("input " + std::string(what) + ": Kiln transforms float32 and float64, found " + DTypeStr(v.dtype));
  return Status::Ok();
}

// DFT: x [..., n, 1 (real) or 2 (complex)]; axis is an attribute before opset 20 (the
// importer makes the opset-17 default explicit) and an input from opset 20 (default -2).
Status DftMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "input"));
  KILN_RETURN_IF_ERROR(CheckSignalDType(*x, "input"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input", 2, 1000));
  const Sym& last = x->shape.back();
  if (auto c = last.value(); !c || (*c != 1 && *c != 2))
    return InvalidArgument("input: expected a last dim of 1 (real) or 2 (complex), found " + Str(x->shape));
  int64_t axis = -2;
  if (ctx.attrs().Has("axis")) axis = ctx.attrs().GetInt("axis", 1);
  else if (const Value* a = Optional(ctx, 2)) {
    KILN_ASSIGN_OR_RETURN(axis, ConstScalar(*a, "axis"));
  }
  const int rank = x->rank();
  if (axis < -rank || axis >= rank - 1 || axis == -1)
    return InvalidArgument("axis: expected a signal axis in [" + std::to_string(-rank) + ", " + std::to_string(-2) +
                           "] or [0, " + std::to_string(rank - 2) + "], found " + std::to_string(axis));
  const int ax = static_cast<int>(axis < 0 ? axis + rank : axis);
  const bool inverse = ctx.attrs().GetInt("inverse", 0) != 0, onesided = ctx.attrs().GetInt("onesided", 0) != 0;
  if (onesided && !inverse && last.value() == 2)
    return InvalidArgument("attribute 'onesided': a forward one-sided DFT needs a real input (last dim 1), found " +
                           Str(x->shape));
  Sym n;
  if (const Value* l = Optional(ctx, 1)) {
    KILN_ASSIGN_OR_RETURN(int64_t len, ConstScalar(*l, "dft_length"));
    if (len < 1) return InvalidArgument("input dft_length: expected >= 1, found " + std::to_string(len));
    n = Sym(len);
  } else {
    n = inverse && onesided ? AddC(x->shape[ax] * Sym(2), -2) : x->shape[ax];
  }
  SymShape out = x->shape;
  out[ax] = onesided && !inverse ? AddC(FloorDiv(n, Sym(2)), 1) : n;
  out.back() = Sym(inverse && onesided ? 1 : 2);
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

Status StftMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "signal"));
  KILN_ASSIGN_OR_RETURN(const Value* step_v, Need(ctx, 1, "frame_step"));
  KILN_RETURN_IF_ERROR(CheckSignalDType(*x, "signal"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input signal", 3, 3));
  auto c = x->shape[2].value();
  if (!c || (*c != 1 && *c != 2))
    return InvalidArgument("input signal: expected [batch, length, 1 or 2], found " + Str(x->shape));
  KILN_ASSIGN_OR_RETURN(int64_t step, ConstScalar(*step_v, "frame_step"));
  if (step < 1) return InvalidArgument("input frame_step: expected >= 1, found " + std::to_string(step));
  const Value* window = Optional(ctx, 2);
  std::optional<int64_t> len;
  if (const Value* l = Optional(ctx, 3)) {
    KILN_ASSIGN_OR_RETURN(len, ConstScalar(*l, "frame_length"));
  }
  if (window) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*x, "signal", *window, "window"));
    KILN_RETURN_IF_ERROR(CheckRank(*window, "input window", 1, 1));
    auto w = window->shape[0].value();
    if (!w) return Unimplemented("input window: expected a static length, found " + Str(window->shape));
    if (len && *len != *w)
      return InvalidArgument("input frame_length (" + std::to_string(*len) + ") differs from the window's length (" +
                             std::to_string(*w) + ")");
    len = *w;
  }
  if (!len) return InvalidArgument("expected input window or frame_length, found neither");
  if (*len < 1) return InvalidArgument("frame_length: expected >= 1, found " + std::to_string(*len));
  const bool onesided = ctx.attrs().GetInt("onesided", 1) != 0;
  if (onesided && *c == 2)
    return InvalidArgument("attribute 'onesided': a one-sided STFT needs a real signal (last dim 1), found " +
                           Str(x->shape));
  auto n = x->shape[1].value();
  if (!n) return Unimplemented("input signal: expected a static length, found " + Str(x->shape));
  if (*n < *len)
    return InvalidArgument("input signal: length " + std::to_string(*n) + " is shorter than one frame (" +
                           std::to_string(*len) + ")");
  const int64_t frames = 1 + (*n - *len) / step;
  ctx.SetOutput(0, x->dtype, {x->shape[0], Sym(frames), Sym(onesided ? *len / 2 + 1 : *len), Sym(2)});
  return Status::Ok();
}

Result<DType> OutputDatatype(MetaContext& ctx) {
  const int64_t t = ctx.attrs().GetInt("output_datatype", 1);
  if (t < 0 || t > 1000 || !IsValidDType(static_cast<int32_t>(t)))
    return Unimplemented("attribute 'output_datatype': ONNX type " + std::to_string(t) + " is not a type Kiln has");
  const DType d = static_cast<DType>(t);
  if (!IsNumeric(d) || d == DType::kFloat16 || d == DType::kBFloat16)
    return Unimplemented("attribute 'output_datatype': Kiln generates float32, float64 and integer types, found " +
                         DTypeStr(d));
  return d;
}

Status WindowMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* size, Need(ctx, 0, "size"));
  KILN_ASSIGN_OR_RETURN(Sym n, ScalarElement(*size, "size"));
  if (n.is_const() && *n.value() < 0) return InvalidArgument("input size: expected >= 0, found " + n.ToString());
  if (int64_t p = ctx.attrs().GetInt("periodic", 1); p != 0 && p != 1)
    return InvalidArgument("attribute 'periodic': expected 0 or 1, found " + std::to_string(p));
  KILN_ASSIGN_OR_RETURN(DType dt, OutputDatatype(ctx));
  ctx.SetOutput(0, dt, {n});
  return Status::Ok();
}

Status MelWeightMatrixMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* bins_v, Need(ctx, 0, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(const Value* len_v, Need(ctx, 1, "dft_length"));
  KILN_ASSIGN_OR_RETURN(const Value* rate_v, Need(ctx, 2, "sample_rate"));
  KILN_ASSIGN_OR_RETURN(const Value* lo_v, Need(ctx, 3, "lower_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(const Value* hi_v, Need(ctx, 4, "upper_edge_hertz"));
  KILN_ASSIGN_OR_RETURN(int64_t bins, ConstScalar(*bins_v, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(int64_t len, ConstScalar(*len_v, "dft_length"));
  if (!IsInteger(rate_v->dtype))
    return InvalidArgument("input sample_rate: expected an integer, found " + DTypeStr(rate_v->dtype));
  if (lo_v->dtype != DType::kFloat32 || hi_v->dtype != DType::kFloat32)
    return Unimplemented("inputs lower_edge_hertz and upper_edge_hertz: expected float32, found " +
                         DTypeStr(lo_v->dtype) + " and " + DTypeStr(hi_v->dtype));
  if (bins < 1 || len < 1)
    return InvalidArgument("inputs num_mel_bins and dft_length: expected >= 1, found " + std::to_string(bins) + " and " +
                           std::to_string(len));
  KILN_ASSIGN_OR_RETURN(DType dt, OutputDatatype(ctx));
  ctx.SetOutput(0, dt, {Sym(len / 2 + 1), Sym(bins)});
  return Status::Ok();
}

}  // namespace

void RegisterSignalOps(std::vector<OpDef>& ops) {
  Def(ops, "DFT", DftMeta);
  Def(ops, "STFT", StftMeta);
  Def(ops, "HannWindow", WindowMeta);
  Def(ops, "HammingWindow", WindowMeta);
  Def(ops, "BlackmanWindow", WindowMeta);
  Def(ops, "MelWeightMatrix", MelWeightMatrixMeta);
}

}  // namespace kiln::ir
