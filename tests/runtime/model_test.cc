// Model::Load and ExecutionContext::Run over artifacts built in the test.
#include <doctest/doctest.h>
#include <xxhash.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "tests/runtime/artifact_builder_test_util.h"
#include "tests/runtime/cpu_note.h"
#include "runtime/checksum.h"

namespace kiln {
namespace {

using testing::AddModelSpec;
using testing::ArtifactSpec;
using testing::BuildArtifact;
using testing::E;
using testing::LoadError;

Model LoadOk(const std::vector<uint8_t>& bytes) {
  Result<Model> m = Model::Load(bytes);
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  return *m;
}

ExecutionContext MakeContext(const Model& m) {
  Result<ExecutionContext> c = ExecutionContext::Create(m, {});
  REQUIRE_MESSAGE(c.ok(), c.status().ToString());
  return std::move(*c);
}

TEST_CASE("Add model runs and returns views into the arena") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  ExecutionContext ctx = MakeContext(m);
  CHECK(ctx.device() == Device::kCpu);
  float x[] = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  std::vector<TensorView> out;
  Status st = ctx.Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  REQUIRE(out.size() == 1);
  CHECK(out[0].dtype == DType::kFloat32);
  CHECK(out[0].rank == 2);
  CHECK(out[0].dims[0] == 2);
  CHECK(out[0].dims[1] == 3);
  const float* y = static_cast<const float*>(out[0].data);
  const float want[] = {11, 22, 33, 14, 25, 36};
  for (int i = 0; i < 6; ++i) CHECK(y[i] == want[i]);
  CHECK(ctx.arena_bytes() >= 24);

  // A larger N grows the arena; a smaller one reuses it.
  std::vector<float> big(3 * 40, 1.0f);
  TensorView in2[] = {TensorView::Host(big.data(), DType::kFloat32, {40, 3})};
  out.clear();
  REQUIRE(ctx.Run(in2, out).ok());
  CHECK(out[0].dims[0] == 40);
  CHECK(static_cast<const float*>(out[0].data)[119] == 31.0f);
  CHECK(ctx.arena_bytes() >= 480);
  const uint64_t arena = ctx.arena_bytes();
  out.clear();
  REQUIRE(ctx.Run(in, out).ok());
  CHECK(static_cast<const float*>(out[0].data)[5] == 36.0f);
  CHECK(ctx.arena_bytes() == arena);
}

TEST_CASE("the vector the last Run filled can be passed back unchanged, even after the arena grows") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  ExecutionContext ctx = MakeContext(m);
  float x[] = {1, 2, 3};
  TensorView small[] = {TensorView::Host(x, DType::kFloat32, {1, 3})};
  std::vector<TensorView> out;
  REQUIRE(ctx.Run(small, out).ok());
  // Same vector, no clear(): its view points into the arena that the next call outgrows.
  std::vector<float> big(3 * 64, 2.0f);
  TensorView large[] = {TensorView::Host(big.data(), DType::kFloat32, {64, 3})};
  Status st = ctx.Run(large, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  REQUIRE(out.size() == 1);
  CHECK(out[0].dims[0] == 64);
  CHECK(static_cast<const float*>(out[0].data)[191] == 32.0f);
}

TEST_CASE("a caller output with an impossible rank is described, not read past its dims") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  ExecutionContext ctx = MakeContext(m);
  float x[] = {1, 2, 3, 4, 5, 6};
  float y[6] = {};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  std::vector<TensorView> out = {TensorView::Host(y, DType::kFloat32, {2, 3})};
  out[0].rank = 100;
  CHECK(ctx.Run(in, out).message() == "output 0 'y' shape of rank 100, expected [2, 3]");
}

TEST_CASE("a moved-from context refuses to run") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  ExecutionContext ctx = MakeContext(m);
  ExecutionContext other = std::move(ctx);
  float x[] = {1, 2, 3};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {1, 3})};
  std::vector<TensorView> out;
  CHECK(ctx.Run(in, out).code() == StatusCode::kFailedPrecondition);  // NOLINT: use after move is the test
  CHECK(other.Run(in, out).ok());
}

TEST_CASE("outputs are copied into caller buffers and mismatches rejected") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  ExecutionContext ctx = MakeContext(m);
  float x[] = {1, 2, 3, 4, 5, 6};
  float y[6] = {};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  std::vector<TensorView> out = {TensorView::Host(y, DType::kFloat32, {2, 3})};
  REQUIRE(ctx.Run(in, out).ok());
  CHECK(y[0] == 11);
  CHECK(y[5] == 36);
  CHECK(out[0].data == y);

  std::vector<TensorView> wrong = {TensorView::Host(y, DType::kFloat32, {3, 3})};
  Status st = ctx.Run(in, wrong);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "output 0 'y' shape [3, 3], expected [2, 3]");
  wrong = {TensorView::Host(y, DType::kInt32, {2, 3})};
  CHECK(ctx.Run(in, wrong).message() == "output 0 'y' dtype int32, expected float32");
  wrong = {TensorView::Host(y, DType::kFloat32, {2, 3}), TensorView::Host(y, DType::kFloat32, {2, 3})};
  CHECK(ctx.Run(in, wrong).message() == "expected 1 outputs, got 2");
}

TEST_CASE("CopyOutputs copies the last Run's outputs into caller buffers, checked first") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  ExecutionContext ctx = MakeContext(m);
  float y[6] = {};
  const std::vector<TensorView> into = {TensorView::Host(y, DType::kFloat32, {2, 3})};
  CHECK(ctx.CopyOutputs(into).message() == "CopyOutputs: the last Run failed, or there was none, or Warm came after it");
  float x[] = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  std::vector<TensorView> out;
  REQUIRE(ctx.Run(in, out).ok());
  REQUIRE(ctx.CopyOutputs(into).ok());
  CHECK(std::vector<float>(y, y + 6) == std::vector<float>{11, 22, 33, 14, 25, 36});
  const std::vector<TensorView> wrong = {TensorView::Host(y, DType::kFloat32, {3, 2})};
  CHECK(ctx.CopyOutputs(wrong).message() == "output 0 'y' shape [3, 2], expected [2, 3]");
  CHECK(ctx.CopyOutputs({}).message() == "expected 1 outputs, got 0");
  // A failed Run leaves nothing to copy.
  TensorView bad[] = {TensorView::Host(x, DType::kFloat32, {3, 2})};
  REQUIRE_FALSE(ctx.Run(bad, out).ok());
  CHECK(ctx.CopyOutputs(into).code() == StatusCode::kFailedPrecondition);
}

TEST_CASE("Stats count hits and misses and keep the miss reasons") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  ExecutionContext ctx = MakeContext(m);
  float x[6] = {};
  double d[6] = {};
  TensorView good[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  TensorView bad[] = {TensorView::Host(d, DType::kFloat64, {2, 3})};
  std::vector<TensorView> out;
  CHECK(ctx.stats().last_entry == -1);
  REQUIRE(ctx.Run(good, out).ok());
  Status st = ctx.Run(bad, out);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "entry 0 (default): input 'x' dtype float64, expected float32");
  out.clear();
  REQUIRE(ctx.Run(good, out).ok());
  const Stats& s = ctx.stats();
  CHECK(s.calls == 3);
  CHECK(s.cache_hits == 2);
  CHECK(s.cache_misses == 1);
  CHECK(s.last_entry == 0);
  REQUIRE(s.last_miss_reasons.size() == 1);
  CHECK(s.last_miss_reasons[0] == "entry 0 (default): input 'x' dtype float64, expected float32");
  CHECK(s.last_host_start > 0);
  CHECK(s.last_host_time() >= s.last_computation_time());
  CHECK(s.last_prologue_stop >= s.last_prologue_start);
  CHECK(s.last_cache_lookup_stop >= s.last_cache_lookup_start);
  CHECK(s.total_computation_ns >= s.last_computation_time());
}

// Entry 0 "N=1" (guarded by N == 1), entry 1 "default" for N in [1, 64].
ArtifactSpec TwoEntrySpec() {
  ArtifactSpec a = AddModelSpec();
  testing::EntrySpec one = a.entries[0];
  one.name = "N=1";
  one.exprs.push_back(E(fb::ExprOp::Const, 1));    // 5
  one.exprs.push_back(E(fb::ExprOp::Eq, 0, 5));    // 6
  one.guards = {{6, "N == 1"}};
  a.entries.insert(a.entries.begin(), one);
  return a;
}

TEST_CASE("entries are tried in order, a miss lists every entry") {
  Model m = LoadOk(BuildArtifact(TwoEntrySpec()));
  REQUIRE(m.entries().size() == 2);
  ExecutionContext ctx = MakeContext(m);
  float x[12] = {1, 2, 3};
  std::vector<TensorView> out;
  TensorView one[] = {TensorView::Host(x, DType::kFloat32, {1, 3})};
  REQUIRE(ctx.Run(one, out).ok());
  CHECK(ctx.stats().last_entry == 0);
  CHECK(static_cast<const float*>(out[0].data)[2] == 33.0f);
  TensorView four[] = {TensorView::Host(x, DType::kFloat32, {4, 3})};
  out.clear();
  REQUIRE(ctx.Run(four, out).ok());
  CHECK(ctx.stats().last_entry == 1);
  TensorView bad[] = {TensorView::Host(x, DType::kFloat32, {4, 2})};
  Status st = ctx.Run(bad, out);
  CHECK(st.message() ==
        "entry 0 (N=1): input 'x' dim 1 = 2, expected 3\n"
        "entry 1 (default): input 'x' dim 1 = 2, expected 3");
  TensorView many[] = {TensorView::Host(x, DType::kFloat32, {65, 3})};
  st = ctx.Run(many, out);
  CHECK(st.message() ==
        "entry 0 (N=1): input 'x' dim 0 (N) = 65, expected 1..64\n"
        "entry 1 (default): input 'x' dim 0 (N) = 65, expected 1..64");
  CHECK(ctx.stats().last_miss_reasons.size() == 2);
  CHECK(ctx.Run({}, out).message() ==
        "entry 0 (N=1): expected 1 inputs, got 0\nentry 1 (default): expected 1 inputs, got 0");
  const Stats& s = ctx.stats();
  CHECK(s.calls == 5);
  CHECK(s.cache_hits == 2);
  CHECK(s.cache_misses == 3);
  REQUIRE(s.entries.size() == 2);
  CHECK(s.entries[0].hits == 1);
  CHECK(s.entries[1].hits == 1);
  CHECK(s.entries[1].compile.stage_names == m.entries()[1].compile.stage_names);
  // A miss reaches neither the prologue's success nor the computation: both read 0.
  CHECK(s.last_prologue_start == 0);
  CHECK(s.last_computation_stop == 0);
  CHECK(s.last_cache_lookup_stop >= s.last_cache_lookup_start);
}

TEST_CASE("a context runs the entries of its backend's plan and the unnamed ones, and only those miss") {
  ArtifactSpec spec = AddModelSpec();
  testing::EntrySpec cuda = spec.entries[0], cpu = spec.entries[0];
  cuda.backend = "cuda";
  cuda.instructions[0].op = "Sub";  // which plan ran shows in y
  cpu.backend = "cpu";
  cpu.checks[0].dims[0] = testing::Sym(0, 1, 8);
  spec.entries = {cuda, cpu, spec.entries[0]};
  spec.entries[2].name = "N=9..64";
  spec.entries[2].checks[0].dims[0] = testing::Sym(0, 9, 64);
  Model m = LoadOk(BuildArtifact(spec));
  REQUIRE(m.entries().size() == 3);
  CHECK(m.entries()[0].backend == "cuda");
  CHECK(m.entries()[1].backend == "cpu");
  CHECK(m.entries()[2].backend.empty());
  ExecutionContext ctx = MakeContext(m);
  float x[3 * 64] = {1, 2, 3};
  std::vector<TensorView> out;
  TensorView two[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  REQUIRE(ctx.Run(two, out).ok());
  CHECK(ctx.stats().last_entry == 1);
  CHECK(static_cast<const float*>(out[0].data)[2] == 33.0f);  // x + w: the cpu plan, not the cuda one's x - w
  TensorView ten[] = {TensorView::Host(x, DType::kFloat32, {10, 3})};
  REQUIRE(ctx.Run(ten, out).ok());
  CHECK(ctx.stats().last_entry == 2);
  TensorView many[] = {TensorView::Host(x, DType::kFloat32, {65, 3})};
  CHECK(ctx.Run(many, out).message() ==
        "entry 1 (default, cpu plan): input 'x' dim 0 (N) = 65, expected 1..8\n"
        "entry 2 (N=9..64): input 'x' dim 0 (N) = 65, expected 9..64");
  CHECK(ctx.stats().entries[0].hits == 0);

  // No entry for the CPU backend: the context is refused, naming the plans there are.
  spec.entries = {cuda};
  Model gpu_only = LoadOk(BuildArtifact(spec));
  Result<ExecutionContext> refused = ExecutionContext::Create(gpu_only, {});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == StatusCode::kFailedPrecondition);
  CHECK(refused.status().message() == "the artifact has no entry for the cpu backend: its entries are plans for 'cuda'");
}

TEST_CASE("a call that fits no entry writes no output buffer and leaves the context usable") {
  Model m = LoadOk(BuildArtifact(TwoEntrySpec()));
  ExecutionContext ctx = MakeContext(m);
  float x[6] = {1, 2, 3, 4, 5, 6};
  TensorView good[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  // Caller-owned outputs: a miss leaves every byte as it was.
  float y[6];
  std::fill(y, y + 6, -7.0f);
  std::vector<TensorView> out = {TensorView::Host(y, DType::kFloat32, {2, 3})};
  TensorView bad[] = {TensorView::Host(x, DType::kFloat32, {2, 4})};
  CHECK(ctx.Run(bad, out).code() == StatusCode::kInvalidArgument);
  CHECK(std::all_of(y, y + 6, [](float v) { return v == -7.0f; }));
  REQUIRE(out.size() == 1);
  CHECK(out[0].data == y);
  // Context-owned outputs: the views and the memory behind them survive a miss.
  std::vector<TensorView> views;
  REQUIRE(ctx.Run(good, views).ok());
  const std::vector<float> before(static_cast<const float*>(views[0].data), static_cast<const float*>(views[0].data) + 6);
  const std::vector<TensorView> kept = views;
  CHECK(ctx.Run(bad, views).code() == StatusCode::kInvalidArgument);
  REQUIRE(views.size() == 1);
  CHECK(views[0].data == kept[0].data);
  CHECK(std::equal(before.begin(), before.end(), static_cast<const float*>(views[0].data)));
  // And the next good call runs as if the miss had not happened: y = x + w (w = 10, 20, 30).
  REQUIRE(ctx.Run(good, out).ok());
  CHECK(std::vector<float>(y, y + 6) == std::vector<float>{11, 22, 33, 14, 25, 36});
  CHECK(ctx.stats().cache_hits == 2);
  CHECK(ctx.stats().cache_misses == 2);
}

TEST_CASE("symbolic tensors carry evaluated symbol values") {
  // y = x + s where x: int64[N] and s is the int64[1] symbolic tensor {N * 12}.
  ArtifactSpec a = AddModelSpec();
  a.inputs[0] = {"x", DType::kInt64, {-1}, {"N"}};
  a.outputs[0] = {"y", DType::kInt64, {-1}, {"N"}};
  a.weights.clear();
  testing::EntrySpec& e = a.entries[0];
  e.checks = {{"x", DType::kInt64, {testing::Sym(0, 1, 64)}}};
  e.exprs.push_back(E(fb::ExprOp::Const, 8));    // 5
  e.exprs.push_back(E(fb::ExprOp::Mul, 0, 5));   // 6: arena N * 8
  e.exprs.push_back(E(fb::ExprOp::Const, 1));    // 7
  e.tensors = {testing::T("x", DType::kInt64, {0}, fb::Storage::Input, 0),
               testing::T("s", DType::kInt64, {7}, fb::Storage::Symbolic, 0, 0, {4}),
               testing::T("y", DType::kInt64, {0}, fb::Storage::Arena, 0, 2)};
  e.arena_bytes = 6;
  Model m = LoadOk(BuildArtifact(a));
  CHECK(m.entries()[0].arena_bytes == "N * 8");
  ExecutionContext ctx = MakeContext(m);
  int64_t x[] = {1, 2};
  TensorView in[] = {TensorView::Host(x, DType::kInt64, {2})};
  std::vector<TensorView> out;
  Status st = ctx.Run(in, out);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(static_cast<const int64_t*>(out[0].data)[0] == 25);
  CHECK(static_cast<const int64_t*>(out[0].data)[1] == 26);
}

TEST_CASE("Model exposes the artifact's facts") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  CHECK(m.format_version() == 1);
  CHECK(m.producer() == "kiln test");
  CHECK(m.weights_bytes() == 12);
  REQUIRE(m.inputs().size() == 1);
  CHECK(m.inputs()[0].name == "x");
  CHECK(m.inputs()[0].shape[0].symbol == "N");
  CHECK(m.inputs()[0].shape[0].value == -1);
  CHECK(m.inputs()[0].shape[1].value == 3);
  const EntryInfo& e = m.entries()[0];
  CHECK(e.name == "default");
  CHECK(e.compile.stage_names == std::vector<std::string>{"import", "canonical", "fusion", "executors", "plan"});
  CHECK(e.stage_traces[0] == "trace of import");
  CHECK(e.compile.stage_ops == std::vector<int32_t>(5, -1));  // the test writer records no op counts
  CHECK(e.compile.kernels == 0);
  CHECK(e.arena_bytes == "N * 12");
  CHECK(e.num_instructions == 1);
  CHECK(e.prologue_text.find("  N = x.shape[0]\n  check N in 1..64\n  check x.shape[1] == 3\n") != std::string::npos);
  Model copy = m;  // shares the bytes
  CHECK(copy.entries().size() == 1);

  ArtifactSpec constant = AddModelSpec();
  constant.entries[0].arena_bytes = 3;
  CHECK(LoadOk(BuildArtifact(constant)).entries()[0].arena_bytes == "12");
  constant.entries[0].exprs.push_back(E(fb::ExprOp::Mul, 1, 3));  // 5: 3 * 12
  constant.entries[0].arena_bytes = 5;
  CHECK(LoadOk(BuildArtifact(constant)).entries()[0].arena_bytes == "36");
}

TEST_CASE("Load from a file maps it, a missing file is kNotFound") {
  std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  char path[] = "/tmp/kiln_model_test_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  {
    Result<Model> m = Model::Load(std::string(path));
    REQUIRE_MESSAGE(m.ok(), m.status().ToString());
    ExecutionContext ctx = MakeContext(*m);
    float x[] = {1, 2, 3};
    TensorView in[] = {TensorView::Host(x, DType::kFloat32, {1, 3})};
    std::vector<TensorView> out;
    REQUIRE(ctx.Run(in, out).ok());
    CHECK(static_cast<const float*>(out[0].data)[1] == 22.0f);
  }
  std::remove(path);
  Result<Model> missing = Model::Load(std::string("/nonexistent/dir/model.kiln"));
  CHECK(missing.status().code() == StatusCode::kNotFound);
}

TEST_CASE("every truncated prefix fails cleanly") {
  const std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  for (size_t n = 0; n < bytes.size(); ++n) {
    Result<Model> m = Model::Load(std::span<const uint8_t>(bytes.data(), n));
    CHECK_MESSAGE(!m.ok(), "prefix of ", n, " bytes loaded");
    if (!m.ok()) CHECK(m.status().code() == StatusCode::kDataLoss);
  }
}

TEST_CASE("corrupt bytes in the FlatBuffer fail its checksum") {
  const std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  const ArtifactHeader h = testing::ReadHeader(bytes);
  for (uint64_t i = h.flatbuffer_offset; i < h.flatbuffer_offset + h.flatbuffer_size; ++i) {
    std::vector<uint8_t> copy = bytes;
    copy[i] ^= 0x80;
    Status st = Model::Load(copy).status();
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().rfind("FlatBuffer checksum mismatch", 0) == 0);
  }
}

TEST_CASE("8-byte data off its alignment is kDataLoss at load: the FlatBuffer's file offset, and a vector moved 4 bytes") {
  // FlatBuffers 2.0's Verifier checks a vector's length field for 4-byte alignment only;
  // reading a [long] 4 bytes off is a misaligned load (UBSan found it through the one-byte
  // changes below). Every uoffset of the FlatBuffer moved by 4, checksum fixed: some of them
  // move a [long] or an [ExprNode], and none may load without a clean error.
  const std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  const ArtifactHeader h = testing::ReadHeader(bytes);
  {
    std::vector<uint8_t> copy = bytes;
    ArtifactHeader moved = h;
    moved.flatbuffer_offset += 4;
    testing::WriteHeader(copy, moved);
    Status st = Model::Load(copy).status();
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().find("FlatBuffer section at file offset " + std::to_string(h.flatbuffer_offset + 4) +
                            " is not 8-byte aligned") != std::string::npos);
  }
  int misaligned = 0;
  for (uint64_t i = h.flatbuffer_offset; i + 4 <= h.flatbuffer_offset + h.flatbuffer_size; i += 4) {
    for (int32_t delta : {4, -4}) {
      std::vector<uint8_t> copy = bytes;
      uint32_t word;
      std::memcpy(&word, copy.data() + i, 4);
      word += static_cast<uint32_t>(delta);
      std::memcpy(copy.data() + i, &word, 4);
      ArtifactHeader fixed = h;
      fixed.flatbuffer_checksum = ArtifactChecksum(h.format_version, copy.data() + h.flatbuffer_offset, h.flatbuffer_size);
      testing::WriteHeader(copy, fixed);
      Status st = Model::Load(copy).status();
      if (st.message().find("vector of 8-byte elements is not 8-byte aligned") != std::string::npos) {
        CHECK(st.code() == StatusCode::kDataLoss);
        ++misaligned;
      }
    }
  }
  CHECK(misaligned > 0);
}

TEST_CASE("every one-byte change to the FlatBuffer, checksum fixed, fails cleanly at load or runs cleanly") {
  // The checksum recomputed, each change meets the Verifier and the semantic checks; what
  // loads then runs (any status; only a crash, a hang or a sanitizer report fails the test).
  const std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  const ArtifactHeader h = testing::ReadHeader(bytes);
  int loaded = 0, semantic = 0;
  float x[6] = {1, 2, 3, 4, 5, 6};
  const TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  for (uint64_t i = h.flatbuffer_offset; i < h.flatbuffer_offset + h.flatbuffer_size; ++i) {
    for (uint8_t v : {uint8_t{0xFF}, uint8_t{0x00}, uint8_t{0x80}, uint8_t{0x01}}) {
      std::vector<uint8_t> copy = bytes;
      if (copy[i] == v) continue;
      copy[i] = v;
      ArtifactHeader fixed = h;
      fixed.flatbuffer_checksum = ArtifactChecksum(h.format_version, copy.data() + h.flatbuffer_offset, h.flatbuffer_size);
      testing::WriteHeader(copy, fixed);
      Result<Model> m = Model::Load(copy, {.max_context_bytes = 1 << 20});
      if (!m.ok()) {
        const StatusCode code = m.status().code();
        CHECK_MESSAGE((code == StatusCode::kDataLoss || code == StatusCode::kUnimplemented ||
                       code == StatusCode::kResourceExhausted || code == StatusCode::kIncompatible),
                      m.status().ToString());
        semantic += m.status().message().find("failed verification") == std::string::npos;
        continue;
      }
      ++loaded;
      auto ctx = ExecutionContext::Create(*m, {.device = Device::kCpu, .cpu = {.threads = 1}});
      REQUIRE(ctx.ok());
      std::vector<TensorView> out;
      (void)ctx->Run(in, out);
    }
  }
  CHECK(loaded > 0);    // some changes are harmless (a name, a stage time)
  CHECK(semantic > 0);  // and some pass the Verifier to be caught by Kiln's own checks
}

TEST_CASE("the header checksums are XXH64 before format 3 and XXH3-64 from it") {
  // Hand-checked values: XXH64 and XXH3-64 of "abc" with seed 0 (xxHash's sanity tests).
  const char abc[] = "abc";
  CHECK(ArtifactChecksum(2, abc, 3) == 0x44BC2CF5AD770999ULL);
  CHECK(ArtifactChecksum(3, abc, 3) == 0x78AF5F94892F3950ULL);
  for (uint32_t version : {1u, 2u, 3u}) {
    CAPTURE(version);
    ArtifactSpec spec = AddModelSpec();
    spec.format_version = version;
    std::vector<uint8_t> bytes = BuildArtifact(spec);
    const ArtifactHeader h = testing::ReadHeader(bytes);
    CHECK(h.weights_checksum == ArtifactChecksum(version, bytes.data() + h.weights_offset, h.weights_size));
    REQUIRE(Model::Load(bytes).ok());
    // The same bytes claiming the other hash family fail the FlatBuffer checksum.
    ArtifactHeader other = h;
    other.format_version = version < kXxh3FormatVersion ? kXxh3FormatVersion : 2;
    testing::WriteHeader(bytes, other);
    Status st = Model::Load(bytes).status();
    CHECK(st.code() == StatusCode::kDataLoss);
    CHECK(st.message().rfind("FlatBuffer checksum mismatch", 0) == 0);
  }
}

TEST_CASE("header and checksum errors") {
  const std::vector<uint8_t> good = BuildArtifact(AddModelSpec());
  const ArtifactHeader h = testing::ReadHeader(good);

  std::vector<uint8_t> bytes = good;
  bytes[h.weights_offset + 5] ^= 0x01;
  Status st = Model::Load(bytes).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message().find("weights checksum mismatch: header says 0x") == 0);
  CHECK(st.message().find("(weights section at file offset " + std::to_string(h.weights_offset) +
                          ", 12 bytes)") != std::string::npos);

  bytes = good;
  bytes[0] = 'X';
  st = Model::Load(bytes).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message().find("bad magic") != std::string::npos);

  bytes = good;
  ArtifactHeader v = h;
  v.weights_offset += 1;
  testing::WriteHeader(bytes, v);
  CHECK(Model::Load(bytes).status().code() == StatusCode::kDataLoss);

  bytes = good;
  bytes[h.flatbuffer_offset + 4] = 'X';  // file identifier
  st = Model::Load(bytes).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message().rfind("FlatBuffer checksum mismatch: header says 0x", 0) == 0);
  // With the checksum recomputed, the Verifier still rejects the bad identifier.
  v = h;
  v.flatbuffer_checksum = ArtifactChecksum(h.format_version, bytes.data() + h.flatbuffer_offset, h.flatbuffer_size);
  testing::WriteHeader(bytes, v);
  st = Model::Load(bytes).status();
  CHECK(st.message() == "artifact FlatBuffer failed verification (bytes 64.." +
                            std::to_string(h.flatbuffer_offset + h.flatbuffer_size) + ")");
}

TEST_CASE("semantic checks name the section") {
  ArtifactSpec a = AddModelSpec();
  a.entries[0].instructions[0].inputs[1] = 17;
  Status st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "entry 0 instruction 0 'add0': input 1 tensor 17 out of range (tensors: 3)");

  a = AddModelSpec();
  a.entries[0].tensors[0].shape[1] = 900;
  CHECK(LoadError(a).message() == "entry 0 tensor 0 'x': shape expr 900 out of range (exprs: 5)");

  a = AddModelSpec();
  a.entries[0].instructions[0].op = "Foo";
  st = LoadError(a);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(st.message() == "entry 0 instruction 0 'add0' op 'Foo' has no CPU kernel in this runtime");

  a = AddModelSpec();
  a.entries[0].exprs[4] = E(fb::ExprOp::Mul, 0, 4);
  CHECK(LoadError(a).message() == "entry 0 expr 4: operand 4 is not an earlier node");

  a = AddModelSpec();
  a.entries[0].exprs[0] = E(fb::ExprOp::Var, 3);
  CHECK(LoadError(a).message() == "entry 0 expr 0: symbol 3 out of range (symbols: 1)");

  a = AddModelSpec();
  a.entries[0].tensors[1].index = 2;
  CHECK(LoadError(a).message() == "entry 0 tensor 1 'w': weight 2 out of range (weights: 1)");

  a = AddModelSpec();
  a.entries[0].tensors[0].index = 1;
  CHECK(LoadError(a).message() == "entry 0 tensor 0 'x': input 1 out of range (inputs: 1)");

  a = AddModelSpec();
  a.entries[0].tensors[2].raw_dtype = 8;
  CHECK(LoadError(a).message() == "entry 0 tensor 2 'y': invalid dtype 8");

  a = AddModelSpec();
  a.entries[0].tensors[2].storage = static_cast<fb::Storage>(9);
  CHECK(LoadError(a).message() == "entry 0 tensor 2 'y': invalid storage kind 9");

  a = AddModelSpec();
  a.entries[0].instructions[0].outputs[0] = 1;
  CHECK(LoadError(a).message() == "entry 0 instruction 0 'add0': output 0 tensor 1 is not in the arena");

  a = AddModelSpec();
  a.entries[0].instructions[0].inputs.push_back(-1);  // absent optional input: fine
  CHECK(LoadError(a).ok());
  a.entries[0].instructions[0].outputs.push_back(-1);
  CHECK(LoadError(a).message() == "entry 0 instruction 0 'add0': output 1 tensor -1 out of range (tensors: 3)");

  a = AddModelSpec();
  a.entries[0].outputs = {7};
  CHECK(LoadError(a).message() == "entry 0 output 0: tensor 7 out of range (tensors: 3)");

  a = AddModelSpec();
  a.entries[0].arena_bytes = 99;
  CHECK(LoadError(a).message() == "entry 0: arena_bytes expr 99 out of range (exprs: 5)");

  a = AddModelSpec();
  a.entries[0].guards = {{42, "x"}};
  CHECK(LoadError(a).message() == "entry 0 guard 0: expr 42 out of range (exprs: 5)");

  a = AddModelSpec();
  a.entries[0].checks.clear();
  CHECK(LoadError(a).message() == "entry 0: prologue checks 0 inputs, the model has 1");

  a = AddModelSpec();
  a.weights[0].dims = {4};
  CHECK(LoadError(a).message() == "weight 0 'w': size 12 bytes, but its dims and dtype need 16");

  a = AddModelSpec();
  a.entries.clear();
  CHECK(LoadError(a).message() == "artifact has no entries");

  a = AddModelSpec();
  a.entries[0].checks[0].dims[1] = testing::Const(-3);
  CHECK(LoadError(a).message() == "entry 0 prologue input 0 'x' dim 1: constant -3 is negative");

  a = AddModelSpec();
  a.entries[0].checks[0].dims[0] = testing::Sym(0, -4, 64);
  CHECK(LoadError(a).message() == "entry 0 prologue input 0 'x' dim 0: range [-4, 64] admits negative dims");

  a = AddModelSpec();
  a.outputs[0].dtype = DType::kInt32;
  CHECK(LoadError(a).message() ==
        "entry 0 output 0: tensor 2 'y' is float32 of rank 2, the model's output 'y' int32 of rank 2");
  a = AddModelSpec();
  a.outputs[0].dims = {-1};
  a.outputs[0].symbols = {"N"};
  CHECK(LoadError(a).message() ==
        "entry 0 output 0: tensor 2 'y' is float32 of rank 2, the model's output 'y' float32 of rank 1");
}

TEST_CASE("an entry's input tensors have the shapes its prologue checks") {
  ArtifactSpec a = AddModelSpec();  // x: dims [expr 0 (N), expr 1 (3)], checked as [N, 3]
  a.entries[0].tensors[0].shape[1] = 3;  // the constant 12
  Status st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "entry 0 input 0: tensor 0 'x' dim 1 is expr 3, the constant 12, but the prologue checks "
                        "the constant 3");

  a = AddModelSpec();
  a.entries[0].tensors[0].shape[0] = 1;
  CHECK(LoadError(a).message() == "entry 0 input 0: tensor 0 'x' dim 0 is expr 1, the constant 3, but the prologue "
                                  "checks symbol 0 'N'");

  a = AddModelSpec();
  a.entries[0].tensors[0].shape[0] = 4;  // N * 12
  CHECK(LoadError(a).message() == "entry 0 input 0: tensor 0 'x' dim 0 is expr 4, a computed value, but the "
                                  "prologue checks symbol 0 'N'");

  a = AddModelSpec();
  a.entries[0].symbols.push_back("M");
  a.entries[0].checks[0].dims[1] = testing::Sym(1);
  a.entries[0].exprs.push_back(E(fb::ExprOp::Var, 1));  // 5, bound by dim 1, but x's dim 1 stays 3
  CHECK(LoadError(a).message() == "entry 0 input 0: tensor 0 'x' dim 1 is expr 1, the constant 3, but the "
                                  "prologue checks symbol 1 'M'");
}

TEST_CASE("an entry without symbols whose sizes overflow is corrupt at load") {
  ArtifactSpec a = AddModelSpec();
  testing::EntrySpec& e = a.entries[0];
  e.symbols.clear();
  e.checks[0].dims[0] = testing::Const(2);
  e.exprs[0] = E(fb::ExprOp::Const, 2);
  e.exprs.push_back(E(fb::ExprOp::Const, INT64_MAX));  // 5
  e.exprs.push_back(E(fb::ExprOp::Mul, 5, 3));         // 6: overflows
  e.arena_bytes = 6;
  Status st = LoadError(a);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "entry 0 (default): expr 6 (9223372036854775807 * 12): int64 overflow computing "
                        "9223372036854775807 * 12");
}

TEST_CASE("plans that do not fit are caught at bind time, not in a kernel") {
  ArtifactSpec a = AddModelSpec();
  a.entries[0].arena_bytes = 3;  // 12 bytes: enough for N = 1 only
  Model m = LoadOk(BuildArtifact(a));
  ExecutionContext ctx = MakeContext(m);
  float x[6] = {};
  std::vector<TensorView> out;
  TensorView one[] = {TensorView::Host(x, DType::kFloat32, {1, 3})};
  REQUIRE(ctx.Run(one, out).ok());
  TensorView two[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  Status st = ctx.Run(two, out);
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "entry 0 (default) tensor 2 'y': arena bytes [0, +24) misaligned or outside the arena (12 bytes)");
}

TEST_CASE("without a GPU a CUDA context is refused with the reason, and auto falls back to the CPU and says why") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  Result<ExecutionContext> probe = ExecutionContext::Create(m, {.device = Device::kAuto, .cpu = {.threads = 1}});
  REQUIRE(probe.ok());
  if (probe->device() == Device::kCuda) {
    MESSAGE("a CUDA device is present: " << probe->device_note());
    return;
  }
  Result<ExecutionContext> c = ExecutionContext::Create(m, {Device::kCuda});
  CHECK(c.status().code() == StatusCode::kFailedPrecondition);
#if KILN_HAVE_CUDA
  const std::string why = std::string(c.status().message());
  CHECK_MESSAGE((why.find("no CUDA driver found") != std::string::npos || why.find("no CUDA device") != std::string::npos),
                why);
  CHECK(probe->device_note() == kiln::testing::CpuNote(1, true, /*native=*/false) + "; CUDA unavailable: " + why);
#else
  CHECK(c.status().message() ==
        "this runtime was built without the CUDA toolkit, so it has no CUDA backend; use --device cpu");
  CHECK(probe->device_note() == kiln::testing::CpuNote(1, true, /*native=*/false) + "; this runtime was built without the CUDA toolkit");
#endif
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST_CASE("profile: one time per instruction, with a label each, and none without it") {
  Model m = LoadOk(BuildArtifact(AddModelSpec()));
  REQUIRE(m.entries()[0].instructions.size() == 1);
  const InstructionInfo& add = m.entries()[0].instructions[0];
  CHECK(add.name == "add0");
  CHECK(add.op == "Add");
  // An artifact that records no placements (this hand-built one) gets each backend's claims at
  // load: an unfused Add is a CPU kernel everywhere.
  REQUIRE(add.placements.size() == 2);
  CHECK(add.placements[0].backend == "cuda");
  CHECK(add.placements[1].backend == "cpu");
  CHECK(add.library("cuda") == Library::kCpuKernel);
  CHECK(add.library("cpu") == Library::kCpuKernel);
  CHECK(add.kernel.empty());
  CHECK(add.member_ops.empty());
  CHECK(add.label() == "'add0' (Add)");
  float x[6] = {1, 2, 3, 4, 5, 6};
  TensorView in[] = {TensorView::Host(x, DType::kFloat32, {2, 3})};
  std::vector<TensorView> out;
  ContextOptions options;
  options.device = Device::kCpu;
  options.profile = true;
  auto profiled = ExecutionContext::Create(m, options);
  REQUIRE(profiled.ok());
  REQUIRE(profiled->Run(in, out).ok());
  const Stats& s = profiled->stats();
  REQUIRE(s.last_instruction_ns.size() == 1);
  CHECK(s.last_instruction_ns[0] >= 0);
  CHECK(s.last_instruction_ns[0] <= s.last_computation_time());
  // y = x + w: x and y float32 [2, 3], w float32 [3]: (6 + 3 + 6) * 4 bytes read and written.
  REQUIRE(s.last_instruction_bytes.size() == 1);
  CHECK(s.last_instruction_bytes[0] == 60);
  // What ran it: the CPU kernel (an unfused Add).
  CHECK(s.last_instruction_library == std::vector<Library>{Library::kCpuKernel});
  auto plain = ExecutionContext::Create(m, {Device::kCpu});
  REQUIRE(plain.ok());
  out.clear();
  REQUIRE(plain->Run(in, out).ok());
  CHECK(plain->stats().last_instruction_ns.empty());
  CHECK(plain->stats().last_instruction_bytes.empty());
  CHECK(plain->stats().last_instruction_library.empty());
}

}  // namespace
}  // namespace kiln
