// LoadOptions limits: the artifact's size at Load, the memory an entry declares (a constant
// arena at Load, a symbolic one at the Run whose shapes make it too large), each refused with
// kResourceExhausted before anything of that size is allocated.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace kiln {
namespace {

using testing::AddModelSpec;
using testing::ArtifactSpec;
using testing::BuildArtifact;
using testing::E;

TEST_CASE("LoadOptions::max_artifact_bytes bounds the bytes and the file Load accepts") {
  const std::vector<uint8_t> bytes = BuildArtifact(AddModelSpec());
  const uint64_t n = bytes.size();
  CHECK(Model::Load(bytes, {.max_artifact_bytes = n}).ok());
  Status st = Model::Load(bytes, {.max_artifact_bytes = n - 1}).status();
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message() == "artifact is " + std::to_string(n) + " bytes, above LoadOptions::max_artifact_bytes (" +
                            std::to_string(n - 1) + ")");

  char path[] = "/tmp/kiln_load_options_test_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  close(fd);
  CHECK(Model::Load(std::string(path), {.max_artifact_bytes = n}).ok());
  st = Model::Load(std::string(path), {.max_artifact_bytes = 100}).status();
  std::remove(path);
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message() == "'" + std::string(path) + "': artifact is " + std::to_string(n) +
                            " bytes, above LoadOptions::max_artifact_bytes (100)");
}

TEST_CASE("LoadOptions::max_context_bytes refuses a constant arena above it at Load") {
  ArtifactSpec a = AddModelSpec();
  a.entries[0].exprs.push_back(E(fb::ExprOp::Const, 100));  // 5
  a.entries[0].arena_bytes = 5;  // 100 bytes, allocated as 128
  const std::vector<uint8_t> bytes = BuildArtifact(a);
  CHECK(Model::Load(bytes, {.max_context_bytes = 128}).ok());
  Status st = Model::Load(bytes, {.max_context_bytes = 127}).status();
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message() ==
        "entry 0 (default): its arena of 100 bytes (128 allocated) is above LoadOptions::max_context_bytes (127)");

  // The default limit is the host's physical memory: a petabyte arena never reaches malloc.
  a.entries[0].exprs[5] = E(fb::ExprOp::Const, int64_t{1} << 50);
  st = Model::Load(BuildArtifact(a)).status();
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message().rfind("entry 0 (default): its arena of 1125899906842624 bytes (1125899906842624 allocated) is "
                           "above LoadOptions::max_context_bytes (", 0) == 0);
}

TEST_CASE("LoadOptions::max_context_bytes refuses, before allocating, the shapes that make an arena too large") {
  // AddModelSpec's arena is N * 12 bytes, N in 1..64.
  Result<Model> m = Model::Load(BuildArtifact(AddModelSpec()), {.max_context_bytes = 128});
  REQUIRE(m.ok());
  auto ctx = ExecutionContext::Create(*m, {.device = Device::kCpu, .cpu = {.threads = 1}});
  REQUIRE(ctx.ok());
  std::vector<float> x(64 * 3, 1.0f);
  std::vector<TensorView> out;
  TensorView ten[] = {TensorView::Host(x.data(), DType::kFloat32, {10, 3})};  // 120 bytes: 128 allocated
  REQUIRE(ctx->Run(ten, out).ok());
  CHECK(ctx->arena_bytes() == 128);
  TensorView eleven[] = {TensorView::Host(x.data(), DType::kFloat32, {11, 3})};  // 132 bytes: 192
  Status st = ctx->Run(eleven, out);
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message() ==
        "entry 0 (default): these shapes need an arena of 132 bytes and 0 bytes of kernel workspace; the context "
        "would hold 192 bytes, above LoadOptions::max_context_bytes (128)");
  CHECK(ctx->arena_bytes() == 128);  // nothing was allocated
  TensorView two[] = {TensorView::Host(x.data(), DType::kFloat32, {2, 3})};
  out.clear();
  REQUIRE(ctx->Run(two, out).ok());
  CHECK(static_cast<const float*>(out[0].data)[5] == 31.0f);

  // Without an explicit limit, an arena of N * 2^50 bytes is refused the same way.
  ArtifactSpec huge = AddModelSpec();
  huge.entries[0].exprs.push_back(E(fb::ExprOp::Const, int64_t{1} << 50));  // 5
  huge.entries[0].exprs.push_back(E(fb::ExprOp::Mul, 0, 5));                // 6
  huge.entries[0].arena_bytes = 6;
  Result<Model> hm = Model::Load(BuildArtifact(huge));
  REQUIRE(hm.ok());
  auto hctx = ExecutionContext::Create(*hm, {.device = Device::kCpu, .cpu = {.threads = 1}});
  REQUIRE(hctx.ok());
  st = hctx->Run(two, out);
  CHECK(st.code() == StatusCode::kResourceExhausted);
  CHECK(st.message().rfind("entry 0 (default): these shapes need an arena of 2251799813685248 bytes", 0) == 0);
  CHECK(hctx->arena_bytes() == 0);
}

TEST_CASE("a weight that declares more bytes than the blob holds is refused, not allocated") {
  ArtifactSpec a = AddModelSpec();
  a.weights[0].dims = {int64_t{1} << 40};
  a.weights[0].bytes.clear();  // declared size: dims x 4 bytes, blob: empty
  Status st = Model::Load(BuildArtifact(a)).status();
  CHECK(st.code() == StatusCode::kDataLoss);
  CHECK(st.message() == "weight 0 'w': size 0 bytes, but its dims and dtype need 4398046511104");
}

}  // namespace
}  // namespace kiln
