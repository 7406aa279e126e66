// The CUDA code generator: turns a lowered program (the host compiler's
// steps, so both backends make the same fusion decisions) into one CUDA C++
// translation unit and the list of launches that run it.
//
//  - LoopStep: one element-wise kernel (a grid-stride loop; the output index
//    is split into coordinates once, each input is read through its affine
//    map, the fused Expression is straight-line code in registers); a loop
//    that reads an input transposed stages it through shared memory in
//    32x32 tiles, so that reads and writes are both coalesced;
//  - ReduceStep: a row reduction (one block per row, warp shuffles, then
//    shared memory) when the reduced elements are contiguous, a column
//    reduction (a thread per output, reading along rows) otherwise;
//  - GenericReduceStep: a thread per output, the reducer region inlined;
//  - CopyStep, FillStep, DynamicSliceStep: affine copy kernels;
//  - KernelStep of a map (host::MapKernel): a thread per element;
//  - KernelStep of a gather (host::GatherKernel): a thread per result
//    element (or word of up to 16 bytes, when slice rows are whole words),
//    its start index read and clamped as on the host;
//  - KernelStep of a scatter (host::ScatterKernel): copies of the operands,
//    then, for an add (or an integer multiply, max, min, and, or, xor), a
//    thread per update element combining through atomics; for a replace
//    or a float max or min, a thread per update element claiming its
//    element by an atomic maximum of its rank and order, the winner
//    writing; else the updates in the host's order: with several windows,
//    each update element's target sorted stably by CUB, then a thread per
//    target applying its updates in order (one window: a thread per first
//    window coordinate, or one), so that results are the host's bit for
//    bit but for float sums' rounding;
//  - KernelStep of an rng-bit-generator (host::RngBitGeneratorKernel):
//    ThreeFry or Philox bits, a thread per block or element, the host's
//    bits exactly, then the updated state;
//  - KernelStep of a reduce-window (host::ReduceWindowKernel): a thread
//    per output, its window in the host's order through the region;
//  - KernelStep of a select-and-scatter (host::SelectAndScatterKernel): a
//    thread per window selects, then a thread per operand element applies
//    the windows that selected it, in the host's order;
//  - KernelStep of a sort (host::SortKernel) or top-k (host::TopKKernel):
//    where the comparator is a plain total-order comparison of operand 0
//    (and for every top-k), CUB's radix sort (cub_sort.h) of unsigned keys
//    that order so, written by a kernel, or operand 0 itself for an
//    unsigned key sorted ascending along its last dimension, with each
//    element's position carried along (keys alone: sorted alone, then
//    turned back into their values); for any other comparator a stable
//    merge sort of each row's positions (a pass per run width, a thread
//    per position placing it by binary search in the other run), the
//    comparator inlined in a device function; then the operands gathered
//    in order (top-k: the first k);
//  - KernelStep of a while or conditional (host::WhileKernel,
//    host::ConditionalKernel): a kWhile or kConditional launch whose
//    condition, body or branches are SubPrograms generated the same way
//    into the same source; the backend reads the predicate or selector
//    back between them;
//  - KernelStep of a convolution (host::ConvolutionKernelBase): cuDNN's
//    forward, backward-data or backward-filter convolution where one
//    expresses it (cudnn_conv.h; the filter copied to or from cuDNN's
//    packed layout by a copy kernel), else, and as the fallback, a thread
//    per output element, its window summed in the host's type;
//  - KernelStep of an rng or rng-get-and-update-state (host::RngKernel):
//    the host's Philox draws and distributions, keyed by the run's seed
//    passed by value at launch;
//  - DotStep: a cuBLASLt matmul (f32, f64), or a generated kernel (s64,
//    c64, c128);
//  - CollectiveStep: an NCCL collective (nccl.h); s16, u16 and f8
//    reductions widened to 32 bits around it (NCCL reduces none of them);
//    an all-reduce or reduce-scatter with and or or of integers on bit
//    planes (a byte per bit, their u8 minimum or maximum, packed back);
//  - KernelStep of an fft (host::FftKernelBase): a cuFFT transform of the
//    batch of trailing blocks (C2C, R2C or C2R, single or double), then for
//    IFFT and IRFFT a kernel scaling by 1/n.
//
// Element types: pred, s2-s64, u2-u64 (s2, u2, s4 and u4 one value per
// byte, wrapped to their bits after every op; KernelStep of
// host::SubByteKernel packs and unpacks them, and f4e2m1fn, at the
// program's edges), the narrow floats (hlo/minifloat.h), f16, bf16 (the
// narrow and 16-bit floats computed in f32 and rounded after every op, as
// on
// the host; an f8 dot is lowered to f32 operands), f32, f64, c64 and c128
// (the prelude's pj_complex: every element-wise op the host computes on
// them, as std::complex computes it, C99 Annex G's infinities included;
// reduce, dot, converts, fft). Every other type or op is refused with
// UNIMPLEMENTED naming it.
//
// Indices are 32-bit where every offset of the kernel fits, 64-bit
// otherwise.
#ifndef PJRT_COMPILER_CUDA_CODEGEN_H_
#define PJRT_COMPILER_CUDA_CODEGEN_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/cuda/cub_sort.h"
#include "compiler/cuda/cudnn_conv.h"
#include "compiler/host/host_program.h"
#include "compiler/host/kernel.h"
#include "compiler/host/kernel_random.h"

namespace pjrt::compiler::cuda {

struct SubProgram;

// What a while or conditional does between its sub-programs' launches.
// Slots are the enclosing program's.
struct ControlFlow {
  // kWhile: the condition, then the body; kConditional: the branches.
  std::vector<std::shared_ptr<const SubProgram>> programs;
  // kWhile, per state leaf: the initial value's slot, the state's, its
  // spare (-1: the body passes it through) and its size (as
  // host::WhileKernel).
  std::vector<int> init, state, spare;
  std::vector<int64_t> bytes;
  // kWhile: a temporary of 8 bytes the condition writes its pred to; the
  // run reads it back after each evaluation.
  int predicate = -1;
  // kWhile: how many times the body runs when the compiler knows
  // (host::KnownTripCount): the run then neither evaluates the condition
  // nor waits for it; -1 otherwise.
  int64_t trip_count = -1;
  // kWhile: a trip count of at least kGraphMinimumTrips and a body that
  // GraphCapturable accepts: the run captures kGraphIterations iterations
  // of it into a CUDA graph and launches that graph, one launch for many
  // kernels.
  bool graphs = false;
  // kConditional: the selector (pred: true runs branch 0; s32: the index,
  // out of range the last), each branch's argument slots, the results.
  int selector = -1;
  bool selector_is_pred = false;
  std::vector<std::vector<int>> inputs;
  std::vector<int> outputs;
  // The sub-programs' scratch (the host kernel's scratch slot) and the
  // temporary that holds their generated temporaries.
  int scratch = -1;
  int temporaries = -1;
};

// One thing a run does, in order, on the compute stream.
struct Launch {
  enum class Kind {
    kKernel,       // a generated kernel
    kGemm,         // a cuBLASLt matmul (gemm)
    kCollective,   // an NCCL collective (nccl.h)
    kWhile,        // a loop of sub-programs, its predicate read back each time
    kConditional,  // one sub-program, chosen by a selector read back
    kFft,          // a cuFFT transform
    kSort,         // a CUB radix sort (cub_sort.h)
  };
  Kind kind = Kind::kKernel;
  // kKernel: the kernel's name in the source, its grid, and the slots
  // whose device addresses are its arguments, in order.
  std::string kernel;
  int64_t blocks = 1;
  // Threads per block: threads x threads_y.
  int threads = 256;
  int threads_y = 1;
  std::vector<int> slots;
  // The kernel's parameter types ("const float*"), one per slot.
  std::vector<std::string> params;
  // A copy that does nothing when its source and destination (slots 1 and
  // 0) are the same memory (a donated buffer already holding the result).
  bool skip_when_same_memory = false;
  // An rng's kernel takes, after its slots, the run's Philox key and draw
  // for this op (two `unsigned long long` by value; params names them).
  const host::RngKernel* rng = nullptr;
  // A convolution's kernel (slots out, lhs, rhs) that cuDNN can compute
  // too: the run takes cuDNN's engine when it has one for the GPU, else
  // this kernel.
  std::shared_ptr<const CudnnConvProblem> cudnn;
  // The slots of cuDNN's x, w and y: XLA's lhs, kernel and output as the
  // problem's direction assigns them, w a temporary when the filter is
  // copied to or from its packed layout (by the launch before, or by
  // cudnn_then).
  std::array<int, 3> cudnn_slots = {-1, -1, -1};
  // A kernel to launch after cuDNN's (not after this kernel): a filter
  // gradient's copy from its packed temporary into XLA's output.
  std::shared_ptr<const Launch> cudnn_then;
  // A convolution's kernel that cuDNN cannot compute: why not.
  std::string cudnn_refusal;
  // kGemm: slots are out, lhs, rhs.
  host::DotStep gemm;
  // kCollective: slots are the operands, then the results.
  host::CollectiveStep collective;
  // kWhile and kConditional.
  ControlFlow control;
  // kFft: slots are out, in. Unnormalized, as cuFFT transforms: the
  // generated kernel after an inverse scales it by 1/n. The input of an
  // IRFFT is a copy (cuFFT's complex-to-real transforms overwrite theirs).
  struct Fft {
    host::FftType type = host::FftType::kFft;
    bool wide = false;  // f64 and c128
    int64_t batch = 1;
    std::vector<int64_t> lengths;
  } fft;
  // kSort: slots are the keys in, the keys out, the values in and the
  // values out (-1, the last two, for keys alone).
  CubSortProblem sort;
  // The step it came from ("loop over f32[8,128] (add, exp)"), for errors
  // and `pjrt-hlo compile`.
  std::string origin;
};

struct GeneratedProgram {
  // The CUDA C++ source of every kernel (self-contained: no headers).
  std::string source;
  std::vector<Launch> launches;
  // Buffers the generated code needs besides the lowered program's: slot
  // number (lowered slots count + k) k is temporary_offsets[k] bytes into a
  // region of temporary_bytes of scratch memory after the lowered program's.
  std::vector<int64_t> temporary_offsets;
  int64_t temporary_bytes = 0;
};

// The launches of a computation that a while or conditional runs: slots
// are those of `lowered` (owned by the host kernel in the enclosing
// lowered program), then its temporaries, at temporary_offsets[k] bytes
// into the region the enclosing program's ControlFlow::temporaries holds.
// Its kernels are in the enclosing GeneratedProgram's source.
struct SubProgram {
  const host::HostProgram* lowered = nullptr;
  std::vector<Launch> launches;
  std::vector<int64_t> temporary_offsets;
  int64_t temporary_bytes = 0;
};

// Calls `visit` on every launch of `launches` (and the one each runs
// after cuDNN's, if any) and, depth first, of their sub-programs.
void ForEachLaunch(const std::vector<Launch>& launches,
                   const std::function<void(const Launch&)>& visit);

// Iterations of a counted loop's body captured into one CUDA graph: even,
// since the state's buffers swap after each iteration, so that a graph
// ends on the buffers it began on and can be launched again.
inline constexpr int64_t kGraphIterations = 16;
// A counted loop runs its first two iterations as they come (making every
// library plan and uploading constants), then graphs; a graph is captured
// and instantiated per run, so shorter loops run without.
inline constexpr int64_t kGraphMinimumTrips = 2 + 8 * kGraphIterations;

// True when `launches` (a loop body) can be captured into a CUDA graph and
// replayed: generated kernels without random draws, cuBLASLt matmuls and
// CUB sorts. Loops and conditionals read values back; collectives meet
// other participants; cuFFT plans are made per stream and cuDNN chooses
// its engine or the direct kernel at run time; an rng's draws advance with
// each launch.
bool GraphCapturable(const std::vector<Launch>& launches);

// REQUIRES: `program` passed CheckBounds.
absl::StatusOr<GeneratedProgram> GenerateCuda(const host::HostProgram& program);

// The CUDA C++ storage type of `type` ("float", "unsigned short" for bf16),
// or UNIMPLEMENTED for a type the CUDA backend does not compute yet.
absl::StatusOr<std::string> CudaStorageType(hlo::PrimitiveType type);

}  // namespace pjrt::compiler::cuda

#endif  // PJRT_COMPILER_CUDA_CODEGEN_H_
