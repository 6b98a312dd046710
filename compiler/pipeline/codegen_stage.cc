// The codegen stage (pipeline.h): every fused node's CUDA source emitted once for the artifact
// (identical kernels merged across entries) and compiled by NVRTC for the target archs; each
// entry records which kernel each of its fused nodes runs.
#include <future>
#include <map>

#include <fmt/format.h>

#include "compiler/codegen/cpu/targets.h"
#if KILN_HAVE_LLVM
#include "compiler/codegen/cpu/llvm_image.h"
#endif
#include "compiler/codegen/cuda_source.h"
#include "compiler/codegen/kernel_cache.h"
#include "compiler/codegen/nvrtc_compiler.h"
#include "compiler/pipeline/stage_work.h"
#include "runtime/clock.h"

namespace kiln::compiler {
namespace {

// Emits the CUDA source of every fused node, merges identical kernels, and compiles them
// with NVRTC for options.archs (none: a CPU-only artifact).
Status BuildKernels(const CompileOptions& options, serialize::ArtifactRecord& record, CompileSummary* summary,
                    const std::function<void(const std::string&)>& log) {
  std::map<std::string, int32_t> by_name;
  std::vector<codegen::EmittedKernel> emitted;
  std::vector<bool> on_gpu;  // per kernel: an entry the CUDA backend runs launches it
  for (const serialize::EntryRecord& e : record.entries) {
    for (const ir::Node& n : e.plan.trace.body.nodes) {
      if (!n.fused) continue;
      if (auto known = record.kernel_of.find(n.fused.get()); known != record.kernel_of.end()) {
        if (e.backend != "cpu") on_gpu[known->second] = true;
        continue;
      }
      auto k = codegen::EmitCuda(n.fused->program);
      if (!k.ok()) return k.status().WithContext("node '" + n.name + "': CUDA emission");
      auto [it, added] = by_name.emplace(k->name, static_cast<int32_t>(record.kernels.size()));
      if (added) {
        serialize::KernelRecord r;
        r.name = k->name;
        r.source = k->source;
        r.fused = n.fused;
        r.launch_kind = static_cast<int>(k->kind);
        r.block = k->block;
        r.vector = k->vector;
        r.index_bits = k->index_bits;
        record.kernels.push_back(std::move(r));
        emitted.push_back(std::move(*k));
        on_gpu.push_back(false);
      }
      if (e.backend != "cpu") on_gpu[it->second] = true;
      record.kernel_of[n.fused.get()] = it->second;
    }
  }
  record.target_archs = options.archs;
  if (summary) summary->kernels = static_cast<int>(emitted.size());
  // Native CPU code, one image per target, beside NVRTC.
  KILN_ASSIGN_OR_RETURN(std::vector<const codegen::cpu::CpuTarget*> cpu_targets,
                        codegen::cpu::ParseCpuTargets(options.cpu_targets));
  // Before the jobs, which use it, so that it outlives their futures.
  const codegen::KernelCache cache(options.kernel_cache_dir, options.use_kernel_cache);
  std::vector<std::future<Status>> native_jobs;
  std::vector<std::string> native_lines(cpu_targets.size());  // logged once the jobs end
  if (!emitted.empty() && !cpu_targets.empty()) {
#if KILN_HAVE_LLVM
    std::vector<const fused::Program*> programs;
    for (const serialize::KernelRecord& k : record.kernels) programs.push_back(&k.fused->program);
    record.native_code.resize(cpu_targets.size());
    for (size_t t = 0; t < cpu_targets.size(); ++t) {
      native_jobs.push_back(std::async(std::launch::async, [&, t, programs] {
        const codegen::cpu::CpuTarget& target = *cpu_targets[t];
        std::vector<codegen::cpu::NativeSkip> skipped;
        bool cached = false;
        KILN_ASSIGN_OR_RETURN(codegen::cpu::NativeImage image,
                              codegen::cpu::CompileNativeImage(programs, target, cache, &skipped, &cached));
        std::string line = fmt::format("native code for {}: {} of {} kernels, {} bytes{}", target.name,
                                       image.kernels.size(), programs.size(), image.code.size(),
                                       cached ? " (object from the kernel cache)" : "");
        if (!skipped.empty()) line += fmt::format("; interpreted: kernel {}: {}", skipped[0].kernel, skipped[0].reason);
        if (skipped.size() > 1) line += fmt::format(" (and {} more)", skipped.size() - 1);
        native_lines[t] = std::move(line);
        record.native_code[t] = {image.target, std::move(image.code), std::move(image.kernels), std::move(image.offsets)};
        return Status::Ok();
      }));
    }
#else
    log("no native CPU code: this compiler was built without LLVM (KILN_WITH_LLVM); the CPU runs the portable programs");
#endif
  }
  auto finish_native = [&]() -> Status {
    Status first;
    for (auto& job : native_jobs) {
      Status st = job.get();
      if (first.ok() && !st.ok()) first = st.WithContext("native CPU code");
    }
    for (const std::string& line : native_lines) {
      if (!line.empty()) log(line);
    }
    // A target where every kernel stays interpreted has no image.
    std::erase_if(record.native_code, [](const serialize::NativeCodeRecord& n) { return n.kernels.empty(); });
    return first;
  };
  if (emitted.empty() || options.archs.empty()) {
    if (!emitted.empty()) log(fmt::format("{} kernels kept as portable programs only (--arch none)", emitted.size()));
    return finish_native();
  }
  // Kernels that only the CPU backend's plans launch get no images.
  std::vector<codegen::EmittedKernel> gpu_kernels;
  std::vector<size_t> gpu_index;  // into record.kernels
  for (size_t k = 0; k < emitted.size(); ++k) {
    if (!on_gpu[k]) continue;
    gpu_kernels.push_back(emitted[k]);
    gpu_index.push_back(k);
  }
  std::string archs;
  for (const std::string& a : options.archs) archs += (archs.empty() ? "" : ",") + a;
  log(fmt::format("NVRTC: {} kernels for {}{}", gpu_kernels.size(), archs,
                  gpu_kernels.size() < emitted.size()
                      ? fmt::format(" ({} more only in the CPU backend's plans)", emitted.size() - gpu_kernels.size())
                      : ""));
  codegen::CompileKernelOptions copts;
  copts.archs = options.archs;
  copts.cache_dir = options.kernel_cache_dir;
  copts.use_cache = options.use_kernel_cache;
  copts.threads = options.jobs;
  copts.progress = options.kernel_progress;
  codegen::CompileStats stats;
  copts.stats = &stats;
  Result<std::vector<codegen::KernelImages>> compiled = codegen::CompileKernels(gpu_kernels, copts);
  KILN_RETURN_IF_ERROR(finish_native());
  KILN_ASSIGN_OR_RETURN(std::vector<codegen::KernelImages> images, std::move(compiled));
  for (size_t i = 0; i < images.size(); ++i) {
    serialize::KernelRecord& k = record.kernels[gpu_index[i]];
    for (codegen::KernelImage& im : images[i].images) k.images.push_back({im.arch, im.ptx, std::move(im.data)});
  }
  if (summary) summary->compile_jobs = stats.jobs, summary->cached_jobs = stats.cached;
  log(fmt::format("NVRTC: {} jobs, {} from the cache, {} compiled", stats.jobs, stats.cached, stats.compiled));
  return Status::Ok();
}

// The `codegen` stage's text for one entry: the kernel each fused node runs, its launch
// rule and its images. Its time is the whole artifact's emission and NVRTC time.
std::string CodegenText(const serialize::ArtifactRecord& record, const serialize::EntryRecord& e) {
  std::string s = "# stage: codegen\n# targets: ";
  for (size_t i = 0; i < record.target_archs.size(); ++i) s += (i ? ", " : "") + record.target_archs[i];
  s += record.target_archs.empty() ? "none (portable programs only)\n" : "\n";
  for (const ir::Node& n : e.plan.trace.body.nodes) {
    if (!n.fused) continue;
    const serialize::KernelRecord& k = record.kernels[record.kernel_of.at(n.fused.get())];
    size_t bytes = 0;
    for (const auto& im : k.images) bytes += im.data.size();
    s += fmt::format("{} <- '{}': {}, block {}, vector {}, {}-bit indices, {} images ({} bytes)\n", k.name, n.name,
                     k.launch_kind == 0 ? "elementwise" : "row reduction", k.block, k.vector, k.index_bits,
                     k.images.size(), bytes);
  }
  return s;
}

}  // namespace

Status RunCodegen(StageWork& work, StageOutput& out) {
  // The first entry's run emits and compiles the whole artifact's kernels.
  if (work.codegen_ns < 0) {
    const int64_t start = NowNs();
    KILN_RETURN_IF_ERROR(BuildKernels(work.options, work.artifact, work.summary, work.log));
    work.codegen_ns = NowNs() - start;
    if (work.summary) work.summary->nvrtc_ns = work.codegen_ns;
  }
  out.print = [&work] { return CodegenText(work.artifact, *work.record); };
  out.ops = static_cast<int>(work.record->plan.trace.body.nodes.size());
  out.shared_ns = work.codegen_ns;
  return Status::Ok();
}

}  // namespace kiln::compiler
