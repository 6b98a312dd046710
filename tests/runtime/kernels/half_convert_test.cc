// The bulk float16/bfloat16 conversions (runtime/kernels/half_convert.h): on every instruction set
// the CPU has, the same bits as runtime/half.h's scalar functions, which are checked here
// against hand-computed values (IEEE 754 binary16: 1 sign bit, 5 exponent bits biased by 15,
// 10 fraction bits) and against x86's F16C results for NaNs.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "runtime/kernels/half_convert.h"
#include "runtime/half.h"

namespace kiln::cpu::testing {
namespace {

// The instruction sets this CPU can run: baseline always, and each up to the active one.
std::vector<CpuIsa> Isas() {
  std::vector<CpuIsa> isas{CpuIsa::kBaseline};
  for (CpuIsa isa : {CpuIsa::kAvx2Fma, CpuIsa::kAvx512})
    if (ActiveCpuIsa() >= isa) isas.push_back(isa);
  return isas;
}

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FloatFromBits(uint32_t b) { return std::bit_cast<float>(b); }

TEST_CASE("scalar float16 conversions: hand-computed values, NaNs made quiet with their leading payload") {
  CHECK(Bits(HalfToFloat(0x3c00)) == Bits(1.0f));
  CHECK(Bits(HalfToFloat(0xc000)) == Bits(-2.0f));
  CHECK(Bits(HalfToFloat(0x7bff)) == Bits(65504.0f));
  CHECK(Bits(HalfToFloat(0x0001)) == 0x33800000u);  // 2^-24, the smallest subnormal
  CHECK(Bits(HalfToFloat(0x03ff)) == 0x387fc000u);  // the largest subnormal, 1023 * 2^-24
  CHECK(Bits(HalfToFloat(0x7c00)) == 0x7f800000u);
  CHECK(Bits(HalfToFloat(0x8000)) == 0x80000000u);
  // A signaling NaN is made quiet (bit 22); the payload moves up by 13 bits (F16C: the same).
  CHECK(Bits(HalfToFloat(0x7c01)) == 0x7fc02000u);
  CHECK(Bits(HalfToFloat(0xfd55)) == 0xffeaa000u);
  CHECK(Bits(HalfToFloat(0x7fff)) == 0x7fffe000u);

  CHECK(FloatToHalf(1.0f) == 0x3c00);
  CHECK(FloatToHalf(65504.0f) == 0x7bff);
  CHECK(FloatToHalf(FloatFromBits(0x477fefffu)) == 0x7bff);  // just below 65520: rounds down
  CHECK(FloatToHalf(65520.0f) == 0x7c00);               // halfway to 65536: even, infinity
  CHECK(FloatToHalf(FloatFromBits(0x33000000u)) == 0x0000);  // 2^-25, halfway to the smallest: even, 0
  CHECK(FloatToHalf(FloatFromBits(0x33000001u)) == 0x0001);
  CHECK(FloatToHalf(1.0f + 0x1p-11f) == 0x3c00);         // halfway, to even
  CHECK(FloatToHalf(1.0f + 3 * 0x1p-11f) == 0x3c02);     // halfway, to even (up)
  CHECK(FloatToHalf(-0.0f) == 0x8000);
  // NaNs: quiet (bit 9), the top 9 payload bits kept; F16C gives these bits.
  CHECK(FloatToHalf(FloatFromBits(0x7f800001u)) == 0x7e00);
  CHECK(FloatToHalf(FloatFromBits(0x7fa00000u)) == 0x7f00);
  CHECK(FloatToHalf(FloatFromBits(0xffc00001u)) == 0xfe00);
  CHECK(FloatToHalf(FloatFromBits(0x7fffffffu)) == 0x7fff);
  CHECK(FloatToHalf(FloatFromBits(0x7f802000u)) == 0x7e01);
}

TEST_CASE("HalvesToFloat: every float16 and bfloat16 value, the scalar bits, on every instruction set") {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (CpuIsa isa : Isas()) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      CAPTURE(static_cast<int>(isa));
      CAPTURE(static_cast<int>(dt));
      std::vector<float> out(all.size());
      HalvesToFloat(dt, all.data(), out.data(), static_cast<int64_t>(all.size()), isa);
      int mismatches = 0;
      for (uint32_t i = 0; i < all.size(); ++i) {
        const float want = dt == DType::kFloat16 ? HalfToFloat(all[i]) : BF16ToFloat(all[i]);
        if (Bits(out[i]) != Bits(want) && ++mismatches <= 3) CHECK_MESSAGE(false, "half bits ", i);
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("FloatToHalves: a sweep of float32 bit patterns, the scalar bits, on every instruction set") {
  // Every 251st bit pattern (all exponents, both signs, NaNs), and around each float16
  // rounding boundary of the normal and subnormal range.
  std::vector<float> in;
  for (uint64_t b = 0; b <= 0xffffffffu; b += 251) in.push_back(FloatFromBits(static_cast<uint32_t>(b)));
  for (uint32_t h = 0; h < 0x7c00; h += 7) {
    const uint32_t mid =
        (Bits(HalfToFloat(static_cast<uint16_t>(h))) + Bits(HalfToFloat(static_cast<uint16_t>(h + 1)))) / 2;
    for (uint32_t d : {mid - 1, mid, mid + 1}) {
      in.push_back(FloatFromBits(d));
      in.push_back(-FloatFromBits(d));
    }
  }
  for (CpuIsa isa : Isas()) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      CAPTURE(static_cast<int>(isa));
      CAPTURE(static_cast<int>(dt));
      std::vector<uint16_t> out(in.size());
      FloatToHalves(dt, in.data(), out.data(), static_cast<int64_t>(in.size()), isa);
      int mismatches = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const uint16_t want = dt == DType::kFloat16 ? FloatToHalf(in[i]) : FloatToBF16(in[i]);
        if (out[i] != want && ++mismatches <= 3) CHECK_MESSAGE(false, "float bits ", Bits(in[i]));
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("Bulk conversions: every length to 17 writes exactly n values") {
  for (CpuIsa isa : Isas()) {
    for (int64_t n = 0; n <= 17; ++n) {
      CAPTURE(n);
      std::vector<float> f(20, -7.0f);
      std::vector<uint16_t> h(20, 0xabcd);
      std::vector<uint16_t> src(20);
      for (int64_t i = 0; i < 20; ++i) src[i] = FloatToHalf(static_cast<float>(i) + 0.5f);
      HalvesToFloat(DType::kFloat16, src.data(), f.data(), n, isa);
      for (int64_t i = 0; i < 20; ++i) CHECK(f[i] == (i < n ? static_cast<float>(i) + 0.5f : -7.0f));
      FloatToHalves(DType::kFloat16, f.data(), h.data(), n, isa);
      for (int64_t i = 0; i < 20; ++i) CHECK(h[i] == (i < n ? src[i] : 0xabcd));
    }
  }
}

}  // namespace
}  // namespace kiln::cpu::testing
