// Pooling: MaxPool (with optional Indices), AveragePool, LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool over any number of spatial axes.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "runtime/cpu/families.h"
#include "runtime/cpu/kernel_util.h"

namespace kiln::cpu {
namespace {

using PoolGeometry = WindowGeometry;

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
    const int64_t eff_k = (g->kernel[i] - 1) * g->dilation[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (g->out[i] - 1) * g->stride[i] + eff_k - g->in[i]);
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      g->pad_end[i] = total - g->pad_begin[i];
    } else if (auto_pad == "NOTSET") {
      if (!pads.empty()) {
        g->pad_begin[i] = pads[i];
        g->pad_end[i] = pads[i + g->sr];
      }
    } else if (auto_pad != "VALID") {
      return OpError(op, "unknown auto_pad '" + std::string(auto_pad) + "'");
    }
    // With ceil_mode the last window may start past the padded end; ONNX drops it.
    const int64_t span = g->in[i] + g->pad_begin[i] + g->pad_end[i] - eff_k;
    const int64_t floor_out = span < 0 ? 0 : span / g->stride[i] + 1;
    const int64_t ceil_out = span < 0 ? 0 : (span + g->stride[i] - 1) / g->stride[i] + 1;
    if (g->out[i] != floor_out && g->out[i] != ceil_out && auto_pad == "NOTSET") {
      return OpError(op, "output spatial dim " + std::to_string(i) + " is " + std::to_string(g->out[i]) +
                             ", expected " + std::to_string(floor_out) +
                             (ceil_out != floor_out ? " (or " + std::to_string(ceil_out) + " with ceil_mode)" : ""));
    }
  }
  return Status::Ok();
}

// Per-axis window bounds for one output position: the kernel taps that land inside the
// input, and how many land inside the padded extent (for count_include_pad).
struct AxisWindow {
  int64_t start;       // input coordinate of tap 0
  int64_t first, end;  // valid taps are [first, end)
  int64_t padded;      // taps inside [-pad_begin, in + pad_end)
};

AxisWindow Window(const PoolGeometry& g, int i, int64_t o) {
  AxisWindow w{o * g.stride[i] - g.pad_begin[i], 0, 0, 0};
  w.first = g.kernel[i];
  for (int64_t k = 0; k < g.kernel[i]; ++k) {
    const int64_t pos = w.start + k * g.dilation[i];
    if (pos >= 0 && pos < g.in[i]) {
      if (w.first == g.kernel[i]) w.first = k;
      w.end = k + 1;
    }
    if (pos >= -g.pad_begin[i] && pos < g.in[i] + g.pad_end[i]) ++w.padded;
  }
  if (w.first >= w.end) w.first = w.end = 0;
  return w;
}

enum class PoolKind { kMax, kAverage, kLp };

template <typename T, PoolKind kKind>
void PoolPlane(const T* x, const PoolGeometry& g, bool count_include_pad, int64_t p,
               int64_t plane_offset, bool col_major, T* y, int64_t* indices) {
  const int sr = g.sr;
  int64_t in_strides[kMaxSpatial], col_strides[kMaxSpatial];
  ContiguousStrides(g.in, sr, in_strides);
  int64_t s = 1;
  for (int i = 0; i < sr; ++i) {  // storage_order=1 numbers spatial positions column-major
    col_strides[i] = s;
    s *= g.in[i];
  }
  NdIndex oit(g.out, sr);
  for (int64_t o = 0; o < g.out_size; ++o, oit.Next(sr)) {
    AxisWindow win[kMaxSpatial];
    int64_t taps[kMaxSpatial];
    int64_t valid = 1, padded = 1;
    for (int i = 0; i < sr; ++i) {
      win[i] = Window(g, i, oit.idx[i]);
      taps[i] = win[i].end - win[i].first;
      valid *= taps[i];
      padded *= win[i].padded;
    }
    double acc = kKind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    T best = std::numeric_limits<T>::lowest();
    int64_t best_idx = -1;
    if (valid > 0) {
      NdIndex kit(taps, sr);
      for (int64_t t = 0; t < valid; ++t, kit.Next(sr)) {
        int64_t off = 0, coff = 0;
        for (int i = 0; i < sr; ++i) {
          const int64_t pos = win[i].start + (win[i].first + kit.idx[i]) * g.dilation[i];
          off += pos * in_strides[i];
          coff += pos * col_strides[i];
        }
        const T v = x[off];
        if constexpr (kKind == PoolKind::kMax) {
          if (v > best || best_idx < 0) {
            best = v;
            best_idx = col_major ? coff : off;
          }
        } else if constexpr (kKind == PoolKind::kAverage) {
          acc += static_cast<double>(v);
        } else {
          acc += std::pow(std::fabs(static_cast<double>(v)), static_cast<double>(p));
        }
      }
    }
    if constexpr (kKind == PoolKind::kMax) {
      y[o] = best_idx < 0 ? T(0) : best;
      if (indices) indices[o] = best_idx < 0 ? 0 : plane_offset + best_idx;
    } else if constexpr (kKind == PoolKind::kAverage) {
      const int64_t div = count_include_pad ? padded : valid;
      y[o] = div > 0 ? static_cast<T>(acc / static_cast<double>(div)) : T(0);
    } else {
      y[o] = static_cast<T>(std::pow(acc, 1.0 / static_cast<double>(p)));
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
  auto run = [&](auto tag) {
    using T = decltype(tag);
    for (int64_t pl = 0; pl < planes; ++pl) {
      PoolPlane<T, kKind>(x.as<const T>() + pl * g.in_size, g, include_pad, p, pl * g.in_size,
                          col_major, y.as<T>() + pl * g.out_size,
                          ind ? ind->as<int64_t>() + pl * g.out_size : nullptr);
    }
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
    for (int64_t pl = 0; pl < planes; ++pl) {
      const T* row = px + pl * spatial;
      if constexpr (kKind == PoolKind::kMax) {
        T m = spatial ? row[0] : T(0);
        for (int64_t i = 1; i < spatial; ++i) m = row[i] > m ? row[i] : m;
        py[pl] = m;
      } else if constexpr (kKind == PoolKind::kAverage) {
        double s = 0;
        for (int64_t i = 0; i < spatial; ++i) s += row[i];
        py[pl] = static_cast<T>(spatial ? s / static_cast<double>(spatial) : 0.0);
      } else {
        double s = 0;
        for (int64_t i = 0; i < spatial; ++i) s += std::pow(std::fabs(static_cast<double>(row[i])), p);
        py[pl] = static_cast<T>(std::pow(s, 1.0 / p));
      }
    }
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
    {"AveragePool", AveragePool, nullptr},
    {"GlobalAveragePool", GlobalAveragePool, nullptr},
    {"GlobalLpPool", GlobalLpPool, nullptr},
    {"GlobalMaxPool", GlobalMaxPool, nullptr},
    {"LpPool", LpPool, nullptr},
    {"MaxPool", MaxPool, nullptr},
};

}  // namespace

std::span<const KernelDef> PoolKernels() { return kKernels; }

}  // namespace kiln::cpu
