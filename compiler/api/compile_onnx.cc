// kiln/compile.h: the public in-process compile, over the driver (compiler/compile.h) with the
// ONNX importer, as `kiln compile` runs it.
#include "kiln/compile.h"

#include <memory>
#include <new>
#include <utility>

#include "compiler/codegen/cpu/targets.h"
#include "compiler/compile.h"

namespace kiln {
namespace {

Result<compiler::CompileOptions> DriverOptions(const OnnxCompileOptions& o) {
  compiler::CompileOptions c;
  c.input_shapes = o.shapes;
  for (const std::string& text : o.profiles) {
    Result<compiler::Profile> p = compiler::ParseProfile(text);  // its errors name the profile
    if (!p.ok()) return p.status();
    c.profiles.push_back(std::move(*p));
  }
  for (const auto& [name, t] : o.constant_inputs) {
    const std::string where = "constant input '" + name + "'";
    if (t.memory != MemoryKind::kHost) return InvalidArgument(where + ": its data must be in host memory");
    if (t.rank < 0 || t.rank > kMaxRank) return InvalidArgument(where + ": rank " + std::to_string(t.rank));
    if (DTypeSize(t.dtype) == 0) return InvalidArgument(where + ": no data type");
    const int64_t bytes = t.num_bytes();
    if (bytes < 0 || bytes == INT64_MAX) return InvalidArgument(where + ": its size overflows int64");
    if (t.data == nullptr && bytes > 0) return InvalidArgument(where + ": its data pointer is null");
    auto data = std::make_shared<ir::ConstData>();
    data->dtype = t.dtype;
    data->dims.assign(t.dims, t.dims + t.rank);
    const auto* p = static_cast<const uint8_t*>(t.data);
    data->bytes.assign(p, p + bytes);
    c.constant_inputs.emplace(name, std::move(data));
  }
  if (o.precision == "fp32") c.precision.precision = passes::Precision::kFp32;
  else if (o.precision == "fp16") c.precision.precision = passes::Precision::kFp16;
  else if (o.precision == "bf16") c.precision.precision = passes::Precision::kBf16;
  else return InvalidArgument("precision '" + o.precision + "': expected fp32, fp16 or bf16");
  if (o.io_precision == "declared") c.precision.io_dtype = DType::kFloat32;
  else if (o.io_precision == "fp16") c.precision.io_dtype = DType::kFloat16;
  else if (o.io_precision == "bf16") c.precision.io_dtype = DType::kBFloat16;
  else return InvalidArgument("io_precision '" + o.io_precision + "': expected declared, fp16 or bf16");
  c.precision.keep_fp32 = o.keep_fp32;
  if (o.archs) {
    for (const std::string& a : *o.archs) {
      const bool sm = a.rfind("sm_", 0) == 0, ptx = a.rfind("compute_", 0) == 0;
      const std::string digits = a.substr(sm ? 3 : ptx ? 8 : 0);
      if ((!sm && !ptx) || digits.empty() || digits.size() > 3 ||
          digits.find_first_not_of("0123456789") != std::string::npos)
        return InvalidArgument("arch '" + a + "': expected sm_NN (a cubin) or compute_NN (PTX), such as sm_90");
    }
    c.archs = *o.archs;
  }
  if (auto targets = codegen::cpu::ParseCpuTargets(o.cpu_targets); !targets.ok())
    return targets.status();  // names --cpu-targets, the option's flag
  c.cpu_targets = o.cpu_targets;
  if (o.cpu_layout != "nhwc" && o.cpu_layout != "nchw")
    return InvalidArgument("cpu_layout '" + o.cpu_layout + "': expected nhwc or nchw");
  c.cpu_channels_last = o.cpu_layout == "nhwc";
  c.fuse = o.fuse;
  c.loop_scan_bound = o.loop_scan_bound;
  c.kernel_cache_dir = o.kernel_cache_dir;
  c.use_kernel_cache = o.use_kernel_cache;
  c.jobs = o.jobs;
  c.kernel_progress = o.kernel_progress;
  return c;
}

}  // namespace

Result<std::vector<uint8_t>> CompileOnnx(const std::string& path, const OnnxCompileOptions& options,
                                         CompileReport* report) {
  try {
    KILN_ASSIGN_OR_RETURN(compiler::CompileOptions c, DriverOptions(options));
    if (report != nullptr) *report = CompileReport{};
    c.log = [&](const std::string& line) {
      if (report != nullptr) report->log.push_back(line);
      if (options.log) options.log(line);
    };
    compiler::CompileSummary summary;
    Result<std::vector<uint8_t>> bytes = compiler::CompileOnnxFile(path, c, &summary);
    if (!bytes.ok() || report == nullptr) return bytes;
    for (const compiler::EntrySummary& e : summary.entries) {
      CompileReport::Entry& out = report->entries.emplace_back();
      out = {e.name, e.instructions, e.arena_bytes, e.lower_bound_bytes, e.backend, {}};
      for (const compiler::EntrySummary::StageTime& st : e.stages) out.stages.push_back({st.name, st.time_ns, st.ops});
    }
    report->total_ns = summary.total_ns;
    report->ops_before_fusion = summary.ops_before_fusion;
    report->ops_after_fusion = summary.ops_after_fusion;
    report->kernels = summary.kernels;
    report->compile_jobs = summary.compile_jobs;
    report->cached_jobs = summary.cached_jobs;
    report->nvrtc_ns = summary.nvrtc_ns;
    return bytes;
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory compiling " + path);
  }
}

}  // namespace kiln
