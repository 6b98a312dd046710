// Emulated cuDNN 9: the cudnn_graph library's legacy entry points (handle, stream, versions,
// errors) and the helpers the ops and cnn sources share (cudnn_internal.h).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "tests/emulated_cuda/cudnn_internal.h"
#include "tests/emulated_cuda/half.h"

namespace kiln::emulated_cuda::dnn {
namespace {

thread_local std::string last_error;

std::mutex& LiveMutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<const void*, Kind>& LiveObjects() {
  static auto* objects = new std::unordered_map<const void*, Kind>();
  return *objects;
}

std::string Hex(uintptr_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

}  // namespace

cudnnStatus_t Ok() {
  last_error.clear();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t Fail(std::string_view call, cudnnStatus_t status, const std::string& message) {
  last_error = std::string(call) + ": " + message;
  const char* name = StatusName(status);
  Diagnose(call, std::string(name ? name : "CUDNN_STATUS_?") + ": " + message);
  return status;
}

const char* StatusName(cudnnStatus_t status) {
  switch (static_cast<int>(status)) {
    case 0: return "CUDNN_STATUS_SUCCESS";
    case 1001: return "CUDNN_STATUS_NOT_INITIALIZED";
    case 1002: return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
    case 1003: return "CUDNN_STATUS_SERIALIZATION_VERSION_MISMATCH";
    case 1004: return "CUDNN_STATUS_DEPRECATED";
    case 1005: return "CUDNN_STATUS_LICENSE_ERROR";
    case 1006: return "CUDNN_STATUS_RUNTIME_IN_PROGRESS";
    case 1007: return "CUDNN_STATUS_RUNTIME_FP_OVERFLOW";
    case 1008: return "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED";
    case 2000: return "CUDNN_STATUS_BAD_PARAM";
    case 2001: return "CUDNN_STATUS_INVALID_VALUE";
    case 2002: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
    case 2003: return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
    case 2004: return "CUDNN_STATUS_BAD_PARAM_NOT_FINALIZED";
    case 2005: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
    case 2006: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
    case 2007: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
    case 2008: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
    case 2009: return "CUDNN_STATUS_BAD_PARAM_DUPLICATED_ENTRIES";
    case 2010: return "CUDNN_STATUS_BAD_PARAM_ATTRIBUTE_TYPE";
    case 2011: return "CUDNN_STATUS_BAD_PARAM_CUDA_GRAPH_MISMATCH";
    case 2012: return "CUDNN_STATUS_BAD_PARAM_DESCRIPTOR_TYPE";
    case 3000: return "CUDNN_STATUS_NOT_SUPPORTED";
    case 3001: return "CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN";
    case 3002: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
    case 3003: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
    case 3004: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
    case 3005: return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER";
    case 3006: return "CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART";
    case 3007: return "CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH";
    case 3008: return "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING";
    case 3009: return "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE";
    case 3010: return "CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT";
    case 3011: return "CUDNN_STATUS_NOT_SUPPORTED_PADDING";
    case 3012: return "CUDNN_STATUS_NOT_SUPPORTED_BAD_LAUNCH_PARAM";
    case 3013: return "CUDNN_STATUS_NOT_SUPPORTED_CUDA_GRAPH_NATIVE_API";
    case 3014: return "CUDNN_STATUS_NOT_SUPPORTED_INVALID_DYNAMIC_SHAPE";
    case 4000: return "CUDNN_STATUS_INTERNAL_ERROR";
    case 4001: return "CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED";
    case 4002: return "CUDNN_STATUS_INTERNAL_ERROR_UNEXPECTED_VALUE";
    case 4003: return "CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED";
    case 4004: return "CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED";
    case 4005: return "CUDNN_STATUS_INTERNAL_ERROR_BAD_LAUNCH_PARAM";
    case 4006: return "CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED";
    case 5000: return "CUDNN_STATUS_EXECUTION_FAILED";
    case 5001: return "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER";
    case 5002: return "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS";
    case 5003: return "CUDNN_STATUS_EXECUTION_FAILED_CUDART";
    case 5004: return "CUDNN_STATUS_EXECUTION_FAILED_CURAND";
    default: return nullptr;
  }
}

void Register(const void* object, Kind kind) {
  std::lock_guard<std::mutex> lock(LiveMutex());
  LiveObjects()[object] = kind;
}

void Unregister(const void* object) {
  std::lock_guard<std::mutex> lock(LiveMutex());
  LiveObjects().erase(object);
}

bool IsLive(const void* object, Kind kind) {
  if (object == nullptr) return false;
  std::lock_guard<std::mutex> lock(LiveMutex());
  auto it = LiveObjects().find(object);
  return it != LiveObjects().end() && it->second == kind;
}

size_t ElemSize(cudnnDataType_t dtype) {
  switch (dtype) {
    case CUDNN_DATA_FLOAT: return 4;
    case CUDNN_DATA_DOUBLE: return 8;
    case CUDNN_DATA_HALF: return 2;
    case CUDNN_DATA_INT8: return 1;
    case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_UINT8: return 1;
    case CUDNN_DATA_BFLOAT16: return 2;
    case CUDNN_DATA_INT64: return 8;
    case CUDNN_DATA_BOOLEAN: return 1;
    case CUDNN_DATA_FP8_E4M3: return 1;
    case CUDNN_DATA_FP8_E5M2: return 1;
    case CUDNN_DATA_FP8_E8M0: return 1;
    case CUDNN_DATA_UINT32: return 4;
    case CUDNN_DATA_COMPLEX_FP32: return 8;
    case CUDNN_DATA_COMPLEX_FP64: return 16;
    default: return 0;  // vectorised, sub-byte, or not a data type
  }
}

std::string DTypeName(cudnnDataType_t dtype) {
  switch (dtype) {
    case CUDNN_DATA_FLOAT: return "CUDNN_DATA_FLOAT";
    case CUDNN_DATA_DOUBLE: return "CUDNN_DATA_DOUBLE";
    case CUDNN_DATA_HALF: return "CUDNN_DATA_HALF";
    case CUDNN_DATA_INT8: return "CUDNN_DATA_INT8";
    case CUDNN_DATA_INT32: return "CUDNN_DATA_INT32";
    case CUDNN_DATA_UINT8: return "CUDNN_DATA_UINT8";
    case CUDNN_DATA_BFLOAT16: return "CUDNN_DATA_BFLOAT16";
    case CUDNN_DATA_INT64: return "CUDNN_DATA_INT64";
    case CUDNN_DATA_BOOLEAN: return "CUDNN_DATA_BOOLEAN";
    default: return "data type " + std::to_string(static_cast<int>(dtype));
  }
}

bool Computable(cudnnDataType_t dtype) {
  return dtype == CUDNN_DATA_FLOAT || dtype == CUDNN_DATA_HALF || dtype == CUDNN_DATA_BFLOAT16;
}

int64_t View::Count() const {
  int64_t n = 1;
  for (int i = 0; i < nb; ++i) n *= dims[i];
  return n;
}

size_t View::ExtentBytes() const {
  int64_t last = 0;
  for (int i = 0; i < nb; ++i) last += (dims[i] - 1) * strides[i];
  return static_cast<size_t>(last + 1) * ElemSize(dtype);
}

std::string DimsStr(const int64_t* dims, int nb) {
  std::string s = "[";
  for (int i = 0; i < nb; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string View::Describe() const {
  return DTypeName(dtype) + " " + DimsStr(dims, nb) + " strides " + DimsStr(strides, nb);
}

View ViewOf(const cudnnTensorStruct& t) {
  View v;
  v.dtype = t.dtype;
  v.nb = t.nb;
  for (int i = 0; i < t.nb; ++i) {
    v.dims[i] = t.dims[i];
    v.strides[i] = t.strides[i];
  }
  return v;
}

View ViewOf(const cudnnFilterStruct& f) {
  View v;
  v.dtype = f.dtype;
  v.nb = f.nb;
  for (int i = 0; i < f.nb; ++i) v.dims[i] = f.dims[i];
  if (f.format == CUDNN_TENSOR_NHWC) {
    // Memory order K, spatial..., C.
    int64_t s = 1;
    v.strides[1] = s;
    s *= f.dims[1];
    for (int i = f.nb - 1; i >= 2; --i) {
      v.strides[i] = s;
      s *= f.dims[i];
    }
    v.strides[0] = s;
  } else {
    int64_t s = 1;
    for (int i = f.nb - 1; i >= 0; --i) {
      v.strides[i] = s;
      s *= f.dims[i];
    }
  }
  return v;
}

namespace {

float Load(cudnnDataType_t dtype, const void* base, int64_t off) {
  switch (dtype) {
    case CUDNN_DATA_INT8: return static_cast<const int8_t*>(base)[off];
    case CUDNN_DATA_HALF: return HalfToFloat(static_cast<const uint16_t*>(base)[off]);
    case CUDNN_DATA_BFLOAT16: return BFloat16ToFloat(static_cast<const uint16_t*>(base)[off]);
    default: return static_cast<const float*>(base)[off];
  }
}

void Store(cudnnDataType_t dtype, void* base, int64_t off, float v) {
  switch (dtype) {
    case CUDNN_DATA_HALF: static_cast<uint16_t*>(base)[off] = FloatToHalf(v); break;
    case CUDNN_DATA_BFLOAT16: static_cast<uint16_t*>(base)[off] = FloatToBFloat16(v); break;
    default: static_cast<float*>(base)[off] = v; break;
  }
}

// Calls f(i, offset) for each element in logical row-major order.
template <typename F>
void ForEach(const View& v, F f) {
  int64_t idx[CUDNN_DIM_MAX] = {};
  int64_t off = 0;
  const int64_t n = v.Count();
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int d = v.nb - 1; d >= 0; --d) {
      if (++idx[d] < v.dims[d]) {
        off += v.strides[d];
        break;
      }
      off -= (v.dims[d] - 1) * v.strides[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

std::vector<float> Gather(const View& v, const void* base) {
  std::vector<float> out(static_cast<size_t>(v.Count()));
  ForEach(v, [&](int64_t i, int64_t off) { out[static_cast<size_t>(i)] = Load(v.dtype, base, off); });
  return out;
}

void Blend(const View& v, void* base, const std::vector<float>& r, float alpha, float beta) {
  ForEach(v, [&](int64_t i, int64_t off) {
    float y = alpha * r[static_cast<size_t>(i)];
    if (beta != 0.0f) y += beta * Load(v.dtype, base, off);
    Store(v.dtype, base, off, y);
  });
}

void* DeviceBytes(std::string_view call, const char* what, const void* ptr, size_t bytes,
                  const std::string& layout, cudnnStatus_t* status) {
  if (ptr == nullptr) {
    *status = Fail(call, CUDNN_STATUS_BAD_PARAM, std::string(what) + " is NULL (" + layout + ")");
    return nullptr;
  }
  std::string why;
  const auto address = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr));
  void* host = DeviceRange(address, bytes, &why);
  if (host == nullptr) {
    *status = Fail(call, CUDNN_STATUS_BAD_PARAM,
                   std::string(what) + " at " + Hex(reinterpret_cast<uintptr_t>(ptr)) + ": " + layout + " spans " +
                       std::to_string(bytes) + " bytes [" + Hex(reinterpret_cast<uintptr_t>(ptr)) + ", " +
                       Hex(reinterpret_cast<uintptr_t>(ptr) + bytes) + "), which is not device memory: " + why);
  }
  return host;
}

void* DeviceTensor(std::string_view call, const char* what, const void* ptr, const View& v,
                   cudnnStatus_t* status) {
  return DeviceBytes(call, what, ptr, v.ExtentBytes(), "the tensor " + v.Describe(), status);
}

namespace {

cudnnStatus_t NeedLive(std::string_view call, const char* what, const void* desc, Kind kind, const char* type,
                       bool set) {
  if (desc == nullptr) return Fail(call, CUDNN_STATUS_BAD_PARAM, std::string(what) + " is NULL");
  if (!IsLive(desc, kind)) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM,
                std::string(what) + " is not a live " + type + " (destroyed, or never created)");
  }
  if (!set) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM,
                std::string(what) + " was created but never set (" + type + " without dimensions)");
  }
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

cudnnStatus_t NeedHandle(std::string_view call, const cudnnContext* handle) {
  if (handle == nullptr) return Fail(call, CUDNN_STATUS_BAD_PARAM, "handle is NULL");
  if (!IsLive(handle, Kind::kHandle)) {
    return Fail(call, CUDNN_STATUS_BAD_PARAM, "handle is not a live cuDNN handle (destroyed, or never created)");
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t NeedTensor(std::string_view call, const char* what, const cudnnTensorStruct* desc) {
  return NeedLive(call, what, desc, Kind::kTensor, "tensor descriptor", desc && IsLive(desc, Kind::kTensor) && desc->set);
}
cudnnStatus_t NeedFilter(std::string_view call, const char* what, const cudnnFilterStruct* desc) {
  return NeedLive(call, what, desc, Kind::kFilter, "filter descriptor", desc && IsLive(desc, Kind::kFilter) && desc->set);
}
cudnnStatus_t NeedConvolution(std::string_view call, const char* what, const cudnnConvolutionStruct* desc) {
  return NeedLive(call, what, desc, Kind::kConvolution, "convolution descriptor",
                  desc && IsLive(desc, Kind::kConvolution) && desc->set);
}
cudnnStatus_t NeedActivation(std::string_view call, const char* what, const cudnnActivationStruct* desc) {
  return NeedLive(call, what, desc, Kind::kActivation, "activation descriptor",
                  desc && IsLive(desc, Kind::kActivation) && desc->set);
}
cudnnStatus_t NeedPooling(std::string_view call, const char* what, const cudnnPoolingStruct* desc) {
  return NeedLive(call, what, desc, Kind::kPooling, "pooling descriptor",
                  desc && IsLive(desc, Kind::kPooling) && desc->set);
}
cudnnStatus_t NeedHost(std::string_view call, const char* what, const void* p) {
  if (p == nullptr) return Fail(call, CUDNN_STATUS_BAD_PARAM, std::string(what) + " is NULL");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t Launch(std::string_view call, const cudnnContext* handle, std::function<void()> work) {
  const CUresult r = Enqueue(handle->stream, std::string(call), std::move(work));
  if (r == CUDA_SUCCESS) LogCall(call);  // the log lists operations enqueued (control.h)
  if (r != CUDA_SUCCESS) {
    return Fail(call, CUDNN_STATUS_EXECUTION_FAILED,
                "the work could not be enqueued on stream " + Hex(reinterpret_cast<uintptr_t>(handle->stream)) +
                    ": the driver returned CUresult " + std::to_string(static_cast<int>(r)));
  }
  return Ok();
}

}  // namespace kiln::emulated_cuda::dnn

using namespace kiln::emulated_cuda::dnn;  // NOLINT: the C entry points below are the API

// ---- cudnn_graph library ----------------------------------------------------------------------

// cuDNN API reference, cudnn_graph library: cudnnGetVersion(). major * 10000 + minor * 100 +
// patch of the headers this library is built from (CUDNN_VERSION).
size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

// cuDNN API reference, cudnn_graph library: cudnnGetCudartVersion(): the CUDA runtime version
// the library was built against.
size_t cudnnGetCudartVersion(void) { return CUDART_VERSION; }

// cuDNN API reference, cudnn_graph library: cudnnGraphVersionCheck(). One library stands in for
// every sublibrary, so their versions always agree.
cudnnStatus_t cudnnGraphVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

// cuDNN API reference, cudnn_graph library: cudnnGetErrorString(). The enumerant's name; an
// unknown value gives "CUDNN_UNKNOWN_STATUS".
const char* cudnnGetErrorString(cudnnStatus_t status) {
  const char* name = StatusName(status);
  return name ? name : "CUDNN_UNKNOWN_STATUS";
}

// cuDNN API reference, cudnn_graph library: cudnnGetLastErrorString(). Copies the calling
// thread's last error message (empty after a successful call), truncated to max_size - 1
// characters and NUL-terminated. Reading does not clear it.
void cudnnGetLastErrorString(char* message, size_t max_size) {
  if (message == nullptr || max_size == 0) return;
  const std::string& e = kiln::emulated_cuda::dnn::last_error;
  const size_t n = std::min(e.size(), max_size - 1);
  std::memcpy(message, e.data(), n);
  message[n] = '\0';
}

// cuDNN API reference, cudnn_graph library: cudnnCreate(). Initialises the CUDA runtime (without
// a current context it makes device 0's primary context current); CUDNN_STATUS_NOT_INITIALIZED
// without a device.
cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  constexpr std::string_view kCall = "cudnnCreate";
  if (handle == nullptr) return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "handle (the output pointer) is NULL");
  if (kiln::emulated_cuda::ImplicitContext() != CUDA_SUCCESS) {
    return Fail(kCall, CUDNN_STATUS_NOT_INITIALIZED, "the CUDA runtime cannot initialise a device");
  }
  auto* h = new cudnnContext();
  Register(h, Kind::kHandle);
  *handle = h;
  return Ok();
}

// cuDNN API reference, cudnn_graph library: cudnnDestroy().
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  constexpr std::string_view kCall = "cudnnDestroy";
  if (!IsLive(handle, Kind::kHandle)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "handle is NULL, destroyed, or not a cuDNN handle");
  }
  Unregister(handle);
  delete handle;
  return Ok();
}

// cuDNN API reference, cudnn_graph library: cudnnSetStream(). Later calls on the handle enqueue
// their work on `streamId` (nullptr: the legacy default stream).
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  constexpr std::string_view kCall = "cudnnSetStream";
  if (!IsLive(handle, Kind::kHandle)) {
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "handle is NULL, destroyed, or not a cuDNN handle");
  }
  handle->stream = streamId;
  return Ok();
}
