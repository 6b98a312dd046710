// TensorScatter CPU kernel: KV-cache writes, linear and circular.
#include <doctest/doctest.h>

#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

// past [2, 4, 2] = 0..15 (batch, sequence, feature); update [2, 2, 2] = 100..107.
struct Cache {
  TestTensor past = Floats({2, 4, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  TestTensor update = Floats({2, 2, 2}, {100, 101, 102, 103, 104, 105, 106, 107});
  TestTensor out = Output(DType::kFloat32, {2, 4, 2});
};

TEST_CASE("TensorScatter: linear writes at each batch row's index, the rest copied") {
  Cache c;
  auto w = Int64s({2}, {1, 2});
  REQUIRE(RunKernel("TensorScatter", {}, {&c.past, &c.update, &w}, {&c.out}).ok());
  CHECK(c.out.values<float>() ==
        std::vector<float>{0, 1, 100, 101, 102, 103, 6, 7, 8, 9, 10, 11, 104, 105, 106, 107});
  auto none = Absent();  // no write_indices: index 0
  REQUIRE(RunKernel("TensorScatter", {}, {&c.past, &c.update, &none}, {&c.out}).ok());
  CHECK(c.out.values<float>() ==
        std::vector<float>{100, 101, 102, 103, 4, 5, 6, 7, 104, 105, 106, 107, 12, 13, 14, 15});
}

TEST_CASE("TensorScatter: circular wraps, linear past the end is an error") {
  Cache c;
  auto w = Int64s({2}, {1, 3});
  AttrMap circular;
  circular.SetString("mode", "circular");
  REQUIRE(RunKernel("TensorScatter", circular, {&c.past, &c.update, &w}, {&c.out}).ok());
  CHECK(c.out.values<float>() ==
        std::vector<float>{0, 1, 100, 101, 102, 103, 6, 7, 106, 107, 10, 11, 12, 13, 104, 105});
  Status st = RunKernel("TensorScatter", {}, {&c.past, &c.update, &w}, {&c.out});
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.message() == "TensorScatter: linear mode: batch 1 writes 2 rows at index 3, outside the cache of 4");
}

}  // namespace
}  // namespace kiln::cpu::testing
