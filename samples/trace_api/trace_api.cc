// trace_api: define a small MLP with the C++ tracing API (kiln/trace.h), compile it into a
// CPU artifact, load that artifact with the runtime and run it.
//
//   trace_api [ARTIFACT]     ARTIFACT: where to write the .kiln file (default trace_api.kiln)
//
// The model is probs = Softmax(Relu(x @ W1 + b1) @ W2 + b2) for x: float32[N, 3], with weights
// from host arrays. It prints the recorded import trace, then the outputs for two rows of x.
// Exit status: 0 on success, 1 with the error on stderr.
#include <cstdio>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "kiln/trace.h"

namespace {

// The weights, row-major. W1 is [in, out] = [3, 4], as ONNX MatMul takes it.
const float kW1[] = {1, 0, 0, -1,
                     0, 1, 0, -1,
                     0, 0, 1, -1};
const float kB1[] = {0, 0, 0, 1};
const float kW2[] = {1, 0,
                     0, 1,
                     1, 1,
                     0, -2};
const float kB2[] = {0, 0.5f};

// The model as a function over proxy tensors.
kiln::trace::Tensor Mlp(kiln::trace::Builder& b, const kiln::trace::Tensor& x) {
  using namespace kiln::trace;
  Tensor h = Relu(Linear(x, b.Parameter("fc1.weight", {3, 4}, kW1), b.Parameter("fc1.bias", {4}, kB1), "fc1"), "hidden");
  return Softmax(Linear(h, b.Parameter("fc2.weight", {4, 2}, kW2), b.Parameter("fc2.bias", {2}, kB2), "fc2"), -1,
                 "probs");
}

int Fail(const kiln::Status& st) {
  std::fprintf(stderr, "trace_api: %s\n", st.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "trace_api.kiln";

  kiln::trace::Builder builder("tiny_mlp");
  kiln::trace::Tensor x = builder.Input("x", kiln::DType::kFloat32, {"N", 3});
  builder.Output(Mlp(builder, x));
  std::printf("%s", builder.Print().c_str());

  kiln::trace::CompileOptions options;
  options.archs = std::vector<std::string>{};  // a CPU-only artifact
  if (kiln::Status st = builder.CompileToFile(path, options); !st.ok()) return Fail(st);
  std::printf("wrote %s\n", path.c_str());

  kiln::Result<kiln::Model> model = kiln::Model::Load(path);
  if (!model.ok()) return Fail(model.status());
  kiln::Result<kiln::ExecutionContext> ctx = kiln::ExecutionContext::Create(*model, {});
  if (!ctx.ok()) return Fail(ctx.status());

  const float xs[] = {1, 2, 3,
                      -1, 0, 1};
  const kiln::TensorView input = kiln::TensorView::Host(xs, kiln::DType::kFloat32, {2, 3});
  std::vector<kiln::TensorView> outputs;  // allocated by the context, valid until its next Run
  if (kiln::Status st = ctx->Run({&input, 1}, outputs); !st.ok()) return Fail(st);
  const kiln::TensorView& probs = outputs[0];
  const auto* p = static_cast<const float*>(probs.data);
  for (int64_t row = 0; row < probs.dims[0]; ++row) {
    std::printf("%s[%lld] =", model->outputs()[0].name.c_str(), static_cast<long long>(row));
    for (int64_t col = 0; col < probs.dims[1]; ++col) std::printf(" %.6f", p[row * probs.dims[1] + col]);
    std::printf("\n");
  }
  return 0;
}
