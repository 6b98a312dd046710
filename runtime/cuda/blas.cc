// MatMul and Gemm on cuBLASLt: the row-major -> column-major mapping (PlanMatMul, PlanGemm)
// and the library object that caches descriptors and heuristic algorithms per problem.
// NOTE: the library calls below have never run on a GPU (see blas.h).
#include "runtime/cuda/blas.h"

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>

#include "runtime/kernels/epilogue.h"
#include "runtime/kernels/float_storage.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/matmul_integer_trans_b.h"

namespace kiln::cuda {
namespace {

// cuBLASLt asks for 256-byte aligned buffers by default; the arena hands workspace out at
// that alignment, and a misaligned one is a caller bug we report rather than guess around.
constexpr uintptr_t kWorkspaceAlign = 256;
constexpr uint32_t kMaxAlign = 256;
// Candidates asked of the heuristic; the first that succeeds and fits the workspace is used.
constexpr int kHeuristicCandidates = 8;

using cpu::DTypeStr;

const DeviceTensor* OptionalInput(std::span<const DeviceTensor> inputs, size_t i) {
  return i < inputs.size() && inputs[i].present() ? &inputs[i] : nullptr;
}

Status Invalid(std::string_view op, const std::string& msg) {
  return InvalidArgument(std::string(op) + ": " + msg);
}
Status Refused(std::string_view op, const std::string& msg) {
  return Unimplemented(std::string(op) + ": " + msg);
}

bool FitsInt32(int64_t v) { return v >= 0 && v <= std::numeric_limits<int32_t>::max(); }

int64_t Product(const int64_t* dims, int begin, int end) {
  int64_t p = 1;
  for (int i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// Operands A, B and output Y present, Y of rank <= kMaxRank.
Status CheckOperands(std::string_view op, std::span<const DeviceTensor> inputs,
                     std::span<const DeviceTensor> outputs) {
  if (inputs.size() < 2 || !inputs[0].present() || !inputs[1].present() || outputs.empty() ||
      !outputs[0].present()) {
    return Invalid(op, "expected inputs A and B and output Y");
  }
  for (const DeviceTensor* t : {&inputs[0], &inputs[1], &outputs[0]}) {
    if (t->rank > kMaxRank || (t->rank > 0 && t->dims == nullptr)) {
      return Invalid(op, "tensor of rank " + std::to_string(t->rank) + " without dims or past rank " +
                             std::to_string(kMaxRank));
    }
  }
  return Status::Ok();
}

// The element and compute types of the GEMM.
Status TypesFor(std::string_view op, DType dt, bool allow_tf32, LtMatmulPlan* p) {
  p->scale_type = CUDA_R_32F;
  switch (dt) {
    case DType::kFloat32:
      p->type = CUDA_R_32F;
      p->compute = allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      return Status::Ok();
    case DType::kFloat16:
      p->type = CUDA_R_16F;
      p->compute = CUBLAS_COMPUTE_32F;
      return Status::Ok();
    case DType::kBFloat16:
      p->type = CUDA_R_16BF;
      p->compute = CUBLAS_COMPUTE_32F;
      return Status::Ok();
    default: return Refused(op, "cuBLASLt runs float32, float16 and bfloat16 here, found " + DTypeStr(dt));
  }
}

// TypesFor's float types for A and B, and D of the same type.
Status FloatTypesFor(std::string_view op, DType dt, bool allow_tf32, LtMatmulPlan* p) {
  KILN_RETURN_IF_ERROR(TypesFor(op, dt, allow_tf32, p));
  p->d_type = p->type;
  return Status::Ok();
}

// Parses the epilogue attributes and checks the residual input against Y, as the CPU kernels
// do (runtime/kernels/epilogue.cc, ReadEpilogue).
Status ReadSpec(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                const DeviceTensor& y, cpu::EpilogueSpec* spec, const DeviceTensor** residual) {
  Status st = cpu::ParseEpilogue(attrs, spec);
  if (!st.ok()) return Invalid(op, st.message());
  const DeviceTensor* r = OptionalInput(inputs, cpu::kEpilogueResidualInput);
  *residual = nullptr;
  if (spec->residual && !r) {
    return Invalid(op, std::string(cpu::kEpilogueResidualAttr) + " = 1 but input " +
                           std::to_string(cpu::kEpilogueResidualInput) + " (the residual) is absent");
  }
  if (!spec->residual && r) {
    return Invalid(op, "input " + std::to_string(cpu::kEpilogueResidualInput) + " " + ShapeText(*r) +
                           " is present but " + std::string(cpu::kEpilogueResidualAttr) + " is not 1");
  }
  if (!spec->any()) return Status::Ok();
  // float16 / bfloat16 (TypesFor refuses the rest): the CPU kernels see them as float32
  // (runtime/kernels/widen.h) and cuBLASLt applies the epilogue in float32 before D's rounding.
  if (!cpu::IsFloatStorage(y.dtype)) {
    return Invalid(op, "an epilogue needs a float output, found " + DTypeStr(y.dtype));
  }
  if (r) {
    bool same = r->rank == y.rank && r->dtype == y.dtype;
    for (int i = 0; same && i < y.rank; ++i) same = r->dims[i] == y.dims[i];
    if (!same) {
      return Invalid(op, "residual " + ShapeText(*r) + " " + DTypeStr(r->dtype) +
                             " must have the output's shape " + ShapeText(y) + " and dtype " + DTypeStr(y.dtype));
    }
    *residual = r;
  }
  return Status::Ok();
}

// The cuBLASLt epilogue for a spec, with or without a bias vector; `has_c` says a C matrix
// (beta != 0) is in the sum.
Status EpilogueFor(std::string_view op, const cpu::EpilogueSpec& spec, bool bias, bool has_c,
                   cublasLtEpilogue_t* e) {
  using A = cpu::EpilogueActivation;
  switch (spec.activation) {
    case A::kNone: *e = bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT; return Status::Ok();
    case A::kRelu: *e = bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU; break;
    case A::kGeluTanh: *e = bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU; break;
    case A::kGelu:
      return Refused(op,
                     "epilogue_activation 'Gelu' is the erf form; cuBLASLt's GELU epilogue is the "
                     "tanh approximation ('GeluTanh')");
    default:
      return Refused(op, "cuBLASLt has no epilogue for activation '" +
                             std::string(cpu::EpilogueActivationName(spec.activation)) + "'");
  }
  if (has_c) {
    return Refused(op,
                   "an activation with a C matrix (a residual, or Gemm's full C): whether cuBLASLt "
                   "applies its epilogue activation after beta*C is not verified");
  }
  return Status::Ok();
}

Status CheckInt32(std::string_view op, const LtMatmulPlan& p) {
  const int64_t values[] = {static_cast<int64_t>(p.m),
                            static_cast<int64_t>(p.n),
                            static_cast<int64_t>(p.k),
                            p.a.ld,
                            p.b.ld,
                            p.d.ld,
                            p.batch};
  for (int64_t v : values) {
    if (!FitsInt32(v)) {
      return Refused(op, "a GEMM size of " + std::to_string(v) + " is past cuBLASLt's int32 range");
    }
  }
  return Status::Ok();
}

// Each of the operand's batch dims, right-aligned with the output's, equals it or is 1.
bool BatchBroadcasts(const int64_t* dims, int rank, const int64_t* y_dims, int y_rank) {
  if (rank > y_rank) return false;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = dims[i], yd = y_dims[y_rank - rank + i];
    if (d != yd && d != 1) return false;
  }
  return true;
}

}  // namespace

Status PlanMatMul(const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                  std::span<const DeviceTensor> outputs, bool allow_tf32, LtMatmulPlan* plan) {
  constexpr std::string_view kOp = "MatMul";
  *plan = LtMatmulPlan{};
  KILN_RETURN_IF_ERROR(CheckOperands(kOp, inputs, outputs));
  const DeviceTensor &a = inputs[0], &b = inputs[1], &y = outputs[0];
  if (a.rank < 1 || b.rank < 1) {
    return Invalid(kOp, "operands must have rank >= 1, got " + ShapeText(a) + " and " + ShapeText(b));
  }
  if (a.dtype != b.dtype || a.dtype != y.dtype) {
    return Invalid(
        kOp, "dtypes differ: " + DTypeStr(a.dtype) + ", " + DTypeStr(b.dtype) + " -> " + DTypeStr(y.dtype));
  }
  KILN_RETURN_IF_ERROR(FloatTypesFor(kOp, a.dtype, allow_tf32, plan));
  // ONNX's promotion: a 1-D A is [1, K] and a 1-D B is [K, 1], the added dim dropped from Y.
  const bool a_vec = a.rank == 1, b_vec = b.rank == 1;
  const int64_t m = a_vec ? 1 : a.dims[a.rank - 2];
  const int64_t k = a.dims[a.rank - 1];
  const int64_t kb = b_vec ? b.dims[0] : b.dims[b.rank - 2];
  const int64_t n = b_vec ? 1 : b.dims[b.rank - 1];
  if (k != kb) return Invalid(kOp, "inner dimensions differ: " + ShapeText(a) + " x " + ShapeText(b));
  const int a_batch = a_vec ? 0 : a.rank - 2, b_batch = b_vec ? 0 : b.rank - 2;
  const int batch_rank = y.rank - (a_vec ? 0 : 1) - (b_vec ? 0 : 1);
  if (batch_rank < 0 || batch_rank < a_batch || batch_rank < b_batch) {
    return Invalid(kOp, "output " + ShapeText(y) + " does not fit inputs " + ShapeText(a) + " x " + ShapeText(b));
  }
  if ((!a_vec && y.dims[batch_rank] != m) || (!b_vec && y.dims[y.rank - 1] != n)) {
    return Invalid(kOp, "output " + ShapeText(y) + " does not match inputs " + ShapeText(a) + " x " + ShapeText(b));
  }
  if (!BatchBroadcasts(a.dims, a_batch, y.dims, batch_rank) ||
      !BatchBroadcasts(b.dims, b_batch, y.dims, batch_rank)) {
    return Invalid(kOp, "batch dimensions of " + ShapeText(a) + " and " + ShapeText(b) +
                            " do not broadcast to output " + ShapeText(y));
  }
  const DeviceTensor* bias = OptionalInput(inputs, cpu::kEpilogueBiasInput);
  if (bias && (b_vec || bias->dtype != a.dtype || bias->rank != 1 || bias->dims[0] != n)) {
    return Invalid(kOp, "bias " + ShapeText(*bias) + " " + DTypeStr(bias->dtype) + " must be a " +
                            DTypeStr(a.dtype) + " vector of the " + std::to_string(n) +
                            " output columns (B " + ShapeText(b) + " must be at least 2-D)");
  }
  cpu::EpilogueSpec spec;
  const DeviceTensor* residual = nullptr;
  KILN_RETURN_IF_ERROR(ReadSpec(kOp, attrs, inputs, y, &spec, &residual));

  const int64_t batch = Product(y.dims, 0, batch_rank);
  const int64_t a_count = Product(a.dims, 0, a_batch), b_count = Product(b.dims, 0, b_batch);
  plan->empty = batch == 0 || m == 0 || n == 0;
  if (plan->empty) return Status::Ok();
  if (k == 0) return Refused(kOp, "K = 0 (the output is the bias alone)");
  // A right operand shared by the whole batch lets the batch fold into M: one GEMM over the
  // contiguous [batch * M, K] rows of A. Equal batches run strided; other broadcasts do not.
  int64_t cols = m;  // cuBLASLt's n: the rows of Y in one batch member
  bool strided = false;
  if (b_count == 1 && a_count == batch) {
    cols = batch * m;
  } else if (a_count == batch && b_count == batch) {
    strided = batch > 1;
  } else {
    return Refused(kOp, "batch broadcast of " + ShapeText(a) + " x " + ShapeText(b) +
                            ": cuBLASLt runs equal batches or a right operand shared by the batch");
  }
  plan->m = static_cast<uint64_t>(n);
  plan->n = static_cast<uint64_t>(cols);
  plan->k = static_cast<uint64_t>(k);
  if (strided && !FitsInt32(batch)) return Refused(kOp, "batch " + std::to_string(batch) + " past int32");
  plan->batch = strided ? static_cast<int32_t>(batch) : 1;
  plan->a = {static_cast<uint64_t>(n), static_cast<uint64_t>(k), n, strided ? k * n : 0};
  plan->b = {static_cast<uint64_t>(k), static_cast<uint64_t>(cols), k, strided ? m * k : 0};
  plan->d = {static_cast<uint64_t>(n), static_cast<uint64_t>(cols), n, strided ? m * n : 0};
  plan->a_input = 1;
  plan->b_input = 0;
  if (bias) plan->bias_input = static_cast<int>(cpu::kEpilogueBiasInput);
  if (residual) {
    plan->c_input = static_cast<int>(cpu::kEpilogueResidualInput);
    plan->beta = 1.0f;
  }
  KILN_RETURN_IF_ERROR(EpilogueFor(kOp, spec, bias != nullptr, residual != nullptr, &plan->epilogue));
  return CheckInt32(kOp, *plan);
}

Status PlanGemm(const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                std::span<const DeviceTensor> outputs, bool allow_tf32, LtMatmulPlan* plan) {
  constexpr std::string_view kOp = "Gemm";
  *plan = LtMatmulPlan{};
  KILN_RETURN_IF_ERROR(CheckOperands(kOp, inputs, outputs));
  const DeviceTensor &a = inputs[0], &b = inputs[1], &y = outputs[0];
  const DeviceTensor* c = OptionalInput(inputs, 2);
  if (a.rank != 2 || b.rank != 2 || y.rank != 2) {
    return Invalid(kOp, "A, B and Y must be 2-D, got " + ShapeText(a) + ", " + ShapeText(b) + ", " + ShapeText(y));
  }
  if (a.dtype != b.dtype || a.dtype != y.dtype || (c && c->dtype != a.dtype)) {
    return Invalid(kOp, "operand dtypes differ: A " + DTypeStr(a.dtype) + ", B " + DTypeStr(b.dtype) +
                            (c ? ", C " + DTypeStr(c->dtype) : std::string()) + ", Y " + DTypeStr(y.dtype));
  }
  KILN_RETURN_IF_ERROR(FloatTypesFor(kOp, a.dtype, allow_tf32, plan));
  const bool ta = attrs.GetInt("transA", 0) != 0;
  const bool tb = attrs.GetInt("transB", 0) != 0;
  const float alpha = attrs.GetFloat("alpha", 1.0f);
  const float beta = attrs.GetFloat("beta", 1.0f);
  const int64_t m = ta ? a.dims[1] : a.dims[0];
  const int64_t k = ta ? a.dims[0] : a.dims[1];
  const int64_t kb = tb ? b.dims[1] : b.dims[0];
  const int64_t n = tb ? b.dims[0] : b.dims[1];
  if (k != kb) {
    return Invalid(kOp, "inner dimensions differ: A " + ShapeText(a) + (ta ? " (transposed)" : "") + ", B " +
                            ShapeText(b) + (tb ? " (transposed)" : ""));
  }
  if (y.dims[0] != m || y.dims[1] != n) {
    return Invalid(kOp,
                   "output " + ShapeText(y) + " should be [" + std::to_string(m) + "," + std::to_string(n) + "]");
  }
  // C: absent (or beta = 0), Y's full shape (cuBLASLt's C), or a bias vector over the columns.
  enum class CKind { kNone, kFull, kBias } c_kind = CKind::kNone;
  if (c) {
    if (c->rank > 2 || !BatchBroadcasts(c->dims, c->rank, y.dims, 2)) {
      return Invalid(kOp, "C " + ShapeText(*c) + " does not broadcast to " + ShapeText(y));
    }
    // Broadcast-compatible with as many elements as Y: no dim is stretched, so C is laid out
    // exactly as Y ([N] for M = 1, [M, 1] for N = 1, ...).
    const bool full = c->num_elements == m * n;
    const bool bias_shaped =
        (c->rank == 1 && c->dims[0] == n) || (c->rank == 2 && c->dims[0] == 1 && c->dims[1] == n);
    if (beta == 0.0f) {
      c_kind = CKind::kNone;
    } else if (bias_shaped && beta == 1.0f) {
      // Also when M = 1, where C [N] is Y's shape too: the bias epilogue takes an activation,
      // cuBLASLt's C does not here.
      c_kind = CKind::kBias;
    } else if (full) {
      c_kind = CKind::kFull;
    } else if (bias_shaped) {
      if (beta != 1.0f) {
        return Refused(kOp, "C " + ShapeText(*c) + " is a bias over the columns but beta = " +
                                std::to_string(beta) + "; cuBLASLt's bias epilogue cannot scale it");
      }
      c_kind = CKind::kBias;
    } else {
      return Refused(kOp, "C " + ShapeText(*c) + " broadcast over " + ShapeText(y) +
                              ": cuBLASLt takes C of Y's shape or a bias [N] / [1,N]");
    }
  }
  cpu::EpilogueSpec spec;
  const DeviceTensor* residual = nullptr;
  KILN_RETURN_IF_ERROR(ReadSpec(kOp, attrs, inputs, y, &spec, &residual));
  plan->empty = m == 0 || n == 0;
  if (plan->empty) return Status::Ok();
  if (k == 0) return Refused(kOp, "K = 0 (the output is beta * C alone)");
  if (residual && c_kind == CKind::kFull) {
    return Refused(kOp, "a residual and a full C: cuBLASLt has one C matrix");
  }
  // Column-major view (blas.h): cuBLASLt's A is ONNX's B, its B is ONNX's A, D is Y^T.
  plan->trans_a = tb;
  plan->a = tb ? LtLayout{static_cast<uint64_t>(k), static_cast<uint64_t>(n), k, 0}
               : LtLayout{static_cast<uint64_t>(n), static_cast<uint64_t>(k), n, 0};
  plan->trans_b = ta;
  plan->b = ta ? LtLayout{static_cast<uint64_t>(m), static_cast<uint64_t>(k), m, 0}
               : LtLayout{static_cast<uint64_t>(k), static_cast<uint64_t>(m), k, 0};
  plan->d = {static_cast<uint64_t>(n), static_cast<uint64_t>(m), n, 0};
  plan->m = static_cast<uint64_t>(n);
  plan->n = static_cast<uint64_t>(m);
  plan->k = static_cast<uint64_t>(k);
  plan->alpha = alpha;
  plan->a_input = 1;
  plan->b_input = 0;
  if (c_kind == CKind::kFull) {
    plan->c_input = 2;
    plan->beta = beta;
  } else if (residual) {
    plan->c_input = static_cast<int>(cpu::kEpilogueResidualInput);
    plan->beta = 1.0f;
  }
  if (c_kind == CKind::kBias) plan->bias_input = 2;
  KILN_RETURN_IF_ERROR(EpilogueFor(kOp, spec, c_kind == CKind::kBias, plan->c_input >= 0, &plan->epilogue));
  return CheckInt32(kOp, *plan);
}

Status PlanMatMulIntegerTransB(std::span<const DeviceTensor> inputs, std::span<const DeviceTensor> outputs,
                               LtMatmulPlan* plan) {
  constexpr std::string_view kOp = cpu::kMatMulIntegerTransBOp;
  *plan = LtMatmulPlan{};
  KILN_RETURN_IF_ERROR(CheckOperands(kOp, inputs, outputs));
  const DeviceTensor &a = inputs[0], &b = inputs[1], &y = outputs[0];
  bool ok = a.rank >= 2 && b.rank == 2 && y.rank == a.rank && b.dims[1] == a.dims[a.rank - 1] &&
            y.dims[y.rank - 1] == b.dims[0];
  for (int i = 0; ok && i < a.rank - 1; ++i) ok = y.dims[i] == a.dims[i];
  if (!ok) {
    return Invalid(kOp, "A " + ShapeText(a) + " [..., M, K], B " + ShapeText(b) + " [N, K] and Y " + ShapeText(y) +
                            " [..., M, N] do not match");
  }
  const auto int8 = [](DType t) { return t == DType::kInt8 || t == DType::kUInt8; };
  if (!int8(a.dtype) || !int8(b.dtype) || y.dtype != DType::kInt32) {
    return Invalid(kOp, "expected int8 or uint8 A and B and int32 Y, found " + DTypeStr(a.dtype) + ", " +
                            DTypeStr(b.dtype) + " -> " + DTypeStr(y.dtype));
  }
  if (a.dtype != DType::kInt8 || b.dtype != DType::kInt8) {
    return Refused(kOp, "cuBLASLt's int8 GEMM takes signed int8 A and B, found " + DTypeStr(a.dtype) + " and " +
                            DTypeStr(b.dtype));
  }
  const int64_t rows = Product(a.dims, 0, a.rank - 1), k = b.dims[1], n = b.dims[0];
  plan->empty = rows == 0 || n == 0;
  if (plan->empty) return Status::Ok();
  if (k == 0) return Refused(kOp, "K = 0 (the output is zeros)");
  if (n % 4 != 0 || k % 4 != 0) {
    return Refused(kOp, "cuBLASLt's int8 GEMM (IMMA, regular ordering) needs N and K multiples of 4, found N " +
                            std::to_string(n) + ", K " + std::to_string(k));
  }
  plan->type = CUDA_R_8I;
  plan->d_type = CUDA_R_32I;
  plan->compute = CUBLAS_COMPUTE_32I;
  plan->scale_type = CUDA_R_32I;
  // Column-major (blas.h): cuBLASLt's A is B [N, K] read as K x N (ld K), transposed; its B is A's
  // rows [rows, K] read as K x rows (ld K); D is Y [rows, N] read as N x rows (ld N).
  plan->trans_a = true;
  plan->a = {static_cast<uint64_t>(k), static_cast<uint64_t>(n), k, 0};
  plan->b = {static_cast<uint64_t>(k), static_cast<uint64_t>(rows), k, 0};
  plan->d = {static_cast<uint64_t>(n), static_cast<uint64_t>(rows), n, 0};
  plan->m = static_cast<uint64_t>(n);
  plan->n = static_cast<uint64_t>(rows);
  plan->k = static_cast<uint64_t>(k);
  plan->a_input = 1;
  plan->b_input = 0;
  return CheckInt32(kOp, *plan);
}

// ---- Library object -----------------------------------------------------------------------------

namespace {

// A problem as cuBLASLt sees it, plus each buffer's alignment (the heuristic picks kernels
// that rely on it). Pointers themselves are not part of it: the same descriptors and
// algorithm serve every call with equal shapes and alignments.
struct MatmulKey {
  int32_t type = 0, d_type = 0, compute = 0;
  bool trans_a = false, trans_b = false, has_c = false, has_bias = false;
  uint32_t epilogue = 0;
  uint64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  LtLayout a, b, d;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_d = 0, align_bias = 0;
  bool operator==(const MatmulKey&) const = default;
};

struct MatmulKeyHash {
  size_t operator()(const MatmulKey& k) const {
    uint64_t h = 0xcbf29ce484222325ull;
    auto mix = [&h](uint64_t v) {
      h = (h ^ v) * 0x100000001b3ull;
      h ^= h >> 29;
    };
    mix(static_cast<uint64_t>(k.type) << 32 | static_cast<uint32_t>(k.compute));
    mix(static_cast<uint64_t>(k.d_type));
    mix(uint64_t{k.trans_a} | uint64_t{k.trans_b} << 1 | uint64_t{k.has_c} << 2 | uint64_t{k.has_bias} << 3 |
        uint64_t{k.epilogue} << 8);
    for (uint64_t v : {k.m, k.n, k.k, static_cast<uint64_t>(k.batch)}) mix(v);
    for (const LtLayout* l : {&k.a, &k.b, &k.d}) {
      mix(l->rows);
      mix(l->cols);
      mix(static_cast<uint64_t>(l->ld));
      mix(static_cast<uint64_t>(l->batch_stride));
    }
    mix(uint64_t{k.align_a} | uint64_t{k.align_b} << 16 | uint64_t{k.align_c} << 32 |
        uint64_t{k.align_d} << 48);
    mix(k.align_bias);
    return static_cast<size_t>(h);
  }
};

struct CachedMatmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

// The largest power of two (capped at 256) dividing the address; 256 for null.
uint32_t AlignmentOf(CUdeviceptr p) {
  if (p == 0) return kMaxAlign;
  uint32_t a = 1;
  while (a < kMaxAlign && (p & a) == 0) a <<= 1;
  return a;
}

void* Ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// The OpCall buffers a plan reads and writes.
struct Buffers {
  CUdeviceptr a = 0, b = 0, c = 0, d = 0, bias = 0;
};

}  // namespace

struct BlasLibrary::State {
  const Blas* blas = nullptr;
  BlasOptions options;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  std::unordered_map<MatmulKey, CachedMatmul, MatmulKeyHash> cache;

  void Release(CachedMatmul& e) const {
    if (e.d) blas->MatrixLayoutDestroy(e.d);
    if (e.b) blas->MatrixLayoutDestroy(e.b);
    if (e.a) blas->MatrixLayoutDestroy(e.a);
    if (e.desc) blas->MatmulDescDestroy(e.desc);
    e = CachedMatmul{};
  }

  ~State() {
    // Destroy results are ignored: nothing useful can be done with them in a destructor.
    for (auto& [key, entry] : cache) Release(entry);
    if (preference) blas->MatmulPreferenceDestroy(preference);
    if (handle) blas->Destroy(handle);
  }

  Status Layout(const LtLayout& l, cudaDataType_t type, int32_t batch, cublasLtMatrixLayout_t* out,
                const std::string& what) const {
    KILN_RETURN_IF_ERROR(CheckBlas(*blas, blas->MatrixLayoutCreate(out, type, l.rows, l.cols, l.ld),
                                   what + ": cublasLtMatrixLayoutCreate"));
    if (batch > 1) {
      KILN_RETURN_IF_ERROR(CheckBlas(
          *blas,
          blas->MatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch)),
          what + ": cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)"));
      KILN_RETURN_IF_ERROR(
          CheckBlas(*blas,
                    blas->MatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                   &l.batch_stride, sizeof(l.batch_stride)),
                    what + ": cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)"));
    }
    return Status::Ok();
  }

  Status SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* value,
                 size_t size, const std::string& what, const char* name) const {
    return CheckBlas(*blas, blas->MatmulDescSetAttribute(desc, attr, value, size),
                     what + ": cublasLtMatmulDescSetAttribute(" + name + ")");
  }

  // Builds the descriptors of `key` and picks its algorithm. `bias` is the bias pointer the
  // heuristic sees (only its alignment matters to it). On error nothing is left allocated.
  Status Build(const LtMatmulPlan& plan, const MatmulKey& key, const void* bias, const std::string& what,
               CachedMatmul* out) const {
    CachedMatmul e;
    Status st = BuildInto(plan, key, bias, what, &e);
    if (!st.ok()) {
      Release(e);
      return st;
    }
    *out = e;
    return Status::Ok();
  }

  Status BuildInto(const LtMatmulPlan& plan, const MatmulKey& key, const void* bias, const std::string& what,
                   CachedMatmul* e) const {
    KILN_RETURN_IF_ERROR(CheckBlas(*blas, blas->MatmulDescCreate(&e->desc, plan.compute, plan.scale_type),
                                   what + ": cublasLtMatmulDescCreate"));
    const int32_t op_a = plan.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int32_t op_b = plan.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const uint32_t epilogue = static_cast<uint32_t>(plan.epilogue);
    KILN_RETURN_IF_ERROR(SetDesc(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a), what, "TRANSA"));
    KILN_RETURN_IF_ERROR(SetDesc(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b), what, "TRANSB"));
    KILN_RETURN_IF_ERROR(
        SetDesc(e->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue), what, "EPILOGUE"));
    if (plan.bias_input >= 0) {
      KILN_RETURN_IF_ERROR(
          SetDesc(e->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias), what, "BIAS_POINTER"));
      if (plan.type != CUDA_R_32F) {
        // The bias has D's type: cuBLASLt's default for float16 / bfloat16 D, set explicitly so
        // that the half bias vector is never read as float (float32 keeps the default untouched).
        const int32_t bias_type = plan.type;
        KILN_RETURN_IF_ERROR(SetDesc(e->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type),
                                     what, "BIAS_DATA_TYPE"));
      }
    }
    KILN_RETURN_IF_ERROR(Layout(plan.a, plan.type, plan.batch, &e->a, what + " (A)"));
    KILN_RETURN_IF_ERROR(Layout(plan.b, plan.type, plan.batch, &e->b, what + " (B)"));
    KILN_RETURN_IF_ERROR(Layout(plan.d, plan.d_type, plan.batch, &e->d, what + " (D)"));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d},
    };
    for (const auto& [attr, value] : aligns) {
      KILN_RETURN_IF_ERROR(
          CheckBlas(*blas, blas->MatmulPreferenceSetAttribute(preference, attr, &value, sizeof(value)),
                    what + ": cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)"));
    }
    cublasLtMatmulHeuristicResult_t results[kHeuristicCandidates] = {};
    int returned = 0;
    // C shares D's layout (cuBLASLt requires C and D to match, and C is D itself when absent).
    // CUBLAS_STATUS_NOT_SUPPORTED means no algorithm for this configuration (e.g. bfloat16 on a
    // GPU without it): like an empty result, the op is left to the CPU backend.
    const cublasStatus_t heuristic = blas->MatmulAlgoGetHeuristic(handle, e->desc, e->a, e->b, e->d, e->d,
                                                                  preference, kHeuristicCandidates, results, &returned);
    if (heuristic == CUBLAS_STATUS_NOT_SUPPORTED) returned = 0;
    else KILN_RETURN_IF_ERROR(CheckBlas(*blas, heuristic, what + ": cublasLtMatmulAlgoGetHeuristic"));
    for (int i = 0; i < returned; ++i) {
      if (results[i].state == CUBLAS_STATUS_SUCCESS &&
          results[i].workspaceSize <= options.max_workspace_bytes) {
        e->algo = results[i].algo;
        e->workspace = results[i].workspaceSize;
        return Status::Ok();
      }
    }
    return Unimplemented(what + ": cuBLASLt offers no algorithm for m=" + std::to_string(plan.m) +
                         " n=" + std::to_string(plan.n) + " k=" + std::to_string(plan.k) +
                         " batch=" + std::to_string(plan.batch) + " within " +
                         std::to_string(options.max_workspace_bytes) + " workspace bytes (" +
                         std::to_string(returned) + " candidates)");
  }

  Result<const CachedMatmul*> Find(const LtMatmulPlan& plan, const Buffers& buf, const CallName& name) {
    MatmulKey key;
    key.type = static_cast<int32_t>(plan.type);
    key.d_type = static_cast<int32_t>(plan.d_type);
    key.compute = static_cast<int32_t>(plan.compute);
    key.trans_a = plan.trans_a;
    key.trans_b = plan.trans_b;
    key.has_c = plan.c_input >= 0;
    key.has_bias = plan.bias_input >= 0;
    key.epilogue = static_cast<uint32_t>(plan.epilogue);
    key.m = plan.m;
    key.n = plan.n;
    key.k = plan.k;
    key.batch = plan.batch;
    key.a = plan.a;
    key.b = plan.b;
    key.d = plan.d;
    key.align_a = AlignmentOf(buf.a);
    key.align_b = AlignmentOf(buf.b);
    key.align_c = AlignmentOf(buf.c);
    key.align_d = AlignmentOf(buf.d);
    key.align_bias = plan.bias_input >= 0 ? AlignmentOf(buf.bias) : 0;
    auto it = cache.find(key);
    if (it != cache.end()) return &it->second;
    // Prepare passes no pointers: a 256-aligned stand-in, never dereferenced by the heuristic.
    const void* bias = buf.bias ? Ptr(buf.bias) : reinterpret_cast<const void*>(uintptr_t{kMaxAlign});
    CachedMatmul entry;
    KILN_RETURN_IF_ERROR(Build(plan, key, bias, name.str(), &entry));
    return &cache.emplace(key, entry).first->second;
  }
};

BlasLibrary::BlasLibrary(std::unique_ptr<State> state) : s_(std::move(state)) {}
BlasLibrary::~BlasLibrary() = default;

Result<std::unique_ptr<BlasLibrary>> BlasLibrary::Create(const Blas& blas, const BlasOptions& options) {
  auto state = std::make_unique<State>();
  state->blas = &blas;
  state->options = options;
  KILN_RETURN_IF_ERROR_CTX(CheckBlas(blas, blas.Create(&state->handle), "cublasLtCreate"),
                           "cuBLASLt");
  KILN_RETURN_IF_ERROR_CTX(
      CheckBlas(blas, blas.MatmulPreferenceCreate(&state->preference), "cublasLtMatmulPreferenceCreate"),
      "cuBLASLt");
  const uint64_t max_ws = options.max_workspace_bytes;
  KILN_RETURN_IF_ERROR_CTX(
      CheckBlas(blas,
                blas.MatmulPreferenceSetAttribute(state->preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &max_ws, sizeof(max_ws)),
                "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)"),
      "cuBLASLt");
  return std::unique_ptr<BlasLibrary>(new BlasLibrary(std::move(state)));
}

namespace {

Status PlanFor(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
               std::span<const DeviceTensor> outputs, bool allow_tf32, LtMatmulPlan* plan) {
  if (op == "MatMul") return PlanMatMul(attrs, inputs, outputs, allow_tf32, plan);
  if (op == "Gemm") return PlanGemm(attrs, inputs, outputs, allow_tf32, plan);
  if (op == cpu::kMatMulIntegerTransBOp) return PlanMatMulIntegerTransB(inputs, outputs, plan);
  return Unimplemented(std::string(op) + ": Kiln runs only MatMul, Gemm and " +
                       std::string(cpu::kMatMulIntegerTransBOp) + " on cuBLASLt");
}

}  // namespace

Status BlasLibrary::Supports(std::string_view op, const AttrMap& attrs, std::span<const DeviceTensor> inputs,
                              std::span<const DeviceTensor> outputs) {
  LtMatmulPlan plan;
  return PlanFor(op, attrs, inputs, outputs, false, &plan);
}

size_t BlasLibrary::WorkspaceFor(const BlasOptions& options, std::string_view op, const AttrMap& attrs,
                                  std::span<const DeviceTensor> inputs,
                                  std::span<const DeviceTensor> outputs) {
  LtMatmulPlan plan;
  if (!PlanFor(op, attrs, inputs, outputs, options.allow_tf32, &plan).ok() || plan.empty) return 0;
  return options.max_workspace_bytes;
}

size_t BlasLibrary::Workspace(std::string_view op, const AttrMap& attrs,
                               std::span<const DeviceTensor> inputs,
                               std::span<const DeviceTensor> outputs) const {
  return WorkspaceFor(s_->options, op, attrs, inputs, outputs);
}

Result<size_t> BlasLibrary::Prepare(std::string_view op, const AttrMap& attrs,
                                     std::span<const DeviceTensor> inputs,
                                     std::span<const DeviceTensor> outputs) {
  LtMatmulPlan plan;
  KILN_RETURN_IF_ERROR(PlanFor(op, attrs, inputs, outputs, s_->options.allow_tf32, &plan));
  if (plan.empty) return size_t{0};
  // Null pointers stand for 256-byte aligned buffers (AlignmentOf), the arena's alignment.
  const std::string what = std::string(op) + " (prepare)";
  KILN_ASSIGN_OR_RETURN(const CachedMatmul* entry, s_->Find(plan, Buffers{}, CallName{what, {}}));
  return entry->workspace;
}

Status BlasLibrary::MatMul(const OpCall& call, std::string_view node) {
  LtMatmulPlan plan;
  KILN_RETURN_IF_ERROR_CTX(PlanMatMul(call.attrs, call.inputs, call.outputs, s_->options.allow_tf32, &plan),
                           "node '" + std::string(node) + "'");
  return Enqueue("MatMul", plan, call, node);
}

Status BlasLibrary::Gemm(const OpCall& call, std::string_view node) {
  LtMatmulPlan plan;
  KILN_RETURN_IF_ERROR_CTX(PlanGemm(call.attrs, call.inputs, call.outputs, s_->options.allow_tf32, &plan),
                           "node '" + std::string(node) + "'");
  return Enqueue("Gemm", plan, call, node);
}

Status BlasLibrary::Run(std::string_view op, const OpCall& call, std::string_view node) {
  if (op == "MatMul") return MatMul(call, node);
  if (op == "Gemm") return Gemm(call, node);
  if (op == cpu::kMatMulIntegerTransBOp) {
    LtMatmulPlan plan;
    KILN_RETURN_IF_ERROR_CTX(PlanMatMulIntegerTransB(call.inputs, call.outputs, &plan),
                             "node '" + std::string(node) + "'");
    return Enqueue(op, plan, call, node);
  }
  return Unimplemented(std::string(op) + " '" + std::string(node) + "': Kiln runs only MatMul, Gemm and " +
                       std::string(cpu::kMatMulIntegerTransBOp) + " on cuBLASLt");
}

Status BlasLibrary::Plan(std::string_view op, const OpCall& call, std::string_view node) {
  LtMatmulPlan plan;
  KILN_RETURN_IF_ERROR_CTX(PlanFor(op, call.attrs, call.inputs, call.outputs, s_->options.allow_tf32, &plan),
                           "node '" + std::string(node) + "'");
  return Enqueue(op, plan, call, node, /*plan_only=*/true);
}

Status BlasLibrary::Enqueue(std::string_view op, const LtMatmulPlan& plan, const OpCall& call,
                             std::string_view node, bool plan_only) {
  if (plan.empty) return Status::Ok();
  const CallName what{op, node};  // formatted only for an error (a steady-state Run builds no string)
  Buffers buf;
  buf.a = call.inputs[plan.a_input].data;
  buf.b = call.inputs[plan.b_input].data;
  buf.d = call.outputs[0].data;
  buf.c = plan.c_input >= 0 ? call.inputs[plan.c_input].data : buf.d;
  buf.bias = plan.bias_input >= 0 ? call.inputs[plan.bias_input].data : 0;
  if (buf.a == 0 || buf.b == 0 || buf.c == 0 || buf.d == 0 || (plan.bias_input >= 0 && buf.bias == 0)) {
    return InvalidArgument(what.str() + ": a null device pointer");
  }
  KILN_ASSIGN_OR_RETURN(const CachedMatmul* entry, s_->Find(plan, buf, what));
  if (plan_only) return Status::Ok();
  if (entry->workspace > call.workspace_bytes) {
    return InvalidArgument(what.str() + ": the algorithm needs " + std::to_string(entry->workspace) +
                           " workspace bytes, the call has " + std::to_string(call.workspace_bytes));
  }
  if (entry->workspace > 0 && call.workspace % kWorkspaceAlign != 0) {
    return InvalidArgument(what.str() + ": workspace is not " + std::to_string(kWorkspaceAlign) + "-byte aligned");
  }
  if (plan.bias_input >= 0) {
    // The descriptor is shared by every call of this problem; only the pointer changes.
    const void* bias = Ptr(buf.bias);
    const cublasStatus_t set =
        s_->blas->MatmulDescSetAttribute(entry->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    if (set != CUBLAS_STATUS_SUCCESS)
      return CheckBlas(*s_->blas, set, what.str() + ": cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  }
  // Host scalars (CUBLASLT_POINTER_MODE_HOST, the default): read before cublasLtMatmul returns,
  // of the scale type.
  const float alpha_f = plan.alpha, beta_f = plan.beta;
  const int32_t alpha_i = static_cast<int32_t>(plan.alpha), beta_i = static_cast<int32_t>(plan.beta);
  const bool int_scale = plan.scale_type == CUDA_R_32I;
  const void* alpha = int_scale ? static_cast<const void*>(&alpha_i) : &alpha_f;
  const void* beta = int_scale ? static_cast<const void*>(&beta_i) : &beta_f;
  void* workspace = entry->workspace > 0 ? Ptr(call.workspace) : nullptr;
  const size_t workspace_bytes = entry->workspace > 0 ? call.workspace_bytes : 0;
  const cublasStatus_t st = s_->blas->Matmul(s_->handle, entry->desc, alpha, Ptr(buf.a), entry->a, Ptr(buf.b),
                                             entry->b, beta, Ptr(buf.c), entry->d, Ptr(buf.d), entry->d,
                                             &entry->algo, workspace, workspace_bytes, call.stream);
  if (st == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  Status result = CheckBlas(*s_->blas, st, what.str() + ": cublasLtMatmul");
  // Refused when it runs (no kernel for this configuration after all): kUnimplemented, as when
  // no algorithm is found, so that the CUDA backend runs the op on the CPU and says why.
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return Status(StatusCode::kUnimplemented, std::string(result.message()));
  return result;
}

size_t BlasLibrary::cached_plans() const { return s_->cache.size(); }

}  // namespace kiln::cuda
