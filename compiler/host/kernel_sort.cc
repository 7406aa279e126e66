// sort (any number of operands, any comparator) and top-k.
//
// A comparator that compares operand 0's two parameters with LT or GT
// (total order or not) sorts by keys mapped to unsigned integers that
// order as the comparison does, with the original position breaking ties:
// a strict total order, so the result is stable and std::sort is safe. Any
// other comparator runs as an Expression inside a merge sort of our own,
// which stays in bounds however inconsistent the client's comparator is.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

// Maps element `i` of a storage array to an unsigned integer that orders
// as XLA's total order does (-NaN < -inf < ... < -0 < +0 < ... < +NaN for
// floats).
uint64_t TotalOrderKey(PrimitiveType type, const void* base, int64_t i) {
  const auto fold = [](uint64_t bits, int width) {
    const uint64_t sign = uint64_t{1} << (width - 1);
    const uint64_t mask = width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    return (bits & sign) != 0 ? (~bits & mask) : (bits | sign);
  };
  switch (type) {
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return fold(static_cast<const uint16_t*>(base)[i], 16);
    case PrimitiveType::kF32:
      return fold(static_cast<const uint32_t*>(base)[i], 32);
    case PrimitiveType::kF64:
      return fold(static_cast<const uint64_t*>(base)[i], 64);
    case PrimitiveType::kS8:
      return static_cast<uint8_t>(static_cast<const uint8_t*>(base)[i] ^ 0x80);
    case PrimitiveType::kS16:
      return static_cast<uint16_t>(static_cast<const uint16_t*>(base)[i] ^ 0x8000);
    case PrimitiveType::kS32:
      return static_cast<const uint32_t*>(base)[i] ^ 0x80000000u;
    case PrimitiveType::kS64:
      return static_cast<const uint64_t*>(base)[i] ^ (uint64_t{1} << 63);
    default:
      return static_cast<uint64_t>(LoadIndex(type, base, i)) ^
             (type == PrimitiveType::kU64 ? 0 : 0);
  }
}

uint64_t UnsignedKey(PrimitiveType type, const void* base, int64_t i) {
  if (type == PrimitiveType::kU64) return static_cast<const uint64_t*>(base)[i];
  if (type == PrimitiveType::kPred) return static_cast<const uint8_t*>(base)[i] != 0;
  return TotalOrderKey(type, base, i);
}

// A stable bottom-up merge sort of `perm` by less(a, b); touches only
// perm[0, n) and tmp[0, n).
template <typename Less>
void MergeSort(int64_t* perm, int64_t* tmp, int64_t n, Less less) {
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        // Take from the right only when strictly less: stable.
        tmp[k++] = less(perm[j], perm[i]) ? perm[j++] : perm[i++];
      }
      while (i < mid) tmp[k++] = perm[i++];
      while (j < hi) tmp[k++] = perm[j++];
    }
    std::copy(tmp, tmp + n, perm);
  }
}

enum class KeyOrder { kGeneric, kTotalAscending, kTotalDescending,
                      kFloatAscending, kFloatDescending };

// What the comparator computes, when it is a plain comparison of operand
// 0's parameters.
KeyOrder Classify(const hlo::Computation& cmp, PrimitiveType key_type) {
  const hlo::Instruction* root = cmp.root();
  if (root->opcode() != hlo::Opcode::kCompare || cmp.parameters().size() < 2) {
    return KeyOrder::kGeneric;
  }
  const auto* p0 = cmp.parameters()[0];
  const auto* p1 = cmp.parameters()[1];
  bool less;
  const hlo::ComparisonDirection dir = root->attributes().comparison_direction;
  if (dir == hlo::ComparisonDirection::kLt) {
    less = true;
  } else if (dir == hlo::ComparisonDirection::kGt) {
    less = false;
  } else {
    return KeyOrder::kGeneric;
  }
  if (root->operand(0) == p1 && root->operand(1) == p0) {
    less = !less;
  } else if (root->operand(0) != p0 || root->operand(1) != p1) {
    return KeyOrder::kGeneric;
  }
  const bool is_float = hlo::IsFloatingPoint(key_type);
  const bool total =
      root->attributes().comparison_type == hlo::ComparisonType::kTotalOrder;
  if (is_float && !total) {
    return less ? KeyOrder::kFloatAscending : KeyOrder::kFloatDescending;
  }
  return less ? KeyOrder::kTotalAscending : KeyOrder::kTotalDescending;
}

class SortKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override {
    const int64_t rows = outer_ * inner_;
    if (rows == 0 || length_ == 0) return absl::OkStatus();
    const double cost = static_cast<double>(length_) *
                        (order_ == KeyOrder::kGeneric ? 400.0 : 40.0);
    ThreadPool::Get().ParallelFor(rows, cost, [&](int64_t first, int64_t last) {
      std::vector<int64_t> perm(length_), tmp(length_);
      std::vector<std::pair<uint64_t, int64_t>> keyed;
      std::unique_ptr<RegionRunner> runner;
      std::vector<uint64_t> params(2 * types_.size());
      std::vector<const void*> in_ptrs;
      if (order_ == KeyOrder::kGeneric) {
        runner = std::make_unique<RegionRunner>(comparator_);
        runner->SetOutputTypes({PrimitiveType::kPred});
        for (uint64_t& p : params) in_ptrs.push_back(&p);
      }
      for (int64_t row = first; row < last; ++row) {
        if (IsCancelled(context.cancellation)) return;
        const int64_t base = (row / inner_) * length_ * inner_ + row % inner_;
        const void* keys = addresses[inputs_[0]];
        const PrimitiveType kt = types_[0];
        if (order_ == KeyOrder::kTotalAscending ||
            order_ == KeyOrder::kTotalDescending) {
          keyed.resize(length_);
          const bool flip = order_ == KeyOrder::kTotalDescending;
          for (int64_t i = 0; i < length_; ++i) {
            const uint64_t k = UnsignedKey(kt, keys, base + i * inner_);
            keyed[i] = {flip ? ~k : k, i};
          }
          std::sort(keyed.begin(), keyed.end());
          for (int64_t i = 0; i < length_; ++i) perm[i] = keyed[i].second;
        } else if (order_ == KeyOrder::kFloatAscending ||
                   order_ == KeyOrder::kFloatDescending) {
          std::iota(perm.begin(), perm.end(), 0);
          const bool asc = order_ == KeyOrder::kFloatAscending;
          MergeSort(perm.data(), tmp.data(), length_, [&](int64_t a, int64_t b) {
            const double x = LoadAsDouble(kt, keys, base + a * inner_);
            const double y = LoadAsDouble(kt, keys, base + b * inner_);
            return asc ? x < y : x > y;
          });
        } else {
          std::iota(perm.begin(), perm.end(), 0);
          MergeSort(perm.data(), tmp.data(), length_, [&](int64_t a, int64_t b) {
            for (size_t j = 0; j < types_.size(); ++j) {
              const int w = hlo::ByteWidth(types_[j]);
              const char* data = static_cast<const char*>(addresses[inputs_[j]]);
              uint64_t sa = 0, sb = 0;
              std::memcpy(&sa, data + (base + a * inner_) * w, w);
              std::memcpy(&sb, data + (base + b * inner_) * w, w);
              StorageToCompute(types_[j], &sa, &params[2 * j], 1);
              StorageToCompute(types_[j], &sb, &params[2 * j + 1], 1);
            }
            uint8_t result = 0;
            void* out = &result;
            runner->Evaluate(in_ptrs, 1, {&out, 1});
            return result != 0;
          });
        }
        for (size_t j = 0; j < types_.size(); ++j) {
          const int w = hlo::ByteWidth(types_[j]);
          const char* src = static_cast<const char*>(addresses[inputs_[j]]);
          char* dst = static_cast<char*>(addresses[outputs_[j]]);
          for (int64_t i = 0; i < length_; ++i) {
            std::memcpy(dst + (base + i * inner_) * w,
                        src + (base + perm[i] * inner_) * w, w);
          }
        }
      }
    });
    return CheckCancelled(context.cancellation);
  }

  std::vector<int> inputs_, outputs_;
  std::vector<PrimitiveType> types_;
  int64_t outer_ = 1, length_ = 1, inner_ = 1;
  KeyOrder order_ = KeyOrder::kGeneric;
  Expression comparator_;
};

class TopKKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override {
    if (rows_ == 0) return absl::OkStatus();
    ThreadPool::Get().ParallelFor(
        rows_, static_cast<double>(n_) * 20, [&](int64_t first, int64_t last) {
          std::vector<std::pair<uint64_t, int64_t>> keyed(n_);
          const int w = hlo::ByteWidth(type_);
          const char* in = static_cast<const char*>(addresses[input_]);
          char* values = static_cast<char*>(addresses[values_]);
          int32_t* indices = static_cast<int32_t*>(addresses[indices_]);
          for (int64_t row = first; row < last; ++row) {
            if (IsCancelled(context.cancellation)) return;
            for (int64_t i = 0; i < n_; ++i) {
              // Largest first; ties keep the lower index first.
              keyed[i] = {~UnsignedKey(type_, in, row * n_ + i), i};
            }
            std::partial_sort(keyed.begin(), keyed.begin() + k_, keyed.end());
            for (int64_t i = 0; i < k_; ++i) {
              std::memcpy(values + (row * k_ + i) * w,
                          in + (row * n_ + keyed[i].second) * w, w);
              indices[row * k_ + i] = static_cast<int32_t>(keyed[i].second);
            }
          }
        });
    return CheckCancelled(context.cancellation);
  }

  int input_ = -1, values_ = -1, indices_ = -1;
  PrimitiveType type_ = PrimitiveType::kF32;
  int64_t rows_ = 0, n_ = 0, k_ = 0;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Kernel>> BuildSort(const KernelArgs& args,
                                                  KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  auto k = std::make_shared<SortKernel>();
  const hlo::Shape& shape = args.input_shapes[0];
  const int64_t dim = inst.attributes().dimensions[0];
  for (size_t j = 0; j < args.inputs.size(); ++j) {
    k->inputs_.push_back(args.inputs[j]);
    k->outputs_.push_back(args.outputs[j]);
    k->types_.push_back(args.input_shapes[j].element_type());
    k->reads.push_back({args.inputs[j], args.input_shapes[j].ByteSize()});
    k->writes.push_back({args.outputs[j], args.output_shapes[j].ByteSize()});
  }
  if (shape.rank() == 0) {
    k->length_ = 1;
  } else {
    for (int i = 0; i < shape.rank(); ++i) {
      if (i < dim) k->outer_ *= shape.dimensions(i);
      if (i > dim) k->inner_ *= shape.dimensions(i);
    }
    k->length_ = shape.dimensions(dim);
  }
  const hlo::Computation& cmp = *inst.called_computations()[0];
  k->order_ = Classify(cmp, k->types_[0]);
  if (k->order_ == KeyOrder::kGeneric) {
    std::vector<PrimitiveType> params;
    for (PrimitiveType t : k->types_) {
      params.push_back(t);
      params.push_back(t);
    }
    PJRT_ASSIGN_OR_RETURN(k->comparator_, ScalarRegionExpression(cmp, params));
  }
  return k;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildTopK(const KernelArgs& args,
                                                  KernelCompiler&) {
  auto k = std::make_shared<TopKKernel>();
  const hlo::Shape& in = args.input_shapes[0];
  k->input_ = args.inputs[0];
  k->values_ = args.outputs[0];
  k->indices_ = args.outputs[1];
  k->type_ = in.element_type();
  k->n_ = in.dimensions(in.rank() - 1);
  k->k_ = args.output_shapes[0].dimensions(in.rank() - 1);
  k->rows_ = k->n_ == 0 ? 0 : in.ElementCount() / k->n_;
  if (k->n_ == 0) k->rows_ = 0;
  k->reads = {{args.inputs[0], in.ByteSize()}};
  k->writes = {{args.outputs[0], args.output_shapes[0].ByteSize()},
               {args.outputs[1], args.output_shapes[1].ByteSize()}};
  return k;
}

}  // namespace pjrt::compiler::host
