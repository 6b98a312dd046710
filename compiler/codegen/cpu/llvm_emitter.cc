#include "compiler/codegen/cpu/llvm_emitter.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "compiler/codegen/cpu/index_simplify.h"
#include "compiler/codegen/index_ranges.h"
#include "compiler/codegen/cpu/llvm_math.h"

namespace kiln::codegen::cpu {
namespace {

using fused::Op;
using fused::ScalarType;

// A point of the domain at which nodes are evaluated: its coordinates, its row-major index and
// the reductions finished so far.
struct Point {
  std::vector<LLVMValueRef> coord;
  LLVMValueRef linear = nullptr;
  std::vector<LLVMValueRef> acc;
};

class Emitter {
 public:
  Emitter(LLVMModuleRef m, const fused::Program& p, const CpuTarget& target)
      : m_(m), ctx_(LLVMGetModuleContext(m)), p_(p), target_(target) {
    b_ = LLVMCreateBuilderInContext(ctx_);
    i1_ = LLVMInt1TypeInContext(ctx_);
    i8_ = LLVMInt8TypeInContext(ctx_);
    i16_ = LLVMInt16TypeInContext(ctx_);
    i32_ = LLVMInt32TypeInContext(ctx_);
    i64_ = LLVMInt64TypeInContext(ctx_);
    f32_ = LLVMFloatTypeInContext(ctx_);
    f64_ = LLVMDoubleTypeInContext(ctx_);
    half_ = LLVMHalfTypeInContext(ctx_);
    ptr_ = LLVMPointerTypeInContext(ctx_, 0);
  }
  ~Emitter() { LLVMDisposeBuilder(b_); }

  Status Emit(const std::string& name);

 private:
  // Types and constants.
  LLVMTypeRef TypeOf(ScalarType t) const { return t == ScalarType::kI64 ? i64_ : t == ScalarType::kF32 ? f32_ : f64_; }
  LLVMValueRef I64(int64_t v) const { return LLVMConstInt(i64_, static_cast<unsigned long long>(v), 1); }
  LLVMValueRef Float(ScalarType t, double v) const { return LLVMConstReal(TypeOf(t), v); }

  // Checks that every node, input and output is one the native code covers.
  Status Covered() const;
  Status CoveredDType(DType dt, const char* what, size_t k) const;

  // A call of an LLVM intrinsic that lowers to instructions on every target (no library call),
  // overloaded on `types`.
  LLVMValueRef Intrinsic(const char* name, std::vector<LLVMTypeRef> types, std::vector<LLVMValueRef> args);
  LLVMValueRef Dim(int64_t encoded) const { return encoded >= 0 ? I64(encoded) : sizes_[-(encoded + 1)]; }

  // Loops: for (i = lo; i < hi; ++i) body(i, carried) -> carried; returns the carried values
  // after the loop (their initial values when it runs no iteration).
  using Body = std::function<std::vector<LLVMValueRef>(LLVMValueRef, const std::vector<LLVMValueRef>&)>;
  std::vector<LLVMValueRef> Loop(LLVMValueRef lo, LLVMValueRef hi, std::vector<LLVMValueRef> init, const Body& body);

  // Coordinates of `index` over `axes` (row-major, the last fastest) written into pt.coord.
  void Unflatten(LLVMValueRef index, const std::vector<int>& axes, Point* pt);
  LLVMValueRef Linear(const Point& pt);

  LLVMValueRef Eval(int node, const Point& pt, std::vector<LLVMValueRef>& memo);
  LLVMValueRef EvalNode(const fused::Node& n, const Point& pt, std::vector<LLVMValueRef>& memo);
  LLVMValueRef Load(int input, LLVMValueRef index);
  void Store(int output, LLVMValueRef index, LLVMValueRef value);
  LLVMValueRef CastTo(LLVMValueRef x, ScalarType from, DType to);
  LLVMValueRef RoundTripHalf(LLVMValueRef f);
  LLVMValueRef FloatToBF16Bits(LLVMValueRef f);
  LLVMValueRef CheckIndex(const fused::Node& n, LLVMValueRef x, LLVMValueRef bound);
  // select(c, node a, node b) as a branch that evaluates only the operand it takes: a Concat's
  // select between loads reads one input per element instead of all of them, and a condition
  // that holds for a whole loop (a Concat along an outer axis) lets LLVM unswitch the loop into
  // one per input. Nodes evaluated in an arm stay out of `memo` (they do not dominate the rest).
  LLVMValueRef Branch(LLVMValueRef c, int a, int b, const Point& pt, std::vector<LLVMValueRef>& memo);

  // The loop over the leading axes' combinations of work items [begin, end) (the kept ones with
  // `rows`), and in it the last axis' range cut to [begin, end) and split at LastAxisCuts, with
  // ranges_ analysed for each piece: body(point with the leading coordinates, the piece's first
  // work item's index less its last coordinate, piece begin, piece end).
  using PieceBody = std::function<void(const Point&, LLVMValueRef, LLVMValueRef, LLVMValueRef)>;
  void LastAxisPieces(bool rows, const PieceBody& body);
  void EmitElementwise();
  // The last-axis coordinates c in (0, last dim) at which a kLt or kLe of that coordinate with a
  // constant changes its result, ascending (at most kMaxCuts; none when there are more).
  std::vector<int64_t> LastAxisCuts() const;
  static constexpr size_t kMaxCuts = 8;
  void EmitRows();
  // Rows whose last coordinate is kept (a Softmax or a sum over an axis before the last), in
  // blocks of rows vectorized across the block: EmitRows would read each row's columns strided.
  void EmitRowBlocks();
  static constexpr int kBlockRows = 64;
  // A reduction's accumulator: its type, its initial value, one column folded in, its kAcc value.
  LLVMTypeRef AccType(const fused::Reduction& red) const;
  LLVMValueRef AccInit(const fused::Reduction& red) const;
  LLVMValueRef AccCombine(const fused::Reduction& red, LLVMValueRef acc, LLVMValueRef v);
  LLVMValueRef AccResult(const fused::Reduction& red, LLVMValueRef acc);

  LLVMModuleRef m_;
  LLVMContextRef ctx_;
  const fused::Program& p_;
  const CpuTarget& target_;
  LLVMBuilderRef b_;
  LLVMTypeRef i1_, i8_, i16_, i32_, i64_, f32_, f64_, half_, ptr_;
  LLVMValueRef fn_ = nullptr;
  std::vector<LLVMValueRef> inputs_, outputs_, sizes_, dims_, strides_, input_empty_;
  // dims_ with 0 as 1, to divide by: a domain with no elements is never called (abi.h), but a
  // division by a constant 0 would still make LLVM delete the function as undefined behaviour.
  std::vector<LLVMValueRef> divisor_dims_;
  LLVMValueRef begin_ = nullptr, end_ = nullptr, failed_ = nullptr, zero_slot_ = nullptr;
  std::vector<int> kept_, reduced_;
  std::vector<bool> reads_;   // per node: it or a node it depends on loads from an input
  std::vector<bool> checks_;  // per node: it or a node it depends on is a kCheckIndex
  // Value ranges of the integer nodes where the loop being emitted evaluates them
  // (index_ranges.h): a node of one value is that constant, a decided comparison picks its select's
  // operand and a decided min or max its operand, unless that would skip an index check.
  IndexRanges ranges_;
  // ranges_ for a loop whose last coordinate takes [lo, hi) (hi 0: its whole extent) where the
  // kept axes (rows) or all axes (elements) are non-empty.
  void AnalyseFor(int64_t lo, int64_t hi, bool rows);
};

// Whether llvm_math.h covers op in type t.
bool HasMath(Op op, ScalarType t) { return t == ScalarType::kF32 && MathMaxUlp(op) >= 0; }

bool NeedsMath(Op op) {
  switch (op) {
    case Op::kExp: case Op::kLog: case Op::kErf: case Op::kTanh: case Op::kSigmoid: case Op::kSin:
    case Op::kCos: case Op::kTan: case Op::kAsin: case Op::kAcos: case Op::kAtan: case Op::kSinh:
    case Op::kCosh: case Op::kPow:
      return true;
    default:
      return false;
  }
}

Status Emitter::CoveredDType(DType dt, const char* what, size_t k) const {
  switch (dt) {
    case DType::kFloat32: case DType::kFloat64: case DType::kBFloat16: case DType::kInt8: case DType::kUInt8:
    case DType::kInt16: case DType::kUInt16: case DType::kInt32: case DType::kUInt32: case DType::kInt64:
    case DType::kBool:
      return Status::Ok();
    case DType::kFloat16:
      if (target_.f16c) return Status::Ok();
      break;
    default:
      break;
  }
  return Unimplemented(std::string(what) + " " + std::to_string(k) + ": dtype " + std::string(DTypeName(dt)) +
                       " has no native code on " + target_.name);
}

Status Emitter::Covered() const {
  for (size_t k = 0; k < p_.inputs.size(); ++k) KILN_RETURN_IF_ERROR(CoveredDType(p_.inputs[k].dtype, "input", k));
  for (size_t k = 0; k < p_.outputs.size(); ++k) {
    KILN_RETURN_IF_ERROR(CoveredDType(p_.outputs[k].tensor.dtype, "output", k));
  }
  for (size_t k = 0; k < p_.nodes.size(); ++k) {
    const fused::Node& n = p_.nodes[k];
    auto refuse = [&](const std::string& why) {
      return Unimplemented("node %" + std::to_string(k) + " (" + fused::OpName(n.op) + "): " + why + " on " +
                           target_.name);
    };
    if (n.op == Op::kCast) KILN_RETURN_IF_ERROR(CoveredDType(static_cast<DType>(n.i), "cast of node", k));
    const bool rounding = n.op == Op::kFloor || n.op == Op::kCeil || n.op == Op::kRound;
    if (rounding && n.type != ScalarType::kI64 && !target_.sse41 && !HasMath(n.op, n.type)) {
      return refuse("rounding without SSE4.1 has no native code yet");
    }
    if ((n.op == Op::kMod || n.op == Op::kFmod) && n.type != ScalarType::kI64) return refuse("float remainder");
    if (NeedsMath(n.op) && !HasMath(n.op, n.type)) return refuse("no native math for this function and type");
  }
  return Status::Ok();
}

LLVMValueRef Emitter::Intrinsic(const char* name, std::vector<LLVMTypeRef> types, std::vector<LLVMValueRef> args) {
  const unsigned id = LLVMLookupIntrinsicID(name, std::strlen(name));
  LLVMValueRef decl = LLVMGetIntrinsicDeclaration(m_, id, types.data(), types.size());
  LLVMTypeRef fty = LLVMIntrinsicGetType(ctx_, id, types.data(), types.size());
  return LLVMBuildCall2(b_, fty, decl, args.data(), static_cast<unsigned>(args.size()), "");
}

std::vector<LLVMValueRef> Emitter::Loop(LLVMValueRef lo, LLVMValueRef hi, std::vector<LLVMValueRef> init,
                                        const Body& body) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b_);
  LLVMBasicBlockRef header = LLVMAppendBasicBlockInContext(ctx_, fn_, "loop");
  LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(ctx_, fn_, "loop.exit");
  LLVMBuildCondBr(b_, LLVMBuildICmp(b_, LLVMIntSLT, lo, hi, ""), header, exit);
  LLVMPositionBuilderAtEnd(b_, header);
  LLVMValueRef i = LLVMBuildPhi(b_, i64_, "i");
  std::vector<LLVMValueRef> phis;
  for (LLVMValueRef v : init) phis.push_back(LLVMBuildPhi(b_, LLVMTypeOf(v), ""));
  std::vector<LLVMValueRef> next = body(i, phis);
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(b_);
  LLVMValueRef i_next = LLVMBuildAdd(b_, i, I64(1), "");
  LLVMBuildCondBr(b_, LLVMBuildICmp(b_, LLVMIntSLT, i_next, hi, ""), header, exit);
  LLVMAddIncoming(i, &lo, &pre, 1);
  LLVMAddIncoming(i, &i_next, &latch, 1);
  for (size_t k = 0; k < phis.size(); ++k) {
    LLVMAddIncoming(phis[k], &init[k], &pre, 1);
    LLVMAddIncoming(phis[k], &next[k], &latch, 1);
  }
  LLVMPositionBuilderAtEnd(b_, exit);
  std::vector<LLVMValueRef> out;
  for (size_t k = 0; k < phis.size(); ++k) {
    LLVMValueRef phi = LLVMBuildPhi(b_, LLVMTypeOf(init[k]), "");
    LLVMAddIncoming(phi, &init[k], &pre, 1);
    LLVMAddIncoming(phi, &next[k], &latch, 1);
    out.push_back(phi);
  }
  return out;
}

void Emitter::Unflatten(LLVMValueRef index, const std::vector<int>& axes, Point* pt) {
  LLVMValueRef rem = index;
  for (size_t k = axes.size(); k-- > 0;) {
    const int a = axes[k];
    if (k == 0) {
      pt->coord[a] = rem;
    } else {
      pt->coord[a] = LLVMBuildURem(b_, rem, divisor_dims_[a], "");
      rem = LLVMBuildUDiv(b_, rem, divisor_dims_[a], "");
    }
  }
}

LLVMValueRef Emitter::Linear(const Point& pt) {
  LLVMValueRef lin = I64(0);
  for (size_t a = 0; a < pt.coord.size(); ++a) {
    lin = LLVMBuildAdd(b_, lin, LLVMBuildMul(b_, pt.coord[a], strides_[a], ""), "");
  }
  return lin;
}

LLVMValueRef Emitter::Load(int input, LLVMValueRef index) {
  const DType dt = p_.inputs[input].dtype;
  LLVMValueRef base = inputs_[input];
  if (input_empty_[input] != nullptr) {  // an input with no elements reads the zero slot
    base = LLVMBuildSelect(b_, input_empty_[input], zero_slot_, base, "");
    index = LLVMBuildSelect(b_, input_empty_[input], I64(0), index, "");
  }
  auto load = [&](LLVMTypeRef t, unsigned bytes) {
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(b_, t, base, &index, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(b_, t, ptr, "");
    LLVMSetAlignment(v, bytes);
    return v;
  };
  switch (dt) {
    case DType::kFloat32: return load(f32_, 4);
    case DType::kFloat64: return load(f64_, 8);
    case DType::kFloat16: return LLVMBuildFPExt(b_, LLVMBuildBitCast(b_, load(i16_, 2), half_, ""), f32_, "");
    case DType::kBFloat16: {
      LLVMValueRef w = LLVMBuildShl(b_, LLVMBuildZExt(b_, load(i16_, 2), i32_, ""), LLVMConstInt(i32_, 16, 0), "");
      return LLVMBuildBitCast(b_, w, f32_, "");
    }
    case DType::kInt8: return LLVMBuildSExt(b_, load(i8_, 1), i64_, "");
    case DType::kUInt8: return LLVMBuildZExt(b_, load(i8_, 1), i64_, "");
    case DType::kInt16: return LLVMBuildSExt(b_, load(i16_, 2), i64_, "");
    case DType::kUInt16: return LLVMBuildZExt(b_, load(i16_, 2), i64_, "");
    case DType::kInt32: return LLVMBuildSExt(b_, load(i32_, 4), i64_, "");
    case DType::kUInt32: return LLVMBuildZExt(b_, load(i32_, 4), i64_, "");
    case DType::kInt64: return load(i64_, 8);
    case DType::kBool:
      return LLVMBuildZExt(b_, LLVMBuildICmp(b_, LLVMIntNE, load(i8_, 1), LLVMConstInt(i8_, 0, 0), ""), i64_, "");
    default: return nullptr;  // not reached: Covered() refused it
  }
}

LLVMValueRef Emitter::FloatToBF16Bits(LLVMValueRef f) {
  // As runtime/half.h's FloatToBF16: NaN keeps its payload's top and becomes quiet; otherwise
  // round to nearest even.
  LLVMValueRef x = LLVMBuildBitCast(b_, f, i32_, "");
  auto c = [&](uint32_t v) { return LLVMConstInt(i32_, v, 0); };
  LLVMValueRef is_nan = LLVMBuildICmp(b_, LLVMIntUGT, LLVMBuildAnd(b_, x, c(0x7fffffffu), ""), c(0x7f800000u), "");
  LLVMValueRef nan = LLVMBuildOr(b_, LLVMBuildLShr(b_, x, c(16), ""), c(0x40u), "");
  LLVMValueRef lsb = LLVMBuildAnd(b_, LLVMBuildLShr(b_, x, c(16), ""), c(1), "");
  LLVMValueRef rounded = LLVMBuildLShr(b_, LLVMBuildAdd(b_, x, LLVMBuildAdd(b_, c(0x7fffu), lsb, ""), ""), c(16), "");
  return LLVMBuildTrunc(b_, LLVMBuildSelect(b_, is_nan, nan, rounded, ""), i16_, "");
}

LLVMValueRef Emitter::RoundTripHalf(LLVMValueRef f) {
  return LLVMBuildFPExt(b_, LLVMBuildFPTrunc(b_, f, half_, ""), f32_, "");
}

void Emitter::Store(int output, LLVMValueRef index, LLVMValueRef v) {
  const DType dt = p_.outputs[output].tensor.dtype;
  auto store = [&](LLVMTypeRef t, LLVMValueRef x, unsigned bytes) {
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(b_, t, outputs_[output], &index, 1, "");
    LLVMSetAlignment(LLVMBuildStore(b_, x, ptr), bytes);
  };
  switch (dt) {
    case DType::kFloat32: return store(f32_, v, 4);
    case DType::kFloat64: return store(f64_, v, 8);
    case DType::kFloat16: return store(i16_, LLVMBuildBitCast(b_, LLVMBuildFPTrunc(b_, v, half_, ""), i16_, ""), 2);
    case DType::kBFloat16: return store(i16_, FloatToBF16Bits(v), 2);
    case DType::kInt8: case DType::kUInt8: return store(i8_, LLVMBuildTrunc(b_, v, i8_, ""), 1);
    case DType::kInt16: case DType::kUInt16: return store(i16_, LLVMBuildTrunc(b_, v, i16_, ""), 2);
    case DType::kInt32: case DType::kUInt32: return store(i32_, LLVMBuildTrunc(b_, v, i32_, ""), 4);
    case DType::kInt64: return store(i64_, v, 8);
    case DType::kBool:
      return store(i8_, LLVMBuildZExt(b_, LLVMBuildICmp(b_, LLVMIntNE, v, I64(0), ""), i8_, ""), 1);
    default: return;  // not reached: Covered() refused it
  }
}

LLVMValueRef Emitter::CastTo(LLVMValueRef x, ScalarType from, DType to) {
  const bool from_int = from == ScalarType::kI64;
  auto to_float = [&](LLVMTypeRef t) {
    if (from_int) return LLVMBuildSIToFP(b_, x, t, "");
    if (LLVMTypeOf(x) == t) return x;
    return t == f64_ ? LLVMBuildFPExt(b_, x, t, "") : LLVMBuildFPTrunc(b_, x, t, "");
  };
  switch (to) {
    case DType::kFloat32: return to_float(f32_);
    case DType::kFloat64: return to_float(f64_);
    case DType::kFloat16: return RoundTripHalf(to_float(f32_));
    case DType::kBFloat16: {
      LLVMValueRef bits = LLVMBuildZExt(b_, FloatToBF16Bits(to_float(f32_)), i32_, "");
      return LLVMBuildBitCast(b_, LLVMBuildShl(b_, bits, LLVMConstInt(i32_, 16, 0), ""), f32_, "");
    }
    case DType::kBool:
      if (from_int) return LLVMBuildZExt(b_, LLVMBuildICmp(b_, LLVMIntNE, x, I64(0), ""), i64_, "");
      return LLVMBuildZExt(b_, LLVMBuildFCmp(b_, LLVMRealUNE, x, LLVMConstReal(LLVMTypeOf(x), 0), ""), i64_, "");
    default: break;
  }
  LLVMTypeRef narrow = nullptr;
  bool is_signed = true;
  switch (to) {
    case DType::kInt8: narrow = i8_; break;
    case DType::kUInt8: narrow = i8_; is_signed = false; break;
    case DType::kInt16: narrow = i16_; break;
    case DType::kUInt16: narrow = i16_; is_signed = false; break;
    case DType::kInt32: narrow = i32_; break;
    case DType::kUInt32: narrow = i32_; is_signed = false; break;
    default: narrow = i64_; break;  // int64
  }
  LLVMValueRef n;
  if (from_int) {
    if (narrow == i64_) return x;
    n = LLVMBuildTrunc(b_, x, narrow, "");  // integer narrowing wraps, as a C cast does
  } else if (narrow == i8_ || narrow == i16_) {
    // Saturating, NaN to 0: clamped in x's own type, where the 8- and 16-bit bounds are exact,
    // then truncated through int32. The same values as the double path below, but LLVM keeps
    // it in vectors (llvm.fptosi.sat to i8 was scalarized: 1.2 ns per QuantizeLinear element).
    const bool byte = narrow == i8_;
    const double lo = is_signed ? (byte ? -128.0 : -32768.0) : 0.0, hi = is_signed ? (byte ? 127.0 : 32767.0)
                                                                                    : (byte ? 255.0 : 65535.0);
    LLVMTypeRef ft = LLVMTypeOf(x);
    LLVMValueRef c = Intrinsic("llvm.maxnum", {ft}, {x, LLVMConstReal(ft, lo)});
    c = Intrinsic("llvm.minnum", {ft}, {c, LLVMConstReal(ft, hi)});
    c = LLVMBuildSelect(b_, LLVMBuildFCmp(b_, LLVMRealUNO, x, x, ""), LLVMConstReal(ft, 0), c, "");
    n = LLVMBuildTrunc(b_, LLVMBuildFPToSI(b_, c, i32_, ""), narrow, "");
  } else {
    // Saturating, NaN to 0, from the value widened to double (as the interpreter converts).
    LLVMValueRef d = LLVMTypeOf(x) == f64_ ? x : LLVMBuildFPExt(b_, x, f64_, "");
    n = Intrinsic(is_signed ? "llvm.fptosi.sat" : "llvm.fptoui.sat", {narrow, f64_}, {d});
    if (narrow == i64_) return n;
  }
  return is_signed ? LLVMBuildSExt(b_, n, i64_, "") : LLVMBuildZExt(b_, n, i64_, "");
}

LLVMValueRef Emitter::CheckIndex(const fused::Node& n, LLVMValueRef x, LLVMValueRef bound) {
  // The first failing element reports the check and returns 1 (the work items are visited in
  // domain order, so it is the first in domain order).
  LLVMValueRef ok = LLVMBuildAnd(b_, LLVMBuildICmp(b_, LLVMIntSGE, x, I64(0), ""),
                                 LLVMBuildICmp(b_, LLVMIntSLT, x, bound, ""), "");
  LLVMBasicBlockRef fail = LLVMAppendBasicBlockInContext(ctx_, fn_, "check.fail");
  LLVMBasicBlockRef pass = LLVMAppendBasicBlockInContext(ctx_, fn_, "check.ok");
  LLVMBuildCondBr(b_, ok, pass, fail);
  LLVMPositionBuilderAtEnd(b_, fail);
  LLVMValueRef one = I64(1), two = I64(2);
  LLVMBuildStore(b_, I64(n.i), failed_);
  LLVMBuildStore(b_, x, LLVMBuildInBoundsGEP2(b_, i64_, failed_, &one, 1, ""));
  LLVMBuildStore(b_, bound, LLVMBuildInBoundsGEP2(b_, i64_, failed_, &two, 1, ""));
  LLVMBuildRet(b_, LLVMConstInt(i32_, 1, 0));
  LLVMPositionBuilderAtEnd(b_, pass);
  return x;
}

LLVMValueRef Emitter::Branch(LLVMValueRef c, int a, int b, const Point& pt, std::vector<LLVMValueRef>& memo) {
  LLVMBasicBlockRef then_bb = LLVMAppendBasicBlockInContext(ctx_, fn_, "select.a");
  LLVMBasicBlockRef else_bb = LLVMAppendBasicBlockInContext(ctx_, fn_, "select.b");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(ctx_, fn_, "select.join");
  LLVMBuildCondBr(b_, c, then_bb, else_bb);
  LLVMValueRef values[2];
  LLVMBasicBlockRef ends[2];
  const int nodes[2] = {a, b};
  LLVMBasicBlockRef starts[2] = {then_bb, else_bb};
  for (int k = 0; k < 2; ++k) {
    LLVMPositionBuilderAtEnd(b_, starts[k]);
    std::vector<LLVMValueRef> arm = memo;
    values[k] = Eval(nodes[k], pt, arm);
    ends[k] = LLVMGetInsertBlock(b_);  // an index check in the arm may have split it
    LLVMBuildBr(b_, join);
  }
  LLVMPositionBuilderAtEnd(b_, join);
  LLVMValueRef phi = LLVMBuildPhi(b_, LLVMTypeOf(values[0]), "");
  LLVMAddIncoming(phi, values, ends, 2);
  return phi;
}

void Emitter::AnalyseFor(int64_t lo, int64_t hi, bool rows) {
  const int rank = static_cast<int>(p_.domain.size());
  uint32_t nonempty = 0;
  for (int a = 0; a < rank; ++a)
    if (!rows || !((p_.reduce_axes >> a) & 1u)) nonempty |= 1u << a;
  std::vector<IntRange> coords;
  if (rank > 0 && hi > 0) {
    coords.assign(rank, IntRange{});
    for (int a = 0; a < rank; ++a) {
      const int64_t d = p_.domain[a];
      coords[a] = d >= 0 ? IntRange{0, std::max<int64_t>(d - 1, 0)} : IntRange{0, INT64_MAX - 1};
    }
    coords[rank - 1] = {lo, hi - 1};
  }
  ranges_ = AnalyseRanges(p_, nonempty, std::vector<bool>(static_cast<size_t>(p_.num_sizes), false), coords);
}

LLVMValueRef Emitter::Eval(int node, const Point& pt, std::vector<LLVMValueRef>& memo) {
  if (memo[node] != nullptr) return memo[node];
  const fused::Node& n = p_.nodes[node];
  const IntRange& r = ranges_.range[node];
  if (n.type == ScalarType::kI64 && n.op != Op::kConst && !checks_[node] && r.lo == r.hi) {
    memo[node] = I64(r.lo);
    return memo[node];
  }
  // A decided select or integer min/max: only the operand it gives.
  int only = -1;
  if (n.op == Op::kSelect) {
    const IntRange& c = ranges_.range[n.a];
    if (c.lo > 0 || c.hi < 0) only = n.b;
    else if (c.lo == 0 && c.hi == 0) only = n.c;
    if (only >= 0 && checks_[n.a]) only = -1;
  } else if ((n.op == Op::kMin || n.op == Op::kMax) && n.type == ScalarType::kI64) {
    const IntRange &x = ranges_.range[n.a], &y = ranges_.range[n.b];
    const bool x_le_y = x.hi <= y.lo, y_le_x = y.hi <= x.lo;
    if (x_le_y) only = n.op == Op::kMin ? n.a : n.b;
    else if (y_le_x) only = n.op == Op::kMin ? n.b : n.a;
    if (only >= 0 && checks_[only == n.a ? n.b : n.a]) only = -1;
  }
  memo[node] = only >= 0 ? Eval(only, pt, memo) : EvalNode(n, pt, memo);
  return memo[node];
}

LLVMValueRef Emitter::EvalNode(const fused::Node& n, const Point& pt, std::vector<LLVMValueRef>& memo) {
  const bool is_int = n.type == ScalarType::kI64;
  auto X = [&] { return Eval(n.a, pt, memo); };
  auto Y = [&] { return Eval(n.b, pt, memo); };
  auto Z = [&] { return Eval(n.c, pt, memo); };
  auto bool64 = [&](LLVMValueRef c) { return LLVMBuildZExt(b_, c, i64_, ""); };
  auto fconst = [&](double v) { return Float(n.type, v); };
  switch (n.op) {
    case Op::kConst: return is_int ? I64(n.i) : fconst(n.f);
    case Op::kCoord: return pt.coord[n.i];
    case Op::kLinear: return pt.linear;
    case Op::kSize: return sizes_[n.i];
    case Op::kAcc: return pt.acc[n.i];
    case Op::kLoad: return Load(static_cast<int>(n.i), X());
    case Op::kCast: return CastTo(X(), p_.nodes[n.a].type, static_cast<DType>(n.i));
    case Op::kNeg: return is_int ? LLVMBuildSub(b_, I64(0), X(), "") : LLVMBuildFNeg(b_, X(), "");
    case Op::kAbs: {
      LLVMValueRef x = X();
      if (!is_int) return Intrinsic("llvm.fabs", {TypeOf(n.type)}, {x});
      return LLVMBuildSelect(b_, LLVMBuildICmp(b_, LLVMIntSLT, x, I64(0), ""), LLVMBuildSub(b_, I64(0), x, ""), x, "");
    }
    case Op::kSign: {
      LLVMValueRef x = X();
      if (is_int) {
        return LLVMBuildSub(b_, bool64(LLVMBuildICmp(b_, LLVMIntSGT, x, I64(0), "")),
                            bool64(LLVMBuildICmp(b_, LLVMIntSLT, x, I64(0), "")), "");
      }
      LLVMValueRef neg = LLVMBuildSelect(b_, LLVMBuildFCmp(b_, LLVMRealOLT, x, fconst(0), ""), fconst(-1), x, "");
      return LLVMBuildSelect(b_, LLVMBuildFCmp(b_, LLVMRealOGT, x, fconst(0), ""), fconst(1), neg, "");
    }
    case Op::kNot: return bool64(LLVMBuildICmp(b_, LLVMIntEQ, X(), I64(0), ""));
    case Op::kFloor:
    case Op::kCeil:
    case Op::kRound:
      if (is_int) return X();
      if (!target_.sse41) return EmitMath(m_, b_, n.op, X());  // llvm.floor would call floorf
      return Intrinsic(n.op == Op::kFloor ? "llvm.floor" : n.op == Op::kCeil ? "llvm.ceil" : "llvm.roundeven",
                       {TypeOf(n.type)}, {X()});
    case Op::kSqrt: return Intrinsic("llvm.sqrt", {TypeOf(n.type)}, {X()});
    case Op::kReciprocal: return LLVMBuildFDiv(b_, fconst(1), X(), "");
    case Op::kIsNaN: {
      LLVMValueRef x = X();
      return bool64(LLVMBuildFCmp(b_, LLVMRealUNO, x, x, ""));
    }
    case Op::kAdd: return is_int ? LLVMBuildAdd(b_, X(), Y(), "") : LLVMBuildFAdd(b_, X(), Y(), "");
    case Op::kSub: return is_int ? LLVMBuildSub(b_, X(), Y(), "") : LLVMBuildFSub(b_, X(), Y(), "");
    case Op::kMul: return is_int ? LLVMBuildMul(b_, X(), Y(), "") : LLVMBuildFMul(b_, X(), Y(), "");
    case Op::kDiv:
    case Op::kFloorDiv:
    case Op::kMod:
    case Op::kFmod: {
      LLVMValueRef x = X(), y = Y();
      if (!is_int) return LLVMBuildFDiv(b_, x, y, "");  // kDiv: Covered() refused float remainders
      // y == 0 gives 0 and y == -1 negates (wrapping), without the two undefined divisions.
      LLVMValueRef zero = LLVMBuildICmp(b_, LLVMIntEQ, y, I64(0), "");
      LLVMValueRef minus1 = LLVMBuildICmp(b_, LLVMIntEQ, y, I64(-1), "");
      LLVMValueRef safe = LLVMBuildSelect(b_, LLVMBuildOr(b_, zero, minus1, ""), I64(1), y, "");
      LLVMValueRef q = LLVMBuildSDiv(b_, x, safe, "");
      LLVMValueRef r = LLVMBuildSRem(b_, x, safe, "");
      LLVMValueRef special = LLVMBuildOr(b_, zero, minus1, "");
      if (n.op == Op::kFmod) return LLVMBuildSelect(b_, special, I64(0), r, "");
      LLVMValueRef signs_differ = LLVMBuildICmp(b_, LLVMIntNE, LLVMBuildICmp(b_, LLVMIntSLT, r, I64(0), ""),
                                                LLVMBuildICmp(b_, LLVMIntSLT, y, I64(0), ""), "");
      LLVMValueRef adjust = LLVMBuildAnd(b_, LLVMBuildICmp(b_, LLVMIntNE, r, I64(0), ""), signs_differ, "");
      if (n.op == Op::kMod) {
        return LLVMBuildSelect(b_, special, I64(0), LLVMBuildSelect(b_, adjust, LLVMBuildAdd(b_, r, y, ""), r, ""), "");
      }
      LLVMValueRef neg = LLVMBuildSub(b_, I64(0), x, "");
      if (n.op == Op::kFloorDiv) q = LLVMBuildSelect(b_, adjust, LLVMBuildSub(b_, q, I64(1), ""), q, "");
      return LLVMBuildSelect(b_, zero, I64(0), LLVMBuildSelect(b_, minus1, neg, q, ""), "");
    }
    case Op::kMin:
    case Op::kMax: {
      LLVMValueRef x = X(), y = Y();
      if (is_int) {
        return LLVMBuildSelect(b_, LLVMBuildICmp(b_, n.op == Op::kMin ? LLVMIntSLT : LLVMIntSGT, x, y, ""), x, y, "");
      }
      // NaN in either operand gives NaN (ONNX Min/Max): x when x wins or is NaN, else y.
      LLVMValueRef wins = LLVMBuildFCmp(b_, n.op == Op::kMin ? LLVMRealOLT : LLVMRealOGT, x, y, "");
      LLVMValueRef take_x = LLVMBuildOr(b_, wins, LLVMBuildFCmp(b_, LLVMRealUNO, x, x, ""), "");
      return LLVMBuildSelect(b_, take_x, x, y, "");
    }
    case Op::kEq:
    case Op::kLt:
    case Op::kLe: {
      LLVMValueRef x = X(), y = Y();
      if (p_.nodes[n.a].type == ScalarType::kI64) {
        const LLVMIntPredicate pred = n.op == Op::kEq ? LLVMIntEQ : n.op == Op::kLt ? LLVMIntSLT : LLVMIntSLE;
        return bool64(LLVMBuildICmp(b_, pred, x, y, ""));
      }
      const LLVMRealPredicate pred = n.op == Op::kEq ? LLVMRealOEQ : n.op == Op::kLt ? LLVMRealOLT : LLVMRealOLE;
      return bool64(LLVMBuildFCmp(b_, pred, x, y, ""));
    }
    case Op::kAnd: return LLVMBuildAnd(b_, X(), Y(), "");
    case Op::kOr: return LLVMBuildOr(b_, X(), Y(), "");
    case Op::kXor: return LLVMBuildXor(b_, X(), Y(), "");
    case Op::kSelect: {
      LLVMValueRef c = LLVMBuildICmp(b_, LLVMIntNE, X(), I64(0), "");
      if (!reads_[n.b] && !reads_[n.c]) return LLVMBuildSelect(b_, c, Y(), Z(), "");
      return Branch(c, n.b, n.c, pt, memo);
    }
    case Op::kCheckIndex: return CheckIndex(n, X(), Y());
    default:
      return n.op == Op::kPow ? EmitMath(m_, b_, n.op, X(), Y()) : EmitMath(m_, b_, n.op, X());
  }
}

std::vector<int64_t> Emitter::LastAxisCuts() const {
  const int rank = static_cast<int>(p_.domain.size());
  if (rank == 0 || p_.domain[rank - 1] < 2) return {};
  const int64_t last = p_.domain[rank - 1];
  auto is_coord = [&](int32_t n) { return p_.nodes[n].op == Op::kCoord && p_.nodes[n].i == rank - 1; };
  auto is_const = [&](int32_t n) { return p_.nodes[n].op == Op::kConst && p_.nodes[n].type == ScalarType::kI64; };
  std::vector<int64_t> cuts;
  for (const fused::Node& n : p_.nodes) {
    if (n.op != Op::kLt && n.op != Op::kLe) continue;
    if (p_.nodes[n.a].type != ScalarType::kI64) continue;
    int64_t cut = 0;
    if (is_coord(n.a) && is_const(n.b)) {
      const int64_t c = p_.nodes[n.b].i;  // j < c changes at c; j <= c at c + 1
      if (c <= 0 || c >= last) continue;
      cut = n.op == Op::kLt ? c : c + 1;
    } else if (is_const(n.a) && is_coord(n.b)) {
      const int64_t c = p_.nodes[n.a].i;  // c < j changes at c + 1; c <= j at c
      if (c <= 0 || c >= last) continue;
      cut = n.op == Op::kLt ? c + 1 : c;
    } else {
      continue;
    }
    if (cut > 0 && cut < last) cuts.push_back(cut);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  if (cuts.size() > kMaxCuts) cuts.clear();
  return cuts;
}

void Emitter::LastAxisPieces(bool rows, const PieceBody& body) {
  const int rank = static_cast<int>(p_.domain.size());
  LLVMValueRef last = rank ? divisor_dims_[rank - 1] : I64(1);
  LLVMValueRef o_lo = LLVMBuildUDiv(b_, begin_, last, "");
  LLVMValueRef o_hi = LLVMBuildUDiv(b_, LLVMBuildAdd(b_, end_, LLVMBuildSub(b_, last, I64(1), ""), ""), last, "");
  std::vector<int> outer;
  for (int a = 0; a + 1 < rank; ++a)
    if (!rows || !((p_.reduce_axes >> a) & 1u)) outer.push_back(a);
  const std::vector<int64_t> cuts = LastAxisCuts();
  Loop(o_lo, o_hi, {}, [&](LLVMValueRef o, const std::vector<LLVMValueRef>&) {
    Point pt;
    pt.coord.assign(rank, nullptr);
    Unflatten(o, outer, &pt);
    LLVMValueRef base = LLVMBuildMul(b_, o, last, "");
    LLVMValueRef from = LLVMBuildSub(b_, begin_, base, "");
    LLVMValueRef j_lo = LLVMBuildSelect(b_, LLVMBuildICmp(b_, LLVMIntSGT, from, I64(0), ""), from, I64(0), "");
    LLVMValueRef to = LLVMBuildSub(b_, end_, base, "");
    LLVMValueRef j_hi = LLVMBuildSelect(b_, LLVMBuildICmp(b_, LLVMIntSLT, to, last, ""), to, last, "");
    for (size_t piece = 0; piece <= cuts.size(); ++piece) {
      LLVMValueRef lo = j_lo, hi = j_hi;
      if (piece > 0) lo = LLVMBuildSelect(b_, LLVMBuildICmp(b_, LLVMIntSGT, lo, I64(cuts[piece - 1]), ""), lo,
                                          I64(cuts[piece - 1]), "");
      if (piece < cuts.size())
        hi = LLVMBuildSelect(b_, LLVMBuildICmp(b_, LLVMIntSLT, hi, I64(cuts[piece]), ""), hi, I64(cuts[piece]), "");
      if (!cuts.empty())
        AnalyseFor(piece > 0 ? cuts[piece - 1] : 0, piece < cuts.size() ? cuts[piece] : p_.domain[rank - 1], rows);
      body(pt, base, lo, hi);
    }
    return std::vector<LLVMValueRef>{};
  });
}

void Emitter::EmitElementwise() {
  const int rank = static_cast<int>(p_.domain.size());
  LastAxisPieces(false, [&](const Point& pt, LLVMValueRef base, LLVMValueRef lo, LLVMValueRef hi) {
    Loop(lo, hi, {}, [&](LLVMValueRef j, const std::vector<LLVMValueRef>&) {
      Point in = pt;
      if (rank) in.coord[rank - 1] = j;
      in.linear = LLVMBuildAdd(b_, base, j, "");
      std::vector<LLVMValueRef> memo(p_.nodes.size(), nullptr);
      for (size_t k = 0; k < p_.outputs.size(); ++k) {
        Store(static_cast<int>(k), in.linear, Eval(p_.outputs[k].value, in, memo));
      }
      return std::vector<LLVMValueRef>{};
    });
  });
}

// Float sums accumulate in double (kAcc rounds to the value's type), as the interpreter's do;
// their adds may be reordered (vectorized). Products, maxima and minima stay in the value's own
// type.
LLVMTypeRef Emitter::AccType(const fused::Reduction& red) const {
  const ScalarType t = p_.nodes[red.value].type;
  return t != ScalarType::kI64 && red.op == fused::ReduceOp::kSum ? f64_ : TypeOf(t);
}

LLVMValueRef Emitter::AccInit(const fused::Reduction& red) const {
  const bool is_int = p_.nodes[red.value].type == ScalarType::kI64;
  LLVMTypeRef t = AccType(red);
  switch (red.op) {
    case fused::ReduceOp::kSum: return is_int ? I64(0) : LLVMConstReal(t, 0);
    case fused::ReduceOp::kProd: return is_int ? I64(1) : LLVMConstReal(t, 1);
    case fused::ReduceOp::kMax:
      return is_int ? I64(INT64_MIN) : LLVMConstReal(t, -std::numeric_limits<double>::infinity());
    default: return is_int ? I64(INT64_MAX) : LLVMConstReal(t, std::numeric_limits<double>::infinity());
  }
}

LLVMValueRef Emitter::AccCombine(const fused::Reduction& red, LLVMValueRef a, LLVMValueRef v) {
  const bool is_int = p_.nodes[red.value].type == ScalarType::kI64;
  switch (red.op) {
    case fused::ReduceOp::kSum: {
      if (is_int) return LLVMBuildAdd(b_, a, v, "");
      LLVMValueRef w = LLVMTypeOf(v) == f64_ ? v : LLVMBuildFPExt(b_, v, f64_, "");
      LLVMValueRef s = LLVMBuildFAdd(b_, a, w, "");
      LLVMSetFastMathFlags(s, LLVMFastMathAllowReassoc);
      return s;
    }
    case fused::ReduceOp::kProd: return is_int ? LLVMBuildMul(b_, a, v, "") : LLVMBuildFMul(b_, a, v, "");
    default: {
      const bool max = red.op == fused::ReduceOp::kMax;
      if (is_int) return LLVMBuildSelect(b_, LLVMBuildICmp(b_, max ? LLVMIntSGT : LLVMIntSLT, v, a, ""), v, a, "");
      // IEEE 754-2019 maximum/minimum: NaN propagates, as the interpreter's does, and LLVM
      // vectorizes it as a reduction (a select on `v > a || v != v` it would not). -0 and +0
      // may come out either way round, which docs/semantics.md allows.
      return Intrinsic(max ? "llvm.maximum" : "llvm.minimum", {LLVMTypeOf(a)}, {a, v});
    }
  }
}

LLVMValueRef Emitter::AccResult(const fused::Reduction& red, LLVMValueRef acc) {
  return AccType(red) == f64_ && p_.nodes[red.value].type == ScalarType::kF32 ? LLVMBuildFPTrunc(b_, acc, f32_, "")
                                                                              : acc;
}

void Emitter::EmitRows() {
  // Rows [begin, end): each reduction over the row's columns in order, then the outputs.
  const int rank = static_cast<int>(p_.domain.size());
  LLVMValueRef cols = I64(1);
  for (int a : reduced_) cols = LLVMBuildMul(b_, cols, dims_[a], "");
  Loop(begin_, end_, {}, [&](LLVMValueRef row, const std::vector<LLVMValueRef>&) {
    Point pt;
    pt.coord.assign(rank, nullptr);
    Unflatten(row, kept_, &pt);
    auto at_column = [&](LLVMValueRef col) {
      Point in = pt;
      Unflatten(col, reduced_, &in);
      in.linear = Linear(in);
      return in;
    };
    for (const fused::Reduction& red : p_.reductions) {
      std::vector<LLVMValueRef> done =
          Loop(I64(0), cols, {AccInit(red)}, [&](LLVMValueRef col, const std::vector<LLVMValueRef>& acc) {
            Point in = at_column(col);
            std::vector<LLVMValueRef> memo(p_.nodes.size(), nullptr);
            return std::vector<LLVMValueRef>{AccCombine(red, acc[0], Eval(red.value, in, memo))};
          });
      pt.acc.push_back(AccResult(red, done[0]));
    }
    bool any_full = false;
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      if (p_.outputs[k].per_row) {
        Point in = at_column(I64(0));
        std::vector<LLVMValueRef> memo(p_.nodes.size(), nullptr);
        Store(static_cast<int>(k), row, Eval(p_.outputs[k].value, in, memo));
      } else {
        any_full = true;
      }
    }
    if (any_full) {
      Loop(I64(0), cols, {}, [&](LLVMValueRef col, const std::vector<LLVMValueRef>&) {
        Point in = at_column(col);
        std::vector<LLVMValueRef> memo(p_.nodes.size(), nullptr);
        for (size_t k = 0; k < p_.outputs.size(); ++k) {
          if (!p_.outputs[k].per_row) Store(static_cast<int>(k), in.linear, Eval(p_.outputs[k].value, in, memo));
        }
        return std::vector<LLVMValueRef>{};
      });
    }
    return std::vector<LLVMValueRef>{};
  });
}

void Emitter::EmitRowBlocks() {
  // Rows [begin, end) in blocks of up to kBlockRows consecutive rows, which differ only in the
  // last (kept) coordinate; a block's accumulators live in arrays, and every loop over the block's
  // rows is innermost, so its loads are contiguous and the vectorizer widens it. Each row still
  // takes its columns in order, as EmitRows does.
  const int rank = static_cast<int>(p_.domain.size());
  const int last = rank - 1;
  LLVMValueRef cols = I64(1);
  for (int a : reduced_) cols = LLVMBuildMul(b_, cols, dims_[a], "");
  std::vector<LLVMValueRef> arrays;
  for (const fused::Reduction& red : p_.reductions)
    arrays.push_back(LLVMBuildAlloca(b_, LLVMArrayType(AccType(red), kBlockRows), ""));
  auto slot = [&](size_t k, LLVMValueRef t) {
    LLVMValueRef idx[] = {I64(0), t};
    return LLVMBuildInBoundsGEP2(b_, LLVMArrayType(AccType(p_.reductions[k]), kBlockRows), arrays[k], idx, 2, "");
  };
  LastAxisPieces(true, [&](const Point& pt, LLVMValueRef base, LLVMValueRef j_lo, LLVMValueRef j_hi) {
    LLVMValueRef blocks = LLVMBuildSDiv(b_, LLVMBuildAdd(b_, LLVMBuildSub(b_, j_hi, j_lo, ""), I64(kBlockRows - 1), ""),
                                        I64(kBlockRows), "");
    Loop(I64(0), blocks, {}, [&](LLVMValueRef blk, const std::vector<LLVMValueRef>&) {
      LLVMValueRef first = LLVMBuildAdd(b_, j_lo, LLVMBuildMul(b_, blk, I64(kBlockRows), ""), "");
      LLVMValueRef left = LLVMBuildSub(b_, j_hi, first, "");
      LLVMValueRef n = LLVMBuildSelect(b_, LLVMBuildICmp(b_, LLVMIntSLT, left, I64(kBlockRows), ""), left,
                                       I64(kBlockRows), "");
      // Row t of the block at column `col`, with the reductions before `done` finished.
      auto at = [&](LLVMValueRef t, LLVMValueRef col, size_t done) {
        Point in = pt;
        in.coord[last] = LLVMBuildAdd(b_, first, t, "");
        Unflatten(col, reduced_, &in);
        in.linear = Linear(in);
        for (size_t k = 0; k < done; ++k)
          in.acc.push_back(AccResult(p_.reductions[k], LLVMBuildLoad2(b_, AccType(p_.reductions[k]), slot(k, t), "")));
        return in;
      };
      for (size_t k = 0; k < p_.reductions.size(); ++k) {
        const fused::Reduction& red = p_.reductions[k];
        Loop(I64(0), n, {}, [&](LLVMValueRef t, const std::vector<LLVMValueRef>&) {
          LLVMBuildStore(b_, AccInit(red), slot(k, t));
          return std::vector<LLVMValueRef>{};
        });
        Loop(I64(0), cols, {}, [&](LLVMValueRef col, const std::vector<LLVMValueRef>&) {
          Loop(I64(0), n, {}, [&](LLVMValueRef t, const std::vector<LLVMValueRef>&) {
            Point in = at(t, col, k);
            std::vector<LLVMValueRef> memo(p_.nodes.size(), nullptr);
            LLVMValueRef v = Eval(red.value, in, memo);
            LLVMValueRef p = slot(k, t);
            LLVMBuildStore(b_, AccCombine(red, LLVMBuildLoad2(b_, AccType(red), p, ""), v), p);
            return std::vector<LLVMValueRef>{};
          });
          return std::vector<LLVMValueRef>{};
        });
      }
      bool any_full = false;
      for (size_t k = 0; k < p_.outputs.size(); ++k) any_full |= !p_.outputs[k].per_row;
      Loop(I64(0), n, {}, [&](LLVMValueRef t, const std::vector<LLVMValueRef>&) {
        LLVMValueRef row = LLVMBuildAdd(b_, LLVMBuildAdd(b_, base, first, ""), t, "");
        for (size_t k = 0; k < p_.outputs.size(); ++k) {
          if (!p_.outputs[k].per_row) continue;
          Point in = at(t, I64(0), p_.reductions.size());
          std::vector<LLVMValueRef> memo(p_.nodes.size(), nullptr);
          Store(static_cast<int>(k), row, Eval(p_.outputs[k].value, in, memo));
        }
        return std::vector<LLVMValueRef>{};
      });
      if (any_full) {
        Loop(I64(0), cols, {}, [&](LLVMValueRef col, const std::vector<LLVMValueRef>&) {
          Loop(I64(0), n, {}, [&](LLVMValueRef t, const std::vector<LLVMValueRef>&) {
            Point in = at(t, col, p_.reductions.size());
            std::vector<LLVMValueRef> memo(p_.nodes.size(), nullptr);
            for (size_t k = 0; k < p_.outputs.size(); ++k) {
              if (!p_.outputs[k].per_row) Store(static_cast<int>(k), in.linear, Eval(p_.outputs[k].value, in, memo));
            }
            return std::vector<LLVMValueRef>{};
          });
          return std::vector<LLVMValueRef>{};
        });
      }
      return std::vector<LLVMValueRef>{};
    });
  });
}

Status Emitter::Emit(const std::string& name) {
  KILN_RETURN_IF_ERROR(Covered());
  reads_.assign(p_.nodes.size(), false);
  checks_.assign(p_.nodes.size(), false);
  for (size_t k = 0; k < p_.nodes.size(); ++k) {  // operands come before their users
    const fused::Node& n = p_.nodes[k];
    reads_[k] = n.op == Op::kLoad;
    checks_[k] = n.op == Op::kCheckIndex;
    for (int32_t operand : {n.a, n.b, n.c}) {
      if (operand < 0) continue;
      reads_[k] = reads_[k] || reads_[static_cast<size_t>(operand)];
      checks_[k] = checks_[k] || checks_[static_cast<size_t>(operand)];
    }
  }
  AnalyseFor(0, 0, p_.reduce_axes != 0);
  LLVMTypeRef args_type = ptr_;
  LLVMTypeRef fn_type = LLVMFunctionType(i32_, &args_type, 1, 0);
  fn_ = LLVMAddFunction(m_, name.c_str(), fn_type);
  // No unwind tables, no calls to the C library (a loop idiom becomes no memset call).
  const unsigned nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
  LLVMAddAttributeAtIndex(fn_, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(ctx_, nounwind, 0));
  LLVMAddAttributeAtIndex(fn_, LLVMAttributeFunctionIndex, LLVMCreateStringAttribute(ctx_, "no-builtins", 11, "", 0));
  // LLVM's x86 tuning prefers 256-bit vectors even where AVX-512 is there; the kernels are short
  // loops over cached data, where the full width halves the instructions (Whisper's Softmax,
  // with float sums in double: 1.7x).
  if (std::strcmp(target_.name, "x86-64-v4") == 0)
    LLVMAddAttributeAtIndex(fn_, LLVMAttributeFunctionIndex,
                            LLVMCreateStringAttribute(ctx_, "prefer-vector-width", 19, "512", 3));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(ctx_, fn_, "entry");
  LLVMPositionBuilderAtEnd(b_, entry);

  // The arguments (runtime/cpu/native/abi.h's KernelArgs: six 8-byte fields).
  LLVMValueRef args = LLVMGetParam(fn_, 0);
  auto field = [&](int k, LLVMTypeRef t) {
    LLVMValueRef off = I64(k);
    LLVMValueRef ptr = LLVMBuildInBoundsGEP2(b_, i64_, args, &off, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(b_, t, ptr, "");
    LLVMSetAlignment(v, 8);
    return v;
  };
  LLVMValueRef in_array = field(0, ptr_), out_array = field(1, ptr_), size_array = field(2, ptr_);
  begin_ = field(3, i64_);
  end_ = field(4, i64_);
  failed_ = field(5, ptr_);
  auto element = [&](LLVMValueRef array, LLVMTypeRef t, size_t k) {
    LLVMValueRef off = I64(static_cast<int64_t>(k));
    LLVMValueRef v = LLVMBuildLoad2(b_, t, LLVMBuildInBoundsGEP2(b_, t, array, &off, 1, ""), "");
    LLVMSetAlignment(v, 8);
    return v;
  };
  for (int k = 0; k < p_.num_sizes; ++k) sizes_.push_back(element(size_array, i64_, k));
  for (size_t k = 0; k < p_.inputs.size(); ++k) inputs_.push_back(element(in_array, ptr_, k));
  for (size_t k = 0; k < p_.outputs.size(); ++k) outputs_.push_back(element(out_array, ptr_, k));
  zero_slot_ = LLVMBuildAlloca(b_, i64_, "zero");
  LLVMBuildStore(b_, I64(0), zero_slot_);
  for (const fused::TensorSpec& spec : p_.inputs) {
    // Inputs that may have no elements (a dim of 0 or a size argument) read the zero slot then.
    bool maybe_empty = false;
    LLVMValueRef count = I64(1);
    for (int64_t d : spec.dims) {
      maybe_empty |= d <= 0;
      count = LLVMBuildMul(b_, count, Dim(d), "");
    }
    input_empty_.push_back(maybe_empty ? LLVMBuildICmp(b_, LLVMIntEQ, count, I64(0), "") : nullptr);
  }
  const int rank = static_cast<int>(p_.domain.size());
  dims_.assign(rank, nullptr);
  divisor_dims_.assign(rank, nullptr);
  strides_.assign(rank, nullptr);
  LLVMValueRef stride = I64(1);
  for (int a = rank - 1; a >= 0; --a) {
    dims_[a] = Dim(p_.domain[a]);
    divisor_dims_[a] = LLVMBuildSelect(b_, LLVMBuildICmp(b_, LLVMIntEQ, dims_[a], I64(0), ""), I64(1), dims_[a], "");
    strides_[a] = stride;
    stride = LLVMBuildMul(b_, stride, dims_[a], "");
    ((p_.reduce_axes >> a) & 1u ? reduced_ : kept_).insert(((p_.reduce_axes >> a) & 1u ? reduced_ : kept_).begin(), a);
  }
  if (p_.reduce_axes == 0) {
    EmitElementwise();
  } else if (!((p_.reduce_axes >> (rank - 1)) & 1u) && (p_.domain[rank - 1] < 0 || p_.domain[rank - 1] >= 8)) {
    EmitRowBlocks();
  } else {
    EmitRows();
  }
  LLVMBuildRet(b_, LLVMConstInt(i32_, 0, 0));
  return Status::Ok();
}

}  // namespace

Status EmitKernel(LLVMModuleRef module, const fused::Program& program, const std::string& name,
                  const CpuTarget& target) {
  const fused::Program simplified = SimplifyAndMergeAxes(program, 64);
  return Emitter(module, simplified, target).Emit(name);
}

}  // namespace kiln::codegen::cpu
