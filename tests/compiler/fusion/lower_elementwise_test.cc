// Elementwise lowerings (compiler/fusion/lower_elementwise.cc) whose program is not the op's
// formula read literally: each test lowers one node, runs the program with the CPU interpreter
// and compares it with values computed here.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "compiler/fusion/rules.h"
#include "tests/compiler/fusion/lower_test_util.h"

namespace kiln::fusion::testing {
namespace {

LowerFn ElementwiseFn(std::string_view op) {
  for (const Lowering& l : ElementwiseLowerings())
    if (l.op == op) return l.lower;
  FAIL("no elementwise rule for " << op);
  return nullptr;
}

// Units in the last place between a and b (0 when both are NaN or equal).
int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) return std::numeric_limits<int64_t>::max();
  auto ordered = [](float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t{std::numeric_limits<int32_t>::min()} - i : int64_t{i};
  };
  return std::abs(ordered(a) - ordered(b));
}

TEST_CASE("Pow with a constant exponent 2 or 3 lowers to products within 2 ulp of powf") {
  const std::vector<float> xs = {-3.5f, -1.0f, -0.0f, 0.0f, 1e-5f, 0.7f, 1.0f, 2.5f, 1e12f, 4e13f,
                                 -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN()};
  for (const float exponent : {2.0f, 3.0f}) {
    CAPTURE(exponent);
    NodeTrace nt;
    const ir::ValueId x = nt.Input("x", DType::kFloat32, {static_cast<int64_t>(xs.size())});
    const ir::ValueId y = nt.Const("y", DType::kFloat32, {}, std::vector<float>{exponent});
    REQUIRE(nt.AddNode("Pow", "p", {x, y}).ok());
    auto lowered = LowerOutput(nt.trace(), nt.node(), 0, ElementwiseFn("Pow"));
    REQUIRE_MESSAGE(lowered.ok(), lowered.status().ToString());
    const auto& nodes = lowered->program.nodes;
    CHECK(std::none_of(nodes.begin(), nodes.end(), [](const fused::Node& n) { return n.op == fused::Op::kPow; }));
    std::map<ir::ValueId, TestTensor> inputs = {{x, cpu::testing::Make<float>({static_cast<int64_t>(xs.size())}, xs)}};
    auto out = RunLowered(*lowered, nt.trace(), nt.node(), 0, inputs, {});
    REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    const std::vector<float> got = out->values<float>();
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(xs[i]);
      CHECK(UlpDistance(got[i], std::pow(xs[i], exponent)) <= 2);
    }
  }
}

}  // namespace
}  // namespace kiln::fusion::testing
