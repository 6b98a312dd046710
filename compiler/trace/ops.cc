// The ops of include/kiln/trace.h: each records the ONNX node(s) the importer would produce
// for the same model, inferring shapes as it goes (State::AddNode).
#include <functional>
#include <new>

#include <fmt/format.h>

#include "compiler/trace/state.h"
#include "kiln/trace.h"
#include "runtime/half.h"
#include "runtime/shape_text.h"

namespace kiln::trace {
namespace {

using internal::State;

struct Arg {
  const char* role;
  const Tensor& t;
  bool optional = false;  // an invalid Tensor() means "absent" (kNoValue)
};

// Adds the op's nodes for the argument values `ids` under the unique `name`; returns the
// output, or kNoValue after recording an error (prefixed with `context`).
using Emit = std::function<ir::ValueId(State& s, const std::string& name, const std::vector<ir::ValueId>& ids,
                                       const std::string& context)>;

// Checks the arguments, reserves the output name and runs `emit`. Does nothing when the
// Builder already has an error. `scalar` describes a scalar operand for messages ("" if none).
Tensor Record(const char* op, const char* default_name, const std::string& name, std::initializer_list<Arg> args,
              const Emit& emit, const std::string& scalar = "") {
  std::shared_ptr<State> state;
  for (const Arg& a : args)
    if (State::Of(a.t)) { state = State::Of(a.t); break; }
  if (!state) return Tensor();  // every argument default-constructed: there is no Builder to tell
  try {
    if (!state->error.ok()) return State::Make(state, ir::kNoValue);
    const std::string label = fmt::format("{} '{}'", op, name.empty() ? default_name : name);
    std::vector<ir::ValueId> ids;
    std::string described;
    for (const Arg& a : args) {
      const std::shared_ptr<State>& s = State::Of(a.t);
      if (!s && a.optional) {
        ids.push_back(ir::kNoValue);
        continue;
      }
      if (s && s != state) {
        state->Fail(InvalidArgument(fmt::format("{}: argument '{}' ('{}') belongs to Builder '{}', not '{}'", label,
                                                a.role, a.t.name(), s->model_name, state->model_name)));
        return State::Make(state, ir::kNoValue);
      }
      if (!a.t.valid()) {
        state->Fail(InvalidArgument(fmt::format("{}: argument '{}' is an invalid (default-constructed) Tensor", label,
                                                a.role)));
        return State::Make(state, ir::kNoValue);
      }
      ids.push_back(State::Id(a.t));
      described += fmt::format("{}{}: {}", described.empty() ? "" : ", ", a.role, state->Describe(State::Id(a.t)));
    }
    if (!scalar.empty()) described += (described.empty() ? "" : ", ") + scalar;
    const std::string unique = state->UniqueName(name.empty() ? default_name : name);
    const std::string context = fmt::format("{} '{}' ({})", op, unique, described);
    return State::Make(state, emit(*state, unique, ids, context));
  } catch (const std::bad_alloc&) {
    state->Fail(ResourceExhausted(fmt::format("out of memory recording {} in model '{}'", op, state->model_name)));
    return State::Make(state, ir::kNoValue);
  }
}

// One ONNX node `op` over all present arguments, output named `name`.
Tensor Single(const char* op, const char* default_name, const std::string& name, std::initializer_list<Arg> args,
              AttrMap attrs = {}) {
  return Record(op, default_name, name, args, [&](State& s, const std::string& n, const std::vector<ir::ValueId>& ids,
                                                  const std::string& context) {
    std::vector<ir::ValueId> inputs = ids;
    while (!inputs.empty() && inputs.back() == ir::kNoValue) inputs.pop_back();
    return s.AddNode(op, n, inputs, attrs, context);
  });
}

// A rank-0 constant holding `v` in the float dtype `dtype`, or nullptr for a non-float dtype.
std::shared_ptr<ir::ConstData> FloatScalar(DType dtype, float v) {
  auto cd = std::make_shared<ir::ConstData>();
  cd->dtype = dtype;
  auto append = [&](auto x) {
    const auto* p = reinterpret_cast<const uint8_t*>(&x);
    cd->bytes.assign(p, p + sizeof(x));
  };
  switch (dtype) {
    case DType::kFloat32: append(v); break;
    case DType::kFloat64: append(static_cast<double>(v)); break;
    case DType::kFloat16: append(FloatToHalf(v)); break;
    case DType::kBFloat16: append(FloatToBF16(v)); break;
    default: return nullptr;
  }
  return cd;
}

// Elementwise `op` of a tensor and a scalar; `scalar_first` puts the scalar on the left.
Tensor WithScalar(const char* op, const char* default_name, const Tensor& t, float v, bool scalar_first) {
  const std::string scalar = fmt::format("{}: {}", scalar_first ? "a" : "b", v);
  return Record(op, default_name, "", {Arg{scalar_first ? "b" : "a", t}},
                [&](State& s, const std::string& n, const std::vector<ir::ValueId>& ids, const std::string& context) {
                  const DType dtype = s.trace.value(ids[0]).dtype;
                  auto data = FloatScalar(dtype, v);
                  if (!data) {
                    s.Fail(InvalidArgument(fmt::format("{}: a float scalar operand needs a float tensor, found {}",
                                                       context, DTypeName(dtype))));
                    return ir::kNoValue;
                  }
                  const ir::ValueId c = s.AddConst(s.UniqueName(n + ".scalar"), std::move(data));
                  return s.AddNode(op, n, scalar_first ? std::vector{c, ids[0]} : std::vector{ids[0], c}, {}, context);
                },
                scalar);
}

}  // namespace

Tensor MatMul(const Tensor& a, const Tensor& b, std::string name) {
  return Single("MatMul", "matmul", name, {{"a", a}, {"b", b}});
}

Tensor Linear(const Tensor& x, const Tensor& weight, const Tensor& bias, std::string name) {
  return Record("Linear", "linear", name, {{"x", x}, {"weight", weight}, {"bias", bias, true}},
                [](State& s, const std::string& n, const std::vector<ir::ValueId>& ids, const std::string& context) {
                  if (ids[2] == ir::kNoValue) return s.AddNode("MatMul", n, {ids[0], ids[1]}, {}, context);
                  const ir::ValueId product =
                      s.AddNode("MatMul", s.UniqueName(n + ".matmul"), {ids[0], ids[1]}, {}, context);
                  if (product == ir::kNoValue) return ir::kNoValue;
                  return s.AddNode("Add", n, {product, ids[2]}, {}, context);
                });
}

Tensor Conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Conv2dOptions& options,
              std::string name) {
  return Record("Conv2d", "conv", name, {{"x", x}, {"weight", weight}, {"bias", bias, true}},
                [&](State& s, const std::string& n, const std::vector<ir::ValueId>& ids, const std::string& context) {
                  for (int i : {0, 1})
                    if (s.trace.value(ids[i]).rank() != 4) {
                      s.Fail(InvalidArgument(fmt::format("{}: expected {} of rank 4 ({}), found rank {}", context,
                                                         i == 0 ? "x" : "weight",
                                                         i == 0 ? "N, C, H, W" : "M, C/groups, kH, kW",
                                                         s.trace.value(ids[i]).rank())));
                      return ir::kNoValue;
                    }
                  AttrMap attrs;
                  attrs.SetInts("strides", {options.stride[0], options.stride[1]});
                  attrs.SetInts("pads", {options.padding[0], options.padding[1], options.padding[2], options.padding[3]});
                  attrs.SetInts("dilations", {options.dilation[0], options.dilation[1]});
                  attrs.SetInt("group", options.groups);
                  std::vector<ir::ValueId> inputs = ids;
                  if (inputs[2] == ir::kNoValue) inputs.pop_back();
                  return s.AddNode("Conv", n, inputs, std::move(attrs), context);
                });
}

Tensor Relu(const Tensor& x, std::string name) { return Single("Relu", "relu", name, {{"x", x}}); }
Tensor Sigmoid(const Tensor& x, std::string name) { return Single("Sigmoid", "sigmoid", name, {{"x", x}}); }
Tensor Tanh(const Tensor& x, std::string name) { return Single("Tanh", "tanh", name, {{"x", x}}); }
Tensor Gelu(const Tensor& x, std::string name) { return Single("Gelu", "gelu", name, {{"x", x}}); }

Tensor Softmax(const Tensor& x, int64_t axis, std::string name) {
  AttrMap attrs;
  attrs.SetInt("axis", axis);
  return Single("Softmax", "softmax", name, {{"x", x}}, std::move(attrs));
}

Tensor LayerNorm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t axis, float epsilon,
                 std::string name) {
  AttrMap attrs;
  attrs.SetInt("axis", axis);
  attrs.SetFloat("epsilon", epsilon);
  return Single("LayerNormalization", "layer_norm", name, {{"x", x}, {"scale", scale}, {"bias", bias, true}},
                std::move(attrs));
}

Tensor Reshape(const Tensor& x, std::vector<int64_t> shape, std::string name) {
  return Record("Reshape", "reshape", name, {{"x", x}},
                [&](State& s, const std::string& n, const std::vector<ir::ValueId>& ids, const std::string& context) {
                  auto cd = std::make_shared<ir::ConstData>();
                  cd->dtype = DType::kInt64;
                  cd->dims = {static_cast<int64_t>(shape.size())};
                  const auto* p = reinterpret_cast<const uint8_t*>(shape.data());
                  cd->bytes.assign(p, p + shape.size() * sizeof(int64_t));
                  const ir::ValueId c = s.AddConst(s.UniqueName(n + ".shape"), std::move(cd));
                  return s.AddNode("Reshape", n, {ids[0], c}, {}, context);
                },
                "shape: " + ShapeText(shape));
}

Tensor Transpose(const Tensor& x, std::vector<int64_t> perm, std::string name) {
  AttrMap attrs;
  attrs.SetInts("perm", std::move(perm));
  return Single("Transpose", "transpose", name, {{"x", x}}, std::move(attrs));
}

Tensor Add(const Tensor& a, const Tensor& b, std::string name) { return Single("Add", "add", name, {{"a", a}, {"b", b}}); }
Tensor Sub(const Tensor& a, const Tensor& b, std::string name) { return Single("Sub", "sub", name, {{"a", a}, {"b", b}}); }
Tensor Mul(const Tensor& a, const Tensor& b, std::string name) { return Single("Mul", "mul", name, {{"a", a}, {"b", b}}); }
Tensor Div(const Tensor& a, const Tensor& b, std::string name) { return Single("Div", "div", name, {{"a", a}, {"b", b}}); }

Tensor operator+(const Tensor& a, const Tensor& b) { return Add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return Sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return Mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return Div(a, b); }
Tensor operator+(const Tensor& a, float b) { return WithScalar("Add", "add", a, b, false); }
Tensor operator-(const Tensor& a, float b) { return WithScalar("Sub", "sub", a, b, false); }
Tensor operator*(const Tensor& a, float b) { return WithScalar("Mul", "mul", a, b, false); }
Tensor operator/(const Tensor& a, float b) { return WithScalar("Div", "div", a, b, false); }
Tensor operator+(float a, const Tensor& b) { return WithScalar("Add", "add", b, a, true); }
Tensor operator-(float a, const Tensor& b) { return WithScalar("Sub", "sub", b, a, true); }
Tensor operator*(float a, const Tensor& b) { return WithScalar("Mul", "mul", b, a, true); }
Tensor operator/(float a, const Tensor& b) { return WithScalar("Div", "div", b, a, true); }

}  // namespace kiln::trace
