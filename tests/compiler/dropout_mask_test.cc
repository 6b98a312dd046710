// Dropout in inference mode: the output is the input and the mask output is all true,
// fused or not; a training-mode Dropout (random) is refused with the reason.
#include <doctest/doctest.h>

#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

using namespace kiln::testing;  // NOLINT: the model-building helpers

namespace {

onnx::ModelProto DropoutModel(bool training) {
  auto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "3"});
  AddFloatInit(g, "ratio", {}, {0.3f});
  auto* t = g->add_initializer();
  t->set_name("training");
  t->set_data_type(onnx::TensorProto::BOOL);
  t->add_int32_data(training ? 1 : 0);
  AddNode(g, "Dropout", {"x", "ratio", "training"}, {"y", "mask"}, "drop");
  AddNode(g, "Relu", {"y"}, {"r"});
  AddOutput(g, "r");
  AddOutput(g, "mask");
  return m;
}

}  // namespace

TEST_CASE("Dropout: in inference the mask output is all true, fused or not") {
  for (bool fuse : {true, false}) {
    INFO("fuse " << fuse);
    auto options = CpuOnly();
    options.fuse = fuse;
    auto model = kiln::Model::Load(CompileModel(DropoutModel(false), options));
    REQUIRE(model.ok());
    auto ctx = kiln::ExecutionContext::Create(*model, {});
    REQUIRE(ctx.ok());
    float x[6] = {-1, 2, -3, 4, -5, 6};
    kiln::TensorView in[] = {kiln::TensorView::Host(x, kiln::DType::kFloat32, {2, 3})};
    std::vector<kiln::TensorView> out;
    kiln::Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    REQUIRE(out.size() == 2);
    CHECK(FloatCopies(std::span(out).first(1))[0] == (std::vector<float>{0, 2, 0, 4, 0, 6}));
    REQUIRE(out[1].dtype == kiln::DType::kBool);
    REQUIRE(out[1].num_elements() == 6);
    const auto* mask = static_cast<const uint8_t*>(out[1].data);
    CHECK(std::vector<uint8_t>(mask, mask + 6) == std::vector<uint8_t>(6, 1));
  }
}

TEST_CASE("Dropout: training_mode true is refused (random dropout)") {
  std::string bytes;
  REQUIRE(DropoutModel(true).SerializeToString(&bytes));
  auto path = std::filesystem::temp_directory_path() / ("kiln_dropout_training_" + std::to_string(::getpid()) + ".onnx");
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto artifact = kiln::compiler::CompileOnnxFile(path.string(), CpuOnly(), nullptr);
  std::filesystem::remove(path);
  REQUIRE_FALSE(artifact.ok());
  CHECK(artifact.status().code() == kiln::StatusCode::kUnimplemented);
  INFO(artifact.status().ToString());
  CHECK(artifact.status().message().find("node 'drop' (Dropout): training_mode is true; Kiln supports inference mode only") !=
        std::string::npos);
}
