// compiler/trace/state.h: what a kiln::trace::Builder records (include/kiln/trace.h), shared by
// the Builder and every Tensor it made: the `import` trace being built, the first error, and
// the names in use. Thread-compatible, as the Builder.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "compiler/ir/trace.h"
#include "kiln/status.h"
#include "kiln/trace.h"

namespace kiln::trace::internal {

struct State {
  std::string model_name;
  ir::Trace trace;  // stage "import"; values have dtypes and shapes from the op registry
  Status error;     // the first error; every later op does nothing
  std::unordered_set<std::string> names;  // value and node names (one namespace)

  // `hint`, or `hint` with the first free suffix "_1", "_2", ..., now reserved.
  std::string UniqueName(const std::string& hint);
  // Keeps `s` when it is the first error.
  void Fail(Status s);
  // A constant value named `name` (already unique) holding `data`.
  ir::ValueId AddConst(const std::string& name, std::shared_ptr<const ir::ConstData> data);
  // Appends node `op` named `name` (already unique; its output value gets the same name) and
  // infers its output with the op registry. On error the node is dropped, the error is
  // recorded with `context` in front, and kNoValue is returned.
  ir::ValueId AddNode(std::string op, const std::string& name, std::vector<ir::ValueId> inputs, AttrMap attrs,
                      const std::string& context);
  // "'x' float32[N, 3]", for messages.
  std::string Describe(ir::ValueId id) const;

  // Access to Tensor's handle for the implementation.
  static const std::shared_ptr<State>& Of(const Tensor& t) { return t.state_; }
  static ir::ValueId Id(const Tensor& t) { return t.id_; }
  static Tensor Make(std::shared_ptr<State> state, ir::ValueId id);
};

}  // namespace kiln::trace::internal
