#include "compiler/validate/precision_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "compiler/onnx/importer.h"
#include "kiln/tensor_files.h"
#include "kiln/runtime.h"
#include "runtime/instruction_observer.h"
#include "runtime/kernels/float_storage.h"

namespace kiln::validate {
namespace fs = std::filesystem;
namespace {

// The input sets in `dir`: its test_data_set_* subfolders in name order, else `dir` itself.
Result<std::vector<fs::path>> InputSets(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return NotFound(fmt::format("{}: no such input folder", dir));
  if (!fs::is_directory(dir, ec)) return InvalidArgument(fmt::format("{}: not a folder", dir));
  std::vector<fs::path> sets;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec) && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  if (ec) return FailedPrecondition(fmt::format("{}: cannot list: {}", dir, ec.message()));
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) sets.push_back(fs::path(dir));
  return sets;
}

// A float tensor's elements converted to `to` (round to nearest even).
io::HostTensor ConvertFloat(const io::HostTensor& t, DType to) {
  io::HostTensor out;
  out.name = t.name;
  out.dtype = to;
  out.dims = t.dims;
  const int64_t n = t.num_elements();
  out.bytes.resize(static_cast<size_t>(n) * DTypeSize(to));
  cpu::TensorRef src, dst;
  src.data = const_cast<uint8_t*>(t.bytes.data());
  src.dtype = t.dtype;
  dst.data = out.bytes.data();
  dst.dtype = to;
  for (int64_t i = 0; i < n; ++i) cpu::StoreFloat(dst, i, cpu::LoadFloat(src, i));
  return out;
}

// `inputs` in the dtypes `model` declares. Appends an Overflow for each input whose
// conversion made finite values inf.
Result<std::vector<io::HostTensor>> ToModelDTypes(const std::vector<io::HostTensor>& inputs, const Model& model,
                                                  const std::string& set, std::vector<Overflow>* overflows) {
  std::vector<io::HostTensor> out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const io::HostTensor& t = inputs[i];
    const DType want = model.inputs()[i].dtype;
    if (t.dtype == want) {
      out.push_back(t);
      continue;
    }
    if (!cpu::IsFloatStorage(t.dtype) || !cpu::IsFloatStorage(want))
      return InvalidArgument(fmt::format("input {} '{}' is {}, the model takes {}", i, t.name, io::Describe(t),
                                         DTypeName(want)));
    out.push_back(ConvertFloat(t, want));
    const int64_t before = CountNonFinite(t.bytes.data(), t.dtype, t.num_elements());
    const int64_t after = CountNonFinite(out.back().bytes.data(), want, t.num_elements());
    if (overflows && after > before)
      overflows->push_back({set, t.name, "input conversion", want, after - before, t.num_elements(), 0});
  }
  return out;
}

// One instruction output as the observer saw it.
struct Stored {
  std::string value;
  std::string instruction;
  DType dtype = DType::kUndefined;
  int64_t nonfinite = 0;
  int64_t elements = 0;
  std::vector<std::string> inputs;  // value names of the instruction's inputs
};

struct ObservedRun {
  std::vector<io::HostTensor> outputs;
  std::vector<Stored> stored;  // in execution order
};

// Runs `model` on the CPU backend with the instruction observer recording every output's
// inf and NaN count.
Result<ObservedRun> RunObserved(const Model& model, const std::vector<io::HostTensor>& inputs) {
  ContextOptions options;
  options.device = Device::kCpu;
  // Kiln's own kernels: every intermediate tensor the observer reads is then NCHW (oneDNN may
  // keep a tensor between two of its Convs in its own layout, runtime/cpu/onednn/onednn.h).
  options.cpu.onednn = false;
  KILN_ASSIGN_OR_RETURN(ExecutionContext ctx, ExecutionContext::Create(model, options));
  ObservedRun run;
  SetInstructionObserver(ctx, [&run](const PreparedEntry& pe, const PreparedInstruction& pi,
                                     std::span<const cpu::TensorRef> outputs) {
    std::vector<std::string> in;
    for (int32_t k = 0; k < pi.num_inputs; ++k)
      if (const int32_t t = pe.operands[pi.operands_begin + k]; t >= 0) in.push_back(pe.tensors[t].name);
    for (size_t j = 0; j < outputs.size(); ++j) {
      const int32_t t = pe.operands[pi.operands_begin + pi.num_inputs + static_cast<int32_t>(j)];
      const cpu::TensorRef& r = outputs[j];
      if (t < 0 || !cpu::IsFloatStorage(r.dtype) || r.data == nullptr) continue;
      run.stored.push_back({pe.tensors[t].name, pi.label, r.dtype, CountNonFinite(r.data, r.dtype, r.num_elements),
                            r.num_elements, in});
    }
  });
  std::vector<TensorView> views;
  for (const io::HostTensor& t : inputs) views.push_back(t.view());
  std::vector<TensorView> outputs;
  KILN_RETURN_IF_ERROR(ctx.Run(views, outputs));
  for (size_t i = 0; i < outputs.size(); ++i)
    run.outputs.push_back(io::HostTensor::FromView(model.outputs()[i].name, outputs[i]));
  return run;
}

// The reference value a value of the lowered trace stands for, by the precision stage's
// naming (passes/precision.h): "h.fp16", "h.to_fp16", "h.fp32", "h.to_bf16_2", ... -> "h".
// Other names are their own.
std::string ReferenceName(const std::string& value) {
  size_t end = value.size();
  const size_t digits = value.find_last_not_of("0123456789");
  if (digits != std::string::npos && digits + 1 < end && value[digits] == '_') end = digits;  // "_2"
  for (const char* suffix : {".fp16", ".bf16", ".fp32", ".to_fp16", ".to_bf16", ".to_fp32"}) {
    const size_t n = std::strlen(suffix);
    if (end > n && value.compare(end - n, n, suffix) == 0) return value.substr(0, end - n);
  }
  return value;
}

// The overflows of `tested` against `reference`, where they start (see the header).
void FindOverflows(const std::string& set, const ObservedRun& tested, const ObservedRun& reference,
                   const std::vector<io::HostTensor>& reference_inputs, std::vector<Overflow>* overflows) {
  std::map<std::string, int64_t> ref_nonfinite;  // the model inputs' too: an inf read from DIR is no overflow
  for (const io::HostTensor& t : reference_inputs)
    ref_nonfinite[t.name] = CountNonFinite(t.bytes.data(), t.dtype, t.num_elements());
  for (const Stored& s : reference.stored) ref_nonfinite[s.value] += s.nonfinite;
  // Values that hold new infs or NaNs -> the index of the overflow they come from.
  std::map<std::string, size_t> bad;
  for (size_t i = 0; i < overflows->size(); ++i)
    if ((*overflows)[i].set == set) bad[(*overflows)[i].value] = i;  // overflowed input conversions
  for (const Stored& s : tested.stored) {
    if (s.nonfinite == 0) continue;
    auto ref = ref_nonfinite.find(s.value);
    if (ref == ref_nonfinite.end()) ref = ref_nonfinite.find(ReferenceName(s.value));
    if (ref != ref_nonfinite.end() && ref->second > 0) continue;  // float32 has inf or NaN there too
    const auto from = std::find_if(s.inputs.begin(), s.inputs.end(), [&](const std::string& n) { return bad.count(n); });
    if (from != s.inputs.end()) {
      const size_t origin = bad[*from];
      ++(*overflows)[origin].downstream;
      bad[s.value] = origin;
      continue;
    }
    bad[s.value] = overflows->size();
    overflows->push_back({set, s.value, s.instruction, s.dtype, s.nonfinite, s.elements, 0});
  }
}

// Per graph output name, its quantization step (OutputReport::step), from the imported model.
std::map<std::string, double> QuantizationSteps(const std::string& model_path,
                                                const compiler::CompileOptions& options) {
  onnx_import::ImportOptions import_options;
  import_options.constant_inputs = options.constant_inputs;
  auto trace = onnx_import::ImportOnnxFile(model_path, import_options);
  std::map<std::string, double> steps;
  if (!trace.ok()) return steps;  // the compile that made the artifact read it: not reached
  for (const ir::Node& n : trace->body.nodes)
    for (ir::ValueId out : n.outputs) {
      if (out == ir::kNoValue ||
          std::find(trace->outputs.begin(), trace->outputs.end(), out) == trace->outputs.end())
        continue;
      const std::string& name = trace->value(out).name;
      if (n.op == "QuantizeLinear") {
        steps[name] = 1;
      } else if (n.op == "DequantizeLinear" && n.inputs.size() >= 2 && n.inputs[1] != ir::kNoValue) {
        const ir::Value& scale = trace->value(n.inputs[1]);
        if (scale.is_const() && scale.data->num_elements() == 1) steps[name] = std::fabs(scale.data->FloatAt(0));
      }
    }
  return steps;
}

}  // namespace

Result<PrecisionReport> ValidatePrecision(const std::string& model_path, const compiler::CompileOptions& options,
                                          std::span<const uint8_t> artifact, const std::string& dir) {
  PrecisionReport report;
  KILN_ASSIGN_OR_RETURN(std::vector<fs::path> sets, InputSets(dir));
  auto tested_model = Model::Load(artifact);
  if (!tested_model.ok()) return tested_model.status().WithContext("the artifact");
  report.precision = tested_model->precision();
  const std::string tested_name = report.precision + " artifact";

  compiler::CompileOptions ref_options = options;
  ref_options.precision = passes::PrecisionOptions{};
  ref_options.fuse = false;
  ref_options.archs.clear();
  ref_options.log = nullptr;
  ref_options.kernel_progress = nullptr;
  auto ref_bytes = compiler::CompileOnnxFile(model_path, ref_options, nullptr);
  if (!ref_bytes.ok()) return ref_bytes.status().WithContext("float32 reference");
  auto ref_model = Model::Load(*ref_bytes);
  if (!ref_model.ok()) return ref_model.status().WithContext("float32 reference");
  if (tested_model->inputs().size() != ref_model->inputs().size() ||
      tested_model->outputs().size() != ref_model->outputs().size())
    return InvalidArgument(fmt::format("{} has {} inputs and {} outputs, the float32 reference {} and {}", tested_name,
                                       tested_model->inputs().size(), tested_model->outputs().size(),
                                       ref_model->inputs().size(), ref_model->outputs().size()));
  std::vector<std::string> names;
  for (const TensorInfo& t : ref_model->inputs()) names.push_back(t.name);
  const std::map<std::string, double> steps = QuantizationSteps(model_path, options);

  for (const fs::path& set_dir : sets) {
    const std::string set = set_dir.filename().empty() ? set_dir.parent_path().filename().string()
                                                       : set_dir.filename().string();
    report.sets.push_back(set);
    auto inputs = io::ReadInputDir(set_dir.string(), names);
    if (!inputs.ok()) return inputs.status();  // names the file already
    auto ref_inputs = ToModelDTypes(*inputs, *ref_model, set, nullptr);
    if (!ref_inputs.ok()) return ref_inputs.status().WithContext(set_dir.string());
    auto tested_inputs = ToModelDTypes(*inputs, *tested_model, set, &report.overflows);
    if (!tested_inputs.ok()) return tested_inputs.status().WithContext(set_dir.string());
    auto ref = RunObserved(*ref_model, *ref_inputs);
    if (!ref.ok()) return ref.status().WithContext(set_dir.string() + ": float32 reference");
    auto tested = RunObserved(*tested_model, *tested_inputs);
    if (!tested.ok()) return tested.status().WithContext(set_dir.string() + ": " + tested_name);
    for (size_t i = 0; i < tested->outputs.size(); ++i) {
      const io::HostTensor& out = tested->outputs[i];
      auto m = CompareTensors(out.view(), ref->outputs[i].view());
      if (!m.ok()) return m.status().WithContext(fmt::format("{}: output {} '{}'", set_dir.string(), i, out.name));
      const auto step = steps.find(out.name);
      report.outputs.push_back({set, out.name, out.dtype, *m, step == steps.end() ? 0.0 : step->second});
    }
    FindOverflows(set, *tested, *ref, *ref_inputs, &report.overflows);
  }
  return report;
}

std::string FormatPrecisionReport(const PrecisionReport& report) {
  std::string s = fmt::format(
      "accuracy of the {} artifact against float32 (CPU backend; reference compiled unfused), {} input set{}\n",
      report.precision, report.sets.size(), report.sets.size() == 1 ? "" : "s");
  size_t set_w = 3, out_w = 6;
  for (const OutputReport& o : report.outputs) {
    set_w = std::max(set_w, o.set.size());
    out_w = std::max(out_w, o.output.size());
  }
  const bool quantized = std::any_of(report.outputs.begin(), report.outputs.end(),
                                     [](const OutputReport& o) { return o.step > 0; });
  s += fmt::format("  {:<{}}  {:<{}}  {:>10}  {:>11}  {:>11}  {:>12}  {:>10}{}\n", "set", set_w, "output", out_w,
                   "elements", "max abs err", "max rel err", "cosine", "inf/NaN", quantized ? "  max err (steps)" : "");
  for (const OutputReport& o : report.outputs) {
    const ErrorMetrics& m = o.metrics;
    const bool none = m.compared == 0 && m.elements > 0;  // no element finite in both: no figure to show
    std::string steps;
    if (quantized)
      steps = o.step > 0 && !none ? fmt::format("  {:>16.3g}", m.max_abs / o.step) : fmt::format("  {:>16}", "-");
    if (none)
      s += fmt::format("  {:<{}}  {:<{}}  {:>10}  {:>11}  {:>11}  {:>12}  {:>10}{}\n", o.set, set_w, o.output, out_w,
                       m.elements, "-", "-", "-", m.nonfinite, steps);
    else
      s += fmt::format("  {:<{}}  {:<{}}  {:>10}  {:>11.4g}  {:>11.4g}  {:>12.9f}  {:>10}{}\n", o.set, set_w,
                       o.output, out_w, m.elements, m.max_abs, m.max_rel, m.cosine, m.nonfinite, steps);
  }
  s += "  (rel err: |err| / max(|float32|, 1e-3 * the output's largest |float32|); inf/NaN: elements inf or NaN "
       "here, finite in float32)\n";
  if (quantized)
    s += "  (steps: max abs err over the output's quantization step: 1 for an integer QuantizeLinear output, the "
         "scale of the DequantizeLinear that writes a float one; the reference computes every QuantizeLinear and "
         "DequantizeLinear as ONNX defines them, as onnxruntime does unoptimised; one step is rounding)\n";
  for (const OutputReport& o : report.outputs) {
    const ErrorMetrics& m = o.metrics;
    if (m.compared < m.elements)
      s += fmt::format("note: {}: output '{}': errors and cosine over the {} of {} elements finite in both ({} inf or "
                       "NaN in float32)\n",
                       o.set, o.output, m.compared, m.elements, m.ref_nonfinite);
  }
  for (const OutputReport& o : report.outputs)
    if (o.metrics.nonfinite > 0)
      s += fmt::format("warning: {}: output '{}' has {} of {} elements inf or NaN where float32 has none\n", o.set,
                       o.output, o.metrics.nonfinite, o.metrics.elements);
  for (const Overflow& o : report.overflows) {
    s += fmt::format("warning: {}: {} overflow: value '{}' ({}) at {}: {} of {} elements inf or NaN where float32 "
                     "has none",
                     o.set, report.precision, o.value, DTypeName(o.dtype), o.instruction, o.nonfinite, o.elements);
    if (o.downstream > 0) s += fmt::format("; {} later value{} inf or NaN from it", o.downstream, o.downstream == 1 ? "" : "s");
    s += "\n";
  }
  return s;
}

}  // namespace kiln::validate
