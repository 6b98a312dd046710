// The `executors` stage: what runs each node on each backend (the backends' claims), and the notes
// of its trace: each backend's library nodes and each device backend's CPU fallback regions.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace {

using namespace kiln::testing;

std::string ExecutorsTrace(const onnx::ModelProto& m) {
  auto model = kiln::Model::Load(CompileModel(m));
  REQUIRE(model.ok());
  const kiln::EntryInfo& e = model->entries().at(0);
  const auto& names = e.compile.stage_names;
  const size_t i = std::find(names.begin(), names.end(), "executors") - names.begin();
  REQUIRE(i < e.stage_traces.size());
  return e.stage_traces[i];
}

TEST_CASE("executors: consecutive CPU nodes form one CPU fallback region, noted with its reasons") {
  // Relu (generated) -> Hardmax -> ArgMax (the CPU, one region) -> Cast -> Hardmax (a second).
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "5"});
  AddNode(g, "Relu", {"x"}, {"r"}, "relu");
  AddNode(g, "Hardmax", {"r"}, {"h"}, "hardmax");
  AttrInt(AddNode(g, "ArgMax", {"h"}, {"a"}, "argmax"), "axis", 1);
  AttrInt(AddNode(g, "Cast", {"a"}, {"c"}, "cast"), "to", onnx::TensorProto::FLOAT);
  AddNode(g, "Hardmax", {"c"}, {"y"}, "hardmax2");
  AddOutput(g, "y");
  const std::string trace = ExecutorsTrace(m);
  INFO(trace);
  CHECK(trace.find("# 2 CPU fallback regions on cuda (each: one copy to the host, one wait, one copy back)\n") !=
        std::string::npos);
  // Every backend runs the unfused ops on their CPU kernels, and the fused region alike.
  CHECK(trace.find(" @cpu <- ") == std::string::npos);
  CHECK(trace.find("= Hardmax(") != std::string::npos);
  CHECK(trace.find("float32[2, 5] @cpu\n") != std::string::npos);
  CHECK(trace.find(" @generated <- ") != std::string::npos);
  CHECK(trace.find("# CPU fallback region 1, 2 nodes: 'hardmax' (Hardmax), 'argmax' (ArgMax) -- ") !=
        std::string::npos);
  CHECK(trace.find("# CPU fallback region 2, 1 node: 'hardmax2' (Hardmax) -- ") != std::string::npos);
  // Each distinct reason once: Hardmax and ArgMax share their fusion rule's note.
  CHECK(trace.find("'argmax' (ArgMax) -- needs a (value, index) reduction; fused programs reduce one value per "
                   "row\n") != std::string::npos);
  CHECK(trace.find("-- CPU fallback on a GPU") == std::string::npos);
}

TEST_CASE("executors: a model without CPU nodes notes no region") {
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "5"});
  AddNode(g, "Relu", {"x"}, {"y"}, "relu");
  AddOutput(g, "y");
  CHECK(ExecutorsTrace(m).find("CPU fallback region") == std::string::npos);
}

TEST_CASE("executors: a Conv is cuDNN's on cuda and oneDNN's on the CPU, and noted so") {
  // A 1-D Conv: the CPU plan keeps it as ONNX has it (2-D ones become kiln.NhwcConv, below).
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "5"});
  AddFloatInit(g, "w", {3, 2, 3}, std::vector<float>(18, 0.5f));
  AddNode(g, "Conv", {"x", "w"}, {"c"}, "conv");
  AddNode(g, "Relu", {"c"}, {"y"}, "relu");
  AddOutput(g, "y");
  const std::string trace = ExecutorsTrace(m);
  INFO(trace);
  CHECK(trace.find(" @cuda:cudnn @cpu:onednn\n") != std::string::npos);
  CHECK(trace.find("# 1 node on oneDNN on cpu ('conv'), where the runtime has it and it takes the form; else the CPU "
                   "kernel (Stats::last_fallbacks names each fallback)\n") != std::string::npos);
  CHECK(trace.find("# 1 node on cuDNN on cuda ('conv'), ") != std::string::npos);
}

TEST_CASE("executors: the CPU plan's NHWC Conv is oneDNN's on the CPU, and says why cuda has none") {
  // Two Convs: the first writes NHWC for the second (passes/channels_last.h).
  onnx::ModelProto m = MakeModel(13);
  auto* g = m.mutable_graph();
  AddInput(g, "x", {"1", "2", "5", "5"});
  AddFloatInit(g, "w", {2, 2, 3, 3}, std::vector<float>(36, 0.5f));
  AddNode(g, "Conv", {"x", "w"}, {"c"}, "conv");
  AddNode(g, "Relu", {"c"}, {"r"}, "relu");
  AddNode(g, "Conv", {"r", "w"}, {"y"}, "conv2");
  AddOutput(g, "y");
  const std::string trace = ExecutorsTrace(m);
  INFO(trace);
  CHECK(trace.find("r#nhwc = kiln.NhwcConv(x, w, epilogue_activation='Relu'") != std::string::npos);
  CHECK(trace.find(" @cuda:cpu @cpu:onednn\n") != std::string::npos);
  CHECK(trace.find("# 2 nodes on oneDNN on cpu ('conv', 'conv2'), ") != std::string::npos);
  CHECK(trace.find("'conv' (kiln.NhwcConv), 'conv2' (kiln.NhwcConv) -- the CPU backend's plan's NHWC convolution "
                   "(the CUDA plan keeps Conv NCHW, for cuDNN)\n") != std::string::npos);
}

}  // namespace
