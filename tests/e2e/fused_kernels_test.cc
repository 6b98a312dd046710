// Every generated kernel of the real models, checked three ways on the host: the emitted
// CUDA source compiled as host C++ through the shim (compiler/codegen/host_shim.h), the
// portable program run by the CPU interpreter, and the region's original ops run one by
// one by the CPU backend. Inputs are random (weights are the model's own), with symbolic
// dims bound to the shapes of the model's first test set.
//
// Models: every folder of KILN_TEST_DATA_DIR (made by tests/e2e/make_package_testdata.py),
// plus every folder under each path in $KILN_MODEL_DIRS (':'-separated; .ci/run adds
// ../shared/models). The test is skipped when there are none.
//
// Tolerance: |x - ref| <= 1e-5 + 1e-4 * |ref| for floats (the three evaluate the same
// float32 math in different orders; the unfused normalisation kernels accumulate
// statistics in double, the fused ones in float32, and a fused Softplus uses
// log(1 + exp(-|x|)) where the kernel uses log1p), integers and bools exactly, and NaN
// where the reference has NaN.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "compiler/codegen/cuda_source.h"
#include "compiler/compile.h"
#include "compiler/io/tensor_io.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/canonicalize.h"
#include "runtime/cpu/fused.h"
#include "runtime/half.h"
#include "tests/compiler/codegen/host_shim_harness.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;
using kiln::DType;

std::vector<std::string> ModelDirs() {
  std::vector<std::string> parents = {KILN_TEST_DATA_DIR};
  if (const char* extra = std::getenv("KILN_MODEL_DIRS")) {
    std::string s = extra;
    for (size_t pos = 0; pos <= s.size();) {
      size_t colon = s.find(':', pos);
      std::string p = s.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos);
      if (!p.empty()) parents.push_back(p);
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
  }
  std::vector<std::string> dirs;
  for (const std::string& parent : parents) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(parent, ec))
      if (fs::exists(e.path() / "model.onnx") && fs::exists(e.path() / "test_data_set_0")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
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

Buffer Allocate(const kiln::ir::Value& v, const Bindings& b) {
  Buffer buf;
  buf.dtype = v.dtype;
  buf.dims = Dims(v.shape, b);
  buf.bytes.assign(static_cast<size_t>(buf.count()) * kiln::DTypeSize(v.dtype) + 1, 0);
  return buf;
}

// The value's data: its constant, its Sym elements, or random numbers.
Buffer InputFor(const kiln::ir::Value& v, const Bindings& b, std::mt19937& rng) {
  Buffer buf = Allocate(v, b);
  if (v.is_const()) {
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

// Counts elements outside the tolerance; reports the first.
int64_t Mismatches(const Buffer& got, const Buffer& ref, const std::string& what) {
  const bool is_float = ref.dtype == DType::kFloat32 || ref.dtype == DType::kFloat64 || ref.dtype == DType::kFloat16;
  int64_t bad = 0;
  for (int64_t i = 0; i < ref.count(); ++i) {
    const double g = At(got, i), r = At(ref, i);
    const bool ok = std::isnan(r) ? std::isnan(g)
                    : is_float    ? std::fabs(g - r) <= 1e-5 + 1e-4 * std::fabs(r)
                                  : g == r;
    if (!ok && bad++ == 0) MESSAGE(what << ": element " << i << " is " << g << ", the reference " << r);
  }
  return bad;
}

struct ModelTrace {
  kiln::ir::Trace folded;  // after epilogue folding: what FusedKernel::member_nodes index
  kiln::ir::Trace fused;
  Bindings bindings;
};

ModelTrace Prepare(const std::string& dir) {
  auto imported = kiln::onnx_import::ImportOnnxFile(dir + "/model.onnx", {});
  REQUIRE_MESSAGE(imported.ok(), imported.status().ToString());
  std::vector<std::string> names;
  for (kiln::ir::ValueId id : imported->inputs) names.push_back(imported->value(id).name);
  auto inputs = kiln::io::ReadInputDir(dir + "/test_data_set_0", names);
  REQUIRE_MESSAGE(inputs.ok(), inputs.status().ToString());
  ModelTrace m;
  for (size_t i = 0; i < names.size(); ++i) {
    const kiln::ir::SymShape& shape = imported->value(imported->inputs[i]).shape;
    for (size_t d = 0; d < shape.size() && d < (*inputs)[i].dims.size(); ++d)
      if (shape[d].op() == kiln::ir::SymOp::kVar) m.bindings.emplace_back(shape[d].name(), (*inputs)[i].dims[d]);
  }
  // Shape-dependent Ifs are decided by the test-set shapes, as the runtime's entries are.
  std::vector<kiln::passes::Assumption> assumptions;
  while (true) {
    auto canonical = kiln::passes::Canonicalize(*imported, assumptions);
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
    return m;
  }
}

// Runs the region's original ops with the CPU backend; returns the root's buffer.
Buffer RunMembers(const ModelTrace& m, const kiln::ir::Node& node, std::map<kiln::ir::ValueId, Buffer> values) {
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
      values[out] = Allocate(m.folded.value(out), m.bindings);
      outs.push_back(values[out].ref());
    }
    const kiln::cpu::KernelDef* k = kiln::cpu::FindKernel(op.op);
    REQUIRE_MESSAGE(k != nullptr, op.op);
    std::vector<uint8_t> workspace(k->workspace ? k->workspace(op.attrs, ins, outs) : 0);
    kiln::cpu::KernelCall call{op.attrs, ins, outs, workspace.data(), workspace.size()};
    kiln::Status st = k->run(call);
    REQUIRE_MESSAGE(st.ok(), op.name << " (" << op.op << "): " << st.ToString());
  }
  return values.at(node.outputs[0]);
}

}  // namespace

TEST_CASE("fused kernels of the real models: host-compiled CUDA == interpreted program == unfused ops") {
  const std::vector<std::string> dirs = ModelDirs();
  if (dirs.empty()) {
    MESSAGE("skipped: no model folders in " << KILN_TEST_DATA_DIR << " or $KILN_MODEL_DIRS (run scripts/test.sh)");
    return;
  }
  int64_t checked = 0;
  for (const std::string& dir : dirs) {
    CAPTURE(dir);
    ModelTrace m = Prepare(dir);
    std::vector<const kiln::ir::Node*> nodes;
    std::vector<kiln::codegen::EmittedKernel> kernels;
    for (const kiln::ir::Node& n : m.fused.body.nodes) {
      if (!n.fused) continue;
      auto k = kiln::codegen::EmitCuda(n.fused->program);
      REQUIRE_MESSAGE(k.ok(), n.name << ": " << k.status().ToString());
      nodes.push_back(&n);
      kernels.push_back(std::move(*k));
    }
    if (kernels.empty()) continue;
    kiln::testing::TempDir tmp;
    auto lib = kiln::testing::HostKernels::Build(kernels, tmp.path.string());
    REQUIRE_MESSAGE(lib.ok(), lib.status().ToString());
    std::mt19937 rng(12345);
    for (size_t k = 0; k < nodes.size(); ++k) {
      const kiln::ir::Node& n = *nodes[k];
      CAPTURE(n.name);
      std::map<kiln::ir::ValueId, Buffer> values;
      std::vector<kiln::cpu::TensorRef> ins;
      for (kiln::ir::ValueId in : n.inputs) values[in] = InputFor(m.fused.value(in), m.bindings, rng);
      for (kiln::ir::ValueId in : n.inputs) ins.push_back(values[in].ref());
      std::vector<int64_t> sizes;
      for (const kiln::ir::Sym& s : n.fused->sizes) sizes.push_back(s.Eval(m.bindings).value_or(-1));
      Buffer interpreted = Allocate(m.fused.value(n.outputs[0]), m.bindings);
      Buffer host = interpreted;
      kiln::cpu::TensorRef out_i[] = {interpreted.ref()}, out_h[] = {host.ref()};
      std::vector<uint8_t> ws(kiln::cpu::FusedWorkspaceBytes(n.fused->program));
      kiln::Status st = kiln::cpu::RunFused(n.fused->program, ins, out_i, sizes, ws.data(), ws.size());
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      st = kiln::testing::RunHostKernel(**lib, kernels[k], n.fused->program, ins, out_h, sizes);
      REQUIRE_MESSAGE(st.ok(), st.ToString());
      Buffer reference = RunMembers(m, n, values);
      CHECK(Mismatches(interpreted, reference, "interpreted program vs unfused ops") == 0);
      CHECK(Mismatches(host, reference, "host-compiled kernel vs unfused ops") == 0);
      ++checked;
    }
  }
  MESSAGE(checked << " fused kernels checked");
  CHECK(checked > 0);
}
