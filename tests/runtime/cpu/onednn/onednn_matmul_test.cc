// oneDNN's MatMul and Gemm (runtime/cpu/onednn/onednn.h) against Kiln's CPU kernels (which the
// conformance tier checks against ONNX's own test data) and hand-computed values: 2-D and
// batched A, Gemm's transA and transB, a bias (MatMul's annotated bias, Gemm's C of N values),
// every epilogue activation in both orders with and without the residual; model weights
// (reordered once, kept) and computed ones; 1 and 2 threads. Then what stays on OpenBLAS.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runtime/cpu/host_memory.h"
#include "runtime/cpu/onednn/onednn.h"
#include "tests/runtime/cpu/onednn/plan_alone.h"
#include "tests/runtime/kernels/kernel_test_util.h"

namespace kiln::cpu::testing {
namespace {

struct MatMulCase {
  const char* name;
  const char* op;
  std::vector<int64_t> a, b, y;
  bool trans_a = false, trans_b = false;
  bool bias = false;  // MatMul's annotated bias or Gemm's C, N values
};

const MatMulCase kMatMulCases[] = {
    {"MatMul 3x300 by 300x1000", "MatMul", {3, 300}, {300, 1000}, {3, 1000}},
    {"MatMul batched 2x4x64 by 64x600, bias", "MatMul", {2, 4, 64}, {64, 600}, {2, 4, 600}, false, false, true},
    {"MatMul a vector of 512 by 512x512", "MatMul", {512}, {512, 512}, {512}},
    {"Gemm 1x2048 by 2048x200, C (a classifier head)", "Gemm", {1, 2048}, {2048, 200}, {1, 200}, false, false, true},
    {"Gemm transB", "Gemm", {5, 256}, {300, 256}, {5, 300}, false, true, true},
    {"Gemm transA", "Gemm", {256, 6}, {256, 200}, {6, 200}, true, false},
};

AttrMap MatMulAttrs(const MatMulCase& c, const std::string& act, bool residual, bool residual_first) {
  AttrMap a;
  if (std::string(c.op) == "Gemm") {
    a.SetInt("transA", c.trans_a ? 1 : 0);
    a.SetInt("transB", c.trans_b ? 1 : 0);
  }
  if (!act.empty()) a.SetString("epilogue_activation", act);
  if (residual) a.SetInt("epilogue_residual", 1);
  a.SetString("epilogue_order", residual_first ? "bias,residual,act" : "bias,act,residual");
  return a;
}

TEST_CASE("oneDNN MatMul and Gemm: Kiln's kernels, every form, epilogue, order and thread count") {
  if (!OneDnnBuilt()) return;
  const char* activations[] = {"", "Relu", "SiLU", "Gelu", "Sigmoid"};
  uint32_t seed = 300;
  for (const MatMulCase& c : kMatMulCases) {
    const TestTensor a = RandomTensor(c.a, seed++), b = RandomTensor(c.b, seed++),
                     bias = c.bias ? RandomTensor({c.y.back()}, seed++) : Absent(), r = RandomTensor(c.y, seed++);
    for (const char* act : activations)
      for (int form = 0; form < 3; ++form) {
        const bool residual = form > 0, residual_first = form == 2;
        const AttrMap attrs = MatMulAttrs(c, act, residual, residual_first);
        std::vector<const TestTensor*> inputs = {&a, &b, &bias};
        if (residual) inputs.push_back(&r);
        TestTensor kernel_y = Output(DType::kFloat32, c.y);
        const Status st = RunKernel(c.op, attrs, inputs, {&kernel_y});
        REQUIRE_MESSAGE(st.ok(), st.ToString());
        const std::vector<float> expected = kernel_y.values<float>();
        for (int threads : {1, 2})
          for (bool constant : {true, false}) {
            INFO("case " << std::string(c.name) << ", activation " << std::string(act));
            CAPTURE(form);
            CAPTURE(threads);
            CAPTURE(constant);
            TestTensor y = Output(DType::kFloat32, c.y);
            std::vector<TensorRef> in, out{y.ref()};
            for (const TestTensor* t : inputs) in.push_back(t->ref());
            auto op = PlanAlone(c.op, KernelCall{attrs, in, out}, threads, constant);
            // Below AVX-512 (the fp-paths tiers cap oneDNN), an activation before the residual
            // add has only oneDNN's reference loops, which Kiln refuses.
            if (!op.ok() && op.status().message().starts_with("oneDNN has only its reference implementation (ref")) {
              CHECK((!OneDnnRunsBFloat16() || (residual && !residual_first && std::string(act) != "")));
              continue;
            }
            REQUIRE_MESSAGE(op.ok(), op.status().ToString());
            CHECK(!(*op)->description().empty());
            AlignedBuffer ws;
            REQUIRE(ws.Reserve((*op)->workspace_bytes() + 1));
            const KernelCall call{attrs, in, out, ws.data(), static_cast<size_t>(ws.size())};
            for (int run = 0; run < 2; ++run) {  // the second from the kept weights
              const Status ran = (*op)->Run(call);
              REQUIRE_MESSAGE(ran.ok(), ran.ToString());
            }
            if (!constant) CHECK((*op)->held_bytes() == 0);
            const std::vector<float> got = y.values<float>();
            int bad = 0;
            for (size_t i = 0; i < got.size() && bad < 5; ++i)
              if (!(std::fabs(got[i] - expected[i]) <= 5e-5 * (1 + std::fabs(expected[i])))) {
                ++bad;
                FAIL_CHECK("index " << i << ": " << got[i] << ", Kiln's kernel " << expected[i]);
              }
          }
      }
  }
}

// Hand-computed: A = [[1, 2, ..., 512]] (1x512) by B = 512x512 with B[k][j] = 1 when k == j or
// k == 511 - j, so Y[j] = (j + 1) + (512 - j) = 513 for every j; C adds j, and Relu keeps it.
TEST_CASE("oneDNN Gemm: a hand-computed product, C and Relu") {
  if (!OneDnnBuilt()) return;
  std::vector<float> av(512), bv(512 * 512, 0.0f), cv(512);
  for (int i = 0; i < 512; ++i) {
    av[static_cast<size_t>(i)] = static_cast<float>(i + 1);
    bv[static_cast<size_t>(i * 512 + i)] = 1;
    bv[static_cast<size_t>((511 - i) * 512 + i)] = 1;
    cv[static_cast<size_t>(i)] = static_cast<float>(i);
  }
  const TestTensor a = Floats({1, 512}, av), b = Floats({512, 512}, bv), c = Floats({512}, cv);
  TestTensor y = Output(DType::kFloat32, {1, 512});
  AttrMap attrs;
  attrs.SetString("epilogue_activation", "Relu");
  const std::vector<TensorRef> in{a.ref(), b.ref(), c.ref()}, out{y.ref()};
  auto op = PlanAlone("Gemm", KernelCall{attrs, in, out}, 1, true);
  REQUIRE_MESSAGE(op.ok(), op.status().ToString());
  AlignedBuffer ws;
  REQUIRE(ws.Reserve((*op)->workspace_bytes() + 1));
  REQUIRE((*op)->Run(KernelCall{attrs, in, out, ws.data(), static_cast<size_t>(ws.size())}).ok());
  const std::vector<float> got = y.values<float>();
  for (int j = 0; j < 512; ++j) CHECK(got[static_cast<size_t>(j)] == static_cast<float>(513 + j));
}

TEST_CASE("oneDNN MatMul: ops of two bindings share one reordered copy of a model weight") {
  // A decoder's MatMul is planned again at each step's cache length; its weight is reordered once
  // per context (WeightPacks), not once per binding. Y = A B with B = 512x512 identity plus its
  // mirror, as above: each row of Y is A's row plus A's row reversed.
  if (!OneDnnBuilt()) return;
  std::vector<float> bv(512 * 512, 0.0f);
  for (int i = 0; i < 512; ++i) {
    bv[static_cast<size_t>(i * 512 + i)] = 1;
    bv[static_cast<size_t>((511 - i) * 512 + i)] = 1;
  }
  const TestTensor b = Floats({512, 512}, bv);
  std::unique_ptr<WeightPacks> packs = NewWeightPacks();
  REQUIRE(packs != nullptr);
  uint64_t after_first = 0;
  // Two bindings whose MatMul has the same shape (a decoder's weight MatMuls at every step: one
  // row), planned and run apart, on different A.
  const int64_t rows = 3;
  for (int binding = 0; binding < 2; ++binding) {
    std::vector<float> av(static_cast<size_t>(rows * 512));
    for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>((i + static_cast<size_t>(binding) * 13) % 97);
    const TestTensor a = Floats({rows, 512}, av);
    TestTensor y = Output(DType::kFloat32, {rows, 512});
    const std::vector<TensorRef> in{a.ref(), b.ref()}, out{y.ref()};
    auto op = PlanOneDnn("MatMul", KernelCall{AttrMap{}, in, out}, 1, true, *packs);
    REQUIRE_MESSAGE(op.ok(), op.status().ToString());
    AlignedBuffer ws;
    REQUIRE(ws.Reserve((*op)->workspace_bytes() + 1));
    REQUIRE((*op)->Run(KernelCall{AttrMap{}, in, out, ws.data(), static_cast<size_t>(ws.size())}).ok());
    const std::vector<float> got = y.values<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 512; ++j)
        CHECK(got[static_cast<size_t>(r * 512 + j)] ==
              av[static_cast<size_t>(r * 512 + j)] + av[static_cast<size_t>(r * 512 + 511 - j)]);
    CHECK((*op)->held_bytes() == 0);  // the copy is the packs', counted once
    if (binding == 0) after_first = packs->bytes();
  }
  // One copy for both; none where oneDNN takes B as it is (its AVX2 and SSE4.1 kernels here).
  CHECK((after_first == 0 || after_first >= 512 * 512 * sizeof(float)));
  CHECK(packs->bytes() == after_first);
}

TEST_CASE("oneDNN MatMul and Gemm: what stays on OpenBLAS, with the reason") {
  if (!OneDnnBuilt()) return;
  const auto refusal = [](const char* op, const AttrMap& attrs, std::vector<const TestTensor*> inputs,
                          std::vector<int64_t> y_dims, DType dt = DType::kFloat32) {
    TestTensor y = Output(dt, std::move(y_dims));
    std::vector<TensorRef> in, out{y.ref()};
    for (const TestTensor* t : inputs) in.push_back(t->ref());
    auto planned = PlanAlone(op, KernelCall{attrs, in, out}, 1, true);
    REQUIRE(planned.status().code() == StatusCode::kUnimplemented);
    return std::string(planned.status().message());
  };
  const AttrMap none;
  const TestTensor a = RandomTensor({4, 64}, 1), b = RandomTensor({64, 64}, 2);
  CHECK(refusal("MatMul", none, {&a, &b}, {4, 64}) ==
        "4x64 by 64x64: below 2^18 multiply-adds, OpenBLAS is faster");
  const TestTensor big_a = RandomTensor({8, 512}, 3), big_b = RandomTensor({512, 512}, 4);
  AttrMap alpha;
  alpha.SetFloat("alpha", 2.0f);
  CHECK(refusal("Gemm", alpha, {&big_a, &big_b}, {8, 512}) == "Gemm's alpha other than 1");
  const TestTensor full_c = RandomTensor({8, 512}, 5);
  CHECK(refusal("Gemm", none, {&big_a, &big_b, &full_c}, {8, 512}).starts_with("Gemm's C [8, 512]"));
  const TestTensor b3 = RandomTensor({2, 512, 512}, 6);
  CHECK(refusal("MatMul", none, {&big_a, &b3}, {2, 8, 512}) == "B of rank 3 (oneDNN runs a 2-D B in Kiln)");
  const TestTensor a64 = Output(DType::kFloat64, {8, 512}), b64 = Output(DType::kFloat64, {512, 512});
  CHECK(refusal("MatMul", none, {&a64, &b64}, {8, 512}, DType::kFloat64) ==
        "float64 (oneDNN runs float32 MatMul in Kiln)");
}

}  // namespace
}  // namespace kiln::cpu::testing
