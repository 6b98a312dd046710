// Model::Load: map or copy the artifact (within LoadOptions::max_artifact_bytes), check the
// file header, run flatbuffers::Verifier, hash the weights, run Kiln's semantic checks
// (verify.cc), then copy everything Run needs into the plain structs of model_impl.h and
// recheck each entry's memory plan (arena_plan.h) and its arena against
// LoadOptions::max_context_bytes. Nothing is trusted before it is checked.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>

#include "kiln/runtime.h"
#include "runtime/artifact_header.h"
#include "runtime/checksum.h"
#include "runtime/cpu/native/dispatch.h"
#include "runtime/cpu/native/load.h"
#include "runtime/backend.h"
#include "runtime/executor/loop_pairs.h"
#include "runtime/executor/segments.h"
#include "runtime/fault_injection.h"
#include "runtime/kernels/selective.h"
#include "runtime/model_impl.h"
#include "runtime/signature_trailer.h"
#include "runtime/verify.h"
#if KILN_WITH_CRYPTO
#include "runtime/signature.h"
#include "runtime/weights_cipher.h"
#endif
#include "schema/kiln_generated.h"

namespace kiln {

std::shared_ptr<const ArtifactBytes> ArtifactBytes::Mapped(void* addr, size_t size) {
  return std::shared_ptr<const ArtifactBytes>(new ArtifactBytes(addr, size, true, false));
}
std::shared_ptr<const ArtifactBytes> ArtifactBytes::Owned(void* addr, size_t size) {
  return std::shared_ptr<const ArtifactBytes>(new ArtifactBytes(addr, size, false, true));
}
std::shared_ptr<const ArtifactBytes> ArtifactBytes::Read(void* addr, size_t size) {
  return std::shared_ptr<const ArtifactBytes>(new ArtifactBytes(addr, size, true, true));
}
ArtifactBytes::~ArtifactBytes() {
  if (mapped_) munmap(addr_, size_);
  else std::free(addr_);
}

namespace {

using std::to_string;

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

template <typename T>
uint32_t Size(const flatbuffers::Vector<T>* v) {
  return v ? v->size() : 0;
}

// [offset, offset + size) inside a file of `file` bytes, without overflow.
bool InFile(uint64_t offset, uint64_t size, uint64_t file) {
  return offset <= file && size <= file - offset;
}

// flatbuffers::Verifier on a FlatBuffer section of `size` bytes (< FLATBUFFERS_MAX_BUFFER_SIZE).
bool IsArtifactFlatBuffer(const uint8_t* fbuf, uint64_t size) {
  flatbuffers::Verifier::Options opts;
  opts.max_tables = 50'000'000;  // big models have many tensors; the depth limit stays
  flatbuffers::Verifier verifier(fbuf, static_cast<size_t>(size), opts);
  return fb::VerifyArtifactBuffer(verifier);
}

// A format version this runtime does not read: an artifact of another format, or a damaged
// header? Every format keeps the header's magic, header size, version and FlatBuffer section
// where version 1 put them, and the FlatBuffer's root Artifact keeps format_version (fields
// are never removed or reused: schema/kiln.fbs), so another format's file has a FlatBuffer
// that verifies and states the same version. Random bytes or a flipped version field do not.
Status UnsupportedVersion(const uint8_t* data, size_t size, const ArtifactHeader& h) {
  const std::string corrupt = "corrupt file header: format version field reads " + to_string(h.format_version) +
                              " (this runtime reads " + to_string(kMinFormatVersion) + ".." +
                              to_string(kFormatVersion) + "), ";
  if (h.header_bytes < sizeof(ArtifactHeader) || h.header_bytes > size || h.flatbuffer_offset < h.header_bytes ||
      !InFile(h.flatbuffer_offset, h.flatbuffer_size, size) || h.flatbuffer_size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return DataLoss(corrupt + "and its header size " + to_string(h.header_bytes) + " or FlatBuffer section [" +
                    to_string(h.flatbuffer_offset) + ", +" + to_string(h.flatbuffer_size) +
                    ") does not fit the file (" + to_string(size) + " bytes)");
  if (h.flatbuffer_offset % 8 != 0 || !IsArtifactFlatBuffer(data + h.flatbuffer_offset, h.flatbuffer_size))
    return DataLoss(corrupt + "and bytes " + to_string(h.flatbuffer_offset) + ".." +
                    to_string(h.flatbuffer_offset + h.flatbuffer_size) + " are not a Kiln FlatBuffer");
  const uint32_t stated = fb::GetArtifact(data + h.flatbuffer_offset)->format_version();
  if (stated != h.format_version)
    return DataLoss(corrupt + "but the FlatBuffer says format version " + to_string(stated));
  return Incompatible("artifact format version " + to_string(h.format_version) + " is " +
                      (h.format_version > kFormatVersion ? "newer" : "older") + " than this runtime supports (" +
                      to_string(kMinFormatVersion) + ".." + to_string(kFormatVersion) + ")");
}

Status CheckHeader(const uint8_t* data, size_t size, ArtifactHeader* h) {
  if (size < sizeof(ArtifactHeader))
    return DataLoss("artifact is " + to_string(size) + " bytes, smaller than the " +
                    to_string(sizeof(ArtifactHeader)) + "-byte file header (truncated?)");
  std::memcpy(h, data, sizeof *h);
  if (std::memcmp(h->magic, kArtifactMagic, sizeof kArtifactMagic) != 0)
    return DataLoss("not a .kiln artifact: bad magic at file offset 0 (expected \"KILNART\\0\")");
  if (h->format_version < kMinFormatVersion || h->format_version > kFormatVersion)
    return UnsupportedVersion(data, size, *h);
  if (h->header_bytes < sizeof(ArtifactHeader) || h->header_bytes > size)
    return DataLoss("file header size " + to_string(h->header_bytes) + " is invalid (file: " +
                    to_string(size) + " bytes)");
  if (h->flatbuffer_offset < h->header_bytes || !InFile(h->flatbuffer_offset, h->flatbuffer_size, size))
    return DataLoss("FlatBuffer section [" + to_string(h->flatbuffer_offset) + ", +" +
                    to_string(h->flatbuffer_size) + ") lies outside the file (" + to_string(size) +
                    " bytes; truncated?)");
  // The FlatBuffer's 8-byte fields are aligned relative to its start, which the writer puts
  // on 8 bytes; elsewhere every read of them would be a misaligned load.
  if (h->flatbuffer_offset % 8 != 0)
    return DataLoss("FlatBuffer section at file offset " + to_string(h->flatbuffer_offset) +
                    " is not 8-byte aligned");
  if (!InFile(h->weights_offset, h->weights_size, size))
    return DataLoss("weights section [" + to_string(h->weights_offset) + ", +" +
                    to_string(h->weights_size) + ") lies outside the file (" + to_string(size) +
                    " bytes; truncated?)");
  if (h->weights_size > 0 && h->weights_offset < h->flatbuffer_offset + h->flatbuffer_size)
    return DataLoss("weights section at file offset " + to_string(h->weights_offset) +
                    " overlaps the FlatBuffer, which ends at " +
                    to_string(h->flatbuffer_offset + h->flatbuffer_size));
  if (h->weights_offset % kWeightsAlignment != 0)
    return DataLoss("weights section at file offset " + to_string(h->weights_offset) +
                    " is not a multiple of " + to_string(kWeightsAlignment));
  return Status::Ok();
}

Status CheckFlatBuffer(const uint8_t* data, const ArtifactHeader& h, const fb::Artifact** out) {
  const std::string range = "(bytes " + to_string(h.flatbuffer_offset) + ".." +
                            to_string(h.flatbuffer_offset + h.flatbuffer_size) + ")";
  if (h.flatbuffer_size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return DataLoss("artifact FlatBuffer is too large " + range);
  const uint8_t* fbuf = data + h.flatbuffer_offset;
  // The Verifier proves the FlatBuffer is safe to read, not that it is the one the compiler
  // wrote: a flipped byte in a dim or an offset would still verify and compute garbage.
  const uint64_t got = ArtifactChecksum(h.format_version, fbuf, static_cast<size_t>(h.flatbuffer_size));
  if (got != h.flatbuffer_checksum)
    return DataLoss("FlatBuffer checksum mismatch: header says " + Hex(h.flatbuffer_checksum) + ", section hashes to " +
                    Hex(got) + " " + range);
  if (!IsArtifactFlatBuffer(fbuf, h.flatbuffer_size))
    return DataLoss("artifact FlatBuffer failed verification " + range);
  const fb::Artifact* a = fb::GetArtifact(fbuf);
  if (a->format_version() != h.format_version)
    return DataLoss("FlatBuffer format_version " + to_string(a->format_version()) +
                    " differs from the file header's " + to_string(h.format_version));
  *out = a;
  return Status::Ok();
}

Status CheckWeights(const uint8_t* data, const ArtifactHeader& h) {
  const uint64_t got = ArtifactChecksum(h.format_version, data + h.weights_offset, static_cast<size_t>(h.weights_size));
  if (got == h.weights_checksum) return Status::Ok();
  return DataLoss("weights checksum mismatch: header says " + Hex(h.weights_checksum) +
                  ", blob hashes to " + Hex(got) + " (weights section at file offset " +
                  to_string(h.weights_offset) + ", " + to_string(h.weights_size) + " bytes)");
}

std::vector<TensorInfo> IoInfos(const flatbuffers::Vector<flatbuffers::Offset<fb::IoInfo>>* ios) {
  std::vector<TensorInfo> out;
  for (uint32_t i = 0; i < Size(ios); ++i) {
    const fb::IoInfo* io = ios->Get(i);
    TensorInfo t;
    t.name = Str(io->name());
    t.dtype = static_cast<DType>(io->dtype());
    for (uint32_t d = 0; d < Size(io->dims()); ++d) {
      DimInfo dim;
      dim.value = io->dims()->Get(d);
      if (d < Size(io->symbols())) dim.symbol = Str(io->symbols()->Get(d));
      if (!dim.symbol.empty()) dim.value = -1;
      t.shape.push_back(std::move(dim));
    }
    out.push_back(std::move(t));
  }
  return out;
}

Prologue BuildPrologue(const fb::Entry& e) {
  Prologue p;
  for (uint32_t s = 0; s < Size(e.symbols()); ++s) p.symbols.push_back(Str(e.symbols()->Get(s)));
  // The verifier checked that the exprs up to the last bound read no run-time dim.
  for (uint32_t k = 0; k < Size(e.runtime_dims()); ++k) {
    const fb::RuntimeDim* d = e.runtime_dims()->Get(k);
    p.bounds.push_back({d->bound(), d->symbol()});
    p.guard_exprs = std::max(p.guard_exprs, d->bound() + 1);
  }
  const fb::Prologue* fp = e.prologue();
  if (fp == nullptr) return p;
  for (uint32_t i = 0; i < Size(fp->inputs()); ++i) {
    const fb::InputCheck* c = fp->inputs()->Get(i);
    PrologueInput in;
    in.name = Str(c->name());
    in.dtype = static_cast<DType>(c->dtype());
    for (uint32_t d = 0; d < Size(c->dims()); ++d) {
      const fb::DimCheck* fd = c->dims()->Get(d);
      in.dims.push_back({fd->symbol(), fd->value(), fd->min(), fd->max(), fd->divisor()});
    }
    for (uint32_t k = 0; k < Size(c->values()); ++k) {
      const fb::DimCheck* fv = c->values()->Get(k);
      in.values.push_back({fv->symbol(), fv->value(), fv->min(), fv->max(), fv->divisor()});
    }
    p.inputs.push_back(std::move(in));
  }
  for (uint32_t g = 0; g < Size(fp->guards()); ++g) {
    const fb::Guard* fg = fp->guards()->Get(g);
    p.guards.push_back({fg->expr(), Str(fg->text())});
    p.guard_exprs = std::max(p.guard_exprs, fg->expr() + 1);
  }
  return p;
}

AttrMap BuildAttrs(const fb::Instruction& ins) {
  AttrMap m;
  for (uint32_t k = 0; k < Size(ins.attrs()); ++k) {
    const fb::Attr* a = ins.attrs()->Get(k);
    std::string name = a->name()->str();
    switch (a->kind()) {
      case fb::AttrKind::Int: m.SetInt(std::move(name), a->i()); break;
      case fb::AttrKind::Float: m.SetFloat(std::move(name), a->f()); break;
      case fb::AttrKind::String: m.SetString(std::move(name), Str(a->s())); break;
      case fb::AttrKind::Ints:
        m.SetInts(std::move(name), a->ints() ? std::vector<int64_t>(a->ints()->begin(), a->ints()->end())
                                             : std::vector<int64_t>());
        break;
      case fb::AttrKind::Floats:
        m.SetFloats(std::move(name), a->floats() ? std::vector<float>(a->floats()->begin(), a->floats()->end())
                                                 : std::vector<float>());
        break;
    }
  }
  return m;
}

void BuildTensors(const fb::Entry& e, PreparedEntry& pe) {
  for (uint32_t t = 0; t < Size(e.tensors()); ++t) {
    const fb::Tensor* x = e.tensors()->Get(t);
    PreparedTensor pt;
    pt.name = Str(x->name());
    pt.dtype = static_cast<DType>(x->dtype());
    pt.storage = static_cast<StorageKind>(x->storage());
    pt.index = x->index();
    pt.dims_begin = static_cast<int32_t>(pe.dim_exprs.size());
    if (pt.storage != StorageKind::kAbsent) {
      pt.rank = static_cast<int32_t>(Size(x->shape()));
      for (uint32_t d = 0; d < Size(x->shape()); ++d) pe.dim_exprs.push_back(x->shape()->Get(d));
    }
    if (pt.storage == StorageKind::kArena) pt.offset_expr = x->offset();
    if (pt.storage == StorageKind::kSymbolic) {
      pt.values_begin = static_cast<int32_t>(pe.value_exprs.size());
      pt.num_values = static_cast<int32_t>(Size(x->values()));
      for (uint32_t v = 0; v < Size(x->values()); ++v) pe.value_exprs.push_back(x->values()->Get(v));
    }
    pe.tensors.push_back(std::move(pt));
  }
  pe.num_symbolic_values = static_cast<int32_t>(pe.value_exprs.size());
}

// What runs instruction `ins` on every registered backend: the placements the artifact records
// (verified), for a file written before them its `executor` as the CUDA one, and for any other
// backend its claims.
std::vector<InstructionPlacement> Placements(const fb::Instruction& ins) {
  std::vector<InstructionPlacement> out;
  for (uint32_t k = 0; k < Size(ins.placements()); ++k) {
    const fb::Placement* p = ins.placements()->Get(k);
    out.push_back({Str(p->backend()), ParseLibrary(p->library()->string_view()).value_or(Library::kCpuKernel)});
  }
  const std::string_view op = ins.op()->string_view();
  for (const BackendRegistration& r : RegisteredBackends()) {
    if (std::any_of(out.begin(), out.end(), [&](const InstructionPlacement& p) { return p.backend == r.name; })) continue;
    Library library = ClaimOn(r, op, ins.kernel() >= 0).library;
    if (std::string_view(r.name) == "cuda" && ins.executor() != nullptr)
      if (const auto recorded = ParseLibrary(ins.executor()->string_view())) library = *recorded;
    out.push_back({r.name, library});
  }
  return out;
}

void BuildInstructions(const fb::Entry& e, const Model::Impl& impl, PreparedEntry& pe) {
  for (uint32_t i = 0; i < Size(e.instructions()); ++i) {
    const fb::Instruction* ins = e.instructions()->Get(i);
    PreparedInstruction pi;
    if (ins->kernel() >= 0) {
      pi.program = &impl.programs[ins->kernel()];
      if (impl.native && pi.program->inputs.size() <= native::kMaxOperands &&
          pi.program->outputs.size() <= native::kMaxOperands)
        pi.native = impl.native->kernel(static_cast<uint32_t>(ins->kernel()));
      pi.sizes_begin = static_cast<int32_t>(pe.size_exprs.size());
      pi.num_sizes = static_cast<int32_t>(Size(ins->sizes()));
      for (uint32_t k = 0; k < Size(ins->sizes()); ++k) pe.size_exprs.push_back(ins->sizes()->Get(k));
    } else if (ins->op()->string_view() == "kiln.LoopBegin") {
      pi.control = Control::kLoopBegin;
    } else if (ins->op()->string_view() == "kiln.LoopEnd") {
      pi.control = Control::kLoopEnd;
    } else {
      pi.kernel = cpu::FindKernel(ins->op()->string_view());
    }
    pi.attrs = BuildAttrs(*ins);
    pi.operands_begin = static_cast<int32_t>(pe.operands.size());
    pi.num_inputs = static_cast<int32_t>(Size(ins->inputs()));
    pi.num_outputs = static_cast<int32_t>(Size(ins->outputs()));
    for (uint32_t k = 0; k < Size(ins->inputs()); ++k) pe.operands.push_back(ins->inputs()->Get(k));
    for (uint32_t k = 0; k < Size(ins->outputs()); ++k) pe.operands.push_back(ins->outputs()->Get(k));
    pi.label = "instruction " + to_string(i);
    if (ins->name() && ins->name()->size()) pi.label += " '" + ins->name()->str() + "'";
    pi.label += " (" + ins->op()->str() + ")";
    pi.placements = Placements(*ins);
    for (uint32_t k = 0; k < Size(ins->when()); ++k)
      pi.when.push_back({ins->when()->Get(k)->tensor(), ins->when()->Get(k)->value()});
    if (!pi.when.empty()) pe.has_predicates = true;
    pe.instructions.push_back(std::move(pi));
  }
  // The dims of the tensors only a branch of a run-time If writes: for a call whose branch
  // does not run they may evaluate below 0 (a Conv's extent, whose guard only that branch
  // checks, when it runs), and such a tensor is laid out empty (ExecutionContext's Bind).
  for (const PreparedInstruction& pi : pe.instructions) {
    if (pi.when.empty()) continue;
    for (int32_t k = 0; k < pi.num_outputs; ++k) {
      const int32_t t = pe.operands[static_cast<size_t>(pi.operands_begin + pi.num_inputs + k)];
      if (t < 0) continue;
      const PreparedTensor& pt = pe.tensors[static_cast<size_t>(t)];
      for (int32_t d = 0; d < pt.rank; ++d) pe.branch_dims.push_back(pt.dims_begin + d);
    }
  }
}

// Copies a kernel's program out of the FlatBuffer. Structure is checked afterwards by
// fused::Validate; here only what the copy itself needs (present tables, sane enums).
Result<fused::Program> ReadProgram(const fb::Program& fp) {
  fused::Program p;
  auto spec = [](const fb::TensorSpec* t, fused::TensorSpec* out) {
    if (t == nullptr) return false;
    out->dtype = static_cast<DType>(t->dtype());
    if (!IsValidDType(t->dtype())) out->dtype = DType::kUndefined;
    for (uint32_t d = 0; d < Size(t->dims()); ++d) out->dims.push_back(t->dims()->Get(d));
    return true;
  };
  for (uint32_t d = 0; d < Size(fp.domain()); ++d) p.domain.push_back(fp.domain()->Get(d));
  p.reduce_axes = fp.reduce_axes();
  p.num_sizes = fp.num_sizes();
  for (uint32_t i = 0; i < Size(fp.inputs()); ++i) {
    p.inputs.emplace_back();
    if (!spec(fp.inputs()->Get(i), &p.inputs.back())) return DataLoss("program input " + to_string(i) + " has no spec");
  }
  for (uint32_t i = 0; i < Size(fp.outputs()); ++i) {
    const fb::ProgramOutput* o = fp.outputs()->Get(i);
    fused::Output out;
    if (!spec(o->tensor(), &out.tensor)) return DataLoss("program output " + to_string(i) + " has no spec");
    out.value = o->value();
    out.per_row = o->per_row();
    p.outputs.push_back(std::move(out));
  }
  for (uint32_t i = 0; i < Size(fp.nodes()); ++i) {
    const fb::ProgramNode* n = fp.nodes()->Get(i);
    if (n->op() >= fused::kNumOps || n->type() > static_cast<uint8_t>(fused::ScalarType::kF64))
      return DataLoss("program node " + to_string(i) + ": invalid op " + to_string(n->op()) + " or type " +
                      to_string(n->type()));
    p.nodes.push_back({static_cast<fused::Op>(n->op()), static_cast<fused::ScalarType>(n->type()), n->a(), n->b(),
                       n->c(), n->i(), n->f()});
  }
  for (uint32_t i = 0; i < Size(fp.reductions()); ++i) {
    const fb::ProgramReduction* r = fp.reductions()->Get(i);
    if (r->op() > static_cast<uint8_t>(fused::ReduceOp::kMin))
      return DataLoss("program reduction " + to_string(i) + ": invalid op " + to_string(r->op()));
    p.reductions.push_back({static_cast<fused::ReduceOp>(r->op()), r->value()});
  }
  for (uint32_t i = 0; i < Size(fp.checks()); ++i) p.checks.push_back(Str(fp.checks()->Get(i)));
  return p;
}

Result<PreparedKernel> BuildLaunch(const fb::Kernel& k, uint32_t index) {
  PreparedKernel pk;
  pk.name = Str(k.name());
  const std::string where = "kernel " + to_string(index) + " '" + pk.name + "'";
  if (const fb::Launch* l = k.launch()) {
    pk.launch_kind = static_cast<int>(l->kind());
    pk.block = l->block();
    pk.vector = l->vector();
  }
  if (pk.launch_kind < 0 || pk.launch_kind > 1 || pk.block < 1 || pk.block > 1024 || pk.vector < 1 || pk.vector > 16)
    return DataLoss(where + ": launch rule (kind " + to_string(pk.launch_kind) + ", block " + to_string(pk.block) +
                    ", vector " + to_string(pk.vector) + ") out of range");
  if (pk.launch_kind == 1 && pk.block % 32 != 0)
    return DataLoss(where + ": a row-reduction block of " + to_string(pk.block) + " threads is not a multiple of 32");
  for (uint32_t i = 0; i < Size(k.images()); ++i) {
    const fb::KernelImage* im = k.images()->Get(i);
    PreparedImage p{Str(im->arch()), im->ptx(), im->data() ? im->data()->data() : nullptr, Size(im->data())};
    if (p.size == 0) return DataLoss(where + ": image " + to_string(i) + " (" + p.arch + ") is empty");
    if (p.ptx && p.data[p.size - 1] != 0)
      return DataLoss(where + ": PTX image " + to_string(i) + " (" + p.arch + ") is not NUL-terminated");
    pk.images.push_back(std::move(p));
  }
  return pk;
}

// `text` false leaves out the source and the printed program (ParseFor::kPreflight).
KernelInfo BuildKernelInfo(const fb::Kernel& k, const fused::Program& p, bool text) {
  KernelInfo info;
  info.name = Str(k.name());
  for (uint32_t i = 0; i < Size(k.images()); ++i) {
    const fb::KernelImage* im = k.images()->Get(i);
    info.archs.push_back(Str(im->arch()));
    info.image_bytes.push_back(Size(im->data()));
  }
  if (text) info.source = Str(k.source());
#if !KILN_SELECTIVE
  // A selective runtime (cmake/selective.cmake) leaves the printed program and the launch rule,
  // which only tools read, empty: the printer is about 3 KB of its code.
  if (text) info.program = fused::Print(p);
  if (const fb::Launch* l = k.launch()) {
    info.launch = std::string(l->kind() == fb::LaunchKind::RowReduction ? "row reduction" : "elementwise") +
                  ", block " + to_string(l->block()) + (l->vector() > 1 ? ", vector " + to_string(l->vector()) : "") +
                  ", " + to_string(l->index_bits()) + "-bit indices";
  }
#endif
  info.bytes_moved = k.bytes_moved();
  return info;
}

// The value of expr `index` when it does not depend on the symbols (nothing when it does, or
// when evaluating it fails).
std::optional<int64_t> ConstantExpr(const std::vector<Expr>& exprs, int32_t index) {
  const size_t n = static_cast<size_t>(index) + 1;
  std::vector<bool> uses_var(n, false);
  std::vector<Expr> prefix(exprs.begin(), exprs.begin() + n);
  for (size_t i = 0; i < n; ++i) {
    const Expr& x = prefix[i];
    if (x.op == ExprOp::kVar) {
      uses_var[i] = true;
      prefix[i] = {ExprOp::kConst, 1, 0};  // any value: only nodes without symbols are read
    } else if (x.op != ExprOp::kConst) {
      uses_var[i] = uses_var[x.a] || uses_var[x.b];
    }
  }
  std::vector<int64_t> values(n);
  ExprFailure why;
  if (uses_var[n - 1] || !EvalExprs(prefix, {}, values.data(), &why)) return std::nullopt;
  return values[n - 1];
}

// The arena size as text: a number when it does not depend on the symbols.
std::string ArenaText(const PreparedEntry& pe) {
  const std::optional<int64_t> bytes = ConstantExpr(pe.exprs, pe.arena_expr);
  return bytes ? to_string(*bytes) : PrintExpr(pe.exprs, pe.arena_expr, pe.prologue.symbols);
}

// `text` false leaves out the stage traces (ParseFor::kPreflight).
void BuildEntry(const fb::Entry& e, uint32_t index, const Model::Impl& impl, PreparedEntry& pe, EntryInfo& info,
                bool text) {
  pe.name = Str(e.name());
  pe.backend = Str(e.backend());
  pe.label = "entry " + to_string(index) + " (" + pe.name + (pe.backend.empty() ? "" : ", " + pe.backend + " plan") + ")";
  pe.prologue = BuildPrologue(e);
  for (uint32_t i = 0; i < Size(e.exprs()); ++i) {
    const fb::ExprNode* n = e.exprs()->Get(i);
    pe.exprs.push_back({static_cast<ExprOp>(n->op()), n->a(), n->b()});
  }
  BuildTensors(e, pe);
  BuildInstructions(e, impl, pe);
  for (uint32_t i = 0; i < Size(e.inputs()); ++i) pe.inputs.push_back(e.inputs()->Get(i));
  for (uint32_t i = 0; i < Size(e.outputs()); ++i) pe.outputs.push_back(e.outputs()->Get(i));
  pe.arena_expr = e.arena_bytes();
  pe.runtime_dim_of.assign(pe.instructions.size(), -1);
  for (uint32_t k = 0; k < Size(e.runtime_dims()); ++k) {
    const fb::RuntimeDim* d = e.runtime_dims()->Get(k);
    pe.runtime_dims.push_back({d->symbol(), d->instruction(), d->bound()});
    pe.runtime_dim_of[static_cast<size_t>(d->instruction())] = static_cast<int32_t>(k);
  }
  for (uint32_t k = 0; k < Size(e.rooms()); ++k) {
    const fb::Room* r = e.rooms()->Get(k);
    pe.rooms.push_back({r->symbol(), r->initial()});
    for (PreparedRuntimeDim& d : pe.runtime_dims)
      if (const Expr& b = pe.exprs[static_cast<size_t>(d.bound_expr)]; b.op == ExprOp::kVar && b.a == r->symbol())
        d.room = static_cast<int32_t>(k);
  }
  // Each run-time guard is checked after the last instruction that sets a dim it reads (the
  // verifier checked that it reads one).
  pe.guards_after.assign(pe.runtime_dims.size(), {});
  for (uint32_t g = 0; g < Size(e.runtime_guards()); ++g) {
    const fb::Guard* fg = e.runtime_guards()->Get(g);
    PreparedRuntimeGuard guard{fg->expr(), Str(fg->text()), {}};
    const std::vector<bool> read = ExprsRead(pe.exprs, guard.expr);
    int32_t last = -1;
    for (size_t i = 0; i < read.size(); ++i) {
      if (!read[i] || pe.exprs[i].op != ExprOp::kVar) continue;
      guard.symbols.push_back(static_cast<int32_t>(pe.exprs[i].a));
      for (size_t k = 0; k < pe.runtime_dims.size(); ++k)
        if (pe.runtime_dims[k].symbol == pe.exprs[i].a &&
            (last < 0 || pe.runtime_dims[k].instruction > pe.runtime_dims[static_cast<size_t>(last)].instruction))
          last = static_cast<int32_t>(k);
    }
    if (last >= 0) pe.guards_after[static_cast<size_t>(last)].push_back(static_cast<int32_t>(pe.runtime_guards.size()));
    pe.runtime_guards.push_back(std::move(guard));
  }

  info.name = pe.name;
  info.backend = pe.backend;
  EntryCompileStats& cs = info.compile;
  for (uint32_t s = 0; s < Size(e.stages()); ++s) {
    const fb::Stage* st = e.stages()->Get(s);
    cs.stage_names.push_back(Str(st->name()));
    info.stage_traces.push_back(text ? Str(st->trace()) : std::string());
    cs.stage_ops.push_back(st->num_ops());
  }
  std::vector<bool> launched(impl.kernels.size(), false);
  for (uint32_t i = 0; i < Size(e.instructions()); ++i) {
    const int32_t k = e.instructions()->Get(i)->kernel();
    if (k < 0 || launched[k]) continue;  // the verifier checked k < kernels
    launched[k] = true;
    ++cs.kernels;
  }
#if !KILN_SELECTIVE
  // Empty in a selective runtime, as KernelInfo::program is (BuildKernelInfo): about 5 KB of code.
  info.prologue_text = PrologueText(pe.prologue, pe.exprs);
#endif
  for (const PrologueInput& in : pe.prologue.inputs) {
    std::vector<DimCheckInfo>& dims = info.input_dims.emplace_back();
    for (const PrologueDim& d : in.dims)
      dims.push_back(d.symbol < 0 ? DimCheckInfo{d.value, "", d.value, d.value, 1}
                                  : DimCheckInfo{-1, pe.prologue.symbols[static_cast<size_t>(d.symbol)], d.min, d.max,
                                                 d.divisor});
  }
  for (const PreparedRuntimeDim& d : pe.runtime_dims) {
    info.runtime_dims.push_back(pe.prologue.symbols[static_cast<size_t>(d.symbol)] +
                                " <= " + PrintExpr(pe.exprs, d.bound_expr, pe.prologue.symbols) + ", set by " +
                                pe.instructions[static_cast<size_t>(d.instruction)].label);
    if (d.room >= 0)
      info.runtime_dims.back() += "; room " + std::to_string(pe.rooms[static_cast<size_t>(d.room)].initial) +
                                  " at first, doubled when a call needs more";
  }
  info.arena_bytes = ArenaText(pe);
  info.num_instructions = static_cast<int32_t>(pe.instructions.size());
  for (uint32_t i = 0; i < Size(e.instructions()); ++i) {
    const fb::Instruction* ins = e.instructions()->Get(i);
    InstructionInfo ii;
    ii.name = Str(ins->name());
    ii.op = ins->op()->str();
    ii.placements = pe.instructions[i].placements;
    if (ins->kernel() >= 0) ii.kernel = impl.kernels[static_cast<size_t>(ins->kernel())].name;
    if (ins->member_ops())
      for (uint32_t m = 0; m < ins->member_ops()->size(); ++m) ii.member_ops.push_back(Str(ins->member_ops()->Get(m)));
    info.instructions.push_back(std::move(ii));
  }
}

// The memory plan's byte check, at load, for an entry whose exprs use no symbol (then Bind
// skips it: its values are the same for every call).
Status CheckStaticPlan(PreparedEntry& pe) {
  if (std::any_of(pe.exprs.begin(), pe.exprs.end(), [](const Expr& x) { return x.op == ExprOp::kVar; }))
    return Status::Ok();
  std::vector<int64_t> values(pe.exprs.size());
  ExprFailure why;
  if (!EvalExprs(pe.exprs, {}, values.data(), &why))
    return DataLoss(pe.label + ": " + FormatExprFailure(pe.exprs, pe.prologue.symbols, why));
  std::vector<int64_t> dims(pe.dim_exprs.size());
  EvaluateDims(pe, values.data(), dims.data());
  ArenaScratch scratch;
  scratch.Resize(pe.liveness);
  KILN_RETURN_IF_ERROR(CheckArenaPlan(pe, values.data(), dims.data(), scratch));
  pe.plan_checked = true;
  return Status::Ok();
}

// LoadOptions::max_context_bytes, 0 resolved to the host's physical memory.
uint64_t ContextLimit(const LoadOptions& options) {
  if (options.max_context_bytes != 0) return options.max_context_bytes;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t bytes = 0;
  if (pages <= 0 || page <= 0 ||
      __builtin_mul_overflow(static_cast<uint64_t>(pages), static_cast<uint64_t>(page), &bytes))
    return UINT64_MAX;
  return bytes;
}

// The artifact's size against LoadOptions::max_artifact_bytes; and, in a runtime built without
// libcrypto (a selective one, cmake/selective.cmake; a cross build with no libcrypto for its
// target), which checks no signature and decrypts no weights, the refusal of the options that ask
// for either. (Encrypted weights given to such a runtime without a key fail the weights checksum,
// which is of the clear weights.)
Status CheckArtifactSize(uint64_t size, const LoadOptions& options) {
#if !KILN_WITH_CRYPTO
  if (!options.trusted_public_keys.empty())
    return Unimplemented("this runtime verifies no signature (built without libcrypto)");
  if (options.weights_key) return Unimplemented("this runtime decrypts no weights (built without libcrypto)");
#endif
  if (size <= options.max_artifact_bytes) return Status::Ok();
  return ResourceExhausted("artifact is " + to_string(size) + " bytes, above LoadOptions::max_artifact_bytes (" +
                           to_string(options.max_artifact_bytes) + ")");
}

}  // namespace

Result<std::shared_ptr<const Model::Impl>> ParseArtifact(std::shared_ptr<const ArtifactBytes> bytes,
                                                         const LoadOptions& options, ParseFor purpose) {
  const uint8_t* data = bytes->data();
  ArtifactHeader h;
  KILN_RETURN_IF_ERROR(CheckHeader(data, bytes->size(), &h));
#if KILN_SELECTIVE
  const bool load = (static_cast<void>(purpose), true);  // a selective runtime has no preflight
#else
  const bool load = purpose == ParseFor::kLoad;
#endif
  // A signature first, when one is required: nothing but the section bounds is read before it
  // verifies (runtime/signature.h). Then encrypted weights (format 10, the trailer's flag) are
  // decrypted in place, in Load's private copy, before their checksum, which is of the clear
  // weights (so a file whose trailer was cut off fails it). Load only: the preflight reads no
  // page of the weights, so it neither hashes nor decrypts them.
#if KILN_WITH_CRYPTO
  SignatureTrailer trailer;
  const bool encrypted = load && h.format_version >= kEncryptedWeightsFormatVersion &&
                         FindTrailer(data, bytes->size(), &trailer) && (trailer.flags & kTrailerWeightsEncrypted);
  const bool verified = load && !options.trusted_public_keys.empty();
  if (verified) KILN_RETURN_IF_ERROR(VerifySignature(data, bytes->size(), h, options.trusted_public_keys));
  if (encrypted) KILN_RETURN_IF_ERROR(CheckTrailer(bytes->size(), h, trailer));
#endif
  const fb::Artifact* a = nullptr;
  KILN_RETURN_IF_ERROR(CheckFlatBuffer(data, h, &a));
#if KILN_WITH_CRYPTO
  if (encrypted) {
    if (!bytes->private_copy())  // Load(path) reads a private copy whenever weights_key is set
      return FailedPrecondition("the weights are encrypted, and LoadOptions::weights_key is not set");
    KILN_RETURN_IF_ERROR(
        DecryptWeights(bytes->private_data() + h.weights_offset, h.weights_size, trailer, options, verified));
  }
#endif
  if (load) KILN_RETURN_IF_ERROR(CheckWeights(data, h));
  KILN_RETURN_IF_ERROR(VerifyArtifact(*a, h.weights_size));

  auto impl = std::make_unique<Model::Impl>();
  impl->bytes = std::move(bytes);
  impl->weights = data + h.weights_offset;
  impl->weights_size = h.weights_size;
  impl->format_version = h.format_version;
  impl->max_context_bytes = ContextLimit(options);
  impl->producer = Str(a->producer());
#if !KILN_SELECTIVE
  // Empty in a selective runtime (Model::provenance), as KernelInfo::program is: it is for
  // inspecting artifacts, which the full runtime's tools do.
  if (const fb::Provenance* p = a->provenance()) {
    ProvenanceInfo& info = impl->provenance;
    info.kiln_version = Str(p->kiln_version());
    info.model_sha256 = Str(p->model_sha256());
    for (uint32_t i = 0; i < Size(p->flags()); ++i) info.flags.push_back(Str(p->flags()->Get(i)));
    for (uint32_t i = 0; i < Size(p->libraries()); ++i)
      info.libraries.emplace_back(Str(p->libraries()->Get(i)->name()), Str(p->libraries()->Get(i)->version()));
  }
#endif
  impl->precision = a->precision() && a->precision()->size() ? Str(a->precision()) : "fp32";
  impl->inputs = IoInfos(a->inputs());
  impl->outputs = IoInfos(a->outputs());
  for (uint32_t w = 0; w < Size(a->weights()); ++w) {
    const fb::Weight* fw = a->weights()->Get(w);
    impl->weight_table.push_back(
        {Str(fw->name()), static_cast<DType>(fw->dtype()), fw->offset(), fw->size()});
  }
  for (uint32_t k = 0; k < Size(a->kernels()); ++k) {
    const fb::Kernel* fk = a->kernels()->Get(k);
    if (fk->program() == nullptr) return DataLoss("kernel " + to_string(k) + " '" + Str(fk->name()) + "' has no program");
    KILN_ASSIGN_OR_RETURN(fused::Program p, ReadProgram(*fk->program()));
    // The compiler validated the program it wrote: one that fails here is a corrupt artifact.
    if (Status st = fused::Validate(p); !st.ok())
      return DataLoss("kernel " + to_string(k) + " '" + Str(fk->name()) + "': program: " + std::string(st.message()));
    impl->kernels.push_back(BuildKernelInfo(*fk, p, load));
    KILN_ASSIGN_OR_RETURN(PreparedKernel pk, BuildLaunch(*fk, k));
    impl->launch.push_back(std::move(pk));
    impl->programs.push_back(std::move(p));
  }
  // Native code: listed for inspection, then the chosen target verified and mapped (runs nothing).
  for (uint32_t k = 0; k < Size(a->native_code()); ++k) {
    const fb::NativeCode* nc = a->native_code()->Get(k);
    NativeCodeInfo& info = impl->native_code.emplace_back();
    info.target = Str(nc->target());
    info.abi = nc->abi();
    info.code_bytes = Size(nc->code());
    for (uint32_t j = 0; j < Size(nc->kernels()); ++j) info.kernels.push_back(nc->kernels()->Get(j)->kernel());
  }
  if (cpu::KeepsNativeCode()) {
    KILN_ASSIGN_OR_RETURN(native::LoadedNativeCode native,
                          native::LoadNativeCode(*a, Size(a->kernels()), options.native_code));
    impl->native = std::move(native.image);
    impl->native_target = std::move(native.target);
    impl->native_note = std::move(native.note);
  } else {
    impl->native_note = "this runtime (a selective build) interprets every generated kernel";
  }
  const uint32_t n = a->entries()->size();
  impl->prepared.resize(n);
  impl->entries.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    PreparedEntry& pe = impl->prepared[i];
    BuildEntry(*a->entries()->Get(i), i, *impl, pe, impl->entries[i], load);
    KILN_RETURN_IF_ERROR(PairLoops(pe));
    KILN_RETURN_IF_ERROR(ArenaLiveness::Build(pe, &pe.liveness));
    SplitSegments(pe);
    KILN_RETURN_IF_ERROR(CheckStaticPlan(pe));
    const std::optional<int64_t> arena = ConstantExpr(pe.exprs, pe.arena_expr);
    if (arena && *arena > 0 && AllocationBytes(static_cast<uint64_t>(*arena)) > impl->max_context_bytes)
      return ResourceExhausted(pe.label + ": its arena of " + to_string(*arena) + " bytes (" +
                               to_string(AllocationBytes(static_cast<uint64_t>(*arena))) +
                               " allocated) is above LoadOptions::max_context_bytes (" +
                               to_string(impl->max_context_bytes) + ")");
  }
  return std::shared_ptr<const Model::Impl>(std::move(impl));
}

#if KILN_WITH_CRYPTO
namespace {

// The `size` bytes of the open file `fd`, read into a private anonymous mapping (huge pages where
// the kernel gives them: fewer page faults; left out of core dumps: it may hold decrypted
// weights). A file that shrank since its size was read is kDataLoss.
Result<std::shared_ptr<const ArtifactBytes>> ReadPrivateCopy(int fd, size_t size) {
  void* addr = fault::Inject("host memory")
                   ? MAP_FAILED
                   : ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED)
    return ResourceExhausted("cannot allocate a private copy of the artifact (" + to_string(size) + " bytes)");
  auto bytes = ArtifactBytes::Read(addr, size);
  ::madvise(addr, size, MADV_HUGEPAGE);
  ::madvise(addr, size, MADV_DONTDUMP);
  size_t done = 0;
  int err = 0;
  while (done < size) {
    const ssize_t n = fault::Inject("file read")
                          ? (errno = EIO, -1)
                          : ::pread(fd, static_cast<uint8_t*>(addr) + done,
                                    std::min<size_t>(size - done, size_t{1} << 30), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) err = errno;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (done == size) return bytes;
  // The caller adds the file's name; the offset is where the read stopped.
  char m[128];
  if (err != 0) {
    std::snprintf(m, sizeof m, "cannot read at offset %zu of its %zu bytes: %s", done, size, std::strerror(err));
    return DataLoss(m);
  }
  std::snprintf(m, sizeof m, "read %zu of its %zu bytes (changed while read?)", done, size);
  return DataLoss(m);
}
}  // namespace
#endif

Result<std::shared_ptr<const ArtifactBytes>> MapArtifact(const std::string& path, const LoadOptions& options) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then rejects it.
  const int fd = fault::Inject("open") ? (errno = EMFILE, -1) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    std::string msg = "cannot open '" + path + "': " + std::strerror(err);
    if (err == ENOENT || err == ENOTDIR) return NotFound(std::move(msg));
    return FailedPrecondition(std::move(msg));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("'" + path + "' is not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (Status limit = CheckArtifactSize(size, options); !limit.ok()) {
    ::close(fd);
    return limit.WithContext("'" + path + "'");
  }
  if (size < sizeof(ArtifactHeader)) {
    ::close(fd);
    return DataLoss("'" + path + "': artifact is " + to_string(size) + " bytes, smaller than the " +
                    to_string(sizeof(ArtifactHeader)) + "-byte file header (truncated?)");
  }
#if KILN_WITH_CRYPTO  // without, the runtime refuses trusted_public_keys (CheckArtifactSize): it always maps
  if (!options.trusted_public_keys.empty() || options.weights_key) {
    // A private copy: what is verified, and what the weights are decrypted into, is what runs;
    // a later write to the file changes none of it (docs/security.md, "Signed artifacts").
    Result<std::shared_ptr<const ArtifactBytes>> copy = ReadPrivateCopy(fd, size);
    ::close(fd);
    if (!copy.ok()) return copy.status().WithContext("'" + path + "'");
    return copy;
  }
#endif
  void* addr = fault::Inject("mmap") ? (errno = ENOMEM, MAP_FAILED) : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping stays valid
  if (addr == MAP_FAILED)
    return ResourceExhausted("cannot map '" + path + "' (" + to_string(size) + " bytes): " + std::strerror(err));
  return ArtifactBytes::Mapped(addr, size);
}

Result<Model> Model::Load(const std::string& path, const LoadOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const ArtifactBytes> bytes, MapArtifact(path, options));
  Result<std::shared_ptr<const Model::Impl>> impl = ParseArtifact(std::move(bytes), options, ParseFor::kLoad);
  if (!impl.ok()) return impl.status().WithContext("'" + path + "'");
#if KILN_WITH_CRYPTO
  // A private copy (MapArtifact) is read-only from now on, as a mapped file is: its weights are
  // decrypted.
  if (const ArtifactBytes& b = *(*impl)->bytes; b.private_copy()) ::mprotect(b.private_data(), b.size(), PROT_READ);
#endif
  return Model(*impl);
}

Result<Model> Model::Load(std::span<const uint8_t> bytes, const LoadOptions& options) {
  KILN_RETURN_IF_ERROR(CheckArtifactSize(bytes.size(), options));
  // Aligned like a mapping would be, so the weights blob (256-aligned in the file) is too.
  const size_t rounded = (bytes.size() + kWeightsAlignment - 1) / kWeightsAlignment * kWeightsAlignment;
  void* copy = fault::Inject("host memory")
                   ? nullptr
                   : std::aligned_alloc(kWeightsAlignment, rounded == 0 ? kWeightsAlignment : rounded);
  if (copy == nullptr)
    return ResourceExhausted("cannot allocate " + to_string(bytes.size()) + " bytes for the artifact");
  if (!bytes.empty()) std::memcpy(copy, bytes.data(), bytes.size());
  Result<std::shared_ptr<const Model::Impl>> impl = ParseArtifact(ArtifactBytes::Owned(copy, bytes.size()), options, ParseFor::kLoad);
  if (!impl.ok()) return impl.status();
  return Model(*impl);
}

uint32_t Model::format_version() const { return impl_->format_version; }
std::string_view Model::producer() const { return impl_->producer; }
const ProvenanceInfo& Model::provenance() const { return impl_->provenance; }
std::string_view Model::precision() const { return impl_->precision; }
const std::vector<TensorInfo>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->outputs; }
const std::vector<EntryInfo>& Model::entries() const { return impl_->entries; }
const std::vector<KernelInfo>& Model::kernels() const { return impl_->kernels; }
uint64_t Model::weights_bytes() const { return impl_->weights_size; }
const std::vector<NativeCodeInfo>& Model::native_code() const { return impl_->native_code; }
const std::string& Model::native_code_target() const { return impl_->native_target; }
const std::string& Model::native_code_note() const { return impl_->native_note; }

}  // namespace kiln
