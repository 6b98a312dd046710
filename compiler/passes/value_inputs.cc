#include "compiler/passes/value_inputs.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <optional>
#include <set>
#include <unordered_map>

#include "compiler/ops/meta_util.h"
#include "compiler/passes/constant_fold.h"
#include "runtime/half.h"

namespace kiln::passes {
namespace {

// Every node of `block` and of the blocks nested in its nodes.
void Collect(const ir::Block& block, std::vector<const ir::Node*>& nodes) {
  for (const ir::Node& n : block.nodes) {
    nodes.push_back(&n);
    for (const auto& [name, sub] : n.blocks)
      if (sub) Collect(*sub, nodes);
  }
}

// An identifier made of `name`: other characters become '_', a leading digit gets a '_'.
std::string Identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), '_');
  return out;
}

// Makes every use of `from` in `block` and the blocks nested in it read `to`.
void Replace(ir::Block& block, ir::ValueId from, ir::ValueId to) {
  for (ir::Node& n : block.nodes) {
    std::replace(n.inputs.begin(), n.inputs.end(), from, to);
    for (auto& [name, sub] : n.blocks)
      if (sub) {
        // Blocks are shared between traces (Trace copies share them): rewrite a copy.
        auto copy = std::make_shared<ir::Block>(*sub);
        Replace(*copy, from, to);
        sub = std::move(copy);
      }
  }
  std::replace(block.outputs.begin(), block.outputs.end(), from, to);
}

}  // namespace

bool CanFixValues(DType dtype) {
  switch (dtype) {
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat32:
    case DType::kFloat64: return true;
    default: return false;
  }
}

int64_t FloatBits(DType dtype, double value) {
  switch (dtype) {
    case DType::kFloat16: return FloatToHalf(static_cast<float>(value));
    case DType::kBFloat16: return FloatToBF16(static_cast<float>(value));
    case DType::kFloat32: return std::bit_cast<uint32_t>(static_cast<float>(value));
    default: return std::bit_cast<int64_t>(value);
  }
}

double FloatFromBits(DType dtype, int64_t bits) {
  switch (dtype) {
    case DType::kFloat16: return HalfToFloat(static_cast<uint16_t>(bits));
    case DType::kBFloat16: return BF16ToFloat(static_cast<uint16_t>(bits));
    case DType::kFloat32: return std::bit_cast<float>(static_cast<uint32_t>(bits));
    default: return std::bit_cast<double>(bits);
  }
}

Status BindInputValues(ir::Trace& trace, const std::map<std::string, std::vector<int64_t>>& values) {
  for (const auto& entry : values) {
    const std::string& name = entry.first;
    const std::vector<int64_t>& elements = entry.second;
    auto it = std::find_if(trace.inputs.begin(), trace.inputs.end(),
                           [&](ir::ValueId id) { return trace.value(id).name == name; });
    if (it == trace.inputs.end()) return InvalidArgument("values for '" + name + "', which is not a runtime input");
    const ir::ValueId input = *it;
    const ir::Value& v = trace.value(input);
    if (!CanFixValues(v.dtype) || !ir::IsStatic(v.shape))
      return InvalidArgument("input '" + name + "' (" + std::string(DTypeName(v.dtype)) + ir::ShapeToString(v.shape) +
                             "): only int32, int64, bool, float16, bfloat16, float32 and float64 inputs of constant "
                             "dims can have their values fixed");
    const std::optional<int64_t> count = ir::NumElements(v.shape).value();  // nullopt: past int64
    if (count != static_cast<int64_t>(elements.size()))
      return InvalidArgument("input '" + name + "' " + ir::ShapeToString(v.shape) + " has " +
                             (count ? std::to_string(*count) : std::string("more")) + " elements, given " +
                             std::to_string(elements.size()) + " values");
    std::vector<ir::Sym> syms;
    for (int64_t e : elements) syms.push_back(ir::Sym(v.dtype == DType::kBool ? int64_t{e != 0} : e));
    // The constant every use reads: the elements stored in the input's dtype (floating-point
    // ones from their bits).
    ir::Value constant{name + ".value", v.dtype, v.shape, nullptr, syms};
    if (ir::meta::IsFloat(v.dtype)) {
      auto data = std::make_shared<ir::ConstData>();
      data->dtype = v.dtype;
      data->dims = ir::StaticDims(v.shape);
      const size_t size = DTypeSize(v.dtype);
      data->bytes.resize(elements.size() * size);
      for (size_t k = 0; k < elements.size(); ++k) std::memcpy(data->bytes.data() + k * size, &elements[k], size);
      constant.data = std::move(data);
    } else {
      MaterializeKnownElements(constant);
    }
    constant.sym.reset();
    trace.value(input).sym = std::move(syms);
    const ir::ValueId c = trace.AddValue(std::move(constant));
    Replace(trace.body, input, c);
    std::replace(trace.outputs.begin(), trace.outputs.end(), input, c);
  }
  return Status::Ok();
}

namespace {

struct ShapeOperand {
  const char* op;
  int input;
};
constexpr ShapeOperand kValueShapeOperands[] = {
    {"AffineGrid", 1}, {"BlackmanWindow", 0}, {"CenterCropPad", 1}, {"ConstantOfShape", 0}, {"Expand", 1},
    {"HammingWindow", 0}, {"HannWindow", 0}, {"Loop", 0}, {"Pad", 1}, {"Range", 0}, {"Range", 1}, {"Range", 2},
    {"Reshape", 1}, {"Resize", 3}, {"Slice", 1}, {"Slice", 2}, {"Split", 1}, {"Tile", 1}, {"TopK", 1},
    // Axes and steps: each output dim is an expression in them (meta::ValueAxesHits), and the CPU
    // kernels read them at run time.
    {"Slice", 3}, {"Slice", 4}, {"Squeeze", 1}, {"Unsqueeze", 1}, {"Pad", 3}, {"DFT", 1}, {"DFT", 2},
    // Sizes that the CPU kernels read at run time (or take from their output's dims): Col2Im's
    // image_shape and block_shape, MaxUnpool's output_shape, MelWeightMatrix's num_mel_bins and
    // dft_length, STFT's frame_step and frame_length (ops/meta_vision.cc, ops/meta_signal.cc).
    {"Col2Im", 1}, {"Col2Im", 2}, {"MaxUnpool", 2}, {"MelWeightMatrix", 0}, {"MelWeightMatrix", 1},
    {"STFT", 1}, {"STFT", 3},
    // The reductions' axes: with keepdims each reduced dim is 1, without, the rest keep their order
    // (ops/meta_reduce.cc); the CPU kernel reads the axes at run time.
    {"ReduceL1", 1}, {"ReduceL2", 1}, {"ReduceLogSum", 1}, {"ReduceLogSumExp", 1}, {"ReduceMax", 1},
    {"ReduceMean", 1}, {"ReduceMin", 1}, {"ReduceProd", 1}, {"ReduceSum", 1}, {"ReduceSumSquare", 1},
    {"OneHot", 1},
};
// Float operands read as float32 bits (FloorMulF32): a Resize's scales, OneHot's depth.
constexpr ShapeOperand kFloatShapeOperands[] = {{"Resize", 2}, {"OneHot", 1}};

}  // namespace

bool IsValueShapeOperand(const std::string& op, int input) {
  for (const ShapeOperand& o : kValueShapeOperands)
    if (op == o.op && input == o.input) return true;
  return false;
}

bool HasValueShapeOperand(const std::string& op) {
  for (const ShapeOperand& o : kValueShapeOperands)
    if (op == o.op) return true;
  for (const ShapeOperand& o : kFloatShapeOperands)
    if (op == o.op) return true;
  return false;
}

bool IsFloatShapeOperand(const std::string& op, int input) {
  for (const ShapeOperand& o : kFloatShapeOperands)
    if (op == o.op && input == o.input) return true;
  return false;
}

std::set<ir::ValueId> ValuesReaching(const ir::Trace& trace, std::vector<ir::ValueId> work) {
  std::vector<const ir::Node*> nodes;
  Collect(trace.body, nodes);
  std::unordered_map<ir::ValueId, const ir::Node*> producer;
  for (const ir::Node* n : nodes)
    for (ir::ValueId o : n->outputs)
      if (o != ir::kNoValue) producer[o] = n;
  std::set<ir::ValueId> seen;
  while (!work.empty()) {
    const ir::ValueId id = work.back();
    work.pop_back();
    if (id == ir::kNoValue || !seen.insert(id).second) continue;
    auto p = producer.find(id);
    if (p == producer.end()) continue;
    const ir::Node& n = *p->second;
    if (n.op == "Shape" || n.op == "Size") continue;
    for (ir::ValueId in : n.inputs) work.push_back(in);
    if (n.op == "If")  // a branch's output is its value
      for (const auto& [name, sub] : n.blocks)
        if (sub)
          for (ir::ValueId o : sub->outputs) work.push_back(o);
  }
  return seen;
}

bool IsValueInputCandidate(const ir::Value& v) {
  if (v.is_const()) return false;
  if (v.dtype != DType::kInt32 && v.dtype != DType::kInt64 && v.dtype != DType::kBool) return false;
  if (!std::all_of(v.shape.begin(), v.shape.end(), [](const ir::Sym& d) { return d.is_const(); })) return false;
  return ValueElements(v) >= 1 && ValueElements(v) <= kMaxValueElements;
}

int64_t ValueElements(const ir::Value& v) {
  int64_t elements = 1;  // stops growing past the limit, so it cannot overflow
  for (const ir::Sym& d : v.shape)
    elements = std::min(elements * std::min(d.value().value_or(kMaxValueElements + 1), kMaxValueElements + 1),
                        kMaxValueElements + 1);
  return elements;
}

std::vector<std::string> MarkValueInputs(ir::Trace& trace) {
  // Back from the If conditions and the value shape operands, through the ops whose outputs
  // depend on their inputs' values.
  std::vector<ir::ValueId> seeds;
  std::set<ir::ValueId> float_operands;  // read directly as a float shape operand
  std::vector<const ir::Node*> nodes;
  Collect(trace.body, nodes);
  for (const ir::Node* n : nodes) {
    if (n->op == "If" && !n->inputs.empty()) seeds.push_back(n->inputs[0]);
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (IsValueShapeOperand(n->op, static_cast<int>(i))) seeds.push_back(n->inputs[i]);
      if (IsFloatShapeOperand(n->op, static_cast<int>(i))) float_operands.insert(n->inputs[i]);
    }
  }
  const std::set<ir::ValueId> seen = ValuesReaching(trace, std::move(seeds));

  // Symbol names must not collide with the dims' (or another value input's).
  std::set<std::string> names;
  for (ir::ValueId id : trace.inputs)
    for (const ir::Sym& d : trace.value(id).shape)
      for (const std::string& v : d.Vars()) names.insert(v);
  std::vector<std::string> marked;
  for (ir::ValueId id : trace.inputs) {
    ir::Value& v = trace.value(id);
    const bool float_operand = float_operands.count(id) && v.dtype == DType::kFloat32 && !v.is_const() &&
                               ValueElements(v) >= 1 && ValueElements(v) <= kMaxValueElements;
    if (v.sym || !(float_operand || (seen.count(id) && IsValueInputCandidate(v)))) continue;
    const int64_t elements = ValueElements(v);
    std::string base = Identifier(v.name);
    while (names.count(base) || names.count(base + "_0")) base += "_value";
    std::vector<ir::Sym> elems;
    for (int64_t e = 0; e < elements; ++e) {
      const std::string name = v.shape.empty() ? base : base + "_" + std::to_string(e);
      names.insert(name);
      elems.push_back(ir::Sym::ValueVar(name));
      marked.push_back(name + " (input '" + v.name + "' element " + std::to_string(e) + ")");
    }
    v.sym = std::move(elems);
  }
  return marked;
}

}  // namespace kiln::passes
