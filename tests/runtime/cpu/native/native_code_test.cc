// Native CPU code (Artifact.native_code, runtime/cpu/native/): the CPU backend runs a
// generated kernel's native function when the model has one this CPU runs, splits its work
// items over the context's threads, falls back to the interpreter when refused or capped, and
// rejects each malformed field at load with a precise kDataLoss. The code is built from
// test_kernels.c (make_test_kernels.sh): x86-64 only, so the cases that run it are too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "runtime/cpu/arch/x86/cpu_isa.h"
#include "runtime/cpu/native/target.h"
#include "tests/runtime/artifact_builder_test_util.h"

namespace {

#include "tests/runtime/cpu/native/test_kernels.inc"

using kiln::DType;
using kiln::fused::Op;
using kiln::fused::ScalarType;
using kiln::testing::ArtifactSpec;
using kiln::testing::BuildArtifact;
using kiln::testing::NativeCodeSpec;

// The host's baseline target: what every CPU of this architecture runs.
#if defined(__aarch64__)
constexpr const char* kNativeHostTarget = "aarch64";
#else
constexpr const char* kNativeHostTarget = "x86-64";
#endif

// y = x + w as one fused instruction (x float32[N, 3], N in 1..2^20, w = {10, 20, 30}), with
// native code for kernel 0 at `offset` of the test code (none when nullopt).
ArtifactSpec NativeAddSpec(std::optional<unsigned> offset) {
  ArtifactSpec a = kiln::testing::FusedAddModelSpec(false);
  a.entries[0].checks[0].dims[0] = kiln::testing::Sym(0, 1, int64_t{1} << 20);
  if (offset) {
    NativeCodeSpec n;
    n.target = kNativeHostTarget;
    n.code.assign(kNativeTestCode, kNativeTestCode + sizeof kNativeTestCode);
    n.kernels = {{0, *offset}};
    a.native_code = {n};
  }
  return a;
}

// The same model whose program indexes x at a checked constant: y[i] = x[check(7 < 3)], so
// every element fails check 0 ("Gather 'g' input 'idx'") with index 7 against bound 3.
ArtifactSpec NativeCheckSpec(bool native) {
  ArtifactSpec a = NativeAddSpec(native ? std::optional<unsigned>(kNativeTestOffset_check_fails) : std::nullopt);
  kiln::fused::Program& p = a.kernels[0];
  p.nodes = {{Op::kConst, ScalarType::kI64, -1, -1, -1, 7},
             {Op::kConst, ScalarType::kI64, -1, -1, -1, 3},
             {Op::kCheckIndex, ScalarType::kI64, 0, 1, -1, 0},
             {Op::kLoad, ScalarType::kF32, 2, -1, -1, 0}};
  p.outputs = {{{DType::kFloat32, {-1, 3}}, 3, false}};
  p.checks = {"Gather 'g' input 'idx'"};
  return a;
}

struct NativeRunResult {
  kiln::Status status;
  std::vector<float> y;
  std::string target, note, device_note;
};

NativeRunResult RunNativeAdd(const ArtifactSpec& spec, const std::vector<float>& x, int threads = 1,
                             bool allow_native = true) {
  NativeRunResult r;
  kiln::LoadOptions lo;
  lo.native_code = allow_native;
  auto model = kiln::Model::Load(BuildArtifact(spec), lo);
  if (!model.ok()) {
    r.status = model.status();
    return r;
  }
  kiln::ContextOptions co;
  co.device = kiln::Device::kCpu;
  co.cpu.threads = threads;
  auto ctx = kiln::ExecutionContext::Create(*model, co);
  REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  r.target = ctx->stats().native_code_target;
  r.note = ctx->stats().native_code_note;
  r.device_note = ctx->device_note();
  kiln::TensorView in[] = {
      kiln::TensorView::Host(const_cast<float*>(x.data()), DType::kFloat32, {static_cast<int64_t>(x.size() / 3), 3})};
  std::vector<kiln::TensorView> out;
  r.status = ctx->Run(in, out);
  if (r.status.ok()) {
    const float* y = static_cast<const float*>(out[0].data);
    r.y.assign(y, y + x.size());
  }
  return r;
}

kiln::Status NativeLoadStatus(const ArtifactSpec& spec) {
  auto m = kiln::Model::Load(BuildArtifact(spec));
  return m.ok() ? kiln::Status::Ok() : m.status();
}

void CheckNativeDataLoss(const ArtifactSpec& spec, const std::string& text) {
  const kiln::Status st = NativeLoadStatus(spec);
  CHECK(st.code() == kiln::StatusCode::kDataLoss);
  CHECK_MESSAGE(st.message() == text, st.message());
}

// Sets KILN_MAX_CPU_ISA for its life (after the CPU kernels read theirs, which is once per
// process), then restores it.
class NativeIsaCap {
 public:
  explicit NativeIsaCap(const char* value) {
    (void)kiln::cpu::ActiveCpuIsa();
    if (const char* old = std::getenv("KILN_MAX_CPU_ISA")) old_ = old;
    setenv("KILN_MAX_CPU_ISA", value, 1);
  }
  ~NativeIsaCap() {
    if (old_) setenv("KILN_MAX_CPU_ISA", old_->c_str(), 1);
    else unsetenv("KILN_MAX_CPU_ISA");
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("native code: target choice takes the best target this CPU runs") {
  using kiln::native::ChooseTarget;
  std::vector<std::string_view> none;
  CHECK(ChooseTarget(none).index == -1);
  CHECK(ChooseTarget(none).why == "the artifact has no native code");
  std::vector<std::string_view> unknown = {"riscv64", ""};
  CHECK(ChooseTarget(unknown).index == -1);
  CHECK(ChooseTarget(unknown).why == "this CPU runs none of its targets (riscv64, )");
#if defined(__x86_64__)
  std::vector<std::string_view> all = {"aarch64", "x86-64", "x86-64-v3", "x86-64-v4"};
  const int want = kiln::native::CpuRuns("x86-64-v4") ? 3 : kiln::native::CpuRuns("x86-64-v3") ? 2 : 1;
  if (std::getenv("KILN_MAX_CPU_ISA") == nullptr) CHECK(ChooseTarget(all).index == want);
  {
    NativeIsaCap cap("baseline");
    const kiln::native::TargetChoice c = ChooseTarget(all);
    CHECK(c.index == 1);
    if (want > 1) CHECK(c.why.find("left out by KILN_MAX_CPU_ISA=baseline") != std::string::npos);
    std::vector<std::string_view> v3 = {"x86-64-v3"};
    if (want > 1) CHECK(ChooseTarget(v3).why == "x86-64-v3 left out by KILN_MAX_CPU_ISA=baseline");
  }
  {
    NativeIsaCap cap("avx2");
    CHECK(ChooseTarget(all).index == std::min(want, 2));
  }
  CHECK(kiln::native::CpuRuns("x86-64"));
  CHECK_FALSE(kiln::native::CpuRuns("aarch64"));
#endif
}

#if defined(__x86_64__)
TEST_CASE("native code runs a fused instruction in place of its program") {
  const std::vector<float> x = {1, 2, 3, -4, 5.5f, 6};
  const NativeRunResult r = RunNativeAdd(NativeAddSpec(kNativeTestOffset_add_w_1000), x);
  REQUIRE_MESSAGE(r.status.ok(), r.status.ToString());
  CHECK(r.target == "x86-64");
  CHECK(r.note.empty());
  CHECK(r.device_note.find("generated kernels as native code (x86-64)") != std::string::npos);
  // x + w + 1000: the native twin, not the program (x + w).
  const std::vector<float> want = {1011, 1022, 1033, 1006, 1025.5f, 1036};
  CHECK(r.y == want);
}

TEST_CASE("native code without a function for the kernel leaves it to the interpreter") {
  ArtifactSpec a = NativeAddSpec(kNativeTestOffset_add_w_1000);
  a.native_code[0].kernels.clear();
  const NativeRunResult r = RunNativeAdd(a, {1, 2, 3});
  REQUIRE(r.status.ok());
  CHECK(r.target == "x86-64");
  CHECK(r.y == std::vector<float>{11, 22, 33});
}

TEST_CASE("native code splits its work items over the threads") {
  const int64_t n = 100000;  // 300000 elements: enough for several parts
  std::vector<float> x(static_cast<size_t>(n) * 3, 0.0f);
  const ArtifactSpec spec = NativeAddSpec(kNativeTestOffset_range_start);
  const NativeRunResult one = RunNativeAdd(spec, x, 1);
  REQUIRE(one.status.ok());
  CHECK(std::count(one.y.begin(), one.y.end(), 0.0f) == static_cast<long>(one.y.size()));  // one call over everything
  const NativeRunResult four = RunNativeAdd(spec, x, 4);
  REQUIRE(four.status.ok());
  // Four calls over equal contiguous ranges of 75000 elements (thread_pool.h's PartRange).
  for (size_t i = 0; i < four.y.size(); ++i) {
    const float want = static_cast<float>(i / 75000 * 75000);
    if (four.y[i] != want) {
      FAIL("element ", i, " came from the call starting at ", four.y[i], ", expected ", want);
      break;
    }
  }
  // The result of a real kernel does not depend on the thread count.
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97);
  const ArtifactSpec add = NativeAddSpec(kNativeTestOffset_add_w_1000);
  const NativeRunResult a1 = RunNativeAdd(add, x, 1), a4 = RunNativeAdd(add, x, 4);
  REQUIRE(a1.status.ok());
  REQUIRE(a4.status.ok());
  CHECK(a1.y == a4.y);
  CHECK(a4.y[299999] == static_cast<float>(299999 % 97) + 30 + 1000);
}

TEST_CASE("native code refused by LoadOptions or capped by KILN_MAX_CPU_ISA is interpreted") {
  const std::vector<float> x = {1, 2, 3};
  const NativeRunResult refused = RunNativeAdd(NativeAddSpec(kNativeTestOffset_add_w_1000), x, 1, false);
  REQUIRE(refused.status.ok());
  CHECK(refused.target.empty());
  CHECK(refused.note == "native code refused (LoadOptions::native_code is false)");
  CHECK(refused.y == std::vector<float>{11, 22, 33});

  ArtifactSpec v3 = NativeAddSpec(kNativeTestOffset_add_w_1000);
  v3.native_code[0].target = "x86-64-v3";  // baseline code under a v3 name: runs on any x86-64
  if (kiln::native::CpuRuns("x86-64-v3")) {
    {
      NativeIsaCap cap("baseline");
      const NativeRunResult capped = RunNativeAdd(v3, x);
      REQUIRE(capped.status.ok());
      CHECK(capped.target.empty());
      CHECK(capped.note == "x86-64-v3 left out by KILN_MAX_CPU_ISA=baseline");
      CHECK(capped.y == std::vector<float>{11, 22, 33});
    }
    NativeIsaCap cap("avx2");
    const NativeRunResult allowed = RunNativeAdd(v3, x);
    REQUIRE(allowed.status.ok());
    CHECK(allowed.target == "x86-64-v3");
    CHECK(allowed.y == std::vector<float>{1011, 1022, 1033});
  }

  const NativeRunResult none = RunNativeAdd(NativeAddSpec(std::nullopt), x);
  REQUIRE(none.status.ok());
  CHECK(none.target.empty());
  CHECK(none.note == "the artifact has no native code");
}

TEST_CASE("native code's failed index check is the interpreter's error") {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6};
  const NativeRunResult interpreted = RunNativeAdd(NativeCheckSpec(false), x);
  const NativeRunResult native = RunNativeAdd(NativeCheckSpec(true), x);
  CHECK(native.target == "x86-64");
  CHECK(interpreted.status.code() == kiln::StatusCode::kInvalidArgument);
  CHECK(native.status.code() == kiln::StatusCode::kInvalidArgument);
  CHECK(native.status.message() == interpreted.status.message());
  CHECK(native.status.message().find("Gather 'g' input 'idx': index 7 is out of range [-3, 3)") != std::string::npos);
}
#endif

TEST_CASE("malformed native code is rejected at load with the field and the target") {
  const std::string t = std::string("native_code 0 '") + kNativeHostTarget + "'";
  SUBCASE("another calling convention is interpreted, with a note") {
    ArtifactSpec a = NativeAddSpec(0);
    a.native_code[0].abi = 2;
    auto m = kiln::Model::Load(BuildArtifact(a));
    REQUIRE(m.ok());
    CHECK(m->native_code_target().empty());
    CHECK(m->native_code_note() == t + ": calling convention 2, this runtime's is 1 (runtime/cpu/native/abi.h)");
  }
  SUBCASE("empty code") {
    ArtifactSpec a = NativeAddSpec(0);
    a.native_code[0].code.clear();
    a.native_code[0].kernels.clear();
    CheckNativeDataLoss(a, t + ": code is empty");
  }
  SUBCASE("offset out of range") {
    ArtifactSpec a = NativeAddSpec(sizeof kNativeTestCode);
    CheckNativeDataLoss(a, t + " kernels 0: offset " + std::to_string(sizeof kNativeTestCode) +
                               " out of range (code bytes: " + std::to_string(sizeof kNativeTestCode) + ")");
  }
  SUBCASE("kernel index out of range") {
    ArtifactSpec a = NativeAddSpec(0);
    a.native_code[0].kernels = {{1, 0}};
    CheckNativeDataLoss(a, t + " kernels 0: kernel 1 out of range (kernels: 1)");
  }
  SUBCASE("kernels not strictly ascending") {
    ArtifactSpec a = NativeAddSpec(0);
    a.kernels.push_back(a.kernels[0]);
    a.native_code[0].kernels = {{1, 0}, {0, 0}};
    CheckNativeDataLoss(a, t + " kernels 1: kernel 0 after kernel 1 (kernels must be strictly ascending)");
    a.native_code[0].kernels = {{1, 0}, {1, 0}};
    CheckNativeDataLoss(a, t + " kernels 1: kernel 1 after kernel 1 (kernels must be strictly ascending)");
  }
  SUBCASE("a target this CPU does not run is not verified") {
    ArtifactSpec a = NativeAddSpec(0);
    a.native_code[0].target = "riscv64";
    a.native_code[0].code.clear();
    auto m = kiln::Model::Load(BuildArtifact(a));
    REQUIRE(m.ok());
    CHECK(m->native_code().size() == 1);
    CHECK(m->native_code()[0].target == "riscv64");
    CHECK(m->native_code_note() == "this CPU runs none of its targets (riscv64)");
  }
}

TEST_CASE("Model::native_code lists each target's bytes and kernels") {
  ArtifactSpec a = NativeAddSpec(kNativeTestOffset_add_w_1000);
  NativeCodeSpec other;
  other.target = "aarch64-sve-none";
  other.abi = 9;
  other.code = {1, 2, 3};
  a.native_code.push_back(other);
  auto m = kiln::Model::Load(BuildArtifact(a));
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  REQUIRE(m->native_code().size() == 2);
  CHECK(m->native_code()[0].target == kNativeHostTarget);
  CHECK(m->native_code()[0].abi == 1);
  CHECK(m->native_code()[0].code_bytes == sizeof kNativeTestCode);
  CHECK(m->native_code()[0].kernels == std::vector<uint32_t>{0});
  CHECK(m->native_code()[1].code_bytes == 3);
  CHECK(m->native_code()[1].kernels.empty());
  CHECK(m->native_code_target() == kNativeHostTarget);
}

// scripts/sanitize.sh seeds fuzz_model_load with this artifact (native code for the host's
// baseline target) by running this case with KILN_NATIVE_FUZZ_SEED set to the file to write.
TEST_CASE("native code fuzz seed loads and is written on request") {
  const std::vector<uint8_t> bytes = BuildArtifact(NativeAddSpec(0));
  auto m = kiln::Model::Load(bytes);
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  CHECK(m->native_code().size() == 1);
  if (const char* path = std::getenv("KILN_NATIVE_FUZZ_SEED")) {
    FILE* f = std::fopen(path, "wb");
    REQUIRE(f != nullptr);
    CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
    std::fclose(f);
  }
}
