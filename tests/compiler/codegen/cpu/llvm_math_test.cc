// Kiln's own float32 math for native CPU code (compiler/codegen/cpu/llvm_math.h): each function
// JIT-compiled for the host (ORC LLJIT) as a loop over arrays, once on scalars and once on
// <8 x float> vectors, against libm in double rounded to float (the oracle), in ULPs: every
// special value, a strided sweep of all 2^32 bit patterns (stride 4099), and dense sweeps where
// the functions bend (|x| < 20); also as x86-64 baseline code (no FMA) and x86-64-v3 code
// (FMA) where the host runs it. And, for each CPU target (x86-64, x86-64-v3, x86-64-v4,
// aarch64+neon), an object file of every function, vectorised and optimised at O3, that
// references no external symbol: no libm, no call.
//
// KILN_MATH_EXHAUSTIVE=1 also sweeps all 2^32 inputs of each unary function (vectors; about a
// minute or two each), KILN_MATH_EXHAUSTIVE=exp,log those named only.
#if KILN_HAVE_LLVM

#include "compiler/codegen/cpu/llvm_image.h"
#include "compiler/codegen/cpu/llvm_math.h"

#include <doctest/doctest.h>
#include <llvm-c/Core.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Object.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln {
namespace {

using fused::Op;

struct MathOpCase {
  Op op;
  const char* name;
  bool binary;
};

constexpr MathOpCase kMathOpCases[] = {
    {Op::kExp, "exp", false},   {Op::kLog, "log", false},     {Op::kErf, "erf", false},
    {Op::kTanh, "tanh", false}, {Op::kSigmoid, "sigmoid", false}, {Op::kPow, "pow", true},
    {Op::kFloor, "floor", false}, {Op::kCeil, "ceil", false}, {Op::kRound, "round", false},
};

// libm in double, rounded to float.
float MathOracle(Op op, float xf, float yf) {
  const double x = xf, y = yf;
  switch (op) {
    case Op::kExp: return static_cast<float>(std::exp(x));
    case Op::kLog: return static_cast<float>(std::log(x));
    case Op::kErf: return static_cast<float>(std::erf(x));
    case Op::kTanh: return static_cast<float>(std::tanh(x));
    case Op::kSigmoid: return static_cast<float>(1.0 / (1.0 + std::exp(-x)));
    case Op::kPow: return static_cast<float>(std::pow(x, y));
    case Op::kFloor: return std::floor(xf);
    case Op::kCeil: return std::ceil(xf);
    case Op::kRound: return std::nearbyint(xf);
    default: return 0;
  }
}

// ULPs between two floats; a NaN against a non-NaN, or zeros of different signs, count as 2^30.
int64_t MathUlpDistance(float got, float want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want) ? 0 : int64_t{1} << 30;
  if (got == 0 && want == 0) return std::signbit(got) == std::signbit(want) ? 0 : int64_t{1} << 30;
  auto ordered = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7FFFFFFFu) : static_cast<int64_t>(u);
  };
  const int64_t d = ordered(got) - ordered(want);
  return d < 0 ? -d : d;
}

float MathFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Emits `void name(const float* x, const float* y, float* out, i64 n)`: out[i] = op(x[i], y[i])
// for i < n, n a positive multiple of `width` (1: scalars; else <width x float> vectors).
void EmitMathLoop(LLVMModuleRef m, Op op, unsigned width, const std::string& name) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMTypeRef ptr = LLVMPointerTypeInContext(ctx, 0), i64 = LLVMInt64TypeInContext(ctx);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx);
  LLVMTypeRef t = width == 1 ? f32 : LLVMVectorType(f32, width);
  LLVMTypeRef params[] = {ptr, ptr, ptr, i64};
  LLVMValueRef fn = LLVMAddFunction(m, name.c_str(), LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 4, 0));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx, fn, "entry");
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(ctx, fn, "loop");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(ctx, fn, "done");
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, entry);
  LLVMBuildBr(b, loop);
  LLVMPositionBuilderAtEnd(b, loop);
  LLVMValueRef i = LLVMBuildPhi(b, i64, "i");
  auto load = [&](LLVMValueRef base) {
    LLVMValueRef p = LLVMBuildGEP2(b, f32, base, &i, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(b, t, p, "");
    LLVMSetAlignment(v, 4);
    return v;
  };
  LLVMValueRef x = load(LLVMGetParam(fn, 0));
  LLVMValueRef y = load(LLVMGetParam(fn, 1));
  LLVMValueRef r = codegen::cpu::EmitMath(m, b, op, x, y);
  REQUIRE(r != nullptr);
  LLVMValueRef st = LLVMBuildStore(b, r, LLVMBuildGEP2(b, f32, LLVMGetParam(fn, 2), &i, 1, ""));
  LLVMSetAlignment(st, 4);
  LLVMValueRef next = LLVMBuildAdd(b, i, LLVMConstInt(i64, width, 0), "");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntULT, next, LLVMGetParam(fn, 3), ""), loop, done);
  LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
  LLVMAddIncoming(i, &zero, &entry, 1);
  LLVMAddIncoming(i, &next, &loop, 1);
  LLVMPositionBuilderAtEnd(b, done);
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
}

std::string MathTakeError(LLVMErrorRef err) {
  if (err == nullptr) return "";
  char* msg = LLVMGetErrorMessage(err);
  std::string s = msg;
  LLVMDisposeErrorMessage(msg);
  return s;
}

using MathKernel = void (*)(const float*, const float*, float*, int64_t);

// Every op's loop, scalar ("<name>_1") and <8 x float> ("<name>_8"), JIT-compiled for the host's
// CPU, or for `cpu` (on the host's triple): "x86-64" runs the baseline's code (SSE2, no FMA, so
// llvm.fmuladd unfused) on any x86-64 host.
class MathJit {
 public:
  explicit MathJit(const char* cpu = nullptr) {
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMOrcLLJITBuilderRef builder = nullptr;
    if (cpu != nullptr) {
      char* triple = LLVMGetDefaultTargetTriple();
      LLVMTargetRef target = nullptr;
      char* msg = nullptr;
      REQUIRE_FALSE(LLVMGetTargetFromTriple(triple, &target, &msg));
      LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, "", LLVMCodeGenLevelDefault,
                                                        LLVMRelocDefault, LLVMCodeModelJITDefault);
      LLVMDisposeMessage(triple);
      builder = LLVMOrcCreateLLJITBuilder();
      LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
    }
    REQUIRE(MathTakeError(LLVMOrcCreateLLJIT(&jit_, builder)) == "");
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("kiln_math_jit", LLVMOrcThreadSafeContextGetContext(tsc));
    for (const MathOpCase& c : kMathOpCases) {
      for (unsigned w : {1u, 8u}) EmitMathLoop(m, c.op, w, std::string(c.name) + "_" + std::to_string(w));
    }
    char* msg = nullptr;
    const bool broken = LLVMVerifyModule(m, LLVMReturnStatusAction, &msg);
    INFO(msg);
    REQUIRE_FALSE(broken);
    LLVMDisposeMessage(msg);
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m, tsc);
    REQUIRE(MathTakeError(LLVMOrcLLJITAddLLVMIRModule(jit_, LLVMOrcLLJITGetMainJITDylib(jit_), tsm)) == "");
    LLVMOrcDisposeThreadSafeContext(tsc);
  }
  ~MathJit() { LLVMOrcDisposeLLJIT(jit_); }
  MathJit(const MathJit&) = delete;
  MathJit& operator=(const MathJit&) = delete;

  MathKernel Get(const char* name, unsigned width) {
    LLVMOrcExecutorAddress addr = 0;
    // The JIT resolves no symbol outside the module: a libm call would fail here.
    REQUIRE(MathTakeError(LLVMOrcLLJITLookup(jit_, &addr, (std::string(name) + "_" + std::to_string(width)).c_str())) == "");
    return reinterpret_cast<MathKernel>(addr);
  }

 private:
  LLVMOrcLLJITRef jit_ = nullptr;
};

struct MathWorst {
  int64_t ulp = 0;
  float x = 0, y = 0, got = 0, want = 0;
  int64_t count = 0;
};

// Runs kernel over x, y (padded to a multiple of 8) and folds the ULP errors into worst.
void MathRun(MathKernel k, Op op, std::vector<float> x, std::vector<float> y, MathWorst* worst) {
  const size_t n = x.size();
  if (n == 0) return;
  const size_t padded = (n + 7) / 8 * 8;
  x.resize(padded, 1.0f);
  y.resize(padded, 1.0f);
  std::vector<float> out(padded);
  k(x.data(), y.data(), out.data(), static_cast<int64_t>(padded));
  for (size_t i = 0; i < n; ++i) {
    const float want = MathOracle(op, x[i], y[i]);
    const int64_t d = MathUlpDistance(out[i], want);
    if (d > worst->ulp) *worst = {d, x[i], y[i], out[i], want, worst->count};
  }
  worst->count += static_cast<int64_t>(n);
}

std::vector<float> MathSpecials() {
  std::vector<float> s = {0.0f, 1.0f, 0.5f, 1.5f, 2.5f, 3.5f, 2.0f, 3.0f, 10.0f, 0.1f, 0.3f, 0.7f,
                          0.625f, 0.875f, 4.0f, 3.9192f, 9.01f, 20.0f, 44.0f, 88.0f, 88.72283f,
                          88.72284f, 88.7228394f, 89.0f, 87.33654f, 103.27893f, 103.97208f, 104.0f,
                          0x1p23f, 0x1p23f - 0.5f, 0x1p23f + 1.0f, 0x1p24f, 0x1p30f, 0x1p-126f,
                          0x1p-149f, 0x1.fffffcp-127f, 0x1p-100f, 0x1p-20f, 1e-7f, 1.0f - 0x1p-24f,
                          1.0f + 0x1p-23f, 0.70710677f, 1.4142135f,
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  const size_t n = s.size();
  for (size_t i = 0; i < n; ++i) s.push_back(-s[i]);
  for (int k = -60; k <= 60; ++k) s.push_back(0.25f * static_cast<float>(k));
  return s;
}

// Checks every op of jit against libm: specials, a strided sweep of all bit patterns, and (dense)
// |x| < 20 densely; widths: 1 and 8.
void MathCheckAll(MathJit& jit, const char* label, bool dense, std::initializer_list<unsigned> widths) {
  const std::vector<float> specials = MathSpecials();
  for (const MathOpCase& c : kMathOpCases) {
    for (unsigned w : widths) {
      MathKernel k = jit.Get(c.name, w);
      MathWorst worst;
      std::vector<float> x, y;
      if (!c.binary) {
        MathRun(k, c.op, specials, specials, &worst);
        // All 2^32 bit patterns, stride 4099.
        for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) x.push_back(MathFromBits(static_cast<uint32_t>(u)));
        // Densely |x| < 20: every 1031st float below 20 (both signs), and an even grid.
        for (uint32_t u = 0; dense && u < 0x41A00000u; u += 1031) {
          x.push_back(MathFromBits(u));
          x.push_back(MathFromBits(u | 0x80000000u));
        }
        for (int i = -500000; dense && i <= 500000; ++i) x.push_back(static_cast<float>(i) * 4e-5f);
        y = x;
      } else {
        // Every pair of specials, then random pairs: any x with |y| < 40, any y with x in
        // (0, 4), negative x with integer y, and strided bit patterns of both.
        for (float a : specials) {
          for (float b : specials) {
            x.push_back(a);
            y.push_back(b);
          }
        }
        std::mt19937 rng(42);
        std::uniform_real_distribution<float> ys(-40.0f, 40.0f), xs(0.0f, 4.0f);
        std::uniform_int_distribution<int> yi(-40, 40);
        for (int i = 0; i < 600000; ++i) {
          x.push_back(MathFromBits(static_cast<uint32_t>(rng())));
          y.push_back(ys(rng));
          x.push_back(xs(rng));
          y.push_back(MathFromBits(static_cast<uint32_t>(rng())));
          x.push_back(-xs(rng) * 8.0f);
          y.push_back(static_cast<float>(yi(rng)));
          x.push_back(MathFromBits(static_cast<uint32_t>(rng()) & 0x3FFFFFFFu));  // (0, 2)
          y.push_back(MathFromBits(static_cast<uint32_t>(rng())));
        }
      }
      MathRun(k, c.op, x, y, &worst);
      std::printf("llvm math %s %-7s width %u: max %lld ULP over %lld inputs (x = %.9g, y = %.9g: got %.9g, want %.9g), documented %d\n",
                  label, c.name, w, static_cast<long long>(worst.ulp), static_cast<long long>(worst.count), worst.x,
                  worst.y, worst.got, worst.want, codegen::cpu::MathMaxUlp(c.op));
      CAPTURE(label);
      CAPTURE(c.name);
      CAPTURE(w);
      CAPTURE(worst.x);
      CAPTURE(worst.y);
      CAPTURE(worst.got);
      CAPTURE(worst.want);
      CHECK(worst.ulp <= codegen::cpu::MathMaxUlp(c.op));
    }
  }
}

TEST_CASE("LLVM math: every op matches libm within its documented ULPs, scalar and vector") {
  MathJit jit;
  MathCheckAll(jit, "host", true, {1u, 8u});
  const char* all = std::getenv("KILN_MATH_EXHAUSTIVE");
  if (all == nullptr || *all == '\0') return;
  for (const MathOpCase& c : kMathOpCases) {
    const std::string list = std::string(",") + all + ",";
    if (c.binary || (std::strcmp(all, "1") != 0 && list.find(std::string(",") + c.name + ",") == std::string::npos)) continue;
    MathKernel k = jit.Get(c.name, 8);
    MathWorst worst;
    std::vector<float> x(uint64_t{1} << 24);
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += x.size()) {
      for (size_t i = 0; i < x.size(); ++i) x[i] = MathFromBits(static_cast<uint32_t>(base + i));
      MathRun(k, c.op, x, x, &worst);
    }
    std::printf("llvm math exhaustive %-7s: max %lld ULP over all %lld inputs (x = %.9g: got %.9g, want %.9g), documented %d\n",
                c.name, static_cast<long long>(worst.ulp), static_cast<long long>(worst.count), worst.x, worst.got,
                worst.want, codegen::cpu::MathMaxUlp(c.op));
    std::fflush(stdout);
    CHECK(worst.ulp <= codegen::cpu::MathMaxUlp(c.op));
  }
}

TEST_CASE("LLVM math: x86-64 baseline code (llvm.fmuladd unfused) and x86-64-v3 code (fused) match libm too") {
  char* triple = LLVMGetDefaultTargetTriple();
  const bool x86 = std::strncmp(triple, "x86_64", 6) == 0;
  LLVMDisposeMessage(triple);
  if (!x86) return;
  MathJit baseline("x86-64");
  MathCheckAll(baseline, "x86-64", false, {8u});
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    MathJit v3("x86-64-v3");
    MathCheckAll(v3, "x86-64-v3", false, {8u});
  }
#endif
}

TEST_CASE("LLVM math: ops it does not cover and non-float types give nullptr") {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("kiln_math_none", ctx);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx), i64 = LLVMInt64TypeInContext(ctx);
  LLVMValueRef fn = LLVMAddFunction(m, "f", LLVMFunctionType(f32, &f32, 1, 0));
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
  CHECK(codegen::cpu::EmitMath(m, b, Op::kAdd, LLVMGetParam(fn, 0)) == nullptr);
  CHECK(codegen::cpu::EmitMath(m, b, Op::kExp, LLVMConstInt(i64, 1, 0)) == nullptr);
  CHECK(codegen::cpu::EmitMath(m, b, Op::kExp, LLVMConstReal(LLVMDoubleTypeInContext(ctx), 1.0)) == nullptr);
  CHECK(codegen::cpu::EmitMath(m, b, Op::kPow, LLVMGetParam(fn, 0)) == nullptr);  // no y
  CHECK(codegen::cpu::EmitMath(m, b, Op::kFloor, LLVMConstReal(LLVMDoubleTypeInContext(ctx), 1.5)) != nullptr);
  CHECK(codegen::cpu::MathMaxUlp(Op::kAdd) == -1);
  LLVMDisposeBuilder(b);
  LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
}

TEST_CASE("LLVM math: object code for every CPU target references no external symbol") {
  codegen::cpu::InitLlvmTargets();
  struct MathTarget {
    const char* triple;
    const char* cpu;
    const char* features;
    unsigned width;
  };
  const MathTarget targets[] = {{"x86_64-unknown-linux-gnu", "x86-64", "", 4},
                                {"x86_64-unknown-linux-gnu", "x86-64-v3", "", 8},
                                {"x86_64-unknown-linux-gnu", "x86-64-v4", "", 16},
                                {"aarch64-unknown-linux-gnu", "generic", "+neon", 4}};
  for (const MathTarget& tg : targets) {
    CAPTURE(tg.cpu);
    LLVMTargetRef target = nullptr;
    char* msg = nullptr;
    REQUIRE_FALSE(LLVMGetTargetFromTriple(tg.triple, &target, &msg));
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, tg.triple, tg.cpu, tg.features,
                                                      LLVMCodeGenLevelAggressive, LLVMRelocPIC, LLVMCodeModelDefault);
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("kiln_math_object", ctx);
    LLVMSetTarget(m, tg.triple);
    LLVMTargetDataRef layout = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(m, layout);
    for (const MathOpCase& c : kMathOpCases) {
      // Scalar loops (which O3's loop vectorizer widens) and explicit vectors of the target's width.
      EmitMathLoop(m, c.op, 1, std::string(c.name) + "_scalar");
      EmitMathLoop(m, c.op, tg.width, std::string(c.name) + "_vector");
    }
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    REQUIRE(MathTakeError(LLVMRunPasses(m, "default<O3>", tm, opts)) == "");
    LLVMDisposePassBuilderOptions(opts);
    LLVMMemoryBufferRef obj = nullptr;
    REQUIRE_FALSE(LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &msg, &obj));
    LLVMBinaryRef bin = LLVMCreateBinary(obj, ctx, &msg);
    REQUIRE(bin != nullptr);
    std::vector<std::string> undefined;
    int defined = 0;
    LLVMSymbolIteratorRef sym = LLVMObjectFileCopySymbolIterator(bin);
    LLVMSectionIteratorRef sec = LLVMObjectFileCopySectionIterator(bin);
    for (; !LLVMObjectFileIsSymbolIteratorAtEnd(bin, sym); LLVMMoveToNextSymbol(sym)) {
      const std::string name = LLVMGetSymbolName(sym);
      LLVMMoveToContainingSection(sec, sym);
      // A symbol in no section is undefined (or absolute: the file symbol, named after the module).
      if (LLVMObjectFileIsSectionIteratorAtEnd(bin, sec)) {
        if (!name.empty() && name != "kiln_math_object") undefined.push_back(name);
      } else if (name.find("_scalar") != std::string::npos || name.find("_vector") != std::string::npos) {
        ++defined;
      }
    }
    LLVMDisposeSectionIterator(sec);
    LLVMDisposeSymbolIterator(sym);
    std::string list;
    for (const std::string& u : undefined) list += u + " ";
    INFO("undefined symbols: " << list);
    CHECK(undefined.empty());
    CHECK(defined == 2 * static_cast<int>(std::size(kMathOpCases)));
    LLVMDisposeBinary(bin);
    LLVMDisposeMemoryBuffer(obj);
    LLVMDisposeTargetData(layout);
    LLVMDisposeModule(m);
    LLVMContextDispose(ctx);
    LLVMDisposeTargetMachine(tm);
  }
}

}  // namespace
}  // namespace kiln

#endif  // KILN_HAVE_LLVM
