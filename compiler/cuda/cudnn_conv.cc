#include "compiler/cuda/cudnn_conv.h"

#include <cudnn.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace pjrt::compiler::cuda {
namespace {

using hlo::PrimitiveType;

absl::Status CudnnError(cudnnStatus_t status, absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrFormat("%s failed: %s", what, cudnnGetErrorString(status)));
}

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  Descriptor() = default;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor(Descriptor&& other) noexcept
      : d_(std::exchange(other.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(d_, other.d_);
    return *this;
  }
  ~Descriptor() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }

  static absl::StatusOr<Descriptor> Create(cudnnBackendDescriptorType_t type) {
    Descriptor d;
    PJRT_RETURN_IF_ERROR(CudnnError(cudnnBackendCreateDescriptor(type, &d.d_),
                                    "cudnnBackendCreateDescriptor"));
    return d;
  }

  cudnnBackendDescriptor_t get() const { return d_; }

  template <typename T>
  absl::Status Set(cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t count,
                   const T* values) {
    return CudnnError(cudnnBackendSetAttribute(d_, name, type, count, values),
                      absl::StrCat("cudnnBackendSetAttribute(", name, ")"));
  }
  absl::Status SetInts(cudnnBackendAttributeName_t name,
                       const std::vector<int64_t>& values) {
    return Set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()),
               values.data());
  }
  absl::Status SetInt(cudnnBackendAttributeName_t name, int64_t value) {
    return Set(name, CUDNN_TYPE_INT64, 1, &value);
  }
  absl::Status SetDescriptor(cudnnBackendAttributeName_t name,
                             const Descriptor& value) {
    cudnnBackendDescriptor_t d = value.get();
    return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  absl::Status Finalize(absl::string_view what) {
    return CudnnError(cudnnBackendFinalize(d_),
                      absl::StrCat("finalizing cuDNN's ", what));
  }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Unique ids of the three tensors in a variant pack.
constexpr int64_t kX = 'x', kW = 'w', kY = 'y';

absl::StatusOr<cudnnDataType_t> CudnnType(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF16:
      return CUDNN_DATA_HALF;
    case PrimitiveType::kBf16:
      return CUDNN_DATA_BFLOAT16;
    case PrimitiveType::kF32:
      return CUDNN_DATA_FLOAT;
    case PrimitiveType::kF64:
      return CUDNN_DATA_DOUBLE;
    default:
      return absl::UnimplementedError(
          absl::StrFormat("cuDNN convolutions of %s are not used",
                          hlo::PrimitiveTypeName(type)));
  }
}

absl::StatusOr<Descriptor> Tensor(cudnnDataType_t type, int64_t id,
                                  const std::vector<int64_t>& dims,
                                  const std::vector<int64_t>& strides) {
  PJRT_ASSIGN_OR_RETURN(Descriptor t,
                        Descriptor::Create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  PJRT_RETURN_IF_ERROR(
      t.Set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  PJRT_RETURN_IF_ERROR(t.SetInts(CUDNN_ATTR_TENSOR_DIMENSIONS, dims));
  PJRT_RETURN_IF_ERROR(t.SetInts(CUDNN_ATTR_TENSOR_STRIDES, strides));
  PJRT_RETURN_IF_ERROR(t.SetInt(CUDNN_ATTR_TENSOR_UNIQUE_ID, id));
  PJRT_RETURN_IF_ERROR(
      t.SetInt(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kCudnnAlignment));
  PJRT_RETURN_IF_ERROR(t.Finalize("tensor descriptor"));
  return t;
}

// The convolution operation of `p` (forward, backward data or backward
// filter), finalized, with the descriptors it refers to, which must
// outlive it.
struct Operation {
  Descriptor x, w, y, conv, op;
};

absl::StatusOr<Operation> Describe(const CudnnConvProblem& p) {
  PJRT_ASSIGN_OR_RETURN(const cudnnDataType_t type, CudnnType(p.type));
  const bool f64 = p.type == PrimitiveType::kF64;
  const cudnnDataType_t compute = f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  Operation o;
  PJRT_ASSIGN_OR_RETURN(o.x, Tensor(type, kX, p.x_dims, p.x_strides));
  PJRT_ASSIGN_OR_RETURN(o.w, Tensor(type, kW, p.w_dims, p.w_strides));
  PJRT_ASSIGN_OR_RETURN(o.y, Tensor(type, kY, p.y_dims, p.y_strides));
  PJRT_ASSIGN_OR_RETURN(
      o.conv, Descriptor::Create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  // A reversed filter is reversed by its copy: not every engine takes
  // CUDNN_CONVOLUTION.
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  PJRT_RETURN_IF_ERROR(o.conv.Set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
                                  CUDNN_TYPE_DATA_TYPE, 1, &compute));
  PJRT_RETURN_IF_ERROR(o.conv.Set(CUDNN_ATTR_CONVOLUTION_CONV_MODE,
                                  CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  PJRT_RETURN_IF_ERROR(
      o.conv.SetInt(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS,
                    static_cast<int64_t>(p.pre_padding.size())));
  PJRT_RETURN_IF_ERROR(
      o.conv.SetInts(CUDNN_ATTR_CONVOLUTION_DILATIONS, p.dilations));
  PJRT_RETURN_IF_ERROR(
      o.conv.SetInts(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, p.strides));
  PJRT_RETURN_IF_ERROR(
      o.conv.SetInts(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, p.pre_padding));
  PJRT_RETURN_IF_ERROR(
      o.conv.SetInts(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, p.post_padding));
  PJRT_RETURN_IF_ERROR(o.conv.Finalize("convolution descriptor"));
  // The operation and its attributes, by direction.
  struct Names {
    cudnnBackendDescriptorType_t op;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
    const char* what;
  };
  static constexpr Names kForward = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
      "convolution forward operation"};
  static constexpr Names kBackwardData = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
      "convolution backward-data operation"};
  static constexpr Names kBackwardFilter = {
      CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
      CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
      "convolution backward-filter operation"};
  using Direction = CudnnConvProblem::Direction;
  const Names& n = p.direction == Direction::kForward        ? kForward
                   : p.direction == Direction::kBackwardData ? kBackwardData
                                                             : kBackwardFilter;
  PJRT_ASSIGN_OR_RETURN(o.op, Descriptor::Create(n.op));
  PJRT_RETURN_IF_ERROR(o.op.SetDescriptor(n.x, o.x));
  PJRT_RETURN_IF_ERROR(o.op.SetDescriptor(n.w, o.w));
  PJRT_RETURN_IF_ERROR(o.op.SetDescriptor(n.y, o.y));
  PJRT_RETURN_IF_ERROR(o.op.SetDescriptor(n.conv, o.conv));
  const double alpha64 = 1, beta64 = 0;
  const float alpha32 = 1, beta32 = 0;
  if (f64) {
    PJRT_RETURN_IF_ERROR(o.op.Set(n.alpha, CUDNN_TYPE_DOUBLE, 1, &alpha64));
    PJRT_RETURN_IF_ERROR(o.op.Set(n.beta, CUDNN_TYPE_DOUBLE, 1, &beta64));
  } else {
    PJRT_RETURN_IF_ERROR(o.op.Set(n.alpha, CUDNN_TYPE_FLOAT, 1, &alpha32));
    PJRT_RETURN_IF_ERROR(o.op.Set(n.beta, CUDNN_TYPE_FLOAT, 1, &beta32));
  }
  PJRT_RETURN_IF_ERROR(o.op.Finalize(n.what));
  return o;
}

// True when an engine with `notes` computes `type` as XLA does.
bool NumericsMatch(PrimitiveType type,
                   const std::vector<cudnnBackendNumericalNote_t>& notes) {
  const bool narrow =
      type == PrimitiveType::kF16 || type == PrimitiveType::kBf16;
  for (cudnnBackendNumericalNote_t note : notes) {
    switch (note) {
      case CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC:
      case CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION:
      case CUDNN_NUMERICAL_NOTE_FFT:  // errors scale with the largest value
        return false;
      case CUDNN_NUMERICAL_NOTE_TENSOR_CORE:
      case CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS:
        if (!narrow) return false;
        break;
      default:
        break;
    }
  }
  return true;
}

class Plan : public CudnnConvPlan {
 public:
  Plan(Operation operation, Descriptor graph, Descriptor config,
       Descriptor plan, int64_t engine, int64_t workspace)
      : operation_(std::move(operation)),
        graph_(std::move(graph)),
        config_(std::move(config)),
        plan_(std::move(plan)),
        engine_(engine),
        workspace_(workspace) {}

  int64_t engine() const override { return engine_; }
  int64_t workspace_bytes() const override { return workspace_; }

  absl::Status Run(cudnnContext* handle, CUstream_st* stream, void* x, void* w,
                   void* y, void* workspace) const override {
    PJRT_RETURN_IF_ERROR(
        CudnnError(cudnnSetStream(handle, stream), "cudnnSetStream"));
    PJRT_ASSIGN_OR_RETURN(
        Descriptor pack,
        Descriptor::Create(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
    const int64_t ids[] = {kX, kW, kY};
    void* pointers[] = {x, w, y};
    PJRT_RETURN_IF_ERROR(
        pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, ids));
    PJRT_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                  CUDNN_TYPE_VOID_PTR, 3, pointers));
    PJRT_RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                  CUDNN_TYPE_VOID_PTR, 1, &workspace));
    PJRT_RETURN_IF_ERROR(pack.Finalize("variant pack"));
    return CudnnError(
        cudnnBackendExecute(handle, plan_.get(), pack.get()),
        absl::StrFormat("cudnnBackendExecute (engine %d)", engine_));
  }

 private:
  const Operation operation_;
  const Descriptor graph_;
  const Descriptor config_;  // the plan's engine configuration
  const Descriptor plan_;
  const int64_t engine_;
  const int64_t workspace_;
};

// The engine configurations cuDNN's heuristics in `mode` list for `graph`,
// best first.
absl::StatusOr<std::vector<Descriptor>> EngineConfigs(
    const Descriptor& graph, cudnnBackendHeurMode_t mode) {
  PJRT_ASSIGN_OR_RETURN(
      Descriptor heuristics,
      Descriptor::Create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  PJRT_RETURN_IF_ERROR(
      heuristics.SetDescriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  PJRT_RETURN_IF_ERROR(heuristics.Set(CUDNN_ATTR_ENGINEHEUR_MODE,
                                      CUDNN_TYPE_HEUR_MODE, 1, &mode));
  PJRT_RETURN_IF_ERROR(heuristics.Finalize("engine heuristics"));
  int64_t count = 0;
  PJRT_RETURN_IF_ERROR(CudnnError(
      cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr),
      "counting cuDNN's engine configurations"));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    PJRT_ASSIGN_OR_RETURN(
        Descriptor c, Descriptor::Create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(c.get());
    configs.push_back(std::move(c));
  }
  if (count == 0) return configs;
  int64_t got = 0;
  PJRT_RETURN_IF_ERROR(CudnnError(
      cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                               raw.data()),
      "reading cuDNN's engine configurations"));
  configs.resize(static_cast<size_t>(std::min(got, count)));
  return configs;
}

// The engine of `config`: its global index and numerical notes.
absl::Status ReadEngine(const Descriptor& config, int64_t* index,
                        std::vector<cudnnBackendNumericalNote_t>* notes) {
  PJRT_ASSIGN_OR_RETURN(Descriptor engine,
                        Descriptor::Create(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  cudnnBackendDescriptor_t raw = engine.get();
  int64_t n = 0;
  PJRT_RETURN_IF_ERROR(CudnnError(
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &raw),
      "reading an engine configuration's engine"));
  PJRT_RETURN_IF_ERROR(CudnnError(
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                               CUDNN_TYPE_INT64, 1, &n, index),
      "reading an engine's index"));
  notes->assign(CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                CUDNN_NUMERICAL_NOTE_TYPE_COUNT);
  PJRT_RETURN_IF_ERROR(CudnnError(
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                               CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n,
                               notes->data()),
      "reading an engine's numerical notes"));
  notes->resize(static_cast<size_t>(
      std::clamp<int64_t>(n, 0, CUDNN_NUMERICAL_NOTE_TYPE_COUNT)));
  return absl::OkStatus();
}

// The strides of `dims` packed with its dimensions in `order`, innermost
// first.
std::vector<int64_t> PackedStrides(const std::vector<int64_t>& dims,
                                   const std::vector<int>& order) {
  std::vector<int64_t> strides(dims.size(), 0);
  int64_t stride = 1;
  for (int d : order) {
    strides[d] = stride;
    stride *= dims[d];
  }
  return strides;
}

// True when `strides` are those of `dims` packed in `order` (a dimension
// of size 1 may have any stride).
bool IsPacked(const std::vector<int64_t>& dims,
              const std::vector<int64_t>& strides,
              const std::vector<int>& order) {
  const std::vector<int64_t> packed = PackedStrides(dims, order);
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] != 1 && strides[d] != packed[d]) return false;
  }
  return true;
}

}  // namespace

std::string CudnnConvProblem::ToString() const {
  const auto tensor = [](const char* name, const std::vector<int64_t>& dims,
                         const std::vector<int64_t>& strides) {
    return absl::StrFormat("%s[%s]/[%s]", name, absl::StrJoin(dims, ","),
                           absl::StrJoin(strides, ","));
  };
  std::vector<std::string> pads;
  for (size_t s = 0; s < pre_padding.size(); ++s) {
    pads.push_back(absl::StrCat(pre_padding[s], "_", post_padding[s]));
  }
  return absl::StrFormat(
      "%s%s %s %s %s %s%s, stride %s, dilation %s, pad %s%s",
      direction == Direction::kForward        ? ""
      : direction == Direction::kBackwardData ? "backward data: "
                                              : "backward filter: ",
      hlo::PrimitiveTypeName(type), channels_last ? "NHWC" : "NCHW",
      tensor("x", x_dims, x_strides), tensor("w", w_dims, w_strides),
      tensor("y", y_dims, y_strides),
      filter_strides == w_strides
          ? ""
          : absl::StrFormat(" (w copied from strides [%s])",
                            absl::StrJoin(filter_strides, ",")),
      absl::StrJoin(strides, "x"), absl::StrJoin(dilations, "x"),
      absl::StrJoin(pads, "x"), reversed ? ", filter reversed" : "");
}

namespace {

absl::Status Refuse(absl::string_view why) {
  return absl::UnimplementedError(
      absl::StrCat("cuDNN's convolutions take no ", why));
}

// One of XLA's operands (lhs, kernel or output) as cuDNN may read it: its
// two dimensions that are not spatial (batch and feature, or the kernel's
// input and output features), then its spatial ones.
struct Operand {
  int64_t first = 0, second = 0;  // sizes
  int64_t first_dim = 0, second_dim = 0;
  std::vector<int64_t> spatial, spatial_dims;
  const std::vector<int64_t>* strides = nullptr;  // by XLA dimension

  // cuDNN's dims and strides of it: [first, second, spatial...], or
  // [second, first, spatial...] when `swapped`; a single spatial dimension
  // gets a unit one before it, strided as if it were the next outer one
  // (NWC becomes NHWC with H = 1).
  void Place(bool swapped, std::vector<int64_t>* dims,
             std::vector<int64_t>* out_strides) const {
    const std::vector<int64_t>& st = *strides;
    *dims = {swapped ? second : first, swapped ? first : second};
    *out_strides = {st[swapped ? second_dim : first_dim],
                    st[swapped ? first_dim : second_dim]};
    if (spatial.size() == 1) {
      dims->push_back(1);
      out_strides->push_back(st[spatial_dims[0]] * spatial[0]);
    }
    for (size_t s = 0; s < spatial.size(); ++s) {
      dims->push_back(spatial[s]);
      out_strides->push_back(st[spatial_dims[s]]);
    }
  }
};

// XLA's lhs, kernel and output of `p`.
struct Operands {
  Operand lhs, kernel, out;
};

Operands OperandsOf(const host::ConvPlan& p) {
  const hlo::ConvolutionDimensions& d = p.dims;
  Operands o;
  o.lhs = {p.batch,      p.in_features,   d.input_batch, d.input_feature,
           p.in_spatial, d.input_spatial, &p.lhs_strides};
  o.kernel = {p.in_per_group,          p.out_features, d.kernel_input_feature,
              d.kernel_output_feature, p.taps,         d.kernel_spatial,
              &p.rhs_strides};
  o.out = {p.out_batch,   p.out_features,   d.output_batch, d.output_feature,
           p.out_spatial, d.output_spatial, &p.out_strides};
  return o;
}

// Sets the window of `c` from its spatial parts (a unit dimension first
// for a single one).
void SetWindow(std::vector<int64_t> pre, std::vector<int64_t> post,
               std::vector<int64_t> strides, std::vector<int64_t> dilations,
               CudnnConvProblem* c) {
  if (pre.size() == 1) {
    pre.insert(pre.begin(), 0);
    post.insert(post.begin(), 0);
    strides.insert(strides.begin(), 1);
    dilations.insert(dilations.begin(), 1);
  }
  c->pre_padding = std::move(pre);
  c->post_padding = std::move(post);
  c->strides = std::move(strides);
  c->dilations = std::move(dilations);
}

// The layout of `c`: x and y packed alike, channels last or first; w's
// strides become that layout's and filter_strides keep how it lies.
absl::Status ChooseLayout(CudnnConvProblem* c) {
  for (const std::vector<int64_t>* dims :
       {&c->x_dims, &c->w_dims, &c->y_dims}) {
    for (int64_t n : *dims) {
      if (n == 0) return Refuse("empty arrays");
    }
  }
  const int rank = static_cast<int>(c->x_dims.size());
  for (const bool last : {true, false}) {
    std::vector<int> order;  // innermost first
    if (last) order.push_back(1);
    for (int d = rank - 1; d >= 2; --d) order.push_back(d);
    if (!last) order.push_back(1);
    order.push_back(0);
    if (!IsPacked(c->x_dims, c->x_strides, order) ||
        !IsPacked(c->y_dims, c->y_strides, order)) {
      continue;
    }
    c->channels_last = last;
    // cuDNN reads a layout from the strides: those of unit dimensions too.
    c->x_strides = PackedStrides(c->x_dims, order);
    c->y_strides = PackedStrides(c->y_dims, order);
    c->filter_strides = c->w_strides;
    c->w_strides = PackedStrides(c->w_dims, order);
    if (IsPacked(c->w_dims, c->filter_strides, order)) {
      c->filter_strides = c->w_strides;
    }
    return absl::OkStatus();
  }
  return Refuse(absl::StrFormat(
      "activations other than both packed NHWC or NCHW (x strides [%s] for "
      "[%s], y strides [%s] for [%s], in N, C, spatial order)",
      absl::StrJoin(c->x_strides, ","), absl::StrJoin(c->x_dims, ","),
      absl::StrJoin(c->y_strides, ","), absl::StrJoin(c->y_dims, ",")));
}

// x = XLA's lhs, w its kernel, y its output.
absl::StatusOr<CudnnConvProblem> Forward(const host::ConvPlan& p,
                                         bool reversed) {
  CudnnConvProblem c;
  c.direction = CudnnConvProblem::Direction::kForward;
  c.type = p.out_type;
  c.reversed = reversed;
  std::vector<int64_t> pre, post, strides, dilations;
  for (const hlo::WindowDimension& w : p.window) {
    if (w.padding_low < 0 || w.padding_high < 0) {
      return Refuse("negative padding");
    }
    pre.push_back(w.padding_low);
    post.push_back(w.padding_high);
    strides.push_back(w.stride);
    dilations.push_back(w.window_dilation);
  }
  SetWindow(pre, post, strides, dilations, &c);
  const Operands o = OperandsOf(p);
  o.lhs.Place(false, &c.x_dims, &c.x_strides);
  o.kernel.Place(true, &c.w_dims, &c.w_strides);  // K its output features
  o.out.Place(false, &c.y_dims, &c.y_strides);
  PJRT_RETURN_IF_ERROR(ChooseLayout(&c));
  return c;
}

// Base dilation: dx = XLA's output, w its kernel (K its input features, C
// its output features, read reversed unless XLA reverses it), dy its lhs.
absl::StatusOr<CudnnConvProblem> BackwardData(const host::ConvPlan& p,
                                              bool reversed) {
  if (p.feature_groups > 1) {
    return Refuse("base (lhs) dilation with feature groups");
  }
  CudnnConvProblem c;
  c.direction = CudnnConvProblem::Direction::kBackwardData;
  c.type = p.out_type;
  c.reversed = !reversed;
  std::vector<int64_t> pre, post, strides, dilations;
  for (size_t s = 0; s < p.window.size(); ++s) {
    const hlo::WindowDimension& w = p.window[s];
    if (w.stride != 1) return Refuse("base (lhs) dilation with a stride");
    // The window is at most 2^31 taps of a dilation below 2^31 (the
    // verifier's bounds).
    const int64_t reach = (p.taps[s] - 1) * w.window_dilation;
    if (w.padding_low > reach || w.padding_high > reach) {
      return Refuse(absl::StrFormat(
          "base (lhs) dilation with padding past the window (%d_%d around a "
          "window reaching %d)",
          w.padding_low, w.padding_high, reach));
    }
    pre.push_back(reach - w.padding_low);
    post.push_back(reach - w.padding_high);
    strides.push_back(w.base_dilation);
    dilations.push_back(w.window_dilation);
  }
  SetWindow(pre, post, strides, dilations, &c);
  const Operands o = OperandsOf(p);
  o.out.Place(false, &c.x_dims, &c.x_strides);
  o.kernel.Place(false, &c.w_dims, &c.w_strides);  // K its input features
  o.lhs.Place(false, &c.y_dims, &c.y_strides);
  PJRT_RETURN_IF_ERROR(ChooseLayout(&c));
  return c;
}

// A filter gradient: x = XLA's lhs with its features as N and its batch
// as C, dy = its kernel (N its input features, K its output features, the
// window its spatial dimensions), dw = its output (K its features, C its
// batch); cuDNN's stride is XLA's window dilation and its dilation XLA's
// stride.
absl::StatusOr<CudnnConvProblem> BackwardFilter(const host::ConvPlan& p,
                                                bool reversed) {
  if (reversed) return Refuse("reversed window in a filter gradient");
  if (p.feature_groups > 1) return Refuse("feature groups");
  CudnnConvProblem c;
  c.direction = CudnnConvProblem::Direction::kBackwardFilter;
  c.type = p.out_type;
  std::vector<int64_t> pre, post, strides, dilations;
  for (size_t s = 0; s < p.window.size(); ++s) {
    const hlo::WindowDimension& w = p.window[s];
    if (w.padding_low < 0 || w.padding_high < 0) {
      return Refuse("negative padding");
    }
    // cuDNN's dy has the size its forward convolution gives; XLA's window
    // may be one that floor division makes fit too.
    const int64_t span = p.in_spatial[s] + w.padding_low + w.padding_high -
                         (p.out_spatial[s] - 1) * w.stride - 1;
    if (span < 0 || span / w.window_dilation + 1 != p.taps[s]) {
      return Refuse(
          "filter gradient whose window is not its forward "
          "convolution's output");
    }
    pre.push_back(w.padding_low);
    post.push_back(w.padding_high);
    strides.push_back(w.window_dilation);
    dilations.push_back(w.stride);
  }
  SetWindow(pre, post, strides, dilations, &c);
  const Operands o = OperandsOf(p);
  o.lhs.Place(true, &c.x_dims, &c.x_strides);  // N its features, C its batch
  o.out.Place(true, &c.w_dims, &c.w_strides);  // K its features, C its batch
  o.kernel.Place(false, &c.y_dims, &c.y_strides);
  PJRT_RETURN_IF_ERROR(ChooseLayout(&c));
  return c;
}

}  // namespace

absl::StatusOr<CudnnConvProblem> CudnnConvFor(const host::ConvPlan& p) {
  // bf16 or f16 operands summed into f32 (preferred_element_type): f32
  // on widened copies, whose products are theirs exactly.
  const bool widened =
      p.lhs_type == p.rhs_type && p.out_type == PrimitiveType::kF32 &&
      (p.lhs_type == PrimitiveType::kBf16 || p.lhs_type == PrimitiveType::kF16);
  if (!widened && (p.lhs_type != p.out_type || p.rhs_type != p.out_type)) {
    return Refuse(absl::StrFormat("mixed types (%s and %s into %s)",
                                  hlo::PrimitiveTypeName(p.lhs_type),
                                  hlo::PrimitiveTypeName(p.rhs_type),
                                  hlo::PrimitiveTypeName(p.out_type)));
  }
  PJRT_RETURN_IF_ERROR(CudnnType(p.out_type).status());
  if (p.spatial < 1 || p.spatial > 3) {
    return Refuse(
        absl::StrFormat("%d spatial dimensions (1 to 3 are taken)", p.spatial));
  }
  if (p.batch_groups > 1) return Refuse("batch groups");
  bool all_reversed = true, none_reversed = true, dilated = false;
  for (const hlo::WindowDimension& w : p.window) {
    all_reversed &= w.reversal;
    none_reversed &= !w.reversal;
    dilated |= w.base_dilation != 1;
  }
  if (!all_reversed && !none_reversed) {
    return Refuse("window reversed in some spatial dimensions only");
  }
  absl::StatusOr<CudnnConvProblem> c =
      dilated ? BackwardData(p, all_reversed) : Forward(p, all_reversed);
  if (!dilated && !c.ok()) {
    // Laid out as a filter gradient is (JAX's, for NHWC activations).
    absl::StatusOr<CudnnConvProblem> filter = BackwardFilter(p, all_reversed);
    if (filter.ok()) c = std::move(filter);
  }
  if (c.ok()) c->widened = widened;
  return c;
}

absl::Status CheckCudnnDescribes(const CudnnConvProblem& problem) {
  return Describe(problem).status();
}

absl::StatusOr<std::unique_ptr<CudnnConvPlan>> PlanCudnnConv(
    const CudnnConvProblem& problem, cudnnContext* handle,
    int64_t max_workspace) {
  PJRT_ASSIGN_OR_RETURN(Operation operation, Describe(problem));
  PJRT_ASSIGN_OR_RETURN(
      Descriptor graph,
      Descriptor::Create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  cudnnBackendDescriptor_t op = operation.op.get();
  PJRT_RETURN_IF_ERROR(graph.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
  cudnnHandle_t h = handle;
  PJRT_RETURN_IF_ERROR(
      graph.Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  PJRT_RETURN_IF_ERROR(graph.Finalize("operation graph"));
  // Heuristics' first choices, then the fallback list.
  std::vector<std::string> passed_over;
  for (cudnnBackendHeurMode_t mode :
       {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    absl::StatusOr<std::vector<Descriptor>> listed = EngineConfigs(graph, mode);
    if (!listed.ok()) {
      // The fallback list is a second chance, not a requirement.
      if (mode == CUDNN_HEUR_MODE_A) return listed.status();
      passed_over.push_back(
          absl::StrCat("the fallback list (", listed.status().message(), ")"));
      continue;
    }
    std::vector<Descriptor>& configs = *listed;
    for (Descriptor& config : configs) {
      int64_t engine = -1;
      std::vector<cudnnBackendNumericalNote_t> notes;
      if (!ReadEngine(config, &engine, &notes).ok()) continue;
      if (!NumericsMatch(problem.type, notes)) {
        passed_over.push_back(absl::StrCat(engine, " (numerics)"));
        continue;
      }
      absl::StatusOr<Descriptor> plan =
          Descriptor::Create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      if (!plan.ok()) return plan.status();
      PJRT_RETURN_IF_ERROR(plan->Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                                     CUDNN_TYPE_HANDLE, 1, &h));
      cudnnBackendDescriptor_t raw = config.get();
      PJRT_RETURN_IF_ERROR(plan->Set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw));
      if (!plan->Finalize("execution plan").ok()) {
        passed_over.push_back(absl::StrCat(engine, " (not supported)"));
        continue;
      }
      int64_t workspace = 0, n = 0;
      PJRT_RETURN_IF_ERROR(CudnnError(
          cudnnBackendGetAttribute(plan->get(),
                                   CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                   CUDNN_TYPE_INT64, 1, &n, &workspace),
          "reading an execution plan's workspace size"));
      if (workspace > max_workspace) {
        passed_over.push_back(
            absl::StrFormat("%d (workspace %d bytes)", engine, workspace));
        continue;
      }
      return std::make_unique<Plan>(std::move(operation), std::move(graph),
                                    std::move(config), *std::move(plan), engine,
                                    workspace);
    }
  }
  return absl::NotFoundError(absl::StrFormat(
      "cuDNN has no engine for %s that computes as XLA does within %d bytes "
      "of workspace (passed over: %s)",
      problem.ToString(), max_workspace,
      passed_over.empty() ? "none listed" : absl::StrJoin(passed_over, ", ")));
}

}  // namespace pjrt::compiler::cuda
