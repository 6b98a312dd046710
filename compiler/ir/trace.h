// The trace: Kiln's compiler IR (docs/architecture.md, "The trace").
//
// A Trace is an ordered list of nodes (bound symbols) over a table of values (tensor
// proxies). Each value has a dtype and a symbolic shape; a value may also carry constant
// data (a weight or a folded result) or, for small integer tensors computed from shapes
// (Shape -> Gather -> Concat chains), its elements as Syms. Every compiler stage returns a
// new Trace and its printed form is stored in the artifact.
//
// Subgraphs (If branches, Loop and Scan bodies) are Blocks whose nodes use the same value
// table, so a branch may read values of the enclosing graph by id; a body's parameters are
// values of their own (Block::inputs), which the canonical stage binds per iteration.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/ir/sym.h"
#include "kiln/library.h"
#include "kiln/tensor.h"
#include "runtime/attrs.h"
#include "runtime/fused/program.h"

namespace kiln::ir {

// Constant tensor data owned by the compiler. Immutable once built; shared between traces.
struct ConstData {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // row-major, dims product * DTypeSize(dtype)

  int64_t num_elements() const;
  // Element i converted to int64 / double (integer, bool and float dtypes).
  int64_t IntAt(int64_t i) const;
  double FloatAt(int64_t i) const;
};

struct Value {
  std::string name;
  DType dtype = DType::kUndefined;
  SymShape shape;
  std::shared_ptr<const ConstData> data;   // set for constants
  std::optional<std::vector<Sym>> sym;     // elements as Syms, for small int tensors

  bool is_const() const { return data != nullptr; }
  int rank() const { return static_cast<int>(shape.size()); }
};

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;  // an absent optional input

struct Block;

// A condition on the input symbols the trace relies on (nonzero when it holds), and where it
// comes from, for the prologue's error message.
struct Guard {
  Sym condition;
  std::string origin;  // e.g. "node 'pool1' (MaxPool), whose output 'y' dim 2 must be >= 1"
};

// A run-time dim (Sym::RuntimeVar): a size a node's kernel reports once it has run, such as
// the count of NonZero's output. The memory plan reserves room for `bound`, an expression over
// the input symbols; the runtime rebinds the shapes after that node (runtime/context.cc).
struct RuntimeDim {
  std::string symbol;  // the Sym::RuntimeVar's name
  Sym bound;
  std::string origin;  // e.g. "node 'nz' (NonZero) output 'idx' dim 1"
  // > 0: `bound` is a room symbol (a Sym::Var no input binds, "y.rows") that the runtime sets,
  // starting at this many and doubling it when a call needs more: a run-time Loop's iterations
  // when nothing bounds them (runtime/context.cc RunRuntimeDims::Grow).
  int64_t initial_room = 0;
};

// A fused region, set on "kiln.Fused" nodes by the `fusion` stage: the portable program
// of one generated kernel, the symbolic value of each of its size arguments, and the ops
// it replaced ("Add 'add_1'"), in trace order.
struct FusedKernel {
  fused::Program program;
  std::vector<Sym> sizes;
  std::vector<std::string> members;
  std::vector<std::string> member_ops;  // the op type of each member ("Add"), same order
  std::vector<int> member_nodes;  // indices of those ops in the trace the fusion stage read
  std::string reduction;  // the reduction-family op of the region, or ""
};

// A condition a node runs under: the one-element bool value `cond` holds `value`. A run-time
// If (passes/canonicalize.h) puts its then-branch's nodes under {cond, true} and its
// else-branch's under {cond, false}; nested branches add theirs after the outer one's.
struct Predicate {
  ValueId cond = kNoValue;
  bool value = true;
  bool operator==(const Predicate&) const = default;
};

// Where a node runs on one backend (InstructionPlacement in the artifact).
struct Placement {
  std::string backend;  // "cuda", "cpu"
  Library library = Library::kCpuKernel;
  std::string reason;
};

struct Node {
  std::string op;    // registry op name: ONNX op type or "kiln.*"
  std::string name;  // ONNX node name, or a generated one; used in every error message
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  AttrMap attrs;
  // The node runs only when every predicate holds (a run-time If's branch); empty: always.
  // The conditions are read like inputs (the memory plan keeps them alive until the node has
  // run). Passes that merge nodes merge only nodes with equal predicates.
  std::vector<Predicate> when;
  // Set by the `executors` stage: what runs the node on each registered backend, and why
  // (runtime/claims.h), in registration order.
  std::vector<Placement> placements;
  // Named subgraphs, e.g. {"then_branch", ...}, {"else_branch", ...}.
  std::vector<std::pair<std::string, std::shared_ptr<Block>>> blocks;
  std::shared_ptr<const FusedKernel> fused;  // "kiln.Fused" only; immutable, shared by traces
};

struct Block {
  std::vector<ValueId> inputs;  // a Loop or Scan body's parameters (If branches have none)
  std::vector<Node> nodes;
  std::vector<ValueId> outputs;
};

// Per node of `nodes`: the index of the kiln.LoopBegin whose run-time Loop body holds it (the
// innermost), or -1. A loop's LoopBegin and LoopEnd are in the scope around it. Passes that
// merge nodes merge only nodes of one scope, as of one predicate list.
std::vector<int32_t> LoopScopes(const std::vector<Node>& nodes);

struct Trace {
  std::string stage;       // "import", "canonical", ...
  std::string provenance;  // one line: what produced this trace
  std::vector<std::string> notes;  // what the stage found, printed as "# " lines after the provenance
  std::vector<Value> values;
  std::vector<ValueId> inputs;   // runtime inputs, in model order
  std::vector<ValueId> outputs;  // model outputs, in model order
  Block body;
  // Assumptions the entry makes about its symbols (e.g. "T == 1" chosen for an If, or a
  // broadcast of two symbols that must be equal); each is checked by the prologue.
  std::vector<Guard> guards;
  // The run-time dims its nodes' meta functions made, once each (by symbol).
  std::vector<RuntimeDim> runtime_dims;

  ValueId AddValue(Value v) {
    values.push_back(std::move(v));
    return static_cast<ValueId>(values.size() - 1);
  }
  Value& value(ValueId id) { return values[id]; }
  const Value& value(ValueId id) const { return values[id]; }

  // Thunder-style text: one line per node, "t3 = Conv(x, w) # float32[N, 8, 28, 28]".
  std::string Print() const;
};

// The run-time dims (Trace::runtime_dims) that `node` sets: symbols of its outputs' shapes
// that no input's shape reads (NonZero's count, the length of a Slice whose end is computed
// from tensor data). Its CPU kernel reports them, so fusion leaves it alone.
std::vector<std::string> RuntimeDimsSetBy(const Trace& trace, const Node& node);

}  // namespace kiln::ir
