// Emulated cuDNN 9: the cudnn_cnn library's legacy entry points Kiln uses: convolution
// descriptors, output dims, algorithm and workspace queries, cudnnConvolutionForward,
// cudnnConvolutionBiasActivationForward and cudnnConvolutionBackwardData (reference loops
// accumulating in float, enqueued on the handle's stream).
//
// Algorithms: every algorithm computes the same reference convolution; the emulation reports
// IMPLICIT_PRECOMP_GEMM, IMPLICIT_GEMM and GEMM (forward) and ALGO_1 and ALGO_0 (backward data)
// as supported and the FFT, Winograd and DIRECT variants as CUDNN_STATUS_NOT_SUPPORTED, with the
// workspace sizes below. The int8 convolution (INT8_EXT_CONFIG: x and w CUDNN_DATA_INT8, compute
// type CUDNN_DATA_INT32, y CUDNN_DATA_FLOAT) runs forward only, with IMPLICIT_PRECOMP_GEMM alone,
// on 4-D tensors, as cudnnConvolutionForward() documents for its int8 configurations: x and y
// packed NHWC, the filter in CUDNN_TENSOR_NHWC format, input and output channels multiples of 4
// (NOT_SUPPORTED otherwise; INT8_CONFIG, an int8 y, is not emulated). Its sums are exact (every
// product of two int8 values, and every partial sum below 2^24, is a float).
// A call fills the workspace bytes its algorithm needs with a pattern
// after writing its output, as scratch use on a GPU would clobber them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/emulated_cuda/cudnn_internal.h"

using namespace kiln::emulated_cuda::dnn;  // NOLINT: the C entry points below are the API

namespace {

constexpr unsigned char kWorkspacePattern = 0xA5;

// A convolution x (the forward input) * w -> y (the forward output), validated and with its
// spatial dims normalised to 3 (unit leading dims for 1-D and 2-D).
struct Problem {
  View x, w, y;
  cudnnConvolutionStruct conv;
  int spatial = 0;
  int64_t N = 0, C = 0, K = 0, G = 1, Cg = 0, Kg = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int pad[3] = {0, 0, 0}, str[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
  bool flip = false;  // CUDNN_CONVOLUTION: the filter is mirrored along every spatial axis
  bool int8 = false;  // INT8_EXT_CONFIG
  int64_t Taps() const { return k[0] * k[1] * k[2]; }
  int64_t Outs() const { return out[0] * out[1] * out[2]; }
};

std::string Config(cudnnDataType_t data, cudnnDataType_t compute) {
  return "data " + DTypeName(data) + " with compute type " + DTypeName(compute);
}

// The forward output size along one axis (cudnnGetConvolutionNdForwardOutputDim):
// 1 + (in + 2 * pad - ((k - 1) * dilation + 1)) / stride; negative when the dilated filter does
// not fit the padded input.
int64_t OutDim(int64_t in, int pad, int64_t k, int stride, int dilation) {
  const int64_t span = in + 2 * int64_t{pad} - ((k - 1) * dilation + 1);
  return span < 0 ? -1 : 1 + span / stride;
}

enum class Direction { kForward, kBackwardData };

// The documented argument checks of cudnnConvolutionForward / cudnnConvolutionBackwardData
// (and of the queries, which take the same descriptors): BAD_PARAM for mismatched dims, groups
// or data types; NOT_SUPPORTED for tensors that are not 4-D or 5-D, a forward yDesc whose
// spatial dims are not the forward output size (BAD_PARAM for backward data's dyDesc), and
// data-type configurations outside FLOAT_CONFIG, PSEUDO_HALF_CONFIG, TRUE_HALF_CONFIG and
// PSEUDO_BFLOAT16_CONFIG. Returns the status and sets *why; does not call Fail.
cudnnStatus_t Analyze(const cudnnTensorStruct& x, const cudnnFilterStruct& w, const cudnnConvolutionStruct& conv,
                      const cudnnTensorStruct& y, Direction dir, Problem* p, std::string* why) {
  const bool fwd = dir == Direction::kForward;
  const char* xn = fwd ? "xDesc" : "dxDesc";
  const char* yn = fwd ? "yDesc" : "dyDesc";
  p->x = ViewOf(x);
  p->w = ViewOf(w);
  p->y = ViewOf(y);
  p->conv = conv;
  const int nb = x.nb;
  if (w.nb != nb) {
    *why = std::string(xn) + " has " + std::to_string(nb) + " dims, wDesc " + std::to_string(w.nb);
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (y.nb != nb) {
    *why = std::string(xn) + " has " + std::to_string(nb) + " dims, " + yn + " " + std::to_string(y.nb);
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (conv.spatial + 2 != nb) {
    *why = "convDesc has " + std::to_string(conv.spatial) + " spatial dims, the tensors " + std::to_string(nb) +
           " dims (expected arrayLength + 2)";
    return CUDNN_STATUS_BAD_PARAM;
  }
  const bool int8 = x.dtype == CUDNN_DATA_INT8 && w.dtype == CUDNN_DATA_INT8 && y.dtype == CUDNN_DATA_FLOAT &&
                    conv.compute == CUDNN_DATA_INT32;
  p->int8 = int8;
  if (!int8 && (x.dtype != w.dtype || x.dtype != y.dtype)) {
    *why = std::string(xn) + " is " + DTypeName(x.dtype) + ", wDesc " + DTypeName(w.dtype) + ", " + yn + " " +
           DTypeName(y.dtype) + " (they must match)";
    return CUDNN_STATUS_BAD_PARAM;
  }
  p->N = x.dims[0];
  p->C = x.dims[1];
  p->K = w.dims[0];
  p->G = conv.groups;
  p->Cg = w.dims[1];
  if (p->Cg * p->G != p->C) {
    *why = std::string(xn) + " has " + std::to_string(p->C) + " channels; wDesc " + DimsStr(p->w.dims, nb) + " with " +
           std::to_string(p->G) + " group(s) takes " + std::to_string(p->Cg * p->G);
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (p->K % p->G != 0) {
    *why = "wDesc has " + std::to_string(p->K) + " output channels, not a multiple of the group count " +
           std::to_string(p->G);
    return CUDNN_STATUS_BAD_PARAM;
  }
  p->Kg = p->K / p->G;
  if (y.dims[0] != p->N || y.dims[1] != p->K) {
    *why = std::string(yn) + " " + DimsStr(p->y.dims, nb) + " must have n = " + std::to_string(p->N) +
           " and c = " + std::to_string(p->K) + " (wDesc's output channels)";
    return CUDNN_STATUS_BAD_PARAM;
  }
  p->spatial = conv.spatial;
  const int lead = 3 - std::min(conv.spatial, 3);
  int64_t want[CUDNN_DIM_MAX] = {};
  for (int i = 0; i < conv.spatial; ++i) {
    want[i] = OutDim(x.dims[2 + i], conv.pad[i], w.dims[2 + i], conv.stride[i], conv.dilation[i]);
    if (want[i] < 1) {
      *why = "wDesc's spatial dim " + std::to_string(i) + " (" + std::to_string(w.dims[2 + i]) + ", dilation " +
             std::to_string(conv.dilation[i]) + ") is larger than " + xn + "'s padded size (" +
             std::to_string(x.dims[2 + i]) + " + 2 * " + std::to_string(conv.pad[i]) + ")";
      return CUDNN_STATUS_BAD_PARAM;
    }
  }
  if (nb != 4 && nb != 5) {
    *why = "the tensors have " + std::to_string(nb) + " dims; convolutions take 4 or 5";
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  for (int i = 0; i < conv.spatial; ++i) {
    if (y.dims[2 + i] != want[i]) {
      *why = std::string(yn) + " " + DimsStr(p->y.dims, nb) + ": spatial dim " + std::to_string(i) + " is " +
             std::to_string(y.dims[2 + i]) + ", cudnnGetConvolutionNdForwardOutputDim gives " +
             std::to_string(want[i]);
      return fwd ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM;
    }
    p->in[lead + i] = x.dims[2 + i];
    p->k[lead + i] = w.dims[2 + i];
    p->out[lead + i] = y.dims[2 + i];
    p->pad[lead + i] = conv.pad[i];
    p->str[lead + i] = conv.stride[i];
    p->dil[lead + i] = conv.dilation[i];
  }
  p->flip = conv.mode == CUDNN_CONVOLUTION;
  const cudnnDataType_t d = x.dtype, c = conv.compute;
  if (int8) {
    // cudnnConvolutionForward(): the int8 configurations' layout and channel rules.
    if (!fwd) {
      *why = "INT8_EXT_CONFIG backward data is not a documented configuration";
      return CUDNN_STATUS_NOT_SUPPORTED;
    }
    const auto nhwc = [](const View& v) {
      return v.nb == 4 && v.strides[1] == 1 && v.strides[3] == v.dims[1] && v.strides[2] == v.dims[3] * v.dims[1] &&
             v.strides[0] == v.dims[2] * v.dims[3] * v.dims[1];
    };
    if (nb != 4 || !nhwc(p->x) || !nhwc(p->y) || w.format != CUDNN_TENSOR_NHWC) {
      *why = "INT8_EXT_CONFIG takes 4-D packed NHWC x and y and an NHWC filter, found " + p->x.Describe() + ", " +
             p->y.Describe() + (w.format == CUDNN_TENSOR_NHWC ? "" : ", an NCHW filter");
      return CUDNN_STATUS_NOT_SUPPORTED;
    }
    if (p->C % 4 != 0 || p->K % 4 != 0) {
      *why = "INT8_EXT_CONFIG needs input and output channels that are multiples of 4, found " +
             std::to_string(p->C) + " and " + std::to_string(p->K);
      return CUDNN_STATUS_NOT_SUPPORTED;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  const bool ok = (d == CUDNN_DATA_FLOAT && c == CUDNN_DATA_FLOAT) ||     // FLOAT_CONFIG
                  (d == CUDNN_DATA_HALF && c == CUDNN_DATA_FLOAT) ||      // PSEUDO_HALF_CONFIG
                  (d == CUDNN_DATA_HALF && c == CUDNN_DATA_HALF) ||       // TRUE_HALF_CONFIG
                  (d == CUDNN_DATA_BFLOAT16 && c == CUDNN_DATA_FLOAT);    // PSEUDO_BFLOAT16_CONFIG
  if (!ok) {
    *why = Config(d, c) +
           " is not a configuration the emulation runs (FLOAT_CONFIG, PSEUDO_HALF_CONFIG, TRUE_HALF_CONFIG, "
           "PSEUDO_BFLOAT16_CONFIG)";
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  return CUDNN_STATUS_SUCCESS;
}

// Workspace bytes of an emulated algorithm; false when the emulation does not offer it.
bool FwdWorkspace(cudnnConvolutionFwdAlgo_t algo, const Problem& p, size_t* bytes) {
  if (p.int8 && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) return false;
  switch (algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      *bytes = sizeof(int32_t) * static_cast<size_t>(p.Cg * p.Taps());  // precomputed offsets
      return true;
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: *bytes = 0; return true;
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      *bytes = sizeof(float) * static_cast<size_t>(p.C * p.Taps() * p.Outs());  // im2col of one image
      return true;
    default: return false;
  }
}

bool BwdWorkspace(cudnnConvolutionBwdDataAlgo_t algo, const Problem& p, size_t* bytes) {
  switch (algo) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      *bytes = sizeof(int32_t) * static_cast<size_t>(p.Cg * p.Taps());
      return true;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: *bytes = 0; return true;
    default: return false;
  }
}

// y[n, k, o] = sum over c in k's group and taps t of x[n, g * Cg + c, o * stride - pad + t * dil]
// * w[k, c, t (mirrored for CUDNN_CONVOLUTION)], zero outside x; float accumulation, each output
// summing over c, then the taps in row-major order. The innermost loop runs along an output row
// (the same order per element, so the same sums), which the host compiler vectorises.
std::vector<float> ConvForward(const Problem& p, const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> y(static_cast<size_t>(p.N * p.K * p.Outs()), 0.0f);
  const int64_t plane = p.in[0] * p.in[1] * p.in[2], taps = p.Taps();
  const int64_t s2 = p.str[2];
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t k = 0; k < p.K; ++k) {
      const int64_t g = k / p.Kg;
      float* yk = y.data() + (n * p.K + k) * p.Outs();
      for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
        for (int64_t o1 = 0; o1 < p.out[1]; ++o1) {
          float* yrow = yk + (o0 * p.out[1] + o1) * p.out[2];
          for (int64_t c = 0; c < p.Cg; ++c) {
            const float* xp = x.data() + (n * p.C + g * p.Cg + c) * plane;
            const float* wp = w.data() + (k * p.Cg + c) * taps;
            for (int64_t t0 = 0; t0 < p.k[0]; ++t0) {
              const int64_t i0 = o0 * p.str[0] - p.pad[0] + t0 * p.dil[0];
              if (i0 < 0 || i0 >= p.in[0]) continue;
              const int64_t w0 = p.flip ? p.k[0] - 1 - t0 : t0;
              for (int64_t t1 = 0; t1 < p.k[1]; ++t1) {
                const int64_t i1 = o1 * p.str[1] - p.pad[1] + t1 * p.dil[1];
                if (i1 < 0 || i1 >= p.in[1]) continue;
                const int64_t w1 = p.flip ? p.k[1] - 1 - t1 : t1;
                const float* xrow = xp + (i0 * p.in[1] + i1) * p.in[2];
                for (int64_t t2 = 0; t2 < p.k[2]; ++t2) {
                  const int64_t w2 = p.flip ? p.k[2] - 1 - t2 : t2;
                  const float wv = wp[(w0 * p.k[1] + w1) * p.k[2] + w2];
                  // The outputs o2 whose input column o2 * s2 + off lies in [0, in[2]).
                  const int64_t off = t2 * p.dil[2] - p.pad[2];
                  const int64_t lo = off >= 0 ? 0 : (-off + s2 - 1) / s2;
                  const int64_t hi = std::min(p.out[2], off >= p.in[2] ? 0 : (p.in[2] - 1 - off) / s2 + 1);
                  for (int64_t o2 = lo; o2 < hi; ++o2) yrow[o2] += xrow[o2 * s2 + off] * wv;
                }
              }
            }
          }
        }
    }
  }
  return y;
}

// The adjoint of ConvForward with respect to x: each dy element scatters dy * w onto the x
// positions it was computed from.
std::vector<float> ConvBackwardData(const Problem& p, const std::vector<float>& dy, const std::vector<float>& w) {
  std::vector<float> dx(static_cast<size_t>(p.N * p.C * p.in[0] * p.in[1] * p.in[2]), 0.0f);
  const int64_t plane = p.in[0] * p.in[1] * p.in[2], taps = p.Taps();
  size_t yo = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    for (int64_t k = 0; k < p.K; ++k) {
      const int64_t g = k / p.Kg;
      for (int64_t o0 = 0; o0 < p.out[0]; ++o0)
        for (int64_t o1 = 0; o1 < p.out[1]; ++o1)
          for (int64_t o2 = 0; o2 < p.out[2]; ++o2) {
            const float v = dy[yo++];
            for (int64_t c = 0; c < p.Cg; ++c) {
              float* xp = dx.data() + (n * p.C + g * p.Cg + c) * plane;
              const float* wp = w.data() + (k * p.Cg + c) * taps;
              for (int64_t t0 = 0; t0 < p.k[0]; ++t0) {
                const int64_t i0 = o0 * p.str[0] - p.pad[0] + t0 * p.dil[0];
                if (i0 < 0 || i0 >= p.in[0]) continue;
                const int64_t w0 = p.flip ? p.k[0] - 1 - t0 : t0;
                for (int64_t t1 = 0; t1 < p.k[1]; ++t1) {
                  const int64_t i1 = o1 * p.str[1] - p.pad[1] + t1 * p.dil[1];
                  if (i1 < 0 || i1 >= p.in[1]) continue;
                  const int64_t w1 = p.flip ? p.k[1] - 1 - t1 : t1;
                  for (int64_t t2 = 0; t2 < p.k[2]; ++t2) {
                    const int64_t i2 = o2 * p.str[2] - p.pad[2] + t2 * p.dil[2];
                    if (i2 < 0 || i2 >= p.in[2]) continue;
                    const int64_t w2 = p.flip ? p.k[2] - 1 - t2 : t2;
                    xp[(i0 * p.in[1] + i1) * p.in[2] + i2] += v * wp[(w0 * p.k[1] + w1) * p.k[2] + w2];
                  }
                }
              }
            }
          }
    }
  }
  return dx;
}

cudnnStatus_t NeedProblem(std::string_view call, const cudnnTensorStruct* x, const cudnnFilterStruct* w,
                          const cudnnConvolutionStruct* conv, const cudnnTensorStruct* y, Direction dir,
                          Problem* p) {
  std::string why;
  const cudnnStatus_t st = Analyze(*x, *w, *conv, *y, dir, p, &why);
  return st == CUDNN_STATUS_SUCCESS ? st : Fail(call, st, why);
}

// The workspace argument of a compute call: at least `need` bytes, device memory over the size
// the caller declares. *host is nullptr when no workspace is needed.
cudnnStatus_t NeedWorkspace(std::string_view call, void* workSpace, size_t bytes, size_t need, const char* algo,
                            void** host) {
  *host = nullptr;
  if (bytes < need) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM,
                std::string("workSpaceSizeInBytes is ") + std::to_string(bytes) + "; " + algo + " needs " +
                    std::to_string(need));
  }
  if (bytes == 0) return CUDNN_STATUS_SUCCESS;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  *host = DeviceBytes(call, "workSpace", workSpace, bytes, "the workspace of " + std::to_string(bytes) + " bytes", &st);
  return *host ? CUDNN_STATUS_SUCCESS : st;
}

const char* FwdAlgoName(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "CUDNN_CONVOLUTION_FWD_ALGO_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "CUDNN_CONVOLUTION_FWD_ALGO_FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED";
    default: return nullptr;
  }
}

const char* BwdAlgoName(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED";
    default: return nullptr;
  }
}

// Forward algorithms in the emulation's "expected performance" order, then the unsupported ones.
constexpr cudnnConvolutionFwdAlgo_t kFwdOrder[] = {
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
    CUDNN_CONVOLUTION_FWD_ALGO_GEMM,                  CUDNN_CONVOLUTION_FWD_ALGO_DIRECT,
    CUDNN_CONVOLUTION_FWD_ALGO_FFT,                   CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
    CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,              CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED};
constexpr cudnnConvolutionBwdDataAlgo_t kBwdOrder[] = {
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,   CUDNN_CONVOLUTION_BWD_DATA_ALGO_0,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED};

}  // namespace

// cuDNN API reference, cudnn_cnn library: cudnnCnnVersionCheck().
cudnnStatus_t cudnnCnnVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

// ---- Convolution descriptors ----------------------------------------------------------------

// cuDNN API reference, cudnn_cnn library: cudnnCreateConvolutionDescriptor(). Group count 1 and
// CUDNN_DEFAULT_MATH until set.
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* convDesc) {
  if (convDesc == nullptr) {
    return Fail("cudnnCreateConvolutionDescriptor", CUDNN_STATUS_BAD_PARAM, "convDesc (the output pointer) is NULL");
  }
  *convDesc = new cudnnConvolutionStruct();
  Register(*convDesc, Kind::kConvolution);
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnDestroyConvolutionDescriptor().
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  if (convDesc == nullptr) return Ok();
  if (!IsLive(convDesc, Kind::kConvolution)) {
    return Fail("cudnnDestroyConvolutionDescriptor", CUDNN_STATUS_BAD_PARAM,
                "convDesc is not a live convolution descriptor (destroyed twice?)");
  }
  Unregister(convDesc);
  delete convDesc;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnSetConvolutionNdDescriptor(). arrayLength
// spatial dims (NOT_SUPPORTED above CUDNN_DIM_MAX - 2); BAD_PARAM for a negative pad, a stride
// or dilation below 1, or a mode / compute type that is not an enumerant. The group count and
// math type are kept.
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t convDesc, int arrayLength,
                                              const int padA[], const int filterStrideA[], const int dilationA[],
                                              cudnnConvolutionMode_t mode, cudnnDataType_t computeType) {
  constexpr std::string_view kCall = "cudnnSetConvolutionNdDescriptor";
  if (!IsLive(convDesc, Kind::kConvolution)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "convDesc is NULL or not a live convolution descriptor");
  }
  if (arrayLength > CUDNN_DIM_MAX - 2) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "arrayLength " + std::to_string(arrayLength) + " exceeds CUDNN_DIM_MAX - 2 = " +
                    std::to_string(CUDNN_DIM_MAX - 2));
  }
  if (arrayLength < 1) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "arrayLength " + std::to_string(arrayLength) + " is below 1");
  }
  KILN_DNN_TRY(NeedHost(kCall, "padA", padA));
  KILN_DNN_TRY(NeedHost(kCall, "filterStrideA", filterStrideA));
  KILN_DNN_TRY(NeedHost(kCall, "dilationA", dilationA));
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "mode " + std::to_string(static_cast<int>(mode)) + " is not a cudnnConvolutionMode_t value");
  }
  const int ct = static_cast<int>(computeType);
  if (ct < 0 || ct > static_cast<int>(CUDNN_DATA_COMPLEX_FP64)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "computeType " + std::to_string(ct) + " is not a cudnnDataType_t value");
  }
  for (int i = 0; i < arrayLength; ++i) {
    const std::string at = "[" + std::to_string(i) + "] is ";
    if (padA[i] < 0) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "padA" + at + std::to_string(padA[i]));
    if (filterStrideA[i] < 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "filterStrideA" + at + std::to_string(filterStrideA[i]));
    }
    if (dilationA[i] < 1) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "dilationA" + at + std::to_string(dilationA[i]));
  }
  convDesc->set = true;
  convDesc->spatial = arrayLength;
  for (int i = 0; i < arrayLength; ++i) {
    convDesc->pad[i] = padA[i];
    convDesc->stride[i] = filterStrideA[i];
    convDesc->dilation[i] = dilationA[i];
  }
  convDesc->mode = mode;
  convDesc->compute = computeType;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnSetConvolutionGroupCount(). BAD_PARAM below 1.
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc, int groupCount) {
  constexpr std::string_view kCall = "cudnnSetConvolutionGroupCount";
  if (!IsLive(convDesc, Kind::kConvolution)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "convDesc is NULL or not a live convolution descriptor");
  }
  if (groupCount < 1) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "groupCount " + std::to_string(groupCount) + " is below 1");
  convDesc->groups = groupCount;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnSetConvolutionMathType(). The emulation computes
// in float whatever the math type; it is recorded and reported back by the algorithm queries.
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
  constexpr std::string_view kCall = "cudnnSetConvolutionMathType";
  if (!IsLive(convDesc, Kind::kConvolution)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "convDesc is NULL or not a live convolution descriptor");
  }
  const int m = static_cast<int>(mathType);
  if (m < CUDNN_DEFAULT_MATH || m > CUDNN_FMA_MATH) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "mathType " + std::to_string(m) + " is not a cudnnMathType_t value");
  }
  convDesc->math = mathType;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnGetConvolutionNdForwardOutputDim(): [n, K,
// 1 + (in + 2 * pad - ((filter - 1) * dilation + 1)) / stride ...]. BAD_PARAM when the filter's
// or the descriptor's dims do not match the input's, the filter's channels times the group count
// are not the input's, the dilated filter exceeds the padded input, or nbDims is negative or
// above the input's dims (fewer writes the leading ones).
cudnnStatus_t cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                    const cudnnTensorDescriptor_t inputTensorDesc,
                                                    const cudnnFilterDescriptor_t filterDesc, int nbDims,
                                                    int tensorOuputDimA[]) {
  constexpr std::string_view kCall = "cudnnGetConvolutionNdForwardOutputDim";
  KILN_DNN_TRY(NeedConvolution(kCall, "convDesc", convDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "inputTensorDesc", inputTensorDesc));
  KILN_DNN_TRY(NeedFilter(kCall, "filterDesc", filterDesc));
  KILN_DNN_TRY(NeedHost(kCall, "tensorOuputDimA", tensorOuputDimA));
  const cudnnTensorStruct& x = *inputTensorDesc;
  const cudnnFilterStruct& w = *filterDesc;
  const cudnnConvolutionStruct& c = *convDesc;
  if (w.nb != x.nb) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "filterDesc has " + std::to_string(w.nb) + " dims, inputTensorDesc " + std::to_string(x.nb));
  }
  if (c.spatial != x.nb - 2) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "convDesc has " + std::to_string(c.spatial) + " spatial dims, inputTensorDesc " + std::to_string(x.nb) +
                    " dims (expected arrayLength + 2)");
  }
  if (w.dims[1] * c.groups != x.dims[1]) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "filterDesc " + DimsStr(w.dims, w.nb) + " with " + std::to_string(c.groups) + " group(s) takes " +
                    std::to_string(w.dims[1] * c.groups) + " input channels, inputTensorDesc has " +
                    std::to_string(x.dims[1]));
  }
  if (nbDims < 0 || nbDims > x.nb) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "nbDims " + std::to_string(nbDims) + " is outside [0, " + std::to_string(x.nb) + "]");
  }
  int64_t out[CUDNN_DIM_MAX] = {x.dims[0], w.dims[0]};
  for (int i = 0; i < c.spatial; ++i) {
    out[2 + i] = OutDim(x.dims[2 + i], c.pad[i], w.dims[2 + i], c.stride[i], c.dilation[i]);
    if (out[2 + i] < 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  "the filter's spatial dim " + std::to_string(i) + " (" + std::to_string(w.dims[2 + i]) +
                      ", dilation " + std::to_string(c.dilation[i]) + ") exceeds the padded input (" +
                      std::to_string(x.dims[2 + i]) + " + 2 * " + std::to_string(c.pad[i]) + ")");
    }
  }
  for (int i = 0; i < nbDims; ++i) tensorOuputDimA[i] = static_cast<int>(out[i]);
  return Ok();
}

// ---- Forward ----------------------------------------------------------------------------------

// cuDNN API reference, cudnn_cnn library: cudnnGetConvolutionForwardAlgorithmMaxCount().
cudnnStatus_t cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  constexpr std::string_view kCall = "cudnnGetConvolutionForwardAlgorithmMaxCount";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedHost(kCall, "count", count));
  *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnGetConvolutionForwardAlgorithm_v7(). Every
// algorithm, best expected first, each with its status, workspace (memory), determinism and the
// descriptor's math type; time is -1 (a heuristic, nothing is measured). A configuration the
// emulation cannot run gives CUDNN_STATUS_NOT_SUPPORTED in every entry; malformed descriptors
// give BAD_PARAM, as does requestedAlgoCount below 1.
cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
                                                     const cudnnFilterDescriptor_t filterDesc,
                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                     const cudnnTensorDescriptor_t destDesc,
                                                     const int requestedAlgoCount, int* returnedAlgoCount,
                                                     cudnnConvolutionFwdAlgoPerf_t* perfResults) {
  constexpr std::string_view kCall = "cudnnGetConvolutionForwardAlgorithm_v7";
  kiln::emulated_cuda::CountLibraryPlan();
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedTensor(kCall, "srcDesc", srcDesc));
  KILN_DNN_TRY(NeedFilter(kCall, "filterDesc", filterDesc));
  KILN_DNN_TRY(NeedConvolution(kCall, "convDesc", convDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "destDesc", destDesc));
  KILN_DNN_TRY(NeedHost(kCall, "returnedAlgoCount", returnedAlgoCount));
  KILN_DNN_TRY(NeedHost(kCall, "perfResults", perfResults));
  if (requestedAlgoCount < 1) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "requestedAlgoCount " + std::to_string(requestedAlgoCount) + " is below 1");
  }
  Problem p;
  std::string why;
  const cudnnStatus_t st = Analyze(*srcDesc, *filterDesc, *convDesc, *destDesc, Direction::kForward, &p, &why);
  if (st == CUDNN_STATUS_BAD_PARAM) return Fail(kCall, st, why);
  if (st != CUDNN_STATUS_SUCCESS) {
    // The query succeeds with every entry NOT_SUPPORTED; say why for the test log.
    kiln::emulated_cuda::Diagnose(kCall, "every algorithm is CUDNN_STATUS_NOT_SUPPORTED: " + why);
  }
  const int n = std::min<int>(requestedAlgoCount, CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
  for (int i = 0; i < n; ++i) {
    cudnnConvolutionFwdAlgoPerf_t r;
    std::memset(&r, 0, sizeof(r));
    r.algo = kFwdOrder[i];
    size_t bytes = 0;
    const bool runs = st == CUDNN_STATUS_SUCCESS && FwdWorkspace(r.algo, p, &bytes);
    r.status = runs ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    r.time = -1.0f;
    r.memory = runs ? bytes : 0;
    r.determinism = CUDNN_DETERMINISTIC;
    r.mathType = convDesc->math;
    perfResults[i] = r;
  }
  *returnedAlgoCount = n;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnGetConvolutionForwardWorkspaceSize(). BAD_PARAM
// for malformed descriptors or an algo that is not an enumerant; NOT_SUPPORTED for a
// configuration or algorithm the emulation does not run.
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                      const cudnnFilterDescriptor_t wDesc,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo,
                                                      size_t* sizeInBytes) {
  constexpr std::string_view kCall = "cudnnGetConvolutionForwardWorkspaceSize";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedTensor(kCall, "xDesc", xDesc));
  KILN_DNN_TRY(NeedFilter(kCall, "wDesc", wDesc));
  KILN_DNN_TRY(NeedConvolution(kCall, "convDesc", convDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "yDesc", yDesc));
  KILN_DNN_TRY(NeedHost(kCall, "sizeInBytes", sizeInBytes));
  const char* name = FwdAlgoName(algo);
  if (name == nullptr) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "algo " + std::to_string(static_cast<int>(algo)) + " is not a cudnnConvolutionFwdAlgo_t value");
  }
  Problem p;
  KILN_DNN_TRY(NeedProblem(kCall, xDesc, wDesc, convDesc, yDesc, Direction::kForward, &p));
  if (!FwdWorkspace(algo, p, sizeInBytes)) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, std::string(name) + " is not available for this convolution");
  }
  return Ok();
}

namespace {

// The checks cudnnConvolutionForward and cudnnConvolutionBiasActivationForward share, up to the
// device pointers: the problem, the algorithm, the workspace.
cudnnStatus_t ForwardCommon(std::string_view call, cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                            const cudnnFilterDescriptor_t wDesc, const cudnnConvolutionDescriptor_t convDesc,
                            const cudnnTensorDescriptor_t yDesc, cudnnConvolutionFwdAlgo_t algo, Problem* p,
                            size_t* need) {
  KILN_DNN_TRY(NeedHandle(call, handle));
  KILN_DNN_TRY(NeedTensor(call, "xDesc", xDesc));
  KILN_DNN_TRY(NeedFilter(call, "wDesc", wDesc));
  KILN_DNN_TRY(NeedConvolution(call, "convDesc", convDesc));
  KILN_DNN_TRY(NeedTensor(call, "yDesc", yDesc));
  if (FwdAlgoName(algo) == nullptr) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM,
                "algo " + std::to_string(static_cast<int>(algo)) + " is not a cudnnConvolutionFwdAlgo_t value");
  }
  KILN_DNN_TRY(NeedProblem(call, xDesc, wDesc, convDesc, yDesc, Direction::kForward, p));
  if (!FwdWorkspace(algo, *p, need)) {
    return Fail(call, CUDNN_STATUS_NOT_SUPPORTED,
                std::string(FwdAlgoName(algo)) + " does not support this convolution (the emulation runs "
                "IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM and GEMM; int8, IMPLICIT_PRECOMP_GEMM alone)");
  }
  return CUDNN_STATUS_SUCCESS;
}

void Clobber(void* workspace, size_t bytes) {
  if (workspace != nullptr && bytes > 0) std::memset(workspace, kWorkspacePattern, bytes);
}

}  // namespace

// cuDNN API reference, cudnn_cnn library: cudnnConvolutionForward(): y = alpha * conv(x, w) +
// beta * y, conv a cross-correlation (CUDNN_CROSS_CORRELATION) or a convolution with the filter
// mirrored (CUDNN_CONVOLUTION), with zero padding, strides, dilations and groups; alpha and beta
// are host floats (cuDNN "Scaling Parameters" for float, half and bfloat16 data). Accumulates in
// float and rounds y once.
cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t xDesc,
                                      const void* x, const cudnnFilterDescriptor_t wDesc, const void* w,
                                      const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
                                      void* workSpace, size_t workSpaceSizeInBytes, const void* beta,
                                      const cudnnTensorDescriptor_t yDesc, void* y) {
  constexpr std::string_view kCall = "cudnnConvolutionForward";
  Problem p;
  size_t need = 0;
  KILN_DNN_TRY(ForwardCommon(kCall, handle, xDesc, wDesc, convDesc, yDesc, algo, &p, &need));
  KILN_DNN_TRY(NeedHost(kCall, "alpha", alpha));
  KILN_DNN_TRY(NeedHost(kCall, "beta", beta));
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const void* xh = DeviceTensor(kCall, "x", x, p.x, &st);
  if (!xh) return st;
  const void* wh = DeviceBytes(kCall, "w", w, p.w.ExtentBytes(), "the filter " + p.w.Describe(), &st);
  if (!wh) return st;
  void* yh = DeviceTensor(kCall, "y", y, p.y, &st);
  if (!yh) return st;
  void* wsh = nullptr;
  KILN_DNN_TRY(NeedWorkspace(kCall, workSpace, workSpaceSizeInBytes, need, FwdAlgoName(algo), &wsh));
  if (kiln::emulated_cuda::FaultDue("dnn-not-supported")) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "injected fault 'dnn-not-supported'");
  }
  const float a = Scale(alpha), b = Scale(beta);
  return Launch(kCall, handle, [=] {
    const std::vector<float> r = ConvForward(p, Gather(p.x, xh), Gather(p.w, wh));
    Blend(p.y, yh, r, a, b);
    Clobber(wsh, need);
  });
}

// cuDNN API reference, cudnn_cnn library: cudnnConvolutionBiasActivationForward():
// y = act(alpha1 * conv(x, w) + alpha2 * z + bias), bias one value per output channel
// ([1, K, 1, 1(, 1)]), z of y's dims and type (z may be y; alpha2 == 0 does not read z, as for
// any scaling parameter). Refused as documented: NOT_SUPPORTED for an activation other than
// CUDNN_ACTIVATION_RELU or CUDNN_ACTIVATION_IDENTITY, a reluNanOpt other than
// CUDNN_NOT_PROPAGATE_NAN, IDENTITY with an algorithm other than
// CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, a bias whose second stride is not 1 or whose
// type is not y's, and data-type configurations outside FLOAT_CONFIG, PSEUDO_HALF_CONFIG and
// TRUE_HALF_CONFIG (the fused call documents no bfloat16 configuration); BAD_PARAM for NULL
// arguments and z or bias descriptors of the wrong dims.
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void* alpha1, const cudnnTensorDescriptor_t xDesc, const void* x,
    const cudnnFilterDescriptor_t wDesc, const void* w, const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionFwdAlgo_t algo, void* workSpace, size_t workSpaceSizeInBytes, const void* alpha2,
    const cudnnTensorDescriptor_t zDesc, const void* z, const cudnnTensorDescriptor_t biasDesc, const void* bias,
    const cudnnActivationDescriptor_t activationDesc, const cudnnTensorDescriptor_t yDesc, void* y) {
  constexpr std::string_view kCall = "cudnnConvolutionBiasActivationForward";
  Problem p;
  size_t need = 0;
  KILN_DNN_TRY(ForwardCommon(kCall, handle, xDesc, wDesc, convDesc, yDesc, algo, &p, &need));
  KILN_DNN_TRY(NeedTensor(kCall, "zDesc", zDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "biasDesc", biasDesc));
  KILN_DNN_TRY(NeedActivation(kCall, "activationDesc", activationDesc));
  KILN_DNN_TRY(NeedHost(kCall, "alpha1", alpha1));
  KILN_DNN_TRY(NeedHost(kCall, "alpha2", alpha2));
  const View zv = ViewOf(*zDesc), bv = ViewOf(*biasDesc);
  const int nb = p.y.nb;
  bool z_ok = zv.nb == nb && zv.dtype == p.y.dtype;
  for (int i = 0; z_ok && i < nb; ++i) z_ok = zv.dims[i] == p.y.dims[i];
  if (!z_ok) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "zDesc " + zv.Describe() + " does not match yDesc " + p.y.Describe() + " in dims and type");
  }
  bool bias_ok = bv.nb == nb && bv.dims[1] == p.K;
  for (int i = 0; bias_ok && i < nb; ++i) bias_ok = i == 1 || bv.dims[i] == 1;
  if (!bias_ok) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "biasDesc " + DimsStr(bv.dims, bv.nb) + " must be [1, " + std::to_string(p.K) +
                    ", 1...] with yDesc's " + std::to_string(nb) + " dims");
  }
  const cudnnActivationStruct act = *activationDesc;
  if (act.mode != CUDNN_ACTIVATION_RELU && act.mode != CUDNN_ACTIVATION_IDENTITY) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "activation mode " + std::to_string(static_cast<int>(act.mode)) +
                    ": only CUDNN_ACTIVATION_RELU and CUDNN_ACTIVATION_IDENTITY are supported");
  }
  if (act.nan != CUDNN_NOT_PROPAGATE_NAN) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "the activation descriptor's reluNanOpt is CUDNN_PROPAGATE_NAN; this call requires "
                "CUDNN_NOT_PROPAGATE_NAN");
  }
  if (act.mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                std::string("CUDNN_ACTIVATION_IDENTITY requires CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "
                            "algo is ") +
                    FwdAlgoName(algo));
  }
  if (bv.strides[1] != 1) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "biasDesc's second stride is " + std::to_string(bv.strides[1]) + " (must be 1)");
  }
  if (bv.dtype != p.y.dtype) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "biasDesc is " + DTypeName(bv.dtype) + ", yDesc " + DTypeName(p.y.dtype) + " (they must match)");
  }
  if (p.y.dtype == CUDNN_DATA_BFLOAT16) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                Config(p.y.dtype, p.conv.compute) +
                    ": the fused call supports FLOAT_CONFIG, PSEUDO_HALF_CONFIG and TRUE_HALF_CONFIG only");
  }
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const void* xh = DeviceTensor(kCall, "x", x, p.x, &st);
  if (!xh) return st;
  const void* wh = DeviceBytes(kCall, "w", w, p.w.ExtentBytes(), "the filter " + p.w.Describe(), &st);
  if (!wh) return st;
  const void* zh = DeviceTensor(kCall, "z", z, zv, &st);
  if (!zh) return st;
  const void* bh = DeviceTensor(kCall, "bias", bias, bv, &st);
  if (!bh) return st;
  void* yh = DeviceTensor(kCall, "y", y, p.y, &st);
  if (!yh) return st;
  void* wsh = nullptr;
  KILN_DNN_TRY(NeedWorkspace(kCall, workSpace, workSpaceSizeInBytes, need, FwdAlgoName(algo), &wsh));
  if (kiln::emulated_cuda::FaultDue("dnn-not-supported")) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "injected fault 'dnn-not-supported'");
  }
  const float a1 = Scale(alpha1), a2 = Scale(alpha2);
  return Launch(kCall, handle, [=] {
    std::vector<float> r = ConvForward(p, Gather(p.x, xh), Gather(p.w, wh));
    const std::vector<float> zs = a2 != 0.0f ? Gather(zv, zh) : std::vector<float>();
    const std::vector<float> bs = Gather(bv, bh);
    const int64_t outs = p.Outs();
    for (size_t i = 0; i < r.size(); ++i) {
      const int64_t k = (static_cast<int64_t>(i) / outs) % p.K;
      float v = a1 * r[i];
      if (a2 != 0.0f) v += a2 * zs[i];
      v += bs[static_cast<size_t>(k)];
      r[i] = Activate(act, v);
    }
    Blend(p.y, yh, r, 1.0f, 0.0f);
    Clobber(wsh, need);
  });
}

// ---- Backward data ----------------------------------------------------------------------------

// cuDNN API reference, cudnn_cnn library: cudnnGetConvolutionBackwardDataAlgorithmMaxCount().
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle, int* count) {
  constexpr std::string_view kCall = "cudnnGetConvolutionBackwardDataAlgorithmMaxCount";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedHost(kCall, "count", count));
  *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnGetConvolutionBackwardDataAlgorithm_v7(): as the
// forward query, for the convolution dxDesc (gradDesc) * filter -> dyDesc (diffDesc). ALGO_0 is
// reported non-deterministic (as cudnnConvolutionBwdDataAlgo_t documents), the others
// deterministic.
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle,
                                                          const cudnnFilterDescriptor_t filterDesc,
                                                          const cudnnTensorDescriptor_t diffDesc,
                                                          const cudnnConvolutionDescriptor_t convDesc,
                                                          const cudnnTensorDescriptor_t gradDesc,
                                                          const int requestedAlgoCount, int* returnedAlgoCount,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perfResults) {
  constexpr std::string_view kCall = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  kiln::emulated_cuda::CountLibraryPlan();
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedFilter(kCall, "filterDesc", filterDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "diffDesc", diffDesc));
  KILN_DNN_TRY(NeedConvolution(kCall, "convDesc", convDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "gradDesc", gradDesc));
  KILN_DNN_TRY(NeedHost(kCall, "returnedAlgoCount", returnedAlgoCount));
  KILN_DNN_TRY(NeedHost(kCall, "perfResults", perfResults));
  if (requestedAlgoCount < 1) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "requestedAlgoCount " + std::to_string(requestedAlgoCount) + " is below 1");
  }
  Problem p;
  std::string why;
  const cudnnStatus_t st = Analyze(*gradDesc, *filterDesc, *convDesc, *diffDesc, Direction::kBackwardData, &p, &why);
  if (st == CUDNN_STATUS_BAD_PARAM) return Fail(kCall, st, why);
  if (st != CUDNN_STATUS_SUCCESS) {
    // The query succeeds with every entry NOT_SUPPORTED; say why for the test log.
    kiln::emulated_cuda::Diagnose(kCall, "every algorithm is CUDNN_STATUS_NOT_SUPPORTED: " + why);
  }
  const int n = std::min<int>(requestedAlgoCount, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
  for (int i = 0; i < n; ++i) {
    cudnnConvolutionBwdDataAlgoPerf_t r;
    std::memset(&r, 0, sizeof(r));
    r.algo = kBwdOrder[i];
    size_t bytes = 0;
    const bool runs = st == CUDNN_STATUS_SUCCESS && BwdWorkspace(r.algo, p, &bytes);
    r.status = runs ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    r.time = -1.0f;
    r.memory = runs ? bytes : 0;
    r.determinism = r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
    r.mathType = convDesc->math;
    perfResults[i] = r;
  }
  *returnedAlgoCount = n;
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnGetConvolutionBackwardDataWorkspaceSize().
cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle, const cudnnFilterDescriptor_t wDesc,
                                                           const cudnnTensorDescriptor_t dyDesc,
                                                           const cudnnConvolutionDescriptor_t convDesc,
                                                           const cudnnTensorDescriptor_t dxDesc,
                                                           cudnnConvolutionBwdDataAlgo_t algo, size_t* sizeInBytes) {
  constexpr std::string_view kCall = "cudnnGetConvolutionBackwardDataWorkspaceSize";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedFilter(kCall, "wDesc", wDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "dyDesc", dyDesc));
  KILN_DNN_TRY(NeedConvolution(kCall, "convDesc", convDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "dxDesc", dxDesc));
  KILN_DNN_TRY(NeedHost(kCall, "sizeInBytes", sizeInBytes));
  const char* name = BwdAlgoName(algo);
  if (name == nullptr) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "algo " + std::to_string(static_cast<int>(algo)) + " is not a cudnnConvolutionBwdDataAlgo_t value");
  }
  Problem p;
  KILN_DNN_TRY(NeedProblem(kCall, dxDesc, wDesc, convDesc, dyDesc, Direction::kBackwardData, &p));
  if (!BwdWorkspace(algo, p, sizeInBytes)) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, std::string(name) + " is not available for this convolution");
  }
  return Ok();
}

// cuDNN API reference, cudnn_cnn library: cudnnConvolutionBackwardData(): dx = alpha * (the
// gradient of the convolution dx -> dy with respect to its input, i.e. dy convolved with the
// transposed filter) + beta * dx. BAD_PARAM for mismatched dims, groups or types, or a dyDesc
// that is not the forward output of dxDesc; NOT_SUPPORTED for tensors that are not 4-D or 5-D,
// unsupported configurations and algorithms.
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t wDesc, const void* w,
                                           const cudnnTensorDescriptor_t dyDesc, const void* dy,
                                           const cudnnConvolutionDescriptor_t convDesc,
                                           cudnnConvolutionBwdDataAlgo_t algo, void* workSpace,
                                           size_t workSpaceSizeInBytes, const void* beta,
                                           const cudnnTensorDescriptor_t dxDesc, void* dx) {
  constexpr std::string_view kCall = "cudnnConvolutionBackwardData";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedFilter(kCall, "wDesc", wDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "dyDesc", dyDesc));
  KILN_DNN_TRY(NeedConvolution(kCall, "convDesc", convDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "dxDesc", dxDesc));
  KILN_DNN_TRY(NeedHost(kCall, "alpha", alpha));
  KILN_DNN_TRY(NeedHost(kCall, "beta", beta));
  const char* name = BwdAlgoName(algo);
  if (name == nullptr) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "algo " + std::to_string(static_cast<int>(algo)) + " is not a cudnnConvolutionBwdDataAlgo_t value");
  }
  Problem p;
  KILN_DNN_TRY(NeedProblem(kCall, dxDesc, wDesc, convDesc, dyDesc, Direction::kBackwardData, &p));
  size_t need = 0;
  if (!BwdWorkspace(algo, p, &need)) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                std::string(name) + " does not support this convolution (the emulation runs ALGO_0 and ALGO_1)");
  }
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const void* wh = DeviceBytes(kCall, "w", w, p.w.ExtentBytes(), "the filter " + p.w.Describe(), &st);
  if (!wh) return st;
  const void* dyh = DeviceTensor(kCall, "dy", dy, p.y, &st);
  if (!dyh) return st;
  void* dxh = DeviceTensor(kCall, "dx", dx, p.x, &st);
  if (!dxh) return st;
  void* wsh = nullptr;
  KILN_DNN_TRY(NeedWorkspace(kCall, workSpace, workSpaceSizeInBytes, need, name, &wsh));
  if (kiln::emulated_cuda::FaultDue("dnn-not-supported")) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "injected fault 'dnn-not-supported'");
  }
  const float a = Scale(alpha), b = Scale(beta);
  return Launch(kCall, handle, [=] {
    const std::vector<float> r = ConvBackwardData(p, Gather(p.y, dyh), Gather(p.w, wh));
    Blend(p.x, dxh, r, a, b);
    Clobber(wsh, need);
  });
}
