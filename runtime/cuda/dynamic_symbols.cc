// cuBLASLt and cuDNN through dlopen + dlsym. Their exported names carry no ABI suffixes, so
// plain dlsym is right (unlike the driver's cuGetProcAddress); the major-version check stands
// in for the ABI check: within a major version NVIDIA keeps these entry points compatible.
#include "runtime/cuda/dynamic_symbols.h"
#include "runtime/fault_injection.h"

#include <cuda.h>  // CUDA_VERSION
#include <dlfcn.h>
#include <limits.h>

#include <array>
#include <string>
#include <utility>

namespace kiln::cuda {
namespace {

constexpr int kCudaMajor = CUDA_VERSION / 1000;

// dlerror's message, which names the file; for a failure it did not see (an injected fault,
// runtime/fault_injection.h), the file and that.
std::string DlError(const std::string& file) {
  const char* e = dlerror();
  return e ? e : file + ": not opened, and dlerror() has no message";
}

std::string LibVersion(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string BlasHint() { return "install the CUDA " + std::to_string(kCudaMajor) + " runtime libraries"; }
std::string DnnHint() {
  return "install cuDNN " + std::to_string(CUDNN_MAJOR) + " for CUDA " + std::to_string(kCudaMajor);
}

// The first of `names` that dlopen accepts, and its name; else every dlerror, "; "-joined.
struct Opened {
  void* handle = nullptr;
  std::string name;
  std::string errors;
};

Opened OpenFirst(const std::vector<std::string>& names) {
  Opened o;
  for (const std::string& name : names) {
    // RTLD_LOCAL: nothing else in the process binds to these symbols by accident. Handles are
    // never closed: the tables outlive their callers.
    o.handle = fault::Inject("dlopen") ? nullptr : dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (o.handle != nullptr) {
      o.name = name;
      return o;
    }
    if (!o.errors.empty()) o.errors += "; ";
    o.errors += DlError(name);
  }
  if (names.empty()) o.errors = "no file name given";
  return o;
}

// dlsym with an error naming the symbol, the file it was looked for in, and the remedy.
class Symbols {
 public:
  Symbols(void* handle, std::string library, std::string hint)
      : handle_(handle), library_(std::move(library)), hint_(std::move(hint)) {}

  // One typed wrapper per entry point's type over one lookup, so that each costs the runtime a
  // call rather than its own copy of the lookup and its error.
  template <typename Fn>
  Status operator()(const char* name, Fn& fn) const {
    void* p = nullptr;
    Status st = Find(name, &p);
    fn = reinterpret_cast<Fn>(p);
    return st;
  }

 private:
  Status Find(const char* name, void** p) const {
    dlerror();  // clear a stale error, so a failure below reports its own
    *p = dlsym(handle_, name);
    if (*p == nullptr) return FailedPrecondition(library_ + " lacks " + name + " (" + DlError(library_) + "); " + hint_);
    return Status::Ok();
  }

  void* handle_;
  std::string library_;
  std::string hint_;
};

// The folder `handle` was loaded from, or "" when the loader does not say.
std::string OriginOf(void* handle) {
  std::array<char, PATH_MAX + 1> dir{};
  if (dlinfo(handle, RTLD_DI_ORIGIN, dir.data()) != 0) return "";
  return dir.data();
}

}  // namespace

Status LoadBlasFrom(const std::vector<std::string>& names, Blas& out) {
  Opened lib = OpenFirst(names);
  if (lib.handle == nullptr)
    return FailedPrecondition("cuBLASLt not found (" + lib.errors + "); " + BlasHint());
  Blas b;
  b.path = lib.name;
  const Symbols sym(lib.handle, "cuBLASLt (" + lib.name + ")", BlasHint());
  // The version first: a library of another major version is reported as such, not by the
  // first entry point it happens to lack.
  KILN_RETURN_IF_ERROR(sym("cublasLtGetVersion", b.GetVersion));
  b.version = b.GetVersion();
  if (b.major() != CUBLAS_VER_MAJOR) {
    return Incompatible("cuBLASLt " + LibVersion(b.version) + " (" + lib.name + ") is not major version " +
                        std::to_string(CUBLAS_VER_MAJOR) + ", which Kiln was built with; " + BlasHint());
  }
  KILN_RETURN_IF_ERROR(sym("cublasLtGetCudartVersion", b.GetCudartVersion));
  b.cudart_version = b.GetCudartVersion();
  KILN_RETURN_IF_ERROR(sym("cublasLtCreate", b.Create));
  KILN_RETURN_IF_ERROR(sym("cublasLtDestroy", b.Destroy));
  KILN_RETURN_IF_ERROR(sym("cublasLtGetStatusName", b.GetStatusName));
  KILN_RETURN_IF_ERROR(sym("cublasLtGetStatusString", b.GetStatusString));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmulDescCreate", b.MatmulDescCreate));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmulDescDestroy", b.MatmulDescDestroy));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmulDescSetAttribute", b.MatmulDescSetAttribute));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatrixLayoutCreate", b.MatrixLayoutCreate));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatrixLayoutDestroy", b.MatrixLayoutDestroy));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatrixLayoutSetAttribute", b.MatrixLayoutSetAttribute));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmulPreferenceCreate", b.MatmulPreferenceCreate));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmulPreferenceDestroy", b.MatmulPreferenceDestroy));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmulPreferenceSetAttribute", b.MatmulPreferenceSetAttribute));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmulAlgoGetHeuristic", b.MatmulAlgoGetHeuristic));
  KILN_RETURN_IF_ERROR(sym("cublasLtMatmul", b.Matmul));
  KILN_FAULT_REFUSABLE(b, Create, "cublasLtCreate", CUBLAS_STATUS_ALLOC_FAILED);  // runtime/fault_injection.h
  out = std::move(b);
  return Status::Ok();
}

Status LoadDnnFrom(const std::vector<std::string>& names, Dnn& out) {
  Opened shim = OpenFirst(names);
  if (shim.handle == nullptr)
    return FailedPrecondition("cuDNN not found (" + shim.errors + "); " + DnnHint());
  const std::string dir = OriginOf(shim.handle);

  // A sublibrary: beside the shim first (the folder may not be on the loader's path when the
  // shim was named by its path), then wherever the loader finds it.
  auto open_sub = [&](const char* part, void*& handle) -> Status {
    const std::string base = std::string("libcudnn_") + part + ".so";
    const std::string versioned = base + "." + std::to_string(CUDNN_MAJOR);
    std::vector<std::string> candidates;
    if (!dir.empty()) candidates.push_back(dir + "/" + versioned);
    candidates.push_back(versioned);
    candidates.push_back(base);
    Opened sub = OpenFirst(candidates);
    if (sub.handle == nullptr) {
      return FailedPrecondition("cuDNN sublibrary " + versioned + " not found beside " + shim.name +
                                (dir.empty() ? "" : " (" + dir + ")") + " nor on the library path (" +
                                sub.errors + "); " + DnnHint());
    }
    handle = sub.handle;
    return Status::Ok();
  };
  void* graph = nullptr;
  void* ops = nullptr;
  void* cnn = nullptr;
  void* adv = nullptr;
  KILN_RETURN_IF_ERROR(open_sub("graph", graph));
  KILN_RETURN_IF_ERROR(open_sub("ops", ops));
  KILN_RETURN_IF_ERROR(open_sub("cnn", cnn));
  KILN_RETURN_IF_ERROR(open_sub("adv", adv));
  const std::string major = std::to_string(CUDNN_MAJOR);
  const Symbols g(graph, "cuDNN sublibrary libcudnn_graph.so." + major, DnnHint());
  const Symbols o(ops, "cuDNN sublibrary libcudnn_ops.so." + major, DnnHint());
  const Symbols c(cnn, "cuDNN sublibrary libcudnn_cnn.so." + major, DnnHint());
  const Symbols a(adv, "cuDNN sublibrary libcudnn_adv.so." + major, DnnHint());

  Dnn d;
  d.path = shim.name;
  KILN_RETURN_IF_ERROR(g("cudnnGetVersion", d.GetVersion));
  d.version = d.GetVersion();
  if (d.major() != CUDNN_MAJOR) {
    return Incompatible("cuDNN " + LibVersion(d.version) + " (" + shim.name + ") is not major version " +
                        major + ", which Kiln was built with; " + DnnHint());
  }
  KILN_RETURN_IF_ERROR(g("cudnnGetErrorString", d.GetErrorString));
  // Each sublibrary checks that it and libcudnn_graph come from the same release; mixing
  // releases fails here rather than in the first convolution.
  using VersionCheckFn = cudnnStatus_t (*)();
  const std::pair<const Symbols*, const char*> checks[] = {
      {&g, "cudnnGraphVersionCheck"}, {&o, "cudnnOpsVersionCheck"}, {&c, "cudnnCnnVersionCheck"}, {&a, "cudnnAdvVersionCheck"}};
  for (const auto& [lib, name] : checks) {
    VersionCheckFn check = nullptr;
    KILN_RETURN_IF_ERROR((*lib)(name, check));
    if (cudnnStatus_t s = check(); s != CUDNN_STATUS_SUCCESS) {
      return Incompatible(std::string("cuDNN's sublibraries are from different releases (") + name + ": " +
                          d.GetErrorString(s) + ", cuDNN " + LibVersion(d.version) + " in " + shim.name +
                          "); " + DnnHint());
    }
  }

  KILN_RETURN_IF_ERROR(g("cudnnCreate", d.Create));
  KILN_RETURN_IF_ERROR(g("cudnnDestroy", d.Destroy));
  KILN_RETURN_IF_ERROR(g("cudnnSetStream", d.SetStream));
  KILN_RETURN_IF_ERROR(g("cudnnGetCudartVersion", d.GetCudartVersion));
  KILN_RETURN_IF_ERROR(g("cudnnGetLastErrorString", d.GetLastErrorString));
  d.cudart_version = d.GetCudartVersion();
  KILN_RETURN_IF_ERROR(g("cudnnBackendCreateDescriptor", d.BackendCreateDescriptor));
  KILN_RETURN_IF_ERROR(g("cudnnBackendDestroyDescriptor", d.BackendDestroyDescriptor));
  KILN_RETURN_IF_ERROR(g("cudnnBackendSetAttribute", d.BackendSetAttribute));
  KILN_RETURN_IF_ERROR(g("cudnnBackendGetAttribute", d.BackendGetAttribute));
  KILN_RETURN_IF_ERROR(g("cudnnBackendFinalize", d.BackendFinalize));
  KILN_RETURN_IF_ERROR(g("cudnnBackendExecute", d.BackendExecute));

  KILN_RETURN_IF_ERROR(o("cudnnCreateTensorDescriptor", d.CreateTensorDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnDestroyTensorDescriptor", d.DestroyTensorDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnSetTensorNdDescriptor", d.SetTensorNdDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnSetTensor4dDescriptor", d.SetTensor4dDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnCreateFilterDescriptor", d.CreateFilterDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnDestroyFilterDescriptor", d.DestroyFilterDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnSetFilterNdDescriptor", d.SetFilterNdDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnCreateActivationDescriptor", d.CreateActivationDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnDestroyActivationDescriptor", d.DestroyActivationDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnSetActivationDescriptor", d.SetActivationDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnActivationForward", d.ActivationForward));
  KILN_RETURN_IF_ERROR(o("cudnnAddTensor", d.AddTensor));
  KILN_RETURN_IF_ERROR(o("cudnnCreatePoolingDescriptor", d.CreatePoolingDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnDestroyPoolingDescriptor", d.DestroyPoolingDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnSetPoolingNdDescriptor", d.SetPoolingNdDescriptor));
  KILN_RETURN_IF_ERROR(o("cudnnPoolingForward", d.PoolingForward));

  KILN_RETURN_IF_ERROR(c("cudnnCreateConvolutionDescriptor", d.CreateConvolutionDescriptor));
  KILN_RETURN_IF_ERROR(c("cudnnDestroyConvolutionDescriptor", d.DestroyConvolutionDescriptor));
  KILN_RETURN_IF_ERROR(c("cudnnSetConvolutionNdDescriptor", d.SetConvolutionNdDescriptor));
  KILN_RETURN_IF_ERROR(c("cudnnSetConvolutionGroupCount", d.SetConvolutionGroupCount));
  KILN_RETURN_IF_ERROR(c("cudnnSetConvolutionMathType", d.SetConvolutionMathType));
  KILN_RETURN_IF_ERROR(c("cudnnGetConvolutionNdForwardOutputDim", d.GetConvolutionNdForwardOutputDim));
  KILN_RETURN_IF_ERROR(
      c("cudnnGetConvolutionForwardAlgorithmMaxCount", d.GetConvolutionForwardAlgorithmMaxCount));
  KILN_RETURN_IF_ERROR(c("cudnnGetConvolutionForwardAlgorithm_v7", d.GetConvolutionForwardAlgorithm_v7));
  KILN_RETURN_IF_ERROR(c("cudnnGetConvolutionForwardWorkspaceSize", d.GetConvolutionForwardWorkspaceSize));
  KILN_RETURN_IF_ERROR(c("cudnnConvolutionForward", d.ConvolutionForward));
  KILN_RETURN_IF_ERROR(c("cudnnConvolutionBiasActivationForward", d.ConvolutionBiasActivationForward));
  KILN_RETURN_IF_ERROR(
      c("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", d.GetConvolutionBackwardDataAlgorithmMaxCount));
  KILN_RETURN_IF_ERROR(
      c("cudnnGetConvolutionBackwardDataAlgorithm_v7", d.GetConvolutionBackwardDataAlgorithm_v7));
  KILN_RETURN_IF_ERROR(
      c("cudnnGetConvolutionBackwardDataWorkspaceSize", d.GetConvolutionBackwardDataWorkspaceSize));
  KILN_RETURN_IF_ERROR(c("cudnnConvolutionBackwardData", d.ConvolutionBackwardData));

  KILN_RETURN_IF_ERROR(a("cudnnCreateRNNDescriptor", d.CreateRNNDescriptor));
  KILN_RETURN_IF_ERROR(a("cudnnDestroyRNNDescriptor", d.DestroyRNNDescriptor));
  KILN_RETURN_IF_ERROR(a("cudnnSetRNNDescriptor_v8", d.SetRNNDescriptor_v8));
  KILN_RETURN_IF_ERROR(a("cudnnCreateRNNDataDescriptor", d.CreateRNNDataDescriptor));
  KILN_RETURN_IF_ERROR(a("cudnnDestroyRNNDataDescriptor", d.DestroyRNNDataDescriptor));
  KILN_RETURN_IF_ERROR(a("cudnnSetRNNDataDescriptor", d.SetRNNDataDescriptor));
  KILN_RETURN_IF_ERROR(a("cudnnGetRNNWeightSpaceSize", d.GetRNNWeightSpaceSize));
  KILN_RETURN_IF_ERROR(a("cudnnGetRNNWeightParams", d.GetRNNWeightParams));
  KILN_RETURN_IF_ERROR(a("cudnnGetRNNTempSpaceSizes", d.GetRNNTempSpaceSizes));
  KILN_RETURN_IF_ERROR(a("cudnnRNNForward", d.RNNForward));
  KILN_FAULT_REFUSABLE(d, Create, "cudnnCreate", CUDNN_STATUS_ALLOC_FAILED);  // runtime/fault_injection.h
  out = std::move(d);
  return Status::Ok();
}

namespace {

// The first outcome of a loader, kept for the life of the process (function-local statics
// are initialised once, thread-safely).
template <typename Table>
struct Loaded {
  Table table;
  Status status;
};

std::vector<std::string> Sonames(const char* base, int major) {
  return {std::string(base) + "." + std::to_string(major), base};
}

}  // namespace

Result<const Blas*> LoadBlas() {
  static const Loaded<Blas> loaded = [] {
    Loaded<Blas> l;
    l.status = LoadBlasFrom(Sonames("libcublasLt.so", CUBLAS_VER_MAJOR), l.table);
    return l;
  }();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.table;
}

Result<const Dnn*> LoadDnn() {
  static const Loaded<Dnn> loaded = [] {
    Loaded<Dnn> l;
    l.status = LoadDnnFrom(Sonames("libcudnn.so", CUDNN_MAJOR), l.table);
    return l;
  }();
  if (!loaded.status.ok()) return loaded.status;
  return &loaded.table;
}

Status CheckBlas(const Blas& blas, cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  std::string msg = std::string(what) + ": ";
  const char* name = blas.GetStatusName != nullptr ? blas.GetStatusName(status) : nullptr;
  if (name == nullptr) {
    msg += "cuBLAS status " + std::to_string(static_cast<int>(status));
  } else {
    msg += name;
    const char* text = blas.GetStatusString != nullptr ? blas.GetStatusString(status) : nullptr;
    if (text != nullptr && *text != '\0') msg += std::string(": ") + text;
  }
  return Status(StatusCode::kDeviceError, std::move(msg));
}

Status CheckDnn(const Dnn& dnn, cudnnStatus_t status, std::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::Ok();
  std::string msg = std::string(what) + ": ";
  const char* name = dnn.GetErrorString != nullptr ? dnn.GetErrorString(status) : nullptr;
  if (name == nullptr) {
    msg += "cuDNN status " + std::to_string(static_cast<int>(status));
  } else {
    msg += name;
    // cuDNN 9 keeps a per-thread message for the last failure, which says which argument was
    // wrong; the status name alone rarely does.
    if (dnn.GetLastErrorString != nullptr) {
      std::array<char, 1024> detail{};
      dnn.GetLastErrorString(detail.data(), detail.size());
      if (detail[0] != '\0') msg += std::string(" (") + detail.data() + ")";
    }
  }
  return Status(StatusCode::kDeviceError, std::move(msg));
}

}  // namespace kiln::cuda
