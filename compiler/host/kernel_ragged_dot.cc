// ragged-dot as one matrix product per group, for the ragged-dots that
// hlo::IsPlainRaggedDot accepts (the others are rewritten into dots and
// masks by hlo::ExpandRaggedDots):
//
//  - a ragged free dimension of a 2-D lhs (a mixture of experts' tokens,
//    grouped by expert): the rows of group j times the rhs's j-th matrix,
//    into the same rows of the [m, n] result; rows past the last group are
//    zero;
//  - a ragged contracting dimension (the weight gradient of the above):
//    group j's stretch of the contracting dimension of both operands, into
//    the j-th [m, n] matrix of the [g, m, n] result; a group with no rows
//    gives zeros.
//
// The groups' bounds come from group_sizes as the expansion computes them:
// each size clamped into [0, the ragged dimension's length], the groups
// laid one after another from 0, and rows past the dimension's end
// ignored. A group's operands are sub-matrices of the arrays (a GEMM's
// leading dimensions), read where they lie. The products run one after
// another, each threaded (by oneDNN, or in pieces of rows across the pool)
// when there is enough work, and cancellable between pieces.
#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_format.h"
#include "base/cancellation.h"
#include "base/status_macros.h"
#include "compiler/host/host_program.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_util.h"
#include "hlo/dot_shapes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

// A 2-D view of an operand (or of one group's matrix of a 3-D rhs): its
// two dimensions as the product takes them, and how it is stored.
struct Matrix {
  int64_t group_step = 0;   // elements from one group's matrix to the next
  int64_t leading = 0;      // elements between rows of the stored matrix
  bool transposed = false;  // stored [second, first] instead of [first, second]
};

class RaggedDotKernel : public Kernel {
 public:
  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override {
    const char* lhs_base = static_cast<const char*>(addresses[lhs_slot_]);
    const char* rhs_base = static_cast<const char*>(addresses[rhs_slot_]);
    char* out_base = static_cast<char*>(addresses[out_slot_]);
    const int64_t width = hlo::ByteWidth(type_);
    // The work of all the products (the groups share k, or m, between
    // them).
    const double flops = 2.0 * static_cast<double>(m_) * n_ * k_;
    // Group j's [lo, end) along the ragged dimension follows group j - 1's.
    int64_t end = 0;
    for (int64_t j = 0; j < groups_; ++j) {
      if (IsCancelled(context.cancellation)) return absl::OkStatus();
      const int64_t size = std::clamp<int64_t>(
          LoadIndex(sizes_type_, addresses[sizes_slot_], j), 0, ragged_);
      const int64_t lo = end;
      end = std::min(end + size, ragged_);
      const int64_t rows = end - lo;
      MatrixProduct p;
      p.type = type_;
      p.a_transposed = lhs_.transposed;
      p.lda = lhs_.leading;
      p.b_transposed = rhs_.transposed;
      p.ldb = rhs_.leading;
      p.ldc = n_;
      if (contracting_) {
        // Group j's stretch of k: an offset along each operand's k.
        p.m = m_, p.n = n_, p.k = rows;
        p.a = lhs_base + lo * lhs_k_step_ * width;
        p.b = rhs_base + lo * rhs_k_step_ * width;
        p.c = out_base + j * m_ * n_ * width;
      } else {
        if (rows == 0) continue;
        p.m = rows, p.n = n_, p.k = k_;
        p.a = lhs_base + lo * lhs_m_step_ * width;
        p.b = rhs_base + j * rhs_.group_step * width;
        p.c = out_base + lo * n_ * width;
      }
      RunMatrixProduct(p, flops, context.cancellation);
    }
    // Rows no group has are zero.
    if (!contracting_ && end < m_ && n_ > 0) {
      std::memset(out_base + end * n_ * width, 0, (m_ - end) * n_ * width);
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<std::shared_ptr<RaggedDotKernel>> Build(
      const KernelArgs& args) {
    const hlo::Instruction& inst = *args.inst;
    if (!hlo::IsPlainRaggedDot(inst)) {
      return absl::UnimplementedError(absl::StrFormat(
          "the host compiler runs a ragged-dot (%%%s, line %d) only as a "
          "product per group (hlo::IsPlainRaggedDot); "
          "hlo::SimplifyModule rewrites the others",
          inst.name(), inst.line()));
    }
    PJRT_ASSIGN_OR_RETURN(hlo::RaggedDot r, hlo::AnalyzeRaggedDot(inst));
    auto k = std::make_shared<RaggedDotKernel>();
    const hlo::Shape& ls = args.input_shapes[0];
    const hlo::Shape& rs = args.input_shapes[1];
    k->type_ = args.output_shapes[0].element_type();
    k->sizes_type_ = args.input_shapes[2].element_type();
    k->groups_ = r.groups;
    k->lhs_slot_ = args.inputs[0];
    k->rhs_slot_ = args.inputs[1];
    k->sizes_slot_ = args.inputs[2];
    k->out_slot_ = args.outputs[0];
    const int64_t lc = r.dot.lhs_contracting_dimensions[0];
    const int64_t rc = r.dot.rhs_contracting_dimensions[0];
    k->ragged_ = ls.dimensions(r.lhs_ragged);
    // The lhs: [m, k] or, transposed, [k, m].
    k->lhs_.transposed = lc == 0;
    k->lhs_.leading = ls.dimensions(1);
    k->k_ = ls.dimensions(lc);
    k->m_ = ls.dimensions(1 - lc);
    if (r.mode == hlo::RaggedDot::Mode::kContracting) {
      k->contracting_ = true;
      // The rhs: [k, n] or, transposed, [n, k].
      k->rhs_.transposed = rc == 1;
      k->rhs_.leading = rs.dimensions(1);
      k->n_ = rs.dimensions(1 - rc);
      k->lhs_k_step_ = lc == 0 ? ls.dimensions(1) : 1;
      k->rhs_k_step_ = rc == 0 ? rs.dimensions(1) : 1;
    } else {
      // The rhs's group dimension is 0 or 1; its other two dimensions,
      // in order, are a matrix whose rows lie `leading` elements apart.
      const int64_t g = r.rhs_group[0];
      const int64_t strides[3] = {rs.dimensions(1) * rs.dimensions(2),
                                  rs.dimensions(2), 1};
      const int64_t outer = g == 0 ? 1 : 0;
      k->rhs_.group_step = strides[g];
      k->rhs_.leading = strides[outer];
      k->rhs_.transposed = rc != outer;
      k->n_ = rs.dimensions(rc == outer ? 2 : outer);
      k->lhs_m_step_ = lc == 0 ? 1 : ls.dimensions(1);
    }
    k->name =
        absl::StrFormat("ragged-dot %%%s (line %d)", inst.name(), inst.line());
    k->reads = {{k->lhs_slot_, ls.UnpackedByteSize()},
                {k->rhs_slot_, rs.UnpackedByteSize()},
                {k->sizes_slot_, args.input_shapes[2].UnpackedByteSize()}};
    k->writes = {{k->out_slot_, args.output_shapes[0].UnpackedByteSize()}};
    return k;
  }

 private:
  PrimitiveType type_ = PrimitiveType::kF32;
  PrimitiveType sizes_type_ = PrimitiveType::kS32;
  int lhs_slot_ = -1, rhs_slot_ = -1, sizes_slot_ = -1, out_slot_ = -1;
  Matrix lhs_, rhs_;
  bool contracting_ = false;
  int64_t groups_ = 0, ragged_ = 0, m_ = 0, n_ = 0, k_ = 0;
  // Elements from one row of the ragged dimension to the next.
  int64_t lhs_m_step_ = 0, lhs_k_step_ = 0, rhs_k_step_ = 0;
};

}  // namespace

absl::StatusOr<std::shared_ptr<Kernel>> BuildRaggedDot(const KernelArgs& args,
                                                       KernelCompiler&) {
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<RaggedDotKernel> k,
                        RaggedDotKernel::Build(args));
  return k;
}

}  // namespace pjrt::compiler::host
