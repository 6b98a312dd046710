// Pooling: MaxPool (with optional Indices), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool over any number of spatial axes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/pool_geometry.h"
#include "runtime/kernels/thread_pool.h"

namespace kiln::cpu {

Status PoolGeometryFor(const KernelCall& call, std::string_view op, PoolGeometry* g) {
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.rank < 3 || x.rank > kMaxRank || y.rank != x.rank) {
    return OpError(op, "X " + ShapeStr(x) + " and Y " + ShapeStr(y) +
                           " must have the same rank, 3 or more");
  }
  if (y.dims[0] != x.dims[0] || y.dims[1] != x.dims[1]) {
    return OpError(op, "output " + ShapeStr(y) + " must keep batch and channels of " + ShapeStr(x));
  }
  g->sr = x.rank - 2;
  const auto& ks = call.attrs.GetInts("kernel_shape");
  if (static_cast<int>(ks.size()) != g->sr) {
    return OpError(op, "kernel_shape has " + std::to_string(ks.size()) + " values, expected " +
                           std::to_string(g->sr));
  }
  const auto& st = call.attrs.GetInts("strides");
  const auto& dl = call.attrs.GetInts("dilations");
  const auto& pads = call.attrs.GetInts("pads");
  if ((!st.empty() && static_cast<int>(st.size()) != g->sr) ||
      (!dl.empty() && static_cast<int>(dl.size()) != g->sr) ||
      (!pads.empty() && static_cast<int>(pads.size()) != 2 * g->sr)) {
    return OpError(op, "strides/dilations need " + std::to_string(g->sr) + " values and pads " +
                           std::to_string(2 * g->sr));
  }
  const std::string_view auto_pad = call.attrs.GetString("auto_pad", "NOTSET");
  for (int i = 0; i < g->sr; ++i) {
    g->kernel[i] = ks[i];
    g->stride[i] = st.empty() ? 1 : st[i];
    g->dilation[i] = dl.empty() ? 1 : dl[i];
    g->in[i] = x.dims[i + 2];
    g->out[i] = y.dims[i + 2];
    g->in_size *= g->in[i];
    g->out_size *= g->out[i];
    if (g->kernel[i] < 1 || g->stride[i] < 1 || g->dilation[i] < 1) {
      return OpError(op, "kernel_shape, strides and dilations must be >= 1");
    }
    // Attributes from an artifact may be anything: the window's extent, the padded input and
    // every window start must fit int64 (computed in 128 bits, refused when they do not).
    const __int128 eff_k = static_cast<__int128>(g->kernel[i] - 1) * g->dilation[i] + 1;
    if (eff_k > INT64_MAX)
      return OpError(op, "kernel_shape and dilations on spatial axis " + std::to_string(i) +
                             " make a window wider than int64");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const __int128 total =
          std::max<__int128>(0, static_cast<__int128>(g->out[i] - 1) * g->stride[i] + eff_k - g->in[i]);
      if (total > INT64_MAX) return OpError(op, "SAME padding on spatial axis " + std::to_string(i) + " overflows int64");
      g->pad_begin[i] = static_cast<int64_t>(auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2);
      g->pad_end[i] = static_cast<int64_t>(total) - g->pad_begin[i];
    } else if (auto_pad == "NOTSET") {
      if (!pads.empty()) {
        g->pad_begin[i] = pads[i];
        g->pad_end[i] = pads[i + g->sr];
      }
    } else if (auto_pad != "VALID") {
      return OpError(op, "unknown auto_pad '" + std::string(auto_pad) + "'");
    }
    const __int128 padded_in = static_cast<__int128>(g->in[i]) + g->pad_begin[i] + g->pad_end[i];
    if (padded_in > INT64_MAX || padded_in < INT64_MIN || g->pad_begin[i] == INT64_MIN)
      return OpError(op, "pads on spatial axis " + std::to_string(i) + " overflow int64");
    // floor(span / stride) + 1 windows, or ceil(span / stride) + 1 with ceil_mode, at least 0:
    // a window wider than the padded input (span < 0) is one window with ceil_mode when it
    // starts inside (span > -stride), as in ONNX's reference and onnxruntime. With ceil_mode the
    // last window may also start past the padded end; ONNX drops it.
    const __int128 span = padded_in - eff_k;
    const int64_t floor_out = span < 0 ? 0 : static_cast<int64_t>(span / g->stride[i] + 1);
    const int64_t ceil_out = span < 0 ? (-span < g->stride[i] ? 1 : 0)
                                      : static_cast<int64_t>((span + g->stride[i] - 1) / g->stride[i] + 1);
    if (g->out[i] != floor_out && g->out[i] != ceil_out && auto_pad == "NOTSET") {
      return OpError(op, "output spatial dim " + std::to_string(i) + " is " + std::to_string(g->out[i]) +
                             ", expected " + std::to_string(floor_out) +
                             (ceil_out != floor_out ? " (or " + std::to_string(ceil_out) + " with ceil_mode)" : ""));
    }
  }
  return Status::Ok();
}

namespace {

// Per-axis window bounds for one output position: the kernel taps that land inside the
// input, and how many land inside the padded extent (for count_include_pad).
struct AxisWindow {
  int64_t pos;     // input coordinate of the first valid tap; 0 when there is none, so that
                   // offsets derived from an empty window stay in range (hostile strides and
                   // pads put tap 0 near INT64_MAX, found by fuzzing)
  int64_t taps;    // valid taps: pos, pos + d, ..., inside [0, in)
  int64_t padded;  // taps inside [-pad_begin, in + pad_end)
};

// The taps k of [0, kernel) whose input position start + k * d (d >= 1) lies in [lo, hi), as
// [first, end) (empty when first >= end). Computed by division, not by visiting every tap:
// a hostile kernel_shape of 2^40 with pads to match made one output position take minutes
// (found by fuzzing). 128-bit, so no sum or product of int64 attributes overflows.
void TapRange(__int128 start, int64_t d, int64_t kernel, __int128 lo, __int128 hi, int64_t* first, int64_t* end) {
  auto floor_div = [](__int128 a, __int128 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  const __int128 f = std::max<__int128>(0, -floor_div(start - lo, d));         // ceil((lo - start) / d)
  const __int128 e = std::min<__int128>(kernel, floor_div(hi - 1 - start, d) + 1);
  *first = static_cast<int64_t>(f);
  *end = static_cast<int64_t>(std::max(f, e));
}

AxisWindow Window(const PoolGeometry& g, int i, int64_t o) {
  const __int128 start = static_cast<__int128>(o) * g.stride[i] - g.pad_begin[i];
  AxisWindow w{0, 0, 0};
  int64_t first = 0, end = 0;
  TapRange(start, g.dilation[i], g.kernel[i], 0, g.in[i], &first, &end);
  if (first < end) {
    w.pos = static_cast<int64_t>(start + static_cast<__int128>(first) * g.dilation[i]);
    w.taps = end - first;
  }
  int64_t pf = 0, pe = 0;
  TapRange(start, g.dilation[i], g.kernel[i], -static_cast<__int128>(g.pad_begin[i]),
           static_cast<__int128>(g.in[i]) + g.pad_end[i], &pf, &pe);
  w.padded = pe - pf;
  return w;
}

enum class PoolKind { kMax, kAverage, kLp };

// Bytes of the per-axis windows (PoolPlan::axis) for this output: one AxisWindow per output
// coordinate on each spatial axis.
size_t PoolWindowBytes(const TensorRef& y) {
  int64_t n = 0;
  for (int i = 2; i < y.rank; ++i) n += y.dims[i];
  return static_cast<size_t>(n) * sizeof(AxisWindow);
}

size_t PoolWorkspace(const AttrMap&, std::span<const TensorRef>, std::span<const TensorRef> outputs) {
  return outputs.empty() || !outputs[0].present() ? 0 : PoolWindowBytes(outputs[0]);
}

// The windows of every output position along each axis, computed once per call into the
// call's workspace (read-only while the planes run).
struct PoolPlan {
  const AxisWindow* axis[kMaxSpatial] = {};
  int64_t in_strides[kMaxSpatial] = {}, col_strides[kMaxSpatial] = {};
  // One tap further along axis i: in the plane, and in the column-major numbering.
  int64_t tap_step[kMaxSpatial] = {}, tap_cstep[kMaxSpatial] = {};
};

// `windows` holds PoolWindowBytes(y) bytes.
PoolPlan MakePoolPlan(const PoolGeometry& g, AxisWindow* windows) {
  PoolPlan plan;
  ContiguousStrides(g.in, g.sr, plan.in_strides);
  int64_t s = 1;
  for (int i = 0; i < g.sr; ++i) {  // storage_order=1 numbers spatial positions column-major
    plan.col_strides[i] = s;
    s *= g.in[i];
    plan.tap_step[i] = g.dilation[i] * plan.in_strides[i];
    plan.tap_cstep[i] = g.dilation[i] * plan.col_strides[i];
    for (int64_t o = 0; o < g.out[i]; ++o) windows[o] = Window(g, i, o);
    plan.axis[i] = windows;
    windows += g.out[i];
  }
  return plan;
}

// The rows of one output row's windows: the valid taps over the leading axes (all but the
// last), numbered row-major. Row r's offset in the plane and its column-major spatial number
// (storage_order=1) are computed from r.
struct WindowRows {
  const PoolPlan* plan;
  int lead;        // leading axes
  int64_t count;   // rows
  int64_t taps[kMaxSpatial];  // valid taps along leading axis i
  int64_t off0, coff0;        // row 0

  int64_t At(int64_t r, const int64_t* step, int64_t at) const {
    if (lead == 0) return at;
    for (int i = lead - 1; i > 0; --i) {
      at += (r % taps[i]) * step[i];
      r /= taps[i];
    }
    return at + r * step[0];
  }
  int64_t off(int64_t r) const { return At(r, plan->tap_step, off0); }
  int64_t coff(int64_t r) const { return At(r, plan->tap_cstep, coff0); }
};

// Rows looked up in tables filled once per output row (windows of at most kTableRows rows).
struct RowTable {
  const int64_t* offs;
  const int64_t* coffs;
  int64_t off(int64_t r) const { return offs[r]; }
  int64_t coff(int64_t r) const { return coffs[r]; }
};

// Rows up to which an output row's row offsets are tabled on the stack (two tables of 4 KB);
// larger windows (only hostile or exotic N-d pools) compute each row's offset when they read it.
constexpr int64_t kTableRows = 512;

// One output row: the taps along the last axis are a tight loop, visited row by row in
// row-major order, as the definition reads them (the first of equal maxima wins). ir (MaxPool's
// Indices) is null unless kIndices. Inlined into PoolPlane: as a call per output row GCC kept
// it out of line for AveragePool, which then ran a third slower (1 thread, 64x112x112, 3x3/2).
template <typename T, PoolKind kKind, bool kIndices, typename Rows>
[[gnu::always_inline]] inline void PoolRow(const T* x, const PoolGeometry& g, const PoolPlan& plan,
                                           bool count_include_pad, int64_t p, int64_t plane_offset, bool col_major,
                                           const Rows& rows, int64_t nrows, double padded_outer, T* yr,
                                           int64_t* ir) {
  const int last = g.sr - 1;
  const AxisWindow* lw = plan.axis[last];
  const int64_t out_last = g.out[last], dil = g.dilation[last], cs_last = plan.col_strides[last];
  for (int64_t o = 0; o < out_last; ++o) {
    const AxisWindow& w = lw[o];
    const int64_t k0 = w.pos, nk = w.taps;
    const int64_t valid = nrows * nk;
    if constexpr (kKind == PoolKind::kMax) {
      if (valid == 0) {  // a window with no element: max's identity (docs/semantics.md)
        yr[o] = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                       : std::numeric_limits<T>::lowest();
        if constexpr (kIndices) ir[o] = 0;
        continue;
      }
      // The first tap, then strictly greater ones: the first of equal maxima wins. The first NaN
      // tap wins and stays (docs/semantics.md: NaN propagates through MaxPool, as cuDNN's
      // CUDNN_PROPAGATE_NAN, which the CUDA backend sets); `v != v` is false for integers.
      T best = x[rows.off(0) + k0];
      int64_t best_r = 0, best_k = 0;
      for (int64_t r = 0; r < nrows; ++r) {
        const T* row = x + rows.off(r) + k0;
        if constexpr (kIndices) {
          for (int64_t k = 0; k < nk; ++k) {
            if (BeatsMax(row[k * dil], best)) {
              best = row[k * dil];
              best_r = r;
              best_k = k;
            }
          }
        } else if (dil == 1) {
          for (int64_t k = 0; k < nk; ++k) best = BeatsMax(row[k], best) ? row[k] : best;
        } else {
          for (int64_t k = 0; k < nk; ++k) best = BeatsMax(row[k * dil], best) ? row[k * dil] : best;
        }
      }
      yr[o] = best;
      if constexpr (kIndices) {
        const int64_t pos = k0 + best_k * dil;
        ir[o] = plane_offset + (col_major ? rows.coff(best_r) + pos * cs_last : rows.off(best_r) + pos);
      }
    } else {
      double acc = 0.0;
      for (int64_t r = 0; r < nrows; ++r) {
        const T* row = x + rows.off(r) + k0;
        for (int64_t k = 0; k < nk; ++k) {
          const double v = static_cast<double>(row[k * dil]);
          if constexpr (kKind == PoolKind::kAverage) {
            acc += v;
          } else {
            acc += std::pow(std::fabs(v), static_cast<double>(p));
          }
        }
      }
      if constexpr (kKind == PoolKind::kAverage) {
        const double div = count_include_pad ? padded_outer * static_cast<double>(w.padded) : static_cast<double>(valid);
        yr[o] = div > 0 ? static_cast<T>(acc / div) : std::numeric_limits<T>::quiet_NaN();  // 0 / 0
      } else {
        yr[o] = static_cast<T>(std::pow(acc, 1.0 / static_cast<double>(p)));
      }
    }
  }
}

// One plane. Output positions run row-major; the window's rows are listed once per output
// row (in stack tables up to kTableRows rows) and PoolRow runs the taps.
template <typename T, PoolKind kKind, bool kIndices>
void PoolPlane(const T* x, const PoolGeometry& g, const PoolPlan& plan, bool count_include_pad, int64_t p,
               int64_t plane_offset, bool col_major, T* y, int64_t* indices) {
  const int last = g.sr - 1;
  const int64_t out_last = g.out[last];
  const int64_t outer_size = g.out_size / std::max<int64_t>(out_last, 1);
  int64_t offs[kTableRows], coffs[kTableRows];
  NdIndex oit(g.out, last);
  for (int64_t orow = 0; orow < outer_size; ++orow, oit.Next(last)) {
    WindowRows rows;  // taps[i] set for the leading axes only
    rows.plan = &plan;
    rows.lead = last;
    rows.count = 1;
    rows.off0 = rows.coff0 = 0;
    double padded_outer = 1;  // a product of hostile kernel extents may pass int64
    for (int i = 0; i < last; ++i) {
      const AxisWindow& w = plan.axis[i][oit.idx[i]];
      const int64_t first = w.pos;
      rows.taps[i] = w.taps;
      rows.count *= rows.taps[i];
      rows.off0 += first * plan.in_strides[i];
      rows.coff0 += first * plan.col_strides[i];
      padded_outer *= w.padded;
    }
    T* yr = y + orow * out_last;
    int64_t* ir = kIndices ? indices + orow * out_last : nullptr;
    if (rows.count <= kTableRows) {
      for (int64_t r = 0; r < rows.count; ++r) {
        offs[r] = rows.off(r);
        coffs[r] = rows.coff(r);
      }
      PoolRow<T, kKind, kIndices>(x, g, plan, count_include_pad, p, plane_offset, col_major,
                                  RowTable{offs, coffs}, rows.count, padded_outer, yr, ir);
    } else {
      PoolRow<T, kKind, kIndices>(x, g, plan, count_include_pad, p, plane_offset, col_major, rows, rows.count,
                                  padded_outer, yr, ir);
    }
  }
}

template <PoolKind kKind>
Status PoolKernel(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  PoolGeometry g;
  KILN_RETURN_IF_ERROR(PoolGeometryFor(call, name, &g));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.dtype != y.dtype) return OpError(name, "output dtype differs from input dtype");
  const TensorRef* ind = OptionalOutput(call, 1);
  if (ind && (ind->dtype != DType::kInt64 || ind->num_elements != y.num_elements)) {
    return OpError(name, "Indices output must be int64 shaped like Y " + ShapeStr(y));
  }
  const bool include_pad = call.attrs.GetInt("count_include_pad", 0) != 0;
  const bool col_major = call.attrs.GetInt("storage_order", 0) != 0;
  const int64_t p = call.attrs.GetInt("p", 2);
  const int64_t planes = x.dims[0] * x.dims[1];
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, PoolWindowBytes(y), name));
  const PoolPlan plan = MakePoolPlan(g, static_cast<AxisWindow*>(call.workspace));
  int64_t plane_work = g.out_size;  // taps per plane, a cost estimate: saturates
  for (int i = 0; i < g.sr; ++i)
    if (__builtin_mul_overflow(plane_work, g.kernel[i], &plane_work)) plane_work = INT64_MAX;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const auto plane = ind ? PoolPlane<T, kKind, true> : PoolPlane<T, kKind, false>;
    // Planes are independent: split them over the threads.
    ParallelFor(call.threads, planes, MinItemsPerPart(plane_work), [&](int64_t begin, int64_t end) {
      for (int64_t pl = begin; pl < end; ++pl) {
        plane(x.as<const T>() + pl * g.in_size, g, plan, include_pad, p, pl * g.in_size, col_major,
              y.as<T>() + pl * g.out_size, ind ? ind->as<int64_t>() + pl * g.out_size : nullptr);
      }
    });
  };
  switch (x.dtype) {
    case DType::kFloat32: run(float{}); break;
    case DType::kFloat64: run(double{}); break;
    case DType::kInt8:
      if (kKind != PoolKind::kMax) return OpError(name, "int8 is only supported by MaxPool");
      run(int8_t{});
      break;
    case DType::kUInt8:
      if (kKind != PoolKind::kMax) return OpError(name, "uint8 is only supported by MaxPool");
      run(uint8_t{});
      break;
    default: return OpError(name, "unsupported dtype " + DTypeStr(x.dtype));
  }
  return Status::Ok();
}

Status MaxPool(const KernelCall& c) { return PoolKernel<PoolKind::kMax>(c, "MaxPool"); }
Status AveragePool(const KernelCall& c) { return PoolKernel<PoolKind::kAverage>(c, "AveragePool"); }
Status LpPool(const KernelCall& c) { return PoolKernel<PoolKind::kLp>(c, "LpPool"); }

template <PoolKind kKind>
Status GlobalPool(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.rank < 2) return OpError(name, "X must have rank >= 2, got " + ShapeStr(x));
  const int64_t planes = x.dims[0] * x.dims[1], spatial = Product(x.dims, 2, x.rank);
  if (y.num_elements != planes || y.dtype != x.dtype) {
    return OpError(name, "output " + ShapeStr(y) + " must hold one value per channel of " + ShapeStr(x));
  }
  const double p = static_cast<double>(call.attrs.GetInt("p", 2));
  bool ok = VisitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    ParallelFor(call.threads, planes, MinItemsPerPart(spatial), [&](int64_t begin, int64_t end) {
      for (int64_t pl = begin; pl < end; ++pl) {
        const T* row = px + pl * spatial;
        // Over no spatial elements: max's identity -inf and the mean NaN, as ReduceMax and
        // ReduceMean of nothing (docs/semantics.md).
        if constexpr (kKind == PoolKind::kMax) {
          T m = spatial ? row[0] : -std::numeric_limits<T>::infinity();
          for (int64_t i = 1; i < spatial; ++i) m = BeatsMax(row[i], m) ? row[i] : m;
          py[pl] = m;
        } else if constexpr (kKind == PoolKind::kAverage) {
          double s = 0;
          for (int64_t i = 0; i < spatial; ++i) s += row[i];
          py[pl] = static_cast<T>(spatial ? s / static_cast<double>(spatial) : std::numeric_limits<double>::quiet_NaN());
        } else {
          double s = 0;
          for (int64_t i = 0; i < spatial; ++i) s += std::pow(std::fabs(static_cast<double>(row[i])), p);
          py[pl] = static_cast<T>(std::pow(s, 1.0 / p));
        }
      }
    });
  });
  if (!ok) return OpError(name, "expected float32 or float64, got " + DTypeStr(x.dtype));
  return Status::Ok();
}

Status GlobalMaxPool(const KernelCall& c) { return GlobalPool<PoolKind::kMax>(c, "GlobalMaxPool"); }
Status GlobalAveragePool(const KernelCall& c) {
  return GlobalPool<PoolKind::kAverage>(c, "GlobalAveragePool");
}
Status GlobalLpPool(const KernelCall& c) { return GlobalPool<PoolKind::kLp>(c, "GlobalLpPool"); }

constexpr KernelDef kKernels[] = {
    {"AveragePool", AveragePool, PoolWorkspace},
    {"GlobalAveragePool", GlobalAveragePool, nullptr},
    {"GlobalLpPool", GlobalLpPool, nullptr},
    {"GlobalMaxPool", GlobalMaxPool, nullptr},
    {"LpPool", LpPool, PoolWorkspace},
    {"MaxPool", MaxPool, PoolWorkspace},
};

}  // namespace

std::span<const KernelDef> PoolKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
