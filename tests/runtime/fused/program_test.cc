#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "tests/runtime/fused/program_test_util.h"

namespace kiln::fused::testing {
namespace {

// A program with every kind of field: symbolic sizes, a per-row output, an index check.
// Domain [s0, 6] reducing axis 1; out0[r] = sum_c x[r, c] * w[idx[r]] as a per-row output,
// out1 = x cast to int32 as a full output.
Program RichProgram() {
  Program p;
  p.domain = {-1, 6};
  p.reduce_axes = 0b10;
  p.num_sizes = 1;
  p.inputs = {{DType::kFloat32, {-1, 6}}, {DType::kFloat32, {5}}, {DType::kInt64, {-1}}};
  p.checks = {"Gather 'g' input 'idx'"};
  p.nodes = {Linear(),                               // 0
             Load(0, 0, kF32),                       // 1
             Coord(0),                               // 2
             Load(2, 2, kI64),                       // 3
             ConstI(5),                              // 4
             N(Op::kCheckIndex, kI64, 3, 4, -1, 0),  // 5
             Load(1, 5, kF32),                       // 6
             N(Op::kMul, kF32, 1, 6),                // 7
             Acc(0, kF32),                           // 8
             Cast(1, DType::kInt32, kI64),           // 9
             Size(0),                                // 10
             N(Op::kLt, kI64, 2, 10),                // 11
             N(Op::kSelect, kF32, 11, 8, 7)};        // 12
  p.reductions = {{ReduceOp::kSum, 7}};
  p.outputs = {{{DType::kFloat32, {-1, 1}}, 12, true}, {{DType::kInt32, {-1, 6}}, 9, false}};
  return p;
}

TEST_CASE("Validate accepts well-formed programs") {
  CHECK(Validate(AddRelu()).ok());
  CHECK(Validate(SoftmaxLastAxis(3, 5)).ok());
  const Status st = Validate(RichProgram());
  INFO(st.ToString());
  CHECK(st.ok());
}

TEST_CASE("ComputeTypeOf maps dtypes to compute types") {
  ScalarType t = ScalarType::kF64;
  REQUIRE(ComputeTypeOf(DType::kFloat16, &t));
  CHECK(t == kF32);
  REQUIRE(ComputeTypeOf(DType::kBFloat16, &t));
  CHECK(t == kF32);
  REQUIRE(ComputeTypeOf(DType::kFloat64, &t));
  CHECK(t == kF64);
  for (DType d : {DType::kBool, DType::kInt8, DType::kUInt8, DType::kInt16, DType::kUInt16, DType::kInt32,
                  DType::kUInt32, DType::kInt64}) {
    REQUIRE(ComputeTypeOf(d, &t));
    CHECK(t == kI64);
  }
  CHECK_FALSE(ComputeTypeOf(DType::kUInt64, &t));  // signed int64 math would be wrong past 2^63
  CHECK_FALSE(ComputeTypeOf(DType::kUndefined, &t));
  CHECK_FALSE(ComputeTypeOf(static_cast<DType>(8), &t));   // ONNX string
  CHECK_FALSE(ComputeTypeOf(static_cast<DType>(14), &t));  // ONNX complex64
}

struct BadCase {
  const char* what;
  std::function<void(Program&)> mutate;
  const char* expected;  // a substring of the error message
};

TEST_CASE("Validate rejects each kind of bad program with a precise message") {
  const BadCase cases[] = {
      {"operand beyond the program", [](Program& p) { p.nodes[12].c = 40; },
       "node 12 (select): operand c is 40, expected an earlier node (0..11)"},
      {"negative operand", [](Program& p) { p.nodes[7].a = -3; }, "node 7 (mul): operand a is -3"},
      {"operand refers to itself", [](Program& p) { p.nodes[7].b = 7; },
       "node 7 (mul): operand b is 7, expected an earlier node (0..6)"},
      {"operand refers to a later node", [](Program& p) { p.nodes[1].a = 3; },
       "node 1 (load): operand a is 3"},
      {"stray operand", [](Program& p) { p.nodes[2].b = 0; },
       "node 2 (coord): operand b is 0, expected -1 (the op takes 0 operands)"},
      {"missing operand", [](Program& p) { p.nodes[7].b = -1; }, "node 7 (mul): operand b is -1"},
      {"size argument out of range", [](Program& p) { p.nodes[10].i = 1; },
       "node 10 (size): size argument 1 is out of range (the program has 1)"},
      {"negative size argument", [](Program& p) { p.nodes[10].i = -1; }, "node 10 (size): size argument -1"},
      {"input out of range", [](Program& p) { p.nodes[6].i = 3; },
       "node 6 (load): input 3 is out of range (the program has 3)"},
      {"load type differs from the input's compute type", [](Program& p) { p.nodes[3].type = kF32; },
       "node 3 (load): result has type f32, expected i64 (the compute type of input 2's dtype int64)"},
      {"load index not an integer", [](Program& p) { p.nodes[6].a = 1; },
       "node 6 (load): operand a (the index) has type f32, expected i64"},
      {"acc of a missing reduction", [](Program& p) { p.nodes[8].i = 1; },
       "node 8 (acc): reduction 1 is out of range (the program has 1)"},
      {"acc type differs from the reduction's", [](Program& p) { p.nodes[8].type = kF64; },
       "node 8 (acc): result has type f64, expected f32"},
      {"reduction reads its own result",
       [](Program& p) {
         p.nodes[7] = N(Op::kMul, kF32, 1, 6);
         p.nodes.push_back(N(Op::kAdd, kF32, 7, 8));  // 13 = 7 + acc0
         p.reductions[0].value = 13;
       },
       "reduction 0: value node 13 reads the result of reduction 0"},
      {"reduction reads a later reduction",
       [](Program& p) {
         p.reductions.push_back({ReduceOp::kMax, 1});
         p.nodes.push_back(Acc(1, kF32));              // 13
         p.nodes.push_back(N(Op::kAdd, kF32, 7, 13));  // 14
         p.reductions[0].value = 14;
       },
       "reduction 0: value node 14 reads the result of reduction 1"},
      {"binary operand type mismatch", [](Program& p) { p.nodes[7].b = 3; },
       "node 7 (mul): operand b has type i64, expected f32"},
      {"select condition not an integer", [](Program& p) { p.nodes[12].a = 1; },
       "node 12 (select): operand a has type f32, expected i64"},
      {"comparison result not i64", [](Program& p) { p.nodes[11].type = kF32; },
       "node 11 (lt): result has type f32, expected i64"},
      {"float op on integers", [](Program& p) { p.nodes.push_back(N(Op::kExp, kI64, 3)); },
       "node 13 (exp): result has type i64, expected f32 or f64"},
      {"floordiv on floats", [](Program& p) { p.nodes.push_back(N(Op::kFloorDiv, kF32, 1, 1)); },
       "node 13 (floordiv): result has type f32, expected i64"},
      {"isnan of an integer", [](Program& p) { p.nodes.push_back(N(Op::kIsNaN, kI64, 3)); },
       "node 13 (isnan): operand a has type i64, expected f32 or f64"},
      {"f32 constant not representable", [](Program& p) { p.nodes.push_back(ConstF(0.1)); },
       "node 13 (const): f32 constant 0.100000 is not exactly representable"},
      {"coord axis out of range", [](Program& p) { p.nodes[2].i = 2; },
       "node 2 (coord): axis 2 is out of range for the domain's rank 2"},
      {"check out of range", [](Program& p) { p.nodes[5].i = 1; },
       "node 5 (check_index): check 1 is out of range (the program has 1 checks)"},
      {"op out of range", [](Program& p) { p.nodes[4].op = static_cast<Op>(60); },
       "node 4: op 60 is not an op (expected 0..47)"},
      {"type out of range", [](Program& p) { p.nodes[4].type = static_cast<ScalarType>(9); },
       "node 4 (const): type type(9) is not a scalar type"},
      {"rank above 8", [](Program& p) { p.domain = {1, 1, 1, 1, 1, 1, 1, 1, 6}; },
       "domain: rank 9 exceeds the maximum of 8"},
      {"input rank above 8", [](Program& p) { p.inputs[1].dims = {1, 1, 1, 1, 1, 1, 1, 1, 5}; },
       "input 1: rank 9 exceeds the maximum of 8"},
      {"reduce axis beyond the rank", [](Program& p) { p.reduce_axes = 0b110; },
       "reduce_axes 0x6 names an axis beyond the domain's rank 2"},
      {"per-row output without reduced axes",
       [](Program& p) {
         p.reduce_axes = 0;
         p.outputs[0].tensor.dims = {-1, 6};
       },
       "output 0: per-row output in a program without reduced axes"},
      {"output value out of range", [](Program& p) { p.outputs[1].value = 13; },
       "output 1: value node 13 is out of range (the program has 13 nodes)"},
      {"negative output value", [](Program& p) { p.outputs[1].value = -1; }, "output 1: value node -1"},
      {"output value of the wrong type", [](Program& p) { p.outputs[1].value = 7; },
       "output 1: value node 7 has type f32, expected i64 (the compute type of dtype int32)"},
      {"output dtype without compute type",
       [](Program& p) { p.outputs[1].tensor.dtype = static_cast<DType>(8); },
       "output 1: dtype undefined(8) has no compute type"},
      {"input dtype without compute type", [](Program& p) { p.inputs[0].dtype = DType::kUndefined; },
       "input 0: dtype undefined(0) has no compute type"},
      {"cast to a dtype without compute type", [](Program& p) { p.nodes[9].i = 8; },
       "node 9 (cast): target dtype undefined(8) has no compute type"},
      {"cast to a value outside the enum", [](Program& p) { p.nodes[9].i = 1LL << 40; },
       "node 9 (cast): target dtype dtype(1099511627776) has no compute type"},
      {"cast result type differs from the target's", [](Program& p) { p.nodes[9].type = kF32; },
       "node 9 (cast): result has type f32, expected i64"},
      {"domain dim names a missing size", [](Program& p) { p.domain[0] = -2; },
       "domain: dim 0 refers to size argument 1, but the program has 1"},
      {"output dim names a missing size", [](Program& p) { p.outputs[0].tensor.dims[0] = -5; },
       "output 0: dim 0 refers to size argument 4"},
      {"negative num_sizes", [](Program& p) { p.num_sizes = -1; }, "num_sizes is -1, expected >= 0"},
      {"reduction value out of range", [](Program& p) { p.reductions[0].value = 99; },
       "reduction 0: value node 99 is out of range (the program has 13 nodes)"},
      {"reduce op out of range", [](Program& p) { p.reductions[0].op = static_cast<ReduceOp>(7); },
       "reduction 0: op 7 is not a reduce op"},
      {"no outputs", [](Program& p) { p.outputs.clear(); }, "the program has no outputs"},
  };
  for (const BadCase& c : cases) {
    Program p = RichProgram();
    c.mutate(p);
    const Status st = Validate(p);
    INFO(c.what << ": " << st.ToString());
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message().find(c.expected) != std::string::npos);
  }
}

TEST_CASE("Validate compares element counts where they are constant") {
  Program p = AddRelu(4, 8);
  p.outputs[0].tensor.dims = {4, 9};
  Status st = Validate(p);
  CHECK(st.message() ==
        "output 0: shape [4, 9] has 36 elements, expected 32 (one per element of domain [4, 8])");

  Program r = SoftmaxLastAxis(3, 5);
  r.outputs.push_back({{DType::kFloat32, {5}}, 2, true});
  st = Validate(r);
  CHECK(st.message() == "output 1: shape [5] has 5 elements, expected 3 (one per row of domain [3, 5])");
  r.outputs[1].tensor.dims = {3, 1};
  CHECK(Validate(r).ok());

  // A symbolic side is left to run time.
  Program s = RichProgram();
  s.outputs[1].tensor.dims = {7, 6};
  CHECK(Validate(s).ok());

  Program huge = AddRelu(4, 8);
  huge.domain = {1LL << 40, 1LL << 40};
  CHECK(Validate(huge).message().find("has more than 2^63 elements") != std::string::npos);
}

TEST_CASE("Validate survives hostile field values") {
  // Nothing here may crash; every case is an error.
  Program p = AddRelu();
  p.nodes[1].a = INT32_MIN;
  CHECK_FALSE(Validate(p).ok());
  p = AddRelu();
  p.nodes[1].i = INT64_MIN;
  CHECK_FALSE(Validate(p).ok());
  p = AddRelu();
  p.nodes[2].i = INT64_MAX;
  CHECK_FALSE(Validate(p).ok());
  p = AddRelu();
  p.domain = {INT64_MIN};
  CHECK_FALSE(Validate(p).ok());
  p = AddRelu();
  p.reduce_axes = 0xffffffffu;
  CHECK_FALSE(Validate(p).ok());
  p = AddRelu();
  p.outputs[0].value = INT32_MAX;
  CHECK_FALSE(Validate(p).ok());
  p = AddRelu();
  p.nodes[6].op = static_cast<Op>(255);
  CHECK_FALSE(Validate(p).ok());
  CHECK(std::string(OpName(static_cast<Op>(255))) == "op?");
  p = AddRelu();
  p.nodes.insert(p.nodes.begin(), Acc(0, kF32));  // acc with no reductions, operands now shifted
  CHECK_FALSE(Validate(p).ok());
  CHECK_FALSE(Print(p).empty());
}

TEST_CASE("OpName names every op") {
  CHECK(std::string(OpName(Op::kConst)) == "const");
  CHECK(std::string(OpName(Op::kAdd)) == "add");
  CHECK(std::string(OpName(Op::kFloorDiv)) == "floordiv");
  CHECK(std::string(OpName(Op::kCheckIndex)) == "check_index");
  CHECK(std::string(OpName(Op::kIsNaN)) == "isnan");
  for (int k = 0; k < kNumOps; ++k) CHECK(std::string(OpName(static_cast<Op>(k))) != "op?");
  CHECK(std::string(ReduceOpName(ReduceOp::kSum)) == "sum");
  CHECK(std::string(ReduceOpName(ReduceOp::kMin)) == "min");
}

TEST_CASE("Print lists the program one node per line") {
  CHECK(Print(AddRelu()) ==
        "domain [4, 8] sizes 0\n"
        "in0: float32 [4, 8]\n"
        "in1: float32 [8]\n"
        "%0 = linear i64\n"
        "%1 = load f32 in0[%0]\n"
        "%2 = coord i64 axis 1\n"
        "%3 = load f32 in1[%2]\n"
        "%4 = add f32 %1, %3\n"
        "%5 = const f32 0\n"
        "%6 = max f32 %4, %5\n"
        "out0: float32 [4, 8] = %6\n");
  const std::string rich = Print(RichProgram());
  CHECK(rich.find("domain [s0, 6] reduce {1} sizes 1\n") == 0);
  CHECK(rich.find("%5 = check_index i64 %3, %4  ; check 0: Gather 'g' input 'idx'\n") != std::string::npos);
  CHECK(rich.find("%9 = cast i64 %1 to int32\n") != std::string::npos);
  CHECK(rich.find("%10 = size i64 s0\n") != std::string::npos);
  CHECK(rich.find("%12 = select f32 %11, %8, %7\n") != std::string::npos);
  CHECK(rich.find("r0 = reduce sum %7\n") != std::string::npos);
  CHECK(rich.find("out0: float32 [s0, 1] = %12 per row\n") != std::string::npos);
  CHECK(rich.find("%4 = const i64 5\n") != std::string::npos);
}

}  // namespace
}  // namespace kiln::fused::testing
