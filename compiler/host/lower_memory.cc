// The host compiler's buffer assignment (see lowering.h): which values get
// a buffer (dots reading a transpose in place, materialization, the fusion
// depth limit) and their slots, results written in place where safe
// (donated buffers included), and scratch placement by liveness. The
// emitters (emit_loops.cc, lower_ops.cc) only read the decisions.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler/host/lowering.h"
#include "compiler/host/types.h"

namespace pjrt::compiler::host::lowering {
namespace {

// Who reads and writes each slot, for deciding where donated results may
// be computed in place. Built once per program: O(steps + slots).
struct SlotUses {
  // Per base slot (views resolved): the last step that reads it (-1: none).
  std::vector<int> last_reader;
  // Per slot: the last step that writes it (-1: none), and whether that
  // step is a loop.
  std::vector<int> writer;
  std::vector<bool> writer_is_loop;
};

int BaseSlot(const HostProgram& program, int x) {
  while (x >= 0 && program.slots[x].kind == BufferSlot::Kind::kView) {
    x = static_cast<int>(program.slots[x].index);
  }
  return x;
}

// Calls read(slot, contiguous_loop_input) for every slot `step` reads.
template <typename F>
void ForEachRead(const Step& step, F read) {
  std::visit(
      [&](const auto& st) {
        using S = std::decay_t<decltype(st)>;
        if constexpr (std::is_same_v<S, LoopStep>) {
          for (const LoopInput& in : st.inputs) {
            if (in.kind == LoopInput::Kind::kBuffer)
              read(in.slot, in.contiguous);
          }
        } else if constexpr (std::is_same_v<S, DotStep>) {
          read(st.lhs, false);
          read(st.rhs, false);
        } else if constexpr (std::is_same_v<S, ReduceStep>) {
          read(st.input, false);
          read(st.init, false);
        } else if constexpr (std::is_same_v<S, GenericReduceStep>) {
          for (int x : st.inputs) read(x, false);
          for (int x : st.inits) read(x, false);
        } else if constexpr (std::is_same_v<S, CopyStep>) {
          read(st.src, false);
        } else if constexpr (std::is_same_v<S, FillStep>) {
          read(st.value, false);
        } else if constexpr (std::is_same_v<S, CollectiveStep>) {
          for (int x : st.inputs) read(x, false);
        } else if constexpr (std::is_same_v<S, KernelStep>) {
          for (const SlotAccess& x : st.kernel->reads) read(x.slot, false);
        } else {
          read(st.src, false);
          for (int x : st.start_slots) read(x, false);
        }
      },
      step);
}

SlotUses FindSlotUses(const HostProgram& program) {
  SlotUses uses;
  uses.last_reader.assign(program.slots.size(), -1);
  uses.writer.assign(program.slots.size(), -1);
  uses.writer_is_loop.assign(program.slots.size(), false);
  for (int i = 0; i < static_cast<int>(program.steps.size()); ++i) {
    const Step& step = program.steps[i];
    ForEachRead(step, [&](int slot, bool) {
      const int base = BaseSlot(program, slot);
      if (base >= 0) uses.last_reader[base] = i;
    });
    const auto wrote = [&](int slot) {
      if (slot < 0) return;
      uses.writer[slot] = i;
      uses.writer_is_loop[slot] = std::holds_alternative<LoopStep>(step);
    };
    std::visit(
        [&](const auto& st) {
          using S = std::decay_t<decltype(st)>;
          if constexpr (std::is_same_v<S, LoopStep>) {
            wrote(st.output_slot);
          } else if constexpr (std::is_same_v<S, DotStep> ||
                               std::is_same_v<S, ReduceStep>) {
            wrote(st.out);
          } else if constexpr (std::is_same_v<S, GenericReduceStep> ||
                               std::is_same_v<S, CollectiveStep>) {
            for (int x : st.outputs_or_outs()) wrote(x);
          } else if constexpr (std::is_same_v<S, KernelStep>) {
            for (const SlotAccess& x : st.kernel->writes) wrote(x.slot);
          } else {
            wrote(st.dst);
          }
        },
        step);
  }
  return uses;
}

// True if step `s` reads base slot `slot` other than through contiguous
// loop inputs, or if any later step reads it.
bool UnsafeToOverwrite(const HostProgram& program, const SlotUses& uses,
                       int slot, int s) {
  if (uses.last_reader[slot] > s) return true;
  bool unsafe = false;
  ForEachRead(program.steps[s], [&](int x, bool contiguous) {
    if (BaseSlot(program, x) == slot && !contiguous) unsafe = true;
  });
  return unsafe;
}

}  // namespace

absl::Status Lowering::EmitResults() {
  std::vector<bool> claimed(program_->slots.size(), false);
  // Results that may share memory with a parameter (donation).
  std::vector<int> aliased_param(results_.size(), -1);
  for (const auto& [result, param] : options_.aliases) {
    if (result >= 0 && result < static_cast<int>(results_.size())) {
      aliased_param[result] = param;
    }
  }
  const SlotUses uses = FindSlotUses(*program_);
  std::vector<int> slot_of_parameter;
  for (size_t k = 0; k < program_->slots.size(); ++k) {
    const BufferSlot& b = program_->slots[k];
    if (b.kind != BufferSlot::Kind::kParameter) continue;
    if (slot_of_parameter.size() <= static_cast<size_t>(b.index)) {
      slot_of_parameter.resize(b.index + 1, -1);
    }
    slot_of_parameter[b.index] = static_cast<int>(k);
  }
  // Copies that read parameters run before copies into aliased results.
  std::vector<CopyStep> early, late;
  const auto copy_to = [&](int src, int dst, const Shape& shape) {
    CopyStep copy;
    copy.src = src;
    copy.dst = dst;
    copy.element_bytes = hlo::ByteWidth(shape.element_type());
    copy.dims = {shape.ElementCount()};
    copy.src_map.strides = {1};
    copy.dst_map.strides = {1};
    return copy;
  };
  // Result `i` is computed straight into its result buffer.
  const auto claim = [&](BufferSlot& slot, const Node& n, size_t i) {
    slot.kind = BufferSlot::Kind::kResult;
    slot.index = static_cast<int64_t>(i);
    claimed[n.slot] = true;
  };
  // Result `i` is computed elsewhere and copied in, by a copy in `steps`.
  const auto copy_in = [&](const Node& n, size_t i,
                           std::vector<CopyStep>* steps) {
    int result =
        NewSlot(BufferSlot::Kind::kResult, n.shape, static_cast<int64_t>(i));
    claimed.push_back(true);
    steps->push_back(copy_to(n.slot, result, n.shape));
  };
  // How many results each base slot is: a result that is a parameter (or
  // a view of one) is copied from it after every step, so that parameter
  // may not be overwritten in place for another result.
  std::vector<int> results_of_slot(program_->slots.size(), 0);
  for (int r : results_) {
    const int base = BaseSlot(*program_, nodes_[r].slot);
    if (base >= 0) ++results_of_slot[base];
  }
  // Whether step `writer` is the update of a dynamic-update-slice into
  // `slot` whose operand is the parameter in `param_slot`, copied into
  // `slot` by the step before: written where the parameter lies, that copy
  // is skipped and only the update is written.
  const auto updates_param = [&](int writer, int slot, int param_slot) {
    if (writer < 1 || param_slot < 0) return false;
    const auto* update =
        std::get_if<DynamicSliceStep>(&program_->steps[writer]);
    const auto* copy = std::get_if<CopyStep>(&program_->steps[writer - 1]);
    return update != nullptr && update->update && update->dst == slot &&
           copy != nullptr && copy->dst == slot &&
           BaseSlot(*program_, copy->src) == param_slot;
  };
  std::vector<KernelStep> packs;
  std::vector<int> late_results;  // the result of each copy in `late`
  for (size_t i = 0; i < results_.size(); ++i) {
    const Node& n = nodes_[results_[i]];
    if (!nested_ && hlo::IsPackedType(n.shape.element_type())) {
      // The buffer holds it packed: pack once, after every other step (a
      // donated parameter was unpacked before any of them).
      int result =
          NewSlot(BufferSlot::Kind::kResult, n.shape, static_cast<int64_t>(i));
      program_->slots[result].bytes = n.shape.ByteSize();
      claimed.push_back(true);
      packs.push_back(KernelStep{SubByteEdgeKernel(
          /*pack=*/true, n.shape.element_type(), n.shape.ElementCount(), n.slot,
          result)});
      continue;
    }
    BufferSlot& slot = program_->slots[n.slot];
    if (aliased_param[i] >= 0) {
      const int param_slot =
          static_cast<size_t>(aliased_param[i]) < slot_of_parameter.size()
              ? slot_of_parameter[aliased_param[i]]
              : -1;
      const bool scratch =
          slot.kind == BufferSlot::Kind::kScratch && !claimed[n.slot];
      const int writer = scratch ? uses.writer[n.slot] : -1;
      const bool is_loop = scratch && uses.writer_is_loop[n.slot];
      const bool copied = param_slot >= 0 && results_of_slot[param_slot] > 0;
      if (writer >= 0 && !copied &&
          (is_loop || updates_param(writer, n.slot, param_slot)) &&
          (param_slot < 0 ||
           !UnsafeToOverwrite(*program_, uses, param_slot, writer))) {
        // The loop reads the parameter element by element before writing
        // the same element, or the update writes into the parameter where
        // it lies; nothing reads it afterwards.
        claim(slot, n, i);
      } else {
        // Otherwise compute elsewhere and copy in at the very end (the copy
        // is skipped at run time when source and destination coincide).
        copy_in(n, i, &late);
        late_results.push_back(static_cast<int>(i));
      }
      continue;
    }
    if (slot.kind == BufferSlot::Kind::kScratch && !claimed[n.slot]) {
      // The step that computes it writes straight into the result.
      claim(slot, n, i);
    } else {
      copy_in(n, i, &early);
    }
  }
  // A late copy that reads a parameter another late copy writes over (a
  // donated parameter returned as another donated result, two swapped)
  // reads a snapshot taken before any of them.
  for (size_t c = 0; c < late.size(); ++c) {
    const int src = BaseSlot(*program_, late[c].src);
    const BufferSlot& from = program_->slots[src];
    if (from.kind != BufferSlot::Kind::kParameter) continue;
    bool overwritten = false;
    for (size_t o = 0; o < late.size(); ++o) {
      overwritten |= o != c && aliased_param[late_results[o]] == from.index;
    }
    if (!overwritten) continue;
    const Shape& shape = nodes_[results_[late_results[c]]].shape;
    const int snapshot = NewSlot(BufferSlot::Kind::kScratch, shape);
    early.push_back(copy_to(late[c].src, snapshot, shape));
    late[c].src = snapshot;
  }
  for (CopyStep& c : early) program_->steps.push_back(std::move(c));
  for (CopyStep& c : late) program_->steps.push_back(std::move(c));
  for (KernelStep& k : packs) program_->steps.push_back(std::move(k));
  program_->packed_edges = !nested_;
  return absl::OkStatus();
}

absl::Status Lowering::PlanScratch() {
  std::vector<BufferSlot>& slots = program_->slots;
  const auto base = [&](int s) {
    while (slots[s].kind == BufferSlot::Kind::kView)
      s = static_cast<int>(slots[s].index);
    return s;
  };
  const int num_slots = static_cast<int>(slots.size());
  std::vector<int> first(num_slots, -1), last(num_slots, -1);
  const auto touch = [&](int s, int step) {
    if (s < 0) return;
    s = base(s);
    if (first[s] < 0) first[s] = step;
    last[s] = std::max(last[s], step);
  };
  for (int i = 0; i < static_cast<int>(program_->steps.size()); ++i) {
    std::visit(
        [&](const auto& s) {
          using S = std::decay_t<decltype(s)>;
          if constexpr (std::is_same_v<S, LoopStep>) {
            for (const LoopInput& in : s.inputs) {
              if (in.kind == LoopInput::Kind::kBuffer) touch(in.slot, i);
            }
            touch(s.output_slot, i);
          } else if constexpr (std::is_same_v<S, DotStep>) {
            touch(s.lhs, i);
            touch(s.rhs, i);
            touch(s.out, i);
          } else if constexpr (std::is_same_v<S, ReduceStep>) {
            touch(s.input, i);
            touch(s.init, i);
            touch(s.out, i);
          } else if constexpr (std::is_same_v<S, GenericReduceStep>) {
            for (int x : s.inputs) touch(x, i);
            for (int x : s.inits) touch(x, i);
            for (int x : s.outs) touch(x, i);
          } else if constexpr (std::is_same_v<S, CopyStep>) {
            touch(s.src, i);
            touch(s.dst, i);
          } else if constexpr (std::is_same_v<S, FillStep>) {
            touch(s.value, i);
            touch(s.dst, i);
          } else if constexpr (std::is_same_v<S, CollectiveStep>) {
            for (int x : s.inputs) touch(x, i);
            for (int x : s.outputs) touch(x, i);
          } else if constexpr (std::is_same_v<S, KernelStep>) {
            for (const SlotAccess& x : s.kernel->reads) touch(x.slot, i);
            for (const SlotAccess& x : s.kernel->writes) touch(x.slot, i);
          } else {
            touch(s.src, i);
            touch(s.dst, i);
            for (int x : s.start_slots) touch(x, i);
          }
        },
        program_->steps[i]);
  }
  // Best fit over the free gaps below the frontier (the end of the highest
  // live block), in O(log n) per slot: a program may have a million.
  std::map<int64_t, int64_t> gaps;                // offset -> size
  std::set<std::pair<int64_t, int64_t>> by_size;  // (size, offset)
  int64_t frontier = 0, top = 0;
  // Live blocks by the last step that uses them: (end, offset, size).
  using Live = std::tuple<int, int64_t, int64_t>;
  std::priority_queue<Live, std::vector<Live>, std::greater<Live>> live;
  const auto add_gap = [&](int64_t offset, int64_t size) {
    gaps[offset] = size;
    by_size.insert({size, offset});
  };
  const auto remove_gap = [&](std::map<int64_t, int64_t>::iterator it) {
    by_size.erase({it->second, it->first});
    return gaps.erase(it);
  };
  const auto release = [&](int64_t offset, int64_t size) {
    // Coalesce with the gaps on either side.
    auto next = gaps.lower_bound(offset);
    if (next != gaps.end() && next->first == offset + size) {
      size += next->second;
      next = remove_gap(next);
    }
    if (next != gaps.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        remove_gap(prev);
      }
    }
    if (offset + size == frontier) {
      frontier = offset;  // the space above the highest live block
    } else {
      add_gap(offset, size);
    }
  };
  std::vector<int> order;
  for (int s = 0; s < num_slots; ++s) {
    if (slots[s].kind == BufferSlot::Kind::kScratch) order.push_back(s);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return first[a] < first[b]; });
  for (int s : order) {
    const int64_t align = options_.scratch_alignment;
    const int64_t size =
        std::max<int64_t>((slots[s].bytes + align - 1) / align * align, align);
    const int start = first[s];
    // Memory of slots last used before this one is first written is free.
    while (!live.empty() && std::get<0>(live.top()) < start) {
      auto [unused, offset, bytes] = live.top();
      live.pop();
      release(offset, bytes);
    }
    int64_t offset = frontier;
    auto fit = by_size.lower_bound({size, INT64_MIN});
    if (fit != by_size.end()) {
      const auto [gap, at] = *fit;
      remove_gap(gaps.find(at));
      if (gap > size) add_gap(at + size, gap - size);
      offset = at;
    } else {
      frontier += size;
    }
    slots[s].offset = offset;
    live.push({std::max(last[s], start), offset, size});
    top = std::max(top, offset + size);
    if (top > hlo::kMaxArrayBytes) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "the program needs more than %d bytes of scratch memory per run",
          hlo::kMaxArrayBytes));
    }
  }
  program_->scratch_bytes_ = top;
  return absl::OkStatus();
}

void Lowering::FoldTransposedDots() {
  std::vector<std::vector<int>> users(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (int o : nodes_[i].operands) {
      if (users[o].empty() || users[o].back() != static_cast<int>(i)) {
        users[o].push_back(static_cast<int>(i));
      }
    }
  }
  std::vector<bool> is_result(nodes_.size(), false);
  for (int r : results_) is_result[r] = true;
  for (size_t t = 0; t < nodes_.size(); ++t) {
    Node& transpose = nodes_[t];
    if (transpose.inst->opcode() != Opcode::kTranspose ||
        transpose.shape.rank() != 2 ||
        transpose.inst->attributes().dimensions != std::vector<int64_t>{1, 0}) {
      continue;
    }
    const int d = transpose.operands[0];
    Node& dot = nodes_[d];
    if (dot.inst->opcode() != Opcode::kDot || dot.dot_swapped || is_result[d] ||
        users[d].size() != 1 ||
        !dot.inst->attributes()
             .dot_dimension_numbers.lhs_batch_dimensions.empty()) {
      continue;
    }
    std::swap(dot.operands[0], dot.operands[1]);
    dot.dot_swapped = true;
    dot.shape = transpose.shape;
    transpose.kind = Kind::kReshape;  // now a view of the dot's result
  }
}

void Lowering::DecideMaterialization() {
  // Users are counted once each, however many times they use the value
  // (multiply(s, s) reads s once per element).
  for (Node& n : nodes_) {
    std::vector<int> distinct = n.operands;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()),
                   distinct.end());
    for (int o : distinct) nodes_[o].users++;
  }
  for (int r : results_) nodes_[r].materialize = true;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    switch (n.kind) {
      case Kind::kSource:
      case Kind::kRunValue:
      case Kind::kOpaque:
      case Kind::kKernel:
      case Kind::kReshape:
        n.materialize = true;
        break;
      case Kind::kElementwise:
        if (n.users > 1) n.materialize = true;
        break;
      default:
        break;
    }
    // Operands that must be buffers.
    const Opcode op = n.inst->opcode();
    for (size_t k = 0; k < n.operands.size(); ++k) {
      Node& operand = nodes_[n.operands[k]];
      // Kernels read buffers.
      bool needs_buffer = n.kind == Kind::kKernel;
      switch (op) {
        case Opcode::kReshape:
        case Opcode::kBitcast:
        case Opcode::kPad:
        case Opcode::kConcatenate:
        case Opcode::kDynamicSlice:
        case Opcode::kDynamicUpdateSlice:
        case Opcode::kAllReduce:
        case Opcode::kAllReduceStart:
        case Opcode::kAllGather:
        case Opcode::kAllGatherStart:
        case Opcode::kReduceScatter:
        case Opcode::kAllToAll:
        case Opcode::kCollectivePermute:
        case Opcode::kCollectivePermuteStart:
          needs_buffer = true;
          break;
        case Opcode::kReduce:
          // Initial values are read as scalars.
          needs_buffer = k >= n.operands.size() / 2;
          break;
        case Opcode::kBroadcast:
          // Computing the operand once beats recomputing it per copy.
          needs_buffer = operand.kind == Kind::kElementwise;
          break;
        default:
          break;
      }
      if (needs_buffer) operand.materialize = true;
    }
  }
  LimitFusion();
}

void Lowering::LimitFusion() {
  // An element-wise value read at more than one place of a loop, through
  // re-indexing nodes (a slice and a reverse of it, say), would be computed
  // once per place, and chains of such diamonds double the work at every
  // level. Count, for each node, the places it is read from (through
  // re-indexings that are not materialized), and materialize element-wise
  // values read from more than one. Users come after their operands.
  std::vector<std::vector<int>> users(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    std::vector<int> distinct = nodes_[i].operands;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()),
                   distinct.end());
    for (int o : distinct) users[o].push_back(static_cast<int>(i));
  }
  std::vector<int64_t> reads(nodes_.size(), 0);
  for (int i = static_cast<int>(nodes_.size()) - 1; i >= 0; --i) {
    int64_t count = 0;
    for (int u : users[i]) {
      const Node& user = nodes_[u];
      const int64_t through =
          user.kind == Kind::kIndex && !user.materialize ? reads[u] : 1;
      count = std::min<int64_t>(count + through, int64_t{1} << 40);
    }
    reads[i] = count;
    Node& n = nodes_[i];
    if (n.kind == Kind::kElementwise && count > 1) n.materialize = true;
  }
  // A fused expression is evaluated by recursion over its operands; cut
  // chains longer than kMaxFusedDepth into loops of their own, so that a
  // long chain of element-wise ops neither overflows the compiler's stack
  // nor builds one enormous loop body.
  std::vector<int> depth(nodes_.size(), 0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = nodes_[i];
    if (n.kind != Kind::kElementwise && n.kind != Kind::kIndex) continue;
    int d = 0;
    for (int o : n.operands) {
      if (!nodes_[o].materialize) d = std::max(d, depth[o]);
    }
    depth[i] = d + 1;
    if (depth[i] >= kMaxFusedDepth) {
      n.materialize = true;
      depth[i] = 0;
    }
  }
}

int Lowering::NewSlot(BufferSlot::Kind kind, const Shape& shape,
                      int64_t index) {
  BufferSlot slot;
  slot.kind = kind;
  slot.shape = shape;
  slot.index = index;
  slot.bytes = shape.UnpackedByteSize();
  program_->slots.push_back(slot);
  return static_cast<int>(program_->slots.size()) - 1;
}

}  // namespace pjrt::compiler::host::lowering
