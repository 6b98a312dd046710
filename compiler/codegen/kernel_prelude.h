// The device prelude of every generated kernel: small helpers the emitted statements call.
// It is plain text prepended to each kernel's source (EmitCuda includes only the sections a
// kernel uses, which keeps NVRTC's parse time and the artifact small).
//
// Every section is valid CUDA C++ under NVRTC (no includes: the CUDA built-ins and math
// functions are all it needs) and valid host C++ once host_shim.h's text comes first, so
// the same kernel text is checked on machines without a GPU. Each section has its own
// include guard, so the host harness can put many kernels into one translation unit.
//
// Conventions: kI64 values are `long long`, kF32 `float`, kF64 `double`; index arithmetic
// the emitter proves to fit in 32 bits is `int` (cuda_source.cc). Integer
// arithmetic that may overflow goes through unsigned types, so it wraps instead of being
// undefined (ONNX int64 arithmetic wraps in onnxruntime, and the host shim build must not
// trap: INT64_MIN / -1 raises SIGFPE on x86).
#pragma once

namespace kiln::codegen {

// Always included: integer helpers, NaN-propagating min/max, sign, the index check.
inline constexpr const char* kPreludeCore = R"KILN(#ifndef KILN_PRELUDE_CORE
#define KILN_PRELUDE_CORE
typedef unsigned long long kiln_u64;
__device__ __forceinline__ long long kiln_add(long long x, long long y) { return (long long)((kiln_u64)x + (kiln_u64)y); }
__device__ __forceinline__ long long kiln_sub(long long x, long long y) { return (long long)((kiln_u64)x - (kiln_u64)y); }
__device__ __forceinline__ long long kiln_mul(long long x, long long y) { return (long long)((kiln_u64)x * (kiln_u64)y); }
__device__ __forceinline__ long long kiln_neg(long long x) { return (long long)(0ull - (kiln_u64)x); }
__device__ __forceinline__ long long kiln_abs(long long x) { return x < 0 ? kiln_neg(x) : x; }
__device__ __forceinline__ long long kiln_sign(long long x) { return (long long)(x > 0) - (long long)(x < 0); }
__device__ __forceinline__ float kiln_sign(float x) { return x != x ? x : (x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f)); }
__device__ __forceinline__ double kiln_sign(double x) { return x != x ? x : (x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0)); }
// Integer division truncates toward zero; x / 0 = 0; x / -1 wraps (INT64_MIN / -1 = INT64_MIN).
__device__ __forceinline__ long long kiln_div(long long x, long long y) { return y == 0 ? 0 : (y == -1 ? kiln_neg(x) : x / y); }
__device__ __forceinline__ long long kiln_floordiv(long long x, long long y) {
  if (y == 0) return 0;
  if (y == -1) return kiln_neg(x);
  const long long q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
// kMod: the result takes y's sign (Python %); kFmod: x's sign (C %). x % 0 = 0.
__device__ __forceinline__ long long kiln_fmod(long long x, long long y) { return (y == 0 || y == -1) ? 0 : x % y; }
__device__ __forceinline__ long long kiln_mod(long long x, long long y) {
  const long long r = kiln_fmod(x, y);
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
__device__ __forceinline__ float kiln_mod(float x, float y) {
  const float r = fmodf(x, y);
  return (r != 0.0f && ((r < 0.0f) != (y < 0.0f))) ? r + y : r;
}
__device__ __forceinline__ double kiln_mod(double x, double y) {
  const double r = fmod(x, y);
  return (r != 0.0 && ((r < 0.0) != (y < 0.0))) ? r + y : r;
}
// Min and max give NaN when either operand is NaN (ONNX Min/Max); fminf/fmaxf would not.
__device__ __forceinline__ float kiln_max(float x, float y) { return (x != x || y != y) ? x + y : (x < y ? y : x); }
__device__ __forceinline__ float kiln_min(float x, float y) { return (x != x || y != y) ? x + y : (y < x ? y : x); }
__device__ __forceinline__ double kiln_max(double x, double y) { return (x != x || y != y) ? x + y : (x < y ? y : x); }
__device__ __forceinline__ double kiln_min(double x, double y) { return (x != x || y != y) ? x + y : (y < x ? y : x); }
__device__ __forceinline__ long long kiln_max(long long x, long long y) { return x < y ? y : x; }
__device__ __forceinline__ long long kiln_min(long long x, long long y) { return y < x ? y : x; }
__device__ __forceinline__ int kiln_max(int x, int y) { return x < y ? y : x; }
__device__ __forceinline__ int kiln_min(int x, int y) { return y < x ? y : x; }
// kCheckIndex: x when 0 <= x < n. Otherwise the first failing thread records (check + 1) in
// err[0], the index in err[1] (low word) and err[2] (high word) and the bound n in err[3]
// (saturated at 2^32 - 1), and the result is 0, so the load that uses it stays in range.
__device__ __forceinline__ long long kiln_check(long long x, long long n, unsigned check, unsigned* err) {
  if (x >= 0 && x < n) return x;
  if (atomicCAS(err, 0u, check + 1u) == 0u) {
    err[1] = (unsigned)(kiln_u64)x;
    err[2] = (unsigned)((kiln_u64)x >> 32);
    err[3] = n > 0xffffffffll ? 0xffffffffu : (unsigned)n;
  }
  return 0;
}
#endif
)KILN";

// float16 <-> float32 by bit manipulation, round to nearest even, NaN and infinity kept
// (the same rounding as runtime/half.h, which the CPU backend uses).
inline constexpr const char* kPreludeHalf = R"KILN(#ifndef KILN_PRELUDE_HALF
#define KILN_PRELUDE_HALF
__device__ __forceinline__ float kiln_h2f(unsigned short h) {
  const unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m * 2^-24 is exact in float
    const float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned short kiln_f2h(float f) {
  const unsigned x = __float_as_uint(f), sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (unsigned short)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // rounds to infinity
  if (a < 0x38800000u) {  // half subnormal or zero
    if (a < 0x33000000u) return (unsigned short)sign;
    const unsigned s = 126u - (a >> 23), m = (a & 0x7fffffu) | 0x800000u;
    const unsigned r = m >> s, rem = m & ((1u << s) - 1u), half = 1u << (s - 1u);
    return (unsigned short)(sign | (r + ((rem > half || (rem == half && (r & 1u))) ? 1u : 0u)));
  }
  const unsigned b = a - 0x38000000u, r = b >> 13, rem = b & 0x1fffu;
  return (unsigned short)(sign | (r + ((rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ? 1u : 0u)));
}
__device__ __forceinline__ float kiln_round_f16(float f) { return kiln_h2f(kiln_f2h(f)); }
#endif
)KILN";

// bfloat16 <-> float32, round to nearest even; NaN stays a quiet NaN.
inline constexpr const char* kPreludeBF16 = R"KILN(#ifndef KILN_PRELUDE_BF16
#define KILN_PRELUDE_BF16
__device__ __forceinline__ float kiln_bf2f(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short kiln_f2bf(float f) {
  const unsigned x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float kiln_round_bf16(float f) { return kiln_bf2f(kiln_f2bf(f)); }
#endif
)KILN";

// Float -> integer casts (ONNX Cast): truncate toward zero, saturate at the target's range,
// NaN -> 0. kiln_f2i gives the int64 result; narrower targets clamp it (kiln_clamp), which
// is the same as saturating at their range. uint64 results are held in a long long.
inline constexpr const char* kPreludeCast = R"KILN(#ifndef KILN_PRELUDE_CAST
#define KILN_PRELUDE_CAST
__device__ __forceinline__ long long kiln_f2i(double d) {
  if (d != d) return 0;
  if (d >= 9.2233720368547758e18) return 9223372036854775807LL;
  if (d <= -9.2233720368547758e18) return -9223372036854775807LL - 1;
  return (long long)d;
}
__device__ __forceinline__ long long kiln_f2i(float f) {
  if (f != f) return 0;
  if (f >= 9.2233720368547758e18f) return 9223372036854775807LL;
  if (f <= -9.2233720368547758e18f) return -9223372036854775807LL - 1;
  return (long long)f;
}
__device__ __forceinline__ long long kiln_f2u64(double d) {
  if (d != d || d <= 0.0) return 0;
  if (d >= 1.8446744073709552e19) return -1;  // all ones: UINT64_MAX
  return (long long)(kiln_u64)d;
}
__device__ __forceinline__ long long kiln_clamp(long long x, long long lo, long long hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}
#endif
)KILN";

// Block reduction for RowReduction kernels: warp shuffles, then one value per warp through
// shared memory `sm` (32 slots), then the first warp; the result is broadcast to every
// thread. Every thread of the block must call it (it synchronises), and blockDim.x must be
// a multiple of 32, or 1 (the host harness): shuffles run only for offsets below
// blockDim.x, so with one thread the shuffle is never called and the result is `v`.
inline constexpr const char* kPreludeReduce = R"KILN(#ifndef KILN_PRELUDE_REDUCE
#define KILN_PRELUDE_REDUCE
struct kiln_op_sum {
  __device__ __forceinline__ float operator()(float x, float y) const { return x + y; }
  __device__ __forceinline__ double operator()(double x, double y) const { return x + y; }
  __device__ __forceinline__ long long operator()(long long x, long long y) const { return kiln_add(x, y); }
};
struct kiln_op_prod {
  __device__ __forceinline__ float operator()(float x, float y) const { return x * y; }
  __device__ __forceinline__ double operator()(double x, double y) const { return x * y; }
  __device__ __forceinline__ long long operator()(long long x, long long y) const { return kiln_mul(x, y); }
};
struct kiln_op_max {
  template <typename T> __device__ __forceinline__ T operator()(T x, T y) const { return kiln_max(x, y); }
};
struct kiln_op_min {
  template <typename T> __device__ __forceinline__ T operator()(T x, T y) const { return kiln_min(x, y); }
};
template <typename T, typename Op>
__device__ __forceinline__ T kiln_block_reduce(T v, T identity, T* sm, Op op) {
  const unsigned n = blockDim.x, lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (unsigned off = 16; off > 0; off >>= 1) {
    if (off < n) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  }
  if (lane == 0) sm[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < ((n + 31u) >> 5) ? sm[lane] : identity;
    for (unsigned off = 16; off > 0; off >>= 1) {
      if (off < n) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
    }
    if (lane == 0) sm[0] = v;
  }
  __syncthreads();
  v = sm[0];
  __syncthreads();  // sm is reused by the next reduction
  return v;
}
#endif
)KILN";

}  // namespace kiln::codegen
