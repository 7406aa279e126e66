#include "compiler/cuda/codegen.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "compiler/cuda/codegen_internal.h"
#include "compiler/cuda/nccl.h"
#include "compiler/cuda/prelude.h"
#include "compiler/host/kernel_control_flow.h"
#include "compiler/host/kernel_convolution.h"
#include "compiler/host/kernel_indexing.h"
#include "compiler/host/kernel_map.h"
#include "compiler/host/kernel_random.h"
#include "compiler/host/kernel_sort.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/kernel_window.h"

namespace pjrt::compiler::cuda {

using codegen_internal::Unsupported;
using hlo::PrimitiveType;

absl::StatusOr<std::string> CudaStorageType(PrimitiveType type) {
  if (hlo::IsMiniFloat(type)) return std::string("pj_u8");
  switch (type) {
    case PrimitiveType::kPred:
      return std::string("pj_u8");
    case PrimitiveType::kS4:  // one value per byte, sign-extended
    case PrimitiveType::kS2:
    case PrimitiveType::kS8:
      return std::string("pj_s8");
    case PrimitiveType::kS16:
      return std::string("pj_s16");
    case PrimitiveType::kS32:
      return std::string("pj_s32");
    case PrimitiveType::kS64:
      return std::string("pj_s64");
    case PrimitiveType::kU4:  // one value per byte
    case PrimitiveType::kU2:
    case PrimitiveType::kU8:
      return std::string("pj_u8");
    case PrimitiveType::kU16:
      return std::string("pj_u16");
    case PrimitiveType::kU32:
      return std::string("pj_u32");
    case PrimitiveType::kU64:
      return std::string("pj_u64");
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return std::string("pj_u16");
    case PrimitiveType::kF32:
      return std::string("float");
    case PrimitiveType::kF64:
      return std::string("double");
    case PrimitiveType::kC64:
      return std::string("pj_c64");
    case PrimitiveType::kC128:
      return std::string("pj_c128");
    default:
      return Unsupported(type);
  }
}

namespace codegen_internal {

absl::StatusOr<GeneratedProgram> Generator::Run() {
  for (size_t i = 0; i < program_.steps.size(); ++i) {
    const size_t first = out_.launches.size();
    absl::Status status =
        std::visit([&](const auto& s) -> absl::Status { return Emit(s); },
                   program_.steps[i]);
    const std::string& origin = i < program_.step_origins.size()
                                    ? program_.step_origins[i]
                                    : std::string();
    if (!status.ok()) {
      if (origin.empty() ||
          status.message().find(origin) != absl::string_view::npos) {
        return status;
      }
      return absl::Status(status.code(),
                          absl::StrCat(origin, ": ", status.message()));
    }
    if (origin.empty()) continue;
    for (size_t l = first; l < out_.launches.size(); ++l) {
      absl::StrAppend(&out_.launches[l].origin, " for ", origin);
    }
  }
  return std::move(out_);
}

std::pair<int, int> Generator::TransposedInput(const host::LoopStep& s) {
  const int rank = static_cast<int>(s.dims.size());
  if (rank < 2 || s.dims[rank - 1] < 16) return {-1, -1};
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    const host::LoopInput& in = s.inputs[k];
    if (in.kind != host::LoopInput::Kind::kBuffer || in.contiguous ||
        static_cast<int>(in.map.strides.size()) != rank ||
        in.map.strides[rank - 1] == 1) {
      continue;
    }
    for (int a = rank - 2; a >= 0; --a) {
      if (in.map.strides[a] == 1 && s.dims[a] >= 16)
        return {static_cast<int>(k), a};
    }
  }
  return {-1, -1};
}

absl::Status Generator::Emit(const host::LoopStep& s) {
  const int64_t n = Product(s.dims);
  if (n == 0) return absl::OkStatus();
  const int rank = static_cast<int>(s.dims.size());
  int64_t limit = n;
  for (const host::LoopInput& in : s.inputs)
    limit = std::max(limit, MapLimit(in.map, s.dims));
  const char* idx = IndexType(limit);
  const auto [tiled, tiled_dim] = TransposedInput(s);
  Launch launch;
  launch.kernel = Name(tiled >= 0 ? "loop_tiled" : "loop");
  launch.blocks = BlocksFor(n);
  launch.threads = kThreads;
  PJRT_ASSIGN_OR_RETURN(std::string out_type, CudaStorageType(s.output_type));
  std::vector<std::string> params = {absl::StrCat(out_type, "* out")};
  launch.slots.push_back(s.output_slot);
  // The statements computing element `i` (coordinates c0... in scope).
  std::string body;
  std::vector<std::string> inputs;
  std::string tile_type, tile_load;
  for (size_t k = 0; k < s.inputs.size(); ++k) {
    const host::LoopInput& in = s.inputs[k];
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(in.type));
    const std::string name = absl::StrCat("x", k);
    const std::string at = in.contiguous ? "i" : MapExpression(in.map, rank);
    if (in.kind == host::LoopInput::Kind::kIota) {
      std::string value;
      if (hlo::IsComplex(in.type)) {
        // The index as the real part.
        const char* part =
            in.type == hlo::PrimitiveType::kC64 ? "float" : "double";
        value = absl::StrFormat("pj_cmake((%s)(long long)(%s), (%s)0)", part,
                                MapExpression(in.map, rank), part);
      } else {
        value = Round(in.type, absl::StrFormat("(%s)(long long)(%s)", ct,
                                               MapExpression(in.map, rank)));
      }
      absl::StrAppendFormat(&body, "    const %s %s = %s;\n", ct, name, value);
    } else {
      PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(in.type));
      params.push_back(absl::StrFormat("const %s* in%d", st, k));
      launch.slots.push_back(in.slot);
      if (static_cast<int>(k) == tiled) {
        tile_type = ct;
        tile_load = Load(in.type, absl::StrFormat("in%d[%s]", k, at));
        absl::StrAppendFormat(&body, "    const %s %s = tile[x][y];\n", ct,
                              name);
      } else {
        absl::StrAppendFormat(
            &body, "    const %s %s = %s;\n", ct, name,
            Load(in.type, absl::StrFormat("in%d[%s]", k, at)));
      }
    }
    inputs.push_back(name);
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<std::string> outputs,
                        EmitExpression(s.expr, inputs, "v", "    ", &body));
  if (outputs.size() != 1) {
    return absl::InternalError("a loop step must have one output");
  }
  absl::StrAppendFormat(&body, "    out[i] = %s;\n",
                        Store(s.output_type, outputs[0]));
  std::string& k = shared_->source;
  if (tiled < 0) {
    Open(&launch, params);
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
    bool needs_coordinates = false;
    for (const host::LoopInput& in : s.inputs) {
      needs_coordinates |=
          in.kind == host::LoopInput::Kind::kIota || !in.contiguous;
    }
    if (needs_coordinates) absl::StrAppend(&k, SplitIndex(s.dims, idx, "    "));
    absl::StrAppend(&k, body, "  }\n}\n");
  } else {
    // 32x32 tiles of output dimensions (a, last): each block loads a tile
    // of the transposed input along a (coalesced), then computes the
    // tile's elements along the last dimension (coalesced writes),
    // reading the input from shared memory. A thread covers several
    // elements of the tile (the loops stride by the block's shape).
    const int a = tiled_dim, b = rank - 1;
    const int64_t tiles_a = (s.dims[a] + 31) / 32,
                  tiles_b = (s.dims[b] + 31) / 32;
    int64_t tiles = tiles_a * tiles_b;
    for (int d = 0; d < rank; ++d) {
      if (d != a && d != b) tiles *= s.dims[d];
    }
    launch.threads = 32;
    launch.threads_y = 8;
    launch.blocks = std::min(tiles, kMaxBlocks);
    Open(&launch, params);
    absl::StrAppendFormat(&k, "  __shared__ %s tile[32][33];\n", tile_type);
    absl::StrAppendFormat(
        &k, "  for (%s t = blockIdx.x; t < %d; t += gridDim.x) {\n", idx,
        tiles);
    absl::StrAppendFormat(&k, "    %s rest = t;\n", idx);
    absl::StrAppendFormat(&k, "    const %s tb = rest %% %d; rest /= %d;\n",
                          idx, tiles_b, tiles_b);
    absl::StrAppendFormat(&k, "    const %s ta = rest %% %d; rest /= %d;\n",
                          idx, tiles_a, tiles_a);
    for (int d = rank - 1; d >= 0; --d) {
      if (d == a || d == b) continue;
      absl::StrAppendFormat(&k, "    const %s c%d = rest %% %d; rest /= %d;\n",
                            idx, d, s.dims[d], s.dims[d]);
    }
    absl::StrAppend(
        &k, "    for (int y = threadIdx.y; y < 32; y += blockDim.y) {\n");
    absl::StrAppend(
        &k, "      for (int x = threadIdx.x; x < 32; x += blockDim.x) {\n");
    absl::StrAppendFormat(
        &k, "        const %s c%d = ta * 32 + x, c%d = tb * 32 + y;\n", idx, a,
        b);
    absl::StrAppendFormat(
        &k, "        if (c%d < %d && c%d < %d) tile[y][x] = %s;\n", a,
        s.dims[a], b, s.dims[b], tile_load);
    absl::StrAppend(&k, "      }\n    }\n    __syncthreads();\n");
    absl::StrAppend(
        &k, "    for (int y = threadIdx.y; y < 32; y += blockDim.y) {\n");
    absl::StrAppend(
        &k, "      for (int x = threadIdx.x; x < 32; x += blockDim.x) {\n");
    absl::StrAppendFormat(
        &k, "        const %s c%d = ta * 32 + y, c%d = tb * 32 + x;\n", idx, a,
        b);
    absl::StrAppendFormat(&k, "        if (c%d >= %d || c%d >= %d) continue;\n",
                          a, s.dims[a], b, s.dims[b]);
    const std::vector<int64_t> strides = host::RowMajorStrides(s.dims);
    std::string at = "0";
    for (int d = 0; d < rank; ++d)
      absl::StrAppendFormat(&at, " + c%d * %d", d, strides[d]);
    absl::StrAppendFormat(&k, "        const %s i = %s;\n", idx, at);
    absl::StrAppend(&k, body);
    absl::StrAppend(&k, "      }\n    }\n    __syncthreads();\n  }\n}\n");
  }
  std::vector<std::string> names;
  for (const ExprNode& node : s.expr.nodes()) {
    if (node.op != ExprOp::kInput && node.op != ExprOp::kSplat) {
      names.push_back(ExprOpName(node.op));
    }
  }
  launch.origin =
      absl::StrFormat("%sloop over %s[%s] (%s)", tiled >= 0 ? "tiled " : "",
                      hlo::PrimitiveTypeName(s.output_type),
                      absl::StrJoin(s.dims, ","), absl::StrJoin(names, ", "));
  Add(std::move(launch));
  return absl::OkStatus();
}

std::string Generator::Combine(ExprOp op, PrimitiveType type,
                               const std::string& a, const std::string& b) {
  const bool fl = IsFloat(type);
  switch (op) {
    case ExprOp::kAdd:
      return fl ? absl::StrCat(a, " + ", b)
                : absl::StrCat("pj_iadd(", a, ", ", b, ")");
    case ExprOp::kMultiply:
      return fl ? absl::StrCat(a, " * ", b)
                : absl::StrCat("pj_imul(", a, ", ", b, ")");
    case ExprOp::kMaximum:
      return absl::StrCat(fl ? "pj_fmax(" : "pj_imax(", a, ", ", b, ")");
    case ExprOp::kMinimum:
      return absl::StrCat(fl ? "pj_fmin(" : "pj_imin(", a, ", ", b, ")");
    case ExprOp::kAnd:
      return absl::StrCat("(", a, " & ", b, ")");
    case ExprOp::kOr:
      return absl::StrCat("(", a, " | ", b, ")");
    default:
      return a;
  }
}

std::string Generator::Identity(ExprOp op, PrimitiveType type,
                                const std::string& acc) {
  const bool fl = IsFloat(type);
  switch (op) {
    case ExprOp::kAdd:
    case ExprOp::kOr:
      return absl::StrCat("(", acc, ")0");
    case ExprOp::kMultiply:
      return absl::StrCat("(", acc, ")1");
    case ExprOp::kAnd:
      return absl::StrCat("(", acc, ")~(", acc, ")0");
    case ExprOp::kMaximum:
      return fl ? absl::StrCat("-(", acc, ")__int_as_float(0x7f800000)")
                : absl::StrCat("pj_limits<", acc, ">::lo()");
    case ExprOp::kMinimum:
      return fl ? absl::StrCat("(", acc, ")__int_as_float(0x7f800000)")
                : absl::StrCat("pj_limits<", acc, ">::hi()");
    default:
      return absl::StrCat("(", acc, ")0");
  }
}

absl::Status Generator::Emit(const host::ReduceStep& s) {
  const int64_t outputs = s.outer * s.inner;
  if (outputs == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.type));
  PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(s.type));
  const char* idx = IndexType(s.outer * s.reduced * s.inner);
  Launch launch;
  launch.slots = {s.out, s.input, s.init};
  const std::vector<std::string> params = {
      absl::StrCat(st, "* out"), absl::StrCat("const ", st, "* in"),
      absl::StrCat("const ", st, "* init")};
  launch.origin = absl::StrFormat(
      "reduce %s[%d,%d,%d] to [%d,%d] (%s)", hlo::PrimitiveTypeName(s.type),
      s.outer, s.reduced, s.inner, s.outer, s.inner, ExprOpName(s.op));
  if (s.inner == 1 && s.reduced >= 64) {
    // Blocks reduce segments of rows: threads stride over a segment,
    // warps combine by shuffles, the block's warps through shared memory.
    // Narrow integers accumulate in 32 bits (the wrapped result is the
    // same). A few long rows (a whole-array sum) are cut into chunks that
    // many blocks reduce into partial values first, then a second kernel
    // reduces each row's partials: every SM takes part.
    std::string acc = ct;
    const int width = hlo::BitWidth(s.type);
    if (!IsFloat(s.type) && width < 32) {
      acc = hlo::IsSignedInteger(s.type) ? "pj_s32" : "pj_u32";
    }
    constexpr int64_t kChunk = 16384;
    const int64_t chunks =
        s.outer < 128 && s.reduced >= 4 * kChunk
            ? std::min<int64_t>((s.reduced + kChunk - 1) / kChunk, 1024)
            : 1;
    // segments: how many; begin/end: the segment's range of j in terms of
    // `seg`; value: element j as `acc`; finish: the statement that stores
    // the segment's total `acc`.
    const auto block_reduce = [&](Launch* l, const std::vector<std::string>& ps,
                                  int64_t segments, const std::string& begin,
                                  const std::string& end,
                                  const std::string& value,
                                  const std::string& finish) {
      l->threads = kThreads;
      l->blocks = std::min(segments, kMaxBlocks);
      std::string& k = shared_->source;
      Open(l, ps);
      absl::StrAppendFormat(&k, "  __shared__ %s partial[%d];\n", acc,
                            kThreads / 32);
      absl::StrAppendFormat(
          &k, "  for (%s seg = blockIdx.x; seg < %d; seg += gridDim.x) {\n",
          idx, segments);
      absl::StrAppendFormat(&k, "    %s acc = %s;\n", acc,
                            Identity(s.op, s.type, acc));
      absl::StrAppendFormat(
          &k, "    for (%s j = %s + threadIdx.x; j < %s; j += blockDim.x) {\n",
          idx, begin, end);
      absl::StrAppendFormat(&k, "      const %s x = %s;\n", acc, value);
      absl::StrAppendFormat(&k, "      acc = %s;\n    }\n",
                            Combine(s.op, s.type, "acc", "x"));
      absl::StrAppend(&k, "    for (int o = PJ_WARP / 2; o > 0; o >>= 1) {\n");
      absl::StrAppendFormat(
          &k, "      const %s y = __shfl_down_sync(0xffffffffu, acc, o);\n",
          acc);
      absl::StrAppendFormat(&k, "      acc = %s;\n    }\n",
                            Combine(s.op, s.type, "acc", "y"));
      absl::StrAppend(&k,
                      "    if (threadIdx.x % PJ_WARP == 0) "
                      "partial[threadIdx.x / PJ_WARP] = acc;\n");
      absl::StrAppend(&k, "    __syncthreads();\n");
      absl::StrAppend(&k, "    if (threadIdx.x == 0) {\n");
      absl::StrAppendFormat(&k, "      acc = partial[0];\n");
      absl::StrAppendFormat(&k,
                            "      for (int w = 1; w < (int)(blockDim.x + "
                            "PJ_WARP - 1) / PJ_WARP; ++w) acc = %s;\n",
                            Combine(s.op, s.type, "acc", "partial[w]"));
      absl::StrAppendFormat(&k, "      %s\n    }\n", finish);
      absl::StrAppend(&k, "    __syncthreads();\n  }\n}\n");
    };
    const std::string finish_row = absl::StrFormat(
        "out[seg] = %s;",
        Store(s.type,
              Round(s.type, Combine(s.op, s.type, Load(s.type, "init[0]"),
                                    absl::StrCat("(", ct, ")acc")))));
    if (chunks == 1) {
      launch.kernel = Name("reduce_rows");
      block_reduce(
          &launch, params, s.outer, absl::StrFormat("seg * %d", s.reduced),
          absl::StrFormat("(seg + 1) * %d", s.reduced),
          absl::StrFormat("(%s)%s", acc, Load(s.type, "in[j]")), finish_row);
    } else {
      const int64_t per_chunk = (s.reduced + chunks - 1) / chunks;
      const int temporary = Temporary(s.outer * chunks * 8);
      Launch first;
      first.kernel = Name("reduce_chunks");
      first.slots = {temporary, s.input};
      first.origin =
          absl::StrFormat("%s, in %d chunks per row", launch.origin, chunks);
      block_reduce(
          &first,
          {absl::StrCat(acc, "* partials"), absl::StrCat("const ", st, "* in")},
          s.outer * chunks,
          absl::StrFormat("(seg / %d) * %d + (seg %% %d) * %d", chunks,
                          s.reduced, chunks, per_chunk),
          absl::StrFormat("(seg / %d) * %d + ((seg %% %d) * %d + %d < %d ? "
                          "(seg %% %d) * %d + %d : %d)",
                          chunks, s.reduced, chunks, per_chunk, per_chunk,
                          s.reduced, chunks, per_chunk, per_chunk, s.reduced),
          absl::StrFormat("(%s)%s", acc, Load(s.type, "in[j]")),
          "partials[seg] = acc;");
      Add(std::move(first));
      launch.kernel = Name("reduce_partials");
      launch.slots = {s.out, temporary, s.init};
      block_reduce(
          &launch,
          {absl::StrCat(st, "* out"), absl::StrCat("const ", acc, "* partials"),
           absl::StrCat("const ", st, "* init")},
          s.outer, absl::StrFormat("seg * %d", chunks),
          absl::StrFormat("(seg + 1) * %d", chunks), "partials[j]", finish_row);
    }
  } else {
    // A thread per output, reading along the reduced dimension (adjacent
    // threads read adjacent elements when inner > 1).
    launch.kernel = Name("reduce_columns");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(outputs);
    std::string& k = shared_->source;
    Open(&launch, params);
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, outputs, idx);
    absl::StrAppendFormat(&k, "    const %s o = i / %d, c = i %% %d;\n", idx,
                          s.inner, s.inner);
    absl::StrAppendFormat(&k, "    %s acc = %s;\n", ct,
                          Load(s.type, "init[0]"));
    absl::StrAppendFormat(&k, "    for (%s j = 0; j < %d; ++j) {\n", idx,
                          s.reduced);
    absl::StrAppendFormat(
        &k, "      const %s x = %s;\n", ct,
        Load(s.type,
             absl::StrFormat("in[(o * %d + j) * %d + c]", s.reduced, s.inner)));
    // f16 and bf16 accumulate in f32, rounded once at the end.
    absl::StrAppendFormat(&k, "      acc = %s;\n    }\n",
                          Combine(s.op, s.type, "acc", "x"));
    absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n",
                          Store(s.type, "acc"));
  }
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::Emit(const host::GenericReduceStep& s) {
  const int64_t outputs = s.outer * s.inner;
  if (outputs == 0) return absl::OkStatus();
  const int count = static_cast<int>(s.types.size());
  const char* idx = IndexType(s.outer * s.reduced * s.inner);
  Launch launch;
  launch.kernel = Name("reduce_generic");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(outputs);
  std::vector<std::string> params;
  for (int j = 0; j < count; ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.types[j]));
    params.push_back(absl::StrFormat("%s* out%d", st, j));
    launch.slots.push_back(s.outs[j]);
  }
  for (int j = 0; j < count; ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.types[j]));
    params.push_back(absl::StrFormat("const %s* in%d", st, j));
    launch.slots.push_back(s.inputs[j]);
  }
  for (int j = 0; j < count; ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.types[j]));
    params.push_back(absl::StrFormat("const %s* init%d", st, j));
    launch.slots.push_back(s.inits[j]);
  }
  std::string& k = shared_->source;
  Open(&launch, params);
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, outputs, idx);
  absl::StrAppendFormat(&k, "    const %s o = i / %d, c = i %% %d;\n", idx,
                        s.inner, s.inner);
  std::vector<std::string> region_inputs;
  for (int j = 0; j < count; ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(s.types[j]));
    absl::StrAppendFormat(&k, "    %s acc%d = %s;\n", ct, j,
                          Load(s.types[j], absl::StrFormat("init%d[0]", j)));
    region_inputs.push_back(absl::StrCat("acc", j));
  }
  absl::StrAppendFormat(&k, "    for (%s j = 0; j < %d; ++j) {\n", idx,
                        s.reduced);
  for (int j = 0; j < count; ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(s.types[j]));
    absl::StrAppendFormat(
        &k, "      const %s x%d = %s;\n", ct, j,
        Load(s.types[j], absl::StrFormat("in%d[(o * %d + j) * %d + c]", j,
                                         s.reduced, s.inner)));
    region_inputs.push_back(absl::StrCat("x", j));
  }
  PJRT_ASSIGN_OR_RETURN(
      std::vector<std::string> results,
      EmitExpression(s.region, region_inputs, "r", "      ", &k));
  if (static_cast<int>(results.size()) != count) {
    return absl::InternalError(
        "a reducer region must give one value per accumulator");
  }
  for (int j = 0; j < count; ++j)
    absl::StrAppendFormat(&k, "      acc%d = %s;\n", j, results[j]);
  absl::StrAppend(&k, "    }\n");
  for (int j = 0; j < count; ++j) {
    absl::StrAppendFormat(&k, "    out%d[i] = %s;\n", j,
                          Store(s.types[j], absl::StrCat("acc", j)));
  }
  absl::StrAppend(&k, "  }\n}\n");
  launch.origin = absl::StrFormat("reduce [%d,%d,%d] with a %d-node reducer",
                                  s.outer, s.reduced, s.inner, s.region.size());
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Generator::WordType(int element_bytes) {
  switch (element_bytes) {
    case 1:
      return std::string("pj_u8");
    case 2:
      return std::string("pj_u16");
    case 4:
      return std::string("pj_u32");
    case 8:
      return std::string("pj_u64");
    case 16:
      return std::string("pj_u128");
    default:
      return absl::UnimplementedError(absl::StrFormat(
          "the CUDA backend moves elements of 1, 2, 4, 8 or 16 bytes, not %d",
          element_bytes));
  }
}

absl::Status Generator::Emit(const host::CopyStep& s) {
  const int64_t n = Product(s.dims);
  if (n == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string w, WordType(s.element_bytes));
  const int rank = static_cast<int>(s.dims.size());
  const char* idx = IndexType(
      std::max({n, MapLimit(s.src_map, s.dims), MapLimit(s.dst_map, s.dims)}));
  Launch launch;
  launch.kernel = Name("copy");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(n);
  launch.slots = {s.dst, s.src};
  std::string& k = shared_->source;
  Open(&launch, {absl::StrCat(w, "* dst"), absl::StrCat("const ", w, "* src")});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
  absl::StrAppend(&k, SplitIndex(s.dims, idx, "    "));
  absl::StrAppendFormat(&k, "    dst[%s] = src[%s];\n  }\n}\n",
                        MapExpression(s.dst_map, rank),
                        MapExpression(s.src_map, rank));
  launch.origin = absl::StrFormat("copy [%s] of %d-byte elements",
                                  absl::StrJoin(s.dims, ","), s.element_bytes);
  launch.skip_when_same_memory = s.src_map.offset == s.dst_map.offset &&
                                 s.src_map.strides == s.dst_map.strides;
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::Emit(const host::FillStep& s) {
  if (s.count == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string w, WordType(s.element_bytes));
  const char* idx = IndexType(s.count);
  Launch launch;
  launch.kernel = Name("fill");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(s.count);
  launch.slots = {s.dst, s.value};
  std::string& k = shared_->source;
  Open(&launch,
       {absl::StrCat(w, "* dst"), absl::StrCat("const ", w, "* value")});
  absl::StrAppendFormat(&k, "  const %s v = value[0];\n", w);
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, s.count, idx);
  absl::StrAppend(&k, "    dst[i] = v;\n  }\n}\n");
  launch.origin = absl::StrFormat("fill %d elements", s.count);
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::Emit(const host::DynamicSliceStep& s) {
  const int64_t n = Product(s.sizes);
  if (n == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string w, WordType(s.element_bytes));
  const int rank = static_cast<int>(s.sizes.size());
  const char* idx = IndexType(std::max(n, Product(s.array_dims)));
  Launch launch;
  launch.kernel = Name(s.update ? "dynamic_update_slice" : "dynamic_slice");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(n);
  launch.slots = {s.dst, s.src};
  std::vector<std::string> params = {absl::StrCat(w, "* dst"),
                                     absl::StrCat("const ", w, "* src")};
  for (int d = 0; d < rank; ++d) {
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(s.start_types[d]));
    params.push_back(absl::StrFormat("const %s* start%d", st, d));
    launch.slots.push_back(s.start_slots[d]);
  }
  std::string& k = shared_->source;
  Open(&launch, params);
  // Starts are clamped so that the window stays inside the array.
  for (int d = 0; d < rank; ++d) {
    const int64_t room = s.array_dims[d] - s.sizes[d];
    absl::StrAppendFormat(
        &k, "  const long long t%d = (long long)start%d[0];\n", d, d);
    absl::StrAppendFormat(
        &k, "  const %s s%d = (%s)(t%d < 0 ? 0 : (t%d > %d ? %d : t%d));\n",
        idx, d, idx, d, d, room, room, d);
  }
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
  absl::StrAppend(&k, SplitIndex(s.sizes, idx, "    "));
  std::string array_at = "0";
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    array_at = absl::StrFormat("%s + (s%d + c%d) * %d", array_at, d, d, stride);
    stride *= s.array_dims[d];
  }
  if (s.update) {
    absl::StrAppendFormat(&k, "    dst[%s] = src[i];\n  }\n}\n", array_at);
  } else {
    absl::StrAppendFormat(&k, "    dst[i] = src[%s];\n  }\n}\n", array_at);
  }
  launch.origin = absl::StrFormat(
      "%s of [%s] from [%s]",
      s.update ? "dynamic-update-slice" : "dynamic-slice",
      absl::StrJoin(s.sizes, ","), absl::StrJoin(s.array_dims, ","));
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::Emit(const host::DotStep& s) {
  const int64_t outputs = s.batch * s.m * s.n;
  if (outputs == 0) return absl::OkStatus();
  Launch launch;
  launch.origin = absl::StrFormat(
      "dot %s%s%s batch %d: [%d,%d] x [%d,%d]%s%s",
      hlo::PrimitiveTypeName(s.operand_type),
      s.rhs_type() != s.operand_type
          ? absl::StrCat(" by ", hlo::PrimitiveTypeName(s.rhs_type()))
          : "",
      s.operand_type != s.type
          ? absl::StrCat(" into ", hlo::PrimitiveTypeName(s.type))
          : "",
      s.batch, s.m, s.k, s.k, s.n, s.lhs_transposed ? " (lhs transposed)" : "",
      s.rhs_transposed ? " (rhs transposed)" : "");
  if (hlo::IsMiniFloat(s.operand_type) || hlo::IsMiniFloat(s.rhs_type())) {
    // fp8 operands reach here only as cuBLASLt takes them
    // (HostCompileOptions::fp8_dot_operands): f32 accumulation, the lhs
    // [batch, m, k] and the rhs [batch, n, k].
    if (s.type != PrimitiveType::kF32 || s.lhs_transposed ||
        !s.rhs_transposed) {
      return absl::InternalError(absl::StrFormat(
          "a dot of %s operands into %s with lhs_transposed=%d and "
          "rhs_transposed=%d is not a layout cuBLASLt's fp8 matmuls take",
          hlo::PrimitiveTypeName(s.operand_type),
          hlo::PrimitiveTypeName(s.type), s.lhs_transposed, s.rhs_transposed));
    }
  }
  if (s.k == 0) {
    // Nothing to contract (cuBLASLt takes no empty k): every output is 0.
    PJRT_ASSIGN_OR_RETURN(const std::string t, CudaStorageType(s.type));
    const char* idx = IndexType(outputs);
    launch.kernel = Name("dot_zeros");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(outputs);
    launch.slots = {s.out};
    std::string& k = shared_->source;
    Open(&launch, {absl::StrCat(t, "* out")});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, outputs, idx);
    absl::StrAppendFormat(&k, "    out[i] = %s{};\n  }\n}\n", t);
    Add(std::move(launch));
    return absl::OkStatus();
  }
  if (s.type == PrimitiveType::kF32 || s.type == PrimitiveType::kF64) {
    launch.kind = Launch::Kind::kGemm;
    launch.gemm = s;
    launch.slots = {s.out, s.lhs, s.rhs};
    Add(std::move(launch));
    return absl::OkStatus();
  }
  if (s.type != PrimitiveType::kS64 && !hlo::IsComplex(s.type))
    return Unsupported(s.type);
  // Integer products (wrapping) and complex ones: a thread per output
  // element, summing in the host's order.
  PJRT_ASSIGN_OR_RETURN(const std::string t, CudaStorageType(s.type));
  const bool wraps = s.type == PrimitiveType::kS64;
  const char* idx =
      IndexType(std::max({outputs, s.batch * s.m * s.k, s.batch * s.k * s.n}));
  launch.kernel = Name("dot");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(outputs);
  launch.slots = {s.out, s.lhs, s.rhs};
  std::string& k = shared_->source;
  Open(&launch, {absl::StrCat(t, "* out"), absl::StrCat("const ", t, "* lhs"),
                 absl::StrCat("const ", t, "* rhs")});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, outputs, idx);
  absl::StrAppendFormat(
      &k, "    const %s b = i / %d, row = (i / %d) %% %d, col = i %% %d;\n",
      idx, s.m * s.n, s.n, s.m, s.n);
  absl::StrAppendFormat(&k, "    %s acc = %s;\n", t,
                        wraps ? "0" : absl::StrCat(t, "{0, 0}"));
  absl::StrAppendFormat(&k, "    for (%s j = 0; j < %d; ++j) {\n", idx, s.k);
  const std::string l =
      s.lhs_transposed
          ? absl::StrFormat("lhs[(b * %d + j) * %d + row]", s.k, s.m)
          : absl::StrFormat("lhs[(b * %d + row) * %d + j]", s.m, s.k);
  const std::string r =
      s.rhs_transposed
          ? absl::StrFormat("rhs[(b * %d + col) * %d + j]", s.n, s.k)
          : absl::StrFormat("rhs[(b * %d + j) * %d + col]", s.k, s.n);
  if (wraps) {
    absl::StrAppendFormat(
        &k, "      acc = pj_iadd(acc, pj_imul(%s, %s));\n    }\n", l, r);
  } else {
    absl::StrAppendFormat(&k, "      acc = acc + %s * %s;\n    }\n", l, r);
  }
  absl::StrAppend(&k, "    out[i] = acc;\n  }\n}\n");
  Add(std::move(launch));
  return absl::OkStatus();
}

void Generator::EmitWidthConvert(int dst, PrimitiveType to, int src,
                                 PrimitiveType from, int64_t count) {
  const std::string to_type = *CudaStorageType(to),
                    from_type = *CudaStorageType(from);
  const char* idx = IndexType(count);
  Launch launch;
  launch.kernel = Name("convert");
  launch.blocks = BlocksFor(count);
  launch.slots = {dst, src};
  std::string& k = shared_->source;
  Open(&launch, {absl::StrCat(to_type, "* dst"),
                 absl::StrCat("const ", from_type, "* src")});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, count, idx);
  absl::StrAppendFormat(&k, "    dst[i] = %s;\n  }\n}\n",
                        Store(to, absl::StrCat("(", *ComputeType(to), ")",
                                               Load(from, "src[i]"))));
  launch.origin = absl::StrFormat("%s[%d] as %s", hlo::PrimitiveTypeName(from),
                                  count, hlo::PrimitiveTypeName(to));
  Add(std::move(launch));
}

absl::Status Generator::EmitBitPlanes(int dst, int src, PrimitiveType type,
                                      int64_t count, bool pack) {
  const int width = hlo::ByteWidth(type);
  const int bits = 8 * width;
  PJRT_ASSIGN_OR_RETURN(const std::string word, WordType(width));
  const char* idx = IndexType(count * bits);
  Launch launch;
  launch.kernel = Name(pack ? "pack_bits" : "unpack_bits");
  launch.blocks = BlocksFor(pack ? count : count * bits);
  launch.slots = {dst, src};
  std::string& k = shared_->source;
  Open(&launch, {absl::StrCat(pack ? word : "pj_u8", "* dst"),
                 absl::StrCat("const ", pack ? "pj_u8" : word, "* src")});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, pack ? count : count * bits,
                        idx);
  if (pack) {
    absl::StrAppendFormat(&k,
                          "    %s w = 0;\n"
                          "    for (int b = 0; b < %d; ++b) {\n"
                          "      w |= (%s)(src[i * %d + b] & 1) << b;\n"
                          "    }\n    dst[i] = w;\n  }\n}\n",
                          word, bits, word, bits);
  } else {
    absl::StrAppendFormat(&k,
                          "    dst[i] = (pj_u8)((src[i / %d] >> (i %% %d)) & "
                          "1);\n  }\n}\n",
                          bits, bits);
  }
  launch.origin =
      absl::StrFormat("%s[%d] %s bit planes", hlo::PrimitiveTypeName(type),
                      count, pack ? "from" : "as");
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitBitwiseReduction(const host::CollectiveStep& s) {
  // Each bit of each element as a byte of 0 or 1 (the planes of an array
  // of dimensions D have dimensions D + [bits], so a reduce-scatter's
  // pieces stay whole): and is their minimum, or their maximum, which NCCL
  // computes on u8.
  const bool scatter = s.kind == host::CollectiveStep::Kind::kReduceScatter;
  host::CollectiveStep planes = s;
  planes.op = s.op == ExprOp::kAnd ? ExprOp::kMinimum : ExprOp::kMaximum;
  std::vector<int64_t> counts;  // each result's elements
  for (size_t j = 0; j < s.types.size(); ++j) {
    const int bits = 8 * hlo::ByteWidth(s.types[j]);
    const int64_t in = scatter ? Product(s.input_dims) : s.operand_elements[j];
    const int64_t out =
        scatter ? Product(s.output_dims) : s.operand_elements[j];
    counts.push_back(out);
    planes.types[j] = PrimitiveType::kU8;
    planes.operand_elements[j] = in * bits;
    planes.inputs[j] = Temporary(in * bits);
    planes.outputs[j] = Temporary(out * bits);
    PJRT_RETURN_IF_ERROR(EmitBitPlanes(planes.inputs[j], s.inputs[j],
                                       s.types[j], in, /*pack=*/false));
  }
  if (scatter) {
    const int64_t bits = 8 * hlo::ByteWidth(s.types[0]);
    planes.input_dims.push_back(bits);
    planes.output_dims.push_back(bits);
  } else {
    planes.input_dims = {
        planes.operand_elements.empty() ? 0 : planes.operand_elements[0]};
    planes.output_dims = planes.input_dims;
  }
  PJRT_RETURN_IF_ERROR(Emit(planes));
  for (size_t j = 0; j < s.types.size(); ++j) {
    PJRT_RETURN_IF_ERROR(EmitBitPlanes(s.outputs[j], planes.outputs[j],
                                       s.types[j], counts[j],
                                       /*pack=*/true));
  }
  return absl::OkStatus();
}

absl::Status Generator::Emit(const host::CollectiveStep& s) {
  const bool reduces = s.kind == host::CollectiveStep::Kind::kAllReduce ||
                       s.kind == host::CollectiveStep::Kind::kReduceScatter;
  if (reduces && (s.op == ExprOp::kAnd || s.op == ExprOp::kOr)) {
    for (PrimitiveType t : s.types) {
      if (t != PrimitiveType::kPred) return EmitBitwiseReduction(s);
    }
  }
  // NCCL has no complex numbers: a sum of them is the sums of their real
  // and imaginary parts, reduced as reals in place (a reduce-scatter's
  // operand gains a trailing dimension of 2, so each member's piece stays
  // whole). The host compiler refuses their other reductions.
  bool complex = false;
  for (PrimitiveType t : s.types) complex |= hlo::IsComplex(t);
  if (reduces && complex) {
    if (s.op != ExprOp::kAdd) {
      return absl::InternalError(
          absl::StrFormat("%s: a %s of complex values reached the CUDA backend",
                          s.name, ExprOpName(s.op)));
    }
    host::CollectiveStep parts = s;
    for (size_t j = 0; j < s.types.size(); ++j) {
      if (!hlo::IsComplex(s.types[j])) continue;
      parts.types[j] = hlo::ComplexPartType(s.types[j]);
      parts.operand_elements[j] *= 2;
    }
    if (s.kind == host::CollectiveStep::Kind::kReduceScatter) {
      parts.input_dims.push_back(2);
      parts.output_dims.push_back(2);
    }
    return Emit(parts);
  }
  // NCCL has no 16-bit integers and no f8: their operands are widened
  // (s16 and u16 sign- or zero-extended to 32 bits, f8 to f32), reduced,
  // and the results narrowed back. Sums and products of integers wrap to
  // the same 16 bits; f8 sums are rounded once, at the end (the host
  // rounds after each member's); maximum and minimum are the same values.
  const auto widened = [](PrimitiveType t) -> std::optional<PrimitiveType> {
    if (hlo::IsMiniFloat(t)) return PrimitiveType::kF32;
    switch (t) {
      case PrimitiveType::kS16:
        return PrimitiveType::kS32;
      case PrimitiveType::kU16:
        return PrimitiveType::kU32;
      default:
        return std::nullopt;
    }
  };
  bool narrow = false;
  for (PrimitiveType t : s.types) narrow |= widened(t).has_value();
  if (reduces && narrow) {
    host::CollectiveStep wide = s;
    const bool scatter = s.kind == host::CollectiveStep::Kind::kReduceScatter;
    const int64_t out_elements = Product(s.output_dims);
    std::vector<std::pair<int, int>> narrow_back;  // (wide result, result)
    for (size_t j = 0; j < s.types.size(); ++j) {
      const PrimitiveType t = s.types[j];
      if (!widened(t).has_value()) continue;
      const PrimitiveType w = *widened(t);
      const int64_t in_count =
          scatter ? Product(s.input_dims) : s.operand_elements[j];
      const int64_t out_count = scatter ? out_elements : s.operand_elements[j];
      wide.types[j] = w;
      wide.inputs[j] = Temporary(in_count * 4);
      EmitWidthConvert(wide.inputs[j], w, s.inputs[j], t, in_count);
      wide.outputs[j] = Temporary(out_count * 4);
      narrow_back.push_back({wide.outputs[j], static_cast<int>(j)});
    }
    PJRT_RETURN_IF_ERROR(Emit(wide));
    for (const auto& [from, j] : narrow_back) {
      EmitWidthConvert(s.outputs[j], s.types[j], from, wide.types[j],
                       scatter ? out_elements : s.operand_elements[j]);
    }
    return absl::OkStatus();
  }
  PJRT_RETURN_IF_ERROR(CheckNcclCollective(s));
  host::CollectiveStep nccl = s;
  const bool gather = s.kind == host::CollectiveStep::Kind::kAllGather;
  const bool scatter = s.kind == host::CollectiveStep::Kind::kReduceScatter;
  const auto launch_collective = [&](const host::CollectiveStep& step) {
    Launch launch;
    launch.kind = Launch::Kind::kCollective;
    launch.collective = step;
    launch.slots = step.inputs;
    launch.slots.insert(launch.slots.end(), step.outputs.begin(),
                        step.outputs.end());
    if (AllToAllNeedsTemporaries(step)) {
      // The strided pieces, gathered into blocks and received.
      const int64_t bytes =
          Product(step.input_dims) * hlo::ByteWidth(step.types[0]);
      launch.slots.push_back(Temporary(bytes));
      launch.slots.push_back(Temporary(bytes));
    }
    launch.origin = absl::StrCat(s.name, " through NCCL");
    Add(std::move(launch));
  };
  if ((!gather && !scatter) ||
      (SplitsMajorDimension(s.input_dims, s.dimension) &&
       SplitsMajorDimension(s.output_dims, s.dimension))) {
    launch_collective(s);
    return absl::OkStatus();
  }
  // NCCL gathers and scatters whole blocks along the major dimension: the
  // pieces go through a temporary laid out [group size, piece...].
  const int d = static_cast<int>(s.dimension);
  const int width = hlo::ByteWidth(s.types[0]);
  const std::vector<int64_t>& piece = gather ? s.input_dims : s.output_dims;
  const std::vector<int64_t>& whole = gather ? s.output_dims : s.input_dims;
  if (piece[d] == 0) {
    launch_collective(s);  // nothing to move
    return absl::OkStatus();
  }
  const int64_t n = whole[d] / piece[d];
  std::vector<int64_t> blocks = {n};
  blocks.insert(blocks.end(), piece.begin(), piece.end());
  const int temporary = Temporary(Product(blocks) * width);
  // The whole array's strides over the [group size, piece...] space.
  const std::vector<int64_t> whole_strides = host::RowMajorStrides(whole);
  std::vector<int64_t> spread = {piece[d] * whole_strides[d]};
  spread.insert(spread.end(), whole_strides.begin(), whole_strides.end());
  host::CopyStep move;
  move.element_bytes = width;
  move.dims = blocks;
  if (gather) {
    nccl.outputs = {temporary};
    nccl.output_dims = blocks;
    nccl.dimension = 0;
    launch_collective(nccl);
    move.src = temporary;
    move.src_map = {0, host::RowMajorStrides(blocks)};
    move.dst = s.outputs[0];
    move.dst_map = {0, spread};
    return Emit(move);
  }
  move.src = s.inputs[0];
  move.src_map = {0, spread};
  move.dst = temporary;
  move.dst_map = {0, host::RowMajorStrides(blocks)};
  PJRT_RETURN_IF_ERROR(Emit(move));
  nccl.inputs = {temporary};
  nccl.input_dims = blocks;
  nccl.dimension = 0;
  launch_collective(nccl);
  return absl::OkStatus();
}

absl::Status Generator::Emit(const host::KernelStep& s) {
  if (const auto* gather =
          dynamic_cast<const host::GatherKernel*>(s.kernel.get())) {
    return EmitGather(*gather);
  }
  if (const auto* scatter =
          dynamic_cast<const host::ScatterKernel*>(s.kernel.get())) {
    return EmitScatter(*scatter);
  }
  if (const auto* rng =
          dynamic_cast<const host::RngBitGeneratorKernel*>(s.kernel.get())) {
    return EmitRngBitGenerator(*rng);
  }
  if (const auto* window =
          dynamic_cast<const host::ReduceWindowKernel*>(s.kernel.get())) {
    return EmitReduceWindow(*window);
  }
  if (const auto* select =
          dynamic_cast<const host::SelectAndScatterKernel*>(s.kernel.get())) {
    return EmitSelectAndScatter(*select);
  }
  if (const auto* map = dynamic_cast<const host::MapKernel*>(s.kernel.get())) {
    return EmitMap(*map);
  }
  if (const auto* rng = dynamic_cast<const host::RngKernel*>(s.kernel.get())) {
    return EmitRng(*rng);
  }
  if (const auto* conv =
          dynamic_cast<const host::ConvolutionKernelBase*>(s.kernel.get())) {
    return EmitConvolution(*conv);
  }
  if (const auto* loop =
          dynamic_cast<const host::WhileKernel*>(s.kernel.get())) {
    return EmitWhile(*loop);
  }
  if (const auto* conditional =
          dynamic_cast<const host::ConditionalKernel*>(s.kernel.get())) {
    return EmitConditional(*conditional);
  }
  if (const auto* sort =
          dynamic_cast<const host::SortKernel*>(s.kernel.get())) {
    return EmitSort(*sort);
  }
  if (const auto* topk =
          dynamic_cast<const host::TopKKernel*>(s.kernel.get())) {
    return EmitTopK(*topk);
  }
  if (const auto* int4 =
          dynamic_cast<const host::SubByteKernel*>(s.kernel.get())) {
    return EmitSubByteEdge(*int4);
  }
  if (const auto* fft =
          dynamic_cast<const host::FftKernelBase*>(s.kernel.get())) {
    return EmitFft(*fft);
  }
  if (const auto* solve =
          dynamic_cast<const host::TriangularSolveKernel*>(s.kernel.get())) {
    return EmitTriangularSolve(*solve);
  }
  if (const auto* cholesky =
          dynamic_cast<const host::CholeskyKernel*>(s.kernel.get())) {
    return EmitCholesky(*cholesky);
  }
  return absl::UnimplementedError(absl::StrFormat(
      "%s does not run on the CUDA backend yet (it runs element-wise ops, "
      "data movement, dot, reduce, map, gather, scatter, sort, top-k, "
      "rng-bit-generator, rng, the window ops, convolution, fft, "
      "triangular-solve, cholesky, while and conditional); run this program "
      "with --platform host",
      s.kernel->name));
}

}  // namespace codegen_internal

using codegen_internal::CheckSlotTypes;
using codegen_internal::Generator;
using codegen_internal::SharedSource;

void ForEachLaunch(const std::vector<Launch>& launches,
                   const std::function<void(const Launch&)>& visit) {
  for (const Launch& launch : launches) {
    visit(launch);
    if (launch.cudnn_then != nullptr) visit(*launch.cudnn_then);
    for (const auto& sub : launch.control.programs) {
      ForEachLaunch(sub->launches, visit);
    }
  }
}

bool GraphCapturable(const std::vector<Launch>& launches) {
  for (const Launch& launch : launches) {
    switch (launch.kind) {
      case Launch::Kind::kGemm:
      case Launch::Kind::kSort:
        break;
      case Launch::Kind::kKernel:
        if (launch.rng != nullptr || launch.cudnn != nullptr) return false;
        break;
      case Launch::Kind::kCollective:
      case Launch::Kind::kWhile:
      case Launch::Kind::kConditional:
      case Launch::Kind::kFft:
        return false;
    }
  }
  return true;
}

absl::StatusOr<GeneratedProgram> GenerateCuda(
    const host::HostProgram& program) {
  PJRT_RETURN_IF_ERROR(CheckSlotTypes(program));
  SharedSource shared;
  PJRT_ASSIGN_OR_RETURN(GeneratedProgram generated,
                        Generator(program, &shared).Run());
  generated.source = std::move(shared.source);
  return generated;
}

}  // namespace pjrt::compiler::cuda
