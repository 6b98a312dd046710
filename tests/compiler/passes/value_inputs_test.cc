// Value inputs (compiler/passes/value_inputs.h): an int input whose values reach an If
// condition or a value shape operand gets value symbols, which the prologue binds from its
// elements.
#include "compiler/passes/value_inputs.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {
namespace {

// Runs `in` and copies every output's values (as floats) and dims.
Status RunCopies(ExecutionContext& ctx, std::span<const TensorView> in, std::vector<std::vector<float>>* y,
                 std::vector<std::vector<int64_t>>* dims) {
  std::vector<TensorView> out;
  KILN_RETURN_IF_ERROR(ctx.Run(in, out));
  *y = FloatCopies(out);
  dims->clear();
  for (const TensorView& o : out) dims->emplace_back(o.dims, o.dims + o.rank);
  return Status::Ok();
}

// The same for output 0 alone.
Status RunFirstCopy(ExecutionContext& ctx, std::span<const TensorView> in, std::vector<float>* y,
                    std::vector<int64_t>* dims) {
  std::vector<std::vector<float>> ys;
  std::vector<std::vector<int64_t>> all_dims;
  KILN_RETURN_IF_ERROR(RunCopies(ctx, in, &ys, &all_dims));
  *y = ys[0];
  *dims = all_dims[0];
  return Status::Ok();
}

// y = mode == 1 ? x * 2 : x + 10, with `mode` an int64 scalar input (as Silero's `sr`).
onnx::ModelProto IfOnValueModel() {
  auto m = MakeModel(16);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"N"});
  AddInput(g, "mode", {}, onnx::TensorProto::INT64);
  AddInt64Init(g, "one", {}, {1});
  AddNode(g, "Equal", {"mode", "one"}, {"is_one"}, "eq");
  auto* node = AddNode(g, "If", {"is_one"}, {"y"}, "branch");
  auto* then_g = AddBranch(node, "then_branch");
  AddFloatInit(then_g, "two", {}, {2.0f});
  AddNode(then_g, "Mul", {"x", "two"}, {"doubled"});
  AddOutput(then_g, "doubled");
  auto* else_g = AddBranch(node, "else_branch");
  AddFloatInit(else_g, "ten", {}, {10.0f});
  AddNode(else_g, "Add", {"x", "ten"}, {"shifted"});
  AddOutput(else_g, "shifted");
  AddOutput(g, "y");
  return m;
}

TEST_CASE("value inputs: an If on an input's value compiles to one entry per outcome, picked by the value") {
  const std::vector<uint8_t> bytes = CompileModel(IfOnValueModel());
  auto model = Model::Load(bytes);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->format_version() == 4);  // value symbols (schema/VERSIONS.md)
  REQUIRE(model->entries().size() == 2);
  // `mode` stays an input, checked by value.
  REQUIRE(model->inputs().size() == 2);
  CHECK(model->inputs()[1].name == "mode");
  CHECK(model->entries()[0].prologue_text.find("mode = mode.values[0]") != std::string::npos);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  std::vector<float> x = {1, 2, 3};
  for (int64_t mode : {1, 0, 7, 1, -3}) {
    CAPTURE(mode);
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {3}), TensorView::Host(&mode, DType::kInt64, {})};
    std::vector<TensorView> out;
    Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    const std::vector<float> want = mode == 1 ? std::vector<float>{2, 4, 6} : std::vector<float>{11, 12, 13};
    CHECK(FloatCopies(out)[0] == want);
  }
  CHECK(ctx->stats().cache_hits == 5);
  // Device memory: a CPU context refuses any input there (the CUDA backend, which takes inputs in
  // either memory, refuses a value input there: tests/runtime/prologue_test.cc).
  int64_t mode = 1;
  TensorView dev = TensorView::Host(&mode, DType::kInt64, {});
  dev.memory = MemoryKind::kDevice;
  TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {3}), dev};
  std::vector<TensorView> out;
  Status st = ctx->Run(in, out);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message().find("input 'mode' is in device memory") != std::string::npos);
}

TEST_CASE("value inputs: when the entries cannot be compiled with value symbols, the model compiles as without them") {
  auto m = IfOnValueModel();
  m.mutable_opset_import(0)->set_version(18);  // Resize-18: keep_aspect_ratio_policy
  auto* g = m.mutable_graph();
  AddInt64Init(g, "axes0", {1}, {0});
  AddNode(g, "Unsqueeze", {"mode", "axes0"}, {"mode_1d"}, "unsqueeze");
  AddFloatInit(g, "fill", {1, 1}, {7.0f});
  AddInt64Init(g, "one_row", {1}, {1});
  AttrInt(AddNode(g, "Concat", {"one_row", "mode_1d"}, {"sizes"}, "concat"), "axis", 0);
  // A kept aspect ratio rounds sizes / input in float: no expression of a value symbol.
  AttrString(AddNode(g, "Resize", {"fill", "", "", "sizes"}, {"filled"}, "resize"), "keep_aspect_ratio_policy",
             "not_larger");
  AddOutput(g, "filled");
  const auto path = std::filesystem::temp_directory_path() / ("kiln_value_inputs_" + std::to_string(::getpid()) + ".onnx");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  compiler::CompileOptions options = CpuOnly();
  std::vector<std::string> log;
  options.log = [&](const std::string& line) { log.push_back(line); };
  auto artifact = compiler::CompileOnnxFile(path.string(), options, nullptr);
  std::filesystem::remove(path);
  CHECK(std::find(log.begin(), log.end(),
                  "value inputs: node 'resize' (Resize): keep_aspect_ratio_policy \"not_larger\": expected static sizes "
                  "and input dims on the resized axes, found sizes [1, mode] and X [1, 1]; compiling without them") !=
        log.end());
  // Without them, the If on the input's data becomes a run-time If, and the Resize's sizes,
  // which depend on the input's values, are refused with the profile to add.
  REQUIRE_FALSE(artifact.ok());
  CHECK(artifact.status().code() == StatusCode::kUnimplemented);
  CHECK_MESSAGE(artifact.status().message().find("node 'resize' (Resize): data-dependent output shape: sizes (sizes) is "
                                                 "not known at compile time; it depends on the values of input 'mode'") !=
                    std::string::npos,
                artifact.status().message());
}

TEST_CASE("value inputs: Slice, TopK, Tile, ConstantOfShape and Range take their sizes from an input's values") {
  // x float32[6]; s, e, k, r, c int64[1]; n int64 scalar. Every output's size comes from a value.
  auto m = MakeModel(16);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"6"});
  for (const char* name : {"s", "e", "k", "r", "c"}) AddInput(g, name, {"1"}, onnx::TensorProto::INT64);
  AddInput(g, "n", {}, onnx::TensorProto::INT64);
  AddInt64Init(g, "zero", {}, {0});
  AddInt64Init(g, "one", {}, {1});
  AddNode(g, "Slice", {"x", "s", "e"}, {"sliced"}, "slice");
  AddNode(g, "TopK", {"x", "k"}, {"top", "top_indices"}, "topk");
  AddNode(g, "Tile", {"x", "r"}, {"tiled"}, "tile");
  AddNode(g, "ConstantOfShape", {"c"}, {"zeros"}, "fill");
  AddNode(g, "Range", {"zero", "n", "one"}, {"steps"}, "range");
  for (const char* name : {"sliced", "top", "tiled", "zeros", "steps"}) AddOutput(g, name);
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 1);
  REQUIRE(model->inputs().size() == 7);  // every input kept
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[6] = {5, 1, 4, 2, 6, 3};
  auto run = [&](int64_t s, int64_t e, int64_t k, int64_t r, int64_t c, int64_t n,
                 std::vector<std::vector<float>>* floats, std::vector<int64_t>* steps) -> Status {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {6}), TensorView::Host(&s, DType::kInt64, {1}),
                       TensorView::Host(&e, DType::kInt64, {1}),  TensorView::Host(&k, DType::kInt64, {1}),
                       TensorView::Host(&r, DType::kInt64, {1}),  TensorView::Host(&c, DType::kInt64, {1}),
                       TensorView::Host(&n, DType::kInt64, {})};
    std::vector<TensorView> out;
    KILN_RETURN_IF_ERROR(ctx->Run(in, out));
    *floats = FloatCopies(std::span<const TensorView>(out.data(), 4));
    const int64_t* p = static_cast<const int64_t*>(out[4].data);
    steps->assign(p, p + out[4].num_elements());
    return Status::Ok();
  };
  std::vector<std::vector<float>> y;
  std::vector<int64_t> steps;
  REQUIRE(run(1, 4, 2, 2, 3, 4, &y, &steps).ok());
  CHECK(y[0] == std::vector<float>{1, 4, 2});
  CHECK(y[1] == std::vector<float>{6, 5});
  CHECK(y[2] == std::vector<float>{5, 1, 4, 2, 6, 3, 5, 1, 4, 2, 6, 3});
  CHECK(y[3] == std::vector<float>{0, 0, 0});
  CHECK(steps == std::vector<int64_t>{0, 1, 2, 3});
  // Negative and out-of-range Slice bounds are clamped as ONNX says, at run time.
  REQUIRE(run(-2, INT64_MAX, 6, 1, 1, 1, &y, &steps).ok());
  CHECK(y[0] == std::vector<float>{6, 3});
  CHECK(y[1] == std::vector<float>{6, 5, 4, 3, 2, 1});
  REQUIRE(run(-100, -5, 1, 1, 1, 1, &y, &steps).ok());
  CHECK(y[0] == std::vector<float>{5});
  // What the guards exclude is a miss naming the value: K past the axis, an empty output.
  const std::string too_big = std::string(run(0, 6, 7, 1, 1, 1, &y, &steps).message());
  CHECK(too_big.find("guard (1-(6 < k_0)) from node 'topk' (TopK) does not hold for k_0 = 7 (input 'k' element 0)") !=
        std::string::npos);
  // A huge or overflowing value is a precise error, never an allocation or a wrong size.
  const Status huge = run(0, 6, 1, 1, 1000000000000000, 1, &y, &steps);
  CHECK(huge.code() == StatusCode::kResourceExhausted);
  CHECK(huge.message().find("these shapes need an arena of 4000000000000256 bytes") != std::string::npos);
  const Status overflow = run(0, 6, 1, 4611686018427387904, 1, 1, &y, &steps);
  CHECK(overflow.code() == StatusCode::kInvalidArgument);
  CHECK(overflow.message().find("from node 'tile' (Tile), whose output 'tiled' dim 0 must be >= 0 could not be "
                                "evaluated for r_0 = 4611686018427387904 (input 'r' element 0): expr") != std::string::npos);
  CHECK(overflow.message().find("(6 * r_0): int64 overflow computing 6 * 4611686018427387904") != std::string::npos);
  // An empty Range (n <= 0) or Slice (s >= e) is an empty tensor, as onnxruntime gives: their
  // lengths are clamped at 0, so no guard refuses it.
  REQUIRE(run(0, 6, 1, 1, 1, 0, &y, &steps).ok());
  CHECK(steps.empty());
  REQUIRE(run(4, 1, 1, 1, 1, -5, &y, &steps).ok());
  CHECK(y[0].empty());
  CHECK(steps.empty());
  // A size read from a value may be 0 (ONNX's empty tensor, onnxruntime's result: TopK's K,
  // Tile's repeats, ConstantOfShape's dims), never negative.
  REQUIRE(run(1, 4, 0, 0, 0, 2, &y, &steps).ok());
  CHECK(y[0] == std::vector<float>{1, 4, 2});
  CHECK(y[1].empty());
  CHECK(y[2].empty());
  CHECK(y[3].empty());
  CHECK(steps == std::vector<int64_t>{0, 1});
  const std::string negative = std::string(run(1, 4, 1, 1, -1, 2, &y, &steps).message());
  CHECK_MESSAGE(negative.find("guard (-1 < c_0) from node 'fill' (ConstantOfShape), whose output 'zeros' dim 0 must be "
                              ">= 0 does not hold for c_0 = -1") != std::string::npos,
                negative);
  REQUIRE(run(1, 4, 2, 2, 3, 4, &y, &steps).ok());  // and back
  CHECK(y[0] == std::vector<float>{1, 4, 2});
  CHECK(steps == std::vector<int64_t>{0, 1, 2, 3});
}

TEST_CASE("value inputs: an int input read only through Shape, as data or as a shape operand, is not one") {
  auto m = MakeModel(16);
  auto* g = m.mutable_graph();
  AddInput(g, "ids", {"2", "4"}, onnx::TensorProto::INT64);
  AddInput(g, "x", {"8"});
  AddNode(g, "Shape", {"ids"}, {"s"}, "shape");
  AddNode(g, "Reshape", {"x", "s"}, {"flat"}, "reshape");  // ids' shape, not its values
  AddFloatInit(g, "table", {8, 2}, std::vector<float>(16, 1.0f));
  AddNode(g, "Gather", {"table", "ids"}, {"rows"}, "gather");  // ids as data
  AddOutput(g, "flat");
  AddOutput(g, "rows");
  auto imported = Import(m);
  REQUIRE(imported.ok());
  CHECK(passes::MarkValueInputs(*imported).empty());
  auto model = Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  CHECK(model->format_version() == 3);  // no value symbols: older runtimes still read it
}

}  // namespace


TEST_CASE("value inputs: Slice's axes and steps, Squeeze's, Unsqueeze's and Pad's axes, read at each call") {
  // s = Slice(x float32[4, 6], starts, ends, axes, steps); q = Squeeze(z float32[1, 3, 1], qa int64[1]);
  // u = Unsqueeze(w float32[2, 3], ua int64[2]); p = Pad(w, pads int64[2], 0, pa int64[1]).
  auto m = MakeModel(19);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4", "6"});
  for (const char* name : {"starts", "ends", "axes", "steps", "qa", "pa"})
    AddInput(g, name, {"1"}, onnx::TensorProto::INT64);
  AddInput(g, "z", {"1", "3", "1"});
  AddInput(g, "w", {"2", "3"});
  AddInput(g, "ua", {"2"}, onnx::TensorProto::INT64);
  AddInput(g, "pads", {"2"}, onnx::TensorProto::INT64);
  AddNode(g, "Slice", {"x", "starts", "ends", "axes", "steps"}, {"s"}, "slice");
  AddNode(g, "Squeeze", {"z", "qa"}, {"q"}, "squeeze");
  AddNode(g, "Unsqueeze", {"w", "ua"}, {"u"}, "unsqueeze");
  AddNode(g, "Pad", {"w", "pads", "", "pa"}, {"p"}, "pad");
  for (const char* name : {"s", "q", "u", "p"}) AddOutput(g, name);
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 1);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const float z[3] = {7, 8, 9}, w[6] = {1, 2, 3, 4, 5, 6};
  struct Call {
    int64_t start, end, axis, step, qa, pa;
    std::vector<int64_t> ua, pads;
  };
  auto run = [&](Call c, std::vector<std::vector<float>>* y, std::vector<std::vector<int64_t>>* dims) -> Status {
    const auto one = [](const int64_t* v) { return TensorView::Host(v, DType::kInt64, {1}); };
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {4, 6}),
                       one(&c.start),
                       one(&c.end),
                       one(&c.axis),
                       one(&c.step),
                       one(&c.qa),
                       one(&c.pa),
                       TensorView::Host(z, DType::kFloat32, {1, 3, 1}),
                       TensorView::Host(w, DType::kFloat32, {2, 3}),
                       TensorView::Host(c.ua.data(), DType::kInt64, {2}),
                       TensorView::Host(c.pads.data(), DType::kInt64, {2})};
    return RunCopies(*ctx, in, y, dims);
  };
  std::vector<std::vector<float>> y;
  std::vector<std::vector<int64_t>> dims;
  // Columns 2..4 of each row; z's dim 0 squeezed; w as [2, 1, 3, 1]; w's rows padded 1 before, 0 after.
  REQUIRE(run({-4, 5, 1, 1, 0, 0, {1, 3}, {1, 0}}, &y, &dims).ok());
  CHECK(y[0] == std::vector<float>{2, 3, 4, 8, 9, 10, 14, 15, 16, 20, 21, 22});
  CHECK(dims[1] == std::vector<int64_t>{3, 1});
  CHECK(dims[2] == std::vector<int64_t>{2, 1, 3, 1});
  CHECK(y[3] == std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6});
  // Rows 3, 1 backwards (axis -2, step -2); z's last dim squeezed; w as [1, 2, 3, 1] (axes -1, 0);
  // w's columns padded 0 before, 2 after.
  REQUIRE(run({INT64_MAX, -5, -2, -2, -1, -1, {-1, 0}, {0, 2}}, &y, &dims).ok());
  CHECK(dims[0] == std::vector<int64_t>{2, 6});
  CHECK(y[0] == std::vector<float>{18, 19, 20, 21, 22, 23, 6, 7, 8, 9, 10, 11});
  CHECK(dims[1] == std::vector<int64_t>{1, 3});
  CHECK(dims[2] == std::vector<int64_t>{1, 2, 3, 1});
  CHECK(y[3] == std::vector<float>{1, 2, 3, 0, 0, 4, 5, 6, 0, 0});
  // Each rule ONNX states, checked by the prologue with the input and element.
  auto fails = [&](Call c, const char* why) {
    const std::string message(run(c, &y, &dims).message());
    CHECK_MESSAGE(message.find(why) != std::string::npos, message);
  };
  fails({0, 1, 2, 1, 0, 0, {1, 3}, {0, 0}}, "whose axes must be in [-rank, rank-1]");
  fails({0, 1, 0, 0, 0, 0, {1, 3}, {0, 0}}, "whose steps must be nonzero does not hold for steps_0 = 0");
  fails({0, 1, 0, 1, 1, 0, {1, 3}, {0, 0}}, "whose axes must name dims of size 1");
  fails({0, 1, 0, 1, 0, 0, {1, -3}, {0, 0}}, "whose axes must be distinct");
}

TEST_CASE("value inputs: DFT's axis and dft_length read at each call") {
  // y = DFT(x float32[2, 4, 1], dft_length int64[], axis int64[]) (opset 20), one-sided: the
  // transformed axis has floor(n / 2) + 1 bins.
  auto m = MakeModel(20);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "4", "1"});
  AddInput(g, "n", {}, onnx::TensorProto::INT64);
  AddInput(g, "axis", {}, onnx::TensorProto::INT64);
  AttrInt(AddNode(g, "DFT", {"x", "n", "axis"}, {"y"}, "dft"), "onesided", 1);
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto run = [&](int64_t n, int64_t axis, std::vector<float>* y, std::vector<int64_t>* dims) -> Status {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 4, 1}), TensorView::Host(&n, DType::kInt64, {}),
                       TensorView::Host(&axis, DType::kInt64, {})};
    return RunFirstCopy(*ctx, in, y, dims);
  };
  std::vector<float> y;
  std::vector<int64_t> dims;
  // Along axis 1 with n = 4: bins 0..2 of [1, 2, 3, 4]: 10, -2 + 2i, -2.
  REQUIRE(run(4, 1, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{2, 3, 2});
  const float want[6] = {10, 0, -2, 2, -2, 0};
  for (int k = 0; k < 6; ++k) CHECK(y[k] == doctest::Approx(want[k]).epsilon(1e-6));
  // Along axis 0 (-3) with n = 2: bins 0..1 of [1, 5]: 6, -4.
  REQUIRE(run(2, -3, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{2, 4, 2});
  CHECK(y[0] == doctest::Approx(6));
  CHECK(y[8] == doctest::Approx(-4));
  const std::string last(run(4, 2, &y, &dims).message());
  CHECK_MESSAGE(last.find("whose axis must be a signal axis (not the last)") != std::string::npos, last);
  const std::string empty(run(0, 1, &y, &dims).message());
  CHECK_MESSAGE(empty.find("whose dft_length must be >= 1") != std::string::npos, empty);
}

TEST_CASE("value inputs: Reshape to a shape input, with its 0 and -1 decided at each call") {
  auto m = MakeModel(16);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3", "4"});
  AddInput(g, "shape", {"3"}, onnx::TensorProto::INT64);
  AddNode(g, "Reshape", {"x", "shape"}, {"y"}, "reshape");
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  REQUIRE(model->inputs().size() == 2);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  std::vector<float> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto run = [&](std::vector<int64_t> shape, std::vector<int64_t>* dims) -> Status {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {2, 3, 4}),
                       TensorView::Host(shape.data(), DType::kInt64, {3})};
    std::vector<TensorView> out;
    KILN_RETURN_IF_ERROR(ctx->Run(in, out));
    dims->assign(out[0].dims, out[0].dims + out[0].rank);
    CHECK(FloatCopies(out)[0] == x);  // a reshape keeps the elements in order
    return Status::Ok();
  };
  std::vector<int64_t> dims;
  REQUIRE(run({4, -1, 2}, &dims).ok());
  CHECK(dims == std::vector<int64_t>{4, 3, 2});
  REQUIRE(run({0, 3, -1}, &dims).ok());  // 0 copies the input's dim 0
  CHECK(dims == std::vector<int64_t>{2, 3, 4});
  REQUIRE(run({2, 12, 1}, &dims).ok());
  CHECK(dims == std::vector<int64_t>{2, 12, 1});
  // What the spec forbids fails the prologue, naming the values.
  CHECK(run({5, -1, 1}, &dims).message().find("does not hold for shape_0 = 5 (input 'shape' element 0)") !=
        std::string::npos);
  CHECK(run({-1, -1, 24}, &dims).message().find("(((shape_0 == -1)+(shape_1 == -1))+(shape_2 == -1)) < 2") !=
        std::string::npos);
  CHECK(run({-3, 2, 4}, &dims).message().find("does not hold for shape_0 = -3 (input 'shape' element 0)") !=
        std::string::npos);
}


TEST_CASE("value inputs: Expand to a shape input and Split by a sizes input") {
  // e = Expand(x float32[3, 1], shape int64[3]); a, b = Split(z float32[6], split int64[2]).
  auto m = MakeModel(16);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"3", "1"});
  AddInput(g, "shape", {"3"}, onnx::TensorProto::INT64);
  AddInput(g, "z", {"6"});
  AddInput(g, "split", {"2"}, onnx::TensorProto::INT64);
  AddNode(g, "Expand", {"x", "shape"}, {"e"}, "expand");
  AddNode(g, "Split", {"z", "split"}, {"a", "b"}, "split");
  for (const char* name : {"e", "a", "b"}) AddOutput(g, name);
  auto model = Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  REQUIRE(model->inputs().size() == 4);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[3] = {1, 2, 3}, z[6] = {10, 11, 12, 13, 14, 15};
  auto run = [&](std::vector<int64_t> shape, std::vector<int64_t> split, std::vector<std::vector<float>>* y,
                 std::vector<int64_t>* e_dims) -> Status {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {3, 1}), TensorView::Host(shape.data(), DType::kInt64, {3}),
                       TensorView::Host(z, DType::kFloat32, {6}), TensorView::Host(split.data(), DType::kInt64, {2})};
    std::vector<TensorView> out;
    KILN_RETURN_IF_ERROR(ctx->Run(in, out));
    *y = FloatCopies(out);
    e_dims->assign(out[0].dims, out[0].dims + out[0].rank);
    return Status::Ok();
  };
  std::vector<std::vector<float>> y;
  std::vector<int64_t> dims;
  // shape [2, 1, 2]: the 1 keeps x's 3 (numpy broadcasting), the 2s add and widen dims.
  REQUIRE(run({2, 1, 2}, {2, 4}, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{2, 3, 2});
  CHECK(y[0] == std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(y[1] == std::vector<float>{10, 11});
  CHECK(y[2] == std::vector<float>{12, 13, 14, 15});
  REQUIRE(run({1, 3, 1}, {5, 1}, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{1, 3, 1});
  CHECK(y[2] == std::vector<float>{15});
  // A dim that neither equals x's nor is 1, and sizes that do not sum to the dim, fail the prologue.
  CHECK(run({1, 4, 1}, {2, 4}, &y, &dims).message().find("(input 'shape' element 1)") != std::string::npos);
  CHECK(run({1, 3, 1}, {2, 3}, &y, &dims).message().find("(input 'split' element 1)") != std::string::npos);
}

TEST_CASE("value inputs: Resize by a float scales input and OneHot with a float depth, read as float32 bits") {
  // r = Resize(x float32[1, 1, 2, 2], roi = "", scales float32[4]) nearest; h = OneHot(i int64[3], depth float32[]).
  auto m = MakeModel(19);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "1", "2", "2"});
  AddInput(g, "scales", {"4"});
  AddInput(g, "i", {"3"}, onnx::TensorProto::INT64);
  AddInput(g, "depth", {});
  AddFloatInit(g, "onoff", {2}, {0, 1});
  AddNode(g, "Resize", {"x", "", "scales"}, {"r"}, "resize");
  AddNode(g, "OneHot", {"i", "depth", "onoff"}, {"h"}, "onehot");
  AddOutput(g, "r");
  AddOutput(g, "h");
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 1);
  const std::string& prologue = model->entries()[0].prologue_text;
  CHECK_MESSAGE(prologue.find("whose scales element 2 must be positive") != std::string::npos, prologue);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[4] = {1, 2, 3, 4};
  const int64_t idx[3] = {0, 2, -1};
  auto run = [&](std::vector<float> scales, float depth, std::vector<std::vector<float>>* y,
                 std::vector<std::vector<int64_t>>* dims) -> Status {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {1, 1, 2, 2}),
                       TensorView::Host(scales.data(), DType::kFloat32, {4}),
                       TensorView::Host(idx, DType::kInt64, {3}), TensorView::Host(&depth, DType::kFloat32, {})};
    return RunCopies(*ctx, in, y, dims);
  };
  std::vector<std::vector<float>> y;
  std::vector<std::vector<int64_t>> dims;
  // Nearest upsampling by 2 x 1.5: floor(2 * 1.5) = 3 columns, column c from input column
  // (c + 0.5) / 1.5 - 0.5 rounded half down (half_pixel, round_prefer_floor): 0, 0, 1; rows 0, 0, 1, 1.
  // A depth of 3.7 is 3 (truncated, as ONNX casts it).
  REQUIRE(run({1, 1, 2, 1.5f}, 3.7f, &y, &dims).ok());
  CHECK(dims[0] == std::vector<int64_t>{1, 1, 4, 3});
  CHECK(y[0] == std::vector<float>{1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
  CHECK(dims[1] == std::vector<int64_t>{3, 3});
  CHECK(y[1] == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 1});  // -1 is the last class
  // Downsampling by 0.6 from the same artifact: floor(2 * 0.6f) = 1; a depth of 5.
  REQUIRE(run({1, 1, 0.6f, 0.6f}, 5.0f, &y, &dims).ok());
  CHECK(dims[0] == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(dims[1] == std::vector<int64_t>{3, 5});
  // A negative or infinite scale, or a depth below 1, fails the prologue with the element it reads.
  const std::string negative(run({1, 1, -2, 1}, 3, &y, &dims).message());
  CHECK_MESSAGE(negative.find("whose scales element 2 must be finite does not hold for scales_2 = -2 (input 'scales' "
                              "element 2)") != std::string::npos,
                negative);
  const std::string inf(run({1, 1, 2, INFINITY}, 3, &y, &dims).message());
  // (The prologue evaluates the sizes before it checks the guards: the infinite size is the error.)
  CHECK_MESSAGE(inf.find("could not be evaluated for scales_3 = inf (input 'scales' element 3): expr") !=
                    std::string::npos,
                inf);
  const std::string shallow(run({1, 1, 2, 2}, 0.5f, &y, &dims).message());
  CHECK_MESSAGE(shallow.find("whose depth must be >= 1 does not hold for depth = 0.5 (input 'depth' element 0)") !=
                    std::string::npos,
                shallow);
}

TEST_CASE("value inputs: Pad by a pads input and a window of an input's size") {
  // p = Pad(x float32[4], pads int64[2], mode reflect); w = HannWindow(size int64 scalar).
  auto m = MakeModel(17);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"4"});
  AddInput(g, "pads", {"2"}, onnx::TensorProto::INT64);
  AddInput(g, "size", {}, onnx::TensorProto::INT64);
  AttrString(AddNode(g, "Pad", {"x", "pads"}, {"p"}, "pad"), "mode", "reflect");
  AddNode(g, "HannWindow", {"size"}, {"w"}, "window");
  AddOutput(g, "p");
  AddOutput(g, "w");
  auto model = Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  REQUIRE(model->inputs().size() == 3);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[4] = {1, 2, 3, 4};
  auto run = [&](std::vector<int64_t> pads, int64_t size, std::vector<std::vector<float>>* y) -> Status {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {4}), TensorView::Host(pads.data(), DType::kInt64, {2}),
                       TensorView::Host(&size, DType::kInt64, {})};
    std::vector<TensorView> out;
    KILN_RETURN_IF_ERROR(ctx->Run(in, out));
    *y = FloatCopies(out);
    return Status::Ok();
  };
  std::vector<std::vector<float>> y;
  REQUIRE(run({2, 1}, 4, &y).ok());
  CHECK(y[0] == std::vector<float>{3, 2, 1, 2, 3, 4, 3});  // numpy.pad(x, (2, 1), 'reflect')
  REQUIRE(y[1].size() == 4);                                 // periodic Hann of 4: 0, 0.5, 1, 0.5
  CHECK(y[1][0] == doctest::Approx(0.0).epsilon(1e-6));
  CHECK(y[1][1] == doctest::Approx(0.5).epsilon(1e-6));
  CHECK(y[1][2] == doctest::Approx(1.0).epsilon(1e-6));
  REQUIRE(run({-1, 0}, 2, &y).ok());  // a negative pad crops
  CHECK(y[0] == std::vector<float>{2, 3, 4});
  CHECK(y[1].size() == 2);
  // Reflection reaching past the elements is refused at run time, naming the node.
  const Status far = run({5, 0}, 2, &y);
  CHECK_FALSE(far.ok());
  CHECK(far.message().find("Pad") != std::string::npos);
}

TEST_CASE("value inputs: Col2Im's image_shape and block_shape, two images from one artifact") {
  // y = Col2Im(x float32[1, 2, 3], image_shape int64[2], block_shape int64[2]): 3 blocks of 2.
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "3"});
  AddInput(g, "image_shape", {"2"}, onnx::TensorProto::INT64);
  AddInput(g, "block_shape", {"2"}, onnx::TensorProto::INT64);
  AddNode(g, "Col2Im", {"x", "image_shape", "block_shape"}, {"y"}, "col2im");
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 1);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  // Column k of x is block offset k, its 3 entries the 3 blocks.
  const float x[6] = {1, 2, 3, 4, 5, 6};
  auto run = [&](std::vector<int64_t> image, std::vector<int64_t> block, std::vector<float>* y,
                 std::vector<int64_t>* dims) -> Status {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {1, 2, 3}),
                       TensorView::Host(image.data(), DType::kInt64, {2}),
                       TensorView::Host(block.data(), DType::kInt64, {2})};
    return RunFirstCopy(*ctx, in, y, dims);
  };
  std::vector<float> y;
  std::vector<int64_t> dims;
  // A 3x2 image, blocks of 1x2 at rows 0, 1, 2: y[h][k] = x[k][h].
  REQUIRE(run({3, 2}, {1, 2}, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{1, 1, 3, 2});
  CHECK(y == std::vector<float>{1, 4, 2, 5, 3, 6});
  // A 1x4 image, blocks of 1x2 at columns 0, 1, 2 overlapping: y[w + k] += x[k][w].
  REQUIRE(run({1, 4}, {1, 2}, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{1, 1, 1, 4});
  CHECK(y == std::vector<float>{1, 2 + 4, 3 + 5, 6});
  // A 2x2 image has 2 blocks of 1x2, not x's 3: a guard says so. A block of 0 divides x's 2
  // channels by 0 in the output's dim 1: an error naming the element.
  const std::string blocks(run({2, 2}, {1, 2}, &y, &dims).message());
  CHECK_MESSAGE(blocks.find("from node 'col2im' (Col2Im)") != std::string::npos, blocks);
  CHECK_MESSAGE(blocks.find("image_shape_0 = 2 (input 'image_shape' element 0)") != std::string::npos, blocks);
  const std::string empty(run({3, 2}, {0, 2}, &y, &dims).message());
  CHECK_MESSAGE(empty.find("block_shape_0 = 0 (input 'block_shape' element 0)") != std::string::npos, empty);
  CHECK_MESSAGE(empty.find("division by zero") != std::string::npos, empty);
}

TEST_CASE("value inputs: CenterCropPad expanded into plain ops crops and pads at each call") {
  // The ONNX function body of CenterCropPad over x float32[2, 5] and shape int64[2]:
  //   pads = [(max(Shape(x), shape) - Shape(x)) / 2, the rest]; padded = Pad(x, pads);
  //   y = Slice(padded, (Shape(padded) - shape) / 2, that + shape).
  // Div's operand max(Shape(x), shape) - shape is >= 0, which the compiler cannot show: Div
  // keeps the sign in its expression, and the shapes stay symbolic.
  auto m = MakeModel(18);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "5"});
  AddInput(g, "shape", {"2"}, onnx::TensorProto::INT64);
  AddInt64Init(g, "two", {1}, {2});
  AddNode(g, "Shape", {"x"}, {"x_shape"});
  AddNode(g, "Max", {"x_shape", "shape"}, {"padded_shape"});
  AddNode(g, "Sub", {"padded_shape", "x_shape"}, {"pad_amount"});
  AddNode(g, "Div", {"pad_amount", "two"}, {"pad_left"});
  AddNode(g, "Sub", {"pad_amount", "pad_left"}, {"pad_right"});
  AttrInt(AddNode(g, "Concat", {"pad_left", "pad_right"}, {"pads"}), "axis", 0);
  AddNode(g, "Pad", {"x", "pads"}, {"padded"}, "pad");
  AddNode(g, "Shape", {"padded"}, {"padded_x_shape"});
  AddNode(g, "Sub", {"padded_x_shape", "shape"}, {"diff"});
  AddNode(g, "Div", {"diff", "two"}, {"starts"});
  AddNode(g, "Add", {"starts", "shape"}, {"ends"});
  AddNode(g, "Slice", {"padded", "starts", "ends"}, {"y"}, "crop");
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  REQUIRE(model->entries().size() == 1);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto run = [&](std::vector<int64_t> shape, std::vector<float>* y, std::vector<int64_t>* dims) -> Status {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 5}),
                       TensorView::Host(shape.data(), DType::kInt64, {2})};
    return RunFirstCopy(*ctx, in, y, dims);
  };
  std::vector<float> y;
  std::vector<int64_t> dims;
  // Crop to 2x3: columns (5 - 3) / 2 = 1 to 3.
  REQUIRE(run({2, 3}, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{2, 3});
  CHECK(y == std::vector<float>{2, 3, 4, 7, 8, 9});
  // Pad to 4x6: one zero row above and below, one zero column on the right (1 / 2 = 0 on the left).
  REQUIRE(run({4, 6}, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{4, 6});
  CHECK(y == std::vector<float>{0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10, 0, 0, 0, 0, 0, 0, 0});
  // Both: 1 row from (2 - 1) / 2 = 0, 7 columns with one zero on each side.
  REQUIRE(run({1, 7}, &y, &dims).ok());
  CHECK(dims == std::vector<int64_t>{1, 7});
  CHECK(y == std::vector<float>{0, 1, 2, 3, 4, 5, 0});
}

TEST_CASE("value inputs: integer Div and Mod of values of either sign compute as ONNX says") {
  // Slice ends from Div(a, b) (truncating), Mod(a, b) (the divisor's sign) and Mod(a, b, fmod=1)
  // (the dividend's sign), each + 5, over x float32[10] from 0: the lengths show the values.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"10"});
  AddInput(g, "a", {"1"}, onnx::TensorProto::INT64);
  AddInput(g, "b", {"1"}, onnx::TensorProto::INT64);
  AddInt64Init(g, "zero", {1}, {0});
  AddInt64Init(g, "five", {1}, {5});
  AddNode(g, "Div", {"a", "b"}, {"q"});
  AddNode(g, "Mod", {"a", "b"}, {"r"});
  AttrInt(AddNode(g, "Mod", {"a", "b"}, {"f"}), "fmod", 1);
  for (const char* v : {"q", "r", "f"}) {
    const std::string name(v);
    AddNode(g, "Add", {name, "five"}, {name + "_end"});
    AddNode(g, "Slice", {"x", "zero", name + "_end"}, {name + "_y"});
    AddOutput(g, name + "_y");
  }
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[10] = {};
  auto lengths = [&](int64_t a, int64_t b) {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {10}), TensorView::Host(&a, DType::kInt64, {1}),
                       TensorView::Host(&b, DType::kInt64, {1})};
    std::vector<TensorView> out;
    const Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    std::vector<int64_t> n;
    for (const TensorView& t : out) n.push_back(t.num_elements() - 5);
    return n;
  };
  // {a / b truncated, a mod b with b's sign, fmod with a's sign}
  CHECK(lengths(-7, 2) == std::vector<int64_t>{-3, 1, -1});
  CHECK(lengths(7, -2) == std::vector<int64_t>{-3, -1, 1});
  CHECK(lengths(7, 2) == std::vector<int64_t>{3, 1, 1});
  CHECK(lengths(-7, -2) == std::vector<int64_t>{3, -1, -1});
  CHECK(lengths(-4, 2) == std::vector<int64_t>{-2, 0, 0});
}

TEST_CASE("value inputs: Squeeze without axes keeps a dim from a value, which must not be 1") {
  // y = Squeeze(ConstantOfShape(s int64[2])): the rank is 2 unless a value is 1, which the guard refuses.
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "s", {"2"}, onnx::TensorProto::INT64);
  AddNode(g, "ConstantOfShape", {"s"}, {"zeros"});
  AddNode(g, "Squeeze", {"zeros"}, {"y"}, "squeeze");
  AddOutput(g, "y");
  auto model = Model::Load(CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  auto run = [&](std::vector<int64_t> s, std::vector<int64_t>* dims) -> Status {
    TensorView in[] = {TensorView::Host(s.data(), DType::kInt64, {2})};
    std::vector<TensorView> out;
    KILN_RETURN_IF_ERROR(ctx->Run(in, out));
    dims->assign(out[0].dims, out[0].dims + out[0].rank);
    return Status::Ok();
  };
  std::vector<int64_t> dims;
  REQUIRE(run({2, 3}, &dims).ok());
  CHECK(dims == std::vector<int64_t>{2, 3});
  const std::string one(run({1, 3}, &dims).message());
  CHECK_MESSAGE(one.find("from node 'squeeze' (Squeeze), whose input dim 0 must not be 1 (Squeeze without axes "
                         "keeps it)") != std::string::npos,
                one);
}

}  // namespace kiln::testing
