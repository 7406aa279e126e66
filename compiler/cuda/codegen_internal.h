// The CUDA code generator's shared part: the Generator class (a host
// program's steps to CUDA kernels and launches) and the expression and
// type helpers it writes with. Its definitions are split over
// codegen_expression.cc (the helpers), codegen.cc (the steps: loops,
// reductions, copies, dots, collectives), codegen_kernels.cc (the kernels:
// fft, gather and scatter, windows, map, convolution, control flow) and
// codegen_sort_random.cc (sort, top-k, random bits and rng). Not part of
// the interface.
#ifndef PJRT_COMPILER_CUDA_CODEGEN_INTERNAL_H_
#define PJRT_COMPILER_CUDA_CODEGEN_INTERNAL_H_

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler/cuda/codegen.h"
#include "compiler/cuda/nccl.h"
#include "compiler/cuda/prelude.h"
#include "compiler/host/kernel_control_flow.h"
#include "compiler/host/kernel_convolution.h"
#include "compiler/host/kernel_indexing.h"
#include "compiler/host/kernel_linalg.h"
#include "compiler/host/kernel_map.h"
#include "compiler/host/kernel_random.h"
#include "compiler/host/kernel_sort.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/kernel_window.h"

namespace pjrt::compiler::cuda::codegen_internal {

using hlo::PrimitiveType;
using host::Expression;
using host::ExprNode;
using host::ExprOp;
using host::Product;

constexpr int kThreads = 256;
// Grid-stride loops cover any size with at most this many blocks.
constexpr int64_t kMaxBlocks = 65536;

inline int64_t BlocksFor(int64_t elements, int threads = kThreads) {
  return std::clamp<int64_t>((elements + threads - 1) / threads, 1, kMaxBlocks);
}

// The floats computed in float and rounded to their type after every op:
// f16, bf16 and the narrower ones, as on the host.
inline bool IsHalf(PrimitiveType t) { return host::IsNarrowFloat(t); }
// s4, u4, s2 and u2: one value per byte, wrapped after every op.
using host::IsSubByteInt;
inline bool IsFloat(PrimitiveType t) {
  return IsHalf(t) || t == PrimitiveType::kF32 || t == PrimitiveType::kF64;
}

inline absl::Status Unsupported(PrimitiveType type) {
  return absl::UnimplementedError(absl::StrFormat(
      "the CUDA backend does not compute %s (it computes pred, s4-s64, "
      "u4-u64, the f8 types, f16, bf16, f32, f64, c64 and c128); run "
      "this program with --platform host",
      hlo::PrimitiveTypeName(type)));
}

// The type values of `type` are computed in (f16 and bf16 in float).
absl::StatusOr<std::string> ComputeType(PrimitiveType type);

// The prelude's name of a float type narrower than float, which values of
// it are computed in; nullptr for any other type.
const char* NarrowFloatName(PrimitiveType type);

// `storage` (an expression of the storage type) as a compute value.
std::string Load(PrimitiveType type, const std::string& storage);

std::string Store(PrimitiveType type, const std::string& value);

// A value computed in float, rounded to `type` when it is a narrower float;
// an integer wrapped to 4 bits when `type` is s4 or u4.
std::string Round(PrimitiveType type, const std::string& value);

// A float converted to s4, u4, s2 or u2 saturates to the type's range
// (after the saturating convert to 8 bits that `value` holds).
std::string SaturateSubByte(PrimitiveType type, const std::string& value);

// A math function of the C library for float or double.
std::string Math(const char* name, PrimitiveType type);

// A literal of the compute representation held in `bits`.
absl::StatusOr<std::string> SplatLiteral(PrimitiveType type,
                                         const uint64_t bits[2]);

const char* CompareOperator(hlo::ComparisonDirection d);

// The HLO name of an element-wise op ("multiply").
std::string ExprOpName(ExprOp op);

// The value of `node` when it or its first operand is complex (c64, c128),
// in `ct` (ComputeType of its type), as std::complex computes it on the
// host (the prelude's pj_complex operators and pj_c* functions).
absl::StatusOr<std::string> EmitComplex(const ExprNode& node,
                                        PrimitiveType operand_type,
                                        const std::string& ct,
                                        const std::vector<std::string>& var);

// Writes `expr` as straight-line CUDA statements, one variable per node
// (`<prefix><node>`), inputs taken from `inputs`; returns the variables of
// its outputs.
absl::StatusOr<std::vector<std::string>> EmitExpression(
    const Expression& expr, const std::vector<std::string>& inputs,
    const std::string& prefix, const std::string& indent, std::string* out);

// The index type of a kernel whose every offset lies in [-limit, limit]:
// 32 bits when a grid-stride step past the end cannot overflow either.
const char* IndexType(int64_t limit);

// The largest |offset| an affine map reaches over `dims`.
int64_t MapLimit(const host::AffineMap& map, const std::vector<int64_t>& dims);

// Statements splitting linear index `i` into coordinates c0..c{rank-1} of
// row-major `dims`.
std::string SplitIndex(const std::vector<int64_t>& dims, const char* index_type,
                       const std::string& indent);

// offset + sum(c_d * stride_d), as CUDA.
std::string MapExpression(const host::AffineMap& map, int rank);

constexpr char kLoopHead[] =
    "  for (%s i = (%s)blockIdx.x * blockDim.x + threadIdx.x; i < %d;\n"
    "       i += (%s)gridDim.x * blockDim.x) {\n";

// Every array slot of `program` has a CUDA storage type; UNIMPLEMENTED
// naming the first type that has none.
absl::Status CheckSlotTypes(const host::HostProgram& program);

// Statements that split a sort's position i into its row, its place p in
// the row, and the row's first element `base` (rows of n elements, element
// p of a row at base + p * inner).
std::string SortRowHead(int64_t n, int64_t inner);

// What the generators of a program and of its sub-programs share: one
// source, one numbering of kernels.
struct SharedSource {
  std::string source = kPrelude;
  int kernels = 0;
  bool random_helpers = false;
  bool linalg_helpers = false;
};

class Generator {
 public:
  Generator(const host::HostProgram& program, SharedSource* shared)
      : program_(program), shared_(shared) {}

  // The program's launches and temporaries (its kernels go to the shared
  // source).
  absl::StatusOr<GeneratedProgram> Run();

 private:
  std::string Name(const char* what) {
    return absl::StrFormat("pj_%s_%d", what, shared_->kernels++);
  }

  // A temporary buffer of `bytes` after the lowered program's scratch; its
  // slot number.
  int Temporary(int64_t bytes) {
    const int slot =
        static_cast<int>(program_.slots.size() + out_.temporary_offsets.size());
    out_.temporary_offsets.push_back(out_.temporary_bytes);
    out_.temporary_bytes += (bytes + 255) / 256 * 256;
    return slot;
  }

  void Add(Launch launch) { out_.launches.push_back(std::move(launch)); }

  // Writes the kernel's signature; `params` are "type name" pairs, one per
  // slot of the launch.
  void Open(Launch* launch, const std::vector<std::string>& params) {
    launch->params.clear();
    for (const std::string& p : params) {
      launch->params.push_back(p.substr(0, p.rfind(' ')));
    }
    absl::StrAppendFormat(
        &shared_->source,
        "\nextern \"C\" __global__ void __launch_bounds__(%d) %s(%s) {\n",
        launch->threads * launch->threads_y, launch->kernel,
        absl::StrJoin(params, ", "));
  }

  // The input of `s` that a tiled loop stages through shared memory, and the
  // output dimension along which that input is contiguous: an input read
  // across the output's rows (stride 1 along an earlier dimension, not
  // along the last), so that the loop reads it in 32x32 tiles, coalesced
  // on both sides, instead of one strided element per thread. {-1, -1}
  // when there is none worth it.
  static std::pair<int, int> TransposedInput(const host::LoopStep& s);

  absl::Status Emit(const host::LoopStep& s);

  // The reducer as CUDA, combining `a` and `b` of compute type `ct`.
  static std::string Combine(ExprOp op, PrimitiveType type,
                             const std::string& a, const std::string& b);

  // The identity of the reducer in the accumulator type.
  static std::string Identity(ExprOp op, PrimitiveType type,
                              const std::string& acc);

  absl::Status Emit(const host::ReduceStep& s);

  absl::Status Emit(const host::GenericReduceStep& s);

  static absl::StatusOr<std::string> WordType(int element_bytes);

  absl::Status Emit(const host::CopyStep& s);

  absl::Status Emit(const host::FillStep& s);

  absl::Status Emit(const host::DynamicSliceStep& s);

  absl::Status Emit(const host::DotStep& s);

  // A kernel converting `count` values from slot `src` (of `from`) into
  // slot `dst` (of `to`): how 16-bit integers and f8 reach NCCL, which has
  // no such types, and come back.
  void EmitWidthConvert(int dst, PrimitiveType to, int src, PrimitiveType from,
                        int64_t count);

  // Bit `b` of element `i` of `count` elements of `type` as byte
  // i * bits + b (0 or 1) of slot `dst` (unpack), or back (pack).
  absl::Status EmitBitPlanes(int dst, int src, PrimitiveType type,
                             int64_t count, bool pack);

  // An all-reduce or reduce-scatter with and or or of integers (NCCL has
  // neither): every operand's bits as bytes, their minimum (and) or
  // maximum (or) through NCCL on u8, packed back.
  absl::Status EmitBitwiseReduction(const host::CollectiveStep& s);

  absl::Status Emit(const host::CollectiveStep& s);

  absl::Status Emit(const host::KernelStep& s);

  // An fft through cuFFT: the batch of trailing blocks in one plan, then
  // for an inverse a kernel scaling the result by 1/n (cuFFT does not).
  absl::Status EmitFft(const host::FftKernelBase& f);

  // A sub-byte type packed 8 / bits per byte (the first element in the top
  // bits) or unpacked one per byte: a thread per byte of the packed side.
  absl::Status EmitSubByteEdge(const host::SubByteKernel& edge);

  // The start index entry `k` of the index vector at `at`, as a signed
  // 64-bit value (u64 saturates, as on the host).
  static std::string IndexEntry(hlo::PrimitiveType type,
                                const std::string& at) {
    if (type == PrimitiveType::kU64) {
      return absl::StrFormat(
          "(indices[%s] > 0x7fffffffffffffffull ? 0x7fffffffffffffffLL : "
          "(long long)indices[%s])",
          at, at);
    }
    return absl::StrFormat("(long long)indices[%s]", at);
  }

  // The start index of operand dimension `d` for the position whose batch
  // coordinates are b0, b1... and whose index vector is at `at`, as a
  // signed 64-bit expression (as IndexReader::Start: index vector entries,
  // then batching); empty when nothing sets it (0).
  static std::string StartIndex(const host::IndexReader& r, int64_t d);

  // How many elements make a word when every slice row moves as whole
  // words of up to 16 bytes, so that each thread loads and stores a word:
  // a contiguous last window dimension of a multiple of them, every other
  // stride a multiple, and every start index moving the slice by whole
  // words (or always 0); 1 otherwise.
  static int GatherWordElements(const host::GatherKernel& g);

  // A thread per output element (or word of them): the element's batch
  // position and window coordinates, the position's start index (read
  // from the index array, clamped so that the slice stays inside the
  // operand, as on the host), and one load.
  absl::Status EmitGather(const host::GatherKernel& gather);

  // outputs = operands (a copy kernel each, skipped when the output is the
  // operand's own memory), then the updates. A combine that atomics can do
  // in any order (AtomicCombine) runs a thread per update element
  // (EmitAtomicScatter), a choice of one value (ClaimCombine) by claims;
  // any other goes in the host kernel's order: sorted by target when
  // there are several windows (EmitSortedScatter), else a thread per first
  // window coordinate (the host's `parallel`) or one thread. Results are
  // those of the host, bit for bit, but for the floating-point sums
  // atomics add in another order.
  absl::Status EmitScatter(const host::ScatterKernel& sc);

  // The launch's slots and the kernel's parameters of `sc`'s outputs
  // (out0...) and updates (upd0...), in that order.
  static void ScatterOperands(const host::ScatterKernel& sc,
                              const std::vector<std::string>& storage,
                              Launch* launch, std::vector<std::string>* params);

  // The statements combining update element `s` into operand element `t`
  // (both in scope) as the host does: `sc`'s region (or replace, add),
  // every operand of a variadic scatter.
  absl::StatusOr<std::string> ScatterCombine(
      const host::ScatterKernel& sc, const std::vector<std::string>& storage,
      const std::string& indent);

  // The deterministic path for any combine: a kernel writes each update
  // element's target (a key after every target for a window that does not
  // fit) and its offset in the updates, CUB sorts them stably by target,
  // then a thread per target applies its updates in the host's order
  // (increasing window position). Parallel over targets, serial only where
  // updates meet.
  absl::Status EmitSortedScatter(const host::ScatterKernel& sc,
                                 const std::vector<std::string>& storage);

  // Statements giving, for the scatter position `position` (an
  // expression), its start in the operand (`dst`) and in the updates
  // (`src`), and skipping (`continue`) a window that does not fit.
  static std::string ScatterStart(const host::ScatterKernel& sc,
                                  const std::string& position,
                                  const std::string& indent);

  // The op of a one-operand scatter whose result atomics reach whatever
  // the order of the updates: add, multiply, maximum, minimum, and, or and
  // xor of integers and pred (exact whatever the order), and add of
  // floats (within reassociation's tolerance); nullopt for any other
  // combine.
  static std::optional<ExprOp> AtomicCombine(const host::ScatterKernel& sc);

  // The statements applying update `upd0[s]` to `out0[t]` atomically: a
  // native atomic where the hardware has one (f32 and f64 add, 32- and
  // 64-bit integer add, max, min, and, or, xor),
  // else a compare-and-swap loop around the host's combine.
  static absl::StatusOr<std::string> AtomicUpdate(const host::ScatterKernel& sc,
                                                  ExprOp op,
                                                  const std::string& indent);

  // The grid-stride loop over the update elements of `sc`, in the host's
  // order, opened up to the statements that have in scope `i` (the
  // element's place in that order), `s` and `t` (its offsets in the updates
  // and in the operand); windows that do not fit are skipped, after the
  // statements `first` that open each iteration.
  static std::string ScatterElementLoop(const host::ScatterKernel& sc,
                                        const std::string& first = "");

  // A thread per update element: one atomic update.
  absl::Status EmitAtomicScatter(const host::ScatterKernel& sc, ExprOp op);

  // A scatter whose result at each element is one of the values that meet
  // there, chosen by a rank and the order: a replace (the last update),
  // or a maximum or minimum of f32, f16, bf16 or f8 (the greatest or least
  // value, NaN above all, the later or earlier of two equal ones as the
  // region's operand order says).
  struct Claim {
    bool ranked = false;  // by value, then order; else by order alone
    bool minimum = false;
    bool earliest_wins = false;
  };
  // The claims of every operand element fit in this many bytes.
  static constexpr int64_t kMaxClaimBytes = int64_t{256} << 20;

  // The claim that picks `sc`'s results, or nullopt when its region is no
  // such choice (or its orders do not fit in 32 bits, or its claims in
  // kMaxClaimBytes).
  static std::optional<Claim> ClaimCombine(const host::ScatterKernel& sc);

  // Three kernels of a thread per update element, deterministic and the
  // host's bits (NaN payloads aside): each puts the operand's claim (its
  // rank and an order before or after every update) where it lands, then
  // raises it with its own (a 64-bit atomic maximum of rank << 32 | order),
  // then the one whose claim won writes its update.
  absl::Status EmitClaimScatter(const host::ScatterKernel& sc,
                                const Claim& claim);

  // ThreeFry-2x32 and Philox-4x32, as the host computes them
  // (kernel_random.cc), emitted once per program.
  void EmitRandomHelpers();

  // The bits (a thread per Philox block, or per ThreeFry element), then,
  // in a second kernel (the state may be the donated input's memory), the
  // updated state.
  absl::Status EmitRngBitGenerator(const host::RngBitGeneratorKernel& g);

  // A thread per output: the initial values, then each operand element the
  // window covers (in the window's row-major order, padding and holes
  // between base-dilated elements skipped), combined through the region,
  // as the host does.
  absl::Status EmitReduceWindow(const host::ReduceWindowKernel& rw);

  // Two kernels, results the host's bit for bit: a thread per window
  // selects its element (into a temporary), then a thread per operand
  // element starts from the initial value and applies `scatter` for each
  // window that selected it, in the windows' order.
  absl::Status EmitSelectAndScatter(const host::SelectAndScatterKernel& ss);

  // A thread per element: the region on the inputs' elements.
  absl::Status EmitMap(const host::MapKernel& m);

  // Conjugates, pivots' square roots and squared magnitudes of reals and
  // complex numbers, emitted once per program (codegen_linalg.cc).
  void EmitLinalgHelpers();

  // A thread per right-hand side, solving its system by substitution in
  // the host kernel's order.
  absl::Status EmitTriangularSolve(const host::TriangularSolveKernel& ts);

  // A block per matrix: thread 0 takes each column's pivot, the block's
  // threads the column's other rows; then the other triangle is zeroed
  // (lower) or L^H moved into it (upper).
  absl::Status EmitCholesky(const host::CholeskyKernel& c);

  // A stable merge sort of `rows` rows of `n` positions, as the host's
  // bottom-up merge sort: widths 1, 2, 4...; in each pass a thread per
  // position finds where its element lands in the merged pair of runs by
  // a binary search of the other run (an element of the left run goes
  // after the right run's elements less than it, one of the right run
  // after the left run's elements not greater than it). For a comparator
  // that is a strict weak order, as XLA requires, the result is the
  // stable sort, which is the host's; with any other comparator every
  // position still stays within its row. `less` is the name of a device
  // function (long long base, long long a, long long b, operands...)
  // comparing the elements at positions a and b of the row at `base`
  // (element position p at base + p * inner). Returns the temporary slot
  // that holds, for each row, the sorted positions (long long).
  int EmitMergeSort(int64_t rows, int64_t n, int64_t inner,
                    const std::string& less, const std::vector<int>& slots,
                    const std::vector<std::string>& params,
                    const std::string& what);

  // True when CUB sorts `rows` rows of `n` keys of `type` in `order`: a
  // total order (ascending or descending) on a type that is not complex,
  // rows shorter than 2^32 (positions are 32-bit), narrower keys of
  // several rows no more rows than their row number has bits for above
  // the key's (2^(64 - key bits)), and 64-bit keys of several rows
  // (segments) fewer than 2^31 in all.
  static bool CubSorts(host::KeyOrder order, PrimitiveType type, int64_t rows,
                       int64_t n);

  // The CUDA type of an unsigned integer of `bytes` (1, 2, 4 or 8) bytes.
  static const char* UnsignedWord(int bytes);

  // The unsigned integer of `type`'s storage width that orders as XLA's
  // total order does (as the host's sort keys), of the storage value `v`;
  // with `canonical`, as host::CanonicalSortKey (-0 as +0, every NaN the
  // greatest).
  static std::string UnsignedSortKey(PrimitiveType type, const std::string& v,
                                     bool canonical);

  // What EmitCubSort leaves: the temporary slot of each element's position
  // in its row (unsigned, row after row, in sorted order; -1 when none was
  // asked), and whether the sorted keys are in the `keys_out` it was given.
  struct CubSorted {
    int positions = -1;
    bool keys_written = false;
    // Unless keys_written: the sorted keys' temporary, and their width in
    // bytes (the row number above the key's bits with several rows).
    int keys = -1;
    int key_bytes = 0;
  };

  // Sorts `rows` rows of `n` elements of slot `key` (of `type`, element p
  // of a row at base + p * inner, as SortRowHead) through CUB, stably,
  // ascending or `descending` by XLA's total order (of canonical keys with
  // `canonical`). A kernel writes
  // UnsignedSortKey (complemented for descending; with several rows, the
  // row number above it, so that one sort orders every row) to a
  // temporary, unless `keys_out` >= 0 (an unsigned type sorted ascending
  // along contiguous rows) and the rows need no number: CUB then reads the
  // keys as they lie and writes the sorted ones to `keys_out`. Positions
  // come along when `positions`; else the keys alone are sorted.
  absl::StatusOr<CubSorted> EmitCubSort(int64_t rows, int64_t n, int64_t inner,
                                        PrimitiveType type, int key,
                                        bool descending, bool canonical,
                                        int keys_out, bool positions,
                                        const std::string& what);

  // A keys-only sort's output from the keys CUB sorted (`sorted`, as
  // EmitCubSort wrote them): each key's own bits, UnsignedSortKey undone.
  absl::Status EmitSortedKeysOut(const host::SortKernel& sort,
                                 const CubSorted& sorted, bool descending,
                                 const std::string& what);

  // sort: CUB's sort of positions (CubSorts) or the comparator as a device
  // function and the merge sort of positions, then every operand gathered
  // through the permutation.
  absl::Status EmitSort(const host::SortKernel& sort);

  // A key of `type`'s storage value `v` that orders, as a signed or
  // unsigned integer, as XLA's total order does (floats by their bits, as
  // the host's top-k).
  static std::string TotalOrderKey(PrimitiveType type, const std::string& v);

  // top-k: each row sorted largest (or smallest) first, ties to the lower
  // index, its first k taken.
  absl::Status EmitTopK(const host::TopKKernel& t);

  // rng and rng-get-and-update-state, as host::RngKernel: Philox blocks
  // under the run's key, from the run's draw; two values per block
  // (uniform from words 2 and 3, or Box-Muller from words 0 and 1;
  // integers from the 64-bit words modulo the range), computed in double.
  absl::Status EmitRng(const host::RngKernel& r);

  // convolution: a thread per output element, its window's taps and the
  // group's input features summed in the host's type (float, or double
  // for f64 and integer results), then converted as the host converts.
  // A direct kernel: correct for every dim_labels, group, padding,
  // dilation and reversal; cuDNN's speed comes later.
  absl::Status EmitConvolution(const host::ConvolutionKernelBase& conv);

  // A computation a while or conditional runs, generated into the shared
  // source with launches and temporaries of its own.
  absl::StatusOr<std::shared_ptr<const SubProgram>> Sub(
      const host::HostProgram& program) {
    PJRT_RETURN_IF_ERROR(CheckSlotTypes(program));
    PJRT_ASSIGN_OR_RETURN(GeneratedProgram g,
                          Generator(program, shared_).Run());
    auto sub = std::make_shared<SubProgram>();
    sub->lowered = &program;
    sub->launches = std::move(g.launches);
    sub->temporary_offsets = std::move(g.temporary_offsets);
    sub->temporary_bytes = g.temporary_bytes;
    return sub;
  }

  // while: the condition and the body as sub-programs; the run evaluates
  // the condition, reads its pred back, and runs the body, until false.
  absl::Status EmitWhile(const host::WhileKernel& w);

  // conditional: every branch as a sub-program; the run reads the selector
  // back and runs the one it names.
  absl::Status EmitConditional(const host::ConditionalKernel& k);

  const host::HostProgram& program_;
  SharedSource* shared_;
  GeneratedProgram out_;
};

}  // namespace pjrt::compiler::cuda::codegen_internal

#endif  // PJRT_COMPILER_CUDA_CODEGEN_INTERNAL_H_
