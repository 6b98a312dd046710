// The CPU backend's cost per instruction in ExecutionContext::Run (Google Benchmark).
//
//   build/benchmarks/dispatch_benchmark [--benchmark_min_time=0.5]
//
// BM_Dispatch/instructions:K/profile:P
//     ExecutionContext::Run (CPU backend, CpuOptions::threads 1, ContextOptions::profile = P) of an
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
// BM_Rebind/instructions:K
//     The same chain over float32[N], N a symbol, the second slot at offset 64 * N, called
//     with N = 1 and N = 2 in turn (profile 0): every timed Run binds the entry again
//     (evaluates its exprs, lays out every tensor, rechecks the memory plan, places the
//     arena pointers) before running it. Same counters, both contexts rebinding: the slope
//     is the bind's cost per instruction (one arena tensor each) plus the dispatch.
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

// x float32[N] -> K Identity instructions -> y, N = 1 (fixed) or the symbol N in 1..2.
// Tensor 0 is x; tensor j >= 1, the output of instruction j - 1, lies at arena offset 0
// (j odd) or 64 * N (j even); y is tensor K.
testing::ArtifactSpec ChainSpec(int num_instructions, bool symbolic) {
  using testing::E;
  using testing::T;
  testing::ArtifactSpec a;
  const std::vector<int64_t> dims = {symbolic ? -1 : 1};
  const std::vector<std::string> symbols = {symbolic ? "N" : ""};
  a.inputs = {{"x", DType::kFloat32, dims, symbols}};
  a.outputs = {{"y", DType::kFloat32, dims, symbols}};
  testing::EntrySpec e;
  if (symbolic) e.symbols = {"N"};
  e.checks = {{"x", DType::kFloat32, {symbolic ? testing::Sym(0, 1, 2) : testing::Const(1)}}};
  // Exprs: 0 N (the dim), 1 0 and 3 64 * N (the two offsets), 4 128 * N (arena bytes).
  e.exprs = {symbolic ? E(fb::ExprOp::Var, 0) : E(fb::ExprOp::Const, 1), E(fb::ExprOp::Const, 0),
             E(fb::ExprOp::Const, 64), E(fb::ExprOp::Mul, 0, 2), E(fb::ExprOp::Add, 3, 3)};
  e.tensors = {T("x", DType::kFloat32, {0}, fb::Storage::Input, 0)};
  for (int j = 1; j <= num_instructions; ++j) {
    e.tensors.push_back(T("t" + std::to_string(j), DType::kFloat32, {0}, fb::Storage::Arena, 0, j % 2 ? 1 : 3));
    e.instructions.push_back({"Identity", "identity" + std::to_string(j), {j - 1}, {j}, {}, -1, {}, {}});
  }
  e.inputs = {0};
  e.outputs = {num_instructions};
  e.arena_bytes = 4;
  a.entries = {e};
  return a;
}

alignas(64) float x[2] = {42.0f, 42.0f};

// x as float32[1] and, for BM_Rebind, float32[2].
const std::vector<TensorView> kShapes[2] = {{TensorView::Host(x, DType::kFloat32, {1})},
                                            {TensorView::Host(x, DType::kFloat32, {2})}};

// A CPU context over ChainSpec(num_instructions, symbolic) whose output was checked once, or
// the benchmark skipped.
std::optional<ExecutionContext> MakeContext(benchmark::State& state, int num_instructions, bool profile,
                                            bool symbolic) {
  Result<Model> m = Model::Load(testing::BuildArtifact(ChainSpec(num_instructions, symbolic)));
  if (!m.ok()) {
    state.SkipWithError(m.status().ToString().c_str());
    return std::nullopt;
  }
  ContextOptions options;
  options.device = Device::kCpu;
  options.profile = profile;
  options.cpu.threads = 1;
  Result<ExecutionContext> c = ExecutionContext::Create(*m, options);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return std::nullopt;
  }
  std::vector<TensorView> out;
  Status st = c->Run(kShapes[0], out);
  if (!st.ok() || out.size() != 1 || *static_cast<const float*>(out[0].data) != x[0]) {
    state.SkipWithError(st.ok() ? "the chain's output differs from its input" : st.ToString().c_str());
    return std::nullopt;
  }
  return std::move(*c);
}

double Seconds(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Times Run of the K-instruction chain, each followed by the K = 1 chain; with `rebind`, both
// symbolic and called with the two shapes in turn.
void RunChains(benchmark::State& state, int num_instructions, bool profile, bool rebind) {
  std::optional<ExecutionContext> ctx = MakeContext(state, num_instructions, profile, rebind);
  std::optional<ExecutionContext> one = MakeContext(state, 1, profile, rebind);
  if (!ctx || !one) return;
  std::vector<TensorView> out, out_one;
  double seconds = 0, seconds_one = 0;
  size_t call = 0;
  for (auto _ : state) {
    const std::vector<TensorView>& in = kShapes[rebind ? ++call % 2 : 0];
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

void BM_Dispatch(benchmark::State& state) {
  RunChains(state, static_cast<int>(state.range(0)), state.range(1) != 0, false);
}
BENCHMARK(BM_Dispatch)
    ->ArgNames({"instructions", "profile"})
    ->ArgsProduct({{1, 16, 256}, {0, 1}})
    ->UseManualTime();

void BM_Rebind(benchmark::State& state) { RunChains(state, static_cast<int>(state.range(0)), false, true); }
BENCHMARK(BM_Rebind)->ArgName("instructions")->Arg(16)->Arg(1024)->UseManualTime();

}  // namespace
}  // namespace kiln
