// kiln bench's outputs: the --json document's exact keys and values, the Chrome trace's
// events, and the human report's lines, from a hand-made result.
#include "tools/io/bench_report.h"

#include <doctest/doctest.h>

#include <set>
#include <sstream>

namespace kiln::io {
namespace {

std::set<std::string> Keys(const nlohmann::json& j) {
  std::set<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.insert(it.key());
  return keys;
}

BenchResult SampleResult() {
  BenchResult r;
  r.artifact = "m.kiln";
  r.device = "cpu";
  r.device_note = "CPU backend";
  r.threads = 2;
  r.load_ms = 1.5;
  r.create_ms = 0.5;
  r.warm_ms = 0.25;
  r.first_call_ms = 20;
  r.host_to_device_bytes = 4100;  // a 4 KiB input and one control transfer of 4 bytes
  r.control_transfers = 1;
  r.warmup = 3;
  r.iterations = 4;
  r.timed_s = 0.5;
  r.latency_ms = Summarize({1, 2, 3, 4});
  r.throughput_per_s = 8;
  r.lookup_us = 0.25;
  r.prologue_us = 0.125;
  r.computation_us = 100;
  r.host_bytes = 4096;
  r.peak_rss_bytes = 1 << 20;
  r.inputs = {{"x", "float32", {2, 4}}};
  r.seed = 18446744073709551615ull;  // the whole uint64 range, written exactly
  r.entry = "default";
  kiln::InstructionInfo mm, relu;
  mm.name = "mm";
  mm.op = "MatMul";
  relu.op = "kiln.Fused";
  relu.kernel = "kiln_0123456789abcdef";
  relu.member_ops = {"Relu"};
  r.instructions = {{mm, relu}};
  ProfileAccumulator acc;
  // Relu: 8000 bytes in 1 us; what ran each, as Stats::last_instruction_library reports it.
  acc.Add(0, std::vector<int64_t>{3000, 1000}, std::vector<int64_t>{0, 8000},
          std::vector<kiln::Library>{kiln::Library::kCublasLt, kiln::Library::kGenerated});
  r.profile = acc.Summary(r.instructions);
  r.profile->memcpy_gbps = 16;  // the Relu's 8 GB/s is half of it
  // Two traced runs 10 us apart; the first computation starts 1 us into its call.
  const std::vector<kiln::Library> ran = {kiln::Library::kCublasLt, kiln::Library::kGenerated};
  r.trace = {{7, 1'000'000, 5000, 1'001'000, 0, {3000, 1000}, ran}, {8, 1'010'000, 4000, 1'011'000, 0, {2000, 500}, ran}};
  return r;
}

TEST_CASE("bench report: the JSON document has exactly the agreed keys and values") {
  const BenchResult r = SampleResult();
  const nlohmann::json j = BenchJson(r);
  CHECK(Keys(j) == std::set<std::string>{"artifact", "device", "device_note", "threads", "cuda_graphs", "load_ms",
                                         "create_ms", "warm_ms", "first_call_ms", "warmup", "iterations", "latency_ms",
                                         "throughput_per_s", "host_us", "gpu_ms", "transfers", "memory", "inputs", "seed",
                                         "entry", "profile", "generate"});
  CHECK(Keys(j["transfers"]) ==
        std::set<std::string>{"host_to_device_bytes", "device_to_host_bytes", "control_transfers", "cpu_region_ms"});
  CHECK(j["transfers"]["host_to_device_bytes"] == 4100);
  CHECK(j["transfers"]["control_transfers"] == 1);
  CHECK(j["generate"].is_null());  // not a --generate run (bench_runner_test checks one)
  CHECK(Keys(j["latency_ms"]) == std::set<std::string>{"min", "p50", "p90", "p99", "max", "mean", "stddev"});
  CHECK(Keys(j["host_us"]) == std::set<std::string>{"lookup", "prologue", "computation"});
  CHECK(Keys(j["memory"]) == std::set<std::string>{"host_bytes", "device_bytes", "peak_rss_bytes"});
  CHECK(j["gpu_ms"].is_null());
  CHECK(j["threads"] == 2);
  CHECK(j["cuda_graphs"] == false);
  CHECK(j["iterations"] == 4);
  CHECK(j["create_ms"] == 0.5);
  CHECK(j["warm_ms"] == 0.25);
  CHECK(j["first_call_ms"] == 20.0);
  CHECK(j["latency_ms"]["p50"] == 2.0);  // nearest rank: ceil(4 * 0.5) = 2nd
  CHECK(j["latency_ms"]["p90"] == 4.0);
  CHECK(j["latency_ms"]["mean"] == 2.5);
  CHECK(j["latency_ms"]["stddev"] == doctest::Approx(1.118034));  // sqrt(1.25): population
  CHECK(j["seed"].get<uint64_t>() == 18446744073709551615ull);
  CHECK(j.dump().find("\"seed\":18446744073709551615") != std::string::npos);
  BenchResult from_files = r;
  from_files.seed.reset();
  CHECK(BenchJson(from_files)["seed"].is_null());
  CHECK(j["host_us"]["prologue"] == 0.125);
  CHECK(j["memory"]["host_bytes"] == 4096);
  CHECK(j["inputs"][0]["name"] == "x");
  CHECK(j["inputs"][0]["shape"] == nlohmann::json::array({2, 4}));
  CHECK(j["entry"] == "default");
  const nlohmann::json& p = j["profile"];
  CHECK(Keys(p) == std::set<std::string>{"instructions", "ops", "program_kinds", "memcpy_gb_per_s"});
  CHECK(p["memcpy_gb_per_s"] == 16.0);
  REQUIRE(p["instructions"].size() == 2);
  const nlohmann::json& mm = p["instructions"][0];
  CHECK(Keys(mm) ==
        std::set<std::string>{"name", "op", "library", "member_ops", "calls", "total_ms", "mean_us", "bytes_per_call",
                              "gb_per_s", "share"});
  CHECK(mm["name"] == "mm");
  CHECK(mm["library"] == "cuBLASLt");
  CHECK(mm["member_ops"] == nlohmann::json::array());
  CHECK(p["instructions"][1]["member_ops"] == nlohmann::json::array({"Relu"}));
  CHECK(mm["total_ms"] == doctest::Approx(0.003));
  CHECK(mm["mean_us"] == doctest::Approx(3.0));
  CHECK(mm["share"] == doctest::Approx(0.75));
  REQUIRE(p["ops"].size() == 2);
  CHECK(Keys(p["ops"][1]) == std::set<std::string>{"op", "calls", "total_ms", "share"});
  CHECK(p["ops"][1]["op"] == "kiln.Fused");
  CHECK(p["ops"][1]["share"] == doctest::Approx(0.25));
  CHECK(p["instructions"][1]["bytes_per_call"] == 8000);
  CHECK(p["instructions"][1]["gb_per_s"] == doctest::Approx(8.0));  // 8000 bytes in 1000 ns
  CHECK(mm["gb_per_s"] == 0.0);
  REQUIRE(p["program_kinds"].size() == 1);
  const nlohmann::json& kind = p["program_kinds"][0];
  CHECK(Keys(kind) ==
        std::set<std::string>{"kind", "programs", "calls", "total_ms", "total_bytes", "gb_per_s", "of_memcpy", "share"});
  CHECK(kind["of_memcpy"] == doctest::Approx(0.5));
  CHECK(kind["kind"] == "elementwise");
  CHECK(kind["programs"] == 1);
  CHECK(kind["total_bytes"] == 8000);
  CHECK(kind["gb_per_s"] == doctest::Approx(8.0));

  BenchResult gpu = r;
  gpu.gpu_ms = Summarize({0.5, 0.25});
  gpu.profile.reset();
  const nlohmann::json g = BenchJson(gpu);
  CHECK(Keys(g["gpu_ms"]) == std::set<std::string>{"min", "p50", "p90", "p99", "max"});
  CHECK(g["gpu_ms"]["min"] == 0.25);
  CHECK(g["profile"].is_null());
}

TEST_CASE("bench report: the trace has one complete event per call and per instruction, in microseconds") {
  const nlohmann::json t = TraceJson(SampleResult());
  std::vector<nlohmann::json> calls, instructions;
  for (const nlohmann::json& e : t["traceEvents"]) {
    if (e["ph"] != "X") continue;
    (e["tid"] == 1 ? calls : instructions).push_back(e);
  }
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]["name"] == "Run #7");
  CHECK(calls[0]["ts"] == 0.0);
  CHECK(calls[0]["dur"] == 5.0);
  CHECK(calls[1]["ts"] == 10.0);
  REQUIRE(instructions.size() == 4);
  const nlohmann::json& mm = instructions[0];
  CHECK(mm["name"] == "mm");
  CHECK(mm["cat"] == "cuBLASLt");
  CHECK(mm["pid"] == 1);
  CHECK(mm["ts"] == 1.0);
  CHECK(mm["dur"] == 3.0);
  CHECK(mm["args"]["op"] == "MatMul");
  CHECK(mm["args"]["iteration"] == 7);
  // Laid end to end; an unnamed node shows its op; a generated kernel lists the ops it replaced.
  CHECK(instructions[1]["name"] == "kiln.Fused");
  CHECK(instructions[1]["cat"] == "generated kernel");
  CHECK(instructions[1]["args"]["member_ops"] == nlohmann::json::array({"Relu"}));
  CHECK(instructions[1]["ts"] == 4.0);
  CHECK(instructions[1]["dur"] == 1.0);
  CHECK(instructions[2]["ts"] == 11.0);
  CHECK(instructions[3]["ts"] == 13.0);
  CHECK(instructions[3]["dur"] == 0.5);
}

TEST_CASE("bench report: the human report shows latency, host split, memory and the op table") {
  std::ostringstream out;
  PrintBenchReport(SampleResult(), out);
  const std::string s = out.str();
  // sd of 1, 2, 3, 4: sqrt(1.25) = 1.118, 45% of the mean: flagged.
  CHECK(s.find("latency ms:  min 1.000  p50 2.000  p90 4.000  p99 4.000  max 4.000  mean 2.500  sd 1.118") !=
        std::string::npos);
  CHECK(s.find("latency varies by 45% of the mean") != std::string::npos);
  CHECK(s.find("load:        1.500 ms (Model::Load + ExecutionContext::Create + Warm; Create 0.500 ms, Warm at the "
               "inputs' shapes 0.250 ms)") != std::string::npos);
  BenchResult cold = SampleResult();
  cold.warm_ms.reset();  // --no-warm
  std::ostringstream cold_out;
  PrintBenchReport(cold, cold_out);
  CHECK(cold_out.str().find("load:        1.500 ms (Model::Load + ExecutionContext::Create, 0.500 ms of it)") !=
        std::string::npos);
  CHECK(s.find("first call:  20.000 ms (10.0 times the p50; the context's first Run + Synchronize)") !=
        std::string::npos);
  CHECK(s.find("iterations:  4 timed in 500.000 ms, after 3 warm-up") != std::string::npos);
  CHECK(s.find("throughput:  8.00 calls/s") != std::string::npos);
  CHECK(s.find("host us:     lookup 0.25 (its prologues included)  prologue") != std::string::npos);
  CHECK(s.find("memory:      host 4.0 KiB, device 0 B") != std::string::npos);
  CHECK(s.find("seed:        18446744073709551615 (random inputs)\n") != std::string::npos);
  CHECK(s.find("by op kind:") != std::string::npos);
  CHECK(s.find("75.0%") != std::string::npos);
  CHECK(s.find("generated kernels' portable programs by kind") != std::string::npos);
  CHECK(s.find("one thread's memcpy of 64 MiB here, 16.0 GB/s read + write") != std::string::npos);
  CHECK(s.find("  elementwise         1         1        0.001        0.008      8.00      50%   25.0%\n") != std::string::npos);
  CHECK(s.find("gpu ") == std::string::npos);
  // Sub-millisecond medians print in microseconds.
  BenchResult fast = SampleResult();
  fast.latency_ms = Summarize({0.0125, 0.02});
  fast.gpu_ms = Summarize({0.010});
  std::ostringstream fast_out;
  PrintBenchReport(fast, fast_out);
  CHECK(fast_out.str().find("latency us:  min 12.500  p50 12.500  p90 20.000") != std::string::npos);
  CHECK(fast_out.str().find("gpu us:      min 10.000") != std::string::npos);
  BenchResult steady = SampleResult();
  steady.latency_ms = Summarize({10, 10.5, 11});
  std::ostringstream steady_out;
  PrintBenchReport(steady, steady_out);
  CHECK(steady_out.str().find("latency varies") == std::string::npos);
}

}  // namespace
}  // namespace kiln::io
