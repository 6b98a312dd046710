// The CUDA backend on float16 and bfloat16 artifacts (`kiln compile --precision`,
// compiler/passes/precision.h): small models built here (cuBLASLt MatMul and Gemm, cuDNN Conv
// and pooling, generated kernels with half storage and float32 row reductions: Softmax,
// LayerNormalization, ReduceMean) and every real model (tests/e2e/model_dirs.h), each
// compiled for this GPU's arch in fp32, fp16 and bf16, and each artifact run on the CPU
// backend and on the CUDA backend with the same inputs (random ones for the small models,
// test_data_set_0 for the real ones). On the emulated device (scripts/gpu-check --emulated) a real
// model runs fp32 and one of fp16 and bf16, by turns.
//
// Two checks per artifact:
//  - the CUDA outputs match the CPU backend's outputs of the same artifact, per output, by the
//    rule the CPU precision test uses for that model (tests/e2e/precision_rules.h: argmax
//    agreement on every row with a clear winner and a cosine for the classifiers' outputs, an absolute bound for Silero VAD's
//    speech probability, a cosine bound for every other output; fp32 artifacts are held to
//    the fp16 bounds and pass with a wide margin). The two backends
//    run the same graph in the same storage types, so they differ only by the order of float32
//    accumulation (and by the GPU libraries' algorithms) and by roundings to the half type
//    that this reorders;
//  - the heavy ops do not fall back to the CPU: when every instruction of the fp32 artifact
//    runs on the device, every instruction of the fp16 / bf16 one must too (bf16 only on
//    compute capability 8.0 and later). Seen through CUDA graphs: an entry with a CPU fallback
//    is never captured (include/kiln/stats.h), so the third run of a device-only entry is a
//    graph hit (Stats::graph_hits).
//
// NOTE: written on a machine without a GPU; it has NEVER run (KILN_REQUIRE_GPU skips it here).
// scripts/gpu-check runs it with the other "[gpu]" cases.
#if KILN_HAVE_CUDA

#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "runtime/cuda/driver.h"
#include "tests/compiler/compile_util.h"
#include "tests/cpu_reference.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/e2e/model_dirs.h"
#include "tests/e2e/precision_rules.h"
#include "tests/gpu_test_util.h"
#include "tests/random_floats.h"

namespace {

using kiln::DType;
using kiln::io::HostTensor;
using kiln::passes::Precision;
using namespace kiln::testing;

std::vector<uint8_t> CompileFor(const std::string& onnx_path, Precision precision, const std::string& arch) {
  kiln::compiler::CompileOptions options;
  options.archs = {arch};
  options.precision.precision = precision;
  auto bytes = kiln::compiler::CompileOnnxFile(onnx_path, options, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), std::string(kiln::passes::PrecisionName(precision)) << ": " << bytes.status().ToString());
  return std::move(*bytes);
}

struct GpuOutputs {
  std::vector<HostTensor> tensors;
  bool device_only = false;  // CUDA: the entry was captured as a graph (no CPU fallback op)
};

// Runs `artifact` on `device`; on CUDA three times with CUDA graphs (capture needs a device-only
// entry, and happens at the second run with the same shapes), into host buffers shaped like
// `like` (the CPU run's outputs).
GpuOutputs RunArtifact(const std::vector<uint8_t>& artifact, const std::vector<HostTensor>& inputs, kiln::Device device,
            const std::vector<HostTensor>* like = nullptr) {
  auto model = kiln::Model::Load(artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  GpuOutputs result;
  if (device == kiln::Device::kCpu) {
    result.tensors = RunCpuReference(*model, inputs);
    return result;
  }
  kiln::ContextOptions options;
  options.device = device;
  options.cuda.graphs = true;
  auto ctx = kiln::ExecutionContext::Create(*model, options);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  REQUIRE(ctx->device() == device);
  REQUIRE(like != nullptr);
  result.tensors = Sentinel(*like);
  const std::vector<kiln::TensorView> in = Views(inputs);
  std::vector<kiln::TensorView> out = Views(result.tensors);
  for (int run = 0; run < 3; ++run) {
    kiln::Status st = ctx->Run(in, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    st = ctx->Synchronize();
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  result.device_only = ctx->stats().graph_hits > 0;
  return result;
}

// One model in fp32, fp16 and bf16: CUDA against CPU, and no new CPU fallbacks below fp32.
// The inputs are `inputs`, or when `input_dir` is not empty, read from there.
void CheckModelOnGpu(const std::string& name, const std::string& onnx_path, std::vector<HostTensor> inputs,
                const std::string& input_dir, const kiln::cuda::DeviceInfo& dev,
                std::vector<Precision> precisions = {Precision::kFp32, Precision::kFp16, Precision::kBf16}) {
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  bool fp32_device_only = false;
  for (Precision precision : precisions) {
    const std::string pname = kiln::passes::PrecisionName(precision);
    if (precision == Precision::kBf16 && cc < 80) {
      MESSAGE(name << " bf16 skipped: " << dev.arch() << " has no bfloat16 cuDNN / cuBLASLt (needs sm_80)");
      continue;
    }
    const std::vector<uint8_t> artifact = CompileFor(onnx_path, precision, dev.arch());
    if (!input_dir.empty() && precision == Precision::kFp32) inputs = ReadInputs(artifact, input_dir);
    const GpuOutputs cpu = RunArtifact(artifact, inputs, kiln::Device::kCpu);
    const GpuOutputs cuda = RunArtifact(artifact, inputs, kiln::Device::kCuda, &cpu.tensors);
    REQUIRE(cuda.tensors.size() == cpu.tensors.size());
    for (size_t o = 0; o < cpu.tensors.size(); ++o) {
      std::ostringstream label;
      label << name << " " << pname << " output " << o << " '" << cpu.tensors[o].name << "'";
      INFO(label.str());
      const Rule rule = RuleFor(name, static_cast<int>(o));
      const Figures f = Compare(cuda.tensors[o], cpu.tensors[o]);
      MESSAGE(label.str() << ": " << Describe(f, rule, Bound(rule, precision)));
      CheckFigures(f, rule, Bound(rule, precision));
    }
    MESSAGE(name << " " << pname << ": every instruction on the device: " << std::string(cuda.device_only ? "yes" : "no"));
    if (precision == Precision::kFp32) {
      fp32_device_only = cuda.device_only;
    } else if (fp32_device_only) {
      CHECK_MESSAGE(cuda.device_only, name << " " << pname
                                            << ": an op runs on the CPU that runs on the GPU in fp32 (compare "
                                               "`kiln inspect` of both artifacts)");
    }
  }
}

// ---- Small models -------------------------------------------------------------------------------

HostTensor RandomInput(const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
  HostTensor t;
  t.name = name;
  t.dtype = DType::kFloat32;
  t.dims = std::move(dims);
  const std::vector<float> v = RandomFloats(static_cast<size_t>(t.num_elements()), seed, -1.0f, 1.0f);
  t.bytes.resize(v.size() * sizeof(float));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

void AddRandomInit(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, uint32_t seed,
                   float scale) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  AddFloatInit(g, name, dims, RandomFloats(n, seed, -scale, scale));
}

// x [8, 64] -> MatMul [64, 96] -> Add -> Relu -> Gemm ([96, 32], C [32]) -> Softmax: cuBLASLt
// (with a half bias vector for Gemm's C) and a generated row reduction.
onnx::ModelProto GpuMlpModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {"8", "64"});
  AddRandomInit(g, "w1", {64, 96}, 11, 0.125f);
  AddRandomInit(g, "b1", {96}, 12, 0.5f);
  AddRandomInit(g, "w2", {96, 32}, 13, 0.1f);
  AddRandomInit(g, "b2", {32}, 14, 0.5f);
  AddNode(g, "MatMul", {"x", "w1"}, {"h"}, "fc1");
  AddNode(g, "Add", {"h", "b1"}, {"hb"}, "fc1_bias");
  AddNode(g, "Relu", {"hb"}, {"a"}, "relu");
  AddNode(g, "Gemm", {"a", "w2", "b2"}, {"logits"}, "fc2");
  AttrInt(AddNode(g, "Softmax", {"logits"}, {"y"}, "softmax"), "axis", -1);
  AddOutput(g, "y");
  return m;
}

// x [2, 8, 16, 16] -> Conv (16, 3x3, bias) -> Relu -> MaxPool 2x2 -> Conv (16, 3x3, bias) ->
// AveragePool 2x2 -> Flatten -> Gemm [256, 10]: cuDNN convolutions and pooling.
onnx::ModelProto GpuConvModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {"2", "8", "16", "16"});
  AddRandomInit(g, "w1", {16, 8, 3, 3}, 21, 0.2f);
  AddRandomInit(g, "b1", {16}, 22, 0.5f);
  AddRandomInit(g, "w2", {16, 16, 3, 3}, 23, 0.15f);
  AddRandomInit(g, "b2", {16}, 24, 0.5f);
  AddRandomInit(g, "w3", {256, 10}, 25, 0.1f);
  AddRandomInit(g, "b3", {10}, 26, 0.5f);
  AttrInts(AddNode(g, "Conv", {"x", "w1", "b1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1});
  AddNode(g, "Relu", {"c1"}, {"r1"}, "relu1");
  auto* mp = AddNode(g, "MaxPool", {"r1"}, {"p1"}, "maxpool");
  AttrInts(mp, "kernel_shape", {2, 2});
  AttrInts(mp, "strides", {2, 2});
  AttrInts(AddNode(g, "Conv", {"p1", "w2", "b2"}, {"c2"}, "conv2"), "pads", {1, 1, 1, 1});
  auto* ap = AddNode(g, "AveragePool", {"c2"}, {"p2"}, "avgpool");
  AttrInts(ap, "kernel_shape", {2, 2});
  AttrInts(ap, "strides", {2, 2});
  AddNode(g, "Flatten", {"p2"}, {"f"}, "flatten");
  AddNode(g, "Gemm", {"f", "w3", "b3"}, {"y"}, "fc");
  AddOutput(g, "y");
  return m;
}

// x [4, 12, 48] -> LayerNormalization -> Softmax, and ReduceMean over the last axis: the
// generated kernels' half loads and stores around float32 statistics.
onnx::ModelProto NormModel() {
  onnx::ModelProto m = MakeModel(18);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {"4", "12", "48"});
  AddRandomInit(g, "scale", {48}, 31, 1.0f);
  AddRandomInit(g, "bias", {48}, 32, 0.5f);
  AddInt64Init(g, "axes", {1}, {-1});
  AttrInt(AddNode(g, "LayerNormalization", {"x", "scale", "bias"}, {"n"}, "ln"), "axis", -1);
  AttrInt(AddNode(g, "Softmax", {"n"}, {"y"}, "softmax"), "axis", -1);
  AddNode(g, "ReduceMean", {"x", "axes"}, {"mean"}, "mean");
  AddOutput(g, "y");
  AddOutput(g, "mean");
  return m;
}

// Writes `m` next to the other temporary files and returns its path (removed by the caller).
std::string WriteModel(const onnx::ModelProto& m, const std::string& name) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("kiln_precision_gpu_" + std::to_string(::getpid()) + "_" + name + ".onnx");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path.string();
}

kiln::cuda::DeviceInfo Device0() {
  auto drv = kiln::cuda::LoadDriver();
  REQUIRE_MESSAGE(drv.ok(), drv.status().ToString());
  auto dev = kiln::cuda::QueryDevice(**drv, 0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().ToString());
  return *dev;
}

}  // namespace

TEST_CASE("[gpu] precision: fp16 and bf16 small models on the CUDA backend match the CPU backend") {
  KILN_REQUIRE_GPU();
  const kiln::cuda::DeviceInfo dev = Device0();
  struct Small {
    const char* name;
    onnx::ModelProto model;
    std::vector<HostTensor> inputs;
  };
  const Small models[] = {
      {"mlp", GpuMlpModel(), {RandomInput("x", {8, 64}, 1)}},
      {"conv", GpuConvModel(), {RandomInput("x", {2, 8, 16, 16}, 2)}},
      {"norm", NormModel(), {RandomInput("x", {4, 12, 48}, 3)}},
  };
  for (const Small& s : models) {
    CAPTURE(s.name);
    const std::string path = WriteModel(s.model, s.name);
    CheckModelOnGpu(s.name, path, s.inputs, "", dev);
    std::filesystem::remove(path);
  }
}

TEST_CASE("[gpu] precision: every real model in fp16 and bf16 on the CUDA backend matches the CPU backend") {
  KILN_REQUIRE_GPU();
  std::vector<std::string> dirs = ModelDirs();
  if (TestDataDir() != KILN_TEST_DATA_DIR) {
    // scripts/gpu-check names the carried build's test data in $KILN_TEST_DATA_DIR (TestDataDir).
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(TestDataDir(), ec))
      if (std::filesystem::exists(e.path() / "model.onnx") && std::filesystem::exists(e.path() / "test_data_set_0") &&
          std::find(dirs.begin(), dirs.end(), e.path().string()) == dirs.end())
        dirs.push_back(e.path().string());
  }
  if (dirs.empty()) {
    MESSAGE("no model folders in " << TestDataDir() << " or $KILN_MODEL_DIRS: nothing to check");
    return;
  }
  const kiln::cuda::DeviceInfo dev = Device0();
  // The emulated device proves the plans, not the numerics, and runs host-compiled kernels: there
  // each model runs fp32 and one half type, fp16 and bf16 by turns (the model's index), so that
  // both are planned on half the models in a third less time. A GPU runs both on every model.
  const bool emulated = kiln::testing::EmulatedCuda() != nullptr;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const std::string& dir = dirs[i];
    CAPTURE(dir);
    std::vector<Precision> precisions = {Precision::kFp32, Precision::kFp16, Precision::kBf16};
    if (emulated) precisions = {Precision::kFp32, i % 2 == 0 ? Precision::kFp16 : Precision::kBf16};
    CheckModelOnGpu(std::filesystem::path(dir).filename().string(), dir + "/model.onnx", {}, dir + "/test_data_set_0",
                    dev, precisions);
  }
}

#endif  // KILN_HAVE_CUDA
