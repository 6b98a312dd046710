// The tracing API against the ONNX frontend on two models: an MLP (Linear-Relu-Linear-Softmax)
// and a transformer encoder block. tests/compiler/trace/make_trace_models.py (run by
// scripts/test.sh) writes each as an ONNX file, its weights as .npy, a random input and ONNX
// Runtime's output. Here the same model is built with include/kiln/trace.h from those .npy
// weights; both are compiled to CPU artifacts, which must record the same ops and give the
// same outputs, and both must match ONNX Runtime.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>

#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "kiln/trace.h"
#include "tests/compiler/compile_util.h"

namespace {

using namespace kiln::trace;  // NOLINT: the API under test
using kiln::DType;

constexpr int64_t kD = 32, kHeads = 2;

// The model folder, or a failed test: without the data this test would check nothing.
std::string Folder(const std::string& model) {
  const std::string dir = std::string(KILN_TRACE_TEST_DATA_DIR) + "/" + model;
  if (!std::filesystem::is_regular_file(dir + "/model.onnx"))
    FAIL(dir << "/model.onnx is missing: run scripts/test.sh (it runs tests/compiler/trace/make_trace_models.py --out "
             << KILN_TRACE_TEST_DATA_DIR << ")");
  return dir;
}

kiln::io::HostTensor Npy(const std::string& path) {
  auto t = kiln::io::ReadNpyFile(path);
  REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  return std::move(*t);
}

Tensor Mlp(Builder& b, const std::function<Tensor(const std::string&)>& param) {
  auto linear = [&](Tensor x, const std::string& name) {
    return Linear(x, param(name + ".weight"), param(name + ".bias"), name);
  };
  Tensor x = b.Input("x", DType::kFloat32, {"N", 16});
  return Softmax(linear(Relu(linear(x, "fc1"), "relu"), "fc2"), -1, "probs");
}

// [N, T, D] -> [N, heads, T, D/heads] with perm {0, 2, 1, 3}, or its transpose with {0, 2, 3, 1}.
Tensor Heads(const Tensor& x, std::vector<int64_t> perm, const std::string& name) {
  return Transpose(Reshape(x, {0, 0, kHeads, kD / kHeads}, name + ".split"), std::move(perm), name + ".heads");
}

Tensor Encoder(Builder& b, const std::function<Tensor(const std::string&)>& param) {
  auto linear = [&](Tensor x, const std::string& name) {
    return Linear(x, param(name + ".weight"), param(name + ".bias"), name);
  };
  auto norm = [&](Tensor x, const std::string& name) {
    return LayerNorm(x, param(name + ".weight"), param(name + ".bias"), -1, 1e-5f, name);
  };
  Tensor x = b.Input("x", DType::kFloat32, {"N", "T", kD});
  Tensor q = Heads(linear(x, "q"), {0, 2, 1, 3}, "q");
  Tensor k = Heads(linear(x, "k"), {0, 2, 3, 1}, "k");
  Tensor v = Heads(linear(x, "v"), {0, 2, 1, 3}, "v");
  Tensor attention = Softmax(MatMul(q, k, "scores") * 0.25f, -1, "attention");  // 1/sqrt(16)
  Tensor context = MatMul(attention, v, "context");
  context = Reshape(Transpose(context, {0, 2, 1, 3}, "context.merge"), {0, 0, kD}, "context.flat");
  Tensor h1 = norm(Add(x, linear(context, "attn_out"), "residual1"), "norm1");
  Tensor f = linear(Gelu(linear(h1, "ffn1"), "ffn.gelu"), "ffn2");
  return norm(Add(h1, f, "residual2"), "norm2");
}

// The op lines of a printed trace (comments, where constants are listed, left out).
std::vector<std::string> OpLines(const std::string& trace) {
  std::vector<std::string> lines;
  std::istringstream in(trace);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') lines.push_back(line);
  return lines;
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

void CheckTwins(const std::string& model, const std::string& output,
                Tensor (*build)(Builder&, const std::function<Tensor(const std::string&)>&), size_t min_ops,
                float ort_tolerance) {
  const std::string dir = Folder(model);
  Builder b(model);
  b.Output(build(b, [&](const std::string& name) { return b.ParameterFromNpy(name, dir + "/" + name + ".npy"); }));
  REQUIRE_MESSAGE(b.status().ok(), b.status().ToString());
  CompileOptions cpu;
  cpu.archs = std::vector<std::string>{};
  auto api_bytes = b.Compile(cpu);
  REQUIRE_MESSAGE(api_bytes.ok(), api_bytes.status().ToString());
  const std::vector<uint8_t> onnx_bytes = [&] {
    auto r = kiln::compiler::CompileOnnxFile(dir + "/model.onnx", kiln::testing::CpuOnly(), nullptr);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  }();

  // The same ops, names, attributes and shapes from the canonical stage on.
  auto api_model = kiln::Model::Load(*api_bytes);
  auto onnx_model = kiln::Model::Load(onnx_bytes);
  REQUIRE(api_model.ok());
  REQUIRE(onnx_model.ok());
  const std::vector<std::string> api_ops = OpLines(api_model->entries()[0].stage_traces[1]);
  CHECK(api_ops.size() >= min_ops);
  CHECK(api_ops == OpLines(onnx_model->entries()[0].stage_traces[1]));

  const kiln::io::HostTensor x = Npy(dir + "/input_x.npy");
  const kiln::io::HostTensor expected = Npy(dir + "/expected_" + output + ".npy");
  const std::vector<kiln::TensorView> inputs = {x.view()};
  const auto api = kiln::testing::RunFloat(*api_bytes, inputs);
  const auto onnx = kiln::testing::RunFloat(onnx_bytes, inputs);
  const auto* e = reinterpret_cast<const float*>(expected.bytes.data());
  const std::vector<float> ort(e, e + expected.num_elements());
  const float api_vs_onnx = MaxAbsDiff(api[0], onnx[0]);
  const float api_vs_ort = MaxAbsDiff(api[0], ort), onnx_vs_ort = MaxAbsDiff(onnx[0], ort);
  MESSAGE(model << ": max |API - ONNX artifact| = " << api_vs_onnx << ", max |API - onnxruntime| = " << api_vs_ort
                << ", max |ONNX artifact - onnxruntime| = " << onnx_vs_ort);
  CHECK(api_vs_onnx <= 1e-6f);
  CHECK(api_vs_ort <= ort_tolerance);
  CHECK(onnx_vs_ort <= ort_tolerance);
}

}  // namespace

TEST_CASE("trace api: an MLP built with the API and the same ONNX model give the same ops and outputs") {
  CheckTwins("mlp", "probs", Mlp, 7, 1e-6f);
}

TEST_CASE("trace api: a transformer encoder block built with the API matches its ONNX twin and onnxruntime") {
  CheckTwins("encoder", "norm2", Encoder, 30, 1e-5f);
}
