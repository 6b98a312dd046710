// The C API (include/kiln/kiln.h): results against hand-computed values (AddModelSpec, y = x +
// [10, 20, 30]) and bit for bit against the C++ API on Silero VAD; every error path with its
// code and message; last errors per handle (and per thread for a model). The header as C is
// checked by tests/runtime/c_api_c_check.c (ctest c_api_c_check).
#include "kiln/kiln.h"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "tests/runtime/artifact_builder_test_util.h"
#include "tests/runtime/cpu_note.h"
#include "tests/temp_dir.h"
#include "tests/native_target.h"

namespace {

using kiln::testing::AddModelSpec;
using kiln::testing::ArtifactSpec;
using kiln::testing::BuildArtifact;

bool Has(const char* message, const std::string& part) {
  const bool found = std::string(message).find(part) != std::string::npos;
  if (!found) MESSAGE("'" << part << "' not in: " << message);
  return found;
}

kiln_tensor CTensor(void* data, kiln_dtype dtype, std::initializer_list<int64_t> dims) {
  kiln_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.rank = static_cast<int32_t>(dims.size());
  std::copy(dims.begin(), dims.end(), t.dims);
  t.memory = KILN_MEMORY_HOST;
  return t;
}

kiln_context_options CpuContextOptions(int threads) {
  kiln_context_options o;
  REQUIRE(kiln_context_options_init(&o) == KILN_STATUS_OK);
  o.device = KILN_DEVICE_CPU;
  o.cpu_threads = threads;
  return o;
}

// A loaded add model and a one-thread CPU context over it, destroyed at scope end.
struct AddModel {
  std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  kiln_model* model = nullptr;
  kiln_context* ctx = nullptr;
  explicit AddModel(const kiln_load_options* load = nullptr) {
    REQUIRE(kiln_model_load_bytes(bytes.data(), bytes.size(), load, &model) == KILN_STATUS_OK);
    const kiln_context_options o = CpuContextOptions(1);
    REQUIRE(kiln_context_create(model, &o, &ctx) == KILN_STATUS_OK);
  }
  ~AddModel() {
    kiln_context_destroy(ctx);
    kiln_model_destroy(model);
  }
};

}  // namespace

TEST_CASE("C API: version, status names and option defaults mirror the C++ runtime") {
  kiln_version_info v;
  REQUIRE(kiln_version(&v) == KILN_STATUS_OK);
  CHECK(v.major == KILN_VERSION_MAJOR);
  CHECK(v.minor == KILN_VERSION_MINOR);
  CHECK(v.patch == KILN_VERSION_PATCH);
  CHECK(v.min_format_version == kiln::kMinFormatVersion);
  CHECK(v.max_format_version == kiln::kFormatVersion);
  CHECK(kiln_version(nullptr) == KILN_STATUS_INVALID_ARGUMENT);

  CHECK(std::string(kiln_status_name(KILN_STATUS_OK)) == "OK");
  CHECK(std::string(kiln_status_name(KILN_STATUS_DATA_LOSS)) == "DATA_LOSS");
  CHECK(std::string(kiln_status_name(KILN_STATUS_DEVICE_ERROR)) == "DEVICE_ERROR");
  CHECK(std::string(kiln_status_name(static_cast<kiln_status>(11))) == "UNKNOWN");  // in the enum's range, not a code

  kiln_load_options lo;
  REQUIRE(kiln_load_options_init(&lo) == KILN_STATUS_OK);
  CHECK(lo.max_artifact_bytes == UINT64_MAX);
  CHECK(lo.max_context_bytes == 0);
  kiln_context_options co;
  REQUIRE(kiln_context_options_init(&co) == KILN_STATUS_OK);
  CHECK(co.device == KILN_DEVICE_AUTO);
  CHECK(co.device_ordinal == 0);
  CHECK(co.cuda_graphs == 0);
  CHECK(co.profile == 0);
  CHECK(co.cpu_threads == 0);
  CHECK(co.require_device_resident == 0);
  CHECK(co.warm_runs == kiln::ContextOptions{}.warm_runs);
  CHECK(lo.trusted_public_keys == nullptr);
  CHECK(lo.num_trusted_public_keys == 0);
  const bool no_key_function = lo.weights_key == nullptr;  // doctest prints no function pointer
  CHECK(no_key_function);
  CHECK(lo.weights_key_user_data == nullptr);
  CHECK(kiln_load_options_init(nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_options_init(nullptr) == KILN_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("C API: the add model's declaration, hand-computed outputs, views, stats and memory") {
  AddModel add;
  size_t n = 0;
  REQUIRE(kiln_model_num_inputs(add.model, &n) == KILN_STATUS_OK);
  CHECK(n == 1);
  REQUIRE(kiln_model_num_outputs(add.model, &n) == KILN_STATUS_OK);
  CHECK(n == 1);
  kiln_tensor_info info;
  REQUIRE(kiln_model_input(add.model, 0, &info) == KILN_STATUS_OK);
  CHECK(std::string(info.name) == "x");
  CHECK(info.dtype == KILN_DTYPE_FLOAT32);
  REQUIRE(info.rank == 2);
  CHECK(info.dims[0] == -1);
  CHECK(std::string(info.dim_symbols[0]) == "N");
  CHECK(info.dims[1] == 3);
  CHECK(info.dim_symbols[1] == nullptr);
  REQUIRE(kiln_model_output(add.model, 0, &info) == KILN_STATUS_OK);
  CHECK(std::string(info.name) == "y");
  uint32_t version = 0;
  REQUIRE(kiln_model_format_version(add.model, &version) == KILN_STATUS_OK);
  CHECK(version == 1);
  const char* producer = nullptr;
  REQUIRE(kiln_model_producer(add.model, &producer) == KILN_STATUS_OK);
  CHECK(std::string(producer) == "kiln test");
  const char* precision = nullptr;
  REQUIRE(kiln_model_precision(add.model, &precision) == KILN_STATUS_OK);
  CHECK(std::string(precision) == "fp32");
  size_t entries = 0, instructions = 0;
  REQUIRE(kiln_model_num_entries(add.model, &entries) == KILN_STATUS_OK);
  CHECK(entries == 1);
  REQUIRE(kiln_model_num_instructions(add.model, 0, &instructions) == KILN_STATUS_OK);
  CHECK(instructions == 1);
  kiln_instruction_info ins;
  REQUIRE(kiln_model_instruction(add.model, 0, 0, &ins) == KILN_STATUS_OK);
  CHECK(std::string(ins.name) == "add0");
  CHECK(std::string(ins.op) == "Add");
  // An Add, unfused: a CPU kernel on every backend (on CUDA, a CPU fallback on the host).
  REQUIRE(ins.num_placements == 2);
  CHECK(std::string(ins.placements[0].backend) == "cuda");
  CHECK(std::string(ins.placements[0].library) == "cpu");
  CHECK(std::string(ins.placements[1].backend) == "cpu");
  CHECK(std::string(ins.placements[1].library) == "cpu");
  CHECK(std::string(ins.kernel).empty());
  CHECK(ins.num_member_ops == 0);

  float x[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor in = CTensor(x, KILN_DTYPE_FLOAT32, {2, 3});
  kiln_tensor out;
  REQUIRE(kiln_context_run(add.ctx, &in, 1, &out, 1, nullptr) == KILN_STATUS_OK);
  CHECK(out.dtype == KILN_DTYPE_FLOAT32);
  CHECK(out.memory == KILN_MEMORY_HOST);
  REQUIRE(out.rank == 2);
  CHECK(out.dims[0] == 2);
  CHECK(out.dims[1] == 3);
  const float* y = static_cast<const float*>(out.data);
  CHECK(std::vector<float>(y, y + 6) == std::vector<float>{11, 22, 33, 14, 25, 36});

  // The view is the context's memory: the next run writes its results there.
  x[0] = 100;
  kiln_tensor again;
  REQUIRE(kiln_context_run(add.ctx, &in, 1, &again, 1, nullptr) == KILN_STATUS_OK);
  CHECK(again.data == out.data);
  CHECK(y[0] == 110);

  float into[6] = {};
  const kiln_tensor dst = CTensor(into, KILN_DTYPE_FLOAT32, {2, 3});
  REQUIRE(kiln_context_run_into(add.ctx, &in, 1, &dst, 1, nullptr) == KILN_STATUS_OK);
  CHECK(std::vector<float>(into, into + 6) == std::vector<float>{110, 22, 33, 14, 25, 36});
  float copy[6] = {};
  const kiln_tensor copy_dst = CTensor(copy, KILN_DTYPE_FLOAT32, {2, 3});
  REQUIRE(kiln_context_copy_outputs(add.ctx, &copy_dst, 1, nullptr) == KILN_STATUS_OK);  // below

  kiln_stats s;
  REQUIRE(kiln_context_stats(add.ctx, &s) == KILN_STATUS_OK);
  CHECK(s.calls == 3);  // copying outputs is no call
  CHECK(s.cache_hits == 3);
  CHECK(s.cache_misses == 0);
  CHECK(s.last_entry == 0);
  CHECK(s.last_host_ns > 0);
  CHECK(s.last_host_ns >= s.last_computation_ns);
  CHECK(s.total_computation_ns >= s.last_computation_ns);
  CHECK(s.last_gpu_ns == -1);
  CHECK(s.graph_hits == 0);
  // The CPU backend copies nothing between host and device, and has no CPU regions.
  CHECK(s.last_host_to_device_bytes == 0);
  CHECK(s.last_device_to_host_bytes == 0);
  CHECK(s.last_control_transfers == 0);
  CHECK(s.last_cpu_region_ns == 0);

  int32_t device = -1;
  const char* note = nullptr;
  REQUIRE(kiln_context_device(add.ctx, &device, &note) == KILN_STATUS_OK);
  CHECK(device == KILN_DEVICE_CPU);
  CHECK(std::string(note) == kiln::testing::CpuNote(1, true, /*native=*/false));
  uint64_t host = 0, dev = 1;
  REQUIRE(kiln_context_memory(add.ctx, &host, &dev) == KILN_STATUS_OK);
  CHECK(host == 64);  // N = 2: a 24-byte arena, allocated in 64-byte units
  CHECK(dev == 0);
  CHECK(kiln_context_synchronize(add.ctx, nullptr) == KILN_STATUS_OK);
  CHECK(std::string(kiln_context_last_error(add.ctx)).empty());
  CHECK(std::string(kiln_model_last_error(add.model)).empty());
  // The last run's outputs copied again (above, without running); the count and shapes are
  // checked first.
  CHECK(std::vector<float>(copy, copy + 6) == std::vector<float>{110, 22, 33, 14, 25, 36});
  const kiln_tensor flat = CTensor(copy, KILN_DTYPE_FLOAT32, {6});
  CHECK(kiln_context_copy_outputs(add.ctx, &flat, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(kiln_context_last_error(add.ctx)) == "kiln_context_copy_outputs: output 0 'y' shape [6], expected [2, 3]");
  CHECK(kiln_context_copy_outputs(nullptr, &copy_dst, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("C API: a context outlives the model handle it was created from") {
  const std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  kiln_model* model = nullptr;
  REQUIRE(kiln_model_load_bytes(bytes.data(), bytes.size(), nullptr, &model) == KILN_STATUS_OK);
  kiln_context* ctx = nullptr;
  const kiln_context_options o = CpuContextOptions(1);
  REQUIRE(kiln_context_create(model, &o, &ctx) == KILN_STATUS_OK);
  kiln_model_destroy(model);
  float x[3] = {1, 2, 3};
  kiln_tensor in = CTensor(x, KILN_DTYPE_FLOAT32, {1, 3}), out;
  REQUIRE(kiln_context_run(ctx, &in, 1, &out, 1, nullptr) == KILN_STATUS_OK);
  const float* y = static_cast<const float*>(out.data);
  CHECK(std::vector<float>(y, y + 3) == std::vector<float>{11, 22, 33});
  kiln_context_destroy(ctx);
}

TEST_CASE("C API: Silero VAD from a file gives the C++ API's outputs bit for bit") {
  const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/silero_vad_16k_op15";
  if (!std::filesystem::exists(dir + "/model.onnx")) {
    MESSAGE("skipped: " << dir << " is missing (run tests/e2e/make_package_testdata.py)");
    return;
  }
  kiln::compiler::CompileOptions options;
  options.archs.clear();  // CPU-only
  options.cpu_targets = kiln::testing::NativeTargetForThisCpu();
  auto bytes = kiln::compiler::CompileOnnxFile(dir + "/model.onnx", options, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  kiln::testing::TempDir tmp;
  const std::string path = tmp / "silero.kiln";
  kiln::testing::WriteBytes(path, std::string(bytes->begin(), bytes->end()));

  auto cpp_model = kiln::Model::Load(path);
  REQUIRE(cpp_model.ok());
  auto cpp = kiln::ExecutionContext::Create(*cpp_model, {.device = kiln::Device::kCpu, .cpu = {.threads = 2}});
  REQUIRE(cpp.ok());
  kiln_model* model = nullptr;
  REQUIRE(kiln_model_load_file(path.c_str(), nullptr, &model) == KILN_STATUS_OK);
  kiln_context* ctx = nullptr;
  const kiln_context_options o = CpuContextOptions(2);
  REQUIRE(kiln_context_create(model, &o, &ctx) == KILN_STATUS_OK);

  // The declaration as the C++ API gives it, symbols included.
  for (bool input : {true, false}) {
    const auto& infos = input ? cpp_model->inputs() : cpp_model->outputs();
    size_t count = 0;
    REQUIRE((input ? kiln_model_num_inputs : kiln_model_num_outputs)(model, &count) == KILN_STATUS_OK);
    REQUIRE(count == infos.size());
    for (size_t i = 0; i < count; ++i) {
      kiln_tensor_info info;
      REQUIRE((input ? kiln_model_input : kiln_model_output)(model, i, &info) == KILN_STATUS_OK);
      CHECK(info.name == infos[i].name);
      CHECK(info.dtype == static_cast<int32_t>(infos[i].dtype));
      REQUIRE(info.rank == static_cast<int32_t>(infos[i].shape.size()));
      for (int32_t d = 0; d < info.rank; ++d) {
        CHECK(info.dims[d] == infos[i].shape[d].value);
        CHECK(std::string(info.dim_symbols[d] ? info.dim_symbols[d] : "") == infos[i].shape[d].symbol);
      }
    }
  }

  // onnxruntime's test inputs at batch 1, then a varied batch of 3 at another length (the
  // model's If fixes sequence to 192..703).
  std::vector<kiln::io::HostTensor> inputs;
  for (int i = 0; i < 3; ++i) {
    auto t = kiln::io::ReadTensorProtoFile(dir + "/test_data_set_0/input_" + std::to_string(i) + ".pb");
    REQUIRE(t.ok());
    inputs.push_back(std::move(*t));
  }
  std::vector<float> audio(3 * 640), state(2 * 3 * 128);
  for (size_t i = 0; i < audio.size(); ++i) audio[i] = static_cast<float>((i * 7919) % 2000) / 1000.0f - 1.0f;
  for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
  int64_t sr = 16000;
  const std::vector<std::vector<kiln::TensorView>> calls = {
      {inputs[0].view(), inputs[1].view(), inputs[2].view()},
      {kiln::TensorView::Host(audio.data(), kiln::DType::kFloat32, {3, 640}),
       kiln::TensorView::Host(state.data(), kiln::DType::kFloat32, {2, 3, 128}),
       kiln::TensorView::Host(&sr, kiln::DType::kInt64, {})}};
  for (const auto& call : calls) {
    std::vector<kiln::TensorView> expected;
    const kiln::Status st = cpp->Run(call, expected);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    std::vector<kiln_tensor> in(call.size());
    for (size_t i = 0; i < call.size(); ++i) {
      in[i] = kiln_tensor{call[i].data, static_cast<int32_t>(call[i].dtype), call[i].rank, {}, KILN_MEMORY_HOST};
      std::copy(call[i].dims, call[i].dims + call[i].rank, in[i].dims);
    }
    kiln_tensor views[2];
    REQUIRE(kiln_context_run(ctx, in.data(), in.size(), views, 2, nullptr) == KILN_STATUS_OK);
    std::vector<std::vector<uint8_t>> into(2);
    kiln_tensor dst[2];
    for (int k = 0; k < 2; ++k) {
      into[k].resize(static_cast<size_t>(expected[k].num_bytes()));
      dst[k] = views[k];
      dst[k].data = into[k].data();
    }
    REQUIRE(kiln_context_run_into(ctx, in.data(), in.size(), dst, 2, nullptr) == KILN_STATUS_OK);
    for (int k = 0; k < 2; ++k) {
      CHECK(views[k].dtype == static_cast<int32_t>(expected[k].dtype));
      REQUIRE(views[k].rank == expected[k].rank);
      CHECK(std::equal(views[k].dims, views[k].dims + views[k].rank, expected[k].dims));
      const size_t nb = into[k].size();
      CHECK(std::memcmp(views[k].data, expected[k].data, nb) == 0);
      CHECK(std::memcmp(into[k].data(), expected[k].data, nb) == 0);
    }
  }
  kiln_stats s;
  REQUIRE(kiln_context_stats(ctx, &s) == KILN_STATUS_OK);
  CHECK(s.calls == 4);
  CHECK(s.cache_hits == 4);
  uint64_t host = 0;
  REQUIRE(kiln_context_memory(ctx, &host, nullptr) == KILN_STATUS_OK);
  CHECK(host == cpp->memory_usage().host_bytes);
  const char* note = nullptr;
  REQUIRE(kiln_context_device(ctx, nullptr, &note) == KILN_STATUS_OK);
  CHECK(std::string(note) == kiln::testing::CpuNote(2));

  // Every instruction as the C++ API describes it; generated kernels list the ops they replaced.
  size_t num_instructions = 0;
  REQUIRE(kiln_model_num_instructions(model, 0, &num_instructions) == KILN_STATUS_OK);
  const std::vector<kiln::InstructionInfo>& infos = cpp_model->entries()[0].instructions;
  REQUIRE(num_instructions == infos.size());
  int fused = 0, dnn = 0;
  for (size_t i = 0; i < num_instructions; ++i) {
    kiln_instruction_info c;
    REQUIRE(kiln_model_instruction(model, 0, i, &c) == KILN_STATUS_OK);
    CAPTURE(infos[i].label());
    CHECK(infos[i].name == c.name);
    CHECK(infos[i].op == c.op);
    REQUIRE(infos[i].placements.size() == c.num_placements);
    for (size_t p = 0; p < c.num_placements; ++p) {
      CHECK(infos[i].placements[p].backend == c.placements[p].backend);
      CHECK(kiln::LibraryName(infos[i].placements[p].library) == c.placements[p].library);
    }
    CHECK(infos[i].kernel == c.kernel);
    REQUIRE(infos[i].member_ops.size() == c.num_member_ops);
    for (size_t m = 0; m < c.num_member_ops; ++m) CHECK(infos[i].member_ops[m] == c.member_ops[m]);
    if (infos[i].op == "kiln.Fused") {
      ++fused;
      CHECK(infos[i].library("cuda") == kiln::Library::kGenerated);
      CHECK(infos[i].library("cpu") == kiln::Library::kGenerated);
      CHECK(infos[i].kernel.rfind("kiln_", 0) == 0);
      CHECK(c.num_member_ops >= 1);
    }
    if (infos[i].op == "Conv") {
      ++dnn;
      CHECK(infos[i].library("cuda") == kiln::Library::kCudnn);
      CHECK(infos[i].library("cpu") == kiln::Library::kOneDnn);
    }
  }
  CHECK(fused >= 5);
  CHECK(dnn >= 4);
  kiln_context_destroy(ctx);
  kiln_model_destroy(model);
}

TEST_CASE("C API: loading errors keep their code and message in the handle the load returns") {
  const std::vector<uint8_t> good = BuildArtifact(AddModelSpec());
  kiln_model* m = nullptr;
  auto load_bytes = [&](const void* p, size_t size, const kiln_load_options* o) {
    kiln_model_destroy(m);
    m = nullptr;
    const kiln_status st = kiln_model_load_bytes(p, size, o, &m);
    REQUIRE(m != nullptr);  // a failed load still gives a handle holding the error
    return st;
  };
  CHECK(load_bytes(nullptr, 10, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(m), "kiln_model_load_bytes: bytes is NULL with a size of 10"));
  CHECK(load_bytes(good.data(), good.size() / 2, nullptr) == KILN_STATUS_DATA_LOSS);
  CHECK(Has(kiln_model_last_error(m), "kiln_model_load_bytes: "));
  CHECK(load_bytes(nullptr, 0, nullptr) == KILN_STATUS_DATA_LOSS);  // no bytes: a truncated artifact
  kiln_load_options lo;
  REQUIRE(kiln_load_options_init(&lo) == KILN_STATUS_OK);
  lo.max_artifact_bytes = good.size() - 1;
  CHECK(load_bytes(good.data(), good.size(), &lo) == KILN_STATUS_RESOURCE_EXHAUSTED);
  CHECK(Has(kiln_model_last_error(m), "artifact is " + std::to_string(good.size()) +
                                          " bytes, above LoadOptions::max_artifact_bytes (" +
                                          std::to_string(good.size() - 1) + ")"));
  ArtifactSpec newer = AddModelSpec();
  newer.format_version = kiln::kFormatVersion + 1;
  const std::vector<uint8_t> newer_bytes = BuildArtifact(newer);
  CHECK(load_bytes(newer_bytes.data(), newer_bytes.size(), nullptr) == KILN_STATUS_INCOMPATIBLE);
  CHECK(Has(kiln_model_last_error(m), "is newer than this runtime supports"));

  // A failed handle answers FAILED_PRECONDITION with the load's message, and gives no context.
  size_t n = 0;
  CHECK(kiln_model_num_inputs(m, &n) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(Has(kiln_model_last_error(m), "kiln_model_num_inputs: this model handle holds no model: its load failed "
                                      "(kiln_model_load_bytes: artifact format version"));
  kiln_context* c = nullptr;
  CHECK(kiln_context_create(m, nullptr, &c) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(Has(kiln_context_last_error(c), "kiln_context_create: this model handle holds no model"));
  kiln_context_destroy(c);
  kiln_model_destroy(m);

  CHECK(kiln_model_load_file("x.kiln", nullptr, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_model_load_bytes(good.data(), good.size(), nullptr, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_model_load_file(nullptr, nullptr, &m) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(m), "kiln_model_load_file: path is NULL"));
  kiln_model_destroy(m);
  CHECK(kiln_model_load_file("/nonexistent/c_api.kiln", nullptr, &m) == KILN_STATUS_NOT_FOUND);
  CHECK(Has(kiln_model_last_error(m), "kiln_model_load_file: "));
  CHECK(Has(kiln_model_last_error(m), "/nonexistent/c_api.kiln"));
  kiln_model_destroy(m);
  kiln_model_destroy(nullptr);
  kiln_context_destroy(nullptr);
}

TEST_CASE("C API: model queries and context creation refuse bad arguments with a code and message") {
  AddModel add;
  size_t n = 0;
  kiln_tensor_info info;
  uint32_t v = 0;
  const char* s = nullptr;
  CHECK(kiln_model_num_inputs(nullptr, &n) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_model_input(nullptr, 0, &info) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_model_format_version(nullptr, &v) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_model_producer(nullptr, &s) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(kiln_model_last_error(nullptr)) == "model handle is NULL");
  CHECK(kiln_model_num_outputs(add.model, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_num_outputs: out is NULL"));
  CHECK(kiln_model_output(add.model, 0, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_output: out is NULL"));
  CHECK(kiln_model_format_version(add.model, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_format_version: out is NULL"));
  CHECK(kiln_model_producer(add.model, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_producer: out is NULL"));
  CHECK(kiln_model_precision(add.model, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_precision: out is NULL"));
  CHECK(kiln_model_input(add.model, 1, &info) == KILN_STATUS_OUT_OF_RANGE);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_input: index 1 is out of range: the model has 1 inputs"));
  CHECK(kiln_model_output(add.model, 7, &info) == KILN_STATUS_OUT_OF_RANGE);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_output: index 7 is out of range: the model has 1 outputs"));
  // A success leaves the last error as it was.
  REQUIRE(kiln_model_num_inputs(add.model, &n) == KILN_STATUS_OK);
  CHECK(Has(kiln_model_last_error(add.model), "index 7"));

  kiln_context* c = nullptr;
  CHECK(kiln_context_create(add.model, nullptr, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_create(nullptr, nullptr, &c) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_context_last_error(c), "kiln_context_create: model is NULL"));
  kiln_context_destroy(c);
  kiln_context_options o = CpuContextOptions(300);
  CHECK(kiln_context_create(add.model, &o, &c) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_context_last_error(c), "kiln_context_create: cpu.threads is 300, expected 0 (one per core) to 256"));
  // A failed context answers FAILED_PRECONDITION with its creation's message.
  float x[3] = {};
  kiln_tensor in = CTensor(x, KILN_DTYPE_FLOAT32, {1, 3}), out;
  kiln_stats st;
  CHECK(kiln_context_run(c, &in, 1, &out, 1, nullptr) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(Has(kiln_context_last_error(c), "kiln_context_run: this context handle holds no context: its creation "
                                        "failed (kiln_context_create: cpu.threads is 300"));
  CHECK(kiln_context_stats(c, &st) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(kiln_context_device(c, nullptr, nullptr) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(kiln_context_memory(c, nullptr, nullptr) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(kiln_context_synchronize(c, nullptr) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(Has(kiln_context_last_error(c), "kiln_context_synchronize: this context handle holds no context"));
  kiln_context_destroy(c);
  o = CpuContextOptions(1);
  o.device = 7;
  CHECK(kiln_context_create(add.model, &o, &c) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_context_last_error(c), "kiln_context_create: unknown device 7"));
  kiln_context_destroy(c);
  // require_device_resident reaches CudaOptions: a CPU context is refused.
  o = CpuContextOptions(1);
  o.require_device_resident = 1;
  CHECK(kiln_context_create(add.model, &o, &c) == KILN_STATUS_FAILED_PRECONDITION);
  CHECK(Has(kiln_context_last_error(c), "require_device_resident: the context would run on the CPU backend"));
  kiln_context_destroy(c);
  // The context's errors are not the model's.
  CHECK(Has(kiln_model_last_error(add.model), "index 7"));
}

TEST_CASE("C API: entry and instruction queries refuse bad arguments with a code and message") {
  AddModel add;
  size_t n = 0;
  kiln_instruction_info ins;
  CHECK(kiln_model_num_entries(add.model, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_num_entries: out is NULL"));
  CHECK(kiln_model_num_instructions(add.model, 1, &n) == KILN_STATUS_OUT_OF_RANGE);
  CHECK(Has(kiln_model_last_error(add.model),
            "kiln_model_num_instructions: entry 1 is out of range: the model has 1 entries"));
  CHECK(kiln_model_instruction(add.model, 0, 1, &ins) == KILN_STATUS_OUT_OF_RANGE);
  CHECK(Has(kiln_model_last_error(add.model),
            "kiln_model_instruction: instruction 1 is out of range: entry 0 has 1 instructions"));
  CHECK(kiln_model_instruction(add.model, 0, 0, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_model_last_error(add.model), "kiln_model_instruction: out is NULL"));
  CHECK(kiln_model_instruction(nullptr, 0, 0, &ins) == KILN_STATUS_INVALID_ARGUMENT);
}

TEST_CASE("C API: kiln_context_warm prepares a shape without running or counting a call") {
  AddModel add;
  const kiln_tensor shape = CTensor(nullptr, KILN_DTYPE_FLOAT32, {2, 3});  // no data: shapes only
  REQUIRE(kiln_context_warm(add.ctx, &shape, 1) == KILN_STATUS_OK);
  kiln_stats s;
  REQUIRE(kiln_context_stats(add.ctx, &s) == KILN_STATUS_OK);
  CHECK(s.calls == 0);
  CHECK(s.cache_hits == 0);
  uint64_t host = 0, dev = 0;
  REQUIRE(kiln_context_memory(add.ctx, &host, &dev) == KILN_STATUS_OK);
  CHECK(host == 64);  // N = 2: the arena of the run below, allocated now
  float x[6] = {1, 2, 3, 4, 5, 6};
  const kiln_tensor in = CTensor(x, KILN_DTYPE_FLOAT32, {2, 3});
  kiln_tensor out;
  REQUIRE(kiln_context_run(add.ctx, &in, 1, &out, 1, nullptr) == KILN_STATUS_OK);
  const float* y = static_cast<const float*>(out.data);
  CHECK(std::vector<float>(y, y + 6) == std::vector<float>{11, 22, 33, 14, 25, 36});
  const kiln_tensor wrong = CTensor(nullptr, KILN_DTYPE_FLOAT32, {2, 4});
  CHECK(kiln_context_warm(add.ctx, &wrong, 1) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(kiln_context_last_error(add.ctx)).find("kiln_context_warm: ") == 0);
  CHECK(kiln_context_warm(add.ctx, &shape, 2) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_warm(nullptr, &shape, 1) == KILN_STATUS_INVALID_ARGUMENT);
  REQUIRE(kiln_context_stats(add.ctx, &s) == KILN_STATUS_OK);
  CHECK(s.calls == 1);
  CHECK(s.cache_misses == 0);
}

TEST_CASE("C API: runs refuse bad tensors and counts with a code and a message naming the argument") {
  AddModel add;
  float x[6] = {1, 2, 3, 4, 5, 6};
  kiln_tensor out[2];
  auto run = [&](kiln_tensor in, size_t num_inputs = 1, size_t num_outputs = 1) {
    return kiln_context_run(add.ctx, &in, num_inputs, out, num_outputs, nullptr);
  };
  const kiln_tensor good = CTensor(x, KILN_DTYPE_FLOAT32, {2, 3});
  auto last = [&] { return kiln_context_last_error(add.ctx); };

  CHECK(kiln_context_run(nullptr, &good, 1, out, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_run_into(nullptr, &good, 1, out, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_synchronize(nullptr, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_stats(nullptr, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_device(nullptr, nullptr, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(kiln_context_memory(nullptr, nullptr, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(std::string(kiln_context_last_error(nullptr)) == "context handle is NULL");
  CHECK(kiln_context_stats(add.ctx, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_stats: out is NULL"));

  CHECK(kiln_context_run(add.ctx, nullptr, 1, out, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: inputs is NULL with a count of 1"));
  CHECK(kiln_context_run(add.ctx, &good, 1, nullptr, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: outputs is NULL with a count of 1"));
  CHECK(run(good, 2) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: num_inputs is 2, the model has 1 inputs"));
  CHECK(run(good, 1, 2) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: num_outputs is 2, the model has 1 outputs"));
  kiln_tensor t = good;
  t.rank = KILN_MAX_RANK + 1;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: inputs[0].rank is 9, expected 0 to KILN_MAX_RANK (8)"));
  t.rank = -1;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "inputs[0].rank is -1"));
  t = good;
  t.dims[1] = -3;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: inputs[0].dims[1] is -3, expected a size >= 0"));
  t = good;
  t.dtype = 99;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: inputs[0].dtype is 99, not a kiln_dtype element type"));
  t.dtype = KILN_DTYPE_UNDEFINED;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "inputs[0].dtype is 0, not a kiln_dtype element type"));
  t = good;
  t.memory = 5;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "inputs[0].memory is 5, expected KILN_MEMORY_HOST (0) or KILN_MEMORY_DEVICE (1)"));
  kiln_stats s;
  REQUIRE(kiln_context_stats(add.ctx, &s) == KILN_STATUS_OK);
  CHECK(s.calls == 0);  // the C layer refused all of these before the runtime saw them

  // The prologue's own refusals: a cache miss, with the C++ API's message.
  t = good;
  t.dims[0] = 65;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run: "));
  CHECK(Has(last(), "input 'x' dim 0 (N) = 65"));
  t = good;
  t.dtype = KILN_DTYPE_INT32;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "input 'x' dtype int32, expected float32"));
  t = good;
  t.data = nullptr;
  CHECK(run(t) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "input 'x' data pointer is null"));
  REQUIRE(kiln_context_stats(add.ctx, &s) == KILN_STATUS_OK);
  CHECK(s.calls == 3);
  CHECK(s.cache_misses == 3);

  // Caller buffers that do not match the computed output; the buffer is left as it was.
  float y[9] = {-1, -1, -1, -1, -1, -1, -1, -1, -1};
  kiln_tensor dst = CTensor(y, KILN_DTYPE_INT32, {2, 3});
  CHECK(kiln_context_run_into(add.ctx, &good, 1, &dst, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run_into: output 0 'y' dtype int32, expected float32"));
  dst = CTensor(y, KILN_DTYPE_FLOAT32, {3, 3});
  CHECK(kiln_context_run_into(add.ctx, &good, 1, &dst, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run_into: output 0 'y' shape [3, 3], expected [2, 3]"));
  CHECK(y[0] == -1);
  dst.rank = 12;
  CHECK(kiln_context_run_into(add.ctx, &good, 1, &dst, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run_into: outputs[0].rank is 12, expected 0 to KILN_MAX_RANK (8)"));
  CHECK(kiln_context_run_into(add.ctx, &good, 1, nullptr, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run_into: outputs is NULL with a count of 1"));
  CHECK(kiln_context_run_into(add.ctx, &good, 1, &dst, 0, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(last(), "kiln_context_run_into: num_outputs is 0, the model has 1 outputs"));
}

TEST_CASE("C API: LoadOptions::max_context_bytes refuses a run's shapes with RESOURCE_EXHAUSTED") {
  kiln_load_options lo;
  REQUIRE(kiln_load_options_init(&lo) == KILN_STATUS_OK);
  lo.max_context_bytes = 128;
  AddModel add(&lo);
  std::vector<float> x(11 * 3, 1.0f);
  kiln_tensor in = CTensor(x.data(), KILN_DTYPE_FLOAT32, {10, 3}), out;
  CHECK(kiln_context_run(add.ctx, &in, 1, &out, 1, nullptr) == KILN_STATUS_OK);
  in.dims[0] = 11;
  CHECK(kiln_context_run(add.ctx, &in, 1, &out, 1, nullptr) == KILN_STATUS_RESOURCE_EXHAUSTED);
  CHECK(Has(kiln_context_last_error(add.ctx), "kiln_context_run: entry 0 (default): these shapes need an arena of "
                                              "132 bytes"));
  CHECK(Has(kiln_context_last_error(add.ctx), "above LoadOptions::max_context_bytes (128)"));
}

TEST_CASE("C API: a last error belongs to its handle, and a model's to the calling thread") {
  AddModel add;
  kiln_context* other = nullptr;
  const kiln_context_options o = CpuContextOptions(1);
  REQUIRE(kiln_context_create(add.model, &o, &other) == KILN_STATUS_OK);
  float x[3] = {1, 2, 3};
  kiln_tensor bad = CTensor(x, KILN_DTYPE_FLOAT32, {1, 4}), out;
  CHECK(kiln_context_run(add.ctx, &bad, 1, &out, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_context_last_error(add.ctx), "input 'x' dim 1 = 4, expected 3"));
  CHECK(std::string(kiln_context_last_error(other)).empty());
  CHECK(std::string(kiln_model_last_error(add.model)).empty());
  bad.dims[1] = -4;
  CHECK(kiln_context_run(other, &bad, 1, &out, 1, nullptr) == KILN_STATUS_INVALID_ARGUMENT);
  CHECK(Has(kiln_context_last_error(other), "inputs[0].dims[1] is -4"));
  CHECK(Has(kiln_context_last_error(add.ctx), "input 'x' dim 1 = 4, expected 3"));
  kiln_context_destroy(other);

  // Two threads fail on one model handle at once; each reads its own message.
  std::string seen[2];
  std::thread threads[2];
  for (int k = 0; k < 2; ++k) {
    threads[k] = std::thread([&, k] {
      kiln_tensor_info info;
      for (int i = 0; i < 200; ++i) {
        if (kiln_model_input(add.model, static_cast<size_t>(10 + k), &info) != KILN_STATUS_OUT_OF_RANGE) return;
        seen[k] = kiln_model_last_error(add.model);
        if (seen[k].find("index " + std::to_string(10 + k) + " ") == std::string::npos) return;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(seen[0] == "kiln_model_input: index 10 is out of range: the model has 1 inputs");
  CHECK(seen[1] == "kiln_model_input: index 11 is out of range: the model has 1 inputs");
  CHECK(std::string(kiln_model_last_error(add.model)).empty());  // this thread has failed nothing
}
