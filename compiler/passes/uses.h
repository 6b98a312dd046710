// Who reads each value of a trace, for the fusion stage's pattern passes (epilogue.h,
// attention.h): a chain may be rewritten only where each value in it has the one reader the
// pattern expects.
#pragma once

#include <vector>

#include "compiler/ir/trace.h"

namespace kiln::passes {

// Readers of every value: `uses` counts every reference (nested blocks and model outputs
// included); `readers` lists the top-level nodes reading it, once per reference.
struct Uses {
  std::vector<int> uses;
  std::vector<std::vector<int>> readers;

  explicit Uses(const ir::Trace& t) : uses(t.values.size(), 0), readers(t.values.size()) {
    for (size_t i = 0; i < t.body.nodes.size(); ++i) {
      for (ir::ValueId id : t.body.nodes[i].inputs) {
        if (id == ir::kNoValue) continue;
        ++uses[id];
        readers[id].push_back(static_cast<int>(i));
      }
      for (const auto& [name, block] : t.body.nodes[i].blocks) CountBlock(*block);
    }
    for (ir::ValueId id : t.outputs)
      if (id != ir::kNoValue) ++uses[id];
  }
  void CountBlock(const ir::Block& b) {
    for (const ir::Node& n : b.nodes) {
      for (ir::ValueId id : n.inputs)
        if (id != ir::kNoValue) ++uses[id];
      for (const auto& [name, block] : n.blocks) CountBlock(*block);
    }
    for (ir::ValueId id : b.outputs)
      if (id != ir::kNoValue) ++uses[id];
  }
  // The only reader of `id` when it has exactly one reference, from a top-level node.
  int SoleReader(ir::ValueId id) const {
    return uses[id] == 1 && readers[id].size() == 1 ? readers[id][0] : -1;
  }
};

}  // namespace kiln::passes
