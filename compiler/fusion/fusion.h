// The `fusion` stage: groups the canonical trace's fusible ops (compiler/fusion/rules.h)
// into maximal regions and replaces each region by one "kiln.Fused" node carrying its
// portable program (runtime/fused/program.h). Ops with no fused form stay as they are.
//
// Regions are grown backwards from their output: an op joins the region of its consumers
// when every consumer is in that one region and the rules allow it; otherwise its output
// is materialised and a new region starts there (a *cut*, logged with its reason). Each
// region has exactly one output value.
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"

namespace kiln::fusion {

struct FusionReport {
  int nodes_before = 0;    // ops of the canonical trace
  int nodes_after = 0;     // ops of the fusion trace (kernels and unfused ops)
  int fused_kernels = 0;   // "kiln.Fused" nodes
  std::vector<std::string> log;  // one line per region and per cut
};

// Returns the fusion trace. Errors: kInternal if a region's program fails validation (a
// compiler bug; the message names the region).
Result<ir::Trace> Fuse(const ir::Trace& canonical, FusionReport* report);

}  // namespace kiln::fusion
