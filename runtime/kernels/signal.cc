// Signal ops: DFT (forward, inverse, one-sided, inverse one-sided = irfft), STFT, the
// Hann/Hamming/Blackman windows and MelWeightMatrix. The transforms are direct O(n^2)
// sums in double with exact twiddle angles (j * k mod n), so a bin that is zero in
// exact arithmetic comes out as zero or within 1e-15 of it, as NumPy's FFT does.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

constexpr double kPi = std::numbers::pi;

// Angle of the twiddle factor e^(i * angle) for j * k over a transform of length n.
double Twiddle(int64_t j, int64_t k, int64_t n, bool inverse) {
  const double a = 2.0 * kPi * static_cast<double>((j * k) % n) / static_cast<double>(n);
  return inverse ? a : -a;
}

// A strided complex sequence: element i at base + i * stride (in elements); the imaginary
// part follows the real one when `complex`.
template <typename T>
struct Seq {
  const T* base;
  int64_t stride;
  int64_t count;
  bool complex;
  double re(int64_t i) const { return static_cast<double>(base[i * stride]); }
  double im(int64_t i) const { return complex ? static_cast<double>(base[i * stride + 1]) : 0.0; }
};

Status DftKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "DFT";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  const TensorRef *len_t = OptionalInput(call, 1), *axis_t = OptionalInput(call, 2);
  int64_t axis = -2;
  if (call.attrs.Has("axis")) axis = call.attrs.GetInt("axis", 1);
  else if (axis_t && IsIndexType(axis_t->dtype) && axis_t->num_elements == 1) axis = IndexAt(*axis_t, 0);
  int ax;
  if (x.rank < 2 || y.rank != x.rank || !NormalizeAxis(axis, x.rank, &ax) || ax == x.rank - 1)
    return OpError(kOp, "axis " + std::to_string(axis) + " is not a signal axis of " + ShapeStr(x));
  const bool inverse = call.attrs.GetInt("inverse", 0) != 0, onesided = call.attrs.GetInt("onesided", 0) != 0;
  const int64_t n_in = x.dim(ax), n_out = y.dim(ax), c_in = x.dim(x.rank - 1), c_out = y.dim(y.rank - 1);
  int64_t L = inverse && onesided ? 2 * (n_in - 1) : n_in;
  if (len_t && IsIndexType(len_t->dtype) && len_t->num_elements == 1) L = IndexAt(*len_t, 0);
  if (L < 1 || (c_in != 1 && c_in != 2) || c_out != (inverse && onesided ? 1 : 2) ||
      n_out != (onesided && !inverse ? L / 2 + 1 : L))
    return OpError(kOp, "input " + ShapeStr(x) + ", output " + ShapeStr(y) + " and length " + std::to_string(L) +
                            " do not match");
  const int64_t outer = Product(x.dims, 0, ax), inner = Product(x.dims, ax + 1, x.rank - 1);
  const bool ok = VisitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        const Seq<T> s{x.as<const T>() + (o * n_in * inner + in) * c_in, inner * c_in, n_in, c_in == 2};
        T* out = y.as<T>() + (o * n_out * inner + in) * c_out;
        const int64_t ostride = inner * c_out;
        for (int64_t k = 0; k < n_out; ++k) {
          double re = 0, im = 0;
          if (inverse && onesided) {
            // irfft: the full spectrum is Hermitian; bins above L/2 mirror the given ones.
            for (int64_t j = 0; j < L; ++j) {
              const bool mirror = j > L / 2;
              const int64_t src = mirror ? L - j : j;
              if (src >= n_in) continue;
              const double a = Twiddle(j, k, L, true), xr = s.re(src), xi = mirror ? -s.im(src) : s.im(src);
              re += xr * std::cos(a) - xi * std::sin(a);
            }
          } else {
            for (int64_t j = 0; j < std::min(n_in, L); ++j) {
              const double a = Twiddle(j, k, L, inverse), xr = s.re(j), xi = s.im(j);
              re += xr * std::cos(a) - xi * std::sin(a);
              im += xr * std::sin(a) + xi * std::cos(a);
            }
          }
          if (inverse) {
            re /= static_cast<double>(L);
            im /= static_cast<double>(L);
          }
          out[k * ostride] = static_cast<T>(re);
          if (c_out == 2) out[k * ostride + 1] = static_cast<T>(im);
        }
      }
    }
  });
  if (!ok) return OpUnimplemented(kOp, "dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

Status StftKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "STFT";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 2));
  const TensorRef &x = call.inputs[0], &step_t = call.inputs[1], &y = call.outputs[0];
  const TensorRef* window = OptionalInput(call, 2);
  if (x.rank != 3 || y.rank != 4 || !IsIndexType(step_t.dtype) || step_t.num_elements != 1)
    return OpError(kOp, "expected signal [batch, length, 1 or 2] and a scalar frame_step, found " + ShapeStr(x));
  const int64_t step = IndexAt(step_t, 0), frames = y.dim(1), bins = y.dim(2), c = x.dim(2);
  int64_t L = window ? window->num_elements : 0;
  if (const TensorRef* l = OptionalInput(call, 3); l && IsIndexType(l->dtype) && l->num_elements == 1) L = IndexAt(*l, 0);
  if (step < 1 || L < 1 || (window && window->num_elements != L) || (frames - 1) * step + L > x.dim(1) ||
      y.dim(0) != x.dim(0) || y.dim(3) != 2 || (bins != L && bins != L / 2 + 1))
    return OpError(kOp, "signal " + ShapeStr(x) + ", output " + ShapeStr(y) + ", frame_step " + std::to_string(step) +
                            " and frame length " + std::to_string(L) + " do not match");
  if (window && window->dtype != x.dtype) return OpError(kOp, "window dtype differs from the signal's");
  const bool ok = VisitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* w = window ? window->as<const T>() : nullptr;
    T* out = y.as<T>();
    for (int64_t b = 0; b < x.dim(0); ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        const Seq<T> s{x.as<const T>() + (b * x.dim(1) + f * step) * c, c, L, c == 2};
        for (int64_t k = 0; k < bins; ++k, out += 2) {
          double re = 0, im = 0;
          for (int64_t j = 0; j < L; ++j) {
            const double wj = w ? static_cast<double>(w[j]) : 1.0, a = Twiddle(j, k, L, false);
            const double xr = s.re(j) * wj, xi = s.im(j) * wj;
            re += xr * std::cos(a) - xi * std::sin(a);
            im += xr * std::sin(a) + xi * std::cos(a);
          }
          out[0] = static_cast<T>(re);
          out[1] = static_cast<T>(im);
        }
      }
    }
  });
  if (!ok) return OpUnimplemented(kOp, "dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

enum class Window { kHann, kHamming, kBlackman };

template <Window kWindow>
Status WindowKernel(const KernelCall& call) {
  constexpr std::string_view kOp = kWindow == Window::kHann      ? "HannWindow"
                                   : kWindow == Window::kHamming ? "HammingWindow"
                                                                 : "BlackmanWindow";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 1));
  const TensorRef& y = call.outputs[0];
  const int64_t n = y.num_elements;
  // A periodic window is one period of an (n + 1)-point symmetric one.
  const double n1 = static_cast<double>(call.attrs.GetInt("periodic", 1) != 0 ? n : n - 1);
  const bool ok = VisitNumeric(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) {
      const double t = 2.0 * kPi * static_cast<double>(i) / n1;
      double v;
      if constexpr (kWindow == Window::kHann) v = 0.5 - 0.5 * std::cos(t);
      else if constexpr (kWindow == Window::kHamming) v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(t);
      else v = 0.42 - 0.5 * std::cos(t) + 0.08 * std::cos(2.0 * t);
      y.as<T>()[i] = static_cast<T>(v);
    }
  });
  if (!ok) return OpUnimplemented(kOp, "output dtype " + DTypeStr(y.dtype));
  return Status::Ok();
}

Status MelWeightMatrixKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "MelWeightMatrix";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 5));
  for (int i = 0; i < 5; ++i)
    if (call.inputs[i].num_elements != 1) return OpError(kOp, "input " + std::to_string(i) + " must be a scalar");
  const TensorRef& y = call.outputs[0];
  const int64_t bins = ToIndex(NumberAt(call.inputs[0], 0));
  const int64_t len = ToIndex(NumberAt(call.inputs[1], 0));
  const double rate = NumberAt(call.inputs[2], 0);
  const int64_t spec = len / 2 + 1;
  if (y.rank != 2 || y.dim(0) != spec || y.dim(1) != bins || !(rate > 0))
    return OpError(kOp, "output " + ShapeStr(y) + " does not match num_mel_bins " + std::to_string(bins) +
                            " and dft_length " + std::to_string(len) + " (or sample_rate <= 0)");
  // Hertz to mel in float32 then divided by ln 10 in double, as the ONNX reference does.
  auto to_mel = [](float hz) { return static_cast<double>(2595.0f * std::log1p(hz / 700.0f)) / std::log(10.0); };
  const double lo = to_mel(static_cast<float>(NumberAt(call.inputs[3], 0)));
  const double hi = to_mel(static_cast<float>(NumberAt(call.inputs[4], 0)));
  const double step = (hi - lo) / (static_cast<double>(bins) + 2);
  auto edge = [&](int64_t i) {
    const double hz = 700.0 * std::expm1((static_cast<double>(i) * step + lo) / 2595.0 * std::log(10.0));
    return ToIndex(std::floor(static_cast<double>(len + 1) * hz / rate));
  };
  const bool ok = VisitNumeric(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = y.as<T>();
    for (int64_t i = 0; i < spec * bins; ++i) out[i] = T(0);
    for (int64_t m = 0; m < bins; ++m) {
      const int64_t l = edge(m), c = edge(m + 1), h = edge(m + 2);
      auto set = [&](int64_t j, double v) {
        if (j >= 0 && j < spec) out[j * bins + m] = static_cast<T>(v);
      };
      // Edges come from caller data (up to +-2^62): loops visit only the output's rows, and
      // differences are taken in double.
      const auto dist = [](int64_t a, int64_t b) { return static_cast<double>(a) - static_cast<double>(b); };
      if (c == l) set(c, 1.0);
      else
        for (int64_t j = std::max<int64_t>(l, 0); j <= std::min(c, spec - 1); ++j) set(j, dist(j, l) / dist(c, l));
      for (int64_t j = std::max<int64_t>(c, 0); j < std::min(h, spec); ++j) set(j, dist(h, j) / dist(h, c));
    }
  });
  if (!ok) return OpUnimplemented(kOp, "output dtype " + DTypeStr(y.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"BlackmanWindow", WindowKernel<Window::kBlackman>, nullptr},
    {"DFT", DftKernel, nullptr},
    {"HammingWindow", WindowKernel<Window::kHamming>, nullptr},
    {"HannWindow", WindowKernel<Window::kHann>, nullptr},
    {"MelWeightMatrix", MelWeightMatrixKernel, nullptr},
    {"STFT", StftKernel, nullptr},
};

}  // namespace

std::span<const KernelDef> SignalKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
