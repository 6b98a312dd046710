// Self-test of the emulated cuBLASLt (cublaslt.cc): a plain program, one line per case, exit 1
// on any mismatch. It uses cuBLASLt's API and the hooks in check_hooks.h only (context,
// device buffers, synchronisation, fault injection), so it links either with the emulated driver
// or with a host-memory stand-in. Expected values are worked out by hand in the comments (small
// integers, exact in every type), or, for GELU and the random and Kiln-mapping cases, evaluated
// in double from the documented formulas by loops written here independently of cublaslt.cc.
#include <cublasLt.h>
#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/emulated_cuda/check_hooks.h"
#include "tests/emulated_cuda/check_report.h"
#include "tests/emulated_cuda/half.h"

namespace {

namespace emu = kiln::emulated_cuda;

std::string Name(cublasStatus_t s) { return cublasLtGetStatusName(s); }

constexpr float kNaN = NAN;

struct Mat {
  cudaDataType_t type = CUDA_R_32F;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  int64_t stride = 0;
};

struct Spec {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  Mat a, b, c, d;
  int32_t batch = 1;
  bool own_c_desc = false;  // C gets its own layout; otherwise Cdesc = Ddesc
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: BIAS_DATA_TYPE left at its default
  int64_t bias_stride = 0;
  float alpha = 1.0f, beta = 0.0f;
  int32_t alpha_i = 1, beta_i = 0;  // with scale type CUDA_R_32I
};

struct Outcome {
  cublasStatus_t setup = CUBLAS_STATUS_SUCCESS;  // the first failed create / set-attribute call
  cublasStatus_t heuristic = CUBLAS_STATUS_SUCCESS;
  int algos = 0;
  size_t workspace = 0;
  cublasStatus_t matmul = CUBLAS_STATUS_SUCCESS;
  bool ok() const { return setup == CUBLAS_STATUS_SUCCESS && heuristic == CUBLAS_STATUS_SUCCESS && algos > 0 &&
                           matmul == CUBLAS_STATUS_SUCCESS; }
  std::string str() const {
    return "setup " + Name(setup) + ", heuristic " + Name(heuristic) + " (" + std::to_string(algos) +
           " algos, workspace " + std::to_string(workspace) + "), matmul " + Name(matmul);
  }
};

cublasLtHandle_t g_lt = nullptr;

// Builds the descriptors of `s`, asks the heuristic, and runs cublasLtMatmul (with the algorithm
// found, or with algo = NULL when the heuristic found none, to see what the matmul says), then
// waits for the stream.
Outcome Run(const Spec& s, const void* A, const void* B, const void* C, void* D) {
  Outcome o;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  auto step = [&o](cublasStatus_t st) {
    if (o.setup == CUBLAS_STATUS_SUCCESS) o.setup = st;
  };
  step(cublasLtMatmulDescCreate(&desc, s.compute, s.scale));
  step(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof(s.ta)));
  step(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof(s.tb)));
  step(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &s.epilogue, sizeof(s.epilogue)));
  step(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &s.bias, sizeof(s.bias)));
  if (s.bias_type != -1) {
    step(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &s.bias_type,
                                        sizeof(s.bias_type)));
  }
  if (s.bias_stride != 0) {
    step(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &s.bias_stride,
                                        sizeof(s.bias_stride)));
  }
  auto layout = [&](const Mat& m, cublasLtMatrixLayout_t* l) {
    step(cublasLtMatrixLayoutCreate(l, m.type, m.rows, m.cols, m.ld));
    if (s.batch != 1) {
      step(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &s.batch, sizeof(s.batch)));
      step(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &m.stride,
                                            sizeof(m.stride)));
    }
  };
  layout(s.a, &la);
  layout(s.b, &lb);
  layout(s.d, &ld);
  if (s.own_c_desc) layout(s.c, &lc);
  step(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_ws = uint64_t{32} << 20;
  step(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof(max_ws)));
  if (o.setup == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulHeuristicResult_t results[4] = {};
    o.heuristic = cublasLtMatmulAlgoGetHeuristic(g_lt, desc, la, lb, s.own_c_desc ? lc : ld, ld, pref, 4, results,
                                                 &o.algos);
    const bool found = o.heuristic == CUBLAS_STATUS_SUCCESS && o.algos > 0 &&
                       results[0].state == CUBLAS_STATUS_SUCCESS && results[0].workspaceSize <= max_ws;
    o.workspace = found ? results[0].workspaceSize : 0;
    void* ws = o.workspace > 0 ? CheckAlloc(o.workspace) : nullptr;
    const bool int_scale = s.scale == CUDA_R_32I;
    const void* alpha = int_scale ? static_cast<const void*>(&s.alpha_i) : &s.alpha;
    const void* beta = int_scale ? static_cast<const void*>(&s.beta_i) : &s.beta;
    o.matmul = cublasLtMatmul(g_lt, desc, alpha, A, la, B, lb, beta, C, s.own_c_desc ? lc : ld, D, ld,
                              found ? &results[0].algo : nullptr, ws, o.workspace, nullptr);
    CheckSync();
    if (ws) CheckFree(ws);
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  for (cublasLtMatrixLayout_t l : {la, lb, lc, ld}) {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
  if (desc) cublasLtMatmulDescDestroy(desc);
  return o;
}

std::string Floats(const std::vector<float>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? " " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

std::string Bits(const std::vector<uint16_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%s%04x", i ? " " : "", v[i]);
    s += buf;
  }
  return s + "]";
}

// Exact comparison of a run's D with `want` (NaN never equals: sentinels are finite).
void Expect(const std::string& name, const Outcome& o, const std::vector<float>& got, const std::vector<float>& want) {
  if (!o.ok()) return Report(name, false, o.str());
  Report(name, got == want, got == want ? "D = " + Floats(got) : "got " + Floats(got) + ", want " + Floats(want));
}

// ---- The 2x3 * 3x2 problem used by several cases ----------------------------------------------
// A = [[1 2 3], [4 5 6]], B = [[7 8], [9 10], [11 12]]:
// A*B = [[1*7+2*9+3*11, 1*8+2*10+3*12], [4*7+5*9+6*11, 4*8+5*10+6*12]] = [[58 64], [139 154]].
const float kA[2][3] = {{1, 2, 3}, {4, 5, 6}};
const float kB[3][2] = {{7, 8}, {9, 10}, {11, 12}};
constexpr float kS = -999.0f;  // sentinel in D's padding: must stay

// A column-major store of rows x cols values (fill NaN: padding rows are never read).
std::vector<float> ColMajor(int rows, int cols, int64_t ld, auto at, float fill = kNaN) {
  std::vector<float> v(static_cast<size_t>(ld * cols), fill);
  for (int j = 0; j < cols; ++j) {
    for (int i = 0; i < rows; ++i) v[i + j * ld] = at(i, j);
  }
  return v;
}

void CaseColumnMajorLd() {
  // A 2x3 with lda 4, B 3x2 with ldb 5, D 2x2 with ldd 3 (padding row 2 keeps the sentinel).
  float* A = CheckUpload(ColMajor(2, 3, 4, [](int i, int j) { return kA[i][j]; }));
  float* B = CheckUpload(ColMajor(3, 2, 5, [](int i, int j) { return kB[i][j]; }));
  float* D = CheckUpload(std::vector<float>(6, kS));
  Spec s;
  s.a = {CUDA_R_32F, 2, 3, 4};
  s.b = {CUDA_R_32F, 3, 2, 5};
  s.d = s.c = {CUDA_R_32F, 2, 2, 3};
  Outcome o = Run(s, A, B, D, D);
  Expect("2x3 * 3x2 column-major, lda 4 ldb 5 ldd 3", o, CheckDownload(D, 6), {58, 139, kS, 64, 154, kS});
  for (void* p : {(void*)A, (void*)B, (void*)D}) CheckFree(p);
}

void CaseTransposes() {
  // op(A) = A^T with A stored 3x2 (lda 5); op(B) = B^T with B stored 2x3 (ldb 4); each of the
  // four combinations gives A*B = [[58 64], [139 154]].
  float* An = CheckUpload(ColMajor(2, 3, 4, [](int i, int j) { return kA[i][j]; }));
  float* At = CheckUpload(ColMajor(3, 2, 5, [](int i, int j) { return kA[j][i]; }));
  float* Bn = CheckUpload(ColMajor(3, 2, 5, [](int i, int j) { return kB[i][j]; }));
  float* Bt = CheckUpload(ColMajor(2, 3, 4, [](int i, int j) { return kB[j][i]; }));
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      float* D = CheckUpload(std::vector<float>(4, kS));
      Spec s;
      s.ta = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
      s.tb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
      s.a = ta ? Mat{CUDA_R_32F, 3, 2, 5} : Mat{CUDA_R_32F, 2, 3, 4};
      s.b = tb ? Mat{CUDA_R_32F, 2, 3, 4} : Mat{CUDA_R_32F, 3, 2, 5};
      s.d = s.c = {CUDA_R_32F, 2, 2, 2};
      Outcome o = Run(s, ta ? At : An, tb ? Bt : Bn, D, D);
      Expect(std::string("transposes: op(A) ") + (ta ? "T" : "N") + ", op(B) " + (tb ? "T" : "N"), o,
             CheckDownload(D, 4), {58, 139, 64, 154});
      CheckFree(D);
    }
  }
  for (void* p : {(void*)An, (void*)At, (void*)Bn, (void*)Bt}) CheckFree(p);
}

void CaseAlphaBeta() {
  float* A = CheckUpload(ColMajor(2, 3, 2, [](int i, int j) { return kA[i][j]; }));
  float* B = CheckUpload(ColMajor(3, 2, 3, [](int i, int j) { return kB[i][j]; }));
  // C = [[1 2], [3 4]] with its own layout (ldc 2), D with ldd 3: out of place.
  // D = 2 * A*B + 0.5 * C = [[116.5 129], [279.5 310]].
  {
    float* C = CheckUpload(std::vector<float>{1, 3, 2, 4});
    float* D = CheckUpload(std::vector<float>(6, kS));
    Spec s;
    s.a = {CUDA_R_32F, 2, 3, 2};
    s.b = {CUDA_R_32F, 3, 2, 3};
    s.c = {CUDA_R_32F, 2, 2, 2};
    s.d = {CUDA_R_32F, 2, 2, 3};
    s.own_c_desc = true;
    s.alpha = 2.0f;
    s.beta = 0.5f;
    Outcome o = Run(s, A, B, C, D);
    Expect("alpha 2, beta 0.5, C (ldc 2) != D (ldd 3)", o, CheckDownload(D, 6), {116.5f, 279.5f, kS, 129, 310, kS});
    Expect("  ... C unchanged", o, CheckDownload(C, 4), {1, 3, 2, 4});
    CheckFree(C);
    CheckFree(D);
  }
  // In place: C == D = [[1 2], [3 4]] (ld 3), beta 1: D = A*B + C = [[59 66], [142 158]].
  {
    float* D = CheckUpload(std::vector<float>{1, 3, kS, 2, 4, kS});
    Spec s;
    s.a = {CUDA_R_32F, 2, 3, 2};
    s.b = {CUDA_R_32F, 3, 2, 3};
    s.d = s.c = {CUDA_R_32F, 2, 2, 3};
    s.beta = 1.0f;
    Outcome o = Run(s, A, B, D, D);
    Expect("in place C == D, beta 1", o, CheckDownload(D, 6), {59, 142, kS, 66, 158, kS});
    CheckFree(D);
  }
  // beta 0: C is not read (NaN there does not reach D): D = -1 * A*B.
  {
    float* C = CheckUpload(std::vector<float>(4, kNaN));
    float* D = CheckUpload(std::vector<float>(4, kS));
    Spec s;
    s.a = {CUDA_R_32F, 2, 3, 2};
    s.b = {CUDA_R_32F, 3, 2, 3};
    s.c = s.d = {CUDA_R_32F, 2, 2, 2};
    s.own_c_desc = true;
    s.alpha = -1.0f;
    Outcome o = Run(s, A, B, C, D);
    Expect("beta 0 leaves C (all NaN) unread", o, CheckDownload(D, 4), {-58, -139, -64, -154});
    CheckFree(C);
    CheckFree(D);
  }
  CheckFree(A);
  CheckFree(B);
}

void CaseBatch() {
  // m 2, n 1, k 2, batch 2. A members [[1 2], [3 4]] and [[5 6], [7 8]] (ld 2, stride 6: two
  // NaN between); B members [1 10]^T and [2 -1]^T (stride 3); D stride 4 (sentinels between).
  // D0 = [1+20, 3+40] = [21 43]; D1 = [10-6, 14-8] = [4 6].
  float* A = CheckUpload(std::vector<float>{1, 3, 2, 4, kNaN, kNaN, 5, 7, 6, 8});
  float* B = CheckUpload(std::vector<float>{1, 10, kNaN, 2, -1});
  Spec s;
  s.batch = 2;
  s.a = {CUDA_R_32F, 2, 2, 2, 6};
  s.b = {CUDA_R_32F, 2, 1, 2, 3};
  s.d = s.c = {CUDA_R_32F, 2, 1, 2, 4};
  {
    float* D = CheckUpload(std::vector<float>(6, kS));
    Outcome o = Run(s, A, B, D, D);
    Expect("batch 2, strides A 6, B 3, D 4", o, CheckDownload(D, 6), {21, 43, kS, kS, 4, 6});
    CheckFree(D);
  }
  // BIAS [100 200] shared by both members (BIAS_BATCH_STRIDE 0): [121 243], [104 206].
  float* bias = CheckUpload(std::vector<float>{100, 200, 1000, 2000});
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  s.bias = bias;
  {
    float* D = CheckUpload(std::vector<float>(6, kS));
    Outcome o = Run(s, A, B, D, D);
    Expect("batch 2 + BIAS, bias batch stride 0", o, CheckDownload(D, 6), {121, 243, kS, kS, 104, 206});
    CheckFree(D);
  }
  // BIAS_BATCH_STRIDE 2: member 1 adds [1000 2000]: [1004 2006].
  s.bias_stride = 2;
  {
    float* D = CheckUpload(std::vector<float>(6, kS));
    Outcome o = Run(s, A, B, D, D);
    Expect("batch 2 + BIAS, bias batch stride 2", o, CheckDownload(D, 6), {121, 243, kS, kS, 1004, 2006});
    CheckFree(D);
  }
  for (void* p : {(void*)A, (void*)B, (void*)bias}) CheckFree(p);
}

double GeluTanh(double x) {
  const double pi = std::acos(-1.0);
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / pi) * (x + 0.044715 * x * x * x)));
}

void CaseEpilogues() {
  // m 3, n 2, k 1: A = [1 -2 3]^T, B = [1 -1]: A*B = [[1 -1], [-2 2], [3 -3]].
  // bias [0.5 0.5 -4]: A*B + bias = [[1.5 -0.5], [-1.5 2.5], [-1 -7]].
  float* A = CheckUpload(std::vector<float>{1, -2, 3});
  float* B = CheckUpload(std::vector<float>{1, -1});
  float* bias = CheckUpload(std::vector<float>{0.5f, 0.5f, -4});
  Spec s;
  s.a = {CUDA_R_32F, 3, 1, 3};
  s.b = {CUDA_R_32F, 1, 2, 1};
  s.d = s.c = {CUDA_R_32F, 3, 2, 3};
  s.bias = bias;
  const std::vector<float> pre_bias = {1, -2, 3, -1, 2, -3};
  const std::vector<float> with_bias = {1.5f, -1.5f, -1, -0.5f, 2.5f, -7};
  struct E {
    uint32_t epilogue;
    const char* name;
  };
  for (E e : {E{CUBLASLT_EPILOGUE_BIAS, "BIAS"}, E{CUBLASLT_EPILOGUE_RELU, "RELU"},
              E{CUBLASLT_EPILOGUE_RELU_BIAS, "RELU_BIAS"}, E{CUBLASLT_EPILOGUE_GELU, "GELU"},
              E{CUBLASLT_EPILOGUE_GELU_BIAS, "GELU_BIAS"}}) {
    float* D = CheckUpload(std::vector<float>(6, kS));
    s.epilogue = e.epilogue;
    Outcome o = Run(s, A, B, D, D);
    const bool has_bias = e.epilogue & CUBLASLT_EPILOGUE_BIAS;
    const std::vector<float>& x = has_bias ? with_bias : pre_bias;
    std::vector<float> got = CheckDownload(D, 6), want(6);
    if (e.epilogue & CUBLASLT_EPILOGUE_GELU) {
      // The tanh form in double; the emulation rounds its double value to float once.
      double worst = 0;
      for (int i = 0; i < 6; ++i) {
        const double w = GeluTanh(x[i]);
        worst = std::max(worst, std::fabs(got[i] - w) / std::max(1.0, std::fabs(w)));
      }
      if (!o.ok()) {
        Report(std::string("epilogue ") + e.name, false, o.str());
      } else {
        Report(std::string("epilogue ") + e.name + " vs 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))) in double",
               worst <= 1e-7, "D = " + Floats(got) + ", max rel diff " + std::to_string(worst));
      }
    } else {
      for (int i = 0; i < 6; ++i) want[i] = (e.epilogue & CUBLASLT_EPILOGUE_RELU) ? std::max(x[i], 0.0f) : x[i];
      Expect(std::string("epilogue ") + e.name, o, got, want);
    }
    CheckFree(D);
  }
  for (void* p : {(void*)A, (void*)B, (void*)bias}) CheckFree(p);
}

// ---- float16 and bfloat16 -------------------------------------------------------------------------

void CaseHalf() {
  using emu::FloatToHalf;
  // A = [[1024 1], [1024 3]], B = [[2 0], [1 5]]: A*B = [[2049 5], [2051 15]].
  // float16 has 11 significant bits: in [2048, 4096) the spacing is 2, so 2049 (a tie between
  // 2048 and 2050) rounds to the even 2048 = 0x6800 and 2051 (between 2050 and 2052) to 2052 =
  // 0x6802; 5 = 0x4500, 15 = 0x4b80.
  auto h = [](std::vector<float> v) {
    std::vector<uint16_t> o;
    for (float f : v) o.push_back(FloatToHalf(f));
    return o;
  };
  uint16_t* A = CheckUpload(h({1024, 1024, 1, 3}));
  uint16_t* B = CheckUpload(h({2, 1, 0, 5}));
  Spec s;
  s.a = {CUDA_R_16F, 2, 2, 2};
  s.b = {CUDA_R_16F, 2, 2, 2};
  s.d = s.c = {CUDA_R_16F, 2, 2, 2};
  {
    uint16_t* D = CheckUpload(std::vector<uint16_t>(4, 0xffff));
    Outcome o = Run(s, A, B, D, D);
    const std::vector<uint16_t> got = CheckDownload(D, 4), want = {0x6800, 0x6802, 0x4500, 0x4b80};
    Report("float16: ties round to even (2049 -> 2048, 2051 -> 2052)", o.ok() && got == want,
           o.ok() ? "D bits " + Bits(got) + (got == want ? "" : ", want " + Bits(want)) : o.str());
    CheckFree(D);
  }
  // BIAS with a float16 bias [1 -100] (BIAS_DATA_TYPE set to CUDA_R_16F, as Kiln does):
  // [[2050 6], [1951 -85]]: 2050 = 0x6801, 6 = 0x4600, 1951 = 0x679f, -85 = 0xd550.
  {
    uint16_t* bias = CheckUpload(h({1, -100}));
    uint16_t* D = CheckUpload(std::vector<uint16_t>(4, 0xffff));
    Spec b = s;
    b.epilogue = CUBLASLT_EPILOGUE_BIAS;
    b.bias = bias;
    b.bias_type = CUDA_R_16F;
    Outcome o = Run(b, A, B, D, D);
    const std::vector<uint16_t> got = CheckDownload(D, 4), want = {0x6801, 0x679f, 0x4600, 0xd550};
    Report("float16 + float16 BIAS", o.ok() && got == want,
           o.ok() ? "D bits " + Bits(got) + (got == want ? "" : ", want " + Bits(want)) : o.str());
    CheckFree(bias);
    CheckFree(D);
  }
  // The value is rounded once, after alpha: 1 * 1 * alpha with alpha = 1 + 2^-11 (a tie between
  // 1 and 1 + 2^-10) gives 1.0 = 0x3c00; alpha = 1 + 3 * 2^-11 gives 1 + 2^-9 = 0x3c02.
  {
    uint16_t* one = CheckUpload(h({1}));
    Spec a;
    a.a = a.b = a.c = a.d = {CUDA_R_16F, 1, 1, 1};
    std::vector<uint16_t> got;
    bool ok = true;
    std::string detail;
    for (float alpha : {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f}) {
      uint16_t* D = CheckUpload(std::vector<uint16_t>(1, 0xffff));
      a.alpha = alpha;
      Outcome o = Run(a, one, one, D, D);
      ok = ok && o.ok();
      if (!o.ok()) detail = o.str();
      got.push_back(CheckDownload(D, 1)[0]);
      CheckFree(D);
    }
    ok = ok && got == std::vector<uint16_t>{0x3c00, 0x3c02};
    Report("float16: alpha 1+2^-11 -> 0x3c00, 1+3*2^-11 -> 0x3c02", ok, detail.empty() ? "D bits " + Bits(got) : detail);
    CheckFree(one);
  }
  CheckFree(A);
  CheckFree(B);
}

void CaseBFloat16() {
  using emu::FloatToBFloat16;
  // A = [[128 1], [128 3]], B = [[2 0], [1 5]]: A*B = [[257 5], [259 15]]. bfloat16 has 8
  // significant bits: spacing 2 in [256, 512), so 257 -> 256 = 0x4380 and 259 -> 260 = 0x4382
  // (ties to even); 5 = 0x40a0, 15 = 0x4170. With the default BIAS_DATA_TYPE (-1: D's type) and
  // a bfloat16 bias [1 -100]: [[258 6], [159 -85]] = 0x4381, 0x40c0, 0x431f, 0xc2aa.
  auto b16 = [](std::vector<float> v) {
    std::vector<uint16_t> o;
    for (float f : v) o.push_back(FloatToBFloat16(f));
    return o;
  };
  uint16_t* A = CheckUpload(b16({128, 128, 1, 3}));
  uint16_t* B = CheckUpload(b16({2, 1, 0, 5}));
  uint16_t* bias = CheckUpload(b16({1, -100}));
  Spec s;
  s.a = s.b = s.c = s.d = {CUDA_R_16BF, 2, 2, 2};
  for (bool with_bias : {false, true}) {
    uint16_t* D = CheckUpload(std::vector<uint16_t>(4, 0xffff));
    Spec r = s;
    if (with_bias) {
      r.epilogue = CUBLASLT_EPILOGUE_BIAS;
      r.bias = bias;
    }
    Outcome o = Run(r, A, B, D, D);
    const std::vector<uint16_t> got = CheckDownload(D, 4);
    const std::vector<uint16_t> want = with_bias ? std::vector<uint16_t>{0x4381, 0x431f, 0x40c0, 0xc2aa}
                                                 : std::vector<uint16_t>{0x4380, 0x4382, 0x40a0, 0x4170};
    Report(with_bias ? "bfloat16 + bfloat16 BIAS (default BIAS_DATA_TYPE)" : "bfloat16: ties round to even",
           o.ok() && got == want, o.ok() ? "D bits " + Bits(got) + (got == want ? "" : ", want " + Bits(want)) : o.str());
    CheckFree(D);
  }
  for (void* p : {(void*)A, (void*)B, (void*)bias}) CheckFree(p);
}

// ---- Refusals -----------------------------------------------------------------------------------

void CaseUnsupported() {
  void* buf = CheckAlloc(1024);
  std::memset(buf, 0, 1024);
  struct U {
    const char* name;
    cublasComputeType_t compute;
    cudaDataType_t scale, ab, cd;
    uint32_t epilogue;
  };
  for (U u : {U{"A/B/C float32 with D float16", CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                CUBLASLT_EPILOGUE_DEFAULT},
              U{"CUDA_R_64F with CUBLAS_COMPUTE_64F", CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F,
                CUBLASLT_EPILOGUE_DEFAULT},
              U{"float32 with scale type CUDA_R_64F", CUBLAS_COMPUTE_32F, CUDA_R_64F, CUDA_R_32F, CUDA_R_32F,
                CUBLASLT_EPILOGUE_DEFAULT},
              U{"epilogue GELU_AUX", CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
                CUBLASLT_EPILOGUE_GELU_AUX}}) {
    Spec s;
    s.compute = u.compute;
    s.scale = u.scale;
    s.epilogue = u.epilogue;
    s.a = s.b = {u.ab, 2, 2, 2};
    s.c = s.d = {u.cd, 2, 2, 2};
    if (std::string(u.name) == "A/B/C float32 with D float16") {
      s.d.type = CUDA_R_16F;
      s.own_c_desc = true;
    }
    Outcome o = Run(s, buf, buf, buf, buf);
    const bool ok = o.setup == CUBLAS_STATUS_SUCCESS && o.heuristic == CUBLAS_STATUS_NOT_SUPPORTED &&
                    o.algos == 0 && o.matmul == CUBLAS_STATUS_NOT_SUPPORTED;
    Report(std::string("unsupported: ") + u.name + " -> NOT_SUPPORTED from heuristic and matmul", ok, o.str());
  }
  CheckFree(buf);
}

void CaseAttributeSizes() {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 2, 2, 2);
  cublasLtMatmulPreferenceCreate(&pref);
  const int64_t op64 = CUBLAS_OP_T;
  const int32_t op32 = CUBLAS_OP_T, batch32 = 2;
  const int64_t batch64 = 2;
  const uint32_t ws32 = 1024;
  const uint64_t ws64 = 1024;
  struct T {
    const char* name;
    cublasStatus_t got, want;
  };
  const T tests[] = {
      {"desc TRANSA with 8 bytes", cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op64, 8),
       CUBLAS_STATUS_INVALID_VALUE},
      {"desc TRANSA with 4 bytes", cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op32, 4),
       CUBLAS_STATUS_SUCCESS},
      {"desc BIAS_POINTER with 4 bytes",
       cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &op32, 4), CUBLAS_STATUS_INVALID_VALUE},
      {"desc unknown attribute 9",
       cublasLtMatmulDescSetAttribute(desc, static_cast<cublasLtMatmulDescAttributes_t>(9), &op32, 4),
       CUBLAS_STATUS_INVALID_VALUE},
      {"desc TRANSA with buf NULL", cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, nullptr, 4),
       CUBLAS_STATUS_INVALID_VALUE},
      {"layout BATCH_COUNT with 8 bytes",
       cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch64, 8),
       CUBLAS_STATUS_INVALID_VALUE},
      {"layout BATCH_COUNT with 4 bytes",
       cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch32, 4),
       CUBLAS_STATUS_SUCCESS},
      {"layout STRIDED_BATCH_OFFSET with 4 bytes",
       cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch32, 4),
       CUBLAS_STATUS_INVALID_VALUE},
      {"preference MAX_WORKSPACE_BYTES with 4 bytes",
       cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws32, 4),
       CUBLAS_STATUS_INVALID_VALUE},
      {"preference MAX_WORKSPACE_BYTES with 8 bytes",
       cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws64, 8),
       CUBLAS_STATUS_SUCCESS},
  };
  for (const T& t : tests) {
    Report(std::string("attribute size: ") + t.name + " -> " + Name(t.want), t.got == t.want, Name(t.got));
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(layout);
  cublasLtMatmulDescDestroy(desc);
}

void CaseInvalidProblems() {
  float* A = CheckUpload(ColMajor(2, 3, 2, [](int i, int j) { return kA[i][j]; }));
  float* B = CheckUpload(ColMajor(3, 2, 3, [](int i, int j) { return kB[i][j]; }));
  float* D = CheckUpload(std::vector<float>(4, kS));
  Spec good;
  good.a = {CUDA_R_32F, 2, 3, 2};
  good.b = {CUDA_R_32F, 3, 2, 3};
  good.d = good.c = {CUDA_R_32F, 2, 2, 2};
  {
    Spec s = good;
    s.b = {CUDA_R_32F, 4, 2, 4};  // op(B) 4 x 2 against op(A) 2 x 3
    Outcome o = Run(s, A, B, D, D);
    Report("k mismatch (op(A) 2x3, op(B) 4x2) -> INVALID_VALUE from heuristic and matmul",
           o.heuristic == CUBLAS_STATUS_INVALID_VALUE && o.matmul == CUBLAS_STATUS_INVALID_VALUE, o.str());
  }
  {
    Spec s = good;
    s.b.ld = 4;  // B's last column then ends at element 4 + 3 = 7 > the 6 allocated
    Outcome o = Run(s, A, B, D, D);
    Report("B's ld 4 runs past its 6-element allocation -> matmul INVALID_VALUE",
           o.heuristic == CUBLAS_STATUS_SUCCESS && o.matmul == CUBLAS_STATUS_INVALID_VALUE, o.str());
  }
  {
    std::vector<float> host_a(6, 1.0f);  // host memory, not the device's
    Outcome o = Run(good, host_a.data(), B, D, D);
    Report("A in host memory -> matmul INVALID_VALUE", o.matmul == CUBLAS_STATUS_INVALID_VALUE, o.str());
  }
  {
    Spec s = good;
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;  // BIAS_POINTER left NULL
    Outcome o = Run(s, A, B, D, D);
    Report("BIAS epilogue without BIAS_POINTER -> matmul INVALID_VALUE", o.matmul == CUBLAS_STATUS_INVALID_VALUE,
           o.str());
  }
  {
    Spec s = good;
    s.d.ld = 1;  // ld < rows
    s.c = s.d;
    Outcome o = Run(s, A, B, D, D);
    Report("D's ld 1 < rows 2 -> INVALID_VALUE", o.heuristic == CUBLAS_STATUS_INVALID_VALUE &&
                                                     o.matmul == CUBLAS_STATUS_INVALID_VALUE, o.str());
  }
  {
    const std::vector<float> before = CheckDownload(D, 4);
    CheckSetFault("blas-not-supported");
    Outcome o = Run(good, A, B, D, D);
    const std::vector<float> after = CheckDownload(D, 4);
    Report("fault blas-not-supported -> matmul NOT_SUPPORTED, D untouched",
           o.heuristic == CUBLAS_STATUS_SUCCESS && o.matmul == CUBLAS_STATUS_NOT_SUPPORTED && after == before, o.str());
    Outcome again = Run(good, A, B, D, D);
    Expect("  ... fires once: the next matmul runs", again, CheckDownload(D, 4), {58, 139, 64, 154});
  }
  for (void* p : {(void*)A, (void*)B, (void*)D}) CheckFree(p);
}

void CaseLibrary() {
  const size_t v = cublasLtGetVersion();
  Report("cublasLtGetVersion = CUBLAS_VERSION, major CUBLAS_VER_MAJOR",
         v == CUBLAS_VERSION && v / 10000 == CUBLAS_VER_MAJOR, std::to_string(v));
  Report("cublasLtGetCudartVersion = CUDA_VERSION", cublasLtGetCudartVersion() == CUDA_VERSION,
         std::to_string(cublasLtGetCudartVersion()));
  struct S {
    cublasStatus_t s;
    const char* name;
  };
  bool names_ok = true;
  for (S s : {S{CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS"},
              S{CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED"},
              S{CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED"},
              S{CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE"},
              S{CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH"},
              S{CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR"},
              S{CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED"},
              S{CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR"},
              S{CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED"},
              S{CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR"}}) {
    const char* text = cublasLtGetStatusString(s.s);
    names_ok = names_ok && std::string(cublasLtGetStatusName(s.s)) == s.name && text != nullptr && *text != '\0';
  }
  Report("cublasLtGetStatusName / String for every cublasStatus_t", names_ok);
  CheckContextCurrent(false);
  cublasLtHandle_t h = nullptr;
  const cublasStatus_t st = cublasLtCreate(&h);
  CheckContextCurrent(true);
  Report("cublasLtCreate without a current context: the runtime's implicit primary context",
         st == CUBLAS_STATUS_SUCCESS, Name(st));
  if (st == CUBLAS_STATUS_SUCCESS) cublasLtDestroy(h);
}

// ---- Against independent double-precision loops ------------------------------------------------

uint32_t g_seed = 12345;
float Rand() {  // in [-1, 1), 2^-16 granular (exact in every type's product)
  g_seed = g_seed * 1664525u + 1013904223u;
  return static_cast<float>(static_cast<int32_t>(g_seed >> 16) - 32768) / 32768.0f;
}

// Device values of `type` from floats (rounded to the type), and their float values.
struct Buf {
  cudaDataType_t type;
  std::vector<float> v;  // the values as stored
  void* dev = nullptr;
  Buf(cudaDataType_t t, size_t n, bool random, float fill = 0.0f) : type(t), v(n) {
    const size_t es = t == CUDA_R_32F ? 4 : 2;
    dev = CheckAlloc(n * es + 1);
    for (size_t i = 0; i < n; ++i) {
      float f = random ? Rand() : fill;
      if (t == CUDA_R_16F) f = emu::HalfToFloat(emu::FloatToHalf(f));
      if (t == CUDA_R_16BF) f = emu::BFloat16ToFloat(emu::FloatToBFloat16(f));
      v[i] = f;
      Put(i, f);
    }
  }
  ~Buf() { CheckFree(dev); }
  void Put(size_t i, float f) {
    if (type == CUDA_R_32F) std::memcpy(static_cast<char*>(dev) + 4 * i, &f, 4);
    const uint16_t h = type == CUDA_R_16F ? emu::FloatToHalf(f) : emu::FloatToBFloat16(f);
    if (type != CUDA_R_32F) std::memcpy(static_cast<char*>(dev) + 2 * i, &h, 2);
  }
  float Get(size_t i) const {
    CheckSync();
    if (type == CUDA_R_32F) {
      float f;
      std::memcpy(&f, static_cast<char*>(dev) + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, static_cast<char*>(dev) + 2 * i, 2);
    return type == CUDA_R_16F ? emu::HalfToFloat(h) : emu::BFloat16ToFloat(h);
  }
};

// Random problems (types, op(), lds, batches, alpha, beta, C in or out of place, every epilogue)
// against a reference that reads the same stored values: sum in double over k, then
// alpha * sum + beta * C + bias, the activation, rounded to D's type.
void CaseRandom() {
  const cudaDataType_t types[] = {CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF};
  const uint32_t epilogues[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU,      CUBLASLT_EPILOGUE_BIAS,
                                CUBLASLT_EPILOGUE_RELU_BIAS, CUBLASLT_EPILOGUE_GELU, CUBLASLT_EPILOGUE_GELU_BIAS};
  int bad = 0, runs = 0;
  double worst[3] = {0, 0, 0};
  std::string first_bad;
  for (int iter = 0; iter < 240; ++iter) {
    const int ti = iter % 3;
    const cudaDataType_t t = types[ti];
    const uint32_t epi = epilogues[(iter / 3) % 6];
    const uint64_t m = 1 + (g_seed >> 8) % 9, n = 1 + (g_seed >> 12) % 7, k = 1 + (g_seed >> 16) % 11;
    Rand();
    const bool ta = iter & 1, tb = (iter >> 1) & 1, in_place = (iter >> 2) & 1;
    const int32_t batch = 1 + iter % 3;
    const int64_t lda = (ta ? k : m) + iter % 2, ldb = (tb ? n : k) + iter % 3, ldd = m + iter % 2;
    const int64_t ldc = in_place ? ldd : m + (iter / 2) % 3;
    const uint64_t a_cols = ta ? m : k, b_cols = tb ? k : n;
    const int64_t sa = lda * a_cols + 1, sb = ldb * b_cols + 2, sd = ldd * n + 1, sc = in_place ? sd : ldc * n;
    Spec s;
    s.compute = (t == CUDA_R_32F && iter % 4 == 1) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    s.ta = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    s.tb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    s.batch = batch;
    s.a = {t, ta ? k : m, a_cols, lda, sa};
    s.b = {t, tb ? n : k, b_cols, ldb, sb};
    s.d = {t, m, n, ldd, sd};
    s.c = {t, m, n, ldc, sc};
    s.own_c_desc = !in_place;
    s.epilogue = epi;
    s.alpha = iter % 5 == 0 ? 1.0f : Rand() * 2;
    s.beta = iter % 4 == 0 ? 0.0f : Rand();
    Buf A(t, sa * batch, true), B(t, sb * batch, true), bias(t, m, true);
    Buf D(t, sd * batch, true);  // in place, D's values are C
    Buf Cb(t, in_place ? 1 : sc * batch, true);
    s.bias = bias.dev;
    const std::vector<float> c_vals = in_place ? D.v : Cb.v;
    Outcome o = Run(s, A.dev, B.dev, in_place ? D.dev : Cb.dev, D.dev);
    ++runs;
    std::string why;
    if (!o.ok()) why = o.str();
    for (int32_t bt = 0; bt < batch && why.empty(); ++bt) {
      for (uint64_t j = 0; j < n; ++j) {
        for (uint64_t i = 0; i < m; ++i) {
          double acc = 0;
          for (uint64_t l = 0; l < k; ++l) {
            const double av = A.v[bt * sa + (ta ? l + i * lda : i + l * lda)];
            const double bv = B.v[bt * sb + (tb ? j + l * ldb : l + j * ldb)];
            acc += av * bv;
          }
          double x = static_cast<double>(s.alpha) * acc;
          if (s.beta != 0.0f) x += static_cast<double>(s.beta) * c_vals[bt * sc + i + j * ldc];
          if (epi & CUBLASLT_EPILOGUE_BIAS) x += bias.v[i];
          if (epi & CUBLASLT_EPILOGUE_RELU) x = x > 0 ? x : 0;
          if (epi & CUBLASLT_EPILOGUE_GELU) x = GeluTanh(x);
          float want = static_cast<float>(x);
          if (t == CUDA_R_16F) want = emu::HalfToFloat(emu::FloatToHalf(want));
          if (t == CUDA_R_16BF) want = emu::BFloat16ToFloat(emu::FloatToBFloat16(want));
          const float got = D.Get(bt * sd + i + j * ldd);
          // float32: a few float ulps (double rounding); half types: 1 ulp of D's type.
          const double tol = t == CUDA_R_32F ? 4e-7 : t == CUDA_R_16F ? 0x1p-10 : 0x1p-7;
          const double diff = std::fabs(static_cast<double>(got) - want) / std::max(1.0, std::fabs(static_cast<double>(want)));
          worst[ti] = std::max(worst[ti], diff);
          if (!(diff <= tol)) {
            why = "batch " + std::to_string(bt) + " D(" + std::to_string(i) + "," + std::to_string(j) + ") = " +
                  std::to_string(got) + ", want " + std::to_string(want);
          }
        }
        // D's padding rows (ldd > m) keep their values.
        for (int64_t i = m; i < ldd && why.empty(); ++i) {
          if (D.Get(bt * sd + i + j * ldd) != D.v[bt * sd + i + j * ldd]) why = "padding written";
        }
      }
    }
    if (!why.empty()) {
      ++bad;
      if (first_bad.empty()) {
        first_bad = "iter " + std::to_string(iter) + " (m " + std::to_string(m) + " n " + std::to_string(n) + " k " +
                    std::to_string(k) + " batch " + std::to_string(batch) + " epilogue " + std::to_string(epi) +
                    "): " + why;
      }
    }
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "%d/%d agree; max rel diff float32 %.3g, float16 %.3g, bfloat16 %.3g", runs - bad,
                runs, worst[0], worst[1], worst[2]);
  Report("random problems vs double-precision loops", bad == 0, bad ? std::string(buf) + "; first: " + first_bad : buf);
}

// Kiln's mapping (runtime/cuda/blas.h): a row-major Y[M,N] = X[M,K] W[K,N] is the column-major
// Y^T = W^T X^T: cuBLASLt's A is W (N x K, ld N), B is X (K x M, ld K), D is Y (N x M, ld N).
// Batched X [2,3,4] x W [2,4,5] + bias [5], GELU: row-major reference in double.
void CaseKilnMapping() {
  const int batch = 2, M = 3, K = 4, N = 5;
  Buf X(CUDA_R_32F, batch * M * K, true), W(CUDA_R_32F, batch * K * N, true), bias(CUDA_R_32F, N, true);
  Buf Y(CUDA_R_32F, batch * M * N, false, kNaN);
  Spec s;
  s.batch = batch;
  s.a = {CUDA_R_32F, N, K, N, K * N};
  s.b = {CUDA_R_32F, K, M, K, M * K};
  s.d = s.c = {CUDA_R_32F, N, M, N, M * N};
  s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  s.bias = bias.dev;
  Outcome o = Run(s, W.dev, X.dev, Y.dev, Y.dev);
  double worst = 0;
  for (int b = 0; b < batch; ++b) {
    for (int i = 0; i < M; ++i) {
      for (int j = 0; j < N; ++j) {
        double acc = 0;
        for (int l = 0; l < K; ++l) acc += double(X.v[b * M * K + i * K + l]) * W.v[b * K * N + l * N + j];
        const double want = GeluTanh(acc + bias.v[j]);
        worst = std::max(worst, std::fabs(Y.Get(b * M * N + i * N + j) - want) / std::max(1.0, std::fabs(want)));
      }
    }
  }
  Report("Kiln's mapping: row-major gelu(X W + bias), batch 2, as Y^T = W^T X^T", o.ok() && worst <= 2e-7,
         o.ok() ? "max rel diff " + std::to_string(worst) : o.str());
}

}  // namespace

// The int8 GEMM (A, B CUDA_R_8I; C, D CUDA_R_32I; COMPUTE_32I, scale CUDA_R_32I) in the "TN"
// format IMMA kernels take: op(A) = A^T with A stored k x m (lda = k: the rows of op(A) are
// contiguous), B stored k x n (ldb = k).
//   op(A) = [[1 2 3 4], [-1 0 1 2], [127 -128 0 1], [0 0 0 5]], op(B) = [[1 2], [1 -1], [1 0], [1 3]]
//   op(A) * op(B) = [[10 12], [2 4], [0 385], [5 15]]   (127*2 + -128*-1 + 1*3 = 385)
// alpha 2, beta 1 with C all 1: [[21 25], [5 9], [1 771], [11 31]].
void CaseInt8() {
  const std::vector<int8_t> a = {1, 2, 3, 4, -1, 0, 1, 2, 127, -128, 0, 1, 0, 0, 0, 5};
  const std::vector<int8_t> b = {1, 1, 1, 1, 2, -1, 0, 3};
  int8_t* A = CheckUpload(a, 4);
  int8_t* B = CheckUpload(b);
  int32_t* C = CheckUpload(std::vector<int32_t>(8, 1));
  Spec s;
  s.compute = CUBLAS_COMPUTE_32I;
  s.scale = CUDA_R_32I;
  s.ta = CUBLAS_OP_T;
  s.a = {CUDA_R_8I, 4, 4, 4};
  s.b = {CUDA_R_8I, 4, 2, 4};
  s.c = s.d = {CUDA_R_32I, 4, 2, 4};
  const auto expect = [](const std::string& name, const Outcome& o, const std::vector<int32_t>& got,
                         const std::vector<int32_t>& want) {
    if (!o.ok()) return Report(name, false, o.str());
    std::string text;
    for (int32_t v : got) text += " " + std::to_string(v);
    Report(name, got == want, "D =" + text);
  };
  {
    int32_t* D = CheckUpload(std::vector<int32_t>(8, -7));
    const Outcome plain = Run(s, A, B, D, D);
    expect("int8 TN GEMM, int32 D", plain, CheckDownload(D, 8), {10, 2, 0, 5, 12, 4, 385, 15});
    Spec sc = s;
    sc.alpha_i = 2;
    sc.beta_i = 1;
    sc.own_c_desc = true;
    const Outcome scaled = Run(sc, A, B, C, D);
    expect("int8 TN GEMM, alpha 2 beta 1 with C", scaled, CheckDownload(D, 8), {21, 5, 1, 11, 25, 9, 771, 31});
    CheckFree(D);
  }
  // What IMMA kernels with the regular ordering refuse: NOT_SUPPORTED, and D untouched.
  struct Refusal {
    const char* name;
    Spec spec;
    int a_offset;
    bool heuristic_refuses;
  };
  Spec nn = s;
  nn.ta = CUBLAS_OP_N;
  Spec k3 = s;
  k3.a = {CUDA_R_8I, 3, 4, 4};
  k3.b = {CUDA_R_8I, 3, 2, 4};
  Spec ld6 = s;
  ld6.c = ld6.d = {CUDA_R_32I, 4, 2, 6};
  Spec int8_out = s;
  int8_out.scale = CUDA_R_32F;
  int8_out.c = int8_out.d = {CUDA_R_8I, 4, 2, 4};
  for (const Refusal& r : {Refusal{"op(A) N (not TN)", nn, 0, true}, Refusal{"k = 3", k3, 0, true},
                           Refusal{"ldd 6", ld6, 0, true}, Refusal{"int8 D with a float scale (not emulated)",
                                                                   int8_out, 0, true},
                           Refusal{"A 1 byte past 4-byte alignment", s, 1, false}}) {
    int32_t* D = CheckUpload(std::vector<int32_t>(12, -7));
    const Outcome o = Run(r.spec, A + r.a_offset, B, D, D);
    const bool refused = o.setup == CUBLAS_STATUS_SUCCESS && o.matmul == CUBLAS_STATUS_NOT_SUPPORTED &&
                         (r.heuristic_refuses ? o.heuristic == CUBLAS_STATUS_NOT_SUPPORTED : o.algos == 1);
    const bool untouched = CheckDownload(D, 12) == std::vector<int32_t>(12, -7);
    Report(std::string("int8 refused: ") + r.name, refused && untouched, o.str());
    CheckFree(D);
  }
  for (void* p : {(void*)A, (void*)B, (void*)C}) CheckFree(p);
}

int main() {
  if (!CheckInit()) return 1;
  const cublasStatus_t st = cublasLtCreate(&g_lt);
  Report("cublasLtCreate", st == CUBLAS_STATUS_SUCCESS, Name(st));
  if (st != CUBLAS_STATUS_SUCCESS) return 1;
  CaseLibrary();
  CaseColumnMajorLd();
  CaseTransposes();
  CaseAlphaBeta();
  CaseBatch();
  CaseEpilogues();
  CaseHalf();
  CaseBFloat16();
  CaseUnsupported();
  CaseInt8();
  CaseAttributeSizes();
  CaseInvalidProblems();
  CaseRandom();
  CaseKilnMapping();
  const cublasStatus_t d = cublasLtDestroy(g_lt);
  Report("cublasLtDestroy", d == CUBLAS_STATUS_SUCCESS, Name(d));
  return ReportSummary();
}
