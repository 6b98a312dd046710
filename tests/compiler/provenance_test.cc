// The artifact's provenance (compiler/provenance.h): SHA-256 against FIPS 180-2's test vectors
// and hashlib's value, the flags that shape the bytes with host defaults resolved, and what
// Model::provenance() reads back from a compiled artifact.
#include "compiler/provenance.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>

#include "compiler/codegen/cpu/targets.h"
#include "kiln/runtime.h"
#include "kiln/version.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/temp_dir.h"

namespace {

using kiln::compiler::FileSha256Hex;
using kiln::compiler::ProvenanceFlags;
using kiln::compiler::Sha256Hex;

// FIPS 180-2, appendix B.1 ("abc"), and the digest of no bytes.
constexpr const char* kAbcSha256 = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr const char* kEmptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

bool HasFlag(const std::vector<std::string>& flags, const std::string& flag) {
  return std::find(flags.begin(), flags.end(), flag) != flags.end();
}

// y = x + w, x: float32[N, 2].
onnx::ModelProto AddWeightModel() {
  auto m = kiln::testing::MakeModel(13);
  auto* g = m.mutable_graph();
  kiln::testing::AddInput(g, "x", {"N", "2"});
  kiln::testing::AddFloatInit(g, "w", {2}, {1.0f, 2.0f});
  kiln::testing::AddNode(g, "Add", {"x", "w"}, {"y"});
  kiln::testing::AddOutput(g, "y");
  return m;
}

}  // namespace

TEST_CASE("provenance: SHA-256 of bytes and of a file, as FIPS 180-2 gives it") {
  CHECK(Sha256Hex("abc", 3) == kAbcSha256);
  CHECK(Sha256Hex("", 0) == kEmptySha256);
  kiln::testing::TempDir dir;
  std::ofstream(dir / "abc.bin", std::ios::binary) << "abc";
  auto file = FileSha256Hex(dir / "abc.bin");
  REQUIRE_MESSAGE(file.ok(), file.status().ToString());
  CHECK(*file == kAbcSha256);
  // More than one 1 MiB read: a million 'a's, FIPS 180-2 appendix B.3.
  std::ofstream(dir / "million.bin", std::ios::binary) << std::string(1'000'000, 'a');
  CHECK(*FileSha256Hex(dir / "million.bin") == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  auto missing = FileSha256Hex(dir / "missing.onnx");
  CHECK(missing.status().code() == kiln::StatusCode::kNotFound);
  CHECK(std::string(missing.status().message()).find("missing.onnx") != std::string::npos);
}

TEST_CASE("provenance: the flags that shape the bytes, resolved, and none that do not") {
  kiln::compiler::CompileOptions o;
  o.cpu_targets = "host";
  const std::vector<std::string> flags = ProvenanceFlags(o);
  CHECK(HasFlag(flags, "--arch=sm_80,sm_86,sm_87,sm_89,sm_90,compute_90"));
  CHECK(HasFlag(flags, "--cpu-layout=nhwc"));
  CHECK(HasFlag(flags, "--precision=fp32"));
  CHECK(HasFlag(flags, "--io-precision=declared"));
  // "host" is this machine's family, named target by target.
  std::string targets = "--cpu-targets=";
  auto parsed = kiln::codegen::cpu::ParseCpuTargets("host");
  REQUIRE(parsed.ok());
  for (size_t i = 0; i < parsed->size(); ++i) targets += (i ? "," : "") + std::string((*parsed)[i]->name);
  CHECK(HasFlag(flags, parsed->empty() ? "--cpu-targets=none" : targets));
  for (const std::string& f : flags) CHECK(f.find("host") == std::string::npos);

  // The kernel cache and the threads change no byte, so they are not flags.
  kiln::compiler::CompileOptions other = o;
  other.kernel_cache_dir = "/somewhere/else";
  other.use_kernel_cache = false;
  other.jobs = 7;
  CHECK(ProvenanceFlags(other) == flags);

  auto data = std::make_shared<kiln::ir::ConstData>();
  data->dtype = kiln::DType::kUInt8;
  data->dims = {3};
  data->bytes = {'a', 'b', 'c'};
  o.constant_inputs["scale"] = data;
  o.input_shapes["x"] = {1, -1, 224};
  o.archs.clear();
  o.fuse = false;
  o.loop_scan_bound = 64;
  o.precision.precision = kiln::passes::Precision::kFp16;
  o.precision.keep_fp32 = {"Softmax"};
  auto profile = kiln::compiler::ParseProfile("x:N=1..8");
  REQUIRE(profile.ok());
  o.profiles.push_back(*profile);
  const std::vector<std::string> more = ProvenanceFlags(o);
  CHECK(HasFlag(more, std::string("--constant-input=scale=sha256:") + kAbcSha256));
  CHECK(HasFlag(more, "--shape=x=1,-1,224"));
  CHECK(HasFlag(more, "--arch=none"));
  CHECK(HasFlag(more, "--no-fuse"));
  CHECK(HasFlag(more, "--loop-scan-bound=64"));
  CHECK(HasFlag(more, "--precision=fp16"));
  CHECK(HasFlag(more, "--keep-fp32=Softmax"));
  CHECK(HasFlag(more, "--profile=x:N=1..8"));
}

TEST_CASE("provenance: an artifact records its Kiln version, flags, model SHA-256 and libraries") {
  kiln::testing::TempDir dir;
  std::string bytes;
  REQUIRE(AddWeightModel().SerializeToString(&bytes));
  std::ofstream(dir / "model.onnx", std::ios::binary) << bytes;
  const kiln::compiler::CompileOptions options = kiln::testing::CpuOnly();
  auto artifact = kiln::compiler::CompileOnnxFile(dir / "model.onnx", options, nullptr);
  REQUIRE_MESSAGE(artifact.ok(), artifact.status().ToString());
  auto model = kiln::Model::Load(*artifact);
  REQUIRE_MESSAGE(model.ok(), model.status().ToString());
  const kiln::ProvenanceInfo& p = model->provenance();
  CHECK(p.kiln_version == KILN_VERSION_STRING);
  CHECK(p.flags == ProvenanceFlags(options));
  CHECK(p.model_sha256 == Sha256Hex(bytes.data(), bytes.size()));
  std::vector<std::string> names;
  for (const auto& library : p.libraries) {
    names.push_back(library.first);
    CHECK_FALSE(library.second.empty());
  }
  CHECK(HasFlag(names, "ONNX"));
  CHECK(HasFlag(names, "FlatBuffers"));
  // CPU-only: nothing of NVRTC's in it, so its bytes do not depend on whether NVRTC is here.
  CHECK_FALSE(HasFlag(names, "NVRTC"));

  // The same model and options again: the same bytes (no time, no path, no order of threads).
  auto again = kiln::compiler::CompileOnnxFile(dir / "model.onnx", options, nullptr);
  REQUIRE(again.ok());
  CHECK(*again == *artifact);
}
