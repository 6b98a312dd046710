// kiln_conformance: ONNX's backend node test suite through Kiln. Each case folder
// (`model.onnx`, `test_data_set_K/input_N.pb`, `output_N.pb`) is compiled with the real
// driver (CPU-only artifact), run on the CPU backend, and compared with the stored outputs.
//
//   kiln_conformance --data build/onnx-tests/node [--expected tests/conformance/expected_pass.txt]
//                    [--json out.json] [--markdown out.md] [--filter SUBSTRING] [--jobs N]
//                    [--device cpu|cuda] [--arch sm_90,compute_90,...] [--known-failures FILE]
//
// --device cuda runs every case on the CUDA backend (artifacts then carry sm_80..sm_90 cubins
// and PTX, compiled with NVRTC and its cache, or the archs --arch lists); a context that cannot
// be made is that case's failure. Each output must then also match the CPU backend's on the
// same artifact (the same tolerance), and the per-op table counts the passing cases in which
// an instruction of the case's op ran on the CPU backend (labelled @cpu by the compiler, or a
// library fallback the runtime reported in Stats::last_fallbacks), with the reason.
// --known-failures FILE lists cases ("name  reason" per line, # comments) that are expected
// not to pass on this device although --expected lists them: each is reported with its
// reason instead of as a regression, and one that passes is reported so it can be removed.
// scripts/gpu-check runs it so on a GPU machine and on the emulated CUDA device.
//
// Each case runs in a child process (a crash or a hang is that case's failure, not the
// runner's) and ends as one of:
//   pass          every output of every test set matches (same dtype and shape; values with
//                 |got - want| <= atol + rtol * |want|, atol 1e-7, rtol 1e-3 as ONNX's own
//                 backend test; NaN where NaN is expected; integers and bools exactly)
//   fail          a compile error other than kUnimplemented, a run error, a mismatch, a crash
//   unsupported   the compiler says kUnimplemented: valid ONNX that Kiln does not support
//   out of scope  string, sequence, optional, map, complex, float8, int4 and float4 types; the
//                 ai.onnx.ml and training domains; random ops; training losses
//                 (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and ImageDecoder
//                 (decided before compiling, from the model's types and nodes)
// Prints one line per case that is not a pass, a per-op table, and totals. With --expected,
// exits 1 when a listed case does not pass (a regression) and lists cases that pass but are
// not listed (the list can be raised); else exits 0. A listed case must pass as it comes (no
// value profile, no input bound) unless its line says `# value profile`: one that then needs a
// profile is a regression too, and a marked one that passes as it comes is reported so the
// marker can go.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <list>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "compiler/compile.h"
#include "compiler/fusion/rules.h"
#include "compiler/passes/value_inputs.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "onnx/onnx_pb.h"
#include "runtime/half.h"
#include "runtime/shape_text.h"
#include "tests/native_target.h"

namespace {

namespace fs = std::filesystem;

constexpr double kAtol = 1e-7, kRtol = 1e-3;
constexpr int kCaseTimeoutSeconds = 120;

enum class Outcome { kPass, kFail, kUnsupported, kOutOfScope };

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kPass: return "pass";
    case Outcome::kFail: return "fail";
    case Outcome::kUnsupported: return "unsupported";
    case Outcome::kOutOfScope: return "out of scope";
  }
  return "?";
}

struct CaseResult {
  std::string name;
  std::string op;
  Outcome outcome = Outcome::kFail;
  std::string detail;
  // --device cuda: why instructions of the case's op ran on the CPU backend ("" if none did).
  std::string cpu_reason;
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  return s;
}

bool IsOutOfScopeElemType(int32_t t) {
  return t == onnx::TensorProto::STRING || t == onnx::TensorProto::COMPLEX64 || t == onnx::TensorProto::COMPLEX128 ||
         t >= 17;  // FLOAT8E4M3FN and later: float8, int4/uint4, float4 (newer than Debian's onnx.proto)
}

// Why a type is out of scope, or "".
std::string TypeScope(const onnx::TypeProto& t) {
  if (t.has_sequence_type()) return "sequence type";
  if (t.has_optional_type()) return "optional type";
  if (t.has_map_type()) return "map type";
  if (t.has_sparse_tensor_type()) return "sparse tensor type";
  if (t.has_tensor_type() && IsOutOfScopeElemType(t.tensor_type().elem_type()))
    return fmt::format("element type {}", t.tensor_type().elem_type());
  return "";
}

std::string GraphScope(const onnx::GraphProto& g) {
  static const std::set<std::string> kRandom = {"RandomNormal", "RandomNormalLike", "RandomUniform",
                                                "RandomUniformLike", "Bernoulli", "Multinomial"};
  static const std::set<std::string> kStringOps = {"StringNormalizer", "StringConcat", "StringSplit", "RegexFullMatch",
                                                   "TfIdfVectorizer"};
  // Ops on sequence values (ReverseSequence, despite its name, is a tensor op: in scope).
  static const std::set<std::string> kSequenceOps = {"SequenceConstruct", "SequenceEmpty", "SequenceAt",
                                                     "SequenceInsert", "SequenceErase", "SequenceLength",
                                                     "SequenceMap", "SplitToSequence", "ConcatFromSequence"};
  // Training losses (no inference model computes one) and media decoding (a codec's job).
  static const std::set<std::string> kNotInference = {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
                                                      "ImageDecoder"};
  for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
    for (const onnx::ValueInfoProto& v : *list)
      if (std::string why = TypeScope(v.type()); !why.empty()) return why + " ('" + v.name() + "')";
  for (const onnx::TensorProto& t : g.initializer())
    if (IsOutOfScopeElemType(t.data_type())) return "initializer element type";
  for (const onnx::NodeProto& n : g.node()) {
    const std::string& d = n.domain();
    if (!d.empty() && d != "ai.onnx") return "domain " + d;
    if (kRandom.count(n.op_type())) return "random op " + n.op_type();
    if (kStringOps.count(n.op_type())) return "string op " + n.op_type();
    if (kNotInference.count(n.op_type())) return "not an inference op: " + n.op_type();
    if (kSequenceOps.count(n.op_type()) || n.op_type().rfind("Optional", 0) == 0)
      return "sequence/optional op " + n.op_type();
    for (const onnx::AttributeProto& a : n.attribute()) {
      if ((a.name() == "to" || a.name() == "output_dtype" || a.name() == "dtype") && a.type() == onnx::AttributeProto::INT &&
          IsOutOfScopeElemType(static_cast<int32_t>(a.i())))
        return n.op_type() + " to element type " + std::to_string(a.i());
      if (a.type() == onnx::AttributeProto::TENSOR && IsOutOfScopeElemType(a.t().data_type()))
        return n.op_type() + " attribute of an out-of-scope element type";
      if (a.type() == onnx::AttributeProto::GRAPH)
        if (std::string why = GraphScope(a.g()); !why.empty()) return why;
    }
  }
  return "";
}

// The op a case tests: the node whose op name prefixes the case name (test_reduce_sum_... ->
// ReduceSum), else the first node's.
std::string CaseOp(const onnx::GraphProto& g, const std::string& case_name) {
  std::string name = case_name.rfind("test_", 0) == 0 ? case_name.substr(5) : case_name;
  const std::string key = Lower(name);
  std::string best;
  for (const onnx::NodeProto& n : g.node()) {
    const std::string op = Lower(n.op_type());
    if (key.rfind(op, 0) == 0 && op.size() > Lower(best).size()) best = n.op_type();
  }
  if (best.empty() && g.node_size() > 0) best = g.node(0).op_type();
  return best;
}

double ElementAt(const kiln::io::HostTensor& t, int64_t i) {
  const uint8_t* p = t.bytes.data();
  switch (t.dtype) {
    case kiln::DType::kFloat32: { float v; std::memcpy(&v, p + i * 4, 4); return v; }
    case kiln::DType::kFloat64: { double v; std::memcpy(&v, p + i * 8, 8); return v; }
    case kiln::DType::kFloat16: { uint16_t v; std::memcpy(&v, p + i * 2, 2); return kiln::HalfToFloat(v); }
    case kiln::DType::kBFloat16: { uint16_t v; std::memcpy(&v, p + i * 2, 2); return kiln::BF16ToFloat(v); }
    default: return 0;
  }
}

bool IsFloat(kiln::DType d) {
  return d == kiln::DType::kFloat32 || d == kiln::DType::kFloat64 || d == kiln::DType::kFloat16 ||
         d == kiln::DType::kBFloat16;
}

// "" when `got` matches `want`, else what differs.
std::string Compare(const kiln::io::HostTensor& want, const kiln::TensorView& got_view, size_t k) {
  const kiln::io::HostTensor got = kiln::io::HostTensor::FromView("", got_view);
  if (got.dtype != want.dtype)
    return fmt::format("output {}: dtype {}, expected {}", k, kiln::DTypeName(got.dtype), kiln::DTypeName(want.dtype));
  if (got.dims != want.dims)
    return fmt::format("output {}: shape {}, expected {}", k, kiln::ShapeText(got.dims), kiln::ShapeText(want.dims));
  if (!IsFloat(want.dtype)) {
    if (got.bytes != want.bytes) {
      const size_t e = kiln::DTypeSize(want.dtype);
      size_t i = 0;
      while (i < got.bytes.size() && got.bytes[i] == want.bytes[i]) ++i;
      return fmt::format("output {}: element {} differs (integers and bools compare exactly)", k, i / e);
    }
    return "";
  }
  const int64_t n = want.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    const double g = ElementAt(got, i), w = ElementAt(want, i);
    if (std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= kAtol + kRtol * std::fabs(w)) continue;
    if (std::isinf(w) && g == w) continue;
    return fmt::format("output {}: element {} = {}, expected {}", k, i, g, w);
  }
  return "";
}

kiln::Device g_device = kiln::Device::kCpu;
std::vector<std::string> g_archs;  // --arch; empty: the compiler's default for --device cuda

// Why instructions of `op` ran on the CPU backend in the last Run of a CUDA context: the
// compiler's reason for those it labels @cpu (the fusion rules' note), the runtime's for
// library ops it fell back from (Stats::last_fallbacks). "" when none did.
std::string CpuReason(const kiln::Model& model, const kiln::ExecutionContext& ctx, const std::string& op) {
  const int32_t e = ctx.stats().last_entry;
  if (e < 0) return "";
  const std::vector<kiln::InstructionInfo>& infos = model.entries()[static_cast<size_t>(e)].instructions;
  for (size_t i = 0; i < infos.size(); ++i) {
    if (infos[i].op != op) continue;
    if (infos[i].library("cuda") == kiln::Library::kCpuKernel) {
      const kiln::OpInfo* info = kiln::FindOpInfo(op);
      return info && info->fusion == kiln::FusionKind::kCpuOnly ? std::string(info->note)
                                                                : "no generated kernel for this instance";
    }
    for (const kiln::Stats::Fallback& f : ctx.stats().last_fallbacks)
      if (f.instruction == static_cast<int32_t>(i)) return f.reason;
  }
  return "";
}

CaseResult RunCase(const fs::path& dir, bool profile_inputs);

// A case whose inputs compiled as value symbols but whose run missed every entry (a value the
// entry's guards exclude, such as a ConstantOfShape dim of 0) runs again with value profiles
// for its small numeric inputs, as a user would add them.
CaseResult RunCaseOrProfiled(const fs::path& dir) {
  CaseResult r = RunCase(dir, false);
  if (r.outcome != Outcome::kFail || r.detail.find("run: INVALID_ARGUMENT: entry ") == std::string::npos) return r;
  CaseResult p = RunCase(dir, true);
  return p.outcome == Outcome::kPass ? p : r;
}

CaseResult RunCase(const fs::path& dir, bool profile_inputs) {
  CaseResult r;
  r.name = dir.filename().string();
  onnx::ModelProto m;
  {
    std::ifstream f(dir / "model.onnx", std::ios::binary);
    if (!m.ParseFromIstream(&f)) {
      r.detail = "model.onnx does not parse";
      return r;
    }
  }
  r.op = CaseOp(m.graph(), r.name);
  if (std::string why = GraphScope(m.graph()); !why.empty()) {
    r.outcome = Outcome::kOutOfScope;
    r.detail = why;
    return r;
  }
  // Inputs in graph order (initializers are not inputs), read from each test set by position.
  std::vector<std::string> graph_inputs;
  {
    std::set<std::string> inits;
    for (const onnx::TensorProto& t : m.graph().initializer()) inits.insert(t.name());
    for (const onnx::ValueInfoProto& v : m.graph().input())
      if (!inits.count(v.name())) graph_inputs.push_back(v.name());
  }
  auto read_set = [&](const fs::path& set) -> kiln::Result<std::map<std::string, kiln::io::HostTensor>> {
    std::map<std::string, kiln::io::HostTensor> by_name;
    for (size_t k = 0; k < graph_inputs.size(); ++k) {
      KILN_ASSIGN_OR_RETURN(kiln::io::HostTensor t,
                            kiln::io::ReadTensorProtoFile((set / ("input_" + std::to_string(k) + ".pb")).string()));
      by_name[graph_inputs[k]] = std::move(t);
    }
    return by_name;
  };
  auto first_set = read_set(dir / "test_data_set_0");
  if (!first_set.ok()) {
    r.detail = "test_data_set_0: " + first_set.status().ToString();
    return r;
  }

  // An input Kiln needs at compile time (a Reduce's axes, a Resize's sizes, fed as graph
  // inputs by the test) gets a value profile of test set 0's values, as
  // `kiln compile --profile 'axes=[1]'` does: the input stays in the signature and the entry's
  // prologue checks its values (floating-point ones, a Resize's scales, bit for bit). An input
  // a value profile cannot fix (over 64 elements) is bound to a constant instead, as
  // `--constant-input` does. When the value
  // is computed inside the graph, the small numeric inputs (at most 16 elements) get this
  // treatment. Such passes are reported with the inputs they fixed or bound. With
  // `profile_inputs`, every small numeric input gets a value profile from the start.
  kiln::compiler::CompileOptions options;
  if (g_device == kiln::Device::kCpu) options.archs.clear();  // CPU-only artifacts: no NVRTC
  else if (!g_archs.empty()) options.archs = g_archs;
  options.cpu_targets = kiln::testing::NativeTargetForThisCpu();  // native code for this CPU alone
  std::string bound;                  // inputs bound to constants
  std::vector<std::string> profiled;  // value profile groups, "axes=[1]"
  std::map<std::string, kiln::io::HostTensor> fixed;  // every input either way, with its value
  kiln::Result<std::vector<uint8_t>> bytes = kiln::Status(kiln::StatusCode::kInternal, "not compiled");
  auto fix = [&](const std::string& input) {
    const kiln::io::HostTensor& t = first_set->at(input);
    fixed[input] = t;
    const int64_t n = t.num_elements();
    if (kiln::passes::CanFixValues(t.dtype) && n <= 64) {
      // Each element as profile text: integers as they are, floating-point ones in the
      // shortest form that reads back to the same bits.
      std::vector<std::string> v(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) {
        const uint8_t* at = t.bytes.data() + k * kiln::DTypeSize(t.dtype);
        int64_t bits = 0;
        std::memcpy(&bits, at, kiln::DTypeSize(t.dtype));
        switch (t.dtype) {
          case kiln::DType::kInt64: v[k] = fmt::format("{}", bits); break;
          case kiln::DType::kInt32: v[k] = fmt::format("{}", static_cast<int32_t>(bits)); break;
          case kiln::DType::kBool: v[k] = bits != 0 ? "1" : "0"; break;
          case kiln::DType::kFloat64: v[k] = fmt::format("{}", kiln::passes::FloatFromBits(t.dtype, bits)); break;
          default: v[k] = fmt::format("{}", static_cast<float>(kiln::passes::FloatFromBits(t.dtype, bits))); break;
        }
      }
      profiled.push_back(t.dims.empty() && n == 1 ? fmt::format("{}={}", input, v[0])
                                        : fmt::format("{}=[{}]", input, fmt::join(v, ",")));
      auto profile = kiln::compiler::ParseProfile(fmt::format("{}", fmt::join(profiled, ";")));
      if (profile.ok()) {
        options.profiles = {*profile};
        return;
      }
      profiled.pop_back();
    }
    auto data = std::make_shared<kiln::ir::ConstData>();
    data->dtype = t.dtype;
    data->dims = t.dims;
    data->bytes = t.bytes;
    options.constant_inputs[input] = std::move(data);
    bound += (bound.empty() ? "" : ", ") + input;
  };
  // Small integer inputs are fixed first; floating-point ones only when that was not enough.
  auto small = [](const kiln::io::HostTensor& t, bool floats) {
    return t.num_elements() <= 16 && (t.dtype == kiln::DType::kInt64 || t.dtype == kiln::DType::kInt32 ||
                                      (floats && t.dtype != kiln::DType::kBool && kiln::passes::CanFixValues(t.dtype)));
  };
  if (profile_inputs)
    for (const auto& [input, t] : *first_set)
      if (small(t, false)) fix(input);
  for (;;) {
    bytes = kiln::compiler::CompileOnnxFile((dir / "model.onnx").string(), options, nullptr);
    if (bytes.ok() || bytes.status().code() != kiln::StatusCode::kUnimplemented) break;
    const std::string msg(bytes.status().message());
    const size_t at = msg.find(") is not known at compile time");
    const size_t open = at == std::string::npos ? at : msg.rfind('(', at);
    if (open == std::string::npos) break;
    const std::string name = msg.substr(open + 1, at - open - 1);
    if (first_set->count(name)) {
      if (fixed.count(name)) break;
      fix(name);
      continue;
    }
    // A value computed inside the graph (a function body's Range limit from a `size` input, a
    // Loop's trip count from Range's start, limit and delta): fix the small inputs it may come
    // from, once.
    size_t added = 0;
    for (bool floats : {false, true}) {
      for (const auto& [input, t] : *first_set)
        if (!fixed.count(input) && small(t, floats)) fix(input), ++added;
      if (added > 0) break;
    }
    if (added == 0) break;
  }
  if (!bytes.ok()) {
    r.outcome = bytes.status().code() == kiln::StatusCode::kUnimplemented ? Outcome::kUnsupported : Outcome::kFail;
    r.detail = "compile: " + bytes.status().ToString();
    return r;
  }
  auto model = kiln::Model::Load(*bytes);
  if (!model.ok()) {
    r.detail = "load: " + model.status().ToString();
    return r;
  }
  auto ctx = kiln::ExecutionContext::Create(*model, {g_device});
  if (!ctx.ok()) {
    r.detail = "context: " + ctx.status().ToString();
    return r;
  }
  // On CUDA, the CPU backend runs the same artifact too, as the reference it must agree with.
  kiln::Result<kiln::ExecutionContext> cpu_ctx = kiln::Status(kiln::StatusCode::kInternal, "unused");
  if (g_device == kiln::Device::kCuda) {
    cpu_ctx = kiln::ExecutionContext::Create(*model, {kiln::Device::kCpu});
    if (!cpu_ctx.ok()) {
      r.detail = "CPU context: " + cpu_ctx.status().ToString();
      return r;
    }
  }
  int sets = 0;
  std::list<kiln::io::HostTensor> host_copies;  // stable addresses for the CUDA outputs
  for (; fs::exists(dir / ("test_data_set_" + std::to_string(sets))); ++sets) {
    const fs::path set = dir / ("test_data_set_" + std::to_string(sets));
    auto inputs = read_set(set);
    if (!inputs.ok()) {
      r.detail = set.filename().string() + ": inputs: " + inputs.status().ToString();
      return r;
    }
    for (const auto& [name, t] : fixed)
      if (inputs->at(name).bytes != t.bytes || inputs->at(name).dims != t.dims) {
        r.outcome = Outcome::kUnsupported;
        r.detail = set.filename().string() + ": input '" + name + "' differs from test_data_set_0's, which was fixed";
        return r;
      }
    std::vector<kiln::TensorView> views;
    for (const kiln::TensorInfo& t : model->inputs()) views.push_back(inputs->at(t.name).view());
    std::vector<kiln::TensorView> out;
    kiln::Status st = ctx->Run(views, out);
    if (st.ok() && g_device == kiln::Device::kCuda) {
      // Device outputs: wait, then copy each into host memory to compare.
      st = ctx->Synchronize();
      std::vector<kiln::TensorView> host;
      for (const kiln::TensorView& o : out) {  // never read: `o.data` is device memory
        kiln::io::HostTensor& h = host_copies.emplace_back();
        h.dtype = o.dtype;
        h.dims.assign(o.dims, o.dims + o.rank);
        h.bytes.resize(static_cast<size_t>(o.num_bytes()));
        host.push_back(h.view());
      }
      if (st.ok()) st = ctx->Run(views, host);  // caller-owned host outputs: Run copies into them
      if (st.ok()) st = ctx->Synchronize();
      if (st.ok()) r.cpu_reason = CpuReason(*model, *ctx, r.op);
      out = host;
    }
    if (!st.ok()) {
      r.detail = set.filename().string() + ": run: " + st.ToString();
      return r;
    }
    for (size_t k = 0; k < out.size(); ++k) {
      const fs::path want_path = set / ("output_" + std::to_string(k) + ".pb");
      auto want = kiln::io::ReadTensorProtoFile(want_path.string());
      if (!want.ok()) {
        r.detail = set.filename().string() + ": " + want.status().ToString();
        return r;
      }
      if (std::string diff = Compare(*want, out[k], k); !diff.empty()) {
        r.detail = set.filename().string() + ": " + diff;
        return r;
      }
    }
    if (g_device == kiln::Device::kCuda) {
      std::vector<kiln::TensorView> cpu_out;
      if (kiln::Status cst = cpu_ctx->Run(views, cpu_out); !cst.ok()) {
        r.detail = set.filename().string() + ": CPU run: " + cst.ToString();
        return r;
      }
      for (size_t k = 0; k < out.size() && k < cpu_out.size(); ++k) {
        if (std::string diff = Compare(kiln::io::HostTensor::FromView("", cpu_out[k]), out[k], k); !diff.empty()) {
          r.detail = set.filename().string() + ": against the CPU backend: " + diff;
          return r;
        }
      }
    }
    if (fs::exists(set / ("output_" + std::to_string(out.size()) + ".pb"))) {
      r.detail = set.filename().string() + ": Kiln gave " + std::to_string(out.size()) + " outputs, the test more";
      return r;
    }
  }
  r.outcome = Outcome::kPass;
  r.detail = std::to_string(sets) + " test sets";
  if (!profiled.empty()) r.detail += fmt::format("; value profile: {}", fmt::join(profiled, ";"));
  if (!bound.empty()) r.detail += "; constant inputs: " + bound;
  return r;
}

// Serialised as one line: outcome \t op \t cpu_reason \t detail (tabs and newlines in the texts
// become spaces).
std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\t', ' ');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

std::string Encode(const CaseResult& r) {
  return fmt::format("{}\t{}\t{}\t{}", static_cast<int>(r.outcome), r.op, OneLine(r.cpu_reason), OneLine(r.detail));
}

CaseResult Decode(const std::string& name, const std::string& line) {
  CaseResult r;
  r.name = name;
  std::istringstream in(line);
  std::string outcome;
  std::getline(in, outcome, '\t');
  std::getline(in, r.op, '\t');
  std::getline(in, r.cpu_reason, '\t');
  std::getline(in, r.detail);
  r.outcome = static_cast<Outcome>(std::atoi(outcome.c_str()));
  return r;
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::string name;
  std::string out;
  time_t started = 0;
};

// Runs every case, `jobs` child processes at a time.
std::vector<CaseResult> RunAll(const std::vector<fs::path>& cases, int jobs) {
  std::vector<CaseResult> results;
  std::vector<Child> running;
  size_t next = 0;
  auto finish = [&](Child& c) {
    int status = 0;
    waitpid(c.pid, &status, 0);
    close(c.fd);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !c.out.empty()) {
      if (!c.out.empty() && c.out.back() == '\n') c.out.pop_back();
      results.push_back(Decode(c.name, c.out));
    } else {
      CaseResult r;
      r.name = c.name;
      r.detail = WIFSIGNALED(status) ? fmt::format("crashed: signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)))
                                     : fmt::format("child exited with status {}", WEXITSTATUS(status));
      if (time(nullptr) - c.started >= kCaseTimeoutSeconds) r.detail = fmt::format("timed out after {} s", kCaseTimeoutSeconds);
      results.push_back(r);
    }
  };
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0) {
        std::perror("pipe");
        std::exit(2);
      }
      std::cout.flush();
      const pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        alarm(kCaseTimeoutSeconds);
        const std::string line = Encode(RunCaseOrProfiled(cases[next])) + "\n";
        if (write(fds[1], line.data(), line.size()) < 0) _exit(3);
        _exit(0);
      }
      close(fds[1]);
      running.push_back({pid, fds[0], cases[next].filename().string(), "", time(nullptr)});
      ++next;
    }
    std::vector<pollfd> pfds;
    for (const Child& c : running) pfds.push_back({c.fd, POLLIN, 0});
    poll(pfds.data(), pfds.size(), 1000);
    for (size_t i = running.size(); i-- > 0;) {
      if (!(pfds[i].revents & (POLLIN | POLLHUP))) continue;
      char buf[4096];
      const ssize_t n = read(running[i].fd, buf, sizeof buf);
      if (n > 0) {
        running[i].out.append(buf, static_cast<size_t>(n));
        continue;
      }
      finish(running[i]);
      running.erase(running.begin() + static_cast<ptrdiff_t>(i));
    }
  }
  std::sort(results.begin(), results.end(), [](const CaseResult& a, const CaseResult& b) { return a.name < b.name; });
  return results;
}

// Expanded cases (test_x_expanded, test_x_expanded_ver18) test the op of test_x.
void NameExpandedOps(std::vector<CaseResult>& results) {
  std::map<std::string, std::string> op_of;
  for (const CaseResult& r : results) op_of[r.name] = r.op;
  for (CaseResult& r : results) {
    const size_t at = r.name.find("_expanded");
    if (at == std::string::npos) continue;
    auto it = op_of.find(r.name.substr(0, at));
    if (it != op_of.end() && !it->second.empty()) r.op = it->second;
  }
}

int Usage(const char* why) {
  std::cerr << "kiln_conformance: " << why << "\n"
            << "usage: kiln_conformance --data DIR [--expected FILE] [--json FILE] [--markdown FILE] [--filter TEXT] "
               "[--jobs N] [--device cpu|cuda] [--arch LIST] [--known-failures FILE]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data, expected_path, json_path, markdown_path, filter, known_path;
  int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--data") data = value();
    else if (a == "--expected") expected_path = value();
    else if (a == "--json") json_path = value();
    else if (a == "--markdown") markdown_path = value();
    else if (a == "--filter") filter = value();
    else if (a == "--jobs") jobs = std::max(1, std::atoi(value().c_str()));
    else if (a == "--known-failures") known_path = value();
    else if (a == "--arch") {
      std::stringstream list(value());
      for (std::string arch; std::getline(list, arch, ',');)
        if (!arch.empty()) g_archs.push_back(arch);
      if (g_archs.empty()) return Usage("--arch needs a comma-separated list such as sm_90,compute_90");
    }
    else if (a == "--device") {
      const std::string d = value();
      if (d != "cpu" && d != "cuda") return Usage("--device is cpu or cuda");
      g_device = d == "cuda" ? kiln::Device::kCuda : kiln::Device::kCpu;
    }
    else return Usage(("unknown argument '" + a + "'").c_str());
  }
  if (data.empty() || !fs::is_directory(data)) return Usage("--data must name the folder of node test cases");
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(data))
    if (fs::exists(e.path() / "model.onnx") && e.path().filename().string().find(filter) != std::string::npos)
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  std::vector<CaseResult> results = RunAll(cases, jobs);
  NameExpandedOps(results);

  // Per op: pass, fail, unsupported, out of scope; on CUDA also the passing cases whose op ran
  // on the CPU backend, with the first reason seen.
  const bool cuda = g_device == kiln::Device::kCuda;
  std::map<std::string, std::array<int, 4>> table;
  std::map<std::string, std::pair<int, std::string>> on_cpu;
  std::array<int, 4> totals{};
  int bound_passes = 0, profiled_passes = 0;
  for (const CaseResult& r : results) {
    if (r.outcome == Outcome::kPass && r.detail.find("constant inputs:") != std::string::npos) ++bound_passes;
    else if (r.outcome == Outcome::kPass && r.detail.find("value profile:") != std::string::npos) ++profiled_passes;
    const std::string op = r.op.empty() ? "(none)" : r.op;
    ++table[op][static_cast<int>(r.outcome)];
    ++totals[static_cast<int>(r.outcome)];
    if (r.outcome == Outcome::kPass && !r.cpu_reason.empty()) {
      auto& c = on_cpu[op];
      if (c.first++ == 0) c.second = r.cpu_reason;
    }
    if (r.outcome == Outcome::kFail || r.outcome == Outcome::kUnsupported)
      std::cout << fmt::format("{:<12} {} [{}]: {}\n", OutcomeName(r.outcome), r.name, r.op, r.detail);
  }
  std::string md = cuda ? "| op | pass | fail | unsupported | out of scope | passing on the CPU backend (why) |\n"
                          "|---|---|---|---|---|---|\n"
                        : "| op | pass | fail | unsupported | out of scope |\n|---|---|---|---|---|\n";
  for (const auto& [op, c] : table) {
    md += fmt::format("| {} | {} | {} | {} | {} |", op, c[0], c[1], c[2], c[3]);
    if (cuda) {
      auto it = on_cpu.find(op);
      md += it == on_cpu.end() ? " |" : fmt::format(" {} ({}) |", it->second.first, it->second.second);
    }
    md += "\n";
  }
  const int in_scope = totals[0] + totals[1] + totals[2];
  const std::string summary =
      fmt::format("{} cases: {} in scope, {} pass ({:.1f}% of in scope; {} with value profiles, {} with inputs bound "
                  "to constants; {} ({:.1f}%) with neither), {} fail, {} unsupported, {} out of scope",
                  results.size(), in_scope, totals[0], in_scope ? 100.0 * totals[0] / in_scope : 0.0, profiled_passes,
                  bound_passes, totals[0] - profiled_passes - bound_passes,
                  in_scope ? 100.0 * (totals[0] - profiled_passes - bound_passes) / in_scope : 0.0, totals[1],
                  totals[2], totals[3]);
  std::cout << "\n" << md << "\n" << summary << "\n";
  if (!markdown_path.empty()) std::ofstream(markdown_path) << md << "\n" << summary << "\n";
  if (!json_path.empty()) {
    nlohmann::json j = {{"total", results.size()}, {"in_scope", in_scope}, {"pass", totals[0]},
                        {"pass_with_constant_inputs", bound_passes}, {"pass_with_value_profiles", profiled_passes},
                        {"fail", totals[1]}, {"unsupported", totals[2]}, {"out_of_scope", totals[3]}};
    for (const auto& [op, c] : table)
      j["ops"][op] = {{"pass", c[0]}, {"fail", c[1]}, {"unsupported", c[2]}, {"out_of_scope", c[3]}};
    for (const CaseResult& r : results) {
      j["cases"][r.name] = {{"op", r.op}, {"outcome", OutcomeName(r.outcome)}, {"detail", r.detail}};
      if (!r.cpu_reason.empty()) j["cases"][r.name]["on_cpu"] = r.cpu_reason;
    }
    std::ofstream(json_path) << j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  if (expected_path.empty()) return 0;

  std::set<std::string> expected, with_values;  // with_values: marked `# value profile`
  {
    std::ifstream f(expected_path);
    for (std::string line; std::getline(f, line);) {
      if (line.empty() || line[0] == '#') continue;
      const std::string name = line.substr(0, line.find_first_of(" \t"));
      expected.insert(name);
      if (line.find("# value profile") != std::string::npos) with_values.insert(name);
    }
  }
  std::map<std::string, std::string> known;  // case -> why it does not pass on this device
  if (!known_path.empty()) {
    std::ifstream f(known_path);
    if (!f) return Usage(("cannot read --known-failures " + known_path).c_str());
    for (std::string line; std::getline(f, line);) {
      if (line.empty() || line[0] == '#') continue;
      const size_t gap = line.find_first_of(" \t");
      known[line.substr(0, gap)] = gap == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", gap));
    }
  }
  int regressions = 0, raised = 0, listed_total = 0, listed_passing = 0, known_failing = 0;
  for (const CaseResult& r : results) {
    const bool listed = expected.count(r.name) > 0;
    const bool as_it_comes = r.detail.find("value profile:") == std::string::npos &&
                             r.detail.find("constant inputs:") == std::string::npos;
    if (listed && r.outcome == Outcome::kPass && !as_it_comes && !with_values.count(r.name)) {
      std::cout << fmt::format("REGRESSION {}: expected to pass as it comes, passes only with {}\n", r.name,
                               r.detail.substr(r.detail.find("; ") + 2));
      ++regressions;
    } else if (listed && r.outcome == Outcome::kPass && as_it_comes && with_values.count(r.name)) {
      std::cout << fmt::format("{} passes as it comes: remove its '# value profile' in {}\n", r.name, expected_path);
    }
    listed_total += listed;
    listed_passing += listed && r.outcome == Outcome::kPass;
    auto k = known.find(r.name);
    if (listed && r.outcome != Outcome::kPass && k != known.end()) {
      std::cout << fmt::format("known failure {}: {}: {} (why: {})\n", r.name, OutcomeName(r.outcome), r.detail,
                               k->second);
      ++known_failing;
    } else if (listed && r.outcome != Outcome::kPass) {
      std::cout << fmt::format("REGRESSION {}: expected to pass, {}: {}\n", r.name, OutcomeName(r.outcome), r.detail);
      ++regressions;
    } else if (listed && k != known.end()) {
      std::cout << fmt::format("{} passes: remove it from {}\n", r.name, known_path);
    } else if (!listed && r.outcome == Outcome::kPass) {
      std::cout << fmt::format("newly passing (add to {}): {}\n", expected_path, r.name);
      ++raised;
    }
  }
  std::cout << fmt::format("{} of the {} cases {} lists pass here ({:.1f}%); {} known failures; {} regressions; {} "
                           "newly passing cases\n",
                           listed_passing, listed_total, expected_path,
                           listed_total ? 100.0 * listed_passing / listed_total : 0.0, known_failing, regressions,
                           raised);
  return regressions ? 1 : 0;
}
