// convolution with any dim_labels, feature and batch groups, padding
// (negative too), base and window dilation and window reversal.
//
// Operands are first laid out canonically in the scratch memory (input
// [batch, spatial..., feature], kernel per group [taps x in-features,
// out-features]), then blocks of output positions are computed as GEMMs
// through Eigen: a block's patches (im2col, zeros where the window meets
// padding or dilation holes) times the group's kernel matrix. f32, f16 and
// bf16 compute in f32; f64 and integers in f64; c64 and c128 in themselves
// (all three operands of the one complex type).
#include "compiler/host/kernel_convolution.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/host_kernels.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

template <typename T>
void ToCanonicalValue(PrimitiveType type, const void* base, int64_t i, T* out) {
  if constexpr (kIsComplex<T>) {  // the operand is of type T
    *out = static_cast<const T*>(base)[i];
  } else {
    *out = static_cast<T>(LoadAsDouble(type, base, i));
  }
}

// The GEMM type of compute type T.
template <typename T>
constexpr PrimitiveType GemmType() {
  if constexpr (std::is_same_v<T, std::complex<float>>) {
    return PrimitiveType::kC64;
  } else if constexpr (std::is_same_v<T, std::complex<double>>) {
    return PrimitiveType::kC128;
  } else if constexpr (std::is_same_v<T, double>) {
    return PrimitiveType::kF64;
  } else {
    return PrimitiveType::kF32;
  }
}

template <typename T>
class ConvolutionKernel : public ConvolutionKernelBase {
 public:
  explicit ConvolutionKernel(ConvPlan p)
      : ConvolutionKernelBase(std::move(p)) {}

  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override {
    // Operands already in the canonical layout and type are used in place.
    const T* input = input_direct_ ? static_cast<const T*>(addresses[lhs])
                                   : static_cast<T*>(addresses[input_scratch_]);
    T* weights = static_cast<T*>(addresses[kernel_scratch_]);
    T* result = output_direct_ ? static_cast<T*>(addresses[out])
                               : static_cast<T*>(addresses[output_scratch_]);
    if (!input_direct_) {
      PrepareInput(addresses[lhs], static_cast<T*>(addresses[input_scratch_]));
    }
    PrepareKernel(addresses[rhs], weights);
    PJRT_RETURN_IF_ERROR(CheckCancelled(context.cancellation));
    // Blocks of output positions, for every group: a block's patches take
    // about 1 MiB.
    const int64_t block = std::clamp<int64_t>(
        (int64_t{1} << 18) / std::max<int64_t>(plan.cols, 1), 1, 4096);
    const int64_t blocks = (plan.positions + block - 1) / block;
    const double cost =
        static_cast<double>(block) * plan.cols * plan.out_per_group;
    ThreadPool::Get().ParallelFor(
        blocks * plan.groups, cost, [&](int64_t first, int64_t last) {
          std::vector<T> patches(block * plan.cols);
          std::vector<int64_t> o(plan.spatial);
          for (int64_t item = first; item < last; ++item) {
            if (IsCancelled(context.cancellation)) return;
            const int64_t g = item / blocks;
            const int64_t begin = (item % blocks) * block;
            const int64_t rows = std::min(block, plan.positions - begin);
            Im2Col(input, g, begin, rows, patches.data(), &o);
            // Column-major: result^T (out_per_group x rows, columns
            // out_features apart) = weights^T (out_per_group x cols) *
            // patches^T (cols x rows).
            GemmArgs gemm;
            gemm.type = GemmType<T>();
            gemm.m = plan.out_per_group;
            gemm.n = rows;
            gemm.k = plan.cols;
            gemm.a = weights + g * plan.cols * plan.out_per_group;
            gemm.lda = plan.out_per_group;
            gemm.b = patches.data();
            gemm.ldb = plan.cols;
            gemm.c =
                result + begin * plan.out_features + g * plan.out_per_group;
            gemm.ldc = plan.out_features;
            Gemm(gemm);
          }
        });
    PJRT_RETURN_IF_ERROR(CheckCancelled(context.cancellation));
    if (!output_direct_) WriteOutput(result, addresses[out]);
    return absl::OkStatus();
  }

  int input_scratch_ = -1, kernel_scratch_ = -1, output_scratch_ = -1;
  bool input_direct_ = false, output_direct_ = false;

 private:
  // input[b][s...][f] from lhs in its dim_labels layout.
  void PrepareInput(const void* src, T* input) const {
    std::vector<int64_t> dims = {plan.batch};
    std::vector<int64_t> strides = {plan.lhs_strides[plan.dims.input_batch]};
    for (int s = 0; s < plan.spatial; ++s) {
      dims.push_back(plan.in_spatial[s]);
      strides.push_back(plan.lhs_strides[plan.dims.input_spatial[s]]);
    }
    dims.push_back(plan.in_features);
    strides.push_back(plan.lhs_strides[plan.dims.input_feature]);
    Gather(src, plan.lhs_type, dims, strides, input);
  }

  // Per group g: w[g][tap][ci][co] (row-major [cols x out_per_group]).
  void PrepareKernel(const void* src, T* weights) const {
    std::vector<int64_t> t(plan.spatial, 0);
    for (int64_t g = 0; g < plan.groups; ++g) {
      T* w = weights + g * plan.cols * plan.out_per_group;
      for (int64_t tap = 0; tap < plan.tap_count; ++tap) {
        int64_t rest = tap, base = 0;
        for (int s = plan.spatial - 1; s >= 0; --s) {
          int64_t k = rest % plan.taps[s];
          rest /= plan.taps[s];
          if (plan.window[s].reversal) k = plan.taps[s] - 1 - k;
          base += k * plan.rhs_strides[plan.dims.kernel_spatial[s]];
        }
        for (int64_t ci = 0; ci < plan.in_per_group; ++ci) {
          // Feature groups split the kernel's output features; the input
          // feature index is within the group.
          for (int64_t co = 0; co < plan.out_per_group; ++co) {
            const int64_t oc = g * plan.out_per_group + co;
            const int64_t at =
                base + ci * plan.rhs_strides[plan.dims.kernel_input_feature] +
                oc * plan.rhs_strides[plan.dims.kernel_output_feature];
            ToCanonicalValue(
                plan.rhs_type, src, at,
                &w[(tap * plan.in_per_group + ci) * plan.out_per_group + co]);
          }
        }
      }
    }
  }

  void Gather(const void* src, PrimitiveType type,
              const std::vector<int64_t>& dims,
              const std::vector<int64_t>& strides, T* dst) const {
    const int64_t total = Product(dims);
    if (total == 0) return;
    const int64_t inner = dims.back();
    ThreadPool::Get().ParallelFor(
        total / std::max<int64_t>(inner, 1), inner * 4.0,
        [&](int64_t first, int64_t last) {
          std::vector<int64_t> idx(dims.size() - 1);
          const std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
          int64_t rest = first;
          for (int d = static_cast<int>(outer.size()) - 1; d >= 0; --d) {
            idx[d] = rest % outer[d];
            rest /= outer[d];
          }
          for (int64_t row = first; row < last; ++row) {
            int64_t base = 0;
            for (size_t d = 0; d < outer.size(); ++d)
              base += idx[d] * strides[d];
            T* out = dst + row * inner;
            if constexpr (kIsComplex<T>) {  // the operand is of type T
              const T* in = static_cast<const T*>(src);
              for (int64_t i = 0; i < inner; ++i)
                out[i] = in[base + i * strides.back()];
            } else {
              DispatchType(type, [&](auto pt) {
                using S = typename TypeTraits<decltype(pt)::value>::Storage;
                const S* in = static_cast<const S*>(src);
                for (int64_t i = 0; i < inner; ++i) {
                  out[i] = static_cast<T>(
                      static_cast<double>(in[base + i * strides.back()]));
                }
              });
            }
            NextIndex(outer, &idx);
          }
        });
  }

  // rows x cols patches of output positions [begin, begin + rows) of
  // group g (column-major: one column of cols per position).
  void Im2Col(const T* input, int64_t g, int64_t begin, int64_t rows,
              T* patches, std::vector<int64_t>* o) const {
    const int64_t fg = plan.feature_groups > 1 ? g : 0;
    const int64_t bg = plan.batch_groups > 1 ? g : 0;
    const int64_t spatial_total =
        plan.positions / std::max<int64_t>(plan.out_batch, 1);
    std::vector<int64_t> in_strides(plan.spatial);
    int64_t stride = plan.in_features;
    for (int s = plan.spatial - 1; s >= 0; --s) {
      in_strides[s] = stride;
      stride *= plan.in_spatial[s];
    }
    const int64_t batch_stride = stride;
    std::vector<int64_t> t(plan.spatial);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t pos = begin + r;
      const int64_t b = pos / spatial_total;
      int64_t rest = pos % spatial_total;
      for (int s = plan.spatial - 1; s >= 0; --s) {
        (*o)[s] = rest % plan.out_spatial[s];
        rest /= plan.out_spatial[s];
      }
      const T* image = input + (bg * plan.out_batch + b) * batch_stride +
                       fg * plan.in_per_group;
      T* column = patches + r * plan.cols;
      std::fill(t.begin(), t.end(), 0);
      for (int64_t tap = 0; tap < plan.tap_count; ++tap) {
        int64_t offset = 0;
        bool valid = true;
        for (int s = 0; s < plan.spatial && valid; ++s) {
          const hlo::WindowDimension& w = plan.window[s];
          const int64_t x =
              (*o)[s] * w.stride + t[s] * w.window_dilation - w.padding_low;
          if (x < 0 || x % w.base_dilation != 0 ||
              x / w.base_dilation >= plan.in_spatial[s]) {
            valid = false;
          } else {
            offset += (x / w.base_dilation) * in_strides[s];
          }
        }
        T* dst = column + tap * plan.in_per_group;
        if (valid) {
          std::memcpy(dst, image + offset, plan.in_per_group * sizeof(T));
        } else {
          std::fill(dst, dst + plan.in_per_group, T(0));
        }
        NextIndex(plan.taps, &t);
      }
    }
  }

  void WriteOutput(const T* result, void* to) const {
    // result[b][o...][f] -> out in its dim_labels layout.
    std::vector<int64_t> dims = {plan.out_batch};
    for (int64_t d : plan.out_spatial) dims.push_back(d);
    dims.push_back(plan.out_features);
    std::vector<int64_t> strides = {plan.out_strides[plan.dims.output_batch]};
    for (int s = 0; s < plan.spatial; ++s) {
      strides.push_back(plan.out_strides[plan.dims.output_spatial[s]]);
    }
    strides.push_back(plan.out_strides[plan.dims.output_feature]);
    const int64_t inner = dims.back();
    const int64_t rows = inner == 0 ? 0 : Product(dims) / inner;
    const std::vector<int64_t> outer(dims.begin(), dims.end() - 1);
    ThreadPool::Get().ParallelFor(
        rows, inner * 2.0, [&](int64_t first, int64_t last) {
          std::vector<int64_t> idx(outer.size());
          int64_t rest = first;
          for (int d = static_cast<int>(outer.size()) - 1; d >= 0; --d) {
            idx[d] = rest % outer[d];
            rest /= outer[d];
          }
          const auto write = [&](auto pt) {
            using S = typename TypeTraits<decltype(pt)::value>::Storage;
            S* o = static_cast<S*>(to);
            for (int64_t row = first; row < last;
                 ++row, NextIndex(outer, &idx)) {
              int64_t at = 0;
              for (size_t d = 0; d < outer.size(); ++d)
                at += idx[d] * strides[d];
              const T* src = result + row * inner;
              for (int64_t i = 0; i < inner; ++i) {
                o[at + i * strides.back()] = Convert<S>(src[i], plan.out_type);
              }
            }
          };
          if constexpr (kIsComplex<T>) {  // the result is of type T
            write(std::integral_constant<PrimitiveType, GemmType<T>()>());
          } else {
            DispatchType(plan.out_type, write);
          }
        });
  }

  template <typename S>
  static S Convert(T v, PrimitiveType type) {
    if constexpr (std::is_integral_v<S>) {
      // pred: true where the sum of products (or of ANDs) is not zero.
      if (type == PrimitiveType::kPred) return S(static_cast<double>(v) != 0);
      if (std::isnan(static_cast<double>(v))) return S(0);
      const double d = static_cast<double>(v);
      if (IsSubByteInt(type)) {
        // The exact integer sum, wrapped to the type's bits.
        return static_cast<S>(WrapSubByte(
            type, static_cast<int64_t>(std::clamp(d, -9.0e18, 9.0e18))));
      }
      if (d <= static_cast<double>(std::numeric_limits<S>::min())) {
        return std::numeric_limits<S>::min();
      }
      if (d >= static_cast<double>(std::numeric_limits<S>::max())) {
        return std::numeric_limits<S>::max();
      }
      return static_cast<S>(d);
    } else {
      return static_cast<S>(v);
    }
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<Kernel>> BuildConvolution(
    const KernelArgs& args, KernelCompiler& compiler) {
  const hlo::Instruction& inst = *args.inst;
  const hlo::Shape& lhs = args.input_shapes[0];
  const hlo::Shape& rhs = args.input_shapes[1];
  const hlo::Shape& out = args.output_shapes[0];
  ConvPlan p;
  PJRT_ASSIGN_OR_RETURN(p.dims, hlo::ParseConvolutionDimensions(inst));
  p.spatial = static_cast<int>(p.dims.input_spatial.size());
  PJRT_ASSIGN_OR_RETURN(p.window, hlo::ParseWindow(inst, p.spatial));
  PJRT_ASSIGN_OR_RETURN(p.feature_groups,
                        hlo::ParseIntAttribute(inst, "feature_group_count", 1));
  PJRT_ASSIGN_OR_RETURN(p.batch_groups,
                        hlo::ParseIntAttribute(inst, "batch_group_count", 1));
  p.groups = std::max(p.feature_groups, p.batch_groups);
  p.batch = lhs.dimensions(p.dims.input_batch);
  p.in_features = lhs.dimensions(p.dims.input_feature);
  for (int s = 0; s < p.spatial; ++s) {
    p.in_spatial.push_back(lhs.dimensions(p.dims.input_spatial[s]));
    p.taps.push_back(rhs.dimensions(p.dims.kernel_spatial[s]));
    p.out_spatial.push_back(out.dimensions(p.dims.output_spatial[s]));
    p.tap_count *= p.taps.back();
  }
  p.out_batch = out.dimensions(p.dims.output_batch);
  p.out_features = out.dimensions(p.dims.output_feature);
  p.in_per_group = rhs.dimensions(p.dims.kernel_input_feature);
  p.out_per_group = p.out_features / p.groups;
  p.positions = p.out_batch * Product(p.out_spatial);
  p.cols = p.tap_count * p.in_per_group;
  p.lhs_strides = RowMajorStrides(lhs.dimensions());
  p.rhs_strides = RowMajorStrides(rhs.dimensions());
  p.out_strides = RowMajorStrides(out.dimensions());
  p.lhs_type = lhs.element_type();
  p.rhs_type = rhs.element_type();
  p.out_type = out.element_type();
  const bool complex = hlo::IsComplex(p.out_type);
  if ((complex || hlo::IsComplex(p.lhs_type) || hlo::IsComplex(p.rhs_type)) &&
      (p.lhs_type != p.out_type || p.rhs_type != p.out_type)) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: a convolution of %s and %s into %s; complex convolutions take "
        "operands of their result's type",
        inst.Describe(), hlo::PrimitiveTypeName(p.lhs_type),
        hlo::PrimitiveTypeName(p.rhs_type),
        hlo::PrimitiveTypeName(p.out_type)));
  }
  const bool wide = p.out_type == PrimitiveType::kF64 ||
                    p.out_type == PrimitiveType::kC128 ||
                    (!complex && !hlo::IsFloatingPoint(p.out_type)) ||
                    p.lhs_type == PrimitiveType::kF64;
  const int64_t width = complex ? hlo::ByteWidth(p.out_type) : wide ? 8 : 4;
  const int64_t input_elements = lhs.ElementCount();
  const int64_t kernel_elements = p.groups * p.cols * p.out_per_group;
  const int64_t output_elements = p.positions * p.out_features;
  // Canonical: batch first, spatial in order, features last.
  const auto canonical = [&](int64_t b, const std::vector<int64_t>& sp,
                             int64_t f) {
    if (b != 0 || f != p.spatial + 1) return false;
    for (int s = 0; s < p.spatial; ++s) {
      if (sp[s] != s + 1) return false;
    }
    return true;
  };
  const PrimitiveType native = complex ? p.out_type
                               : wide  ? PrimitiveType::kF64
                                       : PrimitiveType::kF32;
  const bool input_direct =
      p.lhs_type == native &&
      canonical(p.dims.input_batch, p.dims.input_spatial, p.dims.input_feature);
  const bool output_direct =
      p.out_type == native &&
      canonical(p.dims.output_batch, p.dims.output_spatial,
                p.dims.output_feature);
  const auto finish = [&](auto kernel) -> std::shared_ptr<Kernel> {
    kernel->input_direct_ = input_direct;
    kernel->output_direct_ = output_direct;
    kernel->wide = wide;
    kernel->lhs = args.inputs[0];
    kernel->rhs = args.inputs[1];
    kernel->out = args.outputs[0];
    kernel->reads = {{args.inputs[0], lhs.UnpackedByteSize()},
                     {args.inputs[1], rhs.UnpackedByteSize()}};
    kernel->writes = {{args.outputs[0], out.UnpackedByteSize()}};
    kernel->kernel_scratch_ = compiler.NewScratch(kernel_elements * width);
    kernel->writes.push_back(
        {kernel->kernel_scratch_, kernel_elements * width});
    if (!input_direct) {
      kernel->input_scratch_ = compiler.NewScratch(input_elements * width);
      kernel->writes.push_back(
          {kernel->input_scratch_, input_elements * width});
    }
    if (!output_direct) {
      kernel->output_scratch_ = compiler.NewScratch(output_elements * width);
      kernel->writes.push_back(
          {kernel->output_scratch_, output_elements * width});
    }
    return kernel;
  };
  if (p.out_type == PrimitiveType::kC64) {
    return finish(
        std::make_shared<ConvolutionKernel<std::complex<float>>>(std::move(p)));
  }
  if (p.out_type == PrimitiveType::kC128) {
    return finish(std::make_shared<ConvolutionKernel<std::complex<double>>>(
        std::move(p)));
  }
  if (wide)
    return finish(std::make_shared<ConvolutionKernel<double>>(std::move(p)));
  return finish(std::make_shared<ConvolutionKernel<float>>(std::move(p)));
}

}  // namespace pjrt::compiler::host
