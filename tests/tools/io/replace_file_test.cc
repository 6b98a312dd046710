// Rewriting an artifact that a loaded Model has mapped must not disturb that Model.
#include "tools/io/replace_file.h"

#include <doctest/doctest.h>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/temp_dir.h"
#include "tests/native_target.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

// y = x * k for a constant k, x: float32[2].
std::vector<uint8_t> ScaleArtifact(const TempDir& dir, float k) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2"});
  AddFloatInit(g, "k", {}, {k});
  AddNode(g, "Mul", {"x", "k"}, {"y"});
  AddOutput(g, "y");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  WriteBytes(dir / "scale.onnx", bytes);
  kiln::compiler::CompileOptions options;
  options.archs.clear();  // CPU-only: needs no NVRTC (builds without the CUDA toolkit have none)
  options.cpu_targets = kiln::testing::NativeTargetForThisCpu();
  auto artifact = kiln::compiler::CompileOnnxFile(dir / "scale.onnx", options, nullptr);
  REQUIRE(artifact.ok());
  return *artifact;
}

float RunScale(const kiln::Model& model) {
  auto ctx = kiln::ExecutionContext::Create(model, {});
  REQUIRE(ctx.ok());
  float x[2] = {1.0f, 2.0f};
  kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2})};
  std::vector<kiln::TensorView> out;
  REQUIRE(ctx->Run(in, out).ok());
  return static_cast<const float*>(out[0].data)[1];
}

}  // namespace

TEST_CASE("artifact file: a rewrite replaces the file while a loaded Model keeps its bytes") {
  TempDir dir;
  const std::string path = dir / "model.kiln";
  REQUIRE(kiln::io::WriteArtifactFile(path, ScaleArtifact(dir, 3.0f)).ok());
  auto old_model = kiln::Model::Load(path);
  REQUIRE(old_model.ok());
  CHECK(RunScale(*old_model) == 6.0f);

  REQUIRE(kiln::io::WriteArtifactFile(path, ScaleArtifact(dir, 5.0f)).ok());
  CHECK(RunScale(*old_model) == 6.0f);  // still the mapped old file
  auto new_model = kiln::Model::Load(path);
  REQUIRE(new_model.ok());
  CHECK(RunScale(*new_model) == 10.0f);
}

TEST_CASE("artifact file: a folder that does not exist is a clear error") {
  TempDir dir;
  kiln::Status st = kiln::io::WriteArtifactFile(dir / "missing/model.kiln", {1, 2, 3});
  CHECK(st.code() == kiln::StatusCode::kFailedPrecondition);
  CHECK(st.message() == "cannot write '" + (dir / "missing/model.kiln") + "': No such file or directory");
}

TEST_CASE("artifact file: a symlink planted at a temporary name is never followed, a special file is refused") {
  TempDir dir;
  const std::string out = dir / "out.kiln";
  WriteBytes(dir / "victim.txt", "precious");
  // The old temporary was OUT.tmp<pid>, opened with fopen("wb"): a link there was followed.
  std::filesystem::create_symlink(dir / "victim.txt", out + ".tmp" + std::to_string(::getpid()));
  REQUIRE(kiln::io::WriteArtifactFile(out, {1, 2, 3}).ok());
  CHECK(ReadBytes(dir / "victim.txt") == "precious");
  CHECK(ReadBytes(out) == std::string("\x01\x02\x03", 3));
  CHECK(std::filesystem::is_symlink(out + ".tmp" + std::to_string(::getpid())));
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) files += e.path().string().find(".tmpX") == std::string::npos;
  CHECK(files == 3);  // out.kiln, victim.txt, the planted link: no temporary left behind

  // A FIFO (like /dev/null, not a regular file) would have been replaced by a regular file.
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  kiln::Status st = kiln::io::WriteArtifactFile(fifo, {1});
  CHECK(st.code() == kiln::StatusCode::kFailedPrecondition);
  CHECK(st.message() == "cannot write '" + fifo +
                            "': it exists and is a FIFO; the file is written by a rename, which would replace it: "
                            "give a regular file path");
  CHECK(std::filesystem::is_fifo(fifo));
  st = kiln::io::WriteArtifactFile(dir.path.string(), {1});
  CHECK(st.message().find("it exists and is a folder") != std::string::npos);
}
