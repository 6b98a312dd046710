// Meta function of Einsum (runtime/kernels/einsum.cc): parses the equation with the kernel's
// parser, so both agree on the labels, and unifies the dims that share a label.
#include <string>

#include "compiler/ops/families.h"
#include "compiler/ops/meta_util.h"
#include "runtime/kernels/einsum_equation.h"

namespace kiln::ir {
using namespace meta;
namespace {

Status EinsumMeta(MetaContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckMaxOutputs(ctx, 1));
  const Attr* eq = ctx.attrs().Find("equation");
  if (!eq || eq->kind != Attr::Kind::kString) return InvalidArgument("attribute 'equation': expected a string, found none");
  const int n = ctx.num_inputs();
  if (n < 1) return InvalidArgument("expected at least one input, found none");
  if (n > cpu::kEinsumMaxOperands)
    return Unimplemented(std::to_string(n) + " inputs, at most " + std::to_string(cpu::kEinsumMaxOperands) + " supported");
  std::vector<const Value*> in(n);
  int ranks[cpu::kEinsumMaxOperands];
  for (int k = 0; k < n; ++k) {
    KILN_ASSIGN_OR_RETURN(in[k], Need(ctx, k, "Inputs"));
    KILN_RETURN_IF_ERROR(CheckDType(*in[k], "Inputs", kNumeric));
    if (k) KILN_RETURN_IF_ERROR(CheckSameDType(*in[0], "0", *in[k], std::to_string(k)));
    ranks[k] = in[k]->rank();
  }
  cpu::EinsumSpec spec;
  Status parsed = cpu::ParseEinsum(eq->s, ranks, n, &spec);
  if (!parsed.ok()) return parsed;
  // Each label's dim: letters must agree; an ellipsis dim of 1 broadcasts.
  std::vector<std::optional<Sym>> size(cpu::kEinsumMaxLabels);
  for (int k = 0; k < n; ++k)
    for (int d = 0; d < spec.ranks[k]; ++d) {
      const int id = spec.labels[k][d];
      const Sym& dim = in[k]->shape[d];
      const bool broadcast = id >= cpu::kEinsumLetters;
      if (broadcast && dim.value() == 1) continue;
      if (!size[id] || (broadcast && size[id]->value() == 1)) {
        size[id] = dim;
        continue;
      }
      KILN_RETURN_IF_ERROR(Unify(ctx, *size[id], dim,
                                 "input " + std::to_string(k) + " dim " + std::to_string(d) + " (a label's size)"));
    }
  SymShape out;
  for (int j = 0; j < spec.out_rank; ++j) {
    const int id = spec.out_labels[j];
    out.push_back(size[id] ? *size[id] : Sym(1));
  }
  ctx.SetOutput(0, in[0]->dtype, out);
  return Status::Ok();
}

}  // namespace

void RegisterEinsumOps(std::vector<OpDef>& ops) { Def(ops, "Einsum", EinsumMeta); }

}  // namespace kiln::ir
