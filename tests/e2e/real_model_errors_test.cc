// Bad inputs against a real model (Silero VAD from the silero-vad wheel, prepared by
// tests/e2e/make_package_testdata.py): every rejection names the input, the check, the
// expected value and the value found; corrupt artifacts are rejected at load.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "compiler/compile.h"
#include "kiln/runtime.h"
#include "tests/e2e/silero_call.h"
#include "tests/native_target.h"

namespace {

const std::string kModel = std::string(KILN_TEST_DATA_DIR) + "/silero_vad_16k_op15/model.onnx";

std::vector<uint8_t>& Artifact() {
  static std::vector<uint8_t> bytes = [] {
    kiln::compiler::CompileOptions options;
    options.archs.clear();  // CPU-only: needs no NVRTC (builds without the CUDA toolkit have none)
    options.cpu_targets = kiln::testing::NativeTargetForThisCpu();
    auto r = kiln::compiler::CompileOnnxFile(kModel, options, nullptr);
    REQUIRE_MESSAGE(r.ok(), r.status().ToString());
    return *r;
  }();
  return bytes;
}

std::string RunError(std::vector<kiln::TensorView> inputs) {
  auto model = kiln::Model::Load(Artifact());
  REQUIRE(model.ok());
  auto ctx = kiln::ExecutionContext::Create(*model, {});
  REQUIRE(ctx.ok());
  std::vector<kiln::TensorView> out;
  kiln::Status st = ctx->Run(inputs, out);
  CHECK(st.code() == kiln::StatusCode::kInvalidArgument);
  CHECK(ctx->stats().cache_misses == 1);
  return st.message();
}

bool HaveModel() {
  if (std::filesystem::exists(kModel)) return true;
  MESSAGE("skipped: " << kModel << " is missing (run tests/e2e/make_package_testdata.py)");
  return false;
}

}  // namespace

TEST_CASE("silero: a good call passes and a bad one names input, check, expected and found") {
  if (!HaveModel()) return;
  kiln::testing::SileroCall call;
  {
    auto model = kiln::Model::Load(Artifact());
    REQUIRE(model.ok());
    auto ctx = kiln::ExecutionContext::Create(*model, {});
    REQUIRE(ctx.ok());
    std::vector<kiln::TensorView> out;
    REQUIRE_MESSAGE(ctx->Run(call.views(), out).ok(), "good inputs rejected");
    CHECK(ctx->stats().cache_hits == 1);
    REQUIRE(out.size() == 2);
    float p = *static_cast<const float*>(out[0].data);
    CHECK(p >= 0.0f);
    CHECK(p <= 1.0f);
  }
  SUBCASE("wrong dtype") {
    auto v = call.views();
    v[0].dtype = kiln::DType::kFloat64;
    CHECK(RunError(v).find("input 'input' dtype float64, expected float32") != std::string::npos);
  }
  SUBCASE("wrong rank") {
    auto v = call.views();
    v[1].rank = 2;
    CHECK(RunError(v).find("input 'state' rank 2, expected 3") != std::string::npos);
  }
  SUBCASE("wrong constant dim") {
    auto v = call.views();
    v[1].dims[0] = 3;
    CHECK(RunError(v).find("input 'state' dim 0 = 3, expected 2") != std::string::npos);
  }
  SUBCASE("two inputs disagree on a symbol") {
    auto v = call.views();
    v[1].dims[1] = 2;
    std::string msg = RunError(v);
    CHECK(msg.find("input 'state' dim 1 (batch) = 2, but input 'input' bound batch = 1") != std::string::npos);
  }
  SUBCASE("missing input") {
    auto v = call.views();
    v.pop_back();
    CHECK(RunError(v).find("expected 3 inputs, got 2") != std::string::npos);
  }
  SUBCASE("null pointer") {
    auto v = call.views();
    v[2].data = nullptr;
    CHECK(RunError(v).find("input 'sr' data pointer is null") != std::string::npos);
  }
}

TEST_CASE("silero: truncated and tampered artifacts are rejected at load") {
  if (!HaveModel()) return;
  const std::vector<uint8_t>& good = Artifact();
  REQUIRE(kiln::Model::Load(good).ok());
  for (size_t len : {size_t{0}, size_t{10}, size_t{63}, size_t{64}, good.size() / 2, good.size() - 1}) {
    auto r = kiln::Model::Load(std::span<const uint8_t>(good.data(), len));
    CHECK_MESSAGE(r.status().code() == kiln::StatusCode::kDataLoss, "length ", len);
  }
  std::vector<uint8_t> flipped = good;
  flipped[flipped.size() - 5] ^= 0x40;  // a byte inside the weights blob
  auto r = kiln::Model::Load(flipped);
  CHECK(r.status().code() == kiln::StatusCode::kDataLoss);
  CHECK(r.status().message().find("weights checksum mismatch") != std::string::npos);
  // A flipped byte inside the FlatBuffer (a dim, an offset, an op name) would still pass the
  // FlatBuffers Verifier; its checksum catches it.
  std::vector<uint8_t> flipped_fb = good;
  flipped_fb[64 + 200] ^= 0x01;
  auto f = kiln::Model::Load(flipped_fb);
  CHECK(f.status().code() == kiln::StatusCode::kDataLoss);
  CHECK(f.status().message().find("FlatBuffer checksum mismatch") != std::string::npos);
}
