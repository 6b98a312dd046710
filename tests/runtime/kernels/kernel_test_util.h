// Helpers for CPU kernel unit tests: owning tensors that hand out TensorRefs, and a
// RunKernel that looks the op up and sizes the workspace the way the runtime does.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <string_view>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "runtime/attrs.h"
#include "runtime/half.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/widen.h"
#include "tests/special_floats.h"

namespace kiln::cpu::testing {

template <typename T> constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kFloat32; }
template <> constexpr DType DTypeOf<double>() { return DType::kFloat64; }
template <> constexpr DType DTypeOf<int64_t>() { return DType::kInt64; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kInt32; }
template <> constexpr DType DTypeOf<int8_t>() { return DType::kInt8; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kUInt8; }
template <> constexpr DType DTypeOf<bool>() { return DType::kBool; }

// A dense host tensor owning its bytes. `ref()` views it; an absent tensor has rank -1.
class TestTensor {
 public:
  TestTensor() = default;  // absent
  TestTensor(DType dtype, std::vector<int64_t> dims, size_t elem_size)
      : present_(true), dtype_(dtype), dims_(std::move(dims)) {
    count_ = 1;
    for (int64_t d : dims_) count_ *= d;
    bytes_.assign(static_cast<size_t>(count_) * elem_size + 1, 0);  // +1: never a null data()
  }

  TensorRef ref() const {
    TensorRef r;
    if (!present_) return r;
    r.data = const_cast<uint8_t*>(bytes_.data());
    r.dtype = dtype_;
    r.rank = static_cast<int32_t>(dims_.size());
    r.dims = dims_.data();
    r.num_elements = count_;
    return r;
  }

  template <typename T>
  std::vector<T> values() const {
    std::vector<T> out(static_cast<size_t>(count_));
    if (count_ > 0) std::memcpy(out.data(), bytes_.data(), out.size() * sizeof(T));
    return out;
  }
  template <typename T>
  T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  const std::vector<int64_t>& dims() const { return dims_; }

 private:
  bool present_ = false;
  DType dtype_ = DType::kUndefined;
  std::vector<int64_t> dims_;
  int64_t count_ = 0;
  std::vector<uint8_t> bytes_;
};

template <typename T>
TestTensor Make(std::vector<int64_t> dims, std::vector<T> values) {
  TestTensor t(DTypeOf<T>(), std::move(dims), sizeof(T));
  if (!values.empty()) {
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) t.data<uint8_t>()[i] = values[i] ? 1 : 0;
    } else {
      std::memcpy(t.data<T>(), values.data(), values.size() * sizeof(T));
    }
  }
  return t;
}

// A tensor of `dims` with values uniform in [-range, range] from seed `seed` (float or double).
template <typename T = float>
TestTensor RandomTensor(std::vector<int64_t> dims, uint32_t seed, double range = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-range, range);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<T> v(static_cast<size_t>(n));
  for (T& x : v) x = static_cast<T>(dist(rng));
  return Make<T>(std::move(dims), std::move(v));
}

inline TestTensor Floats(std::vector<int64_t> dims, std::vector<float> v) {
  return Make<float>(std::move(dims), std::move(v));
}
inline TestTensor Int64s(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return Make<int64_t>(std::move(dims), std::move(v));
}
inline TestTensor Int32s(std::vector<int64_t> dims, std::vector<int32_t> v) {
  return Make<int32_t>(std::move(dims), std::move(v));
}
inline TestTensor Bools(std::vector<int64_t> dims, std::vector<bool> v) {
  return Make<bool>(std::move(dims), std::move(v));
}
// An output tensor of the given dtype and shape, zero-filled.
inline TestTensor Output(DType dtype, std::vector<int64_t> dims) {
  return TestTensor(dtype, std::move(dims), DTypeSize(dtype));
}
inline TestTensor Absent() { return TestTensor(); }

// The test files of kiln_tests share translation units (a unity build: tests/unity/check_names.py),
// so the helpers several of them need are here, once.
using kiln::testing::kInf;
using kiln::testing::kNaN;

// start, start + 1, ... (n values).
inline std::vector<float> Iota(int64_t n, float start = 0.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// A float16 or bfloat16 (`dt`) tensor of `values`, each rounded to `dt` by runtime/half.h's
// scalar conversions.
inline TestTensor Halves(DType dt, std::vector<int64_t> dims, const std::vector<float>& values) {
  TestTensor t(dt, std::move(dims), 2);
  for (size_t i = 0; i < values.size(); ++i)
    t.data<uint16_t>()[i] = dt == DType::kFloat16 ? FloatToHalf(values[i]) : FloatToBF16(values[i]);
  return t;
}
// The same, one-dimensional.
inline TestTensor Halves(DType dt, const std::vector<float>& values) {
  return Halves(dt, {static_cast<int64_t>(values.size())}, values);
}

// A float16 or bfloat16 (`dt`) tensor's values widened to float32 (exact) by runtime/half.h's
// scalar conversions.
inline std::vector<float> Widened(DType dt, const TestTensor& t) {
  std::vector<float> out;
  for (uint16_t h : t.values<uint16_t>()) out.push_back(dt == DType::kFloat16 ? HalfToFloat(h) : BF16ToFloat(h));
  return out;
}

// Runs `op` on the tensors through runtime/kernels/widen.h, with the workspace it asks for.
inline Status RunKernel(std::string_view op, const AttrMap& attrs,
                        std::vector<const TestTensor*> inputs,
                        std::vector<const TestTensor*> outputs) {
  const KernelDef* def = FindKernel(op);
  if (def == nullptr) return NotFound("no CPU kernel for " + std::string(op));
  std::vector<TensorRef> in, out;
  for (auto* t : inputs) in.push_back(t->ref());
  for (auto* t : outputs) out.push_back(t->ref());
  size_t ws = KernelWorkspaceBytes(*def, attrs, in, out);
  std::vector<uint8_t> workspace(ws + 1);
  KernelCall call{attrs, in, out, ws ? workspace.data() : nullptr, ws};
  return cpu::RunKernel(*def, call);
}

// Element-wise approximate comparison with a readable failure.
#define KILN_CHECK_FLOATS(actual, expected)                                   \
  do {                                                                        \
    const std::vector<float> kiln_a_ = (actual);                              \
    const std::vector<float> kiln_e_ = (expected);                            \
    REQUIRE(kiln_a_.size() == kiln_e_.size());                                \
    for (size_t kiln_i_ = 0; kiln_i_ < kiln_a_.size(); ++kiln_i_) {           \
      INFO("index " << kiln_i_);                                              \
      CHECK(kiln_a_[kiln_i_] == doctest::Approx(kiln_e_[kiln_i_]).epsilon(1e-5)); \
    }                                                                         \
  } while (0)

}  // namespace kiln::cpu::testing
