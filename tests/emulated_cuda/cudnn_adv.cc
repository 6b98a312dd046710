// Emulated cuDNN 9: the RNN API of the cudnn_adv library, as far as Kiln uses it
// (runtime/cuda/rnn.cc): RNN and RNN data descriptors, the weight space and its parameters, the
// temporary space sizes, and cudnnRNNForward. Written from NVIDIA's cuDNN API reference
// (cudnn_adv library: cudnnSetRNNDescriptor_v8, cudnnSetRNNDataDescriptor,
// cudnnGetRNNWeightParams, cudnnGetRNNTempSpaceSizes, cudnnRNNForward, and the cell equations of
// cudnnRNNMode_t); nothing is shared with Kiln's runtime.
//
// The cells (cudnnRNNMode_t; W the input matrices, R the recurrent ones, b_W / b_R their biases):
//   CUDNN_RNN_RELU / _TANH  h_t = act(W x_t + R h_t-1 + b_W + b_R)                     linLayerID 0 (W), 1 (R)
//   CUDNN_LSTM              i, f, o = sigmoid(W_g x_t + R_g h_t-1 + b_Wg + b_Rg); c' = tanh(same with g = c');
//                           c_t = f * c_t-1 + i * c'; h_t = o * tanh(c_t)        linLayerID 0/4 i, 1/5 f, 2/6 c', 3/7 o
//   CUDNN_GRU               i, r = sigmoid(W_g x_t + R_g h_t-1 + b_Wg + b_Rg);
//                           h' = tanh(W_h x_t + b_Wh + r * (R_h h_t-1 + b_Rh)); h_t = (1 - i) * h' + i * h_t-1
//                                                                             linLayerID 0/3 r, 1/4 i (update), 2/5 h'
// A bidirectional layer runs its second pseudo-layer from each sequence's last step back to its
// first, and concatenates the two outputs per step ([.., 2 * hidden]); a layer above the first
// reads the one below's output.
//
// The weight space (this emulation's layout; cuDNN's own is opaque and queried the same way,
// through cudnnGetRNNWeightParams): per pseudo-layer (layer * dirs + dir), each linLayerID's
// matrix (rows hidden, cols the layer's input size for the input matrices, hidden for the
// recurrent ones; row-major), then the biases the bias mode has (hidden each), in linLayerID
// order. Elements of the descriptor's data type.
//
// What runs: CUDNN_RNN_ALGO_STANDARD, CUDNN_LINEAR_INPUT, projSize == hiddenSize, no dropout
// descriptor (NULL), data CUDNN_DATA_FLOAT (math FLOAT) or CUDNN_DATA_HALF (math HALF or FLOAT),
// the layouts SEQ_MAJOR_UNPACKED and BATCH_MAJOR_UNPACKED (which need
// CUDNN_RNN_PADDED_IO_ENABLED, as cuDNN requires). Everything computes in double from the stored
// elements and rounds each output element once; the state carried from step to step stays in
// double. Padding positions of y (steps at or past a sequence's length) get the data
// descriptor's paddingFill, or are left as they are when it was NULL. Refused with
// CUDNN_STATUS_NOT_SUPPORTED: the other algorithms, SKIP_INPUT, projections, dropout
// descriptors, SEQ_MAJOR_PACKED, other data types; BAD_PARAM for descriptors that disagree with
// each other, sizes that are not the queried ones, and device pointers that are not device
// memory of the needed extent (hx, cx, hy and cy may be NULL: zero initial state, no final
// state written). devSeqLengths must be device memory holding batchSize int32 values; the
// lengths used are the data descriptor's (cuDNN's devSeqLengths is a copy of them).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tests/emulated_cuda/cudnn_internal.h"
#include "tests/emulated_cuda/half.h"

struct cudnnRNNStruct {
  bool set = false;
  cudnnRNNMode_t cell = CUDNN_LSTM;
  cudnnRNNBiasMode_t bias = CUDNN_RNN_DOUBLE_BIAS;
  int dirs = 1;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  int input = 0, hidden = 0, layers = 0;
  bool padded_io = false;  // CUDNN_RNN_PADDED_IO_ENABLED
};

struct cudnnRNNDataStruct {
  bool set = false;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  cudnnRNNDataLayout_t layout = CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
  int max_seq = 0, batch = 0, vec = 0;
  std::vector<int> lengths;
  bool fill = false;
  double fill_value = 0;
};

using namespace kiln::emulated_cuda::dnn;  // NOLINT: the C entry points below are the API

namespace {

using kiln::emulated_cuda::FloatToHalf;
using kiln::emulated_cuda::HalfToFloat;

int Gates(cudnnRNNMode_t cell) { return cell == CUDNN_LSTM ? 4 : cell == CUDNN_GRU ? 3 : 1; }

// Whether linLayerID `l` of a cell with `g` gates has a bias in `mode`.
bool HasBias(cudnnRNNBiasMode_t mode, int l, int g) {
  return mode == CUDNN_RNN_DOUBLE_BIAS || (mode == CUDNN_RNN_SINGLE_INP_BIAS && l < g) ||
         (mode == CUDNN_RNN_SINGLE_REC_BIAS && l >= g);
}

// The weight space's layout (see the top of the file), in elements.
struct Layout {
  const cudnnRNNStruct& r;
  int64_t LayerInput(int pseudo) const { return pseudo < r.dirs ? r.input : int64_t{r.hidden} * r.dirs; }
  int64_t Cols(int pseudo, int l) const { return l < Gates(r.cell) ? LayerInput(pseudo) : r.hidden; }
  int64_t PseudoElements(int pseudo) const {
    int64_t n = 0;
    const int g = Gates(r.cell);
    for (int l = 0; l < 2 * g; ++l) n += r.hidden * Cols(pseudo, l) + (HasBias(r.bias, l, g) ? r.hidden : 0);
    return n;
  }
  int64_t PseudoBegin(int pseudo) const {
    int64_t n = 0;
    for (int p = 0; p < pseudo; ++p) n += PseudoElements(p);
    return n;
  }
  int64_t Matrix(int pseudo, int l) const {
    int64_t n = PseudoBegin(pseudo);
    for (int k = 0; k < l; ++k) n += r.hidden * Cols(pseudo, k);
    return n;
  }
  // -1 when linLayerID `l` has no bias.
  int64_t Bias(int pseudo, int l) const {
    const int g = Gates(r.cell);
    if (!HasBias(r.bias, l, g)) return -1;
    int64_t n = Matrix(pseudo, 2 * g);
    for (int k = 0; k < l; ++k) n += HasBias(r.bias, k, g) ? r.hidden : 0;
    return n;
  }
  int64_t Elements() const { return PseudoBegin(r.layers * r.dirs); }
};

double Load(cudnnDataType_t dtype, const void* base, int64_t i) {
  if (dtype == CUDNN_DATA_HALF) return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
  return static_cast<const float*>(base)[i];
}
void Store(cudnnDataType_t dtype, void* base, int64_t i, double v) {
  if (dtype == CUDNN_DATA_HALF) static_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v));
  else static_cast<float*>(base)[i] = static_cast<float>(v);
}

double Sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

cudnnStatus_t NeedRnn(std::string_view call, const cudnnRNNStruct* d) {
  if (d == nullptr || !IsLive(d, Kind::kRnn))
    return Fail(call, CUDNN_STATUS_BAD_PARAM, "rnnDesc is NULL or not a live RNN descriptor");
  if (!d->set) return Fail(call, CUDNN_STATUS_BAD_PARAM, "rnnDesc has not been set (cudnnSetRNNDescriptor_v8)");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t NeedRnnData(std::string_view call, const char* what, const cudnnRNNDataStruct* d) {
  if (d == nullptr || !IsLive(d, Kind::kRnnData))
    return Fail(call, CUDNN_STATUS_BAD_PARAM, std::string(what) + " is NULL or not a live RNN data descriptor");
  if (!d->set)
    return Fail(call, CUDNN_STATUS_BAD_PARAM, std::string(what) + " has not been set (cudnnSetRNNDataDescriptor)");
  return CUDNN_STATUS_SUCCESS;
}

// Element offset of (step t, batch b) in an unpacked RNN data buffer of vector size `vec`.
int64_t DataOffset(const cudnnRNNDataStruct& d, int64_t t, int64_t b, int64_t vec) {
  return d.layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED ? (t * d.batch + b) * vec : (b * d.max_seq + t) * vec;
}

size_t WorkspaceBytes(const cudnnRNNStruct& r, int batch) {
  // The gate pre-activations of one step of every direction, in float.
  return static_cast<size_t>(batch) * r.dirs * Gates(r.cell) * r.hidden * sizeof(float);
}

// One forward pass over every layer, direction, sequence and step (the equations above).
void Forward(const cudnnRNNStruct r, const cudnnRNNDataStruct xd, const void* x, const cudnnRNNDataStruct yd,
             void* y, const void* hx, void* hy, const void* cx, void* cy, const void* w) {
  const Layout lay{r};
  const int g = Gates(r.cell);
  const int64_t H = r.hidden, N = xd.batch, T = xd.max_seq;
  const cudnnDataType_t dt = r.dtype;
  // The current layer's input, per (t, b): the data, then each layer's output.
  std::vector<double> in(static_cast<size_t>(T * N * r.input));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < N; ++b)
      for (int64_t i = 0; i < r.input; ++i)
        in[static_cast<size_t>((t * N + b) * r.input + i)] = Load(dt, x, DataOffset(xd, t, b, r.input) + i);
  int64_t in_size = r.input;
  std::vector<double> out;
  for (int layer = 0; layer < r.layers; ++layer) {
    out.assign(static_cast<size_t>(T * N * r.dirs * H), 0.0);
    for (int dir = 0; dir < r.dirs; ++dir) {
      const int p = layer * r.dirs + dir;
      auto weight = [&](int l, int64_t j, int64_t k) { return Load(dt, w, lay.Matrix(p, l) + j * lay.Cols(p, l) + k); };
      auto bias = [&](int l, int64_t j) {
        const int64_t at = lay.Bias(p, l);
        return at < 0 ? 0.0 : Load(dt, w, at + j);
      };
      for (int64_t b = 0; b < N; ++b) {
        std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H)), pre_x(static_cast<size_t>(g * H)),
            pre_h(static_cast<size_t>(g * H));
        for (int64_t j = 0; j < H; ++j) {
          const int64_t s = (p * N + b) * H + j;
          h[j] = hx ? Load(dt, hx, s) : 0.0;
          c[j] = cx ? Load(dt, cx, s) : 0.0;
        }
        const int64_t len = xd.lengths[static_cast<size_t>(b)];
        for (int64_t step = 0; step < len; ++step) {
          const int64_t t = dir == 0 ? step : len - 1 - step;
          const double* xt = in.data() + (t * N + b) * in_size;
          for (int gate = 0; gate < g; ++gate)
            for (int64_t j = 0; j < H; ++j) {
              double sx = bias(gate, j), sh = bias(g + gate, j);
              for (int64_t k = 0; k < in_size; ++k) sx += weight(gate, j, k) * xt[k];
              for (int64_t k = 0; k < H; ++k) sh += weight(g + gate, j, k) * h[k];
              pre_x[gate * H + j] = sx, pre_h[gate * H + j] = sh;
            }
          for (int64_t j = 0; j < H; ++j) {
            auto sum = [&](int gate) { return pre_x[gate * H + j] + pre_h[gate * H + j]; };
            if (r.cell == CUDNN_RNN_RELU) {
              h[j] = std::max(0.0, sum(0));
            } else if (r.cell == CUDNN_RNN_TANH) {
              h[j] = std::tanh(sum(0));
            } else if (r.cell == CUDNN_LSTM) {
              const double i = Sigmoid(sum(0)), f = Sigmoid(sum(1)), cc = std::tanh(sum(2)), o = Sigmoid(sum(3));
              c[j] = f * c[j] + i * cc;
              h[j] = o * std::tanh(c[j]);
            } else {  // CUDNN_GRU
              const double reset = Sigmoid(sum(0)), update = Sigmoid(sum(1));
              const double cand = std::tanh(pre_x[2 * H + j] + reset * pre_h[2 * H + j]);
              h[j] = (1.0 - update) * cand + update * h[j];
            }
          }
          for (int64_t j = 0; j < H; ++j) out[static_cast<size_t>(((t * N + b) * r.dirs + dir) * H + j)] = h[j];
        }
        for (int64_t j = 0; j < H; ++j) {
          const int64_t s = (p * N + b) * H + j;
          if (hy) Store(dt, hy, s, h[j]);
          if (cy && r.cell == CUDNN_LSTM) Store(dt, cy, s, c[j]);
        }
      }
    }
    in.swap(out);
    in_size = r.dirs * H;
  }
  const int64_t yv = r.dirs * H;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < N; ++b) {
      const bool pad = t >= yd.lengths[static_cast<size_t>(b)];
      if (pad && !yd.fill) continue;
      for (int64_t k = 0; k < yv; ++k)
        Store(dt, y, DataOffset(yd, t, b, yv) + k, pad ? yd.fill_value : in[static_cast<size_t>((t * N + b) * yv + k)]);
    }
}

}  // namespace

// cuDNN API reference, cudnn_adv library: cudnnAdvVersionCheck().
cudnnStatus_t cudnnAdvVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

// ---- RNN descriptors -------------------------------------------------------------------------

cudnnStatus_t cudnnCreateRNNDescriptor(cudnnRNNDescriptor_t* rnnDesc) {
  if (rnnDesc == nullptr) return Fail("cudnnCreateRNNDescriptor", CUDNN_STATUS_BAD_PARAM, "rnnDesc is NULL");
  *rnnDesc = new cudnnRNNStruct();
  Register(*rnnDesc, Kind::kRnn);
  return Ok();
}

cudnnStatus_t cudnnDestroyRNNDescriptor(cudnnRNNDescriptor_t rnnDesc) {
  if (rnnDesc == nullptr) return Ok();
  if (!IsLive(rnnDesc, Kind::kRnn))
    return Fail("cudnnDestroyRNNDescriptor", CUDNN_STATUS_BAD_PARAM, "the RNN descriptor is not live (destroyed twice?)");
  Unregister(rnnDesc);
  delete rnnDesc;
  return Ok();
}

// cuDNN API reference, cudnn_adv library: cudnnSetRNNDescriptor_v8(). See the top of the file
// for what is emulated.
cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t rnnDesc, cudnnRNNAlgo_t algo, cudnnRNNMode_t cellMode,
                                       cudnnRNNBiasMode_t biasMode, cudnnDirectionMode_t dirMode,
                                       cudnnRNNInputMode_t inputMode, cudnnDataType_t dataType,
                                       cudnnDataType_t mathPrec, cudnnMathType_t mathType, int32_t inputSize,
                                       int32_t hiddenSize, int32_t projSize, int32_t numLayers,
                                       cudnnDropoutDescriptor_t dropoutDesc, uint32_t auxFlags) {
  constexpr std::string_view kCall = "cudnnSetRNNDescriptor_v8";
  if (rnnDesc == nullptr || !IsLive(rnnDesc, Kind::kRnn))
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "rnnDesc is NULL or not a live RNN descriptor");
  if (cellMode < CUDNN_RNN_RELU || cellMode > CUDNN_GRU || biasMode < CUDNN_RNN_NO_BIAS ||
      biasMode > CUDNN_RNN_SINGLE_REC_BIAS || (dirMode != CUDNN_UNIDIRECTIONAL && dirMode != CUDNN_BIDIRECTIONAL) ||
      (inputMode != CUDNN_LINEAR_INPUT && inputMode != CUDNN_SKIP_INPUT) || algo < CUDNN_RNN_ALGO_STANDARD ||
      algo >= CUDNN_RNN_ALGO_COUNT || mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "an enumerant out of range (algo, cellMode, biasMode, dirMode, inputMode or mathType)");
  if (inputSize < 1 || hiddenSize < 1 || numLayers < 1 || projSize < 1 || projSize > hiddenSize)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "inputSize " + std::to_string(inputSize) + ", hiddenSize " + std::to_string(hiddenSize) +
                    ", projSize " + std::to_string(projSize) + " and numLayers " + std::to_string(numLayers) +
                    " must be positive, projSize at most hiddenSize");
  if ((auxFlags & ~uint32_t{CUDNN_RNN_PADDED_IO_ENABLED}) != 0)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "auxFlags " + std::to_string(auxFlags) + " has unknown bits");
  if (dataType == CUDNN_DATA_FLOAT ? mathPrec != CUDNN_DATA_FLOAT
                                   : dataType != CUDNN_DATA_HALF ||
                                         (mathPrec != CUDNN_DATA_HALF && mathPrec != CUDNN_DATA_FLOAT))
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "dataType " + DTypeName(dataType) + " with mathPrec " + DTypeName(mathPrec) +
                    " (emulated: FLOAT with FLOAT, HALF with HALF or FLOAT)");
  if (algo != CUDNN_RNN_ALGO_STANDARD || inputMode != CUDNN_LINEAR_INPUT || projSize != hiddenSize ||
      dropoutDesc != nullptr)
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED,
                "the emulation runs CUDNN_RNN_ALGO_STANDARD, CUDNN_LINEAR_INPUT, projSize == hiddenSize and no dropout "
                "descriptor only");
  cudnnRNNStruct r;
  r.set = true;
  r.cell = cellMode;
  r.bias = biasMode;
  r.dirs = dirMode == CUDNN_BIDIRECTIONAL ? 2 : 1;
  r.dtype = dataType;
  r.input = inputSize, r.hidden = hiddenSize, r.layers = numLayers;
  r.padded_io = (auxFlags & CUDNN_RNN_PADDED_IO_ENABLED) != 0;
  *rnnDesc = r;
  return Ok();
}

// ---- RNN data descriptors --------------------------------------------------------------------

cudnnStatus_t cudnnCreateRNNDataDescriptor(cudnnRNNDataDescriptor_t* rnnDataDesc) {
  if (rnnDataDesc == nullptr)
    return Fail("cudnnCreateRNNDataDescriptor", CUDNN_STATUS_BAD_PARAM, "rnnDataDesc is NULL");
  *rnnDataDesc = new cudnnRNNDataStruct();
  Register(*rnnDataDesc, Kind::kRnnData);
  return Ok();
}

cudnnStatus_t cudnnDestroyRNNDataDescriptor(cudnnRNNDataDescriptor_t rnnDataDesc) {
  if (rnnDataDesc == nullptr) return Ok();
  if (!IsLive(rnnDataDesc, Kind::kRnnData))
    return Fail("cudnnDestroyRNNDataDescriptor", CUDNN_STATUS_BAD_PARAM,
                "the RNN data descriptor is not live (destroyed twice?)");
  Unregister(rnnDataDesc);
  delete rnnDataDesc;
  return Ok();
}

// cuDNN API reference, cudnn_adv library: cudnnSetRNNDataDescriptor(). Each seqLengthArray
// element in [1, maxSeqLength]; paddingFill, when not NULL, a host value "interpreted as the same
// data type as that of the RNN data tensor".
cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t rnnDataDesc, cudnnDataType_t dataType,
                                        cudnnRNNDataLayout_t layout, int maxSeqLength, int batchSize,
                                        int vectorSize, const int seqLengthArray[], void* paddingFill) {
  constexpr std::string_view kCall = "cudnnSetRNNDataDescriptor";
  if (rnnDataDesc == nullptr || !IsLive(rnnDataDesc, Kind::kRnnData))
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "rnnDataDesc is NULL or not a live RNN data descriptor");
  if (maxSeqLength < 1 || batchSize < 1 || vectorSize < 1 || seqLengthArray == nullptr)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "maxSeqLength, batchSize and vectorSize must be positive and seqLengthArray not NULL");
  if (layout < CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED || layout > CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "layout " + std::to_string(static_cast<int>(layout)) + " is not a cudnnRNNDataLayout_t");
  if (layout == CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED)
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, "CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED is not emulated");
  if (dataType != CUDNN_DATA_FLOAT && dataType != CUDNN_DATA_HALF)
    return Fail(kCall, CUDNN_STATUS_NOT_SUPPORTED, DTypeName(dataType) + " (emulated: FLOAT and HALF)");
  cudnnRNNDataStruct d;
  d.set = true;
  d.dtype = dataType, d.layout = layout, d.max_seq = maxSeqLength, d.batch = batchSize, d.vec = vectorSize;
  d.lengths.assign(seqLengthArray, seqLengthArray + batchSize);
  for (int b = 0; b < batchSize; ++b)
    if (d.lengths[static_cast<size_t>(b)] < 1 || d.lengths[static_cast<size_t>(b)] > maxSeqLength)
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  "seqLengthArray[" + std::to_string(b) + "] is " + std::to_string(d.lengths[static_cast<size_t>(b)]) +
                      ", outside [1, maxSeqLength " + std::to_string(maxSeqLength) + "]");
  if (paddingFill != nullptr) {
    d.fill = true;
    d.fill_value = dataType == CUDNN_DATA_HALF ? HalfToFloat(*static_cast<const uint16_t*>(paddingFill))
                                               : *static_cast<const float*>(paddingFill);
  }
  *rnnDataDesc = d;
  return Ok();
}

// ---- Weight space ------------------------------------------------------------------------------

cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc, size_t* weightSpaceSize) {
  constexpr std::string_view kCall = "cudnnGetRNNWeightSpaceSize";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedRnn(kCall, rnnDesc));
  KILN_DNN_TRY(NeedHost(kCall, "weightSpaceSize", weightSpaceSize));
  *weightSpaceSize = static_cast<size_t>(Layout{*rnnDesc}.Elements()) * ElemSize(rnnDesc->dtype);
  return Ok();
}

// cuDNN API reference, cudnn_adv library: cudnnGetRNNWeightParams(). mDesc gets the matrix's
// shape as {1, rows, cols} and bDesc the bias's as {1, rows, 1} (packed strides, the RNN's data
// type); a linLayerID without a bias in the bias mode gets a bDesc of 0 dims and *bAddr NULL.
// mDesc, mAddr, bDesc and bAddr may each be NULL (not written).
cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc, int32_t pseudoLayer,
                                      size_t weightSpaceSize, const void* weightSpace, int32_t linLayerID,
                                      cudnnTensorDescriptor_t mDesc, void** mAddr, cudnnTensorDescriptor_t bDesc,
                                      void** bAddr) {
  constexpr std::string_view kCall = "cudnnGetRNNWeightParams";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedRnn(kCall, rnnDesc));
  const cudnnRNNStruct& r = *rnnDesc;
  const Layout lay{r};
  const size_t elem = ElemSize(r.dtype);
  if (weightSpaceSize != static_cast<size_t>(lay.Elements()) * elem)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "weightSpaceSize " + std::to_string(weightSpaceSize) + " is not cudnnGetRNNWeightSpaceSize's " +
                    std::to_string(static_cast<size_t>(lay.Elements()) * elem));
  const int g = Gates(r.cell);
  if (pseudoLayer < 0 || pseudoLayer >= r.layers * r.dirs || linLayerID < 0 || linLayerID >= 2 * g)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "pseudoLayer " + std::to_string(pseudoLayer) + " or linLayerID " + std::to_string(linLayerID) +
                    " is out of range (" + std::to_string(r.layers * r.dirs) + " pseudo-layers, " +
                    std::to_string(2 * g) + " linear layers)");
  for (cudnnTensorDescriptor_t d : {mDesc, bDesc})
    if (d != nullptr && !IsLive(d, Kind::kTensor))
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "mDesc or bDesc is not a live tensor descriptor");
  const auto at = [&](int64_t element) {
    return static_cast<void*>(static_cast<char*>(const_cast<void*>(weightSpace)) + element * static_cast<int64_t>(elem));
  };
  const int64_t cols = lay.Cols(pseudoLayer, linLayerID), bias = lay.Bias(pseudoLayer, linLayerID);
  if (mDesc != nullptr) {
    cudnnTensorStruct t;
    t.set = true, t.dtype = r.dtype, t.nb = 3;
    const int64_t dims[3] = {1, r.hidden, cols}, strides[3] = {r.hidden * cols, cols, 1};
    std::copy(dims, dims + 3, t.dims), std::copy(strides, strides + 3, t.strides);
    *mDesc = t;
  }
  if (mAddr != nullptr) *mAddr = weightSpace ? at(lay.Matrix(pseudoLayer, linLayerID)) : nullptr;
  if (bDesc != nullptr) {
    cudnnTensorStruct t;
    t.set = true, t.dtype = r.dtype, t.nb = bias < 0 ? 0 : 3;
    const int64_t dims[3] = {1, r.hidden, 1}, strides[3] = {r.hidden, 1, 1};
    std::copy(dims, dims + 3, t.dims), std::copy(strides, strides + 3, t.strides);
    *bDesc = t;
  }
  if (bAddr != nullptr) *bAddr = weightSpace && bias >= 0 ? at(bias) : nullptr;
  return Ok();
}

// cuDNN API reference, cudnn_adv library: cudnnGetRNNTempSpaceSizes(). The workspace holds one
// step's gate pre-activations of every direction (float); the reserve space, needed in training
// only, every step's gates (0 in inference).
cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc,
                                        cudnnForwardMode_t fwdMode, cudnnRNNDataDescriptor_t xDesc,
                                        size_t* workSpaceSize, size_t* reserveSpaceSize) {
  constexpr std::string_view kCall = "cudnnGetRNNTempSpaceSizes";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedRnn(kCall, rnnDesc));
  KILN_DNN_TRY(NeedRnnData(kCall, "xDesc", xDesc));
  if (fwdMode != CUDNN_FWD_MODE_INFERENCE && fwdMode != CUDNN_FWD_MODE_TRAINING)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "fwdMode " + std::to_string(static_cast<int>(fwdMode)));
  if (workSpaceSize) *workSpaceSize = WorkspaceBytes(*rnnDesc, xDesc->batch);
  if (reserveSpaceSize)
    *reserveSpaceSize = fwdMode == CUDNN_FWD_MODE_INFERENCE
                            ? 0
                            : static_cast<size_t>(xDesc->max_seq) * xDesc->batch * rnnDesc->layers * rnnDesc->dirs *
                                  Gates(rnnDesc->cell) * rnnDesc->hidden * ElemSize(rnnDesc->dtype);
  return Ok();
}

// ---- cudnnRNNForward ---------------------------------------------------------------------------

// cuDNN API reference, cudnn_adv library: cudnnRNNForward(). See the top of the file.
cudnnStatus_t cudnnRNNForward(cudnnHandle_t handle, cudnnRNNDescriptor_t rnnDesc, cudnnForwardMode_t fwdMode,
                              const int32_t devSeqLengths[], cudnnRNNDataDescriptor_t xDesc, const void* x,
                              cudnnRNNDataDescriptor_t yDesc, void* y, cudnnTensorDescriptor_t hDesc,
                              const void* hx, void* hy, cudnnTensorDescriptor_t cDesc, const void* cx, void* cy,
                              size_t weightSpaceSize, const void* weightSpace, size_t workSpaceSize, void* workSpace,
                              size_t reserveSpaceSize, void* reserveSpace) {
  constexpr std::string_view kCall = "cudnnRNNForward";
  KILN_DNN_TRY(NeedHandle(kCall, handle));
  KILN_DNN_TRY(NeedRnn(kCall, rnnDesc));
  KILN_DNN_TRY(NeedRnnData(kCall, "xDesc", xDesc));
  KILN_DNN_TRY(NeedRnnData(kCall, "yDesc", yDesc));
  const cudnnRNNStruct r = *rnnDesc;
  const cudnnRNNDataStruct xd = *xDesc, yd = *yDesc;
  if (fwdMode != CUDNN_FWD_MODE_INFERENCE && fwdMode != CUDNN_FWD_MODE_TRAINING)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "fwdMode " + std::to_string(static_cast<int>(fwdMode)));
  if (!r.padded_io)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "unpacked (padded) RNN data needs CUDNN_RNN_PADDED_IO_ENABLED in the RNN descriptor's auxFlags");
  const int64_t H = r.hidden, yv = static_cast<int64_t>(r.dirs) * H;
  if (xd.dtype != r.dtype || yd.dtype != r.dtype || xd.vec != r.input || yd.vec != yv || xd.layout != yd.layout ||
      xd.max_seq != yd.max_seq || xd.batch != yd.batch || xd.lengths != yd.lengths)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "xDesc (vector " + std::to_string(xd.vec) + ") and yDesc (vector " + std::to_string(yd.vec) +
                    ") must agree with each other (type, layout, lengths, batch) and with rnnDesc (inputSize " +
                    std::to_string(r.input) + ", output vector " + std::to_string(yv) + ")");
  const int64_t state[3] = {static_cast<int64_t>(r.layers) * r.dirs, xd.batch, H};
  for (const auto& [desc, what] : {std::pair{hDesc, "hDesc"}, std::pair{cDesc, "cDesc"}}) {
    if (desc == cDesc && r.cell != CUDNN_LSTM) break;
    KILN_DNN_TRY(NeedTensor(kCall, what, desc));
    const View v = ViewOf(*desc);
    if (v.nb != 3 || !std::equal(state, state + 3, v.dims) || v.strides[0] != state[1] * H || v.strides[1] != H ||
        v.strides[2] != 1 || v.dtype != r.dtype)
      return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                  std::string(what) + " " + v.Describe() + " is not the packed [" + std::to_string(state[0]) + ", " +
                      std::to_string(state[1]) + ", " + std::to_string(H) + "] of the RNN's type");
  }
  const size_t elem = ElemSize(r.dtype);
  const size_t weights = static_cast<size_t>(Layout{r}.Elements()) * elem, ws = WorkspaceBytes(r, xd.batch);
  if (weightSpaceSize != weights)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "weightSpaceSize " + std::to_string(weightSpaceSize) + " is not " + std::to_string(weights));
  if (workSpaceSize < ws)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM,
                "workSpaceSize " + std::to_string(workSpaceSize) + " is below cudnnGetRNNTempSpaceSizes's " +
                    std::to_string(ws));
  if (fwdMode == CUDNN_FWD_MODE_TRAINING && reserveSpace == nullptr)
    return Fail(kCall, CUDNN_STATUS_BAD_PARAM, "training needs a reserve space");
  (void)reserveSpaceSize;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const size_t data = static_cast<size_t>(xd.max_seq) * xd.batch;
  const size_t states = static_cast<size_t>(state[0] * state[1] * H) * elem;
  if (!DeviceBytes(kCall, "devSeqLengths", devSeqLengths, static_cast<size_t>(xd.batch) * sizeof(int32_t),
                   "batchSize int32 lengths", &st))
    return st;
  const void* xh = DeviceBytes(kCall, "x", x, data * xd.vec * elem, "the RNN data of xDesc", &st);
  if (!xh) return st;
  void* yh = DeviceBytes(kCall, "y", y, data * yd.vec * elem, "the RNN data of yDesc", &st);
  if (!yh) return st;
  const void* wh = DeviceBytes(kCall, "weightSpace", weightSpace, weights, "the weight space", &st);
  if (!wh) return st;
  if (ws > 0 && !DeviceBytes(kCall, "workSpace", workSpace, ws, "the workspace", &st)) return st;
  const void* state_in[2] = {hx, cx};
  void* state_out[2] = {hy, cy};
  const void* in_host[2] = {};
  void* out_host[2] = {};
  for (int i = 0; i < (r.cell == CUDNN_LSTM ? 2 : 1); ++i) {
    const char* names[4] = {"hx", "cx", "hy", "cy"};
    if (state_in[i] && !(in_host[i] = DeviceBytes(kCall, names[i], state_in[i], states, "a state", &st))) return st;
    if (state_out[i] && !(out_host[i] = DeviceBytes(kCall, names[2 + i], state_out[i], states, "a state", &st)))
      return st;
  }
  return Launch(kCall, handle, [=] { Forward(r, xd, xh, yd, yh, in_host[0], out_host[0], in_host[1], out_host[1], wh); });
}
