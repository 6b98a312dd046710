#include "compiler/passes/executors.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/backend.h"
#include "runtime/kernels/kernel.h"

namespace kiln::passes {
namespace {

bool IsLoopControl(const ir::Node& n) { return n.op == "kiln.LoopBegin" || n.op == "kiln.LoopEnd"; }

// On a device backend, consecutive nodes its claims leave to the CPU kernel form one CPU fallback
// region (one copy to the host of what it reads from the device, one wait, one copy back of what
// is read after it: runtime/executor/run_entry.h). The trace lists them, with each distinct reason
// once. A library node joins a region only at run time, when its library refuses it
// (Stats::last_fallbacks).
void NoteFallbackRegions(ir::Trace& trace, size_t backend) {
  const std::vector<ir::Node>& nodes = trace.body.nodes;
  const auto on_host = [&](size_t i) {
    return !IsLoopControl(nodes[i]) && nodes[i].placements[backend].library == Library::kCpuKernel;
  };
  std::vector<std::string> regions;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!on_host(i)) continue;
    const size_t begin = i;
    std::string members, reasons;
    for (; i < nodes.size() && on_host(i); ++i) {
      members += (members.empty() ? "" : ", ") + ("'" + nodes[i].name + "' (" + nodes[i].op + ")");
      const std::string& why = nodes[i].placements[backend].reason;
      if (reasons.find(why) == std::string::npos) reasons += (reasons.empty() ? "" : "; ") + why;
    }
    regions.push_back("CPU fallback region " + std::to_string(regions.size() + 1) + ", " + std::to_string(i - begin) +
                      (i - begin == 1 ? " node: " : " nodes: ") + members + " -- " + reasons);
    --i;  // the node that ended the region is looked at again
  }
  if (regions.empty()) return;
  const std::string& name = nodes[0].placements[backend].backend;
  trace.notes.push_back(std::to_string(regions.size()) + " CPU fallback region" + (regions.size() == 1 ? "" : "s") +
                        " on " + name + " (each: one copy to the host, one wait, one copy back)");
  trace.notes.insert(trace.notes.end(), regions.begin(), regions.end());
}

// The run-time Loops: on a device backend the host reads each iteration's condition.
void NoteLoops(ir::Trace& trace) {
  std::vector<std::string> loops;
  for (const ir::Node& n : trace.body.nodes)
    if (n.op == "kiln.LoopBegin")  // "<Loop>_begin" (the control-flow lowering's RuntimeLoop)
      loops.push_back("'" + (n.name.ends_with("_begin") ? n.name.substr(0, n.name.size() - 6) : n.name) + "'");
  if (loops.empty()) return;
  trace.notes.push_back(std::to_string(loops.size()) + " run-time Loop" + (loops.size() == 1 ? "" : "s") + " (" +
                        fmt::format("{}", fmt::join(loops, ", ")) +
                        "): on a device the host reads each iteration's condition (one copy to the host and one wait "
                        "per iteration) and its body's nodes run where they would outside a loop");
}

// The nodes each backend's libraries claim, with the library's reason: "3 nodes on onednn on
// cpu ('c1', 'c2', 'fc'): ...", where the runtime has the library and it takes the form (else the
// CPU kernel: Stats::last_fallbacks names each fallback).
void NoteLibraries(ir::Trace& trace, size_t backend) {
  const std::vector<ir::Node>& nodes = trace.body.nodes;
  for (const Library lib : {Library::kOneDnn, Library::kCublasLt, Library::kCudnn}) {
    std::vector<std::string> names;
    for (const ir::Node& n : nodes)
      if (n.placements[backend].library == lib) names.push_back("'" + n.name + "'");
    if (names.empty()) continue;
    trace.notes.push_back(std::to_string(names.size()) + (names.size() == 1 ? " node" : " nodes") + " on " +
                          std::string(LibraryTitle(lib)) + " on " + nodes[0].placements[backend].backend + " (" +
                          fmt::format("{}", fmt::join(names, ", ")) +
                          "), where the runtime has it and it takes the form; else the CPU kernel "
                          "(Stats::last_fallbacks names each fallback)");
  }
}

}  // namespace

void PlaceNode(ir::Node& node) {
  node.placements.clear();
  for (const BackendRegistration& r : RegisteredBackends()) {
    const Claim c = ClaimOn(r, node.op, node.fused != nullptr);
    node.placements.push_back({r.name, c.library, std::string(c.reason)});
  }
}

Result<ir::Trace> AssignExecutors(const ir::Trace& canonical) {
  ir::Trace trace = canonical;
  trace.stage = "executors";
  trace.provenance = "placements: what runs each node on each backend, from the backends' claims";
  for (ir::Node& node : trace.body.nodes) {
    if (!node.fused && !IsLoopControl(node) && !cpu::FindKernel(node.op))
      return Unimplemented("node '" + node.name + "' (" + node.op +
                           "): no backend can run this op (no CPU kernel registered)");
    PlaceNode(node);
  }
  const auto backends = RegisteredBackends();
  if (!trace.body.nodes.empty())
    for (size_t b = 0; b < backends.size(); ++b) {
      NoteLibraries(trace, b);
      if (backends[b].device != Device::kCpu) NoteFallbackRegions(trace, b);
    }
  NoteLoops(trace);
  return trace;
}

}  // namespace kiln::passes
