#include "runtime/bound_cache.h"

#include <algorithm>
#include <utility>

#include "runtime/context_impl.h"
#include "runtime/executor/binder.h"
#include "runtime/kernels/selective.h"

namespace kiln {
#if KILN_KEEPS_BOUND_CACHE  // runtime/kernels/selective.h
namespace {

using std::to_string;

// The instructions inside a run-time Loop's body (kiln.LoopBegin .. kiln.LoopEnd).
std::vector<uint8_t> InLoops(const PreparedEntry& pe) {
  std::vector<uint8_t> in(pe.instructions.size(), 0);
  for (size_t k = 0; k < pe.instructions.size(); ++k)
    if (pe.instructions[k].control == Control::kLoopBegin && pe.loop_pair[k] > static_cast<int32_t>(k))
      std::fill(in.begin() + static_cast<ptrdiff_t>(k), in.begin() + pe.loop_pair[k] + 1, 1);
  return in;
}

// An instruction other than `skip` with `t` among its operands, or -1.
int32_t OtherUser(const PreparedEntry& pe, int32_t t, int32_t skip) {
  for (size_t k = 0; k < pe.instructions.size(); ++k) {
    const PreparedInstruction& pi = pe.instructions[k];
    const auto first = pe.operands.begin() + pi.operands_begin, last = first + pi.num_inputs + pi.num_outputs;
    if (static_cast<int32_t>(k) != skip && std::find(first, last, t) != last) return static_cast<int32_t>(k);
  }
  return -1;
}

bool Refuse(std::string* why, const PreparedEntry& pe, const std::string& what, const std::string& reason) {
  *why = pe.label + ": " + what + ": " + reason;
  return false;
}

// Resolves `caches` for entry `pe` (kiln/runtime.h, ExecutionContext::BindCache): each binding's
// present must be output 1 or 2 of an Attention instruction (under no predicate, outside run-time
// Loops) whose input 4 or 5 is the binding's past, with its other present bound too, with the same
// capacity, and no other instruction may read or write the past or the present. On failure, *why
// says which tensor and what computes or reads it.
bool ResolveCaches(const PreparedEntry& pe, std::span<const ExecutionContext::CacheBinding> caches,
                   std::span<const TensorInfo> inputs, std::span<const TensorInfo> outputs, EntryCaches* out,
                   std::string* why) {
  *out = {};
  out->of_instruction.assign(pe.instructions.size(), -1);
  out->bound_output.assign(outputs.size(), 0);
  const std::vector<uint8_t> in_loop = InLoops(pe);
  for (const ExecutionContext::CacheBinding& b : caches) {
    const int32_t past = pe.inputs[static_cast<size_t>(b.past_input)];
    const int32_t present = pe.outputs[static_cast<size_t>(b.present_output)];
    const std::string what = "input '" + inputs[static_cast<size_t>(b.past_input)].name + "' -> output '" +
                             outputs[static_cast<size_t>(b.present_output)].name + "'";
    if (std::count(pe.outputs.begin(), pe.outputs.end(), present) != 1)
      return Refuse(why, pe, what, "the present is also another model output");
    // An entry output is an arena tensor, written by one instruction (runtime/executor/segments.h).
    const int32_t writer = pe.written_at[static_cast<size_t>(present)];
    if (writer < 0) return Refuse(why, pe, what, "no instruction computes the present");
    const PreparedInstruction& pi = pe.instructions[static_cast<size_t>(writer)];
    const auto results = pe.operands.begin() + pi.operands_begin + pi.num_inputs;
    const auto slot = std::find(results, results + pi.num_outputs, present) - results;
    if (pi.kernel == nullptr || pi.kernel->op != "Attention" || (slot != 1 && slot != 2) || pi.num_inputs < 6 ||
        pe.operands[static_cast<size_t>(pi.operands_begin + slot + 3)] != past)
      return Refuse(why, pe, what,
                    "the present is computed by " + pi.label +
                        ", not as the present_key or present_value of an Attention instruction that reads the past "
                        "(an artifact whose present = Concat(past, new) stayed written out)");
    if (!pi.when.empty() || in_loop[static_cast<size_t>(writer)])
      return Refuse(why, pe, what, pi.label + " runs under a condition or inside a run-time Loop");
    const PreparedTensor& t = pe.tensors[static_cast<size_t>(present)];
    if (t.dtype != DType::kFloat32 || t.rank != 4) return Refuse(why, pe, what, "the cache is not float32 of rank 4");
    int32_t& index = out->of_instruction[static_cast<size_t>(writer)];
    if (index < 0) {
      index = static_cast<int32_t>(out->appends.size());
      out->appends.push_back({writer, -1, -1, -1, -1, b.capacity});
    }
    CacheAppend& a = out->appends[static_cast<size_t>(index)];
    if (a.capacity != b.capacity)
      return Refuse(why, pe, what, "its capacity differs from that of the other present " + pi.label + " writes");
    (slot == 1 ? a.past_key : a.past_value) = b.past_input;
    (slot == 1 ? a.present_key : a.present_value) = b.present_output;
    out->bound_output[static_cast<size_t>(b.present_output)] = 1;
  }
  for (const CacheAppend& a : out->appends) {
    const PreparedInstruction& pi = pe.instructions[static_cast<size_t>(a.instruction)];
    if (a.present_key < 0 || a.present_value < 0)
      return Refuse(why, pe, pi.label, "only one of its present_key and present_value is bound: bind both");
    // The bound tensors are in the cache's layout, which no other instruction reads.
    const int32_t mine[] = {pe.inputs[static_cast<size_t>(a.past_key)], pe.inputs[static_cast<size_t>(a.past_value)],
                            pe.outputs[static_cast<size_t>(a.present_key)],
                            pe.outputs[static_cast<size_t>(a.present_value)]};
    for (const int32_t t : mine) {
      const int32_t other = OtherUser(pe, t, a.instruction);
      if (other >= 0)
        return Refuse(why, pe, pi.label,
                      pe.instructions[static_cast<size_t>(other)].label + " also reads or writes " + pe.TensorName(t) +
                          ", which a bound cache keeps in its own layout");
    }
  }
  return true;
}

}  // namespace

Status ExecutionContext::BindCache(std::span<const CacheBinding> caches) {
  if (!impl_) return FailedPrecondition("BindCache on a moved-from ExecutionContext");
  Impl& c = *impl_;
  const auto& ins = c.mi->inputs;
  const auto& outs = c.mi->outputs;
  if (!caches.empty() && c.backend->device() != Device::kCpu)
    return FailedPrecondition("BindCache: a bound KV cache runs on the CPU backend only; this context runs on " +
                              c.device_note);
  std::vector<uint8_t> input_used(ins.size(), 0), output_used(outs.size(), 0);
  for (size_t k = 0; k < caches.size(); ++k) {
    const CacheBinding& b = caches[k];
    const std::string where = "BindCache: binding " + to_string(k) + ": ";
    if (b.past_input < 0 || static_cast<size_t>(b.past_input) >= ins.size())
      return InvalidArgument(where + "past_input " + to_string(b.past_input) + " is not an input index (the model has " +
                             to_string(ins.size()) + ")");
    if (b.present_output < 0 || static_cast<size_t>(b.present_output) >= outs.size())
      return InvalidArgument(where + "present_output " + to_string(b.present_output) +
                             " is not an output index (the model has " + to_string(outs.size()) + ")");
    if (b.capacity < 1) return InvalidArgument(where + "capacity " + to_string(b.capacity) + ", expected at least 1");
    if (input_used[b.past_input]++ || output_used[b.present_output]++)
      return InvalidArgument(where + "input '" + ins[b.past_input].name + "' or output '" + outs[b.present_output].name +
                             "' is bound twice");
  }
  std::vector<EntryCaches> resolved(c.entries.size());
  if (!caches.empty())
    for (size_t e = 0; e < c.entries.size(); ++e) {
      if (!c.runs_entry[e]) continue;
      std::string why;
      if (!ResolveCaches(c.mi->prepared[e], caches, ins, outs, &resolved[e], &why))
        return InvalidArgument("BindCache: " + why);
    }
  c.caches = std::move(resolved);
  return Status::Ok();
}

// Checks that each bound present's view points at its past's buffer, which has room for it. Builds
// no string unless it fails (a Run allocates nothing).
Status CheckCaches(const ExecutionContext::Impl& c, const PreparedEntry& pe, const EntryState& s,
                   const EntryCaches& caches, std::span<const TensorView> inputs, const std::vector<TensorView>& outputs) {
  for (const CacheAppend& a : caches.appends)
    for (const auto& [past, present] : {std::pair{a.past_key, a.present_key}, std::pair{a.past_value, a.present_value}}) {
      auto name = [&, present = present] {
        return "output " + to_string(present) + " '" + c.mi->outputs[present].name + "'";
      };
      if (outputs[present].data != inputs[past].data)
        return InvalidArgument(name() + " is a bound KV cache: its view must point at the buffer of input " +
                               to_string(past) + " '" + c.mi->inputs[past].name + "' (ExecutionContext::BindCache)");
      const cpu::TensorRef& r = s.refs[pe.outputs[present]];
      // The whole buffer's bytes, which the kernel's offsets span, must fit an int64.
      int64_t bytes = 4;
      bool fits = r.rank == 4;
      for (const int64_t f : {a.capacity, fits ? r.dims[0] : 0, fits ? r.dims[1] : 0, fits ? r.dims[3] : 0})
        fits = fits && !__builtin_mul_overflow(bytes, f, &bytes);
      if (!fits)
        return InvalidArgument(name() + " " + ViewShapeText(r.dims, r.rank) + ": a buffer of " +
                               to_string(a.capacity) + " rows per head would be more bytes than an int64 counts");
      if (r.dims[2] > a.capacity)
        return InvalidArgument(name() + " " + ViewShapeText(r.dims, r.rank) + " needs " + to_string(r.dims[2]) +
                               " rows per head; its bound cache has " + to_string(a.capacity));
    }
  return Status::Ok();
}

#endif  // KILN_KEEPS_BOUND_CACHE
}  // namespace kiln
