// Many contexts on one Model, each on its own thread, give the results one context gives
// alone: the Model (weights, programs, kernel modules) is shared and immutable, and each
// context owns its arena, scratch and stats. Runs on the CPU backend everywhere and, as a
// [gpu] test, on the CUDA backend where there is a device.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <thread>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"

using namespace kiln::testing;  // NOLINT

namespace {

// y = LayerNorm(Relu(x) * w + x) over rows of 16, x: float32[N, 16]: fused reduction,
// broadcast weight and symbolic rows.
onnx::ModelProto Model16() {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "16"});
  std::vector<float> w(16), gamma(16, 1.5f), beta(16, 0.25f);
  for (int i = 0; i < 16; ++i) w[i] = 0.1f * static_cast<float>(i) - 0.7f;
  AddFloatInit(g, "w", {16}, w);
  AddFloatInit(g, "gamma", {16}, gamma);
  AddFloatInit(g, "beta", {16}, beta);
  AddNode(g, "Relu", {"x"}, {"r"});
  AddNode(g, "Mul", {"r", "w"}, {"m"});
  AddNode(g, "Add", {"m", "x"}, {"h"});
  AddNode(g, "LayerNormalization", {"h", "gamma", "beta"}, {"y"});
  AddOutput(g, "y");
  return m;
}

std::vector<float> Input(int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(static_cast<size_t>(rows) * 16);
  for (float& x : v) x = d(rng);
  return v;
}

// Runs `threads` contexts, each `calls` times over inputs of varying rows, and checks each
// result against one context's.
void CheckConcurrent(kiln::Device device, int threads, int calls) {
  auto model = kiln::Model::Load(CompileModel(Model16(), OptionsFor(device)));
  REQUIRE(model.ok());
  auto run = [&](kiln::ExecutionContext& ctx, const std::vector<float>& x, int64_t rows,
                 std::vector<float>& y) -> kiln::Status {
    kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {rows, 16})};
    y.assign(x.size(), 0.0f);
    std::vector<kiln::TensorView> out = {kiln::TensorView::Host(y.data(), kiln::DType::kFloat32, {rows, 16})};
    KILN_RETURN_IF_ERROR(ctx.Run(in, out));
    return ctx.Synchronize();
  };
  // Reference: one context, every (seed, rows) the threads will use.
  auto solo = kiln::ExecutionContext::Create(*model, {device});
  REQUIRE(solo.ok());
  std::vector<std::vector<float>> want(static_cast<size_t>(threads * calls));
  for (int t = 0; t < threads; ++t)
    for (int c = 0; c < calls; ++c) {
      const int64_t rows = 1 + (t + c) % 7;
      REQUIRE(run(*solo, Input(rows, t * 1000 + c), rows, want[t * calls + c]).ok());
    }
  std::vector<int> mismatches(threads, 0), errors(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto ctx = kiln::ExecutionContext::Create(*model, {device});
      if (!ctx.ok()) {
        ++errors[t];
        return;
      }
      std::vector<float> y;
      for (int c = 0; c < calls; ++c) {
        const int64_t rows = 1 + (t + c) % 7;
        if (!run(*ctx, Input(rows, t * 1000 + c), rows, y).ok()) {
          ++errors[t];
          continue;
        }
        if (y != want[t * calls + c]) ++mismatches[t];  // same code, same inputs: bit-identical
      }
      if (ctx->stats().calls != static_cast<uint64_t>(calls)) ++errors[t];
    });
  for (std::thread& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    CHECK_MESSAGE(errors[t] == 0, "thread " << t);
    CHECK_MESSAGE(mismatches[t] == 0, "thread " << t);
  }
}

}  // namespace

TEST_CASE("contexts on one Model run concurrently, one per thread, with the single-context results") {
  CheckConcurrent(kiln::Device::kCpu, 4, 25);
}

TEST_CASE("[gpu] CUDA contexts on one Model run concurrently with the single-context results") {
  KILN_REQUIRE_GPU();
  CheckConcurrent(kiln::Device::kCuda, 4, 25);
}
