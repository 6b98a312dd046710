// kiln::trace::Builder (include/kiln/trace.h): errors are recorded at the op that caused them,
// with the op, its name and its arguments, and returned by status() and Compile; parameters
// from .npy files; outputs; profiles and writing the artifact to a file.
#include <doctest/doctest.h>

#include <filesystem>
#include <vector>

#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "kiln/trace.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/trace/trace_test_util.h"
#include "tests/temp_dir.h"
#include "tests/text_util.h"

namespace {

using namespace kiln::trace;  // NOLINT: the API under test
using kiln::DType;
using kiln::StatusCode;
using kiln::testing::Contains;
using kiln::testing::TraceCpuOptions;

}  // namespace

TEST_CASE("trace api: a MatMul shape mismatch names the op, its arguments and both shapes - later ops do nothing") {
  Builder b("attn");
  Tensor q = b.Input("q", DType::kFloat32, {"N", 4, 8});
  Tensor k = b.Input("k", DType::kFloat32, {"N", 6, 8});
  Tensor scores = MatMul(q, k, "scores");  // needs k transposed
  CHECK_FALSE(scores.valid());
  const kiln::Status st = b.status();
  REQUIRE(st.code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(st.message(), "MatMul 'scores' (a: 'q' float32[N, 4, 8], b: 'k' float32[N, 6, 8])"),
                st.message());
  CHECK_MESSAGE(Contains(st.message(), "inner dims differ"), st.message());
  // Later ops, outputs and compiles report the first error unchanged.
  Tensor y = Softmax(Relu(scores), -1, "p");
  CHECK_FALSE(y.valid());
  b.Output(y);
  Tensor z = Relu(q, "still_nothing");
  CHECK_FALSE(z.valid());
  CHECK(b.status().message() == st.message());
  auto bytes = b.Compile(TraceCpuOptions());
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.status().message() == st.message());
  CHECK_FALSE(Contains(b.Print(), "still_nothing"));
}

TEST_CASE("trace api: Linear's errors name the Linear, the user's tensors and the failing node") {
  Builder b("mlp");
  Tensor x = b.Input("x", DType::kFloat32, {"N", 3});
  Tensor w = b.Parameter("fc1.weight", {4, 2}, std::vector<float>(8, 1.0f));
  CHECK_FALSE(Linear(x, w, Tensor(), "fc1").valid());
  const std::string m = b.status().message();
  CHECK_MESSAGE(Contains(m, "Linear 'fc1' (x: 'x' float32[N, 3], weight: 'fc1.weight' float32[4, 2])"), m);
  CHECK_MESSAGE(Contains(m, "node 'fc1' (MatMul)"), m);
  CHECK_MESSAGE(Contains(m, "[N, 3]"), m);
  CHECK_MESSAGE(Contains(m, "[4, 2]"), m);
}

TEST_CASE("trace api: a missing or malformed .npy file is an error naming the parameter and the path") {
  kiln::testing::TempDir dir;
  {
    Builder b("m");
    const std::string path = dir / "no_such_weight.npy";
    CHECK_FALSE(b.ParameterFromNpy("fc1.weight", path).valid());
    CHECK(b.status().code() == StatusCode::kNotFound);
    CHECK_MESSAGE(Contains(b.status().message(), "parameter 'fc1.weight': " + path), b.status().message());
  }
  {
    Builder b("m");
    kiln::testing::WriteBytes(dir / "bad.npy", "\x93NUMPY\x01\x00garbage");
    CHECK_FALSE(b.ParameterFromNpy("w", dir / "bad.npy").valid());
    CHECK(b.status().code() == StatusCode::kDataLoss);
    CHECK(Contains(b.status().message(), dir / "bad.npy"));
  }
}

TEST_CASE("trace api: a parameter read from .npy keeps its dtype and dims and computes as given") {
  kiln::testing::TempDir dir;
  kiln::io::HostTensor t;
  t.dtype = DType::kFloat32;
  t.dims = {2, 2};
  const float values[] = {1, 2, 3, 4};
  t.bytes.assign(reinterpret_cast<const uint8_t*>(values), reinterpret_cast<const uint8_t*>(values) + sizeof(values));
  REQUIRE(kiln::io::WriteNpyFile(dir / "w.npy", t).ok());
  Builder b("npy");
  Tensor x = b.Input("x", DType::kFloat32, {1, 2});
  Tensor w = b.ParameterFromNpy("w", dir / "w.npy");
  REQUIRE(w.valid());
  CHECK(w.shape()[0].size() == 2);
  b.Output(MatMul(x, w));
  auto bytes = b.Compile(TraceCpuOptions());
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  const float xs[] = {1, 1};
  auto out = kiln::testing::RunFloat(*bytes, std::vector{kiln::TensorView::Host(xs, DType::kFloat32, {1, 2})});
  CHECK(out[0] == std::vector<float>{4, 6});
}

TEST_CASE("trace api: bad inputs, parameters, arguments and outputs are recorded errors") {
  SUBCASE("parameter values that do not fill its dims") {
    Builder b;
    CHECK_FALSE(b.Parameter("w", {2, 3}, std::vector<float>(5)).valid());
    CHECK(b.status().message() == "parameter 'w': dims [2, 3] hold 6 elements, found 5 values");
    Builder b2;
    CHECK_FALSE(b2.Parameter("w", {2, -3}, std::vector<float>(6)).valid());
    CHECK(b2.status().message() == "parameter 'w': dim 1 is -3, expected >= 0");
  }
  SUBCASE("an input with an empty symbol name") {
    Builder b;
    CHECK_FALSE(b.Input("x", DType::kFloat32, {"", 3}).valid());
    CHECK(Contains(b.status().message(), "input 'x': dim 0 is neither a size nor a symbol name"));
  }
  SUBCASE("a default-constructed Tensor as an argument") {
    Builder b;
    Tensor x = b.Input("x", DType::kFloat32, {2});
    CHECK_FALSE(Add(x, Tensor(), "s").valid());
    CHECK(b.status().message() == "Add 's': argument 'b' is an invalid (default-constructed) Tensor");
  }
  SUBCASE("tensors of two Builders") {
    Builder b1("one"), b2("two");
    Tensor x = b1.Input("x", DType::kFloat32, {2});
    Tensor y = b2.Input("y", DType::kFloat32, {2});
    CHECK_FALSE((x + y).valid());
    CHECK(b1.status().message() == "Add 'add': argument 'b' ('y') belongs to Builder 'two', not 'one'");
    CHECK(b2.status().ok());
  }
  SUBCASE("a float scalar with an integer tensor") {
    Builder b;
    Tensor i = b.Input("i", DType::kInt64, {2});
    CHECK_FALSE((i * 2.0f).valid());
    CHECK(Contains(b.status().message(),
                   "Mul 'mul' (a: 'i' int64[2], b: 2): a float scalar operand needs a float tensor"));
  }
  SUBCASE("Conv2d on a rank-3 input") {
    Builder b;
    Tensor x = b.Input("x", DType::kFloat32, {1, 3, 3});
    CHECK_FALSE(Conv2d(x, b.Parameter("w", {1, 1, 1, 1}, std::vector<float>{1})).valid());
    CHECK(Contains(b.status().message(), "expected x of rank 4 (N, C, H, W), found rank 3"));
  }
  SUBCASE("Reshape to an impossible shape names the shape asked for") {
    Builder b;
    Tensor x = b.Input("x", DType::kFloat32, {2, 3});
    CHECK_FALSE(Reshape(x, {4, 2}, "r").valid());
    CHECK_MESSAGE(Contains(b.status().message(), "Reshape 'r' (x: 'x' float32[2, 3], shape: [4, 2])"),
                  b.status().message());
  }
  SUBCASE("outputs: an input, a parameter, twice, a taken name; no outputs at all") {
    Builder b;
    Tensor x = b.Input("x", DType::kFloat32, {2});
    auto bytes = b.Compile(TraceCpuOptions());
    CHECK(bytes.status().message() == "model 'model' has no outputs (call Builder::Output)");
    b.Output(x);
    CHECK(b.status().message() == "output #0: 'x' is an input; output an op's result");
    Builder b2;
    b2.Output(b2.Parameter("w", {1}, std::vector<float>{1}));
    CHECK(b2.status().message() == "output #0: 'w' is a parameter; output an op's result");
    Builder b3;
    Tensor y = Relu(b3.Input("x", DType::kFloat32, {2}), "y");
    b3.Output(y);
    b3.Output(y, "again");
    CHECK(b3.status().message() == "output #1 'again': 'y' is already an output");
    Builder b4;
    Tensor z = Relu(b4.Input("x", DType::kFloat32, {2}));
    b4.Output(z, "x");
    CHECK(b4.status().message() == "output #0 'x': the name is already used by another tensor or op");
  }
}

TEST_CASE("trace api: outputs are renamed as asked, profiles make entries, the artifact goes to a file") {
  kiln::testing::TempDir dir;
  Builder b("scale");
  Tensor x = b.Input("x", DType::kFloat32, {"N", 2});
  b.Output(x * 2.0f, "doubled");
  CompileOptions o = TraceCpuOptions();
  o.profiles = {"x:N=3", "x:N=1..8"};
  std::vector<std::string> log;
  o.log = [&](const std::string& line) { log.push_back(line); };
  REQUIRE(b.CompileToFile(dir / "scale.kiln", o).ok());
  CHECK(log.front() == "import traced model 'scale'");
  auto model = kiln::Model::Load(dir / "scale.kiln");
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  CHECK(model->outputs()[0].name == "doubled");
  REQUIRE(model->entries().size() == 2);
  CHECK(model->entries()[0].name == "N=3");
  CHECK(Contains(model->entries()[0].stage_traces[0], "x: float32[3, 2]"));  // the fixed import trace
  CHECK(model->entries()[1].name == "N in 1..8");
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  for (int64_t n : {3, 5}) {
    std::vector<float> xs(n * 2, 1.5f);
    std::vector<kiln::TensorView> out;
    const kiln::TensorView in = kiln::TensorView::Host(xs.data(), DType::kFloat32, {n, 2});
    REQUIRE(ctx->Run({&in, 1}, out).ok());
    CHECK(ctx->stats().last_entry == (n == 3 ? 0 : 1));
    CHECK(kiln::testing::FloatCopies(out)[0] == std::vector<float>(n * 2, 3.0f));
  }
  o.profiles = {"y:N=3"};
  auto bad = b.Compile(o);
  REQUIRE_FALSE(bad.ok());
  CHECK_MESSAGE(Contains(bad.status().message(), "'y'"), bad.status().message());
  CHECK(b.CompileToFile((dir / "no_such_folder") + "/a.kiln", TraceCpuOptions()).code() ==
        StatusCode::kFailedPrecondition);
}
