// Convolutions through cuDNN's graph (backend) API.
//
// A convolution the host compiler planned (host::ConvPlan) is described
// to cuDNN as it lies in memory: cuDNN orders a tensor's dimensions
// [N, C, spatial...] and takes any strides, so every XLA dim_labels is the
// same problem with other strides, and no transpose is made. A forward
// convolution computes
//   y[n, k, o...] = sum over c, r... of
//                   x[n, g(k) * C' + c, o * stride + r * dilation - pre]
//                   * w[k, c, r...]
// with C' the filter's input features and g(k) = k / (K / groups) (feature
// groups are implied by x's features being a multiple of w's): cuDNN's
// cross-correlation, the mode every engine takes. XLA's rhs_reversal of
// every spatial dimension is the filter read reversed, which its packed
// copy does.
//
// A convolution with base (lhs) dilation d, stride 1 and no groups (JAX's
// gradient of a strided convolution with respect to its input, and its
// transposed convolutions) is cuDNN's backward-data convolution of the
// forward one it is the transpose of: out[j] = sum over t, o with
// o * d = j + t * wd - lo of lhs[o] * w[t] is dx of a forward convolution
// from dx (XLA's output) to dy (XLA's lhs) with stride d, dilation wd,
// padding (taps - 1) * wd - lo before and (taps - 1) * wd - hi after,
// whose filter has XLA's kernel input features as its outputs (K) and
// XLA's output features as its inputs (C), read reversed unless XLA
// reverses it.
//
// A convolution that is neither (its activations not laid out as cuDNN
// takes them) may be a filter gradient, JAX's for NHWC activations among
// them: cuDNN's backward-filter convolution when XLA's lhs, read with its
// features as N and its batch as C, and XLA's kernel, read with its input
// features as N, its output features as K and its window as the spatial
// dimensions, are activations packed alike: dw (XLA's output, K its
// features and C its batch) = the gradient of the forward convolution from
// x to dy with stride XLA's window dilation and dilation XLA's stride.
//
// bf16 or f16 operands summed into f32 are an f32 problem on copies of
// them widened to f32. A one-dimensional convolution gets a unit spatial
// dimension, as cuDNN takes two or three. What cuDNN cannot express so
// (batch groups, negative padding, reversing only some dimensions, integer
// or complex types and other mixed ones, more than three spatial
// dimensions, empty arrays, activations not packed as NHWC or NCHW (both
// the same); base dilation with a stride, groups or a padding past the
// window) keeps the generated direct kernel.
//
// The plan for a GPU is made once (PlanCudnnConv): cuDNN's heuristics
// (mode A, then the fallback list) list engines, and the first whose
// numerics match XLA's and whose workspace fits wins: for f32 and f64 none
// that rounds inputs down (TF32 tensor cores included), for f16 and bf16
// none that sums in 16 bits, and never a nondeterministic or FFT-based one
// (whose errors scale with the largest value, not each output's). When
// none is left the direct kernel runs.
//
// Thread safety: a CudnnConvPlan is immutable once made; runs through one
// cudnnHandle_t must not overlap (the caller's lock), as a handle holds the
// stream it enqueues on.
#ifndef PJRT_COMPILER_CUDA_CUDNN_CONV_H_
#define PJRT_COMPILER_CUDA_CUDNN_CONV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "compiler/host/kernel_convolution.h"
#include "hlo/primitive_type.h"

struct cudnnContext;
struct CUstream_st;

namespace pjrt::compiler::cuda {

// A convolution as cuDNN takes it; dims and strides in elements, in
// cuDNN's order ([N, C, spatial...], [K, C', spatial...],
// [N, K, spatial...]), two or three spatial dimensions. x and y are packed
// in one of the layouts cuDNN's engines take, channels last (NHWC) or
// first (NCHW); w is packed in the same one (KRSC or KCRS): cuDNN reads,
// or for a filter gradient writes, a transposed copy of the filter when
// it lies otherwise.
struct CudnnConvProblem {
  hlo::PrimitiveType type = hlo::PrimitiveType::kF32;  // x, w and y
  std::vector<int64_t> x_dims, x_strides;
  std::vector<int64_t> w_dims, w_strides;
  std::vector<int64_t> y_dims, y_strides;
  bool channels_last = false;
  // The filter's strides as it lies in XLA's buffer (cuDNN's order): equal
  // to w_strides unless it needs the copy.
  std::vector<int64_t> filter_strides;
  // Per spatial dimension.
  std::vector<int64_t> pre_padding, post_padding, strides, dilations;
  // w is XLA's filter reversed in its spatial dimensions (by the copy).
  bool reversed = false;
  // XLA's lhs and kernel are bf16 or f16 summed into f32: cuDNN computes
  // in f32 on copies of them widened to f32 (exactly), as XLA sums their
  // products in f32.
  bool widened = false;

  // cuDNN takes the filter from (or, for a filter gradient, gives it to) a
  // packed copy: it lies otherwise or is read reversed.
  bool CopiesFilter() const { return reversed || filter_strides != w_strides; }
  // What cuDNN computes, and which of x, w and y are XLA's lhs, kernel
  // and output: forward, y = conv(x, w) (x the lhs, w the kernel, y the
  // output); backward data, dx (the output) from dy (the lhs) and w (the
  // kernel); backward filter, dw (the output) from x (the lhs) and dy (the
  // kernel).
  enum class Direction { kForward, kBackwardData, kBackwardFilter };
  Direction direction = Direction::kForward;

  // "bf16 NHWC x[32,64,56,56]/[200704,1,3584,64] w[...]/[...] y[...]/[...],
  // stride 1x1, dilation 1x1, pad 1_1x1_1": each tensor's dims/strides.
  std::string ToString() const;
};

// Every pointer cuDNN is given is aligned to this many bytes (the buffers'
// allocations and scratch slots are); a run whose pointers are not takes
// the direct kernel.
inline constexpr int64_t kCudnnAlignment = 16;

// The cuDNN problem that computes `plan`, or UNIMPLEMENTED saying what of
// it cuDNN's forward convolution cannot express.
absl::StatusOr<CudnnConvProblem> CudnnConvFor(const host::ConvPlan& plan);

// Builds and finalizes cuDNN's descriptors of `problem`'s tensors,
// convolution and forward operation: cuDNN checks the shapes agree. Needs
// no GPU (tests use it).
absl::Status CheckCudnnDescribes(const CudnnConvProblem& problem);

// An execution plan for one GPU (the handle's).
class CudnnConvPlan {
 public:
  virtual ~CudnnConvPlan() = default;
  // cuDNN's global index of the chosen engine, for logs.
  virtual int64_t engine() const = 0;
  virtual int64_t workspace_bytes() const = 0;
  // Enqueues the problem's convolution on `stream` (writing y, dx or dw
  // of `x`, `w` and `y`, each laid out as the problem says), with
  // `workspace` of at least workspace_bytes(). REQUIRES: no other run uses
  // `handle` meanwhile.
  virtual absl::Status Run(cudnnContext* handle, CUstream_st* stream, void* x,
                           void* w, void* y, void* workspace) const = 0;
};

// Chooses an engine for `problem` on the GPU of `handle` whose workspace
// is at most `max_workspace` bytes. NOT_FOUND when cuDNN has none that
// computes as XLA does; another error when cuDNN fails.
absl::StatusOr<std::unique_ptr<CudnnConvPlan>> PlanCudnnConv(
    const CudnnConvProblem& problem, cudnnContext* handle,
    int64_t max_workspace);

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_CUDNN_CONV_H_
