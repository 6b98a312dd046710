// Normalization ops: BatchNormalization (inference), InstanceNormalization,
// LayerNormalization and GroupNormalization. Statistics accumulate in double so long
// rows do not lose precision, within float32's range (MeanInvStd).
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status CheckFloat(const TensorRef& t, std::string_view op, const char* what) {
  if (t.dtype != DType::kFloat32) {
    return OpError(op, std::string(what) + " must be float32, got " + DTypeStr(t.dtype));
  }
  return Status::Ok();
}

Status CheckPerChannel(const TensorRef& t, int64_t c, std::string_view op, const char* what) {
  KILN_RETURN_IF_ERROR(CheckFloat(t, op, what));
  if (t.num_elements != c) {
    return OpError(op, std::string(what) + " " + ShapeStr(t) + " must have " + std::to_string(c) +
                           " elements (one per channel)");
  }
  return Status::Ok();
}

// A float32 statistic's sum, accumulated in double for precision but with float32's range: past
// FLT_MAX it is infinite, as in the fused program (compiler/fusion/lower_reduction.cc) and in
// ONNX's function bodies, which compute the statistics in float32 (stash_type 1).
double InFloatRange(double sum) {
  return std::fabs(sum) > std::numeric_limits<float>::max() ? std::copysign(INFINITY, sum) : sum;
}

// Mean and 1 / sqrt(variance + eps) of `count` contiguous values (0 and 1/sqrt(eps) when
// empty): the sum and the sum of squared deviations accumulated in double, each infinite where
// it leaves float32's range (docs/semantics.md: a variance past FLT_MAX normalises to 0).
void MeanInvStd(const float* x, int64_t count, double eps, float* mean_out, float* inv_out) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += x[i];
  const double mean = count ? InFloatRange(sum) / count : 0;
  double sq = 0;
  for (int64_t i = 0; i < count; ++i) sq += (x[i] - mean) * (x[i] - mean);
  const double var = count ? InFloatRange(sq) / count : 0;
  *inv_out = static_cast<float>(1.0 / std::sqrt(var + eps));
  *mean_out = static_cast<float>(mean);
}

// y = (x - mean) * inv_std * scale + bias over `count` contiguous values.
void ApplyNorm(const float* x, int64_t count, float mean, float inv_std, float scale, float bias,
               float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] = (x[i] - mean) * inv_std * scale + bias;
}

// X and Y of a per-channel op: float32 X, as many elements in Y, rank >= min_rank; gives
// the batch, channel and (flattened) spatial extents.
struct ChannelShape {
  int64_t n = 0, c = 0, spatial = 0;
};
Status CheckChannelInput(const KernelCall& call, std::string_view op, int min_rank, ChannelShape* s) {
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckFloat(x, op, "X"));
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, op));
  if (x.rank < min_rank) {
    return OpError(op, "X must have rank >= " + std::to_string(min_rank) + ", got " + ShapeStr(x));
  }
  *s = {x.dims[0], x.dims[1], Product(x.dims, 2, x.rank)};
  return Status::Ok();
}

// Instance and group normalization: statistics over each group of C / groups channels
// (one channel for instance norm), then each channel's own scale and bias (inputs 1, 2).
void NormalizeGroups(const KernelCall& call, const ChannelShape& sh, int64_t groups, double eps) {
  if (groups < 1) return;  // no channels
  const float* scale = call.inputs[1].as<const float>();
  const float* bias = call.inputs[2].as<const float>();
  const int64_t c = sh.c, spatial = sh.spatial, cg = c / groups, count = cg * spatial;
  for (int64_t b = 0; b < sh.n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t off = (b * c + g * cg) * spatial;
      const float* px = call.inputs[0].as<const float>() + off;
      float* py = call.outputs[0].as<float>() + off;
      float mean, inv;
      MeanInvStd(px, count, eps, &mean, &inv);
      for (int64_t ch = 0; ch < cg; ++ch) {
        ApplyNorm(px + ch * spatial, spatial, mean, inv, scale[g * cg + ch], bias[g * cg + ch],
                  py + ch * spatial);
      }
    }
}

Status BatchNormalization(const KernelCall& call) {
  constexpr std::string_view kName = "BatchNormalization";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 5));
  if (call.attrs.GetInt("training_mode", 0) != 0) {
    return OpUnimplemented(kName, "training_mode=1 is not supported (inference only)");
  }
  ChannelShape sh;
  KILN_RETURN_IF_ERROR(CheckChannelInput(call, kName, 2, &sh));
  const int64_t n = sh.n, c = sh.c, spatial = sh.spatial;
  const char* names[] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 0; i < 4; ++i) KILN_RETURN_IF_ERROR(CheckPerChannel(call.inputs[1 + i], c, kName, names[i]));
  const double eps = call.attrs.GetFloat("epsilon", 1e-5f);
  const float* scale = call.inputs[1].as<const float>();
  const float* bias = call.inputs[2].as<const float>();
  const float* mean = call.inputs[3].as<const float>();
  const float* var = call.inputs[4].as<const float>();
  const float* px = call.inputs[0].as<const float>();
  float* py = call.outputs[0].as<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    // Folded into one multiply-add per element.
    const float a = static_cast<float>(scale[ch] / std::sqrt(static_cast<double>(var[ch]) + eps));
    const float b = bias[ch] - mean[ch] * a;
    for (int64_t b_i = 0; b_i < n; ++b_i) {
      const int64_t off = (b_i * c + ch) * spatial;
      for (int64_t i = 0; i < spatial; ++i) py[off + i] = px[off + i] * a + b;
    }
  }
  return Status::Ok();
}

Status InstanceNormalization(const KernelCall& call) {
  constexpr std::string_view kName = "InstanceNormalization";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  ChannelShape sh;
  KILN_RETURN_IF_ERROR(CheckChannelInput(call, kName, 3, &sh));
  const int64_t c = sh.c;
  KILN_RETURN_IF_ERROR(CheckPerChannel(call.inputs[1], c, kName, "scale"));
  KILN_RETURN_IF_ERROR(CheckPerChannel(call.inputs[2], c, kName, "B"));
  NormalizeGroups(call, sh, c, call.attrs.GetFloat("epsilon", 1e-5f));
  return Status::Ok();
}

Status GroupNormalization(const KernelCall& call) {
  constexpr std::string_view kName = "GroupNormalization";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 3));
  ChannelShape sh;
  KILN_RETURN_IF_ERROR(CheckChannelInput(call, kName, 2, &sh));
  const int64_t c = sh.c;
  const int64_t groups = call.attrs.GetInt("num_groups", 0);
  if (groups < 1 || c % groups != 0) {
    return OpError(kName, "num_groups " + std::to_string(groups) + " does not divide channels " +
                              std::to_string(c));
  }
  KILN_RETURN_IF_ERROR(CheckPerChannel(call.inputs[1], c, kName, "scale"));
  KILN_RETURN_IF_ERROR(CheckPerChannel(call.inputs[2], c, kName, "bias"));
  NormalizeGroups(call, sh, groups, call.attrs.GetFloat("epsilon", 1e-5f));
  return Status::Ok();
}

Status LayerNormalization(const KernelCall& call) {
  constexpr std::string_view kName = "LayerNormalization";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &scale = call.inputs[1], &y = call.outputs[0];
  const TensorRef* bias = OptionalInput(call, 2);
  KILN_RETURN_IF_ERROR(CheckFloat(x, kName, "X"));
  KILN_RETURN_IF_ERROR(CheckFloat(scale, kName, "Scale"));
  if (bias) KILN_RETURN_IF_ERROR(CheckFloat(*bias, kName, "B"));
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, kName));
  int axis = 0;
  if (!NormalizeAxis(call.attrs.GetInt("axis", -1), x.rank, &axis)) {
    return OpError(kName, "axis " + std::to_string(call.attrs.GetInt("axis", -1)) +
                              " is out of range for X " + ShapeStr(x));
  }
  const int64_t outer = Product(x.dims, 0, axis), inner = Product(x.dims, axis, x.rank);
  // Scale and B broadcast against the normalized shape X.dims[axis:].
  const int nrank = x.rank - axis;
  int64_t ss[kMaxRank] = {}, sb[kMaxRank] = {};
  if (!BroadcastStrides(scale.dims, scale.rank, x.dims + axis, nrank, ss) ||
      (bias && !BroadcastStrides(bias->dims, bias->rank, x.dims + axis, nrank, sb))) {
    return OpError(kName, "Scale " + ShapeStr(scale) + " and B " + (bias ? ShapeStr(*bias) : "<absent>") +
                              " must broadcast to the normalized shape " +
                              ShapeStr(x.dims + axis, nrank));
  }
  const TensorRef* mean_out = OptionalOutput(call, 1);
  const TensorRef* inv_out = OptionalOutput(call, 2);
  for (const TensorRef* o : {mean_out, inv_out}) {
    if (o && (o->num_elements != outer || o->dtype != DType::kFloat32)) {
      return OpError(kName, "Mean/InvStdDev output " + ShapeStr(*o) + " must be float32 with " +
                                std::to_string(outer) + " elements");
    }
  }
  const double eps = call.attrs.GetFloat("epsilon", 1e-5f);
  const float* ps = scale.as<const float>();
  const float* pb = bias ? bias->as<const float>() : nullptr;
  const bool scale_full = scale.num_elements == inner, bias_full = !bias || bias->num_elements == inner;
  for (int64_t r = 0; r < outer; ++r) {
    const float* px = x.as<const float>() + r * inner;
    float* py = y.as<float>() + r * inner;
    float m, iv;
    MeanInvStd(px, inner, eps, &m, &iv);
    if (mean_out) mean_out->as<float>()[r] = m;
    if (inv_out) inv_out->as<float>()[r] = iv;
    if (scale_full && bias_full) {
      for (int64_t i = 0; i < inner; ++i) py[i] = (px[i] - m) * iv * ps[i] + (pb ? pb[i] : 0.0f);
      continue;
    }
    NdIndex it(x.dims + axis, nrank);
    for (int64_t i = 0; i < inner; ++i) {
      const float s = ps[it.Offset(ss, nrank)];
      const float b = pb ? pb[it.Offset(sb, nrank)] : 0.0f;
      py[i] = (px[i] - m) * iv * s + b;
      it.Next(nrank);
    }
  }
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"BatchNormalization", BatchNormalization, nullptr},
    {"GroupNormalization", GroupNormalization, nullptr},
    {"InstanceNormalization", InstanceNormalization, nullptr},
    {"LayerNormalization", LayerNormalization, nullptr},
};

}  // namespace

std::span<const KernelDef> NormalizationKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
