// The per-call cost of entry selection (Google Benchmark).
//
//   build/benchmarks/prologue_benchmark [--benchmark_min_time=0.2]
//
// BM_Prologue/inputs:I    RunPrologue alone on I float32[N, 3, H, W] inputs that pass. The
//                         first input binds N, H, W; each later one checks them for equality.
//                         ns_per_input: the time per checked input (target: < 20 ns).
// BM_ValuePrologue/inputs:I  RunPrologue alone on I int64 scalar value inputs (value symbols,
//                         bound from each input's element); ns_per_input as above.
// BM_EntryLookup/entries:E  ExecutionContext::Run of tests/runtime/multi_entry_spec_test_util.h
//                         with 4 inputs and E entries, the first E-1 failing on input 0 dim 0
//                         and the last matching; its one instruction is Identity of 12 floats.
//                         lookup_ns and prologue_ns average Stats::last_cache_lookup_time() and
//                         last_prologue_time(); the benchmark's own time is the whole Run.
// BM_Run/inputs:I         The same Run with one entry and I inputs: Run's fixed cost plus
//                         the prologue's share that grows with the inputs.
#include <benchmark/benchmark.h>

#include <optional>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/prologue.h"
#include "tests/runtime/multi_entry_spec_test_util.h"

namespace kiln {
namespace {

alignas(64) float data[3 * 4 * 5];

std::vector<TensorView> Inputs(int num_inputs) {
  return std::vector<TensorView>(num_inputs, TensorView::Host(data, DType::kFloat32, {1, 3, 4, 5}));
}

// Runs `p` on `in` in the benchmark loop; ns_per_input is the time per input.
void TimePrologue(benchmark::State& state, const Prologue& p, const std::vector<TensorView>& in) {
  PrologueScratch scratch;
  scratch.Resize(p);
  PrologueFailure why;
  for (auto _ : state) {
    const bool ok = RunPrologue(p, {}, in, MemoryKind::kHost, scratch, &why);
    benchmark::DoNotOptimize(ok);
    if (!ok) state.SkipWithError("prologue failed");
  }
  state.counters["ns_per_input"] = benchmark::Counter(static_cast<double>(in.size()) * state.iterations(),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Prologue(benchmark::State& state) {
  const int num_inputs = static_cast<int>(state.range(0));
  Prologue p;
  p.symbols = {"N", "H", "W"};
  const PrologueDim n{0, 0, 1, 64}, three{-1, 3}, h{1, 0, 1, 1024, 2}, w{2, 0, 1, INT64_MAX};
  for (int k = 0; k < num_inputs; ++k) p.inputs.push_back({"x" + std::to_string(k), DType::kFloat32, {n, three, h, w}});
  TimePrologue(state, p, Inputs(num_inputs));
}
BENCHMARK(BM_Prologue)->ArgName("inputs")->Arg(1)->Arg(4)->Arg(16);

// RunPrologue alone on I int64 scalar value inputs (as Silero's `sr`): each binds a value
// symbol from its element in host memory. ns_per_input: the time per value input (target: < 20 ns).
void BM_ValuePrologue(benchmark::State& state) {
  const int num_inputs = static_cast<int>(state.range(0));
  Prologue p;
  std::vector<int64_t> values(static_cast<size_t>(num_inputs), 16000);
  std::vector<TensorView> in;
  for (int k = 0; k < num_inputs; ++k) {
    p.symbols.push_back("v" + std::to_string(k));
    PrologueInput input{"v" + std::to_string(k), DType::kInt64, {}};
    input.values = {PrologueDim{k, 0, INT64_MIN, INT64_MAX}};
    p.inputs.push_back(std::move(input));
    in.push_back(TensorView::Host(&values[static_cast<size_t>(k)], DType::kInt64, {}));
  }
  TimePrologue(state, p, in);
}
BENCHMARK(BM_ValuePrologue)->ArgName("inputs")->Arg(1)->Arg(4)->Arg(16);

// A CPU context over MultiEntrySpec(num_inputs, num_entries), or the benchmark skipped.
std::optional<ExecutionContext> MakeContext(benchmark::State& state, int num_inputs, int num_entries) {
  Result<Model> m = Model::Load(testing::BuildArtifact(testing::MultiEntrySpec(num_inputs, num_entries)));
  if (!m.ok()) {
    state.SkipWithError(m.status().ToString().c_str());
    return std::nullopt;
  }
  ContextOptions options;
  options.device = Device::kCpu;
  Result<ExecutionContext> c = ExecutionContext::Create(*m, options);
  if (!c.ok()) {
    state.SkipWithError(c.status().ToString().c_str());
    return std::nullopt;
  }
  return std::move(*c);
}

// Runs the context in a loop; lookup_ns and prologue_ns average the Stats of every call.
void RunLoop(benchmark::State& state, ExecutionContext& ctx, const std::vector<TensorView>& in) {
  std::vector<TensorView> out;
  double lookup_ns = 0, prologue_ns = 0;
  for (auto _ : state) {
    Status st = ctx.Run(in, out);
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      break;
    }
    lookup_ns += static_cast<double>(ctx.stats().last_cache_lookup_time());
    prologue_ns += static_cast<double>(ctx.stats().last_prologue_time());
  }
  state.counters["lookup_ns"] = benchmark::Counter(lookup_ns, benchmark::Counter::kAvgIterations);
  state.counters["prologue_ns"] = benchmark::Counter(prologue_ns, benchmark::Counter::kAvgIterations);
}

void BM_EntryLookup(benchmark::State& state) {
  const int num_entries = static_cast<int>(state.range(0));
  std::optional<ExecutionContext> ctx = MakeContext(state, 4, num_entries);
  if (ctx) RunLoop(state, *ctx, Inputs(4));
}
BENCHMARK(BM_EntryLookup)->ArgName("entries")->Arg(1)->Arg(4)->Arg(16);

void BM_Run(benchmark::State& state) {
  const int num_inputs = static_cast<int>(state.range(0));
  std::optional<ExecutionContext> ctx = MakeContext(state, num_inputs, 1);
  if (ctx) RunLoop(state, *ctx, Inputs(num_inputs));
}
BENCHMARK(BM_Run)->ArgName("inputs")->Arg(1)->Arg(4)->Arg(16);

}  // namespace
}  // namespace kiln
