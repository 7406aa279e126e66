// reduce-window and select-and-scatter. As XLA computes them, window
// positions that fall in the padding (or between base-dilated elements) are
// skipped: an output is its initial value combined with the operand
// elements its window covers.
#include "compiler/host/kernel_window.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/combine.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "compiler/host/types.h"
#include "hlo/op_attributes.h"
#include "hlo/op_shapes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

// XLA's semantics for one step of a simple reducer, in the compute type
// (then stored, so f16 and bf16 round after every step).
template <typename C>
C ApplyReal(ExprOp op, C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if ((op == ExprOp::kMaximum || op == ExprOp::kMinimum) &&
        (std::isnan(a) || std::isnan(b))) {
      return std::numeric_limits<C>::quiet_NaN();
    }
  }
  switch (op) {
    case ExprOp::kAdd:
      if constexpr (std::is_integral_v<C>) return WrappingAdd(a, b);
      return static_cast<C>(a + b);
    case ExprOp::kMultiply:
      if constexpr (std::is_integral_v<C>) return WrappingMultiply(a, b);
      return static_cast<C>(a * b);
    case ExprOp::kMaximum:
      return MaxOf(a, b);
    case ExprOp::kMinimum:
      return MinOf(a, b);
    case ExprOp::kAnd:
      if constexpr (std::is_integral_v<C>) return static_cast<C>(a & b);
      return a;
    case ExprOp::kOr:
      if constexpr (std::is_integral_v<C>) return static_cast<C>(a | b);
      return a;
    default:
      return a;
  }
}

template <typename C>
C Apply(ExprOp op, C a, C b) {
  if constexpr (kIsComplex<C>) {
    return Combine(op, a, b);  // add or multiply, as reductions do
  } else {
    return ApplyReal(op, a, b);
  }
}

// Evaluates a region over single elements: parameters and results in the
// compute representation, up to 16 bytes each (c128).
class ScalarCall {
 public:
  ScalarCall(const Expression& expr, absl::Span<const PrimitiveType> outputs,
             int params)
      : runner_(expr), params_(params), results_(outputs.size()) {
    runner_.SetOutputTypes(outputs);
    for (ScalarBits& p : params_) in_.push_back(&p);
    for (ScalarBits& r : results_) out_.push_back(&r);
  }
  // Sets parameter i from a storage element.
  void Set(int i, PrimitiveType type, const void* storage) {
    ScalarBits raw;
    std::memcpy(&raw, storage, hlo::ByteWidth(type));
    StorageToCompute(type, &raw, &params_[i], 1);
  }
  void SetCompute(int i, const ScalarBits& bits) { params_[i] = bits; }
  void Call() { runner_.Evaluate(in_, 1, out_); }
  const ScalarBits& result(int j) const { return results_[j]; }
  const ScalarBits& param(int i) const { return params_[i]; }
  // Whether pred result j is true.
  bool True(int j) const { return (results_[j].words[0] & 0xff) != 0; }
  // Result j stored as `type` into `storage`.
  void Store(int j, PrimitiveType type, void* storage) const {
    StoreCompute(results_[j], type, storage);
  }
  // A compute value stored as `type` into `storage`.
  static void StoreCompute(const ScalarBits& value, PrimitiveType type,
                           void* storage) {
    ScalarBits raw;
    ComputeToStorage(type, &value, &raw, 1);
    std::memcpy(storage, &raw, hlo::ByteWidth(type));
  }

 private:
  RegionRunner runner_;
  std::vector<ScalarBits> params_, results_;
  std::vector<const void*> in_;
  std::vector<void*> out_;
};

absl::StatusOr<WindowGeometry> Geometry(const hlo::Instruction& inst,
                                        const hlo::Shape& operand) {
  WindowGeometry g;
  g.in_dims.assign(operand.dimensions().begin(), operand.dimensions().end());
  g.in_strides = RowMajorStrides(operand.dimensions());
  PJRT_ASSIGN_OR_RETURN(g.window, hlo::ParseWindow(inst, operand.rank()));
  for (const hlo::WindowDimension& w : g.window)
    g.window_sizes.push_back(w.size);
  g.Prepare();
  return g;
}

// (a mod m) in [0, m), for m > 0.
int64_t Mod(int64_t a, int64_t m) {
  const int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// The inverse of a modulo m (gcd(a, m) == 1, m > 1), by Euclid's
// extended algorithm.
int64_t InverseModulo(int64_t a, int64_t m) {
  int64_t r0 = m, r1 = Mod(a, m), t0 = 0, t1 = 1;
  while (r1 != 0) {
    const int64_t q = r0 / r1;
    std::tie(r0, r1) = std::make_pair(r1, r0 - q * r1);
    std::tie(t0, t1) = std::make_pair(t1, t0 - q * t1);
  }
  return Mod(t0, m);
}

}  // namespace

void WindowGeometry::Prepare() {
  steps.assign(window.size(), WindowStep{});
  for (size_t d = 0; d < window.size(); ++d) {
    WindowStep& s = steps[d];
    // Over one element only position 0 lands: the dilation is moot.
    s.base_dilation = in_dims[d] > 1 ? window[d].base_dilation : 1;
    s.divisor = std::gcd(window[d].window_dilation, s.base_dilation);
    s.modulus = s.base_dilation / s.divisor;
    if (s.modulus > 1) {
      s.inverse =
          InverseModulo(window[d].window_dilation / s.divisor, s.modulus);
    }
  }
}

WindowSpan WindowGeometry::Span(int d, int64_t c) const {
  const hlo::WindowDimension& wd = window[d];
  const WindowStep& s = steps[d];
  const int64_t n = in_dims[d];
  if (wd.size == 0 || n == 0) return {};
  // Position w is at p = base + w * dilation of the dilated operand, whose
  // elements sit at 0, bd, ..., (n - 1) bd.
  const int64_t base = c * wd.stride - wd.padding_low;
  const int64_t dilation = wd.window_dilation, bd = s.base_dilation;
  const int64_t top = (n - 1) * bd - base;
  if (top < 0) return {};
  const int64_t lo = base >= 0 ? 0 : (-base + dilation - 1) / dilation;
  const int64_t hi = std::min(wd.size - 1, top / dilation);
  int64_t first = lo, step = 1;
  if (bd > 1) {
    // w * dilation == -base (mod bd).
    const int64_t r = Mod(-base, bd);
    if (r % s.divisor != 0) return {};
    const int64_t w0 = (r / s.divisor) * s.inverse % s.modulus;
    first = lo + Mod(w0 - lo, s.modulus);
    step = s.modulus;
  }
  if (first > hi) return {};
  return WindowSpan{(base + first * dilation) / bd, step * dilation / bd,
                    (hi - first) / step + 1};
}

absl::Status ReduceWindowKernel::Run(absl::Span<void* const> addresses,
                                     const RunContext& context) const {
  const int64_t total = Product(out_dims);
  if (total == 0) return absl::OkStatus();
  // Each output visits at most min(window, operand) positions a dimension.
  double visits = 1;
  for (size_t d = 0; d < geometry.window_sizes.size(); ++d) {
    visits *= static_cast<double>(
        std::min(geometry.window_sizes[d], geometry.in_dims[d]));
  }
  const double cost = 8.0 * visits * (op.has_value() ? 1 : 20);
  ThreadPool::Get().ParallelFor(total, cost, [&](int64_t first, int64_t last) {
    std::vector<int64_t> o(out_dims.size());
    int64_t rest = first;
    for (int d = static_cast<int>(o.size()) - 1; d >= 0; --d) {
      o[d] = rest % out_dims[d];
      rest /= out_dims[d];
    }
    const int n = static_cast<int>(types.size());
    std::unique_ptr<ScalarCall> call;
    if (!op.has_value())
      call = std::make_unique<ScalarCall>(region, types, 2 * n);
    for (int64_t e = first; e < last; ++e, NextIndex(out_dims, &o)) {
      if ((e & 1023) == 0 && IsCancelled(context.cancellation)) return;
      if (op.has_value()) {
        DispatchAnyType(types[0], [&](auto pt) {
          using S = typename TypeTraits<decltype(pt)::value>::Storage;
          using C = typename TypeTraits<decltype(pt)::value>::Compute;
          const S* in = static_cast<const S*>(addresses[inputs[0]]);
          S acc = *static_cast<const S*>(addresses[inits[0]]);
          geometry.ForEachElement(
              o,
              [&](int64_t at) {
                acc = static_cast<S>(
                    Apply<C>(*op, static_cast<C>(acc), static_cast<C>(in[at])));
              },
              context.cancellation);
          static_cast<S*>(addresses[outputs[0]])[e] = acc;
        });
        continue;
      }
      for (int j = 0; j < n; ++j) call->Set(j, types[j], addresses[inits[j]]);
      geometry.ForEachElement(
          o,
          [&](int64_t at) {
            for (int j = 0; j < n; ++j) {
              const int w = hlo::ByteWidth(types[j]);
              call->Set(
                  n + j, types[j],
                  static_cast<const char*>(addresses[inputs[j]]) + at * w);
            }
            call->Call();
            for (int j = 0; j < n; ++j) call->SetCompute(j, call->result(j));
          },
          context.cancellation);
      // The accumulators (parameters 0..n-1) hold the result.
      for (int j = 0; j < n; ++j) {
        const int w = hlo::ByteWidth(types[j]);
        ScalarCall::StoreCompute(
            call->param(j), types[j],
            static_cast<char*>(addresses[outputs[j]]) + e * w);
      }
    }
  });
  return CheckCancelled(context.cancellation);
}

absl::Status SelectAndScatterKernel::Run(absl::Span<void* const> addresses,
                                         const RunContext& context) const {
  const int w_src = hlo::ByteWidth(source_type);
  const int w_op = hlo::ByteWidth(operand_type);
  char* out = static_cast<char*>(addresses[output]);
  const char* operand_data = static_cast<const char*>(addresses[operand]);
  const char* source_data = static_cast<const char*>(addresses[source]);
  const int64_t count = Product(geometry.in_dims);
  for (int64_t i = 0; i < count; ++i) {
    std::memcpy(out + i * w_src, addresses[init], w_src);
  }
  ScalarCall select_call(select, {PrimitiveType::kPred}, 2);
  ScalarCall scatter_call(scatter, {source_type}, 2);
  std::vector<int64_t> o(source_dims.size(), 0);
  const int64_t windows = Product(source_dims);
  for (int64_t e = 0; e < windows; ++e, NextIndex(source_dims, &o)) {
    if ((e & 1023) == 0)
      PJRT_RETURN_IF_ERROR(CheckCancelled(context.cancellation));
    int64_t selected = -1;
    geometry.ForEachElement(
        o,
        [&](int64_t at) {
          if (selected < 0) {
            selected = at;
            return;
          }
          select_call.Set(0, operand_type, operand_data + selected * w_op);
          select_call.Set(1, operand_type, operand_data + at * w_op);
          select_call.Call();
          if (!select_call.True(0)) selected = at;
        },
        context.cancellation);
    if (selected < 0) continue;  // the window covers only padding
    scatter_call.Set(0, source_type, out + selected * w_src);
    scatter_call.Set(1, source_type, source_data + e * w_src);
    scatter_call.Call();
    scatter_call.Store(0, source_type, out + selected * w_src);
  }
  return CheckCancelled(context.cancellation);
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildReduceWindow(
    const KernelArgs& args, KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  const int n = static_cast<int>(args.inputs.size()) / 2;
  auto k = std::make_shared<ReduceWindowKernel>();
  PJRT_ASSIGN_OR_RETURN(k->geometry, Geometry(inst, args.input_shapes[0]));
  for (int j = 0; j < n; ++j) {
    k->inputs.push_back(args.inputs[j]);
    k->inits.push_back(args.inputs[n + j]);
    k->outputs.push_back(args.outputs[j]);
    k->types.push_back(args.input_shapes[j].element_type());
    k->reads.push_back(
        {args.inputs[j], args.input_shapes[j].UnpackedByteSize()});
    k->reads.push_back(
        {args.inputs[n + j], args.input_shapes[n + j].UnpackedByteSize()});
    k->writes.push_back(
        {args.outputs[j], args.output_shapes[j].UnpackedByteSize()});
  }
  k->out_dims.assign(args.output_shapes[0].dimensions().begin(),
                     args.output_shapes[0].dimensions().end());
  const hlo::Computation& region = *inst.called_computations()[0];
  // (Sub-byte integer sums wrap to their bits: the region's Expression does
  // that.)
  if (n == 1 && !IsSubByteInt(k->types[0])) k->op = SimpleReducer(region);
  if (k->op.has_value() && hlo::IsFloatingPoint(k->types[0]) &&
      (*k->op == ExprOp::kAnd || *k->op == ExprOp::kOr)) {
    k->op.reset();
  }
  // The region as an Expression even for a simple reducer: the CUDA
  // backend computes every reducer through it.
  std::vector<PrimitiveType> types = k->types;
  types.insert(types.end(), k->types.begin(), k->types.end());
  PJRT_ASSIGN_OR_RETURN(k->region, ScalarRegionExpression(region, types));
  return k;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildSelectAndScatter(
    const KernelArgs& args, KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  auto k = std::make_shared<SelectAndScatterKernel>();
  PJRT_ASSIGN_OR_RETURN(k->geometry, Geometry(inst, args.input_shapes[0]));
  k->operand = args.inputs[0];
  k->source = args.inputs[1];
  k->init = args.inputs[2];
  k->output = args.outputs[0];
  k->operand_type = args.input_shapes[0].element_type();
  k->source_type = args.input_shapes[1].element_type();
  k->source_dims.assign(args.input_shapes[1].dimensions().begin(),
                        args.input_shapes[1].dimensions().end());
  for (int i = 0; i < 3; ++i) {
    k->reads.push_back(
        {args.inputs[i], args.input_shapes[i].UnpackedByteSize()});
  }
  k->writes.push_back(
      {args.outputs[0], args.output_shapes[0].UnpackedByteSize()});
  const PrimitiveType t = k->operand_type, s = k->source_type;
  PJRT_ASSIGN_OR_RETURN(k->select, ScalarRegionExpression(
                                       *inst.called_computations()[0], {t, t}));
  PJRT_ASSIGN_OR_RETURN(
      k->scatter,
      ScalarRegionExpression(*inst.called_computations()[1], {s, s}));
  return k;
}

}  // namespace pjrt::compiler::host
