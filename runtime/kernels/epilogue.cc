#include "runtime/kernels/epilogue.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "runtime/kernels/activation.h"
#include "runtime/kernels/kernel_util.h"

namespace kiln::cpu {
namespace {

struct ActivationName {
  EpilogueActivation activation;
  std::string_view name;
};
constexpr ActivationName kActivationNames[] = {
    {EpilogueActivation::kRelu, "Relu"},         {EpilogueActivation::kGelu, "Gelu"},
    {EpilogueActivation::kGeluTanh, "GeluTanh"}, {EpilogueActivation::kSigmoid, "Sigmoid"},
    {EpilogueActivation::kHardSwish, "HardSwish"}, {EpilogueActivation::kSilu, "SiLU"},
};

// Elements per pass: the residual add and the activation each run over one block while it
// is in L1, as two simple loops (which vectorise) instead of one loop with both.
constexpr int64_t kBlock = 2048;

// Loops run in groups of kLanes plus a scalar tail: GCC's -O2 vectorizer (the cheap cost
// model) refuses a loop that would need a scalar epilogue, so a plain loop stays scalar.
constexpr int64_t kLanes = 16;

template <typename T, typename F>
void MapInPlace(T* __restrict y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) y[i + k] = f(y[i + k]);
  }
  for (; i < n; ++i) y[i] = f(y[i]);
}

template <typename T>
void AddInPlace(T* __restrict y, const T* __restrict r, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t k = 0; k < kLanes; ++k) y[i + k] += r[i + k];
  }
  for (; i < n; ++i) y[i] += r[i];
}

template <typename T>
void Activate(EpilogueActivation a, T* y, int64_t n) {
  switch (a) {
    case EpilogueActivation::kNone: return;
    case EpilogueActivation::kRelu:
      if constexpr (std::is_same_v<T, float>) {
        ReluFloat(y, y, n);
      } else {
        MapInPlace(y, n, [](T x) { return ReluOf(x); });
      }
      return;
    case EpilogueActivation::kGelu: return MapInPlace(y, n, [](T x) { return GeluOf(x); });
    case EpilogueActivation::kGeluTanh: return MapInPlace(y, n, [](T x) { return GeluTanhOf(x); });
    case EpilogueActivation::kSigmoid: return MapInPlace(y, n, [](T x) { return SigmoidOf(x); });
    case EpilogueActivation::kHardSwish:
      if constexpr (std::is_same_v<T, float>) {
        HardSwishFloat(y, y, n);
      } else {
        MapInPlace(y, n, [](T x) { return HardSwishOf(x); });
      }
      return;
    case EpilogueActivation::kSilu: return MapInPlace(y, n, [](T x) { return SiluOf(x); });
  }
}

template <typename T>
void Apply(const EpilogueSpec& spec, T* y, const T* residual, int64_t count) {
  for (int64_t b = 0; b < count; b += kBlock) {
    const int64_t n = std::min(kBlock, count - b);
    T* yb = y + b;
    if (residual && spec.residual_first) AddInPlace(yb, residual + b, n);
    Activate(spec.activation, yb, n);
    if (residual && !spec.residual_first) AddInPlace(yb, residual + b, n);
  }
}

}  // namespace

std::optional<EpilogueActivation> ParseEpilogueActivation(std::string_view name) {
  for (const ActivationName& a : kActivationNames)
    if (a.name == name) return a.activation;
  return std::nullopt;
}

std::string_view EpilogueActivationName(EpilogueActivation a) {
  for (const ActivationName& n : kActivationNames)
    if (n.activation == a) return n.name;
  return "";
}

Status ParseEpilogue(const AttrMap& attrs, EpilogueSpec* spec) {
  *spec = EpilogueSpec{};
  if (const Attr* a = attrs.Find(kEpilogueActivationAttr)) {
    auto expected = [] {  // only on the error path: a steady-state Run allocates nothing
      std::string names;
      for (const ActivationName& n : kActivationNames) names += (names.empty() ? "" : ", ") + std::string(n.name);
      return names;
    };
    if (a->kind != Attr::Kind::kString)
      return InvalidArgument(std::string(kEpilogueActivationAttr) + ": expected a string, one of " +
                             expected() + ", found a non-string attribute");
    auto act = ParseEpilogueActivation(a->s);
    if (!act)
      return InvalidArgument(std::string(kEpilogueActivationAttr) + ": expected one of " + expected() +
                             ", found '" + a->s + "'");
    spec->activation = *act;
  }
  if (const Attr* a = attrs.Find(kEpilogueResidualAttr)) {
    if (a->kind != Attr::Kind::kInt || (a->i != 0 && a->i != 1))
      return InvalidArgument(std::string(kEpilogueResidualAttr) + ": expected the int 0 or 1, found " +
                             (a->kind == Attr::Kind::kInt ? std::to_string(a->i) : "a non-int attribute"));
    spec->residual = a->i == 1;
  }
  if (const Attr* a = attrs.Find(kEpilogueOrderAttr)) {
    const bool known = a->kind == Attr::Kind::kString &&
                       (a->s == kEpilogueOrderActFirst || a->s == kEpilogueOrderResidualFirst);
    if (!known)
      return InvalidArgument(std::string(kEpilogueOrderAttr) + ": expected '" +
                             std::string(kEpilogueOrderActFirst) + "' or '" +
                             std::string(kEpilogueOrderResidualFirst) + "', found " +
                             (a->kind == Attr::Kind::kString ? "'" + a->s + "'" : "a non-string attribute"));
    spec->residual_first = a->s == kEpilogueOrderResidualFirst;
  }
  return Status::Ok();
}

Status ReadEpilogue(const KernelCall& call, std::string_view op, Epilogue* epilogue) {
  *epilogue = Epilogue{};
  Status st = ParseEpilogue(call.attrs, &epilogue->spec);
  if (!st.ok()) return OpError(op, std::string(st.message()));
  const TensorRef& y = call.outputs[0];
  const TensorRef* r = OptionalInput(call, kEpilogueResidualInput);
  if (epilogue->spec.residual && !r)
    return OpError(op, std::string(kEpilogueResidualAttr) + " = 1 but input " +
                           std::to_string(kEpilogueResidualInput) + " (the residual) is absent");
  if (!epilogue->spec.residual && r)
    return OpError(op, "input " + std::to_string(kEpilogueResidualInput) + " " + ShapeStr(*r) +
                           " is present but " + std::string(kEpilogueResidualAttr) + " is not 1");
  if (!epilogue->spec.any()) return Status::Ok();
  if (y.dtype != DType::kFloat32 && y.dtype != DType::kFloat64)
    return OpError(op, "an epilogue needs a float32 or float64 output, found " + DTypeStr(y.dtype));
  if (r) {
    if (r->dtype != y.dtype)
      return OpError(op, "residual dtype " + DTypeStr(r->dtype) + " differs from the output's " +
                             DTypeStr(y.dtype));
    if (r->rank != y.rank || !std::equal(r->dims, r->dims + r->rank, y.dims))
      return OpError(op, "residual " + ShapeStr(*r) + " must have the output's shape " + ShapeStr(y));
    epilogue->residual = r;
  }
  return Status::Ok();
}

void ApplyEpilogue(const Epilogue& epilogue, const TensorRef& y, int64_t begin, int64_t count) {
  if (!epilogue.spec.any() || count <= 0) return;
  VisitFloat(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* r = epilogue.residual ? epilogue.residual->as<const T>() + begin : nullptr;
    Apply<T>(epilogue.spec, y.as<T>() + begin, r, count);
  });
}

}  // namespace kiln::cpu
