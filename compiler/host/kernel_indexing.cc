// gather and scatter, with XLA's dimension numbers (batching dimensions
// included): gather clamps each start index so the slice stays inside the
// operand; scatter skips a whole update window whose start puts any of it
// outside the operand.
#include "compiler/host/kernel_indexing.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "compiler/host/types.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

bool Contains(absl::Span<const int64_t> v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// The dimensions of the iterated array (gather's output, scatter's
// updates), of row-major `strides`, that are not in `window_dims`, in order,
// and their strides.
void BatchDims(absl::Span<const int64_t> strides,
               absl::Span<const int64_t> window_dims,
               std::vector<int64_t>* batch_dims,
               std::vector<int64_t>* batch_strides) {
  for (int i = 0; i < static_cast<int>(strides.size()); ++i) {
    if (!Contains(window_dims, i)) {
      batch_dims->push_back(i);
      batch_strides->push_back(strides[i]);
    }
  }
}

// `batch_dims`: the dimensions of the iterated array (gather's output,
// scatter's updates) that are not window dimensions, in order; they match
// the index array's dimensions other than index_vector_dim, in order.
IndexReader MakeReader(const hlo::Shape& indices, int64_t index_vector_dim,
                       absl::Span<const int64_t> batch_dims,
                       absl::Span<const int64_t> iterated_dims,
                       absl::Span<const int64_t> index_to_operand,
                       absl::Span<const int64_t> operand_batching,
                       absl::Span<const int64_t> indices_batching) {
  IndexReader r;
  const std::vector<int64_t> strides = RowMajorStrides(indices.dimensions());
  std::vector<int64_t> index_batch;
  for (int i = 0; i < indices.rank(); ++i) {
    if (i != index_vector_dim) index_batch.push_back(i);
  }
  for (size_t j = 0; j < batch_dims.size(); ++j) {
    r.batch_sizes.push_back(iterated_dims[batch_dims[j]]);
    r.batch_strides.push_back(strides[index_batch[j]]);
  }
  r.vector_size = static_cast<int64_t>(index_to_operand.size());
  r.vector_stride =
      index_vector_dim < indices.rank() ? strides[index_vector_dim] : 0;
  r.type = indices.element_type();
  r.index_to_operand.assign(index_to_operand.begin(), index_to_operand.end());
  for (size_t i = 0; i < operand_batching.size(); ++i) {
    const auto it =
        std::find(index_batch.begin(), index_batch.end(), indices_batching[i]);
    r.batching.push_back(
        {operand_batching[i], static_cast<int>(it - index_batch.begin())});
  }
  return r;
}

void CopyRow(int bytes, const char* src, int64_t src_stride, char* dst,
             int64_t dst_stride, int64_t n) {
  if (src_stride == 1 && dst_stride == 1) {
    std::memcpy(dst, src, n * bytes);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * dst_stride * bytes, src + i * src_stride * bytes,
                bytes);
  }
}

Combiner ClassifyCombiner(const hlo::Computation& region, int n) {
  if (n != 1 || region.parameters().size() != 2) return Combiner::kRegion;
  const hlo::Instruction* root = region.root();
  if (root == region.parameters()[1]) return Combiner::kReplace;
  if (root->opcode() == hlo::Opcode::kAdd && root->operand_count() == 2) {
    const auto* a = root->operand(0);
    const auto* b = root->operand(1);
    const auto* p0 = region.parameters()[0];
    const auto* p1 = region.parameters()[1];
    if ((a == p0 && b == p1) || (a == p1 && b == p0)) return Combiner::kAdd;
  }
  return Combiner::kRegion;
}

}  // namespace

absl::Status ScatterKernel::Run(absl::Span<void* const> addresses,
                                const RunContext& context) const {
  const int n = static_cast<int>(types.size());
  for (int i = 0; i < n; ++i) {
    std::memcpy(addresses[outputs[i]], addresses[inputs[i]], operand_bytes[i]);
  }
  const void* index_data = addresses[indices];
  const int64_t positions = Product(reader.batch_sizes);
  if (positions == 0 || Product(walk.sizes) == 0) return absl::OkStatus();
  const int64_t first_size = walk.sizes.empty() ? 1 : walk.sizes[0];
  // Threads take ranges of the window's first dimension and go through
  // every position in order, when windows of different positions can
  // only meet at the same window coordinates; otherwise one thread.
  const int64_t chunks = parallel ? first_size : 1;
  const double cost = static_cast<double>(positions) *
                      static_cast<double>(Product(walk.sizes)) /
                      static_cast<double>(first_size) * 4.0;
  ThreadPool::Get().ParallelFor(chunks, cost, [&](int64_t c0, int64_t c1) {
    const int64_t lo = parallel ? c0 : 0;
    const int64_t hi = parallel ? c1 : first_size;
    ScatterRange(addresses, index_data, lo, hi, context.cancellation);
  });
  return CheckCancelled(context.cancellation);
}

void ScatterKernel::ScatterRange(absl::Span<void* const> addresses,
                                 const void* index_data, int64_t lo, int64_t hi,
                                 const Cancellation* cancellation) const {
  const int n = static_cast<int>(types.size());
  std::vector<int64_t> b(reader.batch_sizes.size(), 0);
  std::vector<int64_t> start(operand_dims.size());
  std::unique_ptr<RegionRunner> runner;
  std::vector<std::vector<uint64_t>> cur, upd;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
  if (combiner == Combiner::kRegion) {
    runner = std::make_unique<RegionRunner>(region);
    runner->SetOutputTypes(types);
    cur.assign(n, std::vector<uint64_t>(kBlockWords));
    upd.assign(n, std::vector<uint64_t>(kBlockWords));
    for (int i = 0; i < n; ++i) in_ptrs.push_back(cur[i].data());
    for (int i = 0; i < n; ++i) in_ptrs.push_back(upd[i].data());
    for (int i = 0; i < n; ++i) out_ptrs.push_back(cur[i].data());
  }
  const int64_t positions = Product(reader.batch_sizes);
  for (int64_t p = 0; p < positions; ++p, NextIndex(reader.batch_sizes, &b)) {
    if ((p & 255) == 0 && IsCancelled(cancellation)) return;
    reader.Start(index_data, b, &start);
    bool valid = true;
    int64_t dst = 0, src = 0;
    for (size_t d = 0; d < start.size(); ++d) {
      valid = valid && start[d] >= 0 && start[d] <= operand_dims[d] - extent[d];
      dst += start[d] * operand_strides[d];
    }
    if (!valid) continue;  // XLA skips the whole window
    for (size_t j = 0; j < b.size(); ++j) src += b[j] * update_batch_strides[j];
    walk.ForEachRow(
        src, dst, lo, hi,
        [&](int64_t s, int64_t t, int64_t len, int64_t ss, int64_t ts) {
          for (int64_t at = 0; at < len; at += kBlockElements) {
            const int64_t m = std::min(kBlockElements, len - at);
            Combine(addresses, s + at * ss, ss, t + at * ts, ts, m, cur, upd,
                    runner.get(), in_ptrs, out_ptrs);
          }
        });
  }
}

void ScatterKernel::Combine(absl::Span<void* const> addresses, int64_t s,
                            int64_t ss, int64_t t, int64_t ts, int64_t m,
                            std::vector<std::vector<uint64_t>>& cur,
                            std::vector<std::vector<uint64_t>>& upd,
                            RegionRunner* runner,
                            const std::vector<const void*>& in_ptrs,
                            const std::vector<void*>& out_ptrs) const {
  const int n = static_cast<int>(types.size());
  if (combiner != Combiner::kRegion) {
    DispatchAnyType(types[0], [&](auto pt) {
      using S = typename TypeTraits<decltype(pt)::value>::Storage;
      using C = typename TypeTraits<decltype(pt)::value>::Compute;
      S* out = static_cast<S*>(addresses[outputs[0]]);
      const S* up = static_cast<const S*>(addresses[updates[0]]);
      for (int64_t i = 0; i < m; ++i) {
        S& o = out[t + i * ts];
        const S u = up[s + i * ss];
        if (combiner == Combiner::kReplace) {
          o = u;
        } else if constexpr (std::is_same_v<C, uint8_t> &&
                             std::is_same_v<S, uint8_t>) {
          o = static_cast<S>(o + u);
        } else {
          o = static_cast<S>(static_cast<C>(o) + static_cast<C>(u));
        }
      }
    });
    if (types[0] == PrimitiveType::kPred && combiner == Combiner::kAdd) {
      // pred add is or.
      uint8_t* out = static_cast<uint8_t*>(addresses[outputs[0]]);
      for (int64_t i = 0; i < m; ++i) out[t + i * ts] = out[t + i * ts] != 0;
    }
    return;
  }
  for (int i = 0; i < n; ++i) {
    const int w = hlo::ByteWidth(types[i]);
    uint64_t staging[kBlockWords];
    CopyRow(w, static_cast<const char*>(addresses[outputs[i]]) + t * w, ts,
            reinterpret_cast<char*>(staging), 1, m);
    StorageToCompute(types[i], staging, cur[i].data(), m);
    CopyRow(w, static_cast<const char*>(addresses[updates[i]]) + s * w, ss,
            reinterpret_cast<char*>(staging), 1, m);
    StorageToCompute(types[i], staging, upd[i].data(), m);
  }
  runner->Evaluate(in_ptrs, m, out_ptrs);
  for (int i = 0; i < n; ++i) {
    const int w = hlo::ByteWidth(types[i]);
    uint64_t staging[kBlockWords];
    ComputeToStorage(types[i], cur[i].data(), staging, m);
    CopyRow(w, reinterpret_cast<const char*>(staging), 1,
            static_cast<char*>(addresses[outputs[i]]) + t * w, ts, m);
  }
}

absl::Status GatherKernel::Run(absl::Span<void* const> addresses,
                               const RunContext& context) const {
  const char* from = static_cast<const char*>(addresses[operand]);
  const void* index_data = addresses[indices];
  char* out = static_cast<char*>(addresses[output]);
  const int64_t positions = Product(reader.batch_sizes);
  const int64_t window = std::max<int64_t>(Product(walk.sizes), 1);
  ThreadPool::Get().ParallelFor(
      positions, 4.0 * static_cast<double>(window) + 20,
      [&](int64_t first, int64_t last) {
        std::vector<int64_t> b(reader.batch_sizes.size(), 0);
        std::vector<int64_t> start(operand_dims.size());
        // Position `first` as a multi-index.
        int64_t rest = first;
        for (int j = static_cast<int>(b.size()) - 1; j >= 0; --j) {
          b[j] = rest % reader.batch_sizes[j];
          rest /= reader.batch_sizes[j];
        }
        for (int64_t p = first; p < last; ++p) {
          if ((p & 255) == 0 && IsCancelled(context.cancellation)) return;
          reader.Start(index_data, b, &start);
          int64_t src = 0, dst = 0;
          for (size_t d = 0; d < start.size(); ++d) {
            // XLA clamps so the whole slice is inside the operand.
            const int64_t s = std::clamp<int64_t>(
                start[d], 0, operand_dims[d] - slice_sizes[d]);
            src += s * operand_strides[d];
          }
          for (size_t j = 0; j < b.size(); ++j)
            dst += b[j] * out_batch_strides[j];
          walk.ForEachRow(
              src, dst, 0, walk.sizes.empty() ? 1 : walk.sizes[0],
              [&](int64_t s, int64_t t, int64_t n, int64_t ss, int64_t ts) {
                CopyRow(bytes, from + s * bytes, ss, out + t * bytes, ts, n);
              });
          NextIndex(reader.batch_sizes, &b);
        }
      });
  return CheckCancelled(context.cancellation);
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildGather(const KernelArgs& args,
                                                    KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  PJRT_ASSIGN_OR_RETURN(hlo::GatherDimensions d,
                        hlo::ParseGatherDimensions(inst));
  const hlo::Shape& operand = args.input_shapes[0];
  const hlo::Shape& indices = args.input_shapes[1];
  const hlo::Shape& out = args.output_shapes[0];
  auto k = std::make_shared<GatherKernel>();
  k->operand = args.inputs[0];
  k->indices = args.inputs[1];
  k->output = args.outputs[0];
  k->bytes = hlo::ByteWidth(operand.element_type());
  k->operand_dims.assign(operand.dimensions().begin(),
                         operand.dimensions().end());
  k->operand_strides = RowMajorStrides(operand.dimensions());
  k->slice_sizes = d.slice_sizes;
  const std::vector<int64_t> out_strides = RowMajorStrides(out.dimensions());
  std::vector<int64_t> batch_dims;
  BatchDims(out_strides, d.offset_dims, &batch_dims, &k->out_batch_strides);
  k->reader =
      MakeReader(indices, d.index_vector_dim, batch_dims, out.dimensions(),
                 d.start_index_map, d.operand_batching_dims,
                 d.start_indices_batching_dims);
  size_t next = 0;
  for (int i = 0; i < operand.rank(); ++i) {
    if (Contains(d.collapsed_slice_dims, i) ||
        Contains(d.operand_batching_dims, i)) {
      continue;
    }
    k->walk.sizes.push_back(d.slice_sizes[i]);
    k->walk.src_strides.push_back(k->operand_strides[i]);
    k->walk.dst_strides.push_back(out_strides[d.offset_dims[next++]]);
  }
  k->reads = {{args.inputs[0], operand.UnpackedByteSize()},
              {args.inputs[1], indices.UnpackedByteSize()}};
  k->writes = {{args.outputs[0], out.UnpackedByteSize()}};
  return k;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildScatter(const KernelArgs& args,
                                                     KernelCompiler&) {
  const hlo::Instruction& inst = *args.inst;
  PJRT_ASSIGN_OR_RETURN(hlo::ScatterDimensions d,
                        hlo::ParseScatterDimensions(inst));
  const int n = static_cast<int>(args.inputs.size()) / 2;
  const hlo::Shape& operand = args.input_shapes[0];
  const hlo::Shape& indices = args.input_shapes[n];
  const hlo::Shape& updates = args.input_shapes[n + 1];
  auto k = std::make_shared<ScatterKernel>();
  for (int i = 0; i < n; ++i) {
    k->inputs.push_back(args.inputs[i]);
    k->updates.push_back(args.inputs[n + 1 + i]);
    k->outputs.push_back(args.outputs[i]);
    k->operand_bytes.push_back(args.input_shapes[i].UnpackedByteSize());
    k->types.push_back(args.input_shapes[i].element_type());
    k->reads.push_back(
        {args.inputs[i], args.input_shapes[i].UnpackedByteSize()});
    k->reads.push_back({args.inputs[n + 1 + i],
                        args.input_shapes[n + 1 + i].UnpackedByteSize()});
    k->writes.push_back(
        {args.outputs[i], args.output_shapes[i].UnpackedByteSize()});
  }
  k->indices = args.inputs[n];
  k->reads.push_back({args.inputs[n], indices.UnpackedByteSize()});
  k->operand_dims.assign(operand.dimensions().begin(),
                         operand.dimensions().end());
  k->operand_strides = RowMajorStrides(operand.dimensions());
  const std::vector<int64_t> update_strides =
      RowMajorStrides(updates.dimensions());
  std::vector<int64_t> batch_dims;
  BatchDims(update_strides, d.update_window_dims, &batch_dims,
            &k->update_batch_strides);
  k->reader =
      MakeReader(indices, d.index_vector_dim, batch_dims, updates.dimensions(),
                 d.scatter_dims_to_operand_dims, d.input_batching_dims,
                 d.scatter_indices_batching_dims);
  k->extent.assign(operand.rank(), 1);
  size_t next = 0;
  for (int i = 0; i < operand.rank(); ++i) {
    if (Contains(d.inserted_window_dims, i) ||
        Contains(d.input_batching_dims, i)) {
      continue;
    }
    const int64_t ud = d.update_window_dims[next++];
    k->extent[i] = updates.dimensions(ud);
    k->walk.sizes.push_back(updates.dimensions(ud));
    k->walk.src_strides.push_back(update_strides[ud]);
    k->walk.dst_strides.push_back(k->operand_strides[i]);
  }
  // Threads split the window's first dimension. When no index moves the
  // operand dimension it covers, two positions' elements can meet only at
  // the same coordinate there, so the threads never touch one element.
  k->parallel = false;
  for (int i = 0; i < operand.rank(); ++i) {
    if (Contains(d.inserted_window_dims, i) ||
        Contains(d.input_batching_dims, i)) {
      continue;
    }
    k->parallel = !Contains(d.scatter_dims_to_operand_dims, i);
    break;  // the first window dimension
  }
  const hlo::Computation& region = *inst.called_computations()[0];
  k->combiner = ClassifyCombiner(region, n);
  // Sub-byte integer sums wrap to their bits: the region (an Expression)
  // does that.
  if (k->combiner == Combiner::kAdd && IsSubByteInt(k->types[0])) {
    k->combiner = Combiner::kRegion;
  }
  if (k->combiner == Combiner::kRegion) {
    std::vector<PrimitiveType> types = k->types;
    types.insert(types.end(), k->types.begin(), k->types.end());
    PJRT_ASSIGN_OR_RETURN(k->region, ScalarRegionExpression(region, types));
  }
  return k;
}

}  // namespace pjrt::compiler::host
