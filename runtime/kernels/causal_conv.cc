// CausalConvWithState: out[b,c,t] = act(bias[c] + sum_j w[c,0,j] * padded[b,c,t+j]) where
// padded = concat(past_state or zeros, input) along the length; present_state is padded's
// last k-1 positions. float16/bfloat16 compute in float and round the convolution before
// the activation, as the ONNX reference does.
#include <cmath>

#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/half.h"

namespace kiln::cpu {
namespace {

double LoadAt(const TensorRef& t, int64_t i) {
  switch (t.dtype) {
    case DType::kFloat32: return t.as<const float>()[i];
    case DType::kFloat64: return t.as<const double>()[i];
    case DType::kFloat16: return HalfToFloat(t.as<const uint16_t>()[i]);
    default: return BF16ToFloat(t.as<const uint16_t>()[i]);
  }
}

// Stores v rounded to t's dtype and returns the rounded value.
double StoreAt(const TensorRef& t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::kFloat32: return t.as<float>()[i] = static_cast<float>(v);
    case DType::kFloat64: return t.as<double>()[i] = v;
    case DType::kFloat16: return HalfToFloat(t.as<uint16_t>()[i] = FloatToHalf(static_cast<float>(v)));
    default: return BF16ToFloat(t.as<uint16_t>()[i] = FloatToBF16(static_cast<float>(v)));
  }
}

Status CausalConvKernel(const KernelCall& call) {
  constexpr std::string_view kName = "CausalConvWithState";
  KILN_RETURN_IF_ERROR(CheckArity(call, kName, 2));
  const TensorRef& x = call.inputs[0];
  const TensorRef& w = call.inputs[1];
  const TensorRef* bias = call.inputs.size() > 2 && call.inputs[2].present() ? &call.inputs[2] : nullptr;
  const TensorRef* past = call.inputs.size() > 3 && call.inputs[3].present() ? &call.inputs[3] : nullptr;
  const TensorRef& y = call.outputs[0];
  const TensorRef* present = call.outputs.size() > 1 && call.outputs[1].present() ? &call.outputs[1] : nullptr;
  const bool is_float = x.dtype == DType::kFloat32 || x.dtype == DType::kFloat64 || x.dtype == DType::kFloat16 ||
                        x.dtype == DType::kBFloat16;
  if (!is_float || x.rank != 3 || w.rank != 3 || w.dtype != x.dtype || y.dtype != x.dtype ||
      w.dims[0] != x.dims[1] || w.dims[2] < 1 || y.num_elements != x.num_elements)
    return OpError(kName, "input " + DTypeStr(x.dtype) + " " + ShapeStr(x) + " and weight " + DTypeStr(w.dtype) +
                              " " + ShapeStr(w) + " do not fit (B, C, L) and (C, 1, k) of one float dtype");
  const int64_t B = x.dims[0], C = x.dims[1], L = x.dims[2], k = w.dims[2], S = k - 1;
  if ((past && past->num_elements != B * C * S) || (present && present->num_elements != B * C * S) ||
      (bias && bias->num_elements != C))
    return OpError(kName, "past_state/present_state must be " + ShapeText(std::vector<int64_t>{B, C, S}) +
                              " and bias " + ShapeText(std::vector<int64_t>{C}));
  const bool silu = call.attrs.GetString("activation", "none") != "none";
  // padded[b,c,p]: the state for p < S, the input after.
  auto padded = [&](int64_t bc, int64_t p) {
    if (p >= S) return LoadAt(x, bc * L + p - S);
    return past ? LoadAt(*past, bc * S + p) : 0.0;
  };
  for (int64_t bc = 0; bc < B * C; ++bc) {
    const int64_t c = bc % C;
    for (int64_t t = 0; t < L; ++t) {
      double acc = bias ? LoadAt(*bias, c) : 0.0;
      for (int64_t j = 0; j < k; ++j) acc += LoadAt(w, c * k + j) * padded(bc, t + j);
      const double conv = StoreAt(y, bc * L + t, acc);
      if (silu) StoreAt(y, bc * L + t, conv / (1.0 + std::exp(-conv)));
    }
  }
  // The last S of padded's S + L positions. In forward order each write lands at or before
  // the positions still to be read, so a state updated in place stays right.
  if (present)
    for (int64_t bc = 0; bc < B * C; ++bc)
      for (int64_t s = 0; s < S; ++s) StoreAt(*present, bc * S + s, padded(bc, L + s));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {{"CausalConvWithState", CausalConvKernel, nullptr, true}};

}  // namespace

std::span<const KernelDef> CausalConvKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
