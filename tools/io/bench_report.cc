#include "tools/io/bench_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "runtime/shape_text.h"

namespace kiln::io {
namespace {

nlohmann::json SummaryJson(const LatencySummary& s, bool mean) {
  nlohmann::json j = {{"min", s.min}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"max", s.max}};
  if (mean) j["mean"] = s.mean, j["stddev"] = s.stddev;
  return j;
}

double Share(int64_t part, int64_t total) {
  return total > 0 ? static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

// Bytes per ns are GB/s (10^9 bytes per second); 0 without a time.
double GBps(int64_t bytes, int64_t ns) { return ns > 0 ? static_cast<double>(bytes) / static_cast<double>(ns) : 0.0; }

nlohmann::json ProfileJson(const ProfileSummary& p) {
  nlohmann::json instructions = nlohmann::json::array();
  for (const ProfileInstruction& i : p.instructions)
    instructions.push_back({{"name", i.info.name},
                            {"op", i.info.op},
                            {"library", i.library},
                            {"member_ops", i.info.member_ops},
                            {"calls", i.calls},
                            {"total_ms", i.total_ns / 1e6},
                            {"mean_us", i.calls ? i.total_ns / 1e3 / static_cast<double>(i.calls) : 0.0},
                            {"bytes_per_call", i.calls ? i.total_bytes / i.calls : 0},
                            {"gb_per_s", GBps(i.total_bytes, i.total_ns)},
                            {"share", Share(i.total_ns, p.total_ns)}});
  nlohmann::json ops = nlohmann::json::array();
  for (const ProfileOp& o : p.ops)
    ops.push_back(
        {{"op", o.op}, {"calls", o.calls}, {"total_ms", o.total_ns / 1e6}, {"share", Share(o.total_ns, p.total_ns)}});
  nlohmann::json kinds = nlohmann::json::array();
  for (const ProfileProgramKind& k : p.program_kinds)
    kinds.push_back({{"kind", k.kind},
                     {"programs", k.programs},
                     {"calls", k.calls},
                     {"total_ms", k.total_ns / 1e6},
                     {"total_bytes", k.total_bytes},
                     {"gb_per_s", GBps(k.total_bytes, k.total_ns)},
                     {"of_memcpy", p.memcpy_gbps > 0 ? GBps(k.total_bytes, k.total_ns) / p.memcpy_gbps : 0.0},
                     {"share", Share(k.total_ns, p.total_ns)}});
  return {{"instructions", instructions}, {"ops", ops}, {"program_kinds", kinds}, {"memcpy_gb_per_s", p.memcpy_gbps}};
}

std::string Bytes(uint64_t b) {
  if (b < 1024) return fmt::format("{} B", b);
  if (b < (1u << 20)) return fmt::format("{:.1f} KiB", b / 1024.0);
  if (b < (1u << 30)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  return fmt::format("{:.2f} GiB", b / 1073741824.0);
}

// Long node names are cut from the front: their ends tell nodes apart.
std::string Fit(const std::string& s, size_t width) {
  return s.size() <= width ? s : "..." + s.substr(s.size() - (width - 3));
}

// A time in milliseconds in the unit that suits `scale_ms` (ms, us or ns), "12.345 ms".
struct TimeUnit {
  const char* name;
  double per_ms;
};
TimeUnit UnitFor(double scale_ms) {
  return scale_ms >= 1 ? TimeUnit{"ms", 1} : scale_ms >= 1e-3 ? TimeUnit{"us", 1e3} : TimeUnit{"ns", 1e6};
}
std::string Time(double ms) {
  const TimeUnit u = UnitFor(ms);
  return fmt::format("{:.3f} {}", ms * u.per_ms, u.name);
}

// "latency us:  min 1.234  p50 ..." in the unit of the median.
std::string SummaryLine(const char* what, const LatencySummary& s, bool mean) {
  const TimeUnit u = UnitFor(s.p50);
  std::string line = fmt::format("{:<12} min {:.3f}  p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  max {:.3f}",
                                 fmt::format("{} {}:", what, u.name), s.min * u.per_ms, s.p50 * u.per_ms,
                                 s.p90 * u.per_ms, s.p99 * u.per_ms, s.max * u.per_ms);
  if (mean) line += fmt::format("  mean {:.3f}  sd {:.3f}", s.mean * u.per_ms, s.stddev * u.per_ms);
  return line;
}

void PrintProfile(const ProfileSummary& p, std::ostream& out, size_t top) {
  out << fmt::format("\nprofile: {} runs, {} instructions, {:.3f} ms of instruction time per run\n", p.runs,
                     p.instructions.size(), p.runs ? p.total_ns / 1e6 / static_cast<double>(p.runs) : 0.0);
  size_t op_width = 2;
  for (const ProfileOp& o : p.ops) op_width = std::max(op_width, o.op.size());
  out << fmt::format("\nby op kind:\n  {:<{}}  {:>8}  {:>11}  {:>11}  {:>6}\n", "op", op_width, "calls", "total ms",
                     "ms per run", "share");
  for (const ProfileOp& o : p.ops)
    out << fmt::format("  {:<{}}  {:>8}  {:>11.3f}  {:>11.3f}  {:>5.1f}%\n", o.op, op_width, o.calls, o.total_ns / 1e6,
                       p.runs ? o.total_ns / 1e6 / static_cast<double>(p.runs) : 0.0,
                       100 * Share(o.total_ns, p.total_ns));
  int64_t kind_bytes = 0;
  for (const ProfileProgramKind& k : p.program_kinds) kind_bytes += k.total_bytes;
  if (kind_bytes > 0) {  // the CPU backend reports the bytes each instruction reads and writes
    size_t kind_width = 4;
    for (const ProfileProgramKind& k : p.program_kinds) kind_width = std::max(kind_width, k.kind.size());
    out << fmt::format("\ngenerated kernels' portable programs by kind (GB/s: the bytes a program reads and "
                       "writes over its time; memcpy: that against one thread's memcpy of 64 MiB here, {:.1f} GB/s "
                       "read + write, which a region whose tensors are still in cache may pass):\n  {:<{}}  {:>8}  {:>8}  {:>11}  {:>11}  {:>8}  {:>7}  {:>6}\n",
                       p.memcpy_gbps, "kind", kind_width, "programs", "calls", "ms per run", "MB per run", "GB/s",
                       "memcpy", "share");
    const double runs = p.runs ? static_cast<double>(p.runs) : 1.0;
    for (const ProfileProgramKind& k : p.program_kinds) {
      const double gbps = GBps(k.total_bytes, k.total_ns);
      out << fmt::format("  {:<{}}  {:>8}  {:>8}  {:>11.3f}  {:>11.3f}  {:>8.2f}  {:>6.0f}%  {:>5.1f}%\n", k.kind,
                         kind_width, k.programs, k.calls, k.total_ns / 1e6 / runs, k.total_bytes / 1e6 / runs, gbps,
                         p.memcpy_gbps > 0 ? 100 * gbps / p.memcpy_gbps : 0.0, 100 * Share(k.total_ns, p.total_ns));
    }
  }
  const size_t shown = std::min(top, p.instructions.size());
  size_t name_width = 4, lib_width = 7;
  for (size_t i = 0; i < shown; ++i) {
    name_width = std::max(name_width, std::min<size_t>(p.instructions[i].info.name.size(), 40));
    lib_width = std::max(lib_width, p.instructions[i].library.size());
  }
  out << fmt::format("\nslowest instructions ({} of {}; all in --json):\n", shown, p.instructions.size());
  out << fmt::format("  {:>5}  {:<{}}  {:<{}}  {:<{}}  {:>7}  {:>10}  {:>10}  {:>6}\n", "#", "name", name_width, "op",
                     op_width, "library", lib_width, "calls", "total ms", "mean us", "share");
  for (size_t i = 0; i < shown; ++i) {
    const ProfileInstruction& in = p.instructions[i];
    out << fmt::format("  {:>5}  {:<{}}  {:<{}}  {:<{}}  {:>7}  {:>10.3f}  {:>10.1f}  {:>5.1f}%\n", in.index,
                       Fit(in.info.name, name_width), name_width, in.info.op, op_width, in.library, lib_width,
                       in.calls, in.total_ns / 1e6, in.calls ? in.total_ns / 1e3 / static_cast<double>(in.calls) : 0.0,
                       100 * Share(in.total_ns, p.total_ns));
  }
}

}  // namespace

nlohmann::json BenchJson(const BenchResult& r) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const BenchInput& in : r.inputs) inputs.push_back({{"name", in.name}, {"dtype", in.dtype}, {"shape", in.shape}});
  return {{"artifact", r.artifact},
          {"device", r.device},
          {"device_note", r.device_note},
          {"threads", r.threads},
          {"cuda_graphs", r.cuda_graphs},
          {"load_ms", r.load_ms},
          {"create_ms", r.create_ms},
          {"first_call_ms", r.first_call_ms ? nlohmann::json(*r.first_call_ms) : nlohmann::json(nullptr)},
          {"warmup", r.warmup},
          {"iterations", r.iterations},
          {"latency_ms", SummaryJson(r.latency_ms, true)},
          {"throughput_per_s", r.throughput_per_s},
          {"host_us", {{"lookup", r.lookup_us}, {"prologue", r.prologue_us}, {"computation", r.computation_us}}},
          {"gpu_ms", r.gpu_ms ? SummaryJson(*r.gpu_ms, false) : nlohmann::json(nullptr)},
          {"transfers", {{"host_to_device_bytes", r.host_to_device_bytes},
                         {"device_to_host_bytes", r.device_to_host_bytes},
                         {"control_transfers", r.control_transfers},
                         {"cpu_region_ms", r.cpu_region_ms}}},
          {"memory",
           {{"host_bytes", r.host_bytes}, {"device_bytes", r.device_bytes}, {"peak_rss_bytes", r.peak_rss_bytes}}},
          {"inputs", inputs},
          {"seed", r.seed ? nlohmann::json(*r.seed) : nlohmann::json(nullptr)},
          {"entry", r.entry},
          {"profile", r.profile ? ProfileJson(*r.profile) : nlohmann::json(nullptr)},
          {"generate", r.generate ? nlohmann::json{{"prompt_tokens", r.generate->prompt_tokens},
                                                   {"tokens", r.generate->tokens},
                                                   {"first_token_ms", SummaryJson(r.generate->first_token_ms, true)},
                                                   {"generated_ids", r.generate->generated_ids},
                                                   {"cache", r.generate->cache}}
                                  : nlohmann::json(nullptr)}};
}

nlohmann::json TraceJson(const BenchResult& r) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "kiln bench " + r.artifact}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", "calls"}}}});
  events.push_back(
      {{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 2}, {"args", {{"name", "instructions"}}}});
  const int64_t origin = r.trace.empty() ? 0 : r.trace.front().start_ns;
  for (const TracedRun& run : r.trace) {
    events.push_back({{"name", fmt::format("Run #{}", run.iteration)},
                      {"cat", "call"},
                      {"ph", "X"},
                      {"ts", (run.start_ns - origin) / 1e3},
                      {"dur", run.wall_ns / 1e3},
                      {"pid", 1},
                      {"tid", 1},
                      {"args", {{"iteration", run.iteration}}}});
    const std::vector<InstructionInfo>* infos =
        run.entry >= 0 && static_cast<size_t>(run.entry) < r.instructions.size() ? &r.instructions[run.entry] : nullptr;
    int64_t at = run.computation_start_ns - origin;
    for (size_t k = 0; k < run.instruction_ns.size(); ++k) {
      InstructionInfo l;
      if (infos && k < infos->size()) l = (*infos)[k];
      else l.name = l.op = "?";
      const std::string_view library =
          k < run.instruction_library.size() ? LibraryTitle(run.instruction_library[k]) : std::string_view("?");
      events.push_back(
          {{"name", l.name.empty() ? l.op : l.name},
           {"cat", library},
           {"ph", "X"},
           {"ts", at / 1e3},
           {"dur", run.instruction_ns[k] / 1e3},
           {"pid", 1},
           {"tid", 2},
           {"args",
            {{"op", l.op}, {"member_ops", l.member_ops}, {"entry", run.entry}, {"instruction", k}, {"iteration", run.iteration}}}});
      at += run.instruction_ns[k];
    }
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

void PrintBenchReport(const BenchResult& r, std::ostream& out, size_t top) {
  out << fmt::format("artifact:    {}\n", r.artifact);
  out << fmt::format("device:      {}\n", r.device_note);
  const bool emulated = EmulatedDevice(r.device_note);
  if (emulated)
    out << "note:        an EMULATED CUDA device (Kiln's tests): every time below is the host's, not a GPU's\n";
  for (const std::string& n : r.notes) out << fmt::format("note:        {}\n", n);
  out << fmt::format("threads:     {}\n",
                     r.threads == 0 ? std::string("default (one per CPU)") : std::to_string(r.threads));
  if (r.device == "cuda")
    out << fmt::format(
        "cuda graphs: {}\n",
        r.cuda_graphs ? fmt::format("on ({} replays, {} captures)", r.graph_hits, r.graph_misses) : "off");
  if (r.device == "cuda")
    out << fmt::format("transfers:   {} bytes host to device, {} back ({} control transfers); CPU regions {:.3f} ms "
                       "(the last call)\n",
                       r.host_to_device_bytes, r.device_to_host_bytes, r.control_transfers, r.cpu_region_ms);
  out << fmt::format("load:        {:.3f} ms (Model::Load + ExecutionContext::Create, {:.3f} ms of it)\n", r.load_ms,
                     r.create_ms);
  if (r.first_call_ms && r.latency_ms.p50 > 0)
    out << fmt::format("first call:  {} ({:.1f} times the p50; the context's first Run + Synchronize)\n",
                       Time(*r.first_call_ms), *r.first_call_ms / r.latency_ms.p50);
  for (const BenchInput& in : r.inputs)
    out << fmt::format("input:       {} {}{}\n", in.name, in.dtype, ShapeText(in.shape));
  if (r.seed) out << fmt::format("seed:        {} ({})\n", *r.seed, r.generate ? "random prompt" : "random inputs");
  out << fmt::format("entry:       '{}'{}\n", r.entry, r.generate ? " (the last call's)" : "");
  if (r.generate) {
    out << fmt::format("generate:    {} prompt tokens, {} generated per generation (the first by the prompt's call); "
                       "{} later calls timed in {}, after {} warm-up generations\n",
                       r.generate->prompt_tokens, r.generate->tokens, r.iterations, Time(r.timed_s * 1e3), r.warmup);
    out << fmt::format("kv cache:    {}\n", r.generate->cache);
    out << SummaryLine("first token", r.generate->first_token_ms, true) << "  (the prompt's call)\n";
    out << SummaryLine("per token", r.latency_ms, true) << "  (each later call: Run + Synchronize)\n";
  } else {
    out << fmt::format("iterations:  {} timed in {}, after {} warm-up\n", r.iterations, Time(r.timed_s * 1e3),
                       r.warmup);
    out << SummaryLine("latency", r.latency_ms, true) << "  (wall time of Run + Synchronize)\n";
  }
  // A spread this wide usually means other load on the machine, or too few calls.
  if (r.latency_ms.mean > 0 && r.latency_ms.stddev > 0.1 * r.latency_ms.mean)
    out << fmt::format("             latency varies by {:.0f}% of the mean (sd/mean): other load on the machine?\n",
                       100 * r.latency_ms.stddev / r.latency_ms.mean);
  out << fmt::format("throughput:  {:.2f} {}/s\n", r.throughput_per_s, r.generate ? "tokens" : "calls");
  if (!r.generate)
    out << fmt::format("host us:     lookup {:.2f} (its prologues included)  prologue {:.2f}  computation {:.1f}  "
                       "(medians)\n",
                       r.lookup_us, r.prologue_us, r.computation_us);
  if (r.gpu_ms) out << SummaryLine("gpu", *r.gpu_ms, false) << (emulated ? "  (CUDA events, emulated)\n" : "  (CUDA events)\n");
  out << fmt::format("memory:      host {}, device {} held by the context; peak RSS {} (whole process)\n",
                     Bytes(r.host_bytes), Bytes(r.device_bytes), Bytes(r.peak_rss_bytes));
  if (r.profile) PrintProfile(*r.profile, out, top);
}

bool EmulatedDevice(std::string_view device_note) {
  return device_note.find("Kiln emulated CUDA device") != std::string_view::npos;
}

}  // namespace kiln::io
