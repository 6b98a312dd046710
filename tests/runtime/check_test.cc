// The preflight (kiln/check.h): what it reports for the CPU and the CUDA backends, that it reads
// no weight page (damaged weights pass it and fail Model::Load), and that a damaged FlatBuffer
// fails it as it fails Load. The CUDA cases run on the emulated device (sm_90 by default) and
// skip elsewhere.
#include "kiln/check.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <span>

#include "compiler/compile.h"
#include "runtime/artifact_header.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/gpu_test_util.h"
#include "tests/temp_dir.h"

namespace {

using kiln::CheckArtifact;
using kiln::CheckOptions;
using kiln::CheckReport;
using kiln::DeviceCheck;

// y = Relu(Conv(x, w)) + 1: a Conv (oneDNN or Kiln's CPU kernel; cuDNN) and a fused Add.
onnx::ModelProto ConvAddModel() {
  auto m = kiln::testing::MakeModel(13);
  auto* g = m.mutable_graph();
  kiln::testing::AddInput(g, "x", {"1", "2", "8", "8"});
  kiln::testing::AddFloatInit(g, "w", {4, 2, 3, 3}, std::vector<float>(72, 0.25f));
  kiln::testing::AddFloatInit(g, "one", {}, {1.0f});
  kiln::testing::AddNode(g, "Conv", {"x", "w"}, {"c"});
  kiln::testing::AddNode(g, "Relu", {"c"}, {"r"});
  kiln::testing::AddNode(g, "Add", {"r", "one"}, {"y"});
  kiln::testing::AddOutput(g, "y");
  return m;
}

std::string Write(const kiln::testing::TempDir& dir, const std::vector<uint8_t>& bytes) {
  const std::string path = dir / "model.kiln";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return path;
}

std::vector<std::string> Paths(const DeviceCheck& d) {
  std::vector<std::string> paths;
  for (const kiln::EntryCheck& e : d.entries)
    for (const kiln::InstructionCheck& i : e.instructions) paths.push_back(i.op + ": " + i.path);
  return paths;
}

}  // namespace

TEST_CASE("preflight: the CPU's paths per instruction, the artifact's facts, and the verdict") {
  kiln::testing::TempDir dir;
  const std::vector<uint8_t> bytes = kiln::testing::CompileModel(ConvAddModel());
  const std::string path = Write(dir, bytes);
  CheckOptions options;
  options.device = kiln::Device::kCpu;
  auto r = CheckArtifact(path, options);
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  auto model = kiln::Model::Load(path);
  REQUIRE(model.ok());
  CHECK(r->format_version == model->format_version());
  CHECK(r->file_bytes == bytes.size());
  CHECK(r->weights_bytes == model->weights_bytes());
  CHECK_FALSE(r->weights_verified);
  CHECK(r->provenance.flags == model->provenance().flags);
  REQUIRE(r->devices.size() == 1);
  const DeviceCheck& cpu = r->devices[0];
  CHECK(cpu.device == "cpu");
  CHECK(cpu.usable);
  CHECK(cpu.problems.empty());
  CHECK(r->usable);
  CHECK(r->chosen_device == "cpu");
  REQUIRE(cpu.entries.size() == 1);
  CHECK(cpu.entries[0].arena_bytes == model->entries()[0].arena_bytes);
  // The Conv with its Relu folded, on oneDNN where the runtime has it; the Add a generated
  // kernel, in this CPU's native code (compile_util.h compiles for the target this CPU runs).
  const std::vector<std::string> paths = Paths(cpu);
  REQUIRE(paths.size() == 2);
  CHECK((paths[0] == "Conv: oneDNN" || paths[0] == "Conv: CPU kernel"));
  CHECK(paths[1] == "kiln.Fused: native code " + model->native_code_target());
  CHECK_FALSE(model->native_code_target().empty());

  // Without native code, the interpreter runs the generated kernel, and a note says so.
  options.load.native_code = false;
  auto interpreted = CheckArtifact(path, options);
  REQUIRE(interpreted.ok());
  CHECK(Paths(interpreted->devices[0])[1] == "kiln.Fused: interpreter");
  REQUIRE(interpreted->devices[0].notes.size() == 1);
  CHECK(interpreted->devices[0].notes[0].find("1 generated-kernel instructions are interpreted") == 0);
}

TEST_CASE("preflight: damaged weights pass it (it reads none) and fail Model::Load, a damaged FlatBuffer fails both") {
  kiln::testing::TempDir dir;
  std::vector<uint8_t> bytes = kiln::testing::CompileModel(ConvAddModel());
  kiln::ArtifactHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  std::vector<uint8_t> weights = bytes;
  weights[h.weights_offset + 5] ^= 0x40;
  const std::string path = Write(dir, weights);
  auto r = CheckArtifact(path, {});
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  CHECK(r->usable);
  auto loaded = kiln::Model::Load(path);
  CHECK(loaded.status().code() == kiln::StatusCode::kDataLoss);
  CHECK(std::string(loaded.status().message()).find("weights checksum mismatch") != std::string::npos);
  // Nor does it check a signature or decrypt (both read every weight page): the options that ask
  // Load for them are not used, and an unsigned artifact with a key that is not one passes.
  CheckOptions keyed;
  keyed.load.trusted_public_keys = {"not a PEM key"};
  keyed.load.weights_key = [](std::string_view, std::span<uint8_t, 32>) { return kiln::Internal("not called"); };
  auto unsigned_artifact = CheckArtifact(path, keyed);
  REQUIRE_MESSAGE(unsigned_artifact.ok(), unsigned_artifact.status().ToString());
  CHECK(unsigned_artifact->usable);

  std::vector<uint8_t> flatbuffer = bytes;
  flatbuffer[h.flatbuffer_offset + h.flatbuffer_size / 2] ^= 0x40;
  const std::string damaged = Write(dir, flatbuffer);
  auto refused = CheckArtifact(damaged, {});
  CHECK(refused.status().code() == kiln::StatusCode::kDataLoss);
  CHECK(refused.status().message() == kiln::Model::Load(damaged).status().message());
  CHECK(CheckArtifact(dir / "missing.kiln", {}).status().code() == kiln::StatusCode::kNotFound);
}

TEST_CASE("preflight: with --device auto on a machine without a usable GPU, the CUDA device says why and the CPU is chosen") {
  if (kiln::testing::EmulatedCuda() != nullptr) return;  // the emulated device is usable: the case below
  kiln::testing::TempDir dir;
  auto r = CheckArtifact(Write(dir, kiln::testing::CompileModel(ConvAddModel())), {});
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  REQUIRE(r->devices.size() == 2);
  CHECK(r->devices[0].device == "cuda:0");
  CHECK_FALSE(r->devices[0].usable);
  REQUIRE_FALSE(r->devices[0].problems.empty());
  CHECK(r->chosen_device == "cpu");
  CHECK(r->usable);
}

#ifdef KILN_HAVE_CUDA
TEST_CASE("[emulated] preflight: cubin for the device's arch, PTX JIT below it, none above it, and cuDNN found") {
  KILN_REQUIRE_EMULATED_CUDA();
  kiln::testing::TempDir dir;
  CheckOptions options;
  options.device = kiln::Device::kCuda;
  auto check = [&](std::vector<std::string> archs) {
    kiln::compiler::CompileOptions o = kiln::testing::CpuOnly();
    o.archs = std::move(archs);
    auto r = CheckArtifact(Write(dir, kiln::testing::CompileModel(ConvAddModel(), o)), options);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    REQUIRE(r->devices.size() == 1);
    return *r;
  };
  // The emulated device is sm_90 (tests/emulated_cuda/device.h).
  const CheckReport cubin = check({"sm_80", "sm_90", "compute_90"});
  const DeviceCheck& d = cubin.devices[0];
  CHECK(d.usable);
  CHECK(d.description.find("(sm_90)") != std::string::npos);
  CHECK(d.min_driver_version == 13000);
  CHECK(d.ptx_jit_kernels == 0);
  const std::vector<std::string> paths = Paths(d);
  CHECK(std::find(paths.begin(), paths.end(), "kiln.Fused: cubin sm_90") != paths.end());
  CHECK(std::find(paths.begin(), paths.end(), "Conv: cuDNN") != paths.end());
  REQUIRE(d.libraries.size() == 1);
  CHECK(d.libraries[0].name == "cuDNN");
  CHECK(d.libraries[0].ok);
  CHECK(d.libraries[0].required == "9.x");
  CHECK(d.libraries[0].found.rfind("9.", 0) == 0);

  const CheckReport jit = check({"sm_80", "compute_80"});
  CHECK(jit.devices[0].usable);
  CHECK(jit.devices[0].ptx_jit_kernels == 1);
  CHECK(jit.devices[0].ptx_jit_estimate_ms > 0);
  const std::vector<std::string> jit_paths = Paths(jit.devices[0]);
  CHECK(std::find(jit_paths.begin(), jit_paths.end(), "kiln.Fused: PTX JIT from compute_80") != jit_paths.end());

  const CheckReport none = check({"sm_80"});
  CHECK_FALSE(none.devices[0].usable);
  CHECK_FALSE(none.usable);
  REQUIRE(none.devices[0].problems.size() == 1);
  CHECK(none.devices[0].problems[0].find("has no cubin for sm_90 and no PTX") != std::string::npos);
}
#endif
