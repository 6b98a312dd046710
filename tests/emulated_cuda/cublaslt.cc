// The emulated cuBLASLt (libcublasLt.so.<CUBLAS_VER_MAJOR>): host reference loops behind the
// cuBLASLt entry points Kiln's CUDA backend resolves (runtime/cuda/dynamic_symbols.cc, the Blas table),
// exported with cublasLt.h's prototypes and nothing else. Test support only: never installed,
// never linked into libkiln_runtime. Written from NVIDIA's cuBLAS documentation (the cuBLASLt API
// reference and the attribute comments in cublasLt.h); nothing here comes from Kiln's runtime/
// or compiler/, so Kiln's CUDA backend and its CPU kernels are checked against each other.
//
// ---- What runs -------------------------------------------------------------------------------
// cublasLtMatmul computes, for each batch member (cuBLAS docs, cuBLASLt API reference:
// cublasLtMatmul(); cublasLtEpilogue_t; cublasLtMatmulDescAttributes_t SCALE_TYPE):
//   D = act(alpha * op(A) * op(B) + beta * C + bias)
// column-major (CUBLASLT_ORDER_COL: element (i, j) at i + j * ld), op() = N, T (or C, which is T
// for real types), strided batches (BATCH_COUNT equal on A, B, C and D; STRIDED_BATCH_OFFSET per
// layout, in elements), the bias a packed vector of D's m rows broadcast over the columns (and
// BIAS_BATCH_STRIDE between batch members), act = identity, ReLU max(x, 0) (NaN gives 0) or
// GELU in its tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// Where the bias and activation go: cublasLtEpilogue_t says the bias "is broadcasted to all
// columns and added before applying final postprocessing", and SCALE_TYPE says the accumulator
// and C are converted to the scale type "before final scaling" and the value is converted to D's
// type afterwards: so the epilogue acts on alpha*AB + beta*C, bias first, activation last.
//
// Types (cuBLAS docs, cublasLtMatmul(), the table of supported type combinations) emulated here,
// all with scale type CUDA_R_32F: A = B = C = D = CUDA_R_32F with CUBLAS_COMPUTE_32F or
// CUBLAS_COMPUTE_32F_FAST_TF32 (computed in full fp32, a valid FAST_TF32 result), and
// A = B = C = D = CUDA_R_16F or CUDA_R_16BF with CUBLAS_COMPUTE_32F; and the integer GEMM,
// A = B = CUDA_R_8I, C = D = CUDA_R_32I with CUBLAS_COMPUTE_32I and scale type CUDA_R_32I (int32
// alpha and beta). Every other combination (including ones the real library runs, e.g. CUDA_R_64F,
// or int8 D with a float scale) is CUBLAS_STATUS_NOT_SUPPORTED, as the real library answers for a
// combination it lacks. The bias has D's type (BIAS_DATA_TYPE -1, the documented default, or set to
// D's type; anything else is NOT_SUPPORTED); the integer GEMM takes no epilogue here.
// The integer GEMM holds to cublasLtMatmul()'s requirements for IMMA kernels with the regular
// (CUBLASLT_ORDER_COL) data ordering, each refused with NOT_SUPPORTED: only the "TN" format (A
// transposed, B not), m and k multiples of 4, every leading dimension a multiple of 4, and every
// matrix pointer 4-byte aligned (the heuristic's MIN_ALIGNMENT preferences at least 4).
//
// Arithmetic: the integer GEMM sums int32 products exactly and wraps to int32 (two's complement)
// once, after alpha * sum + beta * C. Otherwise each dot product is accumulated in double, in k order (each float product is exact
// in double, so the result does not depend on FMA contraction), then scaled, C, bias and the
// activation are applied in double, and the value is rounded once to float (the scale type),
// then, for a half D, once more to D's type (round to nearest even, half.h). This equals the host
// model in tests/runtime/cuda/blas_test.cc (EvalLt). When beta == 0, C is not read.
//
// ---- Checks ----------------------------------------------------------------------------------
// cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul validate the problem alike: layout shapes
// (op(A) m x k, op(B) k x n, C and D m x n, ld >= rows; out of place, C's layout may differ
// from D's in ld and batch stride only), types, epilogue, pointer mode. Inconsistent arguments are INVALID_VALUE, valid
// configurations this emulation lacks are NOT_SUPPORTED; each refusal calls Diagnose. The
// heuristic returns one algorithm (no workspace) that cublasLtMatmul recognises by its contents.
// cublasLtMatmul checks every device pointer with DeviceRange over the bytes the layouts touch:
// ((cols - 1) * ld + rows) elements per member, spread over the batch strides; the bias over m
// elements per member; the workspace over workspaceSizeInBytes. alpha and beta are host pointers
// (POINTER_MODE_HOST, read at the call) or, with POINTER_MODE_DEVICE, device pointers read when
// the work runs. The fault "blas-not-supported" makes a checked call return NOT_SUPPORTED.
// The computation is enqueued on the stream (emulator.h), with every value it needs copied: the
// descriptors may change or be destroyed once cublasLtMatmul returns.
//
// Thread safety: a handle may be used from several threads; a descriptor, layout or preference
// by one thread at a time while it is being changed (as cuBLASLt documents). Nothing is global.
#include <cublasLt.h>
#include <cuda.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "tests/emulated_cuda/emulator.h"
#pragma GCC visibility push(hidden)
#include "tests/emulated_cuda/half.h"
#pragma GCC visibility pop

#define KILN_LT_EXPORT extern "C" __attribute__((visibility("default")))

namespace emu = kiln::emulated_cuda;

// The handle: cublasLtHandle_t is a pointer to this (opaque in cublasLt.h).
struct cublasLtContext {
  uint64_t magic;
};

namespace {

constexpr uint64_t kHandleMagic = 0x4b494c4e4c544831ull;  // "KILNLTH1"
constexpr uint64_t kDescMagic = 0x4b494c4e4c544431ull;    // "KILNLTD1"
constexpr uint64_t kLayoutMagic = 0x4b494c4e4c544c31ull;  // "KILNLTL1"
constexpr uint64_t kPrefMagic = 0x4b494c4e4c545031ull;    // "KILNLTP1"
constexpr uint64_t kAlgoMagic = 0x4b494c4e4c544131ull;    // "KILNLTA1"
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// ---- Attributes -------------------------------------------------------------------------------
// Each descriptor keeps its attributes as raw values indexed by attribute id, with the size the
// documentation gives each one (cublasLt.h's comments); SetAttribute refuses an unknown id or a
// size that differs (CUBLAS_STATUS_INVALID_VALUE, as documented for each *SetAttribute).

struct AttrSpec {
  int id;
  uint8_t size;
  const char* name;
};

constexpr int kMaxAttr = 40;

struct Attrs {
  uint64_t raw[kMaxAttr] = {};
  template <typename T>
  T Get(int id) const {
    static_assert(sizeof(T) <= 8);
    T v;
    std::memcpy(&v, &raw[id], sizeof(T));
    return v;
  }
  template <typename T>
  void Put(int id, T v) {
    static_assert(sizeof(T) <= 8);
    raw[id] = 0;
    std::memcpy(&raw[id], &v, sizeof(T));
  }
};

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulDescAttributes_t.
constexpr AttrSpec kDescAttrs[] = {
    {CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, 4, "COMPUTE_TYPE"},
    {CUBLASLT_MATMUL_DESC_SCALE_TYPE, 4, "SCALE_TYPE"},
    {CUBLASLT_MATMUL_DESC_POINTER_MODE, 4, "POINTER_MODE"},
    {CUBLASLT_MATMUL_DESC_TRANSA, 4, "TRANSA"},
    {CUBLASLT_MATMUL_DESC_TRANSB, 4, "TRANSB"},
    {CUBLASLT_MATMUL_DESC_TRANSC, 4, "TRANSC"},
    {CUBLASLT_MATMUL_DESC_FILL_MODE, 4, "FILL_MODE"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE, 4, "EPILOGUE"},
    {CUBLASLT_MATMUL_DESC_BIAS_POINTER, sizeof(void*), "BIAS_POINTER"},
    {CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, 8, "BIAS_BATCH_STRIDE"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, sizeof(void*), "EPILOGUE_AUX_POINTER"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, 8, "EPILOGUE_AUX_LD"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, 8, "EPILOGUE_AUX_BATCH_STRIDE"},
    {CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE, 8, "ALPHA_VECTOR_BATCH_STRIDE"},
    {CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, 4, "SM_COUNT_TARGET"},
    {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, sizeof(void*), "A_SCALE_POINTER"},
    {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, sizeof(void*), "B_SCALE_POINTER"},
    {CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, sizeof(void*), "C_SCALE_POINTER"},
    {CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, sizeof(void*), "D_SCALE_POINTER"},
    {CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, sizeof(void*), "AMAX_D_POINTER"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, 4, "EPILOGUE_AUX_DATA_TYPE"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, sizeof(void*), "EPILOGUE_AUX_SCALE_POINTER"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, sizeof(void*), "EPILOGUE_AUX_AMAX_POINTER"},
    {CUBLASLT_MATMUL_DESC_FAST_ACCUM, 1, "FAST_ACCUM"},
    {CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, 4, "BIAS_DATA_TYPE"},
    {CUBLASLT_MATMUL_DESC_A_SCALE_MODE, 4, "A_SCALE_MODE"},
    {CUBLASLT_MATMUL_DESC_B_SCALE_MODE, 4, "B_SCALE_MODE"},
    {CUBLASLT_MATMUL_DESC_C_SCALE_MODE, 4, "C_SCALE_MODE"},
    {CUBLASLT_MATMUL_DESC_D_SCALE_MODE, 4, "D_SCALE_MODE"},
    {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, 4, "EPILOGUE_AUX_SCALE_MODE"},
    {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, sizeof(void*), "D_OUT_SCALE_POINTER"},
    {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE, 4, "D_OUT_SCALE_MODE"},
    {CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, sizeof(void*), "EMULATION_DESCRIPTOR"},
};

// cuBLAS docs, cuBLASLt API reference: cublasLtMatrixLayoutAttribute_t.
constexpr AttrSpec kLayoutAttrs[] = {
    {CUBLASLT_MATRIX_LAYOUT_TYPE, 4, "TYPE"},
    {CUBLASLT_MATRIX_LAYOUT_ORDER, 4, "ORDER"},
    {CUBLASLT_MATRIX_LAYOUT_ROWS, 8, "ROWS"},
    {CUBLASLT_MATRIX_LAYOUT_COLS, 8, "COLS"},
    {CUBLASLT_MATRIX_LAYOUT_LD, 8, "LD"},
    {CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 4, "BATCH_COUNT"},
    {CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 8, "STRIDED_BATCH_OFFSET"},
    {CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, 8, "PLANE_OFFSET"},
    {CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, 4, "BATCH_MODE"},
};

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulPreferenceAttributes_t.
constexpr AttrSpec kPrefAttrs[] = {
    {CUBLASLT_MATMUL_PREF_SEARCH_MODE, 4, "SEARCH_MODE"},
    {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 8, "MAX_WORKSPACE_BYTES"},
    {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, 4, "REDUCTION_SCHEME_MASK"},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 4, "MIN_ALIGNMENT_A_BYTES"},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, 4, "MIN_ALIGNMENT_B_BYTES"},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 4, "MIN_ALIGNMENT_C_BYTES"},
    {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 4, "MIN_ALIGNMENT_D_BYTES"},
    {CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, 4, "MAX_WAVES_COUNT"},
    {CUBLASLT_MATMUL_PREF_IMPL_MASK, 8, "IMPL_MASK"},
};

template <size_t N>
const AttrSpec* FindAttr(const AttrSpec (&table)[N], int id) {
  for (const AttrSpec& s : table) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

template <size_t N>
cublasStatus_t SetAttr(const char* call, const AttrSpec (&table)[N], Attrs& attrs, int id, const void* buf,
                       size_t size) {
  const AttrSpec* spec = FindAttr(table, id);
  if (spec == nullptr) {
    emu::Diagnose(call, "unknown attribute " + std::to_string(id));
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (buf == nullptr) {
    emu::Diagnose(call, std::string(spec->name) + ": buf is NULL");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (size != spec->size) {
    emu::Diagnose(call, std::string(spec->name) + ": sizeInBytes " + std::to_string(size) +
                            ", the attribute holds " + std::to_string(spec->size) + " bytes");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  attrs.raw[id] = 0;
  std::memcpy(&attrs.raw[id], buf, size);
  return CUBLAS_STATUS_SUCCESS;
}

struct MatmulDesc {
  uint64_t magic = kDescMagic;
  Attrs attrs;
  MatmulDesc(cublasComputeType_t compute, cudaDataType_t scale) {
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_TRANSC, CUBLAS_OP_N);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLAS_FILL_MODE_FULL);
    attrs.Put<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_DEFAULT);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, -1);
    attrs.Put<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, -1);
    // Pointers, strides, counts and scale modes default to 0 / NULL (raw is zeroed).
  }
};

struct Layout {
  uint64_t magic = kLayoutMagic;
  Attrs attrs;
  Layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld) {
    attrs.Put<uint32_t>(CUBLASLT_MATRIX_LAYOUT_TYPE, static_cast<uint32_t>(type));
    attrs.Put<int32_t>(CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
    attrs.Put<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
    attrs.Put<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS, cols);
    attrs.Put<int64_t>(CUBLASLT_MATRIX_LAYOUT_LD, ld);
    attrs.Put<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
    attrs.Put<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 0);
    attrs.Put<int64_t>(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, 0);
    attrs.Put<uint32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, CUBLASLT_BATCH_MODE_STRIDED);
  }
};

struct Preference {
  uint64_t magic = kPrefMagic;
  Attrs attrs;
  Preference() {
    attrs.Put<uint32_t>(CUBLASLT_MATMUL_PREF_SEARCH_MODE, CUBLASLT_SEARCH_BEST_FIT);
    attrs.Put<uint64_t>(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 0);
    attrs.Put<uint32_t>(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, CUBLASLT_REDUCTION_SCHEME_MASK);
    for (int id : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                   CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
      attrs.Put<uint32_t>(id, 256);
    }
    attrs.Put<float>(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT, 0.0f);
    attrs.Put<uint64_t>(CUBLASLT_MATMUL_PREF_IMPL_MASK, ~uint64_t{0});
  }
};

MatmulDesc* AsDesc(cublasLtMatmulDesc_t d) {
  auto* p = reinterpret_cast<MatmulDesc*>(d);
  return p != nullptr && p->magic == kDescMagic ? p : nullptr;
}
Layout* AsLayout(cublasLtMatrixLayout_t l) {
  auto* p = reinterpret_cast<Layout*>(l);
  return p != nullptr && p->magic == kLayoutMagic ? p : nullptr;
}
Preference* AsPref(cublasLtMatmulPreference_t pr) {
  auto* p = reinterpret_cast<Preference*>(pr);
  return p != nullptr && p->magic == kPrefMagic ? p : nullptr;
}
bool ValidHandle(cublasLtHandle_t h) { return h != nullptr && h->magic == kHandleMagic; }

// ---- Types ---------------------------------------------------------------------------------------

size_t ElementSize(cudaDataType_t t) {
  switch (t) {
    case CUDA_R_32F:
    case CUDA_R_32I: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    case CUDA_R_8I: return 1;
    default: return 0;  // not emulated
  }
}

std::string TypeName(int32_t t) {
  switch (t) {
    case CUDA_R_32F: return "CUDA_R_32F";
    case CUDA_R_64F: return "CUDA_R_64F";
    case CUDA_R_16F: return "CUDA_R_16F";
    case CUDA_R_16BF: return "CUDA_R_16BF";
    case CUDA_R_8I: return "CUDA_R_8I";
    case CUDA_R_32I: return "CUDA_R_32I";
    default: return "cudaDataType " + std::to_string(t);
  }
}

std::string ComputeName(int32_t c) {
  switch (c) {
    case CUBLAS_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
    case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
    case CUBLAS_COMPUTE_32F_PEDANTIC: return "CUBLAS_COMPUTE_32F_PEDANTIC";
    case CUBLAS_COMPUTE_32F_FAST_16F: return "CUBLAS_COMPUTE_32F_FAST_16F";
    case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
    case CUBLAS_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
    case CUBLAS_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
    case CUBLAS_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
    default: return "cublasComputeType " + std::to_string(c);
  }
}

float Load(const unsigned char* base, cudaDataType_t t, int64_t index) {
  switch (t) {
    case CUDA_R_32F: {
      float f;
      std::memcpy(&f, base + index * 4, 4);
      return f;
    }
    case CUDA_R_16F: {
      uint16_t h;
      std::memcpy(&h, base + index * 2, 2);
      return emu::HalfToFloat(h);
    }
    default: {  // CUDA_R_16BF (the only other type that gets this far)
      uint16_t h;
      std::memcpy(&h, base + index * 2, 2);
      return emu::BFloat16ToFloat(h);
    }
  }
}

void Store(unsigned char* base, cudaDataType_t t, int64_t index, float v) {
  switch (t) {
    case CUDA_R_32F: std::memcpy(base + index * 4, &v, 4); return;
    case CUDA_R_16F: {
      const uint16_t h = emu::FloatToHalf(v);
      std::memcpy(base + index * 2, &h, 2);
      return;
    }
    default: {
      const uint16_t h = emu::FloatToBFloat16(v);
      std::memcpy(base + index * 2, &h, 2);
      return;
    }
  }
}

// ---- The problem ---------------------------------------------------------------------------------

// One matrix as its layout describes it (column-major, after the checks in ReadMatrix).
struct Matrix {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int32_t batch = 1;
  int64_t stride = 0;  // elements between batch members
};

std::string Shape(const Matrix& x) {
  std::string s = std::to_string(x.rows) + "x" + std::to_string(x.cols) + " " + TypeName(x.type) +
                  " ld " + std::to_string(x.ld);
  if (x.batch > 1) s += ", batch " + std::to_string(x.batch) + " stride " + std::to_string(x.stride);
  return s;
}

// The problem a descriptor and four layouts describe, validated (Validate).
struct Problem {
  int32_t compute = 0;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t pointer_mode = CUBLASLT_POINTER_MODE_HOST;
  bool trans_a = false, trans_b = false;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool bias = false, relu = false, gelu = false;
  cudaDataType_t bias_type = CUDA_R_32F;
  int64_t bias_stride = 0;
  uint64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  Matrix a, b, c, d;
  bool c_is_d_desc = false;  // Cdesc is the same layout object as Ddesc
  bool integer = false;      // the int8 GEMM: A, B CUDA_R_8I; C, D, alpha, beta int32
};

// A refusal: the status, and Diagnose with the call and the reason.
cublasStatus_t Refuse(const char* call, cublasStatus_t status, const std::string& why) {
  emu::Diagnose(call, why);
  return status;
}

cublasStatus_t ReadMatrix(const char* call, const char* name, const Layout* l, Matrix* out) {
  const Attrs& at = l->attrs;
  out->type = static_cast<cudaDataType_t>(at.Get<uint32_t>(CUBLASLT_MATRIX_LAYOUT_TYPE));
  out->rows = at.Get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS);
  out->cols = at.Get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS);
  out->ld = at.Get<int64_t>(CUBLASLT_MATRIX_LAYOUT_LD);
  out->batch = at.Get<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
  out->stride = at.Get<int64_t>(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
  const std::string who = std::string(name) + " layout: ";
  const int32_t order = at.Get<int32_t>(CUBLASLT_MATRIX_LAYOUT_ORDER);
  if (order != CUBLASLT_ORDER_COL) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                  who + "order " + std::to_string(order) + " (the emulation runs CUBLASLT_ORDER_COL only)");
  }
  if (at.Get<int64_t>(CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET) != 0) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED, who + "PLANE_OFFSET != 0 (planar complex is not emulated)");
  }
  if (at.Get<uint32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_MODE) != CUBLASLT_BATCH_MODE_STRIDED) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED, who + "BATCH_MODE pointer array is not emulated");
  }
  if (out->rows > static_cast<uint64_t>(kInt32Max) || out->cols > static_cast<uint64_t>(kInt32Max)) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                  who + std::to_string(out->rows) + " x " + std::to_string(out->cols) +
                      " is past the int32 range cuBLASLt documents for ROWS/COLS");
  }
  if (out->ld < 0 || static_cast<uint64_t>(out->ld) < out->rows) {
    return Refuse(call, CUBLAS_STATUS_INVALID_VALUE,
                  who + "LD " + std::to_string(out->ld) + " < ROWS " + std::to_string(out->rows) +
                      " (column-major columns would overlap)");
  }
  if (out->batch < 1) {
    return Refuse(call, CUBLAS_STATUS_INVALID_VALUE, who + "BATCH_COUNT " + std::to_string(out->batch) + " < 1");
  }
  return CUBLAS_STATUS_SUCCESS;
}

bool IsTrans(int32_t op) { return op == CUBLAS_OP_T || op == CUBLAS_OP_C; }  // C is T for real types

// Checks the descriptor and layouts as cublasLtMatmul (and its heuristic) would: the shapes, the
// types against the supported combinations, the epilogue, the scalars' pointer mode.
cublasStatus_t Validate(const char* call, const MatmulDesc& desc, const Layout* la, const Layout* lb,
                        const Layout* lc, const Layout* ld, Problem* p) {
  const Attrs& at = desc.attrs;
  p->c_is_d_desc = lc == ld;
  cublasStatus_t st;
  if ((st = ReadMatrix(call, "A", la, &p->a)) != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = ReadMatrix(call, "B", lb, &p->b)) != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = ReadMatrix(call, "D", ld, &p->d)) != CUBLAS_STATUS_SUCCESS) return st;
  if ((st = ReadMatrix(call, "C", lc, &p->c)) != CUBLAS_STATUS_SUCCESS) return st;

  // Types (cublasLtMatmul(): the table of supported data type / compute type combinations).
  p->compute = at.Get<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE);
  p->scale = static_cast<cudaDataType_t>(at.Get<int32_t>(CUBLASLT_MATMUL_DESC_SCALE_TYPE));
  const cudaDataType_t t = p->a.type;
  const std::string combo = "compute " + ComputeName(p->compute) + ", scale " + TypeName(p->scale) + ", A " +
                            TypeName(p->a.type) + ", B " + TypeName(p->b.type) + ", C " + TypeName(p->c.type) +
                            ", D " + TypeName(p->d.type);
  const bool same = p->b.type == t && p->c.type == t && p->d.type == t;
  p->integer = p->compute == CUBLAS_COMPUTE_32I && p->scale == CUDA_R_32I && t == CUDA_R_8I &&
               p->b.type == CUDA_R_8I && p->c.type == CUDA_R_32I && p->d.type == CUDA_R_32I;
  const bool supported =
      p->integer ||
      (same && p->scale == CUDA_R_32F &&
       ((p->compute == CUBLAS_COMPUTE_32F && (t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF)) ||
        (p->compute == CUBLAS_COMPUTE_32F_FAST_TF32 && t == CUDA_R_32F)));
  if (!supported) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                  combo + ": not a combination the emulation runs (A = B = C = D float32 with COMPUTE_32F "
                          "or _FAST_TF32, float16 or bfloat16 with COMPUTE_32F; scale CUDA_R_32F; or A = B "
                          "CUDA_R_8I, C = D CUDA_R_32I with COMPUTE_32I and scale CUDA_R_32I)");
  }

  // Shapes: op(A) m x k, op(B) k x n, C and D m x n.
  const int32_t op_a = at.Get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA);
  const int32_t op_b = at.Get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB);
  for (int32_t op : {op_a, op_b}) {
    if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C) {
      return Refuse(call, CUBLAS_STATUS_INVALID_VALUE, "TRANSA/TRANSB " + std::to_string(op) + " is no cublasOperation_t");
    }
  }
  if (at.Get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSC) != CUBLAS_OP_N) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED, "TRANSC must be CUBLAS_OP_N (the only one documented)");
  }
  if (at.Get<int32_t>(CUBLASLT_MATMUL_DESC_FILL_MODE) != CUBLAS_FILL_MODE_FULL) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED, "FILL_MODE other than CUBLAS_FILL_MODE_FULL is not emulated");
  }
  p->trans_a = IsTrans(op_a);
  p->trans_b = IsTrans(op_b);
  p->m = p->d.rows;
  p->n = p->d.cols;
  const uint64_t a_rows = p->trans_a ? p->a.cols : p->a.rows, a_cols = p->trans_a ? p->a.rows : p->a.cols;
  const uint64_t b_rows = p->trans_b ? p->b.cols : p->b.rows, b_cols = p->trans_b ? p->b.rows : p->b.cols;
  p->k = a_cols;
  auto dims = [](uint64_t r, uint64_t c) { return std::to_string(r) + " x " + std::to_string(c); };
  if (a_rows != p->m || b_cols != p->n || b_rows != p->k || p->c.rows != p->m || p->c.cols != p->n) {
    return Refuse(call, CUBLAS_STATUS_INVALID_VALUE,
                  "shapes do not agree: op(A) " + dims(a_rows, a_cols) + ", op(B) " + dims(b_rows, b_cols) + ", C " +
                      dims(p->c.rows, p->c.cols) + ", D " + dims(p->d.rows, p->d.cols) +
                      " (need op(A) m x k, op(B) k x n, C and D m x n)");
  }
  if (p->integer) {
    // cublasLtMatmul(): IMMA kernels with the regular data ordering.
    if (!p->trans_a || p->trans_b) {
      return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                    "the int8 GEMM takes only the \"TN\" format (A transposed, B not), found TRANSA " +
                        std::to_string(op_a) + ", TRANSB " + std::to_string(op_b));
    }
    if (p->m % 4 != 0 || p->k % 4 != 0) {
      return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                    "the int8 GEMM needs m and k multiples of 4, found m " + std::to_string(p->m) + ", k " +
                        std::to_string(p->k));
    }
    for (const Matrix* x : {&p->a, &p->b, &p->c, &p->d}) {
      if (x->ld % 4 != 0) {
        return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                      "the int8 GEMM needs leading dimensions that are multiples of 4, found " + Shape(*x));
      }
    }
  }
  p->batch = p->d.batch;
  if (p->a.batch != p->batch || p->b.batch != p->batch || p->c.batch != p->batch) {
    return Refuse(call, CUBLAS_STATUS_INVALID_VALUE,
                  "BATCH_COUNT differs: A " + std::to_string(p->a.batch) + ", B " + std::to_string(p->b.batch) +
                      ", C " + std::to_string(p->c.batch) + ", D " + std::to_string(p->d.batch));
  }

  // Scalars: host or device pointers to one float each.
  p->pointer_mode = at.Get<int32_t>(CUBLASLT_MATMUL_DESC_POINTER_MODE);
  if (p->pointer_mode != CUBLASLT_POINTER_MODE_HOST && p->pointer_mode != CUBLASLT_POINTER_MODE_DEVICE) {
    const bool known = p->pointer_mode >= CUBLASLT_POINTER_MODE_DEVICE_VECTOR &&
                       p->pointer_mode <= CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
    return Refuse(call, known ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_INVALID_VALUE,
                  "POINTER_MODE " + std::to_string(p->pointer_mode) +
                      (known ? " (vector pointer modes are not emulated)" : " is no cublasLtPointerMode_t"));
  }
  // Scaling factors and amax are documented for fp8 (and block-scaled) types only: "if set for an
  // unsupported matrix data, scale, and compute type combination, cublasLtMatmul() will return
  // CUBLAS_INVALID_VALUE" (cublasLtMatmulDescAttributes_t).
  for (int id : {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                 CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER,
                 CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER,
                 CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                 CUBLASLT_MATMUL_DESC_C_SCALE_MODE, CUBLASLT_MATMUL_DESC_D_SCALE_MODE,
                 CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE}) {
    if (at.raw[id] != 0) {
      return Refuse(call, CUBLAS_STATUS_INVALID_VALUE,
                    std::string(FindAttr(kDescAttrs, id)->name) + " is set, but " + combo +
                        " takes no scaling factors (fp8 only)");
    }
  }

  // Epilogue (cublasLtEpilogue_t).
  p->epilogue = at.Get<uint32_t>(CUBLASLT_MATMUL_DESC_EPILOGUE);
  if (p->integer && p->epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                  "epilogue " + std::to_string(p->epilogue) + " with the int8 GEMM (not emulated; DEFAULT is)");
  }
  switch (p->epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT: break;
    case CUBLASLT_EPILOGUE_RELU: p->relu = true; break;
    case CUBLASLT_EPILOGUE_BIAS: p->bias = true; break;
    case CUBLASLT_EPILOGUE_RELU_BIAS: p->relu = p->bias = true; break;
    case CUBLASLT_EPILOGUE_GELU: p->gelu = true; break;
    case CUBLASLT_EPILOGUE_GELU_BIAS: p->gelu = p->bias = true; break;
    case CUBLASLT_EPILOGUE_RELU_AUX:
    case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DRELU:
    case CUBLASLT_EPILOGUE_DRELU_BGRAD:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_DGELU_BGRAD:
    case CUBLASLT_EPILOGUE_BGRADA:
    case CUBLASLT_EPILOGUE_BGRADB:
      return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                    "epilogue " + std::to_string(p->epilogue) +
                        " (aux and gradient epilogues are not emulated; DEFAULT, RELU, BIAS, RELU_BIAS, GELU, "
                        "GELU_BIAS are)");
    default:
      return Refuse(call, CUBLAS_STATUS_INVALID_VALUE,
                    "EPILOGUE " + std::to_string(p->epilogue) + " is no cublasLtEpilogue_t");
  }
  if (p->bias) {
    // "Bias vector elements are the same type as the elements of output matrix (Dtype)" for
    // these types (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, default -1: D's type).
    const int32_t bt = at.Get<int32_t>(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE);
    p->bias_type = bt == -1 ? p->d.type : static_cast<cudaDataType_t>(bt);
    if (p->bias_type != p->d.type) {
      return Refuse(call, CUBLAS_STATUS_NOT_SUPPORTED,
                    "BIAS_DATA_TYPE " + TypeName(bt) + " with D " + TypeName(p->d.type) +
                        " (the bias has D's type for these combinations)");
    }
    p->bias_stride = at.Get<int64_t>(CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE);
  }
  return CUBLAS_STATUS_SUCCESS;
}

// The numerical implementation flags of the emulated algorithm (cublasLtNumericalImplFlags_t):
// FMA-class arithmetic with a float accumulator on the input type; IMMA with an int32 one for int8.
uint64_t ImplFlags(const Problem& p) {
  if (p.integer) {
    return CUBLASLT_NUMERICAL_IMPL_FLAGS_IMMA | CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32I |
           CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_8I;
  }
  uint64_t input = CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_32F;
  if (p.a.type == CUDA_R_16F) input = CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16F;
  if (p.a.type == CUDA_R_16BF) input = CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF;
  return CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA | CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32F | input;
}

// What the algorithm struct records, so that cublasLtMatmul recognises its own algorithms and
// refuses one found for other types.
uint64_t TypeKey(const Problem& p) {
  return static_cast<uint64_t>(static_cast<uint32_t>(p.compute)) << 32 |
         static_cast<uint64_t>(static_cast<uint8_t>(p.a.type)) << 24 |
         static_cast<uint64_t>(static_cast<uint8_t>(p.d.type)) << 16 | static_cast<uint8_t>(p.scale);
}

// ---- Extents ----------------------------------------------------------------------------------------

// The element range [lo, hi) a matrix's batch touches, relative to its pointer: a member spans
// (cols - 1) * ld + rows elements, members start at b * stride. Empty: lo == hi == 0.
struct Extent {
  __int128 lo = 0, hi = 0;
  bool empty() const { return hi <= lo; }
};

Extent MatrixExtent(const Matrix& x) {
  Extent e;
  if (x.rows == 0 || x.cols == 0) return e;
  const __int128 member = static_cast<__int128>(x.cols - 1) * x.ld + static_cast<__int128>(x.rows);
  const __int128 last = static_cast<__int128>(x.batch - 1) * x.stride;
  e.lo = last < 0 ? last : 0;
  e.hi = (last > 0 ? last : 0) + member;
  return e;
}

std::string Hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  return buf;
}

// The host view of `count` elements of `size` bytes from element `lo` of `ptr`, checked with
// DeviceRange; nullptr (after Diagnose) when the range is not device memory.
const unsigned char* CheckRange(const char* call, const char* what, const void* ptr, Extent e, size_t size,
                                const std::string& shape) {
  const __int128 bytes = (e.hi - e.lo) * static_cast<__int128>(size);
  const __int128 offset = e.lo * static_cast<__int128>(size);
  const std::string desc = std::string(what) + " " + shape + " at " + Hex(ptr);
  if (bytes > static_cast<__int128>(std::numeric_limits<int64_t>::max())) {
    emu::Diagnose(call, desc + ": the layout spans more bytes than can exist");
    return nullptr;
  }
  if (ptr == nullptr) {
    emu::Diagnose(call, desc + ": NULL, but the layout says " + std::to_string(static_cast<int64_t>(bytes)) +
                            " bytes are accessed");
    return nullptr;
  }
  if (reinterpret_cast<uintptr_t>(ptr) % size != 0) {
    emu::Diagnose(call, desc + ": not aligned to its " + std::to_string(size) + "-byte elements");
    return nullptr;
  }
  const CUdeviceptr start = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr) + static_cast<int64_t>(offset));
  std::string why;
  void* host = emu::DeviceRange(start, static_cast<size_t>(bytes), &why);
  if (host == nullptr) {
    emu::Diagnose(call, desc + ": bytes [" + std::to_string(static_cast<int64_t>(offset)) + ", " +
                            std::to_string(static_cast<int64_t>(offset + bytes)) + ") from it are not device memory: " +
                            why);
    return nullptr;
  }
  return static_cast<const unsigned char*>(host) - static_cast<int64_t>(offset);
}

// ---- The computation --------------------------------------------------------------------------------

// Everything one cublasLtMatmul needs, by value (enqueued, possibly replayed from a graph).
struct Work {
  Problem p;
  const unsigned char *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  unsigned char* d = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  int32_t alpha_i = 1, beta_i = 0;                                 // the integer GEMM's (scale CUDA_R_32I)
  const unsigned char *alpha_dev = nullptr, *beta_dev = nullptr;  // POINTER_MODE_DEVICE

  // The integer GEMM, TN only (Validate): op(A)(i, l) = A[l + i * lda], op(B)(l, j) = B[l + j * ldb].
  void RunInteger() const {
    int32_t al = alpha_i, be = beta_i;
    if (alpha_dev) std::memcpy(&al, alpha_dev, 4);
    if (beta_dev) std::memcpy(&be, beta_dev, 4);
    std::vector<int32_t> out(p.m * p.n);  // D's values before the store
    for (int32_t bt = 0; bt < p.batch; ++bt) {
      const auto* pa = reinterpret_cast<const int8_t*>(a + bt * p.a.stride);
      const auto* pb = reinterpret_cast<const int8_t*>(b + bt * p.b.stride);
      const unsigned char* pc = c ? c + bt * p.c.stride * 4 : nullptr;
      unsigned char* pd = d + bt * p.d.stride * 4;
      for (uint64_t j = 0; j < p.n; ++j) {
        for (uint64_t i = 0; i < p.m; ++i) {
          int64_t sum = 0;  // |sum| <= k * 2^14: exact
          for (uint64_t l = 0; l < p.k; ++l) sum += int64_t{pa[l + i * p.a.ld]} * pb[l + j * p.b.ld];
          int64_t v = int64_t{al} * sum;
          if (be != 0) {
            int32_t cv;
            std::memcpy(&cv, pc + (i + j * p.c.ld) * 4, 4);
            v += int64_t{be} * cv;
          }
          out[i + j * p.m] = static_cast<int32_t>(static_cast<uint32_t>(v));  // wraps, two's complement
        }
      }
      for (uint64_t j = 0; j < p.n; ++j)
        for (uint64_t i = 0; i < p.m; ++i) std::memcpy(pd + (i + j * p.d.ld) * 4, &out[i + j * p.m], 4);
    }
  }

  void Run() const {
    if (p.m == 0 || p.n == 0) return;
    if (p.integer) return RunInteger();
    const float al = alpha_dev ? Load(alpha_dev, CUDA_R_32F, 0) : alpha;
    const float be = beta_dev ? Load(beta_dev, CUDA_R_32F, 0) : beta;
    const uint64_t m = p.m, n = p.n, k = p.k;
    std::vector<float> opa(m * k);  // op(A), column-major m x k: element (i, l) at i + l * m
    std::vector<float> opb(k);      // column j of op(B)
    std::vector<double> acc(m);
    std::vector<float> out(m * n);  // D's values before the store (A or B may alias D)
    for (int32_t bt = 0; bt < p.batch; ++bt) {
      const unsigned char* pa = a ? a + bt * p.a.stride * static_cast<int64_t>(ElementSize(p.a.type)) : nullptr;
      const unsigned char* pb = b ? b + bt * p.b.stride * static_cast<int64_t>(ElementSize(p.b.type)) : nullptr;
      const unsigned char* pc = c ? c + bt * p.c.stride * static_cast<int64_t>(ElementSize(p.c.type)) : nullptr;
      const unsigned char* pbias =
          bias ? bias + bt * p.bias_stride * static_cast<int64_t>(ElementSize(p.bias_type)) : nullptr;
      unsigned char* pd = d + bt * p.d.stride * static_cast<int64_t>(ElementSize(p.d.type));
      for (uint64_t l = 0; l < k; ++l) {
        for (uint64_t i = 0; i < m; ++i) {
          const int64_t at = p.trans_a ? static_cast<int64_t>(l + i * p.a.ld) : static_cast<int64_t>(i + l * p.a.ld);
          opa[i + l * m] = Load(pa, p.a.type, at);
        }
      }
      for (uint64_t j = 0; j < n; ++j) {
        for (uint64_t l = 0; l < k; ++l) {
          const int64_t at = p.trans_b ? static_cast<int64_t>(j + l * p.b.ld) : static_cast<int64_t>(l + j * p.b.ld);
          opb[l] = Load(pb, p.b.type, at);
        }
        // Each acc[i] sums op(A)(i, l) * op(B)(l, j) over l = 0, 1, ..., k-1 in that order; a
        // float product is exact in double, so only the additions round.
        for (uint64_t i = 0; i < m; ++i) acc[i] = 0.0;
        for (uint64_t l = 0; l < k; ++l) {
          const double bv = opb[l];
          const float* col = &opa[l * m];
          for (uint64_t i = 0; i < m; ++i) acc[i] += static_cast<double>(col[i]) * bv;
        }
        for (uint64_t i = 0; i < m; ++i) {
          double v = static_cast<double>(al) * acc[i] +
                     (be != 0.0f ? static_cast<double>(be) *
                                       static_cast<double>(Load(pc, p.c.type, static_cast<int64_t>(i + j * p.c.ld)))
                                 : 0.0);
          if (p.bias) v += static_cast<double>(Load(pbias, p.bias_type, static_cast<int64_t>(i)));
          if (p.relu) v = v > 0.0 ? v : 0.0;
          if (p.gelu) v = 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
          out[i + j * m] = static_cast<float>(v);
        }
      }
      for (uint64_t j = 0; j < n; ++j) {
        for (uint64_t i = 0; i < m; ++i) {
          Store(pd, p.d.type, static_cast<int64_t>(i + j * p.d.ld), out[i + j * m]);
        }
      }
    }
  }
};

const char* StatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// Paraphrases of the meanings in cuBLAS docs, "cublasStatus_t".
const char* StatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the cuBLAS library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "resource allocation failed inside the cuBLAS library";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires a feature absent from the device architecture";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal cuBLAS operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the functionality requested requires some license";
  }
  return "unknown cuBLAS status";
}

}  // namespace

// ---- Exported entry points ------------------------------------------------------------------------

// cuBLAS docs, cuBLASLt API reference: cublasLtCreate(). Initialises the CUDA runtime (without
// a current context it makes device 0's primary context current); fails without a device.
KILN_LT_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
  if (lightHandle == nullptr) return Refuse("cublasLtCreate", CUBLAS_STATUS_INVALID_VALUE, "lightHandle is NULL");
  if (emu::ImplicitContext() != CUDA_SUCCESS) {
    return Refuse("cublasLtCreate", CUBLAS_STATUS_NOT_INITIALIZED, "the CUDA runtime cannot initialise a device");
  }
  auto* h = new (std::nothrow) cublasLtContext{kHandleMagic};
  if (h == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  *lightHandle = h;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtDestroy().
KILN_LT_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (lightHandle == nullptr) return Refuse("cublasLtDestroy", CUBLAS_STATUS_INVALID_VALUE, "lightHandle is NULL");
  if (!ValidHandle(lightHandle)) {
    return Refuse("cublasLtDestroy", CUBLAS_STATUS_NOT_INITIALIZED, "not a live cuBLASLt handle");
  }
  lightHandle->magic = 0;
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtGetStatusName().
KILN_LT_EXPORT const char* cublasLtGetStatusName(cublasStatus_t status) { return StatusName(status); }

// cuBLAS docs, cuBLASLt API reference: cublasLtGetStatusString().
KILN_LT_EXPORT const char* cublasLtGetStatusString(cublasStatus_t status) { return StatusString(status); }

// cuBLAS docs, cuBLASLt API reference: cublasLtGetVersion() (CUBLAS_VERSION: major * 10000 +
// minor * 100 + patch, of the headers this is built with).
KILN_LT_EXPORT size_t cublasLtGetVersion(void) {
  return static_cast<size_t>(CUBLAS_VER_MAJOR) * 10000 + CUBLAS_VER_MINOR * 100 + CUBLAS_VER_PATCH;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtGetCudartVersion() (CUDA_VERSION of the headers).
KILN_LT_EXPORT size_t cublasLtGetCudartVersion(void) { return CUDA_VERSION; }

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulDescCreate(). The types are checked when
// the descriptor is used (heuristic, matmul).
KILN_LT_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                                       cudaDataType_t scaleType) {
  if (matmulDesc == nullptr) {
    return Refuse("cublasLtMatmulDescCreate", CUBLAS_STATUS_INVALID_VALUE, "matmulDesc is NULL");
  }
  auto* d = new (std::nothrow) MatmulDesc(computeType, scaleType);
  if (d == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  *matmulDesc = reinterpret_cast<cublasLtMatmulDesc_t>(d);
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulDescDestroy().
KILN_LT_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  MatmulDesc* d = AsDesc(matmulDesc);
  if (d == nullptr) {
    return Refuse("cublasLtMatmulDescDestroy", CUBLAS_STATUS_INVALID_VALUE, "not a live matmul descriptor");
  }
  d->magic = 0;
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulDescSetAttribute() and
// cublasLtMatmulDescAttributes_t (each attribute's size).
KILN_LT_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                             cublasLtMatmulDescAttributes_t attr, const void* buf,
                                                             size_t sizeInBytes) {
  MatmulDesc* d = AsDesc(matmulDesc);
  if (d == nullptr) {
    return Refuse("cublasLtMatmulDescSetAttribute", CUBLAS_STATUS_INVALID_VALUE, "not a live matmul descriptor");
  }
  return SetAttr("cublasLtMatmulDescSetAttribute", kDescAttrs, d->attrs, attr, buf, sizeInBytes);
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatrixLayoutCreate() (column-major, batch 1).
KILN_LT_EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type,
                                                         uint64_t rows, uint64_t cols, int64_t ld) {
  if (matLayout == nullptr) {
    return Refuse("cublasLtMatrixLayoutCreate", CUBLAS_STATUS_INVALID_VALUE, "matLayout is NULL");
  }
  auto* l = new (std::nothrow) Layout(type, rows, cols, ld);
  if (l == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  *matLayout = reinterpret_cast<cublasLtMatrixLayout_t>(l);
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatrixLayoutDestroy().
KILN_LT_EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  Layout* l = AsLayout(matLayout);
  if (l == nullptr) {
    return Refuse("cublasLtMatrixLayoutDestroy", CUBLAS_STATUS_INVALID_VALUE, "not a live matrix layout");
  }
  l->magic = 0;
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatrixLayoutSetAttribute() and
// cublasLtMatrixLayoutAttribute_t.
KILN_LT_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                               cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                               size_t sizeInBytes) {
  Layout* l = AsLayout(matLayout);
  if (l == nullptr) {
    return Refuse("cublasLtMatrixLayoutSetAttribute", CUBLAS_STATUS_INVALID_VALUE, "not a live matrix layout");
  }
  return SetAttr("cublasLtMatrixLayoutSetAttribute", kLayoutAttrs, l->attrs, attr, buf, sizeInBytes);
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulPreferenceCreate().
KILN_LT_EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (pref == nullptr) return Refuse("cublasLtMatmulPreferenceCreate", CUBLAS_STATUS_INVALID_VALUE, "pref is NULL");
  auto* p = new (std::nothrow) Preference();
  if (p == nullptr) return CUBLAS_STATUS_ALLOC_FAILED;
  *pref = reinterpret_cast<cublasLtMatmulPreference_t>(p);
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulPreferenceDestroy().
KILN_LT_EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  Preference* p = AsPref(pref);
  if (p == nullptr) {
    return Refuse("cublasLtMatmulPreferenceDestroy", CUBLAS_STATUS_INVALID_VALUE, "not a live preference");
  }
  p->magic = 0;
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulPreferenceSetAttribute() and
// cublasLtMatmulPreferenceAttributes_t.
KILN_LT_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                                   cublasLtMatmulPreferenceAttributes_t attr,
                                                                   const void* buf, size_t sizeInBytes) {
  Preference* p = AsPref(pref);
  if (p == nullptr) {
    return Refuse("cublasLtMatmulPreferenceSetAttribute", CUBLAS_STATUS_INVALID_VALUE, "not a live preference");
  }
  return SetAttr("cublasLtMatmulPreferenceSetAttribute", kPrefAttrs, p->attrs, attr, buf, sizeInBytes);
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmulAlgoGetHeuristic() and
// cublasLtMatmulHeuristicResult_t. One algorithm for any problem the emulation runs (no
// workspace, alignment = the element size); NOT_SUPPORTED, no results, for any other
// configuration or when the preference excludes that algorithm.
KILN_LT_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                                             cublasLtMatmulDesc_t operationDesc,
                                                             cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                             cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                             cublasLtMatmulPreference_t preference,
                                                             int requestedAlgoCount,
                                                             cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                             int* returnAlgoCount) {
  constexpr const char* kCall = "cublasLtMatmulAlgoGetHeuristic";
  emu::CountLibraryPlan();
  if (!ValidHandle(lightHandle)) return Refuse(kCall, CUBLAS_STATUS_NOT_INITIALIZED, "not a live cuBLASLt handle");
  if (returnAlgoCount != nullptr) *returnAlgoCount = 0;
  const MatmulDesc* desc = AsDesc(operationDesc);
  const Layout *la = AsLayout(Adesc), *lb = AsLayout(Bdesc), *ld = AsLayout(Ddesc);
  const Layout* lc = AsLayout(Cdesc);
  const Preference* pref = AsPref(preference);
  if (desc == nullptr || la == nullptr || lb == nullptr || lc == nullptr || ld == nullptr || pref == nullptr) {
    return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                  "the descriptor, a layout (A, B, C, D) or the preference is NULL or not a live object");
  }
  if (requestedAlgoCount <= 0 || heuristicResultsArray == nullptr || returnAlgoCount == nullptr) {
    return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                  "requestedAlgoCount " + std::to_string(requestedAlgoCount) + " <= 0, or a NULL result array/count");
  }
  Problem p;
  const cublasStatus_t st = Validate(kCall, *desc, la, lb, lc, ld, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  const Attrs& pa = pref->attrs;
  if (pa.Get<uint32_t>(CUBLASLT_MATMUL_PREF_SEARCH_MODE) != CUBLASLT_SEARCH_BEST_FIT) {
    return Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED, "SEARCH_MODE other than CUBLASLT_SEARCH_BEST_FIT is not emulated");
  }
  const std::pair<int, const Matrix*> aligns[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &p.a},
                                                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &p.b},
                                                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &p.c},
                                                  {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &p.d}};
  for (const auto& [id, x] : aligns) {
    const uint32_t min_align = pa.Get<uint32_t>(id);
    if (min_align < ElementSize(x->type)) {
      return Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED,
                    std::string(FindAttr(kPrefAttrs, id)->name) + " " + std::to_string(min_align) +
                        " is below the element size: no algorithm reads unaligned elements");
    }
    if (p.integer && min_align < 4) {
      return Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED,
                    std::string(FindAttr(kPrefAttrs, id)->name) + " " + std::to_string(min_align) +
                        ": the int8 GEMM's kernels need 4-byte aligned matrices");
    }
  }
  const uint64_t impl = ImplFlags(p);
  if ((pa.Get<uint64_t>(CUBLASLT_MATMUL_PREF_IMPL_MASK) & impl) != impl) {
    return Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED,
                  "IMPL_MASK excludes the emulated algorithm (FMA with a 32F accumulator; IMMA with 32I for int8)");
  }
  const float max_waves = pa.Get<float>(CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT);
  if (max_waves != 0.0f && max_waves < 1.0f) {
    return Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED, "MAX_WAVES_COUNT below the emulated algorithm's 1.0");
  }
  cublasLtMatmulHeuristicResult_t& r = heuristicResultsArray[0];
  std::memset(&r, 0, sizeof r);
  r.algo.data[0] = kAlgoMagic;
  r.algo.data[1] = TypeKey(p);
  r.workspaceSize = 0;  // fits any MAX_WORKSPACE_BYTES
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLAS docs, cuBLASLt API reference: cublasLtMatmul() (with cublasLtMatmulDescAttributes_t,
// cublasLtMatrixLayoutAttribute_t and cublasLtEpilogue_t for what each setting means). See the
// file comment for the semantics; here the checks, then the enqueue.
KILN_LT_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                             const void* alpha, const void* A, cublasLtMatrixLayout_t Adesc,
                                             const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                                             const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                                             cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo,
                                             void* workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  constexpr const char* kCall = "cublasLtMatmul";
  if (!ValidHandle(lightHandle)) return Refuse(kCall, CUBLAS_STATUS_NOT_INITIALIZED, "not a live cuBLASLt handle");
  const MatmulDesc* desc = AsDesc(computeDesc);
  const Layout *la = AsLayout(Adesc), *lb = AsLayout(Bdesc), *ld = AsLayout(Ddesc);
  const Layout* lc = AsLayout(Cdesc);
  if (desc == nullptr || la == nullptr || lb == nullptr || lc == nullptr || ld == nullptr) {
    return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                  "the descriptor or a layout (A, B, C, D) is NULL or not a live object");
  }
  Work w;
  Problem& p = w.p;
  cublasStatus_t st = Validate(kCall, *desc, la, lb, lc, ld, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  // An algorithm from cublasLtMatmulAlgoGetHeuristic for these types; NULL asks for the implicit
  // heuristic, which finds the same one.
  if (algo != nullptr && (algo->data[0] != kAlgoMagic || algo->data[1] != TypeKey(p))) {
    return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                  algo->data[0] != kAlgoMagic ? "algo is not one cublasLtMatmulAlgoGetHeuristic returned"
                                              : "algo was found for other types than this descriptor and layouts");
  }

  // alpha and beta.
  if (alpha == nullptr || beta == nullptr) return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE, "alpha or beta is NULL");
  const bool device_scalars = p.pointer_mode == CUBLASLT_POINTER_MODE_DEVICE;
  if (device_scalars) {
    const Extent one{0, 1};
    const char* type = p.integer ? "int32" : "float";
    w.alpha_dev = CheckRange(kCall, "alpha (POINTER_MODE_DEVICE)", alpha, one, 4, type);
    w.beta_dev = CheckRange(kCall, "beta (POINTER_MODE_DEVICE)", beta, one, 4, type);
    if (w.alpha_dev == nullptr || w.beta_dev == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  } else if (p.integer) {
    std::memcpy(&w.alpha_i, alpha, 4);
    std::memcpy(&w.beta_i, beta, 4);
  } else {
    std::memcpy(&w.alpha, alpha, 4);
    std::memcpy(&w.beta, beta, 4);
  }
  if (p.integer) {
    for (const auto& [name, ptr] : {std::pair<const char*, const void*>{"A", A}, {"B", B}, {"C", C}, {"D", D}}) {
      if (reinterpret_cast<uintptr_t>(ptr) % 4 != 0) {
        return Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED,
                      std::string(name) + " at " + Hex(ptr) + ": the int8 GEMM needs 4-byte aligned matrix pointers");
      }
    }
  }

  // C and D: in place (C == D) needs C's layout to be D's; out of place, C may have its own ld.
  const bool in_place = C == D;
  if (in_place && !p.c_is_d_desc &&
      (p.c.ld != p.d.ld || p.c.stride != p.d.stride)) {
    return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                  "C == D (in place) but C's layout (" + Shape(p.c) + ") differs from D's (" + Shape(p.d) + ")");
  }
  const Extent ed = MatrixExtent(p.d);
  if (p.batch > 1 && !ed.empty()) {
    const __int128 member = static_cast<__int128>(p.d.cols - 1) * p.d.ld + static_cast<__int128>(p.d.rows);
    const __int128 s = p.d.stride < 0 ? -static_cast<__int128>(p.d.stride) : p.d.stride;
    if (s < member) {
      return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                    "D " + Shape(p.d) + ": batch members overlap (|stride| < (cols-1)*ld + rows)");
    }
  }

  // Device pointers, each over the elements its layout touches.
  const Extent ea = p.m > 0 && p.n > 0 ? MatrixExtent(p.a) : Extent{};
  const Extent eb = p.m > 0 && p.n > 0 ? MatrixExtent(p.b) : Extent{};
  if (!ea.empty() && (w.a = CheckRange(kCall, "A", A, ea, ElementSize(p.a.type), Shape(p.a))) == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (!eb.empty() && (w.b = CheckRange(kCall, "B", B, eb, ElementSize(p.b.type), Shape(p.b))) == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  // C is read when beta != 0 (always possible with device scalars); unread, it may be NULL.
  const bool read_c = device_scalars || (p.integer ? w.beta_i != 0 : w.beta != 0.0f);
  const Extent ec = MatrixExtent(p.c);
  if (!ec.empty() && (read_c || C != nullptr)) {
    if ((w.c = CheckRange(kCall, "C", C, ec, ElementSize(p.c.type), Shape(p.c))) == nullptr) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  if (!ed.empty() && (w.d = const_cast<unsigned char*>(
                          CheckRange(kCall, "D", D, ed, ElementSize(p.d.type), Shape(p.d)))) == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (p.bias && p.m > 0 && p.n > 0) {
    const void* bias_ptr = desc->attrs.Get<const void*>(CUBLASLT_MATMUL_DESC_BIAS_POINTER);
    Extent eb_ias;
    const __int128 last = static_cast<__int128>(p.batch - 1) * p.bias_stride;
    eb_ias.lo = last < 0 ? last : 0;
    eb_ias.hi = (last > 0 ? last : 0) + static_cast<__int128>(p.m);
    std::string shape = std::to_string(p.m) + " " + TypeName(p.bias_type);
    if (p.batch > 1) shape += ", batch stride " + std::to_string(p.bias_stride);
    if ((w.bias = CheckRange(kCall, "bias (BIAS_POINTER)", bias_ptr, eb_ias, ElementSize(p.bias_type), shape)) ==
        nullptr) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  if (workspaceSizeInBytes > 0) {
    std::string why;
    if (workspace == nullptr ||
        emu::DeviceRange(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(workspace)), workspaceSizeInBytes,
                         &why) == nullptr) {
      return Refuse(kCall, CUBLAS_STATUS_INVALID_VALUE,
                    "workspace at " + Hex(workspace) + " of " + std::to_string(workspaceSizeInBytes) +
                        " bytes is not device memory: " + (workspace == nullptr ? std::string("NULL") : why));
    }
  }

  if (emu::FaultDue("blas-not-supported")) {
    return Refuse(kCall, CUBLAS_STATUS_NOT_SUPPORTED, "injected fault 'blas-not-supported'");
  }
  const CUresult r = emu::Enqueue(stream, kCall, [w] { w.Run(); });
  if (r != CUDA_SUCCESS) {
    return Refuse(kCall, CUBLAS_STATUS_EXECUTION_FAILED,
                  "enqueueing on stream " + Hex(stream) + " failed with CUresult " + std::to_string(static_cast<int>(r)));
  }
  emu::LogCall(kCall);
  return CUBLAS_STATUS_SUCCESS;
}
