// cuBLASLt and cuDNN loaded with dlopen (runtime/cuda/dynamic_symbols.cc). Built only with the CUDA
// toolkit's headers (KILN_HAVE_CUDA). Loading and descriptor calls need no GPU, so the tables
// are exercised here on host-only entry points; the "[gpu]" case creates real handles.
#if KILN_HAVE_CUDA

#include "runtime/cuda/dynamic_symbols.h"

#include <dlfcn.h>
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "runtime/cuda/driver.h"
#include "tests/gpu_test_util.h"
#include "tests/text_util.h"

namespace kiln::cuda {
namespace {

using kiln::testing::Contains;

// Whether the loader finds `soname`, asked independently of dynamic_symbols.cc.
bool Opens(const char* soname) { return dlopen(soname, RTLD_NOW | RTLD_LOCAL) != nullptr; }

TEST_CASE("LoadBlas: cuBLASLt of the major version Kiln was built with, every entry point resolved") {
  Result<const Blas*> blas = LoadBlas();
  const std::string soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  if (!Opens(soname.c_str()) && !Opens("libcublasLt.so")) {
    REQUIRE_FALSE(blas.ok());
    CHECK(blas.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Contains(blas.status().message(), "cuBLASLt not found (" + soname + ": "));
    CHECK(Contains(blas.status().message(), "install the CUDA"));
    return;
  }
  REQUIRE_MESSAGE(blas.ok(), blas.status().ToString());
  const Blas& b = **blas;
  MESSAGE("cuBLASLt " << b.version << " (cudart " << b.cudart_version << ") from " << b.path);
  CHECK(b.major() == CUBLAS_VER_MAJOR);
  CHECK(b.major() == 13);
  CHECK(b.version >= 130000);
  CHECK(b.version == b.GetVersion());
  CHECK(b.cudart_version / 1000 == CUDA_VERSION / 1000);
  CHECK((b.path == soname || b.path == "libcublasLt.so"));
  for (const void* fn : {(const void*)b.Create, (const void*)b.Destroy, (const void*)b.GetStatusName,
                         (const void*)b.GetStatusString, (const void*)b.MatmulDescCreate,
                         (const void*)b.MatmulDescDestroy, (const void*)b.MatmulDescSetAttribute,
                         (const void*)b.MatrixLayoutCreate, (const void*)b.MatrixLayoutDestroy,
                         (const void*)b.MatrixLayoutSetAttribute, (const void*)b.MatmulPreferenceCreate,
                         (const void*)b.MatmulPreferenceDestroy, (const void*)b.MatmulPreferenceSetAttribute,
                         (const void*)b.MatmulAlgoGetHeuristic, (const void*)b.Matmul}) {
    CHECK(fn != nullptr);
  }
}

TEST_CASE("LoadDnn: cuDNN 9, legacy and backend entry points from the sublibraries") {
  Result<const Dnn*> dnn = LoadDnn();
  const std::string soname = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
  if (!Opens(soname.c_str()) && !Opens("libcudnn.so")) {
    REQUIRE_FALSE(dnn.ok());
    CHECK(dnn.status().code() == StatusCode::kFailedPrecondition);
    CHECK(Contains(dnn.status().message(), "cuDNN not found (" + soname + ": "));
    return;
  }
  REQUIRE_MESSAGE(dnn.ok(), dnn.status().ToString());
  const Dnn& d = **dnn;
  MESSAGE("cuDNN " << d.version << " (cudart " << d.cudart_version << ") from " << d.path);
  CHECK(d.major() == 9);
  CHECK(d.major() == CUDNN_MAJOR);
  CHECK(d.version >= 90000);
  CHECK(d.version < 100000);
  CHECK(d.version == d.GetVersion());
  CHECK(d.cudart_version / 1000 == CUDA_VERSION / 1000);
  CHECK((d.path == soname || d.path == "libcudnn.so"));

  // Each entry point comes from the sublibrary whose header declares it, not from the shim.
  Dl_info where{};
  REQUIRE(dladdr(reinterpret_cast<const void*>(d.ConvolutionForward), &where) != 0);
  CHECK(Contains(where.dli_fname, "libcudnn_cnn.so"));
  REQUIRE(dladdr(reinterpret_cast<const void*>(d.SetTensorNdDescriptor), &where) != 0);
  CHECK(Contains(where.dli_fname, "libcudnn_ops.so"));
#if !KILN_FAULT_INJECTION  // that build wraps cudnnCreate in a function of its own (runtime/fault_injection.h)
  REQUIRE(dladdr(reinterpret_cast<const void*>(d.Create), &where) != 0);
  CHECK(Contains(where.dli_fname, "libcudnn_graph.so"));
#endif
  REQUIRE(dladdr(reinterpret_cast<const void*>(d.RNNForward), &where) != 0);  // runtime/cuda/rnn.h
  CHECK(Contains(where.dli_fname, "libcudnn_adv.so"));
  // The backend (graph) API, for attention (runtime/cuda/sdpa.h), is libcudnn_graph's too.
  for (const void* backend : {reinterpret_cast<const void*>(d.BackendCreateDescriptor),
                              reinterpret_cast<const void*>(d.BackendDestroyDescriptor),
                              reinterpret_cast<const void*>(d.BackendSetAttribute),
                              reinterpret_cast<const void*>(d.BackendGetAttribute),
                              reinterpret_cast<const void*>(d.BackendFinalize),
                              reinterpret_cast<const void*>(d.BackendExecute)}) {
    REQUIRE(dladdr(backend, &where) != 0);
    CHECK(Contains(where.dli_fname, "libcudnn_graph.so"));
  }
}

TEST_CASE("LoadBlas and LoadDnn keep their first result across threads") {
  Result<const Blas*> blas = LoadBlas();
  Result<const Dnn*> dnn = LoadDnn();
  std::vector<const void*> seen(16, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      auto b = LoadBlas();
      auto d = LoadDnn();
      seen[2 * i] = b.ok() ? *b : nullptr;
      seen[2 * i + 1] = d.ok() ? *d : nullptr;
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) {
    CHECK(seen[2 * i] == (blas.ok() ? *blas : nullptr));
    CHECK(seen[2 * i + 1] == (dnn.ok() ? *dnn : nullptr));
  }
}

TEST_CASE("CheckBlas / CheckDnn: kDeviceError with the library's status name, or the number") {
  const Blas no_blas;
  CHECK(CheckBlas(no_blas, CUBLAS_STATUS_SUCCESS, "x").ok());
  Status s = CheckBlas(no_blas, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul (Gemm 'fc')");
  CHECK(s.code() == StatusCode::kDeviceError);
  CHECK(s.message() == "cublasLtMatmul (Gemm 'fc'): cuBLAS status 7");
  const Dnn no_dnn;
  CHECK(CheckDnn(no_dnn, CUDNN_STATUS_SUCCESS, "x").ok());
  s = CheckDnn(no_dnn, CUDNN_STATUS_BAD_PARAM, "cudnnConvolutionForward (Conv 'c1')");
  CHECK(s.code() == StatusCode::kDeviceError);
  CHECK(s.message() == "cudnnConvolutionForward (Conv 'c1'): cuDNN status " +
                           std::to_string(static_cast<int>(CUDNN_STATUS_BAD_PARAM)));

  Result<const Blas*> blas = LoadBlas();
  if (blas.ok()) {
    s = CheckBlas(**blas, CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtCreate");
    CHECK(s.code() == StatusCode::kDeviceError);
    CHECK(Contains(s.message(), "cublasLtCreate: CUBLAS_STATUS_NOT_INITIALIZED"));
  }
  Result<const Dnn*> dnn = LoadDnn();
  if (dnn.ok()) {
    s = CheckDnn(**dnn, CUDNN_STATUS_NOT_SUPPORTED, "cudnnConvolutionForward");
    CHECK(s.code() == StatusCode::kDeviceError);
    CHECK(Contains(s.message(), "cudnnConvolutionForward: CUDNN_STATUS_NOT_SUPPORTED"));
  }
}

TEST_CASE("cuBLASLt descriptors through the table (host-only calls)") {
  Result<const Blas*> blas = LoadBlas();
  if (!blas.ok()) {
    MESSAGE("cuBLASLt not loaded: " << blas.status().ToString());
    return;
  }
  const Blas& b = **blas;
  cublasLtMatmulDesc_t desc = nullptr;
  REQUIRE(CheckBlas(b, b.MatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate")
              .ok());
  const cublasOperation_t trans = CUBLAS_OP_T;
  CHECK(CheckBlas(b, b.MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof(trans)),
                  "TRANSA")
            .ok());
  // A wrongly sized attribute is the library's error, named.
  Status bad =
      CheckBlas(b, b.MatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, 1), "TRANSA (1 byte)");
  CHECK(bad.code() == StatusCode::kDeviceError);
  CHECK(Contains(bad.message(), "TRANSA (1 byte): CUBLAS_STATUS_INVALID_VALUE"));
  CHECK(CheckBlas(b, b.MatmulDescDestroy(desc), "cublasLtMatmulDescDestroy").ok());

  cublasLtMatrixLayout_t layout = nullptr;
  REQUIRE(
      CheckBlas(b, b.MatrixLayoutCreate(&layout, CUDA_R_32F, 4, 8, 4), "cublasLtMatrixLayoutCreate").ok());
  const int32_t batch = 3;
  CHECK(CheckBlas(
            b, b.MatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
            "BATCH_COUNT")
            .ok());
  CHECK(CheckBlas(b, b.MatrixLayoutDestroy(layout), "cublasLtMatrixLayoutDestroy").ok());

  cublasLtMatmulPreference_t pref = nullptr;
  REQUIRE(CheckBlas(b, b.MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate").ok());
  const size_t workspace = size_t{32} << 20;
  CHECK(CheckBlas(b,
                  b.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                 sizeof(workspace)),
                  "MAX_WORKSPACE_BYTES")
            .ok());
  CHECK(CheckBlas(b, b.MatmulPreferenceDestroy(pref), "cublasLtMatmulPreferenceDestroy").ok());
}

TEST_CASE("cuDNN descriptors through the table: a convolution's output shape, by hand") {
  Result<const Dnn*> dnn = LoadDnn();
  if (!dnn.ok()) {
    MESSAGE("cuDNN not loaded: " << dnn.status().ToString());
    return;
  }
  const Dnn& d = **dnn;
  cudnnTensorDescriptor_t x = nullptr;
  REQUIRE(CheckDnn(d, d.CreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor").ok());
  const int xdims[4] = {2, 3, 32, 30};
  const int xstrides[4] = {3 * 32 * 30, 32 * 30, 30, 1};
  REQUIRE(CheckDnn(d, d.SetTensorNdDescriptor(x, CUDNN_DATA_FLOAT, 4, xdims, xstrides), "x").ok());

  // A bad shape is cuDNN's error, named, with cuDNN's own detail when it gives one.
  cudnnTensorDescriptor_t bad = nullptr;
  REQUIRE(CheckDnn(d, d.CreateTensorDescriptor(&bad), "cudnnCreateTensorDescriptor").ok());
  const int bad_dims[3] = {2, -3, 4};
  const int bad_strides[3] = {12, 4, 1};
  Status s =
      CheckDnn(d, d.SetTensorNdDescriptor(bad, CUDNN_DATA_FLOAT, 3, bad_dims, bad_strides), "tensor 'bad'");
  CHECK(s.code() == StatusCode::kDeviceError);
  CHECK(Contains(s.message(), "tensor 'bad': CUDNN_STATUS_BAD_PARAM"));
  CHECK(CheckDnn(d, d.DestroyTensorDescriptor(bad), "cudnnDestroyTensorDescriptor").ok());

  cudnnFilterDescriptor_t w = nullptr;
  REQUIRE(CheckDnn(d, d.CreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor").ok());
  const int wdims[4] = {6, 1, 3, 5};  // 3 groups: 1 input channel each, 2 output channels each
  REQUIRE(CheckDnn(d, d.SetFilterNdDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, wdims), "w").ok());

  cudnnConvolutionDescriptor_t conv = nullptr;
  REQUIRE(CheckDnn(d, d.CreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor").ok());
  const int pads[2] = {1, 2};
  const int strides[2] = {2, 1};
  const int dilations[2] = {1, 2};
  REQUIRE(CheckDnn(d,
                   d.SetConvolutionNdDescriptor(conv, 2, pads, strides, dilations, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT),
                   "conv")
              .ok());
  REQUIRE(CheckDnn(d, d.SetConvolutionGroupCount(conv, 3), "group count").ok());
  REQUIRE(CheckDnn(d, d.SetConvolutionMathType(conv, CUDNN_DEFAULT_MATH), "math type").ok());
  int ydims[4] = {0, 0, 0, 0};
  REQUIRE(CheckDnn(d, d.GetConvolutionNdForwardOutputDim(conv, x, w, 4, ydims), "output dims").ok());
  // H: (32 + 2*1 - ((3-1)*1 + 1)) / 2 + 1 = 16;  W: (30 + 2*2 - ((5-1)*2 + 1)) / 1 + 1 = 26.
  CHECK(ydims[0] == 2);
  CHECK(ydims[1] == 6);
  CHECK(ydims[2] == 16);
  CHECK(ydims[3] == 26);

  cudnnPoolingDescriptor_t pool = nullptr;
  REQUIRE(CheckDnn(d, d.CreatePoolingDescriptor(&pool), "cudnnCreatePoolingDescriptor").ok());
  const int window[2] = {3, 3};
  const int ppads[2] = {1, 1};
  const int pstrides[2] = {2, 2};
  CHECK(CheckDnn(d,
                 d.SetPoolingNdDescriptor(pool, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, 2, window, ppads,
                                          pstrides),
                 "pool")
            .ok());
  cudnnActivationDescriptor_t act = nullptr;
  REQUIRE(CheckDnn(d, d.CreateActivationDescriptor(&act), "cudnnCreateActivationDescriptor").ok());
  CHECK(
      CheckDnn(d, d.SetActivationDescriptor(act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0), "relu")
          .ok());

  CHECK(CheckDnn(d, d.DestroyActivationDescriptor(act), "cudnnDestroyActivationDescriptor").ok());
  CHECK(CheckDnn(d, d.DestroyPoolingDescriptor(pool), "cudnnDestroyPoolingDescriptor").ok());
  CHECK(CheckDnn(d, d.DestroyConvolutionDescriptor(conv), "cudnnDestroyConvolutionDescriptor").ok());
  CHECK(CheckDnn(d, d.DestroyFilterDescriptor(w), "cudnnDestroyFilterDescriptor").ok());
  CHECK(CheckDnn(d, d.DestroyTensorDescriptor(x), "cudnnDestroyTensorDescriptor").ok());
}

TEST_CASE("LoadBlasFrom / LoadDnnFrom: missing files and libraries without the entry points") {
  Blas b;
  Status s = LoadBlasFrom({"libkiln_no_such_cublasLt.so.13", "libkiln_no_such_cublasLt.so"}, b);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(s.message(), "cuBLASLt not found (libkiln_no_such_cublasLt.so.13: "));
  CHECK(Contains(s.message(), "; libkiln_no_such_cublasLt.so: "));
  CHECK(Contains(s.message(), "install the CUDA 13 runtime libraries"));

  s = LoadBlasFrom({"libkiln_no_such_cublasLt.so.13", "libm.so.6"}, b);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(s.message(), "cuBLASLt (libm.so.6) lacks cublasLtGetVersion"));
  CHECK((b.GetVersion == nullptr));  // untouched on failure
  CHECK(b.path.empty());

  Dnn d;
  s = LoadDnnFrom({"libkiln_no_such_cudnn.so.9"}, d);
  CHECK(s.code() == StatusCode::kFailedPrecondition);
  CHECK(Contains(s.message(), "cuDNN not found (libkiln_no_such_cudnn.so.9: "));
  CHECK(Contains(s.message(), "install cuDNN 9 for CUDA 13"));
  CHECK((d.GetVersion == nullptr));
}

TEST_CASE("Without a device, library handles fail as kDeviceError, not a crash") {
  if (LoadDriver().ok()) return;  // a driver is present: the [gpu] case covers handles
  Result<const Blas*> blas = LoadBlas();
  if (blas.ok()) {
    cublasLtHandle_t h = nullptr;
    Status s = CheckBlas(**blas, (*blas)->Create(&h), "cublasLtCreate");
    CHECK(s.code() == StatusCode::kDeviceError);
    CHECK(Contains(s.message(), "cublasLtCreate: CUBLAS_STATUS_"));
  }
  Result<const Dnn*> dnn = LoadDnn();
  if (dnn.ok()) {
    cudnnHandle_t h = nullptr;
    Status s = CheckDnn(**dnn, (*dnn)->Create(&h), "cudnnCreate");
    CHECK(s.code() == StatusCode::kDeviceError);
    CHECK(Contains(s.message(), "cudnnCreate: CUDNN_STATUS_"));
  }
}

TEST_CASE("[gpu] cuBLASLt and cuDNN handles on the device") {
  KILN_REQUIRE_GPU();
  Result<const Blas*> blas = LoadBlas();
  REQUIRE_MESSAGE(blas.ok(), blas.status().ToString());
  Result<const Dnn*> dnn = LoadDnn();
  REQUIRE_MESSAGE(dnn.ok(), dnn.status().ToString());
  cublasLtHandle_t lt = nullptr;
  REQUIRE(CheckBlas(**blas, (*blas)->Create(&lt), "cublasLtCreate").ok());
  CHECK(CheckBlas(**blas, (*blas)->Destroy(lt), "cublasLtDestroy").ok());
  cudnnHandle_t h = nullptr;
  REQUIRE(CheckDnn(**dnn, (*dnn)->Create(&h), "cudnnCreate").ok());
  int max_algos = 0;
  CHECK(CheckDnn(**dnn, (*dnn)->GetConvolutionForwardAlgorithmMaxCount(h, &max_algos), "max algos").ok());
  CHECK(max_algos > 0);
  CHECK(CheckDnn(**dnn, (*dnn)->Destroy(h), "cudnnDestroy").ok());
}

}  // namespace
}  // namespace kiln::cuda

#endif  // KILN_HAVE_CUDA
