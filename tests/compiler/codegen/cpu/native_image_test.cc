// Native code images (compiler/codegen/cpu/llvm_image.h, flat_image.h): what the link refuses,
// domains with a dimension of 0, whose divisions by that dimension once made LLVM delete the
// whole function as undefined behaviour (an empty function at the image's end), and the
// objects kept in the kernel cache.
#include <doctest/doctest.h>

#include "compiler/codegen/cpu/flat_image.h"
#include "compiler/codegen/cpu/llvm_image.h"
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

TEST_CASE("native code image: the link refuses what is not an ELF64 relocatable object") {
  std::vector<uint32_t> offsets;
  auto r = LinkFlatImage({1, 2, 3}, {"f"}, &offsets);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInternal);
  CHECK(r.status().message() == "native code image: not a little-endian ELF64 relocatable object");
}

}  // namespace
}  // namespace kiln::codegen::cpu
