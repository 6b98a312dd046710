// A steady-state ExecutionContext::Run allocates nothing: the global operator new and
// delete are replaced here, for the whole kiln_tests binary, by malloc/free versions that
// report each call to tests/runtime/count_allocations.h, which counts the calls made on any
// thread (the context's CPU workers included) while a CountAllocations window is open.
// Outside a window they only forward to malloc/free. A miss formats its message and may
// allocate; the test counts hits only.
//
// Only allocation through operator new is seen; the runtime's arena uses aligned_alloc
// directly, and only when an entry first sees larger shapes, which warm-up covers.
#include <doctest/doctest.h>

#include <cstdlib>
#include <new>
#include <optional>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/cpu/onednn/onednn.h"
#include "tests/compiler/compile_util.h"
#include "tests/runtime/count_allocations.h"
#include "tests/runtime/multi_entry_spec_test_util.h"
#include "tests/runtime/threaded_model_test_util.h"

namespace {

void* Allocate(std::size_t size, std::size_t align) {
  kiln::testing::NoteAllocation(size);
  if (size == 0) size = 1;
  if (align <= alignof(std::max_align_t)) return std::malloc(size);
  void* p = nullptr;
  return posix_memalign(&p, align, size) == 0 ? p : nullptr;
}

void* AllocateOrThrow(std::size_t size, std::size_t align) {
  void* p = Allocate(size, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return AllocateOrThrow(n, 0); }
void* operator new[](std::size_t n) { return AllocateOrThrow(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return AllocateOrThrow(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return AllocateOrThrow(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return Allocate(n, 0); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return Allocate(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return Allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace kiln {
namespace {

using testing::CountAllocations;

constexpr int kInputs = 4;
constexpr int kEntries = 6;
constexpr int kCalls = 100;

struct Fixture {
  explicit Fixture(ContextOptions options = {}) {
    options.device = Device::kCpu;
    Result<Model> m = Model::Load(testing::BuildArtifact(testing::MultiEntrySpec(kInputs, kEntries)));
    REQUIRE_MESSAGE(m.ok(), m.status().ToString());
    Result<ExecutionContext> c = ExecutionContext::Create(*m, options);
    REQUIRE_MESSAGE(c.ok(), c.status().ToString());
    ctx.emplace(std::move(*c));
  }
  // All kInputs inputs float32[n, 3, h, w] over one buffer.
  std::vector<TensorView> Inputs(int64_t n, int64_t h, int64_t w) {
    return std::vector<TensorView>(kInputs, TensorView::Host(data.data(), DType::kFloat32, {n, 3, h, w}));
  }
  // Runs `calls` times alternating over `inputs`; false at the first failed Run.
  bool RunAll(const std::vector<std::vector<TensorView>>& inputs, int calls) {
    for (int k = 0; k < calls; ++k)
      if (!ctx->Run(inputs[k % inputs.size()], out).ok()) return false;
    return true;
  }
  std::vector<float> data = std::vector<float>(64 * 3 * 8 * 8, 1.0f);
  std::optional<ExecutionContext> ctx;
  std::vector<TensorView> out;
};

TEST_CASE("the allocation counter sees allocations made in its window") {
  std::vector<int> v;
  const long n = CountAllocations([&] { v.reserve(100); });
  CHECK(n == 1);
  CHECK(v.capacity() >= 100);
  const long none = CountAllocations([] {});
  CHECK(none == 0);
}

TEST_CASE("the allocation counter sees allocations inside Run: a miss formats its message") {
  Fixture f;
  const std::vector<TensorView> bad = f.Inputs(1, 4, 0);  // W = 0 is below W's minimum of 1
  REQUIRE(f.RunAll({f.Inputs(1, 4, 5)}, 2));
  bool failed = false;
  const long n = CountAllocations([&] { failed = !f.ctx->Run(bad, f.out).ok(); });
  CHECK(failed);
  CHECK(n > 0);
}

TEST_CASE("a steady-state Run allocates nothing") {
  SUBCASE("the last of several entries, every prologue before it failing") {
    Fixture f;
    const std::vector<std::vector<TensorView>> in = {f.Inputs(1, 4, 5)};
    REQUIRE(f.RunAll(in, 2));  // the first Run binds the entry and sizes the arena
    REQUIRE(f.ctx->stats().last_entry == kEntries - 1);
    bool ok = false;
    const long n = CountAllocations([&] { ok = f.RunAll(in, kCalls); });
    CHECK(n == 0);
    CHECK(ok);
    CHECK(f.ctx->stats().cache_hits == 2 + kCalls);
  }
  SUBCASE("with profiling on") {
    ContextOptions options;
    options.profile = true;
    Fixture f(options);
    const std::vector<std::vector<TensorView>> in = {f.Inputs(1, 4, 5)};
    REQUIRE(f.RunAll(in, 2));
    bool ok = false;
    const long n = CountAllocations([&] { ok = f.RunAll(in, kCalls); });
    CHECK(n == 0);
    CHECK(ok);
    CHECK(f.ctx->stats().last_instruction_ns.size() == 1);
  }
  SUBCASE("alternating between two entries, each already seen") {
    Fixture f;
    // N = 2 hits entry 0, N = 1 the last entry.
    const std::vector<std::vector<TensorView>> in = {f.Inputs(2, 4, 5), f.Inputs(1, 4, 5)};
    REQUIRE(f.RunAll(in, 4));  // each entry binds at its first Run (again if a later one moved the arena)
    bool ok = false;
    const long n = CountAllocations([&] { ok = f.RunAll(in, kCalls); });
    CHECK(n == 0);
    CHECK(ok);
    CHECK(f.ctx->stats().last_entry == kEntries - 1);
  }
  SUBCASE("alternating shapes within one entry, which rebinds on every call") {
    Fixture f;
    const std::vector<std::vector<TensorView>> in = {f.Inputs(1, 8, 8), f.Inputs(1, 2, 7)};
    REQUIRE(f.RunAll(in, 2));
    bool ok = false;
    const long n = CountAllocations([&] { ok = f.RunAll(in, kCalls); });
    CHECK(n == 0);
    CHECK(ok);
    CHECK(f.ctx->stats().last_entry == kEntries - 1);
    CHECK(f.out[0].dims[2] == 2);
  }
}

// testing::ThreadedModel with pooling kernels after it, large enough to split their planes
// over the threads:
//   mp, mi = MaxPool(y, 3x3, strides 2, pads 1)         with Indices
//   ap = AveragePool(mp, 3x3, pads 1, count_include_pad)
//   outputs y, z, mp, mi, ap
onnx::ModelProto PooledThreadedModel() {
  onnx::ModelProto m = testing::ThreadedModel();
  onnx::GraphProto* g = m.mutable_graph();
  onnx::NodeProto* max = testing::AddNode(g, "MaxPool", {"y"}, {"mp", "mi"}, "maxpool");
  testing::AttrInts(max, "kernel_shape", {3, 3});
  testing::AttrInts(max, "strides", {2, 2});
  testing::AttrInts(max, "pads", {1, 1, 1, 1});
  onnx::NodeProto* avg = testing::AddNode(g, "AveragePool", {"mp"}, {"ap"}, "avgpool");
  testing::AttrInts(avg, "kernel_shape", {3, 3});
  testing::AttrInts(avg, "pads", {1, 1, 1, 1});
  testing::AttrInt(avg, "count_include_pad", 1);
  for (const char* out : {"mp", "mi", "ap"}) testing::AddOutput(g, out);
  return m;
}

TEST_CASE("a steady-state Run with convolutions, fused programs and pools allocates nothing on 1-3 CPU threads") {
  auto model = Model::Load(testing::CompileModel(PooledThreadedModel()));
  REQUIRE(model.ok());
  constexpr int64_t c = testing::kThreadedModelChannels, side = testing::kThreadedModelSide;
  const std::vector<float> x = testing::SeededFloats(c * side * side, 3);
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, c, side, side})};
  for (int threads : {1, 2, 3})
    for (bool onednn : {false, true}) {
      INFO(threads << " threads, oneDNN " << onednn);
      ContextOptions options;
      options.device = Device::kCpu;
      options.cpu.threads = threads;
      options.cpu.onednn = onednn;
      auto ctx = ExecutionContext::Create(*model, options);
      REQUIRE(ctx.ok());
      std::vector<TensorView> out;
      REQUIRE(ctx->Run(in, out).ok());  // binds the entry, sizes arena and workspace
      REQUIRE(out.size() == 5);
      bool ok = true;
      const long n = CountAllocations([&] {
        for (int k = 0; k < 10; ++k) ok = ok && ctx->Run(in, out).ok();
      });
      CHECK(ok);
      if (!onednn || !cpu::OneDnnBuilt()) {
        CHECK(n == 0);
        continue;
      }
      // oneDNN allocates inside each of its calls (its map of the call's arguments): the same
      // count at every Run, so nothing accumulates. Kiln's own code allocates nothing, as the
      // runs without oneDNN above show.
      const long again = CountAllocations([&] {
        for (int k = 0; k < 10; ++k) ok = ok && ctx->Run(in, out).ok();
      });
      CHECK(again == n);
      CHECK(n % 10 == 0);
    }
}

// float16 kernels without KernelDef::halves run on float32 copies in the context's
// workspace (runtime/kernels/widen.h), a variadic Sum's operand list included:
//   s = Softmax(x), t = Sigmoid(x), u = Sum(s, t, x), m = ReduceMean(u, axes [1])
// over float16 x [4, 64] of zeros: s = 1/64, t = 1/2, u = m = 33/64, all exact in float16.
TEST_CASE("a steady-state Run of unfused float16 kernels, widened to float32, allocates nothing") {
  onnx::ModelProto proto = testing::MakeModel(18);
  onnx::GraphProto* g = proto.mutable_graph();
  testing::AddInput(g, "x", {"4", "64"}, onnx::TensorProto::FLOAT16);
  testing::AddNode(g, "Softmax", {"x"}, {"s"}, "softmax");
  testing::AddNode(g, "Sigmoid", {"x"}, {"t"}, "sigmoid");
  testing::AddNode(g, "Sum", {"s", "t", "x"}, {"u"}, "sum");
  testing::AddInt64Init(g, "axes", {1}, {1});
  testing::AddNode(g, "ReduceMean", {"u", "axes"}, {"m"}, "mean");
  testing::AddOutput(g, "u");
  testing::AddOutput(g, "m");
  compiler::CompileOptions unfused = testing::CpuOnly();
  unfused.fuse = false;
  auto model = Model::Load(testing::CompileModel(proto, unfused));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  ContextOptions options;
  options.device = Device::kCpu;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  const std::vector<uint16_t> x(4 * 64, 0);  // float16 +0
  const TensorView in[] = {TensorView::Host(const_cast<uint16_t*>(x.data()), DType::kFloat16, {4, 64})};
  std::vector<TensorView> out;
  Status st = ctx->Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  bool ok = true;
  const long n = CountAllocations([&] {
    for (int k = 0; k < 10; ++k) ok = ok && ctx->Run(in, out).ok();
  });
  CHECK(n == 0);
  CHECK(ok);
  REQUIRE(out.size() == 2);
  REQUIRE(out[0].dtype == DType::kFloat16);
  REQUIRE(out[1].dtype == DType::kFloat16);
  const uint16_t k33_64 = 0x3820;  // 33/64 in float16
  for (int i = 0; i < 4 * 64; ++i) REQUIRE(static_cast<const uint16_t*>(out[0].data)[i] == k33_64);
  for (int i = 0; i < 4; ++i) CHECK(static_cast<const uint16_t*>(out[1].data)[i] == k33_64);
}

}  // namespace
}  // namespace kiln
