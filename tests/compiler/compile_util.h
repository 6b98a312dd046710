// Test helper: compiles an in-memory ONNX model to artifact bytes through the real driver.
// Kernels are kept as portable programs (no NVRTC) unless the options ask for archs, and get native
// code for the one CPU target this CPU runs (tests/native_target.h).
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <span>
#include <fstream>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "tests/native_target.h"
#include "kiln/tensor_files.h"
#include "onnx/onnx_pb.h"

namespace kiln::testing {

inline compiler::CompileOptions CpuOnly() {
  compiler::CompileOptions o;
  o.archs.clear();
  o.cpu_targets = NativeTargetForThisCpu();
  return o;
}

// The options that compile a model for `device`'s backend: the default GPU archs for kCuda (the
// generated kernels as cubins and PTX, as the "[gpu]" cases run them), CPU-only otherwise.
inline compiler::CompileOptions OptionsFor(Device device, bool fuse = true) {
  compiler::CompileOptions o = CpuOnly();
  if (device == Device::kCuda) o.archs = compiler::CompileOptions{}.archs;
  o.fuse = fuse;
  return o;
}

// CPU-only options with these profiles (compiler/profile.h), each required to parse.
inline compiler::CompileOptions WithProfiles(const std::vector<std::string>& texts) {
  compiler::CompileOptions o = CpuOnly();
  for (const std::string& t : texts) {
    auto p = compiler::ParseProfile(t);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    o.profiles.push_back(*p);
  }
  return o;
}

// The artifact's bytes, or the compile's error.
inline Result<std::vector<uint8_t>> TryCompileModel(const onnx::ModelProto& m,
                                                   const compiler::CompileOptions& options = CpuOnly(),
                                                   compiler::CompileSummary* summary = nullptr) {
  static int counter = 0;
  auto path = std::filesystem::temp_directory_path() /
              ("kiln_compile_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".onnx");
  std::string bytes;
  REQUIRE(m.SerializeToString(&bytes));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto artifact = compiler::CompileOnnxFile(path.string(), options, summary);
  std::filesystem::remove(path);
  return artifact;
}

inline std::vector<uint8_t> CompileModel(const onnx::ModelProto& m, const compiler::CompileOptions& options = CpuOnly(),
                                         compiler::CompileSummary* summary = nullptr) {
  auto artifact = TryCompileModel(m, options, summary);
  REQUIRE_MESSAGE(artifact.ok(), artifact.status().ToString());
  return *artifact;
}

// The compile's status alone.
inline Status CompileStatus(const onnx::ModelProto& m, const compiler::CompileOptions& options = CpuOnly()) {
  return TryCompileModel(m, options).status();
}

// Runs `ctx` on `inputs` and copies its first output, float32 on the host, into *y.
inline Status RunFirstFloat(ExecutionContext& ctx, std::span<const TensorView> inputs, std::vector<float>* y) {
  std::vector<TensorView> out;
  KILN_RETURN_IF_ERROR(ctx.Run(inputs, out));
  REQUIRE(out[0].dtype == DType::kFloat32);
  const float* p = static_cast<const float*>(out[0].data);
  y->assign(p, p + out[0].num_elements());
  return Status::Ok();
}

// Copies of float32 host tensors (a Run's outputs) as float vectors.
inline std::vector<std::vector<float>> FloatCopies(std::span<const TensorView> tensors) {
  std::vector<std::vector<float>> result;
  for (const TensorView& t : tensors) {
    REQUIRE(t.dtype == DType::kFloat32);
    const float* p = static_cast<const float*>(t.data);
    result.emplace_back(p, p + t.num_elements());
  }
  return result;
}

// Runs artifact `bytes` on host inputs and returns copies of its outputs as float vectors.
// `options` picks the backend (the default: kAuto). The context runs once: no warm-up runs.
inline std::vector<std::vector<float>> RunFloat(const std::vector<uint8_t>& bytes, std::span<const TensorView> inputs,
                                                ContextOptions options = {}) {
  auto model = Model::Load(bytes);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  options.warm_runs = 0;
  auto ctx = ExecutionContext::Create(*model, options);
  REQUIRE(ctx.ok());
  std::vector<TensorView> out;
  Status st = ctx->Run(inputs, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return FloatCopies(out);
}

// The elements of a host tensor as T (its dtype's size must be sizeof(T)).
template <typename T>
std::vector<T> Values(const io::HostTensor& t) {
  REQUIRE(t.bytes.size() % sizeof(T) == 0);
  std::vector<T> v(t.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

// Runs `inputs` (host tensors) on `ctx` and copies its outputs to the host, on any backend
// (ExecutionContext::CopyOutputs into host buffers of the shapes the Run found). The Run's
// error, if any.
inline Result<std::vector<io::HostTensor>> RunToHost(ExecutionContext& ctx, std::span<const TensorView> inputs) {
  std::vector<TensorView> out;
  KILN_RETURN_IF_ERROR(ctx.Run(inputs, out));
  std::vector<io::HostTensor> result(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    result[i].dtype = out[i].dtype;
    result[i].dims.assign(out[i].dims, out[i].dims + out[i].rank);
    result[i].bytes.resize(static_cast<size_t>(out[i].num_bytes()));
    out[i] = result[i].view();
  }
  KILN_RETURN_IF_ERROR(ctx.CopyOutputs(out));
  KILN_RETURN_IF_ERROR(ctx.Synchronize());
  return result;
}

// A CPU-only compile's artifact, its log lines and the fusion stage's printed trace of the
// first entry, for tests of the fusion stage's passes.
struct CompiledWithLog {
  std::vector<uint8_t> bytes;
  std::vector<std::string> log;
  std::string fusion_trace;

  // Whether a log line contains `text`.
  bool Logged(const std::string& text) const {
    for (const std::string& l : log)
      if (l.find(text) != std::string::npos) return true;
    return false;
  }
};

inline CompiledWithLog CompileWithLog(const onnx::ModelProto& m, compiler::CompileOptions options = CpuOnly()) {
  CompiledWithLog c;
  options.log = [&](const std::string& line) { c.log.push_back(line); };
  c.bytes = CompileModel(m, options);
  auto model = Model::Load(c.bytes);
  REQUIRE(model.ok());
  const EntryInfo& e = model->entries().at(0);
  const auto& names = e.compile.stage_names;
  size_t i = 0;
  while (i < names.size() && names[i] != "fusion") ++i;
  REQUIRE(i < e.stage_traces.size());
  c.fusion_trace = e.stage_traces[i];
  return c;
}

}  // namespace kiln::testing
