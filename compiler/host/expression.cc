#include "compiler/host/expression.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "compiler/host/host_kernels.h"

// The built-in level of the kernels (x86-64-v2, or native), whose helpers
// the methods below use too; host_kernels_module.cc builds the others.
#define PJRT_HOST_ISA isa_builtin
#include "compiler/host/expression_kernels.inc"

namespace pjrt::compiler::host {

using PJRT_HOST_ISA::ConvertValue;
using PJRT_HOST_ISA::DispatchCompute;

void EvaluateBlock(const Expression& expr, absl::Span<const void* const> inputs,
                   int64_t n, absl::Span<const void*> outputs,
                   BlockScratch& scratch) {
  HostKernels().evaluate_block(expr, inputs, n, outputs, scratch);
}

void StorageToCompute(PrimitiveType type, const void* src, void* dst,
                      int64_t n) {
  HostKernels().storage_to_compute(type, src, dst, n);
}

void ComputeToStorage(PrimitiveType type, const void* src, void* dst,
                      int64_t n) {
  HostKernels().compute_to_storage(type, src, dst, n);
}

uint64_t ExpressionId::Next() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

int Expression::Add(const ExprNode& node) {
  id_.Renew();
  nodes_.push_back(node);
  if (node.op == ExprOp::kInput)
    num_inputs_ = std::max(num_inputs_, node.input + 1);
  return static_cast<int>(nodes_.size()) - 1;
}

int Expression::AddInput(int input, PrimitiveType type) {
  ExprNode node;
  node.op = ExprOp::kInput;
  node.input = input;
  node.type = type;
  return Add(node);
}

int Expression::AddSplatFromDouble(PrimitiveType type, double value) {
  ExprNode node;
  node.op = ExprOp::kSplat;
  node.type = type;
  DispatchCompute(type, [&](auto t) {
    using T = decltype(t);
    T v = ConvertValue<T>(value, type == PrimitiveType::kPred);
    std::memcpy(node.splat_bits, &v, sizeof(T));
  });
  return Add(node);
}

int Expression::AddSplatFromStorage(PrimitiveType type, const void* storage) {
  ExprNode node;
  node.op = ExprOp::kSplat;
  node.type = type;
  StorageToCompute(type, storage, node.splat_bits, 1);
  return Add(node);
}

double Expression::CyclesPerElement() const {
  double cycles = 1;
  for (const ExprNode& n : nodes_) {
    switch (n.op) {
      case ExprOp::kInput:
      case ExprOp::kSplat:
        cycles += 0.5;
        break;
      case ExprOp::kExp:
      case ExprOp::kExpm1:
      case ExprOp::kLog:
      case ExprOp::kLog1p:
      case ExprOp::kTanh:
      case ExprOp::kLogistic:
      case ExprOp::kSin:
      case ExprOp::kCos:
      case ExprOp::kTan:
      case ExprOp::kErf:
      case ExprOp::kCbrt:
      case ExprOp::kPower:
      case ExprOp::kAtan2:
      case ExprOp::kRemainder:
        cycles += 20;
        break;
      default:
        cycles += 1;
    }
  }
  return cycles;
}

void Expression::Finalize() {
  id_.Renew();  // the slots change
  const int n = size();
  std::vector<int> last_use(n, -1);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) {
      if (nodes_[i].operands[k] >= 0) last_use[nodes_[i].operands[k]] = i;
    }
  }
  for (int o : outputs_) last_use[o] = n;  // outputs live to the end
  slots_.assign(n, -1);
  std::vector<int> free_slots;
  int next = 0;
  for (int i = 0; i < n; ++i) {
    if (nodes_[i].op == ExprOp::kInput) continue;
    if (nodes_[i].op == ExprOp::kSplat) {
      slots_[i] = next++;  // never shared
    } else if (!free_slots.empty()) {
      slots_[i] = free_slots.back();
      free_slots.pop_back();
    } else {
      slots_[i] = next++;
    }
    // Operands whose last use is this node free their slots for later
    // nodes (not this one: conversions change widths in place).
    for (int k = 0; k < 3; ++k) {
      const int o = nodes_[i].operands[k];
      if (o < 0 || last_use[o] != i || slots_[o] < 0 ||
          nodes_[o].op == ExprOp::kSplat) {
        continue;
      }
      if (std::find(free_slots.begin(), free_slots.end(), slots_[o]) ==
          free_slots.end()) {
        free_slots.push_back(slots_[o]);
      }
    }
  }
}

}  // namespace pjrt::compiler::host
