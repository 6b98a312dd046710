// kiln::trace::Builder and Tensor (include/kiln/trace.h), and the recording State they share.
#include <new>

#include <fmt/format.h>

#include "compiler/compile.h"
#include "kiln/tensor_files.h"
#include "compiler/ops/registry.h"
#include "compiler/profile.h"
#include "tools/io/replace_file.h"
#include "compiler/trace/import_traced.h"
#include "compiler/trace/state.h"
#include "runtime/shape_text.h"
#include "kiln/trace.h"

namespace kiln::trace {
namespace internal {

std::string State::UniqueName(const std::string& hint) {
  std::string name = hint;
  for (int k = 1; names.count(name); ++k) name = hint + "_" + std::to_string(k);
  names.insert(name);
  return name;
}

void State::Fail(Status s) {
  if (error.ok()) error = std::move(s);
}

ir::ValueId State::AddConst(const std::string& name, std::shared_ptr<const ir::ConstData> data) {
  ir::Value v;
  v.name = name;
  v.dtype = data->dtype;
  for (int64_t d : data->dims) v.shape.push_back(ir::Sym(d));
  v.data = std::move(data);
  return trace.AddValue(std::move(v));
}

ir::ValueId State::AddNode(std::string op, const std::string& name, std::vector<ir::ValueId> inputs, AttrMap attrs,
                           const std::string& context) {
  ir::Node node;
  node.op = std::move(op);
  node.name = name;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  ir::Value out;
  out.name = name;
  node.outputs = {trace.AddValue(std::move(out))};
  Status st = ir::InferNode(trace, node);
  if (!st.ok()) {
    trace.values.pop_back();
    Fail(st.WithContext(context));
    return ir::kNoValue;
  }
  trace.body.nodes.push_back(std::move(node));
  return trace.body.nodes.back().outputs[0];
}

std::string State::Describe(ir::ValueId id) const {
  const ir::Value& v = trace.value(id);
  return fmt::format("'{}' {}{}", v.name, DTypeName(v.dtype), ir::ShapeToString(v.shape));
}

Tensor State::Make(std::shared_ptr<State> state, ir::ValueId id) {
  Tensor t;
  t.state_ = std::move(state);
  t.id_ = id;
  return t;
}

}  // namespace internal

using internal::State;

// ---- Tensor -----------------------------------------------------------------------------

bool Tensor::valid() const { return state_ && id_ >= 0; }

std::string Tensor::name() const { return valid() ? state_->trace.value(id_).name : ""; }

DType Tensor::dtype() const { return valid() ? state_->trace.value(id_).dtype : DType::kUndefined; }

std::vector<Dim> Tensor::shape() const {
  std::vector<Dim> dims;
  if (!valid()) return dims;
  for (const ir::Sym& s : state_->trace.value(id_).shape) {
    if (s.is_const()) dims.emplace_back(*s.value());
    else dims.emplace_back(s.ToString());
  }
  return dims;
}

// ---- Builder ----------------------------------------------------------------------------

namespace {

// Runs `body`, turning an allocation failure into a recorded error: no call throws.
template <typename F>
auto NoThrow(State& state, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    state.Fail(ResourceExhausted("out of memory tracing model '" + state.model_name + "'"));
    return decltype(body())();
  }
}

}  // namespace

Builder::Builder(std::string name) : state_(std::make_shared<State>()) {
  state_->model_name = std::move(name);
  state_->trace.stage = "import";
  state_->trace.provenance = "traced by kiln::trace::Builder '" + state_->model_name + "'";
}

Tensor Builder::Input(std::string name, DType dtype, std::vector<Dim> shape) {
  return NoThrow(*state_, [&] {
    if (!state_->error.ok()) return State::Make(state_, ir::kNoValue);
    const std::string where = "input '" + name + "'";
    ir::Value v;
    if (!IsValidDType(static_cast<int32_t>(dtype))) {
      state_->Fail(InvalidArgument(fmt::format("{}: dtype {} is not a valid kiln::DType", where,
                                               static_cast<int32_t>(dtype))));
      return State::Make(state_, ir::kNoValue);
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d].is_symbol() && shape[d].symbol().empty()) {
        state_->Fail(InvalidArgument(fmt::format("{}: dim {} is neither a size nor a symbol name (empty name)", where, d)));
        return State::Make(state_, ir::kNoValue);
      }
      v.shape.push_back(shape[d].is_symbol() ? ir::Sym::Var(shape[d].symbol()) : ir::Sym(shape[d].size()));
    }
    v.name = state_->UniqueName(name);
    v.dtype = dtype;
    const ir::ValueId id = state_->trace.AddValue(std::move(v));
    state_->trace.inputs.push_back(id);
    return State::Make(state_, id);
  });
}

Tensor Builder::Parameter(std::string name, std::vector<int64_t> dims, std::span<const float> values) {
  return NoThrow(*state_, [&] {
    if (!state_->error.ok()) return State::Make(state_, ir::kNoValue);
    auto data = std::make_shared<ir::ConstData>();
    data->dtype = DType::kFloat32;
    data->dims = std::move(dims);
    for (size_t d = 0; d < data->dims.size(); ++d)
      if (data->dims[d] < 0) {
        state_->Fail(InvalidArgument(fmt::format("parameter '{}': dim {} is {}, expected >= 0", name, d, data->dims[d])));
        return State::Make(state_, ir::kNoValue);
      }
    const int64_t n = data->num_elements();
    if (n != static_cast<int64_t>(values.size())) {
      state_->Fail(InvalidArgument(fmt::format("parameter '{}': dims {} hold {} elements, found {} values", name,
                                               ShapeText(data->dims), n, values.size())));
      return State::Make(state_, ir::kNoValue);
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
    data->bytes.assign(bytes, bytes + values.size_bytes());
    return State::Make(state_, state_->AddConst(state_->UniqueName(name), std::move(data)));
  });
}

Tensor Builder::ParameterFromNpy(std::string name, const std::string& path) {
  return NoThrow(*state_, [&] {
    if (!state_->error.ok()) return State::Make(state_, ir::kNoValue);
    Result<io::HostTensor> read = io::ReadNpyFile(path);
    if (!read.ok()) {
      state_->Fail(read.status().WithContext("parameter '" + name + "'"));
      return State::Make(state_, ir::kNoValue);
    }
    auto data = std::make_shared<ir::ConstData>();
    data->dtype = read->dtype;
    data->dims = std::move(read->dims);
    data->bytes = std::move(read->bytes);
    return State::Make(state_, state_->AddConst(state_->UniqueName(name), std::move(data)));
  });
}

void Builder::Output(const Tensor& t, std::string name) {
  NoThrow(*state_, [&] {
    if (!state_->error.ok() || (State::Of(t) == state_ && !t.valid())) return 0;  // an earlier error
    const std::string where = fmt::format("output #{}{}", state_->trace.outputs.size(),
                                          name.empty() ? "" : " '" + name + "'");
    if (!t.valid() || State::Of(t) != state_) {
      state_->Fail(InvalidArgument(where + (t.valid() ? ": the tensor '" + t.name() + "' belongs to another Builder"
                                                      : ": an invalid (default-constructed) Tensor")));
      return 0;
    }
    const ir::ValueId id = State::Id(t);
    ir::Value& v = state_->trace.value(id);
    for (ir::ValueId in : state_->trace.inputs)
      if (in == id) {
        state_->Fail(InvalidArgument(where + ": '" + v.name + "' is an input; output an op's result"));
        return 0;
      }
    if (v.is_const()) {
      state_->Fail(InvalidArgument(where + ": '" + v.name + "' is a parameter; output an op's result"));
      return 0;
    }
    for (ir::ValueId out : state_->trace.outputs)
      if (out == id) {
        state_->Fail(InvalidArgument(where + ": '" + v.name + "' is already an output"));
        return 0;
      }
    if (!name.empty() && name != v.name) {
      if (state_->names.count(name)) {
        state_->Fail(InvalidArgument(where + ": the name is already used by another tensor or op"));
        return 0;
      }
      state_->names.insert(name);
      v.name = name;
    }
    state_->trace.outputs.push_back(id);
    state_->trace.body.outputs.push_back(id);
    return 0;
  });
}

Status Builder::status() const { return state_->error; }

std::string Builder::Print() const {
  try {
    return state_->trace.Print();
  } catch (const std::bad_alloc&) {
    return "";
  }
}

Result<std::vector<uint8_t>> Builder::Compile(const CompileOptions& options) const {
  try {
    KILN_RETURN_IF_ERROR(state_->error);
    if (state_->trace.outputs.empty())
      return InvalidArgument("model '" + state_->model_name + "' has no outputs (call Builder::Output)");
    compiler::CompileOptions copts;
    if (options.archs) copts.archs = *options.archs;
    for (const std::string& text : options.profiles) {
      KILN_ASSIGN_OR_RETURN(compiler::Profile p, compiler::ParseProfile(text));
      copts.profiles.push_back(std::move(p));
    }
    copts.fuse = options.fuse;
    copts.log = options.log;
    const ir::Trace& recorded = state_->trace;
    auto import = [&](const std::map<std::string, std::vector<int64_t>>& shapes) {
      return ImportTraced(recorded, shapes);
    };
    return compiler::CompileImported("traced model '" + state_->model_name + "'", "", import, copts, nullptr);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory compiling traced model '" + state_->model_name + "'");
  }
}

Status Builder::CompileToFile(const std::string& path, const CompileOptions& options) const {
  Result<std::vector<uint8_t>> bytes = Compile(options);
  if (!bytes.ok()) return bytes.status();
  return io::WriteArtifactFile(path, *bytes);
}

}  // namespace kiln::trace
