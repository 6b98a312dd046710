// Conv, ConvTranspose and pooling on cuDNN 9: ONNX geometry (the CPU kernels' rules), the
// mapping onto cuDNN descriptors (PlanDnn), and the library object caching descriptors and
// algorithms per plan. NOTE: the library calls below have never run on a GPU (see dnn.h).
#include "runtime/cuda/dnn.h"

#include <algorithm>
#include <limits>
#include <string>
#include <unordered_map>

#include "runtime/kernels/epilogue.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/nhwc_conv_int8.h"

namespace kiln::cuda {
namespace {

using cpu::DTypeStr;

Status Invalid(std::string_view op, const std::string& msg) {
  return InvalidArgument(std::string(op) + ": " + msg);
}
Status Refused(std::string_view op, const std::string& msg) {
  return Unimplemented(std::string(op) + ": " + msg);
}

const DeviceTensor* OptionalTensor(std::span<const DeviceTensor> ts, size_t i) {
  return i < ts.size() && ts[i].present() ? &ts[i] : nullptr;
}

bool FitsInt32(int64_t v) { return v >= 0 && v <= std::numeric_limits<int32_t>::max(); }

// strides / dilations: absent means all `def`; otherwise one value >= 1 per spatial axis.
Status ReadSpatial(const AttrMap& attrs, const char* name, int sr, int64_t def, int64_t* dst,
                   std::string_view op) {
  const auto& v = attrs.GetInts(name);
  if (v.empty()) {
    std::fill(dst, dst + sr, def);
    return Status::Ok();
  }
  if (static_cast<int>(v.size()) != sr) {
    return Invalid(op, std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                           std::to_string(sr) + " (one per spatial axis)");
  }
  for (int i = 0; i < sr; ++i) {
    if (v[i] < 1) return Invalid(op, std::string(name) + " must be >= 1, got " + std::to_string(v[i]));
    dst[i] = v[i];
  }
  return Status::Ok();
}

Status ReadPads(const AttrMap& attrs, std::string_view op, WindowGeometry* g) {
  const auto& pads = attrs.GetInts("pads");
  if (pads.empty()) return Status::Ok();
  if (static_cast<int>(pads.size()) != 2 * g->spatial) {
    return Invalid(op, "pads has " + std::to_string(pads.size()) + " values, expected " +
                           std::to_string(2 * g->spatial));
  }
  for (int i = 0; i < g->spatial; ++i) {
    if (pads[i] < 0 || pads[i + g->spatial] < 0) return Invalid(op, "pads must be >= 0");
    g->pad_begin[i] = pads[i];
    g->pad_end[i] = pads[i + g->spatial];
  }
  return Status::Ok();
}

// Checks shared by Conv and ConvTranspose; fills everything but the pads.
Status CommonConvGeometry(std::string_view op, const AttrMap& attrs, const DeviceTensor& x,
                          const DeviceTensor& w, const DeviceTensor& y, WindowGeometry* g) {
  *g = WindowGeometry{};
  if (!x.present() || !w.present() || !y.present())
    return Invalid(op, "expected inputs X and W and output Y");
  if (x.rank < 3 || x.rank > kMaxRank) {
    return Invalid(op, "input X must have rank 3 to " + std::to_string(kMaxRank) + ", got " + ShapeText(x));
  }
  if (w.rank != x.rank || y.rank != x.rank) {
    return Invalid(op,
                   "X " + ShapeText(x) + ", W " + ShapeText(w) + " and Y " + ShapeText(y) + " must have the same rank");
  }
  g->spatial = x.rank - 2;
  g->group = attrs.GetInt("group", 1);
  if (g->group < 1) return Invalid(op, "group must be >= 1, got " + std::to_string(g->group));
  for (int i = 0; i < g->spatial; ++i) {
    g->kernel[i] = w.dims[i + 2];
    g->in[i] = x.dims[i + 2];
    g->out[i] = y.dims[i + 2];
  }
  const auto& ks = attrs.GetInts("kernel_shape");
  if (!ks.empty() &&
      (static_cast<int>(ks.size()) != g->spatial || !std::equal(ks.begin(), ks.end(), g->kernel))) {
    return Invalid(op, "kernel_shape attribute does not match W " + ShapeText(w));
  }
  KILN_RETURN_IF_ERROR(ReadSpatial(attrs, "strides", g->spatial, 1, g->stride, op));
  KILN_RETURN_IF_ERROR(ReadSpatial(attrs, "dilations", g->spatial, 1, g->dilation, op));
  return Status::Ok();
}

int64_t EffectiveKernel(const WindowGeometry& g, int i) { return (g.kernel[i] - 1) * g.dilation[i] + 1; }

}  // namespace

Status ResolveConvGeometry(const AttrMap& attrs, const DeviceTensor& x, const DeviceTensor& w,
                           const DeviceTensor& y, WindowGeometry* g) {
  constexpr std::string_view kOp = "Conv";
  KILN_RETURN_IF_ERROR(CommonConvGeometry(kOp, attrs, x, w, y, g));
  const int64_t c = x.dims[1], m = w.dims[0];
  if (c % g->group != 0) {
    return Invalid(
        kOp, "group " + std::to_string(g->group) + " does not divide input channels " + std::to_string(c));
  }
  if (m % g->group != 0) {
    return Invalid(
        kOp, "group " + std::to_string(g->group) + " does not divide output channels " + std::to_string(m));
  }
  if (w.dims[1] != c / g->group) {
    return Invalid(kOp, "W " + ShapeText(w) + " has " + std::to_string(w.dims[1]) +
                            " input channels per group, expected " + std::to_string(c / g->group));
  }
  if (y.dims[0] != x.dims[0] || y.dims[1] != m) {
    return Invalid(kOp, "output " + ShapeText(y) + " must have batch " + std::to_string(x.dims[0]) + " and " +
                            std::to_string(m) + " channels");
  }
  const std::string_view auto_pad = attrs.GetString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < g->spatial; ++i) {
      const int64_t target = (g->in[i] + g->stride[i] - 1) / g->stride[i];
      const int64_t total =
          std::max<int64_t>(0, (target - 1) * g->stride[i] + EffectiveKernel(*g, i) - g->in[i]);
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pad_end[i] = total - g->pad_begin[i];
    }
  } else if (auto_pad == "NOTSET") {
    KILN_RETURN_IF_ERROR(ReadPads(attrs, kOp, g));
  } else if (auto_pad != "VALID") {
    return Invalid(kOp, "unknown auto_pad '" + std::string(auto_pad) + "'");
  }
  for (int i = 0; i < g->spatial; ++i) {
    const int64_t span = g->in[i] + g->pad_begin[i] + g->pad_end[i] - EffectiveKernel(*g, i);
    const int64_t expected = span < 0 ? 0 : span / g->stride[i] + 1;
    if (g->out[i] != expected) {
      return Invalid(kOp, "output spatial dim " + std::to_string(i) + " is " + std::to_string(g->out[i]) +
                              ", expected " + std::to_string(expected) + " from input " + ShapeText(x) +
                              ", kernel " + ShapeText(w) + " and the strides/pads/dilations");
    }
  }
  return Status::Ok();
}

Status ResolveConvTransposeGeometry(const AttrMap& attrs, const DeviceTensor& x, const DeviceTensor& w,
                                    const DeviceTensor& y, WindowGeometry* g) {
  constexpr std::string_view kOp = "ConvTranspose";
  KILN_RETURN_IF_ERROR(CommonConvGeometry(kOp, attrs, x, w, y, g));
  const int64_t c = x.dims[1];
  if (c % g->group != 0) {
    return Invalid(
        kOp, "group " + std::to_string(g->group) + " does not divide input channels " + std::to_string(c));
  }
  if (w.dims[0] != c) {
    return Invalid(kOp,
                   "W " + ShapeText(w) + " must have " + std::to_string(c) + " rows (input channels) in dim 0");
  }
  const int64_t m = w.dims[1] * g->group;
  if (y.dims[0] != x.dims[0] || y.dims[1] != m) {
    return Invalid(kOp, "output " + ShapeText(y) + " must have batch " + std::to_string(x.dims[0]) + " and " +
                            std::to_string(m) + " channels");
  }
  const auto& op_attr = attrs.GetInts("output_padding");
  if (!op_attr.empty()) {
    if (static_cast<int>(op_attr.size()) != g->spatial) {
      return Invalid(kOp, "output_padding has " + std::to_string(op_attr.size()) + " values, expected " +
                              std::to_string(g->spatial));
    }
    std::copy(op_attr.begin(), op_attr.end(), g->output_padding);
  }
  const std::string_view auto_pad = attrs.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return Invalid(kOp, "unknown auto_pad '" + std::string(auto_pad) + "'");
  }
  const bool from_output =
      auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" || !attrs.GetInts("output_shape").empty();
  for (int i = 0; i < g->spatial; ++i) {
    const int64_t full = g->stride[i] * (g->in[i] - 1) + g->output_padding[i] + EffectiveKernel(*g, i);
    if (from_output) {
      // The output size is given, so the pads are whatever makes it come out right, by the
      // spec's rule as the CPU kernel (runtime/kernels/conv.cc); a negative total (an output
      // past the full extent) gives negative pads, which PlanDnn refuses.
      const int64_t total = full - g->out[i];
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2)
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g->pad_end[i] = total - g->pad_begin[i];
    }
  }
  if (!from_output && auto_pad == "NOTSET") KILN_RETURN_IF_ERROR(ReadPads(attrs, kOp, g));
  for (int i = 0; i < g->spatial; ++i) {
    const int64_t expected = g->stride[i] * (g->in[i] - 1) + g->output_padding[i] + EffectiveKernel(*g, i) -
                             g->pad_begin[i] - g->pad_end[i];
    if (g->out[i] != expected) {
      return Invalid(kOp, "output spatial dim " + std::to_string(i) + " is " + std::to_string(g->out[i]) +
                              ", expected " + std::to_string(expected));
    }
  }
  return Status::Ok();
}

Status ResolvePoolGeometry(std::string_view op, const AttrMap& attrs, const DeviceTensor& x,
                           const DeviceTensor& y, WindowGeometry* g) {
  *g = WindowGeometry{};
  if (!x.present() || !y.present()) return Invalid(op, "expected input X and output Y");
  if (x.rank < 3 || x.rank > kMaxRank || y.rank != x.rank) {
    return Invalid(op, "X " + ShapeText(x) + " and Y " + ShapeText(y) + " must have the same rank, 3 or more");
  }
  if (y.dims[0] != x.dims[0] || y.dims[1] != x.dims[1]) {
    return Invalid(op, "output " + ShapeText(y) + " must keep batch and channels of " + ShapeText(x));
  }
  g->spatial = x.rank - 2;
  const int sr = g->spatial;
  const auto& ks = attrs.GetInts("kernel_shape");
  if (static_cast<int>(ks.size()) != sr) {
    return Invalid(
        op, "kernel_shape has " + std::to_string(ks.size()) + " values, expected " + std::to_string(sr));
  }
  const auto& st = attrs.GetInts("strides");
  const auto& dl = attrs.GetInts("dilations");
  const auto& pads = attrs.GetInts("pads");
  if ((!st.empty() && static_cast<int>(st.size()) != sr) ||
      (!dl.empty() && static_cast<int>(dl.size()) != sr) ||
      (!pads.empty() && static_cast<int>(pads.size()) != 2 * sr)) {
    return Invalid(
        op, "strides/dilations need " + std::to_string(sr) + " values and pads " + std::to_string(2 * sr));
  }
  const std::string_view auto_pad = attrs.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return Invalid(op, "unknown auto_pad '" + std::string(auto_pad) + "'");
  }
  for (int i = 0; i < sr; ++i) {
    g->kernel[i] = ks[i];
    g->stride[i] = st.empty() ? 1 : st[i];
    g->dilation[i] = dl.empty() ? 1 : dl[i];
    g->in[i] = x.dims[i + 2];
    g->out[i] = y.dims[i + 2];
    if (g->kernel[i] < 1 || g->stride[i] < 1 || g->dilation[i] < 1) {
      return Invalid(op, "kernel_shape, strides and dilations must be >= 1");
    }
    const int64_t eff_k = EffectiveKernel(*g, i);
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (g->out[i] - 1) * g->stride[i] + eff_k - g->in[i]);
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pad_end[i] = total - g->pad_begin[i];
    } else if (auto_pad == "NOTSET" && !pads.empty()) {
      g->pad_begin[i] = pads[i];
      g->pad_end[i] = pads[i + sr];
    }
    const int64_t span = g->in[i] + g->pad_begin[i] + g->pad_end[i] - eff_k;
    const int64_t floor_out = span < 0 ? 0 : span / g->stride[i] + 1;
    const int64_t ceil_out = span < 0 ? 0 : (span + g->stride[i] - 1) / g->stride[i] + 1;
    if (auto_pad == "NOTSET" && g->out[i] != floor_out && g->out[i] != ceil_out) {
      return Invalid(
          op, "output spatial dim " + std::to_string(i) + " is " + std::to_string(g->out[i]) + ", expected " +
                  std::to_string(floor_out) +
                  (ceil_out != floor_out ? " (or " + std::to_string(ceil_out) + " with ceil_mode)" : ""));
    }
  }
  return Status::Ok();
}

namespace {

// X, W and Y (or X and Y) of one dtype cuDNN takes here (float32, float16 or bfloat16), every
// dim and element count within int32.
Status CheckTensors(std::string_view op, std::initializer_list<const DeviceTensor*> ts) {
  const DeviceTensor& first = **ts.begin();
  if (first.dtype != DType::kFloat32 && first.dtype != DType::kFloat16 && first.dtype != DType::kBFloat16) {
    return Refused(op, "cuDNN runs float32, float16 and bfloat16 here, found " + DTypeStr(first.dtype) + " " +
                           ShapeText(first));
  }
  for (const DeviceTensor* t : ts) {
    if (t->dtype != first.dtype) {
      return Invalid(op, "operand " + ShapeText(*t) + " is " + DTypeStr(t->dtype) + ", expected " +
                             DTypeStr(first.dtype) + " (input X's dtype)");
    }
    if (!FitsInt32(t->num_elements)) {
      return Refused(op, "tensor " + ShapeText(*t) + " has more elements than cuDNN's int32 range");
    }
  }
  return Status::Ok();
}

// A bias (input 2, when present) has X's dtype, as cuDNN's bias descriptor takes Y's type.
Status CheckBiasDType(std::string_view op, const DeviceTensor* bias, const DeviceTensor& x) {
  if (bias && bias->dtype != x.dtype) {
    return Invalid(op, "bias " + ShapeText(*bias) + " is " + DTypeStr(bias->dtype) + ", expected " +
                           DTypeStr(x.dtype) + " (input X's dtype)");
  }
  return Status::Ok();
}

// cuDNN dims of an NC+spatial tensor: a 1-D op gets a unit height.
void CudnnDims(const DeviceTensor& t, int nb_dims, std::array<int32_t, 5>* out) {
  *out = {};
  int j = 0;
  (*out)[j++] = static_cast<int32_t>(t.dims[0]);
  (*out)[j++] = static_cast<int32_t>(t.dims[1]);
  if (t.rank == 3) (*out)[j++] = 1;
  for (int i = 2; i < t.rank && j < nb_dims; ++i) (*out)[j++] = static_cast<int32_t>(t.dims[i]);
}

// Window attributes for cuDNN: symmetric pads, int32 values, a unit leading axis for 1-D.
Status CudnnWindow(std::string_view op, const WindowGeometry& g, DnnPlan* p) {
  if (g.spatial < 1 || g.spatial > 3) {
    return Refused(op, std::to_string(g.spatial) + " spatial dims; cuDNN runs 1 to 3 here");
  }
  p->nb_dims = g.spatial == 3 ? 5 : 4;
  int j = 0;
  if (g.spatial == 1) {
    p->pad[j] = 0;
    p->stride[j] = 1;
    p->dilation[j] = 1;
    p->window[j] = 1;
    ++j;
  }
  for (int i = 0; i < g.spatial; ++i, ++j) {
    if (g.pad_begin[i] < 0 || g.pad_end[i] < 0) {
      return Refused(op, "negative pads (" + std::to_string(g.pad_begin[i]) + " before, " +
                             std::to_string(g.pad_end[i]) + " after, spatial axis " + std::to_string(i) +
                             "): an output_shape past the full extent");
    }
    if (g.pad_begin[i] != g.pad_end[i]) {
      return Refused(op, "asymmetric pads (" + std::to_string(g.pad_begin[i]) + " before, " +
                             std::to_string(g.pad_end[i]) + " after, spatial axis " + std::to_string(i) +
                             "): cuDNN's descriptors take one pad per axis");
    }
    const int64_t values[] = {g.pad_begin[i], g.stride[i], g.dilation[i], g.kernel[i], g.in[i], g.out[i]};
    for (int64_t v : values) {
      if (!FitsInt32(v)) return Refused(op, "a window size of " + std::to_string(v) + " is past int32");
    }
    p->pad[j] = static_cast<int32_t>(g.pad_begin[i]);
    p->stride[j] = static_cast<int32_t>(g.stride[i]);
    p->dilation[j] = static_cast<int32_t>(g.dilation[i]);
    p->window[j] = static_cast<int32_t>(g.kernel[i]);
  }
  if (!FitsInt32(g.group)) return Refused(op, "group past int32");
  p->group = static_cast<int32_t>(g.group);
  return Status::Ok();
}

Status PlanConv(const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                std::span<const DeviceTensor> outputs, DnnPlan* p) {
  constexpr std::string_view kOp = "Conv";
  if (inputs.size() < 2 || outputs.empty()) return Invalid(kOp, "expected inputs X and W and output Y");
  const DeviceTensor &x = inputs[0], &w = inputs[1], &y = outputs[0];
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(ResolveConvGeometry(attrs, x, w, y, &g));
  const DeviceTensor* bias = OptionalTensor(inputs, 2);
  const int64_t m = w.dims[0];
  if (bias && bias->num_elements != m) {
    return Invalid(kOp, "bias " + ShapeText(*bias) + " must have " + std::to_string(m) + " elements");
  }
  // The epilogue attributes and the residual, checked as the CPU kernel does (ReadEpilogue).
  cpu::EpilogueSpec spec;
  Status st = cpu::ParseEpilogue(attrs, &spec);
  if (!st.ok()) return Invalid(kOp, st.message());
  const DeviceTensor* r = OptionalTensor(inputs, cpu::kEpilogueResidualInput);
  if (spec.residual != (r != nullptr)) {
    return Invalid(kOp, spec.residual
                            ? "epilogue_residual = 1 but input 3 (the residual) is absent"
                            : "input 3 " + ShapeText(*r) + " is present but epilogue_residual is not 1");
  }
  if (r) {
    bool same = r->rank == y.rank && r->dtype == y.dtype;
    for (int i = 0; same && i < y.rank; ++i) same = r->dims[i] == y.dims[i];
    if (!same)
      return Invalid(kOp,
                     "residual " + ShapeText(*r) + " must have the output's shape " + ShapeText(y) + " and dtype");
  }
  KILN_RETURN_IF_ERROR(CheckTensors(kOp, {&x, &w, &y}));
  KILN_RETURN_IF_ERROR(CheckBiasDType(kOp, bias, x));
  p->op = DnnOp::kConv;
  p->dtype = x.dtype;
  p->empty = y.num_elements == 0;
  if (p->empty) return Status::Ok();
  if (x.num_elements == 0 || w.num_elements == 0) {
    return Refused(kOp, "an empty input " + ShapeText(x) + " or kernel " + ShapeText(w) + " with a non-empty output");
  }
  if (spec.activation != cpu::EpilogueActivation::kNone &&
      spec.activation != cpu::EpilogueActivation::kRelu) {
    return Refused(kOp, "epilogue activation '" + std::string(cpu::EpilogueActivationName(spec.activation)) +
                            "': cuDNN's fused convolution takes Relu only");
  }
  KILN_RETURN_IF_ERROR(CudnnWindow(kOp, g, p));
  CudnnDims(x, p->nb_dims, &p->x);
  CudnnDims(w, p->nb_dims, &p->w);
  CudnnDims(y, p->nb_dims, &p->y);
  p->bias = bias != nullptr;
  p->residual = r != nullptr;
  p->residual_first = r && spec.residual_first;
  p->relu = spec.activation == cpu::EpilogueActivation::kRelu;
  return Status::Ok();
}

// kiln.NhwcConvInt8 X [N, H, W, C], W [M, KH, KW, C], Y [N, OH, OW, M]: ONNX Conv's geometry on
// the NCHW views of them.
Status PlanConvInt8(const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                    std::span<const DeviceTensor> outputs, DnnPlan* p) {
  constexpr std::string_view kOp = cpu::kNhwcConvInt8Op;
  if (inputs.size() < 2 || outputs.empty()) return Invalid(kOp, "expected inputs X and W and output Y");
  const DeviceTensor &x = inputs[0], &w = inputs[1], &y = outputs[0];
  if (x.rank != 4 || w.rank != 4 || y.rank != 4) {
    return Invalid(kOp, "X " + ShapeText(x) + ", W " + ShapeText(w) + " and Y " + ShapeText(y) + " must be 4-D");
  }
  if (x.dtype != DType::kInt8 || w.dtype != DType::kInt8 || y.dtype != DType::kFloat32) {
    return Invalid(kOp, "expected int8 X and W and float32 Y, found " + DTypeStr(x.dtype) + ", " +
                            DTypeStr(w.dtype) + " -> " + DTypeStr(y.dtype));
  }
  // NCHW views: [N, C, H, W], [M, C, KH, KW], [N, M, OH, OW].
  const int64_t xd[] = {x.dims[0], x.dims[3], x.dims[1], x.dims[2]};
  const int64_t wd[] = {w.dims[0], w.dims[3], w.dims[1], w.dims[2]};
  const int64_t yd[] = {y.dims[0], y.dims[3], y.dims[1], y.dims[2]};
  const DeviceTensor xv{0, x.dtype, 4, xd, x.num_elements}, wv{0, w.dtype, 4, wd, w.num_elements},
      yv{0, y.dtype, 4, yd, y.num_elements};
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(ResolveConvGeometry(attrs, xv, wv, yv, &g));
  p->op = DnnOp::kConvInt8;
  p->dtype = DType::kInt8;
  p->empty = y.num_elements == 0;
  if (p->empty) return Status::Ok();
  for (const DeviceTensor* t : {&x, &w, &y}) {
    if (!FitsInt32(t->num_elements)) {
      return Refused(kOp, "tensor " + ShapeText(*t) + " has more elements than cuDNN's int32 range");
    }
  }
  if (x.num_elements == 0 || w.num_elements == 0) {
    return Refused(kOp, "an empty input " + ShapeText(x) + " or kernel " + ShapeText(w) + " with a non-empty output");
  }
  if (g.group != 1) return Refused(kOp, "groups: cuDNN's int8 convolution runs one group here");
  if (xd[1] % 4 != 0 || wd[0] % 4 != 0) {
    return Refused(kOp, "cuDNN's int8 convolution needs input and output channels that are multiples of 4, found " +
                            std::to_string(xd[1]) + " and " + std::to_string(wd[0]));
  }
  KILN_RETURN_IF_ERROR(CudnnWindow(kOp, g, p));
  CudnnDims(xv, p->nb_dims, &p->x);
  CudnnDims(wv, p->nb_dims, &p->w);
  CudnnDims(yv, p->nb_dims, &p->y);
  return Status::Ok();
}

Status PlanConvTranspose(const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                         std::span<const DeviceTensor> outputs, DnnPlan* p) {
  constexpr std::string_view kOp = "ConvTranspose";
  if (inputs.size() < 2 || outputs.empty()) return Invalid(kOp, "expected inputs X and W and output Y");
  const DeviceTensor &x = inputs[0], &w = inputs[1], &y = outputs[0];
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(ResolveConvTransposeGeometry(attrs, x, w, y, &g));
  const DeviceTensor* bias = OptionalTensor(inputs, 2);
  const int64_t m = y.dims[1];
  if (bias && bias->num_elements != m) {
    return Invalid(kOp, "bias " + ShapeText(*bias) + " must have " + std::to_string(m) + " elements");
  }
  cpu::EpilogueSpec spec;
  Status st = cpu::ParseEpilogue(attrs, &spec);
  if (!st.ok()) return Invalid(kOp, st.message());
  if (spec.any() || OptionalTensor(inputs, cpu::kEpilogueResidualInput)) {
    return Refused(kOp, "epilogues are folded into Conv, MatMul and Gemm only");
  }
  KILN_RETURN_IF_ERROR(CheckTensors(kOp, {&x, &w, &y}));
  KILN_RETURN_IF_ERROR(CheckBiasDType(kOp, bias, x));
  p->op = DnnOp::kConvTranspose;
  p->dtype = x.dtype;
  p->empty = y.num_elements == 0;
  if (p->empty) return Status::Ok();
  if (x.num_elements == 0 || w.num_elements == 0) {
    return Refused(kOp, "an empty input " + ShapeText(x) + " or kernel " + ShapeText(w) + " with a non-empty output");
  }
  for (int i = 0; i < g.spatial; ++i) {
    // Backward data checks that convolving Y gives X's size, which holds only below the stride.
    if (g.output_padding[i] < 0 || g.output_padding[i] >= g.stride[i]) {
      return Refused(kOp, "output_padding " + std::to_string(g.output_padding[i]) +
                              " is not below the stride " + std::to_string(g.stride[i]) +
                              " on spatial axis " + std::to_string(i));
    }
  }
  KILN_RETURN_IF_ERROR(CudnnWindow(kOp, g, p));
  // The backward-data problem: dy is X, dx is Y, and the filter [C, M/group, k...] is W.
  CudnnDims(x, p->nb_dims, &p->x);
  CudnnDims(w, p->nb_dims, &p->w);
  CudnnDims(y, p->nb_dims, &p->y);
  p->bias = bias != nullptr;
  return Status::Ok();
}

Status PlanPool(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                std::span<const DeviceTensor> outputs, DnnPlan* p) {
  if (inputs.empty() || outputs.empty()) return Invalid(op, "expected input X and output Y");
  const DeviceTensor &x = inputs[0], &y = outputs[0];
  WindowGeometry g;
  KILN_RETURN_IF_ERROR(ResolvePoolGeometry(op, attrs, x, y, &g));
  if (x.dtype != y.dtype) return Invalid(op, "output dtype differs from input dtype");
  const DeviceTensor* indices = OptionalTensor(outputs, 1);
  if (indices) return Refused(op, "the Indices output (cuDNN's pooling has none)");
  KILN_RETURN_IF_ERROR(CheckTensors(op, {&x, &y}));
  p->op = op == "MaxPool" ? DnnOp::kMaxPool : DnnOp::kAveragePool;
  p->dtype = x.dtype;
  p->count_include_pad = p->op == DnnOp::kAveragePool && attrs.GetInt("count_include_pad", 0) != 0;
  p->empty = y.num_elements == 0;
  if (p->empty) return Status::Ok();
  for (int i = 0; i < g.spatial; ++i) {
    if (g.dilation[i] != 1) return Refused(op, "dilations (cuDNN's pooling has none)");
    if (g.pad_begin[i] >= g.kernel[i] || g.pad_end[i] >= g.kernel[i]) {
      return Refused(op, "a pad as large as the window on spatial axis " + std::to_string(i));
    }
    const int64_t span = g.in[i] + g.pad_begin[i] + g.pad_end[i] - g.kernel[i];
    const int64_t floor_out = span < 0 ? 0 : span / g.stride[i] + 1;
    if (g.out[i] != floor_out) {
      return Refused(op, "output spatial dim " + std::to_string(i) + " is " + std::to_string(g.out[i]) +
                             " (ceil_mode); cuDNN computes the floor-mode size " + std::to_string(floor_out));
    }
  }
  KILN_RETURN_IF_ERROR(CudnnWindow(op, g, p));
  CudnnDims(x, p->nb_dims, &p->x);
  CudnnDims(y, p->nb_dims, &p->y);
  return Status::Ok();
}

}  // namespace

Status PlanDnn(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
               std::span<const DeviceTensor> outputs, DnnPlan* plan) {
  *plan = DnnPlan{};
  for (const DeviceTensor& t : inputs) {
    if (t.present() && (t.rank > kMaxRank || (t.rank > 0 && t.dims == nullptr))) {
      return Invalid(op, "an input of rank " + std::to_string(t.rank) + " without dims or past rank " +
                             std::to_string(kMaxRank));
    }
  }
  for (const DeviceTensor& t : outputs) {
    if (t.present() && (t.rank > kMaxRank || (t.rank > 0 && t.dims == nullptr))) {
      return Invalid(op, "an output of rank " + std::to_string(t.rank) + " without dims or past rank " +
                             std::to_string(kMaxRank));
    }
  }
  if (op == "Conv") return PlanConv(attrs, inputs, outputs, plan);
  if (op == "ConvTranspose") return PlanConvTranspose(attrs, inputs, outputs, plan);
  if (op == "MaxPool" || op == "AveragePool") return PlanPool(op, attrs, inputs, outputs, plan);
  if (op == cpu::kNhwcConvInt8Op) return PlanConvInt8(attrs, inputs, outputs, plan);
  return Unimplemented(std::string(op) + ": Kiln runs only Conv, ConvTranspose, MaxPool, AveragePool and " +
                       std::string(cpu::kNhwcConvInt8Op) + " on cuDNN");
}

// ---- Library object -----------------------------------------------------------------------------

namespace {

struct DnnPlanHash {
  size_t operator()(const DnnPlan& p) const {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
      h = (h ^ v) * 0x100000001b3ull;
      h ^= h >> 29;
    };
    mix(static_cast<uint64_t>(p.op) | static_cast<uint64_t>(p.nb_dims) << 8 | uint64_t{p.bias} << 16 |
        uint64_t{p.residual} << 17 | uint64_t{p.residual_first} << 18 | uint64_t{p.relu} << 19 |
uint64_t{p.count_include_pad} << 21 | uint64_t{p.empty} << 22 |
        static_cast<uint64_t>(static_cast<uint32_t>(p.group)) << 32);
    mix(static_cast<uint64_t>(p.dtype));
    for (const auto* a : {&p.x, &p.w, &p.y})
      for (int32_t v : *a) mix(static_cast<uint32_t>(v));
    for (const auto* a : {&p.pad, &p.stride, &p.dilation, &p.window})
      for (int32_t v : *a) mix(static_cast<uint32_t>(v));
    return static_cast<size_t>(h);
  }
};

struct CachedDnn {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t act = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  size_t workspace = 0;
};

void* Ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// Packed NCHW strides.
void PackedStrides(const int32_t* dims, int nb, int32_t* strides) {
  int32_t s = 1;
  for (int i = nb - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
}

// cuDNN's element type for a dtype PlanDnn accepted.
cudnnDataType_t DataType(DType dt) {
  switch (dt) {
    case DType::kFloat16: return CUDNN_DATA_HALF;
    case DType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    case DType::kInt8: return CUDNN_DATA_INT8;
    default: return CUDNN_DATA_FLOAT;
  }
}

// What PlanDnn cannot see: the device. cuDNN's bfloat16 convolutions (PSEUDO_BFLOAT16_CONFIG)
// and pooling need compute capability 8.0 (Ampere) or later.
Status DeviceRefusal(const DnnOptions& options, std::string_view op, const DnnPlan& p) {
  if (p.op == DnnOp::kConvInt8 && options.compute_capability < 61) {
    return Refused(op, "cuDNN's int8 convolution needs compute capability 6.1 or later, the device has " +
                           (options.compute_capability > 0 ? std::to_string(options.compute_capability / 10) +
                                                                 "." + std::to_string(options.compute_capability % 10)
                                                           : std::string("an unknown one")));
  }
  if (p.dtype == DType::kBFloat16 && options.compute_capability < 80) {
    return Refused(op, "bfloat16 needs compute capability 8.0 or later, the device has " +
                           (options.compute_capability > 0 ? std::to_string(options.compute_capability / 10) +
                                                                 "." + std::to_string(options.compute_capability % 10)
                                                           : std::string("an unknown one")));
  }
  return Status::Ok();
}

const char* OpName(DnnOp op) {
  switch (op) {
    case DnnOp::kConv: return "Conv";
    case DnnOp::kConvTranspose: return "ConvTranspose";
    case DnnOp::kMaxPool: return "MaxPool";
    case DnnOp::kAveragePool: return "AveragePool";
    case DnnOp::kConvInt8: return "kiln.NhwcConvInt8";
  }
  return "?";
}

}  // namespace

struct DnnLibrary::State {
  const Dnn* dnn = nullptr;
  DnnOptions options;
  cudnnHandle_t handle = nullptr;
  std::unordered_map<DnnPlan, CachedDnn, DnnPlanHash> cache;

  void Release(CachedDnn& e) const {
    // Destroy results are ignored: a destructor can do nothing useful with them.
    if (e.x) dnn->DestroyTensorDescriptor(e.x);
    if (e.y) dnn->DestroyTensorDescriptor(e.y);
    if (e.bias) dnn->DestroyTensorDescriptor(e.bias);
    if (e.w) dnn->DestroyFilterDescriptor(e.w);
    if (e.conv) dnn->DestroyConvolutionDescriptor(e.conv);
    if (e.act) dnn->DestroyActivationDescriptor(e.act);
    if (e.pool) dnn->DestroyPoolingDescriptor(e.pool);
    e = CachedDnn{};
  }

  ~State() {
    for (auto& [plan, entry] : cache) Release(entry);
    if (handle) dnn->Destroy(handle);
  }

  // The message is built only on failure: a steady-state Run formats no string.
  Status Check(cudnnStatus_t st, const std::string& what, const char* call) const {
    if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
    return CheckDnn(*dnn, st, what + ": " + call);
  }
  Status Check(cudnnStatus_t st, const CallName& what, const char* call) const {
    if (st == CUDNN_STATUS_SUCCESS) return Status::Ok();
    return Check(st, what.str(), call);
  }
  // A compute call that cuDNN refuses when it runs (CUDNN_STATUS_NOT_SUPPORTED or one of its
  // sub-codes: no kernel for this configuration after all) is kUnimplemented, as when no
  // algorithm is found: the CUDA backend then runs the op on the CPU and reports why
  // (Stats::last_fallbacks). Any other failure stays kDeviceError.
  Status CheckRun(cudnnStatus_t st, const CallName& what, const char* call) const {
    Status s = Check(st, what, call);
    if (!s.ok() && CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED)
      return Status(StatusCode::kUnimplemented, std::string(s.message()));
    return s;
  }

  // A tensor of NCHW-ordered `dims`, packed NCHW, or packed NHWC with `nhwc` (4-D).
  Status Tensor(const int32_t* dims, int nb, DType dtype, cudnnTensorDescriptor_t* out, const std::string& what,
                bool nhwc = false) const {
    KILN_RETURN_IF_ERROR(Check(dnn->CreateTensorDescriptor(out), what, "cudnnCreateTensorDescriptor"));
    int32_t strides[5];
    PackedStrides(dims, nb, strides);
    if (nhwc) {
      strides[1] = 1;
      strides[3] = dims[1];
      strides[2] = dims[3] * dims[1];
      strides[0] = dims[2] * dims[3] * dims[1];
    }
    return Check(dnn->SetTensorNdDescriptor(*out, DataType(dtype), nb, dims, strides), what,
                 "cudnnSetTensorNdDescriptor");
  }

  // Whether an algorithm rated for `math` may run: float32 takes FMA (or default) math unless
  // TF32 is allowed; float16 and bfloat16 take any but CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
  // (which may convert data to another 16-bit type), tensor cores accumulating in float32.
  bool MathAllowed(cudnnMathType_t math, DType dtype) const {
    if (dtype != DType::kFloat32) return math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    return options.allow_tf32 || math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
  }

  // The first usable perf result: status SUCCESS, within the workspace cap, of an allowed math
  // type; deterministic ones first.
  template <typename Perf>
  const Perf* Choose(const Perf* perf, int count, DType dtype) const {
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < count; ++i) {
        const Perf& r = perf[i];
        if (r.status != CUDNN_STATUS_SUCCESS || r.memory > options.max_workspace_bytes) continue;
        if (!MathAllowed(r.mathType, dtype)) continue;
        if (pass == 0 && r.determinism != CUDNN_DETERMINISTIC) continue;
        return &r;
      }
    }
    return nullptr;
  }

  Status BuildConv(const DnnPlan& p, const std::string& what, CachedDnn* e) const {
    const int nb = p.nb_dims, sr = nb - 2;
    // Conv and kiln.NhwcConvInt8: x -> y. ConvTranspose is the backward data of the convolution y -> x.
    const bool forward = p.op != DnnOp::kConvTranspose, int8 = p.op == DnnOp::kConvInt8;
    KILN_RETURN_IF_ERROR(Tensor(p.x.data(), nb, p.dtype, &e->x, what + " (X)", int8));
    KILN_RETURN_IF_ERROR(Tensor(p.y.data(), nb, int8 ? DType::kFloat32 : p.dtype, &e->y, what + " (Y)", int8));
    KILN_RETURN_IF_ERROR(Check(dnn->CreateFilterDescriptor(&e->w), what, "cudnnCreateFilterDescriptor"));
    KILN_RETURN_IF_ERROR(Check(dnn->SetFilterNdDescriptor(e->w, DataType(p.dtype),
                                                          int8 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, nb, p.w.data()),
                               what, "cudnnSetFilterNdDescriptor"));
    KILN_RETURN_IF_ERROR(
        Check(dnn->CreateConvolutionDescriptor(&e->conv), what, "cudnnCreateConvolutionDescriptor"));
    // The compute type is float for every float dtype: float16 and bfloat16 data with float32
    // accumulation are cuDNN's PSEUDO_HALF_CONFIG and PSEUDO_BFLOAT16_CONFIG (alpha and beta are
    // float for both, as for float32); int32 for int8 (INT8_EXT_CONFIG, float alpha and beta).
    KILN_RETURN_IF_ERROR(
        Check(dnn->SetConvolutionNdDescriptor(e->conv, sr, p.pad.data(), p.stride.data(), p.dilation.data(),
                                              CUDNN_CROSS_CORRELATION, int8 ? CUDNN_DATA_INT32 : CUDNN_DATA_FLOAT),
              what, "cudnnSetConvolutionNdDescriptor"));
    KILN_RETURN_IF_ERROR(
        Check(dnn->SetConvolutionGroupCount(e->conv, p.group), what, "cudnnSetConvolutionGroupCount"));
    // float32: FMA math, so that Ampere and later do not use TF32, unless it is allowed.
    // float16 / bfloat16: tensor-core math (their products are exact in the float32 accumulator).
    const bool low = p.dtype != DType::kFloat32;
    const cudnnMathType_t math = low               ? CUDNN_TENSOR_OP_MATH
                                 : options.allow_tf32 ? CUDNN_DEFAULT_MATH
                                                      : CUDNN_FMA_MATH;
    KILN_RETURN_IF_ERROR(
        Check(dnn->SetConvolutionMathType(e->conv, math), what, "cudnnSetConvolutionMathType"));
    // cuDNN's own output size must be the ONNX one (it is, for symmetric pads): a cheap host
    // check that the plan was built right before any kernel runs.
    int32_t fwd_out[5] = {};
    const cudnnTensorDescriptor_t fwd_in = forward ? e->x : e->y;
    const std::array<int32_t, 5>& expect = forward ? p.y : p.x;
    KILN_RETURN_IF_ERROR(Check(dnn->GetConvolutionNdForwardOutputDim(e->conv, fwd_in, e->w, nb, fwd_out),
                               what, "cudnnGetConvolutionNdForwardOutputDim"));
    if (!std::equal(fwd_out, fwd_out + nb, expect.begin())) {
      return Internal(what + ": cuDNN's convolution output size differs from the ONNX one");
    }
    if (p.bias) {
      int32_t dims[5] = {1, p.y[1], 1, 1, 1};
      KILN_RETURN_IF_ERROR(Tensor(dims, nb, p.dtype, &e->bias, what + " (bias)"));
    }
    if (p.relu) {
      KILN_RETURN_IF_ERROR(
          Check(dnn->CreateActivationDescriptor(&e->act), what, "cudnnCreateActivationDescriptor"));
      KILN_RETURN_IF_ERROR(
          Check(dnn->SetActivationDescriptor(e->act, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0), what,
                "cudnnSetActivationDescriptor"));
    }
    cudnnMathType_t chosen_math = math;
    if (forward) {
      cudnnConvolutionFwdAlgoPerf_t perf[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
      int max_count = 0, returned = 0;
      KILN_RETURN_IF_ERROR(Check(dnn->GetConvolutionForwardAlgorithmMaxCount(handle, &max_count), what,
                                 "cudnnGetConvolutionForwardAlgorithmMaxCount"));
      const int requested = std::clamp(max_count, 1, static_cast<int>(std::size(perf)));
      KILN_RETURN_IF_ERROR(Check(dnn->GetConvolutionForwardAlgorithm_v7(handle, e->x, e->w, e->conv, e->y,
                                                                        requested, &returned, perf),
                                 what, "cudnnGetConvolutionForwardAlgorithm_v7"));
      const cudnnConvolutionFwdAlgoPerf_t* best = Choose(perf, returned, p.dtype);
      if (!best) return Unimplemented(what + ": cuDNN offers no forward algorithm within the workspace cap");
      e->fwd_algo = best->algo;
      chosen_math = best->mathType;
    } else {
      cudnnConvolutionBwdDataAlgoPerf_t perf[2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT] = {};
      int max_count = 0, returned = 0;
      KILN_RETURN_IF_ERROR(Check(dnn->GetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count), what,
                                 "cudnnGetConvolutionBackwardDataAlgorithmMaxCount"));
      const int requested = std::clamp(max_count, 1, static_cast<int>(std::size(perf)));
      KILN_RETURN_IF_ERROR(Check(dnn->GetConvolutionBackwardDataAlgorithm_v7(
                                     handle, e->w, e->x, e->conv, e->y, requested, &returned, perf),
                                 what, "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
      const cudnnConvolutionBwdDataAlgoPerf_t* best = Choose(perf, returned, p.dtype);
      if (!best)
        return Unimplemented(what + ": cuDNN offers no backward-data algorithm within the workspace cap");
      e->bwd_algo = best->algo;
      chosen_math = best->mathType;
    }
    // With TF32 allowed, or for float16 / bfloat16, run the algorithm in the math mode it was
    // rated for; float32 without TF32 keeps FMA math on the descriptor whatever was reported.
    if ((options.allow_tf32 || low) && chosen_math != math) {
      KILN_RETURN_IF_ERROR(
          Check(dnn->SetConvolutionMathType(e->conv, chosen_math), what, "cudnnSetConvolutionMathType"));
    }
    if (forward) {
      KILN_RETURN_IF_ERROR(Check(dnn->GetConvolutionForwardWorkspaceSize(handle, e->x, e->w, e->conv, e->y,
                                                                         e->fwd_algo, &e->workspace),
                                 what, "cudnnGetConvolutionForwardWorkspaceSize"));
    } else {
      KILN_RETURN_IF_ERROR(Check(dnn->GetConvolutionBackwardDataWorkspaceSize(
                                     handle, e->w, e->x, e->conv, e->y, e->bwd_algo, &e->workspace),
                                 what, "cudnnGetConvolutionBackwardDataWorkspaceSize"));
    }
    if (e->workspace > options.max_workspace_bytes) {
      return Unimplemented(what + ": the chosen algorithm needs " + std::to_string(e->workspace) +
                           " workspace bytes, past the cap of " +
                           std::to_string(options.max_workspace_bytes));
    }
    return Status::Ok();
  }

  Status BuildPool(const DnnPlan& p, const std::string& what, CachedDnn* e) const {
    const int nb = p.nb_dims, sr = nb - 2;
    KILN_RETURN_IF_ERROR(Tensor(p.x.data(), nb, p.dtype, &e->x, what + " (X)"));
    KILN_RETURN_IF_ERROR(Tensor(p.y.data(), nb, p.dtype, &e->y, what + " (Y)"));
    KILN_RETURN_IF_ERROR(Check(dnn->CreatePoolingDescriptor(&e->pool), what, "cudnnCreatePoolingDescriptor"));
    const cudnnPoolingMode_t mode = p.op == DnnOp::kMaxPool ? CUDNN_POOLING_MAX
                                    : p.count_include_pad   ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                            : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    return Check(dnn->SetPoolingNdDescriptor(e->pool, mode, CUDNN_PROPAGATE_NAN, sr, p.window.data(),
                                             p.pad.data(), p.stride.data()),
                 what, "cudnnSetPoolingNdDescriptor");
  }

  Result<const CachedDnn*> Find(const DnnPlan& p, const CallName& name) {
    auto it = cache.find(p);
    if (it != cache.end()) return &it->second;
    const std::string what = name.str();
    CachedDnn e;
    const bool conv = p.op == DnnOp::kConv || p.op == DnnOp::kConvTranspose || p.op == DnnOp::kConvInt8;
    Status st = conv ? BuildConv(p, what, &e) : BuildPool(p, what, &e);
    if (!st.ok()) {
      Release(e);
      return st;
    }
    return &cache.emplace(p, e).first->second;
  }

  // y += t for a tensor of y's shape (the residual) or a [1, M, 1, 1] bias.
  Status AddInto(cudnnTensorDescriptor_t t_desc, CUdeviceptr t, const CachedDnn& e, CUdeviceptr y,
                 const CallName& what) const {
    const float one = 1.0f;
    return CheckRun(dnn->AddTensor(handle, &one, t_desc, Ptr(t), &one, e.y, Ptr(y)), what, "cudnnAddTensor");
  }

  Status Enqueue(const DnnPlan& p, const CachedDnn& e, const OpCall& call, const CallName& what) const {
    const float one = 1.0f, zero = 0.0f;
    const CUdeviceptr x = call.inputs[0].data, y = call.outputs[0].data;
    void* ws = e.workspace > 0 ? Ptr(call.workspace) : nullptr;
    const size_t ws_bytes = e.workspace > 0 ? call.workspace_bytes : 0;
    if (p.op == DnnOp::kMaxPool || p.op == DnnOp::kAveragePool) {
      return CheckRun(dnn->PoolingForward(handle, e.pool, &one, e.x, Ptr(x), &zero, e.y, Ptr(y)), what,
                      "cudnnPoolingForward");
    }
    const CUdeviceptr w = call.inputs[1].data;
    const CUdeviceptr bias = p.bias ? call.inputs[2].data : 0;
    const CUdeviceptr r = p.residual ? call.inputs[cpu::kEpilogueResidualInput].data : 0;
    if (p.op == DnnOp::kConvTranspose) {
      KILN_RETURN_IF_ERROR(CheckRun(dnn->ConvolutionBackwardData(handle, &one, e.w, Ptr(w), e.x, Ptr(x), e.conv,
                                                                 e.bwd_algo, ws, ws_bytes, &zero, e.y, Ptr(y)),
                                    what, "cudnnConvolutionBackwardData"));
      if (p.bias) KILN_RETURN_IF_ERROR(AddInto(e.bias, bias, e, y, what));
      return Status::Ok();
    }
    KILN_RETURN_IF_ERROR(CheckRun(dnn->ConvolutionForward(handle, &one, e.x, Ptr(x), e.w, Ptr(w), e.conv,
                                                          e.fwd_algo, ws, ws_bytes, &zero, e.y, Ptr(y)),
                                  what, "cudnnConvolutionForward"));
    if (p.bias) KILN_RETURN_IF_ERROR(AddInto(e.bias, bias, e, y, what));
    if (p.residual && p.residual_first) KILN_RETURN_IF_ERROR(AddInto(e.y, r, e, y, what));
    if (p.relu) {
      // In place: cudnnActivationForward allows x == y.
      KILN_RETURN_IF_ERROR(CheckRun(dnn->ActivationForward(handle, e.act, &one, e.y, Ptr(y), &zero, e.y, Ptr(y)),
                                    what, "cudnnActivationForward"));
    }
    if (p.residual && !p.residual_first) KILN_RETURN_IF_ERROR(AddInto(e.y, r, e, y, what));
    return Status::Ok();
  }
};

DnnLibrary::DnnLibrary(std::unique_ptr<State> state) : s_(std::move(state)) {}
DnnLibrary::~DnnLibrary() = default;

Result<std::unique_ptr<DnnLibrary>> DnnLibrary::Create(const Dnn& dnn, const DnnOptions& options) {
  auto state = std::make_unique<State>();
  state->dnn = &dnn;
  state->options = options;
  KILN_RETURN_IF_ERROR_CTX(CheckDnn(dnn, dnn.Create(&state->handle), "cudnnCreate"), "cuDNN");
  return std::unique_ptr<DnnLibrary>(new DnnLibrary(std::move(state)));
}

Status DnnLibrary::Supports(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                             std::span<const DeviceTensor> outputs) {
  DnnPlan plan;
  return PlanDnn(op, attrs, inputs, outputs, &plan);
}

Status DnnLibrary::SupportsWith(const DnnOptions& options, std::string_view op, const AttrMap& attrs,
                                 std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs) {
  DnnPlan plan;
  KILN_RETURN_IF_ERROR(PlanDnn(op, attrs, inputs, outputs, &plan));
  return DeviceRefusal(options, op, plan);
}

Status DnnLibrary::Accepts(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                            std::span<const DeviceTensor> outputs) const {
  return SupportsWith(s_->options, op, attrs, inputs, outputs);
}

size_t DnnLibrary::WorkspaceFor(const DnnOptions& options, std::string_view op, const AttrMap& attrs,
                                 std::span<const DeviceTensor> inputs,
                                 std::span<const DeviceTensor> outputs) {
  DnnPlan plan;
  if (!PlanDnn(op, attrs, inputs, outputs, &plan).ok() || plan.empty) return 0;
  if (!DeviceRefusal(options, op, plan).ok()) return 0;
  const bool conv = plan.op == DnnOp::kConv || plan.op == DnnOp::kConvTranspose || plan.op == DnnOp::kConvInt8;
  return conv ? options.max_workspace_bytes : 0;
}

size_t DnnLibrary::Workspace(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                              std::span<const DeviceTensor> outputs) const {
  return WorkspaceFor(s_->options, op, attrs, inputs, outputs);
}

Result<size_t> DnnLibrary::Prepare(std::string_view op, const AttrMap& attrs,
                                    std::span<const DeviceTensor> inputs,
                                    std::span<const DeviceTensor> outputs) {
  DnnPlan plan;
  KILN_RETURN_IF_ERROR(PlanDnn(op, attrs, inputs, outputs, &plan));
  if (plan.empty) return size_t{0};
  KILN_RETURN_IF_ERROR(DeviceRefusal(s_->options, op, plan));
  const std::string what = std::string(OpName(plan.op)) + " (prepare)";
  KILN_ASSIGN_OR_RETURN(const CachedDnn* entry, s_->Find(plan, CallName{what, {}}));
  return entry->workspace;
}

Status DnnLibrary::Plan(std::string_view op, const OpCall& call, std::string_view node) {
  const Result<size_t> planned = Prepare(op, call.attrs, call.inputs, call.outputs);
  return planned.ok() ? Status::Ok() : planned.status().WithContext("node '" + std::string(node) + "'");
}

Status DnnLibrary::Run(std::string_view op, const OpCall& call, std::string_view node) {
  DnnPlan plan;
  KILN_RETURN_IF_ERROR_CTX(PlanDnn(op, call.attrs, call.inputs, call.outputs, &plan),
                           "node '" + std::string(node) + "'");
  if (plan.empty) return Status::Ok();
  KILN_RETURN_IF_ERROR_CTX(DeviceRefusal(s_->options, op, plan), "node '" + std::string(node) + "'");
  const CallName what{op, node};  // formatted only for an error (a steady-state Run builds no string)
  const bool conv = plan.op != DnnOp::kMaxPool && plan.op != DnnOp::kAveragePool;
  if (call.inputs[0].data == 0 || call.outputs[0].data == 0 || (conv && call.inputs[1].data == 0) ||
      (plan.bias && call.inputs[2].data == 0) ||
      (plan.residual && call.inputs[cpu::kEpilogueResidualInput].data == 0)) {
    return InvalidArgument(what.str() + ": a null device pointer");
  }
  KILN_ASSIGN_OR_RETURN(const CachedDnn* entry, s_->Find(plan, what));
  if (entry->workspace > call.workspace_bytes) {
    return InvalidArgument(what.str() + ": the algorithm needs " + std::to_string(entry->workspace) +
                           " workspace bytes, the call has " + std::to_string(call.workspace_bytes));
  }
  KILN_RETURN_IF_ERROR(s_->Check(s_->dnn->SetStream(s_->handle, call.stream), what, "cudnnSetStream"));
  return s_->Enqueue(plan, *entry, call, what);
}

size_t DnnLibrary::cached_plans() const { return s_->cache.size(); }

}  // namespace kiln::cuda
