// The CUDA code generator's sort, top-k and random-number kernels (see
// codegen_internal.h): merge sorts over rows, top-k by sorting, the
// random-bit generators and rng's distributions.
#include "compiler/cuda/codegen_internal.h"

namespace pjrt::compiler::cuda::codegen_internal {

void Generator::EmitRandomHelpers() {
  if (shared_->random_helpers) return;
  shared_->random_helpers = true;
  absl::StrAppend(&shared_->source, R"(
__device__ __forceinline__ unsigned pj_rotl32(unsigned v, int d) {
  return (v << d) | (v >> (32 - d));
}
__device__ __forceinline__ void pj_threefry2x32(unsigned k0, unsigned k1, unsigned* x0,
                                                unsigned* x1) {
  const int rot[8] = {13, 15, 26, 6, 17, 29, 16, 24};
  const unsigned ks[3] = {k0, k1, 0x1BD11BDAu ^ k0 ^ k1};
  unsigned a = *x0 + ks[0], b = *x1 + ks[1];
  for (int g = 0; g < 5; ++g) {
    for (int r = 0; r < 4; ++r) {
      a += b;
      b = pj_rotl32(b, rot[(g % 2) * 4 + r]) ^ a;
    }
    a += ks[(g + 1) % 3];
    b += ks[(g + 2) % 3] + (unsigned)(g + 1);
  }
  *x0 = a;
  *x1 = b;
}
__device__ __forceinline__ void pj_philox_block(pj_u64 key, pj_u64 low, pj_u64 high,
                                                pj_u64 i, unsigned x[4]) {
  const pj_u64 l = low + i;
  const pj_u64 h = high + (l < low ? 1 : 0);
  x[0] = (unsigned)l;
  x[1] = (unsigned)(l >> 32);
  x[2] = (unsigned)h;
  x[3] = (unsigned)(h >> 32);
  unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const pj_u64 p0 = (pj_u64)x[0] * 0xD2511F53u;
    const pj_u64 p1 = (pj_u64)x[2] * 0xCD9E8D57u;
    const unsigned y0 = (unsigned)(p1 >> 32) ^ x[1] ^ k0;
    const unsigned y2 = (unsigned)(p0 >> 32) ^ x[3] ^ k1;
    x[0] = y0;
    x[1] = (unsigned)p1;
    x[2] = y2;
    x[3] = (unsigned)p0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
)");
}

absl::Status Generator::EmitRngBitGenerator(
    const host::RngBitGeneratorKernel& g) {
  const int64_t n = Product(g.dims);
  PJRT_ASSIGN_OR_RETURN(std::string w, WordType(g.bytes));
  EmitRandomHelpers();
  const int rank = static_cast<int>(g.dims.size());
  std::vector<int64_t> half = g.dims;
  if (rank > 0) half[g.split] = (g.dims[g.split] + 1) / 2;
  const int64_t half_count = rank == 0 ? 1 : Product(half);
  const bool wide = g.bytes == 8;
  const int64_t blocks = ((wide ? 2 * n : n) + 3) / 4;
  const int64_t units = g.philox ? blocks : n;
  std::string& k = shared_->source;
  if (units > 0) {
    const char* idx = IndexType(std::max(units, 4 * blocks));
    Launch launch;
    launch.kernel = Name("rng_bits");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(units);
    launch.slots = {g.output, g.state_in};
    Open(&launch, {absl::StrCat(w, "* out"), "const pj_u64* state"});
    absl::StrAppendFormat(
        &k, "  const pj_u64 key = state[0], counter = state[1];\n");
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, units, idx);
    if (g.philox) {
      absl::StrAppendFormat(&k,
                            "    unsigned x[4];\n    pj_philox_block(key, "
                            "counter, state[%d], i, x);\n",
                            g.state_words == 3 ? 2 : 0);
      if (wide) {
        absl::StrAppendFormat(
            &k,
            "    for (int j = 0; j < 2; ++j) {\n"
            "      if (2 * i + j < %d) out[2 * i + j] = (pj_u64)x[2 * j] | "
            "((pj_u64)x[2 * j + 1] << 32);\n    }\n",
            n);
      } else {
        absl::StrAppendFormat(
            &k,
            "    for (int j = 0; j < 4; ++j) {\n"
            "      if (4 * i + j < %d) out[4 * i + j] = (%s)x[j];\n    }\n",
            n, w);
      }
    } else if (wide) {
      absl::StrAppend(
          &k,
          "    const pj_u64 c = counter + (pj_u64)i;\n"
          "    unsigned x0 = (unsigned)c, x1 = (unsigned)(c >> 32);\n"
          "    pj_threefry2x32((unsigned)key, (unsigned)(key >> 32), &x0, "
          "&x1);\n"
          "    out[i] = (pj_u64)x0 | ((pj_u64)x1 << 32);\n");
    } else {
      // Two outputs per block, the shape halved along `split`.
      absl::StrAppend(&k, SplitIndex(g.dims, idx, "    "));
      const std::vector<int64_t> half_strides = host::RowMajorStrides(half);
      std::string block = "0";
      std::string which = "0";
      for (int d = 0; d < rank; ++d) {
        if (d == g.split) {
          absl::StrAppendFormat(&block, " + (c%d / 2) * %d", d,
                                half_strides[d]);
          which = absl::StrFormat("(c%d %% 2)", d);
        } else {
          absl::StrAppendFormat(&block, " + c%d * %d", d, half_strides[d]);
        }
      }
      absl::StrAppendFormat(
          &k,
          "    const pj_u64 c = counter + (pj_u64)(%s);\n"
          "    unsigned x0 = (unsigned)c, x1 = (unsigned)(c >> 32);\n"
          "    pj_threefry2x32((unsigned)key, (unsigned)(key >> 32), &x0, "
          "&x1);\n"
          "    out[i] = (%s)(%s == 0 ? x0 : x1);\n",
          block, w, which);
    }
    absl::StrAppend(&k, "  }\n}\n");
    launch.origin =
        absl::StrFormat("rng-bit-generator (%s) of %d %d-byte elements",
                        g.philox ? "philox" : "three_fry", n, g.bytes);
    Add(std::move(launch));
  }
  Launch state;
  state.kernel = Name("rng_state");
  state.threads = 1;
  state.blocks = 1;
  state.slots = {g.state_out, g.state_in};
  Open(&state, {"pj_u64* out", "const pj_u64* in"});
  absl::StrAppendFormat(&k, "  pj_u64 s[3] = {in[0], in[1], %s};\n",
                        g.state_words == 3 ? "in[2]" : "0");
  if (g.philox) {
    absl::StrAppendFormat(&k,
                          "  const pj_u64 low = s[1];\n"
                          "  s[1] = low + %dull;\n",
                          blocks);
    if (g.state_words == 3)
      absl::StrAppend(&k, "  s[2] += s[1] < low ? 1 : 0;\n");
  } else {
    absl::StrAppendFormat(&k, "  s[1] += %dull;\n", wide ? n : half_count);
  }
  absl::StrAppendFormat(
      &k, "  for (int j = 0; j < %d; ++j) out[j] = s[j];\n}\n", g.state_words);
  state.origin = "rng-bit-generator's state";
  Add(std::move(state));
  return absl::OkStatus();
}

int Generator::EmitMergeSort(int64_t rows, int64_t n, int64_t inner,
                             const std::string& less,
                             const std::vector<int>& slots,
                             const std::vector<std::string>& params,
                             const std::string& what) {
  const int64_t count = rows * n;
  const int perm[2] = {Temporary(count * 8), Temporary(count * 8)};
  std::string& k = shared_->source;
  std::vector<std::string> names;
  for (const std::string& param : params) {
    names.push_back(param.substr(param.rfind(' ') + 1));
  }
  const std::string args = absl::StrJoin(names, ", ");
  {
    // Both buffers start as the identity, so that any position a pass
    // leaves unwritten (an inconsistent comparator) is still in the row.
    Launch launch;
    launch.kernel = Name("sort_start");
    launch.blocks = BlocksFor(count);
    launch.slots = {perm[0], perm[1]};
    Open(&launch, {"long long* a", "long long* b"});
    absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                          "long long");
    absl::StrAppendFormat(
        &k, "    a[i] = i %% %dLL;\n    b[i] = a[i];\n  }\n}\n", n);
    launch.origin = absl::StrFormat("%s: identity permutations", what);
    Add(std::move(launch));
  }
  int from = 0;
  for (int64_t width = 1; width < n; width *= 2) {
    Launch launch;
    launch.kernel = Name("sort_merge");
    launch.blocks = BlocksFor(count);
    launch.slots = {perm[from], perm[1 - from]};
    launch.slots.insert(launch.slots.end(), slots.begin(), slots.end());
    std::vector<std::string> all = {"const long long* src", "long long* dst"};
    all.insert(all.end(), params.begin(), params.end());
    Open(&launch, all);
    absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                          "long long");
    absl::StrAppend(&k, SortRowHead(n, inner));
    absl::StrAppendFormat(
        &k,
        "    const long long* s = src + row * %dLL;\n"
        "    const long long lo = p / %dLL * %dLL;\n"
        "    const long long mid = lo + %dLL < %dLL ? lo + %dLL : %dLL;\n"
        "    const long long hi = lo + %dLL < %dLL ? lo + %dLL : %dLL;\n"
        "    const long long x = s[p];\n"
        "    long long at = p;\n"
        "    if (p < mid) {\n"
        "      long long first = mid, left = hi - mid;\n"
        "      while (left > 0) {\n"
        "        const long long half = left / 2, j = first + half;\n"
        "        if (%s(base, s[j], x, %s)) { first = j + 1; left -= half + "
        "1; }\n"
        "        else { left = half; }\n"
        "      }\n"
        "      at = p + (first - mid);\n"
        "    } else {\n"
        "      long long first = lo, left = mid - lo;\n"
        "      while (left > 0) {\n"
        "        const long long half = left / 2, j = first + half;\n"
        "        if (!%s(base, x, s[j], %s)) { first = j + 1; left -= half + "
        "1; }\n"
        "        else { left = half; }\n"
        "      }\n"
        "      at = (p - mid) + first;\n"
        "    }\n"
        "    dst[row * %dLL + at] = x;\n  }\n}\n",
        n, 2 * width, 2 * width, width, n, width, n, 2 * width, n, 2 * width, n,
        less, args, less, args, n);
    launch.origin = absl::StrFormat("%s: merge runs of %d", what, width);
    Add(std::move(launch));
    from = 1 - from;
  }
  return perm[from];
}

bool Generator::CubSorts(host::KeyOrder order, PrimitiveType type, int64_t rows,
                         int64_t n) {
  if ((order != host::KeyOrder::kTotalAscending &&
       order != host::KeyOrder::kTotalDescending) ||
      hlo::IsComplex(type) || n >= (int64_t{1} << 32)) {
    return false;
  }
  // Narrower keys of several rows take the row number above their bits
  // (room for 2^(64 - key bits) rows); 64-bit keys of several rows are
  // segments of a sort with 32-bit counts.
  const int key_bits = 8 * hlo::ByteWidth(type);
  if (rows == 1) return true;
  if (key_bits < 64) return rows <= (int64_t{1} << (64 - key_bits));
  return rows * n < (int64_t{1} << 31);
}

std::string Generator::UnsignedSortKey(PrimitiveType type, const std::string& v,
                                       bool canonical) {
  if (canonical) {
    const int bits = 8 * hlo::ByteWidth(type);
    const uint64_t sign = uint64_t{1} << (bits - 1);
    const std::string x = absl::StrFormat("(double)%s", Load(type, v));
    return absl::StrFormat("(isnan(%s) ? %dull : %s == 0.0 ? %dull : %s)", x,
                           sign | (sign - 1), x, sign,
                           UnsignedSortKey(type, v, false));
  }
  switch (type) {
    case PrimitiveType::kF32:
      return absl::StrFormat("((unsigned)pj_total_order(%s) ^ 0x80000000u)", v);
    case PrimitiveType::kF64:
      return absl::StrFormat(
          "((pj_u64)pj_total_order(%s) ^ 0x8000000000000000ull)", v);
    case PrimitiveType::kS8:
    case PrimitiveType::kS4:  // held sign-extended, one per byte
    case PrimitiveType::kS2:
      return absl::StrFormat("((pj_u8)%s ^ 0x80u)", v);
    case PrimitiveType::kS16:
      return absl::StrFormat("((pj_u16)%s ^ 0x8000u)", v);
    case PrimitiveType::kS32:
      return absl::StrFormat("((unsigned)%s ^ 0x80000000u)", v);
    case PrimitiveType::kS64:
      return absl::StrFormat("((pj_u64)%s ^ 0x8000000000000000ull)", v);
    default:  // unsigned, pred, and the 8- and 16-bit floats
      return TotalOrderKey(type, v);
  }
}

const char* Generator::UnsignedWord(int bytes) {
  return bytes == 1   ? "pj_u8"
         : bytes == 2 ? "pj_u16"
         : bytes == 4 ? "unsigned"
                      : "pj_u64";
}

absl::StatusOr<Generator::CubSorted> Generator::EmitCubSort(
    int64_t rows, int64_t n, int64_t inner, PrimitiveType type, int key,
    bool descending, bool canonical, int keys_out, bool positions,
    const std::string& what) {
  const int64_t count = rows * n;
  const int key_bytes = hlo::ByteWidth(type);
  const int key_bits = 8 * key_bytes;
  int row_bits = 0;
  while (row_bits < 62 && (int64_t{1} << row_bits) < rows) ++row_bits;
  // Several rows: one sort, the row number above the key's bits.
  const bool fold = rows > 1 && key_bits + row_bits <= 64;
  CubSorted sorted;
  sorted.keys_written = keys_out >= 0 && !fold;
  Launch sort;
  sort.kind = Launch::Kind::kSort;
  sort.sort.bits = fold ? key_bits + row_bits : key_bits;
  sort.sort.key_bytes = sort.sort.bits <= 8    ? 1
                        : sort.sort.bits <= 16 ? 2
                        : sort.sort.bits <= 32 ? 4
                                               : 8;
  sort.sort.rows = fold ? 1 : rows;
  sort.sort.n = fold ? count : n;
  sort.sort.pairs = positions;
  const int values_in = sort.sort.pairs ? Temporary(count * 4) : -1;
  const int values_out = sort.sort.pairs ? Temporary(count * 4) : -1;
  std::string& k = shared_->source;
  if (sorted.keys_written) {
    sort.slots = {key, keys_out};
    if (sort.sort.pairs) {
      Launch launch;
      launch.kernel = Name("sort_positions");
      launch.blocks = BlocksFor(count);
      launch.slots = {values_in};
      Open(&launch, {"unsigned* positions"});
      absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                            "long long");
      absl::StrAppendFormat(
          &k, "    positions[i] = (unsigned)(i %% %dLL);\n  }\n}\n", n);
      launch.origin = absl::StrFormat("%s: positions", what);
      Add(std::move(launch));
    }
  } else {
    const int keys_in = Temporary(count * sort.sort.key_bytes);
    sort.slots = {keys_in, Temporary(count * sort.sort.key_bytes)};
    PJRT_ASSIGN_OR_RETURN(const std::string storage, CudaStorageType(type));
    const std::string word = UnsignedWord(key_bytes);
    const std::string wide = UnsignedWord(sort.sort.key_bytes);
    Launch launch;
    launch.kernel = Name("sort_keys");
    launch.blocks = BlocksFor(count);
    if (positions) {
      launch.slots = {keys_in, values_in, key};
      Open(&launch, {absl::StrCat(wide, "* keys"), "unsigned* positions",
                     absl::StrFormat("const %s* in", storage)});
    } else {
      launch.slots = {keys_in, key};
      Open(&launch, {absl::StrCat(wide, "* keys"),
                     absl::StrFormat("const %s* in", storage)});
    }
    absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                          "long long");
    absl::StrAppend(&k, SortRowHead(n, inner));
    absl::StrAppendFormat(
        &k, "    const %s key = (%s)%s;\n", word, word,
        UnsignedSortKey(type, absl::StrFormat("in[base + p * %dLL]", inner),
                        canonical));
    const std::string ordered =
        descending ? absl::StrFormat("(%s)(%s)~key", wide, word)
                   : absl::StrFormat("(%s)key", wide);
    if (fold) {
      absl::StrAppendFormat(&k, "    keys[i] = ((%s)row << %d) | %s;\n", wide,
                            key_bits, ordered);
    } else {
      absl::StrAppendFormat(&k, "    keys[i] = %s;\n", ordered);
    }
    if (positions) absl::StrAppend(&k, "    positions[i] = (unsigned)p;\n");
    absl::StrAppend(&k, "  }\n}\n");
    sorted.keys = sort.slots[1];
    sorted.key_bytes = sort.sort.key_bytes;
    launch.origin = absl::StrFormat("%s: keys in XLA's total order%s%s%s", what,
                                    canonical ? " (-0 as +0, NaNs as one)" : "",
                                    descending ? ", complemented" : "",
                                    fold ? ", under their row" : "");
    Add(std::move(launch));
  }
  sort.slots.push_back(values_in);
  sort.slots.push_back(values_out);
  sort.origin = absl::StrFormat(
      "%s: CUB radix sort of %d-bit keys%s%s", what, sort.sort.bits,
      sort.sort.pairs ? " and positions" : "",
      sort.sort.rows > 1 ? absl::StrFormat(" in %d segments", rows) : "");
  Add(std::move(sort));
  sorted.positions = values_out;
  return sorted;
}

absl::Status Generator::EmitSortedKeysOut(const host::SortKernel& sort,
                                          const CubSorted& sorted,
                                          bool descending,
                                          const std::string& what) {
  const PrimitiveType type = sort.types[0];
  const int64_t count = sort.outer * sort.inner * sort.length;
  const int width = hlo::ByteWidth(type);
  const std::string word = UnsignedWord(width);
  const std::string wide = UnsignedWord(sorted.key_bytes);
  // UnsignedSortKey's inverse, on the key's own bits.
  std::string bits_of = "key";
  if (hlo::IsFloatingPoint(type) && type != PrimitiveType::kF8E8M0FNU) {
    const int code = hlo::IsMiniFloat(type)
                         ? static_cast<int>(hlo::MiniFloatCodeBits(type))
                         : 8 * width;
    const uint64_t sign = uint64_t{1} << (code - 1);
    const uint64_t mask = sign | (sign - 1);
    bits_of = absl::StrFormat(
        "((key & %dull) ? (key ^ %dull) : (~key & %dull))", sign, sign, mask);
  } else if (hlo::IsSignedInteger(type)) {
    bits_of = absl::StrFormat("(key ^ %dull)", uint64_t{1} << (8 * width - 1));
  }
  std::string& k = shared_->source;
  Launch launch;
  launch.kernel = Name("sort_keys_out");
  launch.blocks = BlocksFor(count);
  launch.slots = {sort.outputs[0], sorted.keys};
  Open(&launch,
       {absl::StrCat(word, "* out"), absl::StrCat("const ", wide, "* keys")});
  absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                        "long long");
  absl::StrAppend(&k, SortRowHead(sort.length, sort.inner));
  absl::StrAppendFormat(&k, "    const %s key = (%s)%skeys[i];\n", word, word,
                        descending ? "~" : "");
  absl::StrAppendFormat(&k, "    out[base + p * %dLL] = (%s)%s;\n  }\n}\n",
                        sort.inner, word, bits_of);
  launch.origin = absl::StrFormat("%s: the sorted keys' values", what);
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitSort(const host::SortKernel& sort) {
  const int64_t rows = sort.outer * sort.inner;
  const int64_t count = rows * sort.length;
  if (count == 0) return absl::OkStatus();
  std::string& k = shared_->source;
  std::vector<std::string> params;
  std::vector<std::string> storage;
  for (size_t j = 0; j < sort.types.size(); ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(sort.types[j]));
    storage.push_back(st);
    params.push_back(absl::StrFormat("const %s* in%d", st, j));
  }
  const std::string what =
      absl::StrFormat("sort of %d rows of %d", rows, sort.length);
  int perm = -1;
  std::string position = "long long";
  // The first output already holds the sorted keys (CUB wrote them).
  bool keys_written = false;
  if (CubSorts(sort.order, sort.types[0], rows, sort.length)) {
    const PrimitiveType kt = sort.types[0];
    const bool descending = sort.order == host::KeyOrder::kTotalDescending;
    // Keys CUB can read as they lie, and write as the sorted output.
    const bool as_they_lie =
        !descending && sort.inner == 1 &&
        (kt == PrimitiveType::kU8 || kt == PrimitiveType::kU16 ||
         kt == PrimitiveType::kU32 || kt == PrimitiveType::kU64 ||
         kt == PrimitiveType::kU4 || kt == PrimitiveType::kU2);
    // Canonical keys do not give back the values they came from.
    const bool positions = sort.types.size() > 1 || sort.canonical;
    PJRT_ASSIGN_OR_RETURN(
        const CubSorted sorted,
        EmitCubSort(rows, sort.length, sort.inner, kt, sort.inputs[0],
                    descending, sort.canonical,
                    as_they_lie ? sort.outputs[0] : -1, positions, what));
    keys_written = sorted.keys_written;
    if (!positions) {
      // Keys alone: the output is the sorted keys, as they lie or decoded.
      if (keys_written) return absl::OkStatus();
      return EmitSortedKeysOut(sort, sorted, descending, what);
    }
    perm = sorted.positions;
    position = "unsigned";
  } else {
    if (!sort.has_comparator) {
      return absl::UnimplementedError(
          "this sort's comparator has no scalar form for the CUDA backend; "
          "run this program with --platform host");
    }
    const std::string less = Name("sort_less");
    absl::StrAppendFormat(
        &k,
        "\n__device__ __forceinline__ bool %s(long long base, long long a, "
        "long long b, %s) {\n",
        less, absl::StrJoin(params, ", "));
    std::vector<std::string> inputs;
    for (size_t j = 0; j < sort.types.size(); ++j) {
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(sort.types[j]));
      absl::StrAppendFormat(
          &k, "  const %s l%d = %s;\n  const %s r%d = %s;\n", ct, j,
          Load(sort.types[j],
               absl::StrFormat("in%d[base + a * %dLL]", j, sort.inner)),
          ct, j,
          Load(sort.types[j],
               absl::StrFormat("in%d[base + b * %dLL]", j, sort.inner)));
      inputs.push_back(absl::StrCat("l", j));
      inputs.push_back(absl::StrCat("r", j));
    }
    PJRT_ASSIGN_OR_RETURN(
        std::vector<std::string> result,
        EmitExpression(sort.comparator, inputs, "v", "  ", &k));
    absl::StrAppendFormat(&k, "  return %s != 0;\n}\n", result[0]);
    perm = EmitMergeSort(rows, sort.length, sort.inner, less, sort.inputs,
                         params, what);
  }
  Launch launch;
  launch.kernel = Name("sort_gather");
  launch.blocks = BlocksFor(count);
  launch.slots = {perm};
  std::vector<std::string> all = {absl::StrFormat("const %s* perm", position)};
  const size_t first = keys_written ? 1 : 0;
  for (size_t j = first; j < sort.types.size(); ++j) {
    launch.slots.push_back(sort.inputs[j]);
    all.push_back(params[j]);
  }
  for (size_t j = first; j < sort.types.size(); ++j) {
    launch.slots.push_back(sort.outputs[j]);
    all.push_back(absl::StrFormat("%s* out%d", storage[j], j));
  }
  Open(&launch, all);
  absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                        "long long");
  absl::StrAppend(&k, SortRowHead(sort.length, sort.inner));
  absl::StrAppendFormat(
      &k,
      "    const long long from = base + (long long)perm[i] * %dLL, to = base "
      "+ p * %dLL;\n",
      sort.inner, sort.inner);
  for (size_t j = first; j < sort.types.size(); ++j) {
    absl::StrAppendFormat(&k, "    out%d[to] = in%d[from];\n", j, j);
  }
  absl::StrAppend(&k, "  }\n}\n");
  launch.origin = absl::StrFormat("%s: the operands in order", what);
  Add(std::move(launch));
  return absl::OkStatus();
}

std::string Generator::TotalOrderKey(PrimitiveType type, const std::string& v) {
  if (type == PrimitiveType::kF8E8M0FNU) {  // no sign: codes order
    return absl::StrFormat("((unsigned)%s)", v);
  }
  if (hlo::IsMiniFloat(type)) {
    const unsigned bits = hlo::MiniFloatCodeBits(type);
    const unsigned sign = 1u << (bits - 1), mask = (1u << bits) - 1;
    return absl::StrFormat(
        "((%s & 0x%xu) ? (~(unsigned)%s & 0x%xu) : ((unsigned)%s | 0x%xu))", v,
        sign, v, mask, v, sign);
  }
  switch (type) {
    case PrimitiveType::kF64:
      return absl::StrFormat("pj_total_order(%s)", v);
    case PrimitiveType::kF32:
      return absl::StrFormat("pj_total_order(%s)", v);
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return absl::StrFormat(
          "((%s & 0x8000u) ? (~(unsigned)%s & 0xffffu) : "
          "((unsigned)%s | 0x8000u))",
          v, v, v);
    case PrimitiveType::kPred:
      return absl::StrFormat("(%s != 0)", v);
    default:
      return v;
  }
}

absl::Status Generator::EmitTopK(const host::TopKKernel& t) {
  if (t.rows == 0 || t.k == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(t.type));
  std::string& k = shared_->source;
  const std::string param = absl::StrFormat("const %s* in", st);
  const std::string what =
      absl::StrFormat("top-%d of %d rows of %d", t.k, t.rows, t.n);
  int perm = -1;
  std::string position = "unsigned";
  if (CubSorts(host::KeyOrder::kTotalAscending, t.type, t.rows, t.n)) {
    // Stable, so that of equal values the lower index comes first.
    PJRT_ASSIGN_OR_RETURN(const CubSorted sorted,
                          EmitCubSort(t.rows, t.n, 1, t.type, t.input,
                                      t.largest, false, -1, true, what));
    perm = sorted.positions;
  } else {
    const std::string less = Name("topk_before");
    absl::StrAppendFormat(
        &k,
        "\n__device__ __forceinline__ bool %s(long long base, long long a, "
        "long long b, %s) {\n  return %s %s %s;\n}\n",
        less, param, TotalOrderKey(t.type, "in[base + a]"),
        t.largest ? ">" : "<", TotalOrderKey(t.type, "in[base + b]"));
    perm = EmitMergeSort(t.rows, t.n, 1, less, {t.input}, {param}, what);
    position = "long long";
  }
  const int64_t count = t.rows * t.k;
  Launch launch;
  launch.kernel = Name("topk_take");
  launch.blocks = BlocksFor(count);
  launch.slots = {perm, t.input, t.values, t.indices};
  Open(&launch, {absl::StrFormat("const %s* perm", position), param,
                 absl::StrFormat("%s* values", st), "pj_s32* indices"});
  absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", count,
                        "long long");
  absl::StrAppendFormat(&k,
                        "    const long long row = i / %dLL, j = i %% %dLL;\n"
                        "    const long long from = perm[row * %dLL + j];\n"
                        "    values[i] = in[row * %dLL + from];\n"
                        "    indices[i] = (pj_s32)from;\n  }\n}\n",
                        t.k, t.k, t.n, t.n);
  launch.origin = what;
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitRng(const host::RngKernel& r) {
  EmitRandomHelpers();
  std::string& k = shared_->source;
  Launch launch;
  launch.rng = &r;
  if (r.get_and_update) {
    launch.kernel = Name("rng_state");
    launch.slots = {r.output};
    Open(&launch,
         {"pj_u64* out", "unsigned long long key", "unsigned long long draw"});
    absl::StrAppendFormat(
        &k,
        "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
        "    out[0] = key;\n    out[1] = draw * %dull;\n  }\n}\n",
        static_cast<uint64_t>(r.delta));
    launch.origin = "rng-get-and-update-state";
    Add(std::move(launch));
    return absl::OkStatus();
  }
  if (r.count == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(r.type));
  PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(r.type));
  const int64_t blocks = (r.count + 1) / 2;
  launch.kernel = Name("rng");
  launch.blocks = BlocksFor(blocks);
  launch.slots = {r.output, r.low, r.high};
  Open(&launch, {absl::StrCat(st, "* out"), absl::StrCat("const ", st, "* low"),
                 absl::StrCat("const ", st, "* high"), "unsigned long long key",
                 "unsigned long long draw"});
  absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", blocks,
                        "long long");
  absl::StrAppendFormat(&k,
                        "    unsigned w[4];\n"
                        "    pj_philox_block(key, draw, 0, (pj_u64)i, w);\n"
                        "    const double a = (double)%s, b = (double)%s;\n"
                        "    double v[2];\n",
                        Load(r.type, "low[0]"), Load(r.type, "high[0]"));
  const bool is_float = IsFloat(r.type);
  if (r.normal) {
    absl::StrAppend(
        &k,
        "    const double u0 = ((double)w[0] + 0.5) / 4294967296.0;\n"
        "    const double u1 = ((double)w[1] + 0.5) / 4294967296.0;\n"
        "    const double radius = sqrt(-2.0 * log(u0));\n"
        "    v[0] = a + b * radius * cos(2.0 * 3.14159265358979323846 * "
        "u1);\n"
        "    v[1] = a + b * radius * sin(2.0 * 3.14159265358979323846 * "
        "u1);\n");
  } else if (is_float) {
    absl::StrAppend(
        &k,
        "    v[0] = a + (b - a) * ((double)(w[2] >> 8) / 16777216.0);\n"
        "    v[1] = a + (b - a) * ((double)(w[3] >> 8) / 16777216.0);\n");
  } else {
    absl::StrAppend(&k,
                    "    const double range = b - a > 1.0 ? b - a : 1.0;\n"
                    "    const pj_u64 r0 = ((pj_u64)w[2] << 32) | w[0];\n"
                    "    const pj_u64 r1 = ((pj_u64)w[3] << 32) | w[1];\n"
                    "    v[0] = a + floor((double)(r0 % (pj_u64)range));\n"
                    "    v[1] = a + floor((double)(r1 % (pj_u64)range));\n");
  }
  absl::StrAppendFormat(&k,
                        "    for (int h = 0; h < 2; ++h) {\n"
                        "      const long long at = 2 * i + h;\n"
                        "      if (at >= %dLL) break;\n"
                        "      %s s = %s;\n",
                        r.count, st,
                        Store(r.type, absl::StrFormat("(%s)v[h]", ct)));
  if (is_float && !r.normal) {
    // [a, b) after rounding to the element type: a value that rounds up
    // to b becomes the largest one below it (as host::ValueBelow).
    absl::StrAppendFormat(&k, "      if (a < b && (double)%s >= b) {\n",
                          Load(r.type, "s"));
    if (r.type == PrimitiveType::kF32) {
      absl::StrAppend(&k, "        s = nextafterf(high[0], (float)a);\n");
    } else if (r.type == PrimitiveType::kF64) {
      absl::StrAppend(&k, "        s = nextafter(high[0], a);\n");
    } else if (r.type == PrimitiveType::kF8E8M0FNU) {
      // No sign and no zero: the code below, but for the smallest.
      absl::StrAppendFormat(
          &k, "        s = (%s)(high[0] == 0 ? 0u : high[0] - 1u);\n", st);
    } else {
      // Sign and magnitude, the sign the top bit of the code (4, 6, 8 or 16
      // bits).
      const unsigned sign =
          st == "pj_u16" ? 0x8000u : 1u << (hlo::MiniFloatCodeBits(r.type) - 1);
      absl::StrAppendFormat(
          &k,
          "        const unsigned bits = high[0], sign = 0x%xu;\n"
          "        s = (%s)((bits & ~sign) == 0 ? (sign | 1u)\n"
          "                 : (bits & sign) ? bits + 1u : bits - 1u);\n",
          sign, st);
    }
    absl::StrAppend(&k, "      }\n");
  }
  absl::StrAppend(&k, "      out[at] = s;\n    }\n  }\n}\n");
  launch.origin = absl::StrFormat(
      "rng of %d %s", r.count, r.normal ? "normal values" : "uniform values");
  Add(std::move(launch));
  return absl::OkStatus();
}

}  // namespace pjrt::compiler::cuda::codegen_internal
