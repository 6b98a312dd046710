// Emulated cuDNN 9: the cudnn_ops library's legacy entry points Kiln uses: tensor, filter,
// activation and pooling descriptors; cudnnAddTensor, cudnnActivationForward and
// cudnnPoolingForward (reference loops in float, enqueued on the handle's stream).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/emulated_cuda/cudnn_internal.h"

using namespace kiln::emulated_cuda::dnn;  // NOLINT: the C entry points below are the API

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 31;  // "2 Giga-elements"

// A data type cudnnDataType_t defines: BAD_PARAM for any other value; NOT_SUPPORTED for the
// ones this emulation has no element size for (vectorised and sub-byte types).
cudnnStatus_t CheckDType(std::string_view call, cudnnDataType_t dtype) {
  const int v = static_cast<int>(dtype);
  if (v < 0 || v > static_cast<int>(CUDNN_DATA_COMPLEX_FP64)) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM, "dataType " + std::to_string(v) + " is not a cudnnDataType_t value");
  }
  if (ElemSize(dtype) == 0) {
    return Fail(call, CUDNN_STATUS_NOT_SUPPORTED,
                DTypeName(dtype) + " (a vectorised or sub-byte type) is not emulated");
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t NeedComputable(std::string_view call, const char* what, cudnnDataType_t dtype) {
  if (!Computable(dtype)) {
    return Fail(call, CUDNN_STATUS_NOT_SUPPORTED,
                std::string(what) + " is " + DTypeName(dtype) +
                    "; the emulated cuDNN computes CUDNN_DATA_FLOAT, CUDNN_DATA_HALF and CUDNN_DATA_BFLOAT16");
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CheckNan(std::string_view call, const char* what, cudnnNanPropagation_t nan) {
  if (nan != CUDNN_NOT_PROPAGATE_NAN && nan != CUDNN_PROPAGATE_NAN) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM,
                std::string(what) + " " + std::to_string(static_cast<int>(nan)) + " is not a cudnnNanPropagation_t value");
  }
  return CUDNN_STATUS_SUCCESS;
}

template <typename T>
cudnnStatus_t CreateObject(std::string_view call, T** out, Kind kind) {
  if (out == nullptr) return Fail(call, CUDNN_STATUS_BAD_PARAM, "the output pointer is NULL");
  *out = new T();
  Register(*out, kind);
  return Ok();
}

template <typename T>
cudnnStatus_t DestroyObject(std::string_view call, T* desc, Kind kind, const char* type) {
  // cuDNN accepts NULL here (nothing to destroy).
  if (desc == nullptr) return Ok();
  if (!IsLive(desc, kind)) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM, std::string("the ") + type + " is not live (destroyed twice?)");
  }
  Unregister(desc);
  delete desc;
  return Ok();
}

// The activation functions of cudnnActivationMode_t, in float.
float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

// cuDNN API reference, cudnn_ops library: cudnnOpsVersionCheck().
cudnnStatus_t cudnnOpsVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

// ---- Tensor descriptors ---------------------------------------------------------------------

// cuDNN API reference, cudnn_ops library: cudnnCreateTensorDescriptor().
cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* tensorDesc) {
  return CreateObject("cudnnCreateTensorDescriptor", tensorDesc, Kind::kTensor);
}

// cuDNN API reference, cudnn_ops library: cudnnDestroyTensorDescriptor().
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  return DestroyObject("cudnnDestroyTensorDescriptor", tensorDesc, Kind::kTensor, "tensor descriptor");
}

// cuDNN API reference, cudnn_ops library: cudnnSetTensorNdDescriptor(). BAD_PARAM for a dim
// below 1 or an invalid data type; NOT_SUPPORTED for nbDims outside [3, CUDNN_DIM_MAX] or more
// than 2 Giga-elements. Strides below 1 are refused (BAD_PARAM) as well: the emulation does not
// model overlapping or reversed layouts.
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnDataType_t dataType, int nbDims,
                                         const int dimA[], const int strideA[]) {
  constexpr std::string_view kCall = "cudnnSetTensorNdDescriptor";
  if (!IsLive(tensorDesc, Kind::kTensor)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "tensorDesc is NULL or not a live tensor descriptor");
  }
  KILN_DNN_TRY(CheckDType(kCall, dataType));
  if (nbDims < 3 || nbDims > CUDNN_DIM_MAX) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "nbDims " + std::to_string(nbDims) + " is outside [3, CUDNN_DIM_MAX = " +
                    std::to_string(CUDNN_DIM_MAX) + "]");
  }
  KILN_DNN_TRY(NeedHost(kCall, "dimA", dimA));
  KILN_DNN_TRY(NeedHost(kCall, "strideA", strideA));
  int64_t count = 1;
  for (int i = 0; i < nbDims; ++i) {
    if (dimA[i] < 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "dimA[" + std::to_string(i) + "] is " + std::to_string(dimA[i]) +
                                                     " (every dim must be positive)");
    }
    if (strideA[i] < 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  "strideA[" + std::to_string(i) + "] is " + std::to_string(strideA[i]) +
                      " (the emulation takes positive strides only)");
    }
    count *= dimA[i];
  }
  if (count >= kMaxElements) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                std::to_string(count) + " elements exceed the 2 Giga-element limit of a tensor descriptor");
  }
  cudnnTensorStruct t;
  t.set = true;
  t.dtype = dataType;
  t.nb = nbDims;
  for (int i = 0; i < nbDims; ++i) {
    t.dims[i] = dimA[i];
    t.strides[i] = strideA[i];
  }
  *tensorDesc = t;
  return Ok();
}

// cuDNN API reference, cudnn_ops library: cudnnSetTensor4dDescriptor(). Packed NCHW or NHWC
// strides; CUDNN_TENSOR_NCHW_VECT_C (vectorised int8 only) is not emulated.
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                         cudnnDataType_t dataType, int n, int c, int h, int w) {
  constexpr std::string_view kCall = "cudnnSetTensor4dDescriptor";
  if (!IsLive(tensorDesc, Kind::kTensor)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "tensorDesc is NULL or not a live tensor descriptor");
  }
  if (format == CUDNN_TENSOR_NCHW_VECT_C) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_TENSOR_NCHW_VECT_C is not emulated");
  }
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "format " + std::to_string(static_cast<int>(format)) + " is not a cudnnTensorFormat_t value");
  }
  KILN_DNN_TRY(CheckDType(kCall, dataType));
  const int dims[4] = {n, c, h, w};
  const char* names[4] = {"n", "c", "h", "w"};
  for (int i = 0; i < 4; ++i) {
    if (dims[i] < 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  std::string(names[i]) + " is " + std::to_string(dims[i]) + " (must be positive)");
    }
  }
  const int64_t count = int64_t{n} * c * h * w;
  if (count >= kMaxElements) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                std::to_string(count) + " elements exceed the 2 Giga-element limit of a tensor descriptor");
  }
  cudnnTensorStruct t;
  t.set = true;
  t.dtype = dataType;
  t.nb = 4;
  for (int i = 0; i < 4; ++i) t.dims[i] = dims[i];
  if (format == CUDNN_TENSOR_NCHW) {
    t.strides[3] = 1;
    t.strides[2] = w;
    t.strides[1] = int64_t{h} * w;
    t.strides[0] = int64_t{c} * h * w;
  } else {
    t.strides[1] = 1;
    t.strides[3] = c;
    t.strides[2] = int64_t{w} * c;
    t.strides[0] = int64_t{h} * w * c;
  }
  *tensorDesc = t;
  return Ok();
}

// ---- Filter descriptors ---------------------------------------------------------------------

// cuDNN API reference, cudnn_ops library: cudnnCreateFilterDescriptor().
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* filterDesc) {
  return CreateObject("cudnnCreateFilterDescriptor", filterDesc, Kind::kFilter);
}

// cuDNN API reference, cudnn_ops library: cudnnDestroyFilterDescriptor().
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  return DestroyObject("cudnnDestroyFilterDescriptor", filterDesc, Kind::kFilter, "filter descriptor");
}

// cuDNN API reference, cudnn_ops library: cudnnSetFilterNdDescriptor(). filterDimA is
// [K, C/group, spatial...] for every format; CUDNN_TENSOR_NCHW stores it packed in that order,
// CUDNN_TENSOR_NHWC with C innermost. At least three dims ("for historical reasons"), at most
// CUDNN_DIM_MAX (NOT_SUPPORTED beyond).
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                         cudnnTensorFormat_t format, int nbDims, const int filterDimA[]) {
  constexpr std::string_view kCall = "cudnnSetFilterNdDescriptor";
  if (!IsLive(filterDesc, Kind::kFilter)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "filterDesc is NULL or not a live filter descriptor");
  }
  KILN_DNN_TRY(CheckDType(kCall, dataType));
  if (format == CUDNN_TENSOR_NCHW_VECT_C) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_TENSOR_NCHW_VECT_C is not emulated");
  }
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "format " + std::to_string(static_cast<int>(format)) + " is not a cudnnTensorFormat_t value");
  }
  if (nbDims > CUDNN_DIM_MAX) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "nbDims " + std::to_string(nbDims) + " exceeds CUDNN_DIM_MAX = " + std::to_string(CUDNN_DIM_MAX));
  }
  if (nbDims < 3) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "nbDims " + std::to_string(nbDims) + " is below 3, the minimum for a filter");
  }
  KILN_DNN_TRY(NeedHost(kCall, "filterDimA", filterDimA));
  int64_t count = 1;
  for (int i = 0; i < nbDims; ++i) {
    if (filterDimA[i] < 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  "filterDimA[" + std::to_string(i) + "] is " + std::to_string(filterDimA[i]) + " (must be positive)");
    }
    count *= filterDimA[i];
  }
  if (count >= kMaxElements) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, std::to_string(count) + " elements exceed the 2 Giga-element limit");
  }
  cudnnFilterStruct f;
  f.set = true;
  f.dtype = dataType;
  f.format = format;
  f.nb = nbDims;
  for (int i = 0; i < nbDims; ++i) f.dims[i] = filterDimA[i];
  *filterDesc = f;
  return Ok();
}

// ---- Activation -------------------------------------------------------------------------------

// cuDNN API reference, cudnn_ops library: cudnnCreateActivationDescriptor().
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* activationDesc) {
  return CreateObject("cudnnCreateActivationDescriptor", activationDesc, Kind::kActivation);
}

// cuDNN API reference, cudnn_ops library: cudnnDestroyActivationDescriptor().
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t activationDesc) {
  return DestroyObject("cudnnDestroyActivationDescriptor", activationDesc, Kind::kActivation,
                       "activation descriptor");
}

// cuDNN API reference, cudnn_ops library: cudnnSetActivationDescriptor(). coef is the ceiling
// of CUDNN_ACTIVATION_CLIPPED_RELU and the alpha of CUDNN_ACTIVATION_ELU; reluNanOpt applies to
// the RELU family. BAD_PARAM for a mode or NaN option that is not an enumerant.
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc, cudnnActivationMode_t mode,
                                           cudnnNanPropagation_t reluNanOpt, double coef) {
  constexpr std::string_view kCall = "cudnnSetActivationDescriptor";
  if (!IsLive(activationDesc, Kind::kActivation)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "activationDesc is NULL or not a live activation descriptor");
  }
  const int m = static_cast<int>(mode);
  if (m < CUDNN_ACTIVATION_SIGMOID || m > CUDNN_ACTIVATION_SWISH) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "mode " + std::to_string(m) + " is not a cudnnActivationMode_t value");
  }
  KILN_DNN_TRY(CheckNan(kCall, "reluNanOpt", reluNanOpt));
  if (std::isnan(coef)) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "coef is NaN");
  activationDesc->set = true;
  activationDesc->mode = mode;
  activationDesc->nan = reluNanOpt;
  activationDesc->coef = coef;
  return Ok();
}

namespace kiln::emulated_cuda::dnn {

// The activation of `a` applied to v (cudnnActivationMode_t; SWISH with its default beta 1).
// For RELU and CLIPPED_RELU a NaN input gives NaN with CUDNN_PROPAGATE_NAN and 0 without.
float Activate(const cudnnActivationStruct& a, float v) {
  const bool nan_in = std::isnan(v);
  switch (a.mode) {
    case CUDNN_ACTIVATION_SIGMOID: return Sigmoid(v);
    case CUDNN_ACTIVATION_RELU:
      if (nan_in) return a.nan == CUDNN_PROPAGATE_NAN ? v : 0.0f;
      return v > 0.0f ? v : 0.0f;
    case CUDNN_ACTIVATION_TANH: return std::tanh(v);
    case CUDNN_ACTIVATION_CLIPPED_RELU:
      if (nan_in) return a.nan == CUDNN_PROPAGATE_NAN ? v : 0.0f;
      return std::min(v > 0.0f ? v : 0.0f, static_cast<float>(a.coef));
    case CUDNN_ACTIVATION_ELU: return v >= 0.0f ? v : static_cast<float>(a.coef) * std::expm1(v);
    case CUDNN_ACTIVATION_SWISH: return v * Sigmoid(v);
    case CUDNN_ACTIVATION_IDENTITY: return v;
  }
  return v;
}

}  // namespace kiln::emulated_cuda::dnn

// cuDNN API reference, cudnn_ops library: cudnnActivationForward(): y = alpha * act(x) + beta * y,
// x == y allowed when both descriptors have the same strides. BAD_PARAM for differing dims or
// data types, or an in-place call with differing strides; NOT_SUPPORTED for
// CUDNN_ACTIVATION_IDENTITY ("does not work with cudnnActivationForward()", per
// cudnnActivationMode_t) and for data types the emulation does not compute.
cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle, cudnnActivationDescriptor_t activationDesc,
                                     const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
                                     const void* beta, const cudnnTensorDescriptor_t yDesc, void* y) {
  constexpr std::string_view kCall = "cudnnActivationForward";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedActivation(kCall, "activationDesc", activationDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "xDesc", xDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "yDesc", yDesc));
  KILN_DNN_TRY(NeedHost(kCall, "alpha", alpha));
  KILN_DNN_TRY(NeedHost(kCall, "beta", beta));
  const View xv = ViewOf(*xDesc), yv = ViewOf(*yDesc);
  bool same_dims = xv.nb == yv.nb;
  for (int i = 0; same_dims && i < xv.nb; ++i) same_dims = xv.dims[i] == yv.dims[i];
  if (!same_dims) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "xDesc " + DimsStr(xv.dims, xv.nb) + " and yDesc " + DimsStr(yv.dims, yv.nb) + " differ in dims");
  }
  if (xv.dtype != yv.dtype) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "xDesc is " + DTypeName(xv.dtype) + ", yDesc is " + DTypeName(yv.dtype));
  }
  if (x == y) {
    for (int i = 0; i < xv.nb; ++i) {
      if (xv.strides[i] != yv.strides[i]) {
        return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                    "in place (x == y) with different strides: xDesc " + xv.Describe() + ", yDesc " + yv.Describe());
      }
    }
  }
  if (activationDesc->mode == CUDNN_ACTIVATION_IDENTITY) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "CUDNN_ACTIVATION_IDENTITY does not work with cudnnActivationForward (it is for "
                "cudnnConvolutionBiasActivationForward only)");
  }
  KILN_DNN_TRY(NeedComputable(kCall, "xDesc", xv.dtype));
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const void* xh = DeviceTensor(kCall, "x", x, xv, &st);
  if (!xh) return st;
  void* yh = DeviceTensor(kCall, "y", y, yv, &st);
  if (!yh) return st;
  const float a = Scale(alpha), b = Scale(beta);
  const cudnnActivationStruct act = *activationDesc;
  return Launch(kCall, handle, [=] {
    std::vector<float> v = Gather(xv, xh);
    for (float& e : v) e = Activate(act, e);
    Blend(yv, yh, v, a, b);
  });
}

// cuDNN API reference, cudnn_ops library: cudnnAddTensor(): C = alpha * A + beta * C, each dim
// of A equal to C's or 1 (then its single value is used along that dim). BAD_PARAM when the
// dims are incompatible or the data types differ; NOT_SUPPORTED beyond 5 dims.
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t aDesc,
                             const void* A, const void* beta, const cudnnTensorDescriptor_t cDesc, void* C) {
  constexpr std::string_view kCall = "cudnnAddTensor";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedTensor(kCall, "aDesc", aDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "cDesc", cDesc));
  KILN_DNN_TRY(NeedHost(kCall, "alpha", alpha));
  KILN_DNN_TRY(NeedHost(kCall, "beta", beta));
  const View av = ViewOf(*aDesc), cv = ViewOf(*cDesc);
  if (av.nb > 5 || cv.nb > 5) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "aDesc has " + std::to_string(av.nb) + " dims and cDesc " + std::to_string(cv.nb) +
                    "; cudnnAddTensor supports up to 5");
  }
  if (av.nb != cv.nb) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "aDesc " + DimsStr(av.dims, av.nb) + " and cDesc " + DimsStr(cv.dims, cv.nb) +
                    " have different numbers of dims");
  }
  for (int i = 0; i < av.nb; ++i) {
    if (av.dims[i] != cv.dims[i] && av.dims[i] != 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  "aDesc " + DimsStr(av.dims, av.nb) + " does not broadcast to cDesc " + DimsStr(cv.dims, cv.nb) +
                      ": dim " + std::to_string(i) + " is neither " + std::to_string(cv.dims[i]) + " nor 1");
    }
  }
  if (av.dtype != cv.dtype) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "aDesc is " + DTypeName(av.dtype) + ", cDesc is " + DTypeName(cv.dtype));
  }
  KILN_DNN_TRY(NeedComputable(kCall, "cDesc", cv.dtype));
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const void* ah = DeviceTensor(kCall, "A", A, av, &st);
  if (!ah) return st;
  void* ch = DeviceTensor(kCall, "C", C, cv, &st);
  if (!ch) return st;
  const float a = Scale(alpha), b = Scale(beta);
  return Launch(kCall, handle, [=] {
    const std::vector<float> src = Gather(av, ah);
    // A's packed strides, 0 along broadcast dims.
    int64_t astride[CUDNN_DIM_MAX] = {};
    int64_t s = 1;
    for (int d = av.nb - 1; d >= 0; --d) {
      astride[d] = av.dims[d] == 1 ? 0 : s;
      s *= av.dims[d];
    }
    std::vector<float> r(static_cast<size_t>(cv.Count()));
    int64_t idx[CUDNN_DIM_MAX] = {};
    for (size_t i = 0; i < r.size(); ++i) {
      int64_t off = 0;
      for (int d = 0; d < cv.nb; ++d) off += idx[d] * astride[d];
      r[i] = src[static_cast<size_t>(off)];
      for (int d = cv.nb - 1; d >= 0; --d) {
        if (++idx[d] < cv.dims[d]) break;
        idx[d] = 0;
      }
    }
    Blend(cv, ch, r, a, b);
  });
}

// ---- Pooling ----------------------------------------------------------------------------------

// cuDNN API reference, cudnn_ops library: cudnnCreatePoolingDescriptor().
cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t* poolingDesc) {
  return CreateObject("cudnnCreatePoolingDescriptor", poolingDesc, Kind::kPooling);
}

// cuDNN API reference, cudnn_ops library: cudnnDestroyPoolingDescriptor().
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t poolingDesc) {
  return DestroyObject("cudnnDestroyPoolingDescriptor", poolingDesc, Kind::kPooling, "pooling descriptor");
}

// cuDNN API reference, cudnn_ops library: cudnnSetPoolingNdDescriptor(). nbDims spatial dims
// (NOT_SUPPORTED above CUDNN_DIM_MAX - 2); BAD_PARAM for a window or stride below 1, a negative
// pad, or a mode / NaN option that is not an enumerant.
cudnnStatus_t cudnnSetPoolingNdDescriptor(cudnnPoolingDescriptor_t poolingDesc, const cudnnPoolingMode_t mode,
                                          const cudnnNanPropagation_t maxpoolingNanOpt, int nbDims,
                                          const int windowDimA[], const int paddingA[], const int strideA[]) {
  constexpr std::string_view kCall = "cudnnSetPoolingNdDescriptor";
  if (!IsLive(poolingDesc, Kind::kPooling)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "poolingDesc is NULL or not a live pooling descriptor");
  }
  const int m = static_cast<int>(mode);
  if (m < CUDNN_POOLING_MAX || m > CUDNN_POOLING_MAX_DETERMINISTIC) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "mode " + std::to_string(m) + " is not a cudnnPoolingMode_t value");
  }
  KILN_DNN_TRY(CheckNan(kCall, "maxpoolingNanOpt", maxpoolingNanOpt));
  if (nbDims > CUDNN_DIM_MAX - 2) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "nbDims " + std::to_string(nbDims) + " exceeds CUDNN_DIM_MAX - 2 = " + std::to_string(CUDNN_DIM_MAX - 2));
  }
  if (nbDims < 1) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "nbDims " + std::to_string(nbDims) + " is below 1");
  KILN_DNN_TRY(NeedHost(kCall, "windowDimA", windowDimA));
  KILN_DNN_TRY(NeedHost(kCall, "paddingA", paddingA));
  KILN_DNN_TRY(NeedHost(kCall, "strideA", strideA));
  for (int i = 0; i < nbDims; ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    if (windowDimA[i] < 1) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "windowDimA" + at + " is " + std::to_string(windowDimA[i]));
    }
    if (paddingA[i] < 0) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "paddingA" + at + " is " + std::to_string(paddingA[i]));
    }
    if (strideA[i] < 1) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "strideA" + at + " is " + std::to_string(strideA[i]));
  }
  cudnnPoolingStruct p;
  p.set = true;
  p.mode = mode;
  p.nan = maxpoolingNanOpt;
  p.spatial = nbDims;
  for (int i = 0; i < nbDims; ++i) {
    p.window[i] = windowDimA[i];
    p.pad[i] = paddingA[i];
    p.stride[i] = strideA[i];
  }
  *poolingDesc = p;
  return Ok();
}

// cuDNN API reference, cudnn_ops library: cudnnPoolingForward(): y = alpha * pool(x) + beta * y.
// Output dims per cudnnGetPoolingNdForwardOutputDim(): 1 + (in + 2 * pad - window) / stride.
// MAX / MAX_DETERMINISTIC take the largest element inside the input (padding never wins); a NaN
// in the window gives NaN with CUDNN_PROPAGATE_NAN and is skipped without. AVERAGE divides by
// the window size (COUNT_INCLUDE_PADDING) or by the elements inside the input
// (COUNT_EXCLUDE_PADDING). BAD_PARAM for dims, N / C or data types that do not match.
cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, const cudnnPoolingDescriptor_t poolingDesc,
                                  const void* alpha, const cudnnTensorDescriptor_t xDesc, const void* x,
                                  const void* beta, const cudnnTensorDescriptor_t yDesc, void* y) {
  constexpr std::string_view kCall = "cudnnPoolingForward";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedPooling(kCall, "poolingDesc", poolingDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "xDesc", xDesc));
  KILN_DNN_TRY(NeedTensor(kCall, "yDesc", yDesc));
  KILN_DNN_TRY(NeedHost(kCall, "alpha", alpha));
  KILN_DNN_TRY(NeedHost(kCall, "beta", beta));
  const cudnnPoolingStruct pool = *poolingDesc;
  const View xv = ViewOf(*xDesc), yv = ViewOf(*yDesc);
  if (xv.nb != yv.nb || xv.nb != pool.spatial + 2) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "xDesc has " + std::to_string(xv.nb) + " dims, yDesc " + std::to_string(yv.nb) +
                    ", the pooling descriptor " + std::to_string(pool.spatial) + " spatial dims (expected " +
                    std::to_string(pool.spatial + 2) + " for both tensors)");
  }
  if (xv.dims[0] != yv.dims[0] || xv.dims[1] != yv.dims[1]) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "n and c differ: xDesc " + DimsStr(xv.dims, xv.nb) + ", yDesc " + DimsStr(yv.dims, yv.nb));
  }
  if (xv.dtype != yv.dtype) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "xDesc is " + DTypeName(xv.dtype) + ", yDesc is " + DTypeName(yv.dtype));
  }
  for (int i = 0; i < pool.spatial; ++i) {
    const int64_t span = xv.dims[2 + i] + 2 * int64_t{pool.pad[i]} - pool.window[i];
    const int64_t want = span < 0 ? 0 : 1 + span / pool.stride[i];
    if (span < 0 || yv.dims[2 + i] != want) {
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  "yDesc spatial dim " + std::to_string(i) + " is " + std::to_string(yv.dims[2 + i]) +
                      ", the pooling output is " + std::to_string(want) + " (input " + std::to_string(xv.dims[2 + i]) +
                      ", window " + std::to_string(pool.window[i]) + ", pad " + std::to_string(pool.pad[i]) +
                      ", stride " + std::to_string(pool.stride[i]) + ")");
    }
  }
  if (pool.spatial > 3) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                std::to_string(pool.spatial) + " spatial dims; the emulation pools 1 to 3");
  }
  KILN_DNN_TRY(NeedComputable(kCall, "xDesc", xv.dtype));
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const void* xh = DeviceTensor(kCall, "x", x, xv, &st);
  if (!xh) return st;
  void* yh = DeviceTensor(kCall, "y", y, yv, &st);
  if (!yh) return st;
  if (kiln::emulated_cuda::FaultDue("dnn-not-supported")) {
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "injected fault 'dnn-not-supported'");
  }
  const float a = Scale(alpha), b = Scale(beta);
  return Launch(kCall, handle, [=] {
    const std::vector<float> in = Gather(xv, xh);
    // Spatial dims padded to 3 with unit leading dims.
    int64_t id[3] = {1, 1, 1}, od[3] = {1, 1, 1};
    int win[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, str[3] = {1, 1, 1};
    const int lead = 3 - pool.spatial;
    for (int i = 0; i < pool.spatial; ++i) {
      id[lead + i] = xv.dims[2 + i];
      od[lead + i] = yv.dims[2 + i];
      win[lead + i] = pool.window[i];
      pad[lead + i] = pool.pad[i];
      str[lead + i] = pool.stride[i];
    }
    const bool is_max = pool.mode == CUDNN_POOLING_MAX || pool.mode == CUDNN_POOLING_MAX_DETERMINISTIC;
    const int64_t window = int64_t{win[0]} * win[1] * win[2];
    const int64_t planes = xv.dims[0] * xv.dims[1];
    std::vector<float> out(static_cast<size_t>(planes * od[0] * od[1] * od[2]));
    size_t o = 0;
    for (int64_t p = 0; p < planes; ++p) {
      const float* plane = in.data() + p * id[0] * id[1] * id[2];
      for (int64_t o0 = 0; o0 < od[0]; ++o0)
        for (int64_t o1 = 0; o1 < od[1]; ++o1)
          for (int64_t o2 = 0; o2 < od[2]; ++o2) {
            float best = -std::numeric_limits<float>::infinity();
            bool saw_nan = false;
            float sum = 0.0f;
            int64_t inside = 0;
            for (int t0 = 0; t0 < win[0]; ++t0) {
              const int64_t i0 = o0 * str[0] - pad[0] + t0;
              if (i0 < 0 || i0 >= id[0]) continue;
              for (int t1 = 0; t1 < win[1]; ++t1) {
                const int64_t i1 = o1 * str[1] - pad[1] + t1;
                if (i1 < 0 || i1 >= id[1]) continue;
                for (int t2 = 0; t2 < win[2]; ++t2) {
                  const int64_t i2 = o2 * str[2] - pad[2] + t2;
                  if (i2 < 0 || i2 >= id[2]) continue;
                  const float v = plane[(i0 * id[1] + i1) * id[2] + i2];
                  ++inside;
                  sum += v;
                  if (std::isnan(v)) {
                    saw_nan = true;
                  } else if (v > best) {
                    best = v;
                  }
                }
              }
            }
            float r;
            if (is_max) {
              r = saw_nan && pool.nan == CUDNN_PROPAGATE_NAN ? std::numeric_limits<float>::quiet_NaN() : best;
            } else if (pool.mode == CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING) {
              r = sum / static_cast<float>(window);
            } else {
              r = inside > 0 ? sum / static_cast<float>(inside) : 0.0f;
            }
            out[o++] = r;
          }
    }
    Blend(yv, yh, out, a, b);
  });
}
