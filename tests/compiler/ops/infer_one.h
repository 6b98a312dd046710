// InferOne: runs one op's meta function on inputs given as (dtype, dims[, int64 data]),
// for meta-function tests that need a single node rather than a graph.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/sym.h"
#include "compiler/ir/trace.h"
#include "compiler/ops/registry.h"

namespace kiln::ir::testing {

struct In {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::optional<std::vector<int64_t>> ints = std::nullopt;  // constant data (int32/int64 dtypes)
  bool absent = false;
};
inline const In kAbsent{DType::kUndefined, {}, std::nullopt, true};  // an optional input left out

// The output Value (dtype, shape), or the meta function's error ("node 'n' (OP): ...").
inline Result<Value> InferOne(const std::string& op, const std::vector<In>& ins, const AttrMap& attrs = {}) {
  Trace t;
  Node n;
  n.op = op;
  n.name = "n";
  n.attrs = attrs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].absent) { n.inputs.push_back(kNoValue); continue; }
    Value v;
    v.name = "in" + std::to_string(i);
    v.dtype = ins[i].dtype;
    for (int64_t d : ins[i].dims) v.shape.push_back(Sym(d));
    if (ins[i].ints) {
      auto d = std::make_shared<ConstData>();
      d->dtype = ins[i].dtype;
      d->dims = ins[i].dims;
      for (int64_t x : *ins[i].ints) {
        const size_t at = d->bytes.size();
        if (ins[i].dtype == DType::kInt32) {
          const auto x32 = static_cast<int32_t>(x);
          d->bytes.resize(at + 4);
          std::memcpy(d->bytes.data() + at, &x32, 4);
        } else {
          d->bytes.resize(at + 8);
          std::memcpy(d->bytes.data() + at, &x, 8);
        }
      }
      v.data = d;
    }
    n.inputs.push_back(t.AddValue(std::move(v)));
  }
  Value out;
  out.name = "out";
  n.outputs.push_back(t.AddValue(std::move(out)));
  t.body.nodes.push_back(n);
  KILN_RETURN_IF_ERROR(InferNode(t, t.body.nodes.back()));
  return t.value(t.body.nodes.back().outputs[0]);
}

// The output's shape as text ("[2, N, 3]"); the meta function must have succeeded.
inline std::string Shape(const Result<Value>& r) {
  REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  return ShapeToString(r->shape);
}

// The symbolic dim the meta-function tests use for a batch.
inline const Sym N = Sym::Var("N");

}  // namespace kiln::ir::testing
