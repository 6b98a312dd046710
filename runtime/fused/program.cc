// Structural checks, names and printing of fused programs (runtime/fused/program.h).
// Validate runs on programs read from artifacts, so it assumes nothing about any field:
// every index is range-checked before it is used, and it never indexes with an unchecked
// value.
#include "runtime/fused/program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "runtime/shape_text.h"

namespace kiln::fused {
namespace {

// The operand and result rules of each op (the table in program.h).
enum class Shape : uint8_t {
  kLeaf,         // no operands (kLoad takes its index as operand a, checked separately)
  kCast,         // x of any type, result ComputeType(i)
  kUnaryAny,     // x of the node's type, any type
  kUnaryFloat,   // x of the node's type, kF32/kF64
  kUnaryInt,     // kNot: kI64 -> kI64
  kIsNaN,        // float x -> kI64
  kBinaryAny,    // x, y of the node's type, any type
  kBinaryInt,    // x, y, result kI64
  kBinaryFloat,  // x, y of the node's type, kF32/kF64
  kCompare,      // x, y of one type, result kI64
  kSelect,       // x kI64, y, z of the node's type
};

Shape ShapeOf(Op op) {
  switch (op) {
    case Op::kConst:
    case Op::kCoord:
    case Op::kLinear:
    case Op::kSize:
    case Op::kAcc:
    case Op::kLoad:
      return Shape::kLeaf;
    case Op::kCast:
      return Shape::kCast;
    case Op::kNeg:
    case Op::kAbs:
    case Op::kSign:
      return Shape::kUnaryAny;
    case Op::kNot:
      return Shape::kUnaryInt;
    case Op::kIsNaN:
      return Shape::kIsNaN;
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMod:
    case Op::kFmod:
    case Op::kMin:
    case Op::kMax:
      return Shape::kBinaryAny;
    // kFloorDiv is defined for kI64 only (program.h gives no float rule).
    case Op::kFloorDiv:
    case Op::kAnd:
    case Op::kOr:
    case Op::kXor:
    case Op::kCheckIndex:
      return Shape::kBinaryInt;
    case Op::kPow:
      return Shape::kBinaryFloat;
    case Op::kEq:
    case Op::kLt:
    case Op::kLe:
      return Shape::kCompare;
    case Op::kSelect:
      return Shape::kSelect;
    default:
      return Shape::kUnaryFloat;  // kFloor .. kReciprocal
  }
}

int NumOperands(Op op) {
  if (op == Op::kLoad) return 1;
  switch (ShapeOf(op)) {
    case Shape::kLeaf:
      return 0;
    case Shape::kCast:
    case Shape::kUnaryAny:
    case Shape::kUnaryFloat:
    case Shape::kUnaryInt:
    case Shape::kIsNaN:
      return 1;
    case Shape::kSelect:
      return 3;
    default:
      return 2;
  }
}

bool IsFloat(ScalarType t) { return t == ScalarType::kF32 || t == ScalarType::kF64; }

const char* TypeName(ScalarType t) {
  switch (t) {
    case ScalarType::kI64:
      return "i64";
    case ScalarType::kF32:
      return "f32";
    case ScalarType::kF64:
      return "f64";
  }
  return "type?";
}

std::string TypeStr(ScalarType t) {
  if (static_cast<uint8_t>(t) > 2) return "type(" + std::to_string(static_cast<int>(t)) + ")";
  return TypeName(t);
}

std::string DTypeText(int64_t dtype) {
  if (dtype < 0 || dtype > 1000) return "dtype(" + std::to_string(dtype) + ")";
  return std::string(DTypeName(static_cast<DType>(dtype)));
}

std::string NodeWhere(size_t n, const Node& node) {
  return "node " + std::to_string(n) + " (" + OpName(node.op) + ")";
}

// Encoded dims: rank <= kMaxRank, each a constant or an existing size argument.
Status CheckDims(const std::vector<int64_t>& dims, int32_t num_sizes, const std::string& where) {
  if (dims.size() > static_cast<size_t>(kMaxRank)) {
    return InvalidArgument(where + ": rank " + std::to_string(dims.size()) + " exceeds the maximum of " +
                           std::to_string(kMaxRank));
  }
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = dims[k];
    if (d < 0 && -(d + 1) >= num_sizes) {
      return InvalidArgument(where + ": dim " + std::to_string(k) + " refers to size argument " +
                             std::to_string(-(d + 1)) + ", but the program has " + std::to_string(num_sizes));
    }
  }
  return Status::Ok();
}

// Product of the dims selected by `mask` (bit k: dim k) when all of them are constant.
// Returns false when one is symbolic; `overflow` is set when the product exceeds int64.
bool ConstProduct(const std::vector<int64_t>& dims, uint32_t mask, int64_t* out, bool* overflow) {
  int64_t p = 1;
  *overflow = false;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (!(mask & (1u << k))) continue;
    if (dims[k] < 0) return false;
    if (__builtin_mul_overflow(p, dims[k], &p)) *overflow = true;
  }
  *out = p;
  return true;
}

Status CheckSpecDType(DType dtype, const std::string& where) {
  ScalarType t;
  if (!ComputeTypeOf(dtype, &t)) {
    return InvalidArgument(where + ": dtype " + DTypeText(static_cast<int64_t>(dtype)) +
                           " has no compute type (expected a numeric or bool dtype)");
  }
  return Status::Ok();
}

}  // namespace

std::string DimsText(const std::vector<int64_t>& dims) {
  return ShapeText(dims.size(), [&](size_t k) {
    return dims[k] >= 0 ? std::to_string(dims[k]) : "s" + std::to_string(-(dims[k] + 1));
  });
}

std::string IndexOutOfRange(int64_t checked_index, int64_t bound) {
  const int64_t given = checked_index < 0 ? checked_index - bound : checked_index;
  return "index " + std::to_string(given) + " is out of range [" + std::to_string(-bound) + ", " +
         std::to_string(bound) + ")";
}

bool ComputeTypeOf(DType dtype, ScalarType* out) {
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      *out = ScalarType::kF32;
      return true;
    case DType::kFloat64:
      *out = ScalarType::kF64;
      return true;
    case DType::kUInt8:
    case DType::kInt8:
    case DType::kUInt16:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
    case DType::kBool:
    case DType::kUInt32:
      *out = ScalarType::kI64;
      return true;
    default:
      return false;
  }
}

const char* OpName(Op op) {
  static constexpr const char* kNames[kNumOps] = {
      "const", "coord", "linear",   "size",    "acc",        "load",  "cast",   "neg",
      "abs",   "sign",  "not",      "floor",   "ceil",       "round", "sqrt",   "exp",
      "log",   "erf",   "tanh",     "sigmoid", "sin",        "cos",   "tan",    "asin",
      "acos",  "atan",  "sinh",     "cosh",    "reciprocal", "isnan", "add",    "sub",
      "mul",   "div",   "floordiv", "mod",     "fmod",       "pow",   "min",    "max",
      "eq",    "lt",    "le",       "and",     "or",         "xor",   "select", "check_index"};
  const auto k = static_cast<size_t>(op);
  return k < static_cast<size_t>(kNumOps) ? kNames[k] : "op?";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "reduce?";
}

Status Validate(const Program& p) {
  if (p.num_sizes < 0) {
    return InvalidArgument("num_sizes is " + std::to_string(p.num_sizes) + ", expected >= 0");
  }
  KILN_RETURN_IF_ERROR(CheckDims(p.domain, p.num_sizes, "domain"));
  const int rank = static_cast<int>(p.domain.size());
  const uint32_t all_axes = rank >= 32 ? ~0u : ((1u << rank) - 1);
  if (p.reduce_axes & ~all_axes) {
    return InvalidArgument("reduce_axes 0x" +
                           [&] {
                             char buf[16];
                             std::snprintf(buf, sizeof(buf), "%x", p.reduce_axes);
                             return std::string(buf);
                           }() +
                           " names an axis beyond the domain's rank " + std::to_string(rank));
  }
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    const std::string where = "input " + std::to_string(k);
    KILN_RETURN_IF_ERROR(CheckSpecDType(p.inputs[k].dtype, where));
    KILN_RETURN_IF_ERROR(CheckDims(p.inputs[k].dims, p.num_sizes, where));
  }

  const size_t num_nodes = p.nodes.size();
  if (num_nodes > static_cast<size_t>(INT32_MAX)) return InvalidArgument("too many nodes");
  for (size_t k = 0; k < p.reductions.size(); ++k) {
    const Reduction& r = p.reductions[k];
    if (static_cast<uint8_t>(r.op) > static_cast<uint8_t>(ReduceOp::kMin)) {
      return InvalidArgument("reduction " + std::to_string(k) + ": op " +
                             std::to_string(static_cast<int>(r.op)) + " is not a reduce op (expected 0..3)");
    }
    if (r.value < 0 || static_cast<size_t>(r.value) >= num_nodes) {
      return InvalidArgument("reduction " + std::to_string(k) + ": value node " + std::to_string(r.value) +
                             " is out of range (the program has " + std::to_string(num_nodes) + " nodes)");
    }
  }

  // max_acc[n]: the highest reduction whose kAcc node n depends on, or -1.
  std::vector<int64_t> max_acc(num_nodes, -1);
  for (size_t n = 0; n < num_nodes; ++n) {
    const Node& node = p.nodes[n];
    if (static_cast<size_t>(node.op) >= static_cast<size_t>(kNumOps)) {
      return InvalidArgument("node " + std::to_string(n) + ": op " +
                             std::to_string(static_cast<int>(node.op)) + " is not an op (expected 0.." +
                             std::to_string(kNumOps - 1) + ")");
    }
    const std::string where = NodeWhere(n, node);
    if (static_cast<uint8_t>(node.type) > static_cast<uint8_t>(ScalarType::kF64)) {
      return InvalidArgument(where + ": type " + TypeStr(node.type) +
                             " is not a scalar type (expected 0..2)");
    }
    const int num_operands = NumOperands(node.op);
    const int32_t operands[3] = {node.a, node.b, node.c};
    ScalarType ot[3] = {ScalarType::kI64, ScalarType::kI64, ScalarType::kI64};
    for (int k = 0; k < 3; ++k) {
      const char* name = k == 0 ? "a" : k == 1 ? "b" : "c";
      if (k >= num_operands) {
        if (operands[k] != -1) {
          return InvalidArgument(where + ": operand " + name + " is " + std::to_string(operands[k]) +
                                 ", expected -1 (the op takes " + std::to_string(num_operands) +
                                 " operands)");
        }
        continue;
      }
      if (operands[k] < 0 || static_cast<size_t>(operands[k]) >= n) {
        return InvalidArgument(where + ": operand " + name + " is " + std::to_string(operands[k]) +
                               ", expected an earlier node (0.." +
                               std::to_string(static_cast<int64_t>(n) - 1) + ")");
      }
      ot[k] = p.nodes[operands[k]].type;
      max_acc[n] = std::max(max_acc[n], max_acc[operands[k]]);
    }
    auto type_error = [&](const std::string& what, const std::string& expected, ScalarType found) {
      return InvalidArgument(where + ": " + what + " has type " + TypeStr(found) + ", expected " + expected);
    };
    auto expect = [&](const char* what, ScalarType found, ScalarType expected) -> Status {
      if (found != expected) return type_error(what, TypeName(expected), found);
      return Status::Ok();
    };
    auto expect_float = [&](const char* what, ScalarType found) -> Status {
      if (!IsFloat(found)) return type_error(what, "f32 or f64", found);
      return Status::Ok();
    };
    const ScalarType t = node.type;
    switch (ShapeOf(node.op)) {
      case Shape::kLeaf:
        break;
      case Shape::kCast: {
        ScalarType ct;
        if (node.i < 0 || node.i > INT32_MAX || !IsValidDType(static_cast<int32_t>(node.i)) ||
            !ComputeTypeOf(static_cast<DType>(node.i), &ct)) {
          return InvalidArgument(where + ": target dtype " + DTypeText(node.i) +
                                 " has no compute type (expected a numeric or bool dtype)");
        }
        KILN_RETURN_IF_ERROR(expect("result", t, ct));
        break;
      }
      case Shape::kUnaryAny:
        KILN_RETURN_IF_ERROR(expect("operand a", ot[0], t));
        break;
      case Shape::kUnaryFloat:
        KILN_RETURN_IF_ERROR(expect_float("result", t));
        KILN_RETURN_IF_ERROR(expect("operand a", ot[0], t));
        break;
      case Shape::kUnaryInt:
        KILN_RETURN_IF_ERROR(expect("result", t, ScalarType::kI64));
        KILN_RETURN_IF_ERROR(expect("operand a", ot[0], ScalarType::kI64));
        break;
      case Shape::kIsNaN:
        KILN_RETURN_IF_ERROR(expect("result", t, ScalarType::kI64));
        KILN_RETURN_IF_ERROR(expect_float("operand a", ot[0]));
        break;
      case Shape::kBinaryAny:
        KILN_RETURN_IF_ERROR(expect("operand a", ot[0], t));
        KILN_RETURN_IF_ERROR(expect("operand b", ot[1], t));
        break;
      case Shape::kBinaryInt:
        KILN_RETURN_IF_ERROR(expect("result", t, ScalarType::kI64));
        KILN_RETURN_IF_ERROR(expect("operand a", ot[0], ScalarType::kI64));
        KILN_RETURN_IF_ERROR(expect("operand b", ot[1], ScalarType::kI64));
        break;
      case Shape::kBinaryFloat:
        KILN_RETURN_IF_ERROR(expect_float("result", t));
        KILN_RETURN_IF_ERROR(expect("operand a", ot[0], t));
        KILN_RETURN_IF_ERROR(expect("operand b", ot[1], t));
        break;
      case Shape::kCompare:
        KILN_RETURN_IF_ERROR(expect("result", t, ScalarType::kI64));
        KILN_RETURN_IF_ERROR(expect("operand b", ot[1], ot[0]));
        break;
      case Shape::kSelect:
        KILN_RETURN_IF_ERROR(expect("operand a", ot[0], ScalarType::kI64));
        KILN_RETURN_IF_ERROR(expect("operand b", ot[1], t));
        KILN_RETURN_IF_ERROR(expect("operand c", ot[2], t));
        break;
    }
    switch (node.op) {
      case Op::kConst:
        // kF32 constants must be exactly representable: the CUDA emitter prints them as floats.
        if (t == ScalarType::kF32 && std::isfinite(node.f) &&
            (std::fabs(node.f) > std::numeric_limits<float>::max() ||
             static_cast<double>(static_cast<float>(node.f)) != node.f)) {
          return InvalidArgument(where + ": f32 constant " + std::to_string(node.f) +
                                 " is not exactly representable as a float");
        }
        break;
      case Op::kCoord:
        KILN_RETURN_IF_ERROR(expect("result", t, ScalarType::kI64));
        if (node.i < 0 || node.i >= rank) {
          return InvalidArgument(where + ": axis " + std::to_string(node.i) +
                                 " is out of range for the domain's rank " + std::to_string(rank));
        }
        break;
      case Op::kLinear:
        KILN_RETURN_IF_ERROR(expect("result", t, ScalarType::kI64));
        break;
      case Op::kSize:
        KILN_RETURN_IF_ERROR(expect("result", t, ScalarType::kI64));
        if (node.i < 0 || node.i >= p.num_sizes) {
          return InvalidArgument(where + ": size argument " + std::to_string(node.i) +
                                 " is out of range (the program has " + std::to_string(p.num_sizes) + ")");
        }
        break;
      case Op::kAcc: {
        if (node.i < 0 || static_cast<uint64_t>(node.i) >= p.reductions.size()) {
          return InvalidArgument(where + ": reduction " + std::to_string(node.i) +
                                 " is out of range (the program has " + std::to_string(p.reductions.size()) +
                                 ")");
        }
        const ScalarType rt = p.nodes[p.reductions[node.i].value].type;
        if (t != rt) {
          return type_error(
              "result",
              std::string(TypeName(rt)) + " (the type of reduction " + std::to_string(node.i) + "'s value)",
              t);
        }
        max_acc[n] = node.i;
        break;
      }
      case Op::kLoad: {
        if (node.i < 0 || static_cast<uint64_t>(node.i) >= p.inputs.size()) {
          return InvalidArgument(where + ": input " + std::to_string(node.i) +
                                 " is out of range (the program has " + std::to_string(p.inputs.size()) +
                                 ")");
        }
        KILN_RETURN_IF_ERROR(expect("operand a (the index)", ot[0], ScalarType::kI64));
        ScalarType ct = ScalarType::kI64;
        ComputeTypeOf(p.inputs[node.i].dtype, &ct);  // checked above
        if (t != ct) {
          return type_error("result",
                            std::string(TypeName(ct)) + " (the compute type of input " +
                                std::to_string(node.i) + "'s dtype " +
                                DTypeText(static_cast<int64_t>(p.inputs[node.i].dtype)) + ")",
                            t);
        }
        break;
      }
      case Op::kCheckIndex:
        if (node.i < 0 || static_cast<uint64_t>(node.i) >= p.checks.size()) {
          return InvalidArgument(where + ": check " + std::to_string(node.i) +
                                 " is out of range (the program has " + std::to_string(p.checks.size()) +
                                 " checks)");
        }
        break;
      default:
        break;
    }
  }

  for (size_t k = 0; k < p.reductions.size(); ++k) {
    const int64_t dep = max_acc[p.reductions[k].value];
    if (dep >= static_cast<int64_t>(k)) {
      return InvalidArgument("reduction " + std::to_string(k) + ": value node " +
                             std::to_string(p.reductions[k].value) + " reads the result of reduction " +
                             std::to_string(dep) +
                             ", which is not computed before it (a reduction may read only earlier ones)");
    }
  }

  if (p.outputs.empty()) return InvalidArgument("the program has no outputs");
  int64_t domain_count = 0, row_count = 0;
  bool domain_overflow = false, row_overflow = false;
  const bool domain_const = ConstProduct(p.domain, all_axes, &domain_count, &domain_overflow);
  const bool rows_const = ConstProduct(p.domain, all_axes & ~p.reduce_axes, &row_count, &row_overflow);
  if (domain_const && domain_overflow)
    return InvalidArgument("domain " + DimsText(p.domain) + " has more than 2^63 elements");
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Output& o = p.outputs[k];
    const std::string where = "output " + std::to_string(k);
    KILN_RETURN_IF_ERROR(CheckSpecDType(o.tensor.dtype, where));
    KILN_RETURN_IF_ERROR(CheckDims(o.tensor.dims, p.num_sizes, where));
    if (o.value < 0 || static_cast<size_t>(o.value) >= num_nodes) {
      return InvalidArgument(where + ": value node " + std::to_string(o.value) +
                             " is out of range (the program has " + std::to_string(num_nodes) + " nodes)");
    }
    ScalarType ct = ScalarType::kI64;
    ComputeTypeOf(o.tensor.dtype, &ct);
    if (p.nodes[o.value].type != ct) {
      return InvalidArgument(where + ": value node " + std::to_string(o.value) + " has type " +
                             TypeStr(p.nodes[o.value].type) + ", expected " + TypeName(ct) +
                             " (the compute type of dtype " +
                             DTypeText(static_cast<int64_t>(o.tensor.dtype)) + ")");
    }
    if (o.per_row && p.reduce_axes == 0) {
      return InvalidArgument(where + ": per-row output in a program without reduced axes");
    }
    int64_t count = 0;
    bool overflow = false;
    const uint32_t out_axes = o.tensor.dims.size() >= 32 ? ~0u : ((1u << o.tensor.dims.size()) - 1);
    if (!ConstProduct(o.tensor.dims, out_axes, &count, &overflow)) continue;
    if (overflow)
      return InvalidArgument(where + ": shape " + DimsText(o.tensor.dims) + " has more than 2^63 elements");
    const bool expected_const = o.per_row ? rows_const : domain_const;
    const int64_t expected = o.per_row ? row_count : domain_count;
    if (expected_const && count != expected) {
      return InvalidArgument(where + ": shape " + DimsText(o.tensor.dims) + " has " + std::to_string(count) +
                             " elements, expected " + std::to_string(expected) +
                             (o.per_row ? " (one per row of domain " : " (one per element of domain ") +
                             DimsText(p.domain) + ")");
    }
  }
  return Status::Ok();
}

std::string Print(const Program& p) {
  std::string s = "domain " + DimsText(p.domain);
  if (p.reduce_axes) {
    s += " reduce {";
    bool first = true;
    for (int k = 0; k < 32; ++k) {
      if (!(p.reduce_axes & (1u << k))) continue;
      s += (first ? "" : ", ") + std::to_string(k);
      first = false;
    }
    s += "}";
  }
  s += " sizes " + std::to_string(p.num_sizes) + "\n";
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    s += "in" + std::to_string(k) + ": " + DTypeText(static_cast<int64_t>(p.inputs[k].dtype)) + " " +
         DimsText(p.inputs[k].dims) + "\n";
  }
  auto ref = [](int32_t v) { return "%" + std::to_string(v); };
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    const Node& node = p.nodes[n];
    s += "%" + std::to_string(n) + " = " + OpName(node.op) + " " + TypeStr(node.type);
    switch (node.op) {
      case Op::kConst:
        if (node.type == ScalarType::kI64) {
          s += " " + std::to_string(node.i);
        } else {
          char buf[40];
          std::snprintf(buf, sizeof(buf), " %.17g", node.f);
          s += buf;
        }
        break;
      case Op::kCoord:
        s += " axis " + std::to_string(node.i);
        break;
      case Op::kLinear:
        break;
      case Op::kSize:
        s += " s" + std::to_string(node.i);
        break;
      case Op::kAcc:
        s += " r" + std::to_string(node.i);
        break;
      case Op::kLoad:
        s += " in" + std::to_string(node.i) + "[" + ref(node.a) + "]";
        break;
      case Op::kCast:
        s += " " + ref(node.a) + " to " + DTypeText(node.i);
        break;
      default: {
        const int32_t operands[3] = {node.a, node.b, node.c};
        bool first = true;
        for (int32_t v : operands) {
          if (v < 0) continue;
          s += (first ? " " : ", ") + ref(v);
          first = false;
        }
        if (node.op == Op::kCheckIndex) {
          s += "  ; check " + std::to_string(node.i);
          if (node.i >= 0 && static_cast<uint64_t>(node.i) < p.checks.size()) s += ": " + p.checks[node.i];
        }
        break;
      }
    }
    s += "\n";
  }
  for (size_t k = 0; k < p.reductions.size(); ++k) {
    s += "r" + std::to_string(k) + " = reduce " + ReduceOpName(p.reductions[k].op) + " " +
         ref(p.reductions[k].value) + "\n";
  }
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Output& o = p.outputs[k];
    s += "out" + std::to_string(k) + ": " + DTypeText(static_cast<int64_t>(o.tensor.dtype)) + " " +
         DimsText(o.tensor.dims) + " = " + ref(o.value) + (o.per_row ? " per row" : "") + "\n";
  }
  return s;
}

}  // namespace kiln::fused
