#include "runtime/executor/loop_pairs.h"

#include <string>
#include <vector>

#include "runtime/executor/loop_rules.h"
#include "runtime/kernels/selective.h"

namespace kiln {

Status PairLoops(PreparedEntry& pe) {
  const size_t n = pe.instructions.size();
  pe.loop_pair.assign(n, -1);
  // A selective runtime without a run-time Loop's control refused at load an artifact that has one
  // (runtime/verify.cc): there is nothing to pair, and the checks below are left out of it.
  if (!cpu::KeepsLoopControl()) return Status::Ok();
  std::vector<int32_t> open;  // the LoopBegins whose bodies enclose instruction k
  for (size_t k = 0; k < n; ++k) {
    const PreparedInstruction& pi = pe.instructions[k];
    if (pi.control == Control::kLoopBegin) {
      if (pi.num_outputs != pi.num_inputs)
        return DataLoss(pi.label + ": " + std::to_string(pi.num_inputs) + " inputs and " +
                        std::to_string(pi.num_outputs) + " outputs; a kiln.LoopBegin has one output per input");
      open.push_back(static_cast<int32_t>(k));
      continue;
    }
    if (pi.control != Control::kLoopEnd) continue;
    if (open.empty()) return DataLoss(pi.label + " ends a loop that no kiln.LoopBegin starts");
    const int32_t b = open.back();
    open.pop_back();
    const PreparedInstruction& begin = pe.instructions[static_cast<size_t>(b)];
    KILN_ASSIGN_OR_RETURN(const loop::EndOperands layout,
                          loop::EndLayout(pi.label, pi.attrs.GetInt("carried", -1), static_cast<size_t>(pi.num_inputs),
                                          static_cast<size_t>(pi.num_outputs)));
    const int32_t* bops = pe.operands.data() + begin.operands_begin;
    const int32_t* eops = pe.operands.data() + pi.operands_begin;
    bool pairs = begin.num_outputs == layout.carried + 2 && eops[0] == bops[0] && begin.when == pi.when;
    for (int32_t j = 0; pairs && j < begin.num_outputs; ++j) pairs = eops[1 + j] == bops[begin.num_inputs + j];
    if (!pairs)
      return DataLoss(pi.label + " does not end the loop " + begin.label +
                      " starts: its M, its parameters (inputs 1 to carried + 2) and its predicates must be those of "
                      "that kiln.LoopBegin");
    pe.loop_pair[static_cast<size_t>(b)] = static_cast<int32_t>(k);
    pe.loop_pair[k] = b;
  }
  if (!open.empty()) return DataLoss(pe.instructions[open.back()].label + " starts a loop that no kiln.LoopEnd ends");
  return Status::Ok();
}

}  // namespace kiln
