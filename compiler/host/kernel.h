// Kernels: the host program's steps for ops that are not element-wise
// loops, dots or reductions: control flow (while, conditional), indexing
// (gather, scatter), sort and top-k, windows (reduce-window,
// select-and-scatter), convolution, ragged-dot, map, random numbers and
// fft. One file per
// family (kernel_*.cc), each a builder the compiler calls with the op's
// operand and result slots.
//
// A kernel declares every slot it touches and how many bytes from the
// slot's start it may touch: HostProgram::CheckBounds checks them against
// the slots at compile time, and the kernel keeps every access inside
// those bytes at run time (data-dependent indices are clamped or skipped,
// as XLA defines).
#ifndef PJRT_COMPILER_HOST_KERNEL_H_
#define PJRT_COMPILER_HOST_KERNEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compiler/host/expression.h"
#include "compiler/program.h"
#include "hlo/ir.h"
#include "hlo/shape.h"

namespace pjrt::compiler::host {

class HostProgram;

struct SlotAccess {
  int slot = -1;
  int64_t bytes = 0;
};

class Kernel {
 public:
  virtual ~Kernel() = default;

  // Runs on the program's slot addresses (addresses[slot]). May use the
  // thread pool; checks `context.cancellation` between blocks of work.
  virtual absl::Status Run(absl::Span<void* const> addresses,
                           const RunContext& context) const = 0;
  // Host memory the kernel holds (sub-programs, tables).
  virtual int64_t host_memory_bytes() const { return 0; }
  // The programs it runs (a loop's condition and body, a conditional's
  // branches): their collectives are the program's too.
  virtual std::vector<const HostProgram*> sub_programs() const { return {}; }

  // "gather %gather.3 (line 12)".
  std::string name;
  std::vector<SlotAccess> reads;
  std::vector<SlotAccess> writes;
};

struct KernelStep {
  std::shared_ptr<const Kernel> kernel;
};

// What a kernel builder gets from the compiler: the op, its operands'
// array leaves (tuple operands flattened in order) and its results' leaves,
// each with a slot that holds it.
struct KernelArgs {
  const hlo::Instruction* inst = nullptr;
  std::vector<int> inputs;
  std::vector<hlo::Shape> input_shapes;
  // Leaves per HLO operand (a tuple operand has several).
  std::vector<int> operand_leaves;
  std::vector<int> outputs;
  std::vector<hlo::Shape> output_shapes;
};

// Services of the compiler that builders use.
class KernelCompiler {
 public:
  virtual ~KernelCompiler() = default;
  // Compiles `computation` as a program of its own: one argument per array
  // leaf of its parameters, one result per leaf of its root. `aliases`:
  // (result leaf, argument leaf) pairs that a run may give the same memory
  // (HostCompileOptions::aliases).
  virtual absl::StatusOr<std::unique_ptr<HostProgram>> CompileComputation(
      const hlo::Computation& computation,
      std::vector<std::pair<int, int>> aliases = {}) = 0;
  // A new scratch slot of `bytes` (for state a kernel keeps during a run).
  virtual int NewScratch(int64_t bytes) = 0;
};

// Builds `expr`'s nodes for scalar computation `region` applied to the
// expression nodes `params`; returns the nodes of its results (a tuple root
// gives one per element). UNIMPLEMENTED for ops a scalar region cannot use.
absl::StatusOr<std::vector<int>> BuildScalarRegion(
    const hlo::Computation& region, Expression* expr, std::vector<int> params);

// The single binary op of a reducer region (add, multiply, maximum, minimum,
// and, or) applied to its two parameters, if that is all it is.
std::optional<ExprOp> SimpleReducer(const hlo::Computation& region);

// An expression for `region` over scalars of `types` (inputs 0..n-1) with
// its outputs added and finalized.
absl::StatusOr<Expression> ScalarRegionExpression(
    const hlo::Computation& region, absl::Span<const hlo::PrimitiveType> types);

// The builders, one per op (kernel_*.cc).
using KernelBuilder = absl::StatusOr<std::shared_ptr<Kernel>> (*)(
    const KernelArgs&, KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildWhile(const KernelArgs&,
                                                   KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildConditional(const KernelArgs&,
                                                         KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildMap(const KernelArgs&,
                                                 KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildGather(const KernelArgs&,
                                                    KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildScatter(const KernelArgs&,
                                                     KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildSort(const KernelArgs&,
                                                  KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildRaggedDot(const KernelArgs&,
                                                       KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildTopK(const KernelArgs&,
                                                  KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildReduceWindow(const KernelArgs&,
                                                          KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildSelectAndScatter(const KernelArgs&,
                                                              KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildConvolution(const KernelArgs&,
                                                         KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildRngBitGenerator(const KernelArgs&,
                                                             KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildRng(const KernelArgs&,
                                                 KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildFft(const KernelArgs&,
                                                 KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildTriangularSolve(const KernelArgs&,
                                                             KernelCompiler&);
absl::StatusOr<std::shared_ptr<Kernel>> BuildCholesky(const KernelArgs&,
                                                      KernelCompiler&);

// Packs (pack) or unpacks `count` values of `bits` bits (4: s4, u4 and
// f4e2m1fn; 2: s2 and u2) between slot `src` and slot `dst`
// (kernel_sub_byte.cc): packed 8 / bits per byte, as buffers hold them
// (the first element in the byte's top bits, element 2i of a 4-bit type in
// the high nibble of byte i, element 2i+1 in the low), and one per byte, as
// programs compute on them (the signed ones sign-extended, the others
// zero-extended).
class SubByteKernel : public Kernel {
 public:
  SubByteKernel(bool pack, bool is_signed, int bits, int64_t count, int src,
                int dst)
      : pack_(pack),
        signed_(is_signed),
        bits_(bits),
        count_(count),
        src_(src),
        dst_(dst) {}

  absl::Status Run(absl::Span<void* const> addresses,
                   const RunContext& context) const override;

  bool pack() const { return pack_; }
  bool is_signed() const { return signed_; }
  int bits() const { return bits_; }
  int64_t count() const { return count_; }
  int src() const { return src_; }
  int dst() const { return dst_; }

 private:
  uint8_t Extend(int value) const {
    return static_cast<uint8_t>(signed_ && (value >> (bits_ - 1)) != 0
                                    ? value | (0xFF << bits_)
                                    : value);
  }

  const bool pack_, signed_;
  const int bits_;
  const int64_t count_;
  const int src_, dst_;
};
std::shared_ptr<Kernel> SubByteEdgeKernel(bool pack, hlo::PrimitiveType type,
                                          int64_t count, int src, int dst);

// An fft (BuildFft; kernel_fft.cc runs it through Eigen's FFT, the CUDA
// backend through cuFFT): `batch` blocks of the operand's trailing
// dimensions, each transformed over `lengths` (fft_length). IFFT and
// IRFFT are scaled by 1/n per dimension.
enum class FftType { kFft, kIfft, kRfft, kIrfft };
class FftKernelBase : public Kernel {
 public:
  FftType type = FftType::kFft;
  // f64 and c128 (else f32 and c64).
  bool wide = false;
  int input = -1, output = -1;
  int64_t batch = 1;
  // The transform's lengths, and the trailing dimensions of the operand
  // and of the result.
  std::vector<int64_t> lengths, in_dims, out_dims;
};

// Row-major strides of `dims` (in elements).
std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims);

}  // namespace pjrt::compiler::host

#endif  // PJRT_COMPILER_HOST_KERNEL_H_
