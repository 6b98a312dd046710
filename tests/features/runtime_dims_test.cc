// Run-time dims (schema/kiln.fbs RuntimeDim): a size an instruction reports once it has run,
// here NonZero's count, read by the instructions after it, on the CPU backend and the CUDA
// one (the emulated device in CI). Expected values are computed by hand.
#include <doctest/doctest.h>

#include <vector>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"
#include "tests/runtime/artifact_builder_test_util.h"
#include "runtime/artifact_header.h"
#include "tests/runtime/count_allocations.h"

namespace kiln {
namespace {

// x float32[N]: y = 2 * x[x > 0] (Greater, NonZero, Reshape to 1-D, Gather, Mul), and
// count = Shape(y), whose element is the run-time dim itself.
onnx::ModelProto PositiveModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddFloatInit(g, "two", {}, {2.0f});
  testing::AddInt64Init(g, "flat", {1}, {-1});
  testing::AddNode(g, "Greater", {"x", "zero"}, {"mask"}, "positive");
  testing::AddNode(g, "NonZero", {"mask"}, {"where"}, "nonzero");
  testing::AddNode(g, "Reshape", {"where", "flat"}, {"index"}, "flatten");
  testing::AddNode(g, "Gather", {"x", "index"}, {"picked"}, "gather");
  testing::AddNode(g, "Mul", {"picked", "two"}, {"y"}, "double");
  testing::AddNode(g, "Shape", {"y"}, {"count"}, "shape");
  testing::AddOutput(g, "y");
  testing::AddOutput(g, "count");
  return m;
}

struct Result2 {
  std::vector<float> y;
  std::vector<int64_t> y_dims;
  int64_t count = -1;
};

Result2 RunPositive(ExecutionContext& ctx, const std::vector<float>& x) {
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())})};
  auto out = testing::RunToHost(ctx, in);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  REQUIRE(out->size() == 2);
  Result2 r;
  r.y_dims = (*out)[0].dims;
  r.y = testing::Values<float>((*out)[0]);
  r.count = testing::Values<int64_t>((*out)[1]).at(0);
  return r;
}

void CheckPositive(Device device) {
  compiler::CompileOptions options = testing::OptionsFor(device);
  auto model = Model::Load(testing::CompileModel(PositiveModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->format_version() == kRuntimeDimsFormatVersion);  // run-time dims need format 5
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  // Fewer than the bound, none, all of them (the bound itself), and a longer input again.
  Result2 r = RunPositive(*ctx, {1, -2, 3, -4, 5});
  CHECK(r.y == std::vector<float>{2, 6, 10});
  CHECK(r.y_dims == std::vector<int64_t>{3});
  CHECK(r.count == 3);
  r = RunPositive(*ctx, {-1, -1});
  CHECK(r.y.empty());
  CHECK(r.y_dims == std::vector<int64_t>{0});
  CHECK(r.count == 0);
  r = RunPositive(*ctx, {1, 2});
  CHECK(r.y == std::vector<float>{2, 4});
  CHECK(r.count == 2);
  r = RunPositive(*ctx, {-7, 0.5f, 0, 8, 9, -1});
  CHECK(r.y == std::vector<float>{1, 16, 18});
  CHECK(r.count == 3);
  // The shapes were evaluated again after NonZero in the calls that found fewer than the
  // bound (3 of 5, 0 of 2, 3 of 6; 2 of 2 is the bound), once per call on either backend
  // (the CUDA outputs come to the host through CopyOutputs, without a second Run).
  CHECK(ctx->stats().runtime_dim_binds == 3u);
  CHECK(ctx->stats().graph_hits == 0);
}

}  // namespace

TEST_CASE("run-time dims: NonZero's count sizes the instructions after it, call by call") {
  CheckPositive(Device::kCpu);
}

TEST_CASE("[gpu] run-time dims on the CUDA backend: the fallback region ends at NonZero and its size reaches the device") {
  KILN_REQUIRE_GPU();
  CheckPositive(Device::kCuda);
}

namespace {

// x float32[3], y float32[M]: f = Cast<float>(indices of x > 0) of run-time length n; o =
// Concat(f, x) and p = f + y, broadcast at run time (n against M, either may be 1, n may be 0).
void CheckEmptyParts(Device device) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"3"});
  testing::AddInput(g, "y", {"M"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddInt64Init(g, "flat", {1}, {-1});
  testing::AddNode(g, "Greater", {"x", "zero"}, {"mask"}, "positive");
  testing::AddNode(g, "NonZero", {"mask"}, {"where"}, "nonzero");
  testing::AddNode(g, "Reshape", {"where", "flat"}, {"index"}, "flatten");
  testing::AttrInt(testing::AddNode(g, "Cast", {"index"}, {"f"}, "cast"), "to", onnx::TensorProto::FLOAT);
  testing::AttrInt(testing::AddNode(g, "Concat", {"f", "x"}, {"o"}, "concat"), "axis", 0);
  testing::AddNode(g, "Add", {"f", "y"}, {"p"}, "add");
  testing::AddOutput(g, "o");
  testing::AddOutput(g, "p");
  compiler::CompileOptions options = testing::OptionsFor(device);
  auto model = Model::Load(testing::CompileModel(m, options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  auto run = [&](const std::vector<float>& x, const std::vector<float>& y) {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {3}),
                       TensorView::Host(y.data(), DType::kFloat32, {static_cast<int64_t>(y.size())})};
    std::vector<TensorView> out;
    Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    std::vector<float> o(static_cast<size_t>(out[0].num_elements())), p(static_cast<size_t>(out[1].num_elements()));
    std::vector<TensorView> host = {TensorView::Host(o.data(), DType::kFloat32, out[0].dims, 1),
                                    TensorView::Host(p.data(), DType::kFloat32, out[1].dims, 1)};
    st = ctx->Run(in, host);  // the same call again, into host views (the outputs may be on a device)
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    REQUIRE(ctx->Synchronize().ok());
    return std::pair{o, p};
  };
  // None positive: Concat reads only x (the empty part at index 0 of its room, discarded), and
  // 0 against M = 1 broadcasts to 0.
  auto r = run({-1, -2, -3}, {7});
  CHECK(r.first == std::vector<float>{-1, -2, -3});
  CHECK(r.second.empty());
  // One positive (index 0) against M = 3, and two against M = 1.
  r = run({4, -2, -3}, {10, 20, 30});
  CHECK(r.first == std::vector<float>{0, 4, -2, -3});
  CHECK(r.second == std::vector<float>{10, 20, 30});
  r = run({4, 5, -3}, {5});
  CHECK(r.first == std::vector<float>{0, 1, 4, 5, -3});
  CHECK(r.second == std::vector<float>{5, 6});
}

}  // namespace

namespace {

// x float32[N]: the K largest of x and their indices, K the count of its positive elements
// (computed from the data: a run-time dim), then the values doubled on the device.
void CheckTopK(Device device) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddFloatInit(g, "two", {}, {2.0f});
  testing::AddNode(g, "Greater", {"x", "zero"}, {"mask"}, "positive");
  testing::AttrInt(testing::AddNode(g, "Cast", {"mask"}, {"ones"}, "cast"), "to", onnx::TensorProto::INT64);
  testing::AttrInt(testing::AddNode(g, "ReduceSum", {"ones"}, {"k"}, "count"), "keepdims", 1);
  testing::AddNode(g, "TopK", {"x", "k"}, {"top", "where"}, "topk");
  testing::AddNode(g, "Mul", {"top", "two"}, {"y"}, "double");
  testing::AddOutput(g, "y");
  testing::AddOutput(g, "where");
  compiler::CompileOptions options = testing::OptionsFor(device);
  auto model = Model::Load(testing::CompileModel(m, options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries()[0].runtime_dims.size() == 1);
  CHECK_MESSAGE(model->entries()[0].runtime_dims[0].find("top.count <= N") != std::string::npos,
                model->entries()[0].runtime_dims[0]);
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  auto run = [&](const std::vector<float>& x) {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())})};
    auto r = testing::RunToHost(*ctx, in);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  };
  auto r = run({3, -1, 2, 5, -4});  // K = 3
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{10, 6, 4});
  CHECK(testing::Values<int64_t>(r[1]) == std::vector<int64_t>{3, 0, 2});
  r = run({-1, -2});  // K = 0
  CHECK(r[0].dims == std::vector<int64_t>{0});
  r = run({1, 2, 3, 4, 5, 6});  // K = N
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{12, 10, 8, 6, 4, 2});
}

}  // namespace

TEST_CASE("run-time dims: TopK whose K is computed from the data") { CheckTopK(Device::kCpu); }

TEST_CASE("[gpu] run-time dims on the CUDA backend: TopK whose K is computed from the data") {
  KILN_REQUIRE_GPU();
  CheckTopK(Device::kCuda);
}

namespace {

// x float32[2, N]: n, the count of x's positive elements (computed from the data), picks the
// first n columns of x (a Slice whose end is a run-time dim's value), then the last n columns
// backwards (start -1, end -1 - n, step -1); each Slice's length is a run-time dim, bounded by N.
void CheckDataSlice(Device device) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"2", "N"});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddInt64Init(g, "start", {1}, {0});
  testing::AddInt64Init(g, "minus_one", {1}, {-1});
  testing::AddInt64Init(g, "axis1", {1}, {1});
  testing::AddNode(g, "Greater", {"x", "zero"}, {"mask"}, "positive");
  testing::AttrInt(testing::AddNode(g, "Cast", {"mask"}, {"ones"}, "cast"), "to", onnx::TensorProto::INT64);
  testing::AttrInt(testing::AddNode(g, "ReduceSum", {"ones"}, {"n"}, "count"), "keepdims", 0);
  testing::AddNode(g, "Reshape", {"n", "minus_one"}, {"end"}, "as_list");  // [1]
  testing::AddNode(g, "Slice", {"x", "start", "end", "axis1"}, {"head"}, "head");
  testing::AddNode(g, "Sub", {"minus_one", "end"}, {"back_end"}, "back_end");
  testing::AddNode(g, "Slice", {"x", "minus_one", "back_end", "axis1", "minus_one"}, {"tail"}, "tail");
  testing::AddOutput(g, "head");
  testing::AddOutput(g, "tail");
  compiler::CompileOptions options = testing::OptionsFor(device);
  auto model = Model::Load(testing::CompileModel(m, options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  const std::vector<std::string>& dims = model->entries()[0].runtime_dims;
  REQUIRE(dims.size() == 2);
  CHECK_MESSAGE(dims[0].find("head.count <= N, set by") != std::string::npos, dims[0]);
  auto ctx = ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  auto run = [&](const std::vector<float>& x) {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {2, static_cast<int64_t>(x.size() / 2)})};
    auto r = testing::RunToHost(*ctx, in);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  };
  auto r = run({1, -2, 3, -4, 5, 6});  // N = 3, n = 4: clamped to 3 columns
  CHECK(r[0].dims == std::vector<int64_t>{2, 3});
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{1, -2, 3, -4, 5, 6});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{3, -2, 1, 6, 5, -4});
  r = run({1, -2, -3, -4, -5, 6, 7, -8});  // N = 4, n = 3
  CHECK(r[0].dims == std::vector<int64_t>{2, 3});
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{1, -2, -3, -5, 6, 7});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{-4, -3, -2, -8, 7, 6});
  r = run({-1, -2, -3, -4});  // n = 0: empty
  CHECK(r[0].dims == std::vector<int64_t>{2, 0});
  CHECK(r[1].dims == std::vector<int64_t>{2, 0});
  r = run({0, 9, -1, 1});  // n = 2
  CHECK(testing::Values<float>(r[0]) == std::vector<float>{0, 9, -1, 1});
  CHECK(testing::Values<float>(r[1]) == std::vector<float>{9, 0, 1, -1});
  // Starts and ends from the data on two axes at once: refused, naming the reason.
  auto two = m;
  auto* g2 = two.mutable_graph();
  testing::AddInt64Init(g2, "axes01", {2}, {0, 1});
  testing::AddNode(g2, "Concat", {"end", "end"}, {"ends2"}, "ends2");
  testing::AttrInt(g2->mutable_node(g2->node_size() - 1), "axis", 0);
  testing::AddNode(g2, "Concat", {"start", "start"}, {"starts2"}, "starts2");
  testing::AttrInt(g2->mutable_node(g2->node_size() - 1), "axis", 0);
  testing::AddNode(g2, "Slice", {"x", "starts2", "ends2", "axes01"}, {"corner"}, "corner");
  testing::AddOutput(g2, "corner");
  const Status st = testing::TryCompileModel(two, options).status();
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK_MESSAGE(st.message().find("node 'corner' (Slice): data-dependent output shape: starts [2] and ends [2] "
                                  "computed from tensor data: such a Slice takes one axis") == 0,
                st.message());
}

}  // namespace

TEST_CASE("run-time dims: a Slice whose end is computed from the data") { CheckDataSlice(Device::kCpu); }

TEST_CASE("[gpu] run-time dims on the CUDA backend: a Slice whose end is computed from the data") {
  KILN_REQUIRE_GPU();
  CheckDataSlice(Device::kCuda);
}

TEST_CASE("run-time dims: a Concat part and a broadcast operand that are empty at run time") {
  CheckEmptyParts(Device::kCpu);
}

TEST_CASE("[gpu] run-time dims: an empty Concat part on the CUDA backend is never read out of bounds") {
  KILN_REQUIRE_GPU();
  CheckEmptyParts(Device::kCuda);
}

TEST_CASE("run-time dims: a count read only through Shape keeps its NonZero, and Compress -> Shape -> ConstantOfShape runs") {
  // s = Shape(NonZero(x)): the NonZero's data is unused, but its count is the output. Dead-code
  // elimination once dropped it and wrote an artifact whose count nothing set.
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N"});
  testing::AddInput(g, "c", {"N"}, onnx::TensorProto::BOOL);
  testing::AddNode(g, "NonZero", {"x"}, {"nz"}, "nonzero");
  testing::AddNode(g, "Shape", {"nz"}, {"s"}, "shape");
  testing::AddNode(g, "Compress", {"x", "c"}, {"picked"}, "compress");
  testing::AddNode(g, "Shape", {"picked"}, {"n"}, "count");
  testing::AddNode(g, "ConstantOfShape", {"n"}, {"zeros"}, "zeros");
  testing::AddOutput(g, "s");
  testing::AddOutput(g, "zeros");
  for (const bool fuse : {true, false}) {
    compiler::CompileOptions options = testing::CpuOnly();
    options.fuse = fuse;
    auto model = Model::Load(testing::CompileModel(m, options));
    REQUIRE_MESSAGE(model.ok(), model.status().ToString());
    auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
    REQUIRE(ctx.ok());
    const float x[6] = {0, 1, 2, 0, 4, 5};
    const uint8_t c[6] = {1, 0, 1, 0, 0, 0};
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {6}), TensorView::Host(c, DType::kBool, {6})};
    std::vector<TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    const int64_t* s = static_cast<const int64_t*>(out[0].data);
    CHECK(std::vector<int64_t>(s, s + 2) == std::vector<int64_t>{1, 4});
    REQUIRE(out[1].rank == 1);
    CHECK(out[1].dims[0] == 2);
    CHECK(static_cast<const float*>(out[1].data)[1] == 0.0f);
  }
}

TEST_CASE("run-time dims: a Run whose sizes change, and whose input shapes change, allocates nothing once warm") {
  auto model = Model::Load(testing::CompileModel(PositiveModel()));
  REQUIRE(model.ok());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<std::vector<float>> xs = {{1, -2, 3, -4, 5}, {-1, -2, -3, 4, -5}, {1, 2}, {-1, 0, 0, 0, 0, 0, 7}};
  std::vector<TensorView> out;
  auto run_all = [&](int calls) {
    for (int k = 0; k < calls; ++k) {
      const std::vector<float>& x = xs[static_cast<size_t>(k) % xs.size()];
      TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())})};
      if (!ctx->Run(in, out).ok()) return false;
    }
    return true;
  };
  REQUIRE(run_all(8));  // sizes the arena and the workspace for the largest input
  bool ok = false;
  const long n = testing::CountAllocations([&] { ok = run_all(40); });
  CHECK(ok);
  CHECK(n == 0);
  // Three inputs in four find fewer than the bound ({1, 2} finds both): 6 binds in the
  // warm-up's 8 calls, 30 in these 40.
  CHECK(ctx->stats().runtime_dim_binds == 36);
}

TEST_CASE("run-time dims: caller output views are checked against the size found, before anything is written") {
  auto model = Model::Load(testing::CompileModel(PositiveModel()));
  REQUIRE(model.ok());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> x = {1, -2, 3};
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {3})};
  std::vector<float> y(2, -1.0f), wrong(3, -1.0f);
  int64_t count = -1;
  std::vector<TensorView> out = {TensorView::Host(wrong.data(), DType::kFloat32, {3}),
                                 TensorView::Host(&count, DType::kInt64, {1})};
  CHECK(ctx->Run(in, out).message() == "output 0 'y' shape [3], expected [2]");
  CHECK(wrong == std::vector<float>{-1, -1, -1});
  out[0] = TensorView::Host(y.data(), DType::kFloat32, {2});
  REQUIRE(ctx->Run(in, out).ok());
  CHECK(y == std::vector<float>{2, 6});
  CHECK(count == 2);
}

TEST_CASE("run-time dims: the compile trace names each with its bound and the node that sets it") {
  compiler::CompileSummary summary;
  auto model = Model::Load(testing::CompileModel(PositiveModel(), testing::CpuOnly(), &summary));
  REQUIRE(model.ok());
  const EntryInfo& entry = model->entries()[0];
  std::string trace;
  for (size_t k = 0; k < entry.stage_traces.size(); ++k)
    if (entry.compile.stage_names[k] == "plan") trace = entry.stage_traces[k];
  CHECK(trace.find("# run-time dim: where.count <= N, set by node 'nonzero' (NonZero)'s count of nonzero elements") !=
        std::string::npos);
  CHECK(entry.runtime_dims == std::vector<std::string>{"where.count <= N, set by instruction 1 'nonzero' (NonZero)"});
}

namespace {

// y = NonZero(x), x float32[N] with N in [1, 64], y int64[1, n] with run-time dim n <= N,
// built by hand (no compiler). Exprs: 0 N (the bound), 1 1, 2 n, 3 0 (offset), 4 8,
// 5 N*8 (arena bytes).
testing::ArtifactSpec NonZeroSpec() {
  testing::ArtifactSpec a;
  a.format_version = kFormatVersion;
  a.inputs = {{"x", DType::kFloat32, {-1}, {"N"}}};
  a.outputs = {{"y", DType::kInt64, {1, -1}, {"", "n"}}};
  testing::EntrySpec e;
  e.checks = {{"x", DType::kFloat32, {testing::Sym(0, 1, 64)}}};
  e.symbols = {"N", "n"};
  e.exprs = {testing::E(fb::ExprOp::Var, 0), testing::E(fb::ExprOp::Const, 1), testing::E(fb::ExprOp::Var, 1),
             testing::E(fb::ExprOp::Const, 0), testing::E(fb::ExprOp::Const, 8), testing::E(fb::ExprOp::Mul, 0, 4)};
  e.tensors = {testing::T("x", DType::kFloat32, {0}, fb::Storage::Input, 0),
               testing::T("y", DType::kInt64, {1, 2}, fb::Storage::Arena, 0, 3)};
  e.instructions = {{"NonZero", "nz", {0}, {1}, {}, -1, {}, {}}};
  e.inputs = {0};
  e.outputs = {1};
  e.arena_bytes = 5;
  e.runtime_dims = {fb::RuntimeDim(1, 0, 0)};
  a.entries = {e};
  return a;
}

std::string LoadErrorMessage(const testing::ArtifactSpec& a) {
  auto m = Model::Load(testing::BuildArtifact(a));
  REQUIRE_FALSE(m.ok());
  return std::string(m.status().message());
}

}  // namespace

TEST_CASE("run-time dims in a hand-built artifact: NonZero's count, with no compiler") {
  auto model = Model::Load(testing::BuildArtifact(NonZeroSpec()));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->entries()[0].runtime_dims == std::vector<std::string>{"n <= N, set by instruction 0 'nz' (NonZero)"});
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  for (const std::vector<float>& x : {std::vector<float>{1, 0, 2}, std::vector<float>{0, 0, 0, 0}, std::vector<float>{5}}) {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())})};
    std::vector<TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    std::vector<int64_t> want;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != 0) want.push_back(static_cast<int64_t>(i));
    REQUIRE(out[0].rank == 2);
    CHECK(out[0].dims[1] == static_cast<int64_t>(want.size()));
    const int64_t* y = static_cast<const int64_t*>(out[0].data);
    CHECK(std::vector<int64_t>(y, y + out[0].num_elements()) == want);
  }
}

TEST_CASE("run-time dims: the verifier refuses every inconsistent description, naming it") {
  auto spec = NonZeroSpec();
  spec.entries[0].runtime_dims = {fb::RuntimeDim(5, 0, 0)};
  CHECK(LoadErrorMessage(spec) == "entry 0 run-time dim 0: symbol 5 out of range (symbols: 2)");
  spec = NonZeroSpec();
  spec.entries[0].runtime_dims = {fb::RuntimeDim(0, 0, 0)};
  CHECK(LoadErrorMessage(spec) == "entry 0: symbol 0 'N' is a run-time dim, but an input binds it");
  spec = NonZeroSpec();
  spec.entries[0].instructions[0].op = "Relu";
  CHECK(LoadErrorMessage(spec) == "entry 0 run-time dim 0: instruction 0 (Relu) does not report a run-time size");
  spec = NonZeroSpec();
  spec.entries[0].runtime_dims = {fb::RuntimeDim(1, 0, 2)};  // bound n: read before NonZero runs
  CHECK(LoadErrorMessage(spec) == "entry 0 expr 2: the prologue evaluates it, but it reads run-time dim 1 'n'");
  spec = NonZeroSpec();
  spec.entries[0].tensors[1].offset = 2;  // the arena offset n moves with the size
  CHECK(LoadErrorMessage(spec) == "entry 0 tensor 1 'y': offset expr 2 reads a run-time dim");
  spec = NonZeroSpec();
  spec.entries[0].runtime_dims = {fb::RuntimeDim(1, 0, 0), fb::RuntimeDim(1, 0, 0)};
  CHECK(LoadErrorMessage(spec) == "entry 0 run-time dim 1: symbol 1 is set twice");
  // Rooms (format 8): a symbol of their own that no input binds, from 1 to 2^40 at first.
  spec = NonZeroSpec();
  spec.entries[0].rooms = {fb::Room(2, 16)};
  CHECK(LoadErrorMessage(spec) == "entry 0 room 0: symbol 2 out of range (symbols: 2)");
  spec.entries[0].rooms = {fb::Room(1, 16)};
  CHECK(LoadErrorMessage(spec) == "entry 0 room 0: symbol 1 is set twice");
  spec.entries[0].rooms = {fb::Room(0, 16)};
  CHECK(LoadErrorMessage(spec) == "entry 0: symbol 0 'N' is a room, but an input binds it");
  spec.entries[0].symbols.push_back("y.rows");
  spec.entries[0].rooms = {fb::Room(2, 0)};
  CHECK(LoadErrorMessage(spec) == "entry 0 room 0: initial value 0, expected 1 to 1099511627776");
}

TEST_CASE("run-time dims: a size above the outputs' room is kInternal naming the instruction, nothing written past them") {
  auto spec = NonZeroSpec();
  spec.entries[0].tensors[1].shape = {1, 1};  // y int64[1, 1]: room for one index, the bound says N
  auto model = Model::Load(testing::BuildArtifact(spec));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> x = {1, 2, 3};
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {3})};
  std::vector<TensorView> out;
  Status st = ctx->Run(in, out);
  CHECK(st.code() == StatusCode::kInternal);
  CHECK(st.message() ==
        "instruction 0 'nz' (NonZero): NonZero: its data-dependent size is 3, and its outputs, sized for the run-time "
        "dim's bound, have no room for it");
}

TEST_CASE("run-time dims: a shape guard on them is checked once they are set, naming it and their values") {
  // c = NonZero(x) + NonZero(y): broadcasting two counts needs them equal or one of them 1, a guard the
  // prologue cannot check (it runs before either is known): the run checks it after 'nzb'.
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N"});
  testing::AddInput(g, "y", {"N"});
  testing::AddNode(g, "NonZero", {"x"}, {"a"}, "nza");
  testing::AddNode(g, "NonZero", {"y"}, {"b"}, "nzb");
  testing::AddNode(g, "Add", {"a", "b"}, {"c"}, "add");
  testing::AddOutput(g, "c");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE(model.ok());
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  auto run = [&](std::vector<float> x, std::vector<float> y, std::vector<int64_t>* c) -> Status {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {static_cast<int64_t>(x.size())}),
                       TensorView::Host(y.data(), DType::kFloat32, {static_cast<int64_t>(y.size())})};
    std::vector<TensorView> out;
    KILN_RETURN_IF_ERROR(ctx->Run(in, out));
    const int64_t* p = static_cast<const int64_t*>(out[0].data);
    c->assign(p, p + out[0].num_elements());
    return Status::Ok();
  };
  std::vector<int64_t> c;
  REQUIRE(run({1, 0, 2, 0}, {0, 3, 0, 4}, &c).ok());  // indices {0, 2} + {1, 3}
  CHECK(c == std::vector<int64_t>{1, 5});
  const Status st = run({1, 0, 2, 0}, {5, 3, 0, 4}, &c);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() ==
        "instruction 1 'nzb' (NonZero): entry 0 (default): guard (0 < (((a.count == b.count)+(a.count == 1))+(b.count "
        "== 1))) from node 'add' (Add) does not hold for a.count = 2, b.count = 3");
  // A count of 1 broadcasts, as numpy does: {2} + {1, 3}.
  REQUIRE(run({0, 0, 2, 0}, {0, 3, 0, 4}, &c).ok());
  CHECK(c == std::vector<int64_t>{3, 5});
}

}  // namespace kiln
