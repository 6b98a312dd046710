// The CPU backend's cost per instruction in ExecutionContext::Run (Google Benchmark).
//
//   build/benchmarks/dispatch_benchmark [--benchmark_min_time=0.5]
//
// BM_Dispatch/instructions:K/profile:P
//     ExecutionContext::Run (CPU backend, cpu_threads 1, ContextOptions::profile = P) of an
//     entry that is a chain of K Identity instructions on one float32 (x -> t1 -> ... -> y),
//     ping-ponging between two arena slots. Identity is the cheapest op the CPU backend
//     dispatches: after its arity, dtype and count checks it moves 4 bytes. Shapes are fixed,
//     so every timed Run is a steady-state call: entry selection (one prologue, one input),
//     no rebinding, the instruction loop, output views.
//     The benchmark's time is the K-instruction Run alone. Each iteration also runs, right after
//     it, the same chain with K = 1 in a second context, timed separately, so both calls see the
//     same machine state:
//     ns_per_instruction: (time(K) - time(1)) / (K - 1), the slope, which excludes Run's fixed
//                         cost (prologue, clock reads, output views); rows with K > 1 only.
//     run_1_ns:           the interleaved K = 1 Run: the fixed cost plus one instruction.
//     With profile = 1 the slope also holds the clock read each instruction adds.
//
// Entry selection per call is measured by prologue_benchmark; Model::Load by load_benchmark.
#include <benchmark/benchmark.h>

#include <chrono>
#include <optional>
#include <vector>

#include "kiln/runtime.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {
namespace {

// x float32[1] -> K Identity instructions -> y. Tensor 0 is x; tensor j >= 1, the output of
// instruction j - 1, lies at arena offset 0 (j odd) or 64 (j even); y is tensor K.
testing::ArtifactSpec ChainSpec(int num_instructions) {
  using testing::E;
  using testing::T;
  testing::ArtifactSpec a;
  a.inputs = {{"x", DType::kFloat32, {1}, {""}}};
  a.outputs = {{"y", DType::kFloat32, {1}, {""}}};
  testing::EntrySpec e;
  e.checks = {{"x", DType::kFloat32, {testing::Const(1)}}};
  // Exprs: 0 1 (the dim), 1 0 and 2 64 (the two offsets), 3 128 (arena bytes).
  e.exprs = {E(fb::ExprOp::Const, 1), E(fb::ExprOp::Const, 0), E(fb::ExprOp::Const, 64),
             E(fb::ExprOp::Const, 128)};
  e.tensors = {T("x", DType::kFloat32, {0}, fb::Storage::Input, 0)};
  for (int j = 1; j <= num_instructions; ++j) {
    e.tensors.push_back(T("t" + std::to_string(j), DType::kFloat32, {0}, fb::Storage::Arena, 0, j % 2 ? 1 : 2));
    e.instructions.push_back({"Identity", "identity" + std::to_string(j), {j - 1}, {j}, {}, -1, {}});
  }
  e.inputs = {0};
  e.outputs = {num_instructions};
  e.arena_bytes = 3;
  a.entries = {e};
  return a;
}

alignas(64) float x = 42.0f;

// A CPU context over ChainSpec(num_instructions) whose output was checked once, or the
// benchmark skipped.
std::optional<ExecutionContext> MakeContext(benchmark::State& state, int num_instructions, bool profile) {
  Result<Model> m = Model::Load(testing::BuildArtifact(ChainSpec(num_instructions)));
  if (!m.ok()) {
    state.SkipWithError(m.status().ToString().c_str());
    return std::nullopt;
  }
  ContextOptions options;
  options.device = Device::kCpu;
  options.profile = profile;
  options.cpu_threads = 1;
  Result<ExecutionContext> c = ExecutionContext::Create(*m, options);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return std::nullopt;
  }
  const std::vector<TensorView> in = {TensorView::Host(&x, DType::kFloat32, {1})};
  std::vector<TensorView> out;
  Status st = c->Run(in, out);
  if (!st.ok() || out.size() != 1 || *static_cast<const float*>(out[0].data) != x) {
    state.SkipWithError(st.ok() ? "the chain's output differs from its input" : st.ToString().c_str());
    return std::nullopt;
  }
  return std::move(*c);
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

void BM_Dispatch(benchmark::State& state) {
  const int num_instructions = static_cast<int>(state.range(0));
  const bool profile = state.range(1) != 0;
  std::optional<ExecutionContext> ctx = MakeContext(state, num_instructions, profile);
  std::optional<ExecutionContext> one = MakeContext(state, 1, profile);
  if (!ctx || !one) return;
  const std::vector<TensorView> in = {TensorView::Host(&x, DType::kFloat32, {1})};
  std::vector<TensorView> out, out_one;
  double seconds = 0, seconds_one = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    Status st = ctx->Run(in, out);
    const auto t1 = std::chrono::steady_clock::now();
    Status st_one = one->Run(in, out_one);
    const auto t2 = std::chrono::steady_clock::now();
    if (!st.ok() || !st_one.ok()) {
      state.SkipWithError((st.ok() ? st_one : st).ToString().c_str());
      break;
    }
    state.SetIterationTime(Seconds(t1 - t0));
    seconds += Seconds(t1 - t0);
    seconds_one += Seconds(t2 - t1);
  }
  const double n = static_cast<double>(state.iterations());
  if (n == 0) return;
  state.counters["run_1_ns"] = seconds_one * 1e9 / n;
  if (num_instructions > 1)
    state.counters["ns_per_instruction"] = (seconds - seconds_one) * 1e9 / n / (num_instructions - 1);
}
BENCHMARK(BM_Dispatch)
    ->ArgNames({"instructions", "profile"})
    ->ArgsProduct({{1, 16, 256}, {0, 1}})
    ->UseManualTime();

}  // namespace
}  // namespace kiln
