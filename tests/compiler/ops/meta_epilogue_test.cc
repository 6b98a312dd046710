// The meta functions of MatMul, Gemm and Conv on their epilogue-annotated forms
// (compiler/ops/meta_epilogue.h, compiler/passes/epilogue.h).
#include "compiler/ops/meta_epilogue.h"

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"

namespace kiln::ir {
namespace {

ValueId AddInput(Trace& t, const std::string& name, DType dt, SymShape shape) {
  Value v;
  v.name = name;
  v.dtype = dt;
  v.shape = std::move(shape);
  const ValueId id = t.AddValue(std::move(v));
  t.inputs.push_back(id);
  return id;
}

ValueId AddZeros(Trace& t, const std::string& name, DType dt, std::vector<int64_t> dims) {
  auto d = std::make_shared<ConstData>();
  d->dtype = dt;
  d->dims = dims;
  d->bytes.assign(static_cast<size_t>(d->num_elements()) * DTypeSize(dt), 0);
  Value v;
  v.name = name;
  v.dtype = dt;
  for (int64_t x : dims) v.shape.push_back(Sym(x));
  v.data = d;
  return t.AddValue(std::move(v));
}

// Infers `op` over `inputs` with `attrs`; on success *out_shape is the output's shape.
Status Infer(Trace& t, const std::string& op, std::vector<ValueId> inputs, const AttrMap& attrs,
             std::string* out_shape = nullptr) {
  Node n;
  n.op = op;
  n.name = "n";
  n.inputs = std::move(inputs);
  n.attrs = attrs;
  Value y;
  y.name = "y";
  n.outputs.push_back(t.AddValue(std::move(y)));
  Status st = InferNode(t, n);
  if (st.ok() && out_shape) *out_shape = ShapeToString(t.value(n.outputs[0]).shape);
  return st;
}

AttrMap Epilogue(const std::string& act, bool residual, const std::string& order = "bias,act,residual") {
  AttrMap a;
  if (!act.empty()) a.SetString("epilogue_activation", act);
  if (residual) a.SetInt("epilogue_residual", 1);
  a.SetString("epilogue_order", order);
  return a;
}

bool Has(const Status& st, const std::string& text) {
  INFO(st.ToString());
  return !st.ok() && st.message().find(text) != std::string::npos;
}

TEST_CASE("meta: annotated MatMul takes a bias along the columns and a residual of the output's shape") {
  Trace t;
  const ValueId a = AddInput(t, "A", DType::kFloat32, {Sym::Var("N"), 3});
  const ValueId b = AddZeros(t, "B", DType::kFloat32, {3, 4});
  const ValueId bias = AddZeros(t, "bias", DType::kFloat32, {4});
  const ValueId r = AddInput(t, "r", DType::kFloat32, {Sym::Var("N"), 4});
  std::string shape;
  Status st = Infer(t, "MatMul", {a, b, bias, r}, Epilogue("SiLU", true, "bias,residual,act"), &shape);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(shape == "[N, 4]");
  CHECK(Infer(t, "MatMul", {a, b, bias}, Epilogue("Relu", false)).ok());
  CHECK(Infer(t, "MatMul", {a, b, kNoValue, r}, Epilogue("", true)).ok());

  const ValueId r_other = AddInput(t, "q", DType::kFloat32, {Sym::Var("M"), 4});
  const ValueId r_bcast = AddInput(t, "s", DType::kFloat32, {1, 4});
  const ValueId r_int = AddInput(t, "i", DType::kInt64, {Sym::Var("N"), 4});
  const ValueId bias5 = AddZeros(t, "bias5", DType::kFloat32, {5});
  const ValueId b_vec = AddZeros(t, "bv", DType::kFloat32, {3});
  CHECK(Has(Infer(t, "MatMul", {a, b, bias, r_other}, Epilogue("", true)),
            "residual: expected exactly the output's shape [N, 4], found [M, 4]"));
  CHECK(Has(Infer(t, "MatMul", {a, b, bias, r_bcast}, Epilogue("", true)), "found [1, 4]"));
  CHECK(Has(Infer(t, "MatMul", {a, b, bias, r_int}, Epilogue("", true)), "residual: expected dtype float32"));
  CHECK(Has(Infer(t, "MatMul", {a, b, bias}, Epilogue("", true)),
            "expected input 3 (the residual), found none"));
  CHECK(Has(Infer(t, "MatMul", {a, b, bias, r}, Epilogue("Relu", false)), "expected no residual"));
  CHECK(Has(Infer(t, "MatMul", {a, b, bias5}, {}), "input bias dim 0 (output columns): expected 4, found 5"));
  CHECK(Has(Infer(t, "MatMul", {a, b_vec, bias}, {}), "expected B of rank >= 2"));
  CHECK(Has(Infer(t, "MatMul", {a, b, bias, r, r}, Epilogue("", true)), "expected at most 4 inputs"));
  CHECK(Has(Infer(t, "MatMul", {a, b}, Epilogue("Tanh", false)), "epilogue_activation: expected one of"));
  CHECK(Has(Infer(t, "MatMul", {a, b}, Epilogue("Relu", false, "act,bias")), "epilogue_order"));

  const ValueId ai = AddInput(t, "Ai", DType::kInt64, {2, 3});
  const ValueId bi = AddZeros(t, "Bi", DType::kInt64, {3, 4});
  CHECK(Has(Infer(t, "MatMul", {ai, bi}, Epilogue("Relu", false)),
            "epilogue: expected a float32, float64, float16 or bfloat16 output, found int64"));
  CHECK(Infer(t, "MatMul", {ai, bi}, {}).ok());  // the plain integer MatMul is untouched
}

TEST_CASE("meta: annotated Gemm and Conv") {
  Trace t;
  const ValueId a = AddInput(t, "A", DType::kFloat32, {2, 3});
  const ValueId b = AddZeros(t, "B", DType::kFloat32, {4, 3});
  const ValueId c = AddZeros(t, "C", DType::kFloat32, {4});
  const ValueId r = AddInput(t, "r", DType::kFloat32, {2, 4});
  AttrMap gemm = Epilogue("GeluTanh", true);
  gemm.SetInt("transB", 1);
  std::string shape;
  Status st = Infer(t, "Gemm", {a, b, c, r}, gemm, &shape);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(shape == "[2, 4]");
  const ValueId r_t = AddInput(t, "rt", DType::kFloat32, {4, 2});
  CHECK(Has(Infer(t, "Gemm", {a, b, c, r_t}, gemm), "found [4, 2]"));

  const ValueId x = AddInput(t, "X", DType::kFloat32, {1, 2, 5, 5});
  const ValueId w = AddZeros(t, "W", DType::kFloat32, {3, 2, 3, 3});
  const ValueId bias = AddZeros(t, "b", DType::kFloat32, {3});
  const ValueId res = AddInput(t, "res", DType::kFloat32, {1, 3, 3, 3});
  CHECK(Infer(t, "Conv", {x, w, bias, res}, Epilogue("HardSwish", true), &shape).ok());
  CHECK(shape == "[1, 3, 3, 3]");
  CHECK(Infer(t, "Conv", {x, w, kNoValue, res}, Epilogue("Sigmoid", true, "bias,residual,act")).ok());
  const ValueId res_bad = AddInput(t, "res_bad", DType::kFloat32, {1, 3, 5, 5});
  CHECK(Has(Infer(t, "Conv", {x, w, bias, res_bad}, Epilogue("", true)), "found [1, 3, 5, 5]"));
  AttrMap bad_residual;
  bad_residual.SetInt("epilogue_residual", 2);
  CHECK(Has(Infer(t, "Conv", {x, w, bias}, bad_residual),
            "epilogue_residual: expected the int 0 or 1, found 2"));
}

}  // namespace
}  // namespace kiln::ir
