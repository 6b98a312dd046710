// Detection and vision ops, following ONNX's reference implementations:
//  - RoiAlign: bilinear samples averaged (or maxed) over each bin of each region;
//  - Col2Im: the adjoint of im2col, summing overlapping blocks into an image;
//  - MaxUnpool: scatters values to MaxPool's indices, zeros elsewhere;
//  - DeformConv: a 2-D convolution whose taps move by learned offsets (bilinear, zeros
//    outside) and are scaled by an optional mask;
//  - NonMaxSuppression: the selection in non_max_suppression.h.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/non_max_suppression.h"

namespace kiln::cpu {
namespace {

// ---- RoiAlign ---------------------------------------------------------------------------

// One bilinear sample of an H x W plane as ONNX's RoiAlign takes it: a point more than
// one pixel outside gives weight 0; otherwise coordinates clamp to the edge.
struct RoiSample {
  int64_t pos[4] = {};
  double w[4] = {};
};

RoiSample RoiBilinear(double y, double x, int64_t h, int64_t w) {
  RoiSample s;
  // Written so that a NaN coordinate also gives weight 0 (and is never converted to an integer).
  if (!(y >= -1.0 && y <= static_cast<double>(h) && x >= -1.0 && x <= static_cast<double>(w))) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) y1 = y0 = h - 1, y = static_cast<double>(y0);
  else y1 = y0 + 1;
  if (x0 >= w - 1) x1 = x0 = w - 1, x = static_cast<double>(x0);
  else x1 = x0 + 1;
  const double ly = y - y0, lx = x - x0, hy = 1 - ly, hx = 1 - lx;
  s.pos[0] = y0 * w + x0, s.pos[1] = y0 * w + x1, s.pos[2] = y1 * w + x0, s.pos[3] = y1 * w + x1;
  s.w[0] = hy * hx, s.w[1] = hy * lx, s.w[2] = ly * hx, s.w[3] = ly * lx;
  return s;
}

// The most bilinear samples one output bin may take. Adaptive sampling (sampling_ratio 0)
// takes ceil(roi size / output size) per axis, so a region far larger than the image (a
// caller's coordinates of 1e5 on a 4x4 map) would otherwise run for hours; such a call is
// refused with the counts. 2^16 is a 256 x 256 grid per bin, far beyond real detectors.
constexpr double kMaxRoiSamplesPerBin = 65536;

// X [N, C, H, W], rois [R, 4] of X's dtype, batch_indices [R] int64/int32, Y [R, C, OH, OW].
Status CheckRoiAlignOperands(const TensorRef& x, const TensorRef& rois, const TensorRef& bi, const TensorRef& y) {
  if (x.rank != 4 || y.rank != 4 || rois.rank != 2 || rois.dim(1) != 4 || rois.dtype != x.dtype ||
      y.dtype != x.dtype || !IsIndexType(bi.dtype) || bi.rank != 1 || rois.dim(0) != y.dim(0) ||
      bi.dim(0) != y.dim(0) || y.dim(1) != x.dim(1))
    return OpError("RoiAlign", "expected X [N,C,H,W], rois [R,4] of X's dtype, batch_indices [R] int64/int32 and "
                               "Y [R,C,OH,OW] of X's dtype; got X " + ShapeStr(x) + " " + DTypeStr(x.dtype) + ", rois " +
                               ShapeStr(rois) + " " + DTypeStr(rois.dtype) + ", batch_indices " + ShapeStr(bi) + " " +
                               DTypeStr(bi.dtype) + ", Y " + ShapeStr(y) + " " + DTypeStr(y.dtype));
  return Status::Ok();
}

template <typename T>
Status RoiAlignT(const KernelCall& call) {
  const TensorRef &x = call.inputs[0], &rois = call.inputs[1], &bi = call.inputs[2], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckRoiAlignOperands(x, rois, bi, y));
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t R = y.dim(0), OH = y.dim(2), OW = y.dim(3);
  const bool half_pixel = call.attrs.GetString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const bool max_mode = call.attrs.GetString("mode", "avg") == "max";
  const int64_t ratio = call.attrs.GetInt("sampling_ratio", 0);
  const double scale = call.attrs.GetFloat("spatial_scale", 1.0f);
  const T* px = x.as<const T>();
  const T* pr = rois.as<const T>();
  T* py = y.as<T>();
  for (int64_t r = 0; r < R; ++r) {
    const int64_t b = IndexAt(bi, r);
    if (b < 0 || b >= N)
      return OpError("RoiAlign", "batch_indices[" + std::to_string(r) + "] = " + std::to_string(b) +
                                     ", expected in [0, " + std::to_string(N) + ")");
    const double off = half_pixel ? 0.5 : 0.0;
    const double x0 = pr[r * 4 + 0] * scale - off, y0 = pr[r * 4 + 1] * scale - off;
    double rw = pr[r * 4 + 2] * scale - off - x0, rh = pr[r * 4 + 3] * scale - off - y0;
    if (!half_pixel) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / OH, bw = rw / OW;
    // sampling_ratio 0: as many samples per bin as the bin is pixels wide (adaptive).
    // Counted in double (NaN and huge values fail the bound); a negative count samples nothing.
    const double sh = std::max(ratio > 0 ? static_cast<double>(ratio) : std::ceil(rh / OH), 0.0);
    const double sw = std::max(ratio > 0 ? static_cast<double>(ratio) : std::ceil(rw / OW), 0.0);
    if (!(sh * sw <= kMaxRoiSamplesPerBin))
      return OpError("RoiAlign", "roi " + std::to_string(r) + " (height " + std::to_string(rh) + ", width " +
                                     std::to_string(rw) + ", sampling_ratio " + std::to_string(ratio) + ") needs " +
                                     std::to_string(sh) + " x " + std::to_string(sw) +
                                     " samples per bin, more than the limit of 65536");
    const int64_t gh = static_cast<int64_t>(sh), gw = static_cast<int64_t>(sw);
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    for (int64_t c = 0; c < C; ++c) {
      const T* plane = px + (b * C + c) * H * W;
      for (int64_t ph = 0; ph < OH; ++ph)
        for (int64_t pw = 0; pw < OW; ++pw) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            const double sy = y0 + ph * bh + (iy + 0.5) * bh / gh;
            for (int64_t ix = 0; ix < gw; ++ix) {
              const RoiSample s = RoiBilinear(sy, x0 + pw * bw + (ix + 0.5) * bw / gw, H, W);
              if (!max_mode) {
                for (int k = 0; k < 4; ++k) acc += s.w[k] * plane[s.pos[k]];
                continue;
              }
              // Max mode takes the largest weighted tap, as ONNX's reference (and onnxruntime) do.
              double v = s.w[0] * plane[s.pos[0]];
              for (int k = 1; k < 4; ++k) v = std::max(v, s.w[k] * static_cast<double>(plane[s.pos[k]]));
              acc = first ? v : std::max(acc, v);
              first = false;
            }
          }
          py[((r * C + c) * OH + ph) * OW + pw] = static_cast<T>(max_mode ? acc : acc / count);
        }
    }
  }
  return Status::Ok();
}

Status RoiAlign(const KernelCall& call) {
  switch (call.inputs[0].dtype) {
    case DType::kFloat32: return RoiAlignT<float>(call);
    case DType::kFloat64: return RoiAlignT<double>(call);
    default: return OpError("RoiAlign", "unsupported dtype " + DTypeStr(call.inputs[0].dtype));
  }
}

// ---- Col2Im -----------------------------------------------------------------------------

Status Col2Im(const KernelCall& call) {
  const TensorRef &x = call.inputs[0], &block = call.inputs[2], &y = call.outputs[0];
  const int n = y.rank - 2;
  if (n < 1 || block.num_elements != n || !IsIndexType(block.dtype))
    return OpError("Col2Im", "block_shape " + ShapeStr(block) + " does not match the image rank " + std::to_string(n));
  int64_t k[kMaxSpatial], dil[kMaxSpatial], str[kMaxSpatial], pb[kMaxSpatial], nb[kMaxSpatial];
  int64_t bs = 1, blocks = 1;
  for (int i = 0; i < n; ++i) {
    k[i] = IndexAt(block, i);
    dil[i] = IntsAt(call.attrs, "dilations", i, 1);
    str[i] = IntsAt(call.attrs, "strides", i, 1);
    pb[i] = IntsAt(call.attrs, "pads", i, 0);
    const int64_t pe = IntsAt(call.attrs, "pads", i + n, 0);
    // Attributes and block_shape may hold any int64: 128-bit span, checked products.
    const __int128 span = static_cast<__int128>(y.dim(2 + i)) + pb[i] + pe - static_cast<__int128>(dil[i]) * (k[i] - 1) - 1;
    if (str[i] < 1 || dil[i] < 1 || k[i] < 1 || span < 0 || span / str[i] + 1 > std::numeric_limits<int64_t>::max() ||
        __builtin_mul_overflow(bs, k[i], &bs) || __builtin_mul_overflow(blocks, static_cast<int64_t>(span / str[i] + 1), &blocks))
      return OpError("Col2Im", "axis " + std::to_string(i) + ": block " + std::to_string(k[i]) + ", stride " +
                                   std::to_string(str[i]) + ", dilation " + std::to_string(dil[i]) + " and pads " +
                                   std::to_string(pb[i]) + ", " + std::to_string(pe) + " give no blocks over " +
                                   ShapeStr(y));
    nb[i] = static_cast<int64_t>(span / str[i] + 1);
  }
  int64_t channels = 0;
  if (__builtin_mul_overflow(y.dim(1), bs, &channels) || x.rank != 3 || x.dtype != y.dtype || x.dim(0) != y.dim(0) || x.dim(1) != channels ||
      x.dim(2) != blocks)
    return OpError("Col2Im", "input " + ShapeStr(x) + " does not match output " + ShapeStr(y) + " with " +
                                 std::to_string(blocks) + " blocks of " + std::to_string(bs));
  const int64_t image = Product(y.dims, 2, y.rank);
  const bool ok = VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    std::fill(py, py + y.num_elements, T{});
    for (int64_t nc = 0; nc < y.dim(0) * y.dim(1); ++nc)
      for (int64_t kk = 0; kk < bs; ++kk) {
        int64_t ko[kMaxSpatial];
        for (int64_t i = n - 1, r = kk; i >= 0; --i) ko[i] = r % k[i], r /= k[i];
        const T* col = px + (nc * bs + kk) * blocks;
        for (int64_t l = 0; l < blocks; ++l) {
          int64_t at = 0;
          bool inside = true;
          for (int64_t i = n - 1, r = l, stride = 1; i >= 0; --i) {
            const int64_t pos = (r % nb[i]) * str[i] - pb[i] + ko[i] * dil[i];
            r /= nb[i];
            inside &= pos >= 0 && pos < y.dim(2 + i);
            at += pos * stride;
            stride *= y.dim(2 + i);
          }
          if (inside) py[nc * image + at] += col[l];
        }
      }
  });
  if (!ok) return OpError("Col2Im", "unsupported dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

// ---- MaxUnpool --------------------------------------------------------------------------

Status MaxUnpool(const KernelCall& call) {
  const TensorRef &x = call.inputs[0], &ind = call.inputs[1], &y = call.outputs[0];
  const int n = x.rank - 2;
  const auto& k = call.attrs.GetInts("kernel_shape");
  if (static_cast<int>(k.size()) != n || y.rank != x.rank || y.dtype != x.dtype || !IsIndexType(ind.dtype) ||
      ind.num_elements != x.num_elements || (n > 0 && (y.dim(0) != x.dim(0) || y.dim(1) != x.dim(1))))
    return OpError("MaxUnpool", "kernel_shape, I " + ShapeStr(ind) + " " + DTypeStr(ind.dtype) + " and Y " +
                                    ShapeStr(y) + " " + DTypeStr(y.dtype) + " do not match X " + ShapeStr(x) + " " +
                                    DTypeStr(x.dtype));
  // The indices address the unpooled shape (as MaxPool's); an output_shape larger than it
  // holds that tensor at its origin, zeros around.
  int64_t inferred[kMaxRank] = {x.dim(0), x.dim(1)};
  for (int i = 0; i < n; ++i) {
    const int64_t s = IntsAt(call.attrs, "strides", i, 1);
    int64_t p = 0;
    // From the attributes: any int64 may arrive, so overflow is an error, not a wrap.
    const bool overflow = __builtin_add_overflow(IntsAt(call.attrs, "pads", i, 0), IntsAt(call.attrs, "pads", i + n, 0), &p) ||
                          __builtin_mul_overflow(x.dim(2 + i) - 1, s, &inferred[2 + i]) ||
                          __builtin_sub_overflow(inferred[2 + i], p, &inferred[2 + i]) ||
                          __builtin_add_overflow(inferred[2 + i], k[i], &inferred[2 + i]);
    if (overflow || inferred[2 + i] < 1)
      return OpError("MaxUnpool", "axis " + std::to_string(i) + ": X " + ShapeStr(x) + " with stride " +
                                      std::to_string(s) + ", pads " + std::to_string(p) + " and kernel " +
                                      std::to_string(k[i]) + " has no unpooled size in [1, 2^63)");
    if (inferred[2 + i] > y.dim(2 + i))
      return OpError("MaxUnpool", "output " + ShapeStr(y) + " is smaller than the unpooled shape " +
                                      ShapeStr(inferred, x.rank));
  }
  int64_t total = 0;
  if (!CheckedProduct(inferred, 0, x.rank, &total))
    return OpError("MaxUnpool", "the unpooled shape " + ShapeStr(inferred, x.rank) + " has more than 2^63 elements");
  const bool ok = VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::fill(y.as<T>(), y.as<T>() + y.num_elements, T{});
  });
  if (!ok) return OpError("MaxUnpool", "unsupported dtype " + DTypeStr(x.dtype));
  Status st = Status::Ok();
  VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    for (int64_t e = 0; e < x.num_elements; ++e) {
      int64_t idx = IndexAt(ind, e);
      if (idx < 0 || idx >= total) {
        st = OpError("MaxUnpool", "I[" + std::to_string(e) + "] = " + std::to_string(idx) + ", expected in [0, " +
                                      std::to_string(total) + ")");
        return;
      }
      int64_t at = 0;
      for (int i = x.rank - 1, stride = 1; i >= 0; --i) {
        at += (idx % inferred[i]) * stride;
        idx /= inferred[i];
        stride *= y.dim(i);
      }
      py[at] = px[e];
    }
  });
  return st;
}

// ---- DeformConv -------------------------------------------------------------------------

// Bilinear sample of an H x W plane at (y, x) in pixels; taps outside count as zero.
template <typename T>
double BilinearZeros(const T* plane, int64_t h, int64_t w, double y, double x) {
  const double fy = std::floor(y), fx = std::floor(x);
  const int64_t y0 = ToIndex(fy), x0 = ToIndex(fx);  // offsets are data: NaN or 1e30 read zeros
  const double ly = y - fy, lx = x - fx;
  double v = 0;
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const int64_t yy = y0 + dy, xx = x0 + dx;
      if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
      v += (dy ? ly : 1 - ly) * (dx ? lx : 1 - lx) * plane[yy * w + xx];
    }
  return v;
}

template <typename T>
Status DeformConvT(const KernelCall& call) {
  const TensorRef &x = call.inputs[0], &wt = call.inputs[1], &off = call.inputs[2], &y = call.outputs[0];
  const TensorRef* bias = call.inputs.size() > 3 && call.inputs[3].present() ? &call.inputs[3] : nullptr;
  const TensorRef* mask = call.inputs.size() > 4 && call.inputs[4].present() ? &call.inputs[4] : nullptr;
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t OC = wt.dim(0), CG = wt.dim(1), KH = wt.dim(2), KW = wt.dim(3), OH = y.dim(2), OW = y.dim(3);
  const int64_t group = call.attrs.GetInt("group", 1), og = call.attrs.GetInt("offset_group", 1);
  auto attr = [&](const char* name, int i, int64_t def) { return IntsAt(call.attrs, name, i, def); };
  const int64_t sh = attr("strides", 0, 1), sw = attr("strides", 1, 1);
  const int64_t dh = attr("dilations", 0, 1), dw = attr("dilations", 1, 1);
  const int64_t ph = attr("pads", 0, 0), pw = attr("pads", 1, 0);
  if (wt.rank != 4 || y.rank != 4 || group < 1 || og < 1 || C != CG * group || OC % group != 0 || C % og != 0)
    return OpError("DeformConv", "X " + ShapeStr(x) + " and W " + ShapeStr(wt) + " do not match group " +
                                     std::to_string(group) + " and offset_group " + std::to_string(og));
  const int64_t ocg = OC / group, cog = C / og, taps = KH * KW, plane_out = OH * OW;
  const auto is = [&](const TensorRef* t, std::initializer_list<int64_t> dims) {
    if (t == nullptr) return true;
    if (t->dtype != x.dtype || t->rank != static_cast<int32_t>(dims.size())) return false;
    int i = 0;
    for (int64_t d : dims) if (t->dim(i++) != d) return false;
    return true;
  };
  if (!is(&wt, {OC, CG, KH, KW}) || !is(&off, {N, og * taps * 2, OH, OW}) || !is(bias, {OC}) ||
      !is(mask, {N, og * taps, OH, OW}) || !is(&y, {N, OC, OH, OW}))
    return OpError("DeformConv", "operands do not match X " + ShapeStr(x) + " " + DTypeStr(x.dtype) + ": W " +
                                     ShapeStr(wt) + ", offset " + ShapeStr(off) + ", Y " + ShapeStr(y) +
                                     " (bias [OC], mask [N, offset_group*kH*kW, OH, OW], all of X's dtype)");
  const T *px = x.as<const T>(), *pw_ = wt.as<const T>(), *po = off.as<const T>();
  T* py = y.as<T>();
  for (int64_t b = 0; b < N; ++b)
    for (int64_t oc = 0; oc < OC; ++oc)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = bias ? static_cast<double>(bias->as<const T>()[oc]) : 0.0;
          const int64_t g = oc / ocg;
          for (int64_t cg = 0; cg < CG; ++cg) {
            const int64_t c = g * CG + cg, o = c / cog;
            const T* plane = px + (b * C + c) * H * W;
            for (int64_t t = 0; t < taps; ++t) {
              const int64_t ki = t / KW, kj = t % KW;
              // offset channels: (offset_group, kH, kW, {dy, dx}); mask channels: (offset_group, kH, kW).
              const int64_t oo = ((b * og + o) * taps + t) * 2 * plane_out + i * OW + j;
              const double yy = static_cast<double>(i * sh - ph + ki * dh) + po[oo];
              const double xx = static_cast<double>(j * sw - pw + kj * dw) + po[oo + plane_out];
              double v = BilinearZeros(plane, H, W, yy, xx);
              if (mask) v *= mask->as<const T>()[((b * og + o) * taps + t) * plane_out + i * OW + j];
              acc += v * pw_[(oc * CG + cg) * taps + t];
            }
          }
          py[((b * OC + oc) * OH + i) * OW + j] = static_cast<T>(acc);
        }
  return Status::Ok();
}

Status DeformConv(const KernelCall& call) {
  if (call.inputs[0].rank != 4) return OpUnimplemented("DeformConv", "only 2-D inputs, found " + ShapeStr(call.inputs[0]));
  switch (call.inputs[0].dtype) {
    case DType::kFloat32: return DeformConvT<float>(call);
    case DType::kFloat64: return DeformConvT<double>(call);
    default: return OpError("DeformConv", "unsupported dtype " + DTypeStr(call.inputs[0].dtype));
  }
}

// ---- NonMaxSuppression ------------------------------------------------------------------

size_t NmsWorkspace(const AttrMap&, std::span<const TensorRef> inputs, std::span<const TensorRef>) {
  return inputs[0].rank == 3 ? 2 * static_cast<size_t>(inputs[0].dim(1)) * sizeof(int64_t) : 0;
}

Status NonMaxSuppression(const KernelCall& call) {
  const TensorRef &boxes = call.inputs[0], &scores = call.inputs[1], &y = call.outputs[0];
  auto opt = [&](size_t i) -> const TensorRef* {
    return call.inputs.size() > i && call.inputs[i].present() && call.inputs[i].num_elements > 0 ? &call.inputs[i]
                                                                                                : nullptr;
  };
  const auto scalar = [&](size_t i, bool index) {
    const TensorRef* t = opt(i);
    return t == nullptr || (index ? IsIndexType(t->dtype) : t->dtype == DType::kFloat32);
  };
  if (boxes.dtype != DType::kFloat32 || boxes.rank != 3 || boxes.dim(2) != 4 || scores.dtype != DType::kFloat32 ||
      scores.rank != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1) ||
      y.dtype != DType::kInt64 || y.rank != 2 || y.dim(1) != 3 || !scalar(2, true) || !scalar(3, false) ||
      !scalar(4, false))
    return OpError("NonMaxSuppression", "expected float32 boxes [B,N,4] and scores [B,C,N], int64/int32 "
                                        "max_output_boxes_per_class, float32 thresholds and an int64 [K,3] output; got "
                                        "boxes " + ShapeStr(boxes) + " " + DTypeStr(boxes.dtype) + ", scores " +
                                        ShapeStr(scores) + " " + DTypeStr(scores.dtype) + ", output " + ShapeStr(y) +
                                        " " + DTypeStr(y.dtype));
  KILN_RETURN_IF_ERROR(CheckWorkspace(call, 2 * static_cast<size_t>(boxes.dim(1)) * sizeof(int64_t), "NonMaxSuppression"));
  NmsParams p;
  p.batches = boxes.dim(0);
  p.boxes = boxes.dim(1);
  p.classes = scores.dim(1);
  p.center_point_box = call.attrs.GetInt("center_point_box", 0) == 1;
  if (const TensorRef* m = opt(2)) p.max_per_class = std::max<int64_t>(IndexAt(*m, 0), 0);
  if (const TensorRef* t = opt(3)) p.iou_threshold = t->as<const float>()[0];
  if (const TensorRef* t = opt(4)) p.has_score_threshold = true, p.score_threshold = t->as<const float>()[0];
  auto* order = static_cast<int64_t*>(call.workspace);
  int64_t* out = y.as<int64_t>();
  const int64_t rows = y.dim(0);  // with a run-time dim: sized for its bound
  int64_t row = 0;
  const int64_t selected = NmsSelect(boxes.as<const float>(), scores.as<const float>(), p, order, order + p.boxes,
                                     [&](int64_t b, int64_t c, int64_t i) {
                                       if (row < rows) out[row * 3] = b, out[row * 3 + 1] = c, out[row * 3 + 2] = i;
                                       ++row;
                                     });
  if (call.runtime_size) return ReportRuntimeSize(call, "NonMaxSuppression", selected, selected <= rows);
  // The output was sized at compile time from the same (constant) inputs.
  if (selected != rows)
    return OpError("NonMaxSuppression", "selected " + std::to_string(selected) + " boxes, output has " +
                                            std::to_string(rows) + " rows");
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"RoiAlign", RoiAlign, nullptr},
    {"Col2Im", Col2Im, nullptr},
    {"MaxUnpool", MaxUnpool, nullptr},
    {"DeformConv", DeformConv, nullptr},
    {"NonMaxSuppression", NonMaxSuppression, NmsWorkspace, false, {}, /*runtime_size=*/true},
};

}  // namespace

std::span<const KernelDef> VisionKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
