// Standalone self-test of the emulated cuDNN (cudnn_graph.cc, cudnn_ops.cc, cudnn_cnn.cc, cudnn_backend.cc,
// cudnn_adv.cc):
// each case runs the library through its C API on device memory from CheckAlloc
// (check_hooks.h) and compares with values computed by hand from cuDNN's documented semantics
// (or, for backward data, with a direct scatter loop written here). Prints one line per case;
// exits 1 if any case fails.
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/emulated_cuda/check_hooks.h"
#include "tests/emulated_cuda/check_report.h"
#include "tests/emulated_cuda/half.h"

namespace {

namespace ec = kiln::emulated_cuda;  // half.h's conversions

std::string LastError() {
  char buf[1024];
  cudnnGetLastErrorString(buf, sizeof(buf));
  return buf;
}

std::string StatusStr(cudnnStatus_t s) { return cudnnGetErrorString(s); }

// Compares got with want (NaN equals NaN); returns "" or the first difference.
std::string Diff(const std::vector<float>& got, const std::vector<float>& want, float tol = 0.0f) {
  if (got.size() != want.size()) return "size " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    if (both_nan) continue;
    if (std::isnan(got[i]) || std::isnan(want[i]) || std::fabs(got[i] - want[i]) > tol * (1.0f + std::fabs(want[i]))) {
      return "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
    }
  }
  return "";
}

// Device buffers of float values (check_hooks.h), and of float16 or bfloat16 (`dt`) ones.
float* Upload(const std::vector<float>& v, size_t extra_bytes = 0) { return CheckUpload(v, extra_bytes); }
uint16_t* Upload16(const std::vector<float>& v, cudnnDataType_t dt) {
  std::vector<uint16_t> bits(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    bits[i] = dt == CUDNN_DATA_HALF ? ec::FloatToHalf(v[i]) : ec::FloatToBFloat16(v[i]);
  return CheckUpload(bits);
}
std::vector<float> Read16(const uint16_t* p, size_t n, cudnnDataType_t dt) {
  std::vector<float> v;
  for (uint16_t b : CheckDownload(p, n))
    v.push_back(dt == CUDNN_DATA_HALF ? ec::HalfToFloat(b) : ec::BFloat16ToFloat(b));
  return v;
}

// Descriptors (packed NCHW unless strides are given).
cudnnTensorDescriptor_t Tensor(std::vector<int> dims, cudnnDataType_t dt = CUDNN_DATA_FLOAT,
                               std::vector<int> strides = {}) {
  if (strides.empty()) {
    strides.resize(dims.size());
    int s = 1;
    for (size_t i = dims.size(); i-- > 0;) {
      strides[i] = s;
      s *= dims[i];
    }
  }
  cudnnTensorDescriptor_t t = nullptr;
  cudnnCreateTensorDescriptor(&t);
  cudnnStatus_t st = cudnnSetTensorNdDescriptor(t, dt, static_cast<int>(dims.size()), dims.data(), strides.data());
  if (st != CUDNN_STATUS_SUCCESS) Report("tensor descriptor", false, StatusStr(st) + " " + LastError());
  return t;
}
cudnnFilterDescriptor_t Filter(std::vector<int> dims, cudnnDataType_t dt = CUDNN_DATA_FLOAT) {
  cudnnFilterDescriptor_t f = nullptr;
  cudnnCreateFilterDescriptor(&f);
  cudnnStatus_t st = cudnnSetFilterNdDescriptor(f, dt, CUDNN_TENSOR_NCHW, static_cast<int>(dims.size()), dims.data());
  if (st != CUDNN_STATUS_SUCCESS) Report("filter descriptor", false, StatusStr(st) + " " + LastError());
  return f;
}
cudnnConvolutionDescriptor_t Conv(std::vector<int> pad, std::vector<int> stride, std::vector<int> dil,
                                  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION, int groups = 1,
                                  cudnnDataType_t compute = CUDNN_DATA_FLOAT) {
  cudnnConvolutionDescriptor_t c = nullptr;
  cudnnCreateConvolutionDescriptor(&c);
  cudnnStatus_t st = cudnnSetConvolutionNdDescriptor(c, static_cast<int>(pad.size()), pad.data(), stride.data(),
                                                     dil.data(), mode, compute);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetConvolutionGroupCount(c, groups);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetConvolutionMathType(c, CUDNN_FMA_MATH);
  if (st != CUDNN_STATUS_SUCCESS) Report("convolution descriptor", false, StatusStr(st) + " " + LastError());
  return c;
}
cudnnActivationDescriptor_t Act(cudnnActivationMode_t mode, cudnnNanPropagation_t nan, double coef = 0.0) {
  cudnnActivationDescriptor_t a = nullptr;
  cudnnCreateActivationDescriptor(&a);
  cudnnSetActivationDescriptor(a, mode, nan, coef);
  return a;
}

const std::vector<float> kX3x3 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
const std::vector<float> kW2x2 = {1, 2, 3, 4};

// y = alpha * conv(x, w) + beta * y for the float tensors given; returns the status.
cudnnStatus_t Forward(cudnnHandle_t h, cudnnTensorDescriptor_t xd, const void* x, cudnnFilterDescriptor_t wd,
                      const void* w, cudnnConvolutionDescriptor_t cd, cudnnTensorDescriptor_t yd, void* y,
                      float alpha = 1.0f, float beta = 0.0f,
                      cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM) {
  return cudnnConvolutionForward(h, &alpha, xd, x, wd, w, cd, algo, nullptr, 0, &beta, yd, y);
}

void CaseVersions() {
  const bool ok = cudnnGetVersion() / 10000 == CUDNN_MAJOR && cudnnGetCudartVersion() > 0 &&
                  std::string(cudnnGetErrorString(CUDNN_STATUS_BAD_PARAM)) == "CUDNN_STATUS_BAD_PARAM" &&
                  std::string(cudnnGetErrorString(CUDNN_STATUS_NOT_SUPPORTED)) == "CUDNN_STATUS_NOT_SUPPORTED" &&
                  std::string(cudnnGetErrorString(static_cast<cudnnStatus_t>(12345))) == "CUDNN_UNKNOWN_STATUS";
  Report("versions and status names", ok, "cudnnGetVersion " + std::to_string(cudnnGetVersion()));
}

void CaseCrossCorrelationVsConvolution(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 3, 3});
  auto wd = Filter({1, 1, 2, 2});
  auto yd = Tensor({1, 1, 2, 2});
  float* x = Upload(kX3x3);
  float* w = Upload(kW2x2);
  float* y = Upload({0, 0, 0, 0});
  auto cc = Conv({0, 0}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION);
  cudnnStatus_t st = Forward(h, xd, x, wd, w, cc, yd, y);
  std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {37, 47, 67, 77});
  Report("2x2 cross-correlation of a 3x3 input", d.empty(), d);
  auto cv = Conv({0, 0}, {1, 1}, {1, 1}, CUDNN_CONVOLUTION);
  st = Forward(h, xd, x, wd, w, cv, yd, y);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {23, 33, 53, 63});
  Report("2x2 convolution (mirrored filter) of a 3x3 input", d.empty(), d);
  // alpha and beta: y = 0.5 * conv + 2 * y, y holding 10s.
  for (int i = 0; i < 4; ++i) y[i] = 10;
  st = Forward(h, xd, x, wd, w, cc, yd, y, 0.5f, 2.0f);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {38.5f, 43.5f, 53.5f, 58.5f});
  Report("alpha 0.5, beta 2 blend with the prior output", d.empty(), d);
  // beta 0 does not read y: NaN there does not leak.
  for (int i = 0; i < 4; ++i) y[i] = NAN;
  st = Forward(h, xd, x, wd, w, cc, yd, y);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {37, 47, 67, 77});
  Report("beta 0 ignores a NaN output", d.empty(), d);
  // The same input with a row pitch of 4 (strides honoured): column 3 holds 999s.
  auto xs = Tensor({1, 1, 3, 3}, CUDNN_DATA_FLOAT, {12, 12, 4, 1});
  float* xp = Upload({1, 2, 3, 999, 4, 5, 6, 999, 7, 8, 9, 999});
  st = Forward(h, xs, xp, wd, w, cc, yd, y);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {37, 47, 67, 77});
  Report("strided (row pitch 4) input", d.empty(), d);
}

void CasePadStrideDilation(cudnnHandle_t h) {
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[i] = static_cast<float>(i + 1);
  auto xd = Tensor({1, 1, 4, 4});
  auto wd = Filter({1, 1, 2, 2});
  auto cd = Conv({1, 1}, {2, 2}, {2, 2});
  int out[4] = {};
  cudnnStatus_t st = cudnnGetConvolutionNdForwardOutputDim(cd, xd, wd, 4, out);
  const bool dims_ok = st == CUDNN_STATUS_SUCCESS && out[0] == 1 && out[1] == 1 && out[2] == 2 && out[3] == 2;
  Report("output dim 1 + (4 + 2*1 - ((2-1)*2 + 1)) / 2 = 2", dims_ok,
         std::to_string(out[2]) + "x" + std::to_string(out[3]));
  auto yd = Tensor({1, 1, 2, 2});
  float* x = Upload(xv);
  float* w = Upload(kW2x2);
  float* y = Upload({0, 0, 0, 0});
  st = Forward(h, xd, x, wd, w, cd, yd, y);
  const std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {24, 50, 68, 128});
  Report("pad 1, stride 2, dilation 2 on a 4x4 input", d.empty(), d);
  // A yDesc of the wrong spatial size is refused (NOT_SUPPORTED for the forward call).
  auto bad = Tensor({1, 1, 3, 3});
  float* yb = Upload(std::vector<float>(9));
  st = Forward(h, xd, x, wd, w, cd, bad, yb);
  Report("forward yDesc of the wrong spatial size refused", st == CUDNN_STATUS_NOT_SUPPORTED,
         StatusStr(st) + " " + LastError());
}

void CaseGroups(cudnnHandle_t h) {
  auto xd = Tensor({1, 2, 2, 2});
  auto wd = Filter({4, 1, 1, 1});
  auto yd = Tensor({1, 4, 2, 2});
  float* x = Upload({1, 2, 3, 4, 5, 6, 7, 8});
  float* w = Upload({1, 2, 3, 4});
  float* y = Upload(std::vector<float>(16));
  auto cd = Conv({0, 0}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, 2);
  cudnnStatus_t st = Forward(h, xd, x, wd, w, cd, yd, y);
  const std::string d = st ? StatusStr(st) + " " + LastError()
                           : Diff(CheckDownload(y, 16), {1, 2, 3, 4, 2, 4, 6, 8, 15, 18, 21, 24, 20, 24, 28, 32});
  Report("groups = 2: output channels 0-1 read input channel 0, 2-3 channel 1", d.empty(), d);
  auto one_group = Conv({0, 0}, {1, 1}, {1, 1});
  st = Forward(h, xd, x, wd, w, one_group, yd, y);
  Report("a [4,1,1,1] filter on 2 channels without groups refused", st == CUDNN_STATUS_BAD_PARAM,
         StatusStr(st) + " " + LastError());
}

void CaseOneD(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 1, 5});
  auto wd = Filter({1, 1, 1, 3});
  auto yd = Tensor({1, 1, 1, 3});
  auto cd = Conv({0, 1}, {1, 2}, {1, 1});
  float* x = Upload({1, 2, 3, 4, 5});
  float* w = Upload({1, 0, -1});
  float* y = Upload({0, 0, 0});
  cudnnStatus_t st = Forward(h, xd, x, wd, w, cd, yd, y);
  const std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 3), {-2, -2, 4});
  Report("1-D conv as 2-D with unit height (pad 1, stride 2)", d.empty(), d);
}

void CaseThreeD(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 2, 2, 2});
  auto wd = Filter({1, 1, 2, 2, 2});
  auto yd = Tensor({1, 1, 1, 1, 1});
  auto cd = Conv({0, 0, 0}, {1, 1, 1}, {1, 1, 1});
  float* x = Upload({1, 2, 3, 4, 5, 6, 7, 8});
  float* w = Upload({1, 1, 1, 1, 1, 1, 1, 2});
  float* y = Upload({0});
  cudnnStatus_t st = Forward(h, xd, x, wd, w, cd, yd, y);
  const std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 1), {44});
  Report("3-D conv of a 2x2x2 input", d.empty(), d);
}

void CaseAlgorithms(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 3, 3});
  auto wd = Filter({1, 1, 2, 2});
  auto yd = Tensor({1, 1, 2, 2});
  auto cd = Conv({0, 0}, {1, 1}, {1, 1});
  int max_count = 0, returned = 0;
  cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max_count);
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  cudnnStatus_t st = cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, max_count, &returned, perf);
  bool ok = st == CUDNN_STATUS_SUCCESS && max_count == CUDNN_CONVOLUTION_FWD_ALGO_COUNT && returned == max_count &&
            perf[0].status == CUDNN_STATUS_SUCCESS && perf[0].mathType == CUDNN_FMA_MATH &&
            perf[0].determinism == CUDNN_DETERMINISTIC;
  int supported = 0;
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    ++supported;
    size_t ws = 1;
    ok = ok && cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, perf[i].algo, &ws) == CUDNN_STATUS_SUCCESS &&
         ws == perf[i].memory;
  }
  size_t ws = 0;
  ok = ok && supported >= 2 &&
       cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_FFT, &ws) ==
           CUDNN_STATUS_NOT_SUPPORTED;
  Report("forward algorithm list, workspace sizes agree with the query", ok,
         StatusStr(st) + ", " + std::to_string(returned) + " returned, " + std::to_string(supported) + " supported");
  // A workspace smaller than the algorithm's is refused.
  size_t need = 0;
  cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need);
  float* x = Upload(kX3x3);
  float* w = Upload(kW2x2);
  float* y = Upload({0, 0, 0, 0});
  const float one = 1, zero = 0;
  st = cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, nullptr, 0,
                               &zero, yd, y);
  const bool refused = need > 0 && st == CUDNN_STATUS_BAD_PARAM;
  void* ws_buf = CheckAlloc(need);
  st = cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws_buf,
                               need, &zero, yd, y);
  const std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {37, 47, 67, 77});
  Report("IMPLICIT_PRECOMP_GEMM needs its workspace (" + std::to_string(need) + " bytes)", refused && d.empty(), d);
}

// INT8_EXT_CONFIG: int8 x [1, 4, 3, 3] and filter [4, 4, 2, 2] in NHWC, int32 compute, float y,
// IMPLICIT_PRECOMP_GEMM. x's channels at (h, w), v = 3h + w + 1: (v, -v, 0, 1). Filters: k0 reads
// channel 0 with taps 1 2 3 4 (the 2x2 cross-correlation of 1..9: 37 47 67 77); k1 channel 1 with
// taps 1 (minus each window's sum: -12 -16 -24 -28); k2 channel 3 with 127 at tap (0, 0) (127);
// k3 channel 0 with -128 at tap (1, 1) (-128 * 5, 6, 8, 9 = -640 -768 -1024 -1152). y is NHWC.
void CaseInt8(cudnnHandle_t h) {
  std::vector<int8_t> xv;
  for (int i = 1; i <= 9; ++i) xv.insert(xv.end(), {static_cast<int8_t>(i), static_cast<int8_t>(-i), 0, 1});
  std::vector<int8_t> wv(4 * 2 * 2 * 4, 0);  // [k][kh][kw][c]
  const auto at = [](int k, int r, int q, int c) { return ((k * 2 + r) * 2 + q) * 4 + c; };
  for (int t = 0; t < 4; ++t) {
    wv[at(0, t / 2, t % 2, 0)] = static_cast<int8_t>(t + 1);
    wv[at(1, t / 2, t % 2, 1)] = 1;
  }
  wv[at(2, 0, 0, 3)] = 127;
  wv[at(3, 1, 1, 0)] = -128;
  int8_t* x = CheckUpload(xv);
  int8_t* w = CheckUpload(wv);
  float* y = Upload(std::vector<float>(16, -7));
  const auto nhwc = [](int n, int c, int hh, int ww, cudnnDataType_t dt) {
    return Tensor({n, c, hh, ww}, dt, {hh * ww * c, 1, ww * c, c});
  };
  const auto filter = [](int k, int c, cudnnTensorFormat_t format) {
    cudnnFilterDescriptor_t f = nullptr;
    cudnnCreateFilterDescriptor(&f);
    const int dims[] = {k, c, 2, 2};
    cudnnSetFilterNdDescriptor(f, CUDNN_DATA_INT8, format, 4, dims);
    return f;
  };
  auto xd = nhwc(1, 4, 3, 3, CUDNN_DATA_INT8);
  auto yd = nhwc(1, 4, 2, 2, CUDNN_DATA_FLOAT);
  auto wd = filter(4, 4, CUDNN_TENSOR_NHWC);
  auto cd = Conv({0, 0}, {1, 1}, {1, 1}, CUDNN_CROSS_CORRELATION, 1, CUDNN_DATA_INT32);
  int returned = 0;
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  cudnnStatus_t st = cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 16, &returned, perf);
  int supported = 0;
  for (int i = 0; i < returned; ++i) supported += perf[i].status == CUDNN_STATUS_SUCCESS;
  Report("int8: IMPLICIT_PRECOMP_GEMM is the one forward algorithm",
         st == CUDNN_STATUS_SUCCESS && supported == 1 &&
             perf[0].algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM && perf[0].status == CUDNN_STATUS_SUCCESS,
         std::to_string(supported) + " supported");
  size_t need = 0;
  cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need);
  void* ws = need ? CheckAlloc(need) : nullptr;
  const float one = 1, zero = 0;
  st = cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws, need,
                               &zero, yd, y);
  std::string d = st ? StatusStr(st) + " " + LastError()
                     : Diff(CheckDownload(y, 16), {37, -12, 127, -640, 47, -16, 127, -768, 67, -24, 127, -1024, 77,
                                                   -28, 127, -1152});
  Report("int8 NHWC convolution, float y (INT8_EXT_CONFIG)", d.empty(), d);
  st = cudnnConvolutionForward(h, &one, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero,
                               yd, y);
  Report("int8: IMPLICIT_GEMM is NOT_SUPPORTED", st == CUDNN_STATUS_NOT_SUPPORTED, StatusStr(st));
  auto nchw_w = filter(4, 4, CUDNN_TENSOR_NCHW);
  st = cudnnConvolutionForward(h, &one, xd, x, nchw_w, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws,
                               need, &zero, yd, y);
  Report("int8: an NCHW filter is NOT_SUPPORTED", st == CUDNN_STATUS_NOT_SUPPORTED, StatusStr(st));
  auto x3 = nhwc(1, 3, 3, 3, CUDNN_DATA_INT8);
  auto w3 = filter(4, 3, CUDNN_TENSOR_NHWC);
  st = cudnnConvolutionForward(h, &one, x3, x, w3, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws, need,
                               &zero, yd, y);
  Report("int8: 3 input channels (not a multiple of 4) is NOT_SUPPORTED", st == CUDNN_STATUS_NOT_SUPPORTED,
         StatusStr(st));
  for (auto t : {xd, yd, x3}) cudnnDestroyTensorDescriptor(t);
  for (auto f : {wd, nchw_w, w3}) cudnnDestroyFilterDescriptor(f);
  cudnnDestroyConvolutionDescriptor(cd);
  for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(y), ws})
    if (p) CheckFree(p);
}

void CaseBiasActivation(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 3, 3});
  auto wd = Filter({1, 1, 2, 2});
  auto yd = Tensor({1, 1, 2, 2});
  auto bd = Tensor({1, 1, 1, 1});
  auto cd = Conv({0, 0}, {1, 1}, {1, 1});
  float* x = Upload(kX3x3);
  float* w = Upload(kW2x2);
  float* z = Upload({2, 4, -40, 10});
  float* b = Upload({-40});
  float* y = Upload({0, 0, 0, 0});
  auto relu = Act(CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN);
  const float a1 = 1.0f, a2 = 0.5f, zero = 0.0f;
  // relu(conv + 0.5 z - 40) = relu([37+1, 47+2, 67-20, 77+5] - 40) = [0, 9, 7, 42]
  cudnnStatus_t st = cudnnConvolutionBiasActivationForward(h, &a1, xd, x, wd, w, cd,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &a2,
                                                           yd, z, bd, b, relu, yd, y);
  std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {0, 9, 7, 42});
  Report("fused relu(conv + 0.5 * z + bias)", d.empty(), d);
  // z = y with alpha2 = 0: y's NaNs are not read.
  for (int i = 0; i < 4; ++i) y[i] = NAN;
  st = cudnnConvolutionBiasActivationForward(h, &a1, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                             nullptr, 0, &zero, yd, y, bd, b, relu, yd, y);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {0, 7, 27, 37});
  Report("fused call with z = y and alpha2 = 0", d.empty(), d);
  // CUDNN_PROPAGATE_NAN is refused by the fused call.
  auto relu_nan = Act(CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN);
  st = cudnnConvolutionBiasActivationForward(h, &a1, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                             nullptr, 0, &a2, yd, z, bd, b, relu_nan, yd, y);
  Report("fused call refuses reluNanOpt CUDNN_PROPAGATE_NAN", st == CUDNN_STATUS_NOT_SUPPORTED,
         StatusStr(st) + " " + LastError());
  // IDENTITY needs IMPLICIT_PRECOMP_GEMM.
  auto ident = Act(CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN);
  st = cudnnConvolutionBiasActivationForward(h, &a1, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                             nullptr, 0, &a2, yd, z, bd, b, ident, yd, y);
  const std::string msg = LastError();
  Report("IDENTITY with IMPLICIT_GEMM refused", st == CUDNN_STATUS_NOT_SUPPORTED &&
                                                    msg.find("IMPLICIT_PRECOMP_GEMM") != std::string::npos,
         StatusStr(st) + " " + msg);
  size_t need = 0;
  cudnnGetConvolutionForwardWorkspaceSize(h, xd, wd, cd, yd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need);
  void* ws = CheckAlloc(need);
  st = cudnnConvolutionBiasActivationForward(h, &a1, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
                                             ws, need, &a2, yd, z, bd, b, ident, yd, y);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 4), {-2, 9, 7, 42});
  Report("IDENTITY with IMPLICIT_PRECOMP_GEMM: conv + 0.5 * z + bias", d.empty(), d);
  // Other activations are refused.
  auto sig = Act(CUDNN_ACTIVATION_SIGMOID, CUDNN_NOT_PROPAGATE_NAN);
  st = cudnnConvolutionBiasActivationForward(h, &a1, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                             nullptr, 0, &a2, yd, z, bd, b, sig, yd, y);
  Report("fused call refuses SIGMOID", st == CUDNN_STATUS_NOT_SUPPORTED, StatusStr(st));
}

void CaseBackwardData(cudnnHandle_t h) {
  // dx [1, 2, 5, 5] <- dy [1, 3, 3, 3] through w [3, 2, 3, 3], pad 1, stride 2.
  const int C = 2, K = 3, H = 5, O = 3, R = 3;
  std::vector<float> dy(K * O * O), w(K * C * R * R);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 5 % 9) - 4);
  // Direct scatter: every dy[k, oh, ow] adds dy * w[k, c, r, s] to dx[c, 2*oh - 1 + r, 2*ow - 1 + s].
  std::vector<float> want(C * H * H, 0.0f);
  for (int k = 0; k < K; ++k)
    for (int oh = 0; oh < O; ++oh)
      for (int ow = 0; ow < O; ++ow)
        for (int c = 0; c < C; ++c)
          for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s) {
              const int ih = 2 * oh - 1 + r, iw = 2 * ow - 1 + s;
              if (ih < 0 || ih >= H || iw < 0 || iw >= H) continue;
              want[(c * H + ih) * H + iw] += dy[(k * O + oh) * O + ow] * w[((k * C + c) * R + r) * R + s];
            }
  auto dxd = Tensor({1, C, H, H});
  auto dyd = Tensor({1, K, O, O});
  auto wd = Filter({K, C, R, R});
  auto cd = Conv({1, 1}, {2, 2}, {1, 1});
  int max_count = 0, returned = 0;
  cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max_count);
  cudnnConvolutionBwdDataAlgoPerf_t perf[16];
  cudnnStatus_t st = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, wd, dyd, cd, dxd, max_count, &returned, perf);
  int pick = -1;
  for (int i = 0; i < returned && pick < 0; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].determinism == CUDNN_DETERMINISTIC) pick = i;
  }
  Report("backward-data algorithm list has a deterministic algorithm", st == CUDNN_STATUS_SUCCESS && pick >= 0,
         StatusStr(st));
  if (pick < 0) return;
  size_t need = 0;
  cudnnGetConvolutionBackwardDataWorkspaceSize(h, wd, dyd, cd, dxd, perf[pick].algo, &need);
  void* ws = need ? CheckAlloc(need) : nullptr;
  float* dyp = Upload(dy);
  float* wp = Upload(w);
  float* dx = Upload(std::vector<float>(C * H * H, 1.0f));
  const float one = 1.0f;
  st = cudnnConvolutionBackwardData(h, &one, wd, wp, dyd, dyp, cd, perf[pick].algo, ws, need, &one, dxd, dx);
  std::vector<float> want_plus_one = want;
  for (float& v : want_plus_one) v += 1.0f;
  std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(dx, want.size()), want_plus_one);
  Report("backward data of a stride-2 conv equals the direct scatter (beta 1)", d.empty(), d);
  // Adjoint check: <conv(x), dy> == <x, backward(dy)> for x = the scatter's result.
  float* xf = Upload(want);
  float* yf = Upload(std::vector<float>(K * O * O));
  st = Forward(h, dxd, xf, wd, wp, cd, dyd, yf);
  const std::vector<float> yv = CheckDownload(yf, dy.size());
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < dy.size(); ++i) lhs += double(yv[i]) * dy[i];
  for (size_t i = 0; i < want.size(); ++i) rhs += double(want[i]) * want[i];
  Report("backward data is the adjoint of forward", st == CUDNN_STATUS_SUCCESS && lhs == rhs,
         std::to_string(lhs) + " vs " + std::to_string(rhs));
  // The same adjoint identity for a grouped, dilated, mirrored (CUDNN_CONVOLUTION) 2-group conv:
  // x [2, 4, 6, 5], w [6, 2, 2, 3], pad (1, 0), stride (1, 2), dilation (2, 1) -> y [2, 6, 6, 2].
  {
    auto gxd = Tensor({2, 4, 6, 5});
    auto gwd = Filter({6, 2, 2, 3});
    auto gyd = Tensor({2, 6, 6, 2});
    auto gcd = Conv({1, 0}, {1, 2}, {2, 1}, CUDNN_CONVOLUTION, 2);
    std::vector<float> gx(2 * 4 * 6 * 5), gw(6 * 2 * 2 * 3), gdy(2 * 6 * 6 * 2);
    for (size_t i = 0; i < gx.size(); ++i) gx[i] = static_cast<float>(static_cast<int>(i * 3 % 7) - 3);
    for (size_t i = 0; i < gw.size(); ++i) gw[i] = static_cast<float>(static_cast<int>(i * 5 % 7) - 3);
    for (size_t i = 0; i < gdy.size(); ++i) gdy[i] = static_cast<float>(static_cast<int>(i * 2 % 5) - 2);
    float* gxp = Upload(gx);
    float* gwp = Upload(gw);
    float* gdyp = Upload(gdy);
    float* gyp = Upload(std::vector<float>(gdy.size()));
    float* gdxp = Upload(std::vector<float>(gx.size()));
    const float zero = 0.0f;
    cudnnStatus_t s1 = Forward(h, gxd, gxp, gwd, gwp, gcd, gyd, gyp);
    cudnnStatus_t s2 = cudnnConvolutionBackwardData(h, &one, gwd, gwp, gyd, gdyp, gcd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
                                                    nullptr, 0, &zero, gxd, gdxp);
    const std::vector<float> gy = CheckDownload(gyp, gdy.size()), gdx = CheckDownload(gdxp, gx.size());
    double l = 0, r = 0;
    for (size_t i = 0; i < gdy.size(); ++i) l += double(gy[i]) * gdy[i];
    for (size_t i = 0; i < gx.size(); ++i) r += double(gx[i]) * gdx[i];
    Report("grouped, dilated, mirrored backward data is the adjoint of forward",
           s1 == CUDNN_STATUS_SUCCESS && s2 == CUDNN_STATUS_SUCCESS && l == r,
           StatusStr(s1) + "/" + StatusStr(s2) + " " + std::to_string(l) + " vs " + std::to_string(r));
  }
  // A dyDesc that is not the forward output of dxDesc: BAD_PARAM for backward data.
  auto bad = Tensor({1, K, 2, 2});
  float* dyb = Upload(std::vector<float>(K * 4));
  st = cudnnConvolutionBackwardData(h, &one, wd, wp, bad, dyb, cd, perf[pick].algo, ws, need, &one, dxd, dx);
  Report("backward data with a dyDesc of the wrong size refused", st == CUDNN_STATUS_BAD_PARAM,
         StatusStr(st) + " " + LastError());
}

void CaseAddTensor(cudnnHandle_t h) {
  auto cd = Tensor({2, 3, 1, 2});
  auto ad = Tensor({1, 3, 1, 1});
  std::vector<float> c(12);
  for (int i = 0; i < 12; ++i) c[i] = static_cast<float>(i);
  float* cp = Upload(c);
  float* ap = Upload({10, 20, 30});
  const float two = 2.0f, half = 0.5f;
  cudnnStatus_t st = cudnnAddTensor(h, &two, ad, ap, &half, cd, cp);
  // C[n, ch, 0, w] = 0.5 * C + 2 * A[ch]
  std::vector<float> want(12);
  for (int i = 0; i < 12; ++i) want[i] = 0.5f * i + 2.0f * 10.0f * static_cast<float>((i / 2) % 3 + 1);
  std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(cp, 12), want);
  Report("cudnnAddTensor broadcasts a [1,C,1,1] bias (alpha 2, beta 0.5)", d.empty(), d);
  auto bad = Tensor({1, 2, 1, 1});
  st = cudnnAddTensor(h, &two, bad, ap, &half, cd, cp);
  Report("cudnnAddTensor refuses a [1,2,1,1] A for C [2,3,1,2]", st == CUDNN_STATUS_BAD_PARAM,
         StatusStr(st) + " " + LastError());
}

void CaseActivation(cudnnHandle_t h) {
  auto d4 = Tensor({1, 1, 1, 4});
  const float one = 1.0f, zero = 0.0f;
  struct Want {
    const char* name;
    cudnnActivationMode_t mode;
    cudnnNanPropagation_t nan;
    double coef;
    std::vector<float> y;
  };
  const float elu_m1 = std::expm1(-1.0f);
  const Want cases[] = {
      {"RELU, NaN propagated", CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0, {0, 0, 2, NAN}},
      {"RELU, NaN not propagated", CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0, {0, 0, 2, 0}},
      {"CLIPPED_RELU at 1.5", CUDNN_ACTIVATION_CLIPPED_RELU, CUDNN_NOT_PROPAGATE_NAN, 1.5, {0, 0, 1.5f, 0}},
      {"ELU alpha 1", CUDNN_ACTIVATION_ELU, CUDNN_NOT_PROPAGATE_NAN, 1.0, {elu_m1, 0, 2, NAN}},
      {"SIGMOID", CUDNN_ACTIVATION_SIGMOID, CUDNN_NOT_PROPAGATE_NAN, 0,
       {1.0f / (1.0f + std::exp(1.0f)), 0.5f, 1.0f / (1.0f + std::exp(-2.0f)), NAN}},
      {"TANH", CUDNN_ACTIVATION_TANH, CUDNN_NOT_PROPAGATE_NAN, 0, {std::tanh(-1.0f), 0, std::tanh(2.0f), NAN}},
  };
  for (const Want& c : cases) {
    float* x = Upload({-1, 0, 2, NAN});
    auto a = Act(c.mode, c.nan, c.coef);
    cudnnStatus_t st = cudnnActivationForward(h, a, &one, d4, x, &zero, d4, x);  // in place
    const std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(x, 4), c.y, 1e-6f);
    Report(std::string("cudnnActivationForward in place: ") + c.name, d.empty(), d);
  }
  float* x = Upload({-1, 0, 2, 3});
  auto ident = Act(CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN);
  cudnnStatus_t st = cudnnActivationForward(h, ident, &one, d4, x, &zero, d4, x);
  Report("cudnnActivationForward refuses IDENTITY", st == CUDNN_STATUS_NOT_SUPPORTED, StatusStr(st));
}

cudnnStatus_t Pool(cudnnHandle_t h, cudnnPoolingMode_t mode, cudnnNanPropagation_t nan, std::vector<int> win,
                   std::vector<int> pad, std::vector<int> stride, cudnnTensorDescriptor_t xd, const void* x,
                   cudnnTensorDescriptor_t yd, void* y) {
  cudnnPoolingDescriptor_t p = nullptr;
  cudnnCreatePoolingDescriptor(&p);
  cudnnStatus_t st = cudnnSetPoolingNdDescriptor(p, mode, nan, static_cast<int>(win.size()), win.data(), pad.data(),
                                                 stride.data());
  const float one = 1.0f, zero = 0.0f;
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnPoolingForward(h, p, &one, xd, x, &zero, yd, y);
  cudnnDestroyPoolingDescriptor(p);
  return st;
}

void CasePooling(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 2, 4});
  auto yd = Tensor({1, 1, 1, 2});
  float* x = Upload({1, NAN, 3, 4, 5, 6, 7, 8});
  float* y = Upload({0, 0});
  cudnnStatus_t st = Pool(h, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, {2, 2}, {0, 0}, {2, 2}, xd, x, yd, y);
  std::string d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 2), {NAN, 8});
  Report("max pooling, CUDNN_PROPAGATE_NAN: a NaN window gives NaN", d.empty(), d);
  st = Pool(h, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, {2, 2}, {0, 0}, {2, 2}, xd, x, yd, y);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(y, 2), {6, 8});
  Report("max pooling, CUDNN_NOT_PROPAGATE_NAN: the NaN is skipped", d.empty(), d);

  auto x3 = Tensor({1, 1, 3, 3});
  auto y2 = Tensor({1, 1, 2, 2});
  float* xp = Upload(kX3x3);
  float* yp = Upload({0, 0, 0, 0});
  st = Pool(h, CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, CUDNN_NOT_PROPAGATE_NAN, {2, 2}, {1, 1}, {2, 2}, x3, xp,
            y2, yp);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(yp, 4), {0.25f, 1.25f, 2.75f, 7});
  Report("average pooling including padding (window 2, pad 1, stride 2)", d.empty(), d);
  st = Pool(h, CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, CUDNN_NOT_PROPAGATE_NAN, {2, 2}, {1, 1}, {2, 2}, x3, xp,
            y2, yp);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(yp, 4), {1, 2.5f, 5.5f, 7});
  Report("average pooling excluding padding", d.empty(), d);
  float* neg = Upload({-1, -2, -3, -4, -5, -6, -7, -8, -9});
  st = Pool(h, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, {2, 2}, {1, 1}, {2, 2}, x3, neg, y2, yp);
  d = st ? StatusStr(st) + " " + LastError() : Diff(CheckDownload(yp, 4), {-1, -2, -4, -5});
  Report("max pooling of negative values: padding never wins", d.empty(), d);
  auto y3 = Tensor({1, 1, 3, 3});
  st = Pool(h, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, {2, 2}, {1, 1}, {2, 2}, x3, xp, y3, yp);
  Report("pooling yDesc of the wrong size refused", st == CUDNN_STATUS_BAD_PARAM, StatusStr(st));
}

void CaseHalfAndBFloat16(cudnnHandle_t h) {
  // y = conv / 3 of the 3x3 case: [37, 47, 67, 77] / 3, rounded once to the output type.
  //   half (11 significant bits): 12.3359375, 15.6640625, 22.328125, 25.671875
  //   bfloat16 (8 significant bits): 12.3125, 15.6875, 22.375, 25.625
  const float third = 1.0f / 3.0f, zero = 0.0f;
  struct Want {
    cudnnDataType_t dt;
    const char* name;
    std::vector<float> y;
  };
  const Want cases[] = {{CUDNN_DATA_HALF, "half (PSEUDO_HALF_CONFIG)", {12.3359375f, 15.6640625f, 22.328125f, 25.671875f}},
                        {CUDNN_DATA_BFLOAT16, "bfloat16 (PSEUDO_BFLOAT16_CONFIG)", {12.3125f, 15.6875f, 22.375f, 25.625f}}};
  for (const Want& c : cases) {
    auto xd = Tensor({1, 1, 3, 3}, c.dt);
    auto wd = Filter({1, 1, 2, 2}, c.dt);
    auto yd = Tensor({1, 1, 2, 2}, c.dt);
    auto cd = Conv({0, 0}, {1, 1}, {1, 1});
    uint16_t* x = Upload16(kX3x3, c.dt);
    uint16_t* w = Upload16(kW2x2, c.dt);
    uint16_t* y = Upload16({0, 0, 0, 0}, c.dt);
    cudnnStatus_t st = cudnnConvolutionForward(h, &third, xd, x, wd, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
                                               nullptr, 0, &zero, yd, y);
    const std::string d = st ? StatusStr(st) + " " + LastError() : Diff(Read16(y, 4, c.dt), c.y);
    Report(std::string("conv output rounded once to ") + c.name, d.empty(), d);
  }
  // bfloat16 has no fused configuration.
  auto xd = Tensor({1, 1, 3, 3}, CUDNN_DATA_BFLOAT16);
  auto wd = Filter({1, 1, 2, 2}, CUDNN_DATA_BFLOAT16);
  auto yd = Tensor({1, 1, 2, 2}, CUDNN_DATA_BFLOAT16);
  auto bd = Tensor({1, 1, 1, 1}, CUDNN_DATA_BFLOAT16);
  auto cd = Conv({0, 0}, {1, 1}, {1, 1});
  auto relu = Act(CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN);
  uint16_t* x = Upload16(kX3x3, CUDNN_DATA_BFLOAT16);
  uint16_t* w = Upload16(kW2x2, CUDNN_DATA_BFLOAT16);
  uint16_t* y = Upload16({0, 0, 0, 0}, CUDNN_DATA_BFLOAT16);
  uint16_t* b = Upload16({0}, CUDNN_DATA_BFLOAT16);
  const float one = 1.0f;
  cudnnStatus_t st = cudnnConvolutionBiasActivationForward(h, &one, xd, x, wd, w, cd,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, nullptr, 0, &zero,
                                                           yd, y, bd, b, relu, yd, y);
  Report("fused call refuses bfloat16", st == CUDNN_STATUS_NOT_SUPPORTED, StatusStr(st));
  // Half max pooling keeps values exactly.
  auto px = Tensor({1, 1, 2, 4}, CUDNN_DATA_HALF);
  auto py = Tensor({1, 1, 1, 2}, CUDNN_DATA_HALF);
  uint16_t* pxp = Upload16({0.5f, -1, 3.25f, 4, 5, 6, 7, 8.5f}, CUDNN_DATA_HALF);
  uint16_t* pyp = Upload16({0, 0}, CUDNN_DATA_HALF);
  st = Pool(h, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, {2, 2}, {0, 0}, {2, 2}, px, pxp, py, pyp);
  const std::string d = st ? StatusStr(st) + " " + LastError() : Diff(Read16(pyp, 2, CUDNN_DATA_HALF), {6, 8.5f});
  Report("half max pooling", d.empty(), d);
}

void CaseRanges(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 3, 3});
  auto wd = Filter({1, 1, 2, 2});
  auto cd = Conv({0, 0}, {1, 1}, {1, 1});
  float* x = Upload(kX3x3);
  float* w = Upload(kW2x2);
  // y described as [1,1,2,2] with a row pitch of 4: its extent is (1*4 + 1 + 1) * 4 = 24 bytes,
  // past the 16-byte allocation.
  auto yd = Tensor({1, 1, 2, 2}, CUDNN_DATA_FLOAT, {8, 8, 4, 1});
  float* y = Upload({0, 0, 0, 0});
  cudnnStatus_t st = Forward(h, xd, x, wd, w, cd, yd, y);
  std::string msg = LastError();
  Report("a strided y past its allocation refused", st == CUDNN_STATUS_BAD_PARAM && msg.find("y at") != std::string::npos &&
                                                       msg.find("24 bytes") != std::string::npos,
         StatusStr(st) + " " + msg);
  // A host pointer that is not device memory.
  std::vector<float> host(4);
  auto yp = Tensor({1, 1, 2, 2});
  st = Forward(h, xd, x, wd, w, cd, yp, host.data());
  Report("a host pointer refused", st == CUDNN_STATUS_BAD_PARAM, StatusStr(st) + " " + LastError());
  // A success clears the last-error message.
  st = Forward(h, xd, x, wd, w, cd, yp, y);
  Report("a successful call clears the last error", st == CUDNN_STATUS_SUCCESS && LastError().empty(), LastError());
  // A destroyed descriptor is refused.
  cudnnTensorDescriptor_t gone = Tensor({1, 1, 2, 2});
  cudnnDestroyTensorDescriptor(gone);
  st = Forward(h, xd, x, wd, w, cd, gone, y);
  Report("a destroyed descriptor refused", st == CUDNN_STATUS_BAD_PARAM, StatusStr(st) + " " + LastError());
}

void CaseSetters() {
  cudnnTensorDescriptor_t t = nullptr;
  cudnnCreateTensorDescriptor(&t);
  const int dims[4] = {1, 0, 2, 2}, strides[4] = {4, 4, 2, 1};
  bool ok = cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 4, dims, strides) == CUDNN_STATUS_BAD_PARAM;
  const int d9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  ok = ok && cudnnSetTensorNdDescriptor(t, CUDNN_DATA_FLOAT, 9, d9, d9) == CUDNN_STATUS_NOT_SUPPORTED;
  ok = ok && cudnnSetTensor4dDescriptor(t, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, 1, 3, 2, 2) == CUDNN_STATUS_SUCCESS;
  cudnnDestroyTensorDescriptor(t);
  cudnnConvolutionDescriptor_t c = nullptr;
  cudnnCreateConvolutionDescriptor(&c);
  const int pad[2] = {-1, 0}, one[2] = {1, 1};
  ok = ok && cudnnSetConvolutionNdDescriptor(c, 2, pad, one, one, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT) ==
                 CUDNN_STATUS_BAD_PARAM;
  ok = ok && cudnnSetConvolutionGroupCount(c, 0) == CUDNN_STATUS_BAD_PARAM;
  cudnnDestroyConvolutionDescriptor(c);
  cudnnPoolingDescriptor_t p = nullptr;
  cudnnCreatePoolingDescriptor(&p);
  const int zero_win[2] = {0, 2}, pads[2] = {0, 0};
  ok = ok && cudnnSetPoolingNdDescriptor(p, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN, 2, zero_win, pads, one) ==
                 CUDNN_STATUS_BAD_PARAM;
  cudnnDestroyPoolingDescriptor(p);
  Report("descriptor setters validate (dims, nbDims, pads, groups, windows)", ok, LastError());
}

void CaseFault(cudnnHandle_t h) {
  auto xd = Tensor({1, 1, 3, 3});
  auto wd = Filter({1, 1, 2, 2});
  auto yd = Tensor({1, 1, 2, 2});
  auto cd = Conv({0, 0}, {1, 1}, {1, 1});
  float* x = Upload(kX3x3);
  float* w = Upload(kW2x2);
  float* y = Upload({0, 0, 0, 0});
  CheckSetFault("dnn-not-supported@1");
  const cudnnStatus_t first = Forward(h, xd, x, wd, w, cd, yd, y);
  const std::string msg = LastError();
  const cudnnStatus_t second = Forward(h, xd, x, wd, w, cd, yd, y);
  const std::string d = second ? StatusStr(second) : Diff(CheckDownload(y, 4), {37, 47, 67, 77});
  Report("fault dnn-not-supported fires once", first == CUDNN_STATUS_NOT_SUPPORTED && d.empty(),
         StatusStr(first) + " " + msg + (d.empty() ? "" : "; then " + d));
}

// ---- The backend (graph) API: scaled-dot-product attention (cudnn_backend.cc) ---------------------

// A finalized backend descriptor of `type` with `set` applied first; nullptr (and a FAIL line
// naming `what`) when a call fails.
struct Backend {
  std::vector<cudnnBackendDescriptor_t> made;  // destroyed with the object
  std::string failed;                          // the first failing call
  ~Backend() {
    for (cudnnBackendDescriptor_t d : made) cudnnBackendDestroyDescriptor(d);
  }
  cudnnBackendDescriptor_t Make(cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = nullptr;
    if (cudnnBackendCreateDescriptor(type, &d) != CUDNN_STATUS_SUCCESS) Note("create");
    made.push_back(d);
    return d;
  }
  template <typename T>
  void Set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           const T* v, int64_t n = 1) {
    if (cudnnBackendSetAttribute(d, name, type, n, v) != CUDNN_STATUS_SUCCESS) Note("set " + std::to_string(name));
  }
  void SetDesc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name, cudnnBackendDescriptor_t v) {
    Set(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &v);
  }
  cudnnStatus_t Finalize(cudnnBackendDescriptor_t d) {
    const cudnnStatus_t st = cudnnBackendFinalize(d);
    if (st != CUDNN_STATUS_SUCCESS) Note("finalize");
    return st;
  }
  void Note(const std::string& what) {
    if (failed.empty()) failed = what + ": " + LastError();
  }
  cudnnBackendDescriptor_t Tensor(int64_t uid, cudnnDataType_t dt, std::vector<int64_t> dims,
                                  std::vector<int64_t> strides, bool is_virtual = false, bool by_value = false) {
    cudnnBackendDescriptor_t t = Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t align = 16;
    Set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &dt);
    Set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), static_cast<int64_t>(dims.size()));
    Set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), static_cast<int64_t>(strides.size()));
    Set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid);
    Set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &align);
    Set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    Set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    Finalize(t);
    return t;
  }
  cudnnBackendDescriptor_t Op(cudnnBackendDescriptorType_t type, cudnnBackendDescriptorType_t desc_type,
                              int mode_attr, cudnnBackendAttributeType_t mode_type, int mode, int prec_attr,
                              std::vector<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>> io,
                              cudnnBackendAttributeName_t desc_attr) {
    cudnnBackendDescriptor_t d = Make(desc_type);
    const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    if (mode_attr >= 0) Set(d, static_cast<cudnnBackendAttributeName_t>(mode_attr), mode_type, &mode);
    Set(d, static_cast<cudnnBackendAttributeName_t>(prec_attr), CUDNN_TYPE_DATA_TYPE, &fp32);
    Finalize(d);
    cudnnBackendDescriptor_t op = Make(type);
    SetDesc(op, desc_attr, d);
    for (const auto& [name, t] : io) SetDesc(op, name, t);
    Finalize(op);
    return op;
  }
  cudnnBackendDescriptor_t Matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    return Op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, CUDNN_BACKEND_MATMUL_DESCRIPTOR, -1, CUDNN_TYPE_INT64, 0,
              CUDNN_ATTR_MATMUL_COMP_TYPE,
              {{CUDNN_ATTR_OPERATION_MATMUL_ADESC, a}, {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
               {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c}},
              CUDNN_ATTR_OPERATION_MATMUL_DESC);
  }
  cudnnBackendDescriptor_t Pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                     cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y) {
    std::vector<std::pair<cudnnBackendAttributeName_t, cudnnBackendDescriptor_t>> io = {
        {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x}, {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y}};
    if (b) io.push_back({CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b});
    return Op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, CUDNN_BACKEND_POINTWISE_DESCRIPTOR,
              CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode, CUDNN_ATTR_POINTWISE_MATH_PREC, io,
              CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR);
  }
  cudnnBackendDescriptor_t Reduce(cudnnReduceTensorOp_t op, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    return Op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, CUDNN_BACKEND_REDUCTION_DESCRIPTOR,
              CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, op, CUDNN_ATTR_REDUCTION_COMP_TYPE,
              {{CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x}, {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y}},
              CUDNN_ATTR_OPERATION_REDUCTION_DESC);
  }
};

// Y = softmax(scale * Q K^T + mask) V over [1, 2, 2, d] tensors with a [1, 1, 2, 2] mask
// (broadcast over the heads), as an operation graph; then the heuristics' engine configs
// (how many in *configs) and, when there is one, the execution plan made from the first.
cudnnBackendDescriptor_t AttentionPlan(Backend& b, cudnnHandle_t h, int64_t d, cudnnDataType_t dt, int64_t* configs) {
  const int64_t hs = 2 * d;  // one head's [2, d] block
  auto q = b.Tensor(1, dt, {1, 2, 2, d}, {2 * hs, hs, d, 1});
  auto kt = b.Tensor(2, dt, {1, 2, d, 2}, {2 * hs, hs, 1, d});  // K [1, 2, 2, d] read transposed
  auto v = b.Tensor(3, dt, {1, 2, 2, d}, {2 * hs, hs, d, 1});
  auto y = b.Tensor(4, dt, {1, 2, 2, d}, {2 * hs, hs, d, 1});
  auto mask = b.Tensor(5, dt, {1, 1, 2, 2}, {4, 4, 2, 1});
  auto scale = b.Tensor(6, CUDNN_DATA_FLOAT, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  auto virt = [&](int64_t uid, int64_t keys) {
    return b.Tensor(uid, CUDNN_DATA_FLOAT, {1, 2, 2, keys}, {4 * keys, 2 * keys, keys, 1}, true);
  };
  auto s = virt(101, 2), s1 = virt(102, 2), s2 = virt(103, 2), m = virt(104, 1), e0 = virt(105, 2);
  auto e = virt(106, 2), l = virt(107, 1), p = virt(108, 2);
  std::vector<cudnnBackendDescriptor_t> ops = {
      b.Matmul(q, kt, s),
      b.Pointwise(CUDNN_POINTWISE_MUL, s, scale, s1),
      b.Pointwise(CUDNN_POINTWISE_ADD, s1, mask, s2),
      b.Reduce(CUDNN_REDUCE_TENSOR_MAX, s2, m),
      b.Pointwise(CUDNN_POINTWISE_SUB, s2, m, e0),
      b.Pointwise(CUDNN_POINTWISE_EXP, e0, nullptr, e),
      b.Reduce(CUDNN_REDUCE_TENSOR_ADD, e, l),
      b.Pointwise(CUDNN_POINTWISE_DIV, e, l, p),
      b.Matmul(p, v, y)};
  std::reverse(ops.begin(), ops.end());  // the graph orders them itself
  auto graph = b.Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  b.Set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(), static_cast<int64_t>(ops.size()));
  b.Set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &h);
  b.Finalize(graph);
  auto heur = b.Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  b.SetDesc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  b.Set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  b.Finalize(heur);
  *configs = -1;
  if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, configs,
                               nullptr) != CUDNN_STATUS_SUCCESS)
    b.Note("heuristics count");
  if (*configs < 1) return nullptr;
  cudnnBackendDescriptor_t cfg = b.Make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  int64_t got = 0;
  if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &got, &cfg) !=
      CUDNN_STATUS_SUCCESS)
    b.Note("heuristics results");
  auto plan = b.Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  b.SetDesc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
  b.Set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &h);
  b.Finalize(plan);
  return plan;
}

cudnnBackendDescriptor_t Pack(Backend& b, std::vector<int64_t> uids, std::vector<void*> ptrs, void* workspace) {
  auto pack = b.Make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  b.Set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), static_cast<int64_t>(uids.size()));
  b.Set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, ptrs.data(), static_cast<int64_t>(ptrs.size()));
  b.Set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace);
  b.Finalize(pack);
  return pack;
}

void CaseBackendAttention(cudnnHandle_t h) {
  for (cudnnDataType_t dt : {CUDNN_DATA_HALF, CUDNN_DATA_BFLOAT16}) {
    const std::string name = dt == CUDNN_DATA_HALF ? "float16" : "bfloat16";
    const int64_t d = 8;
    Backend b;
    int64_t configs = 0;
    cudnnBackendDescriptor_t plan = AttentionPlan(b, h, d, dt, &configs);
    int64_t workspace = -1, n = 0;
    if (plan && b.failed.empty())
      cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n, &workspace);
    // Two reductions of [1, 2, 2, 1]: 8 bytes per row each.
    Report("backend API: the " + name + " attention graph finalizes, one engine config, workspace 64 bytes",
           b.failed.empty() && configs == 1 && workspace == 64,
           b.failed + " configs " + std::to_string(configs) + " workspace " + std::to_string(workspace));
    if (!b.failed.empty() || plan == nullptr) continue;
    // Head 0: q0 = 2 e0 against k0 = e0, k1 = 0; q1 = 0. Head 1: Q = 0. V rows e0 and e1 in both.
    std::vector<float> q(2 * 2 * d, 0.0f), k(2 * 2 * d, 0.0f), v(2 * 2 * d, 0.0f);
    q[0] = 2;
    k[0] = 1;
    for (int head = 0; head < 2; ++head) {
      v[head * 2 * d + 0] = 1;
      v[head * 2 * d + d + 1] = 1;
    }
    const float inf = std::numeric_limits<float>::infinity();
    uint16_t* dq = Upload16(q, dt);
    uint16_t* dk = Upload16(k, dt);
    uint16_t* dv = Upload16(v, dt);
    uint16_t* dmask = Upload16({0, 0, 0, -inf}, dt);  // query 1 sees key 0 only, in both heads
    uint16_t* dy = Upload16(std::vector<float>(2 * 2 * d, -7.0f), dt);
    float* ws = Upload(std::vector<float>(16, 0.0f));
    float scale = 0.5f;
    auto pack = Pack(b, {1, 2, 3, 4, 5, 6}, {dq, dk, dv, dy, dmask, &scale}, ws);
    const cudnnStatus_t st = cudnnBackendExecute(h, plan, pack);
    // Head 0, query 0: scores 0.5 * [2, 0] = [1, 0], softmax [e/(e+1), 1/(e+1)]; query 1: [1, 0].
    // Head 1, query 0: [1/2, 1/2]; query 1: [1, 0]. Y's row = p0 e0 + p1 e1.
    const float a = std::exp(1.0f) / (std::exp(1.0f) + 1.0f);
    std::vector<float> want(2 * 2 * d, 0.0f);
    const float rows[4][2] = {{a, 1 - a}, {1, 0}, {0.5f, 0.5f}, {1, 0}};
    for (int r = 0; r < 4; ++r) {
      want[r * d + 0] = rows[r][0];
      want[r * d + 1] = rows[r][1];
    }
    const std::string diff = st ? StatusStr(st) + " " + LastError() : Diff(Read16(dy, want.size(), dt), want, 4e-3f);
    Report("backend API: " + name + " softmax(scale Q K^T + mask) V by hand, mask broadcast over heads", diff.empty(),
           diff);

    // Refusals: a variant pack without the mask, a workspace that is too small, a finalized
    // descriptor set again.
    auto no_mask = Pack(b, {1, 2, 3, 4, 6}, {dq, dk, dv, dy, &scale}, ws);
    cudnnStatus_t r = cudnnBackendExecute(h, plan, no_mask);
    std::string msg = LastError();
    Report("backend API: a variant pack without a tensor's pointer refused",
           r == CUDNN_STATUS_BAD_PARAM && msg.find("tensor 5") != std::string::npos, StatusStr(r) + " " + msg);
    float* small = Upload(std::vector<float>(2, 0.0f));
    auto short_ws = Pack(b, {1, 2, 3, 4, 5, 6}, {dq, dk, dv, dy, dmask, &scale}, small);
    r = cudnnBackendExecute(h, plan, short_ws);
    msg = LastError();
    Report("backend API: a workspace smaller than the plan's refused",
           r == CUDNN_STATUS_BAD_PARAM && msg.find("workspace") != std::string::npos, StatusStr(r) + " " + msg);
    const int64_t uid = 9;
    r = cudnnBackendSetAttribute(plan, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    Report("backend API: a finalized descriptor takes no attribute", r == CUDNN_STATUS_NOT_INITIALIZED, StatusStr(r));
    CheckSetFault("dnn-not-supported@1");
    r = cudnnBackendExecute(h, plan, pack);
    Report("backend API: fault dnn-not-supported at cudnnBackendExecute", r == CUDNN_STATUS_NOT_SUPPORTED, StatusStr(r));
  }
  // What the fused attention pattern does not take: a head size of 20, float32 tensors.
  for (const auto& [d, dt] : {std::pair<int64_t, cudnnDataType_t>{20, CUDNN_DATA_HALF}, {8, CUDNN_DATA_FLOAT}}) {
    Backend b;
    int64_t configs = -1;
    const cudnnBackendDescriptor_t plan = AttentionPlan(b, h, d, dt, &configs);
    Report("backend API: the heuristics offer no engine config for " +
               std::string(dt == CUDNN_DATA_FLOAT ? "float32" : "float16") + " head size " + std::to_string(d),
           b.failed.empty() && configs == 0 && plan == nullptr, b.failed + " configs " + std::to_string(configs));
  }
}

// cuDNN's RNN API (cudnn_adv): a 2-step LSTM of input and hidden size 1, batch 2 with sequence
// lengths {2, 1}, worked by hand from the LSTM equations of cudnnRNNMode_t (linear layers i, f,
// c', o; W = {0.5, 0.25, -0.5, 1}, R = {0.1, 0.2, 0.3, 0.4}, b_W = {0.1, 0, 0, -0.1}, b_R = {0,
// 0.1, 0.2, 0}). Batch 0: x = 1, 2 from h0 = 0.5, c0 = -0.25; step 1: i = s(0.65), f = s(0.45),
// c' = tanh(-0.15), o = s(1.1), c1 = f c0 + i c' = -0.250479, h1 = o tanh(c1) = -0.184090; step 2:
// c2 = -0.677721, h2 = -0.508215. Batch 1: x = 3 from h0 = -0.5, c0 = 0.75: c = -0.229485,
// h = -0.211337, and y's padding step gets paddingFill.
void CaseRnnLstm(cudnnHandle_t h) {
  cudnnRNNDescriptor_t rnn = nullptr;
  cudnnRNNDataDescriptor_t xd = nullptr, yd = nullptr;
  cudnnCreateRNNDescriptor(&rnn);
  cudnnCreateRNNDataDescriptor(&xd);
  cudnnCreateRNNDataDescriptor(&yd);
  cudnnStatus_t st = cudnnSetRNNDescriptor_v8(rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS,
                                              CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT,
                                              CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, 1, 1, 1, 1, nullptr,
                                              CUDNN_RNN_PADDED_IO_ENABLED);
  Report("cudnnSetRNNDescriptor_v8 (LSTM)", st == CUDNN_STATUS_SUCCESS, StatusStr(st) + " " + LastError());
  const int lengths[] = {2, 1};
  float fill = -7.0f;
  for (cudnnRNNDataDescriptor_t d : {xd, yd}) {
    st = cudnnSetRNNDataDescriptor(d, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED, 2, 2, 1, lengths,
                                   &fill);
    Report("cudnnSetRNNDataDescriptor", st == CUDNN_STATUS_SUCCESS, StatusStr(st) + " " + LastError());
  }
  size_t wbytes = 0, ws = 0, reserve = 1;
  cudnnGetRNNWeightSpaceSize(h, rnn, &wbytes);
  st = cudnnGetRNNTempSpaceSizes(h, rnn, CUDNN_FWD_MODE_INFERENCE, xd, &ws, &reserve);
  Report("cudnnGetRNNWeightSpaceSize / TempSpaceSizes: 8 matrices and 8 biases, no reserve in inference",
         st == CUDNN_STATUS_SUCCESS && wbytes == 16 * sizeof(float) && reserve == 0,
         std::to_string(wbytes) + " weight bytes, reserve " + std::to_string(reserve));
  auto* w = static_cast<float*>(CheckAlloc(wbytes));
  const float mat[8] = {0.5f, 0.25f, -0.5f, 1.0f, 0.1f, 0.2f, 0.3f, 0.4f};
  const float bias[8] = {0.1f, 0, 0, -0.1f, 0, 0.1f, 0.2f, 0};
  cudnnTensorDescriptor_t md = Tensor({1, 1, 1}), bd = Tensor({1, 1, 1});
  bool placed = true;
  for (int l = 0; l < 8; ++l) {
    void* m = nullptr;
    void* b = nullptr;
    st = cudnnGetRNNWeightParams(h, rnn, 0, wbytes, w, l, md, &m, bd, &b);
    placed = placed && st == CUDNN_STATUS_SUCCESS && m >= static_cast<void*>(w) && b < static_cast<void*>(w + 16);
    if (st == CUDNN_STATUS_SUCCESS) *static_cast<float*>(m) = mat[l], *static_cast<float*>(b) = bias[l];
  }
  Report("cudnnGetRNNWeightParams places every linear layer's matrix and bias in the weight space", placed,
         StatusStr(st) + " " + LastError());
  float* x = Upload({1, 3, 2, 0});
  float* y = Upload({0, 0, 0, 0});
  float* hx = Upload({0.5f, -0.5f});
  float* cx = Upload({-0.25f, 0.75f});
  float* hy = Upload({0, 0});
  float* cy = Upload({0, 0});
  auto* lens = static_cast<int32_t*>(CheckAlloc(2 * sizeof(int32_t)));
  lens[0] = 2, lens[1] = 1;
  void* work = CheckAlloc(std::max<size_t>(ws, 1));
  cudnnTensorDescriptor_t hd = Tensor({1, 2, 1});
  st = cudnnRNNForward(h, rnn, CUDNN_FWD_MODE_INFERENCE, lens, xd, x, yd, y, hd, hx, hy, hd, cx, cy, wbytes, w, ws,
                       work, 0, nullptr);
  std::string d = st ? StatusStr(st) + " " + LastError()
                     : Diff(CheckDownload(y, 4), {-0.184090f, -0.211337f, -0.508215f, -7.0f}, 1e-5f);
  if (d.empty()) d = Diff(CheckDownload(hy, 2), {-0.508215f, -0.211337f}, 1e-5f);
  if (d.empty()) d = Diff(CheckDownload(cy, 2), {-0.677721f, -0.229485f}, 1e-5f);
  Report("cudnnRNNForward: a 2-step LSTM with lengths {2, 1} against hand-computed values", d.empty(), d);
  st = cudnnRNNForward(h, rnn, CUDNN_FWD_MODE_INFERENCE, lens, xd, x, yd, y, hd, hx, hy, hd, cx, cy, wbytes - 4, w,
                       ws, work, 0, nullptr);
  Report("cudnnRNNForward refuses a weight space of the wrong size", st == CUDNN_STATUS_BAD_PARAM,
         StatusStr(st) + " " + LastError());
  st = cudnnRNNForward(h, rnn, CUDNN_FWD_MODE_INFERENCE, lens, xd, x + 8 * 1024 * 1024, yd, y, hd, hx, hy, hd, cx,
                       cy, wbytes, w, ws, work, 0, nullptr);
  Report("cudnnRNNForward refuses an x outside device memory", st == CUDNN_STATUS_BAD_PARAM,
         StatusStr(st) + " " + LastError());
  st = cudnnSetRNNDataDescriptor(xd, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, 2, 2, 1, lengths,
                                 nullptr);
  Report("cudnnSetRNNDataDescriptor: SEQ_MAJOR_PACKED is not emulated", st == CUDNN_STATUS_NOT_SUPPORTED,
         StatusStr(st) + " " + LastError());
  st = cudnnSetRNNDescriptor_v8(rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_DOUBLE_BIAS, CUDNN_UNIDIRECTIONAL,
                                CUDNN_SKIP_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, 1, 1, 1, 1,
                                nullptr, CUDNN_RNN_PADDED_IO_ENABLED);
  Report("cudnnSetRNNDescriptor_v8 refuses SKIP_INPUT", st == CUDNN_STATUS_NOT_SUPPORTED, StatusStr(st) + " " + LastError());
  for (cudnnTensorDescriptor_t t : {md, bd, hd}) cudnnDestroyTensorDescriptor(t);
  cudnnDestroyRNNDataDescriptor(xd);
  cudnnDestroyRNNDataDescriptor(yd);
  cudnnDestroyRNNDescriptor(rnn);
  for (void* p : {static_cast<void*>(w), static_cast<void*>(x), static_cast<void*>(y), static_cast<void*>(hx),
                  static_cast<void*>(cx), static_cast<void*>(hy), static_cast<void*>(cy), static_cast<void*>(lens), work})
    CheckFree(p);
}

void CaseNoContext() {
  CheckContextCurrent(false);
  cudnnHandle_t h = nullptr;
  const cudnnStatus_t st = cudnnCreate(&h);
  CheckContextCurrent(true);
  Report("cudnnCreate without a current context: the runtime's implicit primary context", st == CUDNN_STATUS_SUCCESS,
         StatusStr(st) + " " + LastError());
  if (st == CUDNN_STATUS_SUCCESS) cudnnDestroy(h);
}

}  // namespace

int main() {
  if (!CheckInit()) return 1;
  CaseVersions();
  CaseNoContext();
  cudnnHandle_t h = nullptr;
  cudnnStatus_t st = cudnnCreate(&h);
  Report("cudnnCreate", st == CUDNN_STATUS_SUCCESS, StatusStr(st) + " " + LastError());
  if (st != CUDNN_STATUS_SUCCESS) return 1;
  cudnnSetStream(h, nullptr);
  CaseCrossCorrelationVsConvolution(h);
  CasePadStrideDilation(h);
  CaseGroups(h);
  CaseOneD(h);
  CaseThreeD(h);
  CaseAlgorithms(h);
  CaseInt8(h);
  CaseBiasActivation(h);
  CaseBackwardData(h);
  CaseAddTensor(h);
  CaseActivation(h);
  CasePooling(h);
  CaseHalfAndBFloat16(h);
  CaseRanges(h);
  CaseSetters();
  CaseFault(h);
  CaseBackendAttention(h);
  CaseRnnLstm(h);
  st = cudnnDestroy(h);
  Report("cudnnDestroy", st == CUDNN_STATUS_SUCCESS, StatusStr(st));
  return ReportSummary();
}
