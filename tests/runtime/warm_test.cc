// The first Run costs what the later ones do: ExecutionContext::Create warms the entries whose
// input shapes are fixed, ExecutionContext::Warm the shapes a caller names (kiln/runtime.h). The
// allocations a Run makes are counted as in run_allocations_test.cc (count_allocations.h): with
// the warm-up done, the first Run allocates nothing on Kiln's CPU kernels, and on oneDNN no more
// than every later Run does (oneDNN's per-call argument maps). On the CPU the warm-up runs the
// entry: a Warm after a Run ends that Run's outputs, as a Run would.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/cpu/onednn/onednn.h"
#include "tests/compiler/compile_util.h"
#include "tests/runtime/count_allocations.h"
#include "tests/runtime/multi_entry_spec_test_util.h"
#include "tests/runtime/threaded_model_test_util.h"

namespace kiln {
namespace {

using testing::CountAllocations;

// The allocations of `calls` Runs of `ctx` on `in`, the outputs into `out`; false in `ok` at a
// failed Run.
long RunAllocations(ExecutionContext& ctx, std::span<const TensorView> in, std::vector<TensorView>& out, int calls,
                    bool& ok) {
  return CountAllocations([&] {
    for (int k = 0; k < calls; ++k) ok = ok && ctx.Run(in, out).ok();
  });
}

TEST_CASE("the first Run after Create of a fixed-shape model allocates no more than a steady-state Run") {
  auto model = Model::Load(testing::CompileModel(testing::ThreadedModel()));
  REQUIRE(model.ok());
  constexpr int64_t c = testing::kThreadedModelChannels, side = testing::kThreadedModelSide;
  const std::vector<float> x = testing::SeededFloats(c * side * side, 3);
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, c, side, side})};
  for (int threads : {1, 2})
    for (bool onednn : {false, true})
      for (bool profile : {false, true}) {
        INFO(threads << " threads, oneDNN " << onednn << ", profile " << profile);
        ContextOptions options;
        options.device = Device::kCpu;
        options.cpu.threads = threads;
        options.cpu.onednn = onednn;
        options.profile = profile;
        auto ctx = ExecutionContext::Create(*model, options);
        REQUIRE(ctx.ok());
        std::vector<TensorView> out;
        out.reserve(model->outputs().size());  // the caller's vector: Run fills it
        bool ok = true;
        const long first = RunAllocations(*ctx, in, out, 1, ok);
        const long steady = RunAllocations(*ctx, in, out, 1, ok);
        CHECK(ok);
        // Kiln's own code: nothing in the first Run. oneDNN's calls allocate their argument maps at
        // every Run; what it allocates once, inside its first execution of a primitive (the
        // sanitizer build showed 46 against 45 before Create's warm-up ran the entry), is done.
        const bool kiln_only = !onednn || !cpu::OneDnnBuilt();
        CHECK_MESSAGE(first == steady,
                      first << " allocations in the first Run, " << steady << " in the second:\n"
                            << testing::CountedAllocationStacks());
        if (kiln_only) CHECK(steady == 0);
        CHECK(ctx->stats().calls == 2);
      }
}

struct SymbolicFixture {
  static constexpr int kInputs = 2;
  static constexpr int kEntries = 3;  // N=2, N=3, then N in 1..64
  SymbolicFixture() {
    Result<Model> m = Model::Load(testing::BuildArtifact(testing::MultiEntrySpec(kInputs, kEntries)));
    REQUIRE_MESSAGE(m.ok(), m.status().ToString());
    model.emplace(std::move(*m));
    ContextOptions options;
    options.device = Device::kCpu;
    Result<ExecutionContext> c = ExecutionContext::Create(*model, options);
    REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    ctx.emplace(std::move(*c));
    out.reserve(1);
  }
  std::vector<TensorView> Inputs(int64_t n, int64_t h, int64_t w, const void* data) const {
    return std::vector<TensorView>(kInputs, TensorView::Host(data, DType::kFloat32, {n, 3, h, w}));
  }
  std::vector<float> data = std::vector<float>(8 * 3 * 8 * 8, 1.0f);
  std::optional<Model> model;
  std::optional<ExecutionContext> ctx;
  std::vector<TensorView> out;
};

TEST_CASE("Warm: the first Run at the shapes it named allocates nothing, and Warm counts no call") {
  SymbolicFixture f;
  SUBCASE("without data: the views' shapes only") { REQUIRE(f.ctx->Warm(f.Inputs(1, 4, 5, nullptr)).ok()); }
  SUBCASE("with the data the Run will read") { REQUIRE(f.ctx->Warm(f.Inputs(1, 4, 5, f.data.data())).ok()); }
  const Stats& st = f.ctx->stats();
  CHECK(st.calls == 0);
  CHECK(st.cache_hits == 0);
  CHECK(st.cache_misses == 0);
  for (const EntryStats& e : st.entries) CHECK(e.hits == 0);
  const std::vector<TensorView> in = f.Inputs(1, 4, 5, f.data.data());
  bool ok = true;
  const long first = RunAllocations(*f.ctx, in, f.out, 1, ok);
  CHECK(ok);
  CHECK_MESSAGE(first == 0, first << " allocations in the first Run after Warm:\n"
                                  << testing::CountedAllocationStacks());
  CHECK(st.calls == 1);
  CHECK(st.last_entry == SymbolicFixture::kEntries - 1);
  REQUIRE(f.out.size() == 1);
  CHECK(static_cast<const float*>(f.out[0].data)[0] == 1.0f);  // y = Identity(x0)
}

TEST_CASE("Warm of two shapes in two entries: the first Run of each allocates nothing") {
  SymbolicFixture f;
  // N = 3 selects entry 1 (N=3), N = 1 the last; the larger shape second, so the arena moves
  // once the first is placed: Warm places it again.
  REQUIRE(f.ctx->Warm(f.Inputs(3, 2, 2, nullptr)).ok());
  REQUIRE(f.ctx->Warm(f.Inputs(1, 8, 8, nullptr)).ok());
  const std::vector<TensorView> small = f.Inputs(3, 2, 2, f.data.data()), large = f.Inputs(1, 8, 8, f.data.data());
  bool ok = true;
  const long first = CountAllocations([&] { ok = f.ctx->Run(large, f.out).ok() && f.ctx->Run(small, f.out).ok(); });
  CHECK(ok);
  CHECK_MESSAGE(first == 0, first << " allocations:\n" << testing::CountedAllocationStacks());
  CHECK(f.ctx->stats().last_entry == 1);
}

TEST_CASE("Warm after a Run ends its outputs: CopyOutputs has nothing to copy, and the next Run's are right") {
  SymbolicFixture f;
  const std::vector<TensorView> ones = f.Inputs(1, 4, 5, f.data.data());
  REQUIRE(f.ctx->Run(ones, f.out).ok());
  std::vector<float> copy(4 * 5 * 3);
  const TensorView into[] = {TensorView::Host(copy.data(), DType::kFloat32, {1, 3, 4, 5})};
  REQUIRE(f.ctx->CopyOutputs(into).ok());
  CHECK(copy[0] == 1.0f);
  // Warm at N = 3 (entry 1) runs that entry on zeros in the context's memory.
  REQUIRE(f.ctx->Warm(f.Inputs(3, 4, 5, nullptr)).ok());
  const Status after = f.ctx->CopyOutputs(into);
  CHECK_MESSAGE(after.code() == StatusCode::kFailedPrecondition, after.ToString());
  CHECK(after.message().find("Warm came after it") != std::string::npos);
  CHECK(f.ctx->stats().calls == 1);
  CHECK(f.ctx->stats().last_entry == SymbolicFixture::kEntries - 1);
  const std::vector<float> twos(8 * 3 * 8 * 8, 2.0f);
  const Status run = f.ctx->Run(f.Inputs(3, 4, 5, twos.data()), f.out);
  REQUIRE_MESSAGE(run.ok(), run.ToString());
  CHECK(f.ctx->stats().last_entry == 1);
  REQUIRE(f.out.size() == 1);
  const float* y = static_cast<const float*>(f.out[0].data);
  CHECK(std::all_of(y, y + 3 * 3 * 4 * 5, [](float v) { return v == 2.0f; }));
}

TEST_CASE("ContextOptions::warm_runs outside 0..100 fails Create with the value and the range") {
  Result<Model> model = Model::Load(testing::BuildArtifact(testing::MultiEntrySpec(2, 3)));
  REQUIRE(model.ok());
  ContextOptions options;
  options.device = Device::kCpu;
  for (int32_t runs : {-1, 101}) {
    options.warm_runs = runs;
    const Result<ExecutionContext> ctx = ExecutionContext::Create(*model, options);
    CHECK(ctx.status().code() == StatusCode::kInvalidArgument);
    CHECK(ctx.status().message() == "warm_runs is " + std::to_string(runs) + ", expected 0 to 100");
  }
  options.warm_runs = 0;
  CHECK(ExecutionContext::Create(*model, options).ok());
}

TEST_CASE("Warm: inputs no entry takes fail as Run's do, counting no miss") {
  SymbolicFixture f;
  const Status st = f.ctx->Warm(f.Inputs(1, 4, 0, nullptr));  // W = 0 is below its minimum of 1
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("entry") != std::string::npos);
  CHECK(f.ctx->stats().cache_misses == 0);
  CHECK(f.ctx->stats().calls == 0);
  CHECK(f.ctx->Warm(std::vector<TensorView>(1, TensorView{})).code() == StatusCode::kInvalidArgument);
  ExecutionContext moved = std::move(*f.ctx);
  CHECK(f.ctx->Warm(f.Inputs(1, 4, 5, nullptr)).code() == StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kiln
