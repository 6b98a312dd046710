// `kiln bench` end to end on a tiny compiled model: random and folder inputs, the JSON
// document's contents, the profile and trace, duration mode, and the errors.
#include "tools/io/bench_runner.h"
#include "tools/io/kv_decoder.h"

#include <doctest/doctest.h>

#include <set>

#include "kiln/tensor_files.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/temp_dir.h"

namespace kiln::io {
namespace {

// y = Relu(x) + x with x: float32[N, 4]; compiled as `shape` fixes it (empty: N symbolic).
std::string TinyArtifact(const testing::TempDir& dir, const std::vector<int64_t>& shape = {}) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "x", {"N", "4"});
  testing::AddNode(g, "Relu", {"x"}, {"r"}, "relu1");
  testing::AddNode(g, "Add", {"r", "x"}, {"y"}, "add1");
  testing::AddOutput(g, "y");
  compiler::CompileOptions options = testing::CpuOnly();
  if (!shape.empty()) options.input_shapes["x"] = shape;
  const std::vector<uint8_t> bytes = testing::CompileModel(m, options);
  const std::string path = dir / "tiny.kiln";
  testing::WriteBytes(path, std::string(bytes.begin(), bytes.end()));
  return path;
}

// A folder with input_0.pb: float32 zeros of shape `dims`.
std::string InputDir(const testing::TempDir& dir, const std::vector<int64_t>& dims) {
  HostTensor x;
  x.name = "x";
  x.dtype = DType::kFloat32;
  x.dims = dims;
  x.bytes.assign(static_cast<size_t>(x.num_elements()) * 4, 0);
  const std::string path = dir / "inputs";
  REQUIRE(WriteOutputDir(path, {x}).ok());  // writes output_0.pb: renamed as an input
  std::filesystem::rename(path + "/output_0.pb", path + "/input_0.pb");
  return path;
}

BenchConfig Config(const std::string& artifact) {
  BenchConfig c;
  c.artifact = artifact;
  c.device = Device::kCpu;
  c.warmup = 2;
  c.iterations = 5;
  return c;
}

TEST_CASE("bench runner: random inputs, 5 iterations, profile: the JSON document holds the run") {
  testing::TempDir dir;
  BenchConfig c = Config(TinyArtifact(dir));
  c.random = true;
  c.shapes["x"] = {3, 4};
  c.profile = true;
  c.trace_runs = 3;
  auto r = RunBench(c, nullptr);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  // Through text, as a script reads it.
  const nlohmann::json j = nlohmann::json::parse(BenchJson(*r).dump());
  CHECK(j["artifact"] == c.artifact);
  CHECK(j["device"] == "cpu");
  CHECK(j["iterations"] == 5);
  CHECK(j["warmup"] == 2);
  CHECK(j["threads"] == 0);
  CHECK(j["cuda_graphs"] == false);
  CHECK(j["entry"] == "default");
  const nlohmann::json& l = j["latency_ms"];
  CHECK(l["min"].get<double>() > 0);
  CHECK(l["min"] <= l["p50"]);
  CHECK(l["p50"] <= l["p90"]);
  CHECK(l["p90"] <= l["p99"]);
  CHECK(l["p99"] <= l["max"]);
  CHECK(l["min"] <= l["mean"]);
  CHECK(l["mean"] <= l["max"]);
  CHECK(j["throughput_per_s"].get<double>() > 0);
  CHECK(j["host_us"]["computation"].get<double>() > 0);
  CHECK(j["gpu_ms"].is_null());
  CHECK(j["memory"]["host_bytes"].get<uint64_t>() > 0);
  CHECK(j["memory"]["device_bytes"] == 0);
  CHECK(j["memory"]["peak_rss_bytes"].get<uint64_t>() > 0);
  REQUIRE(j["inputs"].size() == 1);
  CHECK(j["inputs"][0]["name"] == "x");
  CHECK(j["inputs"][0]["dtype"] == "float32");
  CHECK(j["inputs"][0]["shape"] == nlohmann::json::array({3, 4}));
  // Every instruction ran in each of the 5 timed calls; the shares add up to 1.
  const nlohmann::json& p = j["profile"];
  REQUIRE(p.is_object());
  REQUIRE(p["instructions"].size() >= 1);
  double share = 0;
  for (const nlohmann::json& i : p["instructions"]) {
    CHECK(i["calls"] == 5);
    share += i["share"].get<double>();
  }
  CHECK(share == doctest::Approx(1.0));
  // The trace keeps the last 3 calls.
  REQUIRE(r->trace.size() == 3);
  CHECK(r->trace.front().iteration == 2);
  CHECK(r->trace.back().iteration == 4);
}

TEST_CASE("bench runner: inputs from a folder, duration mode, progress reports") {
  testing::TempDir dir;
  BenchConfig c = Config(TinyArtifact(dir, {2, 4}));
  c.inputs_dir = InputDir(dir, {2, 4});
  c.iterations = 0;
  c.duration_s = 0.05;
  int64_t warm = 0, timed = 0;
  auto r = RunBench(c, [&](const BenchProgress& p) { (p.warmup ? warm : timed) = p.done; });
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->timed_s >= 0.05);
  CHECK(r->iterations >= 1);
  CHECK(timed == r->iterations);
  CHECK(warm == 2);
  CHECK(r->inputs[0].shape == std::vector<int64_t>{2, 4});
  CHECK_FALSE(r->profile.has_value());
}

TEST_CASE("bench runner: a seed is decimal digits in the uint64 range, never a wrapped negative") {
  CHECK(ParseSeed("0") == uint64_t{0});
  CHECK(ParseSeed("42") == uint64_t{42});
  CHECK(ParseSeed("18446744073709551615") == uint64_t{18446744073709551615ull});
  for (const char* bad : {"-1", "18446744073709551616", "", "+1", " 1", "1 ", "0x10", "1e3"})
    CHECK_MESSAGE(!ParseSeed(bad), bad);
}

TEST_CASE("bench runner: errors name the problem") {
  testing::TempDir dir;
  const std::string artifact = TinyArtifact(dir);
  BenchConfig c = Config(artifact);
  auto neither = RunBench(c, nullptr);
  REQUIRE_FALSE(neither.ok());
  CHECK(neither.status().code() == StatusCode::kInvalidArgument);
  // N is symbolic and no entry fixes it.
  c.random = true;
  auto open = RunBench(c, nullptr);
  REQUIRE_FALSE(open.ok());
  const std::string message(open.status().message());
  CHECK(message.find("input 'x' dim 0 is symbolic ('N')") != std::string::npos);
  CHECK(message.find("pass --shape x:DIMS, numbers for its dims [N, 4]") != std::string::npos);
  // A folder without the inputs.
  BenchConfig empty = Config(artifact);
  std::filesystem::create_directories(dir / "empty");
  empty.inputs_dir = dir / "empty";
  auto missing = RunBench(empty, nullptr);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == StatusCode::kNotFound);
  // The artifact is fixed at 2x4: random inputs take that shape, a --shape of 3x4 is refused
  // before running, and a 3x4 input from a folder fits no entry.
  testing::TempDir fixed_dir;
  BenchConfig fixed = Config(TinyArtifact(fixed_dir, {2, 4}));
  fixed.random = true;
  auto ok = RunBench(fixed, nullptr);
  REQUIRE_MESSAGE(ok.ok(), ok.status().ToString());
  CHECK(ok->inputs[0].shape == std::vector<int64_t>{2, 4});
  fixed.shapes["x"] = {3, 4};
  auto wrong = RunBench(fixed, nullptr);
  REQUIRE_FALSE(wrong.ok());
  CHECK(std::string(wrong.status().message()).find("dim 0 is 2 in the artifact") != std::string::npos);
  BenchConfig folder = Config(fixed.artifact);
  folder.inputs_dir = InputDir(fixed_dir, {3, 4});
  auto no_entry = RunBench(folder, nullptr);
  REQUIRE_FALSE(no_entry.ok());
  CHECK(no_entry.status().code() == StatusCode::kInvalidArgument);
  CHECK(std::string(no_entry.status().message()).find("x") != std::string::npos);
  BenchConfig bad = Config(dir / "no_such.kiln");
  bad.random = true;
  CHECK(RunBench(bad, nullptr).status().code() == StatusCode::kNotFound);
}

// A KV-cache decoder in the Optimum layout, vocabulary 8, one layer, 1 head of 2: logits are row
// `id` of a table whose largest entry is at (id + 1) mod 8, so greedy generation counts up; the
// present keys and values are the past's with each new id's embedding [id, -id] appended.
std::string CountingDecoder(const testing::TempDir& dir) {
  auto m = testing::MakeModel(13);
  auto* g = m.mutable_graph();
  testing::AddInput(g, "input_ids", {"batch", "seq"}, onnx::TensorProto::INT64);
  testing::AddInput(g, "past_key_values.0.key", {"batch", "1", "past", "2"});
  testing::AddInput(g, "past_key_values.0.value", {"batch", "1", "past", "2"});
  std::vector<float> table(64, 0.0f), emb(16);
  for (int i = 0; i < 8; ++i) {
    table[static_cast<size_t>(i * 8 + (i + 1) % 8)] = 1.0f;
    emb[static_cast<size_t>(2 * i)] = static_cast<float>(i);
    emb[static_cast<size_t>(2 * i + 1)] = static_cast<float>(-i);
  }
  testing::AddFloatInit(g, "table", {8, 8}, table);
  testing::AddFloatInit(g, "emb", {8, 2}, emb);
  testing::AddInt64Init(g, "one", {1}, {1});
  testing::AddNode(g, "Gather", {"table", "input_ids"}, {"logits"}, "rows");
  testing::AddNode(g, "Gather", {"emb", "input_ids"}, {"kv"}, "embed");
  testing::AddNode(g, "Unsqueeze", {"kv", "one"}, {"kv4"}, "heads");
  testing::AttrInt(testing::AddNode(g, "Concat", {"past_key_values.0.key", "kv4"}, {"present.0.key"}, "keys"), "axis",
                   2);
  testing::AttrInt(testing::AddNode(g, "Concat", {"past_key_values.0.value", "kv4"}, {"present.0.value"}, "values"),
                   "axis", 2);
  for (const char* name : {"logits", "present.0.key", "present.0.value"}) testing::AddOutput(g, name);
  const std::vector<uint8_t> bytes = testing::CompileModel(m, testing::CpuOnly());
  const std::string path = dir / "decoder.kiln";
  testing::WriteBytes(path, std::string(bytes.begin(), bytes.end()));
  return path;
}

TEST_CASE("bench runner: --generate times a KV-cache decoder per generated token") {
  testing::TempDir dir;
  const std::string artifact = CountingDecoder(dir);
  auto model = Model::Load(artifact);
  REQUIRE(model.ok());
  auto d = FindKvDecoder(*model);
  REQUIRE_MESSAGE(d.ok(), d.status().ToString());
  CHECK(d->vocab == 8);
  REQUIRE(d->cache.size() == 2);
  auto ctx = ExecutionContext::Create(*model, {Device::kCpu});
  REQUIRE(ctx.ok());
  std::vector<int64_t> steps;
  auto ids = Generate(*ctx, *model, *d, {5, 6}, 4, [&](int s, int64_t ns) {
    steps.push_back(s);
    CHECK(ns > 0);
  });
  REQUIRE_MESSAGE(ids.ok(), ids.status().ToString());
  CHECK(*ids == std::vector<int64_t>{7, 0, 1, 2});
  CHECK(steps == std::vector<int64_t>{0, 1, 2, 3});
  // The prompt (an empty cache) and the later calls (past 2 to 4) ran through the one entry.
  REQUIRE(model->entries().size() == 1);
  CHECK(ctx->stats().entries[0].hits == 4);

  BenchConfig c = Config(artifact);
  c.generate = 5;
  c.prompt_tokens = 3;
  c.warmup = 1;
  c.iterations = 2;
  auto r = RunBench(c, nullptr);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(r->generate);
  CHECK(r->iterations == 8);  // 2 generations of 4 calls after the prompt's
  CHECK(r->generate->tokens == 5);
  REQUIRE(r->generate->generated_ids.size() == 5);
  for (size_t k = 1; k < 5; ++k)
    CHECK(r->generate->generated_ids[k] == (r->generate->generated_ids[k - 1] + 1) % 8);
  CHECK(r->latency_ms.min > 0);
  CHECK(r->generate->first_token_ms.min > 0);
  const nlohmann::json j = BenchJson(*r);
  CHECK(j["generate"]["tokens"] == 5);
  CHECK(j["generate"]["generated_ids"].size() == 5);

  // Not a KV decoder: the error says what was expected and what is missing.
  testing::TempDir tiny_dir;
  BenchConfig tiny = Config(TinyArtifact(tiny_dir));
  tiny.generate = 3;
  auto refused = RunBench(tiny, nullptr);
  REQUIRE_FALSE(refused.ok());
  const std::string message(refused.status().message());
  CHECK(message.find("not a decoder with a KV cache: expected inputs input_ids") != std::string::npos);
  CHECK(message.find("found inputs x float32 [N, 4];") != std::string::npos);
  CHECK(message.find("; no input input_ids") != std::string::npos);
  CHECK(message.find("; no output present.0.key") != std::string::npos);
  c.random = true;
  CHECK(std::string(RunBench(c, nullptr).status().message()).find("give neither --inputs nor --random") !=
        std::string::npos);
}

}  // namespace
}  // namespace kiln::io
