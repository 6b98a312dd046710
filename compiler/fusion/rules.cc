#include "compiler/fusion/rules.h"

#include <algorithm>
#include <map>

namespace kiln::fusion {
namespace {

std::vector<Lowering> AllLowerings() {
  std::vector<Lowering> all;
  for (auto part : {ElementwiseLowerings(), DataMovementLowerings(), ReductionLowerings(), MathLowerings()})
    all.insert(all.end(), part.begin(), part.end());
  return all;
}

bool Generated(FusionKind kind) {
  return kind == FusionKind::kElementwise || kind == FusionKind::kIndexMap || kind == FusionKind::kReduction;
}

struct Table {
  std::vector<FusionRule> rules;  // one per op table row, in its order
  Table() {
    std::map<std::string_view, Lowering> lowerings;
    for (const Lowering& l : AllLowerings()) lowerings.emplace(l.op, l);
    for (const OpInfo& info : AllOpInfo()) {
      FusionRule r{info.op, info.fusion, nullptr, nullptr, info.note};
      if (auto it = lowerings.find(info.op); it != lowerings.end() && Generated(info.fusion)) {
        r.lower = it->second.lower;
        r.domain = it->second.domain;
      }
      rules.push_back(r);
    }
  }
};

const Table& GetTable() {
  static const Table table;
  return table;
}

}  // namespace

const FusionRule* FindRule(std::string_view op) {
  const auto& rules = GetTable().rules;
  auto it = std::lower_bound(rules.begin(), rules.end(), op, [](const FusionRule& r, std::string_view o) { return r.op < o; });
  return it != rules.end() && it->op == op ? &*it : nullptr;
}

std::span<const FusionRule> AllRules() { return GetTable().rules; }

std::vector<std::string> LoweringProblems() {
  std::vector<std::string> problems;
  std::map<std::string_view, int> count;
  for (const Lowering& l : AllLowerings()) {
    if (++count[l.op] == 2) problems.push_back(std::string(l.op) + ": lowered twice (compiler/fusion/lower_*.cc)");
    const OpInfo* info = FindOpInfo(l.op);
    if (!info)
      problems.push_back(std::string(l.op) + ": a lowering but no row in the op table (runtime/op_table.cc)");
    else if (!Generated(info->fusion))
      problems.push_back(std::string(l.op) + ": a lowering, but the op table's kind is '" +
                         FusionKindName(info->fusion) + "'");
    else if ((info->fusion == FusionKind::kReduction) != (l.domain != nullptr))
      problems.push_back(std::string(l.op) + (l.domain ? ": a reduction domain, but the op table's kind is '" +
                                                             std::string(FusionKindName(info->fusion)) + "'"
                                                       : ": a reduction without its domain function"));
  }
  for (const OpInfo& info : AllOpInfo())
    if (Generated(info.fusion) && count.count(info.op) == 0)
      problems.push_back(std::string(info.op) + ": the op table's kind is '" + FusionKindName(info.fusion) +
                         "', but it has no lowering (compiler/fusion/lower_*.cc)");
  return problems;
}

}  // namespace kiln::fusion
