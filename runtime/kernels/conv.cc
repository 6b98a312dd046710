// Conv (1-D to 3-D and beyond, grouped, dilated) by im2col + SGEMM, ConvTranspose by
// SGEMM + col2im, and kiln.NhwcConv (nhwc_conv.h) as Conv on NCHW copies. Scratch for the column matrix comes from the call's workspace. Conv
// applies the epilogue annotations of compiler/passes/epilogue.h (residual, activation)
// to each image and group right after its GEMM, while the output is still in cache.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "runtime/kernels/conv_geometry.h"
#include "runtime/cpu/arch/x86/cpu_isa.h"
#include "runtime/kernels/epilogue.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/gemm.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/nhwc_conv.h"
#include "runtime/kernels/thread_pool.h"

namespace kiln::cpu {
namespace {

Status ReadSpatialAttr(const AttrMap& attrs, const char* name, int sr, int64_t def,
                       int64_t* dst, std::string_view op) {
  const auto& v = attrs.GetInts(name);
  if (v.empty()) {
    std::fill(dst, dst + sr, def);
    return Status::Ok();
  }
  if (static_cast<int>(v.size()) != sr) {
    return OpError(op, std::string(name) + " has " + std::to_string(v.size()) + " values, expected " +
                           std::to_string(sr) + " (one per spatial axis)");
  }
  for (int i = 0; i < sr; ++i) {
    if (v[i] < 1) return OpError(op, std::string(name) + " must be >= 1, got " + std::to_string(v[i]));
    dst[i] = v[i];
  }
  return Status::Ok();
}

// Validates shapes and attributes common to both ops; fills everything but the pads.
// `w_spatial` are W's spatial dims (the kernel).
Status CommonGeometry(const KernelCall& call, std::string_view op, ConvGeometry* g) {
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  if (x.rank < 3 || x.rank > kMaxRank) {
    return OpError(op, "input X must have rank 3 to " + std::to_string(kMaxRank) + ", got " + ShapeStr(x));
  }
  if (w.rank != x.rank || y.rank != x.rank) {
    return OpError(op, "X " + ShapeStr(x) + ", W " + ShapeStr(w) + " and Y " + ShapeStr(y) +
                           " must have the same rank");
  }
  if (x.dtype != DType::kFloat32 || w.dtype != DType::kFloat32 || y.dtype != DType::kFloat32) {
    return OpError(op, "expected float32 X, W and Y, got " + DTypeStr(x.dtype) + ", " +
                           DTypeStr(w.dtype) + ", " + DTypeStr(y.dtype));
  }
  g->sr = x.rank - 2;
  g->group = call.attrs.GetInt("group", 1);
  if (g->group < 1) return OpError(op, "group must be >= 1, got " + std::to_string(g->group));
  for (int i = 0; i < g->sr; ++i) {
    g->kernel[i] = w.dims[i + 2];
    g->in[i] = x.dims[i + 2];
    g->out[i] = y.dims[i + 2];
    g->kernel_size *= g->kernel[i];
    g->in_size *= g->in[i];
    g->out_size *= g->out[i];
  }
  const auto& ks = call.attrs.GetInts("kernel_shape");
  if (!ks.empty()) {
    if (static_cast<int>(ks.size()) != g->sr || !std::equal(ks.begin(), ks.end(), g->kernel)) {
      return OpError(op, "kernel_shape attribute does not match W " + ShapeStr(w));
    }
  }
  KILN_RETURN_IF_ERROR(ReadSpatialAttr(call.attrs, "strides", g->sr, 1, g->stride, op));
  KILN_RETURN_IF_ERROR(ReadSpatialAttr(call.attrs, "dilations", g->sr, 1, g->dilation, op));
  return Status::Ok();
}

// Explicit pads, when given and not overridden by auto_pad.
Status ReadPads(const AttrMap& attrs, std::string_view op, ConvGeometry* g) {
  const auto& pads = attrs.GetInts("pads");
  if (pads.empty()) return Status::Ok();
  if (static_cast<int>(pads.size()) != 2 * g->sr) {
    return OpError(op, "pads has " + std::to_string(pads.size()) + " values, expected " +
                           std::to_string(2 * g->sr));
  }
  for (int i = 0; i < g->sr; ++i) {
    g->pad_begin[i] = pads[i];
    g->pad_end[i] = pads[i + g->sr];
    if (pads[i] < 0 || pads[i + g->sr] < 0) return OpError(op, "pads must be >= 0");
  }
  return Status::Ok();
}

}  // namespace

Status ConvGeometryFor(const KernelCall& call, ConvGeometry* g) {
  constexpr std::string_view kName = "Conv";
  KILN_RETURN_IF_ERROR(CommonGeometry(call, kName, g));
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  const int64_t c = x.dims[1], m = w.dims[0];
  if (c % g->group != 0) {
    return OpError(kName, "group " + std::to_string(g->group) + " does not divide input channels " +
                              std::to_string(c));
  }
  if (m % g->group != 0) {
    return OpError(kName, "group " + std::to_string(g->group) + " does not divide output channels " +
                              std::to_string(m));
  }
  if (w.dims[1] != c / g->group) {
    return OpError(kName, "W " + ShapeStr(w) + " has " + std::to_string(w.dims[1]) +
                              " input channels per group, expected " + std::to_string(c / g->group));
  }
  if (y.dims[0] != x.dims[0] || y.dims[1] != m) {
    return OpError(kName, "output " + ShapeStr(y) + " must have batch " + std::to_string(x.dims[0]) +
                              " and " + std::to_string(m) + " channels");
  }
  const std::string_view auto_pad = call.attrs.GetString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (int i = 0; i < g->sr; ++i) {
      const int64_t eff_k = (g->kernel[i] - 1) * g->dilation[i] + 1;
      const int64_t target = (g->in[i] + g->stride[i] - 1) / g->stride[i];
      const int64_t total = std::max<int64_t>(0, (target - 1) * g->stride[i] + eff_k - g->in[i]);
      // SAME_UPPER puts the odd pad at the end, SAME_LOWER at the beginning.
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pad_end[i] = total - g->pad_begin[i];
    }
  } else if (auto_pad == "NOTSET") {
    KILN_RETURN_IF_ERROR(ReadPads(call.attrs, kName, g));
  } else if (auto_pad != "VALID") {
    return OpError(kName, "unknown auto_pad '" + std::string(auto_pad) + "'");
  }
  for (int i = 0; i < g->sr; ++i) {
    const int64_t eff_k = (g->kernel[i] - 1) * g->dilation[i] + 1;
    const int64_t span = g->in[i] + g->pad_begin[i] + g->pad_end[i] - eff_k;
    const int64_t expected = span < 0 ? 0 : span / g->stride[i] + 1;
    if (g->out[i] != expected) {
      return OpError(kName, "output spatial dim " + std::to_string(i) + " is " +
                                std::to_string(g->out[i]) + ", expected " + std::to_string(expected) +
                                " from input " + ShapeStr(x) + ", kernel " + ShapeStr(w) +
                                " and the strides/pads/dilations");
    }
  }
  return Status::Ok();
}

Status CheckBias(const TensorRef* bias, int64_t m, std::string_view op) {
  if (bias && (bias->num_elements != m || bias->dtype != DType::kFloat32)) {
    return OpError(op, "bias " + ShapeStr(*bias) + " must be float32 with " + std::to_string(m) +
                           " elements");
  }
  return Status::Ok();
}

namespace {

bool IsPointwise(const ConvGeometry& g) {
  for (int i = 0; i < g.sr; ++i) {
    if (g.kernel[i] != 1 || g.stride[i] != 1 || g.pad_begin[i] != 0 || g.pad_end[i] != 0) return false;
  }
  return true;
}

// Column-buffer budget for one im2col tile: small enough to stay in L2 while OpenBLAS
// packs it, large enough that each GEMM still has a wide N.
constexpr int64_t kColTileBytes = 512 << 10;
constexpr int64_t kMinTilePixels = 128;

// Output pixels per im2col tile for a GEMM with K = `rows` over `out_size` pixels. Tiles
// are equal-sized (but for the last) so no tile is a sliver.
int64_t ConvTilePixels(int64_t rows, int64_t out_size) {
  if (rows <= 0 || out_size <= 0) return 0;
  int64_t tile = std::max(kMinTilePixels, kColTileBytes / (rows * static_cast<int64_t>(sizeof(float))));
  if (tile >= out_size) return out_size;
  const int64_t tiles = (out_size + tile - 1) / tile;
  tile = (out_size + tiles - 1) / tiles;
  return std::min(out_size, (tile + 15) / 16 * 16);
}

// Column buffers the workspace holds: up to kMaxTileSlots tiles of a Conv run at once, one
// per thread, each on its own buffer (ConvGroup). A fixed cap rather than the thread count
// because the workspace is sized from the shapes alone; 4 tiles of at most ~512 KiB (more
// only when a single tile is already 128 pixels wide) keep the scratch a few MiB.
constexpr int64_t kMaxTileSlots = 4;

int64_t ConvTileSlots(int64_t rows, int64_t out_size) {
  const int64_t tile = ConvTilePixels(rows, out_size);
  return tile == 0 ? 0 : std::min(kMaxTileSlots, (out_size + tile - 1) / tile);
}

// Depthwise 2-D conv (one input and one output channel per group, no dilation) runs
// directly on the image: im2col + GEMM would have M = 1.
bool IsDepthwise2D(int64_t group, const TensorRef& x, const TensorRef& w, const TensorRef& y,
                   const AttrMap& attrs) {
  if (x.rank != 4 || w.rank != 4 || y.rank != 4 || group < 2) return false;
  if (x.dims[1] != group || w.dims[0] != group || w.dims[1] != 1 || y.dims[1] != group) return false;
  for (int64_t d : attrs.GetInts("dilations")) {
    if (d != 1) return false;
  }
  return true;
}

size_t ConvWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs,
                     std::span<const TensorRef> outputs) {
  if (inputs.size() < 2 || outputs.empty() || !inputs[1].present() || !outputs[0].present()) return 0;
  const TensorRef &w = inputs[1], &y = outputs[0];
  if (w.rank < 3 || y.rank != w.rank) return 0;
  if (inputs[0].present() && IsDepthwise2D(attrs.GetInt("group", 1), inputs[0], w, y, attrs)) return 0;
  bool pointwise = attrs.GetString("auto_pad", "NOTSET") != "SAME_UPPER" &&
                   attrs.GetString("auto_pad", "NOTSET") != "SAME_LOWER";
  for (int64_t p : attrs.GetInts("pads")) pointwise = pointwise && p == 0;
  for (int64_t s : attrs.GetInts("strides")) pointwise = pointwise && s == 1;
  int64_t k = 1, o = 1;
  for (int i = 2; i < w.rank; ++i) {
    k *= w.dims[i];
    o *= y.dims[i];
    pointwise = pointwise && w.dims[i] == 1;
  }
  if (pointwise) return 0;
  const int64_t rows = w.dims[1] * k;
  return static_cast<size_t>(rows * ConvTilePixels(rows, o) * ConvTileSlots(rows, o)) * sizeof(float);
}

// The output positions o along an axis whose input position o * stride + offset lies in
// [0, n): o in [*lo, *hi), clamped to [0, out).
void ValidRange(int64_t offset, int64_t stride, int64_t n, int64_t out, int64_t* lo, int64_t* hi) {
  *lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  *hi = offset >= n ? 0 : (n - 1 - offset) / stride + 1;
  *lo = std::min(*lo, out);
  *hi = std::clamp(*hi, *lo, out);
}

// Fills col[(c, kernel offset), j] for output positions p0 + j, j in [0, count), of one
// image and one group. Each output row segment is zeros, a (strided) copy, zeros.
void Im2ColTile(const float* x, int64_t channels, const ConvGeometry& g, int64_t p0, int64_t count,
                float* col) {
  const int sr = g.sr, last = sr - 1;
  int64_t in_strides[kMaxSpatial], start[kMaxSpatial];
  ContiguousStrides(g.in, sr, in_strides);
  int64_t p = p0;
  for (int i = sr - 1; i >= 0; --i) {
    start[i] = p % g.out[i];
    p /= g.out[i];
  }
  const int64_t out_last = g.out[last], s = g.stride[last];
  for (int64_t c = 0; c < channels; ++c) {
    const float* xc = x + c * g.in_size;
    NdIndex kit(g.kernel, sr);
    do {
      const int64_t k_last = kit.idx[last] * g.dilation[last] - g.pad_begin[last];
      int64_t lo, hi;
      ValidRange(k_last, s, g.in[last], out_last, &lo, &hi);
      int64_t idx[kMaxSpatial];
      std::copy(start, start + sr, idx);
      float* dst = col;
      for (int64_t left = count; left > 0;) {
        const int64_t seg_begin = idx[last], seg_end = std::min(out_last, seg_begin + left);
        bool valid = true;
        int64_t off = 0;
        for (int i = 0; i < last; ++i) {
          const int64_t pos = idx[i] * g.stride[i] - g.pad_begin[i] + kit.idx[i] * g.dilation[i];
          if (pos < 0 || pos >= g.in[i]) { valid = false; break; }
          off += pos * in_strides[i];
        }
        const int64_t a = valid ? std::clamp(lo, seg_begin, seg_end) : seg_end;
        const int64_t b = valid ? std::clamp(hi, a, seg_end) : seg_end;
        float* d = dst - seg_begin;  // indexed by output position along the last axis
        std::fill(d + seg_begin, d + a, 0.0f);
        const float* row = xc + off + k_last;
        if (s == 1) {
          std::memcpy(d + a, row + a, static_cast<size_t>(b - a) * sizeof(float));
        } else {
          for (int64_t o = a; o < b; ++o) d[o] = row[o * s];
        }
        std::fill(d + b, d + seg_end, 0.0f);
        dst += seg_end - seg_begin;
        left -= seg_end - seg_begin;
        idx[last] = seg_end;
        for (int i = last; i > 0 && idx[i] == g.out[i]; --i) {
          idx[i] = 0;
          ++idx[i - 1];
        }
      }
      col += count;
    } while (kit.Next(sr));
  }
}

// y[j] = v for j < n, in groups of 8 that GCC vectorizes at -O2 (std::fill's loop is not:
// the cheap vectorizer cost model refuses loops that need a scalar epilogue).
void FillFloats(float* __restrict y, int64_t n, float v) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    for (int k = 0; k < 8; ++k) y[j + k] = v;
  }
  for (; j < n; ++j) y[j] = v;
}

// --- Depthwise ----------------------------------------------------------------------------
// y[o] += a * x[o * stride] for o in [0, n), stride 1 or 2 vectorised. The build targets
// baseline x86-64, so the AVX2 versions are chosen at run time (runtime/cpu/arch/x86/cpu_isa.h).

void AxpyStridedScalar(float a, const float* x, int64_t stride, int64_t n, float* y) {
  for (int64_t o = 0; o < n; ++o) y[o] += a * x[o * stride];
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) void AxpyStridedAvx2(float a, const float* x, int64_t stride,
                                                         int64_t n, float* y) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t o = 0;
  if (stride == 1) {
    for (; o + 8 <= n; o += 8) {
      _mm256_storeu_ps(y + o, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + o), _mm256_loadu_ps(y + o)));
    }
  } else if (stride == 2) {
    // Reads x[2o .. 2o+15]; the last one needed is x[2(n-1)], so stop while 2o + 16 <= 2n - 1.
    for (; 2 * o + 16 <= 2 * n - 1; o += 8) {
      const __m256 lo = _mm256_loadu_ps(x + 2 * o), hi = _mm256_loadu_ps(x + 2 * o + 8);
      // Even lanes of lo and hi, interleaved by 128-bit half, then put in order.
      const __m256 ev = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
      const __m256 xs = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
      _mm256_storeu_ps(y + o, _mm256_fmadd_ps(va, xs, _mm256_loadu_ps(y + o)));
    }
  }
  for (; o < n; ++o) y[o] += a * x[o * stride];
}

bool HasAvx2Fma() { return ActiveCpuIsa() >= CpuIsa::kAvx2Fma; }
#endif

void AxpyStrided(float a, const float* x, int64_t stride, int64_t n, float* y) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (HasAvx2Fma()) return AxpyStridedAvx2(a, x, stride, n, y);
#endif
  AxpyStridedScalar(a, x, stride, n, y);
}

// One channel of a depthwise 2-D conv: each output row starts at the bias and gets one
// axpy per kernel tap over the output columns whose input column is inside the image.
void DepthwiseConv2DAxpy(const float* x, const float* w, float bias, const ConvGeometry& g, float* y) {
  const int64_t in_h = g.in[0], in_w = g.in[1], out_h = g.out[0], out_w = g.out[1];
  const int64_t kh_n = g.kernel[0], kw_n = g.kernel[1], sh = g.stride[0], sw = g.stride[1];
  // The valid output columns of each kernel column, the same for every row (up to 16
  // kernel columns kept; wider kernels recompute them).
  constexpr int64_t kKeep = 16;
  int64_t col_lo[kKeep], col_hi[kKeep];
  for (int64_t kw = 0; kw < std::min(kw_n, kKeep); ++kw) {
    ValidRange(kw - g.pad_begin[1], sw, in_w, out_w, &col_lo[kw], &col_hi[kw]);
  }
  for (int64_t oh = 0; oh < out_h; ++oh) {
    float* yr = y + oh * out_w;
    FillFloats(yr, out_w, bias);
    for (int64_t kh = 0; kh < kh_n; ++kh) {
      const int64_t ih = oh * sh - g.pad_begin[0] + kh;
      if (ih < 0 || ih >= in_h) continue;
      const float* xr = x + ih * in_w;
      for (int64_t kw = 0; kw < kw_n; ++kw) {
        const int64_t off = kw - g.pad_begin[1];
        int64_t lo, hi;
        if (kw < kKeep) {
          lo = col_lo[kw];
          hi = col_hi[kw];
        } else {
          ValidRange(off, sw, in_w, out_w, &lo, &hi);
        }
        if (hi > lo) AxpyStrided(w[kh * kw_n + kw], xr + lo * sw + off, sw, hi - lo, yr + lo);
      }
    }
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// Small kernels (up to kMaxTaps taps, stride 1 or 2, rows up to kMaxRow floats once padded)
// keep each output in a register over all its taps instead of one pass over the output row
// per tap: the input rows a output row reads are copied, zero-padded left and right, into
// a stack buffer, so every tap is a plain (strided) load. Each output is bias then one FMA
// per tap in the kernel's row-major order (rows outside the image skipped), vector lanes and
// tail alike.
constexpr int64_t kMaxTaps = 49, kMaxRow = 1024;

bool DepthwiseRegisterFits(const ConvGeometry& g) {
  const int64_t sw = g.stride[1];
  const int64_t padded = (g.out[1] - 1) * sw + g.kernel[1];
  return g.kernel[0] * g.kernel[1] <= kMaxTaps && (sw == 1 || sw == 2) && padded + 16 <= kMaxRow &&
         g.kernel[0] <= 7;
}

__attribute__((target("avx2,fma"))) void DepthwiseConv2DAvx2(const float* x, const float* w, float bias,
                                                             const ConvGeometry& g, float* y) {
  const int64_t in_h = g.in[0], in_w = g.in[1], out_h = g.out[0], out_w = g.out[1];
  const int64_t kh_n = g.kernel[0], kw_n = g.kernel[1], sh = g.stride[0], sw = g.stride[1];
  const int64_t left = g.pad_begin[1];
  const int64_t padded = (out_w - 1) * sw + kw_n;  // columns an output row reads
  alignas(32) float rows[7][kMaxRow];
  const float* row_ptr[7];
  float taps_w[kMaxTaps];
  for (int64_t oh = 0; oh < out_h; ++oh) {
    int64_t n_rows = 0;
    for (int64_t kh = 0; kh < kh_n; ++kh) {
      const int64_t ih = oh * sh - g.pad_begin[0] + kh;
      if (ih < 0 || ih >= in_h) continue;
      // Padded columns [0, padded) are input columns [-left, padded - left).
      float* r = rows[n_rows];
      const int64_t lo = std::min(left, padded), hi = std::clamp(in_w + left, lo, padded);
      std::memset(r, 0, static_cast<size_t>(lo) * sizeof(float));
      std::memcpy(r + lo, x + ih * in_w + (lo - left), static_cast<size_t>(hi - lo) * sizeof(float));
      std::memset(r + hi, 0, static_cast<size_t>(padded + 16 - hi) * sizeof(float));
      row_ptr[n_rows] = r;
      for (int64_t kw = 0; kw < kw_n; ++kw) taps_w[n_rows * kw_n + kw] = w[kh * kw_n + kw];
      ++n_rows;
    }
    float* yr = y + oh * out_w;
    int64_t o = 0;
    for (; o + 8 <= out_w; o += 8) {
      __m256 acc = _mm256_set1_ps(bias);
      for (int64_t r = 0; r < n_rows; ++r) {
        const float* src = row_ptr[r] + o * sw;
        for (int64_t kw = 0; kw < kw_n; ++kw) {
          __m256 xs;
          if (sw == 1) {
            xs = _mm256_loadu_ps(src + kw);
          } else {
            const __m256 lo8 = _mm256_loadu_ps(src + kw), hi8 = _mm256_loadu_ps(src + kw + 8);
            const __m256 ev = _mm256_shuffle_ps(lo8, hi8, _MM_SHUFFLE(2, 0, 2, 0));
            xs = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
          }
          acc = _mm256_fmadd_ps(_mm256_set1_ps(taps_w[r * kw_n + kw]), xs, acc);
        }
      }
      _mm256_storeu_ps(yr + o, acc);
    }
    for (; o < out_w; ++o) {
      float acc = bias;
      for (int64_t r = 0; r < n_rows; ++r) {
        const float* src = row_ptr[r] + o * sw;
        for (int64_t kw = 0; kw < kw_n; ++kw) acc = std::fma(taps_w[r * kw_n + kw], src[kw], acc);
      }
      yr[o] = acc;
    }
  }
}
#endif

// One channel of a depthwise 2-D conv.
void DepthwiseConv2D(const float* x, const float* w, float bias, const ConvGeometry& g, float* y) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (HasAvx2Fma() && DepthwiseRegisterFits(g)) return DepthwiseConv2DAvx2(x, w, bias, g, y);
#endif
  DepthwiseConv2DAxpy(x, w, bias, g, y);
}

// y[r, j] = bias[r] for the `cols` columns of `rows` rows with leading dim ld, so the GEMM
// can accumulate onto it (beta = 1) instead of a separate bias pass.
void FillBias(const float* bias, int64_t rows, int64_t cols, int64_t ld, float* y) {
  for (int64_t r = 0; r < rows; ++r) FillFloats(y + r * ld, cols, bias[r]);
}

// Y[mg, count] (columns p0 .. p0 + count of one image and group, row stride out_size) =
// W[mg, rows] * im2col(X) (+ bias), then the tile's epilogue, while the tile is in cache.
// `threads` fill the column tile (each a range of input channels: disjoint rows of the
// tile) and share its GEMM (runtime/kernels/gemm.h); the bits do not depend on them. A
// pointwise conv's tiles narrower than the image are ParallelSgemm's column blocks of the
// whole product (SgemmColumnBlock), each one call, as ParallelSgemm would make it.
void ConvTile(const float* xg, const float* wg, const float* bias, int64_t cg, int64_t mg, int64_t rows,
              const ConvGeometry& g, bool pointwise, int64_t p0, int64_t count, float* col, float* yg,
              ThreadPool* threads, const Epilogue& epilogue, const TensorRef& y, int64_t y_offset) {
  if (bias) FillBias(bias, mg, count, g.out_size, yg + p0);
  const float* bmat = xg + p0;
  if (!pointwise) {
    ParallelFor(threads, cg, MinItemsPerPart(g.kernel_size * count), [&](int64_t c0, int64_t c1) {
      Im2ColTile(xg + c0 * g.in_size, c1 - c0, g, p0, count, col + c0 * g.kernel_size * count);
    });
    bmat = col;
  }
  if (pointwise && count < g.out_size) {
    Sgemm(false, false, mg, count, rows, 1.0f, wg, rows, bmat, g.out_size, bias ? 1.0f : 0.0f, yg + p0, g.out_size);
  } else {
    ParallelSgemm(threads, false, false, mg, count, rows, 1.0f, wg, rows, bmat, pointwise ? g.out_size : count,
                  bias ? 1.0f : 0.0f, yg + p0, g.out_size);
  }
  if (count == g.out_size) {  // one tile: the group's rows are contiguous, one call
    ApplyEpilogue(epilogue, y, y_offset, mg * g.out_size);
  } else {
    for (int64_t r = 0; r < mg; ++r) ApplyEpilogue(epilogue, y, y_offset + r * g.out_size + p0, count);
  }
}

// One image, one group: Y[mg, out_size] = W[mg, rows] * im2col(X) (+ bias), tile by tile
// (Y's elements from y_offset on are the group's). With `slots` column buffers of `tile`
// pixels at `col` (a pointwise conv needs none) and at least a tile per thread (threads
// beyond `slots` idle), each thread takes whole tiles, the next one left, on its own
// buffer, and computes them alone: one fork and join per group instead of three per tile,
// no GEMM cut thinner than a tile, and bias fill and epilogue in parallel too. Otherwise
// the threads share each tile. A tile's result is the same either way, so the bits do not
// depend on the thread count or on which thread takes which tile.
void ConvGroup(const float* xg, const float* wg, const float* bias, int64_t cg, int64_t mg, int64_t rows,
               const ConvGeometry& g, bool pointwise, float* col, int64_t slots, float* yg, ThreadPool* threads,
               const Epilogue& epilogue, const TensorRef& y, int64_t y_offset) {
  const int64_t tile = pointwise ? SgemmColumnBlock(mg, g.out_size, rows) : ConvTilePixels(rows, g.out_size);
  const int64_t tiles = (g.out_size + tile - 1) / tile;
  const int64_t parts = threads ? std::min<int64_t>(pointwise ? tiles : slots, threads->size()) : 1;
  if (parts >= 2 && tiles >= parts) {
    std::atomic<int64_t> next{0};
    ParallelFor(threads, parts, 1, [&](int64_t, int64_t, int part) {
      for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tiles;) {
        const int64_t p0 = t * tile;
        ConvTile(xg, wg, bias, cg, mg, rows, g, pointwise, p0, std::min(tile, g.out_size - p0),
                 pointwise ? nullptr : col + part * rows * tile, yg, nullptr, epilogue, y, y_offset);
      }
    });
    return;
  }
  for (int64_t p0 = 0; p0 < g.out_size; p0 += tile) {
    ConvTile(xg, wg, bias, cg, mg, rows, g, pointwise, p0, std::min(tile, g.out_size - p0), col, yg, threads,
             epilogue, y, y_offset);
  }
}

Status ConvKernel(const KernelCall& call) {
  constexpr std::string_view kName = "Conv";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  ConvGeometry g;
  KILN_RETURN_IF_ERROR(ConvGeometryFor(call, &g));
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  const TensorRef* bias = OptionalInput(call, 2);
  const int64_t n = x.dims[0], c = x.dims[1], m = w.dims[0];
  KILN_RETURN_IF_ERROR(CheckBias(bias, m, kName));
  Epilogue epilogue;
  KILN_RETURN_IF_ERROR(ReadEpilogue(call, kName, &epilogue));
  if (y.num_elements == 0) return Status::Ok();
  const float* px = x.as<const float>();
  const float* pw = w.as<const float>();
  const float* pb = bias ? bias->as<const float>() : nullptr;
  float* py = y.as<float>();
  if (IsDepthwise2D(g.group, x, w, y, call.attrs)) {
    // Channels are independent: split them over the threads.
    ParallelFor(call.threads, n * c, MinItemsPerPart(g.out_size * g.kernel_size), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        DepthwiseConv2D(px + i * g.in_size, pw + (i % c) * g.kernel_size, pb ? pb[i % c] : 0.0f, g,
                        py + i * g.out_size);
        ApplyEpilogue(epilogue, y, i * g.out_size, g.out_size);
      }
    });
    return Status::Ok();
  }
  const int64_t cg = c / g.group, mg = m / g.group;
  const int64_t rows = cg * g.kernel_size;  // GEMM K
  const bool pointwise = IsPointwise(g);
  int64_t slots = 0;  // column buffers in the workspace
  if (!pointwise && rows > 0) {
    const size_t tile_bytes = static_cast<size_t>(rows * ConvTilePixels(rows, g.out_size)) * sizeof(float);
    KILN_RETURN_IF_ERROR(CheckWorkspace(call, tile_bytes, kName));
    slots = std::min<int64_t>(ConvTileSlots(rows, g.out_size), static_cast<int64_t>(call.workspace_bytes / tile_bytes));
  }
  float* col = static_cast<float*>(call.workspace);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t grp = 0; grp < g.group; ++grp) {
      const float* xg = px + (b * c + grp * cg) * g.in_size;
      float* yg = py + (b * m + grp * mg) * g.out_size;
      const float* bg = pb ? pb + grp * mg : nullptr;
      if (rows == 0) {
        if (bg) {
          FillBias(bg, mg, g.out_size, g.out_size, yg);
        } else {
          std::fill(yg, yg + mg * g.out_size, 0.0f);
        }
        ApplyEpilogue(epilogue, y, yg - py, mg * g.out_size);
      } else {
        ConvGroup(xg, pw + grp * mg * rows, bg, cg, mg, rows, g, pointwise, col, slots, yg, call.threads, epilogue,
                  y, yg - py);
      }
    }
  }
  return Status::Ok();
}

// --- ConvTranspose -------------------------------------------------------------------------

Status ConvTransposeGeometryFor(const KernelCall& call, ConvGeometry* g) {
  constexpr std::string_view kName = "ConvTranspose";
  KILN_RETURN_IF_ERROR(CommonGeometry(call, kName, g));
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  const int64_t c = x.dims[1];
  if (c % g->group != 0) {
    return OpError(kName, "group " + std::to_string(g->group) + " does not divide input channels " +
                              std::to_string(c));
  }
  if (w.dims[0] != c) {
    return OpError(kName, "W " + ShapeStr(w) + " must have " + std::to_string(c) +
                              " rows (input channels) in dim 0");
  }
  const int64_t m = w.dims[1] * g->group;
  if (y.dims[0] != x.dims[0] || y.dims[1] != m) {
    return OpError(kName, "output " + ShapeStr(y) + " must have batch " + std::to_string(x.dims[0]) +
                              " and " + std::to_string(m) + " channels");
  }
  int64_t out_pad[kMaxSpatial] = {};
  const auto& op_attr = call.attrs.GetInts("output_padding");
  if (!op_attr.empty()) {
    if (static_cast<int>(op_attr.size()) != g->sr) {
      return OpError(kName, "output_padding has " + std::to_string(op_attr.size()) +
                                " values, expected " + std::to_string(g->sr));
    }
    std::copy(op_attr.begin(), op_attr.end(), out_pad);
  }
  const std::string_view auto_pad = call.attrs.GetString("auto_pad", "NOTSET");
  const bool from_output = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" ||
                           !call.attrs.GetInts("output_shape").empty();
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") {
    return OpError(kName, "unknown auto_pad '" + std::string(auto_pad) + "'");
  }
  if (from_output) {
    // The output size is fixed, so the pads are whatever makes it come out right (the
    // spec's rule: SAME_UPPER puts floor(total / 2) first, NOTSET and SAME_LOWER put it
    // last). An output_shape past the full extent makes the total negative: the output
    // gets zeros past the last written position (onnx/reference/ops/op_conv_transpose.py).
    for (int i = 0; i < g->sr; ++i) {
      const int64_t full = g->stride[i] * (g->in[i] - 1) + out_pad[i] +
                           (g->kernel[i] - 1) * g->dilation[i] + 1;
      const int64_t total = full - g->out[i];
      const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2)
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      g->pad_end[i] = total - g->pad_begin[i];
    }
  } else if (auto_pad == "NOTSET") {
    KILN_RETURN_IF_ERROR(ReadPads(call.attrs, kName, g));
  }
  for (int i = 0; i < g->sr; ++i) {
    const int64_t expected = g->stride[i] * (g->in[i] - 1) + out_pad[i] +
                             (g->kernel[i] - 1) * g->dilation[i] + 1 - g->pad_begin[i] - g->pad_end[i];
    if (g->out[i] != expected) {
      return OpError(kName, "output spatial dim " + std::to_string(i) + " is " +
                                std::to_string(g->out[i]) + ", expected " + std::to_string(expected));
    }
  }
  return Status::Ok();
}

size_t ConvTransposeWorkspace(const AttrMap&, std::span<const TensorRef> inputs,
                              std::span<const TensorRef> outputs) {
  if (inputs.size() < 2 || !inputs[0].present() || !inputs[1].present()) return 0;
  const TensorRef &x = inputs[0], &w = inputs[1];
  if (w.rank < 3 || x.rank != w.rank) return 0;
  int64_t k = 1, d = 1;
  for (int i = 2; i < w.rank; ++i) {
    k *= w.dims[i];
    d *= x.dims[i];
  }
  return static_cast<size_t>(w.dims[1] * k * d) * sizeof(float);
}

// Scatter-adds col[(m, kernel offset), input position] into y for one image and group.
void Col2Im(const float* col, int64_t channels, const ConvGeometry& g, float* y) {
  const int sr = g.sr;
  int64_t out_strides[kMaxSpatial];
  ContiguousStrides(g.out, sr, out_strides);
  const int last = sr - 1;
  const int64_t in_last = g.in[last];
  for (int64_t c = 0; c < channels; ++c) {
    float* yc = y + c * g.out_size;
    NdIndex kit(g.kernel, sr);
    do {
      NdIndex iit(g.in, sr);
      const int64_t k_last = kit.idx[last] * g.dilation[last] - g.pad_begin[last];
      do {
        bool valid = true;
        int64_t off = 0;
        for (int i = 0; i < last; ++i) {
          const int64_t pos = iit.idx[i] * g.stride[i] - g.pad_begin[i] + kit.idx[i] * g.dilation[i];
          if (pos < 0 || pos >= g.out[i]) { valid = false; break; }
          off += pos * out_strides[i];
        }
        if (valid) {
          float* row = yc + off;
          const int64_t s = g.stride[last], n = g.out[last];
          for (int64_t i = 0; i < in_last; ++i) {
            const int64_t pos = i * s + k_last;
            if (pos >= 0 && pos < n) row[pos] += col[i];
          }
        }
        col += in_last;
      } while (iit.Next(last));
    } while (kit.Next(sr));
  }
}

Status ConvTransposeKernel(const KernelCall& call) {
  constexpr std::string_view kName = "ConvTranspose";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  ConvGeometry g;
  KILN_RETURN_IF_ERROR(ConvTransposeGeometryFor(call, &g));
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  const TensorRef* bias = OptionalInput(call, 2);
  const int64_t n = x.dims[0], c = x.dims[1], m = y.dims[1];
  const int64_t cg = c / g.group, mg = m / g.group;
  KILN_RETURN_IF_ERROR(CheckBias(bias, m, kName));
  if (y.num_elements == 0) return Status::Ok();
  float* py = y.as<float>();
  // Y starts at the bias (or zero) and col2im scatter-adds the products onto it.
  if (bias) {
    for (int64_t b = 0; b < n; ++b) {
      FillBias(bias->as<const float>(), m, g.out_size, g.out_size, py + b * m * g.out_size);
    }
  } else {
    std::fill(py, py + y.num_elements, 0.0f);
  }
  const int64_t rows = mg * g.kernel_size;
  if (x.num_elements > 0 && rows > 0) {
    KILN_RETURN_IF_ERROR(CheckWorkspace(call, static_cast<size_t>(rows * g.in_size) * sizeof(float), kName));
    float* col = static_cast<float*>(call.workspace);
    const float* px = x.as<const float>();
    const float* pw = w.as<const float>();
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t grp = 0; grp < g.group; ++grp) {
        const float* xg = px + (b * c + grp * cg) * g.in_size;
        const float* wg = pw + grp * cg * rows;
        if (cg == 0) continue;
        ParallelSgemm(call.threads, true, false, rows, g.in_size, cg, 1.0f, wg, rows, xg, g.in_size, 0.0f, col,
                      g.in_size);
        // Output channels are disjoint: split them over the threads.
        ParallelFor(call.threads, mg, MinItemsPerPart(g.kernel_size * g.in_size), [&](int64_t c0, int64_t c1) {
          Col2Im(col + c0 * g.kernel_size * g.in_size, c1 - c0, g, py + (b * m + grp * mg + c0) * g.out_size);
        });
      }
    }
  }
  return Status::Ok();
}

// ---- kiln.NhwcConv --------------------------------------------------------------------

// Per image of `n`, the [rows, cols] matrix at `in` transposed into [cols, rows] at `out`: NHWC
// to NCHW with rows = H * W and cols = C, and back with the two swapped. In 32 x 32 tiles, the
// images and tile rows split over the threads.
void TransposeImages(const float* in, float* out, int64_t n, int64_t rows, int64_t cols, ThreadPool* threads) {
  constexpr int64_t kTile = 32;
  const int64_t bands = (rows + kTile - 1) / kTile;
  ParallelFor(threads, n * bands, MinItemsPerPart(kTile * cols), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t b = k / bands, r0 = (k % bands) * kTile, r1 = std::min(rows, r0 + kTile);
      const float* src = in + b * rows * cols;
      float* dst = out + b * rows * cols;
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
      }
    }
  });
}

constexpr size_t kNhwcAlign = 64;
size_t AlignedBytes(const TensorRef& t) {
  return (static_cast<size_t>(t.num_elements) * sizeof(float) + kNhwcAlign - 1) / kNhwcAlign * kNhwcAlign;
}

// Conv's workspace, then NCHW copies of the NHWC ones among X, Y and the residual.
size_t NhwcConvWorkspace(const AttrMap& attrs, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) {
  const NchwViews v(attrs, inputs, outputs);
  size_t bytes = (ConvWorkspace(attrs, v.inputs(), v.outputs()) + kNhwcAlign - 1) / kNhwcAlign * kNhwcAlign;
  if (XIsNhwc(attrs) && !inputs.empty() && inputs[0].present()) bytes += AlignedBytes(inputs[0]);
  if (YIsNhwc(attrs) && !outputs.empty() && outputs[0].present()) bytes += AlignedBytes(outputs[0]);
  if (YIsNhwc(attrs) && inputs.size() > kEpilogueResidualInput && inputs[kEpilogueResidualInput].present())
    bytes += AlignedBytes(inputs[kEpilogueResidualInput]);
  return bytes;
}

// Whether the rank-4 NCHW (view of a) tensor `t` has 1 x 1 images.
bool OnePixel(const TensorRef& t) { return t.dims[2] == 1 && t.dims[3] == 1; }

Status NhwcConvKernel(const KernelCall& call) {
  constexpr std::string_view kName = kNhwcConvOp;
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  const TensorRef* r = OptionalInput(call, kEpilogueResidualInput);
  for (const TensorRef* t : {&x, &y, r})
    if (t != nullptr && t->rank != 4)
      return OpError(kName, "X, Y and the residual must have rank 4, got " + ShapeStr(*t));
  const NchwViews v(call.attrs, call.inputs, call.outputs);
  // 1 x 1 images (a squeeze-and-excitation's Convs) are the same bytes in either layout.
  const bool points = OnePixel(v.inputs()[0]) && OnePixel(v.outputs()[0]);
  const bool x_nhwc = XIsNhwc(call.attrs) && !points, y_nhwc = YIsNhwc(call.attrs) && !points;
  const size_t conv_bytes = (ConvWorkspace(call.attrs, v.inputs(), v.outputs()) + kNhwcAlign - 1) / kNhwcAlign * kNhwcAlign;
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, NhwcConvWorkspace(call.attrs, call.inputs, call.outputs), kName));
  if (x.dtype != DType::kFloat32 || y.dtype != DType::kFloat32 || (r != nullptr && r->dtype != DType::kFloat32))
    return OpError(kName, "expected float32 X, Y and residual, got " + DTypeStr(x.dtype) + " and " + DTypeStr(y.dtype));
  // NCHW copies of the NHWC operands: X (and the residual) transposed in, Conv, Y transposed out.
  auto* at = static_cast<uint8_t*>(call.workspace) + conv_bytes;
  std::array<TensorRef, 4> in{};
  std::copy(v.inputs().begin(), v.inputs().end(), in.begin());
  const auto copy_in = [&](size_t k) {
    const TensorRef& t = call.inputs[k];
    in[k].data = at;
    TransposeImages(t.as<const float>(), in[k].as<float>(), t.dims[0], t.dims[1] * t.dims[2], t.dims[3], call.threads);
    at += AlignedBytes(t);
  };
  if (x_nhwc) copy_in(0);
  if (r != nullptr && y_nhwc) copy_in(kEpilogueResidualInput);
  TensorRef out = v.outputs()[0];
  if (y_nhwc) out.data = at;
  const KernelCall conv{call.attrs, {in.data(), v.inputs().size()}, {&out, 1}, call.workspace, conv_bytes,
                        call.threads};
  KILN_RETURN_IF_ERROR(ConvKernel(conv));
  if (y_nhwc)
    TransposeImages(out.as<const float>(), y.as<float>(), y.dims[0], y.dims[3], y.dims[1] * y.dims[2], call.threads);
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Conv", ConvKernel, ConvWorkspace},
    {"ConvTranspose", ConvTransposeKernel, ConvTransposeWorkspace},
    {"kiln.NhwcConv", NhwcConvKernel, NhwcConvWorkspace, false, {2, 4, 0b11, 1, 1}},
};

}  // namespace

std::span<const KernelDef> ConvKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
