// Helpers for the lowering tests (tests/compiler/fusion/lower_*_test.cc): a one-node trace
// built in C++ with its shapes inferred by the op's meta function, a LowerContext in which
// every input of the node is a region input (a one-element float32 constant is folded into the
// program, as the fusion stage folds it), and runners that evaluate the lowered program
// with the CPU interpreter (cpu::RunFused) and the op's CPU reference kernel on the same
// tensors, so a test compares the two.
//
//   NodeTrace nt;
//   ir::ValueId x = nt.Input("x", DType::kFloat32, {2, ir::Sym::Var("N")});
//   REQUIRE(nt.AddNode("Transpose", "t", {x}).ok());
//   Bindings bind = {{"N", 5}};
//   auto inputs = nt.MakeInputs(bind, /*seed=*/1);
//   auto lowered = LowerOutput(nt.trace(), nt.node(), 0, FindRuleFn("Transpose"));
//   auto fused = RunLowered(*lowered, nt.trace(), nt.node(), 0, inputs, bind);
//   auto ref = RunReference(nt.trace(), nt.node(), inputs, bind);
//   CheckSameBytes(*fused, (*ref)[0]);
#pragma once

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "compiler/fusion/lower.h"
#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"
#include "runtime/fused/interpreter.h"
#include "runtime/fused/program.h"
#include "runtime/half.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::fusion::testing {

using Bindings = std::vector<std::pair<std::string, int64_t>>;
using cpu::testing::TestTensor;

// The concrete dims of a symbolic shape under `bind` (every symbol must be bound).
inline std::vector<int64_t> Concrete(const ir::SymShape& shape, const Bindings& bind) {
  std::vector<int64_t> dims;
  for (const ir::Sym& d : shape) {
    auto v = d.Eval(bind);
    REQUIRE_MESSAGE(v.has_value(), "unbound dim " << d.ToString());
    dims.push_back(*v);
  }
  return dims;
}

// A trace holding one node under test and the values it reads.
class NodeTrace {
 public:
  // A runtime input.
  ir::ValueId Input(const std::string& name, DType dtype, ir::SymShape shape) {
    ir::Value v;
    v.name = name;
    v.dtype = dtype;
    v.shape = std::move(shape);
    const ir::ValueId id = trace_.AddValue(std::move(v));
    trace_.inputs.push_back(id);
    return id;
  }
  // A constant with the given dims and elements (converted to `dtype`).
  template <typename T>
  ir::ValueId Const(const std::string& name, DType dtype, std::vector<int64_t> dims,
                    const std::vector<T>& values) {
    auto data = std::make_shared<ir::ConstData>();
    data->dtype = dtype;
    data->dims = dims;
    const size_t es = DTypeSize(dtype);
    data->bytes.resize(values.size() * es);
    for (size_t i = 0; i < values.size(); ++i) Store(dtype, values[i], data->bytes.data() + i * es);
    ir::Value v;
    v.name = name;
    v.dtype = dtype;
    for (int64_t d : dims) v.shape.push_back(d);
    v.data = std::move(data);
    return trace_.AddValue(std::move(v));
  }
  ir::ValueId Ints(const std::string& name, const std::vector<int64_t>& values) {
    return Const(name, DType::kInt64, {static_cast<int64_t>(values.size())}, values);
  }
  ir::ValueId Floats(const std::string& name, const std::vector<float>& values) {
    return Const(name, DType::kFloat32, {static_cast<int64_t>(values.size())}, values);
  }
  // A 1-D int64 runtime value whose elements the compiler knows as Syms (shape arithmetic).
  ir::ValueId SymInts(const std::string& name, std::vector<ir::Sym> elems) {
    ir::Value v;
    v.name = name;
    v.dtype = DType::kInt64;
    v.shape = {ir::Sym(static_cast<int64_t>(elems.size()))};
    v.sym = std::move(elems);
    const ir::ValueId id = trace_.AddValue(std::move(v));
    trace_.inputs.push_back(id);
    return id;
  }

  // Appends the node with `num_outputs` fresh outputs and infers their dtypes and shapes.
  Status AddNode(const std::string& op, const std::string& name, std::vector<ir::ValueId> inputs,
                 const AttrMap& attrs = {}, int num_outputs = 1) {
    ir::Node n;
    n.op = op;
    n.name = name;
    n.inputs = std::move(inputs);
    n.attrs = attrs;
    for (int k = 0; k < num_outputs; ++k) {
      ir::Value out;
      out.name = name + "_out" + std::to_string(k);
      n.outputs.push_back(trace_.AddValue(std::move(out)));
    }
    trace_.body.nodes.push_back(std::move(n));
    return ir::InferNode(trace_, trace_.body.nodes.back());
  }

  const ir::Trace& trace() const { return trace_; }
  const ir::Node& node() const { return trace_.body.nodes.back(); }
  const ir::Value& value(ir::ValueId v) const { return trace_.value(v); }

  // A tensor for every input of the node: constants from their data, Sym elements
  // evaluated under `bind`, runtime inputs random (floats in [-4, 4), integers in
  // [-50, 50], bools 0/1). Tests overwrite the entries they need to control.
  std::map<ir::ValueId, TestTensor> MakeInputs(const Bindings& bind, uint32_t seed) const {
    std::mt19937 rng(seed);
    std::map<ir::ValueId, TestTensor> out;
    for (ir::ValueId id : node().inputs) {
      if (id == ir::kNoValue || out.count(id)) continue;
      const ir::Value& v = trace_.value(id);
      TestTensor t(v.dtype, Concrete(v.shape, bind), DTypeSize(v.dtype));
      const size_t n = static_cast<size_t>(t.ref().num_elements);
      const size_t es = DTypeSize(v.dtype);
      uint8_t* p = t.data<uint8_t>();
      for (size_t i = 0; i < n; ++i) {
        // Integers from constants and Syms are stored as int64, exactly (INT64_MAX, a Slice's
        // "to the end", has no double that converts back).
        if (v.data && !IsFloat(v.dtype)) {
          Store(v.dtype, v.data->IntAt(i), p + i * es);
          continue;
        }
        if (v.sym) {
          auto e = (*v.sym)[i].Eval(bind);
          REQUIRE(e.has_value());
          Store(v.dtype, *e, p + i * es);
          continue;
        }
        double x;
        if (v.data) {
          x = v.data->FloatAt(static_cast<int64_t>(i));
        } else if (IsFloat(v.dtype)) {
          x = std::uniform_real_distribution<double>(-4.0, 4.0)(rng);
        } else if (v.dtype == DType::kBool) {
          x = static_cast<double>(rng() & 1u);
        } else {
          x = static_cast<double>(std::uniform_int_distribution<int>(-50, 50)(rng));
          if (v.dtype == DType::kUInt8 || v.dtype == DType::kUInt16 || v.dtype == DType::kUInt32 ||
              v.dtype == DType::kUInt64)
            x = std::abs(x);
        }
        Store(v.dtype, x, p + i * es);
      }
      out.emplace(id, std::move(t));
    }
    return out;
  }

  static bool IsFloat(DType t) {
    return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
  }
  // Writes x (a double or an int64) converted to `dtype` at p.
  template <typename T>
  static void Store(DType dtype, T x, uint8_t* p) {
    auto put = [p](auto v) { std::memcpy(p, &v, sizeof(v)); };
    switch (dtype) {
      case DType::kFloat32:
        put(static_cast<float>(x));
        break;
      case DType::kFloat64:
        put(static_cast<double>(x));
        break;
      case DType::kFloat16:
        put(FloatToHalf(static_cast<float>(x)));
        break;
      case DType::kBFloat16:
        put(static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(x)) >> 16));
        break;
      case DType::kInt64:
        put(static_cast<int64_t>(x));
        break;
      case DType::kInt32:
        put(static_cast<int32_t>(x));
        break;
      case DType::kInt16:
        put(static_cast<int16_t>(x));
        break;
      case DType::kInt8:
        put(static_cast<int8_t>(x));
        break;
      case DType::kUInt64:
        put(static_cast<uint64_t>(x));
        break;
      case DType::kUInt32:
        put(static_cast<uint32_t>(x));
        break;
      case DType::kUInt16:
        put(static_cast<uint16_t>(x));
        break;
      case DType::kUInt8:
        put(static_cast<uint8_t>(x));
        break;
      case DType::kBool:
        put(static_cast<uint8_t>(x != 0));
        break;
      default:
        FAIL("unsupported dtype in test");
        break;
    }
  }

 private:
  ir::Trace trace_;
};

// A LowerContext in which every value the node reads is a region input: ValueAt loads it
// at the raveled coordinates. Inputs are registered on first use, so values the lowering
// never reads (Slice's starts, Pad's pads) do not become program inputs.
class TestLowerContext : public LowerContext {
 public:
  TestLowerContext(const ir::Trace& trace, fused::Program* program) : trace_(trace), b_(program) {}

  ProgramBuilder& builder() override { return b_; }
  const ir::Trace& trace() const override { return trace_; }
  Result<int32_t> ValueAt(ir::ValueId v, std::span<const int32_t> coords) override {
    if (v < 0 || static_cast<size_t>(v) >= trace_.values.size()) {
      return Internal("ValueAt: value " + std::to_string(v) + " is not in the trace");
    }
    const ir::Value& value = trace_.value(v);
    if (static_cast<int>(coords.size()) != value.rank()) {
      return Internal("ValueAt: " + std::to_string(coords.size()) + " coordinates for '" + value.name +
                      "' of rank " + std::to_string(value.rank()));
    }
    if (value.is_const() && value.data->num_elements() == 1 && value.dtype == DType::kFloat32)
      return b_.ConstF(value.data->FloatAt(0), fused::ScalarType::kF32);  // folded, as fusion.cc's context does
    int slot = -1;
    for (size_t k = 0; k < inputs_.size(); ++k)
      if (inputs_[k] == v) slot = static_cast<int>(k);
    if (slot < 0) {
      slot = b_.AddInput(value.dtype, value.shape);
      inputs_.push_back(v);
    }
    return b_.Load(slot, b_.Ravel(coords, value.shape));
  }
  std::vector<int32_t> DomainCoords() override {
    std::vector<int32_t> c;
    for (size_t k = 0; k < b_.program().domain.size(); ++k) c.push_back(b_.Coord(static_cast<int>(k)));
    return c;
  }

  // The values behind the program's inputs, in input order.
  const std::vector<ir::ValueId>& region_inputs() const { return inputs_; }

 private:
  const ir::Trace& trace_;
  ProgramBuilder b_;
  std::vector<ir::ValueId> inputs_;
};

struct Lowered {
  fused::Program program;
  std::vector<ir::Sym> sizes;              // the size arguments' values, symbolically
  std::vector<ir::ValueId> region_inputs;  // the program's inputs
};

// Lowers output `output` of `node` into a program whose domain is that output's shape,
// storing the value at every element (a full output at the kCoord coordinates), and
// checks the program with fused::Validate.
inline Result<Lowered> LowerOutput(const ir::Trace& trace, const ir::Node& node, int output, LowerFn fn) {
  Lowered l;
  TestLowerContext ctx(trace, &l.program);
  ProgramBuilder& b = ctx.builder();
  const ir::Value& out = trace.value(node.outputs[output]);
  b.SetDomain(out.shape, 0);
  std::vector<int32_t> coords;
  for (int k = 0; k < out.rank(); ++k) coords.push_back(b.Coord(k));
  KILN_ASSIGN_OR_RETURN(int32_t value, fn(ctx, node, output, coords));
  b.AddOutput(out.dtype, out.shape, value, /*per_row=*/false);
  KILN_RETURN_IF_ERROR(fused::Validate(l.program));
  l.sizes = b.sizes();
  l.region_inputs = ctx.region_inputs();
  return l;
}

// Runs a lowered program on `tensors` (by value id); returns output 0 of the program,
// shaped like output `output` of the node.
inline Result<TestTensor> RunLowered(const Lowered& l, const ir::Trace& trace, const ir::Node& node,
                                     int output, const std::map<ir::ValueId, TestTensor>& tensors,
                                     const Bindings& bind) {
  std::vector<cpu::TensorRef> in;
  for (ir::ValueId v : l.region_inputs) {
    auto it = tensors.find(v);
    REQUIRE_MESSAGE(it != tensors.end(), "no tensor for value " << trace.value(v).name);
    in.push_back(it->second.ref());
  }
  std::vector<int64_t> sizes;
  for (const ir::Sym& s : l.sizes) {
    auto v = s.Eval(bind);
    REQUIRE_MESSAGE(v.has_value(), "unbound size argument " << s.ToString());
    sizes.push_back(*v);
  }
  const ir::Value& out = trace.value(node.outputs[output]);
  TestTensor y(out.dtype, Concrete(out.shape, bind), DTypeSize(out.dtype));
  const cpu::TensorRef outs[] = {y.ref()};
  std::vector<uint8_t> ws(cpu::FusedWorkspaceBytes(l.program) + 1);
  KILN_RETURN_IF_ERROR(cpu::RunFused(l.program, in, outs, sizes, ws.data(), ws.size()));
  return y;
}

// Runs the node's CPU reference kernel on `tensors`; returns every output (absent ones
// as absent tensors).
inline Result<std::vector<TestTensor>> RunReference(const ir::Trace& trace, const ir::Node& node,
                                                    const std::map<ir::ValueId, TestTensor>& tensors,
                                                    const Bindings& bind) {
  std::vector<TestTensor> outs;
  for (ir::ValueId o : node.outputs) {
    if (o == ir::kNoValue) {
      outs.emplace_back();
      continue;
    }
    const ir::Value& v = trace.value(o);
    outs.emplace_back(v.dtype, Concrete(v.shape, bind), DTypeSize(v.dtype));
  }
  std::vector<const TestTensor*> in_ptrs, out_ptrs;
  const TestTensor absent;
  for (ir::ValueId v : node.inputs) {
    if (v == ir::kNoValue) {
      in_ptrs.push_back(&absent);
      continue;
    }
    auto it = tensors.find(v);
    REQUIRE_MESSAGE(it != tensors.end(), "no tensor for value " << trace.value(v).name);
    in_ptrs.push_back(&it->second);
  }
  for (const TestTensor& t : outs) out_ptrs.push_back(&t);
  KILN_RETURN_IF_ERROR(cpu::testing::RunKernel(node.op, node.attrs, in_ptrs, out_ptrs));
  return outs;
}

// The bytes of a tensor's elements.
inline std::vector<uint8_t> Bytes(const TestTensor& t) {
  const cpu::TensorRef r = t.ref();
  const uint8_t* p = static_cast<const uint8_t*>(r.data);
  return std::vector<uint8_t>(p, p + r.num_elements * static_cast<int64_t>(DTypeSize(r.dtype)));
}

// Element i of a tensor as a double, for messages.
inline double ElementAt(const TestTensor& t, int64_t i) {
  const cpu::TensorRef r = t.ref();
  const uint8_t* p = static_cast<const uint8_t*>(r.data) + i * static_cast<int64_t>(DTypeSize(r.dtype));
  auto get = [p](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (r.dtype) {
    case DType::kFloat32:
      return get(float{});
    case DType::kFloat64:
      return get(double{});
    case DType::kFloat16:
      return HalfToFloat(get(uint16_t{}));
    case DType::kInt64:
      return static_cast<double>(get(int64_t{}));
    case DType::kInt32:
      return get(int32_t{});
    case DType::kInt8:
      return get(int8_t{});
    case DType::kUInt8:
    case DType::kBool:
      return get(uint8_t{});
    default:
      return std::nan("");
  }
}

// Byte-for-byte equality of two tensors, reporting the first differing element.
inline void CheckSameBytes(const TestTensor& actual, const TestTensor& expected) {
  REQUIRE(actual.dims() == expected.dims());
  const std::vector<uint8_t> a = Bytes(actual), e = Bytes(expected);
  REQUIRE(a.size() == e.size());
  const size_t esize = DTypeSize(actual.ref().dtype);
  for (size_t i = 0; i < a.size(); i += esize) {
    if (std::memcmp(a.data() + i, e.data() + i, esize) != 0) {
      const int64_t k = static_cast<int64_t>(i / esize);
      FAIL_CHECK("element " << k << " differs: fused " << ElementAt(actual, k) << ", reference "
                            << ElementAt(expected, k));
      return;
    }
  }
}

// Lowers output `output` of the trace's last node with `fn`, runs it and the reference
// kernel on the same inputs, and requires identical bytes. Returns the lowered program
// for further checks.
inline Lowered CheckAgainstReference(const NodeTrace& nt, LowerFn fn,
                                     const std::map<ir::ValueId, TestTensor>& tensors,
                                     const Bindings& bind = {}, int output = 0) {
  auto lowered = LowerOutput(nt.trace(), nt.node(), output, fn);
  REQUIRE_MESSAGE(lowered.ok(), lowered.status().ToString());
  auto ref = RunReference(nt.trace(), nt.node(), tensors, bind);
  REQUIRE_MESSAGE(ref.ok(), ref.status().ToString());
  auto fused = RunLowered(*lowered, nt.trace(), nt.node(), output, tensors, bind);
  REQUIRE_MESSAGE(fused.ok(), fused.status().ToString() << "\n" << fused::Print(lowered->program));
  INFO("program:\n" << fused::Print(lowered->program));
  CheckSameBytes(*fused, (*ref)[output]);
  return std::move(*lowered);
}

}  // namespace kiln::fusion::testing
