// Builds small .kiln artifacts in tests: a plain-struct description (ArtifactSpec) turned
// into header + FlatBuffer + 256-aligned weights blob with correct checksums. Tests edit the
// spec to make an artifact semantically wrong, or edit the bytes to corrupt it.
//
//   ArtifactSpec spec = AddModelSpec();            // y = x + w, x: float32[N, 3]
//   std::vector<uint8_t> bytes = BuildArtifact(spec);
//   auto model = kiln::Model::Load(bytes);
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "flatbuffers/flatbuffers.h"
#include "kiln/runtime.h"
#include "kiln/tensor.h"
#include "compiler/serialize/artifact_writer.h"
#include "runtime/artifact_header.h"
#include "runtime/checksum.h"
#include "runtime/fused/program.h"
#include "schema/kiln_generated.h"

namespace kiln::testing {

struct DimSpec {
  int32_t symbol = -1;
  int64_t value = 0;
  int64_t min = 1;
  int64_t max = std::numeric_limits<int64_t>::max();
  int64_t divisor = 1;
};
inline DimSpec Const(int64_t v) { return DimSpec{-1, v}; }
inline DimSpec Sym(int32_t s, int64_t min = 1, int64_t max = std::numeric_limits<int64_t>::max(),
                   int64_t divisor = 1) {
  return DimSpec{s, 0, min, max, divisor};
}

struct InputCheckSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<DimSpec> dims;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int32_t> shape;  // expr indices
  fb::Storage storage = fb::Storage::Arena;
  int64_t index = 0;
  int32_t offset = 0;          // expr index
  std::vector<int32_t> values;
  int32_t raw_dtype = -1;      // >= 0: written instead of dtype (to test invalid dtypes)
};

struct AttrSpec {
  std::string name;
  fb::AttrKind kind = fb::AttrKind::Int;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
};

struct InstructionSpec {
  std::string op;
  std::string name;
  std::vector<int32_t> inputs, outputs;
  std::vector<AttrSpec> attrs;
  int32_t kernel = -1;          // kiln.Fused: index into ArtifactSpec::kernels
  std::vector<int32_t> sizes;   // kiln.Fused: expr index per size argument
  std::vector<std::pair<int32_t, bool>> when;  // predicates: (tensor, value), format 6
};

struct GuardSpec {
  int32_t expr = 0;
  std::string text;
};

struct EntrySpec {
  std::string name = "default";
  std::vector<InputCheckSpec> checks;
  std::vector<GuardSpec> guards;
  std::vector<std::string> symbols;
  std::vector<fb::ExprNode> exprs;
  std::vector<TensorSpec> tensors;
  std::vector<InstructionSpec> instructions;
  std::vector<int32_t> inputs, outputs;
  int32_t arena_bytes = 0;
  std::vector<std::string> stage_names;
  std::vector<fb::RuntimeDim> runtime_dims;  // format 5
  std::vector<fb::Room> rooms;               // format 8
  std::string backend;                       // Entry.backend: "cpu", "cuda"; empty: every backend
};

struct IoSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;
};

struct WeightSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
};

// One Artifact.native_code entry: `kernels` holds (kernel, offset) pairs, written as given.
struct NativeCodeSpec {
  std::string target = "x86-64";
  uint32_t abi = 1;
  std::vector<uint8_t> code;
  std::vector<std::pair<uint32_t, uint32_t>> kernels;
};

struct ArtifactSpec {
  uint32_t format_version = 1;
  std::string producer = "kiln test";
  std::vector<IoSpec> inputs, outputs;
  std::vector<WeightSpec> weights;
  std::vector<EntrySpec> entries;
  std::vector<fused::Program> kernels;  // written with no source and no images
  std::vector<NativeCodeSpec> native_code;  // none: the field is absent
};

inline TensorSpec T(std::string name, DType dtype, std::vector<int32_t> shape, fb::Storage storage,
                    int64_t index = 0, int32_t offset = 0, std::vector<int32_t> values = {}) {
  TensorSpec t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.storage = storage;
  t.index = index;
  t.offset = offset;
  t.values = std::move(values);
  return t;
}

inline fb::ExprNode E(fb::ExprOp op, int64_t a, int64_t b = 0) { return fb::ExprNode(op, a, b); }

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

inline flatbuffers::Offset<fb::Entry> BuildEntry(flatbuffers::FlatBufferBuilder& b, const EntrySpec& e) {
  std::vector<flatbuffers::Offset<fb::InputCheck>> checks;
  for (const auto& c : e.checks) {
    std::vector<flatbuffers::Offset<fb::DimCheck>> dims;
    for (const auto& d : c.dims)
      dims.push_back(fb::CreateDimCheck(b, d.symbol, d.value, d.min, d.max, d.divisor));
    checks.push_back(fb::CreateInputCheck(b, b.CreateString(c.name), static_cast<int32_t>(c.dtype),
                                          b.CreateVector(dims)));
  }
  std::vector<flatbuffers::Offset<fb::Guard>> guards;
  for (const auto& g : e.guards) guards.push_back(fb::CreateGuard(b, g.expr, b.CreateString(g.text)));
  auto prologue = fb::CreatePrologue(b, b.CreateVector(checks), b.CreateVector(guards));
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (const auto& t : e.tensors)
    tensors.push_back(fb::CreateTensor(b, b.CreateString(t.name),
                                       t.raw_dtype >= 0 ? t.raw_dtype : static_cast<int32_t>(t.dtype),
                                       b.CreateVector(t.shape), t.storage, t.index, t.offset,
                                       b.CreateVector(t.values)));
  std::vector<flatbuffers::Offset<fb::Instruction>> instrs;
  for (const auto& in : e.instructions) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const auto& a : in.attrs)
      attrs.push_back(fb::CreateAttr(b, b.CreateString(a.name), a.kind, a.i, a.f, b.CreateString(a.s),
                                     b.CreateVector(a.ints)));
    std::vector<fb::Predicate> when;
    for (const auto& [tensor, value] : in.when) when.emplace_back(tensor, value);
    instrs.push_back(fb::CreateInstruction(b, b.CreateString(in.op), b.CreateString(in.name),
                                           b.CreateString("cpu"), b.CreateVector(in.inputs),
                                           b.CreateVector(in.outputs), b.CreateVector(attrs), in.kernel,
                                           b.CreateVector(in.sizes), 0,
                                           when.empty() ? 0 : b.CreateVectorOfStructs(when)));
  }
  std::vector<flatbuffers::Offset<fb::Stage>> stages;
  for (const auto& s : e.stage_names)
    stages.push_back(fb::CreateStage(b, b.CreateString(s), b.CreateString("trace of " + s)));
  return fb::CreateEntry(b, b.CreateString(e.name), prologue, b.CreateVectorOfStrings(e.symbols),
                         b.CreateVectorOfStructs(e.exprs), b.CreateVector(tensors), b.CreateVector(instrs),
                         b.CreateVector(e.inputs), b.CreateVector(e.outputs), e.arena_bytes,
                         b.CreateVector(stages), e.runtime_dims.empty() ? 0 : b.CreateVectorOfStructs(e.runtime_dims),
                         0, e.rooms.empty() ? 0 : b.CreateVectorOfStructs(e.rooms),
                         e.backend.empty() ? 0 : b.CreateString(e.backend));
}

inline std::vector<flatbuffers::Offset<fb::IoInfo>> BuildIo(flatbuffers::FlatBufferBuilder& b,
                                                            const std::vector<IoSpec>& ios) {
  std::vector<flatbuffers::Offset<fb::IoInfo>> out;
  for (const auto& io : ios)
    out.push_back(fb::CreateIoInfo(b, b.CreateString(io.name), static_cast<int32_t>(io.dtype),
                                   b.CreateVector(io.dims), b.CreateVectorOfStrings(io.symbols)));
  return out;
}

// Header + FlatBuffer + weights blob (each weight at a multiple of 64), with the checksum.
inline std::vector<uint8_t> BuildArtifact(const ArtifactSpec& spec) {
  std::vector<uint8_t> blob;
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Weight>> weights;
  for (const auto& w : spec.weights) {
    blob.resize((blob.size() + 63) / 64 * 64);
    const uint64_t offset = blob.size();
    blob.insert(blob.end(), w.bytes.begin(), w.bytes.end());
    weights.push_back(fb::CreateWeight(b, b.CreateString(w.name), static_cast<int32_t>(w.dtype),
                                       b.CreateVector(w.dims), offset, w.bytes.size()));
  }
  std::vector<flatbuffers::Offset<fb::Entry>> entries;
  for (const auto& e : spec.entries) entries.push_back(BuildEntry(b, e));
  auto inputs = BuildIo(b, spec.inputs);
  auto outputs = BuildIo(b, spec.outputs);
  std::vector<flatbuffers::Offset<fb::Kernel>> kernels;
  for (size_t k = 0; k < spec.kernels.size(); ++k)
    kernels.push_back(fb::CreateKernel(b, b.CreateString("kiln_test_" + std::to_string(k)), 0, 0,
                                       serialize::WriteProgram(b, spec.kernels[k])));
  std::vector<flatbuffers::Offset<fb::NativeCode>> native;
  for (const NativeCodeSpec& n : spec.native_code) {
    std::vector<flatbuffers::Offset<fb::NativeKernel>> nk;
    for (const auto& [kernel, offset] : n.kernels) nk.push_back(fb::CreateNativeKernel(b, kernel, offset));
    native.push_back(fb::CreateNativeCode(b, b.CreateString(n.target), n.abi, b.CreateVector(n.code), b.CreateVector(nk)));
  }
  auto artifact = fb::CreateArtifact(b, spec.format_version, b.CreateString(spec.producer),
                                     b.CreateString("test.onnx"), b.CreateVectorOfStrings({}),
                                     b.CreateString("fp32"), b.CreateVector(inputs), b.CreateVector(outputs),
                                     b.CreateVector(weights), b.CreateVector(kernels), b.CreateVector(entries),
                                     native.empty() ? 0 : b.CreateVector(native));
  fb::FinishArtifactBuffer(b, artifact);

  ArtifactHeader h{};
  std::memcpy(h.magic, kArtifactMagic, sizeof h.magic);
  h.header_bytes = sizeof h;
  h.format_version = spec.format_version;
  h.flatbuffer_offset = sizeof h;
  h.flatbuffer_size = b.GetSize();
  h.weights_offset = (h.flatbuffer_offset + h.flatbuffer_size + 255) / 256 * 256;
  h.weights_size = blob.size();
  h.weights_checksum = ArtifactChecksum(spec.format_version, blob.data(), blob.size());
  h.flatbuffer_checksum = ArtifactChecksum(spec.format_version, b.GetBufferPointer(), b.GetSize());
  std::vector<uint8_t> out(h.weights_offset + blob.size(), 0);
  std::memcpy(out.data(), &h, sizeof h);
  std::memcpy(out.data() + h.flatbuffer_offset, b.GetBufferPointer(), b.GetSize());
  if (!blob.empty()) std::memcpy(out.data() + h.weights_offset, blob.data(), blob.size());
  return out;
}

// y = Add(x, w): x float32[N, 3] with N in [1, 64], w = {10, 20, 30}, y float32[N, 3] in
// the arena. Exprs: 0 N, 1 3, 2 0, 3 12, 4 N*12 (arena bytes).
inline ArtifactSpec AddModelSpec() {
  ArtifactSpec a;
  a.inputs = {{"x", DType::kFloat32, {-1, 3}, {"N", ""}}};
  a.outputs = {{"y", DType::kFloat32, {-1, 3}, {"N", ""}}};
  a.weights = {{"w", DType::kFloat32, {3}, Bytes(std::vector<float>{10, 20, 30})}};
  EntrySpec e;
  e.checks = {{"x", DType::kFloat32, {Sym(0, 1, 64), Const(3)}}};
  e.symbols = {"N"};
  e.exprs = {E(fb::ExprOp::Var, 0), E(fb::ExprOp::Const, 3), E(fb::ExprOp::Const, 0),
             E(fb::ExprOp::Const, 12), E(fb::ExprOp::Mul, 0, 3)};
  e.tensors = {T("x", DType::kFloat32, {0, 1}, fb::Storage::Input, 0),
               T("w", DType::kFloat32, {1}, fb::Storage::Weight, 0),
               T("y", DType::kFloat32, {0, 1}, fb::Storage::Arena, 0, 2)};
  e.instructions = {{"Add", "add0", {0, 1}, {2}, {}, -1, {}, {}}};
  e.inputs = {0};
  e.outputs = {2};
  e.arena_bytes = 4;
  e.stage_names = {"import", "canonical", "fusion", "executors", "plan"};
  a.entries = {e};
  return a;
}

// AddModelSpec with its Add as a kiln.Fused instruction (format 2) whose program computes
// y = x + w, then max(y, 0) with `relu`: domain [N, 3] (size argument 0 is N), nodes 0 linear,
// 1 load x, 2 coord 1, 3 load w, 4 add (5 const 0, 6 max with `relu`).
inline ArtifactSpec FusedAddModelSpec(bool relu) {
  using fused::Op;
  using fused::ScalarType;
  ArtifactSpec a = AddModelSpec();
  a.format_version = 2;
  fused::Program p;
  p.domain = {-1, 3};
  p.num_sizes = 1;
  p.inputs = {{DType::kFloat32, {-1, 3}}, {DType::kFloat32, {3}}};
  p.nodes = {{Op::kLinear, ScalarType::kI64},
             {Op::kLoad, ScalarType::kF32, 0, -1, -1, 0},
             {Op::kCoord, ScalarType::kI64, -1, -1, -1, 1},
             {Op::kLoad, ScalarType::kF32, 2, -1, -1, 1},
             {Op::kAdd, ScalarType::kF32, 1, 3}};
  if (relu) {
    p.nodes.push_back({Op::kConst, ScalarType::kF32, -1, -1, -1, 0, 0.0});
    p.nodes.push_back({Op::kMax, ScalarType::kF32, 4, 5});
  }
  p.outputs = {{{DType::kFloat32, {-1, 3}}, static_cast<int32_t>(p.nodes.size() - 1), false}};
  a.kernels = {p};
  InstructionSpec& ins = a.entries[0].instructions[0];
  ins.op = "kiln.Fused";
  ins.kernel = 0;
  ins.sizes = {0};
  return a;
}

inline ArtifactHeader ReadHeader(const std::vector<uint8_t>& bytes) {
  ArtifactHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  return h;
}
inline void WriteHeader(std::vector<uint8_t>& bytes, const ArtifactHeader& h) {
  std::memcpy(bytes.data(), &h, sizeof h);
}

// The status of loading `spec`'s artifact.
inline Status LoadError(const ArtifactSpec& spec) { return Model::Load(BuildArtifact(spec)).status(); }

}  // namespace kiln::testing
