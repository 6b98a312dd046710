// GridSample (nearest, linear, cubic; zeros, border, reflection padding; 1 to 3 spatial
// dims) and AffineGrid (2-D and 3-D). Both follow onnxruntime and the ONNX reference:
// coordinates are denormalized in float32 as the reference does, and each output point
// is a separable sum over per-axis taps (1 for nearest, 2 for linear, 4 for cubic).
#include <cmath>
#include <cstdint>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

// Reflects x into [lo, hi] by its nearer border, as often as needed: the distance past the
// border modulo two ranges (fmod, so a huge x is no integer overflow); an even number of
// reflections lands that far inside the border, an odd number that far from the other one.
// An empty range gives lo; NaN and infinities stay NaN.
double Reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (!(range > 0)) return lo;
  if (x < lo) {
    const double m = std::fmod(lo - x, 2 * range);
    return m < range ? lo + m : hi - (m - range);
  }
  if (x > hi) {
    const double m = std::fmod(x - hi, 2 * range);
    return m < range ? hi - m : lo + (m - range);
  }
  return x;
}

// Keys' cubic convolution weights (alpha = -0.75) for taps at -1, 0, 1, 2 from floor(x).
void CubicCoeffs(float t, float c[4]) {
  constexpr float A = -0.75f;
  const float x = std::fabs(t);
  c[0] = ((A * (x + 1) - 5 * A) * (x + 1) + 8 * A) * (x + 1) - 4 * A;
  c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
  c[2] = ((A + 2) * (1 - x) - (A + 3)) * (1 - x) * (1 - x) + 1;
  c[3] = ((A * (2 - x) - 5 * A) * (2 - x) + 8 * A) * (2 - x) - 4 * A;
}

struct Axis {
  int64_t size = 1;
  float lo = 0, hi = 0;  // the valid coordinate range: [-0.5, size - 0.5], or [0, size - 1] with align_corners
};

// The index a tap at integer position i reads, or -1 for a zero (zeros padding outside).
int64_t TapIndex(int64_t i, const Axis& a, Padding pad) {
  if (i >= 0 && i < a.size) return i;
  switch (pad) {
    case Padding::kZeros: return -1;
    case Padding::kBorder: return i < 0 ? 0 : a.size - 1;
    default: {
      const int64_t r = static_cast<int64_t>(Reflect(static_cast<double>(i), a.lo, a.hi));
      return r < 0 ? 0 : (r >= a.size ? a.size - 1 : r);
    }
  }
}

struct Taps {
  int count = 0;
  int64_t index[4] = {};
  float weight[4] = {};
};

// The taps of one axis for the normalized coordinate g.
Taps AxisTaps(float g, const Axis& a, bool align, Mode mode, Padding pad) {
  const float n = static_cast<float>(a.size);
  float x = align ? (g + 1) / 2.0f * (n - 1) : ((g + 1) * n - 1) / 2.0f;
  if (mode == Mode::kNearest) x = std::nearbyint(x);
  if (x < a.lo || x > a.hi) {
    if (pad == Padding::kBorder) x = x < 0 ? 0.0f : (x > n - 1 ? n - 1 : x);
    else if (pad == Padding::kReflection) x = static_cast<float>(Reflect(x, a.lo, a.hi));
  }
  Taps t;
  // Past the valid range by more than the widest taps (cubic reads floor(x) - 1 .. + 2), every
  // tap reads a zero: one tap of weight 0 outside. This also takes NaN and infinite grid
  // values, which must not be converted to integers.
  if (!(x >= a.lo - 4 && x <= a.hi + 4)) {
    t.count = 1;
    t.index[0] = -1;
    return t;
  }
  if (mode == Mode::kNearest) {
    t.count = 1;
    t.index[0] = TapIndex(static_cast<int64_t>(x), a, pad);
    t.weight[0] = 1;
    return t;
  }
  const float f = std::floor(x);
  const int64_t x0 = static_cast<int64_t>(f);
  if (mode == Mode::kLinear) {
    t.count = 2;
    t.weight[0] = 1 - (x - f);
    t.weight[1] = x - f;
    for (int k = 0; k < 2; ++k) t.index[k] = TapIndex(x0 + k, a, pad);
  } else {
    t.count = 4;
    CubicCoeffs(x - f, t.weight);
    for (int k = 0; k < 4; ++k) t.index[k] = TapIndex(x0 - 1 + k, a, pad);
  }
  return t;
}

template <typename T>
void Sample(const T* x, const T* grid, T* y, int64_t N, int64_t C, int r, const Axis* axes, int64_t in_size,
            int64_t out_size, bool align, Mode mode, Padding pad) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t p = 0; p < out_size; ++p) {
      // The grid's last dim lists coordinates x (W) first, so axis d reads g[r - 1 - d].
      const T* g = grid + (n * out_size + p) * r;
      Taps taps[3];
      int64_t stride[3];
      int64_t s = 1;
      for (int d = r - 1; d >= 0; --d) {
        taps[d] = AxisTaps(static_cast<float>(g[r - 1 - d]), axes[d], align, mode, pad);
        stride[d] = s;
        s *= axes[d].size;
      }
      for (int64_t c = 0; c < C; ++c) {
        const T* xc = x + (n * C + c) * in_size;
        double acc = 0;
        int k[3] = {0, 0, 0};
        while (true) {
          double w = 1;
          int64_t off = 0;
          for (int d = 0; d < r && off >= 0; ++d) {
            const int64_t i = taps[d].index[k[d]];
            off = i < 0 ? -1 : off + i * stride[d];
            w *= taps[d].weight[k[d]];
          }
          if (off >= 0) acc += w * static_cast<double>(xc[off]);
          int d = r - 1;
          while (d >= 0 && ++k[d] == taps[d].count) k[d--] = 0;
          if (d < 0) break;
        }
        y[(n * C + c) * out_size + p] = static_cast<T>(acc);
      }
    }
  }
}

Status GridSampleKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "GridSample";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 2));
  const TensorRef &x = call.inputs[0], &grid = call.inputs[1], &y = call.outputs[0];
  const int r = x.rank - 2;
  if (r < 1 || r > 3 || grid.rank != x.rank || y.rank != x.rank || grid.dim(x.rank - 1) != r ||
      grid.dim(0) != x.dim(0) || y.dim(0) != x.dim(0) || y.dim(1) != x.dim(1))
    return OpError(kOp, "X " + ShapeStr(x) + ", grid " + ShapeStr(grid) + " and Y " + ShapeStr(y) + " do not match");
  for (int d = 0; d < r; ++d)
    if (y.dim(2 + d) != grid.dim(1 + d)) return OpError(kOp, "Y " + ShapeStr(y) + " must take grid's output dims");
  const std::string_view m = call.attrs.GetString("mode", "linear");
  const std::string_view p = call.attrs.GetString("padding_mode", "zeros");
  Mode mode;
  if (m == "linear" || m == "bilinear") mode = Mode::kLinear;
  else if (m == "nearest") mode = Mode::kNearest;
  else if (m == "cubic" || m == "bicubic") mode = Mode::kCubic;
  else return OpUnimplemented(kOp, "mode \"" + std::string(m) + "\"");
  Padding pad;
  if (p == "zeros") pad = Padding::kZeros;
  else if (p == "border") pad = Padding::kBorder;
  else if (p == "reflection") pad = Padding::kReflection;
  else return OpUnimplemented(kOp, "padding_mode \"" + std::string(p) + "\"");
  const bool align = call.attrs.GetInt("align_corners", 0) != 0;
  Axis axes[3];
  for (int d = 0; d < r; ++d) {
    axes[d].size = x.dim(2 + d);
    axes[d].lo = align ? 0.0f : -0.5f;
    axes[d].hi = static_cast<float>(axes[d].size) - (align ? 1.0f : 0.5f);
  }
  const int64_t in_size = Product(x.dims, 2, x.rank), out_size = Product(y.dims, 2, y.rank);
  // Checked before any pointer is cast: a grid or Y of another dtype would be read past its end.
  if (grid.dtype != x.dtype || y.dtype != x.dtype)
    return OpUnimplemented(kOp, "dtype " + DTypeStr(x.dtype) + " with grid " + DTypeStr(grid.dtype) + " and Y " +
                                    DTypeStr(y.dtype));
  const bool ok = VisitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    Sample(x.as<const T>(), grid.as<const T>(), y.as<T>(), x.dim(0), x.dim(1), r, axes, in_size, out_size, align, mode,
           pad);
  });
  if (!ok) return OpUnimplemented(kOp, "dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

// The base grid coordinate of index i along an axis of n points, in [-1, 1].
double BaseCoord(int64_t i, int64_t n, bool align) {
  if (align) return n == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
  return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n) - 1.0;
}

Status AffineGridKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "AffineGrid";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 1));
  const TensorRef &theta = call.inputs[0], &y = call.outputs[0];
  const int r = y.rank - 2;
  if ((r != 2 && r != 3) || theta.rank != 3 || theta.dim(0) != y.dim(0) || theta.dim(1) != r ||
      theta.dim(2) != r + 1 || y.dim(y.rank - 1) != r)
    return OpError(kOp, "theta " + ShapeStr(theta) + " and grid " + ShapeStr(y) + " do not match");
  const bool align = call.attrs.GetInt("align_corners", 0) != 0;
  const bool ok = VisitFloat(theta.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* th = theta.as<const T>();
    T* out = y.as<T>();
    int64_t o = 0;
    NdIndex idx(y.dims + 1, r);
    for (int64_t n = 0; n < y.dim(0); ++n) {
      const T* t = th + n * r * (r + 1);
      do {
        // Homogeneous point (x, y[, z], 1): x runs along the last spatial dim.
        double pt[4];
        for (int d = 0; d < r; ++d) pt[d] = BaseCoord(idx.idx[r - 1 - d], idx.dims[r - 1 - d], align);
        pt[r] = 1.0;
        for (int row = 0; row < r; ++row) {
          double s = 0;
          for (int k = 0; k <= r; ++k) s += static_cast<double>(t[row * (r + 1) + k]) * pt[k];
          out[o++] = static_cast<T>(s);
        }
      } while (idx.Next(r));
    }
  });
  if (!ok) return OpUnimplemented(kOp, "dtype " + DTypeStr(theta.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"AffineGrid", AffineGridKernel, nullptr},
    {"GridSample", GridSampleKernel, nullptr},
};

}  // namespace

std::span<const KernelDef> GridSampleKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
