// The cuBLASLt library object (runtime/cuda/blas.h).
//
// Without a GPU (every machine these tests were written on): which MatMul / Gemm forms and
// epilogues Supports() accepts or refuses; the row-major -> column-major mapping against hand
// values; that mapping evaluated by a host model of cublasLtMatmul's documented semantics
// (column-major, op(), leading dimensions, strided batches, alpha/beta*C, the BIAS / RELU / GELU
// epilogues) and compared with the CPU kernels; and that Create() fails cleanly without a driver.
//
// "[gpu]" cases run the library for real and compare with the CPU kernels: in CI on the
// emulated CUDA device (tests/emulated_cuda/), and on a real GPU by scripts/gpu-check.
#if KILN_HAVE_CUDA

#include "runtime/cuda/blas.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/gpu_test_util.h"
#include "tests/text_util.h"
#include "tests/runtime/cuda/library_test_util.h"

namespace kiln::cuda {
namespace {

using testing::Absent;
using testing::HostTensor;
using testing::MaxRelDiff;
using testing::Random;
using testing::RunCpu;
using testing::Shape;
using testing::Zeros;

using kiln::testing::Contains;

Status Supports(std::string_view op, const AttrMap& attrs, const std::vector<const HostTensor*>& in,
                const HostTensor& y) {
  std::vector<DeviceTensor> ins = testing::DevViews(in);
  DeviceTensor out[] = {y.Dev()};
  return BlasLibrary::Supports(op, attrs, ins, out);
}

LtMatmulPlan Plan(std::string_view op, const AttrMap& attrs, const std::vector<const HostTensor*>& in,
                  const HostTensor& y) {
  std::vector<DeviceTensor> ins = testing::DevViews(in);
  DeviceTensor out[] = {y.Dev()};
  LtMatmulPlan plan;
  Status st =
      op == "MatMul" ? PlanMatMul(attrs, ins, out, false, &plan) : PlanGemm(attrs, ins, out, false, &plan);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return plan;
}

AttrMap Epilogue(std::string_view activation, bool residual = false, bool residual_first = false) {
  AttrMap a;
  if (!activation.empty()) a.SetString("epilogue_activation", std::string(activation));
  if (residual) a.SetInt("epilogue_residual", 1);
  if (residual_first) a.SetString("epilogue_order", "bias,residual,act");
  return a;
}

// ---- Supports --------------------------------------------------------------------------------

TEST_CASE("cuBLASLt Supports: MatMul dtypes, batching and broadcasts") {
  const AttrMap none;
  HostTensor a = Shape({2, 3}), b = Shape({3, 4}), y = Shape({2, 4});
  CHECK(Supports("MatMul", none, {&a, &b}, y).ok());
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    HostTensor ah = Shape({2, 3}, dt), bh = Shape({3, 4}, dt), yh = Shape({2, 4}, dt);
    CHECK(Supports("MatMul", none, {&ah, &bh}, yh).ok());
  }
  for (DType dt : {DType::kFloat64, DType::kInt32, DType::kInt64}) {
    HostTensor ad = Shape({2, 3}, dt), bd = Shape({3, 4}, dt), yd = Shape({2, 4}, dt);
    Status st = Supports("MatMul", none, {&ad, &bd}, yd);
    CHECK(st.code() == StatusCode::kUnimplemented);
    CHECK(Contains(st.message(), std::string(DTypeName(dt))));
  }
  // Batched A with a shared B folds; equal batches are strided.
  HostTensor a3 = Shape({5, 2, 3}), y3 = Shape({5, 2, 4});
  CHECK(Supports("MatMul", none, {&a3, &b}, y3).ok());
  HostTensor b3 = Shape({5, 3, 4});
  CHECK(Supports("MatMul", none, {&a3, &b3}, y3).ok());
  HostTensor b1 = Shape({1, 3, 4});  // a batch of one broadcasts like a rank-2 B
  CHECK(Supports("MatMul", none, {&a3, &b1}, y3).ok());
  // A shared left operand, and partial broadcasts, are left to the CPU backend.
  Status st = Supports("MatMul", none, {&a, &b3}, y3);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "batch broadcast"));
  HostTensor a4 = Shape({2, 1, 2, 3}), b4 = Shape({1, 5, 3, 4}), y4 = Shape({2, 5, 2, 4});
  CHECK(Supports("MatMul", none, {&a4, &b4}, y4).code() == StatusCode::kUnimplemented);
  HostTensor av = Shape({3}), yv = Shape({5, 4});
  CHECK(Supports("MatMul", none, {&av, &b3}, yv).code() == StatusCode::kUnimplemented);
  // Malformed ops are the op's own errors, not "unsupported".
  HostTensor bad = Shape({4, 4});
  st = Supports("MatMul", none, {&a, &bad}, y);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(Contains(st.message(), "inner dimensions differ"));
  HostTensor ywrong = Shape({2, 5});
  CHECK(Supports("MatMul", none, {&a, &b}, ywrong).code() == StatusCode::kInvalidArgument);
  HostTensor bb = Shape({2, 3, 4});
  CHECK(Supports("MatMul", none, {&a3, &bb}, y3).code() == StatusCode::kInvalidArgument);  // 5 vs 2
  // Sizes: K = 0 with a non-empty output is refused; an empty output is accepted (a no-op).
  HostTensor ak = Shape({2, 0}), bk = Shape({0, 4});
  CHECK(Supports("MatMul", none, {&ak, &bk}, y).code() == StatusCode::kUnimplemented);
  HostTensor a0 = Shape({0, 3}), y0 = Shape({0, 4});
  CHECK(Supports("MatMul", none, {&a0, &b}, y0).ok());
  CHECK(Plan("MatMul", none, {&a0, &b}, y0).empty);
  // Other ops.
  CHECK(Supports("Conv", none, {&a, &b}, y).code() == StatusCode::kUnimplemented);
}

TEST_CASE("cuBLASLt Supports: epilogues cuBLASLt can and cannot run") {
  HostTensor a = Shape({2, 3}), b = Shape({3, 4}), y = Shape({2, 4}), bias = Shape({4}), r = Shape({2, 4});
  HostTensor absent = Absent();
  CHECK(Supports("MatMul", {}, {&a, &b, &bias}, y).ok());
  CHECK(Supports("MatMul", Epilogue("Relu"), {&a, &b, &bias}, y).ok());
  CHECK(Supports("MatMul", Epilogue("Relu"), {&a, &b}, y).ok());
  CHECK(Supports("MatMul", Epilogue("GeluTanh"), {&a, &b, &bias}, y).ok());
  Status st = Supports("MatMul", Epilogue("Gelu"), {&a, &b, &bias}, y);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "tanh"));
  for (const char* act : {"Sigmoid", "HardSwish", "SiLU"}) {
    st = Supports("MatMul", Epilogue(act), {&a, &b, &bias}, y);
    CHECK(st.code() == StatusCode::kUnimplemented);
    CHECK(Contains(st.message(), act));
  }
  // A residual runs as C without an activation, in either order; with one it is refused.
  CHECK(Supports("MatMul", Epilogue("", true), {&a, &b, &bias, &r}, y).ok());
  CHECK(Supports("MatMul", Epilogue("", true, true), {&a, &b, &absent, &r}, y).ok());
  CHECK(Supports("MatMul", Epilogue("Relu", true), {&a, &b, &bias, &r}, y).code() ==
        StatusCode::kUnimplemented);
  CHECK(Supports("MatMul", Epilogue("Relu", true, true), {&a, &b, &bias, &r}, y).code() ==
        StatusCode::kUnimplemented);
  // Malformed annotations.
  CHECK(Supports("MatMul", Epilogue("", true), {&a, &b, &bias}, y).code() == StatusCode::kInvalidArgument);
  CHECK(Supports("MatMul", {}, {&a, &b, &bias, &r}, y).code() == StatusCode::kInvalidArgument);
  HostTensor r_bad = Shape({1, 4}), bias_bad = Shape({3});
  CHECK(Supports("MatMul", Epilogue("", true), {&a, &b, &bias, &r_bad}, y).code() ==
        StatusCode::kInvalidArgument);
  CHECK(Supports("MatMul", {}, {&a, &b, &bias_bad}, y).code() == StatusCode::kInvalidArgument);
  CHECK(Supports("MatMul", Epilogue("Swish"), {&a, &b}, y).code() == StatusCode::kInvalidArgument);
  // float16 / bfloat16 (`--precision`): the bias (of D's type), Relu and GeluTanh epilogues and
  // the residual as for float32.
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    HostTensor ah = Shape({2, 3}, dt), bh = Shape({3, 4}, dt), yh = Shape({2, 4}, dt), bias_h = Shape({4}, dt),
               r_h = Shape({2, 4}, dt);
    CHECK(Supports("MatMul", Epilogue("Relu"), {&ah, &bh, &bias_h}, yh).ok());
    CHECK(Supports("MatMul", Epilogue("GeluTanh"), {&ah, &bh}, yh).ok());
    CHECK(Supports("MatMul", Epilogue("", true), {&ah, &bh, &bias_h, &r_h}, yh).ok());
    CHECK(Supports("MatMul", Epilogue("Relu"), {&ah, &bh, &bias}, yh).code() == StatusCode::kInvalidArgument);
    CHECK(Supports("MatMul", Epilogue("", true), {&ah, &bh, &bias_h, &r}, yh).code() ==
          StatusCode::kInvalidArgument);  // a float32 residual
  }
}

TEST_CASE("cuBLASLt Supports: Gemm's C forms, alpha and beta") {
  HostTensor a = Shape({2, 3}), b = Shape({3, 4}), y = Shape({2, 4});
  AttrMap beta_half;
  beta_half.SetFloat("beta", 0.5f);
  AttrMap beta_zero;
  beta_zero.SetFloat("beta", 0.0f);
  HostTensor c_full = Shape({2, 4}), c_n = Shape({4}), c_1n = Shape({1, 4}), c_m1 = Shape({2, 1}),
             c_1 = Shape({1});
  CHECK(Supports("Gemm", {}, {&a, &b}, y).ok());
  CHECK(Supports("Gemm", beta_half, {&a, &b, &c_full}, y).ok());
  CHECK(Supports("Gemm", {}, {&a, &b, &c_n}, y).ok());
  CHECK(Supports("Gemm", {}, {&a, &b, &c_1n}, y).ok());
  Status st = Supports("Gemm", beta_half, {&a, &b, &c_n}, y);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "beta"));
  CHECK(Supports("Gemm", beta_zero, {&a, &b, &c_m1}, y).ok());  // C ignored
  CHECK(Supports("Gemm", {}, {&a, &b, &c_m1}, y).code() == StatusCode::kUnimplemented);
  CHECK(Supports("Gemm", {}, {&a, &b, &c_1}, y).code() == StatusCode::kUnimplemented);
  HostTensor c_bad = Shape({3, 4});
  CHECK(Supports("Gemm", {}, {&a, &b, &c_bad}, y).code() == StatusCode::kInvalidArgument);
  // Activation with a C matrix is refused; with a bias-shaped C it is the BIAS epilogue.
  CHECK(Supports("Gemm", Epilogue("Relu"), {&a, &b, &c_full}, y).code() == StatusCode::kUnimplemented);
  CHECK(Supports("Gemm", Epilogue("Relu"), {&a, &b, &c_n}, y).ok());
  // One row (M = 1): C [N] is also Y's shape, and still the BIAS epilogue, so the activation
  // runs in cuBLASLt (the emulated device found it planned as a full C and refused).
  HostTensor a1 = Shape({1, 3}), y1 = Shape({1, 4});
  CHECK(Supports("Gemm", Epilogue("Relu"), {&a1, &b, &c_n}, y1).ok());
  CHECK(Supports("Gemm", Epilogue("Relu"), {&a1, &b, &c_1n}, y1).ok());
  HostTensor r = Shape({2, 4});
  CHECK(Supports("Gemm", Epilogue("", true), {&a, &b, &c_n, &r}, y).ok());
  st = Supports("Gemm", Epilogue("", true), {&a, &b, &c_full, &r}, y);
  CHECK(st.code() == StatusCode::kUnimplemented);
  CHECK(Contains(st.message(), "one C"));
  // Transposes.
  AttrMap t;
  t.SetInt("transA", 1);
  t.SetInt("transB", 1);
  HostTensor at = Shape({3, 2}), bt = Shape({4, 3});
  CHECK(Supports("Gemm", t, {&at, &bt}, y).ok());
  CHECK(Supports("Gemm", t, {&a, &b}, y).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("cuBLASLt Workspace: the cap for runnable ops, 0 otherwise") {
  BlasOptions opt;
  opt.max_workspace_bytes = 12345;
  HostTensor a = Shape({2, 3}), b = Shape({3, 4}), y = Shape({2, 4});
  std::vector<DeviceTensor> in = testing::DevViews({&a, &b});
  DeviceTensor out[] = {y.Dev()};
  CHECK(BlasLibrary::WorkspaceFor(opt, "MatMul", {}, in, out) == 12345);
  CHECK(BlasLibrary::WorkspaceFor(opt, "Gemm", {}, in, out) == 12345);
  CHECK(BlasLibrary::WorkspaceFor(opt, "MatMul", Epilogue("Sigmoid"), in, out) == 0);
  HostTensor a0 = Shape({0, 3}), y0 = Shape({0, 4});
  std::vector<DeviceTensor> in0 = testing::DevViews({&a0, &b});
  DeviceTensor out0[] = {y0.Dev()};
  CHECK(BlasLibrary::WorkspaceFor(opt, "MatMul", {}, in0, out0) == 0);
}

// ---- The mapping, by hand --------------------------------------------------------------------

TEST_CASE("cuBLASLt mapping: row-major MatMul as column-major Y^T = B^T A^T") {
  SUBCASE("2-D") {
    HostTensor a = Shape({2, 3}), b = Shape({3, 4}), y = Shape({2, 4});
    LtMatmulPlan p = Plan("MatMul", {}, {&a, &b}, y);
    CHECK(p.m == 4);
    CHECK(p.n == 2);
    CHECK(p.k == 3);
    CHECK(p.batch == 1);
    CHECK(p.a_input == 1);  // cuBLASLt's A is ONNX's B
    CHECK(p.b_input == 0);
    CHECK_FALSE(p.trans_a);
    CHECK_FALSE(p.trans_b);
    CHECK(p.a == LtLayout{4, 3, 4, 0});
    CHECK(p.b == LtLayout{3, 2, 3, 0});
    CHECK(p.d == LtLayout{4, 2, 4, 0});
    CHECK(p.type == CUDA_R_32F);
    CHECK(p.compute == CUBLAS_COMPUTE_32F);
    CHECK(p.epilogue == CUBLASLT_EPILOGUE_DEFAULT);
    CHECK(p.c_input == -1);
    CHECK(p.beta == 0.0f);
  }
  SUBCASE("a shared right operand folds the batch into M") {
    HostTensor a = Shape({2, 3, 4}), b = Shape({4, 5}), y = Shape({2, 3, 5});
    LtMatmulPlan p = Plan("MatMul", {}, {&a, &b}, y);
    CHECK(p.m == 5);
    CHECK(p.n == 6);
    CHECK(p.k == 4);
    CHECK(p.batch == 1);
    CHECK(p.a == LtLayout{5, 4, 5, 0});
    CHECK(p.b == LtLayout{4, 6, 4, 0});
    CHECK(p.d == LtLayout{5, 6, 5, 0});
  }
  SUBCASE("equal batches are strided") {
    HostTensor a = Shape({2, 3, 4}), b = Shape({2, 4, 5}), y = Shape({2, 3, 5});
    LtMatmulPlan p = Plan("MatMul", {}, {&a, &b}, y);
    CHECK(p.m == 5);
    CHECK(p.n == 3);
    CHECK(p.k == 4);
    CHECK(p.batch == 2);
    CHECK(p.a == LtLayout{5, 4, 5, 20});
    CHECK(p.b == LtLayout{4, 3, 4, 12});
    CHECK(p.d == LtLayout{5, 3, 5, 15});
  }
  SUBCASE("vectors") {
    HostTensor av = Shape({4}), b = Shape({4, 5}), yv = Shape({5});
    LtMatmulPlan p = Plan("MatMul", {}, {&av, &b}, yv);
    CHECK(p.m == 5);
    CHECK(p.n == 1);
    CHECK(p.b == LtLayout{4, 1, 4, 0});
    HostTensor a = Shape({3, 4}), bv = Shape({4}), y = Shape({3});
    p = Plan("MatMul", {}, {&a, &bv}, y);
    CHECK(p.m == 1);
    CHECK(p.n == 3);
    CHECK(p.a == LtLayout{1, 4, 1, 0});
    CHECK(p.d == LtLayout{1, 3, 1, 0});
  }
  SUBCASE("epilogues") {
    HostTensor a = Shape({2, 3}), b = Shape({3, 4}), y = Shape({2, 4}), bias = Shape({4}), r = Shape({2, 4});
    HostTensor absent = Absent();
    CHECK(Plan("MatMul", {}, {&a, &b, &bias}, y).epilogue == CUBLASLT_EPILOGUE_BIAS);
    CHECK(Plan("MatMul", {}, {&a, &b, &bias}, y).bias_input == 2);
    CHECK(Plan("MatMul", Epilogue("Relu"), {&a, &b, &bias}, y).epilogue == CUBLASLT_EPILOGUE_RELU_BIAS);
    CHECK(Plan("MatMul", Epilogue("Relu"), {&a, &b}, y).epilogue == CUBLASLT_EPILOGUE_RELU);
    CHECK(Plan("MatMul", Epilogue("GeluTanh"), {&a, &b, &bias}, y).epilogue == CUBLASLT_EPILOGUE_GELU_BIAS);
    CHECK(Plan("MatMul", Epilogue("GeluTanh"), {&a, &b}, y).epilogue == CUBLASLT_EPILOGUE_GELU);
    LtMatmulPlan p = Plan("MatMul", Epilogue("", true), {&a, &b, &absent, &r}, y);
    CHECK(p.c_input == 3);
    CHECK(p.beta == 1.0f);
    CHECK(p.bias_input == -1);
    CHECK(p.epilogue == CUBLASLT_EPILOGUE_DEFAULT);
  }
  SUBCASE("Gemm: transposes swap with the operands") {
    AttrMap t;
    t.SetInt("transA", 1);
    t.SetInt("transB", 1);
    t.SetFloat("alpha", 0.5f);
    t.SetFloat("beta", 2.0f);
    HostTensor a = Shape({3, 2}), b = Shape({4, 3}), c = Shape({2, 4}), y = Shape({2, 4});  // M 2, K 3, N 4
    LtMatmulPlan p = Plan("Gemm", t, {&a, &b, &c}, y);
    CHECK(p.m == 4);
    CHECK(p.n == 2);
    CHECK(p.k == 3);
    CHECK(p.trans_a);  // ONNX transB
    CHECK(p.trans_b);  // ONNX transA
    CHECK(p.a == LtLayout{3, 4, 3, 0});
    CHECK(p.b == LtLayout{2, 3, 2, 0});
    CHECK(p.d == LtLayout{4, 2, 4, 0});
    CHECK(p.alpha == 0.5f);
    CHECK(p.beta == 2.0f);
    CHECK(p.c_input == 2);
    CHECK(p.bias_input == -1);
    HostTensor cb = Shape({4});
    AttrMap tb;
    tb.SetInt("transA", 1);
    tb.SetInt("transB", 1);
    p = Plan("Gemm", tb, {&a, &b, &cb}, y);  // C [N] with beta 1: the bias epilogue
    CHECK(p.c_input == -1);
    CHECK(p.bias_input == 2);
    CHECK(p.beta == 0.0f);
    CHECK(p.epilogue == CUBLASLT_EPILOGUE_BIAS);
  }
}

// ---- The mapping, evaluated --------------------------------------------------------------------

// cublasLtMatmul as documented, on host buffers: column-major matrices (element (i, j) at
// i + j * ld), op(X) = X or X^T, batch member b at b * batch_stride, and
// D = epilogue(alpha * op(A) * op(B) + beta * C), where the BIAS epilogues add bias[i] to row i
// of D, then RELU is max(x, 0) and GELU the tanh approximation. C shares D's layout. The
// layouts must describe op(A) as m x k, op(B) as k x n and D as m x n.
void EvalLt(const LtMatmulPlan& p, const float* A, const float* B, const float* C, const float* bias,
            float* D) {
  const uint64_t a_rows = p.trans_a ? p.k : p.m, a_cols = p.trans_a ? p.m : p.k;
  const uint64_t b_rows = p.trans_b ? p.n : p.k, b_cols = p.trans_b ? p.k : p.n;
  REQUIRE(p.a.rows == a_rows);
  REQUIRE(p.a.cols == a_cols);
  REQUIRE(p.b.rows == b_rows);
  REQUIRE(p.b.cols == b_cols);
  REQUIRE(p.d.rows == p.m);
  REQUIRE(p.d.cols == p.n);
  REQUIRE(p.a.ld >= static_cast<int64_t>(p.a.rows));
  REQUIRE(p.b.ld >= static_cast<int64_t>(p.b.rows));
  REQUIRE(p.d.ld >= static_cast<int64_t>(p.d.rows));
  const bool has_bias = p.epilogue == CUBLASLT_EPILOGUE_BIAS || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
                        p.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  const bool relu = p.epilogue == CUBLASLT_EPILOGUE_RELU || p.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  const bool gelu = p.epilogue == CUBLASLT_EPILOGUE_GELU || p.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  for (int32_t bt = 0; bt < p.batch; ++bt) {
    const float* a = A + bt * p.a.batch_stride;
    const float* b = B + bt * p.b.batch_stride;
    const float* c = C ? C + bt * p.d.batch_stride : nullptr;
    float* d = D + bt * p.d.batch_stride;
    for (uint64_t j = 0; j < p.n; ++j) {
      for (uint64_t i = 0; i < p.m; ++i) {
        double acc = 0;
        for (uint64_t kk = 0; kk < p.k; ++kk) {
          const float av = p.trans_a ? a[kk + i * p.a.ld] : a[i + kk * p.a.ld];
          const float bv = p.trans_b ? b[j + kk * p.b.ld] : b[kk + j * p.b.ld];
          acc += double(av) * double(bv);
        }
        double v = p.alpha * acc + (c && p.beta != 0.0f ? p.beta * double(c[i + j * p.d.ld]) : 0.0);
        if (has_bias) v += bias[i];
        if (relu) v = v > 0 ? v : 0;
        if (gelu) v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
        d[i + j * p.d.ld] = static_cast<float>(v);
      }
    }
  }
}

struct Case {
  std::string op;
  AttrMap attrs;
  std::vector<HostTensor> in;  // ONNX inputs (absent ones included)
  std::vector<int64_t> y;
};

// Plans the case, evaluates the plan per cuBLASLt's semantics and compares with the CPU kernel.
void CheckAgainstCpu(Case c) {
  CAPTURE(c.op);
  std::vector<const HostTensor*> in;
  for (const HostTensor& t : c.in) in.push_back(&t);
  HostTensor want = Zeros(c.y), got = Zeros(c.y);
  LtMatmulPlan p = Plan(c.op, c.attrs, in, want);
  std::vector<HostTensor*> cpu_in;
  for (HostTensor& t : c.in) cpu_in.push_back(&t);
  Status st = RunCpu(c.op, c.attrs, cpu_in, {&want});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  const float* C = p.c_input >= 0 ? c.in[p.c_input].v.data() : nullptr;
  const float* bias = p.bias_input >= 0 ? c.in[p.bias_input].v.data() : nullptr;
  EvalLt(p, c.in[p.a_input].v.data(), c.in[p.b_input].v.data(), C, bias, got.v.data());
  CHECK(MaxRelDiff(got.v, want.v) < 1e-5);
}

TEST_CASE("cuBLASLt int8 GEMM: kiln.MatMulIntegerTransB as the TN problem IMMA kernels take") {
  constexpr std::string_view kOp = "kiln.MatMulIntegerTransB";
  const auto int8 = [](std::vector<int64_t> dims, DType t = DType::kInt8) { return Shape(std::move(dims), t); };
  HostTensor a = int8({2, 3, 8}), b = int8({12, 8}), y = Shape({2, 3, 12}, DType::kInt32);
  CHECK(Supports(kOp, {}, {&a, &b}, y).ok());
  std::vector<DeviceTensor> ins = testing::DevViews({&a, &b});
  DeviceTensor out[] = {y.Dev()};
  LtMatmulPlan p;
  REQUIRE(PlanMatMulIntegerTransB(ins, out, &p).ok());
  // cuBLASLt's A is B [12, 8] read as 8 x 12 (ld 8), transposed; its B is A's 6 rows as 8 x 6
  // (ld 8); D is Y as 12 x 6 (ld 12).
  CHECK(p.type == CUDA_R_8I);
  CHECK(p.d_type == CUDA_R_32I);
  CHECK(p.compute == CUBLAS_COMPUTE_32I);
  CHECK(p.scale_type == CUDA_R_32I);
  CHECK(p.trans_a);
  CHECK_FALSE(p.trans_b);
  CHECK((p.m == 12 && p.n == 6 && p.k == 8 && p.batch == 1));
  CHECK(p.a == LtLayout{8, 12, 8, 0});
  CHECK(p.b == LtLayout{8, 6, 8, 0});
  CHECK(p.d == LtLayout{12, 6, 12, 0});
  CHECK((p.a_input == 1 && p.b_input == 0 && p.c_input == -1 && p.bias_input == -1));
  // Refused, for the CPU backend: K or N not a multiple of 4, uint8 operands.
  HostTensor b6 = int8({6, 8}), y6 = Shape({2, 3, 6}, DType::kInt32);
  CHECK(Supports(kOp, {}, {&a, &b6}, y6).message() ==
        "kiln.MatMulIntegerTransB: cuBLASLt's int8 GEMM (IMMA, regular ordering) needs N and K multiples of 4, "
        "found N 6, K 8");
  HostTensor a5 = int8({2, 3, 5}), b5 = int8({12, 5});
  CHECK(Supports(kOp, {}, {&a5, &b5}, y).code() == StatusCode::kUnimplemented);
  HostTensor ua = int8({2, 3, 8}, DType::kUInt8);
  CHECK(Supports(kOp, {}, {&ua, &b}, y).message() ==
        "kiln.MatMulIntegerTransB: cuBLASLt's int8 GEMM takes signed int8 A and B, found uint8 and int8");
  // Malformed: kInvalidArgument.
  HostTensor bad_y = Shape({2, 3, 12}, DType::kFloat32);
  CHECK(Supports(kOp, {}, {&a, &b}, bad_y).code() == StatusCode::kInvalidArgument);
  HostTensor bk = int8({12, 4});
  CHECK(Supports(kOp, {}, {&a, &bk}, y).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("cuBLASLt mapping evaluated per the documented semantics equals the CPU MatMul") {
  uint32_t seed = 1;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 4}, {4, 5}},       {{2, 3, 4}, {4, 5}},
      {{2, 3, 4}, {2, 4, 5}}, {{2, 2, 3, 4}, {2, 2, 4, 5}},
      {{1, 3, 4}, {4, 5}},    {{2, 3, 4}, {1, 4, 5}},
      {{4}, {4, 5}},          {{3, 4}, {4}},
      {{2, 3, 4}, {4}},       {{4}, {4}},
      {{1, 7}, {7, 1}},       {{6, 1, 5}, {6, 5, 2}},
  };
  for (const auto& [as, bs] : shapes) {
    HostTensor a = r(as), b = r(bs);
    // The output shape, from the CPU kernel's rules.
    std::vector<int64_t> ab(as.begin(), as.end() - (as.size() >= 2 ? 2 : 1));
    std::vector<int64_t> bb(bs.begin(), bs.end() - (bs.size() >= 2 ? 2 : 1));
    std::vector<int64_t> y = ab.size() >= bb.size() ? ab : bb;
    if (as.size() >= 2) y.push_back(as[as.size() - 2]);
    if (bs.size() >= 2) y.push_back(bs.back());
    CAPTURE(a.dims);
    CAPTURE(b.dims);
    CheckAgainstCpu({"MatMul", {}, {a, b}, y});
  }
  // Epilogues, batched (folded and strided).
  for (bool strided : {false, true}) {
    CAPTURE(strided);
    HostTensor a = r({2, 3, 4}), b = strided ? r({2, 4, 5}) : r({4, 5}), bias = r({5}), res = r({2, 3, 5});
    for (const char* act : {"", "Relu", "GeluTanh"}) {
      CAPTURE(std::string(act));
      CheckAgainstCpu({"MatMul", Epilogue(act), {a, b, bias}, {2, 3, 5}});
      CheckAgainstCpu({"MatMul", Epilogue(act), {a, b}, {2, 3, 5}});
    }
    CheckAgainstCpu({"MatMul", Epilogue("", true), {a, b, bias, res}, {2, 3, 5}});
    CheckAgainstCpu({"MatMul", Epilogue("", true, true), {a, b, Absent(), res}, {2, 3, 5}});
  }
}

TEST_CASE("cuBLASLt mapping evaluated per the documented semantics equals the CPU Gemm") {
  uint32_t seed = 100;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  const int64_t m = 3, k = 5, n = 4;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      CAPTURE(ta);
      CAPTURE(tb);
      AttrMap attrs;
      attrs.SetInt("transA", ta);
      attrs.SetInt("transB", tb);
      attrs.SetFloat("alpha", 0.75f);
      attrs.SetFloat("beta", -1.5f);
      HostTensor a = ta ? r({k, m}) : r({m, k}), b = tb ? r({n, k}) : r({k, n});
      CheckAgainstCpu({"Gemm", attrs, {a, b}, {m, n}});
      CheckAgainstCpu({"Gemm", attrs, {a, b, r({m, n})}, {m, n}});
      AttrMap bias_attrs = attrs;
      bias_attrs.SetFloat("beta", 1.0f);
      CheckAgainstCpu({"Gemm", bias_attrs, {a, b, r({n})}, {m, n}});
      CheckAgainstCpu({"Gemm", bias_attrs, {a, b, r({1, n})}, {m, n}});
      AttrMap relu = bias_attrs;
      relu.SetString("epilogue_activation", "Relu");
      CheckAgainstCpu({"Gemm", relu, {a, b, r({n})}, {m, n}});
      AttrMap res = bias_attrs;
      res.SetInt("epilogue_residual", 1);
      CheckAgainstCpu({"Gemm", res, {a, b, r({n}), r({m, n})}, {m, n}});
      CheckAgainstCpu({"Gemm", res, {a, b, Absent(), r({m, n})}, {m, n}});
    }
  }
  // C [N] with M = 1 is Y's full shape: C with beta, not the bias epilogue.
  AttrMap beta;
  beta.SetFloat("beta", 0.25f);
  CheckAgainstCpu({"Gemm", beta, {r({1, k}), r({k, n}), r({n})}, {1, n}});
  CheckAgainstCpu({"Gemm", beta, {r({m, k}), r({k, 1}), r({m, 1})}, {m, 1}});
}

// ---- Create without a device --------------------------------------------------------------------

TEST_CASE("cuBLASLt: Create fails cleanly without a driver or device") {
  Result<const Blas*> blas = LoadBlas();
  if (!blas.ok()) {
    MESSAGE("cuBLASLt not loadable here (" << blas.status().ToString() << "); nothing to create");
    CHECK(blas.status().code() == StatusCode::kFailedPrecondition);
    return;
  }
  Result<std::unique_ptr<BlasLibrary>> lt = BlasLibrary::Create(**blas);
  if (kiln::testing::GpuAvailable()) {
    // A GPU machine: the handle needs no current context for creation, so it may succeed.
    MESSAGE("GPU present; Create: " << (lt.ok() ? "OK" : lt.status().ToString()));
    return;
  }
  REQUIRE_FALSE(lt.ok());
  CHECK(lt.status().code() == StatusCode::kDeviceError);
  CHECK(Contains(lt.status().message(), "cublasLtCreate"));
  CHECK(Contains(lt.status().message(), "cuBLASLt"));
  MESSAGE(lt.status().ToString());
}

// ---- On a GPU (never run yet) ---------------------------------------------------------------

// Runs `op` on the library with device copies of the inputs in `dt` (their values rounded to
// it), then compares with the CPU kernel's float32 result on the same rounded values.
void CheckOnGpu(testing::GpuSession& gpu, BlasLibrary& lt, Case c, double tolerance,
                DType dt = DType::kFloat32) {
  CAPTURE(c.op);
  CAPTURE(DTypeName(dt));
  for (HostTensor& t : c.in) t = testing::Rounded(std::move(t), dt);
  std::vector<HostTensor> ref;
  for (const HostTensor& t : c.in) ref.push_back(testing::AsFloat32(t));
  std::vector<HostTensor*> cpu_in;
  for (HostTensor& t : ref) cpu_in.push_back(&t);
  HostTensor want = Zeros(c.y);
  Status st = RunCpu(c.op, c.attrs, cpu_in, {&want});
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<DeviceTensor> in;
  for (const HostTensor& t : c.in) in.push_back(t.Dev(gpu.Upload(t)));
  HostTensor y = Zeros(c.y);
  y.dtype = dt;
  const CUdeviceptr y_dev = gpu.Alloc(y.v.size() * DTypeSize(dt));
  DeviceTensor out[] = {y.Dev(y_dev)};
  const size_t ws_bytes = lt.Workspace(c.op, c.attrs, in, out);
  const CUdeviceptr ws = ws_bytes ? gpu.Alloc(ws_bytes) : 0;
  OpCall call{c.attrs, in, out, gpu.stream(), ws, ws_bytes};
  st = lt.Run(c.op, call, "gpu_test");
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  std::vector<float> got = gpu.Download(y_dev, y.count(), dt);
  CHECK(MaxRelDiff(got, want.v) < tolerance);
}

TEST_CASE("[gpu] cuBLASLt MatMul and Gemm match the CPU kernels") {
  KILN_REQUIRE_GPU();
  testing::GpuSession gpu;
  Result<const Blas*> blas = LoadBlas();
  REQUIRE_MESSAGE(blas.ok(), blas.status().ToString());
  auto lt = BlasLibrary::Create(**blas);
  REQUIRE_MESSAGE(lt.ok(), lt.status().ToString());
  BlasLibrary& ex = **lt;
  uint32_t seed = 1000;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  // K up to 512: float32 sums of 512 products of [-1, 1) values differ from OpenBLAS's by far less.
  constexpr double kTol = 1e-4;
  CheckOnGpu(gpu, ex, {"MatMul", {}, {r({64, 96}), r({96, 80})}, {64, 80}}, kTol);
  CheckOnGpu(gpu, ex, {"MatMul", {}, {r({4, 33, 512}), r({512, 17})}, {4, 33, 17}}, kTol);
  CheckOnGpu(gpu, ex, {"MatMul", {}, {r({3, 2, 31, 40}), r({3, 2, 40, 29})}, {3, 2, 31, 29}}, kTol);
  CheckOnGpu(gpu, ex, {"MatMul", {}, {r({40}), r({40, 7})}, {7}}, kTol);
  for (const char* act : {"", "Relu", "GeluTanh"}) {
    CAPTURE(std::string(act));
    CheckOnGpu(gpu, ex, {"MatMul", Epilogue(act), {r({2, 48, 64}), r({64, 72}), r({72})}, {2, 48, 72}}, kTol);
    CheckOnGpu(gpu, ex, {"MatMul", Epilogue(act), {r({2, 48, 64}), r({2, 64, 72})}, {2, 48, 72}}, kTol);
  }
  CheckOnGpu(gpu, ex,
             {"MatMul", Epilogue("", true), {r({48, 64}), r({64, 72}), r({72}), r({48, 72})}, {48, 72}},
             kTol);
  AttrMap t;
  t.SetInt("transA", 1);
  t.SetInt("transB", 1);
  t.SetFloat("alpha", 0.5f);
  t.SetFloat("beta", 2.0f);
  CheckOnGpu(gpu, ex, {"Gemm", t, {r({64, 48}), r({72, 64}), r({48, 72})}, {48, 72}}, kTol);
  AttrMap relu;
  relu.SetString("epilogue_activation", "Relu");
  CheckOnGpu(gpu, ex, {"Gemm", relu, {r({1, 256}), r({256, 1000}), r({1000})}, {1, 1000}}, kTol);
  // The same shapes again (cuMemAlloc's buffers are 256-byte aligned, like the first ones): the
  // cached descriptors and algorithm are reused.
  const size_t before = ex.cached_plans();
  CheckOnGpu(gpu, ex, {"MatMul", {}, {r({64, 96}), r({96, 80})}, {64, 80}}, kTol);
  CHECK(ex.cached_plans() == before);  // same shapes and (256-byte) alignments: reused
}

TEST_CASE("[gpu] cuBLASLt float16 and bfloat16 MatMul and Gemm match the CPU kernels") {
  KILN_REQUIRE_GPU();
  testing::GpuSession gpu;
  Result<const Blas*> blas = LoadBlas();
  REQUIRE_MESSAGE(blas.ok(), blas.status().ToString());
  auto lt = BlasLibrary::Create(**blas);
  REQUIRE_MESSAGE(lt.ok(), lt.status().ToString());
  BlasLibrary& ex = **lt;
  uint32_t seed = 3000;
  auto r = [&seed](std::vector<int64_t> dims) { return Random(std::move(dims), seed++); };
  // float32 accumulation of the rounded inputs: the difference is the output's rounding (2^-11
  // relative for float16, 2^-8 for bfloat16; MaxRelDiff is relative to 1 + |ref|).
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    const double tol = dt == DType::kFloat16 ? 2e-3 : 1.6e-2;
    CheckOnGpu(gpu, ex, {"MatMul", {}, {r({64, 96}), r({96, 80})}, {64, 80}}, tol, dt);
    CheckOnGpu(gpu, ex, {"MatMul", {}, {r({4, 33, 512}), r({512, 17})}, {4, 33, 17}}, tol, dt);
    CheckOnGpu(gpu, ex, {"MatMul", {}, {r({3, 2, 31, 40}), r({3, 2, 40, 29})}, {3, 2, 31, 29}}, tol, dt);
    // Folded epilogues on a half D (compiler/passes/epilogue.h): bias of D's type, activation,
    // residual as C; applied in float32 before D's one rounding, as the CPU's widened kernel does.
    for (const char* act : {"", "Relu", "GeluTanh"}) {
      CAPTURE(std::string(act));
      CheckOnGpu(gpu, ex, {"MatMul", Epilogue(act), {r({2, 48, 64}), r({64, 72}), r({72})}, {2, 48, 72}}, tol, dt);
    }
    CheckOnGpu(gpu, ex, {"MatMul", Epilogue("", true), {r({48, 64}), r({64, 72}), r({72}), r({48, 72})}, {48, 72}},
               tol, dt);
    // Gemm's C as a bias vector of D's type (the BIAS epilogue with BIAS_DATA_TYPE = D's type),
    // and a full C.
    CheckOnGpu(gpu, ex, {"Gemm", {}, {r({48, 64}), r({64, 72}), r({72})}, {48, 72}}, tol, dt);
    AttrMap t;
    t.SetInt("transB", 1);
    t.SetFloat("beta", 0.5f);
    CheckOnGpu(gpu, ex, {"Gemm", t, {r({48, 64}), r({72, 64}), r({48, 72})}, {48, 72}}, tol, dt);
  }
}

}  // namespace
}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
