// Meta functions of the general-purpose ops (meta_math.cc, meta_matrix.cc, and the op
// families added with them): output dtypes and shapes, and the messages for bad attributes.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir {
namespace {

struct Graph {
  Trace t;

  ValueId In(DType dt, SymShape shape) {
    Value v;
    v.name = "in" + std::to_string(t.values.size());
    v.dtype = dt;
    v.shape = std::move(shape);
    return t.AddValue(std::move(v));
  }
  ValueId Ints(std::vector<int64_t> vals, std::vector<int64_t> dims) {
    auto d = std::make_shared<ConstData>();
    d->dtype = DType::kInt64;
    d->dims = dims;
    d->bytes.resize(vals.size() * 8);
    if (!vals.empty()) std::memcpy(d->bytes.data(), vals.data(), d->bytes.size());
    Value v;
    v.name = "c" + std::to_string(t.values.size());
    v.dtype = DType::kInt64;
    for (int64_t x : dims) v.shape.push_back(Sym(x));
    v.data = d;
    return t.AddValue(std::move(v));
  }
  Status Op(const std::string& op, std::vector<ValueId> ins, AttrMap attrs = {}, int nout = 1) {
    Node n;
    n.op = op;
    n.name = "n";
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    for (int i = 0; i < nout; ++i) n.outputs.push_back(t.AddValue(Value{}));
    t.body.nodes.push_back(std::move(n));
    return InferNode(t, t.body.nodes.back());
  }
  const Value& Out(int i = 0) const { return t.value(t.body.nodes.back().outputs[i]); }
  std::string Shape(int i = 0) const { return ShapeToString(Out(i).shape); }
};

using testing::N;

bool Says(const Status& s, const std::string& text) {
  INFO(s.ToString());
  return s.message().find(text) != std::string::npos;
}

TEST_CASE("math ops: dtypes, broadcasting and attribute errors") {
  Graph g;
  ValueId f = g.In(DType::kFloat32, {N, Sym(3)});
  REQUIRE(g.Op("Asinh", {f}).ok());
  CHECK(g.Out().dtype == DType::kFloat32);
  REQUIRE(g.Op("IsNaN", {f}).ok());
  CHECK(g.Out().dtype == DType::kBool);
  CHECK(g.Shape() == "[N, 3]");
  AttrMap bad_flag;
  bad_flag.SetInt("detect_negative", 2);
  Status s = g.Op("IsInf", {f}, bad_flag);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(Says(s, "node 'n' (IsInf): attribute detect_negative: expected 0 or 1, found 2"));

  ValueId a = g.In(DType::kUInt16, {Sym(2), Sym(1)});
  ValueId b = g.In(DType::kUInt16, {Sym(3)});
  AttrMap left;
  left.SetString("direction", "LEFT");
  REQUIRE(g.Op("BitShift", {a, b}, left).ok());
  CHECK(g.Shape() == "[2, 3]");
  AttrMap up;
  up.SetString("direction", "UP");
  CHECK(Says(g.Op("BitShift", {a, b}, up), "(BitShift): attribute direction: expected \"LEFT\" or \"RIGHT\", found \"UP\""));
  CHECK(Says(g.Op("BitShift", {a, b}), "found none"));
  ValueId i = g.In(DType::kInt32, {Sym(3)});
  CHECK(g.Op("BitShift", {i, i}, left).code() == StatusCode::kInvalidArgument);
  CHECK(g.Op("BitwiseAnd", {a, i}).code() == StatusCode::kInvalidArgument);
  CHECK(g.Op("BitwiseNot", {f}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("matrix ops: Trilu, EyeLike, Det") {
  Graph g;
  ValueId x = g.In(DType::kInt64, {Sym(2), N, Sym(4)});
  ValueId k = g.Ints({1}, {});
  REQUIRE(g.Op("Trilu", {x, k}).ok());
  CHECK(g.Shape() == "[2, N, 4]");
  ValueId v = g.In(DType::kFloat32, {Sym(4)});
  CHECK(Says(g.Op("Trilu", {v}), "(Trilu): input: expected rank 2..8, found rank 1"));
  ValueId k2 = g.Ints({1, 2}, {2});
  CHECK(Says(g.Op("Trilu", {x, k2}), "input k: expected a scalar"));

  ValueId m = g.In(DType::kInt32, {Sym(3), Sym(4)});
  AttrMap dt;
  dt.SetInt("dtype", static_cast<int64_t>(DType::kFloat64));
  REQUIRE(g.Op("EyeLike", {m}, dt).ok());
  CHECK(g.Out().dtype == DType::kFloat64);
  REQUIRE(g.Op("EyeLike", {m}).ok());
  CHECK(g.Out().dtype == DType::kInt32);
  dt.SetInt("dtype", 999);
  CHECK(Says(g.Op("EyeLike", {m}, dt), "attribute dtype: expected a supported dtype, found 999"));

  ValueId sq = g.In(DType::kFloat32, {Sym(5), Sym(3), Sym(3)});
  REQUIRE(g.Op("Det", {sq}).ok());
  CHECK(g.Shape() == "[5]");
  ValueId rect = g.In(DType::kFloat32, {Sym(3), Sym(4)});
  CHECK(g.Op("Det", {rect}).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("index ops: ScatterElements, ScatterND, GatherND, OneHot, TopK") {
  Graph g;
  ValueId data = g.In(DType::kFloat32, {Sym(4), Sym(5), Sym(6)});
  ValueId idx = g.In(DType::kInt64, {Sym(4), Sym(2), Sym(6)});
  ValueId upd = g.In(DType::kFloat32, {Sym(4), Sym(2), Sym(6)});
  AttrMap red;
  red.SetString("reduction", "avg");
  CHECK(Says(g.Op("ScatterElements", {data, idx, upd}, red),
             "(ScatterElements): attribute reduction: expected none, add, mul, max or min, found \"avg\""));
  REQUIRE(g.Op("Scatter", {data, idx, upd}).ok());
  CHECK(g.Shape() == "[4, 5, 6]");

  ValueId tuples = g.In(DType::kInt64, {N, Sym(2)});
  ValueId slices = g.In(DType::kFloat32, {N, Sym(6)});
  REQUIRE(g.Op("ScatterND", {data, tuples, slices}).ok());
  ValueId wrong = g.In(DType::kFloat32, {N, Sym(5)});
  CHECK(g.Op("ScatterND", {data, tuples, wrong}).code() == StatusCode::kInvalidArgument);
  REQUIRE(g.Op("GatherND", {data, tuples}).ok());
  CHECK(g.Shape() == "[N, 6]");
  ValueId bidx = g.In(DType::kInt64, {Sym(4), Sym(3), Sym(1)});
  AttrMap b1;
  b1.SetInt("batch_dims", 1);
  REQUIRE(g.Op("GatherND", {data, bidx}, b1).ok());
  CHECK(g.Shape() == "[4, 3, 6]");
  b1.SetInt("batch_dims", 3);
  CHECK(Says(g.Op("GatherND", {data, bidx}, b1), "attribute batch_dims"));

  ValueId ind = g.In(DType::kInt64, {Sym(2), Sym(3)});
  ValueId depth = g.Ints({10}, {});
  ValueId values = g.In(DType::kFloat32, {Sym(2)});
  AttrMap ax;
  ax.SetInt("axis", 1);
  REQUIRE(g.Op("OneHot", {ind, depth, values}, ax).ok());
  CHECK(g.Shape() == "[2, 10, 3]");
  ValueId live_depth = g.In(DType::kInt64, {});
  CHECK(Says(g.Op("OneHot", {ind, live_depth, values}), "data-dependent output shape: depth"));

  ValueId k = g.Ints({3}, {1});
  REQUIRE(g.Op("TopK", {data, k}, {}, 2).ok());
  CHECK(g.Shape(0) == "[4, 5, 3]");
  CHECK(g.Out(1).dtype == DType::kInt64);
  ValueId k9 = g.Ints({9}, {1});
  CHECK(Says(g.Op("TopK", {data, k9}, {}, 2), "input K: expected at most 6 (X dim 2), found 9"));
}

}  // namespace
}  // namespace kiln::ir
