// The ONNX importer: ModelProto -> `import` trace. See importer.h for the contract.
//
// Structure: Importer walks the main graph and, recursively, the GRAPH attributes of If
// nodes, with a stack of name scopes (a subgraph may read values of enclosing graphs by
// name; all values live in the one Trace::values table). Each node is converted as is,
// then `Rewrite` brings older-opset forms to the newest form (the form of
// runtime/kernels/kernel.h's contract).
//
// Op versions Kiln does not implement are refused per node (op_versions.h's table), before
// any rewrite, on the attributes as the model wrote them.
// Rewrites (opset = the model's default-domain opset):
//   any op < 7                `consumed_inputs` (a memory hint) and the legacy `broadcast`
//                             flag (numpy broadcasting subsumes it) dropped
//   Cast < 6                  `to` as a type name ('FLOAT') -> the dtype number
//   Concat < 4                absent axis -> 1 (the old default)
//   Reshape < 5               shape attr -> input 1 (int64)
//   Slice < 10                starts/ends/axes attrs -> inputs 1..3 (int64)
//   Squeeze/Unsqueeze < 13    axes attr -> input 1 (int64)
//   ReduceSum < 13,
//   other Reduce* < 18        axes attr -> input 1 (int64); keepdims kept
//   Pad < 11                  pads (Pad-2) / paddings attr -> input 1 (int64); value attr ->
//                             input 2 (scalar of the data's dtype when known, else float32;
//                             omitted when 0); mode kept
//   Clip < 11                 min/max attrs -> inputs 1/2 (scalars, like Pad's value)
//   Split < 13                split attr -> input 1 (int64)
//   TopK < 10                 k attr -> input 1 (int64 [1])
//   Upsample (any), Resize < 11
//                             -> Resize(X, roi = absent, scales) with mode nearest|linear,
//                             coordinate_transformation_mode "asymmetric", nearest_mode
//                             "floor" (the opset <= 10 semantics)
//   Resize >= 11              attrs kept; a constant empty roi/scales input -> absent
//   Softmax/LogSoftmax/Hardmax < 13
//                             coerce_2d = 1 and axis (default 1) set explicitly
//   RoiAlign < 16             coordinate_transformation_mode "output_half_pixel" (RoiAlign-10's
//                             behaviour; the attribute and its half_pixel default came in 16)
//   Dropout                   -> Identity(data); a used mask output or a constant true
//                             training_mode -> Unimplemented
//   BatchNormalization        only output 0 is kept; used training outputs, training_mode=1
//                             or spatial=0 -> Unimplemented
//   ConstantOfShape           `value` TENSOR attr -> attrs dtype (kiln::DType as int) and
//                             value_float (float dtypes) or value_int (integer/bool dtypes)
//   Gemm                      legacy `broadcast` attr dropped
//   RNN/GRU/LSTM              `activations` (STRINGS) dropped when it is the default list,
//                             else one comma-separated STRING (e.g. "Relu,Tanh")
// com.microsoft ops: those that compose ONNX ops without needing shapes (Gelu, FastGelu,
// BiasGelu, QuickGelu, BiasAdd, the layer norms, the quantized ops) are written out here
// (ImportContribNode); QGemm is a registry op; FusedMatMul, FusedConv, Attention,
// MultiHeadAttention, RotaryEmbedding and EmbedLayerNormalization stay one node,
// "com.microsoft.<op>", for the canonical stage (passes/contrib_ops.h). docs/contrib_ops.md.
// Unimplemented: op versions refused by op_versions.cc, other domains and com.microsoft ops,
// non-tensor graph inputs, string / complex
// tensors, sparse tensors and initializers, GRAPH attributes with subgraph inputs (Loop,
// Scan), GRAPHS/TENSORS/SPARSE_TENSOR attributes, TENSOR attributes other than Constant's
// and ConstantOfShape's, other STRINGS attributes, attribute references (functions),
// Constant value_string(s)/sparse_value, tensor segments.
#include "compiler/onnx/importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/onnx/op_versions.h"
#include "compiler/onnx/subgraph_depth.h"
#include "compiler/passes/contrib_ops.h"
#include "onnx/defs/schema.h"
#include "runtime/half.h"
#include "runtime/shape_text.h"

namespace kiln::onnx_import {
namespace {

// A dim_param names a symbol, except "?" and "", which some exporters write for "unknown":
// each such dim gets its own symbol instead of being tied to the others.
bool IsNamedDim(const onnx::TensorShapeProto::Dimension& d) {
  return d.has_dim_param() && !d.dim_param().empty() && d.dim_param() != "?";
}


namespace fs = std::filesystem;
using ir::ConstData;
using ir::kNoValue;
using ir::Node;
using ir::Sym;
using ir::SymShape;
using ir::Trace;
using ir::Value;
using ir::ValueId;

std::string Q(const std::string& s) { return "'" + s + "'"; }

// The newest ai.onnx opset whose schemas the linked ONNX library knows (17 for Debian's 1.12).
int64_t KnownOpset() {
  static const int64_t known = [] {
    const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    auto it = map.find("");
    return it == map.end() ? int64_t{0} : int64_t{it->second.second};
  }();
  return known;
}

std::string DTypeText(DType d) { return std::string(DTypeName(d)); }

// ONNX element type -> DType (same numbering). `what` names the tensor for errors.
Result<DType> ToDType(int32_t onnx_type, const std::string& what) {
  switch (onnx_type) {
    case onnx::TensorProto::UNDEFINED:
      return DataLoss(what + ": element type is missing (data_type 0, UNDEFINED)");
    case onnx::TensorProto::STRING:
      return Unimplemented(what + ": element type string is not supported (numeric and bool only)");
    case onnx::TensorProto::COMPLEX64:
    case onnx::TensorProto::COMPLEX128:
      return Unimplemented(what + ": complex element types are not supported");
    default: break;
  }
  // The element types after those of this build's ONNX headers (onnx.proto's numbering).
  static constexpr std::pair<int32_t, const char*> kNewer[] = {
      {17, "FLOAT8E4M3FN"}, {18, "FLOAT8E4M3FNUZ"}, {19, "FLOAT8E5M2"}, {20, "FLOAT8E5M2FNUZ"},
      {21, "UINT4"},        {22, "INT4"},           {23, "FLOAT4E2M1"}, {24, "FLOAT8E8M0"}};
  if (onnx_type >= 17 && onnx_type <= 20) {
    // docs/quantization.md, "Not yet": FP8 needs its own dtype through the runtime, cuBLASLt's
    // FP8 GEMM (compute capability 8.9 and 9.0) and CPU kernels; none is built.
    return Unimplemented(what + ": element type " + kNewer[onnx_type - 17].second +
                         " (float8) is not supported: Kiln has no FP8 kernels on any backend yet");
  }
  if (!IsValidDType(onnx_type)) {
    std::string name = std::to_string(onnx_type);
    if (onnx::TensorProto::DataType_IsValid(onnx_type))
      name = onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(onnx_type)) + " (" + name + ")";
    for (const auto& [code, text] : kNewer)
      if (code == onnx_type) name = std::string(text) + " (" + name + ")";
    return Unimplemented(what + ": element type " + name +
                         " is not supported (known: float32/16/64, bfloat16, [u]int8..64, bool)");
  }
  return static_cast<DType>(onnx_type);
}

bool IsFloatType(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 ||
         d == DType::kBFloat16;
}

template <typename T>
void Append(std::vector<uint8_t>& out, T v) {
  const size_t n = out.size();
  out.resize(n + sizeof(T));
  std::memcpy(out.data() + n, &v, sizeof(T));
}

// A base-10 non-negative int64 ("123"), or nullopt.
std::optional<int64_t> ParseNonNegative(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0 || s.empty()) return std::nullopt;
  return v;
}

// Every name a node of `g` (or of its subgraphs) reads, plus every graph output name.
void CollectUses(const onnx::GraphProto& g, std::unordered_set<std::string>& uses) {
  for (const auto& n : g.node()) {
    for (const auto& in : n.input())
      if (!in.empty()) uses.insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectUses(a.g(), uses);
      for (const auto& sg : a.graphs()) CollectUses(sg, uses);
    }
  }
  for (const auto& o : g.output()) uses.insert(o.name());
}

const std::unordered_set<std::string>& ReduceOps() {
  static const std::unordered_set<std::string> kOps = {
      "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
      "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  return kOps;
}

class Importer {
 public:
  Importer(const ImportOptions& options, std::string base_dir)
      : options_(options), base_dir_(std::move(base_dir)) {}

  Result<Trace> Run(const onnx::ModelProto& model, const std::string& source);

 private:
  Status ImportGraph(const onnx::GraphProto& g, ir::Block& block, bool is_main,
                     const std::string& where);
  Status ImportMainInputs(const onnx::GraphProto& g);
  Status ImportNode(const onnx::NodeProto& np, int index, ir::Block& block);
  // onnxruntime's com.microsoft ops that are compositions of ONNX ops (ContribOperators.md):
  // Gelu, FastGelu, BiasGelu, QuickGelu, BiasAdd, SkipLayerNormalization,
  // SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization, written as those ONNX ops.
  Status ImportContribNode(const onnx::NodeProto& np, const std::string& name, const std::string& where,
                           ir::Block& block);
  Status ImportDynamicQuantizeLstm(const onnx::NodeProto& np, const std::string& name, const std::string& where,
                                   ir::Block& block);
  Status ImportQuantizedContribNode(const onnx::NodeProto& np, const std::string& name, const std::string& where,
                                    ir::Block& block);
  // A com.microsoft node's inputs by id, kNoValue where one is absent; DataLoss naming one that
  // nothing defines.
  Result<std::vector<ValueId>> ContribInputs(const onnx::NodeProto& np, const std::string& where);
  Status ImportConstantNode(const onnx::NodeProto& np, const std::string& where);
  Status ConvertAttr(const onnx::NodeProto& np, const onnx::AttributeProto& a, Node& node,
                     const std::string& where);
  // Brings an older-opset node to the newest form. Sets *keep_outputs to the number of
  // leading outputs the rewritten node produces (-1: all).
  Status Rewrite(const onnx::NodeProto& np, Node& node, const std::string& where,
                 int* keep_outputs);

  Result<std::shared_ptr<ConstData>> TensorData(const onnx::TensorProto& t,
                                                const std::string& what);
  Status ReadExternal(const onnx::TensorProto& t, const std::string& what, int64_t nbytes,
                      std::vector<uint8_t>& out);
  // Adds a tensor's bytes to the model's total before they are copied; ResourceExhausted
  // over max_constant_bytes.
  Status CountConstantBytes(int64_t nbytes, const std::string& what) {
    if (__builtin_add_overflow(constant_bytes_, static_cast<uint64_t>(nbytes), &constant_bytes_))
      constant_bytes_ = UINT64_MAX;
    if (constant_bytes_ <= options_.max_constant_bytes) return Status::Ok();
    return ResourceExhausted(what + ": " + std::to_string(nbytes) + " bytes bring the model's constants to " +
                             std::to_string(constant_bytes_) + " bytes, over max_constant_bytes " +
                             std::to_string(options_.max_constant_bytes));
  }

  // Values.
  ValueId AddConst(const std::string& name, std::shared_ptr<const ConstData> data);
  ValueId AddInt64Const(const std::string& hint, std::vector<int64_t> v, bool scalar = false);
  ValueId AddFloatScalar(const std::string& hint, DType dtype, float v);
  std::string UniqueValueName(const std::string& hint);
  std::string UniqueNodeName(const std::string& hint);
  void ApplyTypeInfo(Value& v);
  std::optional<ValueId> Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return std::nullopt;
  }
  Status Define(const std::string& name, ValueId id, const std::string& where) {
    if (!scopes_.back().emplace(name, id).second)
      return DataLoss(where + ": value " + Q(name) + " is defined twice (ONNX names are SSA)");
    return Status::Ok();
  }
  // Define for a node's output: in a subgraph (an If branch, a Loop or Scan body) it may not
  // reuse a name of an enclosing graph either, since ONNX names are SSA across subgraphs.
  Status DefineOutput(const std::string& name, ValueId id, const std::string& where) {
    for (size_t s = 0; s + 1 < scopes_.size(); ++s)
      if (scopes_[s].count(name))
        return DataLoss(where + ": value " + Q(name) + " is defined again in a subgraph, where its enclosing graph "
                        "defines it already (ONNX names are SSA)");
    return Define(name, id, where);
  }
  bool Used(const std::string& name) const { return !name.empty() && uses_.count(name) > 0; }
  static void SetInput(Node& node, size_t i, ValueId id) {
    if (node.inputs.size() <= i) node.inputs.resize(i + 1, kNoValue);
    node.inputs[i] = id;
  }
  // attr `name` (INTS) -> int64 input i; false if absent.
  bool IntsAttrToInput(Node& node, const std::string& name, size_t i) {
    const Attr* a = node.attrs.Find(name);
    if (!a || a->kind != Attr::Kind::kInts) return false;
    SetInput(node, i, AddInt64Const(node.name + "_" + name, a->ints));
    node.attrs.Erase(name);
    return true;
  }
  DType InputDType(const Node& node, size_t i) const {
    return i < node.inputs.size() && node.inputs[i] != kNoValue
               ? trace_.value(node.inputs[i]).dtype : DType::kUndefined;
  }

  const ImportOptions& options_;
  std::string base_dir_;
  int64_t opset_ = 0;
  Trace trace_;
  std::vector<std::unordered_map<std::string, ValueId>> scopes_;
  std::unordered_map<std::string, const onnx::TypeProto*> value_info_;
  std::unordered_set<std::string> uses_;
  std::unordered_set<std::string> node_names_;
  std::unordered_set<std::string> value_names_;
  uint64_t constant_bytes_ = 0;  // CountConstantBytes
};

// ---- values -----------------------------------------------------------------------------

std::string Importer::UniqueValueName(const std::string& hint) {
  std::string name = hint;
  for (int k = 1; value_names_.count(name); ++k) name = hint + "_" + std::to_string(k);
  value_names_.insert(name);
  return name;
}

std::string Importer::UniqueNodeName(const std::string& hint) {
  std::string name = hint;
  for (int k = 1; node_names_.count(name); ++k) name = hint + "_" + std::to_string(k);
  node_names_.insert(name);
  return name;
}

ValueId Importer::AddConst(const std::string& name, std::shared_ptr<const ConstData> data) {
  Value v;
  v.name = name;
  value_names_.insert(name);
  v.dtype = data->dtype;
  for (int64_t d : data->dims) v.shape.push_back(Sym(d));
  v.data = std::move(data);
  return trace_.AddValue(std::move(v));
}

ValueId Importer::AddInt64Const(const std::string& hint, std::vector<int64_t> vals, bool scalar) {
  auto cd = std::make_shared<ConstData>();
  cd->dtype = DType::kInt64;
  if (!scalar) cd->dims = {static_cast<int64_t>(vals.size())};
  for (int64_t x : vals) Append(cd->bytes, x);
  return AddConst(UniqueValueName(hint), std::move(cd));
}

ValueId Importer::AddFloatScalar(const std::string& hint, DType dtype, float v) {
  auto cd = std::make_shared<ConstData>();
  if (!IsFloatType(dtype)) dtype = DType::kFloat32;
  cd->dtype = dtype;
  switch (dtype) {
    case DType::kFloat64: Append(cd->bytes, static_cast<double>(v)); break;
    case DType::kFloat16: Append(cd->bytes, FloatToHalf(v)); break;
    case DType::kBFloat16: Append(cd->bytes, FloatToBF16(v)); break;
    default: Append(cd->bytes, v); break;
  }
  return AddConst(UniqueValueName(hint), std::move(cd));
}

// dtype and shape from value_info / graph output declarations; lenient (a malformed entry
// is ignored: the meta pass recomputes both).
void Importer::ApplyTypeInfo(Value& v) {
  auto it = value_info_.find(v.name);
  if (it == value_info_.end() || !it->second->has_tensor_type()) return;
  const auto& tt = it->second->tensor_type();
  if (IsValidDType(tt.elem_type()) && tt.elem_type() != 0) v.dtype = static_cast<DType>(tt.elem_type());
  if (!tt.has_shape()) return;
  SymShape shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) return;
      shape.push_back(Sym(d.dim_value()));
    } else if (IsNamedDim(d)) {
      shape.push_back(Sym::Var(d.dim_param()));
    } else {
      shape.push_back(Sym::Var(v.name + "_dim" + std::to_string(i)));
    }
  }
  v.shape = std::move(shape);
}

// ---- tensors ----------------------------------------------------------------------------

Result<std::shared_ptr<ConstData>> Importer::TensorData(const onnx::TensorProto& t,
                                                        const std::string& what) {
  KILN_ASSIGN_OR_RETURN(DType dtype, ToDType(t.data_type(), what));
  if (t.has_segment()) return Unimplemented(what + ": segmented tensors are not supported");
  auto cd = std::make_shared<ConstData>();
  cd->dtype = dtype;
  int64_t n = 1;
  for (int i = 0; i < t.dims_size(); ++i) {
    const int64_t d = t.dims(i);
    if (d < 0)
      return DataLoss(what + ": dim " + std::to_string(i) + " is " + std::to_string(d) +
                      ", expected >= 0");
    if (__builtin_mul_overflow(n, d, &n))
      return DataLoss(what + ": element count of dims " +
                      ShapeText(std::vector<int64_t>(t.dims().begin(), t.dims().end())) + " overflows int64");
    cd->dims.push_back(d);
  }
  const int64_t esize = static_cast<int64_t>(DTypeSize(dtype));
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(n, esize, &nbytes))
    return DataLoss(what + ": byte size of dims " + ShapeText(cd->dims) + " x " +
                    DTypeText(dtype) + " overflows int64");
  const std::string shape_text = DTypeText(dtype) + ShapeText(cd->dims);

  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    KILN_RETURN_IF_ERROR(ReadExternal(t, what, nbytes, cd->bytes));
    return cd;
  }
  if (t.has_raw_data()) {
    if (static_cast<int64_t>(t.raw_data().size()) != nbytes)
      return DataLoss(what + ": raw_data has " + std::to_string(t.raw_data().size()) +
                      " bytes, expected " + std::to_string(nbytes) + " for " + shape_text);
    KILN_RETURN_IF_ERROR(CountConstantBytes(nbytes, what));
    cd->bytes.assign(t.raw_data().begin(), t.raw_data().end());
    return cd;
  }
  // Typed fields, per the ONNX spec's field-per-type table.
  auto count_error = [&](const char* field, int have) {
    return DataLoss(what + ": " + field + " has " + std::to_string(have) + " values, expected " +
                    std::to_string(n) + " for " + shape_text);
  };
  // Counts are checked before anything is allocated: dims alone never size a buffer.
  int have = 0;
  const char* field = "int32_data";
  switch (dtype) {
    case DType::kFloat32: have = t.float_data_size(); field = "float_data"; break;
    case DType::kFloat64: have = t.double_data_size(); field = "double_data"; break;
    case DType::kInt64: have = t.int64_data_size(); field = "int64_data"; break;
    case DType::kUInt32:
    case DType::kUInt64: have = t.uint64_data_size(); field = "uint64_data"; break;
    default: have = t.int32_data_size(); break;
  }
  if (have != n) return count_error(field, have);
  KILN_RETURN_IF_ERROR(CountConstantBytes(nbytes, what));
  cd->bytes.reserve(static_cast<size_t>(nbytes));
  switch (dtype) {
    case DType::kFloat32:
      for (float x : t.float_data()) Append(cd->bytes, x);
      break;
    case DType::kFloat64:
      for (double x : t.double_data()) Append(cd->bytes, x);
      break;
    case DType::kInt64:
      for (int64_t x : t.int64_data()) Append(cd->bytes, x);
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      for (uint64_t x : t.uint64_data()) {
        if (dtype == DType::kUInt32) Append(cd->bytes, static_cast<uint32_t>(x));
        else Append(cd->bytes, x);
      }
      break;
    default:  // int32, int16, int8, uint16, uint8, bool, float16, bfloat16: int32_data
      for (int32_t x : t.int32_data()) {
        switch (dtype) {
          case DType::kInt32: Append(cd->bytes, x); break;
          case DType::kInt16: Append(cd->bytes, static_cast<int16_t>(x)); break;
          case DType::kUInt16:
          case DType::kFloat16:
          case DType::kBFloat16: Append(cd->bytes, static_cast<uint16_t>(x)); break;
          case DType::kInt8: Append(cd->bytes, static_cast<int8_t>(x)); break;
          case DType::kUInt8: Append(cd->bytes, static_cast<uint8_t>(x)); break;
          case DType::kBool: Append(cd->bytes, static_cast<uint8_t>(x != 0)); break;
          default: break;
        }
      }
      break;
  }
  if (static_cast<int64_t>(cd->bytes.size()) != nbytes)
    return Internal(what + ": built " + std::to_string(cd->bytes.size()) + " bytes, expected " +
                    std::to_string(nbytes));
  return cd;
}

Status Importer::ReadExternal(const onnx::TensorProto& t, const std::string& what,
                              int64_t nbytes, std::vector<uint8_t>& out) {
  std::string location;
  const std::string* offset_text = nullptr;
  const std::string* length_text = nullptr;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location") location = e.value();
    else if (e.key() == "offset") offset_text = &e.value();
    else if (e.key() == "length") length_text = &e.value();
    // "checksum" and unknown keys are ignored
  }
  if (location.empty()) return DataLoss(what + ": external data has no 'location' entry");
  if (location.find('\0') != std::string::npos)
    return DataLoss(what + ": external data location " + Q(location) + " contains a NUL byte");
  std::optional<int64_t> offset, length;
  for (auto [key, text, value] : {std::tuple{"offset", offset_text, &offset}, std::tuple{"length", length_text, &length}}) {
    if (!text) continue;
    *value = ParseNonNegative(*text);
    if (!*value)
      return DataLoss(what + ": external data " + key + " " + Q(*text) + " (file " + Q(location) +
                      ") is not an integer in 0.." + std::to_string(std::numeric_limits<int64_t>::max()));
  }
  if (base_dir_.empty())
    return InvalidArgument(what + ": external data file " + Q(location) +
                           " needs the model's folder, but the model was given as bytes "
                           "with no base directory");
  const fs::path rel(location);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory())
    return DataLoss(what + ": external data file " + Q(location) +
                    " is an absolute path; it must be relative to the model folder " +
                    Q(base_dir_));
  for (const auto& part : rel)
    if (part == "..")
      return DataLoss(what + ": external data file " + Q(location) +
                      " escapes the model folder " + Q(base_dir_) + " ('..' not allowed)");
  const fs::path full = fs::path(base_dir_) / rel;
  const std::string file = full.string();
  std::error_code ec;
  // Symlinks inside the folder must not lead out of it either; a path that cannot be
  // resolved (a symlink loop, no permission) is refused rather than left unchecked.
  const fs::path cbase = fs::weakly_canonical(fs::path(base_dir_), ec);
  const fs::path cfull = ec ? fs::path() : fs::weakly_canonical(full, ec);
  if (ec)
    return DataLoss(what + ": external data file " + Q(file) + " cannot be resolved: " + ec.message());
  auto [b, f] = std::mismatch(cbase.begin(), cbase.end(), cfull.begin(), cfull.end());
  if (b != cbase.end() && !(std::next(b) == cbase.end() && b->empty()))
    return DataLoss(what + ": external data file " + Q(location) + " resolves to " +
                    Q(cfull.string()) + ", outside the model folder " + Q(cbase.string()));
  const fs::file_status status = fs::status(full, ec);
  if (status.type() == fs::file_type::not_found)
    return NotFound(what + ": external data file " + Q(file) + " does not exist");
  if (status.type() != fs::file_type::regular)
    return DataLoss(what + ": external data file " + Q(file) + " is " +
                    (status.type() == fs::file_type::directory ? "a directory" : "not a regular file") +
                    ", expected a file");
  const uintmax_t fsize = fs::file_size(full, ec);
  if (ec) return NotFound(what + ": cannot stat external data file " + Q(file) + ": " + ec.message());
  if (fsize > options_.max_file_bytes)
    return ResourceExhausted(what + ": external data file " + Q(file) + " has " +
                             std::to_string(fsize) + " bytes, over max_file_bytes " +
                             std::to_string(options_.max_file_bytes));
  if (length && *length != nbytes)
    return DataLoss(what + ": external data length is " + std::to_string(*length) +
                    " bytes, expected " + std::to_string(nbytes) + " for " +
                    DTypeText(static_cast<DType>(t.data_type())) +
                    ShapeText(std::vector<int64_t>(t.dims().begin(), t.dims().end())) + " (file " + Q(file) + ")");
  const uint64_t off = static_cast<uint64_t>(offset.value_or(0));
  // Without 'length' the data runs from the offset to the end of the file (onnx's
  // external_data_helper reads it so): it must be the tensor's bytes exactly.
  if (!length && off <= fsize && fsize - off != static_cast<uint64_t>(nbytes))
    return DataLoss(what + ": external data has no 'length', so it is the " + std::to_string(fsize - off) +
                    " bytes from offset " + std::to_string(off) + " to the end of file " + Q(file) + ", but " +
                    DTypeText(static_cast<DType>(t.data_type())) +
                    ShapeText(std::vector<int64_t>(t.dims().begin(), t.dims().end())) + " needs " +
                    std::to_string(nbytes));
  if (off > fsize || fsize - off < static_cast<uint64_t>(nbytes))
    return DataLoss(what + ": external data range [" + std::to_string(off) + ", " +
                    std::to_string(off + static_cast<uint64_t>(nbytes)) +
                    ") is outside file " + Q(file) + " of " + std::to_string(fsize) + " bytes");
  KILN_RETURN_IF_ERROR(CountConstantBytes(nbytes, what));
  std::ifstream in(full, std::ios::binary);
  if (!in) return NotFound(what + ": cannot open external data file " + Q(file));
  out.resize(static_cast<size_t>(nbytes));
  in.seekg(static_cast<std::streamoff>(off));
  if (nbytes > 0) in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(nbytes));
  if (!in)
    return DataLoss(what + ": reading " + std::to_string(nbytes) + " bytes at offset " +
                    std::to_string(off) + " of external data file " + Q(file) + " failed");
  return Status::Ok();
}

// ---- graphs -----------------------------------------------------------------------------

Status Importer::ImportMainInputs(const onnx::GraphProto& g) {
  std::unordered_set<std::string> init_names;
  for (const auto& t : g.initializer()) init_names.insert(t.name());
  std::unordered_set<std::string> runtime_inputs, constant_inputs;
  for (const auto& in : g.input()) {
    const std::string& name = in.name();
    if (init_names.count(name)) continue;  // frozen: a constant, not a runtime input
    const std::string what = "graph input " + Q(name);
    if (name.empty()) return DataLoss("graph input #" + std::to_string(runtime_inputs.size()) + " has no name");
    if (!in.has_type()) return DataLoss(what + ": no type");
    if (!in.type().has_tensor_type())
      return Unimplemented(what + ": only tensor inputs are supported (found a sequence, map, "
                           "optional or sparse type)");
    const auto& tt = in.type().tensor_type();
    KILN_ASSIGN_OR_RETURN(DType dtype, ToDType(tt.elem_type(), what));
    auto ov = options_.input_shapes.find(name);
    const std::vector<int64_t>* over = ov == options_.input_shapes.end() ? nullptr : &ov->second;
    if (over)
      for (size_t i = 0; i < over->size(); ++i)
        if ((*over)[i] < -1)
          return InvalidArgument("input_shapes[" + Q(name) + "] dim " + std::to_string(i) +
                                 " is " + std::to_string((*over)[i]) +
                                 ", expected >= 0 or -1 (keep the declared dim)");
    SymShape shape;
    if (!tt.has_shape()) {
      if (!over || std::count(over->begin(), over->end(), -1) > 0)
        return Unimplemented(what + ": the model declares no shape (unknown rank); give every "
                             "dim in ImportOptions::input_shapes");
      for (int64_t d : *over) shape.push_back(Sym(d));
    } else {
      for (int i = 0; i < tt.shape().dim_size(); ++i) {
        const auto& d = tt.shape().dim(i);
        if (d.has_dim_value() && d.dim_value() == -1) {
          // Not valid ONNX, but Paddle and other exporters write -1 for a dynamic dim and
          // onnxruntime accepts it: treat it as an unnamed symbolic dim.
          shape.push_back(Sym::Var(name + "_dim" + std::to_string(i)));
        } else if (d.has_dim_value()) {
          if (d.dim_value() < 0)
            return DataLoss(what + ": dim " + std::to_string(i) + " is " +
                            std::to_string(d.dim_value()) + ", expected >= 0 (or -1 for a dynamic dim)");
          shape.push_back(Sym(d.dim_value()));
        } else if (IsNamedDim(d)) {
          shape.push_back(Sym::Var(d.dim_param()));
        } else {
          shape.push_back(Sym::Var(name + "_dim" + std::to_string(i)));
        }
      }
      const std::string declared = ir::ShapeToString(shape);
      if (over) {
        if (over->size() != shape.size())
          return InvalidArgument("input_shapes[" + Q(name) + "] has rank " +
                                 std::to_string(over->size()) + ", the model declares rank " +
                                 std::to_string(shape.size()) + " " + declared);
        for (size_t i = 0; i < shape.size(); ++i) {
          const int64_t want = (*over)[i];
          if (want == -1) continue;
          if (shape[i].is_const() && *shape[i].value() != want)
            return InvalidArgument("input_shapes[" + Q(name) + "] dim " + std::to_string(i) +
                                   " = " + std::to_string(want) + ", but the model fixes it to " +
                                   std::to_string(*shape[i].value()) + " " + declared);
          shape[i] = Sym(want);
        }
      }
    }
    // The fixed dims alone must leave a byte size int64 can count: the runtime sizes and
    // copies inputs from it.
    int64_t bytes = static_cast<int64_t>(DTypeSize(dtype));
    for (const Sym& d : shape)
      if (d.is_const() && __builtin_mul_overflow(bytes, *d.value(), &bytes)) {
        const std::string text = what + ": " + DTypeText(dtype) + ir::ShapeToString(shape) +
                                 " has more bytes than int64 can count";
        return over ? InvalidArgument(text + " (dims fixed by input_shapes)") : DataLoss(text);
      }
    if (auto c = options_.constant_inputs.find(name); c != options_.constant_inputs.end()) {
      // Bound to a constant: shapes that depend on it (axes, pads, sizes) are known now.
      const ConstData& d = *c->second;
      bool fits = d.dtype == dtype && (!tt.has_shape() || d.dims.size() == shape.size());
      for (size_t i = 0; fits && tt.has_shape() && i < shape.size(); ++i)
        fits = !shape[i].is_const() || *shape[i].value() == d.dims[i];
      if (!fits) {
        SymShape given;
        for (int64_t x : d.dims) given.push_back(Sym(x));
        return InvalidArgument("constant_inputs[" + Q(name) + "] is " + std::string(DTypeName(d.dtype)) +
                               ir::ShapeToString(given) + ", the model declares " + std::string(DTypeName(dtype)) +
                               ir::ShapeToString(shape));
      }
      KILN_RETURN_IF_ERROR(Define(name, AddConst(name, c->second), "graph"));
      constant_inputs.insert(name);
      continue;
    }
    Value v;
    v.name = name;
    v.dtype = dtype;
    v.shape = std::move(shape);
    value_names_.insert(name);
    const ValueId id = trace_.AddValue(std::move(v));
    KILN_RETURN_IF_ERROR(Define(name, id, "graph"));
    trace_.inputs.push_back(id);
    runtime_inputs.insert(name);
  }
  for (const auto& [name, data] : options_.constant_inputs)
    if (!constant_inputs.count(name))
      return InvalidArgument("constant_inputs names " + Q(name) + ", which is not a runtime input of the model");
  for (const auto& [name, dims] : options_.input_shapes) {
    if (runtime_inputs.count(name)) continue;
    if (init_names.count(name))
      return InvalidArgument("input_shapes names " + Q(name) +
                             ", an initializer (a frozen constant), not a runtime input");
    std::string list;
    for (const auto& in : g.input())
      if (runtime_inputs.count(in.name())) list += (list.empty() ? "" : ", ") + in.name();
    return InvalidArgument("input_shapes names " + Q(name) +
                           ", which is not an input of the model (inputs: " + list + ")");
  }
  return Status::Ok();
}

Status Importer::ImportGraph(const onnx::GraphProto& g, ir::Block& block, bool is_main,
                             const std::string& where) {
  for (const auto& vi : g.value_info())
    if (vi.has_type()) value_info_[vi.name()] = &vi.type();
  for (const auto& o : g.output())
    if (o.has_type()) value_info_[o.name()] = &o.type();
  if (g.sparse_initializer_size() > 0)
    return Unimplemented(where + ": sparse initializers are not supported (" +
                         Q(g.sparse_initializer(0).values().name()) + ")");
  for (const auto& t : g.initializer()) {
    if (t.name().empty()) return DataLoss(where + ": an initializer has no name");
    KILN_ASSIGN_OR_RETURN(auto data, TensorData(t, "initializer " + Q(t.name())));
    KILN_RETURN_IF_ERROR(Define(t.name(), AddConst(t.name(), std::move(data)), where));
  }
  if (is_main) KILN_RETURN_IF_ERROR(ImportMainInputs(g));
  for (int i = 0; i < g.node_size(); ++i) KILN_RETURN_IF_ERROR(ImportNode(g.node(i), i, block));
  for (int i = 0; i < g.output_size(); ++i) {
    const std::string& name = g.output(i).name();
    auto id = Lookup(name);
    if (!id)
      return DataLoss(where + ": output #" + std::to_string(i) + " " + Q(name) +
                      " is not produced by any node, initializer or input");
    block.outputs.push_back(*id);
  }
  return Status::Ok();
}

// ---- nodes ------------------------------------------------------------------------------

Status Importer::ImportConstantNode(const onnx::NodeProto& np, const std::string& where) {
  if (np.output_size() != 1 || np.output(0).empty())
    return DataLoss(where + ": expected 1 output, found " + std::to_string(np.output_size()));
  if (np.attribute_size() != 1)
    return DataLoss(where + ": expected exactly 1 attribute (value, value_float(s), value_int(s)), found " +
                    std::to_string(np.attribute_size()));
  const auto& a = np.attribute(0);
  const std::string& out = np.output(0);
  std::shared_ptr<ConstData> cd;
  if (a.name() == "value") {
    if (!a.has_t()) return DataLoss(where + ": attribute 'value' holds no tensor");
    KILN_ASSIGN_OR_RETURN(cd, TensorData(a.t(), where + " attribute 'value'"));
  } else if (a.name() == "value_float" || a.name() == "value_floats") {
    cd = std::make_shared<ConstData>();
    cd->dtype = DType::kFloat32;
    if (a.name() == "value_float") {
      Append(cd->bytes, a.f());
    } else {
      cd->dims = {a.floats_size()};
      for (float x : a.floats()) Append(cd->bytes, x);
    }
  } else if (a.name() == "value_int" || a.name() == "value_ints") {
    cd = std::make_shared<ConstData>();
    cd->dtype = DType::kInt64;
    if (a.name() == "value_int") {
      Append(cd->bytes, a.i());
    } else {
      cd->dims = {a.ints_size()};
      for (int64_t x : a.ints()) Append(cd->bytes, x);
    }
  } else if (a.name() == "value_string" || a.name() == "value_strings" ||
             a.name() == "sparse_value") {
    return Unimplemented(where + ": attribute " + Q(a.name()) +
                         " is not supported (string and sparse constants)");
  } else {
    return DataLoss(where + ": unknown attribute " + Q(a.name()));
  }
  value_names_.insert(out);
  return DefineOutput(out, AddConst(out, std::move(cd)), where);
}

Status Importer::ConvertAttr(const onnx::NodeProto& np, const onnx::AttributeProto& a,
                             Node& node, const std::string& where) {
  const std::string aw = where + " attribute " + Q(a.name());
  if (a.name().empty()) return DataLoss(where + ": an attribute has no name");
  if (!a.ref_attr_name().empty())
    return Unimplemented(aw + ": attribute references (ONNX functions) are not supported");
  auto type = a.type();
  if (type == onnx::AttributeProto::UNDEFINED) {  // IR < 2 files leave `type` unset
    if (a.has_f()) type = onnx::AttributeProto::FLOAT;
    else if (a.has_i()) type = onnx::AttributeProto::INT;
    else if (a.has_s()) type = onnx::AttributeProto::STRING;
    else if (a.has_t()) type = onnx::AttributeProto::TENSOR;
    else if (a.has_g()) type = onnx::AttributeProto::GRAPH;
    else if (a.floats_size()) type = onnx::AttributeProto::FLOATS;
    else if (a.ints_size()) type = onnx::AttributeProto::INTS;
    else if (a.strings_size()) type = onnx::AttributeProto::STRINGS;
    else return DataLoss(aw + ": no type and no value");
  }
  // Kiln's meta functions read attributes by kind and would fall back to the default on a
  // mismatch: check the type against ONNX's schema (Debian's libonnx knows opsets <= 17; an
  // op's attribute types do not change across versions), so the mistake is an error instead.
  // An attribute the op's version at this opset does not define (ReduceSum-13's 'axes', which
  // is an input from version 13 on; Shape-1's 'start', added in version 15) is an error too, as
  // in ONNX's checker and onnxruntime, where the schema knows the opset.
  if (np.domain().empty() || np.domain() == "ai.onnx") {
    if (const onnx::OpSchema* schema =
            onnx::OpSchemaRegistry::Schema(np.op_type(), static_cast<int>(std::min<int64_t>(opset_, INT32_MAX)), "")) {
      auto declared = schema->attributes().find(a.name());
      if (declared == schema->attributes().end() && opset_ <= KnownOpset()) {
        std::string names;
        for (const auto& [name, attr] : schema->attributes()) names += (names.empty() ? "" : ", ") + Q(name);
        return InvalidArgument(aw + ": " + np.op_type() + "-" + std::to_string(schema->since_version()) +
                               " (the version at opset " + std::to_string(opset_) + ") has no such attribute" +
                               (names.empty() ? std::string(" (it has none)") : " (it has " + names + ")"));
      }
      if (declared != schema->attributes().end() && declared->second.type != type)
        return InvalidArgument(aw + " is " + onnx::AttributeProto::AttributeType_Name(type) + ", expected " +
                               onnx::AttributeProto::AttributeType_Name(declared->second.type) + " (ONNX " +
                               np.op_type() + "-" + std::to_string(schema->since_version()) + ")");
    }
  }
  switch (type) {
    case onnx::AttributeProto::INT: node.attrs.SetInt(a.name(), a.i()); return Status::Ok();
    case onnx::AttributeProto::FLOAT: node.attrs.SetFloat(a.name(), a.f()); return Status::Ok();
    case onnx::AttributeProto::STRING: node.attrs.SetString(a.name(), a.s()); return Status::Ok();
    case onnx::AttributeProto::INTS:
      node.attrs.SetInts(a.name(), {a.ints().begin(), a.ints().end()});
      return Status::Ok();
    case onnx::AttributeProto::FLOATS:
      node.attrs.SetFloats(a.name(), {a.floats().begin(), a.floats().end()});
      return Status::Ok();
    case onnx::AttributeProto::STRINGS: {
      const std::string& op = node.op;
      if (a.name() == "activations" && (op == "LSTM" || op == "GRU" || op == "RNN")) {
        // Defaults: LSTM Sigmoid,Tanh,Tanh; GRU Sigmoid,Tanh; RNN Tanh (per direction).
        std::vector<std::string> unit = op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                      : op == "GRU"  ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                     : std::vector<std::string>{"Tanh"};
        bool is_default = a.strings_size() > 0 && a.strings_size() % unit.size() == 0;
        for (int i = 0; is_default && i < a.strings_size(); ++i) {
          std::string s = a.strings(i);
          std::transform(s.begin(), s.end(), s.begin(), ::tolower);
          std::string u = unit[i % unit.size()];
          std::transform(u.begin(), u.end(), u.begin(), ::tolower);
          is_default = s == u;
        }
        if (is_default) return Status::Ok();
        // AttrMap holds no string lists; the kernels parse this comma-separated form.
        std::string list;
        for (int i = 0; i < a.strings_size(); ++i) list += (i ? "," : "") + a.strings(i);
        node.attrs.SetString(a.name(), list);
        return Status::Ok();
      }
      return Unimplemented(aw + ": STRINGS attributes are not supported");
    }
    case onnx::AttributeProto::TENSOR: {
      if (node.op == "ConstantOfShape" && a.name() == "value") {
        if (!a.has_t()) return DataLoss(aw + ": holds no tensor");
        KILN_ASSIGN_OR_RETURN(auto cd, TensorData(a.t(), aw));
        if (cd->num_elements() != 1)
          return InvalidArgument(aw + ": expected a one-element tensor, found " +
                                 DTypeText(cd->dtype) + ShapeText(cd->dims));
        node.attrs.SetInt("dtype", static_cast<int64_t>(cd->dtype));
        if (IsFloatType(cd->dtype)) node.attrs.SetFloat("value_float", static_cast<float>(cd->FloatAt(0)));
        else node.attrs.SetInt("value_int", cd->IntAt(0));
        return Status::Ok();
      }
      return Unimplemented(aw + ": TENSOR attributes are supported only for Constant and "
                           "ConstantOfShape");
    }
    case onnx::AttributeProto::GRAPH: {
      if (!a.has_g()) return DataLoss(aw + ": holds no graph");
      const auto& g = a.g();
      const bool body = (node.op == "Loop" || node.op == "Scan") && a.name() == "body";
      if (g.input_size() > 0 && !body)
        return InvalidArgument(aw + ": a subgraph with inputs, which only a Loop's or Scan's body has");
      if (node.op == "Scan" && opset_ < 9)
        return Unimplemented(aw + ": Scan-8 (a batch axis and sequence_lens) is not supported; Scan from opset 9 is");
      auto block = std::make_shared<ir::Block>();
      scopes_.emplace_back();
      // A body's parameters: values of their own, bound per iteration by the canonical stage
      // (passes/canonicalize.h), which unrolls the loop.
      Status st = Status::Ok();
      for (int i = 0; i < g.input_size() && st.ok(); ++i) {
        const onnx::ValueInfoProto& in = g.input(i);
        const std::string what = aw + " input " + Q(in.name());
        if (in.has_type() && !in.type().has_tensor_type()) {
          st = Unimplemented(what + ": only tensor parameters are supported (found a sequence, map, optional or "
                             "sparse type)");
          break;
        }
        Value v;
        v.name = in.name();
        if (in.has_type() && in.type().tensor_type().elem_type() != 0) {
          auto dtype = ToDType(in.type().tensor_type().elem_type(), what);
          if (!dtype.ok()) {
            st = dtype.status();
            break;
          }
          v.dtype = *dtype;
        }
        const ValueId id = trace_.AddValue(std::move(v));
        block->inputs.push_back(id);
        st = Define(in.name(), id, aw);
      }
      if (st.ok()) st = ImportGraph(g, *block, false, aw);
      scopes_.pop_back();
      KILN_RETURN_IF_ERROR(st);
      node.blocks.emplace_back(a.name(), std::move(block));
      return Status::Ok();
    }
    default:
      return Unimplemented(aw + ": attribute type " +
                           onnx::AttributeProto::AttributeType_Name(type) + " is not supported");
  }
}

Status Importer::Rewrite(const onnx::NodeProto& np, Node& node, const std::string& where,
                         int* keep_outputs) {
  const std::string op = node.op;
  auto need = [&](const char* attr) -> Status {
    if (!node.attrs.Has(attr))
      return InvalidArgument(where + ": opset " + std::to_string(opset_) + " " + op +
                             " requires attribute " + Q(attr));
    return Status::Ok();
  };
  if (opset_ < 7) {
    node.attrs.Erase("consumed_inputs");
    node.attrs.Erase("broadcast");
  }
  if (op == "Cast" && opset_ < 6) {
    const Attr* to = node.attrs.Find("to");
    onnx::TensorProto::DataType type;
    if (!to || to->kind != Attr::Kind::kString || !onnx::TensorProto::DataType_Parse(to->s, &type))
      return InvalidArgument(where + ": opset " + std::to_string(opset_) +
                             " Cast requires attribute 'to' naming a type (such as 'FLOAT')");
    node.attrs.SetInt("to", type);
  } else if (op == "Concat" && opset_ < 4) {
    node.attrs.SetInt("axis", node.attrs.GetInt("axis", 1));
  } else if (op == "Reshape" && opset_ < 5) {
    KILN_RETURN_IF_ERROR(need("shape"));
    node.inputs.resize(1);
    IntsAttrToInput(node, "shape", 1);
  } else if (op == "Slice" && opset_ < 10) {
    KILN_RETURN_IF_ERROR(need("starts"));
    KILN_RETURN_IF_ERROR(need("ends"));
    node.inputs.resize(1);
    IntsAttrToInput(node, "starts", 1);
    IntsAttrToInput(node, "ends", 2);
    IntsAttrToInput(node, "axes", 3);
  } else if ((op == "Squeeze" || op == "Unsqueeze") && opset_ < 13) {
    if (op == "Unsqueeze") KILN_RETURN_IF_ERROR(need("axes"));
    IntsAttrToInput(node, "axes", 1);
  } else if ((op == "ReduceSum" && opset_ < 13) || (ReduceOps().count(op) && opset_ < 18)) {
    IntsAttrToInput(node, "axes", 1);
  } else if (op == "Pad" && opset_ < 11) {
    if (node.attrs.Has("paddings") && !node.attrs.Has("pads")) {
      node.attrs.SetInts("pads", node.attrs.GetInts("paddings"));
      node.attrs.Erase("paddings");
    }
    KILN_RETURN_IF_ERROR(need("pads"));
    IntsAttrToInput(node, "pads", 1);
    const float value = node.attrs.GetFloat("value", 0.0f);
    node.attrs.Erase("value");
    if (value != 0.0f) SetInput(node, 2, AddFloatScalar(node.name + "_value", InputDType(node, 0), value));
  } else if (op == "Clip" && opset_ < 11) {
    const DType dt = InputDType(node, 0);
    if (const Attr* a = node.attrs.Find("min"); a && a->kind == Attr::Kind::kFloat)
      SetInput(node, 1, AddFloatScalar(node.name + "_min", dt, a->f));
    if (const Attr* a = node.attrs.Find("max"); a && a->kind == Attr::Kind::kFloat)
      SetInput(node, 2, AddFloatScalar(node.name + "_max", dt, a->f));
    node.attrs.Erase("min");
    node.attrs.Erase("max");
  } else if (op == "Split" && opset_ < 13) {
    IntsAttrToInput(node, "split", 1);
  } else if (op == "TopK" && opset_ < 10) {
    KILN_RETURN_IF_ERROR(need("k"));
    SetInput(node, 1, AddInt64Const(node.name + "_k", {node.attrs.GetInt("k", 0)}));
    node.attrs.Erase("k");
  } else if (op == "Upsample" || (op == "Resize" && opset_ < 11)) {
    std::string mode(node.attrs.GetString("mode", "nearest"));
    if (mode == "bilinear") mode = "linear";
    if (mode != "nearest" && mode != "linear")
      return InvalidArgument(where + ": mode " + Q(mode) + ", expected 'nearest' or 'linear'");
    ValueId x = node.inputs.empty() ? kNoValue : node.inputs[0];
    ValueId scales = node.inputs.size() > 1 ? node.inputs[1] : kNoValue;
    if (op == "Upsample" && opset_ < 9) {
      KILN_RETURN_IF_ERROR(need("scales"));
      auto cd = std::make_shared<ConstData>();
      cd->dtype = DType::kFloat32;
      const auto& s = node.attrs.GetFloats("scales");
      cd->dims = {static_cast<int64_t>(s.size())};
      for (float f : s) Append(cd->bytes, f);
      scales = AddConst(UniqueValueName(node.name + "_scales"), std::move(cd));
    }
    if (x == kNoValue || scales == kNoValue)
      return InvalidArgument(where + ": expected inputs X and scales");
    node.op = "Resize";
    node.inputs = {x, kNoValue, scales};
    node.attrs = AttrMap();
    node.attrs.SetString("mode", mode);
    node.attrs.SetString("coordinate_transformation_mode", "asymmetric");
    node.attrs.SetString("nearest_mode", "floor");
  } else if (op == "Resize") {
    for (size_t i = 1; i <= 2 && i < node.inputs.size(); ++i) {
      const ValueId id = node.inputs[i];
      if (id != kNoValue && trace_.value(id).is_const() && trace_.value(id).data->num_elements() == 0)
        node.inputs[i] = kNoValue;  // Resize-11 spelled "absent" as an empty tensor
    }
  } else if (op == "DFT" && opset_ < 20) {  // axis: an attribute (default 1), an input (default -2) from 20
    node.attrs.SetInt("axis", node.attrs.GetInt("axis", 1));
  } else if (op == "RoiAlign" && opset_ < 16) {  // RoiAlign-10 had output_half_pixel semantics, no attribute
    node.attrs.SetString("coordinate_transformation_mode", "output_half_pixel");
  } else if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && opset_ < 13) {
    node.attrs.SetInt("axis", node.attrs.GetInt("axis", 1));
    node.attrs.SetInt("coerce_2d", 1);
  } else if (op == "Dropout") {
    // Before opset 10 the mask had the data's type; since then it is bool, as Kiln's Dropout makes it.
    const bool mask_used = np.output_size() > 1 && Used(np.output(1));
    if (mask_used && opset_ < 10)
      return Unimplemented(where + ": the mask output " + Q(np.output(1)) + " of opset " + std::to_string(opset_) +
                           " Dropout (a float mask) is used; Kiln supports it from opset 10");
    if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
      const Value& tm = trace_.value(node.inputs[2]);
      if (!tm.is_const())
        return Unimplemented(where + ": training_mode " + Q(tm.name) +
                             " is not a constant; Kiln supports inference mode only");
      if (tm.data->num_elements() > 0 && tm.data->IntAt(0) != 0)
        return Unimplemented(where + ": training_mode is true; Kiln supports inference mode only");
    }
    if (node.inputs.empty()) return InvalidArgument(where + ": expected input 'data'");
    // In inference the output is the input and the mask is all true: an Identity, or a
    // Dropout of the data alone when the mask is read.
    node.op = mask_used ? "Dropout" : "Identity";
    node.inputs.resize(1);
    node.attrs = AttrMap();
    *keep_outputs = mask_used ? 2 : 1;
  } else if (op == "BatchNormalization") {
    if (node.attrs.GetInt("training_mode", 0) != 0)
      return Unimplemented(where + ": training_mode=1 is not supported (inference only)");
    node.attrs.Erase("training_mode");
    for (int i = 1; i < np.output_size(); ++i)
      if (Used(np.output(i)))
        return Unimplemented(where + ": training output #" + std::to_string(i) + " " +
                             Q(np.output(i)) + " is used; Kiln supports inference mode only");
    if (node.attrs.Has("spatial")) {
      if (node.attrs.GetInt("spatial", 1) != 1)
        return Unimplemented(where + ": spatial=0 (per-activation statistics) is not supported");
      node.attrs.Erase("spatial");
    }
    node.attrs.Erase("is_test");
    *keep_outputs = 1;
  } else if (op == "ConstantOfShape") {
    if (!node.attrs.Has("dtype")) {
      node.attrs.SetInt("dtype", static_cast<int64_t>(DType::kFloat32));
      node.attrs.SetFloat("value_float", 0.0f);
    }
  } else if (op == "Gemm") {
    node.attrs.Erase("broadcast");
  }
  return Status::Ok();
}

Status Importer::ImportNode(const onnx::NodeProto& np, int index, ir::Block& block) {
  const std::string& op = np.op_type();
  if (op.empty()) return DataLoss("node #" + std::to_string(index) + " " + Q(np.name()) + " has no op_type");
  const std::string name = UniqueNodeName(np.name().empty() ? op + "_" + std::to_string(index) : np.name());
  const std::string where = "node " + Q(name) + " (" + op + ")";
  // onnxruntime registers SimplifiedLayerNormalization in the default domain (an op of its own,
  // not ONNX's), and its optimizer writes it there.
  const bool default_domain = np.domain().empty() || np.domain() == "ai.onnx";
  // com.microsoft ops whose ONNX form depends on their inputs' shapes stay one node until the
  // canonical stage writes them out (passes/contrib_ops.h).
  const bool shaped_contrib = np.domain() == "com.microsoft" && passes::IsShapedContribOp(op);
  if ((np.domain() == "com.microsoft" && !shaped_contrib) || (default_domain && op == "SimplifiedLayerNormalization"))
    return ImportContribNode(np, name, where, block);
  if (!default_domain && !shaped_contrib)
    return Unimplemented(where + ": domain " + Q(np.domain()) + " op " + Q(op) +
                         " is not supported (the default ONNX domain, and some of com.microsoft's ops)");
  if (op == "Constant") return ImportConstantNode(np, where);

  Node node;
  node.op = shaped_contrib ? std::string(passes::kContribPrefix) + op : op;
  node.name = name;
  for (int i = 0; i < np.input_size(); ++i) {
    const std::string& in = np.input(i);
    if (in.empty()) { node.inputs.push_back(kNoValue); continue; }
    auto id = Lookup(in);
    if (!id)
      return DataLoss(where + ": input #" + std::to_string(i) + " " + Q(in) +
                      " is not defined by any earlier node, initializer or graph input");
    node.inputs.push_back(*id);
  }
  for (int i = 0; i < np.attribute_size(); ++i) {
    // ONNX's checker refuses a name given twice (onnxruntime too); the last would win silently.
    for (int j = 0; j < i; ++j)
      if (np.attribute(j).name() == np.attribute(i).name())
        return DataLoss(where + ": attribute " + Q(np.attribute(i).name()) + " is given twice");
    KILN_RETURN_IF_ERROR(ConvertAttr(np, np.attribute(i), node, where));
  }
  int keep = -1;
  if (!shaped_contrib) {
    KILN_RETURN_IF_ERROR(CheckOpVersion(op, opset_, node.attrs, where));
    KILN_RETURN_IF_ERROR(Rewrite(np, node, where, &keep));
  }
  int nout = keep < 0 ? np.output_size() : std::min(keep, np.output_size());
  while (nout > 0 && np.output(nout - 1).empty()) --nout;  // trailing absent outputs are simply not made
  for (int i = 0; i < nout; ++i) {
    // An absent output before a present one (LSTM's Y when only Y_h is read) still gets a
    // value: instructions name every output they write up to the last.
    const std::string out = np.output(i).empty() ? UniqueValueName(name + "_unused_output_" + std::to_string(i))
                                                 : np.output(i);
    Value v;
    v.name = out;
    value_names_.insert(out);
    ApplyTypeInfo(v);
    const ValueId id = trace_.AddValue(std::move(v));
    KILN_RETURN_IF_ERROR(DefineOutput(out, id, where));
    node.outputs.push_back(id);
  }
  block.nodes.push_back(std::move(node));
  return Status::Ok();
}

Result<std::vector<ValueId>> Importer::ContribInputs(const onnx::NodeProto& np, const std::string& where) {
  std::vector<ValueId> in;
  for (int i = 0; i < np.input_size(); ++i) {
    if (np.input(i).empty()) {
      in.push_back(kNoValue);
      continue;
    }
    const auto id = Lookup(np.input(i));
    if (!id)
      return DataLoss(where + ": input #" + std::to_string(i) + " " + Q(np.input(i)) +
                      " is not defined by any earlier node, initializer or graph input");
    in.push_back(*id);
  }
  return in;
}

Status Importer::ImportContribNode(const onnx::NodeProto& np, const std::string& name, const std::string& where,
                                   ir::Block& block) {
  const std::string& op = np.op_type();
  // Inputs: least, most; outputs Kiln writes (others must be absent); float attributes taken.
  struct Form {
    const char* op;
    int min_in, max_in;
    std::vector<int> outputs;
    std::vector<const char*> floats, ints;
  };
  static const Form kForms[] = {
      {"Gelu", 1, 1, {0}, {}, {}},
      {"FastGelu", 1, 2, {0}, {}, {}},
      {"BiasGelu", 2, 2, {0}, {}, {}},
      {"QuickGelu", 1, 1, {0}, {"alpha"}, {}},
      {"BiasAdd", 3, 3, {0}, {}, {}},
      {"SkipLayerNormalization", 3, 5, {0, 3}, {"epsilon"}, {}},
      {"SkipSimplifiedLayerNormalization", 3, 4, {0, 3}, {"epsilon"}, {}},
      {"SimplifiedLayerNormalization", 2, 2, {0}, {"epsilon"}, {"axis", "stash_type"}},
      {"QGemm", 6, 9, {0}, {"alpha"}, {"transA", "transB"}},
  };
  if (op == "DynamicQuantizeLSTM") return ImportDynamicQuantizeLstm(np, name, where, block);
  if (op.starts_with("QLinear") || op == "QuantizeLinear" || op == "DequantizeLinear" ||
      op == "MatMulIntegerToFloat" || op == "DynamicQuantizeMatMul")
    return ImportQuantizedContribNode(np, name, where, block);
  const Form* form = nullptr;
  for (const Form& f : kForms)
    if (op == f.op) form = &f;
  if (form == nullptr)
    return Unimplemented(where + ": domain 'com.microsoft' op " + Q(op) +
                         " is not supported (of com.microsoft's ops Kiln takes Gelu, FastGelu, BiasGelu, QuickGelu, "
                         "BiasAdd, SkipLayerNormalization, SkipSimplifiedLayerNormalization, "
                         "SimplifiedLayerNormalization, QGemm, DynamicQuantizeLSTM, QuantizeLinear, DequantizeLinear, "
                         "QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, "
                         "QLinearAveragePool, QLinearGlobalAveragePool, MatMulIntegerToFloat, "
                         "DynamicQuantizeMatMul, FusedMatMul, FusedConv, Attention, MultiHeadAttention, "
                         "RotaryEmbedding and EmbedLayerNormalization)");
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> in, ContribInputs(np, where));
  while (!in.empty() && in.back() == kNoValue) in.pop_back();
  const auto given = [&](size_t i) { return i < in.size() && in[i] != kNoValue; };
  if (static_cast<int>(in.size()) < form->min_in || static_cast<int>(in.size()) > form->max_in)
    return InvalidArgument(where + ": " + op + " takes " + std::to_string(form->min_in) +
                           (form->max_in > form->min_in ? " to " + std::to_string(form->max_in) : std::string()) +
                           " inputs, got " + std::to_string(in.size()));
  for (int i = 0; i < form->min_in; ++i)
    if (!given(static_cast<size_t>(i)))
      return InvalidArgument(where + ": com.microsoft " + op + " input #" + std::to_string(i) + " is required");
  for (int i = 0; i < np.output_size(); ++i)
    if (!np.output(i).empty() && std::find(form->outputs.begin(), form->outputs.end(), i) == form->outputs.end())
      return Unimplemented(where + ": com.microsoft " + op + " output #" + std::to_string(i) + " (" +
                           Q(np.output(i)) + ") is not produced by Kiln (it writes output" +
                           (form->outputs.size() > 1 ? "s 0 and 3" : " 0") + ")");
  if (np.output_size() < 1 || np.output(0).empty())
    return InvalidArgument(where + ": com.microsoft " + op + " needs its output #0");
  AttrMap attrs;
  for (const onnx::AttributeProto& a : np.attribute()) {
    const bool f = std::find_if(form->floats.begin(), form->floats.end(), [&](const char* n) { return a.name() == n; }) !=
                   form->floats.end();
    const bool i = std::find_if(form->ints.begin(), form->ints.end(), [&](const char* n) { return a.name() == n; }) !=
                   form->ints.end();
    if (f && a.type() == onnx::AttributeProto::FLOAT) attrs.SetFloat(a.name(), a.f());
    else if (i && a.type() == onnx::AttributeProto::INT) attrs.SetInt(a.name(), a.i());
    else
      return InvalidArgument(where + ": com.microsoft " + op + " has no " +
                             onnx::AttributeProto::AttributeType_Name(a.type()) + " attribute " + Q(a.name()));
  }
  // Each step a node, writing output `out` of np (-1: an intermediate value).
  const auto step = [&](const std::string& step_op, std::vector<ValueId> inputs, int out,
                        AttrMap step_attrs = {}) -> Result<ValueId> {
    Node n;
    n.op = step_op;
    n.name = out == 0 ? name : UniqueNodeName(name + "/" + step_op);
    n.inputs = std::move(inputs);
    n.attrs = std::move(step_attrs);
    const bool named = out >= 0 && out < np.output_size() && !np.output(out).empty();
    Value v;
    v.name = named ? np.output(out) : UniqueValueName(name + "/" + step_op);
    value_names_.insert(v.name);
    if (named) ApplyTypeInfo(v);
    const ValueId id = trace_.AddValue(std::move(v));
    if (named) KILN_RETURN_IF_ERROR(DefineOutput(np.output(out), id, where));
    n.outputs = {id};
    block.nodes.push_back(std::move(n));
    return id;
  };
  const auto gelu = [](const char* approximate) {
    AttrMap a;
    a.SetString("approximate", approximate);
    return a;
  };
  const DType dt = trace_.value(in[0]).dtype;
  if (op == "QGemm") return step("QGemm", in, 0, attrs).status();  // a registry op of its own
  if (op == "Gelu") return step("Gelu", {in[0]}, 0, gelu("none")).status();
  if (op == "BiasGelu" || (op == "FastGelu" && given(1))) {
    KILN_ASSIGN_OR_RETURN(const ValueId sum, step("Add", {in[0], in[1]}, -1));
    return step("Gelu", {sum}, 0, gelu(op == "BiasGelu" ? "none" : "tanh")).status();
  }
  if (op == "FastGelu") return step("Gelu", {in[0]}, 0, gelu("tanh")).status();
  if (op == "QuickGelu") {  // x * sigmoid(alpha * x), alpha 1.702 by default
    const float alpha = attrs.GetFloat("alpha", 1.702f);
    KILN_ASSIGN_OR_RETURN(const ValueId ax, step("Mul", {in[0], AddFloatScalar(name + "/alpha", dt, alpha)}, -1));
    KILN_ASSIGN_OR_RETURN(const ValueId sig, step("Sigmoid", {ax}, -1));
    return step("Mul", {in[0], sig}, 0).status();
  }
  if (op == "BiasAdd") {  // X + bias + skip, in that order
    KILN_ASSIGN_OR_RETURN(const ValueId xb, step("Add", {in[0], in[1]}, -1));
    return step("Add", {xb, in[2]}, 0).status();
  }
  AttrMap norm;  // over the last axis, statistics in float32 (ONNX's stash_type 1)
  norm.SetInt("axis", attrs.GetInt("axis", -1));
  norm.SetInt("stash_type", attrs.GetInt("stash_type", 1));
  if (op == "SimplifiedLayerNormalization") {  // RMSNormalization, LayerNormalization's epsilon default
    norm.SetFloat("epsilon", attrs.GetFloat("epsilon", 1e-5f));
    return step("RMSNormalization", {in[0], in[1]}, 0, norm).status();
  }
  // SkipLayerNormalization (input, skip, gamma, beta, bias) and SkipSimplifiedLayerNormalization
  // (input, skip, gamma, bias): the norm of input + skip (+ bias), that sum output #3. Their
  // epsilon must be given: onnxruntime's transformer optimizer always writes it.
  if (!attrs.Has("epsilon"))
    return InvalidArgument(where + ": com.microsoft " + op + " needs its 'epsilon' attribute");
  norm.SetFloat("epsilon", attrs.GetFloat("epsilon", 0.0f));
  const bool simplified = op == "SkipSimplifiedLayerNormalization";
  const size_t bias_at = simplified ? 3 : 4;
  KILN_ASSIGN_OR_RETURN(ValueId sum, step("Add", {in[0], in[1]}, given(bias_at) ? -1 : 3));
  if (given(bias_at)) {
    KILN_ASSIGN_OR_RETURN(sum, step("Add", {sum, in[bias_at]}, 3));
  }
  if (simplified) return step("RMSNormalization", {sum, in[2]}, 0, norm).status();
  std::vector<ValueId> ln = {sum, in[2]};
  if (given(3)) ln.push_back(in[3]);
  return step("LayerNormalization", ln, 0, norm).status();
}

// com.microsoft DynamicQuantizeLSTM (onnxruntime's quantize_dynamic): X, W, R, B, sequence_lens,
// initial_h, initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point, LSTM's attributes, and
// outputs Y, Y_h, Y_c. W [dirs, input, 4 * hidden] and R [dirs, hidden, 4 * hidden] are int8
// (or uint8) with a scale and zero point per direction ([dirs]) or per direction and gate row
// ([dirs, 4 * hidden]). Written as ONNX's LSTM on the dequantized weights, transposed to its
// [dirs, 4 * hidden, input] ((W - zero point) * scale, folded at compile time): the LSTM then
// computes in float, where onnxruntime quantizes X and H at every step, so Kiln's outputs are
// closer to the float model's than onnxruntime's, by the activations' quantization error.
Status Importer::ImportDynamicQuantizeLstm(const onnx::NodeProto& np, const std::string& name,
                                           const std::string& where, ir::Block& block) {
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> in, ContribInputs(np, where));
  if (in.size() != 12)
    return InvalidArgument(where + ": com.microsoft DynamicQuantizeLSTM takes 12 inputs (X, W, R, B, sequence_lens, "
                                   "initial_h, initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point), got " +
                           std::to_string(in.size()));
  static constexpr const char* kInputs[] = {"X",    "W", "R",       "B",            "sequence_lens", "initial_h",
                                            "initial_c", "P", "W_scale", "W_zero_point", "R_scale",     "R_zero_point"};
  for (size_t i : {size_t{0}, size_t{1}, size_t{2}, size_t{8}, size_t{9}, size_t{10}, size_t{11}})
    if (in[i] == kNoValue)
      return InvalidArgument(where + ": com.microsoft DynamicQuantizeLSTM input " + Q(kInputs[i]) + " is required");
  // Its attributes are LSTM's but `layout` (X is [seq, batch, input]).
  static constexpr std::string_view kAttrs[] = {"activation_alpha", "activation_beta", "activations", "clip",
                                                "direction",        "hidden_size",     "input_forget"};
  for (const onnx::AttributeProto& a : np.attribute())
    if (std::find(std::begin(kAttrs), std::end(kAttrs), a.name()) == std::end(kAttrs))
      return InvalidArgument(where + ": com.microsoft DynamicQuantizeLSTM has no attribute " + Q(a.name()));
  // W [dirs, input, 4 * hidden] and R [dirs, hidden, 4 * hidden], their scales and zero points
  // [dirs] or [dirs, 4 * hidden]: checked here, in the op's own layout, where their dims are
  // known (the LSTM's checks would see them transposed).
  const auto dims = [&](size_t i) -> std::optional<std::vector<int64_t>> {
    const Value& v = trace_.value(in[i]);
    if (!v.is_const()) return std::nullopt;
    return v.data->dims;
  };
  const auto fail = [&](size_t i, const std::string& want) {
    return InvalidArgument(where + ": com.microsoft DynamicQuantizeLSTM input " + Q(kInputs[i]) + ": expected " + want +
                           ", found " + ShapeText(*dims(i)));
  };
  const auto w = dims(1), r = dims(2);
  if (w && (w->size() != 3 || (*w)[2] % 4 != 0)) return fail(1, "[num_directions, input_size, 4 * hidden_size]");
  if (r && (r->size() != 3 || (*r)[2] % 4 != 0 || (*r)[1] * 4 != (*r)[2]))
    return fail(2, "[num_directions, hidden_size, 4 * hidden_size]");
  if (w && r && ((*w)[0] != (*r)[0] || (*w)[2] != (*r)[2]))
    return fail(2, "[" + std::to_string((*w)[0]) + ", hidden_size, " + std::to_string((*w)[2]) + "] (W's directions and gates)");
  for (const auto& [p, of] : {std::pair{size_t{8}, w}, {size_t{9}, w}, {size_t{10}, r}, {size_t{11}, r}}) {
    const auto d = dims(p);
    if (!d || !of) continue;
    const bool per_dir = d->size() == 1 && (*d)[0] == (*of)[0];
    const bool per_row = d->size() == 2 && (*d)[0] == (*of)[0] && (*d)[1] == (*of)[2];
    if (!per_dir && !per_row)
      return fail(p, "[" + std::to_string((*of)[0]) + "] or [" + std::to_string((*of)[0]) + ", " +
                         std::to_string((*of)[2]) + "] (per direction, or per direction and gate row)");
  }
  const auto add = [&](const std::string& op, std::vector<ValueId> inputs, AttrMap attrs) {
    Node n;
    n.op = op;
    n.name = UniqueNodeName(name + "/" + op);
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    Value v;
    v.name = UniqueValueName(name + "/" + op);
    value_names_.insert(v.name);
    const ValueId id = trace_.AddValue(std::move(v));
    n.outputs = {id};
    block.nodes.push_back(std::move(n));
    return id;
  };
  const auto floats = [&](ValueId x) {
    AttrMap a;
    a.SetInt("to", static_cast<int64_t>(DType::kFloat32));
    return add("Cast", {x}, a);
  };
  // (q - zero point) * scale, the parameters reshaped to [dirs, 1, 1 or 4 * hidden], then
  // transposed to LSTM's [dirs, 4 * hidden, K].
  const auto dequantize = [&](ValueId q, ValueId scale, ValueId zp, const char* what) {
    const ValueId shape = AddInt64Const(name + "/" + what + "_param_shape", {0, 1, -1});
    const ValueId zf = add("Reshape", {floats(zp), shape}, {});
    const ValueId sf = add("Reshape", {scale, shape}, {});
    const ValueId w = add("Mul", {add("Sub", {floats(q), zf}, {}), sf}, {});
    AttrMap perm;
    perm.SetInts("perm", {0, 2, 1});
    return add("Transpose", {w}, perm);
  };
  Node lstm;
  lstm.op = "LSTM";
  lstm.name = name;
  lstm.inputs = {in[0], dequantize(in[1], in[8], in[9], "W"), dequantize(in[2], in[10], in[11], "R"),
                 in[3], in[4], in[5], in[6], in[7]};
  while (!lstm.inputs.empty() && lstm.inputs.back() == kNoValue) lstm.inputs.pop_back();
  for (const onnx::AttributeProto& a : np.attribute()) KILN_RETURN_IF_ERROR(ConvertAttr(np, a, lstm, where));
  int nout = std::min(np.output_size(), 3);
  while (nout > 0 && np.output(nout - 1).empty()) --nout;
  for (int i = 0; i < nout; ++i) {
    Value v;
    v.name = np.output(i).empty() ? UniqueValueName(name + "_unused_output_" + std::to_string(i)) : np.output(i);
    value_names_.insert(v.name);
    ApplyTypeInfo(v);
    const ValueId id = trace_.AddValue(std::move(v));
    if (!np.output(i).empty()) KILN_RETURN_IF_ERROR(DefineOutput(np.output(i), id, where));
    lstm.outputs.push_back(id);
  }
  if (np.output_size() > 3) return InvalidArgument(where + ": com.microsoft DynamicQuantizeLSTM has 3 outputs");
  block.nodes.push_back(std::move(lstm));
  return Status::Ok();
}

// onnxruntime's quantized com.microsoft ops (quantize_static's QOperator format, quantize_dynamic's
// fused forms), written as the ONNX ops their specification composes, which the fusion stage
// then fuses or folds: QLinearAdd / QLinearMul = Q(DQ(A) op DQ(B)); QLinearSigmoid,
// QLinearLeakyRelu (alpha), QLinearAveragePool (AveragePool's attributes) and
// QLinearGlobalAveragePool = Q(op(DQ(X))); QLinearConcat (Y_scale, Y_zero_point, then (X, scale,
// zero point) triples; axis) = Q(Concat(DQ(X_i)...)); QuantizeLinear / DequantizeLinear (axis) as
// ONNX's; MatMulIntegerToFloat = Cast(MatMulInteger(A, B, a_zp, b_zp)) * a_scale * b_scale
// (+ bias); DynamicQuantizeMatMul = the same on DynamicQuantizeLinear(A). An absent output zero
// point is a zero of the input's dtype (onnxruntime's ops keep X's type). Refused:
// channels_last 1 (NHWC inputs).
Status Importer::ImportQuantizedContribNode(const onnx::NodeProto& np, const std::string& name,
                                            const std::string& where, ir::Block& block) {
  const std::string& op = np.op_type();
  KILN_ASSIGN_OR_RETURN(std::vector<ValueId> in, ContribInputs(np, where));
  const auto given = [&](size_t i) { return i < in.size() && in[i] != kNoValue; };
  const auto need = [&](std::initializer_list<size_t> required, size_t max_in) -> Status {
    if (in.size() > max_in)
      return InvalidArgument(where + ": com.microsoft " + op + " takes at most " + std::to_string(max_in) +
                             " inputs, got " + std::to_string(in.size()));
    for (size_t i : required)
      if (!given(i))
        return InvalidArgument(where + ": com.microsoft " + op + " input #" + std::to_string(i) + " is required");
    return Status::Ok();
  };
  if (np.output_size() < 1 || np.output(0).empty())
    return InvalidArgument(where + ": com.microsoft " + op + " needs its output #0");
  if (np.output_size() > 1) return InvalidArgument(where + ": com.microsoft " + op + " has one output");
  Node attrs_node;  // every attribute, converted as for an ONNX node
  for (const onnx::AttributeProto& a : np.attribute()) KILN_RETURN_IF_ERROR(ConvertAttr(np, a, attrs_node, where));
  const AttrMap& attrs = attrs_node.attrs;
  if (attrs.GetInt("channels_last", 0) != 0)
    return Unimplemented(where + ": com.microsoft " + op + " with channels_last 1 (NHWC input) is not supported");
  // One node; `out` 0 writes np's output, -1 an intermediate value.
  const auto step = [&](const std::string& step_op, std::vector<ValueId> inputs, int out, AttrMap step_attrs = {},
                        int outputs = 1) -> std::vector<ValueId> {
    Node n;
    n.op = step_op;
    n.name = out == 0 ? name : UniqueNodeName(name + "/" + step_op);
    n.inputs = std::move(inputs);
    n.attrs = std::move(step_attrs);
    for (int k = 0; k < outputs; ++k) {
      Value v;
      v.name = out == 0 && k == 0 ? np.output(0) : UniqueValueName(name + "/" + step_op);
      value_names_.insert(v.name);
      if (out == 0 && k == 0) ApplyTypeInfo(v);
      n.outputs.push_back(trace_.AddValue(std::move(v)));
    }
    block.nodes.push_back(n);
    return n.outputs;
  };
  const auto finish = [&](ValueId id) { return DefineOutput(np.output(0), id, where); };
  const auto dq = [&](size_t x, size_t scale, size_t zp) {
    std::vector<ValueId> ins = {in[x], in[scale]};
    if (given(zp)) ins.push_back(in[zp]);
    return step("DequantizeLinear", ins, -1)[0];
  };
  // Q(v) by (scale, zero point); an absent zero point is a zero of `like`'s dtype.
  const auto q = [&](ValueId v, size_t scale, size_t zp, ValueId like) {
    ValueId z = given(zp) ? in[zp] : kNoValue;
    if (z == kNoValue) {
      auto cd = std::make_shared<ConstData>();
      cd->dtype = trace_.value(like).dtype;
      cd->bytes.assign(DTypeSize(cd->dtype), 0);
      z = AddConst(UniqueValueName(name + "/zero_point"), std::move(cd));
    }
    return step("QuantizeLinear", {v, in[scale], z}, 0)[0];
  };
  if (op == "QuantizeLinear" || op == "DequantizeLinear") {
    KILN_RETURN_IF_ERROR(need({0, 1}, 3));
    AttrMap a;
    a.SetInt("axis", attrs.GetInt("axis", 1));
    return finish(step(op, in, 0, a)[0]);
  }
  // onnxruntime's QLinear ops take one scale and one zero point per tensor.
  const auto scalars = [&](std::initializer_list<size_t> params) -> Status {
    for (size_t i : params) {
      if (!given(i)) continue;
      const Value& v = trace_.value(in[i]);
      if (v.is_const() && v.data->num_elements() != 1)
        return InvalidArgument(where + ": com.microsoft " + op + " input #" + std::to_string(i) + " " +
                               Q(np.input(static_cast<int>(i))) + ": a scale or zero point must be one element, found " +
                               ShapeText(v.data->dims));
    }
    return Status::Ok();
  };
  if (op == "QLinearAdd" || op == "QLinearMul") {
    KILN_RETURN_IF_ERROR(need({0, 1, 3, 4, 6}, 8));
    KILN_RETURN_IF_ERROR(scalars({1, 2, 4, 5, 6, 7}));
    const ValueId sum = step(op == "QLinearAdd" ? "Add" : "Mul", {dq(0, 1, 2), dq(3, 4, 5)}, -1)[0];
    return finish(q(sum, 6, 7, in[0]));
  }
  if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu" || op == "QLinearGlobalAveragePool" ||
      op == "QLinearAveragePool") {
    KILN_RETURN_IF_ERROR(need({0, 1, 3}, 5));
    KILN_RETURN_IF_ERROR(scalars({1, 2, 3, 4}));
    AttrMap a;
    std::string inner = op.substr(7);  // Sigmoid, LeakyRelu, GlobalAveragePool, AveragePool
    if (op == "QLinearLeakyRelu") a.SetFloat("alpha", attrs.GetFloat("alpha", 0.01f));
    if (op == "QLinearAveragePool") {
      a = attrs;
      a.Erase("channels_last");
    }
    return finish(q(step(inner, {dq(0, 1, 2)}, -1, a)[0], 3, 4, in[0]));
  }
  if (op == "QLinearConcat") {
    if (in.size() < 5 || (in.size() - 2) % 3 != 0)
      return InvalidArgument(where + ": com.microsoft QLinearConcat takes Y_scale, Y_zero_point and (X, X_scale, "
                                     "X_zero_point) triples, got " + std::to_string(in.size()) + " inputs");
    std::vector<ValueId> parts;
    KILN_RETURN_IF_ERROR(scalars({0, 1}));
    for (size_t i = 2; i < in.size(); i += 3) {
      KILN_RETURN_IF_ERROR(need({0, i, i + 1}, in.size()));
      KILN_RETURN_IF_ERROR(scalars({i + 1, i + 2}));
      parts.push_back(dq(i, i + 1, i + 2));
    }
    AttrMap a;
    if (!attrs.Has("axis")) return InvalidArgument(where + ": com.microsoft QLinearConcat needs its 'axis'");
    a.SetInt("axis", attrs.GetInt("axis", 0));
    return finish(q(step("Concat", parts, -1, a)[0], 0, 1, in[2]));
  }
  // MatMulIntegerToFloat (A, B, a_scale, b_scale[, a_zero_point, b_zero_point, bias]) and
  // DynamicQuantizeMatMul (A float, B, b_scale[, b_zero_point, bias]).
  const bool dynamic = op == "DynamicQuantizeMatMul";
  if (!dynamic && op != "MatMulIntegerToFloat")
    return Unimplemented(where + ": domain 'com.microsoft' op " + Q(op) + " is not supported");
  KILN_RETURN_IF_ERROR(dynamic ? need({0, 1, 2}, 5) : need({0, 1, 2, 3}, 7));
  ValueId a = in[0], a_scale = dynamic ? kNoValue : in[2], a_zp = !dynamic && given(4) ? in[4] : kNoValue;
  if (dynamic) {
    const std::vector<ValueId> dql = step("DynamicQuantizeLinear", {in[0]}, -1, {}, 3);
    a = dql[0], a_scale = dql[1], a_zp = dql[2];
  }
  const ValueId b_scale = in[dynamic ? 2 : 3];
  const size_t b_zp = dynamic ? 3 : 5, bias = dynamic ? 4 : 6;
  std::vector<ValueId> mm = {a, in[1], a_zp, given(b_zp) ? in[b_zp] : kNoValue};
  while (mm.back() == kNoValue) mm.pop_back();
  AttrMap to_float;
  to_float.SetInt("to", static_cast<int64_t>(DType::kFloat32));
  const ValueId acc = step("Cast", {step("MatMulInteger", mm, -1)[0]}, -1, to_float)[0];
  const ValueId scale = step("Mul", {a_scale, b_scale}, -1)[0];
  if (!given(bias)) return finish(step("Mul", {acc, scale}, 0)[0]);
  return finish(step("Add", {step("Mul", {acc, scale}, -1)[0], in[bias]}, 0)[0]);
}

Result<Trace> Importer::Run(const onnx::ModelProto& model, const std::string& source) {
  if (!model.has_graph()) return DataLoss("not an ONNX ModelProto: " + source + " has no graph");
  if (model.ir_version() <= 0)
    return DataLoss("not an ONNX ModelProto: " + source + " has no ir_version");
  opset_ = 1;  // ONNX: a model that names no default-domain opset uses opset 1
  for (const auto& os : model.opset_import())
    if (os.domain().empty() || os.domain() == "ai.onnx") opset_ = os.version();
  if (opset_ < kMinOpset || opset_ > kMaxOpset)
    return Unimplemented(source + ": opset " + std::to_string(opset_) + " is not supported; Kiln supports opsets " + std::to_string(kMinOpset) + " to " +
                         std::to_string(kMaxOpset));
  CollectUses(model.graph(), uses_);
  trace_.stage = "import";
  std::string producer = model.producer_name();
  if (!model.producer_version().empty()) producer += (producer.empty() ? "" : " ") + model.producer_version();
  trace_.provenance = "imported from " + source + " (opset " + std::to_string(opset_) + ", IR " +
                      std::to_string(model.ir_version()) + ", producer " +
                      (producer.empty() ? std::string("unknown") : producer) + ")";
  scopes_.emplace_back();
  const std::string gname = model.graph().name().empty() ? std::string("main graph")
                                                          : "graph " + Q(model.graph().name());
  KILN_RETURN_IF_ERROR(ImportGraph(model.graph(), trace_.body, true, gname));
  trace_.outputs = trace_.body.outputs;
  return std::move(trace_);
}

Result<Trace> ImportImpl(std::span<const uint8_t> bytes, const std::string& base_dir,
                         const ImportOptions& options, const std::string& source) {
  if (bytes.size() > options.max_file_bytes)
    return ResourceExhausted(source + " has " + std::to_string(bytes.size()) +
                             " bytes, over max_file_bytes " + std::to_string(options.max_file_bytes));
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return ResourceExhausted(source + " has " + std::to_string(bytes.size()) +
                             " bytes, over protobuf's 2 GiB limit; store weights as external data");
  if (options.max_subgraph_depth < 0 || options.max_subgraph_depth > kMaxSubgraphDepthLimit)
    return InvalidArgument("max_subgraph_depth is " + std::to_string(options.max_subgraph_depth) +
                           ", expected 0.." + std::to_string(kMaxSubgraphDepthLimit));
  KILN_RETURN_IF_ERROR(CheckSubgraphDepth(bytes, options.max_subgraph_depth, source));
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream cis(bytes.data(), static_cast<int>(bytes.size()));
  // Each subgraph level nests three messages (GraphProto, NodeProto, AttributeProto): the
  // parser's usual allowance of 100 at every level the depth check admits.
  cis.SetRecursionLimit(100 + 3 * options.max_subgraph_depth);
  if (!model.ParseFromCodedStream(&cis) || !cis.ConsumedEntireMessage())
    return DataLoss("not an ONNX ModelProto: " + source + " (" + std::to_string(bytes.size()) +
                    " bytes) is not valid protobuf");
  Importer importer(options, base_dir);
  return importer.Run(model, source);
}

// What the importer allocates is bounded by the options; a machine short of memory is still
// an error, never an abort.
Status OutOfMemory(const std::string& source) {
  return ResourceExhausted("out of memory importing " + source +
                           " (bounded by ImportOptions::max_file_bytes and max_constant_bytes)");
}

}  // namespace

Result<Trace> ImportOnnxFile(const std::string& path, const ImportOptions& options) try {
  std::error_code ec;
  const fs::path p(path);
  if (!fs::is_regular_file(p, ec))
    return NotFound("ONNX model file " + Q(path) + " does not exist or is not a file");
  const uintmax_t size = fs::file_size(p, ec);
  if (ec) return NotFound("cannot stat ONNX model file " + Q(path) + ": " + ec.message());
  if (size > options.max_file_bytes)
    return ResourceExhausted("ONNX model file " + Q(path) + " has " + std::to_string(size) +
                             " bytes, over max_file_bytes " + std::to_string(options.max_file_bytes));
  std::ifstream in(p, std::ios::binary);
  if (!in) return NotFound("cannot open ONNX model file " + Q(path));
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0) in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (!in) return DataLoss("reading ONNX model file " + Q(path) + " failed");
  std::string base = p.parent_path().string();
  if (base.empty()) base = ".";
  return ImportImpl(bytes, base, options, p.filename().string());
} catch (const std::bad_alloc&) {
  return OutOfMemory(Q(path));
}

Result<Trace> ImportOnnxBytes(std::span<const uint8_t> bytes, const std::string& base_dir,
                              const ImportOptions& options) try {
  return ImportImpl(bytes, base_dir, options, "ONNX model bytes");
} catch (const std::bad_alloc&) {
  return OutOfMemory("ONNX model bytes");
}

}  // namespace kiln::onnx_import
