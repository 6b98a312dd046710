// Elementwise unary ops: activations, math functions, Not, Sign and Clip.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "runtime/kernels/activation.h"
#include "runtime/kernels/families.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

Status CheckUnary(const KernelCall& call, std::string_view name) {
  KILN_RETURN_IF_ERROR(CheckArity(call, name, 1));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  KILN_RETURN_IF_ERROR(CheckSameCount(x, y, name));
  if (x.dtype != y.dtype) {
    return OpError(name, "output dtype " + DTypeStr(y.dtype) + " differs from input dtype " +
                             DTypeStr(x.dtype));
  }
  return Status::Ok();
}

// f is a generic lambda called with float or double.
template <typename F>
Status FloatUnary(const KernelCall& call, std::string_view name, F f) {
  KILN_RETURN_IF_ERROR(CheckUnary(call, name));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  bool ok = VisitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    for (int64_t i = 0; i < x.num_elements; ++i) py[i] = static_cast<T>(f(px[i]));
  });
  if (!ok) return OpError(name, "expected a float32 or float64 input, got " + DTypeStr(x.dtype));
  return Status::Ok();
}

// Like FloatUnary, also over the integer dtypes.
template <typename F>
Status NumericUnary(const KernelCall& call, std::string_view name, F f) {
  KILN_RETURN_IF_ERROR(CheckUnary(call, name));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  bool ok = VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    for (int64_t i = 0; i < x.num_elements; ++i) py[i] = static_cast<T>(f(px[i]));
  });
  if (!ok) return OpError(name, "unsupported input dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

template <typename T>
T SoftplusOf(T x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

Status Relu(const KernelCall& c) {
  KILN_RETURN_IF_ERROR(CheckUnary(c, "Relu"));
  if (c.inputs[0].dtype == DType::kFloat32) {
    ReluFloat(c.inputs[0].as<const float>(), c.outputs[0].as<float>(), c.inputs[0].num_elements);
    return Status::Ok();
  }
  return NumericUnary(c, "Relu", [](auto x) { return ReluOf(x); });
}
Status LeakyRelu(const KernelCall& c) {
  const double alpha = c.attrs.GetFloat("alpha", 0.01f);
  return FloatUnary(c, "LeakyRelu", [alpha](auto x) {
    using T = decltype(x);
    return x >= 0 ? x : static_cast<T>(alpha) * x;
  });
}
Status ThresholdedRelu(const KernelCall& c) {
  const double alpha = c.attrs.GetFloat("alpha", 1.0f);
  return FloatUnary(c, "ThresholdedRelu", [alpha](auto x) {
    using T = decltype(x);
    return x > static_cast<T>(alpha) ? x : T(0);
  });
}
Status Sigmoid(const KernelCall& c) {
  return FloatUnary(c, "Sigmoid", [](auto x) { return SigmoidOf(x); });
}
Status Tanh(const KernelCall& c) {
  return FloatUnary(c, "Tanh", [](auto x) { return std::tanh(x); });
}
Status Exp(const KernelCall& c) {
  return FloatUnary(c, "Exp", [](auto x) { return std::exp(x); });
}
Status Log(const KernelCall& c) {
  return FloatUnary(c, "Log", [](auto x) { return std::log(x); });
}
Status Sqrt(const KernelCall& c) {
  return FloatUnary(c, "Sqrt", [](auto x) { return std::sqrt(x); });
}
Status Reciprocal(const KernelCall& c) {
  return FloatUnary(c, "Reciprocal", [](auto x) { return decltype(x)(1) / x; });
}
Status Neg(const KernelCall& c) {
  return NumericUnary(c, "Neg", [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_integral_v<T>) {
      // Wraps like two's complement instead of overflowing on the minimum value.
      return static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(x));
    } else {
      return -x;
    }
  });
}
Status Abs(const KernelCall& c) {
  return NumericUnary(c, "Abs", [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_unsigned_v<T>) return x;
    else if constexpr (std::is_integral_v<T>) return x < 0 ? static_cast<T>(0 - static_cast<std::make_unsigned_t<T>>(x)) : x;
    else return std::fabs(x);
  });
}
Status Sign(const KernelCall& c) {
  return NumericUnary(c, "Sign", [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<T>(x > T(0) ? 1 : (x < T(0) ? -1 : 0));
  });
}
Status Floor(const KernelCall& c) {
  return FloatUnary(c, "Floor", [](auto x) { return std::floor(x); });
}
Status Ceil(const KernelCall& c) {
  return FloatUnary(c, "Ceil", [](auto x) { return std::ceil(x); });
}
Status Round(const KernelCall& c) {
  // ONNX rounds halves to even, which is nearbyint under the default rounding mode.
  return FloatUnary(c, "Round", [](auto x) { return std::nearbyint(x); });
}
Status Erf(const KernelCall& c) {
  return FloatUnary(c, "Erf", [](auto x) { return std::erf(x); });
}
Status Sin(const KernelCall& c) {
  return FloatUnary(c, "Sin", [](auto x) { return std::sin(x); });
}
Status Cos(const KernelCall& c) {
  return FloatUnary(c, "Cos", [](auto x) { return std::cos(x); });
}
Status Tan(const KernelCall& c) {
  return FloatUnary(c, "Tan", [](auto x) { return std::tan(x); });
}
Status Asin(const KernelCall& c) {
  return FloatUnary(c, "Asin", [](auto x) { return std::asin(x); });
}
Status Acos(const KernelCall& c) {
  return FloatUnary(c, "Acos", [](auto x) { return std::acos(x); });
}
Status Atan(const KernelCall& c) {
  return FloatUnary(c, "Atan", [](auto x) { return std::atan(x); });
}
Status Acosh(const KernelCall& c) { return FloatUnary(c, "Acosh", [](auto x) { return std::acosh(x); }); }
Status Asinh(const KernelCall& c) { return FloatUnary(c, "Asinh", [](auto x) { return std::asinh(x); }); }
Status Atanh(const KernelCall& c) { return FloatUnary(c, "Atanh", [](auto x) { return std::atanh(x); }); }
Status Swish(const KernelCall& c) {
  const double alpha = c.attrs.GetFloat("alpha", 1.0f);
  return FloatUnary(c, "Swish", [alpha](auto x) {
    using T = decltype(x);
    return x / (T(1) + std::exp(-static_cast<T>(alpha) * x));
  });
}
Status Sinh(const KernelCall& c) {
  return FloatUnary(c, "Sinh", [](auto x) { return std::sinh(x); });
}
Status Cosh(const KernelCall& c) {
  return FloatUnary(c, "Cosh", [](auto x) { return std::cosh(x); });
}
Status Softplus(const KernelCall& c) {
  return FloatUnary(c, "Softplus", [](auto x) { return SoftplusOf(x); });
}
Status Softsign(const KernelCall& c) {
  return FloatUnary(c, "Softsign", [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); });
}
Status Mish(const KernelCall& c) {
  return FloatUnary(c, "Mish", [](auto x) { return x * std::tanh(SoftplusOf(x)); });
}
Status Elu(const KernelCall& c) {
  const double alpha = c.attrs.GetFloat("alpha", 1.0f);
  return FloatUnary(c, "Elu", [alpha](auto x) {
    using T = decltype(x);
    return x >= 0 ? x : static_cast<T>(alpha) * (std::exp(x) - T(1));
  });
}
Status Celu(const KernelCall& c) {
  const double alpha = c.attrs.GetFloat("alpha", 1.0f);
  return FloatUnary(c, "Celu", [alpha](auto x) {
    using T = decltype(x);
    const T a = static_cast<T>(alpha);
    return MaxNaN(x, T(0)) + MinNaN(a * (std::exp(x / a) - T(1)), T(0));
  });
}
Status Selu(const KernelCall& c) {
  const double alpha = c.attrs.GetFloat("alpha", 1.67326319217681884765625f);
  const double gamma = c.attrs.GetFloat("gamma", 1.05070102214813232421875f);
  return FloatUnary(c, "Selu", [alpha, gamma](auto x) {
    using T = decltype(x);
    const T g = static_cast<T>(gamma), a = static_cast<T>(alpha);
    return x > 0 ? g * x : g * (a * std::exp(x) - a);
  });
}
Status Gelu(const KernelCall& c) {
  const std::string_view approx = c.attrs.GetString("approximate", "none");
  if (approx == "tanh") return FloatUnary(c, "Gelu", [](auto x) { return GeluTanhOf(x); });
  if (approx != "none") {
    return OpError("Gelu", "approximate must be 'none' or 'tanh', got '" + std::string(approx) + "'");
  }
  return FloatUnary(c, "Gelu", [](auto x) { return GeluOf(x); });
}
Status HardSigmoid(const KernelCall& c) {
  const double alpha = c.attrs.GetFloat("alpha", 0.2f);
  const double beta = c.attrs.GetFloat("beta", 0.5f);
  return FloatUnary(c, "HardSigmoid", [alpha, beta](auto x) {
    using T = decltype(x);
    return ClampNaN(static_cast<T>(alpha) * x + static_cast<T>(beta), T(0), T(1));
  });
}
Status HardSwish(const KernelCall& c) {
  return FloatUnary(c, "HardSwish", [](auto x) { return HardSwishOf(x); });
}

Status Not(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckUnary(call, "Not"));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  if (x.dtype != DType::kBool) return OpError("Not", "expected a bool input, got " + DTypeStr(x.dtype));
  const uint8_t* px = x.as<const uint8_t>();
  uint8_t* py = y.as<uint8_t>();
  for (int64_t i = 0; i < x.num_elements; ++i) py[i] = px[i] ? 0 : 1;
  return Status::Ok();
}

Status Clip(const KernelCall& call) {
  KILN_RETURN_IF_ERROR(CheckUnary(call, "Clip"));
  const TensorRef &x = call.inputs[0], &y = call.outputs[0];
  const TensorRef* lo = OptionalInput(call, 1);
  const TensorRef* hi = OptionalInput(call, 2);
  for (const TensorRef* b : {lo, hi}) {
    if (b == nullptr) continue;
    if (b->num_elements != 1) {
      return OpError("Clip", "min and max must be scalars, got shape " + ShapeStr(*b));
    }
    if (b->dtype != x.dtype) {
      return OpError("Clip", "bound dtype " + DTypeStr(b->dtype) + " differs from input dtype " +
                                 DTypeStr(x.dtype));
    }
  }
  bool ok = VisitNumeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    // An absent bound is no bound: -inf and +inf for floats (lowest() would clamp -inf to
    // -FLT_MAX), the dtype's range for integers.
    constexpr bool kInf = std::numeric_limits<T>::has_infinity;
    const T lo_v = lo ? lo->as<const T>()[0] : kInf ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    const T hi_v = hi ? hi->as<const T>()[0] : kInf ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
    const T* px = x.as<const T>();
    T* py = y.as<T>();
    // ONNX applies min first, then max, so min > max gives max everywhere.
    for (int64_t i = 0; i < x.num_elements; ++i) {
      T v = px[i];
      if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(v)) { py[i] = v; continue; }
      }
      v = v < lo_v ? lo_v : v;
      py[i] = v > hi_v ? hi_v : v;
    }
  });
  if (!ok) return OpError("Clip", "unsupported input dtype " + DTypeStr(x.dtype));
  return Status::Ok();
}

constexpr KernelDef kKernels[] = {
    {"Abs", Abs, nullptr},
    {"Acos", Acos, nullptr},
    {"Acosh", Acosh, nullptr},
    {"Asin", Asin, nullptr},
    {"Asinh", Asinh, nullptr},
    {"Atan", Atan, nullptr},
    {"Atanh", Atanh, nullptr},
    {"Ceil", Ceil, nullptr},
    {"Celu", Celu, nullptr},
    {"Clip", Clip, nullptr},
    {"Cos", Cos, nullptr},
    {"Cosh", Cosh, nullptr},
    {"Elu", Elu, nullptr},
    {"Erf", Erf, nullptr},
    {"Exp", Exp, nullptr},
    {"Floor", Floor, nullptr},
    {"Gelu", Gelu, nullptr},
    {"HardSigmoid", HardSigmoid, nullptr},
    {"HardSwish", HardSwish, nullptr},
    {"LeakyRelu", LeakyRelu, nullptr},
    {"Log", Log, nullptr},
    {"Mish", Mish, nullptr},
    {"Neg", Neg, nullptr},
    {"Not", Not, nullptr},
    {"Reciprocal", Reciprocal, nullptr},
    {"Relu", Relu, nullptr},
    {"Round", Round, nullptr},
    {"Selu", Selu, nullptr},
    {"Sigmoid", Sigmoid, nullptr},
    {"Sign", Sign, nullptr},
    {"Sin", Sin, nullptr},
    {"Sinh", Sinh, nullptr},
    {"Softplus", Softplus, nullptr},
    {"Softsign", Softsign, nullptr},
    {"Sqrt", Sqrt, nullptr},
    {"Swish", Swish, nullptr},
    {"Tan", Tan, nullptr},
    {"Tanh", Tanh, nullptr},
    {"ThresholdedRelu", ThresholdedRelu, nullptr},
};

}  // namespace

std::span<const KernelDef> UnaryKernels() { return KeptKernels<kKernels>(); }

}  // namespace kiln::cpu
