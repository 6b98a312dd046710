// CpuOptions::onednn through the public API: the device note, the outputs against Kiln's
// own kernels (and the same bits at 1, 2 and 3 threads), float16 and bfloat16 models, and
// Stats::last_fallbacks for the Convs oneDNN does not take (an empty batch's), which name
// the instruction and the reason.
// testing::ThreadedModel has a depthwise 3x3 Conv and a 3x3 Conv with a residual and a Relu
// folded into its epilogue; a pointwise Conv is added, which Kiln's kernel keeps (no fallback).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/cpu/onednn/onednn.h"
#include "runtime/kernels/gemm.h"
#include "tests/compiler/compile_util.h"
#include "tests/runtime/cpu_note.h"
#include "tests/runtime/threaded_model_test_util.h"

namespace kiln {
namespace {

onnx::ModelProto ModelWithPointwise() {
  onnx::ModelProto m = testing::ThreadedModel();
  onnx::GraphProto* g = m.mutable_graph();
  constexpr int64_t c = testing::kThreadedModelChannels;
  testing::AddFloatInit(g, "wp", {4, c, 1, 1}, testing::SeededFloats(4 * c, 7));
  testing::AddNode(g, "Conv", {"y", "wp"}, {"p"}, "pointwise");
  testing::AddOutput(g, "p");
  return m;
}

struct Ran {
  std::vector<std::vector<float>> outputs;
  std::string note;
  std::vector<Stats::Fallback> fallbacks;
  EntryInfo entry;
};

Ran RunWith(const Model& model, bool onednn, int threads) {
  constexpr int64_t c = testing::kThreadedModelChannels, side = testing::kThreadedModelSide;
  const std::vector<float> x = testing::SeededFloats(c * side * side, 3);
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, c, side, side})};
  ContextOptions options;
  options.device = Device::kCpu;
  options.cpu.threads = threads;
  options.cpu.onednn = onednn;
  auto ctx = ExecutionContext::Create(model, options);
  REQUIRE(ctx.ok());
  std::vector<TensorView> out;
  const Status st = ctx->Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  Ran r;
  r.outputs = testing::FloatCopies(out);
  r.note = ctx->device_note();
  r.fallbacks = ctx->stats().last_fallbacks;
  r.entry = model.entries()[static_cast<size_t>(ctx->stats().last_entry)];
  return r;
}

// Each output of `a` (oneDNN's) within `rel` (relative to 1 + |b|) of `b`'s (Kiln's kernels).
void CheckOutputsClose(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, float rel) {
  REQUIRE(a.size() == b.size());
  for (size_t o = 0; o < a.size(); ++o) {
    INFO("output " << o);
    REQUIRE(a[o].size() == b[o].size());
    int bad = 0;
    for (size_t i = 0; i < a[o].size() && bad < 5; ++i)
      if (!(std::fabs(a[o][i] - b[o][i]) <= rel * (1 + std::fabs(b[o][i])))) {
        ++bad;
        FAIL_CHECK("index " << i << ": oneDNN " << a[o][i] << ", Kiln " << b[o][i]);
      }
  }
}

TEST_CASE("CpuOptions::onednn: the note, outputs against Kiln's kernels, the same bits at 1-3 threads") {
  auto model = Model::Load(testing::CompileModel(ModelWithPointwise()));
  REQUIRE(model.ok());
  const Ran own = RunWith(*model, false, 1);
  CHECK(own.note == testing::CpuNote(1, false));
  CHECK(own.fallbacks.empty());
  const Ran first = RunWith(*model, true, 1);
  CHECK(first.note == testing::CpuNote(1));
  CHECK(first.fallbacks.empty());  // the pointwise Conv stays on Kiln's kernel by choice
  CheckOutputsClose(first.outputs, own.outputs, 1e-4f);
  for (int threads : {2, 3}) {
    INFO(threads << " threads");
    const Ran r = RunWith(*model, true, threads);
    CHECK(r.outputs == first.outputs);
  }
}

TEST_CASE("CpuOptions::onednn: float16 and bfloat16 models' Convs run on oneDNN, against Kiln's kernels") {
  for (passes::Precision precision : {passes::Precision::kFp16, passes::Precision::kBf16}) {
    const bool fp16 = precision == passes::Precision::kFp16;
    INFO((fp16 ? "fp16" : "bf16"));
    compiler::CompileOptions options = testing::CpuOnly();
    options.precision.precision = precision;
    auto model = Model::Load(testing::CompileModel(testing::ThreadedModel(), options));
    REQUIRE(model.ok());
    const Ran on = RunWith(*model, true, 1), off = RunWith(*model, false, 1);
    CHECK(off.fallbacks.empty());
    if (fp16 || cpu::OneDnnRunsBFloat16()) {
      CHECK(on.fallbacks.empty());  // oneDNN takes both Convs: bfloat16 natively, float16 on float32 copies
    } else {  // no AVX-512 for oneDNN (ONEDNN_MAX_CPU_ISA=SSE41 in a test tier): Kiln's kernel, with the reason
      REQUIRE(on.fallbacks.size() == 2);
      for (const Stats::Fallback& f : on.fallbacks)
        CHECK(f.reason == "Kiln's kernel, not oneDNN: oneDNN has no bfloat16 convolution for this form on this CPU");
    }
    // Both accumulate in float32 and round Y once, in other orders: a unit or two of the half
    // type's last place (2^-11 for float16, 2^-8 for bfloat16), carried through the Softmax.
    CheckOutputsClose(on.outputs, off.outputs, fp16 ? 2e-3f : 1.6e-2f);
    CHECK(RunWith(*model, true, 2).outputs == RunWith(*model, true, 2).outputs);
  }
}

// x [N, 4, 8, 8] -> Conv 3x3 (8 channels) + Relu -> Conv 3x3 (8) -> y: N symbolic, so each batch
// size is a binding with its own oneDNN plans (the first Conv's Y kept in oneDNN's layout).
onnx::ModelProto BatchedConvs() {
  onnx::ModelProto m = testing::MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "4", "8", "8"});
  testing::AddFloatInit(g, "w1", {8, 4, 3, 3}, testing::SeededFloats(8 * 4 * 9, 21));
  testing::AddFloatInit(g, "w2", {8, 8, 3, 3}, testing::SeededFloats(8 * 8 * 9, 22));
  testing::AttrInts(testing::AddNode(g, "Conv", {"x", "w1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  testing::AddNode(g, "Relu", {"c1"}, {"r"}, "relu");
  testing::AttrInts(testing::AddNode(g, "Conv", {"r", "w2"}, {"y"}, "conv2"), "pads", {1, 1, 1, 1});
  testing::AddOutput(g, "y");
  return m;
}

TEST_CASE("CpuOptions::onednn: the Convs of an empty batch run on Kiln's kernel, named in last_fallbacks") {
  auto model = Model::Load(testing::CompileModel(BatchedConvs(), testing::WithProfiles({"x:N=0..4"})));
  REQUIRE(model.ok());
  ContextOptions options;
  options.device = Device::kCpu;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  const float none = 0;
  const TensorView in[] = {TensorView::Host(&none, DType::kFloat32, {0, 4, 8, 8})};
  std::vector<TensorView> out;
  const Status st = ctx->Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  REQUIRE(out.size() == 1);
  CHECK(out[0].num_elements() == 0);
  const std::vector<Stats::Fallback>& fallbacks = ctx->stats().last_fallbacks;
  if (!cpu::OneDnnBuilt()) {
    CHECK(fallbacks.empty());  // nothing is asked of a library this runtime does not have
    return;
  }
  const EntryInfo& entry = model->entries()[static_cast<size_t>(ctx->stats().last_entry)];
  REQUIRE(fallbacks.size() == 2);  // conv1 and conv2
  for (const Stats::Fallback& f : fallbacks) {
    // The CPU plan's 2-D Convs are NHWC (compiler/passes/channels_last.h).
    CHECK(entry.instructions[static_cast<size_t>(f.instruction)].op == "kiln.NhwcConv");
    CHECK(f.reason == "Kiln's kernel, not oneDNN: an empty tensor (the CPU kernel writes what it needs)");
  }
}

// x [1, 8, 12, 12] -> conv1 3x3 + Relu -> c1; conv2 3x3 on c1, plus c1 (a residual folded into
// conv2's epilogue), Relu -> c2; conv3 3x3 on c2, plus c2 -> y. c1 and c2 are read as X and as
// residual: kept in oneDNN's layout where it chooses one (a ResNet's blocks).
onnx::ModelProto ResidualConvs() {
  onnx::ModelProto m = testing::MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"1", "8", "12", "12"});
  for (int i = 1; i <= 3; ++i)
    testing::AddFloatInit(g, "w" + std::to_string(i), {8, 8, 3, 3}, testing::SeededFloats(8 * 8 * 9, 30 + i, 0.3f));
  testing::AttrInts(testing::AddNode(g, "Conv", {"x", "w1"}, {"p1"}, "conv1"), "pads", {1, 1, 1, 1});
  testing::AddNode(g, "Relu", {"p1"}, {"c1"}, "relu1");
  testing::AttrInts(testing::AddNode(g, "Conv", {"c1", "w2"}, {"p2"}, "conv2"), "pads", {1, 1, 1, 1});
  testing::AddNode(g, "Add", {"p2", "c1"}, {"s2"}, "add2");
  testing::AddNode(g, "Relu", {"s2"}, {"c2"}, "relu2");
  testing::AttrInts(testing::AddNode(g, "Conv", {"c2", "w3"}, {"p3"}, "conv3"), "pads", {1, 1, 1, 1});
  testing::AddNode(g, "Add", {"p3", "c2"}, {"y"}, "add3");
  testing::AddOutput(g, "y");
  return m;
}

TEST_CASE("CpuOptions::onednn: Convs whose tensors are read as X and as residual, against Kiln's kernels") {
  auto model = Model::Load(testing::CompileModel(ResidualConvs()));
  REQUIRE(model.ok());
  const std::vector<float> x = testing::SeededFloats(8 * 12 * 12, 40);
  const auto run = [&](bool onednn, int threads) {
    const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {1, 8, 12, 12})};
    ContextOptions options;
    options.device = Device::kCpu;
    options.cpu.threads = threads;
    options.cpu.onednn = onednn;
    auto ctx = ExecutionContext::Create(*model, options);
    REQUIRE(ctx.ok());
    std::vector<TensorView> out;
    for (int call = 0; call < 2; ++call) {  // the second call with the kept weights
      const Status st = ctx->Run(in, out);
      REQUIRE_MESSAGE(st.ok(), st.ToString());
    }
    CHECK(ctx->stats().last_fallbacks.empty());
    return testing::FloatCopies(out);
  };
  const std::vector<std::vector<float>> own = run(false, 1), on = run(true, 1);
  REQUIRE(on.size() == 1);
  CheckOutputsClose(on, own, 1e-4f);
  CHECK(run(true, 2) == on);
  CHECK(run(true, 3) == on);
}

TEST_CASE("CpuOptions::onednn: one context alternating batch sizes gives each size's own results") {
  auto model = Model::Load(testing::CompileModel(BatchedConvs()));
  REQUIRE(model.ok());
  ContextOptions on, off;
  on.device = off.device = Device::kCpu;
  on.cpu.threads = off.cpu.threads = 2;
  off.cpu.onednn = false;
  auto ctx = ExecutionContext::Create(*model, on);
  REQUIRE(ctx.ok());
  // More sizes than the 8 bindings kept, and back to evicted ones.
  for (int64_t n : {1, 3, 2, 1, 4, 3, 2, 5, 6, 7, 8, 9, 10, 1, 4}) {
    INFO("batch " << n);
    const std::vector<float> x = testing::SeededFloats(n * 4 * 64, static_cast<uint32_t>(n));
    const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {n, 4, 8, 8})};
    std::vector<TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    const std::vector<std::vector<float>> got = testing::FloatCopies(out);
    auto own = ExecutionContext::Create(*model, off);
    REQUIRE(own.ok());
    REQUIRE(own->Run(in, out).ok());
    const std::vector<std::vector<float>> want = testing::FloatCopies(out);
    REQUIRE(got[0].size() == want[0].size());
    REQUIRE(got[0].size() == static_cast<size_t>(n * 8 * 64));
    int bad = 0;
    for (size_t i = 0; i < want[0].size() && bad < 3; ++i)
      if (!(std::fabs(got[0][i] - want[0][i]) <= 1e-4f * (1 + std::fabs(want[0][i])))) {
        ++bad;
        FAIL_CHECK("index " << i << ": oneDNN " << got[0][i] << ", Kiln " << want[0][i]);
      }
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The profile names the library that ran each instruction (Stats::last_instruction_library), not
// the artifact's CUDA placement: a default artifact (placed for CUDA and the CPU) run on the CPU
// backend. x [64, 64] MatMul w [64, 64]: 2^18 multiply-adds, the least oneDNN takes; then a Relu
// and an Add of a constant, fused into one generated kernel, and a Hardmax (a CPU kernel). A
// MatMul below oneDNN's sgemm threshold on Kiln's kernel reads OpenBLAS.
TEST_CASE("profile: each instruction's library is what ran it on the CPU backend") {
  onnx::ModelProto m = testing::MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"64", "64"});
  testing::AddFloatInit(g, "w", {64, 64}, testing::SeededFloats(64 * 64, 5, 0.1f));
  testing::AddFloatInit(g, "b", {64}, testing::SeededFloats(64, 6, 0.1f));
  testing::AddNode(g, "MatMul", {"x", "w"}, {"mm"}, "mm");
  testing::AddNode(g, "Sin", {"mm"}, {"s"}, "sin");  // not an epilogue: fused apart from the MatMul
  testing::AddNode(g, "Add", {"s", "b"}, {"a"}, "add");
  testing::AddNode(g, "Hardmax", {"a"}, {"y"}, "hardmax");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m));  // the default: placed for every backend
  REQUIRE(model.ok());
  const std::vector<InstructionInfo>& ins = model->entries()[0].instructions;
  REQUIRE(ins.size() == 3);
  CHECK(ins[0].library("cuda") == Library::kCublasLt);
  CHECK(ins[0].library("cpu") == Library::kOneDnn);
  CHECK(ins[1].library("cpu") == Library::kGenerated);
  CHECK(ins[2].library("cuda") == Library::kCpuKernel);
  const std::vector<float> x = testing::SeededFloats(64 * 64, 7);
  const TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {64, 64})};
  for (const bool onednn : {true, false}) {
    INFO("onednn " << onednn);
    ContextOptions options;
    options.device = Device::kCpu;
    options.profile = true;
    options.cpu.onednn = onednn;
    auto ctx = ExecutionContext::Create(*model, options);
    REQUIRE(ctx.ok());
    std::vector<TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    // On Kiln's kernel (--no-onednn) the MatMul's 64 x 64 x 64 product is dnnl_sgemm's
    // (runtime/kernels/gemm.h), and the profile says so.
    const Library matmul = cpu::OneDnnBuilt() ? Library::kOneDnn : cpu::BlasLibrary();
    CHECK(ctx->stats().last_instruction_library ==
          std::vector<Library>{matmul, Library::kGenerated, Library::kCpuKernel});
  }
  // x [4, 8] MatMul w [8, 8]: 256 multiply-adds, on OpenBLAS.
  onnx::ModelProto small = testing::MakeModel(17);
  g = small.mutable_graph();
  testing::AddInput(g, "x", {"4", "8"});
  testing::AddFloatInit(g, "w", {8, 8}, testing::SeededFloats(64, 8, 0.1f));
  testing::AddNode(g, "MatMul", {"x", "w"}, {"y"}, "mm");
  testing::AddOutput(g, "y");
  auto small_model = Model::Load(testing::CompileModel(small));
  REQUIRE(small_model.ok());
  ContextOptions options;
  options.device = Device::kCpu;
  options.profile = true;
  auto ctx = ExecutionContext::Create(*small_model, options);
  REQUIRE(ctx.ok());
  const std::vector<float> xs = testing::SeededFloats(32, 9);
  const TensorView small_in[] = {TensorView::Host(xs.data(), DType::kFloat32, {4, 8})};
  std::vector<TensorView> out;
  REQUIRE(ctx->Run(small_in, out).ok());
  CHECK(ctx->stats().last_instruction_library == std::vector<Library>{cpu::BlasLibrary()});
}

}  // namespace
}  // namespace kiln
