// fft: FFT, IFFT, RFFT and IRFFT over the 1 to 3 trailing dimensions named
// by fft_length, through Eigen's FFT module (kissfft underneath: any length,
// not only powers of two). IFFT and IRFFT are scaled by 1/n per dimension,
// as XLA defines them.
//
// Each element of the leading (batch) dimensions is transformed on its own,
// in parallel: its trailing block is copied into a complex working array,
// transformed one dimension at a time (a multi-dimensional DFT is separable),
// and copied out. RFFT transforms the real block as complex and keeps the
// first n/2 + 1 outputs of the last dimension; IRFFT inverts the leading
// fft dimensions on the half spectrum, then rebuilds each last-dimension
// line's Hermitian spectrum (X[n-k] = conj(X[k])) and keeps the real part
// of its inverse.
#include <algorithm>
#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "hlo/op_attributes.h"
#include "unsupported/Eigen/FFT"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

class FftKernel : public FftKernelBase {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override {
    if (wide) return RunTyped<double>(addresses, context);
    return RunTyped<float>(addresses, context);
  }

 private:
  template <typename T>
  absl::Status RunTyped(absl::Span<void* const> addresses,
                        const RunContext& context) const {
    using C = std::complex<T>;
    const int64_t in_block = Product(in_dims);
    const int64_t out_block = Product(out_dims);
    if (batch == 0 || out_block == 0) return absl::OkStatus();
    const bool real_in = type == FftType::kRfft;
    const bool real_out = type == FftType::kIrfft;
    const char* in = static_cast<const char*>(addresses[input]);
    char* out = static_cast<char*>(addresses[output]);
    // The working array: the full lengths (FFT, IFFT, RFFT) or the half
    // spectrum (IRFFT, until its last step).
    const std::vector<int64_t>& work_dims =
        type == FftType::kIrfft ? in_dims : lengths;
    const int64_t work_block = Product(work_dims);
    const double cost = 10.0 * work_block * (1 + lengths.size());
    ThreadPool::Get().ParallelFor(
        batch, cost, [&](int64_t first, int64_t last) {
          Eigen::FFT<T> fft;
          std::vector<C> work(work_block), line, transformed;
          for (int64_t b = first; b < last; ++b) {
            if (IsCancelled(context.cancellation)) return;
            if (real_in) {
              const T* src = reinterpret_cast<const T*>(in) + b * in_block;
              for (int64_t i = 0; i < in_block; ++i) work[i] = C(src[i], 0);
            } else {
              const C* src = reinterpret_cast<const C*>(in) + b * in_block;
              std::copy(src, src + in_block, work.begin());
            }
            const bool inverse =
                type == FftType::kIfft || type == FftType::kIrfft;
            const int dims = static_cast<int>(work_dims.size());
            // IRFFT leaves its last dimension for the real inverse below.
            const int transformed_dims =
                type == FftType::kIrfft ? dims - 1 : dims;
            for (int d = 0; d < transformed_dims; ++d) {
              TransformAxis(fft, work.data(), work_dims, d, inverse, &line,
                            &transformed);
            }
            if (real_out) {
              const int64_t n = lengths.back();
              const int64_t half = work_dims.back();
              const int64_t lines = work_block / std::max<int64_t>(half, 1);
              T* dst = reinterpret_cast<T*>(out) + b * out_block;
              line.resize(n);
              transformed.resize(n);
              for (int64_t r = 0; r < lines; ++r) {
                const C* h = work.data() + r * half;
                for (int64_t k = 0; k < n; ++k) {
                  line[k] = k < half ? h[k] : std::conj(h[n - k]);
                }
                if (n > 0) fft.inv(transformed.data(), line.data(), n);
                for (int64_t k = 0; k < n; ++k)
                  dst[r * n + k] = transformed[k].real();
              }
            } else {
              // RFFT keeps the first n/2 + 1 values of each last-dimension
              // line.
              C* dst = reinterpret_cast<C*>(out) + b * out_block;
              const int64_t n = work_dims.back();
              const int64_t keep = out_dims.back();
              const int64_t lines = work_block / std::max<int64_t>(n, 1);
              for (int64_t r = 0; r < lines; ++r) {
                std::copy(work.data() + r * n, work.data() + r * n + keep,
                          dst + r * keep);
              }
            }
          }
        });
    return CheckCancelled(context.cancellation);
  }

  // Transforms every line of `data` (row-major over `dims`) along
  // dimension d.
  template <typename T>
  static void TransformAxis(Eigen::FFT<T>& fft, std::complex<T>* data,
                            const std::vector<int64_t>& dims, int d,
                            bool inverse, std::vector<std::complex<T>>* line,
                            std::vector<std::complex<T>>* transformed) {
    const int64_t n = dims[d];
    if (n <= 1) return;  // a DFT of one point is itself
    int64_t inner = 1;
    for (size_t k = d + 1; k < dims.size(); ++k) inner *= dims[k];
    int64_t outer = 1;
    for (int k = 0; k < d; ++k) outer *= dims[k];
    line->resize(n);
    transformed->resize(n);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        std::complex<T>* base = data + o * n * inner + i;
        for (int64_t k = 0; k < n; ++k) (*line)[k] = base[k * inner];
        if (inverse) {
          fft.inv(transformed->data(), line->data(), n);
        } else {
          fft.fwd(transformed->data(), line->data(), n);
        }
        for (int64_t k = 0; k < n; ++k) base[k * inner] = (*transformed)[k];
      }
    }
  }
};

}  // namespace

absl::StatusOr<std::shared_ptr<Kernel>> BuildFft(const KernelArgs& args,
                                                 KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  auto k = std::make_shared<FftKernel>();
  const std::string type = hlo::WordAttribute(inst, "fft_type", "FFT");
  k->type = type == "IFFT"    ? FftType::kIfft
            : type == "RFFT"  ? FftType::kRfft
            : type == "IRFFT" ? FftType::kIrfft
                              : FftType::kFft;
  PJRT_ASSIGN_OR_RETURN(k->lengths,
                        hlo::ParseIntListAttribute(inst, "fft_length"));
  const hlo::Shape& in = args.input_shapes[0];
  const hlo::Shape& out = args.output_shapes[0];
  const PrimitiveType t = in.element_type();
  k->wide = t == PrimitiveType::kF64 || t == PrimitiveType::kC128;
  const int l = static_cast<int>(k->lengths.size());
  const int first = in.rank() - l;
  for (int d = 0; d < first; ++d) k->batch *= in.dimensions(d);
  for (int d = first; d < in.rank(); ++d) {
    k->in_dims.push_back(in.dimensions(d));
    k->out_dims.push_back(out.dimensions(d));
  }
  k->input = args.inputs[0];
  k->output = args.outputs[0];
  k->reads = {{args.inputs[0], in.UnpackedByteSize()}};
  k->writes = {{args.outputs[0], out.UnpackedByteSize()}};
  return k;
}

}  // namespace pjrt::compiler::host
