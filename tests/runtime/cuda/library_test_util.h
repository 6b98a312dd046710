// Helpers for the cuBLASLt / cuDNN executor tests (blas_test.cc, dnn_test.cc): host tensors that
// view as DeviceTensor (shapes only, or device copies on a GPU) and as the CPU kernels'
// TensorRef, a CPU-kernel runner (the reference), and a small device session for "[gpu]" cases.
#pragma once

#if KILN_HAVE_CUDA

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/attrs.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/widen.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/op_call.h"
#include "runtime/half.h"

namespace kiln::cuda::testing {

// A dense host tensor of float values (or a shape with another dtype and no data); with dtype
// float16 / bfloat16 the values are ones that dtype represents (see Rounded), stored as that
// dtype on the device. rank -1: absent.
struct HostTensor {
  std::vector<int64_t> dims;
  DType dtype = DType::kFloat32;
  std::vector<float> v;
  int32_t rank = 0;

  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  bool present() const { return rank >= 0; }
  // The shape as an executor sees it; `ptr` is the device copy (0 for shape-only checks).
  DeviceTensor Dev(CUdeviceptr ptr = 0) const {
    if (!present()) return DeviceTensor{};
    return DeviceTensor{ptr, dtype, rank, dims.data(), count()};
  }
  cpu::TensorRef Host() {
    if (!present()) return cpu::TensorRef{};
    return cpu::TensorRef{v.data(), dtype, rank, dims.data(), count()};
  }
};

inline HostTensor Shape(std::vector<int64_t> dims, DType dtype = DType::kFloat32) {
  HostTensor t;
  t.rank = static_cast<int32_t>(dims.size());
  t.dims = std::move(dims);
  t.dtype = dtype;
  return t;
}
inline HostTensor Absent() {
  HostTensor t;
  t.rank = -1;
  return t;
}
inline HostTensor Zeros(std::vector<int64_t> dims) {
  HostTensor t = Shape(std::move(dims));
  t.v.assign(static_cast<size_t>(t.count()), 0.0f);
  return t;
}
// Uniform in [-1, 1), reproducible per seed.
inline HostTensor Random(std::vector<int64_t> dims, uint32_t seed) {
  HostTensor t = Zeros(std::move(dims));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : t.v) x = dist(gen);
  return t;
}

// `t` as dtype `dt` (float32, float16 or bfloat16): every value rounded to it (to nearest even,
// as runtime/half.h and the CPU backend round) and the dtype set, for a device upload.
inline HostTensor Rounded(HostTensor t, DType dt) {
  t.dtype = dt;
  for (float& x : t.v) {
    if (dt == DType::kFloat16) x = HalfToFloat(FloatToHalf(x));
    if (dt == DType::kBFloat16) x = BF16ToFloat(FloatToBF16(x));
  }
  return t;
}
// The same values as a float32 tensor (the CPU reference's operand).
inline HostTensor AsFloat32(HostTensor t) {
  if (t.present()) t.dtype = DType::kFloat32;
  return t;
}

inline std::vector<DeviceTensor> DevViews(const std::vector<const HostTensor*>& ts) {
  std::vector<DeviceTensor> out;
  for (const HostTensor* t : ts) out.push_back(t->Dev());
  return out;
}

// Runs the CPU backend's kernel for `op` (the reference) on host tensors.
inline Status RunCpu(std::string_view op, const AttrMap& attrs, const std::vector<HostTensor*>& inputs,
                     const std::vector<HostTensor*>& outputs) {
  const cpu::KernelDef* k = cpu::FindKernel(op);
  if (k == nullptr) return NotFound(std::string(op));
  std::vector<cpu::TensorRef> in, out;
  for (HostTensor* t : inputs) in.push_back(t->Host());
  for (HostTensor* t : outputs) out.push_back(t->Host());
  std::vector<uint8_t> ws(cpu::KernelWorkspaceBytes(*k, attrs, in, out));
  cpu::KernelCall call{attrs, in, out, ws.data(), ws.size()};
  return cpu::RunKernel(*k, call);
}

// Largest |a - b| / (1 + |b|) over two equally long float vectors (+inf on a length mismatch).
inline double MaxRelDiff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i])) / (1.0 + std::fabs(double(b[i])));
    if (!(d <= worst)) worst = d;  // NaN-safe: a NaN difference wins
  }
  return worst;
}

// Device 0's primary context made current on this thread, a stream, and device buffers freed
// at the end. Only for "[gpu]" cases (after KILN_REQUIRE_GPU); every failure is a test failure.
class GpuSession {
 public:
  GpuSession() {
    auto drv = LoadDriver();
    REQUIRE_MESSAGE(drv.ok(), drv.status().ToString());
    drv_ = *drv;
    REQUIRE(Ok(drv_->DeviceGet(&dev_, 0), "cuDeviceGet"));
    REQUIRE(Ok(drv_->DevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain"));
    REQUIRE(Ok(drv_->CtxSetCurrent(ctx_), "cuCtxSetCurrent"));
    REQUIRE(Ok(drv_->StreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  }
  ~GpuSession() {
    if (stream_) drv_->StreamSynchronize(stream_);
    for (CUdeviceptr p : buffers_) drv_->MemFree(p);
    if (stream_) drv_->StreamDestroy(stream_);
    if (ctx_) drv_->DevicePrimaryCtxRelease(dev_);
  }
  GpuSession(const GpuSession&) = delete;
  GpuSession& operator=(const GpuSession&) = delete;

  CUstream stream() const { return stream_; }

  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    REQUIRE(Ok(drv_->MemAlloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc"));
    buffers_.push_back(p);
    return p;
  }
  // A device copy of `t` in its dtype (float32, or float16 / bfloat16 bits); nothing for an
  // absent tensor.
  CUdeviceptr Upload(const HostTensor& t) {
    if (!t.present()) return 0;
    if (t.dtype == DType::kFloat32) return UploadBytes(t.v.data(), t.v.size() * sizeof(float));
    REQUIRE((t.dtype == DType::kFloat16 || t.dtype == DType::kBFloat16));
    std::vector<uint16_t> bits(t.v.size());
    for (size_t i = 0; i < bits.size(); ++i)
      bits[i] = t.dtype == DType::kFloat16 ? FloatToHalf(t.v[i]) : FloatToBF16(t.v[i]);
    return UploadBytes(bits.data(), bits.size() * sizeof(uint16_t));
  }
  // Waits for the stream, then copies `count` elements of `dtype` (float32, float16 or
  // bfloat16) back, as floats.
  std::vector<float> Download(CUdeviceptr p, int64_t count, DType dtype = DType::kFloat32) {
    std::vector<float> out(static_cast<size_t>(count));
    REQUIRE(Ok(drv_->StreamSynchronize(stream_), "cuStreamSynchronize"));
    if (count == 0) return out;
    if (dtype == DType::kFloat32) {
      REQUIRE(
          Ok(drv_->MemcpyDtoHAsync(out.data(), p, out.size() * sizeof(float), stream_), "cuMemcpyDtoHAsync"));
    } else {
      std::vector<uint16_t> bits(out.size());
      REQUIRE(Ok(drv_->MemcpyDtoHAsync(bits.data(), p, bits.size() * sizeof(uint16_t), stream_),
                 "cuMemcpyDtoHAsync"));
      REQUIRE(Ok(drv_->StreamSynchronize(stream_), "cuStreamSynchronize"));
      for (size_t i = 0; i < out.size(); ++i)
        out[i] = dtype == DType::kFloat16 ? HalfToFloat(bits[i]) : BF16ToFloat(bits[i]);
    }
    REQUIRE(Ok(drv_->StreamSynchronize(stream_), "cuStreamSynchronize"));
    return out;
  }

 private:
  bool Ok(CUresult r, const char* what) {
    Status st = Check(*drv_, r, what);
    if (!st.ok()) MESSAGE(st.ToString());
    return st.ok();
  }
  CUdeviceptr UploadBytes(const void* data, size_t bytes) {
    CUdeviceptr p = Alloc(bytes);
    if (bytes) REQUIRE(Ok(drv_->MemcpyHtoD(p, data, bytes), "cuMemcpyHtoD"));
    return p;
  }
  const Driver* drv_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  std::vector<CUdeviceptr> buffers_;
};

}  // namespace kiln::cuda::testing

#endif  // KILN_HAVE_CUDA
