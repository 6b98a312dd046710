// Loading, running and releasing models many times leaks nothing and keeps giving the same
// outputs: artifacts from bytes and from files (mmap), a corrupt artifact and a missing file
// that fail to load, contexts of one and of several threads created and destroyed, runs that
// fail their prologue or the caller's output check, and Model copies outliving the original.
// In the normal build the outputs are checked each round and the process's open files and
// memory mappings must not grow; the sanitizer tier (scripts/sanitize.sh, ASan with
// detect_leaks=1) runs this case too, and LeakSanitizer fails it on any leaked allocation.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "tests/compiler/compile_util.h"
#include "tests/compiler/onnx_model_builder.h"
#include "tests/runtime/threaded_model_test_util.h"
#include "tests/temp_dir.h"

using namespace kiln::testing;  // NOLINT

namespace {

// y = Softmax(x @ w + b), x: float32[N, 32]: a GEMM and a fused reduction, and a symbolic
// row count, so a larger N grows the context's arena.
onnx::ModelProto SoftmaxModel() {
  onnx::ModelProto m = MakeModel(17);
  onnx::GraphProto* g = m.mutable_graph();
  AddInput(g, "x", {"N", "32"});
  AddFloatInit(g, "w", {32, 32}, SeededFloats(32 * 32, 3, 0.5f));
  AddFloatInit(g, "b", {32}, SeededFloats(32, 4));
  AddNode(g, "MatMul", {"x", "w"}, {"xw"});
  AddNode(g, "Add", {"xw", "b"}, {"z"});
  AttrInt(AddNode(g, "Softmax", {"z"}, {"y"}), "axis", -1);
  AddOutput(g, "y");
  return m;
}

size_t OpenFiles() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Memory mappings of the file at `path` (lines of /proc/self/maps naming it).
size_t MappingsOf(const std::string& path) {
  std::ifstream in("/proc/self/maps");
  size_t n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0) ++n;
  return n;
}

struct ReleaseCase {
  kiln::Model model;
  std::vector<float> x;
  std::vector<int64_t> dims;
  size_t key;  // which results `got` must equal: one per model and input shape
};

kiln::TensorView View(const ReleaseCase& k) {
  return kiln::TensorView::Host(k.x.data(), kiln::DType::kFloat32, k.dims.data(), static_cast<int32_t>(k.dims.size()));
}

std::vector<std::vector<float>> RunOnce(kiln::ExecutionContext& ctx, const ReleaseCase& k) {
  kiln::TensorView in[] = {View(k)};
  std::vector<kiln::TensorView> out;
  kiln::Status st = ctx.Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return FloatCopies(out);
}

// Contexts of one and of two threads on each case, each with a prologue miss, a run, a
// refused caller output and a run after a move; `want[key]` is set by the first run of a
// key and compared with every later one. The cases (and so the Models) die on return.
void RunCases(std::vector<ReleaseCase> cases, std::vector<std::vector<std::vector<float>>>& want) {
  for (const ReleaseCase& k : cases) {
    CAPTURE(k.key);
    for (int threads : {1, 2}) {
      CAPTURE(threads);
      kiln::ContextOptions opts;
      opts.device = kiln::Device::kCpu;
      opts.cpu.threads = threads;
      auto ctx = kiln::ExecutionContext::Create(k.model, opts);
      REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
      // A wrong rank fails the prologue, and the context stays usable.
      std::vector<kiln::TensorView> out;
      kiln::TensorView wrong[] = {kiln::TensorView::Host(k.x.data(), kiln::DType::kFloat32, {1})};
      kiln::Status miss = ctx->Run(wrong, out);
      CHECK(miss.code() == kiln::StatusCode::kInvalidArgument);
      CHECK(miss.message().find("rank 1, expected " + std::to_string(k.dims.size())) != std::string::npos);
      const auto got = RunOnce(*ctx, k);
      if (want.size() <= k.key) want.resize(k.key + 1);
      if (want[k.key].empty()) want[k.key] = got;
      CHECK_MESSAGE(got == want[k.key], "outputs changed from an earlier round");
      // Caller-owned outputs of the wrong shape are refused after the run.
      std::vector<float> small(1);
      std::vector<kiln::TensorView> wrong_out(k.model.outputs().size(),
                                              kiln::TensorView::Host(small.data(), kiln::DType::kFloat32, {1}));
      kiln::TensorView in[] = {View(k)};
      kiln::Status refused = ctx->Run(in, wrong_out);
      CHECK(refused.code() == kiln::StatusCode::kInvalidArgument);
      CHECK(refused.message().find("shape [1], expected") != std::string::npos);
      // A moved-from context refuses; the moved-to one runs and is destroyed at scope end.
      kiln::ExecutionContext moved = std::move(*ctx);
      CHECK(ctx->Run(in, out).code() == kiln::StatusCode::kFailedPrecondition);
      CHECK(RunOnce(moved, k) == want[k.key]);
    }
  }
}

}  // namespace

TEST_CASE("many load/run/release cycles give the same outputs and leak nothing") {
  const std::vector<uint8_t> threaded = CompileModel(ThreadedModel());
  const std::vector<uint8_t> softmax = CompileModel(SoftmaxModel());
  // The same artifact with one weights byte flipped: a kDataLoss at every load.
  std::vector<uint8_t> corrupt = softmax;
  kiln::ArtifactHeader h;
  std::memcpy(&h, corrupt.data(), sizeof h);
  REQUIRE(h.weights_size > 0);
  corrupt[h.weights_offset + h.weights_size / 2] ^= 0x10;
  TempDir dir;
  const std::string path = dir / "softmax.kiln";
  WriteBytes(path, std::string(softmax.begin(), softmax.end()));

  const std::vector<float> image =
      SeededFloats(static_cast<size_t>(kThreadedModelChannels * kThreadedModelSide * kThreadedModelSide), 5);
  std::vector<std::vector<std::vector<float>>> want;  // per ReleaseCase::key
  size_t files = 0;
  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    CAPTURE(round);
    kiln::Status bad = kiln::Model::Load(corrupt).status();
    CHECK(bad.code() == kiln::StatusCode::kDataLoss);
    CHECK(bad.message().find("weights checksum mismatch") != std::string::npos);
    CHECK(kiln::Model::Load(dir / "missing.kiln").status().code() == kiln::StatusCode::kNotFound);

    // The softmax model's rows vary with the round: 1, 7, 64 (the arena grows, then is reused).
    const int64_t rows = round % 3 == 0 ? 1 : round % 3 == 1 ? 7 : 64;
    std::vector<ReleaseCase> cases;
    {
      auto from_bytes = kiln::Model::Load(threaded);
      REQUIRE_MESSAGE(from_bytes.ok(), from_bytes.status().ToString());
      auto from_file = kiln::Model::Load(path);
      REQUIRE_MESSAGE(from_file.ok(), from_file.status().ToString());
      cases.push_back({*from_bytes, image, {1, kThreadedModelChannels, kThreadedModelSide, kThreadedModelSide}, 0});
      cases.push_back({*from_file, SeededFloats(static_cast<size_t>(rows * 32), 6, 2.0f), {rows, 32},
                       1 + static_cast<size_t>(round % 3)});
    }  // the loaded Models are gone; their copies in `cases` keep the artifacts alive
    CHECK(MappingsOf(path) >= 1);
    RunCases(std::move(cases), want);
    // Softmax rows sum to 1.
    const std::vector<float>& y = want[1 + static_cast<size_t>(round % 3)][0];
    for (size_t r = 0; r < y.size() / 32; ++r)
      CHECK(std::accumulate(y.begin() + r * 32, y.begin() + r * 32 + 32, 0.0f) == doctest::Approx(1.0f).epsilon(1e-5));
    // The file's mapping went with its last Model. After the first rounds (lazy one-time
    // state), the process holds the same open files at the end of every round.
    CHECK(MappingsOf(path) == 0);
    if (round == 2) files = OpenFiles();
    if (round > 2) CHECK(OpenFiles() == files);
  }
}
