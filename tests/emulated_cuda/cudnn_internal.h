// The emulated cuDNN 9 legacy (descriptor) API: what its sources (cudnn_graph.cc,
// cudnn_ops.cc, cudnn_cnn.cc, the backend API's cudnn_backend.cc and the RNN API's cudnn_adv.cc) share. Test support only: built into one shared library that
// stands in for libcudnn.so.9 and its sublibraries libcudnn_graph / _ops / _cnn.so.9.
//
// Everything here is written from NVIDIA's cuDNN 9 API reference (the cudnn_graph, cudnn_ops
// and cudnn_cnn library chapters) and computes with plain reference loops; nothing is shared
// with Kiln's runtime. Device memory is reached only through emulated_cuda::DeviceRange, and
// every computation runs through emulated_cuda::Enqueue on the handle's stream.
//
// Supported data: CUDNN_DATA_FLOAT, CUDNN_DATA_HALF and CUDNN_DATA_BFLOAT16 tensors, computed in
// float (a convolution accumulates in float and rounds its output once). Other data types are
// accepted by the descriptor setters (as cuDNN's are) and refused by the compute calls with
// CUDNN_STATUS_NOT_SUPPORTED.
//
// Diagnostics: every refused call sets the calling thread's last-error message (read back by
// cudnnGetLastErrorString) naming the argument and the reason, and writes the same through
// emulated_cuda::Diagnose; every successful call clears the message.
//
// Build: one shared library from cudnn_graph.cc, cudnn_ops.cc, cudnn_cnn.cc and cudnn_backend.cc, linked against
// the emulated driver, with hidden visibility and -Wl,--version-script=cudnn_exports.map (which
// exports the cudnn* entry points only), named libcudnn.so.9 with libcudnn_graph.so.9,
// libcudnn_ops.so.9 and libcudnn_cnn.so.9 beside it as links to the same file.
#pragma once

// The entry points keep default visibility even when the library is built with
// -fvisibility=hidden, so that it exports exactly the cuDNN symbols and nothing internal.
#pragma GCC visibility push(default)
#include <cudnn.h>
#pragma GCC visibility pop

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tests/emulated_cuda/emulator.h"

// The opaque structs behind cuDNN's handle and descriptor typedefs (cudnn_graph.h, cudnn_ops.h,
// cudnn_cnn.h declare them incomplete). Plain data, copied by value into enqueued work.
struct cudnnContext {
  CUstream stream = nullptr;  // cudnnSetStream; nullptr is the legacy default stream
};

struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  int nb = 0;
  int64_t dims[CUDNN_DIM_MAX] = {};
  int64_t strides[CUDNN_DIM_MAX] = {};  // in elements, each >= 1
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int nb = 0;
  int64_t dims[CUDNN_DIM_MAX] = {};  // [K, C/group, spatial...] whatever the format
};

struct cudnnConvolutionStruct {
  bool set = false;
  int spatial = 0;  // arrayLength
  int pad[CUDNN_DIM_MAX - 2] = {};
  int stride[CUDNN_DIM_MAX - 2] = {};
  int dilation[CUDNN_DIM_MAX - 2] = {};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

struct cudnnActivationStruct {
  bool set = false;
  cudnnActivationMode_t mode = CUDNN_ACTIVATION_RELU;
  cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
  double coef = 0.0;
};

struct cudnnPoolingStruct {
  bool set = false;
  cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
  cudnnNanPropagation_t nan = CUDNN_NOT_PROPAGATE_NAN;
  int spatial = 0;
  int window[CUDNN_DIM_MAX - 2] = {};
  int pad[CUDNN_DIM_MAX - 2] = {};
  int stride[CUDNN_DIM_MAX - 2] = {};
};

// Internal helpers stay hidden: the library exports the cuDNN entry points only.
#pragma GCC visibility push(hidden)
namespace kiln::emulated_cuda::dnn {

// ---- Status and the per-thread last-error message ------------------------------------------

// Clears the calling thread's last-error message; returns CUDNN_STATUS_SUCCESS.
cudnnStatus_t Ok();
// Sets the calling thread's last-error message to "<call>: <message>", reports it through
// Diagnose, and returns `status`.
cudnnStatus_t Fail(std::string_view call, cudnnStatus_t status, const std::string& message);
// The enumerant's name, e.g. "CUDNN_STATUS_BAD_PARAM"; nullptr for a value cuDNN does not define.
const char* StatusName(cudnnStatus_t status);

// ---- Live objects ----------------------------------------------------------------------------

// Handles and descriptors are registered while alive, so that a destroyed or never-created one
// is refused with CUDNN_STATUS_BAD_PARAM rather than read (cuDNN's behaviour there is undefined;
// this is a test aid).
enum class Kind : uint8_t { kHandle, kTensor, kFilter, kConvolution, kActivation, kPooling, kBackend, kRnn, kRnnData };
void Register(const void* object, Kind kind);
void Unregister(const void* object);
bool IsLive(const void* object, Kind kind);

// ---- Tensors ---------------------------------------------------------------------------------

// Bytes of one element, or 0 for a type whose elements are not whole bytes or not known here.
size_t ElemSize(cudnnDataType_t dtype);
// "CUDNN_DATA_FLOAT", ... (the enumerant's name, or "data type N").
std::string DTypeName(cudnnDataType_t dtype);
// Float, half or bfloat16: the types the compute calls run.
bool Computable(cudnnDataType_t dtype);

// A strided view of device memory, copied into enqueued work: logical dims, strides (elements).
struct View {
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  int nb = 0;
  int64_t dims[CUDNN_DIM_MAX] = {};
  int64_t strides[CUDNN_DIM_MAX] = {};
  int64_t Count() const;
  // Bytes from the base pointer to the end of the last element the strides reach.
  size_t ExtentBytes() const;
  // "CUDNN_DATA_HALF [1,4,8,8] strides [256,64,8,1]"
  std::string Describe() const;
};
View ViewOf(const cudnnTensorStruct& t);
// A filter as a tensor: NCHW is packed [K, C, spatial...]; NHWC keeps C innermost.
View ViewOf(const cudnnFilterStruct& f);
// "[2,3,4]"
std::string DimsStr(const int64_t* dims, int nb);

// The elements in logical row-major order, as float.
std::vector<float> Gather(const View& v, const void* base);
// y = alpha * r + beta * y over the view (r in logical row-major order), each element rounded
// once to the view's type. beta == 0 does not read y (the output may hold anything, even NaN,
// as cuDNN's "Scaling Parameters" section allows).
void Blend(const View& v, void* base, const std::vector<float>& r, float alpha, float beta);

// ---- Argument checks -------------------------------------------------------------------------
// Each returns CUDNN_STATUS_SUCCESS, or what Fail returned (BAD_PARAM) naming the argument.

#define KILN_DNN_TRY(expr)                                        \
  do {                                                            \
    const cudnnStatus_t kiln_dnn_status_ = (expr);                \
    if (kiln_dnn_status_ != CUDNN_STATUS_SUCCESS) return kiln_dnn_status_; \
  } while (0)

cudnnStatus_t NeedHandle(std::string_view call, const cudnnContext* handle);
// A live descriptor that has been set (`what` names the argument, e.g. "xDesc").
cudnnStatus_t NeedTensor(std::string_view call, const char* what, const cudnnTensorStruct* desc);
cudnnStatus_t NeedFilter(std::string_view call, const char* what, const cudnnFilterStruct* desc);
cudnnStatus_t NeedConvolution(std::string_view call, const char* what, const cudnnConvolutionStruct* desc);
cudnnStatus_t NeedActivation(std::string_view call, const char* what, const cudnnActivationStruct* desc);
cudnnStatus_t NeedPooling(std::string_view call, const char* what, const cudnnPoolingStruct* desc);
// A non-NULL host pointer (scaling parameters, output pointers).
cudnnStatus_t NeedHost(std::string_view call, const char* what, const void* p);

// The host address of the device bytes [ptr, ptr + bytes) after emulated_cuda::DeviceRange
// accepted them; else nullptr with *status set by Fail (BAD_PARAM) naming `what` and `layout`.
void* DeviceBytes(std::string_view call, const char* what, const void* ptr, size_t bytes,
                  const std::string& layout, cudnnStatus_t* status);
// DeviceBytes over the extent of a tensor view.
void* DeviceTensor(std::string_view call, const char* what, const void* ptr, const View& v,
                   cudnnStatus_t* status);

// The scaling parameters (cuDNN "Scaling Parameters"): host floats for float, half and bfloat16
// data.
inline float Scale(const void* p) { return *static_cast<const float*>(p); }

// The activation of `a` applied to v, in float (cudnn_ops.cc).
float Activate(const cudnnActivationStruct& a, float v);

// Enqueues `work` on the handle's stream and logs the call (LogCall) once enqueued; maps a
// failed Enqueue to CUDNN_STATUS_EXECUTION_FAILED (through Fail), else returns Ok().
cudnnStatus_t Launch(std::string_view call, const cudnnContext* handle, std::function<void()> work);

}  // namespace kiln::emulated_cuda::dnn
#pragma GCC visibility pop
