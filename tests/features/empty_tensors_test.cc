// Tensors with a 0 dim compile and run end to end, static or a symbolic dim that is 0 at run
// time: the canonical stage accepts them, the memory plan gives them no bytes, and fused
// programs, CPU kernels (with and without fusion) and the CUDA backend's libraries produce
// what ONNX's reference does.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

kiln::compiler::CompileOptions FusedOptions(bool fuse) {
  auto o = CpuOnly();
  o.fuse = fuse;
  return o;
}

// x[2, 0, 3] -> ReduceSum/ReduceProd/ReduceMax over axis 1 (keepdims) and Relu(x).
onnx::ModelProto ReduceEmptyModel() {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "0", "3"});
  AddInt64Init(g, "axes", {1}, {1});
  AddNode(g, "ReduceSum", {"x", "axes"}, {"sum"});
  AddNode(g, "ReduceProd", {"x", "axes"}, {"prod"});
  AddNode(g, "ReduceMax", {"x", "axes"}, {"max"});
  AddNode(g, "Relu", {"x"}, {"relu"});
  for (const char* o : {"sum", "prod", "max", "relu"}) AddOutput(g, o);
  return m;
}

}  // namespace

TEST_CASE("empty tensors: reductions over an empty axis give their identity, fused or not") {
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    auto bytes = CompileModel(ReduceEmptyModel(), FusedOptions(fuse));
    float none = 0;
    kiln::TensorView in[] = {kiln::TensorView::Host(&none, kiln::DType::kFloat32, {2, 0, 3})};
    auto out = RunFloat(bytes, in);
    REQUIRE(out.size() == 4);
    CHECK(out[0] == std::vector<float>(6, 0.0f));
    CHECK(out[1] == std::vector<float>(6, 1.0f));
    CHECK(out[2] == std::vector<float>(6, -std::numeric_limits<float>::infinity()));
    CHECK(out[3].empty());
  }
}

TEST_CASE("empty tensors: a Slice past the end, a zero-sized Split part and a Concat of it") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4", "2"});
  AddInt64Init(g, "starts", {1}, {1000});
  AddInt64Init(g, "ends", {1}, {1001});
  AddInt64Init(g, "axes", {1}, {0});
  AddInt64Init(g, "split", {3}, {0, 4, 0});
  AddNode(g, "Slice", {"x", "starts", "ends", "axes"}, {"past"});
  AttrInt(AddNode(g, "Split", {"x", "split"}, {"s0", "s1", "s2"}), "axis", 0);
  AttrInt(AddNode(g, "Concat", {"s0", "past", "x", "s2"}, {"cat"}), "axis", 0);
  AddNode(g, "Neg", {"cat"}, {"y"});
  for (const char* o : {"past", "s0", "y"}) AddOutput(g, o);
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    auto bytes = CompileModel(m, FusedOptions(fuse));
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {4, 2})};
    auto model = kiln::Model::Load(bytes);
    REQUIRE(model.ok());
    auto ctx = kiln::ExecutionContext::Create(*model, {});
    REQUIRE(ctx.ok());
    std::vector<kiln::TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    REQUIRE(out.size() == 3);
    CHECK(out[0].rank == 2);
    CHECK(out[0].dims[0] == 0);
    CHECK(out[0].num_elements() == 0);
    CHECK(out[1].num_elements() == 0);
    auto y = FloatCopies(std::span(out).subspan(2));
    CHECK(y[0] == (std::vector<float>{-1, -2, -3, -4, -5, -6, -7, -8}));
  }
}

TEST_CASE("empty tensors: MatMul with an inner dim of 0 gives zeros") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "a", {"2", "0"});
  AddInput(g, "b", {"0", "3"});
  AddNode(g, "MatMul", {"a", "b"}, {"y"});
  AddOutput(g, "y");
  float none = 0;
  kiln::TensorView in[] = {kiln::TensorView::Host(&none, kiln::DType::kFloat32, {2, 0}),
                           kiln::TensorView::Host(&none, kiln::DType::kFloat32, {0, 3})};
  auto out = RunFloat(CompileModel(m), in);
  CHECK(out[0] == std::vector<float>(6, 0.0f));
}

namespace {

// x[N, 1, 4, 4] -> Conv (two 3x3 filters of ones, pads 1) -> Relu -> GlobalAveragePool ->
// Flatten -> Gemm (B [2, 3] of ones): y[N, 3].
onnx::ModelProto ConvHeadModel() {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "1", "4", "4"});
  AddFloatInit(g, "w", {2, 1, 3, 3}, std::vector<float>(18, 1.0f));
  AddFloatInit(g, "b", {2, 3}, std::vector<float>(6, 1.0f));
  AttrInts(AddNode(g, "Conv", {"x", "w"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  AddNode(g, "Relu", {"c"}, {"r"}, "relu");
  AddNode(g, "GlobalAveragePool", {"r"}, {"p"}, "pool");
  AddNode(g, "Flatten", {"p"}, {"f"}, "flatten");
  AddNode(g, "Gemm", {"f", "b"}, {"y"}, "gemm");
  AddOutput(g, "y");
  return m;
}

// A batch of 0 and a batch of 2 of ones through one artifact and one entry, compiled without a
// profile (N may be 0) or with 'x:N=0' (a static empty entry) beside it. Ones: each Conv output is the count of in-bounds taps (4 at the corners, 6 at the
// edges, 9 inside: 100 over 16 positions, a mean of 6.25), so each y element is 2 x 6.25.
void CheckEmptyBatch(kiln::Device device, const std::vector<std::string>& profiles) {
  kiln::compiler::CompileOptions options = OptionsFor(device);
  if (!profiles.empty()) options.profiles = WithProfiles(profiles).profiles;
  auto model = kiln::Model::Load(CompileModel(ConvHeadModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  // The entries of `device`'s backend: with GPU archs, each profile entry has a CUDA plan and a
  // CPU plan (which runs the Conv in NHWC, compiler/passes/channels_last.h).
  std::vector<int> entries;
  for (size_t i = 0; i < model->entries().size(); ++i) {
    const std::string& backend = model->entries()[i].backend;
    if (backend.empty() || backend == (device == kiln::Device::kCuda ? "cuda" : "cpu"))
      entries.push_back(static_cast<int>(i));
  }
  REQUIRE(entries.size() == std::max<size_t>(profiles.size(), 1));
  if (!profiles.empty()) CHECK(model->entries()[static_cast<size_t>(entries[0])].name == "N=0");
  auto ctx = kiln::ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  const std::vector<float> ones(2 * 16, 1.0f);
  for (int64_t n : {0, 2, 0}) {
    INFO("N = " << n);
    kiln::TensorView in[] = {kiln::TensorView::Host(ones.data(), kiln::DType::kFloat32, {n, 1, 4, 4})};
    std::vector<float> y(6, -1.0f);  // never empty: a view's data is not null
    std::vector<kiln::TensorView> out = {kiln::TensorView::Host(y.data(), kiln::DType::kFloat32, {n, 3})};
    kiln::Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    REQUIRE(ctx->Synchronize().ok());
    CHECK(ctx->stats().last_entry == entries[n == 0 || entries.size() == 1 ? 0 : 1]);
    std::vector<float> want(6, -1.0f);
    std::fill(want.begin(), want.begin() + n * 3, 12.5f);
    CHECK(y == want);
  }
}

}  // namespace

TEST_CASE("empty tensors: a batch of 0 through Conv, pooling and Gemm, in the one entry or a profile's N=0 entry") {
  CheckEmptyBatch(kiln::Device::kCpu, {});
  CheckEmptyBatch(kiln::Device::kCpu, {"x:N=0", "default"});
}

TEST_CASE("[gpu] empty tensors: a batch of 0 through cuDNN, generated kernels and cuBLASLt") {
  KILN_REQUIRE_GPU();
  CheckEmptyBatch(kiln::Device::kCuda, {});
  CheckEmptyBatch(kiln::Device::kCuda, {"x:N=0", "default"});
}

namespace {

// x[N, W] -> y = x[:, 5:] (max(0, W - 5) columns: empty for W <= 5) -> ReduceSum(y * y) over
// axis 1, y @ y^T, Relu(Concat(y, x[:, :2])), y + b[N, 1], Shape(y).
onnx::ModelProto SlicePastEndModel() {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "W"});
  AddInput(g, "b", {"N", "1"});
  AddInt64Init(g, "five", {1}, {5});
  AddInt64Init(g, "to_end", {1}, {1000000000});  // tf2onnx's "to the end"
  AddInt64Init(g, "zero", {1}, {0});
  AddInt64Init(g, "two", {1}, {2});
  AddInt64Init(g, "axis1", {1}, {1});
  AddNode(g, "Slice", {"x", "five", "to_end", "axis1"}, {"y"}, "tail");
  AddNode(g, "Mul", {"y", "y"}, {"sq"});
  AddNode(g, "ReduceSum", {"sq", "axis1"}, {"rs"});
  AttrInts(AddNode(g, "Transpose", {"y"}, {"yt"}), "perm", {1, 0});
  AddNode(g, "MatMul", {"y", "yt"}, {"mm"});
  AddNode(g, "Slice", {"x", "zero", "two", "axis1"}, {"head"});
  AttrInt(AddNode(g, "Concat", {"y", "head"}, {"cat"}), "axis", 1);
  AddNode(g, "Relu", {"cat"}, {"cr"});
  AddNode(g, "Add", {"y", "b"}, {"yb"});
  AddNode(g, "Shape", {"y"}, {"sh"});
  for (const char* o : {"rs", "mm", "cr", "yb", "sh"}) AddOutput(g, o);
  return m;
}

// Whether `want` (hand-computed) equals a Run's output of shape `dims`.
void CheckOutput(const kiln::io::HostTensor& t, const std::vector<int64_t>& dims, const std::vector<float>& want) {
  CHECK(t.dims == dims);
  CHECK(Values<float>(t) == want);
}

// W = 7, 5, 3, 7 through one context (so W = 5 runs on memory that W = 7 wrote): ONNX clamps the
// Slice's start to W, so y is empty for W <= 5, as onnxruntime gives. No guard refuses it.
void CheckSlicePastEnd(kiln::Device device) {
  auto options = OptionsFor(device);
  auto model = kiln::Model::Load(CompileModel(SlicePastEndModel(), options));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 1);
  CHECK(model->entries()[0].prologue_text.find("must be >= 1") == std::string::npos);
  auto ctx = kiln::ExecutionContext::Create(*model, {device});
  REQUIRE(ctx.ok());
  constexpr int64_t N = 3;
  for (int64_t W : {7, 5, 3, 7}) {
    INFO("W = " << W);
    std::vector<float> x(N * W), b = {1, 2, 3};
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 4;
    kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {N, W}),
                             kiln::TensorView::Host(b.data(), kiln::DType::kFloat32, {N, 1})};
    auto out = RunToHost(*ctx, in);
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    REQUIRE(out->size() == 5);
    const int64_t C = std::max<int64_t>(0, W - 5);
    auto at = [&](int64_t n, int64_t c) { return x[static_cast<size_t>(n * W + c)]; };
    std::vector<float> rs, mm, cr, yb;
    for (int64_t n = 0; n < N; ++n) {
      float s = 0;
      for (int64_t c = 5; c < W; ++c) s += at(n, c) * at(n, c);
      rs.push_back(s);
      for (int64_t k = 0; k < N; ++k) {
        float d = 0;
        for (int64_t c = 5; c < W; ++c) d += at(n, c) * at(k, c);
        mm.push_back(d);  // zeros for an empty y: a sum of nothing
      }
      for (int64_t c = 5; c < W; ++c) cr.push_back(std::max(0.0f, at(n, c)));
      for (int64_t c = 0; c < 2; ++c) cr.push_back(std::max(0.0f, at(n, c)));
      for (int64_t c = 5; c < W; ++c) yb.push_back(at(n, c) + b[static_cast<size_t>(n)]);
    }
    CheckOutput((*out)[0], {N, 1}, rs);
    CheckOutput((*out)[1], {N, N}, mm);
    CheckOutput((*out)[2], {N, C + 2}, cr);
    CheckOutput((*out)[3], {N, C}, yb);
    CHECK((*out)[4].dims == std::vector<int64_t>{2});
    CHECK(Values<int64_t>((*out)[4]) == std::vector<int64_t>{N, C});
  }
}

}  // namespace

TEST_CASE("empty tensors: a Slice past the end of a symbolic dim is empty at run time, with no guard") {
  CheckSlicePastEnd(kiln::Device::kCpu);
}

TEST_CASE("empty tensors: a reflect Pad of another axis than the one a Slice left empty") {
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "W"});
  AddInt64Init(g, "five", {1}, {5});
  AddInt64Init(g, "to_end", {1}, {INT64_MAX});
  AddInt64Init(g, "axis1", {1}, {1});
  AddInt64Init(g, "pads", {4}, {1, 0, 1, 0});  // axis 0 by one on each side; axis 1 not at all
  AddNode(g, "Slice", {"x", "five", "to_end", "axis1"}, {"y"}, "tail");
  AttrString(AddNode(g, "Pad", {"y", "pads"}, {"p"}, "pad"), "mode", "reflect");
  AddOutput(g, "p");
  auto model = kiln::Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  for (int64_t W : {3, 7}) {
    INFO("W = " << W);
    std::vector<float> x(static_cast<size_t>(2 * W));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
    kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {2, W})};
    auto out = RunToHost(*ctx, in);
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    // Rows reflected on axis 0: row 1, row 0, row 1, row 0 of x[:, 5:].
    std::vector<float> want;
    for (int64_t r : {1, 0, 1, 0})
      for (int64_t c = 5; c < W; ++c) want.push_back(x[static_cast<size_t>(r * W + c)]);
    CHECK((*out)[0].dims == std::vector<int64_t>{4, std::max<int64_t>(0, W - 5)});
    CHECK(Values<float>((*out)[0]) == want);
  }
}

TEST_CASE("[gpu] empty tensors: a Slice past the end of a symbolic dim on generated kernels and cuBLASLt") {
  KILN_REQUIRE_GPU();
  CheckSlicePastEnd(kiln::Device::kCuda);
}

namespace {

// x[N, 6] -> Reshape(x, Concat(first, second)) with each of first and second either -1 or
// Shape(x)[0] (N): a shape computed from a dim that may be 0.
onnx::ModelProto ReshapeByDimModel(bool n_first) {
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "6"});
  AddInt64Init(g, "i0", {1}, {0});
  AddInt64Init(g, "minus_one", {1}, {-1});
  AddNode(g, "Shape", {"x"}, {"s"});
  AttrInt(AddNode(g, "Gather", {"s", "i0"}, {"n"}), "axis", 0);
  AttrInt(AddNode(g, "Concat", n_first ? std::vector<std::string>{"n", "minus_one"}
                                       : std::vector<std::string>{"minus_one", "n"},
                  {"shape"}),
          "axis", 0);
  AddNode(g, "Reshape", {"x", "shape"}, {"y"}, "reshape");
  AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("empty tensors: a Reshape to a shape computed from a dim that is 0: ONNX's -1 rule, and a copy refused") {
  // [N, -1]: at N = 0 the 0 copies x's dim 0, also 0, and the -1 then divides by 0, which ONNX
  // (and onnxruntime) refuse. [-1, N]: at N = 0 the 0 would copy x's dim 1 (allowzero = 0), 6;
  // onnxruntime gives [0, 6], Kiln refuses it (a copy that makes later dims expressions in both,
  // compiler/ops/meta_shape.cc). At N = 2 both run.
  auto tail = kiln::Model::Load(CompileModel(ReshapeByDimModel(false), CpuOnly()));
  REQUIRE(tail.ok());
  auto ctx = kiln::ExecutionContext::Create(*tail, {kiln::Device::kCpu});
  REQUIRE(ctx.ok());
  const std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  kiln::TensorView two[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {2, 6})};
  auto out = RunToHost(*ctx, two);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  CheckOutput((*out)[0], {6, 2}, x);
  kiln::TensorView none[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {0, 6})};
  out = RunToHost(*ctx, none);
  REQUIRE_FALSE(out.ok());
  CHECK(out.status().message() ==
        "entry 0 (default): guard (0 < ((0 < N)+(6 == N))) from node 'reshape' (Reshape), a 0 at index 1 copies input "
        "dim 1 (6) under allowzero=0, which Kiln refuses in a shape computed from dims does not hold for N = 0 (input "
        "'x' dim 0)");
  auto head = kiln::Model::Load(CompileModel(ReshapeByDimModel(true), CpuOnly()));
  REQUIRE(head.ok());
  auto hctx = kiln::ExecutionContext::Create(*head, {kiln::Device::kCpu});
  REQUIRE(hctx.ok());
  kiln::TensorView empty[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {0, 6})};
  auto refused = RunToHost(*hctx, empty);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() ==
        "entry 0 (default): guard (0 < N) from node 'reshape' (Reshape), the dims besides the -1 must not multiply to "
        "0 does not hold for N = 0 (input 'x' dim 0)");
}
