// sort (any number of operands, any comparator) and top-k.
//
// A comparator that compares operand 0's two parameters with LT or GT
// (total order or not) sorts by keys mapped to unsigned integers that
// order as the comparison does, with the original position breaking ties:
// a strict total order, so the result is stable and std::sort is safe. Any
// other comparator runs as an Expression inside a merge sort of our own,
// which stays in bounds however inconsistent the client's comparator is.
#include "compiler/host/kernel_sort.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "compiler/host/kernel_util.h"
#include "compiler/host/thread_pool.h"
#include "hlo/op_attributes.h"

namespace pjrt::compiler::host {
namespace {

using hlo::PrimitiveType;

// Maps element `i` of a storage array to an unsigned integer that orders
// as XLA's total order does (-NaN < -inf < ... < -0 < +0 < ... < +NaN for
// floats).
uint64_t TotalOrderKey(PrimitiveType type, const void* base, int64_t i) {
  const auto fold = [](uint64_t bits, int width) {
    const uint64_t sign = uint64_t{1} << (width - 1);
    const uint64_t mask =
        width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
    return (bits & sign) != 0 ? (~bits & mask) : (bits | sign);
  };
  if (hlo::IsMiniFloat(type)) {
    // f8e8m0fnu has no sign: its codes order as its values do.
    const uint8_t code = static_cast<const uint8_t*>(base)[i];
    if (type == PrimitiveType::kF8E8M0FNU) return code;
    const int bits = hlo::MiniFloatCodeBits(type);
    return fold(code & ((1u << bits) - 1), bits);
  }
  switch (type) {
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return fold(static_cast<const uint16_t*>(base)[i], 16);
    case PrimitiveType::kF32:
      return fold(static_cast<const uint32_t*>(base)[i], 32);
    case PrimitiveType::kF64:
      return fold(static_cast<const uint64_t*>(base)[i], 64);
    case PrimitiveType::kS8:
    case PrimitiveType::kS4:  // held sign-extended, one per byte
    case PrimitiveType::kS2:
      return static_cast<uint8_t>(static_cast<const uint8_t*>(base)[i] ^ 0x80);
    case PrimitiveType::kS16:
      return static_cast<uint16_t>(static_cast<const uint16_t*>(base)[i] ^
                                   0x8000);
    case PrimitiveType::kS32:
      return static_cast<const uint32_t*>(base)[i] ^ 0x80000000u;
    case PrimitiveType::kS64:
      return static_cast<const uint64_t*>(base)[i] ^ (uint64_t{1} << 63);
    default:  // unsigned
      return static_cast<uint64_t>(LoadIndex(type, base, i));
  }
}

uint64_t UnsignedKey(PrimitiveType type, const void* base, int64_t i) {
  if (type == PrimitiveType::kU64) return static_cast<const uint64_t*>(base)[i];
  if (type == PrimitiveType::kPred)
    return static_cast<const uint8_t*>(base)[i] != 0;
  return TotalOrderKey(type, base, i);
}

}  // namespace

bool CanonicalSortType(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
    case PrimitiveType::kF32:
    case PrimitiveType::kF64:
    case PrimitiveType::kF8E5M2:
    case PrimitiveType::kF8E4M3FN:
      return true;
    default:
      return false;
  }
}

uint64_t CanonicalSortKey(PrimitiveType type, const void* base, int64_t i) {
  const int bits = 8 * hlo::ByteWidth(type);
  const uint64_t sign = uint64_t{1} << (bits - 1);
  const double v = LoadAsDouble(type, base, i);
  if (std::isnan(v)) return sign | (sign - 1);  // above every other key
  if (v == 0) return sign;                      // +0's key
  return TotalOrderKey(type, base, i);
}

namespace {

// LSD radix sort of n keys (with payload, if not null) on their low `bits`
// bits, 11 bits per pass, ping-ponging between keys and tmp. Returns true
// when the result ended in tmp (and tmp_payload) rather than keys.
bool RadixSortPasses(uint32_t* keys, uint32_t* tmp, uint32_t* payload,
                     uint32_t* tmp_payload, int64_t n, int bits) {
  constexpr int kDigit = 11;
  constexpr int kBuckets = 1 << kDigit;
  bool in_tmp = false;
  const int passes = (bits + kDigit - 1) / kDigit;
  std::vector<int64_t> counts(static_cast<size_t>(passes) * kBuckets, 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < passes; ++p) {
      ++counts[p * kBuckets + ((keys[i] >> (p * kDigit)) & (kBuckets - 1))];
    }
  }
  for (int p = 0; p < passes; ++p) {
    int64_t* c = &counts[p * kBuckets];
    if (*std::max_element(c, c + kBuckets) == n) continue;  // one bucket
    int64_t sum = 0;
    for (int b = 0; b < kBuckets; ++b) {
      const int64_t count = c[b];
      c[b] = sum;
      sum += count;
    }
    const int shift = p * kDigit;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t at = c[(keys[i] >> shift) & (kBuckets - 1)]++;
      tmp[at] = keys[i];
      if (payload != nullptr) tmp_payload[at] = payload[i];
    }
    std::swap(keys, tmp);
    std::swap(payload, tmp_payload);
    in_tmp = !in_tmp;
  }
  return in_tmp;
}

// Sorts n keys (with payload, if not null) by their low `bits` bits,
// stably, leaving the result in keys (and payload); tmp and tmp_payload are
// scratch of n elements.
void RadixSort(uint32_t* keys, uint32_t* tmp, uint32_t* payload,
               uint32_t* tmp_payload, int64_t n, int bits) {
  if (RadixSortPasses(keys, tmp, payload, tmp_payload, n, bits)) {
    std::copy(tmp, tmp + n, keys);
    if (payload != nullptr) std::copy(tmp_payload, tmp_payload + n, payload);
  }
}

// Radix sorts n keys (with payload, if not null) on the pool's threads:
// the top 12 bits in one parallel pass (each thread counts, then scatters,
// its share of the keys, stably), then each of those 4096 buckets on its
// own by the remaining bits (buckets are small enough to stay in the
// caches, and threads take whole buckets). Stable.
// REQUIRES: not called from a pool thread.
void ParallelRadixSort(uint32_t* keys, uint32_t* payload, int64_t n, int bits,
                       uint32_t* tmp, uint32_t* tmp_payload) {
  constexpr int kTopBits = 12;
  constexpr int kTop = 1 << kTopBits;
  ThreadPool& pool = ThreadPool::Get();
  if (bits <= kTopBits || n < (int64_t{1} << 16)) {
    RadixSort(keys, tmp, payload, tmp_payload, n, bits);
    return;
  }
  const int shift = bits - kTopBits;
  const int64_t chunks = std::max(1, pool.num_threads());
  std::vector<int64_t> bounds;
  for (int64_t c = 0; c <= chunks; ++c) bounds.push_back(n * c / chunks);
  std::vector<std::vector<int64_t>> counts(chunks,
                                           std::vector<int64_t>(kTop, 0));
  pool.ParallelFor(chunks, 1e9, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      int64_t* count = counts[c].data();
      for (int64_t i = bounds[c]; i < bounds[c + 1]; ++i) {
        ++count[(keys[i] >> shift) & (kTop - 1)];
      }
    }
  });
  // Bucket b starts at begin[b]; chunk c writes its keys of bucket b after
  // those of the chunks before it.
  std::vector<int64_t> begin(kTop + 1, 0);
  int64_t sum = 0;
  for (int b = 0; b < kTop; ++b) {
    begin[b] = sum;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t count = counts[c][b];
      counts[c][b] = sum;
      sum += count;
    }
  }
  begin[kTop] = n;
  pool.ParallelFor(chunks, 1e9, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      int64_t* at = counts[c].data();
      for (int64_t i = bounds[c]; i < bounds[c + 1]; ++i) {
        const int64_t to = at[(keys[i] >> shift) & (kTop - 1)]++;
        tmp[to] = keys[i];
        if (payload != nullptr) tmp_payload[to] = payload[i];
      }
    }
  });
  // Each bucket, from tmp back into keys.
  pool.ParallelFor(kTop, 20.0 * n / kTop, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const int64_t lo = begin[b], len = begin[b + 1] - lo;
      if (len == 0) continue;
      uint32_t* const p = payload != nullptr ? payload + lo : nullptr;
      uint32_t* const tp = payload != nullptr ? tmp_payload + lo : nullptr;
      if (!RadixSortPasses(tmp + lo, keys + lo, tp, p, len, shift)) {
        std::copy(tmp + lo, tmp + lo + len, keys + lo);
        if (p != nullptr) std::copy(tp, tp + len, p);
      }
    }
  });
}

// Keys of n elements of `type` (at most 32 bits) at base[i * stride], as
// UnsignedKey (or, when `canonical`, CanonicalSortKey) maps them,
// complemented within `mask` when `flip`.
void LoadKeys(PrimitiveType type, const void* base, int64_t stride, int64_t n,
              bool flip, uint32_t mask, uint32_t* out, bool canonical) {
  if (canonical) {
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t k =
          static_cast<uint32_t>(CanonicalSortKey(type, base, i * stride));
      out[i] = flip ? (~k & mask) : k;
    }
    return;
  }
  const auto load = [&](auto tag, auto map) {
    using U = decltype(tag);
    const U* in = static_cast<const U*>(base);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t k = map(in[i * stride]);
      out[i] = flip ? (~k & mask) : k;
    }
  };
  const auto fold = [](auto bits, uint32_t sign, uint32_t mask) -> uint32_t {
    const uint32_t b = bits;
    return (b & sign) != 0 ? (~b & mask) : (b | sign);
  };
  if (hlo::IsMiniFloat(type)) {
    if (type == PrimitiveType::kF8E8M0FNU) {  // unsigned: codes order
      return load(uint8_t{}, [](uint8_t b) { return uint32_t{b}; });
    }
    const int bits = hlo::MiniFloatCodeBits(type);
    const uint32_t sign = 1u << (bits - 1), mask = (1u << bits) - 1;
    return load(uint8_t{},
                [&](uint8_t b) { return fold(b & mask, sign, mask); });
  }
  switch (type) {
    case PrimitiveType::kF32:
      return load(uint32_t{},
                  [&](uint32_t b) { return fold(b, 0x80000000u, ~0u); });
    case PrimitiveType::kF16:
    case PrimitiveType::kBf16:
      return load(uint16_t{},
                  [&](uint16_t b) { return fold(b, 0x8000u, 0xffffu); });
    case PrimitiveType::kS32:
      return load(uint32_t{}, [](uint32_t b) { return b ^ 0x80000000u; });
    case PrimitiveType::kS16:
      return load(uint16_t{}, [](uint16_t b) { return uint32_t{b} ^ 0x8000u; });
    case PrimitiveType::kS8:
    case PrimitiveType::kS4:
    case PrimitiveType::kS2:
      return load(uint8_t{}, [](uint8_t b) { return uint32_t{b} ^ 0x80u; });
    case PrimitiveType::kU32:
      return load(uint32_t{}, [](uint32_t b) { return b; });
    case PrimitiveType::kU16:
      return load(uint16_t{}, [](uint16_t b) { return uint32_t{b}; });
    case PrimitiveType::kPred:
      return load(uint8_t{}, [](uint8_t b) { return uint32_t{b != 0}; });
    default:  // u8
      return load(uint8_t{}, [](uint8_t b) { return uint32_t{b}; });
  }
}

// Width in bits of the keys radix sorting handles (0: not handled).
int RadixBits(PrimitiveType type) {
  const int bytes = hlo::ByteWidth(type);
  return bytes <= 4 ? 8 * bytes : 0;
}

// The inverse of UnsignedKey for keys of `type` of at most 32 bits.
void StoreFromKey(PrimitiveType type, uint32_t key, void* base, int64_t i) {
  const int width = 8 * hlo::ByteWidth(type);
  const uint32_t sign = uint32_t{1} << (width - 1);
  const uint32_t mask = width == 32 ? ~uint32_t{0} : (uint32_t{1} << width) - 1;
  uint32_t bits = key;
  if (type == PrimitiveType::kF8E8M0FNU) {
    bits = key;  // unsigned: its codes are its keys
  } else if (hlo::IsMiniFloat(type)) {
    // The sign is the top bit of the code's own width (4, 6 or 8).
    const int code_bits = hlo::MiniFloatCodeBits(type);
    const uint32_t code_sign = uint32_t{1} << (code_bits - 1);
    const uint32_t code_mask = (uint32_t{1} << code_bits) - 1;
    bits = (key & code_sign) != 0 ? (key ^ code_sign) : (~key & code_mask);
  } else if (hlo::IsFloatingPoint(type)) {
    bits = (key & sign) != 0 ? (key ^ sign) : (~key & mask);
  } else if (hlo::IsSignedInteger(type)) {
    bits = key ^ sign;
  }
  std::memcpy(static_cast<char*>(base) + i * (width / 8), &bits, width / 8);
}

// A stable bottom-up merge sort of `perm` by less(a, b); touches only
// perm[0, n) and tmp[0, n).
template <typename Less>
void MergeSort(int64_t* perm, int64_t* tmp, int64_t n, Less less) {
  for (int64_t width = 1; width < n; width *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = std::min(lo + width, n),
                    hi = std::min(lo + 2 * width, n);
      int64_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi) {
        // Take from the right only when strictly less: stable.
        tmp[k++] = less(perm[j], perm[i]) ? perm[j++] : perm[i++];
      }
      while (i < mid) tmp[k++] = perm[i++];
      while (j < hi) tmp[k++] = perm[j++];
    }
    std::copy(tmp, tmp + n, perm);
  }
}

// Bit patterns of `type` (CanonicalSortType) for every case that
// comparisons with 0, -0 or NaN, and between two such values, can tell
// apart: zeros, the least and greatest finite values, infinities and NaNs
// (two of each sign where there are two), both signs.
std::vector<uint64_t> CanonicalProbes(PrimitiveType type) {
  int e = 0, m = 0;
  bool infinite = true;
  switch (type) {
    case PrimitiveType::kF16:
      e = 5, m = 10;
      break;
    case PrimitiveType::kBf16:
      e = 8, m = 7;
      break;
    case PrimitiveType::kF32:
      e = 8, m = 23;
      break;
    case PrimitiveType::kF64:
      e = 11, m = 52;
      break;
    case PrimitiveType::kF8E5M2:
      e = 5, m = 2;
      break;
    case PrimitiveType::kF8E4M3FN:  // no infinity; S.1111.111 is NaN
      e = 4, m = 3;
      infinite = false;
      break;
    default:
      return {};
  }
  const uint64_t sign = uint64_t{1} << (e + m);
  const uint64_t top = ((uint64_t{1} << e) - 1) << m;  // exponent all ones
  std::vector<uint64_t> positive = {0, 1, uint64_t{1} << m, sign - 1};
  if (infinite) {
    positive.insert(positive.end(), {top - 1, top, top | 1});
  } else {
    positive.push_back(sign - 2);
  }
  std::vector<uint64_t> probes = positive;
  for (uint64_t p : positive) probes.push_back(p | sign);
  return probes;
}

// The comparator's structure that probing can vouch for: scalar compares,
// selects and logic on parameters 0 and 1 and on constants 0, -0 and NaN
// of the key type.
bool CanonicalizerOps(const hlo::Computation& cmp, PrimitiveType key) {
  for (const auto& inst : cmp.instructions()) {
    switch (inst->opcode()) {
      case hlo::Opcode::kParameter:
      case hlo::Opcode::kCompare:
      case hlo::Opcode::kSelect:
      case hlo::Opcode::kBroadcast:
      case hlo::Opcode::kReshape:
      case hlo::Opcode::kCopy:
      case hlo::Opcode::kAnd:
      case hlo::Opcode::kOr:
      case hlo::Opcode::kNot:
        break;
      case hlo::Opcode::kConstant: {
        const hlo::Literal& l = inst->attributes().literal;
        if (l.shape().element_type() != key || l.shape().ElementCount() != 1) {
          return false;
        }
        const double v = LoadAsDouble(key, l.data().data(), 0);
        if (!std::isnan(v) && v != 0) return false;
        break;
      }
      default:
        return false;
    }
    for (const hlo::Instruction* operand : inst->operands()) {
      if (operand->opcode() == hlo::Opcode::kParameter &&
          operand->attributes().parameter_number >= 2) {
        return false;
      }
    }
  }
  return true;
}

// kTotalAscending or kTotalDescending when `comparator` (on operands of
// `types`, whose first is a CanonicalSortType) answers, for every pair of
// CanonicalProbes, as an ascending or descending comparison of
// CanonicalSortKey does; else kGeneric.
KeyOrder ProbeCanonicalOrder(const Expression& comparator,
                             const std::vector<PrimitiveType>& types) {
  const PrimitiveType kt = types[0];
  const int width = hlo::ByteWidth(kt);
  const std::vector<uint64_t> probes = CanonicalProbes(kt);
  RegionRunner runner(comparator);
  runner.SetOutputTypes({PrimitiveType::kPred});
  std::vector<ScalarBits> params(2 * types.size());
  std::vector<const void*> in_ptrs;
  for (ScalarBits& p : params) in_ptrs.push_back(&p);
  bool ascending = true, descending = true;
  for (uint64_t x : probes) {
    for (uint64_t y : probes) {
      ScalarBits sx{}, sy{};
      std::memcpy(sx.words, &x, width);
      std::memcpy(sy.words, &y, width);
      StorageToCompute(kt, &sx, &params[0], 1);
      StorageToCompute(kt, &sy, &params[1], 1);
      uint8_t result = 0;
      void* out = &result;
      runner.Evaluate(in_ptrs, 1, {&out, 1});
      const uint64_t kx = CanonicalSortKey(kt, &x, 0);
      const uint64_t ky = CanonicalSortKey(kt, &y, 0);
      ascending = ascending && (result != 0) == (kx < ky);
      descending = descending && (result != 0) == (kx > ky);
    }
  }
  if (ascending) return KeyOrder::kTotalAscending;
  if (descending) return KeyOrder::kTotalDescending;
  return KeyOrder::kGeneric;
}

// What the comparator computes, when it is a plain comparison of operand
// 0's parameters.
KeyOrder Classify(const hlo::Computation& cmp, PrimitiveType key_type) {
  const hlo::Instruction* root = cmp.root();
  if (root->opcode() != hlo::Opcode::kCompare || cmp.parameters().size() < 2) {
    return KeyOrder::kGeneric;
  }
  const auto* p0 = cmp.parameters()[0];
  const auto* p1 = cmp.parameters()[1];
  bool less;
  const hlo::ComparisonDirection dir = root->attributes().comparison_direction;
  if (dir == hlo::ComparisonDirection::kLt) {
    less = true;
  } else if (dir == hlo::ComparisonDirection::kGt) {
    less = false;
  } else {
    return KeyOrder::kGeneric;
  }
  if (root->operand(0) == p1 && root->operand(1) == p0) {
    less = !less;
  } else if (root->operand(0) != p0 || root->operand(1) != p1) {
    return KeyOrder::kGeneric;
  }
  const bool is_float = hlo::IsFloatingPoint(key_type);
  const bool total =
      root->attributes().comparison_type == hlo::ComparisonType::kTotalOrder;
  if (is_float && !total) {
    return less ? KeyOrder::kFloatAscending : KeyOrder::kFloatDescending;
  }
  return less ? KeyOrder::kTotalAscending : KeyOrder::kTotalDescending;
}

}  // namespace

absl::Status SortKernel::Run(absl::Span<void* const> addresses,
                             const RunContext& context) const {
  const int64_t row_count = outer * inner;
  if (row_count == 0 || length == 0) return absl::OkStatus();
  if (scratch >= 0) {
    SortKeysInPlace(addresses, context);
    return CheckCancelled(context.cancellation);
  }
  const double cost = static_cast<double>(length) *
                      (order == KeyOrder::kGeneric ? 400.0 : 40.0);
  // Each worker takes a share of the rows and a slice of the workspace
  // (a scratch slot, so that a sort's working memory counts against the
  // device like its buffers).
  const int64_t team = std::min<int64_t>(row_count, workers);
  ThreadPool::Get().ParallelFor(
      team, cost * row_count / team,
      [&](int64_t first_worker, int64_t last_worker) {
        for (int64_t worker = first_worker; worker < last_worker; ++worker) {
          char* slice = static_cast<char*>(addresses[workspace]) +
                        worker * WorkspaceBytesPerWorker(length);
          int64_t* perm = reinterpret_cast<int64_t*>(slice);
          int64_t* tmp = perm + length;
          auto* keyed =
              reinterpret_cast<std::pair<uint64_t, int64_t>*>(tmp + length);
          uint32_t* radix_keys = reinterpret_cast<uint32_t*>(keyed + length);
          uint32_t* radix_tmp = radix_keys + length;
          uint32_t* radix_payload = radix_tmp + length;
          uint32_t* radix_payload_tmp = radix_payload + length;
          const int64_t first = row_count * worker / team;
          const int64_t last = row_count * (worker + 1) / team;
          std::unique_ptr<RegionRunner> runner;
          std::vector<ScalarBits> params(2 * types.size());
          std::vector<const void*> in_ptrs;
          if (order == KeyOrder::kGeneric) {
            runner = std::make_unique<RegionRunner>(comparator);
            runner->SetOutputTypes({PrimitiveType::kPred});
            for (ScalarBits& p : params) in_ptrs.push_back(&p);
          }
          for (int64_t row = first; row < last; ++row) {
            if (IsCancelled(context.cancellation)) return;
            const int64_t base = (row / inner) * length * inner + row % inner;
            const void* keys = addresses[inputs[0]];
            const PrimitiveType kt = types[0];
            const int radix_bits = RadixBits(kt);
            if ((order == KeyOrder::kTotalAscending ||
                 order == KeyOrder::kTotalDescending) &&
                radix_bits > 0 && length < (int64_t{1} << 32)) {
              const bool flip = order == KeyOrder::kTotalDescending;
              const uint32_t mask = radix_bits == 32
                                        ? ~uint32_t{0}
                                        : (uint32_t{1} << radix_bits) - 1;
              LoadKeys(
                  kt,
                  static_cast<const char*>(keys) + base * hlo::ByteWidth(kt),
                  inner, length, flip, mask, radix_keys, canonical);
              // Canonical keys do not give back the values they came from.
              const bool keys_only = types.size() == 1 && !canonical;
              if (!keys_only)
                std::iota(radix_payload, radix_payload + length, 0u);
              if (row_count == 1 && length >= (int64_t{1} << 20)) {
                // One long row: this runs on the calling thread, and the
                // pool's threads can share the row.
                ParallelRadixSort(radix_keys,
                                  keys_only ? nullptr : radix_payload, length,
                                  radix_bits, radix_tmp,
                                  keys_only ? nullptr : radix_payload_tmp);
              } else {
                RadixSort(radix_keys, radix_tmp,
                          keys_only ? nullptr : radix_payload,
                          keys_only ? nullptr : radix_payload_tmp, length,
                          radix_bits);
              }
              if (keys_only) {
                void* out = addresses[outputs[0]];
                for (int64_t i = 0; i < length; ++i) {
                  const uint32_t k =
                      flip ? (~radix_keys[i] & mask) : radix_keys[i];
                  StoreFromKey(kt, k, out, base + i * inner);
                }
                continue;
              }
              for (int64_t i = 0; i < length; ++i) perm[i] = radix_payload[i];
            } else if (order == KeyOrder::kTotalAscending ||
                       order == KeyOrder::kTotalDescending) {
              const bool flip = order == KeyOrder::kTotalDescending;
              for (int64_t i = 0; i < length; ++i) {
                const uint64_t k =
                    canonical ? CanonicalSortKey(kt, keys, base + i * inner)
                              : UnsignedKey(kt, keys, base + i * inner);
                keyed[i] = {flip ? ~k : k, i};
              }
              std::sort(keyed, keyed + length);
              for (int64_t i = 0; i < length; ++i) perm[i] = keyed[i].second;
            } else if (order == KeyOrder::kFloatAscending ||
                       order == KeyOrder::kFloatDescending) {
              std::iota(perm, perm + length, 0);
              const bool asc = order == KeyOrder::kFloatAscending;
              MergeSort(perm, tmp, length, [&](int64_t a, int64_t b) {
                const double x = LoadAsDouble(kt, keys, base + a * inner);
                const double y = LoadAsDouble(kt, keys, base + b * inner);
                return asc ? x < y : x > y;
              });
            } else {
              std::iota(perm, perm + length, 0);
              MergeSort(perm, tmp, length, [&](int64_t a, int64_t b) {
                for (size_t j = 0; j < types.size(); ++j) {
                  const int w = hlo::ByteWidth(types[j]);
                  const char* data =
                      static_cast<const char*>(addresses[inputs[j]]);
                  ScalarBits sa, sb;
                  std::memcpy(&sa, data + (base + a * inner) * w, w);
                  std::memcpy(&sb, data + (base + b * inner) * w, w);
                  StorageToCompute(types[j], &sa, &params[2 * j], 1);
                  StorageToCompute(types[j], &sb, &params[2 * j + 1], 1);
                }
                uint8_t result = 0;
                void* out = &result;
                runner->Evaluate(in_ptrs, 1, {&out, 1});
                return result != 0;
              });
            }
            for (size_t j = 0; j < types.size(); ++j) {
              const int w = hlo::ByteWidth(types[j]);
              const char* src = static_cast<const char*>(addresses[inputs[j]]);
              char* dst = static_cast<char*>(addresses[outputs[j]]);
              for (int64_t i = 0; i < length; ++i) {
                std::memcpy(dst + (base + i * inner) * w,
                            src + (base + perm[i] * inner) * w, w);
              }
            }
          }
        }
      });
  return CheckCancelled(context.cancellation);
}

void SortKernel::SortKeysInPlace(absl::Span<void* const> addresses,
                                 const RunContext& context) const {
  const PrimitiveType kt = types[0];
  const bool flip = order == KeyOrder::kTotalDescending;
  const uint32_t mask = ~uint32_t{0};
  uint32_t* keys = static_cast<uint32_t*>(addresses[outputs[0]]);
  uint32_t* tmp = static_cast<uint32_t*>(addresses[scratch]);
  const char* in = static_cast<const char*>(addresses[inputs[0]]);
  const auto finish = [&](int64_t row) {
    uint32_t* k = keys + row * length;
    for (int64_t i = 0; i < length; ++i) {
      StoreFromKey(kt, flip ? ~k[i] : k[i], k, i);
    }
  };
  const int64_t rows = outer;
  if (rows == 1 && length >= (int64_t{1} << 20)) {
    // One long row: every step in parallel, over pieces of the row.
    constexpr int64_t kPiece = int64_t{1} << 18;
    const int64_t pieces = (length + kPiece - 1) / kPiece;
    const auto piece_range = [&](int64_t p) {
      return std::pair(p * kPiece, std::min(length, (p + 1) * kPiece));
    };
    ThreadPool& pool = ThreadPool::Get();
    pool.ParallelFor(pieces, 4.0 * kPiece, [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p) {
        const auto [lo, hi] = piece_range(p);
        LoadKeys(kt, in + lo * 4, 1, hi - lo, flip, mask, keys + lo, false);
      }
    });
    ParallelRadixSort(keys, nullptr, length, 32, tmp, nullptr);
    if (IsCancelled(context.cancellation)) return;
    pool.ParallelFor(pieces, 4.0 * kPiece, [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last; ++p) {
        const auto [lo, hi] = piece_range(p);
        if (kt == PrimitiveType::kF32 && !flip) {
          // The inverse of the total-order fold, without a type switch.
          for (int64_t i = lo; i < hi; ++i) {
            const uint32_t k = keys[i];
            keys[i] = (k & 0x80000000u) != 0 ? (k ^ 0x80000000u) : ~k;
          }
        } else {
          for (int64_t i = lo; i < hi; ++i) {
            StoreFromKey(kt, flip ? ~keys[i] : keys[i], keys, i);
          }
        }
      }
    });
    return;
  }
  ThreadPool::Get().ParallelFor(
      rows, length * 30.0, [&](int64_t first, int64_t last) {
        for (int64_t row = first; row < last; ++row) {
          if (IsCancelled(context.cancellation)) return;
          uint32_t* k = keys + row * length;
          LoadKeys(kt, in + row * length * 4, 1, length, flip, mask, k, false);
          RadixSort(k, tmp + row * length, nullptr, nullptr, length, 32);
          finish(row);
        }
      });
}

absl::Status TopKKernel::Run(absl::Span<void* const> addresses,
                             const RunContext& context) const {
  if (rows == 0) return absl::OkStatus();
  const int64_t team = std::min<int64_t>(rows, workers);
  ThreadPool::Get().ParallelFor(
      team, static_cast<double>(n) * 20 * rows / team,
      [&](int64_t first_worker, int64_t last_worker) {
        for (int64_t worker = first_worker; worker < last_worker; ++worker) {
          auto* keyed = reinterpret_cast<std::pair<uint64_t, int64_t>*>(
                            addresses[workspace]) +
                        worker * n;
          const int64_t first = rows * worker / team;
          const int64_t last = rows * (worker + 1) / team;
          const int w = hlo::ByteWidth(type);
          const char* in = static_cast<const char*>(addresses[input]);
          char* value_out = static_cast<char*>(addresses[values]);
          int32_t* index_out = static_cast<int32_t*>(addresses[indices]);
          for (int64_t row = first; row < last; ++row) {
            if (IsCancelled(context.cancellation)) return;
            for (int64_t i = 0; i < n; ++i) {
              // Largest (or smallest) first; ties keep the lower index first.
              const uint64_t key = UnsignedKey(type, in, row * n + i);
              keyed[i] = {largest ? ~key : key, i};
            }
            std::partial_sort(keyed, keyed + k, keyed + n);
            for (int64_t i = 0; i < k; ++i) {
              std::memcpy(value_out + (row * k + i) * w,
                          in + (row * n + keyed[i].second) * w, w);
              index_out[row * k + i] = static_cast<int32_t>(keyed[i].second);
            }
          }
        }
      });
  return CheckCancelled(context.cancellation);
}

namespace {

// Bytes of `workers` slices of `per_worker` bytes, saturating past what any
// slot may hold (the scratch plan then refuses the program).
int64_t WorkspaceBytes(int64_t workers, int64_t per_worker) {
  const __int128 total = static_cast<__int128>(workers) * per_worker;
  return total > hlo::kMaxArrayBytes ? hlo::kMaxArrayBytes + 1
                                     : static_cast<int64_t>(total);
}

}  // namespace

absl::StatusOr<std::shared_ptr<Kernel>> BuildSort(const KernelArgs& args,
                                                  KernelCompiler& compiler) {
  const hlo::Instruction& inst = *args.inst;
  auto k = std::make_shared<SortKernel>();
  const hlo::Shape& shape = args.input_shapes[0];
  const int64_t dim = inst.attributes().dimensions[0];
  for (size_t j = 0; j < args.inputs.size(); ++j) {
    k->inputs.push_back(args.inputs[j]);
    k->outputs.push_back(args.outputs[j]);
    k->types.push_back(args.input_shapes[j].element_type());
    k->reads.push_back(
        {args.inputs[j], args.input_shapes[j].UnpackedByteSize()});
    k->writes.push_back(
        {args.outputs[j], args.output_shapes[j].UnpackedByteSize()});
  }
  if (shape.rank() == 0) {
    k->length = 1;
  } else {
    for (int i = 0; i < shape.rank(); ++i) {
      if (i < dim) k->outer *= shape.dimensions(i);
      if (i > dim) k->inner *= shape.dimensions(i);
    }
    k->length = shape.dimensions(dim);
  }
  const hlo::Computation& cmp = *inst.called_computations()[0];
  const PrimitiveType kt = k->types[0];
  // Complex keys have no order of their own: the comparator gives one.
  k->order = hlo::IsComplex(kt) ? KeyOrder::kGeneric : Classify(cmp, kt);
  // The comparator as an Expression: the host runs it for kGeneric only,
  // the CUDA backend for every order.
  std::vector<PrimitiveType> params;
  for (PrimitiveType t : k->types) {
    params.push_back(t);
    params.push_back(t);
  }
  auto comparator = ScalarRegionExpression(cmp, params);
  if (comparator.ok()) {
    k->comparator = *std::move(comparator);
    k->has_comparator = true;
  } else if (k->order == KeyOrder::kGeneric) {
    return comparator.status();
  }
  // JAX's comparator of floats (each operand canonicalized, then compared
  // by the total order): sorted by canonical keys.
  if (k->order == KeyOrder::kGeneric && k->has_comparator &&
      CanonicalSortType(kt) && CanonicalizerOps(cmp, kt)) {
    k->order = ProbeCanonicalOrder(k->comparator, k->types);
    k->canonical = k->order != KeyOrder::kGeneric;
  }
  if (!k->canonical &&
      (k->order == KeyOrder::kTotalAscending ||
       k->order == KeyOrder::kTotalDescending) &&
      k->types.size() == 1 && k->inner == 1 && k->length < (int64_t{1} << 32) &&
      (kt == PrimitiveType::kF32 || kt == PrimitiveType::kS32 ||
       kt == PrimitiveType::kU32)) {
    const int64_t bytes = shape.UnpackedByteSize();
    k->scratch = compiler.NewScratch(bytes);
    k->writes.push_back({k->scratch, bytes});
  } else {
    const int64_t rows = k->outer * k->inner;
    k->workers = std::max<int64_t>(
        1, std::min<int64_t>(rows, ThreadPool::Get().num_threads()));
    const int64_t bytes = WorkspaceBytes(
        k->workers, SortKernel::WorkspaceBytesPerWorker(k->length));
    k->workspace = compiler.NewScratch(bytes);
    k->writes.push_back({k->workspace, bytes});
  }
  return k;
}

absl::StatusOr<std::shared_ptr<Kernel>> BuildTopK(const KernelArgs& args,
                                                  KernelCompiler& compiler) {
  auto k = std::make_shared<TopKKernel>();
  const hlo::Shape& in = args.input_shapes[0];
  k->input = args.inputs[0];
  k->values = args.outputs[0];
  k->indices = args.outputs[1];
  k->type = in.element_type();
  if (args.inst->opcode() == hlo::Opcode::kTopK) {
    const std::string largest =
        hlo::WordAttribute(*args.inst, "largest", "true");
    if (largest != "true" && largest != "false") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: largest=%s must be true or false", args.inst->name(), largest));
    }
    k->largest = largest == "true";
  }
  k->n = in.dimensions(in.rank() - 1);
  k->k = args.output_shapes[0].dimensions(in.rank() - 1);
  k->rows = k->n == 0 ? 0 : in.ElementCount() / k->n;
  if (k->n == 0) k->rows = 0;
  k->reads = {{args.inputs[0], in.UnpackedByteSize()}};
  k->writes = {{args.outputs[0], args.output_shapes[0].UnpackedByteSize()},
               {args.outputs[1], args.output_shapes[1].UnpackedByteSize()}};
  k->workers = std::max<int64_t>(
      1, std::min<int64_t>(k->rows, ThreadPool::Get().num_threads()));
  const int64_t bytes = WorkspaceBytes(k->workers, k->n * 16);
  k->workspace = compiler.NewScratch(bytes);
  k->writes.push_back({k->workspace, bytes});
  return k;
}

}  // namespace pjrt::compiler::host
