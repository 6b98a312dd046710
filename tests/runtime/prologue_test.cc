#include "runtime/prologue.h"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace kiln {
namespace {

PrologueDim Const(int64_t v) { return {-1, v}; }
PrologueDim Sym(int32_t s, int64_t min, int64_t max, int64_t divisor = 1) {
  return {s, 0, min, max, divisor};
}

// x: float32[N, 3, H, W], N in [1, 64], H a multiple of 32.
Prologue ImagePrologue() {
  Prologue p;
  p.symbols = {"N", "H", "W"};
  p.inputs = {{"x", DType::kFloat32, {Sym(0, 1, 64), Const(3), Sym(1, 1, 1024, 32), Sym(2, 1, INT64_MAX)}}};
  return p;
}

struct Checker {
  explicit Checker(Prologue prologue, std::vector<Expr> exprs = {})
      : p(std::move(prologue)), x(std::move(exprs)) {
    s.Resize(p);
  }
  // "" when the inputs pass, else the formatted message as the context prints it.
  std::string Run(std::vector<TensorView> in, MemoryKind memory = MemoryKind::kHost) {
    PrologueFailure why;
    if (RunPrologue(p, x, in, memory, s, &why)) return "";
    return "entry 0 (default): " + FormatPrologueFailure(p, x, why, memory, &s);
  }
  Prologue p;
  std::vector<Expr> x;
  PrologueScratch s;
};

alignas(64) float buf[64];

TEST_CASE("prologue passes and binds symbols") {
  Checker c(ImagePrologue());
  CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {2, 3, 64, 5})}) == "");
  CHECK(c.s.symbol_values == std::vector<int64_t>{2, 64, 5});
  CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {64, 3, 1024, 1})}) == "");
  CHECK(c.s.symbol_values == std::vector<int64_t>{64, 1024, 1});
}

TEST_CASE("prologue failure messages, one per check kind") {
  Checker c(ImagePrologue());
  SUBCASE("dtype") {
    CHECK(c.Run({TensorView::Host(buf, DType::kFloat64, {1, 3, 32, 32})}) ==
          "entry 0 (default): input 'x' dtype float64, expected float32");
  }
  SUBCASE("rank") {
    CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {3, 32, 32})}) ==
          "entry 0 (default): input 'x' rank 3, expected 4 ([N, 3, H, W])");
  }
  SUBCASE("rank above kMaxRank") {
    CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 1, 1})}) ==
          "entry 0 (default): input 'x' rank 9, expected 4 ([N, 3, H, W])");
  }
  SUBCASE("constant dim") {
    CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {1, 4, 32, 32})}) ==
          "entry 0 (default): input 'x' dim 1 = 4, expected 3");
  }
  SUBCASE("symbol range") {
    CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {100, 3, 32, 32})}) ==
          "entry 0 (default): input 'x' dim 0 (N) = 100, expected 1..64");
    CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {1, 3, 32, 0})}) ==
          "entry 0 (default): input 'x' dim 3 (W) = 0, expected >= 1 (the profile excludes an empty tensor; a range "
          "from 0 admits it: kiln compile --profile 'x:W=0..')");
  }
  SUBCASE("symbol divisor") {
    CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {1, 3, 31, 32})}) ==
          "entry 0 (default): input 'x' dim 2 (H) = 31, expected a multiple of 32");
  }
  SUBCASE("null pointer") {
    CHECK(c.Run({TensorView::Host(nullptr, DType::kFloat32, {1, 3, 32, 32})}) ==
          "entry 0 (default): input 'x' data pointer is null");
  }
  SUBCASE("memory kind") {
    TensorView v = TensorView::Host(buf, DType::kFloat32, {1, 3, 32, 32});
    v.memory = MemoryKind::kDevice;
    CHECK(c.Run({v}) == "entry 0 (default): input 'x' is in device memory, expected host memory");
  }
  SUBCASE("alignment") {
    const std::string m = c.Run({TensorView::Host(reinterpret_cast<char*>(buf) + 2, DType::kFloat32, {1, 3, 32, 32})});
    CHECK(m.find("entry 0 (default): input 'x' data pointer 0x") == 0);
    CHECK(m.find("is not aligned to 4 bytes (float32)") != std::string::npos);
  }
  SUBCASE("input count") {
    Prologue p = ImagePrologue();
    p.inputs.push_back({"y", DType::kFloat32, {}});
    p.inputs.push_back({"z", DType::kFloat32, {}});
    Checker c3(p);
    CHECK(c3.Run({TensorView::Host(buf, DType::kFloat32, {1, 3, 32, 32}), TensorView::Host(buf, DType::kFloat32, {})}) ==
          "entry 0 (default): expected 3 inputs, got 2");
  }
}

TEST_CASE("prologue symbol bound by one input and checked at another") {
  Prologue p;
  p.symbols = {"batch"};
  p.inputs = {{"input", DType::kFloat32, {Sym(0, 1, 16), Const(4)}},
              {"state", DType::kFloat32, {Const(2), Sym(0, 1, 16)}}};
  Checker c(p);
  CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {1, 4}), TensorView::Host(buf, DType::kFloat32, {2, 1})}) == "");
  CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {1, 4}), TensorView::Host(buf, DType::kFloat32, {2, 2})}) ==
        "entry 0 (default): input 'state' dim 1 (batch) = 2, but input 'input' bound batch = 1");
  // The binding starts afresh on each run.
  CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {2, 4}), TensorView::Host(buf, DType::kFloat32, {2, 2})}) == "");
}

TEST_CASE("prologue guards") {
  Prologue p;
  p.symbols = {"T"};
  p.inputs = {{"x", DType::kFloat32, {Sym(0, 1, 100)}}};
  p.guards = {{2, "T == 1"}};
  p.guard_exprs = 3;
  std::vector<Expr> x = {{ExprOp::kVar, 0, 0}, {ExprOp::kConst, 1, 0}, {ExprOp::kEq, 0, 1}};
  Checker c(p, x);
  CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {1})}) == "");
  CHECK(c.Run({TensorView::Host(buf, DType::kFloat32, {2})}) ==
        "entry 0 (default): guard (T == 1) does not hold for T = 2 (input 'x' dim 0)");

  // A guard whose expression cannot be evaluated fails the entry, naming the node.
  Prologue q = p;
  q.guards = {{3, ""}};
  q.guard_exprs = 4;
  std::vector<Expr> y = {{ExprOp::kVar, 0, 0}, {ExprOp::kConst, 0, 0}, {ExprOp::kConst, 1, 0},
                         {ExprOp::kFloorDiv, 2, 1}};
  Checker d(q, y);
  CHECK(d.Run({TensorView::Host(buf, DType::kFloat32, {1})}) ==
        "entry 0 (default): guard (1 // 0) could not be evaluated: expr 3 (1 // 0): division by zero (1 by 0)");

  // A Conv's output extent guard names only the symbols it reads, and the input dim that bound each.
  Prologue conv;
  conv.symbols = {"N", "H", "W"};
  conv.inputs = {{"img", DType::kFloat32, {Sym(0, 1, 100), Const(1), Sym(1, 1, 100), Sym(2, 1, 100)}}};
  conv.guards = {{4, "(0 < (H-2)) from node 'c' (Conv), whose output 'y' dim 2 must be >= 1"}};
  conv.guard_exprs = 5;
  // 0 < (H - 2): node 2 is H - 2, node 4 compares the constant 0 (node 3) with it.
  std::vector<Expr> z = {{ExprOp::kVar, 1, 0}, {ExprOp::kConst, 2, 0}, {ExprOp::kSub, 0, 1}, {ExprOp::kConst, 0, 0},
                         {ExprOp::kLt, 3, 2}};
  Checker e(conv, z);
  CHECK(e.Run({TensorView::Host(buf, DType::kFloat32, {1, 1, 3, 2})}) == "");
  CHECK(e.Run({TensorView::Host(buf, DType::kFloat32, {1, 1, 2, 5})}) ==
        "entry 0 (default): guard (0 < (H-2)) from node 'c' (Conv), whose output 'y' dim 2 must be >= 1 does not "
        "hold for H = 2 (input 'img' dim 2)");
}

// Silero VAD's: input float32[N, L], sr int64[] whose value selects the entry.
Prologue ValuePrologue() {
  Prologue p;
  p.symbols = {"N", "sr", "k"};
  PrologueInput input{"input", DType::kFloat32, {Sym(0, 1, 64), Const(576)}};
  PrologueInput sr{"sr", DType::kInt64, {}};
  sr.values = {Sym(1, INT64_MIN, INT64_MAX)};
  PrologueInput shape{"shape", DType::kInt32, {Const(2)}};
  shape.values = {Sym(0, 1, 64), Sym(2, 0, 8, 2)};  // N again; k even, 0..8
  p.inputs = {input, sr, shape};
  p.guards = {{2, "(sr == 16000) from node 'If_0' (If), whose then branch this entry was compiled for"}};
  p.guard_exprs = 3;
  return p;
}

TEST_CASE("prologue value checks bind symbols from a host input's elements") {
  std::vector<Expr> x = {{ExprOp::kVar, 1, 0}, {ExprOp::kConst, 16000, 0}, {ExprOp::kEq, 0, 1}};
  Checker c(ValuePrologue(), x);
  int64_t sr = 16000;
  int32_t shape[2] = {4, 6};
  auto run = [&](MemoryKind memory = MemoryKind::kHost, MemoryKind sr_memory = MemoryKind::kHost) {
    TensorView sr_view = TensorView::Host(&sr, DType::kInt64, {});
    sr_view.memory = sr_memory;
    return c.Run({TensorView::Host(buf, DType::kFloat32, {4, 576}), sr_view,
                  TensorView::Host(shape, DType::kInt32, {2})},
                 memory);
  };
  CHECK(run() == "");
  CHECK(c.s.symbol_values == std::vector<int64_t>{4, 16000, 6});
  // A CUDA context takes inputs in either memory, but not a value input on the device.
  CHECK(run(kAnyMemory) == "");
  CHECK(run(kAnyMemory, MemoryKind::kDevice) ==
        "entry 0 (default): input 'sr' is in device memory; the prologue reads its values (shapes or an If "
        "condition depend on them), so it must be in host memory, as TensorRT requires of shape tensors");
  sr = 8000;
  CHECK(run() ==
        "entry 0 (default): guard (sr == 16000) from node 'If_0' (If), whose then branch this entry was compiled "
        "for does not hold for sr = 8000 (input 'sr' element 0)");
  sr = -5;  // any int64 is in range; the guard decides
  CHECK(run().find("does not hold for sr = -5 (input 'sr' element 0)") != std::string::npos);
  sr = 16000;
  shape[0] = 5;  // N was bound by input 'input' dim 0
  CHECK(run() == "entry 0 (default): input 'shape' element 0 (N) = 5, but input 'input' bound N = 4");
  shape[0] = 4;
  shape[1] = 10;
  CHECK(run() == "entry 0 (default): input 'shape' element 1 (k) = 10, expected 0..8");
  shape[1] = 3;
  CHECK(run() == "entry 0 (default): input 'shape' element 1 (k) = 3, expected a multiple of 2");
  shape[1] = 0;
  CHECK(run() == "");

  const std::string t = PrologueText(c.p, x);
  CHECK(t.find("  check sr.memory == host  # its values are read\n  sr = sr.values[0]\n  shape = inputs[2]") !=
        std::string::npos);
  CHECK(t.find("  check shape.values[0] == N\n  k = shape.values[1]\n  check k in 0..8\n  check k % 2 == 0\n") !=
        std::string::npos);
}

TEST_CASE("prologue text is a trace of every check, in the order they run") {
  Prologue p = ImagePrologue();
  p.guards = {{0, "N < 8"}};
  p.guard_exprs = 1;
  std::vector<Expr> x = {{ExprOp::kConst, 1, 0}};
  const std::string t = PrologueText(p, x);
  CHECK(t == "prologue(x) -> (N, H, W)\n"
             "  check len(inputs) == 1\n"
             "  x = inputs[0]  # 'x': float32[N, 3, H, W]\n"
             "  check x.data != null\n"
             "  check x.memory == host  # CUDA backend: host or device\n"
             "  check x.dtype == float32\n"
             "  check x.data % 4 == 0\n"
             "  check x.rank == 4\n"
             "  N = x.shape[0]\n"
             "  check N in 1..64\n"
             "  check x.shape[1] == 3\n"
             "  H = x.shape[2]\n"
             "  check H in 1..1024\n"
             "  check H % 32 == 0\n"
             "  W = x.shape[3]\n"
             "  check W >= 1\n"
             "  check (N < 8)\n"
             "  return (N, H, W)\n");
  // A second use of a symbol is an equality check; a name that is not an identifier and a
  // guard's origin print as the compiler wrote them.
  Prologue two;
  two.symbols = {"B"};
  two.inputs = {{"a:0", DType::kUInt8, {Sym(0, 1, INT64_MAX)}}, {"b", DType::kInt64, {Sym(0, 1, INT64_MAX)}}};
  two.guards = {{0, "(B < 9) from node 'n' (If)"}};
  two.guard_exprs = 1;
  const std::string u = PrologueText(two, x);
  CHECK(u.find("prologue(in0, b) -> (B)\n") == 0);
  CHECK(u.find("  in0 = inputs[0]  # 'a:0': uint8[B]\n  check in0.data != null\n") != std::string::npos);
  CHECK(u.find("in0.data %") == std::string::npos);  // one-byte elements: any address
  CHECK(u.find("  check b.data % 8 == 0\n  check b.rank == 1\n  check b.shape[0] == B\n") != std::string::npos);
  CHECK(u.find("  check (B < 9)  # from node 'n' (If)\n") != std::string::npos);
}

}  // namespace
}  // namespace kiln
