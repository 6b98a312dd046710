// The Triton backend's configuration logic (serving/triton/model_config.h) on compiled models:
// auto-complete, the check against the artifact with its exact messages, and the parameters.
// The backend inside the real server is tests/serving/triton_test.py's (scripts/triton.sh).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "serving/triton/model_config.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"

namespace kiln {
namespace {

using nlohmann::json;

// y = Relu(x), x float32[N, 3]: batchable on N.
Model BatchedModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "3"});
  testing::AddNode(g, "Relu", {"x"}, {"y"}, "relu");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  return *model;
}

// y = a * s, a float32[2, N], s a float32 scalar: no batch dim (dim 0 of a is 2).
Model UnbatchedModel() {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "a", {"2", "N"});
  testing::AddInput(g, "s", {});
  testing::AddNode(g, "Mul", {"a", "s"}, {"y"}, "mul");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  return *model;
}

// BatchedModel's graph compiled for the batch sizes `profiles` give ("x:N=1", ...) only.
Model ProfiledModel(const std::vector<std::string>& profiles) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "3"});
  testing::AddNode(g, "Relu", {"x"}, {"y"}, "relu");
  testing::AddOutput(g, "y");
  auto model = Model::Load(testing::CompileModel(m, testing::WithProfiles(profiles)));
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  return *model;
}

}  // namespace

TEST_CASE("Triton configuration: the batch sizes the entries accept bound max_batch_size") {
  const Model some = ProfiledModel({"x:N=1", "x:N=4", "x:N=8..64:8"});
  CHECK(triton::AcceptsBatch(some, 1));
  CHECK(!triton::AcceptsBatch(some, 2));
  CHECK(triton::AcceptsBatch(some, 4));
  CHECK(triton::AcceptsBatch(some, 48));
  CHECK(!triton::AcceptsBatch(some, 50));
  CHECK(!triton::AcceptsBatch(some, 72));
  CHECK(triton::BatchGaps(some, 4) == "2..3");
  CHECK(triton::BatchGaps(some, 17) == "2..3, 5..7, 9..15, 17");
  CHECK(triton::BatchGaps(some, 100) == "2..3, 5..7, 9..15, 17..23, 25..31, 33..39, 41..47, 49..55, ...");
  // Auto-complete takes the largest accepted size up to the default.
  CHECK(triton::AutoCompleteConfig(some, json::object(), 4)["max_batch_size"] == 4);
  CHECK(triton::AutoCompleteConfig(some, json::object(), 7)["max_batch_size"] == 4);
  CHECK(triton::AutoCompleteConfig(some, json::object(), 1000)["max_batch_size"] == 64);
  CHECK(triton::AutoCompleteConfig(some, json::object(), 2147483647)["max_batch_size"] == 64);
  // Fixed batches only: y's dim 0 reads "1|4", which follows x's.
  const Model fixed = ProfiledModel({"x:N=1", "x:N=4"});
  CHECK(fixed.outputs()[0].shape[0].symbol == "1|4");
  CHECK(triton::BatchSymbol(fixed) == "N");
  CHECK(triton::AutoCompleteConfig(fixed, json::object(), 8)["max_batch_size"] == 4);
  const Model ranged = ProfiledModel({"x:N=2..16"});
  CHECK(triton::BatchGaps(ranged, 2147483647) == "1, 17..2147483647");
  CHECK(!triton::AutoCompleteConfig(ranged, json::object(), 1).contains("max_batch_size"));
  CHECK(triton::AutoCompleteConfig(ranged, json::object(), 2147483647)["max_batch_size"] == 16);
  CHECK(triton::BatchGaps(BatchedModel(), 2147483647).empty());
  // A max_batch_size no entry accepts is a mismatch: a request of that many rows cannot run.
  json config = triton::AutoCompleteConfig(some, json::object(), 4);
  CHECK(triton::CheckConfig(some, config).ok());
  config["max_batch_size"] = 6;
  const Status s = triton::CheckConfig(some, config);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() ==
        "config.pbtxt does not fit the artifact:\n  max_batch_size 6: no entry accepts a batch of 6 (entries: N=1; N=4; "
        "N in 8..64:8), so a request of that many rows could not run; compile a profile for it or lower max_batch_size");
}

TEST_CASE("Triton configuration: auto-complete fills the batch size, inputs and outputs from the artifact") {
  const Model batched = BatchedModel();
  CHECK(triton::BatchSymbol(batched) == "N");
  const json filled = triton::AutoCompleteConfig(batched, json{{"name", "m"}, {"backend", "kiln"}}, 4);
  CHECK(filled == json::parse(R"({"name": "m", "backend": "kiln", "max_batch_size": 4,
      "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3]}],
      "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [3]}]})"));
  CHECK(triton::CheckConfig(batched, filled).ok());
  // Batching off (--backend-config=kiln,default-max-batch-size=0): the batch dim is a dim.
  const json unbatched = triton::AutoCompleteConfig(batched, json::object(), 0);
  CHECK(!unbatched.contains("max_batch_size"));
  CHECK(unbatched["input"][0]["dims"] == json::array({-1, 3}));
  CHECK(triton::CheckConfig(batched, unbatched).ok());
  // A given list is kept; what it leaves out is checked, not filled.
  const json given = triton::AutoCompleteConfig(
      batched, json{{"max_batch_size", 8}, {"output", json::array({{{"name", "y"}, {"data_type", "TYPE_FP32"}, {"dims", {3}}}})}}, 4);
  CHECK(given["max_batch_size"] == 8);
  CHECK(given["output"].size() == 1);

  const Model plain = UnbatchedModel();
  CHECK(triton::BatchSymbol(plain).empty());
  const json scalar = triton::AutoCompleteConfig(plain, json::object(), 4);
  CHECK(scalar.value("max_batch_size", 0) == 0);
  // Triton serves no scalar tensors: s is declared [1], and the backend passes it as the scalar.
  CHECK(scalar["input"] == json::parse(R"([{"name": "a", "data_type": "TYPE_FP32", "dims": [2, -1]},
                                          {"name": "s", "data_type": "TYPE_FP32", "dims": [1]}])"));
  CHECK(triton::CheckConfig(plain, scalar).ok());
}

TEST_CASE("Triton configuration: rows without dims, listed inputs, reshapes and duplicates") {
  // y = x * x, x float32[N]: a batched model whose rows have no dims are [1], reshaped to [].
  auto m = testing::MakeModel(13);
  testing::AddInput(m.mutable_graph(), "x", {"N"});
  testing::AddNode(m.mutable_graph(), "Mul", {"x", "x"}, {"y"}, "square");
  testing::AddOutput(m.mutable_graph(), "y");
  auto rows = Model::Load(testing::CompileModel(m));
  REQUIRE(rows.ok());
  const json filled = triton::AutoCompleteConfig(*rows, json::object(), 4);
  CHECK(filled["input"] == json::parse(R"([{"name": "x", "data_type": "TYPE_FP32", "dims": [1],
                                           "reshape": {"shape": []}}])"));
  CHECK(triton::CheckConfig(*rows, filled).ok());
  // Listed inputs keep max_batch_size 0 (Triton's JSON has 0 for none): dim 0 is in their dims.
  const Model batched = BatchedModel();
  const json listed = triton::AutoCompleteConfig(
      batched, json::parse(R"({"max_batch_size": 0, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 3]}]})"),
      4);
  CHECK(listed["max_batch_size"] == 0);
  CHECK(triton::CheckConfig(batched, listed).ok());
  // A reshape is what the backend sees: [3] reshaped to [3] fits; to [1, 3] does not.
  json reshaped = json::parse(R"({"max_batch_size": 2, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3],
                                  "reshape": {"shape": [3]}}]})");
  CHECK(triton::CheckConfig(batched, reshaped).ok());
  reshaped["input"][0]["reshape"]["shape"] = json::array({1, 3});
  CHECK(triton::CheckConfig(batched, reshaped).message() ==
        "config.pbtxt does not fit the artifact:\n"
        "  input 'x': 2 dims in its reshape after the batch dim, the artifact's has 1");
  const json twice = json::parse(R"({"max_batch_size": 2, "input": [
      {"name": "x", "data_type": "TYPE_FP32", "dims": [3]}, {"name": "x", "data_type": "TYPE_FP32", "dims": [3]}]})");
  CHECK(triton::CheckConfig(batched, twice).message() ==
        "config.pbtxt does not fit the artifact:\n  input 'x' is listed twice");
}

TEST_CASE("Triton configuration: every mismatch with the artifact is named, one per line") {
  const Model plain = UnbatchedModel();
  const json config = json::parse(R"({"max_batch_size": 4,
      "input": [{"name": "a", "data_type": "TYPE_FP16", "dims": ["-1"]},
                {"name": "b", "data_type": "TYPE_FP32", "dims": [1]}],
      "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": ["x"]}]})");
  const Status st = triton::CheckConfig(plain, config);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() ==
        "config.pbtxt does not fit the artifact:\n"
        "  max_batch_size 4, but the artifact has no batch dim: dim 0 of every input and output must be one symbol, "
        "and 'a' dim 0 is 2 (max_batch_size 0 serves it unbatched)\n"
        "  input 'a': data_type TYPE_FP16, the artifact's is TYPE_FP32\n"
        "  input 'b': the artifact has no input of that name (its inputs: 'a', 's')\n"
        "  output 'y' dim 0 (after the batch dim): \"x\" is not a dim (-1 or a size)\n"
        "  input 's': the artifact needs it, and the configuration does not list it");
  const json fixed = json::parse(R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [-1, 5]},
                                               {"name": "s", "data_type": "TYPE_FP32", "dims": [1, 1]}]})");
  CHECK(triton::CheckConfig(plain, fixed).message() ==
        "config.pbtxt does not fit the artifact:\n"
        "  input 'a' dim 0: -1, but the artifact fixes it to 2\n"
        "  input 's': 2 dims, the artifact's has 0");
  // A constant where the artifact has a symbol is allowed: the prologue checks each call.
  const json narrower = json::parse(R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [2, 7]},
                                                  {"name": "s", "data_type": "TYPE_FP32", "dims": [1]}]})");
  CHECK(triton::CheckConfig(plain, narrower).ok());
}

TEST_CASE("Triton configuration: Kiln's dtypes in Triton's names, and back") {
  CHECK(triton::ConfigDataType(DType::kBFloat16) == "TYPE_BF16");
  CHECK(triton::TritonDataType(DType::kBFloat16) == TRITONSERVER_TYPE_BF16);
  CHECK(triton::DTypeOfTriton(TRITONSERVER_TYPE_FP16) == DType::kFloat16);
  CHECK(triton::DTypeOfTriton(TRITONSERVER_TYPE_BYTES) == DType::kUndefined);
  CHECK(triton::TritonDataType(DType::kUndefined) == TRITONSERVER_TYPE_INVALID);
}

TEST_CASE("Triton configuration: the Kiln parameters and their errors") {
  const auto defaults = triton::ReadParameters(json::object());
  REQUIRE(defaults.ok());
  CHECK(defaults->cpu_threads == 1);
  CHECK(!defaults->cuda_graphs);
  CHECK(defaults->device == triton::DevicePolicy::kAuto);
  const auto set = triton::ReadParameters(json::parse(R"({"parameters": {
      "cpu_threads": {"string_value": "0"}, "cuda_graphs": {"string_value": "true"},
      "device": {"string_value": "cpu"}}})"));
  REQUIRE(set.ok());
  CHECK(set->cpu_threads == 0);
  CHECK(set->cuda_graphs);
  CHECK(set->device == triton::DevicePolicy::kCpu);
  const auto error = [](const char* parameters) {
    return std::string(triton::ReadParameters(json::parse(std::string(R"({"parameters": )") + parameters + "}"))
                           .status()
                           .message());
  };
  CHECK(error(R"({"cpu_threads": {"string_value": "2x"}})") ==
        "parameter 'cpu_threads' = '2x': expected 0 (one per core) to 256");
  CHECK(error(R"({"cpu_threads": {"string_value": "257"}})") ==
        "parameter 'cpu_threads' = '257': expected 0 (one per core) to 256");
  CHECK(error(R"({"cuda_graphs": {"string_value": "yes"}})") == "parameter 'cuda_graphs' = 'yes': expected true or false");
  CHECK(error(R"({"device": {"string_value": "gpu"}})") == "parameter 'device' = 'gpu': expected auto, cpu or cuda");
  CHECK(error(R"({"threads": {"string_value": "2"}})") ==
        "parameter 'threads': unknown; the Kiln backend reads cpu_threads, cuda_graphs and device");
}

}  // namespace kiln
