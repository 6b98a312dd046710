#include "metrics.h"

#include <cstdio>

namespace {

void Family(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A label value with \, " and newline escaped as the exposition format requires.
std::string LabelValue(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c == '\n' ? std::string("\\n") : std::string(1, c);
  }
  return out;
}

}  // namespace

Metrics::Metrics(const kiln::Model& model, int contexts) : contexts_(contexts) {
  for (const kiln::EntryInfo& e : model.entries()) entry_names_.push_back(e.name);
  for (ContextCounters& c : contexts_) c.entry_hits.resize(entry_names_.size());
}

void Metrics::Histogram::Observe(int64_t ns) {
  const double s = static_cast<double>(ns) * 1e-9;
  size_t b = 0;
  while (b < kBuckets.size() && s > kBuckets[b]) ++b;
  ++counts[b];
  ++count;
  sum += s;
}

void Metrics::Histogram::Render(std::string& out, const char* name, const char* help) const {
  Family(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    cumulative += counts[b];
    const std::string le = b < kBuckets.size() ? Number(kBuckets[b]) : "+Inf";
    out += std::string(name) + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += std::string(name) + "_sum " + Number(sum) + "\n";
  out += std::string(name) + "_count " + std::to_string(count) + "\n";
}

void Metrics::RecordRun(int index, const kiln::ExecutionContext& context, bool ok) {
  const kiln::Stats& s = context.stats();
  std::lock_guard<std::mutex> lock(mu_);
  ContextCounters& c = contexts_[index];
  const bool hit = s.cache_hits > c.cache_hits;
  c.calls = s.calls;
  c.cache_hits = s.cache_hits;
  c.cache_misses = s.cache_misses;
  c.host_bytes = context.memory_usage().host_bytes;
  for (size_t e = 0; e < c.entry_hits.size() && e < s.entries.size(); ++e) c.entry_hits[e] = s.entries[e].hits;
  run_.Observe(s.last_host_time());
  cache_lookup_.Observe(s.last_cache_lookup_time());
  if (hit) prologue_.Observe(s.last_prologue_time());
  if (ok) computation_.Observe(s.last_computation_time());
}

void Metrics::RecordResponse(int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++responses_[http_status];
}

std::string Metrics::Render(int contexts_busy) const {
  std::lock_guard<std::mutex> lock(mu_);
  ContextCounters total;
  total.entry_hits.resize(entry_names_.size());
  for (const ContextCounters& c : contexts_) {
    total.calls += c.calls;
    total.cache_hits += c.cache_hits;
    total.cache_misses += c.cache_misses;
    total.host_bytes += c.host_bytes;
    for (size_t e = 0; e < c.entry_hits.size(); ++e) total.entry_hits[e] += c.entry_hits[e];
  }
  std::string out;
  auto single = [&](const char* name, const char* type, const char* help, uint64_t value) {
    Family(out, name, type, help);
    out += std::string(name) + " " + std::to_string(value) + "\n";
  };
  single("kiln_run_calls_total", "counter", "ExecutionContext::Run calls, successful or not (Stats::calls summed over the pool).", total.calls);
  single("kiln_cache_hits_total", "counter", "Run calls whose inputs passed an entry's prologue (Stats::cache_hits).", total.cache_hits);
  single("kiln_cache_misses_total", "counter", "Run calls whose inputs passed no entry's prologue (Stats::cache_misses).", total.cache_misses);
  Family(out, "kiln_entry_hits_total", "counter", "Run calls each entry served (EntryStats::hits), by entry name.");
  for (size_t e = 0; e < entry_names_.size(); ++e) {
    out += "kiln_entry_hits_total{entry=\"" + LabelValue(entry_names_[e]) + "\"} " + std::to_string(total.entry_hits[e]) + "\n";
  }
  run_.Render(out, "kiln_run_seconds", "Whole Run calls (Stats::last_host_time).");
  cache_lookup_.Render(out, "kiln_cache_lookup_seconds", "Finding the entry, prologues that failed included, every call.");
  prologue_.Render(out, "kiln_prologue_seconds", "The prologue of the entry that passed, calls that hit.");
  computation_.Render(out, "kiln_computation_seconds", "Executing the entry's instructions, successful calls.");
  single("kiln_contexts", "gauge", "ExecutionContexts in the pool.", contexts_.size());
  single("kiln_contexts_busy", "gauge", "ExecutionContexts lent to a request now.", static_cast<uint64_t>(contexts_busy));
  single("kiln_context_host_bytes", "gauge", "Host memory held by the contexts (arena and scratch), as of their last Run.", total.host_bytes);
  Family(out, "kiln_http_requests_total", "counter", "HTTP responses sent, by status code.");
  for (const auto& [code, n] : responses_) {
    out += "kiln_http_requests_total{code=\"" + std::to_string(code) + "\"} " + std::to_string(n) + "\n";
  }
  return out;
}
