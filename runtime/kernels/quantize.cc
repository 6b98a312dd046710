// Integer quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv, and onnxruntime's QGemm. Rounding is half to even
// (std::nearbyint in the default rounding mode), as ONNX's np.rint; each product is
// computed in the precision the ONNX reference computes it in, so results match bit for
// bit (a float16 scale product is rounded to float16 before it meets the int32
// accumulator, which NumPy then widens to double).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/matmul_integer_trans_b.h"
#include "runtime/kernels/nhwc_conv_int8.h"
#include "runtime/half.h"

namespace kiln::cpu {
namespace {

// ---- element access for the quantized, scale and output types ----------------------------------

bool IsScaleType(DType t) { return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16; }

float FloatAt(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kFloat16: return HalfToFloat(t.as<const uint16_t>()[i]);
    case DType::kBFloat16: return BF16ToFloat(t.as<const uint16_t>()[i]);
    case DType::kFloat64: return static_cast<float>(t.as<const double>()[i]);
    default: return t.as<const float>()[i];
  }
}

// Rounds a float to the 16-bit type `t` and back (identity for float32), so chains of
// float16 arithmetic round after every step as NumPy's float16 does.
float RoundTo(DType t, float v) {
  if (t == DType::kFloat16) return HalfToFloat(FloatToHalf(v));
  if (t == DType::kBFloat16) return BF16ToFloat(FloatToBF16(v));
  return v;
}

void StoreFloat(const TensorRef& t, int64_t i, float v) {
  switch (t.dtype) {
    case DType::kFloat16: t.as<uint16_t>()[i] = FloatToHalf(v); break;
    case DType::kBFloat16: t.as<uint16_t>()[i] = FloatToBF16(v); break;
    default: t.as<float>()[i] = v; break;
  }
}

bool QuantRange(DType t, double* lo, double* hi) {
  switch (t) {
    case DType::kInt8: *lo = -128; *hi = 127; return true;
    case DType::kUInt8: *lo = 0; *hi = 255; return true;
    case DType::kInt16: *lo = -32768; *hi = 32767; return true;
    case DType::kUInt16: *lo = 0; *hi = 65535; return true;
    default: return false;
  }
}

// Integer element i of an int8/uint8/int16/uint16/int32 tensor; 0 for an absent tensor or
// any other dtype (kernels reject those first; reading them as int32 could pass their end).
int32_t IntAt(const TensorRef* t, int64_t i) {
  if (!t) return 0;
  switch (t->dtype) {
    case DType::kInt8: return t->as<const int8_t>()[i];
    case DType::kUInt8: return t->as<const uint8_t>()[i];
    case DType::kInt16: return t->as<const int16_t>()[i];
    case DType::kUInt16: return t->as<const uint16_t>()[i];
    case DType::kInt32: return t->as<const int32_t>()[i];
    default: return 0;
  }
}

// MatMulInteger and ConvInteger: each data input int8 or uint8, its zero point of its dtype.
Status CheckInt8Operand(std::string_view op, std::string_view what, const TensorRef& t, const TensorRef* zp) {
  if ((t.dtype != DType::kInt8 && t.dtype != DType::kUInt8) || (zp && zp->dtype != t.dtype))
    return OpError(op, std::string(what) + " must be int8 or uint8 with a zero point of its dtype, found " +
                           DTypeStr(t.dtype) + (zp ? " and zero point " + DTypeStr(zp->dtype) : std::string()));
  return Status::Ok();
}

// Stores round-half-even(v) saturated to the quantized type of `t`. NaN becomes the
// type's lowest value, as the reference's float -> int32 conversion gives on x86.
void StoreQuant(const TensorRef& t, int64_t i, double v, double lo, double hi) {
  double r = std::isnan(v) ? lo : std::clamp(std::nearbyint(v), lo, hi);
  switch (t.dtype) {
    case DType::kInt8: t.as<int8_t>()[i] = static_cast<int8_t>(r); break;
    case DType::kUInt8: t.as<uint8_t>()[i] = static_cast<uint8_t>(r); break;
    case DType::kInt16: t.as<int16_t>()[i] = static_cast<int16_t>(r); break;
    default: t.as<uint16_t>()[i] = static_cast<uint16_t>(r); break;
  }
}

// ---- QuantizeLinear / DequantizeLinear parameters ------------------------------------------------

// Where element (outer, a, inner) of x (axis extent `ext`) finds its scale or zero point:
// one element for the tensor, one per index along the axis, or one per block of
// `block` indices along it.
struct ParamIndex {
  enum Mode { kTensor, kAxis, kBlocked } mode = kTensor;
  int64_t blocks = 1, block = 1, inner = 1;
  int64_t At(int64_t outer, int64_t a, int64_t in) const {
    switch (mode) {
      case kTensor: return 0;
      case kAxis: return a;
      default: return (outer * blocks + a / block) * inner + in;
    }
  }
};

Status MakeParamIndex(std::string_view op, std::string_view what, const TensorRef& x, const TensorRef& p, int axis,
                      int64_t block_size, ParamIndex* pi) {
  if (p.num_elements == 1) return Status::Ok();
  const int64_t ext = x.dim(axis);
  pi->inner = Product(x.dims, axis + 1, x.rank);
  if (block_size <= 0) {
    if (p.rank != 1 || p.dims[0] != ext)
      return OpError(op, std::string(what) + " " + ShapeStr(p) + ": expected one element or " + std::to_string(ext) +
                             " (x " + ShapeStr(x) + " along axis " + std::to_string(axis) + ")");
    pi->mode = ParamIndex::kAxis;
    return Status::Ok();
  }
  const int64_t blocks = (ext + block_size - 1) / block_size;
  bool ok = p.rank == x.rank;
  for (int d = 0; ok && d < x.rank; ++d) ok = p.dims[d] == (d == axis ? blocks : x.dims[d]);
  if (!ok)
    return OpError(op, std::string(what) + " " + ShapeStr(p) + ": expected x's shape " + ShapeStr(x) + " with " +
                           std::to_string(blocks) + " blocks of " + std::to_string(block_size) + " along axis " +
                           std::to_string(axis));
  pi->mode = ParamIndex::kBlocked;
  pi->blocks = blocks;
  pi->block = block_size;
  return Status::Ok();
}

// Calls f(flat, scale_index, zero_point_index) for each element of x.
struct QuantLayout {
  int axis = 0;
  int64_t outer = 1, ext = 1, inner = 1;
  ParamIndex scale, zp;
  template <typename F>
  void ForEach(F&& f) const {
    int64_t flat = 0;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t a = 0; a < ext; ++a)
        for (int64_t in = 0; in < inner; ++in, ++flat) f(flat, scale.At(o, a, in), zp.At(o, a, in));
  }
};

Status MakeQuantLayout(const KernelCall& call, std::string_view op, const TensorRef* zp, QuantLayout* l) {
  const TensorRef &x = call.inputs[0], &scale = call.inputs[1];
  // Per-tensor parameters ignore the axis (the default 1 even on an x of rank 0 or 1).
  if (scale.num_elements != 1 || (zp && zp->num_elements != 1)) {
    if (!NormalizeAxis(call.attrs.GetInt("axis", 1), x.rank, &l->axis))
      return OpError(op, "axis " + std::to_string(call.attrs.GetInt("axis", 1)) + " out of range for x " + ShapeStr(x));
    l->outer = Product(x.dims, 0, l->axis);
    l->ext = x.dim(l->axis);
    l->inner = Product(x.dims, l->axis + 1, x.rank);
  } else {
    l->inner = x.num_elements;
  }
  const int64_t block = call.attrs.GetInt("block_size", 0);
  KILN_RETURN_IF_ERROR(MakeParamIndex(op, "scale", x, scale, l->axis, block, &l->scale));
  if (zp) KILN_RETURN_IF_ERROR(MakeParamIndex(op, "zero point", x, *zp, l->axis, block, &l->zp));
  return Status::Ok();
}

Status QuantizeLinearKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "QuantizeLinear";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 2));
  const TensorRef &x = call.inputs[0], &scale = call.inputs[1], &y = call.outputs[0];
  const TensorRef* zp = OptionalInput(call, 2);
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, kOp));
  double lo, hi;
  if (!QuantRange(y.dtype, &lo, &hi)) return OpUnimplemented(kOp, "output dtype " + DTypeStr(y.dtype));
  if (zp && zp->dtype != y.dtype) return OpError(kOp, "zero point dtype differs from the output's");
  if (!IsScaleType(scale.dtype)) return OpUnimplemented(kOp, "scale dtype " + DTypeStr(scale.dtype));
  QuantLayout l;
  KILN_RETURN_IF_ERROR(MakeQuantLayout(call, kOp, zp, &l));
  // NumPy's x / scale: float32 for float32 operands, the 16-bit type when both are that
  // type, double for float64 or int32 x.
  switch (x.dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16: {
      const DType q = x.dtype == scale.dtype ? x.dtype : DType::kFloat32;
      l.ForEach([&](int64_t i, int64_t si, int64_t zi) {
        float v = RoundTo(q, FloatAt(x, i) / FloatAt(scale, si));
        StoreQuant(y, i, static_cast<double>(std::nearbyint(v)) + IntAt(zp, zi), lo, hi);
      });
      return Status::Ok();
    }
    case DType::kFloat64:
    case DType::kInt32:
      l.ForEach([&](int64_t i, int64_t si, int64_t zi) {
        double xv = x.dtype == DType::kInt32 ? x.as<const int32_t>()[i] : x.as<const double>()[i];
        StoreQuant(y, i, std::nearbyint(xv / FloatAt(scale, si)) + IntAt(zp, zi), lo, hi);
      });
      return Status::Ok();
    default: return OpUnimplemented(kOp, "input dtype " + DTypeStr(x.dtype));
  }
}

Status DequantizeLinearKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "DequantizeLinear";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 2));
  const TensorRef &x = call.inputs[0], &scale = call.inputs[1], &y = call.outputs[0];
  const TensorRef* zp = OptionalInput(call, 2);
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, kOp));
  double lo, hi;
  if (!QuantRange(x.dtype, &lo, &hi) && x.dtype != DType::kInt32)
    return OpUnimplemented(kOp, "input dtype " + DTypeStr(x.dtype));
  if (zp && zp->dtype != x.dtype) return OpError(kOp, "zero point dtype differs from x's");
  if (!IsScaleType(scale.dtype) || !IsScaleType(y.dtype))
    return OpUnimplemented(kOp, "scale dtype " + DTypeStr(scale.dtype) + " / output dtype " + DTypeStr(y.dtype));
  QuantLayout l;
  KILN_RETURN_IF_ERROR(MakeQuantLayout(call, kOp, zp, &l));
  // (float32(x) - zero point) * scale in float32, then rounded to the output type.
  l.ForEach([&](int64_t i, int64_t si, int64_t zi) {
    float d = static_cast<float>(IntAt(&x, i)) - static_cast<float>(IntAt(zp, zi));
    StoreFloat(y, i, d * FloatAt(scale, si));
  });
  return Status::Ok();
}

Status DynamicQuantizeLinearKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "DynamicQuantizeLinear";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 1, 3));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  const TensorRef *ys = OptionalOutput(call, 1), *yzp = OptionalOutput(call, 2);
  if (x.dtype != DType::kFloat32 || y.dtype != DType::kUInt8)
    return OpError(kOp, "expected float32 -> uint8, found " + DTypeStr(x.dtype) + " -> " + DTypeStr(y.dtype));
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, kOp));
  if ((ys && (ys->dtype != DType::kFloat32 || ys->num_elements != 1)) ||
      (yzp && (yzp->dtype != DType::kUInt8 || yzp->num_elements != 1)))
    return OpError(kOp, "y_scale must be one float32 and y_zero_point one uint8, found " +
                            (ys ? DTypeStr(ys->dtype) + " " + ShapeStr(*ys) : std::string("<absent>")) + " and " +
                            (yzp ? DTypeStr(yzp->dtype) + " " + ShapeStr(*yzp) : std::string("<absent>")));
  const float* xv = x.as<const float>();
  const int64_t n = x.num_elements;
  // The range always includes 0, so that 0 quantizes exactly; NaNs are left out of it.
  float mn = 0.0f, mx = 0.0f;
  int64_t i = 0;
#if defined(__SSE2__)
  __m128 lo = _mm_setzero_ps(), hi = _mm_setzero_ps();
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(xv + i);
    lo = _mm_min_ps(v, lo);  // minps and maxps return their second operand for a NaN
    hi = _mm_max_ps(v, hi);
  }
  float lanes[8];
  _mm_storeu_ps(lanes, lo);
  _mm_storeu_ps(lanes + 4, hi);
  for (int j = 0; j < 4; ++j) mn = std::min(mn, lanes[j]), mx = std::max(mx, lanes[4 + j]);
#endif
  for (; i < n; ++i) {
    mn = xv[i] < mn ? xv[i] : mn;
    mx = xv[i] > mx ? xv[i] : mx;
  }
  const float scale = (mx == mn ? 1.0f : mx - mn) / 255.0f;
  const float zp = std::nearbyint(std::clamp(0.0f - mn / scale, 0.0f, 255.0f));
  // y = saturate(round(x / scale) + zp), NaN to 0. Rounding half to even by adding and taking
  // away 1.5 * 2^23 (exact below 2^22; larger values saturate either way), so that the SSE2
  // loop and its tail round alike without a call per element.
  constexpr float kRound = 12582912.0f;
  uint8_t* out = y.as<uint8_t>();
  i = 0;
#if defined(__SSE2__)
  const __m128 vs = _mm_set1_ps(scale), vr = _mm_set1_ps(kRound), vz = _mm_set1_ps(zp);
  const __m128 v0 = _mm_setzero_ps(), v255 = _mm_set1_ps(255.0f);
  for (; i + 4 <= n; i += 4) {
    __m128 q = _mm_sub_ps(_mm_add_ps(_mm_div_ps(_mm_loadu_ps(xv + i), vs), vr), vr);
    q = _mm_min_ps(_mm_max_ps(_mm_add_ps(q, vz), v0), v255);  // maxps: a NaN gives 0
    const __m128i w = _mm_packs_epi32(_mm_cvttps_epi32(q), _mm_setzero_si128());
    const int32_t bytes = _mm_cvtsi128_si32(_mm_packus_epi16(w, w));
    std::memcpy(out + i, &bytes, 4);
  }
#endif
  for (; i < n; ++i) {
    const float q = (xv[i] / scale + kRound) - kRound + zp;
    out[i] = q > 0.0f ? static_cast<uint8_t>(q < 255.0f ? q : 255.0f) : 0;
  }
  if (ys) ys->as<float>()[0] = scale;
  // An infinite input makes the scale infinite and zp NaN: FromDouble stores 0, not UB.
  if (yzp) yzp->as<uint8_t>()[0] = FromDouble<uint8_t>(zp);
  return Status::Ok();
}

// ---- integer matmul -------------------------------------------------------------------------

// MatMul's shapes: A [..., M, K], B [..., K, N] (rank 1 promoted), batch dims broadcast.
struct IntMatMul {
  int64_t M = 1, K = 1, N = 1;
  int batch_rank = 0;
  int64_t batch_dims[kMaxRank] = {};
  int64_t a_str[kMaxRank] = {}, b_str[kMaxRank] = {};  // element strides of each batch dim
};

Status MakeIntMatMul(std::string_view op, const TensorRef& a, const TensorRef& b, const TensorRef& y,
                     IntMatMul* g) {
  if (a.rank < 1 || b.rank < 1) return OpError(op, "A and B must have rank >= 1");
  g->M = a.rank > 1 ? a.dim(a.rank - 2) : 1;
  g->K = a.dim(a.rank - 1);
  g->N = b.rank > 1 ? b.dim(b.rank - 1) : 1;
  const int64_t kb = b.rank > 1 ? b.dim(b.rank - 2) : b.dim(0);
  g->batch_rank = y.rank - (a.rank > 1) - (b.rank > 1);
  if (kb != g->K || g->batch_rank < 0 || y.num_elements != Product(y.dims, 0, g->batch_rank) * g->M * g->N)
    return OpError(op, "A " + ShapeStr(a) + ", B " + ShapeStr(b) + " and Y " + ShapeStr(y) + " do not match");
  for (int i = 0; i < g->batch_rank; ++i) g->batch_dims[i] = y.dims[i];
  const int ar = std::max(0, a.rank - 2), br = std::max(0, b.rank - 2);
  if (!BroadcastStrides(a.dims, ar, g->batch_dims, g->batch_rank, g->a_str) ||
      !BroadcastStrides(b.dims, br, g->batch_dims, g->batch_rank, g->b_str))
    return OpError(op, "batch dims of A " + ShapeStr(a) + " and B " + ShapeStr(b) + " do not broadcast to Y " +
                           ShapeStr(y));
  for (int i = 0; i < g->batch_rank; ++i) {
    g->a_str[i] *= g->M * g->K;
    g->b_str[i] *= g->K * g->N;
  }
  return Status::Ok();
}

// Index of a per-row (of A, count M) or per-column (of B, count N) parameter.
Status CheckRowParam(std::string_view op, std::string_view what, const TensorRef* p, int64_t n) {
  if (p && p->num_elements != 1 && p->num_elements != n)
    return OpError(op, std::string(what) + " " + ShapeStr(*p) + ": expected 1 or " + std::to_string(n) + " elements");
  return Status::Ok();
}
int64_t RowIndex(const TensorRef* p, int64_t i) { return p && p->num_elements > 1 ? i : 0; }

// Calls emit(y_index, m, n, sum_k (a - azp[m]) * (b - bzp[n])) for every output element.
template <typename Emit>
void ForEachIntDot(const IntMatMul& g, const TensorRef& a, const TensorRef* azp, const TensorRef& b,
                   const TensorRef* bzp, Emit&& emit) {
  NdIndex idx(g.batch_dims, g.batch_rank);
  int64_t yi = 0;
  do {
    const int64_t ao = idx.Offset(g.a_str, g.batch_rank), bo = idx.Offset(g.b_str, g.batch_rank);
    for (int64_t m = 0; m < g.M; ++m) {
      const int32_t za = IntAt(azp, RowIndex(azp, m));
      for (int64_t n = 0; n < g.N; ++n, ++yi) {
        const int32_t zb = IntAt(bzp, RowIndex(bzp, n));
        int32_t acc = 0;
        for (int64_t k = 0; k < g.K; ++k)
          acc = WrapAdd(acc, WrapMul(IntAt(&a, ao + m * g.K + k) - za, IntAt(&b, bo + k * g.N + n) - zb));
        emit(yi, m, n, acc);
      }
    }
  } while (idx.Next(g.batch_rank));
}

Status MatMulIntegerKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "MatMulInteger";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 2));
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  const TensorRef *azp = OptionalInput(call, 2), *bzp = OptionalInput(call, 3);
  if (y.dtype != DType::kInt32) return OpError(kOp, "output must be int32, found " + DTypeStr(y.dtype));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "A", a, azp));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "B", b, bzp));
  IntMatMul g;
  KILN_RETURN_IF_ERROR(MakeIntMatMul(kOp, a, b, y, &g));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "a_zero_point", azp, g.M));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "b_zero_point", bzp, g.N));
  int32_t* out = y.as<int32_t>();
  ForEachIntDot(g, a, azp, b, bzp, [&](int64_t i, int64_t, int64_t, int32_t acc) { out[i] = acc; });
  return Status::Ok();
}

// kiln.MatMulIntegerTransB (matmul_integer_trans_b.h): A [..., M, K] by B [N, K], no zero points.
Status MatMulIntegerTransBKernel(const KernelCall& call) {
  constexpr std::string_view kOp = kMatMulIntegerTransBOp;
  const TensorRef &a = call.inputs[0], &b = call.inputs[1], &y = call.outputs[0];
  if (y.dtype != DType::kInt32) return OpError(kOp, "output must be int32, found " + DTypeStr(y.dtype));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "A", a, nullptr));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "B", b, nullptr));
  bool ok = a.rank >= 2 && b.rank == 2 && y.rank == a.rank && b.dim(1) == a.dim(a.rank - 1) &&
            y.dim(y.rank - 1) == b.dim(0);
  for (int i = 0; ok && i < a.rank - 1; ++i) ok = y.dim(i) == a.dim(i);
  if (!ok)
    return OpError(kOp, "A " + ShapeStr(a) + " [..., M, K], B " + ShapeStr(b) + " [N, K] and Y " + ShapeStr(y) +
                            " [..., M, N] do not match");
  const int64_t K = b.dim(1), N = b.dim(0), rows = Product(a.dims, 0, a.rank - 1);
  int32_t* out = y.as<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc = WrapAdd(acc, WrapMul(IntAt(&a, r * K + k), IntAt(&b, n * K + k)));
      out[r * N + n] = acc;
    }
  return Status::Ok();
}

// kiln.NhwcConvInt8 (nhwc_conv_int8.h): int8 NHWC X by an [M, KH, KW, C] filter, float32 Y.
Status NhwcConvInt8Kernel(const KernelCall& call) {
  constexpr std::string_view kOp = kNhwcConvInt8Op;
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  if (x.dtype != DType::kInt8 || w.dtype != DType::kInt8 || y.dtype != DType::kFloat32)
    return OpError(kOp, "expected int8 X and W and float32 Y, found " + DTypeStr(x.dtype) + ", " + DTypeStr(w.dtype) +
                            " -> " + DTypeStr(y.dtype));
  if (x.rank != 4 || w.rank != 4 || y.rank != 4 || w.dim(3) != x.dim(3) || y.dim(0) != x.dim(0) ||
      y.dim(3) != w.dim(0))
    return OpError(kOp, "X " + ShapeStr(x) + " [N, H, W, C], W " + ShapeStr(w) + " [M, KH, KW, C] and Y " +
                            ShapeStr(y) + " [N, OH, OW, M] do not match");
  const auto ints = [&](const char* name, int64_t def, size_t n) {
    std::vector<int64_t> v = call.attrs.GetInts(name);
    if (v.empty()) v.assign(n, def);
    return v;
  };
  const std::vector<int64_t> st = ints("strides", 1, 2), pads = ints("pads", 0, 4), dil = ints("dilations", 1, 2);
  if (st.size() != 2 || pads.size() != 4 || dil.size() != 2 || st[0] < 1 || st[1] < 1 || dil[0] < 1 || dil[1] < 1)
    return OpError(kOp, "expected 2 strides and dilations of at least 1 and 4 pads");
  const int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), M = w.dim(0), KH = w.dim(1), KW = w.dim(2);
  const int64_t OH = y.dim(1), OW = y.dim(2);
  const auto out_dim = [](int64_t in, int64_t b, int64_t e, int64_t k, int64_t s, int64_t d) {
    const int64_t span = in + b + e - ((k - 1) * d + 1);
    return span < 0 ? int64_t{-1} : span / s + 1;
  };
  if (OH != out_dim(H, pads[0], pads[2], KH, st[0], dil[0]) || OW != out_dim(W, pads[1], pads[3], KW, st[1], dil[1]))
    return OpError(kOp, "Y " + ShapeStr(y) + " is not the output size of X " + ShapeStr(x) + " and W " + ShapeStr(w));
  const int8_t* xp = x.as<const int8_t>();
  const int8_t* wp = w.as<const int8_t>();
  float* yp = y.as<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (int64_t m = 0; m < M; ++m) {
          int32_t acc = 0;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * st[0] - pads[0] + kh * dil[0];
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * st[1] - pads[1] + kw * dil[1];
              if (iw < 0 || iw >= W) continue;
              const int8_t* xr = xp + ((n * H + ih) * W + iw) * C;
              const int8_t* wr = wp + ((m * KH + kh) * KW + kw) * C;
              for (int64_t c = 0; c < C; ++c) acc = WrapAdd(acc, int32_t{xr[c]} * wr[c]);
            }
          }
          yp[((n * OH + oh) * OW + ow) * M + m] = static_cast<float>(acc);
        }
  return Status::Ok();
}

Status QLinearMatMulKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "QLinearMatMul";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 8));
  const TensorRef &a = call.inputs[0], &as = call.inputs[1], &b = call.inputs[3], &bs = call.inputs[4];
  const TensorRef &ys = call.inputs[6], &yzp = call.inputs[7], &y = call.outputs[0];
  const TensorRef *azp = OptionalInput(call, 2), *bzp = OptionalInput(call, 5);
  double lo, hi;
  if (!QuantRange(y.dtype, &lo, &hi) || yzp.dtype != y.dtype)
    return OpError(kOp, "output dtype " + DTypeStr(y.dtype) + " must be y_zero_point's, int8 or uint8");
  if (!IsScaleType(as.dtype) || bs.dtype != as.dtype || ys.dtype != as.dtype)
    return OpError(kOp, "scales must share one float type");
  IntMatMul g;
  KILN_RETURN_IF_ERROR(MakeIntMatMul(kOp, a, b, y, &g));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "a_scale", &as, g.M));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "a_zero_point", azp, g.M));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "b_scale", &bs, g.N));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "b_zero_point", bzp, g.N));
  const DType st = as.dtype;
  const float y_scale = FloatAt(ys, 0);
  const int32_t y_zp = IntAt(&yzp, 0);
  ForEachIntDot(g, a, azp, b, bzp, [&](int64_t i, int64_t m, int64_t n, int32_t acc) {
    // a_scale * b_scale / y_scale in the scales' type, then the int32 sum times it in double.
    const float mult = RoundTo(st, RoundTo(st, FloatAt(as, RowIndex(&as, m)) * FloatAt(bs, RowIndex(&bs, n))) / y_scale);
    StoreQuant(y, i, static_cast<double>(acc) * mult + y_zp, lo, hi);
  });
  return Status::Ok();
}

// onnxruntime's com.microsoft QGemm (compiler/ops/meta_quantize.cc): the int32 sum plus C, times
// alpha * a_scale * b_scale[n] in double, requantized by y_scale and y_zero_point (or float32).
Status QGemmKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "QGemm";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 6));
  const TensorRef &a = call.inputs[0], &as = call.inputs[1], &b = call.inputs[3], &bs = call.inputs[4];
  const TensorRef *azp = OptionalInput(call, 2), *bzp = OptionalInput(call, 5), *c = OptionalInput(call, 6);
  const TensorRef *ys = OptionalInput(call, 7), *yzp = OptionalInput(call, 8);
  const TensorRef& y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "A", a, azp));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "B", b, bzp));
  double lo = 0, hi = 0;
  if (ys ? !QuantRange(y.dtype, &lo, &hi) || (yzp && yzp->dtype != y.dtype) : y.dtype != DType::kFloat32)
    return OpError(kOp, "output dtype " + DTypeStr(y.dtype) + ": expected y_zero_point's (int8 or uint8) with "
                        "y_scale, float32 without");
  if (as.dtype != DType::kFloat32 || bs.dtype != DType::kFloat32 || (ys && ys->dtype != DType::kFloat32))
    return OpError(kOp, "scales must be float32");
  if (a.rank != 2 || b.rank != 2 || y.rank != 2) return OpError(kOp, "A, B and Y must be 2-D");
  const bool ta = call.attrs.GetInt("transA", 0) != 0, tb = call.attrs.GetInt("transB", 0) != 0;
  const int64_t M = a.dim(ta ? 1 : 0), K = a.dim(ta ? 0 : 1), N = b.dim(tb ? 0 : 1);
  if (b.dim(tb ? 1 : 0) != K || y.dim(0) != M || y.dim(1) != N)
    return OpError(kOp, "A " + ShapeStr(a) + ", B " + ShapeStr(b) + " and Y " + ShapeStr(y) + " do not match");
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "b_scale", &bs, N));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "b_zero_point", bzp, N));
  // C's strides along m and n: 0 where it broadcasts.
  const int64_t cn = c && c->rank >= 1 && c->dim(c->rank - 1) != 1;
  const int64_t cm = c && c->rank == 2 && c->dim(0) != 1 ? (cn ? N : 1) : 0;
  if (c && (c->dtype != DType::kInt32 || c->num_elements != (cm ? M : 1) * (cn ? N : 1)))
    return OpError(kOp, "C " + ShapeStr(*c) + " must be int32, broadcast to [M, N]");
  const double alpha = call.attrs.GetFloat("alpha", 1.0f), y_scale = ys ? FloatAt(*ys, 0) : 1.0;
  const int32_t za = IntAt(azp, 0), y_zp = IntAt(yzp, 0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      const int32_t zb = IntAt(bzp, RowIndex(bzp, n));
      int32_t acc = c ? c->as<const int32_t>()[m * cm + n * cn] : 0;
      for (int64_t k = 0; k < K; ++k)
        acc = WrapAdd(acc, WrapMul(IntAt(&a, ta ? k * M + m : m * K + k) - za, IntAt(&b, tb ? n * K + k : k * N + n) - zb));
      const double v = static_cast<double>(acc) * alpha * FloatAt(as, 0) * FloatAt(bs, RowIndex(&bs, n));
      if (ys)
        StoreQuant(y, m * N + n, std::nearbyint(v / y_scale) + y_zp, lo, hi);
      else
        y.as<float>()[m * N + n] = static_cast<float>(v);
    }
  return Status::Ok();
}

// ---- integer convolution --------------------------------------------------------------------

struct IntConvGeometry : WindowGeometry {
  int64_t N = 1, C = 1, M = 1, group = 1;
};

Status MakeIntConv(const KernelCall& call, std::string_view op, const TensorRef& x, const TensorRef& w,
                   const TensorRef& y, IntConvGeometry* g) {
  if (x.rank < 3 || w.rank != x.rank || y.rank != x.rank || x.rank - 2 > kMaxSpatial)
    return OpError(op, "x " + ShapeStr(x) + ", w " + ShapeStr(w) + " and y " + ShapeStr(y) +
                           " must share one rank >= 3");
  g->sr = x.rank - 2;
  g->N = x.dim(0);
  g->C = x.dim(1);
  g->M = w.dim(0);
  g->group = call.attrs.GetInt("group", 1);
  if (g->group < 1 || g->C != w.dim(1) * g->group || g->M % g->group != 0 || y.dim(0) != g->N || y.dim(1) != g->M)
    return OpError(op, "x " + ShapeStr(x) + ", w " + ShapeStr(w) + ", y " + ShapeStr(y) + " and group " +
                           std::to_string(g->group) + " do not match");
  const auto &st = call.attrs.GetInts("strides"), &dl = call.attrs.GetInts("dilations");
  const auto& pads = call.attrs.GetInts("pads");
  const std::string_view auto_pad = call.attrs.GetString("auto_pad", "NOTSET");
  if ((!st.empty() && static_cast<int>(st.size()) != g->sr) || (!dl.empty() && static_cast<int>(dl.size()) != g->sr) ||
      (!pads.empty() && static_cast<int>(pads.size()) != 2 * g->sr))
    return OpError(op, "strides/dilations need " + std::to_string(g->sr) + " values and pads " +
                           std::to_string(2 * g->sr));
  for (int i = 0; i < g->sr; ++i) {
    g->kernel[i] = w.dim(2 + i);
    g->stride[i] = st.empty() ? 1 : st[i];
    g->dilation[i] = dl.empty() ? 1 : dl[i];
    g->in[i] = x.dim(2 + i);
    g->out[i] = y.dim(2 + i);
    g->in_size *= g->in[i];
    g->out_size *= g->out[i];
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t total =
          std::max<int64_t>(0, (g->out[i] - 1) * g->stride[i] + (g->kernel[i] - 1) * g->dilation[i] + 1 - g->in[i]);
      g->pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (auto_pad == "NOTSET") {
      g->pad_begin[i] = pads.empty() ? 0 : pads[i];
    } else if (auto_pad != "VALID") {
      return OpError(op, "auto_pad \"" + std::string(auto_pad) + "\"");
    }
  }
  return Status::Ok();
}

// Calls emit(y_index, m, sum (x - xzp) * (w - wzp[m])) for every output element; padding
// contributes nothing (it is zero after the zero point is subtracted).
template <typename Emit>
void ForEachIntConv(const IntConvGeometry& g, const TensorRef& x, int32_t xzp, const TensorRef& w,
                    const TensorRef* wzp, Emit&& emit) {
  const int64_t cg = g.C / g.group, mg = g.M / g.group;
  int64_t ksize = 1;
  for (int i = 0; i < g.sr; ++i) ksize *= g.kernel[i];
  int64_t yi = 0;
  for (int64_t n = 0; n < g.N; ++n) {
    for (int64_t m = 0; m < g.M; ++m) {
      const int32_t zw = IntAt(wzp, RowIndex(wzp, m));
      const int64_t c0 = (m / mg) * cg;
      NdIndex o(g.out, g.sr);
      do {
        int32_t acc = 0;
        NdIndex k(g.kernel, g.sr);
        int64_t kf = 0;
        do {
          int64_t off = 0;
          bool inside = true;
          for (int d = 0; d < g.sr && inside; ++d) {
            const int64_t p = o.idx[d] * g.stride[d] + k.idx[d] * g.dilation[d] - g.pad_begin[d];
            inside = p >= 0 && p < g.in[d];
            off = off * g.in[d] + p;
          }
          if (inside)
            for (int64_t c = 0; c < cg; ++c)
              acc = WrapAdd(acc, WrapMul(IntAt(&x, (n * g.C + c0 + c) * g.in_size + off) - xzp,
                                         IntAt(&w, (m * cg + c) * ksize + kf) - zw));
          ++kf;
        } while (k.Next(g.sr));
        emit(yi++, m, acc);
      } while (o.Next(g.sr));
    }
  }
}

Status ConvIntegerKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "ConvInteger";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 2));
  const TensorRef &x = call.inputs[0], &w = call.inputs[1], &y = call.outputs[0];
  const TensorRef *xzp = OptionalInput(call, 2), *wzp = OptionalInput(call, 3);
  if (y.dtype != DType::kInt32) return OpError(kOp, "output must be int32, found " + DTypeStr(y.dtype));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "X", x, xzp));
  KILN_RETURN_IF_ERROR(CheckInt8Operand(kOp, "W", w, wzp));
  IntConvGeometry g;
  KILN_RETURN_IF_ERROR(MakeIntConv(call, kOp, x, w, y, &g));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "w_zero_point", wzp, g.M));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "x_zero_point", xzp, 1));
  int32_t* out = y.as<int32_t>();
  ForEachIntConv(g, x, IntAt(xzp, 0), w, wzp, [&](int64_t i, int64_t, int32_t acc) { out[i] = acc; });
  return Status::Ok();
}

Status QLinearConvKernel(const KernelCall& call) {
  constexpr std::string_view kOp = "QLinearConv";
  KILN_RETURN_IF_ERROR(CheckArity(call, kOp, 7));
  const TensorRef &x = call.inputs[0], &xs = call.inputs[1], &w = call.inputs[3], &ws = call.inputs[4];
  const TensorRef &ys = call.inputs[6], &y = call.outputs[0];
  const TensorRef *xzp = OptionalInput(call, 2), *wzp = OptionalInput(call, 5), *yzp = OptionalInput(call, 7);
  const TensorRef* bias = OptionalInput(call, 8);
  double lo, hi;
  if (!QuantRange(y.dtype, &lo, &hi) || (yzp && yzp->dtype != y.dtype))
    return OpError(kOp, "output dtype " + DTypeStr(y.dtype) + " must be y_zero_point's, int8 or uint8");
  if (xs.dtype != DType::kFloat32 || ws.dtype != DType::kFloat32 || ys.dtype != DType::kFloat32)
    return OpError(kOp, "scales must be float32");
  IntConvGeometry g;
  KILN_RETURN_IF_ERROR(MakeIntConv(call, kOp, x, w, y, &g));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "w_scale", &ws, g.M));
  KILN_RETURN_IF_ERROR(CheckRowParam(kOp, "w_zero_point", wzp, g.M));
  if (bias && (bias->dtype != DType::kInt32 || bias->num_elements != g.M))
    return OpError(kOp, "B " + ShapeStr(*bias) + " must be int32 with " + std::to_string(g.M) + " elements");
  const float x_scale = FloatAt(xs, 0), y_scale = FloatAt(ys, 0);
  const int32_t y_zp = IntAt(yzp, 0);
  ForEachIntConv(g, x, IntAt(xzp, 0), w, wzp, [&](int64_t i, int64_t m, int32_t acc) {
    const float mult = x_scale * FloatAt(ws, RowIndex(&ws, m)) / y_scale;
    StoreQuant(y, i, static_cast<double>(acc + IntAt(bias, m)) * mult + y_zp, lo, hi);
  });
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"ConvInteger", ConvIntegerKernel, nullptr},
    {"DequantizeLinear", DequantizeLinearKernel, nullptr, true},
    {"DynamicQuantizeLinear", DynamicQuantizeLinearKernel, nullptr},
    {"MatMulInteger", MatMulIntegerKernel, nullptr},
    {"QGemm", QGemmKernel, nullptr},
    {"QLinearConv", QLinearConvKernel, nullptr},
    {"QLinearMatMul", QLinearMatMulKernel, nullptr, true},
    {"QuantizeLinear", QuantizeLinearKernel, nullptr, true},
    {kMatMulIntegerTransBOp, MatMulIntegerTransBKernel, nullptr, false, {2, 2, 0b11, 1, 1}},
    {kNhwcConvInt8Op, NhwcConvInt8Kernel, nullptr, false, {2, 2, 0b11, 1, 1}},
};

}  // namespace

std::span<const KernelDef> QuantizeKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
