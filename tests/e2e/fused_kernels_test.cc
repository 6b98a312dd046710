// Every generated kernel of the real models, checked four ways on the host: the emitted
// CUDA source compiled as host C++ through the shim (compiler/codegen/host_shim.h), the
// portable program run by the CPU interpreter, the region's original ops run one by
// one by the CPU backend, and the kernel's native code (compiler/codegen/cpu/) on every CPU
// target this CPU runs, against the interpreter (the targets it cannot run are compiled and
// linked, not run). Inputs are random (weights are the model's own), with symbolic
// dims bound to the shapes of the model's first test set.
//
// Models: every folder of kiln::testing::ModelDirs() (tests/e2e/model_dirs.h: the packaged
// test data and $KILN_MODEL_DIRS), plus every ONNX node test case of tests/conformance/expected_pass.txt
// found under build/onnx-tests/node (tests/conformance/get_onnx_tests.py) (inputs the case feeds axes or sizes through are bound to
// its test set's values, as the conformance runner does). The test is skipped when there are
// none. All kernels are compiled for the host in a few large batches.
//
// Tolerance: |x - ref| <= 1e-5 + 1e-4 * |ref| for floats (the three evaluate the same
// float32 math in different orders; the unfused normalisation kernels accumulate
// statistics in double, the fused ones in float32, and a fused Softplus uses
// log(1 + exp(-|x|)) where the kernel uses log1p), integers and bools exactly, and NaN
// where the reference has NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <map>
#include <random>
#include <set>

#include "compiler/codegen/cuda_source.h"
#if KILN_HAVE_LLVM
#include "compiler/codegen/cpu/llvm_image.h"
#include "runtime/cpu/native/image.h"
#endif
#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/canonicalize.h"
#include "compiler/passes/value_inputs.h"
#include "runtime/fused/interpreter.h"
#include "runtime/kernels/widen.h"
#include "runtime/half.h"
#include "tests/compiler/codegen/host_shim_harness.h"
#include "tests/e2e/model_dirs.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using kiln::DType;

// The ONNX node cases Kiln passes (tests/conformance/expected_pass.txt) that are present.
std::vector<std::string> NodeCaseDirs() {
  const std::string root = std::string(KILN_ONNX_TESTS_DIR) + "/node/";
  std::ifstream list(std::string(KILN_SOURCE_DIR) + "/tests/conformance/expected_pass.txt");
  std::vector<std::string> dirs;
  for (std::string name; std::getline(list, name);)
    if (!name.empty() && name[0] != '#' && fs::exists(root + name + "/model.onnx")) dirs.push_back(root + name);
  return dirs;
}

using Bindings = std::vector<std::pair<std::string, int64_t>>;

std::vector<int64_t> Dims(const kiln::ir::SymShape& shape, const Bindings& b) {
  std::vector<int64_t> dims;
  for (const kiln::ir::Sym& d : shape) {
    auto v = d.Eval(b);
    REQUIRE_MESSAGE(v.has_value(), "dim " << d.ToString() << " has no value for the test-set shapes");
    dims.push_back(*v);
  }
  return dims;
}

// A buffer for one value: its dims and bytes.
struct Buffer {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  int64_t count() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  kiln::cpu::TensorRef ref() {
    return {bytes.data(), dtype, static_cast<int32_t>(dims.size()), dims.data(), count()};
  }
};

Buffer AllocateBuffer(const kiln::ir::Value& v, const Bindings& b) {
  Buffer buf;
  buf.dtype = v.dtype;
  buf.dims = Dims(v.shape, b);
  buf.bytes.assign(static_cast<size_t>(buf.count()) * kiln::DTypeSize(v.dtype) + 1, 0);
  return buf;
}

// The value's data: its constant, its Sym elements, or random numbers.
Buffer InputFor(const kiln::ir::Value& v, const Bindings& b, std::mt19937& rng) {
  Buffer buf = AllocateBuffer(v, b);
  if (v.is_const()) {
    if (!v.data->bytes.empty())  // an empty constant's bytes may have no storage at all
      std::memcpy(buf.bytes.data(), v.data->bytes.data(), v.data->bytes.size());
    return buf;
  }
  const int64_t n = buf.count();
  if (v.sym) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t x = (*v.sym)[i].Eval(b).value_or(0);
      if (v.dtype == DType::kInt64) reinterpret_cast<int64_t*>(buf.bytes.data())[i] = x;
      else reinterpret_cast<int32_t*>(buf.bytes.data())[i] = static_cast<int32_t>(x);
    }
    return buf;
  }
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (int64_t i = 0; i < n; ++i) {
    switch (v.dtype) {
      case DType::kFloat32: reinterpret_cast<float*>(buf.bytes.data())[i] = u(rng); break;
      case DType::kFloat64: reinterpret_cast<double*>(buf.bytes.data())[i] = u(rng); break;
      case DType::kFloat16: reinterpret_cast<uint16_t*>(buf.bytes.data())[i] = kiln::FloatToHalf(u(rng)); break;
      case DType::kBool: buf.bytes[i] = rng() & 1; break;
      default: break;  // integers stay 0: always a valid index
    }
  }
  return buf;
}

double At(const Buffer& b, int64_t i) {
  switch (b.dtype) {
    case DType::kFloat32: return reinterpret_cast<const float*>(b.bytes.data())[i];
    case DType::kFloat64: return reinterpret_cast<const double*>(b.bytes.data())[i];
    case DType::kFloat16: return kiln::HalfToFloat(reinterpret_cast<const uint16_t*>(b.bytes.data())[i]);
    case DType::kInt64: return static_cast<double>(reinterpret_cast<const int64_t*>(b.bytes.data())[i]);
    case DType::kInt32: return reinterpret_cast<const int32_t*>(b.bytes.data())[i];
    case DType::kBool:
    case DType::kUInt8: return b.bytes[i];
    case DType::kInt8: return static_cast<int8_t>(b.bytes[i]);
    default: return 0;
  }
}

// An integer at its dtype's limit: what a float outside the integer range converts to
// (saturating in fused programs, INT_MIN on x86 in C++), which ONNX leaves undefined.
bool AtIntegerLimit(DType dtype, double v) {
  switch (dtype) {
    case DType::kInt32: return std::fabs(v) >= 2147483647.0;
    case DType::kInt64: return std::fabs(v) >= 9.2233720368547e18;
    default: return false;
  }
}

// One unit in the last place of float16 at `r` (normal or subnormal).
double HalfUlp(double r) {
  const double a = std::fabs(r);
  return a < 6.103515625e-05 ? std::ldexp(1.0, -24) : std::ldexp(1.0, std::ilogb(a) - 10);
}

// Counts elements outside the tolerance; reports the first. A float16 result may also be one
// float16 ulp off: each path computes in float32 and rounds once to float16, and float32 results
// that differ in their last bits (the host compiler's FMA contraction, another order) round to
// neighbouring halves when they straddle a rounding boundary (tests/README.md, "Conditioning").
int64_t Mismatches(const Buffer& got, const Buffer& ref, const std::string& what) {
  const bool is_float = ref.dtype == DType::kFloat32 || ref.dtype == DType::kFloat64 || ref.dtype == DType::kFloat16;
  const bool half = ref.dtype == DType::kFloat16;
  int64_t bad = 0;
  for (int64_t i = 0; i < ref.count(); ++i) {
    const double g = At(got, i), r = At(ref, i);
    const bool ok = std::isnan(r) ? std::isnan(g)
                    : is_float    ? g == r || std::fabs(g - r) <= 1e-5 + 1e-4 * std::fabs(r) ||
                                     (half && std::fabs(g - r) <= HalfUlp(r))
                                  : g == r || (AtIntegerLimit(ref.dtype, g) && AtIntegerLimit(ref.dtype, r));
    if (!ok && bad++ == 0) MESSAGE(what << ": element " << i << " is " << g << ", the reference " << r);
  }
  return bad;
}

struct ModelTrace {
  kiln::ir::Trace folded;  // after epilogue folding: what FusedKernel::member_nodes index
  kiln::ir::Trace fused;
  Bindings bindings;
};

// Imports and fuses a model folder with its test-set-0 shapes bound. With `bind_constants`
// (ONNX node cases), an input that Kiln needs at compile time is bound to its test-set-0
// value; a case that still does not canonicalise returns nullopt.
std::optional<ModelTrace> PrepareModel(const std::string& dir, bool bind_constants) {
  kiln::onnx_import::ImportOptions options;
  for (;;) {
    auto imported = kiln::onnx_import::ImportOnnxFile(dir + "/model.onnx", options);
    REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
    kiln::passes::MarkValueInputs(*imported);  // as the compiler does
    std::vector<std::string> names;
    for (kiln::ir::ValueId id : imported->inputs) names.push_back(imported->value(id).name);
    std::vector<kiln::io::HostTensor> inputs;
    if (bind_constants) {  // node cases: input_N.pb by graph position, bound ones included
      auto model = kiln::onnx_import::ImportOnnxFile(dir + "/model.onnx", {});
      REQUIRE(model.ok());
      for (size_t k = 0; k < model->inputs.size(); ++k) {
        auto t = kiln::io::ReadTensorProtoFile(dir + "/test_data_set_0/input_" + std::to_string(k) + ".pb");
        REQUIRE_MESSAGE(t.ok(), t.status().ToString());
        t->name = model->value(model->inputs[k]).name;
        inputs.push_back(std::move(*t));
      }
    } else {
      auto read = kiln::io::ReadInputDir(dir + "/test_data_set_0", names);
      REQUIRE_MESSAGE(read.ok(), read.status().ToString());
      inputs = std::move(*read);
    }
    ModelTrace m;
    for (const kiln::io::HostTensor& t : inputs) {
      auto at = std::find(names.begin(), names.end(), t.name);
      if (at == names.end()) continue;  // bound to a constant
      const kiln::ir::Value& v = imported->value(imported->inputs[at - names.begin()]);
      const kiln::ir::SymShape& shape = v.shape;
      for (size_t d = 0; d < shape.size() && d < t.dims.size(); ++d)
        if (shape[d].op() == kiln::ir::SymOp::kVar) m.bindings.emplace_back(shape[d].name(), t.dims[d]);
      // A value input's symbols are bound from its elements, as the prologue binds them.
      for (size_t k = 0; v.sym && k < v.sym->size() && k < static_cast<size_t>(t.num_elements()); ++k) {
        if ((*v.sym)[k].op() != kiln::ir::SymOp::kVar) continue;
        int64_t e = 0;
        if (t.dtype == kiln::DType::kInt32) {
          int32_t e32 = 0;
          std::memcpy(&e32, t.bytes.data() + 4 * k, 4);
          e = e32;
        } else {
          std::memcpy(&e, t.bytes.data() + 8 * k, 8);
        }
        m.bindings.emplace_back((*v.sym)[k].name(), e);
      }
    }
    // Shape-dependent Ifs are decided by the test-set shapes, as the runtime's entries are.
    std::vector<kiln::passes::Assumption> assumptions;
    bool rebind = false;
    while (true) {
      auto canonical = kiln::passes::Canonicalize(*imported, assumptions);
      if (!canonical.ok() && bind_constants) {
        const std::string msg(canonical.status().message());
        const size_t end = msg.find(") is not known at compile time");
        const size_t open = end == std::string::npos ? end : msg.rfind('(', end);
        const std::string name = open == std::string::npos ? "" : msg.substr(open + 1, end - open - 1);
        auto t = std::find_if(inputs.begin(), inputs.end(), [&](const auto& x) { return x.name == name; });
        if (t == inputs.end() || options.constant_inputs.count(name)) return std::nullopt;
        auto data = std::make_shared<kiln::ir::ConstData>();
        data->dtype = t->dtype;
        data->dims = t->dims;
        data->bytes = t->bytes;
        options.constant_inputs[name] = std::move(data);
        rebind = true;
        break;
      }
      REQUIRE_MESSAGE(canonical.ok(), canonical.status().ToString());
      if (canonical->undecided_condition) {
        const auto v = canonical->undecided_condition->Eval(m.bindings);
        REQUIRE(v.has_value());
        assumptions.push_back({*canonical->undecided_condition, *v != 0});
        continue;
      }
      auto fused = kiln::compiler::FusionStage(canonical->trace, nullptr, nullptr, &m.folded);
      REQUIRE_MESSAGE(fused.ok(), fused.status().ToString());
      m.fused = std::move(*fused);
      // Run-time dims (NonZero's count) take their bounds: the kernels run on random inputs.
      // A room (a while loop's rows) takes the value a context starts it at.
      for (const kiln::ir::RuntimeDim& d : m.fused.runtime_dims) {
        if (d.initial_room > 0) m.bindings.emplace_back(d.bound.name(), d.initial_room);
        const auto bound = d.bound.Eval(m.bindings);
        REQUIRE_MESSAGE(bound.has_value(), "run-time dim " << d.symbol << " has no bound for the test-set shapes");
        m.bindings.emplace_back(d.symbol, *bound);
      }
      return m;
    }
    if (!rebind) return std::nullopt;
  }
}

// Runs the region's original ops with the CPU backend; returns the root's buffer, or the
// error of an op that rejects the inputs.
kiln::Result<Buffer> RunMembers(const ModelTrace& m, const kiln::ir::Node& node, std::map<kiln::ir::ValueId, Buffer> values) {
  for (int index : node.fused->member_nodes) {
    const kiln::ir::Node& op = m.folded.body.nodes[index];
    std::vector<kiln::cpu::TensorRef> ins, outs;
    for (kiln::ir::ValueId in : op.inputs) {
      if (in == kiln::ir::kNoValue) {
        ins.push_back({});
        continue;
      }
      auto it = values.find(in);
      if (it == values.end()) {
        std::mt19937 unused;
        it = values.emplace(in, InputFor(m.folded.value(in), m.bindings, unused)).first;  // a const or Sym value
      }
      ins.push_back(it->second.ref());
    }
    for (kiln::ir::ValueId out : op.outputs) {
      if (out == kiln::ir::kNoValue) {
        outs.push_back({});
        continue;
      }
      values[out] = AllocateBuffer(m.folded.value(out), m.bindings);
      outs.push_back(values[out].ref());
    }
    const kiln::cpu::KernelDef* k = kiln::cpu::FindKernel(op.op);
    REQUIRE_MESSAGE(k != nullptr, op.op);
    std::vector<uint8_t> workspace(kiln::cpu::KernelWorkspaceBytes(*k, op.attrs, ins, outs));
    kiln::cpu::KernelCall call{op.attrs, ins, outs, workspace.data(), workspace.size()};
    KILN_RETURN_IF_ERROR_CTX(kiln::cpu::RunKernel(*k, call), op.name + " (" + op.op + ")");
  }
  return values.at(node.outputs[0]);
}

#if KILN_HAVE_LLVM
// One CPU target's native code for the kernels, mapped by the runtime's own mapping.
struct MappedNative {
  std::string target;
  std::unique_ptr<kiln::native::NativeImage> image;
};

MappedNative MapNative(const kiln::codegen::cpu::NativeImage& image, size_t num_kernels) {
  std::vector<std::pair<uint32_t, uint32_t>> functions;
  for (size_t k = 0; k < image.kernels.size(); ++k) functions.emplace_back(image.kernels[k], image.offsets[k]);
  std::string refused;
  auto mapped = kiln::native::NativeImage::Map(image.code.data(), image.code.size(), functions,
                                               static_cast<uint32_t>(num_kernels), &refused);
  REQUIRE_MESSAGE(mapped.ok(), mapped.status().ToString());
  REQUIRE_MESSAGE(*mapped != nullptr, refused);
  return {image.target, std::move(*mapped)};
}

// The work items of a program (abi.h): elements without reduced axes, rows with them.
int64_t WorkItems(const kiln::fused::Program& p, const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (size_t a = 0; a < p.domain.size(); ++a) {
    if ((p.reduce_axes >> a) & 1u) continue;
    n *= p.domain[a] >= 0 ? p.domain[a] : sizes[-(p.domain[a] + 1)];
  }
  return n;
}

// Runs a kernel's native code over its work items in two calls (the first third, the rest), as
// two threads would.
kiln::Status RunNative(kiln::native::KernelFn fn, const kiln::fused::Program& p,
                       const std::vector<kiln::cpu::TensorRef>& ins, kiln::cpu::TensorRef out,
                       const std::vector<int64_t>& sizes) {
  std::vector<const void*> in_ptrs;
  for (const kiln::cpu::TensorRef& t : ins) in_ptrs.push_back(t.data);
  void* out_ptrs[] = {out.data};
  int64_t failed[3] = {0, 0, 0};
  const int64_t items = WorkItems(p, sizes);
  const int64_t cut = items / 3;
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, cut}, {cut, items}}) {
    if (begin == end) continue;
    const kiln::native::KernelArgs args{in_ptrs.data(), out_ptrs, sizes.data(), begin, end, failed};
    if (fn(&args) != 0) {
      return kiln::InvalidArgument("native code: " + p.checks.at(failed[0]) + ": " +
                                   kiln::fused::IndexOutOfRange(failed[1], failed[2]));
    }
  }
  return kiln::Status::Ok();
}
#endif

}  // namespace

TEST_CASE("fused kernels of the real models and ONNX node cases: host-compiled CUDA == interpreted program == unfused ops") {
  std::vector<std::pair<std::string, bool>> dirs;  // (folder, is an ONNX node case)
  for (const std::string& d : kiln::testing::ModelDirs()) dirs.emplace_back(d, false);
  for (const std::string& d : NodeCaseDirs()) dirs.emplace_back(d, true);
  if (dirs.empty()) {
    MESSAGE("skipped: no model folders in " << KILN_TEST_DATA_DIR << " or $KILN_MODEL_DIRS (run scripts/test.sh)");
    return;
  }
  // Every fused node of every model, then one host build per batch of distinct kernels.
  struct Check {
    const ModelTrace* model;
    const kiln::ir::Node* node;
    size_t kernel;  // index into `kernels`
    std::string dir;
  };
  std::vector<std::unique_ptr<ModelTrace>> models;
  std::vector<kiln::codegen::EmittedKernel> kernels;
  std::map<std::string, size_t> kernel_index;
  std::vector<Check> checks;
  int skipped_cases = 0;
  for (const auto& dir_case : dirs) {
    const auto& dir = dir_case.first;
    const auto& node_case = dir_case.second;
    CAPTURE(dir);
    std::optional<ModelTrace> m = PrepareModel(dir, node_case);
    if (!m) {
      ++skipped_cases;
      continue;
    }
    models.push_back(std::make_unique<ModelTrace>(std::move(*m)));
    for (const kiln::ir::Node& n : models.back()->fused.body.nodes) {
      if (!n.fused) continue;
      auto k = kiln::codegen::EmitCuda(n.fused->program);
      REQUIRE_MESSAGE(k.ok(), n.name << ": " << k.status().ToString());
      auto [it, added] = kernel_index.emplace(k->name, kernels.size());
      if (added) kernels.push_back(std::move(*k));
      checks.push_back({models.back().get(), &n, it->second, dir});
    }
  }
  constexpr size_t kBatch = 250;  // kernels per host compile
  kiln::testing::TempDir tmp;
  std::vector<std::unique_ptr<kiln::testing::HostKernels>> libs;
  for (size_t b = 0; b < kernels.size(); b += kBatch) {
    const std::vector<kiln::codegen::EmittedKernel> batch(kernels.begin() + b,
                                                          kernels.begin() + std::min(kernels.size(), b + kBatch));
    const fs::path dir = tmp.path / std::to_string(b);
    fs::create_directories(dir);
    auto lib = kiln::testing::HostKernels::Build(batch, dir.string());
    REQUIRE_MESSAGE(lib.ok(), lib.status().ToString());
    libs.push_back(std::move(*lib));
  }
#if KILN_HAVE_LLVM
  // Native code for every CPU target this CPU runs (runtime/cpu/native/abi.h), one image each.
  std::vector<const kiln::fused::Program*> programs(kernels.size(), nullptr);
  for (const Check& c : checks) programs[c.kernel] = &c.node->fused->program;
  std::vector<MappedNative> natives;
  for (const auto& target : kiln::codegen::cpu::AllCpuTargets()) {
    const std::string name = target.name;
#if defined(__x86_64__)
    const kiln::cpu::CpuIsa isa = kiln::cpu::ActiveCpuIsa();
    const bool runs = name == "x86-64" || (name == "x86-64-v3" && isa >= kiln::cpu::CpuIsa::kAvx2Fma) ||
                      (name == "x86-64-v4" && isa >= kiln::cpu::CpuIsa::kAvx512);
#else
    const bool runs = name == "aarch64";
#endif
    std::vector<kiln::codegen::cpu::NativeSkip> skipped;
    bool cached = false;
    auto image = kiln::codegen::cpu::CompileNativeImage(programs, target, kiln::codegen::KernelCache("", true),
                                                        &skipped, &cached);
    REQUIRE_MESSAGE(image.ok(), image.status().ToString());
    std::map<std::string, int> reasons;
    for (const auto& skip : skipped) reasons[skip.reason.substr(skip.reason.find(':') + 1)]++;
    MESSAGE("native code for " << name << ": " << image->kernels.size() << " of " << kernels.size()
                               << " kernels, " << image->code.size() << " bytes");
    for (const auto& [reason, count] : reasons) MESSAGE("  " << count << " interpreted:" << reason);
    CHECK(image->kernels.size() * 2 > kernels.size());  // most kernels have native code on every target
    // A target this CPU cannot run is compiled and linked all the same: the link refuses a call
    // into a library or a relocation the runtime could not resolve.
    if (runs) natives.push_back(MapNative(*image, kernels.size()));
  }
  int64_t native_checked = 0;
#endif
  int64_t checked = 0;
  std::set<std::string> unfused_gaps;
  for (const Check& c : checks) {
    const ModelTrace& m = *c.model;
    const kiln::ir::Node& n = *c.node;
    CAPTURE(c.dir);
    CAPTURE(n.name);
    std::map<kiln::ir::ValueId, Buffer> values;
    std::vector<kiln::cpu::TensorRef> ins;
    // Each check's inputs come from its own seed (model folder and node), so that adding a model
    // or a node case changes no other check's inputs; the folder by its name, not its path, so
    // that every checkout draws the same inputs (a sum's cancellation once passed in one clone
    // and failed in another).
    const std::string key = std::filesystem::path(c.dir).filename().string() + "/" + n.name;
    std::seed_seq seed(key.begin(), key.end());
    std::mt19937 rng(seed);
    for (kiln::ir::ValueId in : n.inputs) values[in] = InputFor(m.fused.value(in), m.bindings, rng);
    for (kiln::ir::ValueId in : n.inputs) ins.push_back(values[in].ref());
    std::vector<int64_t> sizes;
    for (const kiln::ir::Sym& s : n.fused->sizes) sizes.push_back(s.Eval(m.bindings).value_or(-1));
    Buffer interpreted = AllocateBuffer(m.fused.value(n.outputs[0]), m.bindings);
    Buffer host = interpreted;
    kiln::cpu::TensorRef out_i[] = {interpreted.ref()}, out_h[] = {host.ref()};
    std::vector<uint8_t> ws(kiln::cpu::FusedWorkspaceBytes(n.fused->program));
    kiln::Status st = kiln::cpu::RunFused(n.fused->program, ins, out_i, sizes, ws.data(), ws.size());
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    for (kiln::cpu::CpuIsa isa : {kiln::cpu::CpuIsa::kBaseline, kiln::cpu::CpuIsa::kAvx2Fma}) {
      if (isa >= kiln::cpu::ActiveCpuIsa()) break;  // the other builds below the active one: the same bytes
      Buffer other = interpreted;
      kiln::cpu::TensorRef out_o[] = {other.ref()};
      st = kiln::cpu::RunFused(n.fused->program, ins, out_o, sizes, ws.data(), ws.size(), nullptr, isa);
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      CHECK_MESSAGE(other.bytes == interpreted.bytes, "the " << kiln::cpu::CpuIsaName(isa) << " and "
                                                            << kiln::cpu::CpuIsaName(kiln::cpu::ActiveCpuIsa())
                                                            << " interpreters' bytes differ");
    }
    st = kiln::testing::RunHostKernel(*libs[c.kernel / kBatch], kernels[c.kernel], n.fused->program, ins, out_h, sizes);
    REQUIRE_MESSAGE(st.ok(), st.ToString());
#if KILN_HAVE_LLVM
    for (const MappedNative& native : natives) {
      const kiln::native::KernelFn fn = native.image->kernel(static_cast<uint32_t>(c.kernel));
      if (fn == nullptr) continue;
      Buffer got = interpreted;
      std::fill(got.bytes.begin(), got.bytes.end(), 0xA5);
      st = RunNative(fn, n.fused->program, ins, got.ref(), sizes);
      REQUIRE_MESSAGE(st.ok(), native.target << ": " << st.ToString());
      CHECK(Mismatches(got, interpreted, "native code (" + native.target + ") vs interpreted program") == 0);
      ++native_checked;
    }
#endif
    kiln::Result<Buffer> reference = RunMembers(m, n, values);
    if (!reference.ok() && reference.status().code() == kiln::StatusCode::kInvalidArgument) {
      // An unfused CPU kernel refuses what the fused program does (a dtype it lacks, such
      // as float16 Softmax): compare the two fused forms with each other, and list the gap.
      unfused_gaps.insert(reference.status().ToString());
      CHECK(Mismatches(host, interpreted, "host-compiled kernel vs interpreted program") == 0);
      ++checked;
      continue;
    }
    REQUIRE_MESSAGE(reference.ok(), reference.status().ToString());
    CHECK(Mismatches(interpreted, *reference, "interpreted program vs unfused ops") == 0);
    CHECK(Mismatches(host, *reference, "host-compiled kernel vs unfused ops") == 0);
    ++checked;
  }
  MESSAGE(checked << " fused kernels checked (" << kernels.size() << " distinct) in " << models.size()
                  << " models and node cases; " << skipped_cases << " node cases not canonicalised here");
#if KILN_HAVE_LLVM
  MESSAGE(native_checked << " native kernel runs checked against the interpreter");
#endif
  for (const std::string& gap : unfused_gaps) MESSAGE("unfused CPU kernel gap: " << gap);
  CHECK(checked > 0);
}
