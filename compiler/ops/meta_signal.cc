// Meta functions of the signal ops: DFT, STFT, the window generators (HannWindow,
// HammingWindow, BlackmanWindow) and MelWeightMatrix. Lengths and sizes given as inputs
// set output shapes: constant at compile time, or (a window's size, STFT's frame_step and
// frame_length, MelWeightMatrix's num_mel_bins and dft_length) a value input's symbol.
#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"

namespace kiln::ir {
using namespace meta;
namespace {

// The single element of a scalar (or one-element) integer input that sets a shape: a constant,
// or a value symbol when the input is a value input (passes/value_inputs.h).
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
  // The axis and dft_length: constants, or value symbols read at each call (passes/value_inputs.h),
  // which the CPU kernel reads too.
  Sym axis(-2);
  if (ctx.attrs().Has("axis")) axis = Sym(ctx.attrs().GetInt("axis", 1));
  else if (const Value* a = Optional(ctx, 2)) {
    KILN_ASSIGN_OR_RETURN(axis, ScalarElement(*a, "axis"));
  }
  const int rank = x->rank();
  const Sym in_range = Lt(Sym(-rank - 1), axis) * Lt(axis, Sym(rank - 1)) * (Sym(1) - Eq(axis, Sym(-1)));
  KILN_RETURN_IF_ERROR(Require(ctx, in_range,
                               "axis: expected a signal axis in [" + std::to_string(-rank) + ", " + std::to_string(-2) +
                                   "] or [0, " + std::to_string(rank - 2) + "], found " + axis.ToString(),
                               "whose axis must be a signal axis (not the last)"));
  const bool inverse = ctx.attrs().GetInt("inverse", 0) != 0, onesided = ctx.attrs().GetInt("onesided", 0) != 0;
  if (onesided && !inverse && last.value() == 2)
    return InvalidArgument("attribute 'onesided': a forward one-sided DFT needs a real input (last dim 1), found " +
                           Str(x->shape));
  std::optional<Sym> length;
  if (const Value* l = Optional(ctx, 1)) {
    KILN_ASSIGN_OR_RETURN(length, ScalarElement(*l, "dft_length"));
    KILN_RETURN_IF_ERROR(Require(ctx, Lt(Sym(0), *length),
                                 "input dft_length: expected >= 1, found " + length->ToString(),
                                 "whose dft_length must be >= 1"));
  }
  SymShape out = x->shape;
  for (int i = 0; i + 1 < rank; ++i) {
    const Sym named = NamesDim(axis, i, rank);
    if (named.is_const() && *named.value() == 0) continue;
    const Sym n = length ? *length : inverse && onesided ? AddC(x->shape[i] * Sym(2), -2) : x->shape[i];
    const Sym transformed = onesided && !inverse ? AddC(FloorDiv(n, Sym(2)), 1) : n;
    out[i] = named * transformed + (Sym(1) - named) * x->shape[i];
  }
  out.back() = Sym(inverse && onesided ? 1 : 2);
  ctx.SetOutput(0, x->dtype, out);
  return Status::Ok();
}

// frame_step and frame_length are constants or a value input's symbols (passes/value_inputs.h),
// which guards check at each call; the CPU kernel reads both.
Status StftMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  KILN_ASSIGN_OR_RETURN(const Value* x, Need(ctx, 0, "signal"));
  KILN_ASSIGN_OR_RETURN(const Value* step_v, Need(ctx, 1, "frame_step"));
  KILN_RETURN_IF_ERROR(CheckSignalDType(*x, "signal"));
  KILN_RETURN_IF_ERROR(CheckRank(*x, "input signal", 3, 3));
  auto c = x->shape[2].value();
  if (!c || (*c != 1 && *c != 2))
    return InvalidArgument("input signal: expected [batch, length, 1 or 2], found " + Str(x->shape));
  KILN_ASSIGN_OR_RETURN(Sym step, ScalarElement(*step_v, "frame_step"));
  KILN_RETURN_IF_ERROR(Require(ctx, Lt(Sym(0), step), "input frame_step: expected >= 1, found " + step.ToString(),
                               "whose frame_step must be >= 1"));
  const Value* window = Optional(ctx, 2);
  std::optional<Sym> len;
  if (const Value* l = Optional(ctx, 3)) {
    KILN_ASSIGN_OR_RETURN(len, ScalarElement(*l, "frame_length"));
  }
  if (window) {
    KILN_RETURN_IF_ERROR(CheckSameDType(*x, "signal", *window, "window"));
    KILN_RETURN_IF_ERROR(CheckRank(*window, "input window", 1, 1));
    const Sym& w = window->shape[0];
    if (len) KILN_RETURN_IF_ERROR(Unify(ctx, w, *len, "input frame_length (the window's length)"));
    len = w;
  }
  if (!len) return InvalidArgument("expected input window or frame_length, found neither");
  KILN_RETURN_IF_ERROR(Require(ctx, Lt(Sym(0), *len), "frame_length: expected >= 1, found " + len->ToString(),
                               "whose frame_length must be >= 1"));
  const bool onesided = ctx.attrs().GetInt("onesided", 1) != 0;
  if (onesided && *c == 2)
    return InvalidArgument("attribute 'onesided': a one-sided STFT needs a real signal (last dim 1), found " +
                           Str(x->shape));
  const Sym& n = x->shape[1];
  const Sym span = SubS(n, *len);
  KILN_RETURN_IF_ERROR(Require(ctx, Lt(Sym(-1), span),
                               "input signal: length " + n.ToString() + " is shorter than one frame (" +
                                   len->ToString() + ")",
                               "whose signal must hold one frame"));
  const Sym frames = AddC(FloorDiv(span, step), 1);
  ctx.SetOutput(0, x->dtype, {x->shape[0], frames, onesided ? AddC(FloorDiv(*len, Sym(2)), 1) : *len, Sym(2)});
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
  // Constants or a value input's symbols (passes/value_inputs.h); the CPU kernel reads both.
  KILN_ASSIGN_OR_RETURN(Sym bins, ScalarElement(*bins_v, "num_mel_bins"));
  KILN_ASSIGN_OR_RETURN(Sym len, ScalarElement(*len_v, "dft_length"));
  if (!IsInteger(rate_v->dtype))
    return InvalidArgument("input sample_rate: expected an integer, found " + DTypeStr(rate_v->dtype));
  if (lo_v->dtype != DType::kFloat32 || hi_v->dtype != DType::kFloat32)
    return Unimplemented("inputs lower_edge_hertz and upper_edge_hertz: expected float32, found " +
                         DTypeStr(lo_v->dtype) + " and " + DTypeStr(hi_v->dtype));
  KILN_RETURN_IF_ERROR(Require(ctx, Lt(Sym(0), bins) * Lt(Sym(0), len),
                               "inputs num_mel_bins and dft_length: expected >= 1, found " + bins.ToString() +
                                   " and " + len.ToString(),
                               "whose num_mel_bins and dft_length must be >= 1"));
  KILN_ASSIGN_OR_RETURN(DType dt, OutputDatatype(ctx));
  ctx.SetOutput(0, dt, {AddC(FloorDiv(len, Sym(2)), 1), bins});
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
