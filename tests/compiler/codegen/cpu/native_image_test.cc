// Native code images (compiler/codegen/cpu/llvm_image.h, flat_image.h): what the link refuses,
// domains with a dimension of 0, whose divisions by that dimension once made LLVM delete the
// whole function as undefined behaviour (an empty function at the image's end), and the
// objects kept in the kernel cache.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "compiler/codegen/cpu/flat_image.h"
#include "compiler/codegen/cpu/llvm_image.h"
#include "runtime/cpu/native/abi.h"
#include "runtime/cpu/native/image.h"
#include "runtime/fused/interpreter.h"
#include "tests/compiler/codegen/test_programs.h"
#include "tests/native_target.h"
#include "tests/temp_dir.h"

namespace kiln::codegen::cpu {
namespace {

using fused::Op;
using fused::ScalarType;

// out = x + 1 over `domain`, with axis `reduced` (-1: none) reduced into a per-row sum.
fused::Program ZeroDimProgram(std::vector<int64_t> domain, int reduced) {
  fused::Program p;
  p.domain = domain;
  p.inputs = {{DType::kFloat32, domain}};
  p.nodes = {{Op::kLinear, ScalarType::kI64}, {Op::kLoad, ScalarType::kF32, 0, -1, -1, 0},
             {Op::kConst, ScalarType::kF32, -1, -1, -1, 0, 1.0}, {Op::kAdd, ScalarType::kF32, 1, 2}};
  if (reduced < 0) {
    p.outputs = {{{DType::kFloat32, domain}, 3, false}};
    return p;
  }
  p.reduce_axes = 1u << reduced;
  p.reductions = {{fused::ReduceOp::kSum, 3}};
  p.nodes.push_back({Op::kAcc, ScalarType::kF32, -1, -1, -1, 0});
  std::vector<int64_t> kept;
  for (size_t a = 0; a < domain.size(); ++a) {
    if (static_cast<int>(a) != reduced) kept.push_back(domain[a]);
  }
  p.outputs = {{{DType::kFloat32, kept}, 4, true}};
  return p;
}

// `program` compiled for the target this CPU runs (tests/native_target.h), as kernel 0 of an
// image mapped by the runtime's own mapping.
std::unique_ptr<native::NativeImage> MapForThisCpu(const fused::Program& program) {
  const std::string name = testing::NativeTargetForThisCpu();
  const CpuTarget* target = nullptr;
  for (const CpuTarget& t : AllCpuTargets())
    if (t.name == name) target = &t;
  REQUIRE(target != nullptr);
  std::vector<NativeSkip> skipped;
  bool cached = false;
  auto image = CompileNativeImage({&program}, *target, KernelCache("", false), &skipped, &cached);
  REQUIRE_MESSAGE(image.ok(), image.status().ToString());
  REQUIRE(image->kernels.size() == 1);
  std::string refused;
  const std::pair<uint32_t, uint32_t> functions[] = {{0, image->offsets[0]}};
  auto mapped = native::NativeImage::Map(image->code.data(), image->code.size(), functions, 1, &refused);
  REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
  REQUIRE_MESSAGE(*mapped != nullptr, refused);
  return std::move(*mapped);
}

TEST_CASE("native code image: a domain with a dimension of 0 still compiles to a non-empty function") {
  const std::vector<fused::Program> programs = {ZeroDimProgram({0, 4}, -1), ZeroDimProgram({3, 0}, -1),
                                                ZeroDimProgram({0, 4}, 1), ZeroDimProgram({3, 0}, 1),
                                                ZeroDimProgram({0, 4}, 0)};
  for (const fused::Program& p : programs) REQUIRE(fused::Validate(p).ok());
  std::vector<const fused::Program*> pointers;
  for (const fused::Program& p : programs) pointers.push_back(&p);
  for (const CpuTarget& target : AllCpuTargets()) {
    CAPTURE(target.name);
    std::vector<NativeSkip> skipped;
    bool cached = true;
    auto image = CompileNativeImage(pointers, target, KernelCache("", false), &skipped, &cached);
    CHECK_FALSE(cached);
    REQUIRE_MESSAGE(image.ok(), image.status().ToString());
    CHECK(skipped.empty());
    REQUIRE(image->kernels.size() == programs.size());
    for (uint32_t offset : image->offsets) CHECK(offset < image->code.size());
  }
}

TEST_CASE("native code image: the object comes from the kernel cache the second time, and a damaged entry is rebuilt") {
  testing::TempDir dir;
  const KernelCache cache(dir / "cache", true);
  const std::vector<fused::Program> programs = {ZeroDimProgram({5, 7}, -1), ZeroDimProgram({5, 7}, 1)};
  std::vector<const fused::Program*> pointers;
  for (const fused::Program& p : programs) pointers.push_back(&p);
  const CpuTarget& target = AllCpuTargets().front();
  std::vector<NativeSkip> skipped;
  bool cached = true;
  auto cold = CompileNativeImage(pointers, target, cache, &skipped, &cached);
  REQUIRE_MESSAGE(cold.ok(), cold.status().ToString());
  CHECK_FALSE(cached);
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir.path / "cache")) entries.push_back(e.path());
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].extension() == ".o");

  auto warm = CompileNativeImage(pointers, target, cache, &skipped, &cached);
  REQUIRE(warm.ok());
  CHECK(cached);
  CHECK(warm->code == cold->code);
  CHECK(warm->offsets == cold->offsets);

  // Another target is another key.
  auto other = CompileNativeImage(pointers, AllCpuTargets().back(), cache, &skipped, &cached);
  REQUIRE(other.ok());
  CHECK_FALSE(cached);

  // A flipped payload byte fails the entry's checksum: a miss, compiled again and rewritten.
  std::string bytes = testing::ReadBytes(entries[0].string());
  bytes[bytes.size() / 2] ^= 0x40;
  testing::WriteBytes(entries[0].string(), bytes);
  auto rebuilt = CompileNativeImage(pointers, target, cache, &skipped, &cached);
  REQUIRE(rebuilt.ok());
  CHECK_FALSE(cached);
  CHECK(rebuilt->code == cold->code);
  REQUIRE(CompileNativeImage(pointers, target, cache, &skipped, &cached).ok());
  CHECK(cached);
}

TEST_CASE("native code image: a last axis split where comparisons change gives the interpreter's bits in every range") {
  // out[i, j] = j <= 2 ? a[i, j] : (5 < j ? b[i, j] : (j < 9 ? 1 : (7 <= j ? 2 : 3))), over [3, 12]:
  // kLe, kLt and a constant on either side, so the inner loop is cut at 3, 6 and 9 (7 too).
  testing::ProgramMaker m;
  m.p.domain = {3, 12};
  const int a = m.Input(DType::kFloat32, {3, 12}), b = m.Input(DType::kFloat32, {3, 12});
  const int32_t j = m.Coord(1), lin = m.Linear();
  const int32_t tail = m.Select(m.Bin(Op::kLt, j, m.I(9)), m.F(1),
                                m.Select(m.Bin(Op::kLe, m.I(7), j), m.F(2), m.F(3)));
  const int32_t mid = m.Select(m.Bin(Op::kLt, m.I(5), j), m.Load(b, lin), tail);
  m.Out(DType::kFloat32, {3, 12}, m.Select(m.Bin(Op::kLe, j, m.I(2)), m.Load(a, lin), mid));
  REQUIRE(fused::Validate(m.p).ok());
  const std::unique_ptr<native::NativeImage> mapped = MapForThisCpu(m.p);
  const native::KernelFn fn = mapped->kernel(0);
  REQUIRE(static_cast<bool>(fn));

  std::vector<float> xa(36), xb(36), want(36);
  for (int k = 0; k < 36; ++k) xa[k] = 100.0f + k, xb[k] = -100.0f - k;
  const int64_t dims[] = {36};
  const kiln::cpu::TensorRef ins[] = {{xa.data(), DType::kFloat32, 1, dims, 36},
                                      {xb.data(), DType::kFloat32, 1, dims, 36}};
  const kiln::cpu::TensorRef outs[] = {{want.data(), DType::kFloat32, 1, dims, 36}};
  std::vector<uint8_t> ws(kiln::cpu::FusedWorkspaceBytes(m.p));
  REQUIRE(kiln::cpu::RunFused(m.p, ins, outs, {}, ws.data(), ws.size()).ok());
  CHECK(want[2] == xa[2]);
  CHECK(want[3] == 1.0f);  // j = 3: neither a (j <= 2) nor b (5 < j)
  CHECK(want[12 + 6] == xb[18]);
  for (int64_t begin = 0; begin <= 36; ++begin)
    for (int64_t end = begin; end <= 36; ++end) {
      CAPTURE(begin);
      CAPTURE(end);
      std::vector<float> got(36, -1.0f);
      const void* in_ptrs[] = {xa.data(), xb.data()};
      void* out_ptrs[] = {got.data()};
      int64_t failed[3] = {0, 0, 0};
      const native::KernelArgs args{in_ptrs, out_ptrs, nullptr, begin, end, failed};
      REQUIRE(fn(&args) == 0);
      for (int64_t k = 0; k < 36; ++k) REQUIRE(got[k] == (k >= begin && k < end ? want[k] : -1.0f));
    }
}

TEST_CASE("native code image: max and min reductions propagate NaN wherever it is in the row (ONNX ReduceMax, docs/semantics.md)") {
  // out0[i] = max over j of x[i, j], out1[i] = min, over [5, 37] (vectorized, with a remainder).
  testing::ProgramMaker m;
  m.p.domain = {5, 37};
  m.p.reduce_axes = 2;
  const int x = m.Input(DType::kFloat32, {5, 37});
  const int32_t v = m.Load(x, m.Linear());
  m.Out(DType::kFloat32, {5}, m.Reduce(fused::ReduceOp::kMax, v), true);
  m.Out(DType::kFloat32, {5}, m.Reduce(fused::ReduceOp::kMin, v), true);
  REQUIRE(fused::Validate(m.p).ok());
  const std::unique_ptr<native::NativeImage> mapped = MapForThisCpu(m.p);

  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs(5 * 37);
  for (size_t k = 0; k < xs.size(); ++k) xs[k] = static_cast<float>((k * 7919) % 101) - 50.0f;
  xs[1 * 37 + 0] = nan;    // row 1: NaN first
  xs[2 * 37 + 36] = nan;   // row 2: NaN last (in the remainder)
  xs[3 * 37 + 17] = nan;   // row 3: NaN inside a vector
  for (int j = 0; j < 37; ++j) xs[4 * 37 + j] = -inf;  // row 4: all -inf
  std::vector<float> max(5, 0.0f), min(5, 0.0f);
  const void* in_ptrs[] = {xs.data()};
  void* out_ptrs[] = {max.data(), min.data()};
  int64_t failed[3] = {0, 0, 0};
  const native::KernelArgs args{in_ptrs, out_ptrs, nullptr, 0, 5, failed};
  REQUIRE(mapped->kernel(0)(&args) == 0);
  CHECK(max[0] == 50.0f);
  CHECK(min[0] == -50.0f);
  for (int r : {1, 2, 3}) {
    CAPTURE(r);
    CHECK(std::isnan(max[r]));
    CHECK(std::isnan(min[r]));
  }
  CHECK(max[4] == -inf);
  CHECK(min[4] == -inf);
}

TEST_CASE("native code image: the link refuses what is not an ELF64 relocatable object") {
  std::vector<uint32_t> offsets;
  auto r = LinkFlatImage({1, 2, 3}, {"f"}, &offsets);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInternal);
  CHECK(r.status().message() == "native code image: not a little-endian ELF64 relocatable object");
}

}  // namespace
}  // namespace kiln::codegen::cpu
