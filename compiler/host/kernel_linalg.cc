// triangular-solve and cholesky on the host: a matrix of the batch per
// task of the thread pool, in the element type (f32, f64, c64, c128), in
// the order kernel_linalg.h gives, which the CUDA backend's kernels follow.
#include "compiler/host/kernel_linalg.h"

#include <cmath>
#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

template <typename T>
T Conj(T v) {
  return v;
}
template <typename R>
std::complex<R> Conj(std::complex<R> v) {
  return std::conj(v);
}
template <typename T>
T RealSqrt(T v) {
  return std::sqrt(v);
}
template <typename R>
std::complex<R> RealSqrt(std::complex<R> v) {
  return std::complex<R>(std::sqrt(v.real()), 0);
}
template <typename T>
T AbsSquared(T v) {
  return v * v;
}
template <typename R>
std::complex<R> AbsSquared(std::complex<R> v) {
  return std::complex<R>(v.real() * v.real() + v.imag() * v.imag(), 0);
}

// Calls f with a null pointer of the C++ type of `type` (f32, f64, c64,
// c128).
template <typename F>
absl::Status WithType(PrimitiveType type, F f) {
  switch (type) {
    case PrimitiveType::kF32:
      return f(static_cast<float*>(nullptr));
    case PrimitiveType::kF64:
      return f(static_cast<double*>(nullptr));
    case PrimitiveType::kC64:
      return f(static_cast<std::complex<float>*>(nullptr));
    case PrimitiveType::kC128:
      return f(static_cast<std::complex<double>*>(nullptr));
    default:
      return absl::InternalError(
          "a linear-algebra kernel of an unchecked type");
  }
}

absl::Status CheckType(const hlo::Instruction& inst, PrimitiveType type) {
  if (type == PrimitiveType::kF32 || type == PrimitiveType::kF64 ||
      type == PrimitiveType::kC64 || type == PrimitiveType::kC128) {
    return absl::OkStatus();
  }
  return absl::UnimplementedError(absl::StrFormat(
      "%s of %s is not supported by the host compiler yet (f32, f64, c64 "
      "and c128 are; convert the operands first)",
      inst.opcode_name(), hlo::PrimitiveTypeName(type)));
}

}  // namespace

absl::Status TriangularSolveKernel::Run(absl::Span<void* const> addresses,
                                        const RunContext& context) const {
  return WithType(type, [&](auto* tag) -> absl::Status {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* as = static_cast<const T*>(addresses[a]);
    const T* bs = static_cast<const T*>(addresses[b]);
    T* out = static_cast<T*>(addresses[output]);
    const int64_t rhs = n;
    const double cost = 2.0 * m * m * std::max<int64_t>(rhs, 1);
    ThreadPool::Get().ParallelFor(
        batch, cost, [&](int64_t first, int64_t last) {
          for (int64_t g = first; g < last; ++g) {
            if (IsCancelled(context.cancellation)) return;
            const T* am = as + g * m * m;
            const T* bm = bs + g * m * rhs;
            T* xm = out + g * m * rhs;
            const auto mat = [&](int64_t i, int64_t j) {
              const T v = transposed ? am[j * m + i] : am[i * m + j];
              return conjugate ? Conj(v) : v;
            };
            for (int64_t k = 0; k < rhs; ++k) {
              const int64_t base = k * rhs_step;
              for (int64_t step = 0; step < m; ++step) {
                const int64_t i = m_lower ? step : m - 1 - step;
                T s = bm[base + i * rhs_stride];
                const int64_t lo = m_lower ? 0 : i + 1;
                const int64_t hi = m_lower ? i : m;
                for (int64_t j = lo; j < hi; ++j) {
                  s -= mat(i, j) * xm[base + j * rhs_stride];
                }
                xm[base + i * rhs_stride] = unit_diagonal ? s : s / mat(i, i);
              }
            }
          }
        });
    return CheckCancelled(context.cancellation);
  });
}

absl::Status CholeskyKernel::Run(absl::Span<void* const> addresses,
                                 const RunContext& context) const {
  return WithType(type, [&](auto* tag) -> absl::Status {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* as = static_cast<const T*>(addresses[a]);
    T* out = static_cast<T*>(addresses[output]);
    const double cost = 1.0 * n * n * n / 3 + n;
    ThreadPool::Get().ParallelFor(
        batch, cost, [&](int64_t first, int64_t last) {
          std::vector<T> l(n * n);
          for (int64_t g = first; g < last; ++g) {
            if (IsCancelled(context.cancellation)) return;
            const T* am = as + g * n * n;
            // a's element (i, j), i >= j, from the triangle the op reads.
            const auto at = [&](int64_t i, int64_t j) {
              return lower ? am[i * n + j] : Conj(am[j * n + i]);
            };
            std::fill(l.begin(), l.end(), T(0));
            for (int64_t j = 0; j < n; ++j) {
              T d = at(j, j);
              for (int64_t k = 0; k < j; ++k) d -= AbsSquared(l[j * n + k]);
              const T pivot = RealSqrt(d);
              l[j * n + j] = pivot;
              for (int64_t i = j + 1; i < n; ++i) {
                T s = at(i, j);
                for (int64_t k = 0; k < j; ++k) {
                  s -= l[i * n + k] * Conj(l[j * n + k]);
                }
                l[i * n + j] = s / pivot;
              }
            }
            T* rm = out + g * n * n;
            for (int64_t i = 0; i < n; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                rm[i * n + j] = lower ? l[i * n + j] : Conj(l[j * n + i]);
              }
            }
          }
        });
    return CheckCancelled(context.cancellation);
  });
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildTriangularSolve(
    const KernelArgs& args, KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  const hlo::Shape& as = args.input_shapes[0];
  const hlo::Shape& bs = args.input_shapes[1];
  PJRT_RETURN_IF_ERROR(CheckType(inst, as.element_type()));
  auto k = std::make_shared<TriangularSolveKernel>();
  k->type = as.element_type();
  const int r = as.rank();
  for (int d = 0; d < r - 2; ++d) k->batch *= as.dimensions(d);
  k->m = as.dimensions(r - 1);
  PJRT_ASSIGN_OR_RETURN(k->left_side,
                        hlo::ParseBoolAttribute(inst, "left_side", false));
  PJRT_ASSIGN_OR_RETURN(const bool lower,
                        hlo::ParseBoolAttribute(inst, "lower", false));
  PJRT_ASSIGN_OR_RETURN(k->unit_diagonal,
                        hlo::ParseBoolAttribute(inst, "unit_diagonal", false));
  const std::string transpose =
      hlo::WordAttribute(inst, "transpose_a", "NO_TRANSPOSE");
  const bool op_transposes = transpose != "NO_TRANSPOSE";
  k->conjugate = transpose == "ADJOINT";
  // op(a) x = b solves with M = op(a); x op(a) = b, as op(a)^T x^T = b^T,
  // with M = op(a)^T (a itself, conjugated for ADJOINT, when op transposes).
  k->transposed = k->left_side ? op_transposes : !op_transposes;
  k->m_lower = lower != k->transposed;
  if (k->left_side) {
    k->n = bs.dimensions(r - 1);  // columns of b, each a right-hand side
    k->rhs_step = 1;
    k->rhs_stride = k->n;
  } else {
    k->n = bs.dimensions(r - 2);  // rows of b
    k->rhs_step = k->m;
    k->rhs_stride = 1;
  }
  k->a = args.inputs[0];
  k->b = args.inputs[1];
  k->output = args.outputs[0];
  k->reads = {{k->a, as.UnpackedByteSize()}, {k->b, bs.UnpackedByteSize()}};
  k->writes = {{k->output, bs.UnpackedByteSize()}};
  return k;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildCholesky(const KernelArgs& args,
                                                      KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  const hlo::Shape& as = args.input_shapes[0];
  PJRT_RETURN_IF_ERROR(CheckType(inst, as.element_type()));
  auto k = std::make_shared<CholeskyKernel>();
  k->type = as.element_type();
  const int r = as.rank();
  for (int d = 0; d < r - 2; ++d) k->batch *= as.dimensions(d);
  k->n = as.dimensions(r - 1);
  PJRT_ASSIGN_OR_RETURN(k->lower,
                        hlo::ParseBoolAttribute(inst, "lower", false));
  k->a = args.inputs[0];
  k->output = args.outputs[0];
  k->reads = {{k->a, as.UnpackedByteSize()}};
  k->writes = {{k->output, as.UnpackedByteSize()}};
  return k;
}

}  // namespace pjrt::compiler::host
