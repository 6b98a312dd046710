// Dynamic symbol tables of cuBLASLt and cuDNN 9, opened with dlopen on first use, like the driver (runtime/cuda/driver.h):
// the runtime starts without them and reports their absence as a Status when the CUDA backend asks.
//
//   KILN_ASSIGN_OR_RETURN(const cuda::Blas* blas, cuda::LoadBlas());
//   KILN_RETURN_IF_ERROR(cuda::CheckBlas(*blas, blas->Matmul(...), "cublasLtMatmul (Gemm 'fc1')"));
//
// Each member is typed with decltype of the prototype in cublasLt.h / cudnn.h, and named as the
// entry point without its prefix (Blas::MatmulDescCreate is cublasLtMatmulDescCreate,
// Dnn::ConvolutionForward is cudnnConvolutionForward).
//
// Thread safety: each table is loaded once per process (the first call's result, success or
// error, is kept and returned again) and is immutable afterwards; Load* and Check* may be
// called from any thread. The libraries themselves are never unloaded.
//
// Errors:
//   kFailedPrecondition  the library (or a cuDNN sublibrary) is not found, naming the file and
//                        dlerror, or it lacks an entry point, naming the symbol and the file;
//   kIncompatible        the library's major version is not the one Kiln was built against
//                        (cuBLASLt CUBLAS_VER_MAJOR, cuDNN CUDNN_MAJOR).
// Neither loader initialises a device: no GPU or driver is needed to load them.
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/status.h"

namespace kiln::cuda {

// cuBLASLt, from libcublasLt.so.<CUBLAS_VER_MAJOR> (fallback libcublasLt.so).
struct Blas {
  decltype(&::cublasLtCreate) Create = nullptr;
  decltype(&::cublasLtDestroy) Destroy = nullptr;
  decltype(&::cublasLtGetVersion) GetVersion = nullptr;
  decltype(&::cublasLtGetCudartVersion) GetCudartVersion = nullptr;
  decltype(&::cublasLtGetStatusName) GetStatusName = nullptr;
  decltype(&::cublasLtGetStatusString) GetStatusString = nullptr;
  decltype(&::cublasLtMatmulDescCreate) MatmulDescCreate = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) MatmulDescDestroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) MatrixLayoutCreate = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic = nullptr;
  decltype(&::cublasLtMatmul) Matmul = nullptr;

  size_t version = 0;         // cublasLtGetVersion: major * 10000 + minor * 100 + patch, e.g. 130100
  size_t cudart_version = 0;  // the CUDA runtime it was built for, e.g. 13000
  std::string path;           // the file opened, e.g. "libcublasLt.so.13"
  int major() const { return static_cast<int>(version / 10000); }
};

// cuDNN 9. libcudnn_graph holds handles, versions, errors and the backend (graph) API that
// runtime/cuda/sdpa.h builds attention with; the legacy (descriptor) API lives in the
// sublibraries libcudnn_ops (tensor, filter, activation, pooling descriptors; AddTensor, pooling,
// activation), libcudnn_cnn (convolutions) and libcudnn_adv (the RNN API, runtime/cuda/rnn.h). LoadDnn opens the shim libcudnn.so.<CUDNN_MAJOR>
// (fallback libcudnn.so), then each sublibrary (looked for first beside the shim, then on the
// loader's path) and resolves each entry point from the sublibrary whose header declares it,
// so a missing sublibrary is reported at load time rather than as a failed call later.
struct Dnn {
  // cudnn_graph.h (libcudnn_graph)
  decltype(&::cudnnCreate) Create = nullptr;
  decltype(&::cudnnDestroy) Destroy = nullptr;
  decltype(&::cudnnSetStream) SetStream = nullptr;
  decltype(&::cudnnGetVersion) GetVersion = nullptr;
  decltype(&::cudnnGetCudartVersion) GetCudartVersion = nullptr;
  decltype(&::cudnnGetErrorString) GetErrorString = nullptr;
  decltype(&::cudnnGetLastErrorString) GetLastErrorString = nullptr;
  decltype(&::cudnnBackendCreateDescriptor) BackendCreateDescriptor = nullptr;
  decltype(&::cudnnBackendDestroyDescriptor) BackendDestroyDescriptor = nullptr;
  decltype(&::cudnnBackendSetAttribute) BackendSetAttribute = nullptr;
  decltype(&::cudnnBackendGetAttribute) BackendGetAttribute = nullptr;
  decltype(&::cudnnBackendFinalize) BackendFinalize = nullptr;
  decltype(&::cudnnBackendExecute) BackendExecute = nullptr;
  // cudnn_ops.h (libcudnn_ops)
  decltype(&::cudnnCreateTensorDescriptor) CreateTensorDescriptor = nullptr;
  decltype(&::cudnnDestroyTensorDescriptor) DestroyTensorDescriptor = nullptr;
  decltype(&::cudnnSetTensorNdDescriptor) SetTensorNdDescriptor = nullptr;
  decltype(&::cudnnSetTensor4dDescriptor) SetTensor4dDescriptor = nullptr;
  decltype(&::cudnnCreateFilterDescriptor) CreateFilterDescriptor = nullptr;
  decltype(&::cudnnDestroyFilterDescriptor) DestroyFilterDescriptor = nullptr;
  decltype(&::cudnnSetFilterNdDescriptor) SetFilterNdDescriptor = nullptr;
  decltype(&::cudnnCreateActivationDescriptor) CreateActivationDescriptor = nullptr;
  decltype(&::cudnnDestroyActivationDescriptor) DestroyActivationDescriptor = nullptr;
  decltype(&::cudnnSetActivationDescriptor) SetActivationDescriptor = nullptr;
  decltype(&::cudnnActivationForward) ActivationForward = nullptr;
  decltype(&::cudnnAddTensor) AddTensor = nullptr;
  decltype(&::cudnnCreatePoolingDescriptor) CreatePoolingDescriptor = nullptr;
  decltype(&::cudnnDestroyPoolingDescriptor) DestroyPoolingDescriptor = nullptr;
  decltype(&::cudnnSetPoolingNdDescriptor) SetPoolingNdDescriptor = nullptr;
  decltype(&::cudnnPoolingForward) PoolingForward = nullptr;
  // cudnn_cnn.h (libcudnn_cnn)
  decltype(&::cudnnCreateConvolutionDescriptor) CreateConvolutionDescriptor = nullptr;
  decltype(&::cudnnDestroyConvolutionDescriptor) DestroyConvolutionDescriptor = nullptr;
  decltype(&::cudnnSetConvolutionNdDescriptor) SetConvolutionNdDescriptor = nullptr;
  decltype(&::cudnnSetConvolutionGroupCount) SetConvolutionGroupCount = nullptr;
  decltype(&::cudnnSetConvolutionMathType) SetConvolutionMathType = nullptr;
  decltype(&::cudnnGetConvolutionNdForwardOutputDim) GetConvolutionNdForwardOutputDim = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithmMaxCount) GetConvolutionForwardAlgorithmMaxCount = nullptr;
  decltype(&::cudnnGetConvolutionForwardAlgorithm_v7) GetConvolutionForwardAlgorithm_v7 = nullptr;
  decltype(&::cudnnGetConvolutionForwardWorkspaceSize) GetConvolutionForwardWorkspaceSize = nullptr;
  decltype(&::cudnnConvolutionForward) ConvolutionForward = nullptr;
  decltype(&::cudnnConvolutionBiasActivationForward) ConvolutionBiasActivationForward = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataAlgorithmMaxCount) GetConvolutionBackwardDataAlgorithmMaxCount =
      nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataAlgorithm_v7) GetConvolutionBackwardDataAlgorithm_v7 = nullptr;
  decltype(&::cudnnGetConvolutionBackwardDataWorkspaceSize) GetConvolutionBackwardDataWorkspaceSize = nullptr;
  decltype(&::cudnnConvolutionBackwardData) ConvolutionBackwardData = nullptr;
  // cudnn_adv.h (libcudnn_adv)
  decltype(&::cudnnCreateRNNDescriptor) CreateRNNDescriptor = nullptr;
  decltype(&::cudnnDestroyRNNDescriptor) DestroyRNNDescriptor = nullptr;
  decltype(&::cudnnSetRNNDescriptor_v8) SetRNNDescriptor_v8 = nullptr;
  decltype(&::cudnnCreateRNNDataDescriptor) CreateRNNDataDescriptor = nullptr;
  decltype(&::cudnnDestroyRNNDataDescriptor) DestroyRNNDataDescriptor = nullptr;
  decltype(&::cudnnSetRNNDataDescriptor) SetRNNDataDescriptor = nullptr;
  decltype(&::cudnnGetRNNWeightSpaceSize) GetRNNWeightSpaceSize = nullptr;
  decltype(&::cudnnGetRNNWeightParams) GetRNNWeightParams = nullptr;
  decltype(&::cudnnGetRNNTempSpaceSizes) GetRNNTempSpaceSizes = nullptr;
  decltype(&::cudnnRNNForward) RNNForward = nullptr;

  size_t version = 0;         // cudnnGetVersion: major * 10000 + minor * 100 + patch, e.g. 91900
  size_t cudart_version = 0;  // the CUDA runtime it was built for, e.g. 13000
  std::string path;           // the shim opened, e.g. "libcudnn.so.9"
  int major() const { return static_cast<int>(version / 10000); }
};

// The tables, loaded on first call (see the errors above). Loading opens no device.
Result<const Blas*> LoadBlas();
Result<const Dnn*> LoadDnn();

// OK for CUBLAS_STATUS_SUCCESS; else kDeviceError "<what>: CUBLAS_STATUS_NAME: description".
// A table without GetStatusName / GetStatusString (not loaded) gives "<what>: cuBLAS status N".
Status CheckBlas(const Blas& blas, cublasStatus_t status, std::string_view what);
// OK for CUDNN_STATUS_SUCCESS; else kDeviceError "<what>: CUDNN_STATUS_NAME (cuDNN's last error
// message, when it has one)". A table without GetErrorString gives "<what>: cuDNN status N".
Status CheckDnn(const Dnn& dnn, cudnnStatus_t status, std::string_view what);

// The loaders behind LoadBlas / LoadDnn, uncached, trying each file name in turn (LoadBlas:
// {"libcublasLt.so.13", "libcublasLt.so"}; LoadDnn: {"libcudnn.so.9", "libcudnn.so"}): for
// tests of the error paths. `out` is filled on success only.
Status LoadBlasFrom(const std::vector<std::string>& names, Blas& out);
Status LoadDnnFrom(const std::vector<std::string>& names, Dnn& out);

}  // namespace kiln::cuda
