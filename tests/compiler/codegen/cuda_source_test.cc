// CUDA emission: launch rules, the shape of the source, and the kernels themselves run on
// the host through the host shim, against hand-computed values and against the CPU
// interpreter of the same programs (cpu::RunFused).
//
// Tolerance against the interpreter: float outputs within atol 1e-6 + rtol 1e-5 of the
// interpreter's (NaN only where it has NaN); integer, bool outputs exactly; float16 and
// bfloat16 outputs within one unit in the last place. Not bit-exact because the two compute
// the same float32 math in a different order: the interpreter accumulates float
// reductions in double and evaluates a block of elements node by node, the kernel folds in
// float as it goes, and on a GPU the CUDA math library (expf, erff, ...) differs from libm
// by a few ulp. The host-shim build here uses libm, so its unary results match exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/codegen/cuda_source.h"
#include "runtime/fused/interpreter.h"
#include "runtime/half.h"
#include "tests/compiler/codegen/host_shim_harness.h"
#include "tests/compiler/codegen/test_programs.h"
#include "tests/temp_dir.h"
#include "tests/text_util.h"

namespace kiln {
namespace {

using codegen::EmittedKernel;
using codegen::LaunchKind;
using testing::HostKernels;

// A dense host tensor (bytes 16-byte aligned, as operator new gives).
struct Tensor {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(bytes.data()); }
  cpu::TensorRef ref() {
    return {bytes.data(), dtype, static_cast<int32_t>(dims.size()), dims.data(), count()};
  }
};

Tensor MakeTensor(const fused::TensorSpec& spec, const std::vector<int64_t>& sizes) {
  Tensor t;
  t.dtype = spec.dtype;
  for (int64_t d : spec.dims) t.dims.push_back(d >= 0 ? d : sizes[-(d + 1)]);
  t.bytes.assign(static_cast<size_t>(t.count()) * DTypeSize(spec.dtype), 0);
  return t;
}

double Get(const Tensor& t, int64_t i) {
  const uint8_t* p = t.bytes.data() + i * DTypeSize(t.dtype);
  auto rd = [&](auto v) {
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (t.dtype) {
    case DType::kFloat32: return rd(float{});
    case DType::kFloat64: return rd(double{});
    case DType::kFloat16: return HalfToFloat(rd(uint16_t{}));
    case DType::kBFloat16: return BF16ToFloat(rd(uint16_t{}));
    case DType::kInt8: return rd(int8_t{});
    case DType::kUInt8: case DType::kBool: return rd(uint8_t{});
    case DType::kInt16: return rd(int16_t{});
    case DType::kUInt16: return rd(uint16_t{});
    case DType::kInt32: return rd(int32_t{});
    case DType::kUInt32: return rd(uint32_t{});
    case DType::kInt64: return static_cast<double>(rd(int64_t{}));
    case DType::kUInt64: return static_cast<double>(rd(uint64_t{}));
    default: return 0;
  }
}

int64_t GetInt(const Tensor& t, int64_t i) {
  if (t.dtype == DType::kInt64 || t.dtype == DType::kUInt64) {
    int64_t v;
    std::memcpy(&v, t.bytes.data() + i * 8, 8);
    return v;
  }
  return static_cast<int64_t>(Get(t, i));
}

// Random values: floats in [-3, 3], integers in [-20, 20], bools 0/1.
void Randomize(Tensor& t, std::mt19937& rng) {
  std::uniform_real_distribution<float> f(-3.0f, 3.0f);
  std::uniform_int_distribution<int> k(-20, 20);
  for (int64_t i = 0; i < t.count(); ++i) {
    uint8_t* p = t.bytes.data() + i * DTypeSize(t.dtype);
    auto wr = [&](auto v) { std::memcpy(p, &v, sizeof(v)); };
    switch (t.dtype) {
      case DType::kFloat32: wr(f(rng)); break;
      case DType::kFloat64: wr(static_cast<double>(f(rng))); break;
      case DType::kFloat16: wr(FloatToHalf(f(rng))); break;
      case DType::kBFloat16: wr(FloatToBF16(f(rng))); break;
      case DType::kInt8: wr(static_cast<int8_t>(k(rng))); break;
      case DType::kUInt8: wr(static_cast<uint8_t>(k(rng) + 20)); break;
      case DType::kBool: wr(static_cast<uint8_t>(k(rng) > 0)); break;
      case DType::kInt16: wr(static_cast<int16_t>(k(rng))); break;
      case DType::kUInt16: wr(static_cast<uint16_t>(k(rng) + 20)); break;
      case DType::kInt32: wr(static_cast<int32_t>(k(rng))); break;
      case DType::kUInt32: wr(static_cast<uint32_t>(k(rng) + 20)); break;
      case DType::kInt64: wr(static_cast<int64_t>(k(rng))); break;
      case DType::kUInt64: wr(static_cast<uint64_t>(k(rng) + 20)); break;
      default: break;
    }
  }
}

// All test programs' kernels, compiled for the host once per process.
struct Suite {
  std::vector<fused::Program> programs;
  std::vector<EmittedKernel> kernels;
  std::unique_ptr<testing::TempDir> dir;
  std::unique_ptr<HostKernels> lib;
};

enum ProgramId {
  kBroadcast, kVector, kSoftmax, kSoftmaxSym, kLeading, kMiddle, kGather, kCast, kSymbolic, kAllOps,
  kIndexMath, kLoadedIndex, kSignedIndex, kSizeDivisor, kRowIndex, kRowIndexSym, kSoftmaxHalf, kSoftmaxBF16,
  kNumPrograms
};

Suite MakeSuite() {
  Suite s;
  s.programs.resize(kNumPrograms);
  s.programs[kBroadcast] = testing::BroadcastProgram();
  s.programs[kVector] = testing::VectorProgram();
  s.programs[kSoftmax] = testing::SoftmaxProgram(5, 37, 0);
  s.programs[kSoftmaxSym] = testing::SoftmaxProgram(-1, -2, 2);
  s.programs[kLeading] = testing::LeadingReduceProgram();
  s.programs[kMiddle] = testing::MiddleReduceProgram();
  s.programs[kGather] = testing::GatherProgram();
  s.programs[kCast] = testing::CastProgram();
  s.programs[kSymbolic] = testing::SymbolicProgram();
  s.programs[kAllOps] = testing::AllOpsProgram();
  s.programs[kIndexMath] = testing::IndexMathProgram();
  s.programs[kLoadedIndex] = testing::LoadedIndexProgram();
  s.programs[kSignedIndex] = testing::SignedIndexProgram();
  s.programs[kSizeDivisor] = testing::SizeDivisorProgram();
  s.programs[kRowIndex] = testing::RowIndexProgram(7);
  s.programs[kRowIndexSym] = testing::RowIndexProgram(-2);
  s.programs[kSoftmaxHalf] = testing::SoftmaxProgram(-1, -2, 2, DType::kFloat16);
  s.programs[kSoftmaxBF16] = testing::SoftmaxProgram(-1, -2, 2, DType::kBFloat16);
  for (const fused::Program& p : s.programs) {
    Result<EmittedKernel> k = codegen::EmitCuda(p);
    REQUIRE_MESSAGE(k.ok(), k.status().ToString());
    s.kernels.push_back(*k);
  }
  s.dir = std::make_unique<testing::TempDir>();
  Result<std::unique_ptr<HostKernels>> lib = HostKernels::Build(s.kernels, s.dir->path.string());
  REQUIRE_MESSAGE(lib.ok(), lib.status().ToString());
  s.lib = std::move(*lib);
  return s;
}

// Built once per process (one host compile for all kernels); removed at exit.
const Suite& GetSuite() {
  static Suite suite = MakeSuite();
  return suite;
}

struct KernelRun {
  std::vector<Tensor> inputs, outputs;
};

KernelRun Prepare(const fused::Program& p, const std::vector<int64_t>& sizes, uint32_t seed) {
  KernelRun r;
  std::mt19937 rng(seed);
  for (const fused::TensorSpec& s : p.inputs) {
    r.inputs.push_back(MakeTensor(s, sizes));
    Randomize(r.inputs.back(), rng);
  }
  for (const fused::Output& o : p.outputs) r.outputs.push_back(MakeTensor(o.tensor, sizes));
  return r;
}

Status RunKernel(const HostKernels& lib, const EmittedKernel& kernel, const fused::Program& p, KernelRun& r,
                 const std::vector<int64_t>& sizes, std::optional<testing::HostLaunch> launch = std::nullopt) {
  std::vector<cpu::TensorRef> in, out;
  for (Tensor& t : r.inputs) in.push_back(t.ref());
  for (Tensor& t : r.outputs) out.push_back(t.ref());
  return testing::RunHostKernel(lib, kernel, p, in, out, sizes, launch);
}

Status RunKernel(ProgramId id, KernelRun& r, const std::vector<int64_t>& sizes,
                 std::optional<testing::HostLaunch> launch = std::nullopt) {
  const Suite& s = GetSuite();
  return RunKernel(*s.lib, s.kernels[id], s.programs[id], r, sizes, launch);
}

Status RunInterpreter(const fused::Program& p, KernelRun& r, const std::vector<int64_t>& sizes) {
  std::vector<cpu::TensorRef> in, out;
  for (Tensor& t : r.inputs) in.push_back(t.ref());
  for (Tensor& t : r.outputs) out.push_back(t.ref());
  std::vector<uint8_t> ws(cpu::FusedWorkspaceBytes(p));
  return cpu::RunFused(p, in, out, sizes, ws.data(), ws.size());
}

bool Close(DType dt, double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  switch (dt) {
    case DType::kFloat32: case DType::kFloat64: return std::fabs(got - want) <= 1e-6 + 1e-5 * std::fabs(want);
    case DType::kFloat16: return std::fabs(got - want) <= 1e-3 * std::fabs(want) + 1e-7;
    case DType::kBFloat16: return std::fabs(got - want) <= 8e-3 * std::fabs(want) + 1e-38;
    default: return got == want;
  }
}

// Runs a program on its host kernel and on the interpreter with the same random inputs
// (`fill` may then set chosen values) and compares every output element.
void CompareWithInterpreter(const HostKernels& lib, const EmittedKernel& k, const fused::Program& p, int id,
                            const std::vector<int64_t>& sizes, uint32_t seed, void (*fill)(KernelRun&) = nullptr,
                            std::optional<testing::HostLaunch> launch = std::nullopt) {
  CAPTURE(id);
  CAPTURE(seed);
  KernelRun kernel = Prepare(p, sizes, seed);
  if (fill) fill(kernel);
  KernelRun interp = kernel;
  // Outputs start different, so an element neither writes cannot pass.
  for (Tensor& t : kernel.outputs) std::fill(t.bytes.begin(), t.bytes.end(), 0xA5);
  Status ks = RunKernel(lib, k, p, kernel, sizes, launch);
  REQUIRE_MESSAGE(ks.ok(), ks.ToString());
  Status is = RunInterpreter(p, interp, sizes);
  REQUIRE_MESSAGE(is.ok(), is.ToString());
  for (size_t o = 0; o < kernel.outputs.size(); ++o) {
    const Tensor& got = kernel.outputs[o];
    const Tensor& want = interp.outputs[o];
    int bad = 0;
    for (int64_t i = 0; i < got.count(); ++i) {
      const bool ok = (got.dtype == DType::kInt64 || got.dtype == DType::kUInt64)
                          ? GetInt(got, i) == GetInt(want, i)
                          : Close(got.dtype, Get(got, i), Get(want, i));
      if (!ok && bad++ < 3) {
        FAIL_CHECK("program " << id << " output " << o << " (" << DTypeName(got.dtype) << ") element " << i
                              << ": kernel " << GetInt(got, i) << ", interpreter " << GetInt(want, i) << " ("
                              << Get(got, i) << ", " << Get(want, i) << ")");
      }
    }
  }
}

void CompareWithInterpreter(ProgramId id, const std::vector<int64_t>& sizes, uint32_t seed,
                            void (*fill)(KernelRun&) = nullptr,
                            std::optional<testing::HostLaunch> launch = std::nullopt) {
  const Suite& s = GetSuite();
  CompareWithInterpreter(*s.lib, s.kernels[id], s.programs[id], id, sizes, seed, fill, launch);
}

// The kernel function of a source (after the prelude), and the lines of its body that
// declare node values.
std::string KernelBody(const EmittedKernel& k) {
  const size_t at = k.source.find("extern \"C\"");
  REQUIRE(at != std::string::npos);
  return k.source.substr(at);
}

using testing::Contains;

// The declaration of node n's value ("const int v12 = ...;"), or "" if not emitted.
std::string Decl(const std::string& body, int32_t n) {
  const std::string name = " v" + std::to_string(n) + " = ";
  const size_t at = body.find(name);
  if (at == std::string::npos) return "";
  const size_t begin = body.rfind('\n', at) + 1, end = body.find('\n', at);
  std::string line = body.substr(begin, end - begin);
  return line.substr(line.find_first_not_of(' '));
}

TEST_CASE("EmitCuda: launch rules follow the program") {
  const Suite& s = GetSuite();
  auto check = [&](ProgramId id, LaunchKind kind, int block, int vector, int bits) {
    CAPTURE(id);
    const EmittedKernel& k = s.kernels[id];
    CHECK(k.kind == kind);
    CHECK(k.block == block);
    CHECK(k.vector == vector);
    CHECK(k.index_bits == bits);
  };
  check(kBroadcast, LaunchKind::kElementwise, 256, 1, 32);
  check(kVector, LaunchKind::kElementwise, 256, 4, 32);
  check(kSoftmax, LaunchKind::kRowReduction, 64, 1, 32);     // 37 columns: 64 threads
  check(kSoftmaxSym, LaunchKind::kRowReduction, 256, 1, 64);  // symbolic: 64-bit, 256 threads
  check(kLeading, LaunchKind::kRowReduction, 32, 1, 32);      // 6 columns: one warp
  check(kSymbolic, LaunchKind::kElementwise, 256, 4, 64);   // count unknown: checked at run time
  check(kCast, LaunchKind::kElementwise, 256, 1, 32);         // no 4-byte-only outputs: scalar

  // Constant extents of 2^31 elements or more need 64-bit indices.
  fused::Program big = testing::BroadcastProgram();
  big.domain = {65536, 32768};
  big.inputs[0].dims = big.domain;
  big.inputs[1].dims = {32768};
  big.outputs[0].tensor.dims = big.domain;
  Result<EmittedKernel> k = codegen::EmitCuda(big);
  REQUIRE(k.ok());
  CHECK(k->index_bits == 64);
  big.domain = {65536, 32767};
  big.inputs[0].dims = big.domain;
  big.inputs[1].dims = {32767};
  big.outputs[0].tensor.dims = big.domain;
  k = codegen::EmitCuda(big);
  REQUIRE(k.ok());
  CHECK(k->index_bits == 32);
}

TEST_CASE("EmitCuda: source shape, names and reachability") {
  const Suite& s = GetSuite();
  const EmittedKernel& bc = s.kernels[kBroadcast];
  CHECK(bc.name.size() == 5 + 16);
  CHECK(bc.name.rfind("kiln_", 0) == 0);
  CHECK(bc.source.find("extern \"C\" __global__ void __launch_bounds__(256) " + bc.name + "(") != std::string::npos);
  CHECK(bc.source.find("const float* __restrict__ in0") != std::string::npos);
  CHECK(bc.source.find("float* __restrict__ out0") != std::string::npos);
  CHECK(bc.source.find("unsigned int* __restrict__ err") != std::string::npos);
  CHECK(bc.source.find("% 5u") != std::string::npos);  // constant extents folded into the source
  CHECK(bc.source.find("float4") == std::string::npos);
  CHECK(bc.source.find("KILN_PRELUDE_HALF") == std::string::npos);  // only the sections used
  CHECK(s.kernels[kVector].source.find("reinterpret_cast<const float4*>(in0)") != std::string::npos);
  CHECK(s.kernels[kVector].source.find("reinterpret_cast<const int4*>(in1)") != std::string::npos);
  CHECK(s.kernels[kVector].source.find("reinterpret_cast<const float4*>(in2)") == std::string::npos);  // at j
  CHECK(s.kernels[kSymbolic].source.find("long long s0") != std::string::npos);
  CHECK(s.kernels[kCast].source.find("KILN_PRELUDE_HALF") != std::string::npos);
  CHECK(s.kernels[kSoftmax].source.find("kiln_block_reduce") != std::string::npos);

  // Identical programs share a kernel; a different constant gives another.
  Result<EmittedKernel> again = codegen::EmitCuda(testing::BroadcastProgram());
  REQUIRE(again.ok());
  CHECK(again->name == bc.name);
  CHECK(again->source == bc.source);
  fused::Program other = testing::BroadcastProgram();
  other.nodes[5].f = 1.0;  // max(x, 1) instead of max(x, 0)
  REQUIRE(other.nodes[5].op == fused::Op::kConst);
  Result<EmittedKernel> k2 = codegen::EmitCuda(other);
  REQUIRE(k2.ok());
  CHECK(k2->name != bc.name);

  // A node nothing stores is not emitted.
  fused::Program dead = testing::BroadcastProgram();
  dead.nodes.push_back({fused::Op::kExp, fused::ScalarType::kF32, 4, -1, -1, 0, 0.0});
  const std::string dead_var = "v" + std::to_string(dead.nodes.size() - 1) + " ";
  Result<EmittedKernel> k3 = codegen::EmitCuda(dead);
  REQUIRE(k3.ok());
  CHECK(k3->source.find(dead_var) == std::string::npos);
  CHECK(k3->source.find("v4 ") != std::string::npos);
  // Its body is the live program's, yet it is another kernel: the artifact keeps each
  // kernel's program (Silero with a fixed sequence length had two fused ops, a Gather of
  // state[0] from [2, 1, 128] and a Squeeze of [1, 128, 1], emit one body, and the second
  // was then checked against the first one's input shape).
  CHECK(k3->name != bc.name);
  std::string renamed = k3->source;
  for (size_t at = 0; (at = renamed.find(k3->name, at)) != std::string::npos; at += bc.name.size())
    renamed.replace(at, k3->name.size(), bc.name);
  CHECK(renamed == bc.source);
}

TEST_CASE("EmitCuda: invalid programs are rejected") {
  fused::Program p = testing::BroadcastProgram();
  p.nodes[4].a = 9;  // operand after the node
  Result<EmittedKernel> k = codegen::EmitCuda(p);
  CHECK(!k.ok());
  CHECK(k.status().code() == StatusCode::kInvalidArgument);
  p = testing::BroadcastProgram();
  p.outputs[0].per_row = true;  // per-row output without reduced axes
  CHECK(codegen::EmitCuda(p).status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("host shim: kernels give hand-computed results") {
  const Suite& s = GetSuite();
  SUBCASE("broadcast add + relu") {
    KernelRun r = Prepare(s.programs[kBroadcast], {}, 1);
    REQUIRE(RunKernel(kBroadcast, r, {}).ok());
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 5; ++j) {
        const float want = std::max(r.inputs[0].as<float>()[i * 5 + j] + r.inputs[1].as<float>()[j], 0.0f);
        CHECK(r.outputs[0].as<float>()[i * 5 + j] == want);
      }
    }
  }
  SUBCASE("vectorised path, and its scalar fallback on misaligned pointers") {
    const fused::Program& p = s.programs[kVector];
    const EmittedKernel& k = s.kernels[kVector];
    KernelRun r = Prepare(p, {}, 2);
    auto expect = [&](const float* a, const int32_t* kk, const float* c, const float* out0, const int32_t* out1) {
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 64; ++j) {
          const int e = i * 64 + j;
          CHECK(out0[e] == a[e] * 0.5f + static_cast<float>(kk[e]) + c[j]);
          CHECK(out1[e] == kk[e] * 3 - i);
        }
      }
    };
    REQUIRE(reinterpret_cast<uintptr_t>(r.inputs[0].bytes.data()) % 16 == 0);
    REQUIRE(RunKernel(kVector, r, {}).ok());
    expect(r.inputs[0].as<float>(), r.inputs[1].as<int32_t>(), r.inputs[2].as<float>(), r.outputs[0].as<float>(),
           r.outputs[1].as<int32_t>());
    // Shift every buffer by 4 bytes: not 16-byte aligned, so the scalar loop runs.
    std::vector<std::vector<uint8_t>> shifted;
    std::vector<const void*> in;
    std::vector<void*> out;
    for (Tensor& t : r.inputs) {
      shifted.emplace_back(t.bytes.size() + 16);
      std::memcpy(shifted.back().data() + 4, t.bytes.data(), t.bytes.size());
      in.push_back(shifted.back().data() + 4);
    }
    for (Tensor& t : r.outputs) {
      shifted.emplace_back(t.bytes.size() + 16, 0);
      out.push_back(shifted.back().data() + 4);
    }
    uint32_t err[codegen::kErrorWords];
    REQUIRE(s.lib->Launch(k, in, out, {}, {3, 4}, err).ok());
    expect(static_cast<const float*>(in[0]), static_cast<const int32_t*>(in[1]), static_cast<const float*>(in[2]),
           static_cast<float*>(out[0]), static_cast<int32_t*>(out[1]));
    CHECK(err[0] == 0);
  }
  SUBCASE("softmax and log-sum-exp over rows") {
    KernelRun r = Prepare(s.programs[kSoftmax], {}, 3);
    REQUIRE(RunKernel(kSoftmax, r, {}).ok());
    for (int i = 0; i < 5; ++i) {
      const float* x = r.inputs[0].as<float>() + i * 37;
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < 37; ++j) mx = std::max<double>(mx, x[j]);
      for (int j = 0; j < 37; ++j) sum += std::exp(x[j] - mx);
      for (int j = 0; j < 37; ++j) {
        CHECK(r.outputs[0].as<float>()[i * 37 + j] == doctest::Approx(std::exp(x[j] - mx) / sum).epsilon(1e-5));
      }
      CHECK(r.outputs[1].as<float>()[i] == doctest::Approx(std::log(sum) + mx).epsilon(1e-5));
    }
  }
  SUBCASE("reductions over the leading and middle axes") {
    KernelRun r = Prepare(s.programs[kLeading], {}, 4);
    REQUIRE(RunKernel(kLeading, r, {}).ok());
    for (int j = 0; j < 4; ++j) {
      double sum = 0;
      int64_t isum = 0, imax = std::numeric_limits<int64_t>::min();
      for (int i = 0; i < 6; ++i) {
        sum += r.inputs[0].as<float>()[i * 4 + j];
        isum += r.inputs[1].as<int64_t>()[i * 4 + j];
        imax = std::max(imax, r.inputs[1].as<int64_t>()[i * 4 + j]);
      }
      CHECK(r.outputs[0].as<float>()[j] == doctest::Approx(sum).epsilon(1e-5));
      CHECK(r.outputs[1].as<int64_t>()[j] == isum);
      CHECK(r.outputs[2].as<int64_t>()[j] == imax);
      for (int i = 0; i < 6; ++i) {
        const double want = r.inputs[0].as<float>()[i * 4 + j] - sum / 6;
        CHECK(r.outputs[3].as<float>()[i * 4 + j] == doctest::Approx(want).epsilon(1e-5));
      }
    }
    KernelRun m = Prepare(s.programs[kMiddle], {}, 5);
    REQUIRE(RunKernel(kMiddle, m, {}).ok());
    for (int a = 0; a < 2; ++a) {
      for (int c = 0; c < 3; ++c) {
        double sum = 0, prod = 1, mn = INFINITY;
        for (int b = 0; b < 5; ++b) {
          const float x = m.inputs[0].as<float>()[a * 15 + b * 3 + c];
          sum += x;
          prod *= x;
          mn = std::min<double>(mn, x);
        }
        CHECK(m.outputs[0].as<float>()[a * 3 + c] == doctest::Approx(sum * 0.2).epsilon(1e-5));
        CHECK(m.outputs[1].as<float>()[a * 3 + c] == doctest::Approx(prod).epsilon(1e-5));
        CHECK(m.outputs[2].as<float>()[a * 3 + c] == mn);
        for (int b = 0; b < 5; ++b) {
          const float x = m.inputs[0].as<float>()[a * 15 + b * 3 + c];
          CHECK(m.outputs[3].as<float>()[a * 15 + b * 3 + c] ==
                doctest::Approx(x - sum * 0.2 + 100 * b + 10 * c).epsilon(1e-5));
        }
      }
    }
  }
  SUBCASE("gather: negative indices wrap, a bad index is reported and clamped") {
    KernelRun r = Prepare(s.programs[kGather], {}, 6);
    const int64_t idx[4] = {4, -1, 0, 2};
    std::memcpy(r.inputs[1].bytes.data(), idx, sizeof(idx));
    REQUIRE(RunKernel(kGather, r, {}).ok());
    const float* data = r.inputs[0].as<float>();
    const int rows[4] = {4, 4, 0, 2};
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 3; ++j) CHECK(r.outputs[0].as<float>()[i * 3 + j] == data[rows[i] * 3 + j]);
    }
    const int64_t bad[4] = {1, 7, -9, 3};
    std::memcpy(r.inputs[1].bytes.data(), bad, sizeof(bad));
    Status st = RunKernel(kGather, r, {});
    CHECK(st.code() == StatusCode::kInvalidArgument);
    CHECK(st.message() == "Gather 'g' input 'indices': index 7 is out of range");  // the first failing element
    for (int j = 0; j < 3; ++j) {
      CHECK(r.outputs[0].as<float>()[1 * 3 + j] == data[j]);  // clamped to row 0
      CHECK(r.outputs[0].as<float>()[3 * 3 + j] == data[3 * 3 + j]);
    }
  }
  SUBCASE("casts") {
    KernelRun r = Prepare(s.programs[kCast], {}, 7);
    // 7, 12, 13: float16 ties (3 * 2^-25, 1 + 2^-11, 1 + 3 * 2^-11) round to even.
    const float x[16] = {0.0f, -0.0f, 1.5f, -1.5f, 2.5f, 3.0f, -3.0f, 3 * 0x1p-25f, NAN, INFINITY, -INFINITY,
                         0.0049f, 1 + 0x1p-11f, 1 + 3 * 0x1p-11f, 65519.0f / 3, 1.0f / 3};
    std::memcpy(r.inputs[1].bytes.data(), x, sizeof(x));
    const int64_t k[16] = {0, 1, -1, 32767, 32768, -32769, 65536 + 5, std::numeric_limits<int64_t>::min(), 7, 8, 9,
                           10, 11, 12, 13, 14};
    std::memcpy(r.inputs[3].bytes.data(), k, sizeof(k));
    REQUIRE(RunKernel(kCast, r, {}).ok());
    for (int i = 0; i < 16; ++i) {
      CAPTURE(i);
      const uint16_t h = r.inputs[0].as<uint16_t>()[i];
      CHECK(r.outputs[0].as<float>()[i] == HalfToFloat(h) * 2);
      CHECK(r.outputs[1].as<uint16_t>()[i] == FloatToHalf(x[i] * 3));
      // ONNX Cast float -> int: truncate, saturate at the target's range, NaN -> 0.
      auto sat = [](float v, double lo, double hi) -> int64_t {
        if (std::isnan(v)) return 0;
        return static_cast<int64_t>(std::trunc(std::clamp<double>(v, lo, hi)));
      };
      CHECK(r.outputs[2].as<int8_t>()[i] == sat(x[i] * 100, -128, 127));
      CHECK(r.outputs[3].as<uint8_t>()[i] == sat(x[i] * 100, 0, 255));
      CHECK(r.outputs[4].as<int16_t>()[i] == static_cast<int16_t>(k[i]));  // integer casts wrap
      CHECK(r.outputs[5].as<uint8_t>()[i] == (x[i] != 0 ? 1 : 0));          // NaN -> true
      const uint16_t b = r.inputs[2].as<uint16_t>()[i];
      CHECK(r.outputs[6].as<uint16_t>()[i] == FloatToBF16(BF16ToFloat(b) + 1));
      CHECK(r.outputs[7].as<int32_t>()[i] == sat(std::nearbyint(x[i] * 10), -2147483648.0, 2147483647.0));
      const float r16 = HalfToFloat(FloatToHalf(x[i]));
      if (std::isnan(x[i])) {
        CHECK(std::isnan(r.outputs[8].as<float>()[i]));
      } else {
        CHECK(r.outputs[8].as<float>()[i] == r16);
      }
      const float big = x[i] * 1e19f;
      const int64_t want9 = std::isnan(big) ? 0
                            : big >= 9.2233720368547758e18f ? std::numeric_limits<int64_t>::max()
                            : big <= -9.2233720368547758e18f ? std::numeric_limits<int64_t>::min()
                                                              : static_cast<int64_t>(big);
      CHECK(r.outputs[9].as<int64_t>()[i] == want9);
      CHECK(r.outputs[10].as<double>()[i] == static_cast<double>(k[i]) + 0.25);
      CHECK(r.outputs[11].as<uint32_t>()[i] == static_cast<uint32_t>(sat(x[i] * 1e9f, 0, 4294967295.0)));
    }
    // Spot checks of the rounding rules.
    CHECK(r.outputs[7].as<int32_t>()[4] == 25);   // round(25.0)
    CHECK(r.outputs[2].as<int8_t>()[5] == 127);   // 300 saturates
    CHECK(r.outputs[3].as<uint8_t>()[6] == 0);    // -300 saturates at 0
    CHECK(r.outputs[2].as<int8_t>()[8] == 0);     // NaN
    CHECK(r.outputs[8].as<float>()[7] == 0x1p-23f);
    CHECK(r.outputs[8].as<float>()[12] == 1.0f);
    CHECK(r.outputs[8].as<float>()[13] == 1 + 0x1p-9f);
    CHECK(r.outputs[1].as<uint16_t>()[14] == 0x7bff);  // 65519 rounds down to 65504, not to infinity
  }
  SUBCASE("symbolic sizes: one kernel for every size") {
    for (int64_t rows : {1, 3, 7}) {
      KernelRun r = Prepare(s.programs[kSymbolic], {rows}, 8);
      REQUIRE(RunKernel(kSymbolic, r, {rows}).ok());
      for (int i = 0; i < rows; ++i) {
        for (int j = 0; j < 8; ++j) {
          const float a = r.inputs[0].as<float>()[i * 8 + j];
          const float want = 1.0f / (1.0f + std::exp(-a)) * r.inputs[1].as<float>()[j] + static_cast<float>(i + rows);
          CHECK(r.outputs[0].as<float>()[i * 8 + j] == doctest::Approx(want).epsilon(1e-6));
        }
      }
    }
  }
}

TEST_CASE("host shim: kernels match the CPU interpreter on random inputs") {
  CompareWithInterpreter(kBroadcast, {}, 11);
  CompareWithInterpreter(kVector, {}, 12);
  // Row reductions with 64 threads (two warps: shuffles, shared memory, barriers), with
  // one thread, and with the kernel's own block of 256 threads over 300 columns.
  CompareWithInterpreter(kSoftmax, {}, 13);
  CompareWithInterpreter(kSoftmax, {}, 13, nullptr, testing::HostLaunch{2, 1});
  CompareWithInterpreter(kSoftmaxSym, {4, 300}, 14);
  CompareWithInterpreter(kSoftmaxSym, {4, 300}, 14, nullptr, testing::HostLaunch{3, 256});
  CompareWithInterpreter(kSoftmaxSym, {1, 1}, 15);
  CompareWithInterpreter(kSoftmaxSym, {3, 0}, 15);  // rows without columns: max = -inf, sum = 0
  // The same row reduction over float16 / bfloat16 storage (the precision stage's Softmax and
  // normalisations): half loads into float registers, float32 statistics across the block's
  // shuffles and shared memory, half stores of the full and the per-row output.
  CHECK(Contains(KernelBody(GetSuite().kernels[kSoftmaxHalf]), "kiln_h2f(in0["));
  CHECK(Contains(KernelBody(GetSuite().kernels[kSoftmaxHalf]), "kiln_f2h("));
  CHECK(Contains(KernelBody(GetSuite().kernels[kSoftmaxBF16]), "kiln_bf2f(in0["));
  CHECK(Contains(KernelBody(GetSuite().kernels[kSoftmaxBF16]), "kiln_f2bf("));
  for (ProgramId id : {kSoftmaxHalf, kSoftmaxBF16}) {
    CompareWithInterpreter(id, {4, 300}, 23);
    CompareWithInterpreter(id, {4, 300}, 23, nullptr, testing::HostLaunch{3, 256});
    CompareWithInterpreter(id, {5, 37}, 24, nullptr, testing::HostLaunch{2, 64});
  }
  CompareWithInterpreter(kLeading, {}, 16);
  CompareWithInterpreter(kLeading, {}, 16, nullptr, testing::HostLaunch{4, 32});
  CompareWithInterpreter(kMiddle, {}, 17);
  CompareWithInterpreter(kMiddle, {}, 17, nullptr, testing::HostLaunch{1, 1});
  CompareWithInterpreter(kGather, {}, 18, [](KernelRun& r) {
    const int64_t idx[4] = {3, -5, 0, -1};
    std::memcpy(r.inputs[1].bytes.data(), idx, sizeof(idx));
  });
  CompareWithInterpreter(kCast, {}, 19);
  CompareWithInterpreter(kSymbolic, {5}, 20);
  CompareWithInterpreter(kSymbolic, {0}, 21);  // empty domain
  CompareWithInterpreter(kAllOps, {}, 22, [](KernelRun& r) {
    // Edge values: NaN, signed zero, halves, division by zero, int64 overflow.
    float* x = r.inputs[0].as<float>();
    float* y = r.inputs[1].as<float>();
    x[0] = NAN;
    x[1] = -0.0f;
    x[2] = 2.5f;
    x[3] = -2.5f;
    y[4] = 0.0f;
    y[5] = NAN;
    x[6] = -1.0f;
    y[6] = 3.0f;  // mod: 2, fmod: -1
    int64_t* k = r.inputs[2].as<int64_t>();
    int64_t* j = r.inputs[3].as<int64_t>();
    k[0] = std::numeric_limits<int64_t>::min();
    j[0] = -1;
    j[1] = 0;
    k[2] = -7;
    j[2] = 2;
    k[3] = 7;
    j[3] = -2;
    k[4] = std::numeric_limits<int64_t>::max();
    j[4] = 2;
  });
}

// Whether node n's declaration is one of `types` ("int", "long long", ...).
bool DeclaredAs(const std::string& body, int32_t n, std::initializer_list<const char*> types) {
  const std::string d = Decl(body, n);
  for (const char* t : types) {
    if (d.rfind(std::string("const ") + t + " v", 0) == 0) return true;
  }
  return false;
}

TEST_CASE("EmitCuda: index arithmetic of static shapes is 32-bit, with plain division") {
  const Suite& s = GetSuite();
  const fused::Program& p = s.programs[kIndexMath];
  const EmittedKernel& k = s.kernels[kIndexMath];
  CHECK(k.index_bits == 32);
  const std::string body = KernelBody(k);
  for (const char* helper : {"kiln_floordiv(", "kiln_mod(", "kiln_div(", "kiln_fmod(", "kiln_add(", "kiln_mul("}) {
    CAPTURE(helper);
    CHECK(!Contains(body, helper));
  }
  CHECK(!Contains(body, "long long v"));
  int divisions = 0;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    if (p.nodes[n].type != fused::ScalarType::kI64) continue;
    CAPTURE(Decl(body, static_cast<int32_t>(n)));
    if (p.nodes[n].op == fused::Op::kConst) {  // integer constants are literals where used
      CHECK(Decl(body, static_cast<int32_t>(n)).empty());
      continue;
    }
    CHECK(DeclaredAs(body, static_cast<int32_t>(n), {"int"}));
    const fused::Op op = p.nodes[n].op;
    if (op == fused::Op::kFloorDiv || op == fused::Op::kMod || op == fused::Op::kDiv || op == fused::Op::kFmod) {
      const std::string d = Decl(body, static_cast<int32_t>(n));
      CHECK((Contains(d, " / ") || Contains(d, " % ")));
      CHECK(!Contains(d, "=="));  // no zero check: the divisors are positive constants
      ++divisions;
    }
  }
  CHECK(divisions == 9);

  // Bounded by static dims, 32-bit even where the kernel's indices are 64-bit: the
  // coordinate along the extent-6 axis, and (j * 5) // s0, whose divisor s0 is an extent of
  // the domain (>= 1 wherever the body runs): plain division, no zero check.
  const fused::Program& sp = s.programs[kSizeDivisor];
  const std::string sd = KernelBody(s.kernels[kSizeDivisor]);
  CHECK(s.kernels[kSizeDivisor].index_bits == 64);
  CHECK(Decl(sd, 1) == "const int v1 = (int)c1;");
  const std::string out0 = Decl(sd, sp.outputs[0].value), out1 = Decl(sd, sp.outputs[1].value);
  const std::string out2 = Decl(sd, sp.outputs[2].value);
  CHECK(Contains(out0, "(kiln_u64)"));
  CHECK(Contains(out0, " / "));
  CHECK(!Contains(out0, "=="));
  CHECK(Contains(out0, "const int v"));  // at most 5 * 5
  // s1 is read by no dim: it may be 0 or negative, so the full helpers remain.
  CHECK(Contains(out1, "kiln_mod("));
  CHECK(Contains(out2, "kiln_floordiv("));

  // A per-row output of a row reduction runs even when the reduced extent s1 is 0: a
  // non-negative division by it keeps its zero check (and needs no sign fix-up).
  const fused::Program& rp = s.programs[kRowIndexSym];
  const std::string rb = KernelBody(s.kernels[kRowIndexSym]);
  const int32_t per = rp.nodes[rp.outputs[0].value].b;
  REQUIRE(rp.nodes[per].op == fused::Op::kFloorDiv);
  CHECK(Contains(Decl(rb, per), "== 0 ? 0 : "));
  CHECK(!Contains(Decl(rb, per), "kiln_floordiv("));
  // A narrow value joins a 64-bit accumulator as long long.
  CHECK(Contains(KernelBody(s.kernels[kRowIndex]), "acc0 = kiln_op_sum()(acc0, (long long)v"));
}

TEST_CASE("EmitCuda: loaded indices keep the full 64-bit semantics") {
  const Suite& s = GetSuite();
  const fused::Program& p = s.programs[kLoadedIndex];
  const std::string body = KernelBody(s.kernels[kLoadedIndex]);
  int32_t raw = -1, mod = -1, check = -1, half = -1, fmod = -1, div = -1;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    const fused::Node& node = p.nodes[n];
    const int32_t id = static_cast<int32_t>(n);
    if (node.op == fused::Op::kLoad && node.i == 1) raw = id;
    if (node.op == fused::Op::kMod) mod = id;
    if (node.op == fused::Op::kCheckIndex) check = id;
    if (node.op == fused::Op::kFloorDiv) half = id;
    if (node.op == fused::Op::kFmod) fmod = id;
    if (node.op == fused::Op::kDiv) div = id;
  }
  const std::string v = "v" + std::to_string(raw);
  CHECK(Decl(body, raw) == fmt::format("const long long {} = (long long)in1[v{}];", v, p.nodes[raw].a));
  // A loaded value may be negative: a positive constant divisor needs no zero or -1 check,
  // but floor division and Python modulo keep their sign fix-ups, in 64 bits.
  CHECK(Decl(body, mod) == fmt::format("const long long v{0} = {1} % 5LL + ({1} % 5LL < 0 ? 5LL : 0);", mod, v));
  CHECK(Decl(body, half) == fmt::format("const long long v{0} = {1} / 2LL - ({1} % 2LL < 0);", half, v));
  // C's % and / are exact here: the divisor is never 0 or -1.
  CHECK(Decl(body, fmod) == fmt::format("const long long v{} = {} % 3LL;", fmod, v));
  CHECK(Contains(Decl(body, div), fmt::format("const long long v{} = {} / (long long)v", div, v)));
  // The checked index is an index again: 32-bit for the address arithmetic after it.
  CHECK(Decl(body, check) == fmt::format("const int v{} = (int)(kiln_check(v{}, 5LL, 0u, err));", check, mod));
  // In the gather program the wrapped index is data too.
  const std::string gb = KernelBody(s.kernels[kGather]);
  CHECK(Contains(gb, "kiln_add(v"));
  CHECK(Contains(gb, "kiln_check(v"));
}

TEST_CASE("host shim: index arithmetic matches hand values and the interpreter") {
  const Suite& s = GetSuite();
  SUBCASE("upsample, transposed concat and unravel by hand") {
    KernelRun r = Prepare(s.programs[kIndexMath], {}, 30);
    REQUIRE(RunKernel(kIndexMath, r, {}).ok());
    const float* a = r.inputs[0].as<float>();
    const float* b = r.inputs[1].as<float>();
    for (int n = 0; n < 2; ++n) {
      for (int c = 0; c < 6; ++c) {
        for (int h = 0; h < 4; ++h) {
          for (int w = 0; w < 4; ++w) {
            const int lin = ((n * 6 + c) * 4 + h) * 4 + w;
            const float want = c < 3 ? a[((n * 3 + c) * 2 + h / 2) * 2 + w / 2] : b[((n * 4 + h) * 4 + w) * 3 + c - 3];
            CHECK(r.outputs[0].as<float>()[lin] == want);
            CHECK(r.outputs[1].as<int32_t>()[lin] == c * 100 + h * 10 + w);
            CHECK(r.outputs[2].as<int64_t>()[lin] == lin / 7 + lin % 5);
          }
        }
      }
    }
  }
  SUBCASE("negative values through division and modulo") {
    KernelRun r = Prepare(s.programs[kSignedIndex], {}, 31);
    REQUIRE(RunKernel(kSignedIndex, r, {}).ok());
    const int64_t* k = r.inputs[0].as<int64_t>();
    auto floordiv = [](int64_t x, int64_t y) { return y == 0 ? 0 : (x / y - ((x % y != 0) && ((x < 0) != (y < 0)))); };
    auto pymod = [](int64_t x, int64_t y) { return y == 0 ? 0 : ((x % y + y) % y); };
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 8; ++j) {
        const int e = i * 8 + j;
        const int64_t d = j - 5;
        auto out = [&](int o) { return r.outputs[o].as<int64_t>()[e]; };
        CAPTURE(e);
        CHECK(out(0) == floordiv(d, 3));
        CHECK(out(1) == pymod(d, 3));
        CHECK(out(2) == d / -2);
        CHECK(out(3) == d % 3);
        CHECK(out(4) == floordiv(d, j - 3));
        CHECK(out(5) == pymod(k[e], d));
        CHECK(out(6) == floordiv(k[e], 4));
        CHECK(out(7) == -d * 7 + (d > 0) - (d < 0) + (d < 0 ? -d : d) * 100);
        CHECK(out(8) == std::max<int64_t>(std::min<int64_t>(d, 1), -2) + i);
      }
    }
  }
  CompareWithInterpreter(kIndexMath, {}, 32);
  CompareWithInterpreter(kLoadedIndex, {}, 33);  // indices in [-20, 20]
  CompareWithInterpreter(kLoadedIndex, {}, 34, [](KernelRun& r) {
    const int64_t idx[4] = {std::numeric_limits<int64_t>::min(), -1, std::numeric_limits<int64_t>::max(), -6};
    std::memcpy(r.inputs[1].bytes.data(), idx, sizeof(idx));
  });
  CompareWithInterpreter(kSignedIndex, {}, 35, [](KernelRun& r) {
    int64_t* k = r.inputs[0].as<int64_t>();
    k[0] = std::numeric_limits<int64_t>::min();  // d = -5
    k[4] = std::numeric_limits<int64_t>::min();  // d = -1: INT64_MIN mod -1 = 0
    k[5] = std::numeric_limits<int64_t>::max();  // d = 0
    k[12] = -1;
  });
  // An empty domain must not divide by its zero extent (the host traps on x / 0).
  for (const std::vector<int64_t>& sizes : std::vector<std::vector<int64_t>>{{4, 3}, {4, 0}, {0, 3}, {0, 0}, {1, 7}}) {
    CAPTURE(sizes[0]);
    CAPTURE(sizes[1]);
    CompareWithInterpreter(kSizeDivisor, sizes, 36);
    CompareWithInterpreter(kRowIndex, sizes, 37);
    CompareWithInterpreter(kRowIndexSym, sizes, 38);
    CompareWithInterpreter(kRowIndexSym, sizes, 38, nullptr, testing::HostLaunch{2, 1});
  }
}

// Sets a third of every integer input's elements to extremes (INT64_MIN, INT32_MIN - 1, ...),
// truncated to the dtype.
void FillExtremes(KernelRun& r) {
  const int64_t extremes[] = {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                              -2147483649LL, -2147483648LL, 2147483647LL, 2147483648LL, -1, 0};
  for (Tensor& t : r.inputs) {
    const size_t w = DTypeSize(t.dtype);
    for (int64_t i = 0; i < t.count(); i += 3) {
      std::memcpy(t.bytes.data() + i * w, &extremes[(i / 3) % 8], w);  // the low bytes
    }
  }
}

TEST_CASE("host shim: random integer programs match the interpreter") {
  std::vector<fused::Program> programs;
  std::vector<EmittedKernel> kernels;
  for (uint32_t seed = 100; seed < 124; ++seed) {
    programs.push_back(testing::RandomIntProgram(seed, seed % 2 == 1));
    Result<EmittedKernel> k = codegen::EmitCuda(programs.back());
    REQUIRE_MESSAGE(k.ok(), k.status().ToString());
    kernels.push_back(*k);
  }
  // The programs exercise every representation.
  int narrow = 0, wide = 0;
  for (const EmittedKernel& k : kernels) {
    const std::string body = KernelBody(k);
    narrow += Contains(body, "const int v");
    wide += Contains(body, "const long long v");
  }
  CHECK(narrow >= 24);
  CHECK(wide >= 24);
  testing::TempDir dir;
  Result<std::unique_ptr<HostKernels>> lib = HostKernels::Build(kernels, dir.path.string());
  REQUIRE_MESSAGE(lib.ok(), lib.status().ToString());
  for (size_t i = 0; i < programs.size(); ++i) {
    const bool symbolic = programs[i].domain[0] < 0;
    for (const std::vector<int64_t>& sizes :
         std::vector<std::vector<int64_t>>{{3, 2}, {1, 0}, {symbolic ? 0 : 5, 7}, {2, 1}}) {
      CompareWithInterpreter(**lib, kernels[i], programs[i], static_cast<int>(100 + i), sizes, 40);
      CompareWithInterpreter(**lib, kernels[i], programs[i], static_cast<int>(100 + i), sizes, 41, FillExtremes);
    }
  }
}

}  // namespace
}  // namespace kiln
