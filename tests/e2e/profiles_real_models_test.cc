// Multi-entry artifacts of real models (tests/e2e/make_package_testdata.py): the PP-OCRv4
// text detector and the PP-OCR direction classifier, each compiled with compile profiles for
// batch 1, a second fixed batch and a range. Over a scripted sequence of calls, every call
// takes the entry it should, or misses with one line per entry; each entry's outputs equal
// the single-entry (default) artifact's for the same inputs; hits and misses add up.
//
// Tolerance: |x - ref| <= 1e-5 + 1e-5 * |ref|: static and symbolic entries run the same
// kernels and programs, with dims as constants in one and evaluated sizes in the other.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "tests/compiler/compile_util.h"

namespace {

using kiln::DType;
using kiln::TensorView;

struct ProfileCall {
  int64_t batch, height, width;
  int32_t entry;       // the entry it should take; -1: a miss
  std::string reason;  // a miss: a line its message must hold
};

struct ProfileCase {
  std::string model;  // folder under KILN_TEST_DATA_DIR; its one input is float32[N, 3, H, W]
  std::vector<std::string> profiles;
  std::vector<std::string> entry_names;  // in the order Run tries them
  std::vector<ProfileCall> script;
};

std::vector<uint8_t> CompileWithProfiles(const std::string& path, const std::vector<std::string>& profiles) {
  kiln::compiler::CompileOptions o = kiln::testing::CpuOnly();
  for (const std::string& p : profiles) {
    auto parsed = kiln::compiler::ParseProfile(p);
    REQUIRE_MESSAGE(parsed.ok(), parsed.status().ToString());
    o.profiles.push_back(*parsed);
  }
  auto bytes = kiln::compiler::CompileOnnxFile(path, o, nullptr);
  REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  return *bytes;
}

// `batch` images of the test set's size: the test images in turn, each copy scaled by
// 1 + 0.05 * (its index), so batch items differ. Other sizes (for misses) are zeros.
std::vector<float> Images(const kiln::io::HostTensor& test, const ProfileCall& c) {
  const int64_t per = c.height * c.width * 3;
  std::vector<float> x(static_cast<size_t>(c.batch * per), 0.0f);
  if (c.height != test.dims[2] || c.width != test.dims[3]) return x;
  const float* src = reinterpret_cast<const float*>(test.bytes.data());
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < per; ++i)
      x[b * per + i] = src[(b % test.dims[0]) * per + i] * (1.0f + 0.05f * static_cast<float>(b));
  return x;
}

void RunCase(const ProfileCase& c) {
  const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/" + c.model;
  if (!std::filesystem::exists(dir + "/model.onnx")) {
    MESSAGE("skipped: " << dir << " is missing (run tests/e2e/make_package_testdata.py)");
    return;
  }
  auto test = kiln::io::ReadTensorProtoFile(dir + "/test_data_set_0/input_0.pb");
  REQUIRE_MESSAGE(test.ok(), test.status().ToString());
  REQUIRE(test->dims.size() == 4);

  auto multi = kiln::Model::Load(CompileWithProfiles(dir + "/model.onnx", c.profiles));
  auto single = kiln::Model::Load(CompileWithProfiles(dir + "/model.onnx", {}));
  REQUIRE(multi.ok());
  REQUIRE(single.ok());
  REQUIRE(multi->entries().size() == c.entry_names.size());
  for (size_t e = 0; e < c.entry_names.size(); ++e) CHECK(multi->entries()[e].name == c.entry_names[e]);
  auto ctx = kiln::ExecutionContext::Create(*multi, {});
  auto ref_ctx = kiln::ExecutionContext::Create(*single, {});
  REQUIRE(ctx.ok());
  REQUIRE(ref_ctx.ok());

  std::vector<uint64_t> hits(c.entry_names.size(), 0);
  uint64_t misses = 0;
  for (const ProfileCall& call : c.script) {
    INFO("call N=" << call.batch << " H=" << call.height << " W=" << call.width);
    const std::vector<float> x = Images(*test, call);
    TensorView in[] = {TensorView::Host(x.data(), DType::kFloat32, {call.batch, 3, call.height, call.width})};
    std::vector<TensorView> out;
    kiln::Status st = ctx->Run(in, out);
    if (call.entry < 0) {
      ++misses;
      REQUIRE(st.code() == kiln::StatusCode::kInvalidArgument);
      CHECK_MESSAGE(st.message().find(call.reason) != std::string::npos, st.message());
      CHECK(ctx->stats().last_miss_reasons.size() == c.entry_names.size());
      continue;
    }
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    ++hits[call.entry];
    CHECK(ctx->stats().last_entry == call.entry);
    std::vector<TensorView> ref_out;
    REQUIRE(ref_ctx->Run(in, ref_out).ok());
    const auto got = kiln::testing::FloatCopies(out), want = kiln::testing::FloatCopies(ref_out);
    REQUIRE(got.size() == want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      REQUIRE(got[o].size() == want[o].size());
      size_t bad = 0;
      for (size_t i = 0; i < got[o].size(); ++i)
        if (!(std::fabs(got[o][i] - want[o][i]) <= 1e-5f + 1e-5f * std::fabs(want[o][i]))) ++bad;
      CHECK_MESSAGE(bad == 0, "output ", o, ": ", bad, " of ", got[o].size(), " elements differ");
    }
  }
  const kiln::Stats& s = ctx->stats();
  CHECK(s.calls == c.script.size());
  CHECK(s.cache_misses == misses);
  CHECK(s.cache_hits == c.script.size() - misses);
  for (size_t e = 0; e < hits.size(); ++e) CHECK_MESSAGE(s.entries[e].hits == hits[e], "entry ", e);
}

}  // namespace

TEST_CASE("profiles on the PP-OCRv4 text detector: N=1, N=4 and a range, against the single-entry artifact") {
  // Its input declares x: [p2o.DynamicDimension.0, 3, p2o.DynamicDimension.1, p2o.DynamicDimension.2];
  // profiles name dims by position and by symbol. The test image is 160 x 320.
  ProfileCase c;
  c.model = "ch_PP-OCRv4_det";
  c.profiles = {"x:0=1", "x:p2o.DynamicDimension.0=4", "x:0=1..8,2=32..640:32,3=32..640:32"};
  const std::string range = "p2o.DynamicDimension.0 in 1..8, p2o.DynamicDimension.1 in 32..640:32, "
                            "p2o.DynamicDimension.2 in 32..640:32";
  c.entry_names = {"p2o.DynamicDimension.0=1", "p2o.DynamicDimension.0=4", range};
  c.script = {
      {1, 160, 320, 0, ""},
      {4, 160, 320, 1, ""},
      {2, 160, 320, 2, ""},
      {1, 160, 320, 0, ""},
      {2, 100, 320, -1, "entry 2 (" + range + "): input 'x' dim 2 (p2o.DynamicDimension.1) = 100, expected a multiple of 32"},
      {9, 160, 320, -1, "entry 2 (" + range + "): input 'x' dim 0 (p2o.DynamicDimension.0) = 9, expected 1..8"},
      {9, 160, 320, -1, "entry 1 (p2o.DynamicDimension.0=4): input 'x' dim 0 = 9, expected 4"},
      {4, 160, 320, 1, ""},
  };
  RunCase(c);
}

TEST_CASE("profiles on the PP-OCR direction classifier: N=1, N=2 and a range, against the single-entry artifact") {
  // Its input declares x: [-1, 3, ?, ?]: Kiln names the unnamed dims x_dim0, x_dim2, x_dim3.
  // The test set is two 48 x 192 images.
  ProfileCase c;
  c.model = "ch_ppocr_mobile_v2.0_cls";
  c.profiles = {"x:x_dim0=1", "x:0=2", "x:0=1..16,2=48,3=32..640:32"};
  c.entry_names = {"x_dim0=1", "x_dim0=2", "x_dim0 in 1..16, x_dim2=48, x_dim3 in 32..640:32"};
  c.script = {
      {2, 48, 192, 1, ""},
      {1, 48, 192, 0, ""},
      {6, 48, 192, 2, ""},
      {6, 48, 200, -1, "input 'x' dim 3 (x_dim3) = 200, expected a multiple of 32"},
      {6, 32, 192, -1, "entry 2 (x_dim0 in 1..16, x_dim2=48, x_dim3 in 32..640:32): input 'x' dim 2 = 32, expected 48"},
      {2, 48, 192, 1, ""},
  };
  RunCase(c);
}

TEST_CASE("profiles on Silero VAD: a fixed sequence length gives the default artifact's outputs on every test set") {
  // A regression: with `sequence` fixed, two fused ops (Gather of state[0] from [2, 1, 128],
  // Squeeze of a [1, 128, 1]) emitted one kernel body and shared one kernel, and every call
  // failed the second op's input-shape check.
  const std::string dir = std::string(KILN_TEST_DATA_DIR) + "/silero_vad_16k_op15";
  if (!std::filesystem::exists(dir + "/model.onnx")) {
    MESSAGE("skipped: " << dir << " is missing (run tests/e2e/make_package_testdata.py)");
    return;
  }
  auto multi =
      kiln::Model::Load(CompileWithProfiles(dir + "/model.onnx", {"input:1=576", "input:batch=1..4,sequence=576"}));
  auto single = kiln::Model::Load(CompileWithProfiles(dir + "/model.onnx", {}));
  REQUIRE(multi.ok());
  REQUIRE(single.ok());
  // The second profile's shapes fit inside the first's, so it is tried first.
  REQUIRE(multi->entries().size() == 2);
  CHECK(multi->entries()[0].name.rfind("batch in 1..4, sequence=576", 0) == 0);
  CHECK(multi->entries()[1].name.rfind("sequence=576", 0) == 0);
  auto ctx = kiln::ExecutionContext::Create(*multi, {});
  auto ref_ctx = kiln::ExecutionContext::Create(*single, {});
  REQUIRE(ctx.ok());
  REQUIRE(ref_ctx.ok());
  std::vector<std::string> names;
  for (const kiln::TensorInfo& t : multi->inputs()) names.push_back(t.name);
  int sets = 0;
  for (; std::filesystem::exists(dir + "/test_data_set_" + std::to_string(sets)); ++sets) {
    auto inputs = kiln::io::ReadInputDir(dir + "/test_data_set_" + std::to_string(sets), names);
    REQUIRE_MESSAGE(inputs.ok(), inputs.status().ToString());
    std::vector<TensorView> views;
    for (const auto& t : *inputs) views.push_back(t.view());
    std::vector<TensorView> out, ref_out;
    kiln::Status st = ctx->Run(views, out);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    CHECK(ctx->stats().last_entry == 0);
    REQUIRE(ref_ctx->Run(views, ref_out).ok());
    CHECK(kiln::testing::FloatCopies(out) == kiln::testing::FloatCopies(ref_out));
  }
  CHECK(sets == 3);
  CHECK(ctx->stats().entries[0].hits == 3);
}
