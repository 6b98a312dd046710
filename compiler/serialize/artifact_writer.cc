#include "compiler/serialize/artifact_writer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include <xxhash.h>

#include "compiler/ops/meta_util.h"
#include "kiln/runtime.h"
#include "kiln/version.h"
#include "runtime/artifact_header.h"
#include "runtime/checksum.h"
#include "runtime/cpu/native/abi.h"
#include "runtime/kernels/kernel.h"
#include "schema/kiln_generated.h"

namespace kiln::serialize {
namespace {

namespace fb = ::kiln::fb;
using FbOffsetString = flatbuffers::Offset<flatbuffers::String>;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Numbers the Syms of one entry into its expression table.
class ExprTable {
 public:
  int32_t SymbolIndex(const std::string& name) {
    for (size_t i = 0; i < symbols_.size(); ++i)
      if (symbols_[i] == name) return static_cast<int32_t>(i);
    symbols_.push_back(name);
    return static_cast<int32_t>(symbols_.size() - 1);
  }

  int32_t Add(const ir::Sym& s) {
    std::string key = s.ToString();
    if (auto it = index_.find(key); it != index_.end()) return it->second;
    if (s.is_derived()) {  // its definition's node, computed once (the canonical stage keeps its name unique)
      const int32_t id = Add(s.definition());
      index_.emplace(std::move(key), id);
      return id;
    }
    fb::ExprNode node;
    switch (s.op()) {
      case ir::SymOp::kConst: node = fb::ExprNode(fb::ExprOp::Const, *s.value(), 0); break;
      case ir::SymOp::kVar: node = fb::ExprNode(fb::ExprOp::Var, SymbolIndex(s.name()), 0); break;
      default: {
        int64_t a = Add(s.lhs());
        int64_t b = Add(s.rhs());
        node = fb::ExprNode(OpOf(s.op()), a, b);
      }
    }
    nodes_.push_back(node);
    int32_t id = static_cast<int32_t>(nodes_.size() - 1);
    index_.emplace(std::move(key), id);
    return id;
  }

  const std::vector<fb::ExprNode>& nodes() const { return nodes_; }
  const std::vector<std::string>& symbols() const { return symbols_; }

 private:
  static fb::ExprOp OpOf(ir::SymOp op) {
    switch (op) {
      case ir::SymOp::kAdd: return fb::ExprOp::Add;
      case ir::SymOp::kSub: return fb::ExprOp::Sub;
      case ir::SymOp::kMul: return fb::ExprOp::Mul;
      case ir::SymOp::kFloorDiv: return fb::ExprOp::FloorDiv;
      case ir::SymOp::kCeilDiv: return fb::ExprOp::CeilDiv;
      case ir::SymOp::kMod: return fb::ExprOp::Mod;
      case ir::SymOp::kMax: return fb::ExprOp::Max;
      case ir::SymOp::kMin: return fb::ExprOp::Min;
      case ir::SymOp::kEq: return fb::ExprOp::Eq;
      case ir::SymOp::kLt: return fb::ExprOp::Lt;
      case ir::SymOp::kFloorMulF32: return fb::ExprOp::FloorMulF32;
      default: return fb::ExprOp::Const;
    }
  }
  std::vector<fb::ExprNode> nodes_;
  std::vector<std::string> symbols_;
  std::unordered_map<std::string, int32_t> index_;
};

// The weights blob, shared by all entries. Equal constants are stored once: the same
// ConstData, or equal dtype, dims and bytes (each profile that fixes a dim imports the model
// again, so its weights arrive as new ConstData with the same contents).
class WeightsBlob {
 public:
  int64_t Add(const std::string& name, const std::shared_ptr<const ir::ConstData>& data) {
    if (auto it = by_pointer_.find(data.get()); it != by_pointer_.end()) return it->second;
    const uint64_t hash = XXH64(data->bytes.data(), data->bytes.size(), 0);
    auto [first, last] = by_content_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      const ir::ConstData& w = *weights_[it->second].data;
      if (w.dtype == data->dtype && w.dims == data->dims && w.bytes == data->bytes) {
        by_pointer_.emplace(data.get(), it->second);
        keep_.push_back(data);
        return it->second;
      }
    }
    uint64_t offset = AlignUp(bytes_.size(), kWeightAlignment);
    bytes_.resize(offset + data->bytes.size());
    if (!data->bytes.empty()) std::memcpy(bytes_.data() + offset, data->bytes.data(), data->bytes.size());
    weights_.push_back({name, data, offset});
    keep_.push_back(data);
    const int64_t id = static_cast<int64_t>(weights_.size() - 1);
    by_pointer_.emplace(data.get(), id);
    by_content_.emplace(hash, id);
    return id;
  }

  struct Item { std::string name; std::shared_ptr<const ir::ConstData> data; uint64_t offset; };
  const std::vector<Item>& items() const { return weights_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<Item> weights_;
  std::vector<std::shared_ptr<const ir::ConstData>> keep_;  // keeps by_pointer_'s keys alive
  std::unordered_map<const ir::ConstData*, int64_t> by_pointer_;
  std::unordered_multimap<uint64_t, int64_t> by_content_;  // XXH64 of the bytes -> weight
  std::vector<uint8_t> bytes_;
};

flatbuffers::Offset<fb::Attr> WriteAttr(flatbuffers::FlatBufferBuilder& b, const std::string& name, const Attr& a) {
  auto n = b.CreateString(name);
  FbOffsetString s = a.kind == Attr::Kind::kString ? b.CreateString(a.s) : FbOffsetString();
  auto ints = a.kind == Attr::Kind::kInts ? b.CreateVector(a.ints) : flatbuffers::Offset<flatbuffers::Vector<int64_t>>();
  auto floats = a.kind == Attr::Kind::kFloats ? b.CreateVector(a.floats) : flatbuffers::Offset<flatbuffers::Vector<float>>();
  return fb::CreateAttr(b, n, static_cast<fb::AttrKind>(a.kind), a.i, a.f, s, ints, floats);
}

fb::Storage StorageOf(passes::StorageKind k) {
  switch (k) {
    case passes::StorageKind::kInput: return fb::Storage::Input;
    case passes::StorageKind::kWeight: return fb::Storage::Weight;
    case passes::StorageKind::kArena: return fb::Storage::Arena;
    case passes::StorageKind::kSymbolic: return fb::Storage::Symbolic;
    default: return fb::Storage::Absent;
  }
}

// The trace's guards that read a run-time dim (`runtime`: checked during the run, once it is
// set; Entry.runtime_guards) or that read none (the prologue's).
std::vector<flatbuffers::Offset<fb::Guard>> WriteGuards(flatbuffers::FlatBufferBuilder& b, const ir::Trace& t,
                                                        ExprTable& exprs, bool runtime) {
  std::vector<flatbuffers::Offset<fb::Guard>> guards;
  for (const ir::Guard& g : t.guards)
    if (ir::meta::HasRuntimeVar(g.condition) == runtime)
      guards.push_back(fb::CreateGuard(b, exprs.Add(g.condition),
                                       b.CreateString(g.condition.ToString() + " from " + g.origin)));
  return guards;
}

Result<flatbuffers::Offset<fb::Prologue>> WritePrologue(flatbuffers::FlatBufferBuilder& b, const ir::Trace& t,
                                                        const std::map<std::string, compiler::DimRange>& ranges,
                                                        ExprTable& exprs) {
  std::vector<flatbuffers::Offset<fb::InputCheck>> inputs;
  for (ir::ValueId id : t.inputs) {
    const ir::Value& v = t.value(id);
    std::vector<flatbuffers::Offset<fb::DimCheck>> dims;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      const ir::Sym& s = v.shape[d];
      if (s.is_const()) {
        dims.push_back(fb::CreateDimCheck(b, -1, *s.value()));
      } else if (s.op() == ir::SymOp::kVar) {
        auto r = ranges.find(s.name());
        const compiler::DimRange range = r == ranges.end() ? compiler::DimRange{} : r->second;
        dims.push_back(fb::CreateDimCheck(b, exprs.SymbolIndex(s.name()), 0, range.min, range.max, range.divisor));
      } else {
        return Internal("input '" + v.name + "' dim " + std::to_string(d) + " is an expression (" +
                        s.ToString() + "); inputs may only have constant or symbol dims");
      }
    }
    // A value input's elements (passes/value_inputs.h): each a constant or a value symbol,
    // whose range is any int64 unless the profile names it.
    std::vector<flatbuffers::Offset<fb::DimCheck>> values;
    for (size_t k = 0; v.sym && k < v.sym->size(); ++k) {
      const ir::Sym& s = (*v.sym)[k];
      if (s.is_const()) {
        values.push_back(fb::CreateDimCheck(b, -1, *s.value()));
      } else if (s.op() == ir::SymOp::kVar) {
        auto r = ranges.find(s.name());
        const compiler::DimRange range = r == ranges.end() ? compiler::DimRange{INT64_MIN, INT64_MAX, 1} : r->second;
        values.push_back(fb::CreateDimCheck(b, exprs.SymbolIndex(s.name()), 0, range.min, range.max, range.divisor));
      } else {
        return Internal("input '" + v.name + "' element " + std::to_string(k) + " is an expression (" + s.ToString() +
                        "); a value input's elements may only be constants or symbols");
      }
    }
    inputs.push_back(fb::CreateInputCheck(b, b.CreateString(v.name), static_cast<int32_t>(v.dtype), b.CreateVector(dims),
                                          values.empty() ? 0 : b.CreateVector(values)));
  }
  return fb::CreatePrologue(b, b.CreateVector(inputs), b.CreateVector(WriteGuards(b, t, exprs, /*runtime=*/false)));
}


// The first node of `t` whose output has run-time dim `d` in a dim: its producer, as every
// reader comes later. -1 when no node has it (its node was folded or removed).
int32_t ProducerOf(const ir::Trace& t, const ir::RuntimeDim& d) {
  for (size_t i = 0; i < t.body.nodes.size(); ++i)
    for (ir::ValueId id : t.body.nodes[i].outputs) {
      if (id == ir::kNoValue) continue;
      for (const ir::Sym& dim : t.value(id).shape)
        for (const std::string& name : dim.Vars())
          if (name == d.symbol) return static_cast<int32_t>(i);
    }
  return -1;
}

// Whether node n's CPU kernel reports a run-time size (KernelDef::runtime_size), or it is the
// kiln.LoopEnd whose iterations size its scan outputs.
bool ReportsRuntimeSize(const ir::Node& n) {
  if (n.op == "kiln.LoopEnd") return true;
  const cpu::KernelDef* kernel = cpu::FindKernel(n.op);
  return kernel != nullptr && kernel->runtime_size;
}

bool HasRuntimeDims(const ir::Trace& t) {
  return std::any_of(t.runtime_dims.begin(), t.runtime_dims.end(),
                     [&](const ir::RuntimeDim& d) { return ProducerOf(t, d) >= 0; });
}

// The entry's run-time dims that its instructions use, each with its producer. Their bounds
// go into the expr table right after the guards, among the exprs the prologue evaluates.
Result<std::vector<fb::RuntimeDim>> WriteRuntimeDims(const ir::Trace& t, ExprTable& exprs) {
  std::vector<fb::RuntimeDim> out;
  for (const ir::RuntimeDim& d : t.runtime_dims) {
    const int32_t producer = ProducerOf(t, d);
    if (producer < 0) continue;
    const ir::Node& n = t.body.nodes[static_cast<size_t>(producer)];
    if (n.fused || !ReportsRuntimeSize(n))
      return Internal("run-time dim " + d.symbol + " from " + d.origin + " is first produced by node '" + n.name +
                      "' (" + n.op + "), which does not report it");
    out.emplace_back(exprs.SymbolIndex(d.symbol), producer, exprs.Add(d.bound));
  }
  return out;
}

// The room symbols of the run-time dims written (WriteRuntimeDims), whose bounds they are.
std::vector<fb::Room> WriteRooms(const ir::Trace& t, ExprTable& exprs) {
  std::vector<fb::Room> out;
  for (const ir::RuntimeDim& d : t.runtime_dims)
    if (d.initial_room > 0 && ProducerOf(t, d) >= 0) out.emplace_back(exprs.SymbolIndex(d.bound.name()), d.initial_room);
  return out;
}

Result<flatbuffers::Offset<fb::Entry>> WriteEntry(flatbuffers::FlatBufferBuilder& b, const EntryRecord& e,
                                                  const ArtifactRecord& artifact, WeightsBlob& weights) {
  const ir::Trace& t = e.plan.trace;
  ExprTable exprs;
  KILN_ASSIGN_OR_RETURN(auto prologue, WritePrologue(b, t, e.ranges, exprs));
  KILN_ASSIGN_OR_RETURN(const std::vector<fb::RuntimeDim> runtime_dims, WriteRuntimeDims(t, exprs));
  const std::vector<flatbuffers::Offset<fb::Guard>> runtime_guards = WriteGuards(b, t, exprs, /*runtime=*/true);
  const std::vector<fb::Room> rooms = WriteRooms(t, exprs);

  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (size_t id = 0; id < t.values.size(); ++id) {
    const ir::Value& v = t.values[id];
    const passes::TensorPlan& p = e.plan.tensors[id];
    std::vector<int32_t> shape;
    for (const ir::Sym& d : v.shape) shape.push_back(exprs.Add(d));
    int64_t index = -1;
    int32_t offset = -1;
    std::vector<int32_t> values;
    switch (p.storage) {
      case passes::StorageKind::kInput: index = p.input_index; break;
      case passes::StorageKind::kWeight: index = weights.Add(v.name, v.data); break;
      case passes::StorageKind::kArena: offset = exprs.Add(p.offset); break;
      case passes::StorageKind::kSymbolic:
        for (const ir::Sym& s : *v.sym) values.push_back(exprs.Add(s));
        break;
      default: break;
    }
    tensors.push_back(fb::CreateTensor(b, b.CreateString(v.name), static_cast<int32_t>(v.dtype), b.CreateVector(shape),
                                       StorageOf(p.storage), index, offset, b.CreateVector(values)));
  }

  std::vector<flatbuffers::Offset<fb::Instruction>> instructions;
  for (const ir::Node& n : t.body.nodes) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const auto& [name, a] : n.attrs.items()) attrs.push_back(WriteAttr(b, name, a));
    std::vector<int32_t> ins(n.inputs.begin(), n.inputs.end()), outs(n.outputs.begin(), n.outputs.end());
    int32_t kernel = -1;
    std::vector<int32_t> sizes;
    std::vector<FbOffsetString> member_ops;
    if (n.fused) {
      for (const std::string& op : n.fused->member_ops) member_ops.push_back(b.CreateString(op));
      auto it = artifact.kernel_of.find(n.fused.get());
      if (it == artifact.kernel_of.end()) return Internal("fused node '" + n.name + "' has no kernel in the kernel table");
      kernel = it->second;
      for (const ir::Sym& s : n.fused->sizes) sizes.push_back(exprs.Add(s));
    }
    std::vector<fb::Predicate> when;
    for (const ir::Predicate& p : n.when) when.emplace_back(p.cond, p.value);
    std::vector<flatbuffers::Offset<fb::Placement>> placements;
    std::string_view cuda;  // runtimes before placements read the CUDA one as `executor`
    for (const ir::Placement& p : n.placements) {
      const std::string_view library = LibraryName(p.library);
      placements.push_back(fb::CreatePlacement(b, b.CreateString(p.backend), b.CreateString(library)));
      if (p.backend == "cuda") cuda = library == "control" ? "cpu" : library;
    }
    instructions.push_back(fb::CreateInstruction(b, b.CreateString(n.op), b.CreateString(n.name),
                                                 b.CreateString(cuda), b.CreateVector(ins), b.CreateVector(outs),
                                                 b.CreateVector(attrs), kernel, b.CreateVector(sizes),
                                                 b.CreateVector(member_ops),
                                                 when.empty() ? 0 : b.CreateVectorOfStructs(when),
                                                 b.CreateVector(placements)));
  }
  int32_t arena = exprs.Add(e.plan.arena_bytes);
  std::vector<int32_t> inputs(t.inputs.begin(), t.inputs.end()), outputs(t.outputs.begin(), t.outputs.end());
  std::vector<flatbuffers::Offset<fb::Stage>> stages;
  for (const StageRecord& s : e.stages)
    stages.push_back(fb::CreateStage(b, b.CreateString(s.name), b.CreateString(s.trace), s.num_ops));
  std::vector<FbOffsetString> symbols;
  for (const std::string& s : exprs.symbols()) symbols.push_back(b.CreateString(s));
  return fb::CreateEntry(b, b.CreateString(e.name), prologue, b.CreateVector(symbols),
                         b.CreateVectorOfStructs(exprs.nodes()), b.CreateVector(tensors), b.CreateVector(instructions),
                         b.CreateVector(inputs), b.CreateVector(outputs), arena, b.CreateVector(stages),
                         runtime_dims.empty() ? 0 : b.CreateVectorOfStructs(runtime_dims),
                         runtime_guards.empty() ? 0 : b.CreateVector(runtime_guards),
                         rooms.empty() ? 0 : b.CreateVectorOfStructs(rooms),
                         e.backend.empty() ? 0 : b.CreateString(e.backend));
}

flatbuffers::Offset<fb::TensorSpec> WriteSpec(flatbuffers::FlatBufferBuilder& b, const fused::TensorSpec& t) {
  return fb::CreateTensorSpec(b, static_cast<int32_t>(t.dtype), b.CreateVector(t.dims));
}

flatbuffers::Offset<fb::Kernel> WriteKernel(flatbuffers::FlatBufferBuilder& b, const KernelRecord& k) {
  std::vector<FbOffsetString> archs;
  std::vector<flatbuffers::Offset<fb::KernelImage>> images;
  for (const KernelImageRecord& im : k.images) {
    archs.push_back(b.CreateString(im.arch));
    images.push_back(fb::CreateKernelImage(b, b.CreateString(im.arch), im.ptx, b.CreateVector(im.data)));
  }
  auto launch = fb::CreateLaunch(b, static_cast<fb::LaunchKind>(k.launch_kind), k.block, k.vector, k.index_bits);
  return fb::CreateKernel(b, b.CreateString(k.name), b.CreateVector(archs), b.CreateString(k.source),
                          WriteProgram(b, k.fused->program), launch, b.CreateVector(images),
                          BytesMoved(k.fused->program));
}

flatbuffers::Offset<fb::IoInfo> WriteIo(flatbuffers::FlatBufferBuilder& b, const ir::Value& v) {
  std::vector<int64_t> dims;
  std::vector<FbOffsetString> symbols;
  for (const ir::Sym& d : v.shape) {
    dims.push_back(d.value().value_or(-1));
    symbols.push_back(b.CreateString(d.is_const() ? std::string() : d.ToString()));
  }
  return fb::CreateIoInfo(b, b.CreateString(v.name), static_cast<int32_t>(v.dtype), b.CreateVector(dims),
                          b.CreateVector(symbols));
}

// Input or output `k` of the model as the entries see it: each dim the entries agree on;
// else the one symbolic form the symbolic entries share (the constants are its
// specialisations: N=1 and N in 1..64 give N); else the forms joined by '|' ("1|4").
flatbuffers::Offset<fb::IoInfo> WriteMergedIo(flatbuffers::FlatBufferBuilder& b, const std::vector<EntryRecord>& entries,
                                              bool input, size_t k) {
  auto value = [&](const EntryRecord& e) -> const ir::Value& {
    const ir::Trace& t = e.plan.trace;
    return t.value(input ? t.inputs[k] : t.outputs[k]);
  };
  ir::Value merged = value(entries.front());
  for (size_t d = 0; d < merged.shape.size(); ++d) {
    std::vector<ir::Sym> forms;
    for (const EntryRecord& e : entries) {
      const ir::Sym& s = value(e).shape[d];
      if (std::none_of(forms.begin(), forms.end(), [&](const ir::Sym& f) { return f.Same(s); })) forms.push_back(s);
    }
    if (forms.size() == 1) continue;
    std::vector<ir::Sym> symbolic;
    for (const ir::Sym& f : forms)
      if (!f.is_const()) symbolic.push_back(f);
    if (symbolic.size() == 1) {
      merged.shape[d] = symbolic[0];
      continue;
    }
    std::string joined;
    for (const ir::Sym& f : forms) joined += (joined.empty() ? "" : "|") + f.ToString();
    merged.shape[d] = ir::Sym::Var(joined);
  }
  return WriteIo(b, merged);
}

}  // namespace

flatbuffers::Offset<fb::Program> WriteProgram(flatbuffers::FlatBufferBuilder& b, const fused::Program& p) {
  std::vector<flatbuffers::Offset<fb::TensorSpec>> inputs;
  for (const auto& t : p.inputs) inputs.push_back(WriteSpec(b, t));
  std::vector<flatbuffers::Offset<fb::ProgramOutput>> outputs;
  for (const auto& o : p.outputs) outputs.push_back(fb::CreateProgramOutput(b, WriteSpec(b, o.tensor), o.value, o.per_row));
  std::vector<fb::ProgramNode> nodes;
  for (const auto& n : p.nodes)
    nodes.emplace_back(static_cast<uint8_t>(n.op), static_cast<uint8_t>(n.type), n.a, n.b, n.c, n.i, n.f);
  std::vector<fb::ProgramReduction> reductions;
  for (const auto& r : p.reductions) reductions.emplace_back(static_cast<uint8_t>(r.op), r.value);
  std::vector<FbOffsetString> checks;
  for (const auto& c : p.checks) checks.push_back(b.CreateString(c));
  return fb::CreateProgram(b, b.CreateVector(p.domain), p.reduce_axes, p.num_sizes, b.CreateVector(inputs),
                           b.CreateVector(outputs), b.CreateVectorOfStructs(nodes), b.CreateVectorOfStructs(reductions),
                           b.CreateVector(checks));
}

int64_t BytesMoved(const fused::Program& program) {
  int64_t total = 0;
  auto add = [&](const fused::TensorSpec& t) {
    int64_t n = static_cast<int64_t>(DTypeSize(t.dtype));
    for (int64_t d : t.dims) {
      if (d < 0 || total < 0) return void(total = -1);
      if (__builtin_mul_overflow(n, d, &n)) return void(total = -1);
    }
    if (total >= 0 && __builtin_add_overflow(total, n, &total)) total = -1;
  };
  for (const auto& t : program.inputs) add(t);
  for (const auto& o : program.outputs) add(o.tensor);
  return total;
}

Result<std::vector<uint8_t>> WriteArtifact(const ArtifactRecord& artifact) {
  if (artifact.entries.empty()) return Internal("WriteArtifact: no entries");
  flatbuffers::FlatBufferBuilder b(1 << 16);
  WeightsBlob weights;
  std::vector<flatbuffers::Offset<fb::Entry>> entries;
  for (const EntryRecord& e : artifact.entries) {
    KILN_ASSIGN_OR_RETURN(auto entry, WriteEntry(b, e, artifact, weights));
    entries.push_back(entry);
  }
  const ir::Trace& first = artifact.entries.front().plan.trace;
  std::vector<flatbuffers::Offset<fb::IoInfo>> inputs, outputs;
  for (size_t k = 0; k < first.inputs.size(); ++k)
    inputs.push_back(artifact.inputs.empty() ? WriteMergedIo(b, artifact.entries, true, k)
                                             : WriteIo(b, artifact.inputs[k]));
  for (size_t k = 0; k < first.outputs.size(); ++k) outputs.push_back(WriteMergedIo(b, artifact.entries, false, k));
  std::vector<flatbuffers::Offset<fb::Weight>> wtable;
  for (const auto& w : weights.items())
    wtable.push_back(fb::CreateWeight(b, b.CreateString(w.name), static_cast<int32_t>(w.data->dtype),
                                      b.CreateVector(w.data->dims), w.offset, w.data->bytes.size()));
  std::vector<FbOffsetString> archs;
  for (const std::string& a : artifact.target_archs) archs.push_back(b.CreateString(a));
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (const KernelRecord& k : artifact.kernels) kernels.push_back(WriteKernel(b, k));
  // Value checks need format 4, run-time dims and checks of floating-point values format 5,
  // predicated instructions (a run-time If) format 6, a run-time Loop's control format 7,
  // room symbols format 8, float32 value symbols (and FloorMulF32, which only they feed) format 9;
  // an artifact without them stays at the version before, which older runtimes read
  // (schema/VERSIONS.md).
  bool value_symbols = false, format5 = false, predicates = false, loops = false, rooms = false, float_symbols = false;
  for (const EntryRecord& e : artifact.entries) {
    for (const ir::RuntimeDim& d : e.plan.trace.runtime_dims) rooms = rooms || d.initial_room > 0;
    for (const ir::Node& n : e.plan.trace.body.nodes) {
      predicates = predicates || !n.when.empty();
      loops = loops || n.op == "kiln.LoopBegin";
    }
    for (ir::ValueId id : e.plan.trace.inputs) {
      const ir::Value& v = e.plan.trace.value(id);
      value_symbols = value_symbols || v.sym.has_value();
      format5 = format5 || (v.sym.has_value() && ir::meta::IsFloat(v.dtype));
      for (size_t k = 0; v.sym && ir::meta::IsFloat(v.dtype) && k < v.sym->size(); ++k)
        float_symbols = float_symbols || !(*v.sym)[k].is_const();
    }
    format5 = format5 || HasRuntimeDims(e.plan.trace);
  }
  const uint32_t version = float_symbols   ? kFloatSymbolsFormatVersion
                           : rooms         ? kRoomsFormatVersion
                           : loops         ? kLoopsFormatVersion
                           : predicates    ? kPredicatesFormatVersion
                           : format5       ? kRuntimeDimsFormatVersion
                           : value_symbols ? kValueSymbolsFormatVersion
                                           : kValueSymbolsFormatVersion - 1;
  std::vector<flatbuffers::Offset<fb::NativeCode>> native;
  for (const NativeCodeRecord& n : artifact.native_code) {
    std::vector<flatbuffers::Offset<fb::NativeKernel>> ks;
    for (size_t k = 0; k < n.kernels.size(); ++k) ks.push_back(fb::CreateNativeKernel(b, n.kernels[k], n.offsets[k]));
    auto code = b.CreateVector(n.code);
    native.push_back(fb::CreateNativeCode(b, b.CreateString(n.target), native::kAbiVersion, code, b.CreateVector(ks)));
  }
  const ProvenanceRecord& p = artifact.provenance;
  std::vector<FbOffsetString> flags;
  for (const std::string& f : p.flags) flags.push_back(b.CreateString(f));
  std::vector<flatbuffers::Offset<fb::LibraryVersion>> libraries;
  for (const auto& [name, version_text] : p.libraries)
    libraries.push_back(fb::CreateLibraryVersion(b, b.CreateString(name), b.CreateString(version_text)));
  auto provenance = fb::CreateProvenance(b, b.CreateString(KILN_VERSION_STRING), b.CreateVector(flags),
                                         b.CreateString(p.model_sha256), b.CreateVector(libraries));
  auto root = fb::CreateArtifact(b, version, b.CreateString("kiln " KILN_VERSION_STRING), b.CreateString(artifact.source),
                                 b.CreateVector(archs), b.CreateString(artifact.precision), b.CreateVector(inputs),
                                 b.CreateVector(outputs), b.CreateVector(wtable),
                                 b.CreateVector(kernels), b.CreateVector(entries),
                                 native.empty() ? 0 : b.CreateVector(native), provenance);
  b.Finish(root, fb::ArtifactIdentifier());

  ArtifactHeader h{};
  std::memcpy(h.magic, kArtifactMagic, sizeof(h.magic));
  h.header_bytes = sizeof(ArtifactHeader);
  h.format_version = version;
  h.flatbuffer_offset = sizeof(ArtifactHeader);
  h.flatbuffer_size = b.GetSize();
  h.weights_offset = AlignUp(h.flatbuffer_offset + h.flatbuffer_size, kWeightsAlignment);
  h.weights_size = weights.bytes().size();
  h.weights_checksum = ArtifactChecksum(version, weights.bytes().data(), weights.bytes().size());
  h.flatbuffer_checksum = ArtifactChecksum(version, b.GetBufferPointer(), b.GetSize());

  std::vector<uint8_t> out(h.weights_offset + h.weights_size, 0);
  std::memcpy(out.data(), &h, sizeof(h));
  std::memcpy(out.data() + h.flatbuffer_offset, b.GetBufferPointer(), b.GetSize());
  if (h.weights_size) std::memcpy(out.data() + h.weights_offset, weights.bytes().data(), h.weights_size);
  return out;
}

}  // namespace kiln::serialize
