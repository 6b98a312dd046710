// The CPU interpreter of fused programs (runtime/fused/program.h).
//
// Evaluation is blocked: a block is `nr` rows x `nc` columns of the domain (at most B
// elements, B = BlockSize), and each node is computed for the whole block before the next
// one, into its own slot of 8-byte values in the workspace. The switch over the op is
// therefore paid once per node per block, and each op is a tight loop GCC vectorizes at -O2
// (groups of kLanes over the block padded to a multiple of kLanes, __restrict slots).
//
// Two shapes of block, chosen per launch:
//  - whole rows: when a row has at most B columns, a block holds floor(B / columns) whole
//    rows (B rows of one column when nothing is reduced). The reductions and the full
//    outputs then see the same block elements, so a node computed for reduction 0 is
//    reused by reduction 1 and by the outputs;
//  - split rows: a longer row is cut into blocks of columns, and each reduction and the
//    full outputs make their own pass over the row's blocks, recomputing what they need.
// Nodes are evaluated on demand from the roots (reduction values, outputs): a kSelect whose
// condition is uniform over the block evaluates only the chosen branch, so a Concat of
// four inputs costs about one branch per element, not four.
// Per-row outputs are a final pass with one element per row (every reduced coordinate 0).
// When the reduced axes are the trailing ones (or none), a block is a run of consecutive
// domain elements: kLinear is an iota, coordinates are runs and stores are contiguous.
// Otherwise the block's indices come from odometers over the kept and the reduced axes.
// kLinear and kCoord are only computed when the program reads them.
//
// Numerics: kF32 nodes compute in float and kF64 in double, as the CUDA kernels do. A kF32
// sum reduction accumulates in double (as the CPU Softmax kernel does) and is rounded to
// float when kAcc reads it.
//
// kCast follows program.h: float -> integer truncates toward zero, saturates at the target
// dtype's range and maps NaN to 0; integer -> narrower integer wraps (two's complement);
// -> bool is x != 0 (NaN gives 1); -> float16/bfloat16 rounds to nearest even through
// runtime/half.h, as the CPU Cast kernel does. The CPU Cast kernel (runtime/cpu/cast.cc)
// agrees except for floats outside the target integer's range, which it saturates at the
// int64 range and then wraps (ONNX leaves that case undefined).
#include "runtime/cpu/fused.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/cpu/half_convert.h"
#include "runtime/cpu/kernel_util.h"
#include "runtime/cpu/thread_pool.h"
#include "runtime/half.h"

namespace kiln::cpu {
namespace {

using fused::Node;
using fused::Op;
using fused::Program;
using fused::ReduceOp;
using fused::ScalarType;

// Bigger programs get smaller blocks, so the value slots stay near the cache size: small
// programs (activations, scale-and-shift, broadcasts, index maps, pooling) get long blocks,
// up to about 0.5 MB of slots (within L2), so the per-block and per-node costs are spread
// over more elements.
int BlockSize(size_t num_nodes) {
  return num_nodes <= 32 ? 2048 : num_nodes <= 96 ? 512 : num_nodes <= 256 ? 256 : num_nodes <= 1024 ? 128 : 64;
}

size_t Align64(size_t x) { return (x + 63) & ~size_t{63}; }

// Loops run in groups of kLanes elements (see Map1 below).
constexpr int kLanes = 16;

// The shortest segment of per-segment values (see "Per-segment values" below).
constexpr int64_t kMinSegment = 16;

// The affine form of an index node: c0 + sum_a coef[a] * coord_a (see ComputeAffine).
struct Affine {
  int64_t c0;
  int64_t coef[kMaxRank];  // 0 on axes of extent 1, whose coordinate is always 0
};

// Byte offsets of the workspace's parts (relative to the 64-byte aligned base).
struct Layout {
  int block = 0;        // B: elements per block, a multiple of kLanes
  size_t slot = 0;      // elements per value slot: B plus kLanes of slack for run fills
  size_t values = 0;    // one slot per node
  size_t linear = 0;    // the block elements' linear indices
  size_t coords = 0;    // per domain axis: the block elements' coordinates
  size_t rowbase = 0;   // per row of the block: linear index with reduced coordinates 0
  size_t rowcoord = 0;  // per kept axis: the rows' coordinates
  size_t coloff = 0;    // per column of the block: linear offset of its reduced coordinates
  size_t colcoord = 0;  // per reduced axis: the columns' coordinates
  size_t acc = 0;       // per reduction: one accumulator per row of the block
  size_t computed = 0;  // per node: computed for the current block (1 byte), and the
  size_t initial = 0;   //   initial flags (constants are computed once per launch)
  size_t stack = 0;     // the evaluation stack (int32 per node)
  size_t marks = 0;     // per node: needed by some pass
  size_t forms = 0;     // per node: its affine form
  size_t affine = 0;    // per node: whether it is affine
  size_t deps = 0;      // per node: the domain axes its value depends on (bit a for axis a)
  size_t segidx = 0;    // a load's index per segment, when its index node is not per segment
  size_t total = 0;
};

Layout MakeLayout(const Program& p) {
  Layout l;
  const size_t n = p.nodes.size(), rank = p.domain.size(), k = p.reductions.size();
  const size_t b = BlockSize(n);
  l.block = static_cast<int>(b);
  size_t off = 0;
  auto take = [&](size_t bytes) {
    const size_t at = off;
    off = Align64(off + bytes);
    return at;
  };
  l.slot = b + kLanes;
  l.values = take(n * l.slot * 8);
  l.linear = take(l.slot * 8);
  l.coords = take(rank * l.slot * 8);
  l.rowbase = take(b * 8);
  l.rowcoord = take(rank * b * 8);
  l.coloff = take(b * 8);
  l.colcoord = take(rank * b * 8);
  l.acc = take(k * b * 8);
  l.computed = take(n);
  l.initial = take(n);
  l.stack = take(n * sizeof(int32_t));
  l.marks = take(n);
  l.forms = take(n * sizeof(Affine));
  l.affine = take(n);
  l.deps = take(n * sizeof(uint32_t));
  l.segidx = take((b / kMinSegment + 2 + kLanes) * 8);  // Pad(segments in a block)
  l.total = off + 64;  // room to align the caller's pointer
  return l;
}

// Bytes of one thread's slice of the workspace (every part of the layout; a multiple of 64).
size_t SliceBytes(const Layout& l) { return l.total - 64; }

// ---- Loops ---------------------------------------------------------------------------------
//
// GCC's -O2 vectorizer only takes loops that need no scalar epilogue and no run-time alias
// check, so the loops below run over groups of kLanes with __restrict pointers. Pure ops
// compute the whole padded block (Pad(n) <= B elements): the tail past n is zero-filled by
// the leaves (loads, coordinates, accumulators) and its results are never stored.

inline int Pad(int n) { return (n + kLanes - 1) & ~(kLanes - 1); }

template <typename T>
inline T* As(uint8_t* p) {
  return reinterpret_cast<T*>(p);
}
template <typename T>
inline const T* As(const uint8_t* p) {
  return reinterpret_cast<const T*>(p);
}

// o[j] = f(x[j]) for j < m, m a multiple of kLanes. (GCC honours __restrict on
// parameters, not on locals, hence the typed inner functions.)
template <typename O, typename X, typename F>
inline void Map1T(O* __restrict po, const X* __restrict px, int m, F f) {
  for (int j = 0; j < m; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) po[j + k] = f(px[j + k]);
  }
}
template <typename O, typename X, typename F>
inline void Map1(void* o, const void* x, int m, F f) {
  Map1T(static_cast<O*>(o), static_cast<const X*>(x), m, f);
}
template <typename O, typename X, typename F>
inline void Map2T(O* __restrict po, const X* __restrict px, const X* __restrict py, int m, F f) {
  for (int j = 0; j < m; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) po[j + k] = f(px[j + k], py[j + k]);
  }
}
template <typename O, typename X, typename F>
inline void Map2(void* o, const void* x, const void* y, int m, F f) {
  Map2T(static_cast<O*>(o), static_cast<const X*>(x), static_cast<const X*>(y), m, f);
}
// o[j] = f(x[j]) for j < n, any n (stores to tensors, contiguous loads).
template <typename O, typename X, typename F>
inline void MapN(O* __restrict po, const X* __restrict px, int n, F f) {
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) po[j + k] = f(px[j + k]);
  }
  for (; j < n; ++j) po[j] = f(px[j]);
}

// float16 conversions, element by element and, for the contiguous loads and stores above
// (MapN), in bulk on F16C where the CPU has it (half_convert.h: the same bits).
struct LoadFloat16 {
  float operator()(uint16_t v) const { return HalfToFloat(v); }
};
struct StoreFloat16 {
  uint16_t operator()(float v) const { return FloatToHalf(v); }
};
inline void MapN(float* po, const uint16_t* px, int n, LoadFloat16) { HalvesToFloat(DType::kFloat16, px, po, n); }
inline void MapN(uint16_t* po, const float* px, int n, StoreFloat16) { FloatToHalves(DType::kFloat16, px, po, n); }

// ---- Element conversions ------------------------------------------------------------------

// T's value (FromDouble's saturating conversion) in the int64 slot of an integer register.
template <typename T>
int64_t SatToInt(double d) {
  return static_cast<int64_t>(FromDouble<T>(d));
}

// kCast of m values of type S (int64_t, float or double) to dtype dt, held in its compute
// type.
template <typename S>
void CastTo(DType dt, const void* x, void* o, int m) {
  constexpr bool kFromInt = std::is_same_v<S, int64_t>;
  switch (dt) {
    case DType::kFloat32:
      Map1<float, S>(o, x, m, [](S v) { return static_cast<float>(v); });
      return;
    case DType::kFloat16:
      Map1<float, S>(o, x, m, [](S v) { return HalfToFloat(FloatToHalf(static_cast<float>(v))); });
      return;
    case DType::kBFloat16:
      Map1<float, S>(o, x, m, [](S v) { return BF16ToFloat(FloatToBF16(static_cast<float>(v))); });
      return;
    case DType::kFloat64:
      Map1<double, S>(o, x, m, [](S v) { return static_cast<double>(v); });
      return;
    case DType::kBool:
      Map1<int64_t, S>(o, x, m, [](S v) -> int64_t { return v != 0; });
      return;
    default:
      break;
  }
  if constexpr (kFromInt) {
    // Integer narrowing wraps, as a C cast does.
    switch (dt) {
      case DType::kInt8:
        Map1<int64_t, S>(o, x, m, [](S v) -> int64_t { return static_cast<int8_t>(v); });
        return;
      case DType::kUInt8:
        Map1<int64_t, S>(o, x, m, [](S v) -> int64_t { return static_cast<uint8_t>(v); });
        return;
      case DType::kInt16:
        Map1<int64_t, S>(o, x, m, [](S v) -> int64_t { return static_cast<int16_t>(v); });
        return;
      case DType::kUInt16:
        Map1<int64_t, S>(o, x, m, [](S v) -> int64_t { return static_cast<uint16_t>(v); });
        return;
      case DType::kInt32:
        Map1<int64_t, S>(o, x, m, [](S v) -> int64_t { return static_cast<int32_t>(v); });
        return;
      case DType::kUInt32:
        Map1<int64_t, S>(o, x, m, [](S v) -> int64_t { return static_cast<uint32_t>(v); });
        return;
      default:
        std::memcpy(o, x, static_cast<size_t>(m) * 8);
        return;  // int64, uint64
    }
  } else {
    // Float to integer truncates toward zero and saturates; NaN gives 0.
    switch (dt) {
      case DType::kInt8:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<int8_t>(v); });
        return;
      case DType::kUInt8:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<uint8_t>(v); });
        return;
      case DType::kInt16:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<int16_t>(v); });
        return;
      case DType::kUInt16:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<uint16_t>(v); });
        return;
      case DType::kInt32:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<int32_t>(v); });
        return;
      case DType::kUInt32:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<uint32_t>(v); });
        return;
      case DType::kInt64:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<int64_t>(v); });
        return;
      case DType::kUInt64:
        Map1<int64_t, S>(o, x, m, [](S v) { return SatToInt<uint64_t>(v); });
        return;
      default:
        return;
    }
  }
}

// Gathers base[idx[j]] converted by `conv`, or base[first + j] when idx is null (a load at
// kLinear or at a form equal to it: the run is known without looking); false (with the
// first bad index) when one is out of [0, count), count >= 1. Runs of consecutive indices
// (broadcasts along the innermost axis) and repeated indices take vectorizable paths.
template <typename S, typename D, typename F>
bool GatherT(const S* __restrict src, const int64_t* __restrict idx, int64_t first, int n, int64_t count,
             D* __restrict out, int64_t* bad, F conv) {
  if (n == 0) return true;
  if (idx == nullptr) {
    if (first < 0 || first > count - n) {
      *bad = first < 0 ? first : std::max(first, count);
      return false;
    }
    MapN(out, src + first, n, conv);
    return true;
  }
  const int64_t i0 = idx[0];
  uint64_t run = 0, same = 0;
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      run |= static_cast<uint64_t>(idx[j + k] ^ (i0 + j + k));
      same |= static_cast<uint64_t>(idx[j + k] ^ i0);
    }
  }
  for (; j < n; ++j) {
    run |= static_cast<uint64_t>(idx[j] ^ (i0 + j));
    same |= static_cast<uint64_t>(idx[j] ^ i0);
  }
  if (i0 >= 0 && i0 < count) {
    if (same == 0) {
      const D v = conv(src[i0]);
      for (j = 0; j < Pad(n); j += kLanes) {  // the slot has room for Pad(n)
        for (int k = 0; k < kLanes; ++k) out[j + k] = v;
      }
      return true;
    }
    if (run == 0 && n <= count - i0) {
      MapN(out, src + i0, n, conv);
      return true;
    }
  }
  // Any other pattern: a gather that reads element 0 in place of an index out of range,
  // and reports the first such index afterwards.
  const uint64_t ucount = static_cast<uint64_t>(count);
  uint64_t outside = 0;
  for (j = 0; j < n; ++j) {
    const uint64_t k = static_cast<uint64_t>(idx[j]);
    outside |= static_cast<uint64_t>(k >= ucount);
    out[j] = conv(src[k < ucount ? k : 0]);
  }
  if (outside == 0) return true;
  for (j = 0; static_cast<uint64_t>(idx[j]) < ucount; ++j) {
  }
  *bad = idx[j];
  return false;
}

template <typename S, typename D, typename F>
bool Gather(const void* base, const int64_t* idx, int64_t first, int n, int64_t count, D* out, int64_t* bad, F conv) {
  return GatherT(static_cast<const S*>(base), idx, first, n, count, out, bad, conv);
}

// Loads input `in` at idx[j], or at first + j when idx is null (see GatherT).
bool LoadInput(const TensorRef& in, const int64_t* idx, int64_t first, int n, uint8_t* out, int64_t* bad) {
  if (in.num_elements == 0) {  // never read: such a load is one a Select discards
    std::memset(out, 0, static_cast<size_t>(n) * 8);
    return true;
  }
  int64_t* oi = reinterpret_cast<int64_t*>(out);
  auto widen = [](auto v) { return static_cast<int64_t>(v); };
  switch (in.dtype) {
    case DType::kFloat32:
      return Gather<float>(in.data, idx, first, n, in.num_elements, reinterpret_cast<float*>(out), bad,
                           [](float v) { return v; });
    case DType::kFloat16:
      return Gather<uint16_t>(in.data, idx, first, n, in.num_elements, reinterpret_cast<float*>(out), bad,
                              LoadFloat16{});
    case DType::kBFloat16:
      return Gather<uint16_t>(in.data, idx, first, n, in.num_elements, reinterpret_cast<float*>(out), bad,
                              [](uint16_t v) { return BF16ToFloat(v); });
    case DType::kFloat64:
      return Gather<double>(in.data, idx, first, n, in.num_elements, reinterpret_cast<double*>(out), bad,
                            [](double v) { return v; });
    case DType::kInt8:
      return Gather<int8_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kUInt8:
      return Gather<uint8_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kInt16:
      return Gather<int16_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kUInt16:
      return Gather<uint16_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kInt32:
      return Gather<int32_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kUInt32:
      return Gather<uint32_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kInt64:
      return Gather<int64_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kUInt64:
      return Gather<uint64_t>(in.data, idx, first, n, in.num_elements, oi, bad, widen);
    case DType::kBool:
      return Gather<uint8_t>(in.data, idx, first, n, in.num_elements, oi, bad,
                             [](uint8_t v) { return static_cast<int64_t>(v != 0); });
    default:
      return true;  // not reached: RunFused checked the dtype against the spec
  }
}

// Writes the block's values of an output: element j goes to dst[pos[j]] or, when pos is
// null, to dst[first + j].
template <typename D, typename S, typename F>
void Scatter(void* dst, const int64_t* pos, int64_t first, const uint8_t* slot, int n, F conv) {
  D* d = static_cast<D*>(dst);
  const S* v = As<S>(slot);
  if (pos == nullptr) {
    MapN(d + first, v, n, conv);
  } else {
    for (int j = 0; j < n; ++j) d[pos[j]] = conv(v[j]);
  }
}

void StoreOutput(const TensorRef& out, const uint8_t* slot, const int64_t* pos, int64_t first, int n) {
  auto same = [](auto x) { return x; };
  void* d = out.data;
  switch (out.dtype) {
    case DType::kFloat32:
      Scatter<float, float>(d, pos, first, slot, n, same);
      return;
    case DType::kFloat16:
      Scatter<uint16_t, float>(d, pos, first, slot, n, StoreFloat16{});
      return;
    case DType::kBFloat16:
      Scatter<uint16_t, float>(d, pos, first, slot, n, [](float x) { return FloatToBF16(x); });
      return;
    case DType::kFloat64:
      Scatter<double, double>(d, pos, first, slot, n, same);
      return;
    case DType::kInt64:
      Scatter<int64_t, int64_t>(d, pos, first, slot, n, same);
      return;
    default:
      break;
  }
  // Narrower integers wrap, as a C cast does; bool is x != 0.
  auto narrow = [&](auto tag) {
    using D = decltype(tag);
    Scatter<D, int64_t>(d, pos, first, slot, n, [](int64_t x) { return static_cast<D>(x); });
  };
  switch (out.dtype) {
    case DType::kInt8:
      narrow(int8_t{});
      return;
    case DType::kUInt8:
      narrow(uint8_t{});
      return;
    case DType::kInt16:
      narrow(int16_t{});
      return;
    case DType::kUInt16:
      narrow(uint16_t{});
      return;
    case DType::kInt32:
      narrow(int32_t{});
      return;
    case DType::kUInt32:
      narrow(uint32_t{});
      return;
    case DType::kUInt64:
      narrow(uint64_t{});
      return;
    case DType::kBool:
      Scatter<uint8_t, int64_t>(d, pos, first, slot, n,
                                [](int64_t x) { return static_cast<uint8_t>(x != 0); });
      return;
    default:
      return;
  }
}

// ---- Scalar semantics ---------------------------------------------------------------------

inline int64_t WrapAdd(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y));
}
inline int64_t WrapSub(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y));
}
inline int64_t WrapMul(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y));
}
inline int64_t WrapNeg(int64_t x) { return static_cast<int64_t>(0 - static_cast<uint64_t>(x)); }

// Truncating division and C remainder without the two undefined cases: y == 0 gives 0 and
// INT64_MIN / -1 wraps to INT64_MIN (remainder 0).
inline int64_t DivI(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return WrapNeg(x);
  return x / y;
}
inline int64_t FmodI(int64_t x, int64_t y) {
  if (y == 0 || y == -1) return 0;
  return x % y;
}
inline int64_t ModI(int64_t x, int64_t y) {
  const int64_t r = FmodI(x, y);
  return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
inline int64_t FloorDivI(int64_t x, int64_t y) {
  if (y == 0) return 0;
  if (y == -1) return WrapNeg(x);
  const int64_t q = x / y;
  return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}

template <typename T>
inline T ModF(T x, T y) {
  const T r = std::fmod(x, y);
  return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

// NaN in either operand gives NaN (ONNX Min/Max).
template <typename T>
inline T MinOf(T x, T y) {
  return (x < y || x != x) ? x : y;
}
template <typename T>
inline T MaxOf(T x, T y) {
  return (x > y || x != x) ? x : y;
}

// dst[j] = v + j for j < Pad(n) (writes up to kLanes - 1 past n: slots have that slack).
inline void IotaPadded(int64_t* __restrict dst, int64_t v, int n) {
  for (int j = 0; j < n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) dst[j + k] = v + j + k;
  }
}
inline void FillPadded(int64_t* __restrict dst, int64_t v, int n) {
  for (int j = 0; j < n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) dst[j + k] = v;
  }
}

// Coordinates along an axis of stride s and extent d for the domain elements
// [first, first + n): runs of s equal values, counting up modulo d. n > 0 implies s, d >= 1.
// Each run may overshoot by up to kLanes - 1 elements; the next run overwrites them.
void FillCoordRun(int64_t* dst, int64_t first, int n, int64_t s, int64_t d) {
  int64_t c = (first / s) % d;
  int j = 0;
  if (s == 1) {  // the innermost axis: ascending runs up to d
    while (j < n) {
      const int len = static_cast<int>(std::min<int64_t>(d - c, n - j));
      IotaPadded(dst + j, c, len);
      j += len;
      c = 0;
    }
    return;
  }
  int64_t left = s - first % s;
  while (j < n) {
    const int len = static_cast<int>(std::min<int64_t>(left, n - j));
    FillPadded(dst + j, c, len);
    j += len;
    left = s;
    if (++c == d) c = 0;
  }
}

// ---- Affine index expressions --------------------------------------------------------------
//
// Index arithmetic (ravels of coordinates, offsets, strides) is mostly affine in the
// coordinates. At launch, each kI64 node built from kCoord, kLinear, kConst, kSize, add, sub,
// neg and products with an affine constant gets its form c0 + sum_a coef[a] * coord_a. The
// arithmetic wraps, as the nodes' does, so the form equals the node's value exactly. Such
// add/sub/mul/neg nodes are filled from their form instead of their operands (which are then
// not evaluated unless something else reads them): a load at the ravel of all coordinates
// becomes a load at an iota, with no int64 multiply per element.

bool IsConstant(const Affine& f, int rank) {
  for (int a = 0; a < rank; ++a) {
    if (f.coef[a] != 0) return false;
  }
  return true;
}

// The forms of all nodes; ok[id] = 0 where a node is not affine.
void ComputeAffine(const Program& p, const int64_t* dims, const int64_t* strides, int rank,
                   std::span<const int64_t> sizes, Affine* forms, uint8_t* ok) {
  for (size_t id = 0; id < p.nodes.size(); ++id) {
    const Node& node = p.nodes[id];
    Affine& f = forms[id];
    f = Affine{};
    ok[id] = 0;
    if (node.type != ScalarType::kI64) continue;
    const Affine* x = node.a >= 0 && ok[node.a] ? &forms[node.a] : nullptr;
    const Affine* y = node.b >= 0 && ok[node.b] ? &forms[node.b] : nullptr;
    switch (node.op) {
      case Op::kConst:
        f.c0 = node.i;
        break;
      case Op::kSize:
        f.c0 = sizes[node.i];
        break;
      case Op::kCoord:
        if (dims[node.i] != 1) f.coef[node.i] = 1;
        break;
      case Op::kLinear:
        for (int a = 0; a < rank; ++a) f.coef[a] = dims[a] != 1 ? strides[a] : 0;
        break;
      case Op::kAdd:
      case Op::kSub:
        if (!x || !y) continue;
        f.c0 = node.op == Op::kAdd ? WrapAdd(x->c0, y->c0) : WrapSub(x->c0, y->c0);
        for (int a = 0; a < rank; ++a) {
          f.coef[a] = node.op == Op::kAdd ? WrapAdd(x->coef[a], y->coef[a]) : WrapSub(x->coef[a], y->coef[a]);
        }
        break;
      case Op::kNeg:
        if (!x) continue;
        f.c0 = WrapNeg(x->c0);
        for (int a = 0; a < rank; ++a) f.coef[a] = WrapNeg(x->coef[a]);
        break;
      case Op::kMul: {
        if (!x || !y) continue;
        if (!IsConstant(*x, rank) && !IsConstant(*y, rank)) continue;
        const Affine& v = IsConstant(*x, rank) ? *y : *x;
        const int64_t k = IsConstant(*x, rank) ? x->c0 : y->c0;
        f.c0 = WrapMul(v.c0, k);
        for (int a = 0; a < rank; ++a) f.coef[a] = WrapMul(v.coef[a], k);
        break;
      }
      default:
        continue;
    }
    ok[id] = 1;
  }
}

// Nodes computed from their form rather than from their operands.
bool FilledFromForm(const Node& node, bool affine) {
  return affine && (node.op == Op::kAdd || node.op == Op::kSub || node.op == Op::kMul || node.op == Op::kNeg);
}

// v[j] += base + step * j for j < n (exact: neighbouring runs must not be touched).
inline void AddIota(int64_t* __restrict v, int64_t base, int64_t step, int n) {
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) v[j + k] = WrapAdd(v[j + k], WrapAdd(base, WrapMul(step, j + k)));
  }
  for (; j < n; ++j) v[j] = WrapAdd(v[j], WrapAdd(base, WrapMul(step, j)));
}

// Adds k * coordinate for an axis (or merged axes) of stride s and extent d to the values
// of the domain elements [first, first + n).
void AddCoordRuns(int64_t* v, int64_t first, int n, int64_t k, int64_t s, int64_t d) {
  int64_t c = (first / s) % d;
  int j = 0;
  if (s == 1) {
    while (j < n) {
      const int len = static_cast<int>(std::min<int64_t>(d - c, n - j));
      AddIota(v + j, WrapMul(k, c), k, len);
      j += len;
      c = 0;
    }
    return;
  }
  int64_t left = s - first % s;
  while (j < n) {
    const int len = static_cast<int>(std::min<int64_t>(left, n - j));
    AddIota(v + j, WrapMul(k, c), 0, len);
    j += len;
    left = s;
    if (++c == d) c = 0;
  }
}

// The values of form f for the domain elements [first, first + n), m = Pad(n) written.
// Consecutive axes whose coefficients follow the row-major strides (coef[a] = coef[a+1] *
// dims[a+1]) merge into one run, so a form equal to kLinear is a single iota.
void FillFormRun(int64_t* v, const Affine& f, int64_t first, int n, int m, const int64_t* dims,
                 const int64_t* strides, int rank) {
  FillPadded(v, f.c0, m);
  if (n == 0) return;
  int64_t gk = 0, gs = 1, gd = 1;
  bool open = false;
  auto flush = [&] {
    if (open && gk != 0) AddCoordRuns(v, first, n, gk, gs, gd);
  };
  for (int a = rank - 1; a >= 0; --a) {
    if (dims[a] == 1) continue;
    if (open && f.coef[a] == WrapMul(gk, gd)) {
      gd *= dims[a];
      continue;
    }
    flush();
    gk = f.coef[a];
    gs = strides[a];
    gd = dims[a];
    open = true;
  }
  flush();
}

// ---- Block evaluation ----------------------------------------------------------------------

// f over the node's own type (x and result of one type).
template <typename F>
void Unary(ScalarType t, uint8_t* o, const uint8_t* x, int n, F f) {
  switch (t) {
    case ScalarType::kI64:
      Map1<int64_t, int64_t>(o, x, n, f);
      return;
    case ScalarType::kF32:
      Map1<float, float>(o, x, n, f);
      return;
    case ScalarType::kF64:
      Map1<double, double>(o, x, n, f);
      return;
  }
}
template <typename F>
void FloatUnary(ScalarType t, uint8_t* o, const uint8_t* x, int n, F f) {
  if (t == ScalarType::kF32)
    Map1<float, float>(o, x, n, f);
  else
    Map1<double, double>(o, x, n, f);
}
template <typename F>
void Binary(ScalarType t, uint8_t* o, const uint8_t* x, const uint8_t* y, int n, F f) {
  switch (t) {
    case ScalarType::kI64:
      Map2<int64_t, int64_t>(o, x, y, n, f);
      return;
    case ScalarType::kF32:
      Map2<float, float>(o, x, y, n, f);
      return;
    case ScalarType::kF64:
      Map2<double, double>(o, x, y, n, f);
      return;
  }
}
// Comparisons: operands of type `t`, kI64 result.
template <typename F>
void Compare(ScalarType t, uint8_t* o, const uint8_t* x, const uint8_t* y, int n, F f) {
  auto g = [&](auto a, auto b) { return static_cast<int64_t>(f(a, b)); };
  switch (t) {
    case ScalarType::kI64:
      Map2<int64_t, int64_t>(o, x, y, n, g);
      return;
    case ScalarType::kF32:
      Map2<int64_t, float>(o, x, y, n, g);
      return;
    case ScalarType::kF64:
      Map2<int64_t, double>(o, x, y, n, g);
      return;
  }
}

template <typename T>
void SelectT(T* __restrict po, const int64_t* __restrict pc, const T* __restrict py, const T* __restrict pz,
             int m) {
  for (int j = 0; j < m; j += kLanes) {
    for (int k = 0; k < kLanes; ++k) po[j + k] = pc[j + k] != 0 ? py[j + k] : pz[j + k];
  }
}
template <typename T>
void Select(void* o, const void* cond, const void* y, const void* z, int m) {
  SelectT(static_cast<T*>(o), static_cast<const int64_t*>(cond), static_cast<const T*>(y),
          static_cast<const T*>(z), m);
}

// 1 when every cond[j] (j < n) is nonzero, 0 when every one is zero, -1 when they differ.
inline int Uniform(const int64_t* __restrict cond, int n) {
  if (n == 0) return 1;
  uint64_t any = 0, all = 1;
  for (int j = 0; j < n; ++j) {
    any |= cond[j] != 0;
    all &= cond[j] != 0;
  }
  return all ? 1 : any ? -1 : 0;
}

// What went wrong in a block, reported after it.
struct Fault {
  int32_t node = -1;
  int64_t index = 0;
  int64_t bound = 0;
};

// Everything a block evaluation reads.
struct Eval {
  const Program* p = nullptr;
  std::span<const TensorRef> inputs;
  uint8_t* values = nullptr;
  size_t slot_bytes = 0;
  // The block elements' linear indices and coordinates. They live in the slot of the first
  // kLinear / kCoord(a) node (its owner), so that node costs nothing; others copy them.
  int64_t* linear = nullptr;
  int64_t* coord[kMaxRank] = {};
  int32_t linear_owner = -1;
  int32_t coord_owner[kMaxRank] = {-1, -1, -1, -1, -1, -1, -1, -1};
  const uint8_t* acc = nullptr;  // reduction k at acc + k * block * 8
  // Affine forms (see ComputeAffine) and the domain, for nodes filled from their form.
  const Affine* forms = nullptr;
  const uint8_t* affine = nullptr;
  const int64_t* dims = nullptr;
  const int64_t* strides = nullptr;
  int rank = 0;
  // The block is the domain elements [run_first, run_first + n) when >= 0; otherwise its
  // elements' coordinates are in coord[] for every axis a filled form needs.
  int64_t run_first = -1;
  // Segments (see "Per-segment values"): seg_len 0 when off.
  int64_t seg_len = 0;
  uint32_t seg_axes = 0;
  const uint32_t* deps = nullptr;
  int64_t* segidx = nullptr;  // room for a load's index per segment
  uint8_t* computed = nullptr;  // per node, for the current block
  int32_t* stack = nullptr;
  int block = 0;
  Fault fault;

  uint8_t* slot(int32_t node) const { return values + static_cast<size_t>(node) * slot_bytes; }
};

// Floor division and modulo of int64 values by a divisor d > 0 that is the same for the
// whole launch (a kConst or kSize node): the index maps of Resize, DepthToSpace and friends.
// A power of two 2^k is an arithmetic shift right by k and a mask (the modulo takes the
// divisor's sign, so it is non-negative). Otherwise, when every x of the block is in
// [0, 2^52), the quotient is trunc(double(x) / double(d)): both are exact in double, and the
// correctly rounded quotient cannot reach q + 1 because d * (q + 1) <= x + d < 2^53. Else
// (negative or huge x) the general integer division.
struct ConstDivisor {
  int64_t d = 0;  // 0: not a launch constant, or not positive
  int shift = -1;  // k when d = 2^k
};

ConstDivisor DivisorOf(const Eval& ev, int32_t id) {
  const Node& n = ev.p->nodes[id];
  if (n.type != ScalarType::kI64 || (n.op != Op::kConst && n.op != Op::kSize)) return {};
  const int64_t v = n.op == Op::kConst ? n.i : As<int64_t>(ev.slot(id))[0];
  if (v <= 0) return {};
  return {v, (v & (v - 1)) == 0 ? __builtin_ctzll(static_cast<uint64_t>(v)) : -1};
}

inline bool AllBelow2Pow52(const int64_t* __restrict x, int n) {
  uint64_t high = 0;  // the bits of 2^52 and above, the sign bit included
  for (int j = 0; j < n; ++j) high |= static_cast<uint64_t>(x[j]);
  return (high >> 52) == 0;
}

// o = floor(x / d) (mod = false) or x mod d (mod = true) for the m = Pad(n) values (those
// past n only need to be harmless); false when the general division must run instead.
bool DivideByConstant(const ConstDivisor& c, bool mod, uint8_t* o, const uint8_t* x, int n, int m) {
  if (c.d <= 0) return false;
  if (c.shift >= 0) {
    if (mod)
      Map1<int64_t, int64_t>(o, x, m, [mask = c.d - 1](int64_t v) { return v & mask; });
    else
      Map1<int64_t, int64_t>(o, x, m, [k = c.shift](int64_t v) { return v >> k; });
    return true;
  }
  if (!AllBelow2Pow52(As<int64_t>(x), n)) return false;
  const double dd = static_cast<double>(c.d);
  if (mod) {
    Map1<int64_t, int64_t>(o, x, m, [dd, d = c.d](int64_t v) {
      return v - static_cast<int64_t>(static_cast<double>(v) / dd) * d;
    });
  } else {
    Map1<int64_t, int64_t>(o, x, m, [dd](int64_t v) { return static_cast<int64_t>(static_cast<double>(v) / dd); });
  }
  return true;
}

// Whether node id's values over the block are the run [*first, *first + n): kLinear, or a
// form equal to c0 + kLinear, in the contiguous layout.
bool IsKnownRun(const Eval& ev, int32_t id, int64_t* first) {
  if (ev.run_first < 0) return false;
  const Node& node = ev.p->nodes[id];
  if (node.op == Op::kLinear) {
    *first = ev.run_first;
    return true;
  }
  if (!FilledFromForm(node, ev.affine[id])) return false;
  const Affine& f = ev.forms[id];
  for (int a = 0; a < ev.rank; ++a) {
    if (f.coef[a] != (ev.dims[a] != 1 ? ev.strides[a] : 0)) return false;
  }
  *first = WrapAdd(f.c0, ev.run_first);
  return true;
}

// Computes node `id` for the block's n = nr * nc elements (row-major: row r, column c at
// r * nc + c), and zeros or harmless values up to Pad(n). False on a failed load or index
// check (ev.fault says which).
bool EvalValues(Eval& ev, int32_t id, int nr, int nc) {
  const int n = nr * nc;
  const int m = Pad(n);
  const Node& node = ev.p->nodes[id];
  uint8_t* o = ev.slot(id);
  const uint8_t* x = node.a >= 0 ? ev.slot(node.a) : nullptr;
  const uint8_t* y = node.b >= 0 ? ev.slot(node.b) : nullptr;
  const ScalarType t = node.type;
  // Leaves write n values; their padding is zeroed so the pure ops read defined values.
  auto zero_tail = [&] {
    const size_t size = t == ScalarType::kF32 ? 4 : 8;
    std::memset(o + n * size, 0, (m - n) * size);
  };
  if (FilledFromForm(node, ev.affine[id])) {
    const Affine& f = ev.forms[id];
    int64_t* v = As<int64_t>(o);
    if (ev.run_first >= 0) {
      FillFormRun(v, f, ev.run_first, n, m, ev.dims, ev.strides, ev.rank);
    } else {
      for (int j = 0; j < n; ++j) v[j] = f.c0;
      for (int a = 0; a < ev.rank; ++a) {
        if (f.coef[a] == 0) continue;
        const int64_t k = f.coef[a];
        const int64_t* c = ev.coord[a];
        for (int j = 0; j < n; ++j) v[j] = WrapAdd(v[j], WrapMul(k, c[j]));
      }
      zero_tail();
    }
    return true;
  }
  switch (node.op) {
    case Op::kConst:
    case Op::kSize:
      return true;  // filled once per launch
    case Op::kCoord:
      if (id != ev.coord_owner[node.i]) std::memcpy(o, ev.coord[node.i], static_cast<size_t>(n) * 8);
      zero_tail();
      return true;
    case Op::kLinear:
      if (id != ev.linear_owner) std::memcpy(o, ev.linear, static_cast<size_t>(n) * 8);
      zero_tail();
      return true;
    case Op::kAcc: {
      const uint8_t* acc = ev.acc + static_cast<size_t>(node.i) * ev.block * 8;
      for (int r = 0; r < nr; ++r) {
        const size_t first = static_cast<size_t>(r) * nc;
        if (t == ScalarType::kI64) {
          const int64_t v = As<int64_t>(acc)[r];
          for (int c = 0; c < nc; ++c) As<int64_t>(o)[first + c] = v;
        } else if (t == ScalarType::kF32) {
          const float v = static_cast<float>(As<double>(acc)[r]);
          for (int c = 0; c < nc; ++c) As<float>(o)[first + c] = v;
        } else {
          const double v = As<double>(acc)[r];
          for (int c = 0; c < nc; ++c) As<double>(o)[first + c] = v;
        }
      }
      zero_tail();
      return true;
    }
    case Op::kLoad: {
      int64_t first = 0;
      const bool run = IsKnownRun(ev, node.a, &first);
      if (!LoadInput(ev.inputs[node.i], run ? nullptr : As<int64_t>(x), first, n, o, &ev.fault.index)) {
        ev.fault.node = id;
        ev.fault.bound = ev.inputs[node.i].num_elements;
        return false;
      }
      zero_tail();
      return true;
    }
    case Op::kCheckIndex: {
      const int64_t* px = As<int64_t>(x);
      const int64_t* py = As<int64_t>(y);
      uint64_t bad = 0;
      Map2<int64_t, int64_t>(o, x, y, m,
                             [](int64_t v, int64_t bound) { return v >= 0 && v < bound ? v : 0; });
      for (int j = 0; j < n; ++j)
        bad |= static_cast<uint64_t>(px[j] < 0) | static_cast<uint64_t>(px[j] >= py[j]);
      if (bad) {
        for (int j = 0; j < n; ++j) {
          if (px[j] < 0 || px[j] >= py[j]) {
            ev.fault = {id, px[j], py[j]};
            return false;
          }
        }
      }
      return true;
    }
    case Op::kCast:
      switch (ev.p->nodes[node.a].type) {
        case ScalarType::kI64:
          CastTo<int64_t>(static_cast<DType>(node.i), x, o, m);
          break;
        case ScalarType::kF32:
          CastTo<float>(static_cast<DType>(node.i), x, o, m);
          break;
        case ScalarType::kF64:
          CastTo<double>(static_cast<DType>(node.i), x, o, m);
          break;
      }
      return true;
    case Op::kNeg:
      if (t == ScalarType::kI64)
        Map1<int64_t, int64_t>(o, x, m, WrapNeg);
      else
        FloatUnary(t, o, x, m, [](auto v) { return -v; });
      return true;
    case Op::kAbs:
      if (t == ScalarType::kI64)
        Map1<int64_t, int64_t>(o, x, m, [](int64_t v) { return v < 0 ? WrapNeg(v) : v; });
      else
        FloatUnary(t, o, x, m, [](auto v) { return std::fabs(v); });
      return true;
    case Op::kSign:
      Unary(t, o, x, m, [](auto v) {
        using T = decltype(v);
        return v > T(0) ? T(1) : v < T(0) ? T(-1) : v;  // 0 stays 0, NaN stays NaN
      });
      return true;
    case Op::kNot:
      Map1<int64_t, int64_t>(o, x, m, [](int64_t v) -> int64_t { return v == 0; });
      return true;
    case Op::kFloor:
      FloatUnary(t, o, x, m, [](auto v) { return std::floor(v); });
      return true;
    case Op::kCeil:
      FloatUnary(t, o, x, m, [](auto v) { return std::ceil(v); });
      return true;
    // Half to even under the default rounding mode, as the CPU Round kernel does.
    case Op::kRound:
      FloatUnary(t, o, x, m, [](auto v) { return std::nearbyint(v); });
      return true;
    case Op::kSqrt:
      FloatUnary(t, o, x, m, [](auto v) { return std::sqrt(v); });
      return true;
    case Op::kExp:
      FloatUnary(t, o, x, m, [](auto v) { return std::exp(v); });
      return true;
    case Op::kLog:
      FloatUnary(t, o, x, m, [](auto v) { return std::log(v); });
      return true;
    case Op::kErf:
      FloatUnary(t, o, x, m, [](auto v) { return std::erf(v); });
      return true;
    case Op::kTanh:
      FloatUnary(t, o, x, m, [](auto v) { return std::tanh(v); });
      return true;
    case Op::kSigmoid:
      FloatUnary(t, o, x, m, [](auto v) {
        using T = decltype(v);
        return T(1) / (T(1) + std::exp(-v));
      });
      return true;
    case Op::kSin:
      FloatUnary(t, o, x, m, [](auto v) { return std::sin(v); });
      return true;
    case Op::kCos:
      FloatUnary(t, o, x, m, [](auto v) { return std::cos(v); });
      return true;
    case Op::kTan:
      FloatUnary(t, o, x, m, [](auto v) { return std::tan(v); });
      return true;
    case Op::kAsin:
      FloatUnary(t, o, x, m, [](auto v) { return std::asin(v); });
      return true;
    case Op::kAcos:
      FloatUnary(t, o, x, m, [](auto v) { return std::acos(v); });
      return true;
    case Op::kAtan:
      FloatUnary(t, o, x, m, [](auto v) { return std::atan(v); });
      return true;
    case Op::kSinh:
      FloatUnary(t, o, x, m, [](auto v) { return std::sinh(v); });
      return true;
    case Op::kCosh:
      FloatUnary(t, o, x, m, [](auto v) { return std::cosh(v); });
      return true;
    case Op::kReciprocal:
      FloatUnary(t, o, x, m, [](auto v) { return decltype(v)(1) / v; });
      return true;
    case Op::kIsNaN:
      if (ev.p->nodes[node.a].type == ScalarType::kF32) {
        Map1<int64_t, float>(o, x, m, [](float v) -> int64_t { return v != v; });
      } else {
        Map1<int64_t, double>(o, x, m, [](double v) -> int64_t { return v != v; });
      }
      return true;
    case Op::kAdd:
      if (t == ScalarType::kI64)
        Map2<int64_t, int64_t>(o, x, y, m, WrapAdd);
      else
        Binary(t, o, x, y, m, [](auto a, auto b) { return a + b; });
      return true;
    case Op::kSub:
      if (t == ScalarType::kI64)
        Map2<int64_t, int64_t>(o, x, y, m, WrapSub);
      else
        Binary(t, o, x, y, m, [](auto a, auto b) { return a - b; });
      return true;
    case Op::kMul:
      if (t == ScalarType::kI64)
        Map2<int64_t, int64_t>(o, x, y, m, WrapMul);
      else
        Binary(t, o, x, y, m, [](auto a, auto b) { return a * b; });
      return true;
    case Op::kDiv:
      if (t == ScalarType::kI64)
        Map2<int64_t, int64_t>(o, x, y, m, DivI);
      else
        Binary(t, o, x, y, m, [](auto a, auto b) { return a / b; });
      return true;
    case Op::kFloorDiv:
      if (!DivideByConstant(DivisorOf(ev, node.b), false, o, x, n, m)) Map2<int64_t, int64_t>(o, x, y, m, FloorDivI);
      return true;
    case Op::kMod:
      if (t != ScalarType::kI64)
        Binary(t, o, x, y, m, [](auto a, auto b) { return ModF(a, b); });
      else if (!DivideByConstant(DivisorOf(ev, node.b), true, o, x, n, m))
        Map2<int64_t, int64_t>(o, x, y, m, ModI);
      return true;
    case Op::kFmod:
      if (t == ScalarType::kI64)
        Map2<int64_t, int64_t>(o, x, y, m, FmodI);
      else
        Binary(t, o, x, y, m, [](auto a, auto b) { return std::fmod(a, b); });
      return true;
    case Op::kPow:
      if (t == ScalarType::kF32)
        Map2<float, float>(o, x, y, m, [](float a, float b) { return std::pow(a, b); });
      else
        Map2<double, double>(o, x, y, m, [](double a, double b) { return std::pow(a, b); });
      return true;
    case Op::kMin:
      Binary(t, o, x, y, m, [](auto a, auto b) { return MinOf(a, b); });
      return true;
    case Op::kMax:
      Binary(t, o, x, y, m, [](auto a, auto b) { return MaxOf(a, b); });
      return true;
    case Op::kEq:
      Compare(ev.p->nodes[node.a].type, o, x, y, m, [](auto a, auto b) { return a == b; });
      return true;
    case Op::kLt:
      Compare(ev.p->nodes[node.a].type, o, x, y, m, [](auto a, auto b) { return a < b; });
      return true;
    case Op::kLe:
      Compare(ev.p->nodes[node.a].type, o, x, y, m, [](auto a, auto b) { return a <= b; });
      return true;
    case Op::kAnd:
      Map2<int64_t, int64_t>(o, x, y, m, [](int64_t a, int64_t b) -> int64_t { return (a != 0) & (b != 0); });
      return true;
    case Op::kOr:
      Map2<int64_t, int64_t>(o, x, y, m, [](int64_t a, int64_t b) -> int64_t { return (a != 0) | (b != 0); });
      return true;
    case Op::kXor:
      Map2<int64_t, int64_t>(o, x, y, m,
                             [](int64_t a, int64_t b) -> int64_t { return (a != 0) != (b != 0); });
      return true;
    case Op::kSelect:
      // A uniform condition: only the chosen operand was computed (see Demand).
      if (const int which = Uniform(As<int64_t>(x), n); which >= 0) {
        std::memcpy(o, which ? y : ev.slot(node.c), static_cast<size_t>(m) * (t == ScalarType::kF32 ? 4 : 8));
        return true;
      }
      switch (t) {
        case ScalarType::kI64:
          Select<int64_t>(o, x, y, ev.slot(node.c), m);
          break;
        case ScalarType::kF32:
          Select<float>(o, x, y, ev.slot(node.c), m);
          break;
        case ScalarType::kF64:
          Select<double>(o, x, y, ev.slot(node.c), m);
          break;
      }
      return true;
  }
  return true;
}

// ---- Uniform values ------------------------------------------------------------------------
//
// In the contiguous layout, a value that is the same for every element of the block (a
// constant, the coordinate along an axis the block does not cross, and what is computed from
// those alone: a channel's scale and shift, a gather's base offset, a concat's branch index)
// is computed for one element and kept in the first kLanes elements of its slot. It is
// broadcast over the block only when something reads all of it: a node that is not uniform,
// an output or a reduction. ev.computed[id] holds the state of a node for the block:
constexpr uint8_t kComputed = 1;       // every element (constants: from the launch)
constexpr uint8_t kUniform = 2;        // one value, in the first kLanes elements only
constexpr uint8_t kUniformFilled = 3;  // one value, broadcast over the block
constexpr uint8_t kSegments = 4;       // one value per segment (below), in the first elements

// Whether the coordinate along axis a is the same for the run [run_first, run_first + n).
bool AxisUniform(const Eval& ev, int a, int n) {
  return ev.dims[a] == 1 || ev.run_first / ev.strides[a] == (ev.run_first + n - 1) / ev.strides[a];
}

bool IsUniformValue(const Eval& ev, int32_t id) {
  const Op op = ev.p->nodes[id].op;
  return ev.computed[id] == kUniform || ev.computed[id] == kUniformFilled || op == Op::kConst || op == Op::kSize;
}

// ---- Per-segment values --------------------------------------------------------------------
//
// In the contiguous layout, a value that depends only on the outer axes 0..k of the domain
// (ev.seg_axes) is the same over each segment of seg_len = strides[k] consecutive elements: a
// channel's scale read from an [N, C, 1, 1] tensor, and what is computed from it alone (an
// SE block's HardSigmoid). A block longer than a segment holds it as one value per segment
// it touches (the first and last may be partial), computed over those few elements, and
// spreads it over the block when something reads all of it, as for uniform values. RunFused
// picks k, when some load reads such an index and seg_len >= kMinSegment; kCoord and kLinear
// nodes, selects, accumulators and index checks are always computed whole (a load at a kCoord
// takes its index per segment from the coordinate's form).

// The number of segments the block [run_first, run_first + n) touches, n >= 1.
int SegmentCount(const Eval& ev, int n) {
  return static_cast<int>((ev.run_first + n - 1) / ev.seg_len - ev.run_first / ev.seg_len + 1);
}

// Spreads the per-segment values v[0, count) over the block's n elements (and Pad(n)).
// From the last segment back: segment g starts at element g or later, so the values not yet
// spread are never overwritten.
template <typename T>
void SpreadSegments(T* v, int64_t first, int64_t len, int count, int n) {
  for (int j = n; j < Pad(n); ++j) v[j] = v[count - 1];
  const int64_t g0 = first / len;
  for (int g = count - 1; g >= 0; --g) {
    const T x = v[g];
    const int begin = g == 0 ? 0 : static_cast<int>((g0 + g) * len - first);
    const int end = static_cast<int>(std::min<int64_t>((g0 + g + 1) * len - first, n));
    int j = begin;
    for (; j + kLanes <= end; j += kLanes) {
      for (int k = 0; k < kLanes; ++k) v[j + k] = x;
    }
    for (; j < end; ++j) v[j] = x;
  }
}

// Copies element 0 of node id's slot to elements [1, count), count a multiple of kLanes.
void Broadcast(Eval& ev, int32_t id, int count) {
  uint8_t* o = ev.slot(id);
  if (ev.p->nodes[id].type == ScalarType::kF32) {
    float* v = As<float>(o);
    const float x = v[0];
    for (int j = 0; j < count; j += kLanes) {
      for (int k = 0; k < kLanes; ++k) v[j + k] = x;
    }
  } else {
    int64_t* v = As<int64_t>(o);  // the bits of an int64 or a double
    const int64_t x = v[0];
    FillPadded(v, x, count);
  }
}

// Makes a uniform or per-segment value whole over the block's n elements.
void FillUniform(Eval& ev, int32_t id, int n) {
  if (ev.computed[id] == kSegments) {
    uint8_t* o = ev.slot(id);
    const int count = SegmentCount(ev, n);
    if (ev.p->nodes[id].type == ScalarType::kF32)
      SpreadSegments(As<float>(o), ev.run_first, ev.seg_len, count, n);
    else
      SpreadSegments(As<int64_t>(o), ev.run_first, ev.seg_len, count, n);  // int64 or double bits
    ev.computed[id] = kComputed;
    return;
  }
  if (ev.computed[id] != kUniform) return;
  Broadcast(ev, id, Pad(n));
  ev.computed[id] = kUniformFilled;
}

// A select's choice from its computed condition: 1 all true, 0 all false, -1 mixed.
int Choice(const Eval& ev, int32_t cond, int n) {
  const int64_t* c = As<int64_t>(ev.slot(cond));
  if (ev.computed[cond] == kSegments) return Uniform(c, SegmentCount(ev, n));
  return IsUniformValue(ev, cond) ? c[0] != 0 : Uniform(c, n);
}

// Computes node `id` (not uniform over the block's n elements) once per segment when it
// depends on the segment axes only and its operands are uniform or per segment: kSegments;
// 0 when its load failed; -1 when it must be computed whole.
int EvalSegments(Eval& ev, int32_t id, int n) {
  const Node& node = ev.p->nodes[id];
  if (ev.seg_len == 0 || (ev.deps[id] & ~ev.seg_axes) != 0) return -1;
  if (node.op == Op::kCoord || node.op == Op::kLinear || node.op == Op::kSelect || node.op == Op::kAcc ||
      node.op == Op::kCheckIndex)
    return -1;
  const int count = SegmentCount(ev, n);
  uint8_t* o = ev.slot(id);
  // Form f over the segments: the segment axes with strides in units of segments.
  auto fill_form = [&](const Affine& f, int64_t* v) {
    int64_t strides[kMaxRank];
    int rank = 0;
    for (; rank < ev.rank && ((ev.seg_axes >> rank) & 1u); ++rank) strides[rank] = ev.strides[rank] / ev.seg_len;
    FillFormRun(v, f, ev.run_first / ev.seg_len, count, Pad(count), ev.dims, strides, rank);
  };
  if (FilledFromForm(node, ev.affine[id])) {
    fill_form(ev.forms[id], As<int64_t>(o));
    return kSegments;
  }
  if (node.op == Op::kLoad) {
    // Not uniform, so its index is per segment, or a coordinate computed whole.
    const int64_t* idx = As<int64_t>(ev.slot(node.a));
    if (ev.computed[node.a] != kSegments) {
      if (!ev.affine[node.a]) return -1;
      fill_form(ev.forms[node.a], ev.segidx);
      idx = ev.segidx;
    }
    if (!LoadInput(ev.inputs[node.i], idx, 0, count, o, &ev.fault.index)) {
      ev.fault.node = id;
      ev.fault.bound = ev.inputs[node.i].num_elements;
      return 0;
    }
    const size_t size = node.type == ScalarType::kF32 ? 4 : 8;
    std::memset(o + count * size, 0, (Pad(count) - count) * size);
    return kSegments;
  }
  for (int32_t operand : {node.a, node.b, node.c}) {
    if (operand >= 0 && ev.computed[operand] != kSegments && !IsUniformValue(ev, operand)) return -1;
  }
  for (int32_t operand : {node.a, node.b, node.c}) {
    if (operand >= 0 && ev.computed[operand] == kUniform) Broadcast(ev, operand, Pad(count));
  }
  return EvalValues(ev, id, 1, count) ? kSegments : 0;
}

// Computes node `id` (its operands computed) and returns its state, 0 when EvalValues
// failed.
uint8_t EvalNode(Eval& ev, int32_t id, int nr, int nc) {
  const int n = nr * nc;
  const Node& node = ev.p->nodes[id];
  if (ev.run_first < 0 || n <= 1) return EvalValues(ev, id, nr, nc) ? kComputed : 0;
  const bool form = FilledFromForm(node, ev.affine[id]);
  bool uniform = true;
  if (node.op == Op::kLinear || node.op == Op::kAcc) {
    uniform = false;
  } else if (node.op == Op::kCoord) {
    uniform = AxisUniform(ev, static_cast<int>(node.i), n);
  } else if (form) {
    for (int a = 0; a < ev.rank; ++a) uniform = uniform && (ev.forms[id].coef[a] == 0 || AxisUniform(ev, a, n));
  } else if (node.op == Op::kSelect) {
    const int which = Choice(ev, node.a, n);
    uniform = which >= 0 && IsUniformValue(ev, node.a) && IsUniformValue(ev, which ? node.b : node.c);
  } else {
    for (int32_t operand : {node.a, node.b, node.c}) uniform = uniform && (operand < 0 || IsUniformValue(ev, operand));
  }
  // Coordinates and forms are filled runs, about the cost of a broadcast: computed whole
  // (unless per segment).
  if (!uniform && form) {
    if (const int state = EvalSegments(ev, id, n); state >= 0) return static_cast<uint8_t>(state);
  }
  if (node.op == Op::kCoord || form) {
    if (!EvalValues(ev, id, nr, nc)) return 0;
    return uniform ? kUniformFilled : kComputed;
  }
  if (uniform) {
    if (!EvalValues(ev, id, 1, 1)) return 0;
    Broadcast(ev, id, kLanes);
    return kUniform;
  }
  if (const int state = EvalSegments(ev, id, n); state >= 0) return static_cast<uint8_t>(state);
  for (int32_t operand : {node.a, node.b, node.c}) {
    if (operand >= 0) FillUniform(ev, operand, n);
  }
  return EvalValues(ev, id, nr, nc) ? kComputed : 0;
}

// Evaluates node `root` for the block and, first, every node it needs that the block has not
// computed yet (ev.computed). A kSelect whose condition is the same over the whole block
// needs only the chosen operand: the other branch of a Concat, Where or Pad is skipped. The
// stack holds a path of operands, so its depth is at most the number of nodes. The root's
// value is whole over the block on return.
bool Demand(Eval& ev, int32_t root, int nr, int nc) {
  const int n = nr * nc;
  const std::vector<Node>& nodes = ev.p->nodes;
  uint8_t* computed = ev.computed;
  if (computed[root]) {
    FillUniform(ev, root, n);
    return true;
  }
  int32_t* stack = ev.stack;
  int sp = 0;
  stack[sp++] = root;
  while (sp > 0) {
    const int32_t id = stack[sp - 1];
    const Node& node = nodes[id];
    int32_t next = -1;
    if (node.op == Op::kSelect) {
      if (!computed[node.a]) {
        next = node.a;
      } else {
        const int which = Choice(ev, node.a, n);
        if (which != 0 && !computed[node.b])
          next = node.b;
        else if (which != 1 && !computed[node.c])
          next = node.c;
      }
    } else if (!FilledFromForm(node, ev.affine[id])) {
      if (node.a >= 0 && !computed[node.a])
        next = node.a;
      else if (node.b >= 0 && !computed[node.b])
        next = node.b;
      else if (node.c >= 0 && !computed[node.c])
        next = node.c;
    }
    if (next >= 0) {
      stack[sp++] = next;
      continue;
    }
    const uint8_t state = EvalNode(ev, id, nr, nc);
    if (state == 0) return false;
    computed[id] = state;
    --sp;
  }
  FillUniform(ev, root, n);
  return true;
}

// Accumulators hold double for float reductions (a kF32 sum accumulates in double; kAcc
// rounds the result to float) and int64 for kI64.
void InitAcc(ReduceOp op, ScalarType t, uint8_t* acc, int nr) {
  if (t == ScalarType::kI64) {
    int64_t v = 0;
    switch (op) {
      case ReduceOp::kSum:
        v = 0;
        break;
      case ReduceOp::kProd:
        v = 1;
        break;
      case ReduceOp::kMax:
        v = std::numeric_limits<int64_t>::min();
        break;
      case ReduceOp::kMin:
        v = std::numeric_limits<int64_t>::max();
        break;
    }
    for (int r = 0; r < nr; ++r) As<int64_t>(acc)[r] = v;
  } else {
    double v = 0;
    switch (op) {
      case ReduceOp::kSum:
        v = 0;
        break;
      case ReduceOp::kProd:
        v = 1;
        break;
      case ReduceOp::kMax:
        v = -std::numeric_limits<double>::infinity();
        break;
      case ReduceOp::kMin:
        v = std::numeric_limits<double>::infinity();
        break;
    }
    for (int r = 0; r < nr; ++r) As<double>(acc)[r] = v;
  }
}

template <typename T, typename A>
A FoldRow(ReduceOp op, A a, const T* v, int nc) {
  switch (op) {
    case ReduceOp::kSum:
      if constexpr (std::is_same_v<T, int64_t>) {
        for (int c = 0; c < nc; ++c) a = WrapAdd(a, v[c]);
      } else {
        // Four partial sums, so the adds overlap instead of waiting on each other.
        A s[4] = {0, 0, 0, 0};
        int c = 0;
        for (; c + 4 <= nc; c += 4) {
          for (int k = 0; k < 4; ++k) s[k] += v[c + k];
        }
        for (; c < nc; ++c) s[0] += v[c];
        a += (s[0] + s[1]) + (s[2] + s[3]);
      }
      return a;
    case ReduceOp::kProd:
      if constexpr (std::is_same_v<T, int64_t>) {
        for (int c = 0; c < nc; ++c) a = WrapMul(a, v[c]);
        return a;
      } else {
        T p = static_cast<T>(a);  // a product in the value's own precision
        for (int c = 0; c < nc; ++c) p *= v[c];
        return p;
      }
    case ReduceOp::kMax: {
      T m = static_cast<T>(a);
      for (int c = 0; c < nc; ++c) m = MaxOf(v[c], m);
      return m;
    }
    case ReduceOp::kMin: {
      T m = static_cast<T>(a);
      for (int c = 0; c < nc; ++c) m = MinOf(v[c], m);
      return m;
    }
  }
  return a;
}

// Folds the block's values (nr rows of nc columns) into the rows' accumulators.
void Fold(ReduceOp op, ScalarType t, const uint8_t* v, int nr, int nc, uint8_t* acc) {
  for (int r = 0; r < nr; ++r) {
    const size_t first = static_cast<size_t>(r) * nc;
    switch (t) {
      case ScalarType::kI64:
        As<int64_t>(acc)[r] = FoldRow(op, As<int64_t>(acc)[r], As<int64_t>(v) + first, nc);
        break;
      case ScalarType::kF32:
        As<double>(acc)[r] = FoldRow(op, As<double>(acc)[r], As<float>(v) + first, nc);
        break;
      case ScalarType::kF64:
        As<double>(acc)[r] = FoldRow(op, As<double>(acc)[r], As<double>(v) + first, nc);
        break;
    }
  }
}

// An odometer over a subset of the domain's axes, tracking the linear offset of its
// coordinates in the full domain.
struct Odometer {
  int n = 0;
  int axes[kMaxRank] = {};
  int64_t dims[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int64_t idx[kMaxRank] = {};
  int64_t offset = 0;

  void Seek(int64_t linear) {
    offset = 0;
    for (int k = n - 1; k >= 0; --k) {
      idx[k] = dims[k] > 0 ? linear % dims[k] : 0;
      linear = dims[k] > 0 ? linear / dims[k] : 0;
      offset += idx[k] * strides[k];
    }
  }
  void Next() {
    for (int k = n - 1; k >= 0; --k) {
      if (++idx[k] < dims[k]) {
        offset += strides[k];
        return;
      }
      offset -= (dims[k] - 1) * strides[k];
      idx[k] = 0;
    }
  }
};

std::string DimsText(const std::vector<int64_t>& dims, std::span<const int64_t> sizes) {
  std::string s = "[";
  bool symbolic = false;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (k) s += ", ";
    if (dims[k] >= 0) {
      s += std::to_string(dims[k]);
    } else {
      symbolic = true;
      s += "s" + std::to_string(-(dims[k] + 1));
    }
  }
  s += "]";
  if (symbolic) {
    s += " with";
    for (size_t k = 0; k < sizes.size(); ++k)
      s += (k ? ", s" : " s") + std::to_string(k) + " = " + std::to_string(sizes[k]);
  }
  return s;
}

// The element count of encoded dims under `sizes`; false on an overflow or a bad size index.
bool CountOf(const std::vector<int64_t>& dims, std::span<const int64_t> sizes, int64_t* count) {
  int64_t c = 1;
  for (int64_t d : dims) {
    int64_t v = d;
    if (d < 0) {
      const uint64_t s = static_cast<uint64_t>(-(d + 1));
      if (s >= sizes.size()) return false;
      v = sizes[s];
    }
    if (v < 0 || __builtin_mul_overflow(c, v, &c)) return false;
  }
  *count = c;
  return true;
}

Status CheckTensors(const std::vector<fused::TensorSpec>& specs, std::span<const TensorRef> refs,
                    std::span<const int64_t> sizes, const char* what) {
  if (refs.size() != specs.size()) {
    return InvalidArgument(std::string("fused program: ") + std::to_string(refs.size()) + " " + what +
                           "s given, expected " + std::to_string(specs.size()));
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    auto where = [&] { return std::string("fused program: ") + what + " " + std::to_string(k); };
    if (refs[k].dtype != specs[k].dtype) {
      return InvalidArgument(where() + " has dtype " + DTypeStr(refs[k].dtype) + ", expected " +
                             DTypeStr(specs[k].dtype));
    }
    int64_t count = 0;
    if (!CountOf(specs[k].dims, sizes, &count)) {
      return InvalidArgument(where() + ": shape " + DimsText(specs[k].dims, sizes) + " is negative or overflows int64");
    }
    if (refs[k].num_elements != count) {
      return InvalidArgument(where() + " has " + std::to_string(refs[k].num_elements) +
                             " elements, expected " + std::to_string(count) + " (shape " +
                             DimsText(specs[k].dims, sizes) + ")");
    }
    if (count > 0 && refs[k].data == nullptr) return InvalidArgument(where() + " has no data");
  }
  return Status::Ok();
}

// The error a block's fault stands for.
Status FaultStatus(const Program& p, const Fault& f) {
  const Node& node = p.nodes[f.node];
  if (node.op == Op::kCheckIndex) {
    const std::string what =
        node.i >= 0 && static_cast<size_t>(node.i) < p.checks.size() ? p.checks[node.i] : "index check";
    return InvalidArgument(what + ": " + fused::IndexOutOfRange(f.index, f.bound));
  }
  return Internal("fused program: node " + std::to_string(f.node) + " loads input " + std::to_string(node.i) +
                  " at index " + std::to_string(f.index) + ", but it has " + std::to_string(f.bound) +
                  " elements (a compiler bug: loads are in range by construction)");
}

}  // namespace

size_t FusedWorkspaceBytes(const fused::Program& program, int threads) {
  const Layout l = MakeLayout(program);
  return SliceBytes(l) * static_cast<size_t>(std::max(threads, 1)) + 64;
}

Status RunFused(const fused::Program& p, std::span<const TensorRef> inputs,
                std::span<const TensorRef> outputs, std::span<const int64_t> sizes, void* workspace,
                size_t workspace_bytes, ThreadPool* threads) {
  const Layout l = MakeLayout(p);
  const size_t needed = SliceBytes(l) * static_cast<size_t>(threads ? threads->size() : 1) + 64;
  if (workspace == nullptr || workspace_bytes < needed) {
    return Internal("fused program: workspace of " + std::to_string(workspace_bytes) + " bytes given, " +
                    std::to_string(needed) + " needed");
  }
  if (sizes.size() != static_cast<size_t>(p.num_sizes)) {
    return InvalidArgument("fused program: " + std::to_string(sizes.size()) +
                           " size arguments given, expected " + std::to_string(p.num_sizes));
  }
  KILN_RETURN_IF_ERROR(CheckTensors(p.inputs, inputs, sizes, "input"));
  if (outputs.size() != p.outputs.size()) {
    return InvalidArgument("fused program: " + std::to_string(outputs.size()) + " outputs given, expected " +
                           std::to_string(p.outputs.size()));
  }

  // The domain, its rows and columns.
  const int rank = static_cast<int>(p.domain.size());
  if (rank > kMaxRank) return Internal("fused program: domain rank " + std::to_string(rank) + " exceeds 8");
  int64_t dims[kMaxRank] = {}, strides[kMaxRank] = {};
  int64_t total = 1, rows = 1, cols = 1;
  for (int a = 0; a < rank; ++a) {
    const int64_t d = p.domain[a];
    if (d < 0 && static_cast<uint64_t>(-(d + 1)) >= sizes.size()) {
      return Internal("fused program: domain dim " + std::to_string(a) + " names a missing size argument");
    }
    dims[a] = d >= 0 ? d : sizes[-(d + 1)];
    if (dims[a] < 0) {
      return InvalidArgument("fused program: domain dim " + std::to_string(a) + " is " + std::to_string(dims[a]) +
                             " (size argument " + std::to_string(-(d + 1)) + "), expected >= 0");
    }
    if (__builtin_mul_overflow(total, dims[a], &total)) {
      return InvalidArgument("fused program: domain " + DimsText(p.domain, sizes) + " is negative or overflows int64");
    }
  }
  for (int64_t a = rank - 1, s = 1; a >= 0; --a) {
    strides[a] = s;
    s *= dims[a];
  }
  Odometer row_od0, col_od0;  // each part copies them
  for (int a = 0; a < rank; ++a) {
    Odometer& od = (p.reduce_axes >> a) & 1u ? col_od0 : row_od0;
    od.axes[od.n] = a;
    od.dims[od.n] = dims[a];
    od.strides[od.n] = strides[a];
    ++od.n;
    ((p.reduce_axes >> a) & 1u ? cols : rows) *= dims[a];
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const TensorRef& o = outputs[k];
    auto where = [&] { return "fused program: output " + std::to_string(k); };
    const fused::Output& spec = p.outputs[k];
    if (o.dtype != spec.tensor.dtype) {
      return InvalidArgument(where() + " has dtype " + DTypeStr(o.dtype) + ", expected " +
                             DTypeStr(spec.tensor.dtype));
    }
    int64_t count = 0;
    if (!CountOf(spec.tensor.dims, sizes, &count)) {
      return InvalidArgument(where() + ": shape " + DimsText(spec.tensor.dims, sizes) + " is negative or overflows int64");
    }
    const int64_t expected = spec.per_row ? rows : total;
    if (o.num_elements != count || count != expected) {
      return InvalidArgument(where() + " has " + std::to_string(o.num_elements) + " elements, expected " +
                             std::to_string(count) + " (shape " + DimsText(spec.tensor.dims, sizes) +
                             "; the domain " + DimsText(p.domain, sizes) + " has " +
                             std::to_string(expected) + (spec.per_row ? " rows)" : " elements)"));
    }
    if (count > 0 && o.data == nullptr) return InvalidArgument(where() + " has no data");
  }
  if (rows == 0) return Status::Ok();

  // The analysis every part shares lives in slice 0 of the workspace: affine forms,
  // initial flags, need marks. Each part has its own slice for the rest (value slots, block
  // indices, accumulators).
  const size_t base =
      Align64(reinterpret_cast<uintptr_t>(workspace)) - reinterpret_cast<uintptr_t>(workspace);
  uint8_t* ws = static_cast<uint8_t*>(workspace) + base;
  const int B = l.block;
  const int const_fill = Pad(static_cast<int>(std::min<int64_t>(B, std::max(total, rows))));
  const size_t num_nodes = p.nodes.size();
  const size_t num_red = p.reductions.size();
  uint8_t* need = ws + l.marks;
  uint8_t* initial = ws + l.initial;
  for (const Node& node : p.nodes) {
    if (node.op == Op::kCoord && (node.i < 0 || node.i >= rank)) return Internal("fused program: kCoord axis out of range");
  }
  bool has_full = false, has_per_row = false;
  for (const fused::Output& o : p.outputs) (o.per_row ? has_per_row : has_full) = true;
  // With the reduced axes trailing (or none), every block is one run of consecutive domain
  // elements: indices and coordinates are runs, and stores are contiguous.
  const int num_reduced = __builtin_popcount(p.reduce_axes);
  const uint32_t all_axes = (1u << rank) - 1;
  const bool contiguous = p.reduce_axes == (all_axes & ~((1u << (rank - num_reduced)) - 1));
  Affine* forms = reinterpret_cast<Affine*>(ws + l.forms);
  uint8_t* affine = ws + l.affine;
  ComputeAffine(p, dims, strides, rank, sizes, forms, affine);
  for (size_t id = 0; id < num_nodes; ++id) {
    initial[id] = p.nodes[id].op == Op::kConst || p.nodes[id].op == Op::kSize;
  }

  // The axes each node depends on, and the segments (see "Per-segment values"): k is the
  // innermost axis that a load's index depends on last, over the loads whose index does not
  // depend on the innermost axis of extent > 1 and whose segments are long enough.
  uint32_t* deps = reinterpret_cast<uint32_t*>(ws + l.deps);
  uint32_t non_unit = 0;
  for (int a = 0; a < rank; ++a) non_unit |= dims[a] != 1 ? 1u << a : 0u;
  int seg_axis = -1;
  for (size_t id = 0; id < num_nodes; ++id) {
    const Node& node = p.nodes[id];
    uint32_t d = 0;
    if (node.op == Op::kCoord) {
      d = (1u << node.i) & non_unit;
    } else if (node.op == Op::kLinear || node.op == Op::kAcc) {
      d = non_unit;
    } else if (FilledFromForm(node, affine[id])) {
      for (int a = 0; a < rank; ++a) d |= forms[id].coef[a] != 0 ? 1u << a : 0u;
    } else {
      for (int32_t operand : {node.a, node.b, node.c}) d |= operand >= 0 ? deps[operand] : 0u;
    }
    deps[id] = d;
    if (node.op == Op::kLoad && d != 0 && non_unit != 0) {
      const int inner = 31 - __builtin_clz(d), last = 31 - __builtin_clz(non_unit);
      if (inner < last && strides[inner] >= kMinSegment) seg_axis = std::max(seg_axis, inner);
    }
  }
  const bool segments = contiguous && num_red == 0 && seg_axis >= 0;

  // What the passes may read (reductions 0..K-1, the full outputs as pass K, the per-row
  // outputs as pass K+1): kLinear, coordinates, and the coordinates of forms evaluated
  // outside runs (every block in the generic layout; per-row passes always).
  bool uses_linear = false, uses_coord[kMaxRank] = {};
  for (size_t pass = 0; pass < num_red + 2; ++pass) {
    std::memset(need, 0, num_nodes);
    if (pass < num_red) {
      need[p.reductions[pass].value] = 1;
    } else {
      for (const fused::Output& o : p.outputs) {
        if (o.per_row == (pass == num_red + 1)) need[o.value] = 1;
      }
    }
    for (size_t id = num_nodes; id-- > 0;) {
      const Node& node = p.nodes[id];
      if (!need[id]) continue;
      if (node.op == Op::kLinear) uses_linear = true;
      if (node.op == Op::kCoord) uses_coord[node.i] = true;
      if (FilledFromForm(node, affine[id])) {  // a form needs no operands
        if (!contiguous || pass == num_red + 1) {
          for (int a = 0; a < rank; ++a) uses_coord[a] |= forms[id].coef[a] != 0;
        }
        continue;
      }
      for (int32_t operand : {node.a, node.b, node.c}) {
        if (operand >= 0) need[operand] = 1;
      }
    }
  }
  const bool need_linear = uses_linear || (has_full && !contiguous);  // stores use linear[]

  // Units of work, the parts' grain: blocks of whole rows when a row fits in a block, else
  // single rows (a row's reductions stay in one part, so no sum is split across threads and
  // the results do not depend on the thread count).
  const bool whole_rows = cols <= B;
  const int64_t rows_per_block = !whole_rows ? 1 : cols == 0 ? B : B / cols;
  const int64_t units = (rows + rows_per_block - 1) / rows_per_block;
  // A unit's work is its node evaluations, so small launches stay on one thread.
  int64_t unit_work = 0;
  if (__builtin_mul_overflow(std::max<int64_t>(1, rows_per_block * cols), static_cast<int64_t>(num_nodes), &unit_work))
    unit_work = kMinPartWork;
  const int64_t min_units = MinItemsPerPart(unit_work);
  Fault faults[ThreadPool::kMaxThreads];
  bool failed[ThreadPool::kMaxThreads] = {};

  // Units [unit_begin, unit_end) with slice `part`; false on a fault (faults[part] says which).
  auto run_units = [&](int64_t unit_begin, int64_t unit_end, int part) {
    uint8_t* slice = ws + static_cast<size_t>(part) * SliceBytes(l);
    int64_t* linear = reinterpret_cast<int64_t*>(slice + l.linear);
    int64_t* coords = reinterpret_cast<int64_t*>(slice + l.coords);
    int64_t* rowbase = reinterpret_cast<int64_t*>(slice + l.rowbase);
    int64_t* rowcoord = reinterpret_cast<int64_t*>(slice + l.rowcoord);
    int64_t* coloff = reinterpret_cast<int64_t*>(slice + l.coloff);
    int64_t* colcoord = reinterpret_cast<int64_t*>(slice + l.colcoord);
    uint8_t* acc = slice + l.acc;
    auto acc_of = [&](size_t k) { return acc + k * B * 8; };
    Odometer row_od = row_od0, col_od = col_od0;

    Eval ev;
    ev.p = &p;
    ev.inputs = inputs;
    ev.values = slice + l.values;
    ev.slot_bytes = l.slot * 8;
    ev.linear = linear;
    for (int a = 0; a < rank; ++a) ev.coord[a] = coords + a * l.slot;
    ev.acc = acc;
    ev.block = B;
    ev.forms = forms;
    ev.affine = affine;
    ev.dims = dims;
    ev.strides = strides;
    ev.rank = rank;
    if (segments) {
      ev.seg_len = strides[seg_axis];
      ev.seg_axes = (2u << seg_axis) - 1;
    }
    ev.deps = deps;
    ev.segidx = reinterpret_cast<int64_t*>(slice + l.segidx);
    ev.computed = slice + l.computed;
    ev.stack = reinterpret_cast<int32_t*>(slice + l.stack);

    // The owners of the coordinates and of kLinear, and the constants (filled once).
    for (size_t id = 0; id < num_nodes; ++id) {
      const Node& node = p.nodes[id];
      uint8_t* s = ev.slot(static_cast<int32_t>(id));
      switch (node.op) {
        case Op::kLinear:
          if (ev.linear_owner < 0) {
            ev.linear_owner = static_cast<int32_t>(id);
            ev.linear = As<int64_t>(s);
          }
          break;
        case Op::kCoord:
          if (ev.coord_owner[node.i] < 0) {
            ev.coord_owner[node.i] = static_cast<int32_t>(id);
            ev.coord[node.i] = As<int64_t>(s);
          }
          break;
        // No block holds more than min(B, total) elements (or rows, in the per-row pass), so
        // a small launch fills only that much of a long block's slot.
        case Op::kSize:
          FillPadded(As<int64_t>(s), sizes[node.i], const_fill);
          break;
        case Op::kConst:
          if (node.type == ScalarType::kI64) {
            FillPadded(As<int64_t>(s), node.i, const_fill);
          } else if (node.type == ScalarType::kF32) {
            const float v = static_cast<float>(node.f);
            for (int j = 0; j < const_fill; ++j) As<float>(s)[j] = v;
          } else {
            for (int j = 0; j < const_fill; ++j) As<double>(s)[j] = node.f;
          }
          break;
        default:
          break;
      }
    }
    linear = ev.linear;
    auto reset = [&] { std::memcpy(ev.computed, initial, num_nodes); };

    // Column part of a block: columns [first, first + nc) of a row (generic layout).
    auto fill_columns = [&](int64_t first, int nc) {
      col_od.Seek(first);
      for (int c = 0; c < nc; ++c) {
        coloff[c] = col_od.offset;
        for (int k = 0; k < col_od.n; ++k) {
          if (uses_coord[col_od.axes[k]]) colcoord[col_od.axes[k] * B + c] = col_od.idx[k];
        }
        col_od.Next();
      }
    };
    // Row part: the next nr rows of row_od.
    auto fill_rows = [&](int nr) {
      for (int r = 0; r < nr; ++r) {
        rowbase[r] = row_od.offset;
        for (int k = 0; k < row_od.n; ++k) {
          if (uses_coord[row_od.axes[k]]) rowcoord[row_od.axes[k] * B + r] = row_od.idx[k];
        }
        row_od.Next();
      }
    };
    // Block elements, generic layout: nr rows x nc columns from the row and column parts.
    auto fill_block = [&](int nr, int nc) {
      if (need_linear) {
        for (int r = 0; r < nr; ++r) {
          int64_t* dst = linear + static_cast<size_t>(r) * nc;
          for (int c = 0; c < nc; ++c) dst[c] = rowbase[r] + coloff[c];
        }
      }
      for (int a = 0; a < rank; ++a) {
        if (!uses_coord[a]) continue;
        int64_t* dst = ev.coord[a];
        if ((p.reduce_axes >> a) & 1u) {
          for (int r = 0; r < nr; ++r) std::memcpy(dst + r * nc, colcoord + a * B, static_cast<size_t>(nc) * 8);
        } else {
          for (int r = 0; r < nr; ++r) {
            for (int c = 0; c < nc; ++c) dst[r * nc + c] = rowcoord[a * B + r];
          }
        }
      }
    };
    // Block elements, contiguous layout: domain elements [first, first + n).
    auto fill_run = [&](int64_t first, int n) {
      if (n == 0) return;
      if (need_linear) IotaPadded(linear, first, n);
      for (int a = 0; a < rank; ++a) {
        if (uses_coord[a]) FillCoordRun(ev.coord[a], first, n, strides[a], dims[a]);
      }
    };
    // Per-row outputs of the block's nr rows (starting at row `first_row`), every reduced
    // coordinate 0.
    auto per_row_pass = [&](int64_t first_row, int nr) -> bool {
      ev.run_first = -1;
      for (int r = 0; r < nr; ++r) linear[r] = rowbase[r];
      for (int a = 0; a < rank; ++a) {
        if (!uses_coord[a]) continue;
        int64_t* dst = ev.coord[a];
        const bool reduced = (p.reduce_axes >> a) & 1u;
        for (int r = 0; r < nr; ++r) dst[r] = reduced ? 0 : rowcoord[a * B + r];
      }
      reset();
      for (const fused::Output& o : p.outputs) {
        if (o.per_row && !Demand(ev, o.value, nr, 1)) return false;
      }
      for (size_t k = 0; k < p.outputs.size(); ++k) {
        if (p.outputs[k].per_row) StoreOutput(outputs[k], ev.slot(p.outputs[k].value), nullptr, first_row, nr);
      }
      return true;
    };
    // Full outputs of the block: evaluated, then stored at linear[j], or at first + j in the
    // contiguous layout.
    auto full_outputs = [&](int64_t first, int nr, int nc) -> bool {
      for (const fused::Output& o : p.outputs) {
        if (!o.per_row && !Demand(ev, o.value, nr, nc)) return false;
      }
      const int n = nr * nc;
      for (size_t k = 0; k < p.outputs.size(); ++k) {
        if (p.outputs[k].per_row) continue;
        StoreOutput(outputs[k], ev.slot(p.outputs[k].value), contiguous ? nullptr : linear, first, n);
      }
      return true;
    };
    auto fail = [&] {
      faults[part] = ev.fault;
      failed[part] = true;
    };

    row_od.Seek(unit_begin * rows_per_block);
    if (whole_rows) {
      const int nc = static_cast<int>(cols);
      if (!contiguous) fill_columns(0, nc);
      for (int64_t first_row = unit_begin * rows_per_block; first_row < std::min(rows, unit_end * rows_per_block);
           first_row += rows_per_block) {
        const int nr = static_cast<int>(std::min<int64_t>(rows_per_block, rows - first_row));
        const int64_t first = first_row * cols;
        if (!contiguous || has_per_row) fill_rows(nr);
        if (contiguous)
          fill_run(first, nr * nc);
        else
          fill_block(nr, nc);
        ev.run_first = contiguous ? first : -1;
        // The reductions and the full outputs see the same elements: what one computed, the
        // next reuses.
        reset();
        for (size_t k = 0; k < num_red; ++k) {
          const fused::Reduction& red = p.reductions[k];
          const ScalarType t = p.nodes[red.value].type;
          if (!Demand(ev, red.value, nr, nc)) return fail();
          InitAcc(red.op, t, acc_of(k), nr);
          Fold(red.op, t, ev.slot(red.value), nr, nc, acc_of(k));
        }
        if (has_full && !full_outputs(first, nr, nc)) return fail();
        if (has_per_row && !per_row_pass(first_row, nr)) return fail();
      }
      return;
    }

    // Split rows: blocks of about equal size.
    const int64_t blocks_per_row = (cols + B - 1) / B;
    const int64_t block_cols = (cols + blocks_per_row - 1) / blocks_per_row;
    for (int64_t row = unit_begin; row < unit_end; ++row) {
      if (!contiguous || has_per_row) fill_rows(1);
      for (size_t pass = 0; pass <= num_red; ++pass) {
        if (pass == num_red && !has_full) break;
        const bool is_red = pass < num_red;
        const ScalarType t = is_red ? p.nodes[p.reductions[pass].value].type : ScalarType::kI64;
        if (is_red) InitAcc(p.reductions[pass].op, t, acc_of(pass), 1);
        for (int64_t col = 0; col < cols; col += block_cols) {
          const int nc = static_cast<int>(std::min<int64_t>(block_cols, cols - col));
          const int64_t first = row * cols + col;
          if (contiguous) {
            fill_run(first, nc);
          } else {
            fill_columns(col, nc);
            fill_block(1, nc);
          }
          ev.run_first = contiguous ? first : -1;
          reset();
          if (is_red) {
            if (!Demand(ev, p.reductions[pass].value, 1, nc)) return fail();
            Fold(p.reductions[pass].op, t, ev.slot(p.reductions[pass].value), 1, nc, acc_of(pass));
          } else if (!full_outputs(first, 1, nc)) {
            return fail();
          }
        }
      }
      if (has_per_row && !per_row_pass(row, 1)) return fail();
    }
  };
  const int parts = ParallelParts(threads, units, min_units);
  ParallelFor(threads, units, min_units, run_units);
  // The first fault in domain order is the one a single thread would have stopped at.
  for (int k = 0; k < parts; ++k) {
    if (failed[k]) return FaultStatus(p, faults[k]);
  }
  return Status::Ok();
}

}  // namespace kiln::cpu
