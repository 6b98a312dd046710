#include "compiler/passes/constant_fold.h"

#include <cstring>
#include <optional>
#include <vector>

#include "runtime/kernels/kernel.h"
#include "runtime/kernels/widen.h"

namespace kiln::passes {
namespace {

cpu::TensorRef RefOf(const ir::ConstData& d) {
  cpu::TensorRef r;
  r.data = const_cast<uint8_t*>(d.bytes.data());
  r.dtype = d.dtype;
  r.rank = static_cast<int32_t>(d.dims.size());
  r.dims = d.dims.data();
  r.num_elements = d.num_elements();
  return r;
}

// The byte size of a static shape, or nullopt when it overflows int64.
std::optional<int64_t> BytesOf(const ir::Value& v) {
  int64_t n = static_cast<int64_t>(DTypeSize(v.dtype));
  for (const auto& d : v.shape)
    if (__builtin_mul_overflow(n, d.value().value_or(0), &n)) return std::nullopt;
  return n;
}

}  // namespace

bool CanFold(const ir::Trace& trace, const ir::Node& node) {
  // A run-time Loop's control runs only from an executor (runtime/executor/loop.h).
  if (!cpu::FindKernel(node.op) || node.op == "kiln.LoopBegin" || node.op == "kiln.LoopEnd") return false;
  int64_t in_bytes = 0, out_bytes = 0;
  for (ir::ValueId id : node.inputs) {
    if (id == ir::kNoValue) continue;
    const ir::Value& v = trace.value(id);
    if (!v.is_const()) return false;
    in_bytes += static_cast<int64_t>(v.data->bytes.size());
  }
  for (ir::ValueId id : node.outputs) {
    if (id == ir::kNoValue) continue;
    const ir::Value& v = trace.value(id);
    const std::optional<int64_t> bytes = BytesOf(v);
    if (!ir::IsStatic(v.shape) || DTypeSize(v.dtype) == 0 || !bytes ||
        __builtin_add_overflow(out_bytes, *bytes, &out_bytes))
      return false;
  }
  return out_bytes <= kMaxFoldBytes || out_bytes <= in_bytes;
}

Status FoldNode(ir::Trace& trace, const ir::Node& node) {
  const cpu::KernelDef* kernel = cpu::FindKernel(node.op);
  std::vector<cpu::TensorRef> ins, outs;
  std::vector<std::shared_ptr<ir::ConstData>> results;
  for (ir::ValueId id : node.inputs)
    ins.push_back(id == ir::kNoValue ? cpu::TensorRef{} : RefOf(*trace.value(id).data));
  for (ir::ValueId id : node.outputs) {
    if (id == ir::kNoValue) {
      outs.push_back(cpu::TensorRef{});
      results.push_back(nullptr);
      continue;
    }
    const ir::Value& v = trace.value(id);
    auto data = std::make_shared<ir::ConstData>();
    data->dtype = v.dtype;
    data->dims = ir::StaticDims(v.shape);
    data->bytes.assign(static_cast<size_t>(*BytesOf(v)), 0);  // CanFold checked it
    outs.push_back(RefOf(*data));
    results.push_back(std::move(data));
  }
  std::vector<uint8_t> scratch(cpu::KernelWorkspaceBytes(*kernel, node.attrs, ins, outs));
  cpu::KernelCall call{node.attrs, ins, outs, scratch.data(), scratch.size()};
  KILN_RETURN_IF_ERROR_CTX(cpu::RunKernel(*kernel, call),
                           "folding node '" + node.name + "' (" + node.op + ")");
  for (size_t i = 0; i < node.outputs.size(); ++i)
    if (node.outputs[i] != ir::kNoValue) trace.value(node.outputs[i]).data = results[i];
  return Status::Ok();
}

bool MaterializeKnownElements(ir::Value& value) {
  if (value.is_const() || !value.sym || !ir::IsStatic(value.shape)) return false;
  for (const ir::Sym& s : *value.sym)
    if (!s.is_const()) return false;
  size_t elem = DTypeSize(value.dtype);
  if (elem == 0) return false;
  auto data = std::make_shared<ir::ConstData>();
  data->dtype = value.dtype;
  data->dims = ir::StaticDims(value.shape);
  if (static_cast<int64_t>(value.sym->size()) != data->num_elements()) return false;
  data->bytes.resize(value.sym->size() * elem);
  for (size_t i = 0; i < value.sym->size(); ++i) {
    int64_t v = *(*value.sym)[i].value();
    uint8_t* dst = data->bytes.data() + i * elem;
    // Every dtype that can carry known elements (a value left symbolic is stored so only
    // when it is int32 or int64, which the runtime's expressions evaluate).
    auto put = [&](auto x) { std::memcpy(dst, &x, sizeof(x)); };
    switch (value.dtype) {
      case DType::kInt64: put(v); break;
      case DType::kInt32: put(static_cast<int32_t>(v)); break;
      case DType::kInt16: put(static_cast<int16_t>(v)); break;
      case DType::kInt8: put(static_cast<int8_t>(v)); break;
      case DType::kUInt64: put(static_cast<uint64_t>(v)); break;
      case DType::kUInt32: put(static_cast<uint32_t>(v)); break;
      case DType::kUInt16: put(static_cast<uint16_t>(v)); break;
      case DType::kUInt8: put(static_cast<uint8_t>(v)); break;
      case DType::kBool: put(static_cast<uint8_t>(v != 0)); break;
      case DType::kFloat32: put(static_cast<float>(v)); break;
      case DType::kFloat64: put(static_cast<double>(v)); break;
      default: return false;
    }
  }
  value.data = std::move(data);
  return true;
}

}  // namespace kiln::passes
