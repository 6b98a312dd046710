// metrics.h: the service's counters in Prometheus text exposition format (version 0.0.4).
//
//   Metrics metrics(model, pool.size());
//   metrics.RecordRun(lease.index(), lease.context(), st.ok());  // after each Run, lease held
//   metrics.RecordResponse(res.status);                           // before each response is sent
//   std::string text = metrics.Render(pool.busy());               // GET /metrics
//
// Families (every time in seconds, every size in bytes):
//   kiln_run_calls_total, kiln_cache_hits_total, kiln_cache_misses_total   counters: the contexts'
//       Stats::calls, cache_hits, cache_misses summed over the pool
//   kiln_entry_hits_total{entry}            counter: EntryStats::hits per entry, summed over the pool
//   kiln_run_seconds                        histogram: whole Run calls (Stats::last_host_time)
//   kiln_cache_lookup_seconds               histogram: finding the entry, every call
//   kiln_prologue_seconds                   histogram: the passing prologue, calls that hit
//   kiln_computation_seconds                histogram: executing the instructions, successful calls
//   kiln_contexts, kiln_contexts_busy       gauges: pool size, contexts lent now
//   kiln_context_host_bytes                 gauge: ExecutionContext::memory_usage().host_bytes summed
//   kiln_http_requests_total{code}          counter: responses by HTTP status code
// Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/runtime.h"

class Metrics {
 public:
  Metrics(const kiln::Model& model, int contexts);

  // Call after each Run on context `index`, while still holding it: Stats may only be read by
  // the context's user (kiln/stats.h). `ok` is what Run returned.
  void RecordRun(int index, const kiln::ExecutionContext& context, bool ok);
  void RecordResponse(int http_status);
  std::string Render(int contexts_busy) const;

 private:
  // Upper bounds in seconds; the last bucket (+Inf) is implicit.
  static constexpr std::array<double, 16> kBuckets = {1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2,
                                                      5e-2, 0.1,    0.25,   0.5,  1,      2.5,    5,    10};
  struct Histogram {
    std::array<uint64_t, kBuckets.size() + 1> counts{};  // per bucket, not cumulative; last: +Inf
    uint64_t count = 0;
    double sum = 0;
    void Observe(int64_t ns);
    void Render(std::string& out, const char* name, const char* help) const;
  };
  // The counters of one context's Stats as of its last Run.
  struct ContextCounters {
    uint64_t calls = 0, cache_hits = 0, cache_misses = 0, host_bytes = 0;
    std::vector<uint64_t> entry_hits;
  };

  std::vector<std::string> entry_names_;
  mutable std::mutex mu_;  // guards everything below
  std::vector<ContextCounters> contexts_;
  Histogram run_, cache_lookup_, prologue_, computation_;
  std::map<int, uint64_t> responses_;
};
