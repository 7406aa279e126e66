#include "compiler/host/run_collectives.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler/collectives.h"
#include "compiler/host/combine.h"
#include "compiler/host/types.h"

namespace pjrt::compiler::host {
namespace {

// The op is a template argument so that the loop has no branch on it (and
// vectorizes).
template <hlo::PrimitiveType PT, ExprOp kOp>
void CombineLoop(void* acc_storage, const void* in_storage, int64_t n) {
  using S = typename TypeTraits<PT>::Storage;
  using C = typename TypeTraits<PT>::Compute;
  S* acc = static_cast<S*>(acc_storage);
  const S* in = static_cast<const S*>(in_storage);
  for (int64_t i = 0; i < n; ++i) {
    acc[i] = static_cast<S>(Combine(kOp, C(Load(acc, i)), C(Load(in, i))));
  }
}

template <hlo::PrimitiveType PT>
void CombineInto(ExprOp op, void* acc, const void* in, int64_t n) {
  switch (op) {
    case ExprOp::kAdd:
      return CombineLoop<PT, ExprOp::kAdd>(acc, in, n);
    case ExprOp::kMultiply:
      return CombineLoop<PT, ExprOp::kMultiply>(acc, in, n);
    case ExprOp::kMaximum:
      return CombineLoop<PT, ExprOp::kMaximum>(acc, in, n);
    case ExprOp::kMinimum:
      return CombineLoop<PT, ExprOp::kMinimum>(acc, in, n);
    case ExprOp::kAnd:
      return CombineLoop<PT, ExprOp::kAnd>(acc, in, n);
    case ExprOp::kOr:
      return CombineLoop<PT, ExprOp::kOr>(acc, in, n);
    default:
      return CombineLoop<PT, ExprOp::kAdd>(acc, in, n);
  }
}

// acc[0..n) = acc op in, elementwise, for `type`.
void Accumulate(hlo::PrimitiveType type, ExprOp op, void* acc, const void* in,
                int64_t n) {
  DispatchAnyType(
      type, [&](auto pt) { CombineInto<decltype(pt)::value>(op, acc, in, n); });
}

// Bytes an all-reduce member reduces at a time (within L1/L2).
constexpr int64_t kCollectiveBlockBytes = 16 << 10;

// How a collective's operand splits along its dimension: `outer` slabs
// before it, `after` elements after it, `dim` its size.
struct CollectiveLayout {
  int64_t outer = 1, after = 1, dim = 1;
};

CollectiveLayout LayoutOf(const CollectiveStep& s) {
  CollectiveLayout l;
  const int rank = static_cast<int>(s.input_dims.size());
  for (int d = 0; d < rank; ++d) {
    if (d < s.dimension) l.outer *= s.input_dims[d];
    if (d > s.dimension) l.after *= s.input_dims[d];
  }
  if (rank > 0) l.dim = s.input_dims[s.dimension];
  return l;
}

// Writes member `me`'s output of an all-gather, all-to-all or
// collective-permute from every member's input (`inputs`, group order;
// `in_elements` elements of `bytes` bytes each).
void PullCollectiveOutput(const CollectiveStep& s, const CollectiveLayout& l,
                          int bytes, int64_t in_elements,
                          absl::Span<const void* const> inputs, int me,
                          void* output) {
  const int n = static_cast<int>(inputs.size());
  const auto at = [bytes](const void* base, int64_t element) {
    return static_cast<const char*>(base) + element * bytes;
  };
  char* out = static_cast<char*>(output);
  switch (s.kind) {
    case CollectiveStep::Kind::kAllGather: {
      const int64_t slab = l.dim * l.after;
      for (int q = 0; q < n; ++q) {
        for (int64_t o = 0; o < l.outer; ++o) {
          std::memcpy(out + (o * n + q) * slab * bytes, at(inputs[q], o * slab),
                      slab * bytes);
        }
      }
      break;
    }
    case CollectiveStep::Kind::kAllToAll: {
      const int64_t slab = l.dim / n * l.after;
      for (int64_t o = 0; o < l.outer; ++o) {
        for (int q = 0; q < n; ++q) {
          std::memcpy(out + (o * n + q) * slab * bytes,
                      at(inputs[q], (o * n + me) * slab), slab * bytes);
        }
      }
      break;
    }
    case CollectiveStep::Kind::kCollectivePermute: {
      int source = -1;
      for (const auto& [from, to] : s.source_target_pairs) {
        if (to == me) source = static_cast<int>(from);
      }
      if (source >= 0 && source < n) {
        std::memcpy(output, inputs[source], in_elements * bytes);
      } else {
        std::memset(output, 0, in_elements * bytes);
      }
      break;
    }
    default:
      break;
  }
}

// One operand of a collective whose group spans tasks, as this task's
// leader exchanges it (see ExchangeAcrossTasks).
struct CrossTaskOperand {
  const CollectiveStep& s;
  const CollectiveHub& hub;
  const TaskPlacement& placement;
  const std::vector<int64_t>& group;
  // The group's members on this task (the others' entries are null).
  const std::vector<CollectiveHub::Member>& members;
  hlo::PrimitiveType type;
  int bytes;  // of an element
  int n;      // members in the group
  int64_t in_elements;
  int64_t in_bytes;
  CollectiveLayout layout;
  TaskTransport::Exchange exchange;
  std::vector<int> local;  // group indices of this task's members

  // The index in exchange.tasks of member q's task.
  int RankOf(int q) const {
    return static_cast<int>(std::lower_bound(exchange.tasks.begin(),
                                             exchange.tasks.end(),
                                             hub.TaskOf(group[q])) -
                            exchange.tasks.begin());
  }
};

// All-reduce and reduce-scatter: reduces this task's inputs, then
// all-reduces the partial result across tasks.
absl::Status ReduceAcrossTasks(const CrossTaskOperand& x) {
  const CollectiveStep& s = x.s;
  const std::vector<CollectiveHub::Member>& members = x.members;
  const std::vector<int>& local = x.local;
  const hlo::PrimitiveType type = x.type;
  const int bytes = x.bytes, n = x.n;
  const int64_t in_elements = x.in_elements, in_bytes = x.in_bytes;
  const CollectiveLayout layout = x.layout;
  // An all-reduce sums into the first local member's output (no other
  // member's input lives there); a reduce-scatter's outputs are too small.
  const bool in_output = s.kind == CollectiveStep::Kind::kAllReduce;
  // Not zero-filled: every byte is written before it is read.
  auto scratch = std::make_unique_for_overwrite<char[]>(
      in_output ? 0 : static_cast<size_t>(in_bytes));
  char* sum =
      in_output ? static_cast<char*>(members[local[0]].output) : scratch.get();
  if (in_bytes > 0 && sum != members[local[0]].input) {
    std::memmove(sum, members[local[0]].input, in_bytes);
  }
  for (size_t l = 1; l < local.size(); ++l) {
    Accumulate(type, s.op, sum, members[local[l]].input, in_elements);
  }
  const ExprOp op = s.op;
  PJRT_RETURN_IF_ERROR(x.placement.transport->AllReduce(
      x.exchange, sum, in_elements, bytes,
      [type, op](void* acc, const void* in, int64_t count) {
        Accumulate(type, op, acc, in, count);
      }));
  for (int q : local) {
    if (in_output) {
      if (in_bytes > 0 && members[q].output != sum) {
        std::memcpy(members[q].output, sum, in_bytes);
      }
      continue;
    }
    const int64_t slab = layout.dim / n * layout.after;
    for (int64_t o = 0; o < layout.outer; ++o) {
      std::memcpy(static_cast<char*>(members[q].output) + o * slab * bytes,
                  sum + (o * n + q) * slab * bytes, slab * bytes);
    }
  }
  return absl::OkStatus();
}

// All-gather: every member's input on every task.
absl::Status GatherAcrossTasks(const CrossTaskOperand& x) {
  const std::vector<CollectiveHub::Member>& members = x.members;
  const std::vector<int>& local = x.local;
  const int n = x.n;
  const int64_t in_bytes = x.in_bytes;
  // Tasks in ascending order, each task's members in group order. Not
  // zero-filled: every byte is written before it is read.
  auto mine = std::make_unique_for_overwrite<char[]>(
      static_cast<size_t>(in_bytes * local.size()));
  for (size_t l = 0; l < local.size(); ++l) {
    std::memcpy(mine.get() + l * in_bytes, members[local[l]].input, in_bytes);
  }
  std::vector<int64_t> task_bytes(x.exchange.tasks.size(), 0);
  for (int q = 0; q < n; ++q) task_bytes[x.RankOf(q)] += in_bytes;
  auto all =
      std::make_unique_for_overwrite<char[]>(static_cast<size_t>(in_bytes * n));
  PJRT_RETURN_IF_ERROR(x.placement.transport->AllGather(x.exchange, mine.get(),
                                                        task_bytes, all.get()));
  std::vector<const void*> input(n);
  int64_t offset = 0;
  for (int task : x.exchange.tasks) {
    for (int q = 0; q < n; ++q) {
      if (x.hub.TaskOf(x.group[q]) != task) continue;
      input[q] = all.get() + offset;
      offset += in_bytes;
    }
  }
  for (int m : local) {
    PullCollectiveOutput(x.s, x.layout, x.bytes, x.in_elements, input, m,
                         members[m].output);
  }
  return absl::OkStatus();
}

// All-to-all and collective-permute: each member q sends member m only the
// piece m needs (all-to-all: slab m of each outer block; permute: its whole
// input, if m is q's target), task to task in one exchange. Pieces travel
// in (task of m, q, m) order and arrive in (task of q, q, m) order, q and m
// in group order.
absl::Status SendPiecesAcrossTasks(const CrossTaskOperand& x) {
  const CollectiveStep& s = x.s;
  const std::vector<CollectiveHub::Member>& members = x.members;
  const std::vector<int>& local = x.local;
  const CollectiveLayout layout = x.layout;
  const int n = x.n;
  const int64_t in_bytes = x.in_bytes;
  const bool permute = s.kind == CollectiveStep::Kind::kCollectivePermute;
  const int64_t slab = permute ? 0 : layout.dim / n * layout.after * x.bytes;
  std::vector<int> target(n, -1);  // permute: q's target
  for (const auto& [from, to] : s.source_target_pairs) {
    if (from >= 0 && from < n) target[from] = static_cast<int>(to);
  }
  const auto piece_bytes = [&](int q, int m) -> int64_t {
    if (!permute) return layout.outer * slab;
    return target[q] == m ? in_bytes : 0;
  };
  const auto is_local = [&](int q) {
    return x.hub.TaskOf(x.group[q]) == x.placement.self;
  };
  const int T = static_cast<int>(x.exchange.tasks.size());
  std::vector<int64_t> send_bytes(T, 0), receive_bytes(T, 0);
  for (int q = 0; q < n; ++q) {
    for (int m = 0; m < n; ++m) {
      if (is_local(q)) send_bytes[x.RankOf(m)] += piece_bytes(q, m);
      if (is_local(m)) receive_bytes[x.RankOf(q)] += piece_bytes(q, m);
    }
  }
  int64_t send_total = 0, receive_total = 0;
  for (int t = 0; t < T; ++t) {
    send_total += send_bytes[t];
    receive_total += receive_bytes[t];
  }
  // Not zero-filled: every byte is written before it is read.
  auto send =
      std::make_unique_for_overwrite<char[]>(static_cast<size_t>(send_total));
  auto receive = std::make_unique_for_overwrite<char[]>(
      static_cast<size_t>(receive_total));
  char* out = send.get();
  for (int t = 0; t < T; ++t) {
    for (int q : local) {
      for (int m = 0; m < n; ++m) {
        if (x.RankOf(m) != t || piece_bytes(q, m) == 0) continue;
        const char* in = static_cast<const char*>(members[q].input);
        if (permute) {
          std::memcpy(out, in, in_bytes);
          out += in_bytes;
          continue;
        }
        for (int64_t o = 0; o < layout.outer; ++o, out += slab) {
          std::memcpy(out, in + (o * n + m) * slab, slab);
        }
      }
    }
  }
  PJRT_RETURN_IF_ERROR(x.placement.transport->AllToAll(
      x.exchange, send.get(), send_bytes, receive.get(), receive_bytes));
  if (permute) {
    // A member no source names gets zeros.
    for (int m : local) std::memset(members[m].output, 0, in_bytes);
  }
  const char* in = receive.get();
  for (int t = 0; t < T; ++t) {
    for (int q = 0; q < n; ++q) {
      if (x.RankOf(q) != t) continue;
      for (int m : local) {
        if (piece_bytes(q, m) == 0) continue;
        char* output = static_cast<char*>(members[m].output);
        if (permute) {
          std::memcpy(output, in, in_bytes);
          in += in_bytes;
          continue;
        }
        for (int64_t o = 0; o < layout.outer; ++o, in += slab) {
          std::memcpy(output + (o * n + q) * slab, in, slab);
        }
      }
    }
  }
  return absl::OkStatus();
}

// This task's leader's share of a collective whose group spans tasks:
// `members` holds the group's members on this task (the others' entries
// are null). The leader combines this task's inputs, exchanges them with
// the other tasks through the launch's TaskTransport, and writes every
// local member's output. All-reduce and reduce-scatter reduce this task's
// inputs first and all-reduce the partial result across tasks; all-gather
// gathers every member's input everywhere; all-to-all and
// collective-permute send each member only the pieces it needs.
absl::Status ExchangeAcrossTasks(
    const CollectiveStep& s, const RunContext& c,
    const std::vector<int64_t>& group, int operand,
    const std::vector<CollectiveHub::Member>& members, const std::string& key) {
  const CollectiveHub& hub = *c.collectives;
  const TaskPlacement& placement = *hub.placement();
  const hlo::PrimitiveType type = s.types[operand];
  const int bytes = hlo::ByteWidth(type);
  const int64_t in_elements = s.operand_elements[operand];
  CrossTaskOperand x{.s = s,
                     .hub = hub,
                     .placement = placement,
                     .group = group,
                     .members = members,
                     .type = type,
                     .bytes = bytes,
                     .n = static_cast<int>(group.size()),
                     .in_elements = in_elements,
                     .in_bytes = in_elements * bytes,
                     .layout = LayoutOf(s)};

  TaskTransport::Exchange& exchange = x.exchange;
  for (int64_t id : group) exchange.tasks.push_back(hub.TaskOf(id));
  std::sort(exchange.tasks.begin(), exchange.tasks.end());
  exchange.tasks.erase(
      std::unique(exchange.tasks.begin(), exchange.tasks.end()),
      exchange.tasks.end());
  exchange.id = absl::StrCat(placement.launch, "/", key);
  exchange.name = s.name;
  exchange.timeout = hub.timeout();
  exchange.cancellation = c.cancellation;
  for (int q = 0; q < x.n; ++q) {
    if (hub.TaskOf(group[q]) == placement.self) x.local.push_back(q);
  }

  if (s.kind == CollectiveStep::Kind::kAllReduce ||
      s.kind == CollectiveStep::Kind::kReduceScatter) {
    return ReduceAcrossTasks(x);
  }
  if (x.in_bytes == 0) return absl::OkStatus();  // empty outputs, everywhere
  if (s.kind == CollectiveStep::Kind::kAllGather) return GatherAcrossTasks(x);
  return SendPiecesAcrossTasks(x);
}

absl::Status RunCollectiveOperand(const CollectiveStep& s, const RunContext& c,
                                  const std::vector<int64_t>& group, int me,
                                  int operand, const void* input,
                                  void* output) {
  const hlo::PrimitiveType type = s.types[operand];
  const int bytes = hlo::ByteWidth(type);
  const int n = static_cast<int>(group.size());
  // Operands of a variadic all-reduce differ in size.
  const int64_t in_elements = s.operand_elements[operand];
  const int rank = static_cast<int>(s.input_dims.size());
  const CollectiveLayout layout = LayoutOf(s);
  const int64_t outer = layout.outer, after = layout.after, dim = layout.dim;
  if (s.kind == CollectiveStep::Kind::kAllGather &&
      (rank == 0 || s.output_dims[s.dimension] != dim * n)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s gathers %d participants, but its result dimension %d is %d, not "
        "%d x %d",
        s.name, n, s.dimension, rank ? s.output_dims[s.dimension] : 0, n, dim));
  }
  if ((s.kind == CollectiveStep::Kind::kReduceScatter ||
       s.kind == CollectiveStep::Kind::kAllToAll) &&
      (rank == 0 || dim % n != 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s splits dimension %d (size %d) among %d participants; it must "
        "divide evenly",
        s.name, s.dimension, rank ? dim : 0, n));
  }
  if (s.kind == CollectiveStep::Kind::kReduceScatter &&
      s.output_dims[s.dimension] != dim / n) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s scatters among %d participants, but its result dimension %d is %d, "
        "not %d / %d",
        s.name, n, s.dimension, s.output_dims[s.dimension], dim, n));
  }
  std::vector<CollectiveHub::Member> members;
  std::string key =
      absl::StrCat(s.key, "/", operand, "/", absl::StrJoin(group, ","));
  // Allocated before the rendezvous: once it is committed, nothing may fail
  // before Depart.
  const int64_t block_elements =
      std::max<int64_t>(1, kCollectiveBlockBytes / bytes);
  std::vector<char> block(static_cast<size_t>(block_elements * bytes));
  std::vector<const void*> inputs(n);
  if (n == 1) {
    members.push_back({input, output});
  } else {
    if (c.collectives == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s needs %d participants, but this run is not part of a "
          "multi-device launch",
          s.name, n));
    }
    key = c.collectives->NextInstance(key, group[me]);
    PJRT_ASSIGN_OR_RETURN(
        members, c.collectives->Arrive(key, s.name, group, me, {input, output},
                                       c.cancellation));
    if (c.collectives->SpansTasks(group)) {
      // The lowest-indexed member on this task moves the data; the others
      // wait for it in DepartWith and leave with its status.
      int leader = me;
      for (int q = 0; q < n; ++q) {
        if (c.collectives->TaskOf(group[q]) ==
            c.collectives->placement()->self) {
          leader = q;
          break;
        }
      }
      absl::Status share = absl::OkStatus();
      if (leader == me) {
        try {
          share = ExchangeAcrossTasks(s, c, group, operand, members, key);
        } catch (const std::exception& e) {
          share = absl::ResourceExhaustedError(absl::StrFormat(
              "%s: the exchange between tasks failed: %s", s.name, e.what()));
        }
      }
      return c.collectives->DepartWith(key, share);
    }
  }
  const auto at = [bytes](const void* base, int64_t element) {
    return static_cast<const char*>(base) + element * bytes;
  };
  const auto at_mut = [bytes](void* base, int64_t element) {
    return static_cast<char*>(base) + element * bytes;
  };
  switch (s.kind) {
    case CollectiveStep::Kind::kAllReduce: {
      // This member reduces its chunk of every input and writes it to
      // every output.
      // Block by block, so that the partial sums stay in cache: every
      // input and output byte of the chunk moves once. The sums go through
      // `block` because an output may share memory with its input (a
      // donated argument), which only this member reads in this chunk.
      const int64_t begin = in_elements * me / n,
                    end = in_elements * (me + 1) / n;
      for (int64_t b = begin; b < end; b += block_elements) {
        const int64_t len = std::min(block_elements, end - b);
        std::memcpy(block.data(), at(members[0].input, b), len * bytes);
        for (int q = 1; q < n; ++q) {
          Accumulate(type, s.op, block.data(), at(members[q].input, b), len);
        }
        for (int q = 0; q < n; ++q) {
          std::memcpy(at_mut(members[q].output, b), block.data(), len * bytes);
        }
      }
      break;
    }
    case CollectiveStep::Kind::kAllGather: {
      const int64_t slab = dim * after;
      for (int q = 0; q < n; ++q) {
        for (int64_t o = 0; o < outer; ++o) {
          std::memcpy(at_mut(members[q].output, (o * n + me) * slab),
                      at(input, o * slab), slab * bytes);
        }
      }
      break;
    }
    case CollectiveStep::Kind::kReduceScatter: {
      const int64_t slab = dim / n * after;
      for (int64_t o = 0; o < outer; ++o) {
        void* dst = at_mut(output, o * slab);
        std::memcpy(dst, at(members[0].input, (o * n + me) * slab),
                    slab * bytes);
        for (int q = 1; q < n; ++q) {
          Accumulate(type, s.op, dst, at(members[q].input, (o * n + me) * slab),
                     slab);
        }
      }
      break;
    }
    case CollectiveStep::Kind::kAllToAll:
    case CollectiveStep::Kind::kCollectivePermute: {
      for (int q = 0; q < n; ++q) inputs[q] = members[q].input;
      PullCollectiveOutput(s, layout, bytes, in_elements, inputs, me, output);
      break;
    }
  }
  if (n > 1) c.collectives->Depart(key);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunCollective(const CollectiveStep& s, const RunContext& c,
                           absl::Span<void* const> a) {
  std::vector<int64_t> group;
  int me = -1;
  PJRT_RETURN_IF_ERROR(CollectiveGroup(s, c, &group, &me));
  if (me < 0) {
    return absl::InternalError(
        absl::StrFormat("%s: this run is not in its own group", s.name));
  }
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    PJRT_RETURN_IF_ERROR(RunCollectiveOperand(
        s, c, group, me, static_cast<int>(i), a[s.inputs[i]], a[s.outputs[i]]));
  }
  return absl::OkStatus();
}

}  // namespace pjrt::compiler::host
