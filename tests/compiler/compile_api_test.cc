// kiln/compile.h, the public in-process compile: options as `kiln compile`'s flags, the report,
// and each option error's message.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "kiln/compile.h"
#include "kiln/runtime.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln {
namespace {

// y = x * s + 1, x float32[N, 3], s float32 scalar; written to a file that the destructor removes.
struct ScaleFile {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("kiln_compile_api_" + std::to_string(::getpid()) + ".onnx");
  ScaleFile() {
    auto m = testing::MakeModel(13);
    auto* g = m.mutable_graph();
    testing::AddInput(g, "x", {"N", "3"});
    testing::AddInput(g, "s", {});
    testing::AddFloatInit(g, "one", {}, {1.0f});
    testing::AddNode(g, "Mul", {"x", "s"}, {"m"}, "mul");
    testing::AddNode(g, "Add", {"m", "one"}, {"y"}, "add");
    testing::AddOutput(g, "y");
    std::string bytes;
    REQUIRE(m.SerializeToString(&bytes));
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  ~ScaleFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("CompileOnnx: profiles, a constant input and a CPU-only artifact, with the report and the log") {
  const ScaleFile file;
  const float two = 2.0f;
  OnnxCompileOptions options;
  options.profiles = {"x:N=1..4"};
  options.constant_inputs.emplace("s", TensorView::Host(&two, DType::kFloat32, {}));
  options.archs = std::vector<std::string>{};
  options.cpu_targets = "x86-64";
  std::vector<std::string> seen;
  options.log = [&](const std::string& line) { seen.push_back(line); };
  CompileReport report;
  Result<std::vector<uint8_t>> bytes = CompileOnnx(file.path.string(), options, &report);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  REQUIRE(report.entries.size() == 1);
  CHECK(report.entries[0].name == "N in 1..4");
  CHECK(report.entries[0].instructions == 1);  // Mul and Add fused into one generated kernel
  CHECK(report.kernels == 1);
  CHECK(report.compile_jobs == 0);  // CPU-only: no NVRTC
  CHECK(report.log == seen);
  CHECK(std::any_of(seen.begin(), seen.end(),
                    [](const std::string& l) { return l.rfind("entry 'N in 1..4': fusion: region '", 0) == 0; }));

  auto model = Model::Load(*bytes);
  REQUIRE(model.ok());
  REQUIRE(model->inputs().size() == 1);  // s is bound: no longer an input
#if KILN_HAVE_LLVM
  REQUIRE(model->native_code().size() == 1);  // the target asked for, alone
  CHECK(model->native_code()[0].target == "x86-64");
#endif
  CHECK(model->entries()[0].input_dims[0][0].max == 4);
  auto ctx = ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  const float x[] = {1, 2, 3, 4, 5, 6};
  const TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  std::vector<TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  const auto* y = static_cast<const float*>(out[0].data);
  CHECK(std::vector<float>(y, y + 6) == std::vector<float>{3, 5, 7, 9, 11, 13});
}

TEST_CASE("CompileOnnx: each option error names the option and what it expects") {
  const ScaleFile file;
  auto error = [&](auto&& set) {
    OnnxCompileOptions options;
    options.archs = std::vector<std::string>{};
    set(options);
    Result<std::vector<uint8_t>> bytes = CompileOnnx(file.path.string(), options);
    REQUIRE(!bytes.ok());
    return bytes.status();
  };
  Status s = error([](OnnxCompileOptions& o) { o.precision = "fp8"; });
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "precision 'fp8': expected fp32, fp16 or bf16");
  s = error([](OnnxCompileOptions& o) { o.io_precision = "fp32"; });
  CHECK(s.message() == "io_precision 'fp32': expected declared, fp16 or bf16");
  s = error([](OnnxCompileOptions& o) { o.archs = std::vector<std::string>{"sm90"}; });
  CHECK(s.message() == "arch 'sm90': expected sm_NN (a cubin) or compute_NN (PTX), such as sm_90");
  s = error([](OnnxCompileOptions& o) { o.cpu_targets = "x86-64,avx2"; });
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "--cpu-targets: unknown CPU target 'avx2'; expected a comma-separated list of x86-64, "
                       "x86-64-v3, x86-64-v4, aarch64, host (this machine's family) or none");
  s = error([](OnnxCompileOptions& o) { o.profiles = {"x:N=4..1"}; });
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "profile 'x:N=4..1' x:N: '4..1' admits no value");  // the parser's own, named once
  s = error([](OnnxCompileOptions& o) { o.constant_inputs.emplace("s", TensorView::Host(nullptr, DType::kFloat32, {2})); });
  CHECK(s.message() == "constant input 's': its data pointer is null");
  s = error([](OnnxCompileOptions& o) {
    TensorView device = TensorView::Host(&o, DType::kFloat32, {});
    device.memory = MemoryKind::kDevice;
    o.constant_inputs.emplace("s", device);
  });
  CHECK(s.message() == "constant input 's': its data must be in host memory");
  Result<std::vector<uint8_t>> missing = CompileOnnx("/nonexistent/model.onnx", {});
  REQUIRE(!missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
}

}  // namespace kiln
