// Resize (opset 18/19 semantics): nearest, linear and cubic over any set of axes, with
// the coordinate transforms, nearest modes and tf_crop_and_resize extrapolation of the
// spec. Arithmetic mirrors onnxruntime's CPU kernel (float coordinates, same weight
// formulas, same summation order for bilinear) so results match it. antialias = 1 (linear
// and cubic) follows the ONNX reference: when downsampling by s, the filter is stretched by
// 1/s (2·ceil(1/s) taps for linear, 2·ceil(2/s) for cubic) and its weights normalised.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

constexpr int kMaxTaps = 4;
constexpr std::string_view kName = "Resize";

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord { kHalfPixel, kHalfPixelSymmetric, kAsymmetric, kPytorchHalfPixel, kAlignCorners, kTfCropAndResize };
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeParams {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  bool antialias = false;
  float extrapolation = 0.0f;
  float scale[kMaxRank] = {};
  float roi_start[kMaxRank] = {};
  float roi_end[kMaxRank] = {};
  // The scale is exactly out / in (from `sizes` or the output dims, aspect ratio stretched),
  // not the float that approximates it: nearest indices then come from ExactNearest.
  bool ratio[kMaxRank] = {};
};

// `ratio`: the scale is out_len / in_len (ResizeParams::ratio); otherwise align_corners divides by
// the resized length scale * in_len, not the output's floor of it (ONNX Resize-19's output_width).
float OriginalCoordinate(Coord c, float x, float scale, float out_len, float in_len, float roi_start,
                         float roi_end, bool ratio) {
  switch (c) {
    case Coord::kHalfPixel: return ((x + 0.5f) / scale) - 0.5f;
    case Coord::kHalfPixelSymmetric: {
      const float adjustment = out_len / (scale * in_len);
      const float center = in_len / 2;
      const float offset = center * (1 - adjustment);
      return offset + ((x + 0.5f) / scale) - 0.5f;
    }
    case Coord::kAsymmetric: return x / scale;
    case Coord::kPytorchHalfPixel: return out_len > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
    case Coord::kAlignCorners: {
      const float resized = ratio ? out_len : scale * in_len;
      return resized == 1 ? 0.0f : x * (in_len - 1) / (resized - 1);
    }
    case Coord::kTfCropAndResize:
      return out_len > 1 ? roi_start * (in_len - 1) + (x * (roi_end - roi_start) * (in_len - 1)) / (out_len - 1)
                         : 0.5f * (roi_start + roi_end) * (in_len - 1);
  }
  return x;
}

int64_t NearestPixel(Nearest m, float x) {
  switch (m) {
    case Nearest::kRoundPreferFloor:
      if (x == std::trunc(x) + 0.5f) return ToIndex(std::trunc(x));
      return ToIndex(std::round(x));
    case Nearest::kRoundPreferCeil: return ToIndex(std::round(x));
    case Nearest::kFloor: return ToIndex(std::floor(x));
    case Nearest::kCeil: return ToIndex(std::ceil(x));
  }
  return 0;
}

// Nearest mode with the scale exactly out / in (docs/semantics.md): the source coordinate is
// a fraction n / d of integers, so a tie (exactly k + 1/2) is found exactly and rounded by the
// nearest_mode, where a float formula could land at k + 0.4999 or k + 0.5001. For
// half_pixel, pytorch_half_pixel and asymmetric, the coordinate modes whose formula involves the
// scale; false for the others, which keep the float formula.
bool ExactNearest(const ResizeParams& p, int64_t o, int64_t in_len, int64_t out_len, int64_t* index) {
  int64_t n = 0, d = 1;
  switch (p.coord) {
    case Coord::kHalfPixel:
    case Coord::kPytorchHalfPixel:
      if (p.coord == Coord::kPytorchHalfPixel && out_len <= 1) {
        *index = 0;
        return true;
      }
      n = (2 * o + 1) * in_len - out_len;  // (o + 1/2) * in / out - 1/2
      d = 2 * out_len;
      break;
    case Coord::kAsymmetric:
      n = o * in_len;
      d = out_len;
      break;
    default:
      return false;
  }
  const int64_t fl = n / d - (n % d < 0), r = n - fl * d;  // floor division (d > 0): r in [0, d)
  switch (p.nearest) {
    case Nearest::kRoundPreferFloor: *index = fl + (2 * r > d); break;
    case Nearest::kRoundPreferCeil: *index = fl + (2 * r >= d); break;
    case Nearest::kFloor: *index = fl; break;
    case Nearest::kCeil: *index = fl + (r > 0); break;
  }
  return true;
}

void CubicCoeffs(float s, float a, float* c) {
  const float abs_s = std::abs(s);
  c[0] = ((a * (abs_s + 1) - 5 * a) * (abs_s + 1) + 8 * a) * (abs_s + 1) - 4 * a;
  c[1] = ((a + 2) * abs_s - (a + 3)) * abs_s * abs_s + 1;
  c[2] = ((a + 2) * (1 - abs_s) - (a + 3)) * (1 - abs_s) * (1 - abs_s) + 1;
  c[3] = ((a * (2 - abs_s) - 5 * a) * (2 - abs_s) + 8 * a) * (2 - abs_s) - 4 * a;
}

Status ParseParams(const KernelCall& call, ResizeParams* p) {
  const AttrMap& attrs = call.attrs;
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  const int r = x.rank;
  const std::string_view mode = attrs.GetString("mode", "nearest");
  if (mode == "nearest") p->mode = Mode::kNearest;
  else if (mode == "linear") p->mode = Mode::kLinear;
  else if (mode == "cubic") p->mode = Mode::kCubic;
  else return OpError(kName, "unknown mode '" + std::string(mode) + "'");
  const std::string_view coord = attrs.GetString("coordinate_transformation_mode", "half_pixel");
  if (coord == "half_pixel") p->coord = Coord::kHalfPixel;
  else if (coord == "half_pixel_symmetric") p->coord = Coord::kHalfPixelSymmetric;
  else if (coord == "asymmetric") p->coord = Coord::kAsymmetric;
  else if (coord == "pytorch_half_pixel") p->coord = Coord::kPytorchHalfPixel;
  else if (coord == "align_corners") p->coord = Coord::kAlignCorners;
  else if (coord == "tf_crop_and_resize") p->coord = Coord::kTfCropAndResize;
  else return OpError(kName, "unknown coordinate_transformation_mode '" + std::string(coord) + "'");
  const std::string_view nearest = attrs.GetString("nearest_mode", "round_prefer_floor");
  if (nearest == "round_prefer_floor") p->nearest = Nearest::kRoundPreferFloor;
  else if (nearest == "round_prefer_ceil") p->nearest = Nearest::kRoundPreferCeil;
  else if (nearest == "floor") p->nearest = Nearest::kFloor;
  else if (nearest == "ceil") p->nearest = Nearest::kCeil;
  else return OpError(kName, "unknown nearest_mode '" + std::string(nearest) + "'");
  p->antialias = attrs.GetInt("antialias", 0) != 0;
  if (p->antialias && p->mode == Mode::kNearest) return OpError(kName, "antialias=1 needs mode linear or cubic");
  p->cubic_a = attrs.GetFloat("cubic_coeff_a", -0.75f);
  p->exclude_outside = attrs.GetInt("exclude_outside", 0) != 0;
  p->extrapolation = attrs.GetFloat("extrapolation_value", 0.0f);

  // `axes` says which input axes the roi/scales/sizes entries refer to.
  int axis_of[kMaxRank];
  int naxes = r;
  const auto& axes = attrs.GetInts("axes");
  if (axes.empty()) {
    for (int i = 0; i < r; ++i) axis_of[i] = i;
  } else {
    naxes = static_cast<int>(axes.size());
    if (naxes > r) return OpError(kName, "axes has more entries than the input rank");
    for (int i = 0; i < naxes; ++i) {
      if (!NormalizeAxis(axes[i], r, &axis_of[i])) {
        return OpError(kName, "axis " + std::to_string(axes[i]) + " is out of range for input " + ShapeStr(x));
      }
    }
  }
  for (int i = 0; i < r; ++i) {
    p->scale[i] = 1.0f;
    p->roi_start[i] = 0.0f;
    p->roi_end[i] = 1.0f;
  }
  const TensorRef* roi = OptionalInput(call, 1);
  const TensorRef* scales = OptionalInput(call, 2);
  const TensorRef* sizes = OptionalInput(call, 3);
  if (roi && roi->num_elements > 0 && p->coord == Coord::kTfCropAndResize) {
    if (roi->num_elements != 2 * naxes) {
      return OpError(kName, "roi has " + std::to_string(roi->num_elements) + " values, expected " +
                                std::to_string(2 * naxes));
    }
    for (int i = 0; i < naxes; ++i) {
      p->roi_start[axis_of[i]] = static_cast<float>(NumberAt(*roi, i));
      p->roi_end[axis_of[i]] = static_cast<float>(NumberAt(*roi, i + naxes));
    }
  }
  if (scales && scales->num_elements > 0) {
    if (scales->num_elements != naxes) {
      return OpError(kName, "scales has " + std::to_string(scales->num_elements) + " values, expected " +
                                std::to_string(naxes));
    }
    for (int i = 0; i < naxes; ++i) {
      const float s = static_cast<float>(NumberAt(*scales, i));
      if (!(s > 0)) return OpError(kName, "scales must be positive, got " + std::to_string(s));
      p->scale[axis_of[i]] = s;
    }
  } else {
    // From sizes (or, equivalently, the given output dims): out / in per axis, or one
    // common scale when the aspect ratio is kept.
    if (sizes && sizes->num_elements > 0 && sizes->num_elements != naxes) {
      return OpError(kName, "sizes has " + std::to_string(sizes->num_elements) + " values, expected " +
                                std::to_string(naxes));
    }
    const std::string_view policy = attrs.GetString("keep_aspect_ratio_policy", "stretch");
    for (int i = 0; i < naxes; ++i) {
      const int a = axis_of[i];
      const int64_t target = sizes && sizes->num_elements > 0 ? IndexAt(*sizes, i) : y.dims[a];
      p->scale[a] = x.dims[a] > 0 ? static_cast<float>(target) / static_cast<float>(x.dims[a]) : 1.0f;
      p->ratio[a] = x.dims[a] > 0 && policy == "stretch";
    }
    if (policy == "not_larger" || policy == "not_smaller") {
      float common = p->scale[axis_of[0]];
      for (int i = 1; i < naxes; ++i) {
        const float s = p->scale[axis_of[i]];
        common = policy == "not_larger" ? std::min(common, s) : std::max(common, s);
      }
      for (int i = 0; i < naxes; ++i) p->scale[axis_of[i]] = common;
    } else if (policy != "stretch") {
      return OpError(kName, "unknown keep_aspect_ratio_policy '" + std::string(policy) + "'");
    }
  }
  return Status::Ok();
}

// Tap slots per output coordinate on an axis of `in` -> `out`. Antialiasing needs
// 2·ceil(2/s) for cubic; the scale s is at least (out - 0.5) / in (sizes rounded with a
// kept aspect ratio; floor(in·s) = out otherwise), which bounds it.
int64_t TapCapacity(bool antialias, int64_t in, int64_t out) {
  if (!antialias) return kMaxTaps;
  const double inv = static_cast<double>(in) / std::max(static_cast<double>(out) - 0.5, 0.5);
  return std::max<int64_t>(kMaxTaps, 2 * static_cast<int64_t>(std::ceil(2 * inv)) + 2);
}

// Per-axis tap tables in the workspace: for every output coordinate on every axis,
// TapCapacity input indices (-1: extrapolate) and weights.
size_t TableBytes(bool antialias, const TensorRef& x, const TensorRef& y) {
  size_t n = 0;
  for (int i = 0; i < y.rank && i < x.rank; ++i)
    n += static_cast<size_t>(y.dims[i] * TapCapacity(antialias, x.dims[i], y.dims[i]));
  return n * (sizeof(int64_t) + sizeof(float));
}

size_t ResizeWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
  if (inputs.empty() || !inputs[0].present() || outputs.empty() || !outputs[0].present()) return 0;
  return TableBytes(attrs.GetInt("antialias", 0) != 0, inputs[0], outputs[0]);
}

// The ONNX reference's antialiased filter at x = base + ratio, ratio in (0, 1] (an integer x
// counts as the right end of the interval before it): n taps at base + start .. base + start + n - 1.
// Returns n, or -1 when more than `cap`.
int AntialiasTaps(const ResizeParams& p, double x, double scale, int64_t in_len, int64_t cap, int64_t* ti,
                  float* tw) {
  const double s = std::min(scale, 1.0);
  const bool linear = p.mode == Mode::kLinear;
  // In double first: a scale of 0 or NaN (caller data) makes start -inf or NaN.
  const double start_d = std::floor((linear ? -1.0 : -2.0) / s) + 1;
  if (!(2 - 2 * start_d <= static_cast<double>(cap))) return -1;
  const int64_t start = static_cast<int64_t>(start_d);
  const int64_t n = 2 - 2 * start;
  const int64_t base = ToIndex(std::ceil(x)) - 1;
  const double ratio = x - static_cast<double>(base);
  const double a = p.cubic_a;
  auto weight = [&](int64_t t) {
    const int64_t pos = base + start + t;
    if (p.exclude_outside && (pos < 0 || pos >= in_len)) return 0.0;
    const double arg = std::fabs((static_cast<double>(start + t) - ratio) * s);
    if (linear) return std::clamp(1 - arg, 0.0, 1.0);
    if (arg <= 1) return ((a + 2) * arg - (a + 3)) * arg * arg + 1;
    if (arg < 2) return ((a * arg - 5 * a) * arg + 8 * a) * arg - 4 * a;
    return 0.0;
  };
  double sum = 0;
  for (int64_t t = 0; t < n; ++t) sum += weight(t);
  for (int64_t t = 0; t < n; ++t) {
    ti[t] = std::clamp<int64_t>(base + start + t, 0, in_len - 1);
    tw[t] = static_cast<float>(sum != 0 ? weight(t) / sum : weight(t));
  }
  return static_cast<int>(n);
}

// Fills the taps of one axis (`cap` slots per output coordinate); returns the tap count
// used on it, or -1 when antialiasing needs more than `cap`.
int BuildAxis(const ResizeParams& p, int axis, int64_t in_len, int64_t out_len, int64_t cap, int64_t* idx, float* w) {
  const float scale = p.scale[axis];
  const bool extrapolate = p.coord == Coord::kTfCropAndResize;
  int taps = p.mode == Mode::kNearest ? 1 : (p.mode == Mode::kLinear ? 2 : 4);
  for (int64_t o = 0; o < out_len; ++o) {
    int64_t* ti = idx + o * cap;
    float* tw = w + o * cap;
    for (int64_t t = 0; t < cap; ++t) {
      ti[t] = 0;
      tw[t] = 0.0f;
    }
    float in_x;
    // onnxruntime skips the transform for unscaled axes in linear and cubic modes.
    if (p.mode != Mode::kNearest && scale == 1.0f && !extrapolate) {
      in_x = static_cast<float>(o);
    } else {
      in_x = OriginalCoordinate(p.coord, static_cast<float>(o), scale, static_cast<float>(out_len),
                                static_cast<float>(in_len), p.roi_start[axis], p.roi_end[axis], p.ratio[axis]);
    }
    if (extrapolate && (in_x < 0 || in_x > static_cast<float>(in_len - 1))) {
      for (int t = 0; t < taps; ++t) ti[t] = -1;
      continue;
    }
    if (p.antialias) {
      taps = AntialiasTaps(p, in_x, scale, in_len, cap, ti, tw);
      if (taps < 0) return -1;
    } else if (p.mode == Mode::kNearest) {
      int64_t n = 0;
      if (!(p.ratio[axis] && ExactNearest(p, o, in_len, out_len, &n))) n = NearestPixel(p.nearest, in_x);
      ti[0] = std::clamp<int64_t>(n, 0, in_len - 1);
      tw[0] = 1.0f;
    } else if (p.mode == Mode::kLinear) {
      float c = std::max(0.0f, std::min(in_x, static_cast<float>(in_len - 1)));
      const int64_t i1 = std::min(static_cast<int64_t>(c), in_len - 1);
      const int64_t i2 = std::min(i1 + 1, in_len - 1);
      float d1 = std::fabs(c - static_cast<float>(i1));
      float d2 = std::fabs(c - static_cast<float>(i2));
      if (i1 == i2) d1 = d2 = 0.5f;
      ti[0] = i1;
      tw[0] = d2;
      ti[1] = i2;
      tw[1] = d1;
    } else {
      const int64_t base = ToIndex(std::floor(in_x));
      float coeffs[4];
      CubicCoeffs(in_x - static_cast<float>(base), p.cubic_a, coeffs);
      float sum = 0;
      for (int t = 0; t < 4; ++t) {
        const int64_t pos = base - 1 + t;
        if (p.exclude_outside && (pos < 0 || pos >= in_len)) coeffs[t] = 0.0f;
        sum += coeffs[t];
        ti[t] = std::clamp<int64_t>(pos, 0, in_len - 1);
      }
      for (int t = 0; t < 4; ++t) tw[t] = p.exclude_outside && sum != 0 ? coeffs[t] / sum : coeffs[t];
    }
  }
  return taps;
}

Status ResizeKernel(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.dtype != y.dtype) return OpError(kName, "output dtype differs from input dtype");
  if (x.rank != y.rank || x.rank < 1) {
    return OpError(kName, "input " + ShapeStr(x) + " and output " + ShapeStr(y) + " must have the same rank");
  }
  ResizeParams p;
  KILN_RETURN_IF_ERROR(ParseParams(call, &p));
  const int r = x.rank;
  if (y.num_elements == 0) return Status::Ok();
  if (x.num_elements == 0) return OpError(kName, "cannot resize an empty input " + ShapeStr(x) + " to " + ShapeStr(y));
  if (p.mode != Mode::kNearest && x.dtype != DType::kFloat32) {
    return OpUnimplemented(kName, "linear and cubic modes support float32 only, got " + DTypeStr(x.dtype));
  }
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, TableBytes(p.antialias, x, y), kName));
  int64_t cap[kMaxRank];
  int64_t total_slots = 0;
  for (int i = 0; i < r; ++i) {
    cap[i] = TapCapacity(p.antialias, x.dims[i], y.dims[i]);
    total_slots += y.dims[i] * cap[i];
  }
  int64_t* idx_base = static_cast<int64_t*>(call.workspace);
  float* w_base = reinterpret_cast<float*>(idx_base + total_slots);
  int64_t* idx[kMaxRank];
  float* w[kMaxRank];
  int64_t taps[kMaxRank];
  int active = 0;
  for (int i = 0, off = 0; i < r; ++i) {
    idx[i] = idx_base + off;
    w[i] = w_base + off;
    off += static_cast<int>(y.dims[i] * cap[i]);
    // Axes that neither scale nor move stay a single-tap identity, which is exact.
    // onnxruntime's bilinear (2-D/4-D) and trilinear (3-D/5-D) paths always interpolate
    // their inner axes, even unscaled ones; doing the same keeps results bit-identical.
    const bool ort_inner = p.mode == Mode::kLinear &&
                           (((r == 2 || r == 4) && i >= r - 2) || ((r == 3 || r == 5) && i >= r - 3));
    const bool identity = !ort_inner && p.scale[i] == 1.0f && x.dims[i] == y.dims[i] &&
                          p.coord != Coord::kTfCropAndResize;
    if (identity) {
      for (int64_t o = 0; o < y.dims[i]; ++o) {
        idx[i][o * cap[i]] = o;
        w[i][o * cap[i]] = 1.0f;
      }
      taps[i] = 1;
    } else {
      taps[i] = BuildAxis(p, i, x.dims[i], y.dims[i], cap[i], idx[i], w[i]);
      if (taps[i] < 0) {
        return OpUnimplemented(kName, "antialias on axis " + std::to_string(i) + " needs more than " +
                                          std::to_string(cap[i]) + " taps at scale " + std::to_string(p.scale[i]));
      }
      if (taps[i] > 1) ++active;
    }
  }
  if (p.mode == Mode::kCubic && active > 3) {
    return OpUnimplemented(kName, "cubic mode over more than 3 axes");
  }
  int64_t strides[kMaxRank];
  ContiguousStrides(x.dims, r, strides);
  int64_t corners = 1;
  for (int i = 0; i < r; ++i) corners *= taps[i];

  if (p.mode == Mode::kNearest) {
    const float ev = p.extrapolation;
    bool ok = VisitBySize(DTypeSize(x.dtype), [&](auto tag) {
      using U = decltype(tag);
      const U* px = x.as<const U>();
      U* py = y.as<U>();
      U extrap{};
      if constexpr (sizeof(U) == sizeof(float)) {
        if (x.dtype == DType::kFloat32) std::memcpy(&extrap, &ev, sizeof(float));
      }
      NdIndex it(y.dims, r);
      for (int64_t o = 0; o < y.num_elements; ++o, it.Next(r)) {
        int64_t off = 0;
        bool outside = false;
        for (int i = 0; i < r; ++i) {
          const int64_t s = idx[i][it.idx[i] * cap[i]];
          if (s < 0) { outside = true; break; }
          off += s * strides[i];
        }
        py[o] = outside ? extrap : px[off];
      }
    });
    if (!ok) return OpError(kName, "unsupported dtype " + DTypeStr(x.dtype));
    return Status::Ok();
  }

  const float* px = x.as<const float>();
  float* py = y.as<float>();
  NdIndex it(y.dims, r);
  for (int64_t o = 0; o < y.num_elements; ++o, it.Next(r)) {
    bool outside = false;
    for (int i = 0; i < r && !outside; ++i) outside = idx[i][it.idx[i] * cap[i]] < 0;
    if (outside) {
      py[o] = p.extrapolation;
      continue;
    }
    // Corners in row-major tap order (last axis fastest); weights multiplied from the
    // last axis backwards, as onnxruntime's dx * dy * X does.
    float acc = 0.0f;
    NdIndex ct(taps, r);
    for (int64_t c = 0; c < corners; ++c, ct.Next(r)) {
      int64_t off = 0;
      float wt = 1.0f;
      bool first = true;
      for (int i = r - 1; i >= 0; --i) {
        const int64_t k = it.idx[i] * cap[i] + ct.idx[i];
        off += idx[i][k] * strides[i];
        if (taps[i] > 1) {
          wt = first ? w[i][k] : wt * w[i][k];
          first = false;
        }
      }
      acc += wt * px[off];
    }
    py[o] = acc;
  }
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Resize", ResizeKernel, ResizeWorkspace},
};

}  // namespace

std::span<const KernelDef> ResizeKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
