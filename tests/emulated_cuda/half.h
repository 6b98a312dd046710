// float16 (IEEE 754 binary16) and bfloat16 (the upper half of a binary32) to and from float,
// for the emulated libraries' reference loops. Written here from the formats' definitions
// (IEEE 754-2008 3.6; the bfloat16 format as cuBLASLt and cuDNN document CUDA_R_16BF /
// CUDNN_DATA_BFLOAT16), not shared with Kiln's runtime, so that the emulated device and the
// CPU backend are checked against each other. Conversions to the narrow types round to
// nearest, ties to even; NaN stays NaN and overflow gives infinity.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::emulated_cuda {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal: man * 2^-24
  } else if (exp == 31) {
    f = man == 0 ? INFINITY : NAN;
  } else {
    f = std::ldexp(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= sign;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to infinity
  if (a < 0x1p-14f) {
    // Subnormal or zero: a multiple of 2^-24, rounded to nearest even by nearbyint.
    const float q = std::nearbyint(a * 0x1p24f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
  }
  int e;
  const float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  // 11 significant bits: scale the significand to [1024, 2048) and round to nearest even.
  float q = std::nearbyint(m * 2048.0f);
  if (q == 2048.0f) {
    q = 1024.0f;
    ++e;
  }
  const int biased = e - 1 + 15;
  if (biased >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | (biased << 10) | (static_cast<uint16_t>(q) & 0x3ffu));
}

inline float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;  // round to nearest, ties to even; overflow carries into infinity
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace kiln::emulated_cuda
