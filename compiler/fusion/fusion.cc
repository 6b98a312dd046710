#include "compiler/fusion/fusion.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "compiler/fusion/rules.h"

namespace kiln::fusion {
namespace {

using ir::ValueId;

constexpr int kNotFused = -1;
constexpr int kSeveral = -2;  // a multi-output node: each output is its own region

struct Producer {
  int node = -1;
  int output = 0;
};

struct Region {
  ValueId root = ir::kNoValue;
  int root_node = -1;
  std::vector<int> members;  // node indices, in trace order once built
  int reduction = -1;        // node index of the reduction-family member
};

std::string Describe(const ir::Node& n) { return n.op + " '" + n.name + "'"; }

// Lowers one region into a program: the LowerContext the op lowerings see.
class RegionLowering : public LowerContext {
 public:
  RegionLowering(const ir::Trace& t, const std::vector<Producer>& producers, const std::set<int>& members)
      : t_(t), producers_(producers), members_(members), b_(&kernel_.program) {}

  ProgramBuilder& builder() override { return b_; }
  const ir::Trace& trace() const override { return t_; }
  std::vector<int32_t> DomainCoords() override {
    std::vector<int32_t> c;
    for (size_t k = 0; k < kernel_.program.domain.size(); ++k) c.push_back(b_.Coord(static_cast<int>(k)));
    return c;
  }

  Result<int32_t> ValueAt(ValueId v, std::span<const int32_t> coords) override {
    const ir::Value& val = t_.value(v);
    if (static_cast<int>(coords.size()) != val.rank())
      return Internal(fmt::format("'{}' read with {} coordinates, has rank {}", val.name, coords.size(), val.rank()));
    auto key = std::make_pair(v, std::vector<int32_t>(coords.begin(), coords.end()));
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    fused::ScalarType type;
    if (!fused::ComputeTypeOf(val.dtype, &type))
      return Unimplemented("'" + val.name + "' has dtype " + std::string(DTypeName(val.dtype)) + ", which a fused program cannot hold");
    int32_t node;
    const Producer p = producers_[v];
    if (p.node >= 0 && members_.count(p.node)) {
      ++times_lowered_[v];
      const ir::Node& n = t_.body.nodes[p.node];
      const FusionRule* rule = FindRule(n.op);
      KILN_ASSIGN_OR_RETURN(node, rule->lower(*this, n, p.output, coords));
      node = b_.Convert(node, type);
    } else if (val.is_const() && val.data->num_elements() == 1) {
      // Scalars are folded into the program rather than loaded.
      node = type == fused::ScalarType::kI64 ? b_.ConstI(val.data->IntAt(0)) : b_.ConstF(val.data->FloatAt(0), type);
    } else if (val.sym && val.sym->size() == 1 && type == fused::ScalarType::kI64) {
      node = b_.Dim((*val.sym)[0]);
    } else if (auto n = ir::NumElements(val.shape).value(); n && *n == 0) {
      // An empty tensor (e.g. a Concat input) is read only where a Select discards it.
      node = type == fused::ScalarType::kI64 ? b_.ConstI(0) : b_.ConstF(0, type);
    } else {
      auto slot = inputs_.find(v);
      if (slot == inputs_.end()) {
        slot = inputs_.emplace(v, b_.AddInput(val.dtype, val.shape)).first;
        input_values_.push_back(v);
      }
      node = b_.Load(slot->second, b_.Ravel(coords, val.shape));
    }
    memo_.emplace(std::move(key), node);
    return node;
  }

  // Builds the program of the region whose output is `root`.
  Result<std::shared_ptr<ir::FusedKernel>> Build(ValueId root, int reduction) {
    const ir::Value& out = t_.value(root);
    fused::Program& p = kernel_.program;
    std::vector<int32_t> coords;
    bool per_row = false;
    if (reduction >= 0) {
      const ir::Node& r = t_.body.nodes[reduction];
      KILN_ASSIGN_OR_RETURN(ReductionDomain d, FindRule(r.op)->domain(t_, r));
      b_.SetDomain(d.dims, d.reduce_axes);
      ir::SymShape kept;
      std::vector<int32_t> kept_coords;
      for (size_t k = 0; k < d.dims.size(); ++k)
        if (!(d.reduce_axes >> k & 1)) kept.push_back(d.dims[k]), kept_coords.push_back(b_.Coord(static_cast<int>(k)));
      if (ir::ShapeToString(out.shape) == ir::ShapeToString(d.dims)) {
        coords = DomainCoords();
      } else if (ir::NumElements(out.shape).Same(ir::NumElements(d.dims))) {
        coords = b_.Unravel(b_.Linear(), out.shape);
      } else if (ir::NumElements(out.shape).Same(ir::NumElements(kept))) {
        per_row = true;
        coords = b_.Unravel(b_.Ravel(kept_coords, kept), out.shape);
      } else {
        return Unimplemented(fmt::format("the output {} is neither the reduction domain {} nor one element per row",
                                         ir::ShapeToString(out.shape), ir::ShapeToString(d.dims)));
      }
    } else {
      b_.SetDomain(out.shape, 0);
      coords = DomainCoords();
    }
    KILN_ASSIGN_OR_RETURN(int32_t value, ValueAt(root, coords));
    b_.AddOutput(out.dtype, out.shape, value, per_row);
    b_.Compact();
    if (p.domain.size() > static_cast<size_t>(kMaxRank))
      return Unimplemented(fmt::format("the domain has rank {}, more than {}", p.domain.size(), kMaxRank));
    KILN_RETURN_IF_ERROR(fused::Validate(p).WithContext("fused program"));
    kernel_.sizes = b_.sizes();
    return std::make_shared<ir::FusedKernel>(std::move(kernel_));
  }

  const std::vector<ValueId>& input_values() const { return input_values_; }
  // At how many distinct coordinates per domain element member value v is computed.
  int TimesLowered(ValueId v) const {
    auto it = times_lowered_.find(v);
    return it == times_lowered_.end() ? 0 : it->second;
  }

 private:
  const ir::Trace& t_;
  const std::vector<Producer>& producers_;
  const std::set<int>& members_;
  ir::FusedKernel kernel_;
  ProgramBuilder b_;
  std::map<std::pair<ValueId, std::vector<int32_t>>, int32_t> memo_;
  std::map<ValueId, int32_t> inputs_;
  std::vector<ValueId> input_values_;
  std::map<ValueId, int> times_lowered_;
};

class Fuser {
 public:
  Fuser(const ir::Trace& t, FusionReport* report) : t_(t), report_(report) {}

  Result<ir::Trace> Run() {
    const auto& nodes = t_.body.nodes;
    producers_.assign(t_.values.size(), Producer{});
    consumers_.assign(t_.values.size(), {});
    for (size_t n = 0; n < nodes.size(); ++n) {
      for (size_t o = 0; o < nodes[n].outputs.size(); ++o)
        if (nodes[n].outputs[o] != ir::kNoValue) producers_[nodes[n].outputs[o]] = {static_cast<int>(n), static_cast<int>(o)};
      for (ValueId in : nodes[n].inputs)
        if (in != ir::kNoValue) consumers_[in].push_back(static_cast<int>(n));
    }
    for (ValueId o : t_.outputs) outputs_.insert(o);
    for (const ir::Node& n : nodes)
      for (const ir::Predicate& p : n.when) conditions_.insert(p.cond);
    scopes_ = ir::LoopScopes(nodes);
    region_of_.assign(nodes.size(), kNotFused);
    on_branch_.assign(nodes.size(), 0);
    why_not_.assign(nodes.size(), "");
    for (size_t n = 0; n < nodes.size(); ++n) why_not_[n] = Fusible(static_cast<int>(n));
    for (int n = static_cast<int>(nodes.size()) - 1; n >= 0; --n) Assign(n);
    return Emit();
  }

 private:
  // "" when node n can be fused, else why not.
  std::string Fusible(int n) {
    const ir::Node& node = t_.body.nodes[n];
    const FusionRule* rule = FindRule(node.op);
    if (!rule) return "no fusion rule";
    if (!rule->lower)
      return std::string(FusionKindName(rule->kind)) + (rule->note.empty() ? "" : ": " + std::string(rule->note));
    if (!node.blocks.empty()) return "has subgraphs";
    if (!ir::RuntimeDimsSetBy(t_, node).empty()) return "it sets a run-time dim, which its CPU kernel reports";
    for (ValueId o : node.outputs) {
      if (o == ir::kNoValue) continue;
      auto built = BuildRegion({n}, o, rule->kind == FusionKind::kReduction ? n : -1);
      if (!built.ok()) return built.status().message();
      if (built->kernel->program.nodes.size() > kMaxProgramNodes || built->inputs.size() > kMaxKernelInputs)
        return fmt::format("its kernel would have {} program nodes and {} inputs, over the limits of {} and {}",
                           built->kernel->program.nodes.size(), built->inputs.size(), kMaxProgramNodes,
                           kMaxKernelInputs);
    }
    return "";
  }

  struct Built {
    std::shared_ptr<ir::FusedKernel> kernel;
    std::vector<ValueId> inputs;
    int times_lowered = 0;  // of the value `count` names
  };

  Result<Built> BuildRegion(const std::set<int>& members, ValueId root, int reduction, ValueId count = ir::kNoValue) {
    RegionLowering lowering(t_, producers_, members);
    KILN_ASSIGN_OR_RETURN(auto kernel, lowering.Build(root, reduction));
    return Built{kernel, lowering.input_values(), lowering.TimesLowered(count)};
  }

  int UsedOutputs(const ir::Node& n) const {
    int k = 0;
    for (ValueId o : n.outputs) k += o != ir::kNoValue;
    return k;
  }

  void NewRegion(int n, ValueId root) {
    regions_.push_back({root, n, {n}, FindRule(t_.body.nodes[n].op)->kind == FusionKind::kReduction ? n : -1});
  }

  void Cut(int n, const std::string& why) {
    const ir::Node& node = t_.body.nodes[n];
    report_->log.push_back(fmt::format("cut after {} (output '{}'): {}", Describe(node),
                                       t_.value(node.outputs[0]).name, why));
  }

  void Assign(int n) {
    const ir::Node& node = t_.body.nodes[n];
    if (!why_not_[n].empty()) return;
    if (UsedOutputs(node) != 1) {
      region_of_[n] = kSeveral;
      for (ValueId o : node.outputs)
        if (o != ir::kNoValue) NewRegion(n, o);
      return;
    }
    ValueId v = ir::kNoValue;
    for (ValueId o : node.outputs) if (o != ir::kNoValue) v = o;
    const std::string why = JoinReason(n, v);
    if (why.empty()) {
      const int r = region_of_[consumers_[v][0]];
      region_of_[n] = r;
      for (int c : consumers_[v]) on_branch_[n] |= t_.body.nodes[c].op == "Concat" || on_branch_[c];
      regions_[r].members.push_back(n);
      if (FindRule(node.op)->kind == FusionKind::kReduction) regions_[r].reduction = n;
      return;
    }
    if (!consumers_[v].empty() && why != "-") Cut(n, why);
    region_of_[n] = static_cast<int>(regions_.size());
    NewRegion(n, v);
  }

  // "" if node n (output v) joins its consumers' region; "-" for a region start that is not
  // worth logging (no consumers, or consumers that cannot fuse anyway); else the reason.
  std::string JoinReason(int n, ValueId v) {
    if (outputs_.count(v)) return "it is a model output";
    if (conditions_.count(v)) return "it is a run-time If's condition, read on its own";
    if (consumers_[v].empty()) return "-";
    std::set<int> regions;
    for (int c : consumers_[v]) {
      if (region_of_[c] == kNotFused) return "-";
      if (region_of_[c] == kSeveral) return "its consumer " + Describe(t_.body.nodes[c]) + " has several outputs";
      regions.insert(region_of_[c]);
    }
    if (regions.size() > 1) return fmt::format("it feeds {} regions", regions.size());
    for (int c : consumers_[v])
      if (t_.body.nodes[c].when != t_.body.nodes[n].when)
        return "its consumer " + Describe(t_.body.nodes[c]) + " runs under another condition (a run-time If)";
      else if (scopes_[c] != scopes_[n])
        return "its consumer " + Describe(t_.body.nodes[c]) + " is in another run-time Loop's body";
    Region& r = regions_[*regions.begin()];
    for (int c : consumers_[v]) {
      const ir::Node& cn = t_.body.nodes[c];
      if (cn.op == "Resize" && !cn.inputs.empty() && cn.inputs[0] == v && cn.attrs.GetString("mode", "nearest") != "nearest")
        return "Resize '" + cn.name + "' interpolates several elements of it per output; recomputing it there would multiply the work";
    }
    const ir::Node& node = t_.body.nodes[n];
    // A Concat computes every input for each of its output elements (the unselected ones
    // at clamped coordinates), so only ops that merely move loads may feed it in-region;
    // arithmetic there would run once per Concat input instead of once.
    if (!MovesLoadsOnly(node)) {
      for (int c : consumers_[v])
        if (t_.body.nodes[c].op == "Concat" || on_branch_[c])
          return "it would be computed for every element of Concat " +
                 (t_.body.nodes[c].op == "Concat" ? "'" + t_.body.nodes[c].name + "'" : "downstream") +
                 ", once per Concat input";
    }
    if (FindRule(node.op)->kind != FusionKind::kReduction) return TryJoin(r, n, -1);
    if (r.reduction >= 0)
      return "the region already has a reduction (" + Describe(t_.body.nodes[r.reduction]) + ")";
    if (std::string why = EpilogueReason(r, n); !why.empty()) return why;
    return TryJoin(r, n, n);
  }

  // Index maps that only move loads (not Resize's interpolation).
  static bool MovesLoadsOnly(const ir::Node& n) {
    const FusionRule* rule = FindRule(n.op);
    if (rule == nullptr || rule->kind != FusionKind::kIndexMap) return false;
    return n.op != "Resize" || n.attrs.GetString("mode", "nearest") == "nearest";
  }

  // Builds the region with n added, so a region is never left in a state that cannot be
  // lowered; "" on success.
  std::string TryJoin(const Region& r, int n, int new_reduction) {
    std::set<int> members(r.members.begin(), r.members.end());
    members.insert(n);
    const ir::Node& node = t_.body.nodes[n];
    auto built = BuildRegion(members, r.root, new_reduction >= 0 ? new_reduction : r.reduction, node.outputs[0]);
    if (!built.ok()) return "the region cannot take it: " + built.status().message();
    if (built->kernel->program.nodes.size() > kMaxProgramNodes)
      return fmt::format("the region's program would exceed {} nodes", kMaxProgramNodes);
    if (built->inputs.size() > kMaxKernelInputs)
      return fmt::format("the region's kernel would exceed {} inputs", kMaxKernelInputs);
    // Inlining recomputes a value wherever it is read. Index maps only move loads around,
    // but arithmetic read at several coordinates (e.g. the halves of a Slice pair that a
    // Concat joins again) would be computed several times per element, with all of its
    // producers: it is cheaper to materialise it once.
    if (built->times_lowered > 1 && FindRule(node.op)->kind != FusionKind::kIndexMap)
      return fmt::format("its value would be computed at {} coordinates per output element; stored once instead",
                         built->times_lowered);
    return "";
  }

  // The members of r downstream of reduction node red must keep every element in its own
  // row: elementwise ops whose reduction-derived operands are the reduction's output shape
  // (or, broadcast along the reduced axes, the domain's shape).
  std::string EpilogueReason(const Region& r, int red) {
    const ir::Node& rn = t_.body.nodes[red];
    auto domain = FindRule(rn.op)->domain(t_, rn);
    if (!domain.ok()) return domain.status().message();
    const ir::SymShape& out = t_.value(rn.outputs[0]).shape;
    const std::string out_s = ir::ShapeToString(out), dom_s = ir::ShapeToString(domain->dims);
    ir::SymShape keep = domain->dims;
    for (size_t k = 0; k < keep.size(); ++k)
      if (domain->reduce_axes >> k & 1) keep[k] = ir::Sym(1);
    const bool row_broadcast = ir::ShapeToString(keep) == out_s;
    std::set<ValueId> derived = {rn.outputs[0]};
    std::vector<int> members = r.members;
    std::sort(members.begin(), members.end());
    for (int m : members) {
      const ir::Node& mn = t_.body.nodes[m];
      bool reads_derived = false;
      for (ValueId in : mn.inputs) reads_derived |= in != ir::kNoValue && derived.count(in);
      if (!reads_derived) continue;
      if (FindRule(mn.op)->kind != FusionKind::kElementwise)
        return "the " + std::string(FusionKindName(FindRule(mn.op)->kind)) + " " + Describe(mn) + " would follow the reduction";
      const std::string e = ir::ShapeToString(t_.value(mn.outputs[0]).shape);
      if (e != out_s && !(row_broadcast && e == dom_s))
        return Describe(mn) + " would read the reduction's result in another row";
      for (ValueId in : mn.inputs) {
        if (in == ir::kNoValue || !derived.count(in)) continue;
        const std::string s = ir::ShapeToString(t_.value(in).shape);
        if (s != e && !(row_broadcast && s == out_s && e == dom_s))
          return Describe(mn) + " would read the reduction's result in another row";
      }
      derived.insert(mn.outputs[0]);
    }
    return "";
  }

  Result<ir::Trace> Emit() {
    ir::Trace out = t_;
    out.stage = "fusion";
    out.provenance = "fusion: regions of elementwise, index-map and reduction ops as generated kernels";
    out.body.nodes.clear();
    std::map<int, std::vector<int>> regions_at;  // root node -> region ids, in output order
    for (size_t r = 0; r < regions_.size(); ++r) regions_at[regions_[r].root_node].push_back(static_cast<int>(r));
    for (auto& [node, ids] : regions_at) std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      return regions_[a].root < regions_[b].root;
    });
    const auto& nodes = t_.body.nodes;
    // Unfused ops, one log line per (op, reason) with their count and first names.
    std::map<std::pair<std::string, std::string>, std::vector<std::string>> unfused;
    for (size_t n = 0; n < nodes.size(); ++n) {
      if (region_of_[n] == kNotFused) {
        out.body.nodes.push_back(nodes[n]);
        unfused[{nodes[n].op, why_not_[n]}].push_back(nodes[n].name);
        continue;
      }
      auto it = regions_at.find(static_cast<int>(n));
      if (it == regions_at.end()) continue;  // a member; emitted with its region's root
      for (int r : it->second) KILN_RETURN_IF_ERROR(EmitRegion(regions_[r], out));
    }
    for (const auto& [key, names] : unfused) {
      std::string shown;
      for (size_t i = 0; i < names.size() && i < 3; ++i) shown += (i ? ", '" : "'") + names[i] + "'";
      if (names.size() > 3) shown += ", ...";
      report_->log.push_back(fmt::format("unfused {} {} ({}): {}", names.size(), key.first, shown, key.second));
    }
    report_->nodes_before = static_cast<int>(nodes.size());
    report_->nodes_after = static_cast<int>(out.body.nodes.size());
    return out;
  }

  Status EmitRegion(Region& region, ir::Trace& out) {
    std::sort(region.members.begin(), region.members.end());
    std::set<int> members(region.members.begin(), region.members.end());
    auto built = BuildRegion(members, region.root, region.reduction);
    if (!built.ok()) {
      // Every join was built when it was made, so this is a compiler bug.
      return Internal("fusion region at '" + t_.value(region.root).name + "': " + built.status().message());
    }
    auto& kernel = built->kernel;
    auto& inputs = built->inputs;
    for (int m : region.members) {
      kernel->members.push_back(Describe(t_.body.nodes[m]));
      kernel->member_ops.push_back(t_.body.nodes[m].op);
    }
    kernel->member_nodes = region.members;
    if (region.reduction >= 0) kernel->reduction = t_.body.nodes[region.reduction].op;
    const ir::Node& root = t_.body.nodes[region.root_node];
    ir::Node fused;
    fused.op = "kiln.Fused";
    fused.name = root.name;
    if (UsedOutputs(root) > 1) fused.name += ":" + t_.value(region.root).name;
    fused.inputs = inputs;
    fused.outputs = {region.root};
    fused.when = root.when;  // every member's (JoinReason)
    fused.fused = kernel;
    out.body.nodes.push_back(std::move(fused));
    ++report_->fused_kernels;
    std::string ops;
    for (int m : region.members) ops += (ops.empty() ? "" : ", ") + Describe(t_.body.nodes[m]);
    report_->log.push_back(fmt::format("region '{}': {} op{} -> 1 kernel{} ({}); {} program nodes", t_.value(region.root).name,
                                       region.members.size(), region.members.size() == 1 ? "" : "s",
                                       region.reduction >= 0 ? ", reduction " + t_.body.nodes[region.reduction].op : "",
                                       ops, kernel->program.nodes.size()));
    return Status::Ok();
  }

  // NVRTC's time grows faster than linearly with a kernel's size (a 1000-node program takes
  // minutes for the default archs), and a launch's parameters must fit in 32 KB.
  static constexpr size_t kMaxProgramNodes = 400;
  static constexpr size_t kMaxKernelInputs = 256;

  const ir::Trace& t_;
  FusionReport* report_;
  std::vector<Producer> producers_;
  std::vector<std::vector<int>> consumers_;
  std::set<ValueId> outputs_;
  std::set<ValueId> conditions_;  // the values predicates read (ir::Predicate): kept as tensors
  std::vector<int32_t> scopes_;   // per node: its run-time Loop (ir::LoopScopes)
  std::vector<int> region_of_;
  std::vector<char> on_branch_;  // a member that only moves loads into a Concat of its region
  std::vector<std::string> why_not_;
  std::vector<Region> regions_;
};

}  // namespace

Result<ir::Trace> Fuse(const ir::Trace& canonical, FusionReport* report) {
  FusionReport local;
  Fuser fuser(canonical, report ? report : &local);
  return fuser.Run();
}

}  // namespace kiln::fusion
