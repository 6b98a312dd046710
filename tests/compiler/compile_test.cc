// The compiler driver end to end on small models: ONNX -> artifact bytes -> Model::Load ->
// Run, checked against hand-computed values; entries split on a shape-dependent If.
#include "compiler/compile.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

// y = Relu(x) * w + 1, x: float32[N, 3].
onnx::ModelProto AffineModel() {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "3"});
  AddFloatInit(g, "w", {3}, {1.0f, 2.0f, 3.0f});
  AddFloatInit(g, "one", {}, {1.0f});
  AddNode(g, "Relu", {"x"}, {"r"});
  AddNode(g, "Mul", {"r", "w"}, {"m"});
  AddNode(g, "Add", {"m", "one"}, {"y"});
  AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("compile: the artifact round-trips its I/O, entries, stages and weights, and runs") {
  std::vector<uint8_t> bytes = CompileModel(AffineModel());
  auto model = kiln::Model::Load(bytes);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  // No value symbols: the version before them, which older runtimes read (schema/VERSIONS.md).
  CHECK(model->format_version() == kiln::kValueSymbolsFormatVersion - 1);
  REQUIRE(model->inputs().size() == 1);
  CHECK(model->inputs()[0].name == "x");
  CHECK(model->inputs()[0].dtype == kiln::DType::kFloat32);
  REQUIRE(model->inputs()[0].shape.size() == 2);
  CHECK(model->inputs()[0].shape[0].symbol == "N");
  CHECK(model->inputs()[0].shape[1].value == 3);
  REQUIRE(model->outputs().size() == 1);
  CHECK(model->outputs()[0].name == "y");
  CHECK(model->weights_bytes() == 12);  // w; the scalar 1 is folded into the fused program
  REQUIRE(model->entries().size() == 1);
  const kiln::EntryInfo& e = model->entries()[0];
  CHECK(e.compile.stage_names ==
        std::vector<std::string>{"import", "canonical", "fusion", "executors", "plan", "codegen"});
  // Relu, Mul, Add: imported and canonical as three ops, one fused op from then on.
  CHECK(e.compile.stage_ops == std::vector<int32_t>{3, 3, 1, 1, 1, 1});
  CHECK(e.compile.kernels == 1);
  CHECK(e.num_instructions == 1);  // Relu, Mul and Add fused into one kernel
  CHECK(e.stage_traces[1].find("y = Add(m, one)") != std::string::npos);

  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  float x[6] = {-1, 1, 2, 3, -4, 0.5f};
  kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 3})};
  std::vector<kiln::TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  REQUIRE(out.size() == 1);
  CHECK(out[0].rank == 2);
  CHECK(out[0].dims[0] == 2);
  const float* y = static_cast<const float*>(out[0].data);
  const float expected[6] = {1, 3, 7, 4, 1, 2.5f};  // relu(x) * [1,2,3] + 1
  for (int i = 0; i < 6; ++i) CHECK(y[i] == doctest::Approx(expected[i]));
}

TEST_CASE("compile: --shape fixes a symbolic dim, and the prologue then rejects other sizes") {
  kiln::compiler::CompileOptions options = CpuOnly();
  options.input_shapes["x"] = {4, -1};
  auto model = kiln::Model::Load(CompileModel(AffineModel(), options));
  REQUIRE(model.ok());
  CHECK(model->inputs()[0].shape[0].value == 4);
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  float x[6] = {};
  kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 3})};
  std::vector<kiln::TensorView> out;
  kiln::Status st = ctx->Run(in, out);
  CHECK(st.code() == kiln::StatusCode::kInvalidArgument);
  CHECK(st.message().find("input 'x' dim 0 = 2, expected 4") != std::string::npos);
}

TEST_CASE("compile: an If on a symbolic dim becomes one guarded entry per outcome") {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "3"});
  AddFirstDimIsOne(g, "x", "is_one");
  auto* node = AddNode(g, "If", {"is_one"}, {"y"});
  auto* then_g = AddBranch(node, "then_branch");
  AddFloatInit(then_g, "ten", {}, {10.0f});
  AddNode(then_g, "Mul", {"x", "ten"}, {"times_ten"});
  AddOutput(then_g, "times_ten");
  auto* else_g = AddBranch(node, "else_branch");
  AddNode(else_g, "Neg", {"x"}, {"negated"});
  AddOutput(else_g, "negated");
  AddOutput(g, "y");

  auto model = kiln::Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 2);
  CHECK(model->entries()[0].name == "(N == 1)");
  CHECK(model->entries()[1].name == "not (N == 1)");
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  float x[6] = {1, 2, 3, 4, 5, 6};
  std::vector<kiln::TensorView> out;
  kiln::TensorView one[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {1, 3})};
  REQUIRE(ctx->Run(one, out).ok());
  CHECK(ctx->stats().last_entry == 0);
  CHECK(static_cast<const float*>(out[0].data)[2] == 30.0f);
  out.clear();
  kiln::TensorView two[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 3})};
  REQUIRE(ctx->Run(two, out).ok());
  CHECK(ctx->stats().last_entry == 1);
  CHECK(static_cast<const float*>(out[0].data)[5] == -6.0f);
  CHECK(ctx->stats().cache_hits == 2);
}

TEST_CASE("compile: Slice bounds past a symbolic dim clamp at run time, fused or not (ONNX Slice-13)") {
  // a = x[1:1e9] (an exporter's "to the end"), b = x[-3:], c = x[:5] on x float32[T].
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"T"});
  AddInt64Init(g, "one", {1}, {1});
  AddInt64Init(g, "huge", {1}, {1000000000});
  AddInt64Init(g, "minus3", {1}, {-3});
  AddInt64Init(g, "max", {1}, {INT64_MAX});
  AddInt64Init(g, "zero", {1}, {0});
  AddInt64Init(g, "five", {1}, {5});
  AddNode(g, "Slice", {"x", "one", "huge"}, {"a"});
  AddNode(g, "Slice", {"x", "minus3", "max"}, {"b"});
  AddNode(g, "Slice", {"x", "zero", "five"}, {"c"});
  for (const char* o : {"a", "b", "c"}) AddOutput(g, o);
  for (bool fuse : {false, true}) {
    auto options = CpuOnly();
    options.fuse = fuse;
    auto model = kiln::Model::Load(CompileModel(m, options));
    REQUIRE(model.ok());
    // No guard on T: `a` is min(1e9, T) - 1 >= 0 long, empty at T = 1, as onnxruntime runs it.
    const std::string& prologue = model->entries()[0].prologue_text;
    CHECK(prologue.find("check (") == std::string::npos);
    for (int64_t t : {1, 2, 4, 7}) {
      std::vector<float> x(t);
      for (int64_t i = 0; i < t; ++i) x[i] = static_cast<float>(10 + i);
      kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {t})};
      auto y = RunFloat(CompileModel(m, options), in);
      CAPTURE(fuse);
      CAPTURE(t);
      CHECK(y[0] == std::vector<float>(x.begin() + 1, x.end()));
      CHECK(y[1] == std::vector<float>(x.end() - std::min<int64_t>(3, t), x.end()));
      CHECK(y[2] == std::vector<float>(x.begin(), x.begin() + std::min<int64_t>(5, t)));
    }
  }
}

TEST_CASE("compile: without a profile every symbolic dim may be 0 (a KV cache's first step, an empty batch)") {
  // present = Concat(past, Relu(x), axis=-2) on past float32[B, P, 2] and x float32[B, S, 2], as a
  // decoder's cache: P = 0 at the first step, B = 0 or S = 0 run too, through the one entry.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "past", {"B", "P", "2"});
  AddInput(g, "x", {"B", "S", "2"});
  AddNode(g, "Relu", {"x"}, {"r"});
  AttrInt(AddNode(g, "Concat", {"past", "r"}, {"present"}, "cache"), "axis", -2);
  AddOutput(g, "present");
  auto model = kiln::Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 1);
  CHECK(model->entries()[0].name == "default");
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const std::vector<float> x = {1, -2, 3, 4, 5, 6}, past = {7, 8, 9, 10};
  struct Call {
    int64_t b, p, s;
  };
  for (const Call& call : {Call{1, 0, 3}, Call{1, 2, 3}, Call{1, 2, 0}, Call{0, 2, 3}, Call{1, 0, 0}}) {
    const int64_t b = call.b, p = call.p, s = call.s;
    CAPTURE(b);
    CAPTURE(p);
    CAPTURE(s);
    kiln::TensorView in[] = {kiln::TensorView::Host(past.data(), kiln::DType::kFloat32, {b, p, 2}),
                             kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {b, s, 2})};
    std::vector<kiln::TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    REQUIRE(out[0].rank == 3);
    CHECK(out[0].dims[0] == b);
    CHECK(out[0].dims[1] == p + s);
    std::vector<float> want;
    if (b == 1) {
      want.assign(past.begin(), past.begin() + 2 * p);
      for (int64_t i = 0; i < 2 * s; ++i) want.push_back(std::max(x[static_cast<size_t>(i)], 0.0f));
    }
    const auto* got = static_cast<const float*>(out[0].data);
    CHECK(std::vector<float>(got, got + want.size()) == want);
  }
}

TEST_CASE("compile: a float Range over a Cast shape value has a symbolic length (YOLOv8's anchor grid)") {
  // y = Range(0.0, Cast<float>(W), 1.0) + 0.5 on x float32[1, 3, H, W]: the length is W, not data.
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "3", "H", "W"});
  AddInt64Init(g, "i3", {}, {3});
  AddFloatInit(g, "zero", {}, {0.0f});
  AddFloatInit(g, "one", {}, {1.0f});
  AddFloatInit(g, "half", {}, {0.5f});
  AddNode(g, "Shape", {"x"}, {"s"});
  AttrInt(AddNode(g, "Gather", {"s", "i3"}, {"w"}), "axis", 0);
  AttrInt(AddNode(g, "Cast", {"w"}, {"wf"}), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Range", {"zero", "wf", "one"}, {"r"}, "grid");
  AddNode(g, "Add", {"r", "half"}, {"y"});
  AddOutput(g, "y");
  auto model = kiln::Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  CHECK(model->outputs()[0].shape[0].symbol == "W");
  // The canonical trace ranges over int64 and casts the result.
  CHECK(model->entries()[0].stage_traces[1].find("= Range(") != std::string::npos);
  CHECK(model->entries()[0].stage_traces[1].find("int64[W]") != std::string::npos);
  std::vector<float> x(3 * 2 * 4);
  kiln::TensorView in[] = {kiln::TensorView::Host(x.data(), kiln::DType::kFloat32, {1, 3, 2, 4})};
  CHECK(RunFloat(CompileModel(m), in)[0] == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f});
  // A Range whose delta is not a whole number is data, as before.
  g->mutable_initializer(2)->set_float_data(0, 0.5f);
  auto path = std::filesystem::temp_directory_path() / ("kiln_range_" + std::to_string(::getpid()) + ".onnx");
  std::string data;
  REQUIRE(m.SerializeToString(&data));
  std::ofstream(path, std::ios::binary) << data;
  auto r = kiln::compiler::CompileOnnxFile(path.string(), CpuOnly(), nullptr);
  std::filesystem::remove(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "node 'grid' (Range): data-dependent output shape: Range limit (wf) is not known at compile time (a "
        "floating-point Range's size needs start, limit and delta known)");
}

TEST_CASE("compile: a Range whose start, limit and delta are inputs, delta of either sign, from one entry") {
  // r = Range(s, l, d), all int32 scalar inputs: the length max(0, ceil((l - s) / d)) is computed
  // at each call, whatever d's sign.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  for (const char* name : {"s", "l", "d"}) AddInput(g, name, {}, onnx::TensorProto::INT32);
  AddNode(g, "Range", {"s", "l", "d"}, {"r"}, "range");
  AddOutput(g, "r");
  auto model = kiln::Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 1);
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  auto run = [&](int32_t s, int32_t l, int32_t d) -> kiln::Result<std::vector<int32_t>> {
    kiln::TensorView in[] = {kiln::TensorView::Host(&s, kiln::DType::kInt32, {}),
                             kiln::TensorView::Host(&l, kiln::DType::kInt32, {}),
                             kiln::TensorView::Host(&d, kiln::DType::kInt32, {})};
    KILN_ASSIGN_OR_RETURN(std::vector<kiln::io::HostTensor> out, RunToHost(*ctx, in));
    return Values<int32_t>(out[0]);
  };
  auto values = [&](int32_t s, int32_t l, int32_t d) {
    auto r = run(s, l, d);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  };
  CHECK(values(0, 7, 3) == std::vector<int32_t>{0, 3, 6});       // ceil(7 / 3) = 3
  CHECK(values(10, 4, -3) == std::vector<int32_t>{10, 7});       // ceil(-6 / -3) = 2
  CHECK(values(10, 3, -3) == std::vector<int32_t>{10, 7, 4});    // ceil(-7 / -3) = 3
  CHECK(values(5, 2, -1) == std::vector<int32_t>{5, 4, 3});
  CHECK(values(0, 5, -1).empty());                               // ceil(5 / -1) = -5: empty
  CHECK(values(5, 0, 2).empty());                                // ceil(-5 / 2) = -2: empty
  CHECK(values(4, 4, -2).empty());
  // A delta of 0 has no length; the prologue's guard says so.
  auto zero = run(0, 5, 0);
  REQUIRE_FALSE(zero.ok());
  CHECK_MESSAGE(zero.status().message().find("from node 'range' (Range), whose delta must be nonzero") !=
                    std::string_view::npos,
                zero.status().message());
}
