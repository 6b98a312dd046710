// The data-movement lowerings against the CPU reference kernels: each test builds one
// node, lowers it into a program over its output, runs the program with the CPU
// interpreter and the op's kernel on the same inputs, and requires identical bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "compiler/fusion/rules.h"
#include "tests/compiler/fusion/lower_test_util.h"

namespace kiln::fusion::testing {
namespace {

using ir::Sym;
using ir::ValueId;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

LowerFn Fn(std::string_view op) {
  for (const Lowering& l : DataMovementLowerings())
    if (l.op == op) return l.lower;
  FAIL("no data-movement rule for " << op);
  return nullptr;
}

// Builds `op` over `inputs`, makes random inputs (with `overrides`), and compares the
// lowering of `output` with the reference kernel.
Lowered Check(NodeTrace& nt, const std::string& op, std::vector<ValueId> inputs, const AttrMap& attrs = {},
              const Bindings& bind = {}, int num_outputs = 1, int output = 0,
              std::map<ValueId, TestTensor> overrides = {}, uint32_t seed = 7) {
  const Status st = nt.AddNode(op, "n_" + op, std::move(inputs), attrs, num_outputs);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  auto tensors = nt.MakeInputs(bind, seed);
  for (auto& [id, t] : overrides) tensors[id] = t;
  return CheckAgainstReference(nt, Fn(op), tensors, bind, output);
}

int CountOps(const fused::Program& p, fused::Op op) {
  return static_cast<int>(
      std::count_if(p.nodes.begin(), p.nodes.end(), [op](const fused::Node& n) { return n.op == op; }));
}

// Lowers output 0 of the last node, expecting an error; returns its status.
Status LowerError(const NodeTrace& nt, int output = 0) {
  auto l = LowerOutput(nt.trace(), nt.node(), output, Fn(nt.node().op));
  REQUIRE(!l.ok());
  return l.status();
}

AttrMap IntAttr(const std::string& name, int64_t v) {
  AttrMap a;
  a.SetInt(name, v);
  return a;
}

TEST_CASE("DataMovementLowerings: every data-movement op is an index map with a lowering") {
  const char* ops[] = {"Concat",         "DepthToSpace", "Dropout", "Expand",  "Flatten",   "Gather",
                       "GatherElements", "Identity",     "Pad",     "Reshape", "Resize",    "Slice",
                       "SpaceToDepth",   "Split",        "Squeeze", "Tile",    "Transpose", "Unsqueeze"};
  CHECK(DataMovementLowerings().size() == std::size(ops));
  for (const char* op : ops) {
    INFO(op);
    auto it = std::find_if(DataMovementLowerings().begin(), DataMovementLowerings().end(),
                           [&](const Lowering& l) { return l.op == op; });
    REQUIRE(it != DataMovementLowerings().end());
    REQUIRE(kiln::FindOpInfo(op) != nullptr);
    CHECK(kiln::FindOpInfo(op)->fusion == kiln::FusionKind::kIndexMap);
    CHECK((it->lower != nullptr));
    CHECK((it->domain == nullptr));
  }
}

TEST_CASE("Transpose: perm, default reverse, int64 and a symbolic dim") {
  {
    NodeTrace nt;
    AttrMap a;
    a.SetInts("perm", {1, 2, 0});
    Check(nt, "Transpose", {nt.Input("x", DType::kFloat32, {2, 3, 4})}, a);
  }
  {
    NodeTrace nt;
    Check(nt, "Transpose", {nt.Input("x", DType::kInt64, {2, 3, 4})});
  }
  {
    NodeTrace nt;
    AttrMap a;
    a.SetInts("perm", {2, 0, 1});
    Lowered l =
        Check(nt, "Transpose", {nt.Input("x", DType::kFloat32, {Sym::Var("N"), 3, 2})}, a, {{"N", 5}});
    CHECK(l.sizes.size() == 1);
  }
}

TEST_CASE("Slice: negative axes and steps, clamped ends, symbolic dims and starts") {
  SUBCASE("negative steps on a negative axis") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, 4, 5});
    Lowered l = Check(
        nt, "Slice",
        {x, nt.Ints("s", {-1, 10}), nt.Ints("e", {-100, 0}), nt.Ints("a", {0, -1}), nt.Ints("st", {-2, -3})});
    CHECK(nt.value(nt.node().outputs[0]).shape[0].Same(Sym(2)));
    CHECK(l.program.num_sizes == 0);
    CHECK(l.region_inputs.size() == 1);  // starts/ends/axes/steps are folded, never loaded
  }
  SUBCASE("ends beyond the dim are clamped") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kInt32, {3, 4, 5});
    Check(nt, "Slice", {x, nt.Ints("s", {1, 0}), nt.Ints("e", {1000, -1}), nt.Ints("a", {1, 2})});
  }
  SUBCASE("full reverse and a step of 2") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {4, 7});
    Check(
        nt, "Slice",
        {x, nt.Ints("s", {-1, 1}), nt.Ints("e", {kMin, kMax}), nt.Ints("a", {0, 1}), nt.Ints("st", {-1, 2})});
  }
  SUBCASE("symbolic dim: x[1:] and a reversal") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {Sym::Var("N"), 6});
    Check(nt, "Slice", {x, nt.Ints("s", {1}), nt.Ints("e", {kMax}), nt.Ints("a", {0})}, {}, {{"N", 5}});
    NodeTrace nt2;
    ValueId x2 = nt2.Input("x", DType::kFloat32, {Sym::Var("N"), 4});
    Check(nt2, "Slice",
          {x2, nt2.Ints("s", {-1}), nt2.Ints("e", {kMin}), nt2.Ints("a", {0}), nt2.Ints("st", {-1})}, {},
          {{"N", 6}});
  }
  SUBCASE("symbolic starts and ends (Sym elements)") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {2, 10});
    const Sym k = Sym::Var("K");
    Lowered l =
        Check(nt, "Slice", {x, nt.SymInts("s", {k}), nt.SymInts("e", {k + Sym(3)}), nt.Ints("a", {1})}, {},
              {{"K", 4}});
    CHECK(l.program.num_sizes >= 1);
  }
}

TEST_CASE("Concat: empty parts, negative axis, int64, symbolic offsets") {
  {
    NodeTrace nt;
    Check(nt, "Concat",
          {nt.Input("a", DType::kFloat32, {2, 3}), nt.Input("b", DType::kFloat32, {2, 0}),
           nt.Input("c", DType::kFloat32, {2, 2}), nt.Input("d", DType::kFloat32, {2, 1})},
          IntAttr("axis", -1));
  }
  {
    NodeTrace nt;
    Check(nt, "Concat", {nt.Input("a", DType::kInt64, {1, 3}), nt.Input("b", DType::kInt64, {2, 3})},
          IntAttr("axis", 0));
  }
  {
    NodeTrace nt;
    Check(nt, "Concat",
          {nt.Input("a", DType::kFloat32, {Sym::Var("N"), 2}),
           nt.Input("b", DType::kFloat32, {Sym::Var("M"), 2}),
           nt.Input("c", DType::kFloat32, {Sym::Var("N"), 2})},
          IntAttr("axis", 0), {{"N", 3}, {"M", 2}});
  }
  {
    NodeTrace nt;
    Check(nt, "Concat",
          {nt.Input("a", DType::kFloat32, {Sym::Var("N"), 2}),
           nt.Input("b", DType::kFloat32, {Sym::Var("N"), 3})},
          IntAttr("axis", 1), {{"N", 4}});
  }
}

TEST_CASE("Split: sizes input, num_outputs, equal parts, symbolic dim") {
  for (int k = 0; k < 3; ++k) {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {6, 4});
    Check(nt, "Split", {x, nt.Ints("split", {1, 2, 3})}, IntAttr("axis", 0), {}, 3, k);
  }
  for (int k = 0; k < 3; ++k) {
    NodeTrace nt;
    AttrMap a = IntAttr("axis", -1);
    a.SetInt("num_outputs", 3);
    Check(nt, "Split", {nt.Input("x", DType::kInt64, {2, 7})}, a, {}, 3, k);
  }
  for (int k = 0; k < 2; ++k) {
    NodeTrace nt;
    Check(nt, "Split", {nt.Input("x", DType::kFloat32, {Sym::Var("N"), 3})}, IntAttr("axis", 0), {{"N", 6}},
          2, k);
  }
}

TEST_CASE("Pad: constant (with value, negative pads, axes, empty input), reflect, edge, wrap") {
  SUBCASE("constant with a value and a negative pad") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, 4});
    Check(nt, "Pad", {x, nt.Ints("p", {1, -1, 2, 3}), nt.Floats("v", {1.5f})});
  }
  SUBCASE("constant int64 without a value, on axis -1 only") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kInt64, {3, 4});
    Check(nt, "Pad", {x, nt.Ints("p", {2, 1}), ir::kNoValue, nt.Ints("axes", {-1})});
  }
  SUBCASE("constant value from a runtime tensor") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {2, 3});
    Check(nt, "Pad", {x, nt.Ints("p", {1, 1, 1, 1}), nt.Input("v", DType::kFloat32, {})});
  }
  SUBCASE("constant on an empty input") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {0, 3});
    Lowered l = Check(nt, "Pad", {x, nt.Ints("p", {1, 0, 1, 0}), nt.Floats("v", {2.0f})});
    CHECK(l.region_inputs.empty());
  }
  for (const char* mode : {"reflect", "edge", "wrap"}) {
    SUBCASE(mode) {
      AttrMap a;
      a.SetString("mode", mode);
      NodeTrace nt;
      ValueId x = nt.Input("x", DType::kFloat32, {3, 4});
      const std::vector<int64_t> pads = std::string(mode) == "reflect" ? std::vector<int64_t>{2, 1, 2, 3}
                                        : std::string(mode) == "edge"  ? std::vector<int64_t>{0, 5, 4, 0}
                                                                       : std::vector<int64_t>{4, 2, 7, 9};
      Check(nt, "Pad", {x, nt.Ints("p", pads)}, a);
      // A single-element axis, and a symbolic one.
      NodeTrace nt1;
      ValueId x1 = nt1.Input("x", DType::kInt32, {1, 3});
      Check(nt1, "Pad", {x1, nt1.Ints("p", {0, 1, 0, 2})}, a);
      NodeTrace nt2;
      ValueId x2 = nt2.Input("x", DType::kFloat32, {Sym::Var("N"), 3});
      Check(nt2, "Pad", {x2, nt2.Ints("p", {1, 1, 2, 1})}, a, {{"N", 4}});
    }
  }
  SUBCASE("symbolic pads (Sym elements)") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, 4});
    const Sym k = Sym::Var("K");
    Lowered l = Check(nt, "Pad", {x, nt.SymInts("p", {0, k, 0, k}), nt.Floats("v", {-1.0f})}, {}, {{"K", 2}});
    CHECK(l.program.num_sizes >= 1);
  }
}

TEST_CASE("Expand and Tile: float and int64, static and symbolic shapes") {
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, 1});
    Check(nt, "Expand", {x, nt.Ints("shape", {2, 3, 4})});
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kInt64, {Sym::Var("N"), 1});
    Check(nt, "Expand", {x, nt.SymInts("shape", {Sym::Var("N"), 5})}, {}, {{"N", 3}});
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {2, 3});
    Check(nt, "Tile", {x, nt.Ints("r", {2, 3})});
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kInt64, {Sym::Var("N"), 2, 1});
    Check(nt, "Tile", {x, nt.Ints("r", {2, 1, 3})}, {}, {{"N", 3}});
  }
}

TEST_CASE("Gather: negative indices, scalar constant index, symbolic dim, an out-of-range index") {
  SUBCASE("2-D indices on axis 0 with negatives") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {4, 5});
    ValueId idx = nt.Input("idx", DType::kInt64, {2, 3});
    Check(nt, "Gather", {x, idx}, IntAttr("axis", 0), {}, 1, 0,
          {{idx, cpu::testing::Int64s({2, 3}, {0, -1, 3, -4, 2, 1})}});
  }
  SUBCASE("int32 indices on axis -1") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kInt64, {2, 3, 5});
    ValueId idx = nt.Input("idx", DType::kInt32, {4});
    Check(nt, "Gather", {x, idx}, IntAttr("axis", -1), {}, 1, 0,
          {{idx, cpu::testing::Int32s({4}, {-5, 4, 0, -1})}});
  }
  SUBCASE("scalar constant index: no load, no check") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {4, 5});
    Lowered l = Check(nt, "Gather", {x, nt.Const("i", DType::kInt64, {}, std::vector<int64_t>{-2})},
                      IntAttr("axis", 1));
    CHECK(l.region_inputs.size() == 1);
    CHECK(CountOps(l.program, fused::Op::kCheckIndex) == 0);
    CHECK(CountOps(l.program, fused::Op::kSelect) == 0);
  }
  SUBCASE("constant in-range indices are loaded but not checked") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {4, 5});
    Lowered l = Check(nt, "Gather", {x, nt.Ints("i", {0, -1, 2})}, IntAttr("axis", 0));
    CHECK(CountOps(l.program, fused::Op::kCheckIndex) == 0);
  }
  SUBCASE("symbolic data dim") {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {Sym::Var("N"), 3});
    ValueId idx = nt.Input("idx", DType::kInt64, {3});
    Check(nt, "Gather", {x, idx}, IntAttr("axis", 0), {{"N", 5}}, 1, 0,
          {{idx, cpu::testing::Int64s({3}, {-5, 4, 2})}});
  }
  SUBCASE("an out-of-range index is reported with the node's name") {
    for (int64_t bad : {5, -6}) {
      NodeTrace nt;
      ValueId x = nt.Input("x", DType::kFloat32, {3, 5});
      ValueId idx = nt.Input("idx", DType::kInt64, {2});
      REQUIRE(nt.AddNode("Gather", "g", {x, idx}, IntAttr("axis", 1)).ok());
      auto tensors = nt.MakeInputs({}, 1);
      tensors[idx] = cpu::testing::Int64s({2}, {1, bad});
      CHECK(!RunReference(nt.trace(), nt.node(), tensors, {}).ok());
      auto l = LowerOutput(nt.trace(), nt.node(), 0, Fn("Gather"));
      REQUIRE(l.ok());
      auto r = RunLowered(*l, nt.trace(), nt.node(), 0, tensors, {});
      REQUIRE(!r.ok());
      CHECK(r.status().code() == StatusCode::kInvalidArgument);
      CHECK(r.status().message().find("Gather 'g' input 'idx' along axis 1") != std::string::npos);
    }
  }
}

TEST_CASE("GatherElements: both axes, negatives, an out-of-range index") {
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, 4});
    ValueId idx = nt.Input("idx", DType::kInt64, {3, 2});
    Check(nt, "GatherElements", {x, idx}, IntAttr("axis", 1), {}, 1, 0,
          {{idx, cpu::testing::Int64s({3, 2}, {0, -1, 3, -4, 2, 1})}});
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kInt32, {3, 4});
    ValueId idx = nt.Input("idx", DType::kInt32, {2, 3});
    Check(nt, "GatherElements", {x, idx}, IntAttr("axis", -2), {}, 1, 0,
          {{idx, cpu::testing::Int32s({2, 3}, {-3, 2, 0, 1, -1, 2})}});
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, 4});
    ValueId idx = nt.Input("idx", DType::kInt64, {3, 2});
    REQUIRE(nt.AddNode("GatherElements", "ge", {x, idx}, IntAttr("axis", 0)).ok());
    auto tensors = nt.MakeInputs({}, 1);
    tensors[idx] = cpu::testing::Int64s({3, 2}, {0, 1, 2, 3, 0, 0});
    auto l = LowerOutput(nt.trace(), nt.node(), 0, Fn("GatherElements"));
    REQUIRE(l.ok());
    auto r = RunLowered(*l, nt.trace(), nt.node(), 0, tensors, {});
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("GatherElements 'ge' input 'idx' along axis 0") != std::string::npos);
  }
}

TEST_CASE("DepthToSpace (DCR, CRD) and SpaceToDepth") {
  for (const char* mode : {"DCR", "CRD"}) {
    INFO(mode);
    NodeTrace nt;
    AttrMap a = IntAttr("blocksize", 2);
    a.SetString("mode", mode);
    Check(nt, "DepthToSpace", {nt.Input("x", DType::kFloat32, {2, 8, 2, 3})}, a);
    NodeTrace nt2;
    Check(nt2, "DepthToSpace", {nt2.Input("x", DType::kInt64, {Sym::Var("N"), 18, Sym::Var("H"), 2})},
          [&] {
            AttrMap b = IntAttr("blocksize", 3);
            b.SetString("mode", mode);
            return b;
          }(),
          {{"N", 2}, {"H", 3}});
  }
  NodeTrace nt;
  Check(nt, "SpaceToDepth", {nt.Input("x", DType::kFloat32, {2, 3, 4, 6})}, IntAttr("blocksize", 2));
  NodeTrace nt2;
  Check(nt2, "SpaceToDepth", {nt2.Input("x", DType::kFloat32, {1, Sym::Var("C"), 6, 3})},
        IntAttr("blocksize", 3), {{"C", 2}});
}

TEST_CASE("Views: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout") {
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {2, 3, 4});
    Check(nt, "Reshape", {x, nt.Ints("s", {4, 6})});
  }
  {
    // The kept dim N passes its coordinate through; only the regrouped dims ravel.
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {Sym::Var("N"), 6});
    Lowered l = Check(nt, "Reshape", {x, nt.Ints("s", {0, 2, 3})}, {}, {{"N", 3}});
    CHECK(CountOps(l.program, fused::Op::kMod) == 0);
    CHECK(CountOps(l.program, fused::Op::kFloorDiv) == 0);
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kInt64, {Sym::Var("N"), 4, 3});
    Check(nt, "Reshape", {x, nt.SymInts("s", {Sym::Var("N") * Sym(2), 6})}, {}, {{"N", 3}});
  }
  {
    NodeTrace nt;
    Check(nt, "Flatten", {nt.Input("x", DType::kFloat32, {2, 3, 4, 5})}, IntAttr("axis", 2));
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, 1, 4, 1});
    Lowered l = Check(nt, "Squeeze", {x, nt.Ints("a", {1, -1})});
    CHECK(CountOps(l.program, fused::Op::kMod) == 0);
    CHECK(CountOps(l.program, fused::Op::kFloorDiv) == 0);
  }
  {
    NodeTrace nt;
    ValueId x = nt.Input("x", DType::kFloat32, {3, Sym::Var("N")});
    Lowered l = Check(nt, "Unsqueeze", {x, nt.Ints("a", {0, -1})}, {}, {{"N", 4}});
    CHECK(CountOps(l.program, fused::Op::kMod) == 0);
  }
  {
    NodeTrace nt;
    Check(nt, "Identity", {nt.Input("x", DType::kBool, {2, 5})});
  }
  {
    NodeTrace nt;
    Check(nt, "Dropout", {nt.Input("x", DType::kFloat32, {2, 5})}, {}, {}, 2, 0);
    // The inference mask is all true: a constant 1, reading nothing.
    auto mask = LowerOutput(nt.trace(), nt.node(), 1, Fn("Dropout"));
    REQUIRE(mask.ok());
    CHECK(CountOps(mask->program, fused::Op::kLoad) == 0);
  }
}

// Resize: every coordinate transformation with every nearest mode, linear with every
// transformation, on the ranks the CPU kernel treats differently.
TEST_CASE("Resize nearest: coordinate transformations x nearest modes, up and down") {
  const char* coords[] = {"half_pixel",         "half_pixel_symmetric", "asymmetric",
                          "pytorch_half_pixel", "align_corners",        "tf_crop_and_resize"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const std::vector<std::vector<float>> scales = {{1, 1, 2, 1.5f}, {1, 1, 0.5f, 0.6f}, {1, 1, 1.75f, 0.34f}};
  for (const char* c : coords) {
    for (const char* n : nearest) {
      for (const auto& s : scales) {
        INFO(c << " " << n << " scales " << s[2] << "," << s[3]);
        NodeTrace nt;
        AttrMap a;
        a.SetString("mode", "nearest");
        a.SetString("coordinate_transformation_mode", c);
        a.SetString("nearest_mode", n);
        a.SetFloat("extrapolation_value", 7.5f);
        ValueId roi = std::string(c) == "tf_crop_and_resize"
                          ? nt.Floats("roi", {0, 0, 0.2f, -0.1f, 1, 1, 0.9f, 1.3f})
                          : ir::kNoValue;
        Check(nt, "Resize", {nt.Input("x", DType::kFloat32, {1, 2, 4, 6}), roi, nt.Floats("scales", s)}, a);
      }
    }
  }
}

TEST_CASE("Resize nearest on int64 and uint8, with sizes and axes") {
  {
    NodeTrace nt;
    AttrMap a;
    a.SetString("mode", "nearest");
    Check(nt, "Resize",
          {nt.Input("x", DType::kInt64, {2, 3, 5}), ir::kNoValue, ir::kNoValue, nt.Ints("sizes", {2, 7, 3})},
          a);
  }
  {
    NodeTrace nt;
    AttrMap a;
    a.SetString("mode", "nearest");
    a.SetString("coordinate_transformation_mode", "asymmetric");
    a.SetInts("axes", {-1});
    Check(nt, "Resize",
          {nt.Input("x", DType::kUInt8, {2, 3, 5}), ir::kNoValue, ir::kNoValue, nt.Ints("sizes", {9})}, a);
  }
}

TEST_CASE("Resize linear: every coordinate transformation on ranks 1 to 4") {
  const char* coords[] = {"half_pixel",         "half_pixel_symmetric", "asymmetric",
                          "pytorch_half_pixel", "align_corners",        "tf_crop_and_resize"};
  struct Shape {
    std::vector<int64_t> in, sizes;
  };
  const Shape shapes[] = {{{4}, {7}},
                          {{5, 4}, {3, 9}},
                          {{2, 4, 3}, {2, 7, 5}},
                          {{1, 2, 5, 4}, {1, 2, 9, 2}},
                          {{1, 2, 5, 4}, {1, 2, 1, 4}},
                          {{3, 2, 1, 4}, {5, 2, 3, 4}}};
  for (const char* c : coords) {
    for (const Shape& sh : shapes) {
      INFO(c << " rank " << sh.in.size() << " out dim 0 " << sh.sizes[0]);
      NodeTrace nt;
      AttrMap a;
      a.SetString("mode", "linear");
      a.SetString("coordinate_transformation_mode", c);
      a.SetFloat("extrapolation_value", -2.5f);
      ir::SymShape in(sh.in.begin(), sh.in.end());
      ValueId roi = ir::kNoValue;
      if (std::string(c) == "tf_crop_and_resize") {
        std::vector<float> r;
        for (size_t k = 0; k < sh.in.size(); ++k) r.push_back(k % 2 ? -0.2f : 0.1f);
        for (size_t k = 0; k < sh.in.size(); ++k) r.push_back(k % 2 ? 1.1f : 0.8f);
        roi = nt.Floats("roi", r);
      }
      Check(nt, "Resize", {nt.Input("x", DType::kFloat32, in), roi, ir::kNoValue, nt.Ints("sizes", sh.sizes)},
            a);
    }
  }
  // Scales rather than sizes.
  NodeTrace nt;
  AttrMap a;
  a.SetString("mode", "linear");
  Check(nt, "Resize",
        {nt.Input("x", DType::kFloat32, {1, 3, 4, 6}), ir::kNoValue, nt.Floats("s", {1, 1, 2, 0.5f})}, a);
}

TEST_CASE("Resize with symbolic dims and sizes") {
  const Sym h = Sym::Var("H"), w = Sym::Var("W");
  for (const char* mode : {"nearest", "linear"}) {
    for (const char* c : {"half_pixel", "align_corners", "pytorch_half_pixel"}) {
      INFO(mode << " " << c);
      NodeTrace nt;
      AttrMap a;
      a.SetString("mode", mode);
      a.SetString("coordinate_transformation_mode", c);
      Lowered l = Check(nt, "Resize",
                        {nt.Input("x", DType::kFloat32, {1, 3, h, w}), ir::kNoValue, ir::kNoValue,
                         nt.SymInts("sizes", {1, 3, h * Sym(2), w + Sym(3)})},
                        a, {{"H", 3}, {"W", 4}});
      CHECK(l.program.num_sizes >= 2);
      // The same program at a binding where the width is unscaled at run time.
      NodeTrace nt2;
      Check(nt2, "Resize",
            {nt2.Input("x", DType::kFloat32, {1, 3, h, w}), ir::kNoValue, ir::kNoValue,
             nt2.SymInts("sizes", {1, 3, h * Sym(2), Sym::Var("V")})},
            a, {{"H", 3}, {"W", 4}, {"V", 4}});
    }
  }
  // Constant scales on symbolic dims.
  NodeTrace nt;
  AttrMap a;
  a.SetString("mode", "nearest");
  Check(nt, "Resize",
        {nt.Input("x", DType::kFloat32, {1, 1, h, w}), ir::kNoValue, nt.Floats("s", {1, 1, 2, 3})}, a,
        {{"H", 3}, {"W", 2}});
}

// The CPU kernel interpolates float32 only; float16 and float64 inputs compute in float
// (float16) or with float weights summed in double (float64). Checked against the float32
// kernel on the same values: float16 rounded on store is the kernel's result rounded.
TEST_CASE("Resize linear on float16 and float64 follows the float32 kernel") {
  for (DType dtype : {DType::kFloat16, DType::kFloat64}) {
    INFO(DTypeName(dtype));
    auto build = [](NodeTrace& nt, DType t) {
      AttrMap a;
      a.SetString("mode", "linear");
      a.SetString("coordinate_transformation_mode", "align_corners");
      ValueId x = nt.Input("x", t, {1, 2, 3, 5});
      REQUIRE(
          nt.AddNode("Resize", "r", {x, ir::kNoValue, ir::kNoValue, nt.Ints("sizes", {1, 2, 5, 8})}, a).ok());
      return x;
    };
    NodeTrace nt, ref;
    const ValueId x = build(nt, dtype);
    const ValueId xf = build(ref, DType::kFloat32);
    auto tensors = nt.MakeInputs({}, 3);
    auto ref_tensors = ref.MakeInputs({}, 3);
    const int64_t n = tensors[x].ref().num_elements;
    std::vector<float> values(n);
    for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>(ElementAt(tensors[x], i));
    ref_tensors[xf] = cpu::testing::Floats({1, 2, 3, 5}, values);
    auto l = LowerOutput(nt.trace(), nt.node(), 0, Fn("Resize"));
    REQUIRE_MESSAGE(l.ok(), l.status().ToString());
    auto fused = RunLowered(*l, nt.trace(), nt.node(), 0, tensors, {});
    REQUIRE_MESSAGE(fused.ok(), fused.status().ToString());
    auto expected = RunReference(ref.trace(), ref.node(), ref_tensors, {});
    REQUIRE(expected.ok());
    const std::vector<float> e = (*expected)[0].values<float>();
    REQUIRE(static_cast<int64_t>(e.size()) == fused->ref().num_elements);
    for (size_t i = 0; i < e.size(); ++i) {
      INFO("element " << i);
      if (dtype == DType::kFloat16) {
        CHECK(HalfToFloat(FloatToHalf(e[i])) ==
              static_cast<float>(ElementAt(*fused, static_cast<int64_t>(i))));
      } else {
        CHECK(ElementAt(*fused, static_cast<int64_t>(i)) == doctest::Approx(e[i]).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("Resize without a fused form stays unfused") {
  auto resize = [](const char* mode, DType dtype, bool antialias, ir::SymShape in, std::vector<Sym> sizes) {
    NodeTrace nt;
    AttrMap a;
    a.SetString("mode", mode);
    if (antialias) a.SetInt("antialias", 1);
    ValueId x = nt.Input("x", dtype, in);
    REQUIRE(nt.AddNode("Resize", "r", {x, ir::kNoValue, ir::kNoValue, nt.SymInts("sizes", sizes)}, a).ok());
    return LowerError(nt);
  };
  Status cubic = resize("cubic", DType::kFloat32, false, {1, 1, 4, 4}, {1, 1, 8, 8});
  CHECK(cubic.code() == StatusCode::kUnimplemented);
  CHECK(cubic.message() == "Resize mode 'cubic' has no fused form");
  CHECK(resize("linear", DType::kFloat32, true, {1, 1, 4, 4}, {1, 1, 8, 8}).code() ==
        StatusCode::kUnimplemented);
  Status integer = resize("linear", DType::kInt64, false, {1, 1, 4, 4}, {1, 1, 8, 8});
  CHECK(integer.code() == StatusCode::kUnimplemented);
  CHECK(integer.message().find("int64") != std::string::npos);
  // A non-inner axis whose scale is only known at run time.
  Status runtime =
      resize("linear", DType::kFloat32, false, {Sym::Var("N"), 3, 4, 4}, {Sym::Var("M"), 3, 8, 8});
  CHECK(runtime.code() == StatusCode::kUnimplemented);
  CHECK(runtime.message().find("axis 0") != std::string::npos);
}

}  // namespace
}  // namespace kiln::fusion::testing
