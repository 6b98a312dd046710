// Value inputs (compiler/passes/value_inputs.h): an int input whose values reach an If
// condition gets value symbols, which the prologue binds from its elements.
#include "compiler/passes/value_inputs.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln::testing {
namespace {

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

TEST_CASE("value inputs: a shape computed from an input's values is not compiled; the model compiles as without them") {
  auto m = IfOnValueModel();
  auto* g = m.mutable_graph();
  AddInt64Init(g, "zero", {}, {0});
  AddNode(g, "Range", {"zero", "mode", "one"}, {"steps"}, "range");  // [mode] elements
  AddOutput(g, "steps");
  const auto path = std::filesystem::temp_directory_path() / ("kiln_value_inputs_" + std::to_string(::getpid()) + ".onnx");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  compiler::CompileOptions options = CpuOnly();
  std::vector<std::string> log;
  options.log = [&](const std::string& line) { log.push_back(line); };
  auto artifact = compiler::CompileOnnxFile(path.string(), options, nullptr);
  std::filesystem::remove(path);
  // With value symbols, the Range's length would be one: refused, naming the node and the input.
  CHECK(std::find(log.begin(), log.end(),
                  "value inputs: node 'range' (Range): output 'steps' has shape [mode], computed from the values of "
                  "input 'mode'; Kiln compiles If conditions on input values, not shapes yet: bind the input with "
                  "--constant-input; compiling without them") != log.end());
  // Without them, the If on the input's data is refused as before.
  REQUIRE_FALSE(artifact.ok());
  CHECK(artifact.status().code() == StatusCode::kUnimplemented);
  CHECK(artifact.status().message().find("node 'branch' (If): the condition depends on tensor data") !=
        std::string::npos);
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

  // A shape operand's input is not one yet (value_inputs.h): still refused at compile time.
  auto r = MakeModel(16);
  auto* h = r.mutable_graph();
  AddInput(h, "x", {"6"});
  AddInput(h, "shape", {"2"}, onnx::TensorProto::INT64);
  AddNode(h, "Reshape", {"x", "shape"}, {"y"}, "reshape");
  AddOutput(h, "y");
  auto reshape = Import(r);
  REQUIRE(reshape.ok());
  CHECK(passes::MarkValueInputs(*reshape).empty());
}

}  // namespace
}  // namespace kiln::testing
