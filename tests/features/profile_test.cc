// Compile profiles: parsing `--profile` text, resolving it against a model's inputs, and the
// multi-entry artifacts they make (names, order, prologue ranges, which entry a call takes).
#include "compiler/profile.h"

#include <doctest/doctest.h>

#include <algorithm>

#include <limits>

#include "runtime/artifact_header.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

Profile Parsed(const std::string& text) {
  auto p = ParseProfile(text);
  REQUIRE_MESSAGE(p.ok(), p.status().ToString());
  return *p;
}

std::string ParseError(const std::string& text) {
  auto p = ParseProfile(text);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == StatusCode::kInvalidArgument);
  return std::string(p.status().message());
}

// x: float32[N, 3, H, W], y: float32[N, 5], s: int64 scalar; out = x (the body does not matter).
ir::Trace TwoInputTrace() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "3", "H", "W"});
  testing::AddInput(g, "y", {"N", "5"});
  testing::AddInput(g, "s", {}, onnx::TensorProto::INT64);
  testing::AddNode(g, "Identity", {"x"}, {"out"});
  testing::AddOutput(g, "out");
  auto t = testing::Import(m);
  REQUIRE_MESSAGE(t.ok(), t.status().ToString());
  return *t;
}

ResolvedProfile Resolved(const std::string& text) {
  auto r = ResolveProfile(Parsed(text), TwoInputTrace());
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return *r;
}

std::string ResolveError(const std::string& text) {
  auto r = ResolveProfile(Parsed(text), TwoInputTrace());
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

}  // namespace

TEST_CASE("profile text: values, ranges, steps, positions and several inputs") {
  Profile one = Parsed("images:N=1");
  REQUIRE(one.dims.size() == 1);
  CHECK(one.dims[0].input == "images");
  CHECK(one.dims[0].dim == "N");
  CHECK(one.dims[0].range.min == 1);
  CHECK(one.dims[0].range.max == 1);

  Profile range = Parsed("images:N=1..64,H=32..1024:32, W = 32..1024:32");
  REQUIRE(range.dims.size() == 3);
  CHECK(range.dims[1].dim == "H");
  CHECK(range.dims[1].range.min == 32);
  CHECK(range.dims[1].range.max == 1024);
  CHECK(range.dims[1].range.divisor == 32);
  CHECK(range.dims[2].dim == "W");
  CHECK(range.dims[2].range.Describe("W") == "W in 32..1024:32");

  // The last ':' before the first '=' ends the input name: TensorFlow-style "input_1:0".
  Profile tf = Parsed("input_1:0:0=2..;mask:1=3");
  REQUIRE(tf.dims.size() == 2);
  CHECK(tf.dims[0].input == "input_1:0");
  CHECK(tf.dims[0].dim == "0");
  CHECK(tf.dims[0].range.min == 2);
  CHECK(tf.dims[0].range.max == kNoMax);
  CHECK(tf.dims[0].range.Describe("B") == "B >= 2");
  // An open range with a step stays open.
  const DimRange open_step = Parsed("x:N=5..:8").dims[0].range;
  CHECK(open_step.min == 8);
  CHECK(open_step.max == kNoMax);
  CHECK(open_step.Describe("N") == "N >= 8:8");
  CHECK(open_step.Values() == ">= 8:8");
  CHECK(tf.dims[1].input == "mask");

  // A range is narrowed to the multiples of its step.
  Profile narrowed = Parsed("x:N=20..70:16");
  CHECK(narrowed.dims[0].range.min == 32);
  CHECK(narrowed.dims[0].range.max == 64);
  CHECK(Parsed("x:N=20..30:8").dims[0].range.Describe("N") == "N=24");

  CHECK(Parsed("default").dims.empty());
}

TEST_CASE("profile text errors say what was expected") {
  CHECK(ParseError("images") ==
        "profile 'images': expected INPUT:DIM=VALUE[,DIM=VALUE...] (for example images:N=1..64), INPUT=VALUES (for "
        "example sr=16000 or axes=[0,2]) or 'default', got 'images'");
  CHECK(ParseError("images:N") ==
        "profile 'images:N': expected INPUT:DIM=VALUE[,DIM=VALUE...] (for example images:N=1..64), INPUT=VALUES (for "
        "example sr=16000 or axes=[0,2]) or 'default', got 'images:N'");
  CHECK(ParseError("images:N=1,H") == "profile 'images:N=1,H': expected DIM=VALUE after 'images:', got 'H'");
  CHECK(ParseError("images:=4") == "profile 'images:=4': missing dim name before '=' in '=4'");
  CHECK(ParseError("images:N=-3") ==
        "profile 'images:N=-3' images:N: '-3' is not a dim value >= 0, a range LO..HI or LO..");
  CHECK(ParseError("images:N=x") ==
        "profile 'images:N=x' images:N: 'x' is not a dim value >= 0, a range LO..HI or LO..");
  CHECK(ParseError("images:N=64..1") == "profile 'images:N=64..1' images:N: '64..1' admits no value");
  CHECK(ParseError("images:N=3..5:8") == "profile 'images:N=3..5:8' images:N: '3..5:8' admits no value");
  CHECK(ParseError("images:N=3:2") == "profile 'images:N=3:2' images:N: '3:2' admits no value");
  CHECK(ParseError("x:N=9223372036854775807..:2") ==
        "profile 'x:N=9223372036854775807..:2' x:N: '9223372036854775807..:2' admits no value");
  CHECK(ParseError("images:N=1..4:0") == "profile 'images:N=1..4:0' images:N: divisor '0' is not an integer >= 1");
  CHECK(ParseError("images:N=-1..4") ==
        "profile 'images:N=-1..4' images:N: range start '-1' is not an integer >= 0");
  CHECK(ParseError("images:N=1..99999999999999999999") ==
        "profile 'images:N=1..99999999999999999999' images:N: range end '99999999999999999999' is not an integer "
        ">= 0");
}

TEST_CASE("profiles resolve by symbol or position, a fixed symbol fixes every input that declares it") {
  ResolvedProfile one = Resolved("x:N=1");
  CHECK(one.name == "N=1");
  CHECK(one.input_shapes.at("x") == std::vector<int64_t>{1, -1, -1, -1});
  CHECK(one.input_shapes.at("y") == std::vector<int64_t>{1, -1});
  CHECK(one.ranges.count("N") == 0);  // fixed: a constant in the entry
  CHECK(one.symbols.at("N").Describe("N") == "N=1");
  CHECK(one.symbols.at("H").Describe("H") == "H >= 0");  // not named: any size, empty included

  ResolvedProfile range = Resolved("x:0=1..64,2=32..1024:32,W=32..1024:32");
  CHECK(range.name == "N in 1..64, H in 32..1024:32, W in 32..1024:32");
  CHECK(range.input_shapes.empty());
  REQUIRE(range.ranges.size() == 3);
  CHECK(range.ranges.at("H").divisor == 32);

  // N constrained at both inputs: the intersection.
  ResolvedProfile both = Resolved("x:N=2..8;y:0=4..16");
  CHECK(both.name == "N in 4..8");
  CHECK(both.ranges.at("N").min == 4);
  CHECK(both.ranges.at("N").max == 8);

  // A constraint on a dim the model fixes only has to admit it.
  CHECK(Resolved("x:1=1..4").name == "default");

  CHECK(Resolved("default").name == "default");
}

TEST_CASE("profiles: a symbol ranges from 0 (an empty tensor) unless the profile restricts it") {
  // The prologue checks each range; the entry is compiled for a dim of 0 where it admits one.
  const ResolvedProfile all = Resolved("default");
  for (const char* sym : {"N", "H", "W"}) {
    CAPTURE(sym);
    CHECK(all.ranges.at(sym).min == 0);
    CHECK(all.ranges.at(sym).max == std::numeric_limits<int64_t>::max());
  }
  const ResolvedProfile some = Resolved("x:N=1..64,H=32..1024:32");
  CHECK(some.name == "N in 1..64, H in 32..1024:32");
  CHECK(some.ranges.at("N").min == 1);
  CHECK(some.ranges.at("H").min == 32);
  CHECK(some.ranges.at("W").min == 0);  // not named: any size
  CHECK(some.symbols.at("W").min == 0);
  // A fixed 0 is a static empty tensor, imported as a constant.
  const ResolvedProfile zero = Resolved("x:N=0");
  CHECK(zero.input_shapes.at("x") == std::vector<int64_t>{0, -1, -1, -1});
  CHECK(zero.input_shapes.at("y") == std::vector<int64_t>{0, -1});
  CHECK(zero.ranges.count("N") == 0);
  CHECK(Resolved("x:N=0..4").ranges.at("N").min == 0);
}

TEST_CASE("profiles are tried as given, except that one whose shapes fit inside another's goes first") {
  const ResolvedProfile all = Resolved("default"), one = Resolved("x:N=1"), range = Resolved("x:N=1..64,H=32..1024:32"),
                        one_small = Resolved("x:N=1,H=64..128:64"), odd = Resolved("x:N=1,H=33");
  CHECK(all.Includes(one));
  CHECK(all.Includes(range));
  CHECK(one.Includes(one_small));
  CHECK(range.Includes(one_small));  // 64 and 128 are multiples of 32
  CHECK_FALSE(range.Includes(odd));  // 33 is not
  CHECK_FALSE(one.Includes(range));
  CHECK_FALSE(range.Includes(one));  // N=1 with any H
  CHECK(range.Includes(range));
  CHECK(Resolved("x:N=8..64:8").Includes(Resolved("x:N=16..32:16")));
  CHECK_FALSE(Resolved("x:N=8..64:16").Includes(Resolved("x:N=16..32:8")));

  using Order = std::vector<size_t>;
  CHECK(TryOrder({all, one, range}) == Order{1, 2, 0});
  CHECK(TryOrder({range, one}) == Order{0, 1});            // neither inside the other: as given
  CHECK(TryOrder({range, one, one_small}) == Order{2, 0, 1});
  CHECK(TryOrder({all, range, one_small}) == Order{2, 1, 0});
}

TEST_CASE("profile resolution errors name the input, the dim and what the model declares") {
  CHECK(ResolveError("z:N=1") == "profile 'z:N=1': 'z' is not a runtime input of the model (inputs: 'x', 'y', 's')");
  CHECK(ResolveError("x:M=1") ==
        "profile 'x:M=1': input 'x' [N, 3, H, W] has no dim named 'M' (name a symbol it declares, or a position 0..3)");
  CHECK(ResolveError("x:7=1") == "profile 'x:7=1': input 'x' has rank 4 ([N, 3, H, W]), so it has no dim 7");
  CHECK(ResolveError("x:1=4") == "profile 'x:1=4': input 'x' dim 1 is fixed to 3 by the model (or --shape), not 4");
  CHECK(ResolveError("x:1=4..8:4") ==
        "profile 'x:1=4..8:4': input 'x' dim 1 is fixed to 3 by the model (or --shape), not 4..8:4");
  // Two steps on one symbol: their least common multiple, or an error when it overflows.
  CHECK(Resolved("x:N=1..:4;y:N=1..:6").name == "N >= 12:12");
  CHECK(ResolveError("x:N=1..:4294967311;y:N=1..:4294967357") ==
        "profile 'x:N=1..:4294967311;y:N=1..:4294967357': N >= 4294967311:4294967311 and N >= 4294967357:4294967357 "
        "admit no common value");
  CHECK(ResolveError("s:0=1") == "profile 's:0=1': input 's' is a scalar (rank 0): it has no dims to constrain");
  CHECK(ResolveError("x:N=1..2;y:N=5..6") == "profile 'x:N=1..2;y:N=5..6': N in 1..2 and N in 5..6 admit no common value");
}

namespace {

// y = x * 2 + b: x float32[N, 3], b = (1, 2, 3).
onnx::ModelProto ScaleModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "3"});
  testing::AddFloatInit(g, "two", {}, {2.0f});
  testing::AddFloatInit(g, "b", {3}, {1.0f, 2.0f, 3.0f});
  testing::AddNode(g, "Mul", {"x", "two"}, {"m"});
  testing::AddNode(g, "Add", {"m", "b"}, {"y"});
  testing::AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("profiles: one entry each, specialised ones first, and a call takes the first that fits") {
  auto bytes = testing::CompileModel(ScaleModel(), testing::WithProfiles({"x:N=1..64", "x:N=1", "x:0=4"}));
  auto model = Model::Load(bytes);
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 3);
  CHECK(model->entries()[0].name == "N=1");
  CHECK(model->entries()[1].name == "N=4");
  CHECK(model->entries()[2].name == "N in 1..64");
  // Static entries: shapes and the arena are numbers; the range entry's are expressions.
  CHECK(model->entries()[0].arena_bytes.find('N') == std::string::npos);
  CHECK(model->entries()[1].prologue_text.find("  check x.shape[0] == 4\n") != std::string::npos);
  CHECK(model->entries()[2].prologue_text.find("  N = x.shape[0]\n  check N in 1..64\n") != std::string::npos);
  CHECK(model->entries()[1].stage_traces[0].find("float32[4, 3]") != std::string::npos);
  // The same checks as data (EntryInfo::input_dims): x's dim 0 is 1, 4, or N in 1..64.
  struct Want {
    int entry;
    int64_t value;
    const char* symbol;
    int64_t max;
  };
  for (const Want& w : {Want{0, 1, "", 1}, Want{1, 4, "", 4}, Want{2, -1, "N", 64}}) {
    INFO("entry " << w.entry);
    const std::vector<std::vector<DimCheckInfo>>& dims = model->entries()[w.entry].input_dims;
    REQUIRE(dims.size() == 1);
    REQUIRE(dims[0].size() == 2);
    CHECK(dims[0][0].value == w.value);
    CHECK(dims[0][0].symbol == w.symbol);
    CHECK(dims[0][0].max == w.max);
    CHECK(dims[0][1].value == 3);
    CHECK(dims[0][0].Accepts(1) == (w.entry != 1));
    CHECK(dims[0][0].Accepts(4) == (w.entry != 0));
    CHECK(dims[0][0].Accepts(65) == false);
  }
  // The model's I/O as declared, not entry 0's: x is [N, 3]; y's dim 0 is 1, 4 or N, so N.
  CHECK(model->inputs()[0].shape[0].symbol == "N");
  CHECK(model->outputs()[0].shape[0].symbol == "N");
  CHECK(model->outputs()[0].shape[1].value == 3);
  // One copy of the weights, though each fixed profile imports the model again.
  auto single = Model::Load(testing::CompileModel(ScaleModel()));
  REQUIRE(single.ok());
  CHECK(model->weights_bytes() == single->weights_bytes());

  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  std::vector<float> x(65 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  const float b[3] = {1, 2, 3};
  auto run = [&](int64_t n) -> Status {
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {n, 3})};
    std::vector<TensorView> out;
    Status st = ctx->Run(in, out);
    if (!st.ok()) return st;
    const float* y = static_cast<const float*>(out[0].data);
    for (int64_t i = 0; i < n * 3; ++i) REQUIRE(y[i] == x[i] * 2 + b[i % 3]);
    return st;
  };
  // Scripted calls: entry taken, or a miss.
  const std::pair<int64_t, int32_t> script[] = {{1, 0}, {4, 1}, {7, 2}, {65, -1}, {1, 0}, {64, 2}, {4, 1}, {0, -1}};
  for (const auto& call : script) {
    const int64_t n = call.first;
    const int32_t entry = call.second;
    Status st = run(n);
    CHECK_MESSAGE(st.ok() == (entry >= 0), "N = ", n, ": ", st.ToString());
    if (entry >= 0) CHECK(ctx->stats().last_entry == entry);
  }
  const Stats& s = ctx->stats();
  CHECK(s.calls == 8);
  CHECK(s.cache_hits == 6);
  CHECK(s.cache_misses == 2);
  CHECK(s.entries[0].hits == 2);
  CHECK(s.entries[1].hits == 2);
  CHECK(s.entries[2].hits == 2);
  REQUIRE(s.last_miss_reasons.size() == 3);
  CHECK(s.last_miss_reasons[0] == "entry 0 (N=1): input 'x' dim 0 = 0, expected 1");
  CHECK(s.last_miss_reasons[1] == "entry 1 (N=4): input 'x' dim 0 = 0, expected 4");
  CHECK(s.last_miss_reasons[2] == "entry 2 (N in 1..64): input 'x' dim 0 (N) = 0, expected 1..64 (the profile excludes an "
                                       "empty tensor; a range from 0 admits it: kiln compile --profile 'x:N=0..')");
  CHECK(run(80).message() ==
        "entry 0 (N=1): input 'x' dim 0 = 80, expected 1\n"
        "entry 1 (N=4): input 'x' dim 0 = 80, expected 4\n"
        "entry 2 (N in 1..64): input 'x' dim 0 (N) = 80, expected 1..64");
}

TEST_CASE("profiles: an empty batch runs through the entry whose range admits it") {
  auto model = Model::Load(testing::CompileModel(ScaleModel(), testing::WithProfiles({"x:N=0..8"})));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 1);
  CHECK(model->entries()[0].name == "N in 0..8");
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[6] = {1, 2, 3, 4, 5, 6};
  for (int64_t n : {0, 2, 0}) {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {n, 3})};
    std::vector<TensorView> out;
    REQUIRE(ctx->Run(in, out).ok());
    CHECK(ctx->stats().last_entry == 0);
    REQUIRE(out[0].rank == 2);
    CHECK(out[0].dims[0] == n);
    CHECK(out[0].dims[1] == 3);
    if (n == 2) CHECK(static_cast<const float*>(out[0].data)[5] == 6 * 2 + 3);
  }
}

TEST_CASE("profiles: an empty tensor the model cannot take fails the entry's guard at run time, naming the node") {
  // x[N, 3] + c[3, 3]: N = 0 does not broadcast against 3, as onnxruntime also reports; N = 3
  // (or 1) does. Only a profile that fixes the 0 fails at compile time.
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "3"});
  testing::AddFloatInit(g, "c", {3, 3}, std::vector<float>(9, 1.0f));
  testing::AddNode(g, "Add", {"x", "c"}, {"y"}, "add");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE(model.ok());
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<TensorView> out;
  TensorView three[] = {TensorView::Host(x, DType::kFloat32, {3, 3})};
  REQUIRE(ctx->Run(three, out).ok());
  CHECK(static_cast<const float*>(out[0].data)[8] == 10);
  TensorView empty[] = {TensorView::Host(x, DType::kFloat32, {0, 3})};
  const Status st = ctx->Run(empty, out);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(st.message().find("from node 'add' (Add)") != std::string::npos, st.message());
  CHECK_MESSAGE(st.message().find("does not hold for N = 0") != std::string::npos, st.message());
  CHECK(testing::TryCompileModel(m, testing::WithProfiles({"x:N=0"})).status().code() == StatusCode::kInvalidArgument);
  // A fixed 0 and ranges from 0 are entries of their own, the fixed one tried first.
  auto several = Model::Load(testing::CompileModel(ScaleModel(), testing::WithProfiles({"x:N=0..4", "x:N=0..8", "x:N=0"})));
  REQUIRE(several.ok());
  std::vector<std::string> names;
  for (const auto& e : several->entries()) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{"N=0", "N in 0..4", "N in 0..8"});
}

TEST_CASE("profiles: an output dim the entries fix differently reads as their values joined by '|'") {
  auto model = Model::Load(testing::CompileModel(ScaleModel(), testing::WithProfiles({"x:N=1", "x:N=4"})));
  REQUIRE(model.ok());
  CHECK(model->inputs()[0].shape[0].symbol == "N");
  CHECK(model->outputs()[0].shape[0].symbol == "1|4");
  CHECK(model->outputs()[0].shape[0].value == -1);
}

TEST_CASE("profiles: steps, duplicates and bad profiles are reported by the compiler") {
  auto bytes = testing::CompileModel(ScaleModel(), testing::WithProfiles({"x:N=8..64:8"}));
  auto model = Model::Load(bytes);
  REQUIRE(model.ok());
  CHECK(model->entries()[0].prologue_text.find("  check N in 8..64\n  check N % 8 == 0\n") != std::string::npos);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  std::vector<float> x(64 * 3, 1.0f);
  std::vector<TensorView> out;
  TensorView twelve[] = {TensorView::Host(x.data(), DType::kFloat32, {12, 3})};
  CHECK(ctx->Run(twelve, out).message() == "entry 0 (N in 8..64:8): input 'x' dim 0 (N) = 12, expected a multiple of 8");
  TensorView sixteen[] = {TensorView::Host(x.data(), DType::kFloat32, {16, 3})};
  CHECK(ctx->Run(sixteen, out).ok());

  auto compile_error = [](std::vector<std::string> texts) {
    auto path = std::filesystem::temp_directory_path() / ("kiln_profile_test_" + std::to_string(::getpid()) + ".onnx");
    std::string data;
    REQUIRE(ScaleModel().SerializeToString(&data));
    std::ofstream(path, std::ios::binary) << data;
    auto r = CompileOnnxFile(path.string(), testing::WithProfiles(texts), nullptr);
    std::filesystem::remove(path);
    REQUIRE_FALSE(r.ok());
    return std::string(r.status().message());
  };
  CHECK(compile_error({"x:N=1", "x:0=1"}) == "profiles 'x:N=1' and 'x:0=1' admit the same shapes (N=1)");
  CHECK(compile_error({"x:N=2..9:2", "x:N=1..8:2"}) ==
        "profiles 'x:N=2..9:2' and 'x:N=1..8:2' admit the same shapes (N in 2..8:2)");
  CHECK(compile_error({"x:N=1", "z:N=1"}) == "profile 'z:N=1': 'z' is not a runtime input of the model (inputs: 'x')");
}

}  // namespace kiln::compiler

namespace kiln::compiler {

TEST_CASE("profiles: guards their ranges imply are dropped, and a range no shape of the model fits is an error") {
  // MaxPool with a window of 3 and no padding needs L >= 3: a guard (0 < (L-2)).
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "1", "L"});
  testing::AttrInts(testing::AddNode(g, "MaxPool", {"x"}, {"y"}, "pool"), "kernel_shape", {3});
  testing::AddOutput(g, "y");
  auto guards = [&](std::vector<std::string> texts) {
    auto bytes = testing::CompileModel(m, testing::WithProfiles(texts));
    auto model = Model::Load(bytes);
    REQUIRE(model.ok());
    std::vector<std::string> lines;
    for (const EntryInfo& e : model->entries())
      lines.push_back(e.prologue_text.find("check (0 < (L-2))") != std::string::npos ? "guarded" : "not guarded");
    return lines;
  };
  CHECK(guards({"default", "x:L=3..64"}) == std::vector<std::string>{"not guarded", "guarded"});

  std::string data;
  REQUIRE(m.SerializeToString(&data));
  auto path = std::filesystem::temp_directory_path() / ("kiln_profile_guard_" + std::to_string(::getpid()) + ".onnx");
  std::ofstream(path, std::ios::binary) << data;
  auto r = CompileOnnxFile(path.string(), testing::WithProfiles({"x:L=3..64", "x:L=1..2"}), nullptr);
  std::filesystem::remove(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "profile 'x:L=1..2': no input shape in the ranges can run this entry: node 'pool' (MaxPool), whose output "
        "'y' dim 2 must be >= 1 needs (0 < (L-2)), which fails for every L in 1..2");
}

TEST_CASE("profile text: an input's values") {
  Profile sr = Parsed("sr=16000");
  CHECK(sr.dims.empty());
  REQUIRE(sr.values.size() == 1);
  CHECK(sr.values[0].input == "sr");
  CHECK(sr.values[0].elements == std::vector<std::string>{"16000"});
  CHECK(Parsed("axes=[0, -2]").values[0].elements == std::vector<std::string>{"0", "-2"});
  CHECK(Parsed("scales=[1, 2.5, 1e-3]").values[0].elements == std::vector<std::string>{"1", "2.5", "1e-3"});
  CHECK(Parsed("axes=[]").values[0].elements.empty());
  Profile both = Parsed("x:N=1;k=3");
  CHECK(both.dims.size() == 1);
  CHECK(both.values[0].input == "k");
  // A bracketed value names the whole text before '=' as the input: "ids:0".
  CHECK(Parsed("ids:0=[5]").values[0].input == "ids:0");
  CHECK(Parsed("ids:0=5").dims[0].input == "ids");

  CHECK(ParseError("axes=0,2") == "profile 'axes=0,2' axes: several values need brackets: [0,2]");
  CHECK(ParseError("axes=[1,x]") ==
        "profile 'axes=[1,x]' axes: 'x' is not a number (expected V or [V,V,...], each a decimal such as -2, 0.5 or "
        "1e-3)");
  CHECK(ParseError("s=1e400") == "profile 's=1e400' s: '1e400' is out of range for a double");
  CHECK(ParseError("axes=[1") == "profile 'axes=[1' axes: '[1' has no closing ']'");
  CHECK(ParseError("k=3;k=4") == "profile 'k=3;k=4': input 'k' has values twice");
}

TEST_CASE("profiles with values: resolution names them, checks dtype and count, and orders fixed values first") {
  ResolvedProfile s = Resolved("s=7");
  CHECK(s.name == "s=7");
  CHECK(s.values.at("s") == std::vector<int64_t>{7});
  CHECK(Resolved("x:N=1;s=-7").name == "N=1, s=-7");
  CHECK(ResolveError("x=[1]") ==
        "profile 'x=[1]': input 'x' float32[N, 3, H, W]: its element count is not fixed; fix its dims too, as in "
        "'x:0=...'");
  CHECK(ResolveError("s=2.5") == "profile 's=2.5': input 's' int64[]: element 0 = 2.5 is not an integer");
  CHECK(ResolveError("s=99999999999999999999") ==
        "profile 's=99999999999999999999': input 's' int64[]: element 0 = 99999999999999999999 does not fit its dtype");
  CHECK(ResolveError("s=[1,2]") == "profile 's=[1,2]': input 's' int64[]: has 1 elements, the profile gives 2");
  CHECK(ResolveError("t=1") == "profile 't=1': 't' is not a runtime input of the model (inputs: 'x', 'y', 's')");
  // A profile fixing a value goes before the same profile without it; different values: as given.
  CHECK(Resolved("default").Includes(s));
  CHECK_FALSE(s.Includes(Resolved("default")));
  CHECK(s.Includes(Resolved("x:N=1;s=7")));
  CHECK_FALSE(s.Includes(Resolved("s=8")));
  CHECK(TryOrder({Resolved("default"), s, Resolved("s=8")}) == std::vector<size_t>{1, 2, 0});
}

namespace {

// y = ReduceSum(x, axes), keepdims 0: x float32[2, 3], axes int64[1] an input.
onnx::ModelProto ReduceModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"2", "3"});
  testing::AddInput(g, "axes", {"1"}, onnx::TensorProto::INT64);
  testing::AttrInt(testing::AddNode(g, "ReduceSum", {"x", "axes"}, {"y"}, "sum"), "keepdims", 0);
  testing::AddOutput(g, "y");
  return m;
}

std::string CompileError(const onnx::ModelProto& m, std::vector<std::string> texts) {
  auto r = testing::TryCompileModel(m, testing::WithProfiles(texts));
  REQUIRE_FALSE(r.ok());
  return std::string(r.status().message());
}

}  // namespace

// Runs a ReduceModel artifact on x = [[1, 2, 3], [4, 5, 6]] and axes = [axis].
Status RunReduce(ExecutionContext& ctx, int64_t axis, std::vector<float>* y) {
  static const float x[6] = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3}), TensorView::Host(&axis, DType::kInt64, {1})};
  return testing::RunFirstFloat(ctx, in, y);
}

// y = Unsqueeze(x, axes): x float32[2, 3], axes int64[1] an input, which changes the rank.
// y = Range(0, limit, 0.5) with limit a float32 scalar input: a float Range's size is not a value
// symbol's expression, so the compile needs the value.
onnx::ModelProto FloatRangeModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "limit", {});
  testing::AddFloatInit(g, "zero", {}, {0.0f});
  testing::AddFloatInit(g, "half", {}, {0.5f});
  testing::AddNode(g, "Range", {"zero", "limit", "half"}, {"y"}, "r");
  testing::AddOutput(g, "y");
  return m;
}

TEST_CASE("profiles with values: without a profile, a reduction's axes are read at each call") {
  // The axes are value symbols: one entry whose output dims are computed from them at each call
  // (keepdims 0: the dim that is not reduced), and the CPU kernel reads them.
  auto model = Model::Load(testing::CompileModel(ReduceModel()));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 1);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  auto run = [&](int64_t axis, std::vector<float>* y) { return RunReduce(*ctx, axis, y); };
  std::vector<float> y;
  REQUIRE(run(0, &y).ok());
  CHECK(y == std::vector<float>{5, 7, 9});
  REQUIRE(run(1, &y).ok());
  CHECK(y == std::vector<float>{6, 15});
  REQUIRE(run(-2, &y).ok());
  CHECK(y == std::vector<float>{5, 7, 9});
  // Out of [-rank, rank - 1]: the prologue's guard names it.
  const std::string message(run(2, &y).message());
  CHECK(message.find("whose axes must be in [-rank, rank-1]") != std::string::npos);
}

TEST_CASE("profiles with values: one entry per value, the input stays, and the prologue checks its elements") {
  // An op that needs the values at compile time: the error names the input and shows the profile to add.
  CHECK(CompileError(FloatRangeModel(), {}) ==
        "node 'r' (Range): data-dependent output shape: Range limit (limit) is not known at compile time (a "
        "floating-point Range's size needs start, limit and delta known); it depends on the values of input 'limit' "
        "(float32[]): compile an entry for each value the callers send, for example --profile 'limit=V' (the "
        "prologue checks the values, which must be in host memory), or remove the input with --constant-input "
        "NAME=FILE");
  auto model = Model::Load(testing::CompileModel(ReduceModel(), testing::WithProfiles({"axes=[0]", "axes=[1]"})));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 2);
  CHECK(model->entries()[0].name == "axes=[0]");
  CHECK(model->entries()[1].name == "axes=[1]");
  REQUIRE(model->inputs().size() == 2);
  CHECK(model->inputs()[1].name == "axes");
  CHECK(model->format_version() == kValueSymbolsFormatVersion);  // the prologue reads values
  CHECK(model->entries()[1].prologue_text.find("check axes.values[0] == 1") != std::string::npos);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  auto run = [&](int64_t axis, std::vector<float>* y) { return RunReduce(*ctx, axis, y); };
  std::vector<float> y;
  REQUIRE(run(0, &y).ok());
  CHECK(y == std::vector<float>{5, 7, 9});
  CHECK(ctx->stats().last_entry == 0);
  REQUIRE(run(1, &y).ok());
  CHECK(y == std::vector<float>{6, 15});
  CHECK(ctx->stats().last_entry == 1);
  // -1 means axis 1 too, but no entry was compiled for that value.
  CHECK(run(-1, &y).message() ==
        "entry 0 (axes=[0]): input 'axes' element 0 = -1, expected 0\n"
        "entry 1 (axes=[1]): input 'axes' element 0 = -1, expected 1");
}

TEST_CASE("profiles with values: an If on an input's value compiles the branch each profile picks") {
  // y = If(mode == 1, x + 1, x * 2); mode int64 scalar.
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"3"});
  testing::AddInput(g, "mode", {}, onnx::TensorProto::INT64);
  testing::AddInt64Init(g, "one", {}, {1});
  testing::AddNode(g, "Equal", {"mode", "one"}, {"c"});
  onnx::NodeProto* n = testing::AddNode(g, "If", {"c"}, {"y"}, "branch");
  testing::AddFloatInit(g, "k", {}, {2.0f});
  onnx::GraphProto* then_g = testing::AddBranch(n, "then_branch");
  testing::AddNode(then_g, "Add", {"x", "k"}, {"t"});
  testing::AddOutput(then_g, "t");
  onnx::GraphProto* else_g = testing::AddBranch(n, "else_branch");
  testing::AddNode(else_g, "Mul", {"x", "k"}, {"e"});
  testing::AddOutput(else_g, "e");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m, testing::WithProfiles({"mode=1", "mode=0"})));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 2);
  CHECK(model->entries()[0].name == "mode=1");
  CHECK(model->entries()[1].name == "mode=0");
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[3] = {1, 2, 3};
  auto run = [&](int64_t mode) -> std::vector<float> {
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {3}), TensorView::Host(&mode, DType::kInt64, {})};
    std::vector<TensorView> out;
    Status st = ctx->Run(in, out);
    if (!st.ok()) return {};
    const float* p = static_cast<const float*>(out[0].data);
    return {p, p + 3};
  };
  CHECK(run(1) == std::vector<float>{3, 4, 5});
  CHECK(run(0) == std::vector<float>{2, 4, 6});
  CHECK(run(5).empty());  // a value no profile names: a miss
  CHECK(ctx->stats().last_miss_reasons[0] == "entry 0 (mode=1): input 'mode' element 0 = 5, expected 1");
}

TEST_CASE("profiles with floating-point values: a Resize's scales input, compared bit for bit by the prologue") {
  // y = Resize(x, scales), nearest: x float32[1, 1, 2, 2], scales float32[4] an input.
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"1", "1", "2", "2"});
  testing::AddInput(g, "scales", {"4"});
  testing::AttrString(testing::AddNode(g, "Resize", {"x", "", "scales"}, {"y"}, "resize"), "mode", "nearest");
  testing::AddOutput(g, "y");
  {
    // Scales read directly are float32 value symbols (passes/value_inputs.h); scales computed
    // inside the model are not, and the compile names the input a profile must fix.
    auto computed = testing::MakeModel(13);
    auto* c = computed.mutable_graph();
    testing::AddInput(c, "x", {"1", "1", "2", "2"});
    testing::AddInput(c, "scales", {"4"});
    testing::AddFloatInit(c, "one", {}, {1.0f});
    testing::AddNode(c, "Mul", {"scales", "one"}, {"s"}, "mul");
    testing::AttrString(testing::AddNode(c, "Resize", {"x", "", "s"}, {"y"}, "resize"), "mode", "nearest");
    testing::AddOutput(c, "y");
    CHECK(CompileError(computed, {}).find("--profile 'scales=[V0,V1,V2,V3]'") != std::string::npos);
  }
  auto model = Model::Load(testing::CompileModel(m, testing::WithProfiles({"scales=[1,1,2,2]", "scales=[1, 1, 3.0, 3]"})));
  REQUIRE(model.ok());
  REQUIRE(model->entries().size() == 2);
  CHECK(model->entries()[1].name == "scales=[1,1,3,3]");
  CHECK(model->format_version() == kRuntimeDimsFormatVersion);  // floating-point value checks need format 5
  CHECK(model->entries()[0].prologue_text.find("check scales.values[2] == 2\n") != std::string::npos);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[4] = {1, 2, 3, 4};
  auto run = [&](float scale, std::vector<float>* y) -> Status {
    const float scales[4] = {1, 1, scale, scale};
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {1, 1, 2, 2}), TensorView::Host(scales, DType::kFloat32, {4})};
    return testing::RunFirstFloat(*ctx, in, y);
  };
  std::vector<float> y;
  REQUIRE(run(2, &y).ok());
  CHECK(y == std::vector<float>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  REQUIRE(run(3, &y).ok());
  CHECK(y.size() == 36);
  CHECK(y[0] == 1);
  CHECK(y[2] == 1);
  CHECK(y[3] == 2);
  CHECK(y[35] == 4);
  CHECK(ctx->stats().last_entry == 1);
  CHECK(run(2.5f, &y).message() ==
        "entry 0 (scales=[1,1,2,2]): input 'scales' element 2 = 2.5, expected 2\n"
        "entry 1 (scales=[1,1,3,3]): input 'scales' element 2 = 2.5, expected 3");
}

}  // namespace kiln::compiler
