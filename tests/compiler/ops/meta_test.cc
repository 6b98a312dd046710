// Tests of the op registry's meta functions on small hand-built traces.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "compiler/ops/meta_util.h"
#include "compiler/ops/registry.h"
#include "tests/compiler/ops/infer_one.h"

namespace kiln::ir {
namespace {

// Builds a trace node by node, running InferNode on each.
struct Builder {
  Trace t;

  ValueId Input(const std::string& name, DType dt, SymShape shape) {
    Value v;
    v.name = name;
    v.dtype = dt;
    v.shape = std::move(shape);
    ValueId id = t.AddValue(std::move(v));
    t.inputs.push_back(id);
    return id;
  }
  template <typename T>
  ValueId Const(const std::string& name, DType dt, std::vector<T> vals, std::vector<int64_t> dims) {
    auto d = std::make_shared<ConstData>();
    d->dtype = dt;
    d->dims = dims;
    d->bytes.resize(vals.size() * sizeof(T));
    if (!vals.empty()) std::memcpy(d->bytes.data(), vals.data(), d->bytes.size());
    Value v;
    v.name = name;
    v.dtype = dt;
    for (int64_t x : dims) v.shape.push_back(Sym(x));
    v.data = d;
    return t.AddValue(std::move(v));
  }
  ValueId Ints(const std::string& name, std::vector<int64_t> vals) {
    int64_t n = static_cast<int64_t>(vals.size());
    return Const<int64_t>(name, DType::kInt64, std::move(vals), {n});
  }
  ValueId Floats(const std::string& name, std::vector<float> vals) {
    int64_t n = static_cast<int64_t>(vals.size());
    return Const<float>(name, DType::kFloat32, std::move(vals), {n});
  }
  // Adds a node with `nout` fresh outputs and infers it.
  Status Op(const std::string& op, std::vector<ValueId> ins, AttrMap attrs = {}, int nout = 1) {
    Node n;
    n.op = op;
    n.name = op + std::to_string(t.body.nodes.size());
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    for (int i = 0; i < nout; ++i) {
      Value v;
      v.name = n.name + "_out" + std::to_string(i);
      n.outputs.push_back(t.AddValue(std::move(v)));
    }
    t.body.nodes.push_back(std::move(n));
    return InferNode(t, t.body.nodes.back());
  }
  ValueId Out(int i = 0) const { return t.body.nodes.back().outputs[i]; }
  const Value& OutV(int i = 0) const { return t.value(Out(i)); }
  std::string OutShape(int i = 0) const { return ShapeToString(OutV(i).shape); }
  std::string OutSym(int i = 0) const {
    const auto& s = OutV(i).sym;
    return s ? ShapeToString(*s) : "none";
  }
};

AttrMap Attrs(std::initializer_list<std::pair<const char*, std::vector<int64_t>>> ints) {
  AttrMap a;
  for (const auto& [k, v] : ints) a.SetInts(k, v);
  return a;
}

using testing::N;
const Sym M = Sym::Var("M");
const Sym H = Sym::Var("H");
const Sym W = Sym::Var("W");
const Sym T = Sym::Var("T");

TEST_CASE("registry: every op is registered for cpu, unknown ops are Unimplemented") {
  for (const char* op : {"Add", "Conv", "MatMul", "Reshape", "Resize", "LSTM", "Shape", "Gather",
                         "ReduceMean", "Softmax", "ConstantOfShape", "Range", "Where", "Cast"}) {
    const OpDef* d = FindOp(op);
    REQUIRE_MESSAGE(d != nullptr, op);
  }
  CHECK(AllOps().size() >= 90);
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N});
  Status s = b.Op("NoSuchOp", {x});
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message().find("node 'NoSuchOp0' (NoSuchOp): no op 'NoSuchOp' in the registry") == 0);
}

TEST_CASE("Conv: symbolic N/H/W with strides and pads") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N, 3, H, W});
  ValueId w = b.Const<float>("w", DType::kFloat32, std::vector<float>(16 * 3 * 9), {16, 3, 3, 3});
  ValueId bias = b.Floats("b", std::vector<float>(16));
  AttrMap a = Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  REQUIRE(b.Op("Conv", {x, w, bias}, a).ok());
  CHECK(b.OutShape() == "[N, 16, ((H+1) floordiv 2), ((W+1) floordiv 2)]");
  CHECK(b.OutV().dtype == DType::kFloat32);
  CHECK(b.OutV().shape[2].Eval({{"H", 224}}) == 112);
  CHECK(b.OutV().shape[2].Eval({{"H", 7}}) == 4);

  // Stride 1 "same" padding keeps the symbols themselves.
  REQUIRE(b.Op("Conv", {x, w}, Attrs({{"pads", {1, 1, 1, 1}}})).ok());
  CHECK(b.OutShape() == "[N, 16, H, W]");
  // Dilation and SAME_UPPER.
  REQUIRE(b.Op("Conv", {x, w}, Attrs({{"dilations", {2, 2}}})).ok());
  CHECK(b.OutShape() == "[N, 16, (H-4), (W-4)]");
  AttrMap same = Attrs({{"strides", {2, 2}}});
  same.SetString("auto_pad", "SAME_UPPER");
  REQUIRE(b.Op("Conv", {x, w}, same).ok());
  CHECK(b.OutShape() == "[N, 16, (H ceildiv 2), (W ceildiv 2)]");
  // Static shapes fold to constants.
  ValueId xs = b.Input("xs", DType::kFloat32, {1, 3, 224, 224});
  REQUIRE(b.Op("Conv", {xs, w}, a).ok());
  CHECK(b.OutShape() == "[1, 16, 112, 112]");
}

TEST_CASE("Conv: bad group and channel errors") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {1, 16, 8, 8});
  ValueId w = b.Const<float>("w", DType::kFloat32, std::vector<float>(6 * 5 * 9), {6, 5, 3, 3});
  AttrMap a;
  a.SetInt("group", 3);
  Status s = b.Op("Conv", {x, w}, a);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("input channels 16 not divisible by group 3") != std::string::npos);
  CHECK(s.message().find("(Conv)") != std::string::npos);

  ValueId w2 = b.Const<float>("w2", DType::kFloat32, std::vector<float>(8 * 4 * 9), {8, 4, 3, 3});
  s = b.Op("Conv", {x, w2});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("expected 4") != std::string::npos);
  CHECK(s.message().find("found 16") != std::string::npos);

  AttrMap g2;
  g2.SetInt("group", 4);
  CHECK(b.Op("Conv", {x, w2}, g2).ok());
  CHECK(b.OutShape() == "[1, 8, 6, 6]");
}

TEST_CASE("ConvTranspose and pooling shapes") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N, 8, H, W});
  ValueId w = b.Const<float>("w", DType::kFloat32, std::vector<float>(8 * 4 * 16), {8, 4, 4, 4});
  REQUIRE(b.Op("ConvTranspose", {x, w}, Attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}})).ok());
  CHECK(b.OutShape() == "[N, 4, (H*2), (W*2)]");

  REQUIRE(b.Op("MaxPool", {x}, Attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})).ok());
  CHECK(b.OutShape() == "[N, 8, (H floordiv 2), (W floordiv 2)]");
  REQUIRE(b.Op("GlobalAveragePool", {x}).ok());
  CHECK(b.OutShape() == "[N, 8, 1, 1]");

  // ceil_mode with a last window starting in the padding (PyTorch's rule): 5 -> 3, not 4.
  ValueId xs = b.Input("xs", DType::kFloat32, {1, 1, 5, 5});
  AttrMap cm = Attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  cm.SetInt("ceil_mode", 1);
  REQUIRE(b.Op("MaxPool", {xs}, cm).ok());
  CHECK(b.OutShape() == "[1, 1, 3, 3]");
  cm.Erase("pads");
  REQUIRE(b.Op("MaxPool", {xs}, cm).ok());
  CHECK(b.OutShape() == "[1, 1, 3, 3]");
  REQUIRE(b.Op("MaxPool", {x}, cm).ok());
  CHECK(b.OutV().shape[2].Eval({{"H", 5}}) == 3);
  CHECK(b.OutV().shape[2].Eval({{"H", 6}}) == 3);

  Status s = b.Op("MaxPool", {xs}, Attrs({{"kernel_shape", {7, 7}}}));
  CHECK(s.code() == StatusCode::kInvalidArgument);
}

TEST_CASE("broadcasting") {
  Builder b;
  ValueId a = b.Input("a", DType::kFloat32, {N, 1, 4});
  ValueId c = b.Input("c", DType::kFloat32, {3, 1});
  REQUIRE(b.Op("Add", {a, c}).ok());
  CHECK(b.OutShape() == "[N, 3, 4]");

  ValueId d = b.Input("d", DType::kFloat32, {2, 3});
  ValueId e = b.Input("e", DType::kFloat32, {4, 3});
  Status s = b.Op("Mul", {d, e});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("[2, 3]") != std::string::npos);
  CHECK(s.message().find("[4, 3]") != std::string::npos);

  // A symbol against a constant takes the constant and guards what numpy allows: the symbol
  // is that constant or 1 (broadcast at run time).
  ValueId f = b.Input("f", DType::kFloat32, {N});
  ValueId g = b.Input("g", DType::kFloat32, {5});
  REQUIRE(b.Op("Sub", {f, g}).ok());
  CHECK(b.OutShape() == "[5]");
  REQUIRE(b.t.guards.size() == 1);
  CHECK(b.t.guards[0].condition.ToString() == "(0 < ((N == 5)+(N == 1)))");
  // Two symbols give the larger, guarded the same way; MatMul's batch dims, whose libraries
  // need them equal, keep the equality guard.
  ValueId m1 = b.Input("m1", DType::kFloat32, {M});
  REQUIRE(b.Op("Sub", {f, m1}).ok());
  CHECK(b.OutShape() == "[max(N, M)]");
  REQUIRE(b.t.guards.size() == 2);
  CHECK(b.t.guards[1].condition.ToString() == "(0 < (((N == M)+(N == 1))+(M == 1)))");
  ValueId p = b.Input("p", DType::kFloat32, {N, 2, 2});
  ValueId q = b.Input("q", DType::kFloat32, {M, 2, 2});
  REQUIRE(b.Op("MatMul", {p, q}).ok());
  CHECK(b.OutShape() == "[N, 2, 2]");
  REQUIRE(b.t.guards.size() == 3);
  CHECK(b.t.guards[2].condition.ToString() == "(N == M)");

  // Comparisons give bool; mismatched dtypes are rejected.
  REQUIRE(b.Op("Less", {a, c}).ok());
  CHECK(b.OutV().dtype == DType::kBool);
  ValueId i = b.Input("i", DType::kInt64, {3, 1});
  s = b.Op("Add", {a, i});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("float32") != std::string::npos);
  CHECK(s.message().find("int64") != std::string::npos);

  ValueId cond = b.Input("cond", DType::kBool, {1, 3, 1});
  REQUIRE(b.Op("Where", {cond, a, c}).ok());
  CHECK(b.OutShape() == "[N, 3, 4]");
}

TEST_CASE("MatMul shapes and mismatch") {
  Builder b;
  ValueId a = b.Input("a", DType::kFloat32, {T, N, 64});
  ValueId w = b.Input("w", DType::kFloat32, {64, 10});
  REQUIRE(b.Op("MatMul", {a, w}).ok());
  CHECK(b.OutShape() == "[T, N, 10]");
  ValueId v = b.Input("v", DType::kFloat32, {64});
  REQUIRE(b.Op("MatMul", {v, w}).ok());
  CHECK(b.OutShape() == "[10]");
  REQUIRE(b.Op("MatMul", {a, v}).ok());
  CHECK(b.OutShape() == "[T, N]");
  REQUIRE(b.Op("MatMul", {v, v}).ok());
  CHECK(b.OutShape() == "[]");
  ValueId bb = b.Input("bb", DType::kFloat32, {3, 1, 64, 5});
  REQUIRE(b.Op("MatMul", {a, bb}).ok());
  CHECK(b.OutShape() == "[3, T, N, 5]");

  ValueId x = b.Input("x", DType::kFloat32, {N, 64});
  ValueId y = b.Input("y", DType::kFloat32, {32, 10});
  Status s = b.Op("MatMul", {x, y});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("inner dims differ: A [N, 64] vs B [32, 10]") != std::string::npos);
  CHECK(s.message().find("expected 64, found 32") != std::string::npos);

  AttrMap t;
  t.SetInt("transB", 1);
  ValueId wt = b.Input("wt", DType::kFloat32, {10, 64});
  ValueId bias = b.Input("bias", DType::kFloat32, {10});
  REQUIRE(b.Op("Gemm", {x, wt, bias}, t).ok());
  CHECK(b.OutShape() == "[N, 10]");
}

TEST_CASE("Reshape with -1 and 0 on a symbolic input") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N, 64, 7, 7});
  REQUIRE(b.Op("Reshape", {x, b.Ints("s", {0, -1})}).ok());
  CHECK(b.OutShape() == "[N, 3136]");
  REQUIRE(b.Op("Reshape", {x, b.Ints("s2", {-1, 49})}).ok());
  CHECK(b.OutShape() == "[(N*64), 49]");
  REQUIRE(b.Op("Reshape", {x, b.Ints("s3", {0, 0, -1})}).ok());
  CHECK(b.OutShape() == "[N, 64, 49]");
  Status s = b.Op("Reshape", {x, b.Ints("s4", {0, 5, -1})});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  s = b.Op("Reshape", {x, b.Ints("s5", {-1, -1})});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  ValueId xs = b.Input("xs", DType::kFloat32, {2, 3});
  s = b.Op("Reshape", {xs, b.Ints("s6", {4, 2})});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("expected 6 elements, found 8") != std::string::npos);
  // A shape computed at run time from data is data-dependent.
  ValueId dyn = b.Input("dyn", DType::kInt64, {2});
  s = b.Op("Reshape", {x, dyn});
  CHECK(s.code() == StatusCode::kUnimplemented);
  CHECK(s.message().find("data-dependent output shape") != std::string::npos);
}

TEST_CASE("Shape -> Gather -> Unsqueeze -> Concat -> Reshape stays symbolic") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N, 16, H, W});
  REQUIRE(b.Op("Shape", {x}).ok());
  ValueId shp = b.Out();
  CHECK(b.OutShape() == "[4]");
  CHECK(b.OutSym() == "[N, 16, H, W]");
  ValueId zero = b.Const<int64_t>("zero", DType::kInt64, {0}, {});
  REQUIRE(b.Op("Gather", {shp, zero}).ok());
  CHECK(b.OutShape() == "[]");
  CHECK(b.OutSym() == "[N]");
  ValueId n = b.Out();
  REQUIRE(b.Op("Unsqueeze", {n, b.Ints("ax", {0})}).ok());
  CHECK(b.OutShape() == "[1]");
  CHECK(b.OutSym() == "[N]");
  ValueId n1 = b.Out();
  AttrMap ax0;
  ax0.SetInt("axis", 0);
  REQUIRE(b.Op("Concat", {n1, b.Ints("m1", {-1})}, ax0).ok());
  CHECK(b.OutSym() == "[N, -1]");
  ValueId target = b.Out();
  REQUIRE(b.Op("Reshape", {x, target}).ok());
  CHECK(b.OutShape() == "[N, ((H*W)*16)]");

  // Shape with start/end, arithmetic, comparison and Cast.
  AttrMap se;
  se.SetInt("start", 2);
  REQUIRE(b.Op("Shape", {x}, se).ok());
  CHECK(b.OutSym() == "[H, W]");
  ValueId hw = b.Out();
  REQUIRE(b.Op("Mul", {hw, b.Const<int64_t>("two", DType::kInt64, {2}, {})}).ok());
  CHECK(b.OutSym() == "[(H*2), (W*2)]");
  REQUIRE(b.Op("Sub", {hw, b.Ints("one", {1})}).ok());
  CHECK(b.OutSym() == "[(H-1), (W-1)]");
  REQUIRE(b.Op("Div", {hw, b.Ints("two2", {2})}).ok());
  CHECK(b.OutSym() == "[(H floordiv 2), (W floordiv 2)]");
  REQUIRE(b.Op("Equal", {n, b.Const<int64_t>("one1", DType::kInt64, {1}, {})}).ok());
  CHECK(b.OutV().dtype == DType::kBool);
  CHECK(b.OutSym() == "[(N == 1)]");
  REQUIRE(b.Op("Not", {b.Out()}).ok());
  CHECK(b.OutSym() == "[(1-(N == 1))]");
  AttrMap to;
  to.SetInt("to", static_cast<int64_t>(DType::kInt32));
  REQUIRE(b.Op("Cast", {hw}, to).ok());
  CHECK(b.OutV().dtype == DType::kInt32);
  CHECK(b.OutSym() == "[H, W]");
  REQUIRE(b.Op("Size", {x}).ok());
  CHECK(b.OutShape() == "[]");
  CHECK(b.OutSym() == "[(((N*16)*H)*W)]");

  // ConstantOfShape / Expand / Slice fed by shape arithmetic.
  AttrMap cos;
  cos.SetInt("dtype", static_cast<int64_t>(DType::kFloat32));
  cos.SetFloat("value_float", 0.0f);
  REQUIRE(b.Op("ConstantOfShape", {hw}, cos).ok());
  CHECK(b.OutShape() == "[H, W]");
  REQUIRE(b.Op("Expand", {b.Input("e", DType::kFloat32, {1, 1, 1, 1}), shp}).ok());
  CHECK(b.OutShape() == "[N, 16, H, W]");
  REQUIRE(b.Op("Slice", {shp, b.Ints("st", {1}), b.Ints("en", {3})}).ok());
  CHECK(b.OutShape() == "[2]");
  CHECK(b.OutSym() == "[16, H]");
  REQUIRE(b.Op("Range", {b.Const<int64_t>("r0", DType::kInt64, {0}, {}), n,
                         b.Const<int64_t>("r1", DType::kInt64, {1}, {})}).ok());
  CHECK(b.OutShape() == "[N]");
}

TEST_CASE("Slice, Split, Pad, Transpose, Squeeze on symbolic dims") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N, T, 32});
  REQUIRE(b.Op("Slice", {x, b.Ints("s", {1}), b.Ints("e", {INT64_MAX}), b.Ints("a", {1})}).ok());
  CHECK(b.OutShape() == "[N, (T-1), 32]");
  REQUIRE(b.Op("Slice", {x, b.Ints("s2", {-1}), b.Ints("e2", {INT64_MAX}), b.Ints("a2", {1})}).ok());
  CHECK(b.OutShape() == "[N, 1, 32]");
  REQUIRE(b.Op("Slice", {x, b.Ints("s3", {0}), b.Ints("e3", {16}), b.Ints("a3", {-1}),
                         b.Ints("st3", {2})}).ok());
  CHECK(b.OutShape() == "[N, T, 8]");
  REQUIRE(b.Op("Slice", {x, b.Ints("s4", {-1}), b.Ints("e4", {INT64_MIN}), b.Ints("a4", {1}),
                         b.Ints("st4", {-1})}).ok());
  CHECK(b.OutShape() == "[N, T, 32]");
  // Bounds past a symbolic dim are clamped exactly (ONNX Slice-13), never assumed in range: a T
  // shorter than 5, or than the 1e9 some exporters write for "to the end", is a valid input.
  REQUIRE(b.Op("Slice", {x, b.Ints("s5", {0}), b.Ints("e5", {5}), b.Ints("a5", {1})}).ok());
  CHECK(b.OutShape() == "[N, min(5, T), 32]");
  REQUIRE(b.Op("Slice", {x, b.Ints("s6", {-3}), b.Ints("e6", {INT64_MAX}), b.Ints("a6", {1})}).ok());
  CHECK(b.OutShape() == "[N, min(3, T), 32]");
  REQUIRE(b.Op("Slice", {x, b.Ints("s7", {1}), b.Ints("e7", {1000000000}), b.Ints("a7", {1})}).ok());
  CHECK(b.OutShape() == "[N, (min(1000000000, T)-1), 32]");
  REQUIRE(b.Op("Slice", {x, b.Ints("s8", {2}), b.Ints("e8", {-1}), b.Ints("a8", {1})}).ok());
  CHECK(b.OutShape() == "[N, max(0, ((T-min(2, T))-1)), 32]");
  REQUIRE(b.Op("Slice", {x, b.Ints("s9", {4}), b.Ints("e9", {1}), b.Ints("a9", {1}), b.Ints("st9", {-1})}).ok());
  CHECK(b.OutShape() == "[N, max(0, (min(4, (T-1))-min(1, (T-1)))), 32]");
  CHECK(b.t.guards.empty());

  AttrMap ax;
  ax.SetInt("axis", 2);
  REQUIRE(b.Op("Split", {x, b.Ints("sp", {8, 24})}, ax, 2).ok());
  CHECK(b.OutShape(0) == "[N, T, 8]");
  CHECK(b.OutShape(1) == "[N, T, 24]");
  AttrMap ax1;
  ax1.SetInt("axis", 2);
  ax1.SetInt("num_outputs", 3);
  REQUIRE(b.Op("Split", {x}, ax1, 3).ok());
  CHECK(b.OutShape(2) == "[N, T, 10]");

  REQUIRE(b.Op("Pad", {x, b.Ints("p", {0, 1, 0, 0, 2, 0})}).ok());
  CHECK(b.OutShape() == "[N, (T+3), 32]");
  REQUIRE(b.Op("Transpose", {x}, Attrs({{"perm", {1, 0, 2}}})).ok());
  CHECK(b.OutShape() == "[T, N, 32]");
  Status s = b.Op("Transpose", {x}, Attrs({{"perm", {1, 1, 2}}}));
  CHECK(s.code() == StatusCode::kInvalidArgument);

  ValueId y = b.Input("y", DType::kFloat32, {N, 1, 32});
  REQUIRE(b.Op("Squeeze", {y, b.Ints("sq", {1})}).ok());
  CHECK(b.OutShape() == "[N, 32]");
  s = b.Op("Squeeze", {y});
  CHECK(s.code() == StatusCode::kUnimplemented);

  REQUIRE(b.Op("ReduceMean", {x, b.Ints("ra", {-1})}).ok());
  CHECK(b.OutShape() == "[N, T, 1]");
  AttrMap kd;
  kd.SetInt("keepdims", 0);
  REQUIRE(b.Op("ReduceSum", {x, b.Ints("ra2", {1})}, kd).ok());
  CHECK(b.OutShape() == "[N, 32]");
  REQUIRE(b.Op("ArgMax", {x}, kd).ok());
  CHECK(b.OutShape() == "[T, 32]");
  CHECK(b.OutV().dtype == DType::kInt64);
}

TEST_CASE("Resize with scales and sizes") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N, 3, H, W});
  REQUIRE(b.Op("Resize", {x, kNoValue, b.Floats("sc", {1, 1, 2, 2})}).ok());
  CHECK(b.OutShape() == "[N, 3, (H*2), (W*2)]");
  REQUIRE(b.Op("Resize", {x, kNoValue, b.Floats("sc2", {1, 1, 0.5f, 1.5f})}).ok());
  CHECK(b.OutShape() == "[N, 3, (H floordiv 2), ((W*3) floordiv 2)]");
  Status s = b.Op("Resize", {x, kNoValue, b.Floats("sc3", {1, 1, 1.0f / 3, 1})});
  CHECK(s.code() == StatusCode::kUnimplemented);
  ValueId xs = b.Input("xs", DType::kFloat32, {1, 3, 10, 10});
  REQUIRE(b.Op("Resize", {xs, kNoValue, b.Floats("sc4", {1, 1, 1.0f / 3, 2.5f})}).ok());
  CHECK(b.OutShape() == "[1, 3, 3, 25]");
  // Empty scales with sizes (opset 11 style placeholders).
  REQUIRE(b.Op("Resize", {x, b.Floats("roi", {}), b.Floats("none", {}), b.Ints("sz", {1, 3, 64, 64})}).ok());
  CHECK(b.OutShape() == "[1, 3, 64, 64]");
}

TEST_CASE("LSTM output shapes and weight validation") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {T, N, 10});
  ValueId w = b.Input("w", DType::kFloat32, {2, 80, 10});
  ValueId r = b.Input("r", DType::kFloat32, {2, 80, 20});
  ValueId bias = b.Input("bias", DType::kFloat32, {2, 160});
  AttrMap a;
  a.SetInt("hidden_size", 20);
  a.SetString("direction", "bidirectional");
  REQUIRE(b.Op("LSTM", {x, w, r, bias}, a, 3).ok());
  CHECK(b.OutShape(0) == "[T, 2, N, 20]");
  CHECK(b.OutShape(1) == "[2, N, 20]");
  CHECK(b.OutShape(2) == "[2, N, 20]");

  a.SetInt("hidden_size", 16);
  Status s = b.Op("LSTM", {x, w, r}, a, 3);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("expected shape [2, 64, 10], found [2, 80, 10]") != std::string::npos);
}

TEST_CASE("more shape arithmetic: Where, ConstantOfShape, Cast, Expand, Gather errors") {
  Builder b;
  ValueId x = b.Input("x", DType::kFloat32, {N, 3, 1});
  REQUIRE(b.Op("Shape", {x}).ok());
  ValueId shp = b.Out();
  ValueId ones = b.Ints("ones", {1, 1, 1});
  REQUIRE(b.Op("Equal", {shp, ones}).ok());
  CHECK(b.OutSym() == "[(N == 1), 0, 1]");
  ValueId eq = b.Out();
  REQUIRE(b.Op("Where", {eq, b.Ints("neg", {-1, -1, -1}), shp}).ok());
  CHECK(b.OutSym() == "[(((N == 1)*-1)+((1-(N == 1))*N)), 3, -1]");

  AttrMap cos;
  cos.SetInt("dtype", static_cast<int64_t>(DType::kInt64));
  cos.SetInt("value_int", 7);
  REQUIRE(b.Op("ConstantOfShape", {b.Ints("two", {2})}, cos).ok());
  CHECK(b.OutV().dtype == DType::kInt64);
  CHECK(b.OutSym() == "[7, 7]");

  AttrMap to;
  to.SetInt("to", static_cast<int64_t>(DType::kInt64));
  REQUIRE(b.Op("Cast", {b.Floats("f", {2.7f, -1.5f})}, to).ok());
  CHECK(b.OutSym() == "[2, -1]");

  REQUIRE(b.Op("Expand", {x, b.Ints("es", {2, 1, 1, 6})}).ok());
  CHECK(b.OutShape() == "[2, N, 3, 6]");

  Status s = b.Op("Gather", {shp, b.Const<int64_t>("i5", DType::kInt64, {5}, {})});
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message().find("expected values in [-3, 2]") != std::string::npos);
  CHECK(s.message().find("found 5") != std::string::npos);

  // Concat of a runtime tensor's elements is not known: the output has no sym.
  ValueId dyn = b.Input("dyn", DType::kInt64, {1});
  AttrMap ax0;
  ax0.SetInt("axis", 0);
  REQUIRE(b.Op("Concat", {shp, dyn}, ax0).ok());
  CHECK(b.OutShape() == "[4]");
  CHECK(b.OutSym() == "none");

  // Symbolic inner dims of MatMul are assumed equal and guarded.
  ValueId a = b.Input("a", DType::kFloat32, {N, T});
  ValueId c = b.Input("c", DType::kFloat32, {H, 4});
  REQUIRE(b.Op("MatMul", {a, c}).ok());
  CHECK(b.OutShape() == "[N, 4]");
  REQUIRE(!b.t.guards.empty());
  CHECK(b.t.guards.back().condition.ToString() == "(T == H)");
}

TEST_CASE("meta helpers") {
  using namespace meta;
  CHECK(AddC(H - 1, 2).ToString() == "(H+1)");
  CHECK(SubS(AddC(H, 3), H - 1).ToString() == "4");
  CHECK(DivExact(N * 64 * H, N * 8).ToString() == "(H*8)");
  bool exact = true;
  CHECK(DivExact(N, Sym(3), &exact).ToString() == "(N floordiv 3)");
  CHECK_FALSE(exact);
  CHECK((FloorDiv(H - 1, 2) + 1).lo() == 1);  // H - 1 >= 0, so the floordiv is too
  CHECK((H * 2 + 1).lo() == 3);
}

}  // namespace
}  // namespace kiln::ir
