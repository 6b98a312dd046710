#include "runtime/verify.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kiln/tensor.h"
#include "runtime/artifact_header.h"
#include "runtime/claims.h"
#include "runtime/kernels/kernel.h"
#include "runtime/kernels/selective.h"
#include "runtime/executor/loop_rules.h"
#include "runtime/expr_eval.h"

namespace kiln {
namespace {

using std::to_string;

template <typename T>
uint32_t Size(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

std::string Named(const flatbuffers::String* name) {
  return name && name->size() ? " '" + name->str() + "'" : std::string();
}

std::string Range(int64_t i, uint32_t n, const char* what) {
  return to_string(i) + " out of range (" + what + ": " + to_string(n) + ")";
}

Status CheckDType(int32_t dtype, const std::string& where) {
  if (IsValidDType(dtype)) return Status::Ok();
  return DataLoss(where + ": invalid dtype " + to_string(dtype));
}

// numel * element size, false on a negative dim or overflow.
bool ByteSize(const flatbuffers::Vector<int64_t>* dims, DType dtype, uint64_t* out) {
  uint64_t n = DTypeSize(dtype);
  for (uint32_t i = 0; i < Size(dims); ++i) {
    const int64_t d = dims->Get(i);
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) return false;
  }
  *out = n;
  return true;
}

// FlatBuffers 2.0's Verifier checks a vector's length field for 4-byte alignment but not its
// elements for theirs, so a [long] or a vector of 8-byte structs may start 4 bytes off, and
// reading it is a misaligned load (undefined behavior; found by UBSan). Every such vector
// must start on 8 bytes (the FlatBuffer itself does: Model::Load checks its file offset).
template <typename T>
Status Aligned8(const flatbuffers::Vector<T>* v, const std::string& where) {
  // An empty vector has no elements to read, wherever it starts.
  if (v == nullptr || v->size() == 0 || reinterpret_cast<uintptr_t>(v->Data()) % 8 == 0) return Status::Ok();
  return DataLoss(where + ": vector of 8-byte elements is not 8-byte aligned");
}

Status VerifyAlignment(const fb::Artifact& a) {
  auto each = [](auto* vec, auto&& check) -> Status {
    for (uint32_t i = 0; i < Size(vec); ++i) KILN_RETURN_IF_ERROR(check(*vec->Get(i), to_string(i)));
    return Status::Ok();
  };
  for (auto [ios, kind] : {std::pair{a.inputs(), "input "}, std::pair{a.outputs(), "output "}})
    KILN_RETURN_IF_ERROR(each(ios, [kind = kind](const fb::IoInfo& io, const std::string& i) {
      return Aligned8(io.dims(), kind + i + " dims");
    }));
  KILN_RETURN_IF_ERROR(each(a.weights(), [](const fb::Weight& w, const std::string& i) {
    return Aligned8(w.dims(), "weight " + i + " dims");
  }));
  KILN_RETURN_IF_ERROR(each(a.kernels(), [&](const fb::Kernel& k, const std::string& i) -> Status {
    const fb::Program* p = k.program();
    if (p == nullptr) return Status::Ok();
    const std::string where = "kernel " + i + " program";
    KILN_RETURN_IF_ERROR(Aligned8(p->domain(), where + " domain"));
    KILN_RETURN_IF_ERROR(Aligned8(p->nodes(), where + " nodes"));
    KILN_RETURN_IF_ERROR(each(p->inputs(), [&](const fb::TensorSpec& t, const std::string& j) {
      return Aligned8(t.dims(), where + " input " + j + " dims");
    }));
    return each(p->outputs(), [&](const fb::ProgramOutput& o, const std::string& j) {
      return o.tensor() ? Aligned8(o.tensor()->dims(), where + " output " + j + " dims") : Status::Ok();
    });
  }));
  return each(a.entries(), [&](const fb::Entry& e, const std::string& i) -> Status {
    KILN_RETURN_IF_ERROR(Aligned8(e.exprs(), "entry " + i + " exprs"));
    return each(e.instructions(), [&](const fb::Instruction& in, const std::string& j) {
      return each(in.attrs(), [&](const fb::Attr& at, const std::string&) {
        return Aligned8(at.ints(), "entry " + i + " instruction " + j + " attribute '" + at.name()->str() + "' ints");
      });
    });
  });
}

Status VerifyIo(const flatbuffers::Vector<flatbuffers::Offset<fb::IoInfo>>* ios, const char* kind) {
  for (uint32_t i = 0; i < Size(ios); ++i) {
    const fb::IoInfo* io = ios->Get(i);
    const std::string where = std::string("model ") + kind + " " + to_string(i) + Named(io->name());
    KILN_RETURN_IF_ERROR(CheckDType(io->dtype(), where));
    if (Size(io->symbols()) != 0 && Size(io->symbols()) != Size(io->dims()))
      return DataLoss(where + ": " + to_string(Size(io->symbols())) + " symbol names for " +
                      to_string(Size(io->dims())) + " dims");
  }
  return Status::Ok();
}

Status VerifyWeights(const fb::Artifact& a, uint64_t blob) {
  for (uint32_t i = 0; i < Size(a.weights()); ++i) {
    const fb::Weight* w = a.weights()->Get(i);
    const std::string where = "weight " + to_string(i) + Named(w->name());
    KILN_RETURN_IF_ERROR(CheckDType(w->dtype(), where));
    uint64_t bytes = 0;
    if (!ByteSize(w->dims(), static_cast<DType>(w->dtype()), &bytes))
      return DataLoss(where + ": dims negative or too large");
    if (bytes != w->size())
      return DataLoss(where + ": size " + to_string(w->size()) + " bytes, but its dims and dtype need " +
                      to_string(bytes));
    if (w->offset() % 64 != 0)
      return DataLoss(where + ": offset " + to_string(w->offset()) + " is not a multiple of 64");
    if (w->offset() > blob || w->size() > blob - w->offset())
      return DataLoss(where + ": bytes [" + to_string(w->offset()) + ", " +
                      to_string(w->offset() + w->size()) + ") outside the weights blob (" +
                      to_string(blob) + " bytes)");
  }
  return Status::Ok();
}

class EntryVerifier {
 public:
  EntryVerifier(const fb::Artifact& a, const fb::Entry& e, uint32_t index)
      : a_(a), e_(e), where_("entry " + to_string(index)) {
    num_exprs_ = Size(e.exprs());
    num_symbols_ = Size(e.symbols());
    num_tensors_ = Size(e.tensors());
  }

  Status Verify() {
    KILN_RETURN_IF_ERROR(Exprs());
    KILN_RETURN_IF_ERROR(RuntimeDims());
    KILN_RETURN_IF_ERROR(PrologueChecks());
    KILN_RETURN_IF_ERROR(Tensors());
    KILN_RETURN_IF_ERROR(Instructions());
    KILN_RETURN_IF_ERROR(EntryIo());
    KILN_RETURN_IF_ERROR(RuntimeGuards());
    KILN_RETURN_IF_ERROR(ExprRef(e_.arena_bytes(), where_ + ": arena_bytes"));
    return NoRuntimeDim(e_.arena_bytes(), where_ + ": arena_bytes");
  }

 private:
  Status ExprRef(int64_t i, const std::string& what) const {
    if (i >= 0 && i < num_exprs_) return Status::Ok();
    return DataLoss(what + " expr " + Range(i, num_exprs_, "exprs"));
  }

  Status Exprs() {
    for (uint32_t i = 0; i < num_exprs_; ++i) {
      const fb::ExprNode* n = e_.exprs()->Get(i);
      const std::string where = where_ + " expr " + to_string(i);
      const int op = static_cast<int>(n->op());
      if (op < 0 || op >= kNumExprOps) return DataLoss(where + ": invalid op " + to_string(op));
      if (n->op() == fb::ExprOp::Const) continue;
      if (n->op() == fb::ExprOp::Var) {
        if (n->a() < 0 || n->a() >= num_symbols_)
          return DataLoss(where + ": symbol " + Range(n->a(), num_symbols_, "symbols"));
        continue;
      }
      for (int64_t ref : {n->a(), n->b()})
        if (ref < 0 || ref >= i)
          return DataLoss(where + ": operand " + to_string(ref) + " is not an earlier node");
    }
    return Status::Ok();
  }

  // Run-time dims: each a symbol of its own, set by an instruction of its own that runs a CPU
  // kernel which reports a size, with a bound expr.
  Status RuntimeDims() {
    runtime_symbol_.assign(num_symbols_, false);
    std::vector<bool> setter(Size(e_.instructions()), false);
    for (uint32_t k = 0; k < Size(e_.runtime_dims()); ++k) {
      const fb::RuntimeDim* d = e_.runtime_dims()->Get(k);
      const std::string where = where_ + " run-time dim " + to_string(k);
      if (d->symbol() < 0 || d->symbol() >= static_cast<int64_t>(num_symbols_))
        return DataLoss(where + ": symbol " + Range(d->symbol(), num_symbols_, "symbols"));
      if (runtime_symbol_[d->symbol()]) return DataLoss(where + ": symbol " + to_string(d->symbol()) + " is set twice");
      runtime_symbol_[d->symbol()] = true;
      if (d->instruction() < 0 || d->instruction() >= static_cast<int64_t>(setter.size()))
        return DataLoss(where + ": instruction " + Range(d->instruction(), static_cast<uint32_t>(setter.size()), "instructions"));
      if (setter[d->instruction()])
        return DataLoss(where + ": instruction " + to_string(d->instruction()) + " already sets a run-time dim");
      setter[d->instruction()] = true;
      const fb::Instruction* ins = e_.instructions()->Get(d->instruction());
      const cpu::KernelDef* kernel = ins->kernel() < 0 ? cpu::FindKernel(ins->op()->string_view()) : nullptr;
      if ((kernel == nullptr || !kernel->runtime_size) && ins->op()->string_view() != "kiln.LoopEnd")
        return DataLoss(where + ": instruction " + to_string(d->instruction()) + " (" + ins->op()->str() +
                        ") does not report a run-time size");
      KILN_RETURN_IF_ERROR(ExprRef(d->bound(), where + ": bound"));
    }
    // Rooms: symbols of their own that the runtime sets, from `initial` (>= 1), doubling.
    room_symbol_.assign(num_symbols_, false);
    for (uint32_t k = 0; k < Size(e_.rooms()); ++k) {
      const fb::Room* r = e_.rooms()->Get(k);
      const std::string where = where_ + " room " + to_string(k);
      if (r->symbol() < 0 || r->symbol() >= static_cast<int64_t>(num_symbols_))
        return DataLoss(where + ": symbol " + Range(r->symbol(), num_symbols_, "symbols"));
      if (room_symbol_[r->symbol()] || runtime_symbol_[r->symbol()])
        return DataLoss(where + ": symbol " + to_string(r->symbol()) + " is set twice");
      room_symbol_[r->symbol()] = true;
      if (r->initial() < 1 || r->initial() > kMaxRoom)
        return DataLoss(where + ": initial value " + to_string(r->initial()) + ", expected 1 to " +
                        to_string(kMaxRoom));
    }
    reads_runtime_.assign(num_exprs_, false);
    for (uint32_t i = 0; i < num_exprs_; ++i) {
      const fb::ExprNode* x = e_.exprs()->Get(i);
      if (x->op() == fb::ExprOp::Var) reads_runtime_[i] = runtime_symbol_[x->a()];
      else if (x->op() != fb::ExprOp::Const) reads_runtime_[i] = reads_runtime_[x->a()] || reads_runtime_[x->b()];
    }
    return Status::Ok();
  }

  // A run-time guard reads a run-time dim (one that reads none belongs to the prologue).
  Status RuntimeGuards() const {
    for (uint32_t g = 0; g < Size(e_.runtime_guards()); ++g) {
      const int32_t expr = e_.runtime_guards()->Get(g)->expr();
      const std::string where = where_ + " run-time guard " + to_string(g);
      KILN_RETURN_IF_ERROR(ExprRef(expr, where + ":"));
      if (!reads_runtime_[static_cast<size_t>(expr)]) return DataLoss(where + ": expr " + to_string(expr) + " reads no run-time dim");
    }
    return Status::Ok();
  }

  // The arena's size and its tensors' offsets do not move when a run-time dim is set mid-run.
  Status NoRuntimeDim(int32_t expr, const std::string& what) const {
    if (!reads_runtime_[static_cast<size_t>(expr)]) return Status::Ok();
    return DataLoss(what + " expr " + to_string(expr) + " reads a run-time dim");
  }

  // An input's value checks (value symbols): an int32, int64, bool or floating-point input with
  // constant dims whose element count is the number of checks, at most kMaxValueElements, each a
  // constant or a symbol with a nonempty range (floating-point: float32 only, bound to its bits).
  static constexpr uint32_t kMaxValueElements = 64;
  Status ValueChecks(const fb::InputCheck& in, const std::string& where, std::vector<bool>& bound) const {
    const uint32_t n = Size(in.values());
    if (n == 0) return Status::Ok();
    const DType dt = static_cast<DType>(in.dtype());
    const bool floating = dt == DType::kFloat16 || dt == DType::kBFloat16 || dt == DType::kFloat32 || dt == DType::kFloat64;
    if (dt != DType::kInt32 && dt != DType::kInt64 && dt != DType::kBool && !floating)
      return DataLoss(where + ": its " + to_string(n) + " elements are checked, but its dtype is " +
                      std::string(DTypeName(dt)) + ", not int32, int64, bool or floating-point");
    if (n > kMaxValueElements)
      return DataLoss(where + ": " + to_string(n) + " elements checked, over the limit of " +
                      to_string(kMaxValueElements));
    uint64_t elements = 1;
    for (uint32_t d = 0; d < Size(in.dims()); ++d) {
      const fb::DimCheck* c = in.dims()->Get(d);
      if (c->symbol() >= 0) return DataLoss(where + " dim " + to_string(d) + ": symbolic, but its elements are checked");
      elements *= static_cast<uint64_t>(c->value());
      if (elements > kMaxValueElements) break;
    }
    if (elements != n)
      return DataLoss(where + ": " + to_string(n) + " elements checked, but its dims hold " +
                      (elements > kMaxValueElements ? "more" : to_string(elements)));
    for (uint32_t k = 0; k < n; ++k) {
      const fb::DimCheck* c = in.values()->Get(k);
      const std::string ew = where + " element " + to_string(k);
      if (c->symbol() < 0) continue;
      // A floating-point element is compared bit for bit with a constant; only a float32 one may
      // bind a symbol (to its bits, read by FloorMulF32).
      if (floating && dt != DType::kFloat32)
        return DataLoss(ew + ": a " + std::string(DTypeName(dt)) + " element binds a symbol");
      if (c->symbol() >= static_cast<int64_t>(num_symbols_))
        return DataLoss(ew + ": symbol " + Range(c->symbol(), num_symbols_, "symbols"));
      if (c->divisor() < 1) return DataLoss(ew + ": divisor " + to_string(c->divisor()) + " < 1");
      if (c->min() > c->max())
        return DataLoss(ew + ": empty range [" + to_string(c->min()) + ", " + to_string(c->max()) + "]");
      bound[c->symbol()] = true;
    }
    return Status::Ok();
  }

  Status PrologueChecks() {
    const fb::Prologue* p = e_.prologue();
    const uint32_t n = p ? Size(p->inputs()) : 0;
    if (n != Size(a_.inputs()))
      return DataLoss(where_ + ": prologue checks " + to_string(n) + " inputs, the model has " +
                      to_string(Size(a_.inputs())));
    std::vector<bool> bound(num_symbols_, false);
    for (uint32_t i = 0; i < n; ++i) {
      const fb::InputCheck* in = p->inputs()->Get(i);
      const std::string where = where_ + " prologue input " + to_string(i) + Named(in->name());
      KILN_RETURN_IF_ERROR(CheckDType(in->dtype(), where));
      if (Size(in->dims()) > static_cast<uint32_t>(kMaxRank))
        return DataLoss(where + ": rank " + to_string(Size(in->dims())) + " exceeds " +
                        to_string(kMaxRank));
      for (uint32_t d = 0; d < Size(in->dims()); ++d) {
        const fb::DimCheck* c = in->dims()->Get(d);
        const std::string dw = where + " dim " + to_string(d);
        if (c->symbol() < 0) {
          if (c->value() < 0) return DataLoss(dw + ": constant " + to_string(c->value()) + " is negative");
          continue;
        }
        if (c->symbol() >= static_cast<int64_t>(num_symbols_))
          return DataLoss(dw + ": symbol " + Range(c->symbol(), num_symbols_, "symbols"));
        if (c->divisor() < 1) return DataLoss(dw + ": divisor " + to_string(c->divisor()) + " < 1");
        if (c->min() > c->max())
          return DataLoss(dw + ": empty range [" + to_string(c->min()) + ", " + to_string(c->max()) + "]");
        if (c->min() < 0)
          return DataLoss(dw + ": range [" + to_string(c->min()) + ", " + to_string(c->max()) + "] admits negative dims");
        bound[c->symbol()] = true;
      }
      KILN_RETURN_IF_ERROR(ValueChecks(*in, where, bound));
    }
    for (uint32_t s = 0; s < num_symbols_; ++s)
      if (bound[s] && (runtime_symbol_[s] || room_symbol_[s]))
        return DataLoss(where_ + ": symbol " + to_string(s) + Named(e_.symbols()->Get(s)) + " is a " +
                        (runtime_symbol_[s] ? "run-time dim" : "room") + ", but an input binds it");
    // The exprs the prologue evaluates (up to the last guard or run-time dim bound) read no
    // run-time dim: it is not known then.
    int64_t prologue_exprs = 0;
    for (uint32_t g = 0; p && g < Size(p->guards()); ++g) {
      KILN_RETURN_IF_ERROR(ExprRef(p->guards()->Get(g)->expr(), where_ + " guard " + to_string(g) + ":"));
      prologue_exprs = std::max<int64_t>(prologue_exprs, p->guards()->Get(g)->expr() + 1);
    }
    for (uint32_t k = 0; k < Size(e_.runtime_dims()); ++k)
      prologue_exprs = std::max<int64_t>(prologue_exprs, e_.runtime_dims()->Get(k)->bound() + 1);
    for (uint32_t i = 0; i < num_exprs_; ++i) {
      const fb::ExprNode* x = e_.exprs()->Get(i);
      if (x->op() != fb::ExprOp::Var) continue;
      if (!bound[x->a()] && !runtime_symbol_[x->a()] && !room_symbol_[x->a()])
        return DataLoss(where_ + " expr " + to_string(i) + ": symbol " + to_string(x->a()) +
                        Named(e_.symbols()->Get(x->a())) + " is not bound by any input dim or element, nor a room");
      if (runtime_symbol_[x->a()] && i < prologue_exprs)
        return DataLoss(where_ + " expr " + to_string(i) + ": the prologue evaluates it, but it reads run-time dim " +
                        to_string(x->a()) + Named(e_.symbols()->Get(x->a())));
    }
    return Status::Ok();
  }

  std::vector<bool> runtime_symbol_;  // per symbol: set by an instruction (Entry.runtime_dims)
  std::vector<bool> room_symbol_;     // per symbol: set by the runtime (Entry.rooms)
  std::vector<bool> reads_runtime_;   // per expr: reads a run-time dim

  Status Tensors() {
    for (uint32_t t = 0; t < num_tensors_; ++t) {
      const fb::Tensor* x = e_.tensors()->Get(t);
      const std::string where = where_ + " tensor " + to_string(t) + Named(x->name());
      const int storage = static_cast<int>(x->storage());
      if (storage < 0 || storage > static_cast<int>(fb::Storage::Symbolic))
        return DataLoss(where + ": invalid storage kind " + to_string(storage));
      if (x->storage() == fb::Storage::Absent) continue;
      KILN_RETURN_IF_ERROR(CheckDType(x->dtype(), where));
      for (uint32_t d = 0; d < Size(x->shape()); ++d)
        KILN_RETURN_IF_ERROR(ExprRef(x->shape()->Get(d), where + ": shape"));
      switch (x->storage()) {
        case fb::Storage::Input:
          if (x->index() < 0 || x->index() >= Size(a_.inputs()))
            return DataLoss(where + ": input " + Range(x->index(), Size(a_.inputs()), "inputs"));
          break;
        case fb::Storage::Weight: {
          if (x->index() < 0 || x->index() >= Size(a_.weights()))
            return DataLoss(where + ": weight " + Range(x->index(), Size(a_.weights()), "weights"));
          const int32_t wd = a_.weights()->Get(static_cast<uint32_t>(x->index()))->dtype();
          if (wd != x->dtype())
            return DataLoss(where + ": dtype " + std::string(DTypeName(static_cast<DType>(x->dtype()))) +
                            " but weight " + to_string(x->index()) + " is " +
                            std::string(DTypeName(static_cast<DType>(wd))));
          break;
        }
        case fb::Storage::Arena:
          KILN_RETURN_IF_ERROR(ExprRef(x->offset(), where + ": offset"));
          KILN_RETURN_IF_ERROR(NoRuntimeDim(x->offset(), where + ": offset"));
          break;
        case fb::Storage::Symbolic:
          if (x->dtype() != static_cast<int32_t>(DType::kInt64) &&
              x->dtype() != static_cast<int32_t>(DType::kInt32))
            return DataLoss(where + ": symbolic tensor of dtype " +
                            std::string(DTypeName(static_cast<DType>(x->dtype()))) +
                            ", expected int64 or int32");
          for (uint32_t v = 0; v < Size(x->values()); ++v)
            KILN_RETURN_IF_ERROR(ExprRef(x->values()->Get(v), where + ": value"));
          break;
        default: break;
      }
    }
    return Status::Ok();
  }

  Status Instructions() {
    for (uint32_t i = 0; i < Size(e_.instructions()); ++i) {
      const fb::Instruction* ins = e_.instructions()->Get(i);
      const std::string where = where_ + " instruction " + to_string(i) + Named(ins->name());
      for (uint32_t k = 0; k < Size(ins->inputs()); ++k) {
        const int32_t t = ins->inputs()->Get(k);
        if (t < -1 || t >= static_cast<int64_t>(num_tensors_))
          return DataLoss(where + ": input " + to_string(k) + " tensor " + Range(t, num_tensors_, "tensors"));
      }
      for (uint32_t k = 0; k < Size(ins->outputs()); ++k) {
        const int32_t t = ins->outputs()->Get(k);
        if (t < 0 || t >= static_cast<int64_t>(num_tensors_))
          return DataLoss(where + ": output " + to_string(k) + " tensor " + Range(t, num_tensors_, "tensors"));
        if (e_.tensors()->Get(t)->storage() != fb::Storage::Arena)
          return DataLoss(where + ": output " + to_string(k) + " tensor " + to_string(t) +
                          " is not in the arena");
      }
      for (uint32_t k = 0; k < Size(ins->when()); ++k) {
        const int32_t t = ins->when()->Get(k)->tensor();
        if (t < 0 || t >= static_cast<int64_t>(num_tensors_))
          return DataLoss(where + ": predicate " + to_string(k) + " tensor " + Range(t, num_tensors_, "tensors"));
        const fb::Tensor* x = e_.tensors()->Get(t);
        if (x->dtype() != static_cast<int32_t>(DType::kBool))
          return DataLoss(where + ": predicate " + to_string(k) + " tensor " + to_string(t) + " is " +
                          std::string(DTypeName(static_cast<DType>(x->dtype()))) + ", not bool");
        if (x->storage() != fb::Storage::Arena && x->storage() != fb::Storage::Input)
          return DataLoss(where + ": predicate " + to_string(k) + " tensor " + to_string(t) +
                          " is neither in the arena nor an input");
      }
      KILN_RETURN_IF_ERROR(Kernel(*ins, where));
      for (uint32_t k = 0; k < Size(ins->placements()); ++k) {
        const fb::Placement* p = ins->placements()->Get(k);
        if (p->backend() == nullptr || p->library() == nullptr || !ParseLibrary(p->library()->string_view()))
          return DataLoss(where + ": placement " + to_string(k) + " names no backend or no library known to this "
                          "runtime (kiln/library.h)" + (p->library() ? ": '" + p->library()->str() + "'" : std::string()));
      }
      for (uint32_t k = 0; k < Size(ins->attrs()); ++k) {
        const int kind = static_cast<int>(ins->attrs()->Get(k)->kind());
        if (kind < 0 || kind > static_cast<int>(fb::AttrKind::Floats))
          return DataLoss(where + ": attribute '" + ins->attrs()->Get(k)->name()->str() +
                          "' has invalid kind " + to_string(kind));
      }
    }
    return Status::Ok();
  }

  // An instruction's operand counts, and its required inputs present, as its op's schema says.
  static Status Operands(const fb::Instruction& ins, const Arity& a, const std::string& where) {
    const auto count = [](uint32_t n, uint8_t lo, uint8_t hi) {
      return n >= lo && (hi == Arity::kUnbounded || n <= hi);
    };
    const auto expected = [](uint8_t lo, uint8_t hi) {
      return hi == Arity::kUnbounded ? "at least " + to_string(lo)
             : lo == hi                  ? to_string(lo)
                                         : to_string(lo) + " to " + to_string(hi);
    };
    const std::string op = "op '" + ins.op()->str() + "'";
    // Trailing absent inputs past the last present one count as not given (kernels never read
    // an absent input), so the count is up to the last present input.
    uint32_t num_inputs = Size(ins.inputs());
    const uint32_t num_outputs = Size(ins.outputs());
    while (num_inputs > a.min_inputs && ins.inputs()->Get(num_inputs - 1) < 0) --num_inputs;
    if (!count(num_inputs, a.min_inputs, a.max_inputs))
      return DataLoss(where + ": " + op + " takes " + expected(a.min_inputs, a.max_inputs) + " inputs, found " +
                      to_string(num_inputs));
    if (!count(num_outputs, a.min_outputs, a.max_outputs))
      return DataLoss(where + ": " + op + " has " + expected(a.min_outputs, a.max_outputs) + " outputs, found " +
                      to_string(num_outputs));
    for (uint32_t k = 0; k < Size(ins.inputs()); ++k) {
      if (ins.inputs()->Get(k) < 0 && a.Required(k))
        return DataLoss(where + ": " + op + " input " + to_string(k) + " is required but absent");
    }
    return Status::Ok();
  }

  // A fused instruction names a kernel whose program matches its operands; any other
  // instruction needs a CPU kernel for its op.
  Status Kernel(const fb::Instruction& ins, const std::string& where) const {
    const uint32_t num_kernels = Size(a_.kernels());
    if (ins.kernel() < 0) {
      if (Size(ins.sizes()) != 0) return DataLoss(where + ": size arguments without a kernel");
      // A run-time Loop's control is the executor's (runtime/executor/loop.h), not a kernel.
      const std::string_view op = ins.op()->string_view();
      if ((op == "kiln.LoopBegin" || op == "kiln.LoopEnd") && !cpu::KeepsLoopControl())
        return Unimplemented(where + " op '" + ins.op()->str() + "', a run-time Loop's control, is not in this "
                             "selective runtime (its op list names no kiln.LoopBegin and kiln.LoopEnd)");
      if (op == "kiln.LoopBegin") return Operands(ins, loop::kBeginArity, where);
      if (op == "kiln.LoopEnd") return Operands(ins, loop::kEndArity, where);
      const cpu::KernelDef* k = cpu::FindKernel(op);
      if (k == nullptr)
        return Unimplemented(where + " op '" + ins.op()->str() + "' has no CPU kernel in this runtime");
      return Operands(ins, k->arity, where);
    }
    if (ins.kernel() >= static_cast<int64_t>(num_kernels))
      return DataLoss(where + ": kernel " + Range(ins.kernel(), num_kernels, "kernels"));
    if (ins.op()->string_view() != "kiln.Fused")
      return DataLoss(where + ": op '" + ins.op()->str() + "' names kernel " + to_string(ins.kernel()) +
                      "; only kiln.Fused instructions run kernels");
    const fb::Program* p = a_.kernels()->Get(ins.kernel())->program();
    if (p == nullptr) return DataLoss(where + ": kernel " + to_string(ins.kernel()) + " has no program");
    if (Size(ins.sizes()) != static_cast<uint32_t>(std::max(0, p->num_sizes())))
      return DataLoss(where + ": " + to_string(Size(ins.sizes())) + " size arguments, its kernel's program takes " +
                      to_string(p->num_sizes()));
    for (uint32_t k = 0; k < Size(ins.sizes()); ++k)
      KILN_RETURN_IF_ERROR(ExprRef(ins.sizes()->Get(k), where + ": size argument " + to_string(k)));
    auto dtypes = [&](const flatbuffers::Vector<int32_t>* ts, uint32_t n, auto spec_at, const char* what) -> Status {
      if (Size(ts) != n)
        return DataLoss(where + ": " + to_string(Size(ts)) + " " + what + "s, its kernel's program has " + to_string(n));
      for (uint32_t k = 0; k < n; ++k) {
        const int32_t t = ts->Get(k);
        const fb::TensorSpec* spec = spec_at(k);
        if (t < 0 || spec == nullptr || e_.tensors()->Get(t)->dtype() != spec->dtype() ||
            Size(e_.tensors()->Get(t)->shape()) != Size(spec->dims()))
          return DataLoss(where + ": " + what + " " + to_string(k) + " does not match its kernel's program (dtype or rank)");
      }
      return Status::Ok();
    };
    KILN_RETURN_IF_ERROR(dtypes(ins.inputs(), Size(p->inputs()), [&](uint32_t k) { return p->inputs()->Get(k); }, "input"));
    return dtypes(ins.outputs(), Size(p->outputs()),
                  [&](uint32_t k) { return p->outputs()->Get(k)->tensor(); }, "output");
  }

  // An input tensor's dim is what its prologue check makes it: the checked constant, or the
  // symbol it binds.
  Status InputDim(const fb::DimCheck& c, int32_t expr, const std::string& where) const {
    const fb::ExprNode* x = e_.exprs()->Get(static_cast<uint32_t>(expr));
    if (c.symbol() < 0 ? x->op() == fb::ExprOp::Const && x->a() == c.value()
                       : x->op() == fb::ExprOp::Var && x->a() == c.symbol())
      return Status::Ok();
    const std::string checked = c.symbol() < 0 ? "the constant " + to_string(c.value())
                                               : "symbol " + to_string(c.symbol()) + Named(e_.symbols()->Get(c.symbol()));
    const std::string found = x->op() == fb::ExprOp::Const ? "the constant " + to_string(x->a())
                              : x->op() == fb::ExprOp::Var ? "symbol " + to_string(x->a()) + Named(e_.symbols()->Get(x->a()))
                                                           : "a computed value";
    return DataLoss(where + " is expr " + to_string(expr) + ", " + found + ", but the prologue checks " + checked);
  }

  Status EntryIo() {
    const fb::Prologue* p = e_.prologue();
    if (Size(e_.inputs()) != Size(a_.inputs()))
      return DataLoss(where_ + ": " + to_string(Size(e_.inputs())) + " input tensors, the model has " +
                      to_string(Size(a_.inputs())) + " inputs");
    for (uint32_t i = 0; i < Size(e_.inputs()); ++i) {
      const int32_t t = e_.inputs()->Get(i);
      const std::string where = where_ + " input " + to_string(i);
      if (t < 0 || t >= static_cast<int64_t>(num_tensors_))
        return DataLoss(where + ": tensor " + Range(t, num_tensors_, "tensors"));
      const fb::Tensor* x = e_.tensors()->Get(t);
      const fb::InputCheck* c = p->inputs()->Get(i);
      if (x->storage() != fb::Storage::Input || x->index() != i)
        return DataLoss(where + ": tensor " + to_string(t) + " is not model input " + to_string(i));
      if (x->dtype() != c->dtype() || Size(x->shape()) != Size(c->dims()))
        return DataLoss(where + ": tensor " + to_string(t) + " dtype/rank differ from its prologue check");
      for (uint32_t d = 0; d < Size(c->dims()); ++d)
        KILN_RETURN_IF_ERROR(InputDim(*c->dims()->Get(d), x->shape()->Get(d), where + ": tensor " +
                                      to_string(t) + Named(x->name()) + " dim " + to_string(d)));
    }
    if (Size(e_.outputs()) != Size(a_.outputs()))
      return DataLoss(where_ + ": " + to_string(Size(e_.outputs())) + " output tensors, the model has " +
                      to_string(Size(a_.outputs())) + " outputs");
    for (uint32_t i = 0; i < Size(e_.outputs()); ++i) {
      const int32_t t = e_.outputs()->Get(i);
      const std::string where = where_ + " output " + to_string(i);
      if (t < 0 || t >= static_cast<int64_t>(num_tensors_))
        return DataLoss(where + ": tensor " + Range(t, num_tensors_, "tensors"));
      const fb::Tensor* x = e_.tensors()->Get(t);
      if (x->storage() != fb::Storage::Arena)
        return DataLoss(where + ": tensor " + to_string(t) + " is not in the arena");
      const fb::IoInfo* io = a_.outputs()->Get(i);
      if (x->dtype() != io->dtype() || Size(x->shape()) != Size(io->dims()))
        return DataLoss(where + ": tensor " + to_string(t) + Named(x->name()) + " is " +
                        std::string(DTypeName(static_cast<DType>(x->dtype()))) + " of rank " +
                        to_string(Size(x->shape())) + ", the model's output" + Named(io->name()) + " " +
                        std::string(DTypeName(static_cast<DType>(io->dtype()))) + " of rank " +
                        to_string(Size(io->dims())));
      if (Size(x->shape()) > static_cast<uint32_t>(kMaxRank))
        return Unimplemented(where + ": rank " + to_string(Size(x->shape())) +
                             " exceeds the " + to_string(kMaxRank) + " a TensorView holds");
    }
    return Status::Ok();
  }

  const fb::Artifact& a_;
  const fb::Entry& e_;
  std::string where_;
  uint32_t num_exprs_ = 0, num_symbols_ = 0, num_tensors_ = 0;
};

}  // namespace

Status VerifyArtifact(const fb::Artifact& a, uint64_t weights_size) {
  if (Size(a.entries()) == 0) return DataLoss("artifact has no entries");
  KILN_RETURN_IF_ERROR(VerifyAlignment(a));
  KILN_RETURN_IF_ERROR(VerifyIo(a.inputs(), "input"));
  KILN_RETURN_IF_ERROR(VerifyIo(a.outputs(), "output"));
  KILN_RETURN_IF_ERROR(VerifyWeights(a, weights_size));
  if (a.precision() && a.precision()->size()) {
    const std::string p = a.precision()->str();
    if (p != "fp32" && p != "fp16" && p != "bf16")
      return DataLoss("artifact precision '" + p.substr(0, 16) + "': expected fp32, fp16 or bf16");
  }
  for (uint32_t i = 0; i < a.entries()->size(); ++i)
    KILN_RETURN_IF_ERROR(EntryVerifier(a, *a.entries()->Get(i), i).Verify());
  return Status::Ok();
}

}  // namespace kiln
