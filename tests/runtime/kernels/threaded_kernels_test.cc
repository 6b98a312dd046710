// The kernels that split their outer loops over a thread pool (KernelCall::threads): the
// fused-program interpreter, Conv (depthwise channels, whole im2col tiles or pointwise
// GEMM blocks, or a tile's im2col channels and GEMM blocks),
// ConvTranspose (GEMM blocks, col2im channels), MatMul and Gemm (GEMM blocks) and pooling
// (planes). Each is run without a pool and on pools of 1, 2
// and 3 threads, on shapes large enough to be split: the outputs must be the same bits, and
// the fused programs must also match values computed here from their definitions (the
// kernels' own tests check them against references on one thread).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/fused/interpreter.h"
#include "runtime/kernels/thread_pool.h"
#include "tests/runtime/kernels/kernel_test_util.h"
#include "tests/runtime/fused/program_test_util.h"
#include "tests/random_floats.h"

namespace kiln::cpu::testing {
namespace {

namespace ft = kiln::fused::testing;
using fused::Op;
using fused::Program;
using kiln::testing::RandomFloats;

// Pools of 1, 2 and 3 threads, and no pool (nullptr) first.
struct Pools {
  Pools() {
    for (int t = 1; t <= 3; ++t) {
      auto p = ThreadPool::Create(t);
      REQUIRE(p.ok());
      owned.push_back(std::move(*p));
    }
  }
  std::vector<ThreadPool*> all() const {
    std::vector<ThreadPool*> v = {nullptr};
    for (const auto& p : owned) v.push_back(p.get());
    return v;
  }
  std::vector<std::unique_ptr<ThreadPool>> owned;
};

std::string PoolName(const ThreadPool* pool) {
  return pool ? std::to_string(pool->size()) + " threads" : "no pool";
}

Status RunProgramOn(const Program& p, std::vector<const TestTensor*> inputs, std::vector<const TestTensor*> outputs,
                    ThreadPool* pool) {
  KILN_RETURN_IF_ERROR(fused::Validate(p));
  std::vector<TensorRef> in, out;
  for (auto* t : inputs) in.push_back(t->ref());
  for (auto* t : outputs) out.push_back(t->ref());
  const size_t bytes = FusedWorkspaceBytes(p, pool ? pool->size() : 1);
  std::vector<uint8_t> ws(bytes, 0xA5);  // garbage, so a read of unwritten scratch shows
  return RunFused(p, in, out, {}, ws.data(), bytes, pool);
}

// Runs `op` with the workspace its KernelDef asks for, or `max_workspace` bytes when fewer.
Status RunKernelOn(std::string_view op, const AttrMap& attrs, std::vector<const TestTensor*> inputs,
                   std::vector<const TestTensor*> outputs, ThreadPool* pool, size_t max_workspace = SIZE_MAX) {
  const KernelDef* def = FindKernel(op);
  if (def == nullptr) return NotFound(std::string(op));
  std::vector<TensorRef> in, out;
  for (auto* t : inputs) in.push_back(t->ref());
  for (auto* t : outputs) out.push_back(t->ref());
  const size_t ws = std::min(def->workspace ? def->workspace(attrs, in, out) : 0, max_workspace);
  std::vector<uint8_t> workspace(ws + 1);
  const KernelCall call{attrs, in, out, workspace.data(), ws, pool};
  return def->run(call);
}

// Runs `run(pool, y)` into a fresh output for every pool and checks that all give the bits
// of the run without a pool; returns those.
template <typename F>
std::vector<float> SameOnEveryPool(const Pools& pools, DType dtype, std::vector<int64_t> dims, F run) {
  std::vector<float> first;
  for (ThreadPool* pool : pools.all()) {
    INFO(PoolName(pool));
    TestTensor y = Output(dtype, dims);
    const Status st = run(pool, y);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    std::vector<float> v = y.values<float>();
    if (pool == nullptr) {
      first = v;
    } else {
      CHECK(std::memcmp(v.data(), first.data(), v.size() * sizeof(float)) == 0);
    }
  }
  return first;
}

TEST_CASE("fused AddRelu split over threads gives the bits of its definition") {
  Pools pools;
  for (auto shape : {std::pair<int64_t, int64_t>{6000, 16}, {300, 1000}, {1, 70000}}) {
    const int64_t rows = shape.first, cols = shape.second;
    INFO(rows << " x " << cols);
    const Program p = ft::AddRelu(rows, cols);
    auto x = Floats({rows, cols}, RandomFloats(static_cast<size_t>(rows * cols), 1));
    auto b = Floats({cols}, RandomFloats(static_cast<size_t>(cols), 2));
    const std::vector<float> y = SameOnEveryPool(pools, DType::kFloat32, {rows, cols}, [&](ThreadPool* pool, TestTensor& out) {
      return RunProgramOn(p, {&x, &b}, {&out}, pool);
    });
    const auto xv = x.values<float>(), bv = b.values<float>();
    size_t bad = 0;
    for (int64_t i = 0; i < rows * cols; ++i) bad += y[i] != std::max(xv[i] + bv[i % cols], 0.0f);
    CHECK(bad == 0);
  }
}

TEST_CASE("fused Softmax split over threads: each row's reductions stay on one thread") {
  Pools pools;
  // Short rows (whole rows per block) and long rows (each row cut into blocks).
  for (auto shape : {std::pair<int64_t, int64_t>{4000, 50}, {40, 5000}}) {
    const int64_t rows = shape.first, cols = shape.second;
    INFO(rows << " x " << cols);
    const Program p = ft::SoftmaxLastAxis(rows, cols);
    auto x = Floats({rows, cols}, RandomFloats(static_cast<size_t>(rows * cols), 3));
    const std::vector<float> y = SameOnEveryPool(pools, DType::kFloat32, {rows, cols}, [&](ThreadPool* pool, TestTensor& out) {
      return RunProgramOn(p, {&x}, {&out}, pool);
    });
    const auto xv = x.values<float>();
    size_t bad = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < cols; ++c) mx = std::max(mx, static_cast<double>(xv[r * cols + c]));
      for (int64_t c = 0; c < cols; ++c) sum += std::exp(xv[r * cols + c] - mx);
      for (int64_t c = 0; c < cols; ++c) {
        const double want = std::exp(xv[r * cols + c] - mx) / sum;
        bad += !(std::fabs(y[r * cols + c] - want) <= 1e-6 + 1e-5 * want);
      }
    }
    CHECK(bad == 0);
  }
}

// out[i, j] = data[check(idx[i]), j] over data [5, 3]: a gather with an index check.
Program CheckedGather(int64_t n) {
  Program p;
  p.domain = {n, 3};
  p.inputs = {{DType::kFloat32, {5, 3}}, {DType::kInt64, {n}}};
  p.checks = {"Gather 'g' input 'idx'"};
  p.nodes = {ft::Coord(0), ft::Load(1, 0, ft::kI64), ft::ConstI(5), ft::N(Op::kCheckIndex, ft::kI64, 1, 2, -1, 0),
             ft::ConstI(3), ft::N(Op::kMul, ft::kI64, 3, 4), ft::Coord(1), ft::N(Op::kAdd, ft::kI64, 5, 6),
             ft::Load(0, 7, ft::kF32)};
  p.outputs = {{{DType::kFloat32, {n, 3}}, 8, false}};
  return p;
}

TEST_CASE("fused index check split over threads: the error names the first bad index in domain order") {
  Pools pools;
  constexpr int64_t kRows = 60000;  // 20000 rows per part on 3 threads
  const Program p = CheckedGather(kRows);
  auto data = Floats({5, 3}, RandomFloats(15, 4));
  // Bad indices placed in the last part only, in the middle and last parts, in every part.
  const std::vector<std::vector<std::pair<int64_t, int64_t>>> cases = {
      {{59000, 8}}, {{45000, 9}, {25000, 6}}, {{50000, 9}, {30000, 6}, {100, 7}}};
  const char* expected[] = {"index 8", "index 6", "index 7"};
  for (size_t k = 0; k < cases.size(); ++k) {
    std::vector<int64_t> idx(kRows);
    for (int64_t i = 0; i < kRows; ++i) idx[i] = i % 5;
    for (auto [row, value] : cases[k]) idx[row] = value;
    auto idx_t = Int64s({kRows}, idx);
    for (ThreadPool* pool : pools.all()) {
      INFO("case " << k << ", " << PoolName(pool));
      auto y = Output(DType::kFloat32, {kRows, 3});
      const Status st = RunProgramOn(p, {&data, &idx_t}, {&y}, pool);
      CHECK(st.code() == StatusCode::kInvalidArgument);
      CHECK(st.message() == std::string("Gather 'g' input 'idx': ") + expected[k] + " is out of range [-5, 5)");
    }
  }
}

TEST_CASE("fused program on a pool: a workspace sized for fewer threads is refused") {
  Pools pools;
  const Program p = ft::AddRelu(4, 8);
  CHECK(FusedWorkspaceBytes(p, 3) > FusedWorkspaceBytes(p, 1));
  CHECK(FusedWorkspaceBytes(p, 0) == FusedWorkspaceBytes(p, 1));
  auto x = Floats({4, 8}, RandomFloats(32, 5));
  auto b = Floats({8}, RandomFloats(8, 6));
  auto y = Output(DType::kFloat32, {4, 8});
  std::vector<TensorRef> in = {x.ref(), b.ref()}, out = {y.ref()};
  std::vector<uint8_t> ws(FusedWorkspaceBytes(p, 3));
  const Status st = RunFused(p, in, out, {}, ws.data(), FusedWorkspaceBytes(p, 2), pools.owned[2].get());
  CHECK(st.code() == StatusCode::kInternal);
  CHECK(RunFused(p, in, out, {}, ws.data(), ws.size(), pools.owned[2].get()).ok());
}

AttrMap ConvAttrs(int64_t group, int64_t stride, int64_t pad) {
  AttrMap a;
  a.SetInt("group", group);
  a.SetInts("strides", {stride, stride});
  a.SetInts("pads", {pad, pad, pad, pad});
  return a;
}

TEST_CASE("Conv split over threads: depthwise channels and im2col channels give the same bits") {
  Pools pools;
  SUBCASE("depthwise 3x3, stride 1 and 2") {
    for (int64_t stride : {1, 2}) {
      auto x = Floats({2, 24, 40, 40}, RandomFloats(2 * 24 * 40 * 40, 7));
      auto w = Floats({24, 1, 3, 3}, RandomFloats(24 * 9, 8));
      auto bias = Floats({24}, RandomFloats(24, 9));
      const int64_t out = (40 + 2 - 3) / stride + 1;
      SameOnEveryPool(pools, DType::kFloat32, {2, 24, out, out}, [&](ThreadPool* pool, TestTensor& y) {
        return RunKernelOn("Conv", ConvAttrs(24, stride, 1), {&x, &w, &bias}, {&y}, pool);
      });
    }
  }
  SUBCASE("3x3 by im2col tiles, one group and two: whole tiles per thread") {
    // K = 576: 19 tiles of 224 pixels at 64x64, 5 tiles of 208 per group at 32x32.
    for (int64_t group : {1, 2}) {
      const int64_t c = 64 * group, hw = group == 1 ? 64 : 32;
      auto x = Floats({1, c, hw, hw}, RandomFloats(static_cast<size_t>(c * hw * hw), 10));
      auto w = Floats({16, 64, 3, 3}, RandomFloats(16 * 64 * 9, 11));
      auto bias = Floats({16}, RandomFloats(16, 12));
      SameOnEveryPool(pools, DType::kFloat32, {1, 16, hw, hw}, [&](ThreadPool* pool, TestTensor& y) {
        return RunKernelOn("Conv", ConvAttrs(group, 1, 1), {&x, &w, &bias}, {&y}, pool);
      });
      // A workspace of one column buffer: the threads share each tile instead.
      const size_t one_tile = static_cast<size_t>(576 * (group == 1 ? 224 : 208)) * sizeof(float);
      SameOnEveryPool(pools, DType::kFloat32, {1, 16, hw, hw}, [&](ThreadPool* pool, TestTensor& y) {
        return RunKernelOn("Conv", ConvAttrs(group, 1, 1), {&x, &w, &bias}, {&y}, pool, one_tile);
      });
    }
  }
  SUBCASE("5x5 on one input channel (super-resolution's first conv): ten tiles of 5024 pixels") {
    auto x = Floats({1, 1, 224, 224}, RandomFloats(224 * 224, 13));
    auto w = Floats({8, 1, 5, 5}, RandomFloats(8 * 25, 14));
    auto bias = Floats({8}, RandomFloats(8, 15));
    SameOnEveryPool(pools, DType::kFloat32, {1, 8, 224, 224}, [&](ThreadPool* pool, TestTensor& y) {
      return RunKernelOn("Conv", ConvAttrs(1, 1, 2), {&x, &w, &bias}, {&y}, pool);
    });
  }
  SUBCASE("1x1 with bias: GEMM column blocks, each with its bias and epilogue, whole per thread") {
    // M = 64, N = 56 * 56 = 3136, K = 64: four blocks of 784 columns.
    auto x = Floats({1, 64, 56, 56}, RandomFloats(64 * 3136, 18));
    auto w = Floats({64, 64, 1, 1}, RandomFloats(64 * 64, 19));
    auto bias = Floats({64}, RandomFloats(64, 20));
    SameOnEveryPool(pools, DType::kFloat32, {1, 64, 56, 56}, [&](ThreadPool* pool, TestTensor& y) {
      return RunKernelOn("Conv", ConvAttrs(1, 1, 0), {&x, &w, &bias}, {&y}, pool);
    });
  }
  SUBCASE("3x3 on 7x7 with 256 channels: one tile, its im2col channels and GEMM blocks shared") {
    auto x = Floats({1, 256, 7, 7}, RandomFloats(256 * 49, 16));
    auto w = Floats({256, 256, 3, 3}, RandomFloats(256 * 256 * 9, 17));
    SameOnEveryPool(pools, DType::kFloat32, {1, 256, 7, 7}, [&](ThreadPool* pool, TestTensor& y) {
      return RunKernelOn("Conv", ConvAttrs(1, 1, 1), {&x, &w}, {&y}, pool);
    });
  }
}

TEST_CASE("ConvTranspose split over threads: col2im output channels give the same bits") {
  Pools pools;
  auto x = Floats({1, 16, 32, 32}, RandomFloats(16 * 32 * 32, 12));
  auto w = Floats({16, 32, 3, 3}, RandomFloats(16 * 32 * 9, 13));
  AttrMap a;
  a.SetInts("strides", {2, 2});
  SameOnEveryPool(pools, DType::kFloat32, {1, 32, 65, 65}, [&](ThreadPool* pool, TestTensor& y) {
    return RunKernelOn("ConvTranspose", a, {&x, &w}, {&y}, pool);
  });
}

TEST_CASE("MatMul and Gemm split over threads (runtime/kernels/gemm.h): same bits, close to the definition") {
  Pools pools;
  // Wide (column blocks) and tall (row blocks) products, both large enough to be split.
  for (auto shape : {std::tuple<int64_t, int64_t, int64_t>{96, 300, 1000}, {1000, 300, 40}}) {
    const int64_t m = std::get<0>(shape), k = std::get<1>(shape), n = std::get<2>(shape);
    INFO(m << " x " << k << " x " << n);
    auto a = Floats({m, k}, RandomFloats(static_cast<size_t>(m * k), 15));
    auto b = Floats({k, n}, RandomFloats(static_cast<size_t>(k * n), 16));
    const std::vector<float> y = SameOnEveryPool(pools, DType::kFloat32, {m, n}, [&](ThreadPool* pool, TestTensor& out) {
      return RunKernelOn("MatMul", AttrMap{}, {&a, &b}, {&out}, pool);
    });
    const auto av = a.values<float>(), bv = b.values<float>();
    size_t bad = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < k; ++p) want += static_cast<double>(av[i * k + p]) * bv[p * n + j];
        bad += !(std::fabs(y[i * n + j] - want) <= 1e-3 + 1e-4 * std::fabs(want));
      }
    CHECK(bad == 0);
    AttrMap trans;
    trans.SetInt("transB", 1);
    auto bt = Floats({n, k}, RandomFloats(static_cast<size_t>(k * n), 17));
    SameOnEveryPool(pools, DType::kFloat32, {m, n}, [&](ThreadPool* pool, TestTensor& out) {
      return RunKernelOn("Gemm", trans, {&a, &bt}, {&out}, pool);
    });
  }
}

TEST_CASE("batched MatMul split over threads: items whole (small products) or cut (large), the same bits") {
  Pools pools;
  // [2, 3] items of 33 x 17 x 29 (too small to cut: the items go to the threads, a broadcast B
  // included), and 2 items of 96 x 300 x 1000 (fewer items than some pools' threads: each cut).
  struct Shape {
    std::vector<int64_t> a, b, y;
  };
  for (const Shape& sh : {Shape{{2, 3, 33, 17}, {3, 17, 29}, {2, 3, 33, 29}}, Shape{{2, 96, 300}, {2, 300, 1000}, {2, 96, 1000}}}) {
    const int64_t m = sh.a[sh.a.size() - 2], k = sh.a.back(), n = sh.b.back();
    INFO(m << " x " << k << " x " << n << ", " << sh.y.size() - 2 << " batch dims");
    int64_t a_count = 1, b_count = 1, batch = 1;
    for (size_t d = 0; d + 2 < sh.a.size(); ++d) a_count *= sh.a[d];
    for (size_t d = 0; d + 2 < sh.b.size(); ++d) b_count *= sh.b[d];
    for (size_t d = 0; d + 2 < sh.y.size(); ++d) batch *= sh.y[d];
    auto a = Floats(sh.a, RandomFloats(static_cast<size_t>(a_count * m * k), 18));
    auto b = Floats(sh.b, RandomFloats(static_cast<size_t>(b_count * k * n), 19));
    const std::vector<float> y = SameOnEveryPool(pools, DType::kFloat32, sh.y, [&](ThreadPool* pool, TestTensor& out) {
      return RunKernelOn("MatMul", AttrMap{}, {&a, &b}, {&out}, pool);
    });
    const auto av = a.values<float>(), bv = b.values<float>();
    size_t bad = 0;
    for (int64_t t = 0; t < batch; ++t) {
      const int64_t ta = a_count == 1 ? 0 : t, tb = b_count == 1 ? 0 : t % b_count;  // B broadcasts over the first dim
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0;
          for (int64_t p = 0; p < k; ++p)
            want += static_cast<double>(av[(ta * m + i) * k + p]) * bv[(tb * k + p) * n + j];
          bad += !(std::fabs(y[(t * m + i) * n + j] - want) <= 1e-3 + 1e-4 * std::fabs(want));
        }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("pooling split over threads: planes give the same bits") {
  Pools pools;
  auto x = Floats({2, 32, 40, 40}, RandomFloats(2 * 32 * 40 * 40, 14));
  for (const char* op : {"MaxPool", "AveragePool", "LpPool"}) {
    INFO(op);
    AttrMap a;
    a.SetInts("kernel_shape", {3, 3});
    a.SetInts("strides", {2, 2});
    a.SetInts("pads", {1, 1, 1, 1});
    SameOnEveryPool(pools, DType::kFloat32, {2, 32, 20, 20}, [&](ThreadPool* pool, TestTensor& y) {
      return RunKernelOn(op, a, {&x}, {&y}, pool);
    });
  }
  SUBCASE("MaxPool's Indices too") {
    AttrMap a;
    a.SetInts("kernel_shape", {2, 2});
    a.SetInts("strides", {2, 2});
    std::vector<int64_t> first;
    for (ThreadPool* pool : pools.all()) {
      auto y = Output(DType::kFloat32, {2, 32, 20, 20});
      auto ind = Output(DType::kInt64, {2, 32, 20, 20});
      REQUIRE(RunKernelOn("MaxPool", a, {&x}, {&y, &ind}, pool).ok());
      if (pool == nullptr) first = ind.values<int64_t>();
      CHECK(ind.values<int64_t>() == first);
    }
  }
  for (const char* op : {"GlobalMaxPool", "GlobalAveragePool", "GlobalLpPool"}) {
    INFO(op);
    SameOnEveryPool(pools, DType::kFloat32, {2, 32, 1, 1}, [&](ThreadPool* pool, TestTensor& y) {
      return RunKernelOn(op, AttrMap{}, {&x}, {&y}, pool);
    });
  }
}

}  // namespace
}  // namespace kiln::cpu::testing
