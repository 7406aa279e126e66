// The CUDA code generator's kernels (see codegen_internal.h): fft, int4
// edges, gather and scatter, reduce-window, select-and-scatter, map,
// convolution, while and conditional (sort, top-k and random numbers:
// codegen_sort_random.cc).
#include "compiler/cuda/codegen_internal.h"

namespace pjrt::compiler::cuda::codegen_internal {

absl::Status Generator::EmitFft(const host::FftKernelBase& f) {
  const int64_t in_count = f.batch * Product(f.in_dims);
  const int64_t out_count = f.batch * Product(f.out_dims);
  if (out_count == 0) return absl::OkStatus();
  const int element = f.wide ? 8 : 4;  // bytes of a real part
  Launch launch;
  launch.kind = Launch::Kind::kFft;
  launch.fft.type = f.type;
  launch.fft.wide = f.wide;
  launch.fft.batch = f.batch;
  launch.fft.lengths = f.lengths;
  int input = f.input;
  if (f.type == host::FftType::kIrfft && in_count > 0) {
    // cuFFT's complex-to-real transforms overwrite their input.
    host::CopyStep copy;
    copy.src = f.input;
    copy.dst = Temporary(in_count * 2 * element);
    copy.element_bytes = 2 * element;
    copy.dims = {in_count};
    copy.src_map = {0, {1}};
    copy.dst_map = {0, {1}};
    PJRT_RETURN_IF_ERROR(Emit(copy));
    input = copy.dst;
  }
  launch.slots = {f.output, input};
  static const char* const kTypes[] = {"FFT", "IFFT", "RFFT", "IRFFT"};
  launch.origin = absl::StrFormat(
      "cuFFT %s %s of %d x [%s]", kTypes[static_cast<int>(f.type)],
      f.wide ? "double" : "single", f.batch, absl::StrJoin(f.lengths, ","));
  Add(std::move(launch));
  if (f.type != host::FftType::kIfft && f.type != host::FftType::kIrfft) {
    return absl::OkStatus();
  }
  // Scale every real number of the result (both parts of a complex one).
  const int64_t reals = out_count * (f.type == host::FftType::kIfft ? 2 : 1);
  const char* real = f.wide ? "double" : "float";
  const char* idx = IndexType(reals);
  Launch scale;
  scale.kernel = Name("fft_scale");
  scale.blocks = BlocksFor(reals);
  scale.slots = {f.output};
  std::string& k = shared_->source;
  Open(&scale, {absl::StrCat(real, "* out")});
  absl::StrAppendFormat(&k, "  const %s factor = (%s)1 / (%s)%d;\n", real, real,
                        real, Product(f.lengths));
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, reals, idx);
  absl::StrAppend(&k, "    out[i] *= factor;\n  }\n}\n");
  scale.origin =
      absl::StrFormat("scaling an inverse fft by 1/%d", Product(f.lengths));
  Add(std::move(scale));
  return absl::OkStatus();
}

absl::Status Generator::EmitSubByteEdge(const host::SubByteKernel& edge) {
  const int64_t count = edge.count();
  if (count == 0) return absl::OkStatus();
  const int bits = edge.bits(), per_byte = 8 / bits, mask = (1 << bits) - 1;
  const int64_t bytes = (count + per_byte - 1) / per_byte;
  const char* idx = IndexType(count + per_byte);
  Launch launch;
  launch.kernel =
      Name(edge.pack() ? (bits == 4 ? "pack_4bit" : "pack_2bit")
                       : (bits == 4 ? "unpack_4bit" : "unpack_2bit"));
  launch.blocks = BlocksFor(bytes);
  launch.slots = {edge.dst(), edge.src()};
  std::string& k = shared_->source;
  Open(&launch, {"pj_u8* dst", "const pj_u8* src"});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, bytes, idx);
  // The first element of a byte in its top bits.
  if (edge.pack()) {
    absl::StrAppend(&k, "    pj_u8 byte = 0;\n");
    for (int e = 0; e < per_byte; ++e) {
      absl::StrAppendFormat(
          &k,
          "    if (%d * i + %d < %d) byte |= (pj_u8)((src[%d * i + %d] & 0x%x) "
          "<< %d);\n",
          per_byte, e, count, per_byte, e, mask, 8 - bits * (e + 1));
    }
    absl::StrAppend(&k, "    dst[i] = byte;\n");
  } else {
    // Sign-extended for s4 and s2, zero-extended otherwise.
    const std::string extend =
        absl::StrFormat("pj_wrap_%s%d", edge.is_signed() ? "s" : "u", bits);
    for (int e = 0; e < per_byte; ++e) {
      absl::StrAppendFormat(
          &k,
          "    if (%d * i + %d < %d) dst[%d * i + %d] = (pj_u8)%s(src[i] >> "
          "%d);\n",
          per_byte, e, count, per_byte, e, extend, 8 - bits * (e + 1));
    }
  }
  absl::StrAppend(&k, "  }\n}\n");
  launch.origin = edge.name;
  Add(std::move(launch));
  return absl::OkStatus();
}

std::string Generator::StartIndex(const host::IndexReader& r, int64_t d) {
  std::string start;
  for (int64_t e = 0; e < r.vector_size; ++e) {
    if (r.index_to_operand[e] == d) {
      start =
          IndexEntry(r.type, absl::StrFormat("at + %d", e * r.vector_stride));
    }
  }
  for (const auto& [dim, entry] : r.batching) {
    if (dim == d) start = absl::StrFormat("(long long)b%d", entry);
  }
  return start;
}

int Generator::GatherWordElements(const host::GatherKernel& g) {
  const std::vector<int64_t>& sizes = g.walk.sizes;
  if (sizes.empty() || g.walk.src_strides.back() != 1 ||
      g.walk.dst_strides.back() != 1) {
    return 1;
  }
  for (int v = 16 / g.bytes; v >= 2; v /= 2) {
    const auto fits = [v](int64_t x) { return x % v == 0; };
    bool ok = fits(sizes.back());
    for (size_t d = 0; d + 1 < sizes.size(); ++d) {
      ok = ok && fits(g.walk.src_strides[d]) && fits(g.walk.dst_strides[d]);
    }
    for (int64_t stride : g.out_batch_strides) ok = ok && fits(stride);
    // A start moves the slice by whole words, or is always 0.
    for (size_t d = 0; d < g.operand_dims.size(); ++d) {
      if (StartIndex(g.reader, static_cast<int64_t>(d)).empty()) continue;
      ok = ok && (fits(g.operand_strides[d]) ||
                  g.operand_dims[d] == g.slice_sizes[d]);
    }
    if (ok) return v;
  }
  return 1;
}

absl::Status Generator::EmitGather(const host::GatherKernel& gather) {
  // Rows that whole words can move go as words: the same gather over
  // elements `words` times wider (strides and the last window size
  // divided; starts and their clamps stay in elements).
  const int words = GatherWordElements(gather);
  host::GatherKernel wide = gather;
  if (words > 1) {
    wide.bytes *= words;
    wide.walk.sizes.back() /= words;
    for (size_t d = 0; d + 1 < wide.walk.sizes.size(); ++d) {
      wide.walk.src_strides[d] /= words;  // the last stays 1: a word
      wide.walk.dst_strides[d] /= words;
    }
    for (int64_t& x : wide.out_batch_strides) x /= words;
    for (int64_t& x : wide.operand_strides) x /= words;  // 0 if unused
  }
  const host::GatherKernel& g = wide;
  const host::IndexReader& r = g.reader;
  const int64_t positions = Product(r.batch_sizes);
  const int64_t window = Product(g.walk.sizes);
  const int64_t n = positions * window;
  if (n == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string w, WordType(g.bytes));
  PJRT_ASSIGN_OR_RETURN(std::string it, CudaStorageType(r.type));
  int64_t index_limit = (r.vector_size - 1) * r.vector_stride;
  for (size_t j = 0; j < r.batch_sizes.size(); ++j) {
    index_limit += (r.batch_sizes[j] - 1) * r.batch_strides[j];
  }
  const char* idx =
      IndexType(std::max({n, Product(g.operand_dims), index_limit}));
  Launch launch;
  launch.kernel = Name("gather");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(n);
  launch.slots = {g.output, g.operand, g.indices};
  std::string& k = shared_->source;
  Open(&launch,
       {absl::StrCat(w, "* out"), absl::StrCat("const ", w, "* operand"),
        absl::StrCat("const ", it, "* indices")});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, n, idx);
  absl::StrAppendFormat(&k, "    %s e = i %% %d, p = i / %d;\n", idx, window,
                        window);
  for (int j = static_cast<int>(r.batch_sizes.size()) - 1; j >= 0; --j) {
    absl::StrAppendFormat(&k, "    const %s b%d = p %% %d; p /= %d;\n", idx, j,
                          r.batch_sizes[j], r.batch_sizes[j]);
  }
  for (int d = static_cast<int>(g.walk.sizes.size()) - 1; d >= 0; --d) {
    absl::StrAppendFormat(&k, "    const %s w%d = e %% %d; e /= %d;\n", idx, d,
                          g.walk.sizes[d], g.walk.sizes[d]);
  }
  std::string at = "0", src = "0", dst = "0";
  for (size_t j = 0; j < r.batch_sizes.size(); ++j) {
    absl::StrAppendFormat(&at, " + b%d * %d", j, r.batch_strides[j]);
    absl::StrAppendFormat(&dst, " + b%d * %d", j, g.out_batch_strides[j]);
  }
  for (size_t d = 0; d < g.walk.sizes.size(); ++d) {
    absl::StrAppendFormat(&src, " + w%d * %d", d, g.walk.src_strides[d]);
    absl::StrAppendFormat(&dst, " + w%d * %d", d, g.walk.dst_strides[d]);
  }
  absl::StrAppendFormat(&k, "    const %s at = %s;\n    %s src = %s;\n", idx,
                        at, idx, src);
  for (size_t d = 0; d < g.operand_dims.size(); ++d) {
    const std::string start = StartIndex(r, static_cast<int64_t>(d));
    if (start.empty()) continue;  // 0, which the clamp keeps
    const int64_t room = g.operand_dims[d] - g.slice_sizes[d];
    absl::StrAppendFormat(
        &k,
        "    { const long long s = %s;\n"
        "      src += (%s)(s < 0 ? 0 : (s > %d ? %d : s)) * %d; }\n",
        start, idx, room, room, g.operand_strides[d]);
  }
  absl::StrAppendFormat(&k, "    out[%s] = operand[src];\n  }\n}\n", dst);
  launch.origin = absl::StrFormat(
      "gather of %d slices of %d %d-byte %s", positions, window, g.bytes,
      words > 1 ? absl::StrFormat("words (%d elements each)", words)
                : std::string("elements"));
  Add(std::move(launch));
  return absl::OkStatus();
}

std::string Generator::ScatterStart(const host::ScatterKernel& sc,
                                    const std::string& position,
                                    const std::string& indent) {
  const host::IndexReader& r = sc.reader;
  std::string k = absl::StrFormat("%slong long q = %s;\n", indent, position);
  for (int j = static_cast<int>(r.batch_sizes.size()) - 1; j >= 0; --j) {
    absl::StrAppendFormat(&k, "%sconst long long b%d = q %% %d; q /= %d;\n",
                          indent, j, r.batch_sizes[j], r.batch_sizes[j]);
  }
  std::string at = "0", src = "0";
  for (size_t j = 0; j < r.batch_sizes.size(); ++j) {
    absl::StrAppendFormat(&at, " + b%d * %d", j, r.batch_strides[j]);
    absl::StrAppendFormat(&src, " + b%d * %d", j, sc.update_batch_strides[j]);
  }
  absl::StrAppendFormat(&k, "%sconst long long at = %s;\n", indent, at);
  absl::StrAppendFormat(&k, "%slong long dst = 0;\n%sbool valid = true;\n",
                        indent, indent);
  for (size_t d = 0; d < sc.operand_dims.size(); ++d) {
    const std::string start = StartIndex(r, static_cast<int64_t>(d));
    if (start.empty()) continue;  // 0, always inside
    // A whole window that does not fit is skipped (XLA).
    absl::StrAppendFormat(&k,
                          "%s{ const long long s = %s;\n"
                          "%s  valid = valid && s >= 0 && s <= %d;\n"
                          "%s  dst += s * %d; }\n",
                          indent, start, indent,
                          sc.operand_dims[d] - sc.extent[d], indent,
                          sc.operand_strides[d]);
  }
  absl::StrAppendFormat(&k, "%sif (!valid) continue;\n", indent);
  absl::StrAppendFormat(&k, "%sconst long long src = %s;\n", indent, src);
  return k;
}

std::optional<ExprOp> Generator::AtomicCombine(const host::ScatterKernel& sc) {
  if (sc.types.size() != 1) return std::nullopt;
  const PrimitiveType t = sc.types[0];
  ExprOp op = ExprOp::kAdd;
  if (sc.combiner == host::Combiner::kReplace) return std::nullopt;
  if (sc.combiner == host::Combiner::kRegion) {
    const Expression& e = sc.region;
    if (e.outputs().size() != 1) return std::nullopt;
    const ExprNode& root = e.node(e.outputs()[0]);
    op = root.op;
    if (op != ExprOp::kAdd && op != ExprOp::kMultiply &&
        op != ExprOp::kMaximum && op != ExprOp::kMinimum &&
        op != ExprOp::kAnd && op != ExprOp::kOr && op != ExprOp::kXor) {
      return std::nullopt;
    }
    int seen = 0;  // bit i: input i is an operand
    for (int j = 0; j < 2; ++j) {
      const ExprNode& a = e.node(root.operands[j]);
      if (a.op != ExprOp::kInput || a.type != t) return std::nullopt;
      seen |= 1 << a.input;
    }
    if (seen != 3 || root.type != t) return std::nullopt;
  }
  // Floating-point sums (complex ones too: two, one per part) are the only
  // ones whose bits may depend on the order (within reassociation's
  // tolerance); a float product's rounding, and which of +0 and -0 or of
  // two NaNs a maximum keeps, would too, so those keep the host's order.
  if ((IsFloat(t) || hlo::IsComplex(t)) && op != ExprOp::kAdd) {
    return std::nullopt;
  }
  return op;
}

absl::StatusOr<std::string> Generator::AtomicUpdate(
    const host::ScatterKernel& sc, ExprOp op, const std::string& indent) {
  const PrimitiveType t = sc.types[0];
  const int width = hlo::ByteWidth(t);
  const bool wide = width == 4 || width == 8;
  const char* word = width == 8 ? "unsigned long long" : "unsigned";
  // Native atomics where the hardware has the operation.
  if (op == ExprOp::kAdd &&
      (t == PrimitiveType::kF32 || t == PrimitiveType::kF64)) {
    return absl::StrFormat("%satomicAdd(&out0[t], upd0[s]);\n", indent);
  }
  if (op == ExprOp::kAdd && hlo::IsComplex(t)) {  // each part on its own
    return absl::StrFormat(
        "%satomicAdd(&out0[t].re, upd0[s].re);\n"
        "%satomicAdd(&out0[t].im, upd0[s].im);\n",
        indent, indent);
  }
  if (wide && !IsFloat(t) && t != PrimitiveType::kPred) {
    const char* name = nullptr;
    const char* type = word;  // add, and, or, xor: the two's-complement bits
    switch (op) {
      case ExprOp::kAdd:
        name = "atomicAdd";
        break;
      case ExprOp::kAnd:
        name = "atomicAnd";
        break;
      case ExprOp::kOr:
        name = "atomicOr";
        break;
      case ExprOp::kXor:
        name = "atomicXor";
        break;
      case ExprOp::kMaximum:
      case ExprOp::kMinimum:
        name = op == ExprOp::kMaximum ? "atomicMax" : "atomicMin";
        if (hlo::IsSignedInteger(t)) type = width == 8 ? "long long" : "int";
        break;
      default:
        break;
    }
    if (name != nullptr) {
      return absl::StrFormat("%s%s((%s*)&out0[t], (%s)upd0[s]);\n", indent,
                             name, type, type);
    }
  }
  // Any other: the combine in a compare-and-swap loop, computed as the
  // host computes it (f16 and bf16 sums rounded, s4 and u4 wrapped).
  PJRT_ASSIGN_OR_RETURN(const std::string storage, CudaStorageType(t));
  PJRT_ASSIGN_OR_RETURN(const std::string ct, ComputeType(t));
  std::string k =
      absl::StrFormat("%sconst %s u0 = %s;\n", indent, ct, Load(t, "upd0[s]"));
  absl::StrAppendFormat(&k,
                        "%spj_atomic_apply(&out0[t], [&](%s stored) -> %s {\n"
                        "%s  const %s c0 = %s;\n",
                        indent, storage, storage, indent, ct,
                        Load(t, "stored"));
  std::string value;
  if (sc.combiner == host::Combiner::kRegion) {
    PJRT_ASSIGN_OR_RETURN(
        std::vector<std::string> results,
        EmitExpression(sc.region, {"c0", "u0"}, "v", indent + "  ", &k));
    value = results[0];
  } else if (t == PrimitiveType::kPred) {  // an add of pred is an or
    value = "(pj_u8)((c0 | u0) != 0)";
  } else if (IsFloat(t) || hlo::IsComplex(t)) {
    value = "c0 + u0";
  } else {
    value = absl::StrFormat("pj_iadd<%s>(c0, u0)", ct);
  }
  absl::StrAppendFormat(&k, "%s  return %s;\n%s});\n", indent, Store(t, value),
                        indent);
  return k;
}

std::string Generator::ScatterElementLoop(const host::ScatterKernel& sc,
                                          const std::string& first) {
  const int64_t window = Product(sc.walk.sizes);
  const int64_t total = Product(sc.reader.batch_sizes) * window;
  std::string k =
      absl::StrFormat(kLoopHead, "long long", "long long", total, "long long");
  absl::StrAppend(&k, first);
  absl::StrAppendFormat(&k, "    long long w = i %% %d;\n", window);
  absl::StrAppend(&k,
                  ScatterStart(sc, absl::StrFormat("i / %d", window), "    "));
  std::string s_at = "src", t_at = "dst";
  for (int d = static_cast<int>(sc.walk.sizes.size()) - 1; d >= 0; --d) {
    absl::StrAppendFormat(&k, "    const long long w%d = w %% %d; w /= %d;\n",
                          d, sc.walk.sizes[d], sc.walk.sizes[d]);
    absl::StrAppendFormat(&s_at, " + w%d * %d", d, sc.walk.src_strides[d]);
    absl::StrAppendFormat(&t_at, " + w%d * %d", d, sc.walk.dst_strides[d]);
  }
  absl::StrAppendFormat(&k, "    const long long s = %s, t = %s;\n", s_at,
                        t_at);
  return k;
}

absl::Status Generator::EmitAtomicScatter(const host::ScatterKernel& sc,
                                          ExprOp op) {
  const int64_t positions = Product(sc.reader.batch_sizes);
  const int64_t window = Product(sc.walk.sizes);
  PJRT_ASSIGN_OR_RETURN(const std::string storage,
                        CudaStorageType(sc.types[0]));
  PJRT_ASSIGN_OR_RETURN(const std::string it, CudaStorageType(sc.reader.type));
  Launch launch;
  launch.kernel = Name("scatter_atomic");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(positions * window);
  launch.slots = {sc.outputs[0], sc.updates[0], sc.indices};
  Open(&launch, {absl::StrCat(storage, "* out0"),
                 absl::StrCat("const ", storage, "* upd0"),
                 absl::StrCat("const ", it, "* indices")});
  PJRT_ASSIGN_OR_RETURN(std::string update, AtomicUpdate(sc, op, "    "));
  absl::StrAppend(&shared_->source, ScatterElementLoop(sc), update, "  }\n}\n");
  launch.origin =
      absl::StrFormat("scatter-%s of %d windows of %d elements, by atomics",
                      ExprOpName(op), positions, window);
  Add(std::move(launch));
  return absl::OkStatus();
}

std::optional<Generator::Claim> Generator::ClaimCombine(
    const host::ScatterKernel& sc) {
  const int n = static_cast<int>(sc.types.size());
  const int64_t total = Product(sc.reader.batch_sizes) * Product(sc.walk.sizes);
  const int64_t operand = sc.operand_bytes[0] / hlo::ByteWidth(sc.types[0]);
  // An order and its reverse, and the operand's own, fit in 32 bits; the
  // claims of every operand element in kMaxClaimBytes.
  if (total >= (int64_t{1} << 32) - 2 || operand > kMaxClaimBytes / 8) {
    return std::nullopt;
  }
  if (sc.combiner == host::Combiner::kReplace) return Claim{false, false};
  if (sc.combiner != host::Combiner::kRegion) return std::nullopt;
  const Expression& e = sc.region;
  if (static_cast<int>(e.outputs().size()) != n) return std::nullopt;
  const auto input = [&](int node) {
    const ExprNode& x = e.node(node);
    return x.op == ExprOp::kInput ? x.input : -1;
  };
  bool replace = true;  // every output the update's element
  for (int i = 0; i < n; ++i) replace &= input(e.outputs()[i]) == n + i;
  if (replace) return Claim{false, false};
  // A maximum or minimum of floats of up to 32 bits, the current value
  // and the update as its operands in either order.
  const PrimitiveType t = sc.types[0];
  if (n != 1 || !IsFloat(t) || hlo::ByteWidth(t) > 4) return std::nullopt;
  const ExprNode& root = e.node(e.outputs()[0]);
  if (root.op != ExprOp::kMaximum && root.op != ExprOp::kMinimum) {
    return std::nullopt;
  }
  const int first = input(root.operands[0]), second = input(root.operands[1]);
  if (!((first == 0 && second == 1) || (first == 1 && second == 0))) {
    return std::nullopt;
  }
  // maximum(a, b) keeps b of two NaNs (a + b), so the later one wins a
  // tie of ranks; maximum(b, a) keeps the earlier one.
  return Claim{true, root.op == ExprOp::kMinimum, first == 1};
}

absl::Status Generator::EmitClaimScatter(const host::ScatterKernel& sc,
                                         const Claim& claim) {
  const int n = static_cast<int>(sc.types.size());
  const PrimitiveType t = sc.types[0];
  const int64_t positions = Product(sc.reader.batch_sizes);
  const int64_t window = Product(sc.walk.sizes);
  const int64_t total = positions * window;
  const int64_t operand = sc.operand_bytes[0] / hlo::ByteWidth(t);
  const int key_slot = Temporary(operand * 8);
  std::vector<std::string> storage(n);
  for (int i = 0; i < n; ++i) {
    PJRT_ASSIGN_OR_RETURN(storage[i], CudaStorageType(sc.types[i]));
  }
  PJRT_ASSIGN_OR_RETURN(const std::string it, CudaStorageType(sc.reader.type));
  // The claim of a value: its rank (0 for a replace) above its order, the
  // operand's own value ordered before or after every update.
  const std::string operand_order = claim.earliest_wins
                                        ? absl::StrCat(total + 1, "ull")
                                        : std::string("0ull");
  const std::string order = claim.earliest_wins
                                ? absl::StrFormat("(pj_u64)(%d - i)", total)
                                : std::string("(pj_u64)(i + 1)");
  const auto key = [&](const std::string& value, const std::string& at) {
    if (!claim.ranked) return at;
    return absl::StrFormat("((pj_u64)pj_rank_%s(%s) << 32 | %s)",
                           claim.minimum ? "min" : "max", Load(t, value), at);
  };
  const std::string head = ScatterElementLoop(sc);
  const std::string index_param = absl::StrCat("const ", it, "* indices");
  const std::string what =
      !claim.ranked ? "replace" : (claim.minimum ? "minimum" : "maximum");
  // The operand's claim where an update goes.
  Launch init;
  init.kernel = Name("scatter_claim_init");
  init.threads = kThreads;
  init.blocks = BlocksFor(total);
  init.slots = {key_slot, sc.outputs[0], sc.indices};
  Open(&init, {"pj_u64* key", absl::StrCat("const ", storage[0], "* out0"),
               index_param});
  absl::StrAppend(&shared_->source, head,
                  "    key[t] = ", key("out0[t]", operand_order),
                  ";\n  }\n}\n");
  init.origin = absl::StrFormat("scatter-%s's claims of the operand", what);
  Add(std::move(init));
  // Every update claims its element; the highest claim wins.
  Launch bid;
  bid.kernel = Name("scatter_claim");
  bid.threads = kThreads;
  bid.blocks = BlocksFor(total);
  bid.slots = {key_slot, sc.updates[0], sc.indices};
  Open(&bid, {"pj_u64* key", absl::StrCat("const ", storage[0], "* upd0"),
              index_param});
  absl::StrAppend(&shared_->source, head,
                  "    atomicMax((unsigned long long*)&key[t], ",
                  key("upd0[s]", order), ");\n  }\n}\n");
  bid.origin = absl::StrFormat("scatter-%s's claims of %d windows of %d", what,
                               positions, window);
  Add(std::move(bid));
  // The winners write.
  Launch apply;
  apply.kernel = Name("scatter_claim_apply");
  apply.threads = kThreads;
  apply.blocks = BlocksFor(total);
  std::vector<std::string> params;
  ScatterOperands(sc, storage, &apply, &params);
  apply.slots.push_back(key_slot);
  params.push_back("const pj_u64* key");
  apply.slots.push_back(sc.indices);
  params.push_back(index_param);
  Open(&apply, params);
  std::string& k = shared_->source;
  absl::StrAppendFormat(&k, "%s    if (key[t] != %s) continue;\n", head,
                        key("upd0[s]", order));
  for (int i = 0; i < n; ++i) {
    absl::StrAppendFormat(&k, "    out%d[t] = upd%d[s];\n", i, i);
  }
  absl::StrAppend(&k, "  }\n}\n");
  apply.origin = absl::StrFormat("scatter-%s of the winning updates", what);
  Add(std::move(apply));
  return absl::OkStatus();
}

absl::Status Generator::EmitScatter(const host::ScatterKernel& sc) {
  const int n = static_cast<int>(sc.types.size());
  std::vector<std::string> storage(n), words(n);
  for (int i = 0; i < n; ++i) {
    PJRT_ASSIGN_OR_RETURN(storage[i], CudaStorageType(sc.types[i]));
    const int width = hlo::ByteWidth(sc.types[i]);
    PJRT_ASSIGN_OR_RETURN(words[i], WordType(width));
    host::CopyStep copy;
    copy.dst = sc.outputs[i];
    copy.src = sc.inputs[i];
    copy.element_bytes = width;
    copy.dims = {sc.operand_bytes[i] / width};
    copy.src_map = {0, {1}};
    copy.dst_map = {0, {1}};
    PJRT_RETURN_IF_ERROR(Emit(copy));
  }
  const host::IndexReader& r = sc.reader;
  const int64_t positions = Product(r.batch_sizes);
  if (positions == 0 || Product(sc.walk.sizes) == 0) return absl::OkStatus();
  if (const std::optional<ExprOp> op = AtomicCombine(sc)) {
    return EmitAtomicScatter(sc, *op);
  }
  if (const std::optional<Claim> claim = ClaimCombine(sc)) {
    return EmitClaimScatter(sc, *claim);
  }
  if (positions > 1 &&
      positions * Product(sc.walk.sizes) < (int64_t{1} << 32)) {
    return EmitSortedScatter(sc, storage);
  }
  PJRT_ASSIGN_OR_RETURN(std::string it, CudaStorageType(r.type));
  const int rank = static_cast<int>(sc.walk.sizes.size());
  const int64_t first = rank == 0 ? 1 : sc.walk.sizes[0];
  const int64_t chunks = sc.parallel ? first : 1;
  Launch launch;
  launch.kernel = Name("scatter");
  launch.threads = static_cast<int>(std::min<int64_t>(kThreads, chunks));
  launch.blocks = BlocksFor(chunks, launch.threads);
  std::vector<std::string> params;
  ScatterOperands(sc, storage, &launch, &params);
  launch.slots.push_back(sc.indices);
  params.push_back(absl::StrCat("const ", it, "* indices"));
  std::string& k = shared_->source;
  Open(&launch, params);
  absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", chunks,
                        "long long");
  absl::StrAppendFormat(&k, "    for (long long p = 0; p < %d; ++p) {\n",
                        positions);
  absl::StrAppend(&k, ScatterStart(sc, "p", "      "));
  std::string indent = "      ", s_at = "src", t_at = "dst";
  for (int d = 0; d < rank; ++d) {
    if (d == 0 && sc.parallel) {
      absl::StrAppendFormat(&k, "%s{ const long long w0 = i;\n", indent);
    } else {
      absl::StrAppendFormat(&k,
                            "%sfor (long long w%d = 0; w%d < %d; ++w%d) {\n",
                            indent, d, d, sc.walk.sizes[d], d);
    }
    indent += "  ";
    absl::StrAppendFormat(&s_at, " + w%d * %d", d, sc.walk.src_strides[d]);
    absl::StrAppendFormat(&t_at, " + w%d * %d", d, sc.walk.dst_strides[d]);
  }
  absl::StrAppendFormat(&k, "%sconst long long s = %s, t = %s;\n", indent, s_at,
                        t_at);
  PJRT_ASSIGN_OR_RETURN(std::string combine,
                        ScatterCombine(sc, storage, indent));
  absl::StrAppend(&k, combine);
  for (int d = 0; d < rank; ++d) {
    indent.resize(indent.size() - 2);
    absl::StrAppendFormat(&k, "%s}\n", indent);
  }
  absl::StrAppend(&k, "    }\n  }\n}\n");
  launch.origin = absl::StrFormat("scatter of %d windows of %d elements",
                                  positions, Product(sc.walk.sizes));
  Add(std::move(launch));
  return absl::OkStatus();
}

void Generator::ScatterOperands(const host::ScatterKernel& sc,
                                const std::vector<std::string>& storage,
                                Launch* launch,
                                std::vector<std::string>* params) {
  const int n = static_cast<int>(sc.types.size());
  for (int i = 0; i < n; ++i) {
    launch->slots.push_back(sc.outputs[i]);
    params->push_back(absl::StrFormat("%s* out%d", storage[i], i));
  }
  for (int i = 0; i < n; ++i) {
    launch->slots.push_back(sc.updates[i]);
    params->push_back(absl::StrFormat("const %s* upd%d", storage[i], i));
  }
}

absl::StatusOr<std::string> Generator::ScatterCombine(
    const host::ScatterKernel& sc, const std::vector<std::string>& storage,
    const std::string& indent) {
  const int n = static_cast<int>(sc.types.size());
  const PrimitiveType t0 = sc.types[0];
  std::string k;
  if (sc.combiner == host::Combiner::kReplace) {
    absl::StrAppendFormat(&k, "%sout0[t] = upd0[s];\n", indent);
  } else if (sc.combiner == host::Combiner::kAdd) {
    if (t0 == PrimitiveType::kPred) {
      absl::StrAppendFormat(
          &k, "%sout0[t] = (pj_u8)((out0[t] | upd0[s]) != 0);\n", indent);
    } else if (IsFloat(t0) || hlo::IsComplex(t0)) {
      absl::StrAppendFormat(&k, "%sout0[t] = %s;\n", indent,
                            Store(t0, absl::StrCat(Load(t0, "out0[t]"), " + ",
                                                   Load(t0, "upd0[s]"))));
    } else {
      absl::StrAppendFormat(&k, "%sout0[t] = pj_iadd<%s>(out0[t], upd0[s]);\n",
                            indent, storage[0]);
    }
  } else {
    std::vector<std::string> inputs;
    for (int i = 0; i < n; ++i) {
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(sc.types[i]));
      absl::StrAppendFormat(&k, "%sconst %s c%d = %s;\n", indent, ct, i,
                            Load(sc.types[i], absl::StrFormat("out%d[t]", i)));
      inputs.push_back(absl::StrCat("c", i));
    }
    for (int i = 0; i < n; ++i) {
      PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(sc.types[i]));
      absl::StrAppendFormat(&k, "%sconst %s u%d = %s;\n", indent, ct, i,
                            Load(sc.types[i], absl::StrFormat("upd%d[s]", i)));
      inputs.push_back(absl::StrCat("u", i));
    }
    PJRT_ASSIGN_OR_RETURN(std::vector<std::string> results,
                          EmitExpression(sc.region, inputs, "v", indent, &k));
    for (int i = 0; i < n; ++i) {
      absl::StrAppendFormat(&k, "%sout%d[t] = %s;\n", indent, i,
                            Store(sc.types[i], results[i]));
    }
  }
  return k;
}

absl::Status Generator::EmitSortedScatter(
    const host::ScatterKernel& sc, const std::vector<std::string>& storage) {
  const int64_t positions = Product(sc.reader.batch_sizes);
  const int64_t total = positions * Product(sc.walk.sizes);
  const int64_t elements = sc.operand_bytes[0] / hlo::ByteWidth(sc.types[0]);
  // Keys: each update element's target, `elements` (after every target)
  // for one whose window does not fit.
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) <= elements) ++bits;
  Launch sort;
  sort.kind = Launch::Kind::kSort;
  sort.sort.bits = bits;
  sort.sort.key_bytes = bits <= 8 ? 1 : bits <= 16 ? 2 : bits <= 32 ? 4 : 8;
  sort.sort.n = total;
  sort.sort.pairs = true;
  const std::string word = UnsignedWord(sort.sort.key_bytes);
  for (int a = 0; a < 2; ++a)
    sort.slots.push_back(Temporary(total * sort.sort.key_bytes));
  for (int a = 0; a < 2; ++a) sort.slots.push_back(Temporary(total * 4));
  PJRT_ASSIGN_OR_RETURN(const std::string it, CudaStorageType(sc.reader.type));
  const std::string what =
      absl::StrFormat("scatter of %d windows of %d elements, sorted by target",
                      positions, Product(sc.walk.sizes));
  std::string& k = shared_->source;
  {
    Launch launch;
    launch.kernel = Name("scatter_targets");
    launch.blocks = BlocksFor(total);
    launch.slots = {sort.slots[0], sort.slots[2], sc.indices};
    Open(&launch, {absl::StrCat(word, "* keys"), "unsigned* sources",
                   absl::StrCat("const ", it, "* indices")});
    absl::StrAppend(
        &k,
        ScatterElementLoop(
            sc,
            absl::StrFormat("    keys[i] = (%s)%dull;\n    sources[i] = 0;\n",
                            word, elements)),
        absl::StrFormat("    keys[i] = (%s)t;\n    sources[i] = (unsigned)s;\n"
                        "  }\n}\n",
                        word));
    launch.origin = absl::StrFormat("%s: each update's target", what);
    Add(std::move(launch));
  }
  const int keys = sort.slots[1], sources = sort.slots[3];
  sort.origin = absl::StrFormat(
      "%s: CUB radix sort of %d-bit targets and "
      "their updates",
      what, bits);
  Add(std::move(sort));
  Launch launch;
  launch.kernel = Name("scatter_sorted");
  launch.blocks = BlocksFor(total);
  std::vector<std::string> params;
  ScatterOperands(sc, storage, &launch, &params);
  launch.slots.push_back(keys);
  params.push_back(absl::StrCat("const ", word, "* keys"));
  launch.slots.push_back(sources);
  params.push_back("const unsigned* sources");
  Open(&launch, params);
  // A thread per first update of a target applies that target's updates
  // in the host's order (the sort is stable).
  absl::StrAppendFormat(&k, kLoopHead, "long long", "long long", total,
                        "long long");
  absl::StrAppendFormat(
      &k,
      "    const %s key = keys[i];\n"
      "    if (key == (%s)%dull || (i > 0 && keys[i - 1] == key)) continue;\n"
      "    const long long t = (long long)key;\n"
      "    for (long long m = i; m < %dLL && keys[m] == key; ++m) {\n"
      "      const long long s = sources[m];\n",
      word, word, elements, total);
  PJRT_ASSIGN_OR_RETURN(std::string combine,
                        ScatterCombine(sc, storage, "      "));
  absl::StrAppend(&k, combine, "    }\n  }\n}\n");
  launch.origin = absl::StrFormat("%s: each target's updates in order", what);
  Add(std::move(launch));
  return absl::OkStatus();
}

namespace {

// Opens the loops over the operand elements of the window of output index
// (c0, c1, ...), as the host's WindowGeometry visits them: each
// dimension's span first (pj_window_span), then one loop per dimension
// over its elements, x<d> the operand index, whose term joins `offset`.
// Only the positions that land on an element are visited, so the work is
// bounded by the operand's size whatever the window's. Closed by
// CloseWindowLoops.
void EmitWindowLoops(const host::WindowGeometry& g, std::string* k,
                     std::string* indent, std::string* offset) {
  const int rank = static_cast<int>(g.in_dims.size());
  std::string any = "true";
  for (int d = 0; d < rank; ++d) {
    const hlo::WindowDimension& wd = g.window[d];
    const host::WindowStep& s = g.steps[d];
    absl::StrAppendFormat(
        k,
        "%sconst pj_span s%d = pj_window_span((long long)c%d, %dll, %dll, "
        "%dll, %dll, %dll, %dll, %dll, %dll, %dll);\n",
        *indent, d, d, wd.stride, wd.padding_low, wd.size, wd.window_dilation,
        s.base_dilation, g.in_dims[d], s.divisor, s.modulus, s.inverse);
    absl::StrAppendFormat(&any, " && s%d.count > 0", d);
  }
  absl::StrAppendFormat(k, "%sif (%s) {\n", *indent, any);
  *indent += "  ";
  for (int d = 0; d < rank; ++d) {
    absl::StrAppendFormat(
        k,
        "%sfor (long long k%d = 0; k%d < s%d.count; ++k%d) {\n"
        "%s  const long long x%d = s%d.first + k%d * s%d.step;\n",
        *indent, d, d, d, d, *indent, d, d, d, d);
    *indent += "  ";
    absl::StrAppendFormat(offset, " + x%d * %d", d, g.in_strides[d]);
  }
}

void CloseWindowLoops(int rank, std::string* k, std::string* indent) {
  for (int d = 0; d <= rank; ++d) {
    indent->resize(indent->size() - 2);
    absl::StrAppendFormat(k, "%s}\n", *indent);
  }
}

}  // namespace

absl::Status Generator::EmitReduceWindow(const host::ReduceWindowKernel& rw) {
  const int64_t total = Product(rw.out_dims);
  if (total == 0) return absl::OkStatus();
  const int n = static_cast<int>(rw.types.size());
  const host::WindowGeometry& g = rw.geometry;
  const int rank = static_cast<int>(g.in_dims.size());
  std::vector<std::string> storage(n), compute(n);
  for (int j = 0; j < n; ++j) {
    PJRT_ASSIGN_OR_RETURN(storage[j], CudaStorageType(rw.types[j]));
    PJRT_ASSIGN_OR_RETURN(compute[j], ComputeType(rw.types[j]));
  }
  const char* idx = IndexType(std::max(total, Product(g.in_dims)));
  Launch launch;
  launch.kernel = Name("reduce_window");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(total);
  std::vector<std::string> params;
  for (int j = 0; j < n; ++j) {
    launch.slots.push_back(rw.outputs[j]);
    params.push_back(absl::StrFormat("%s* out%d", storage[j], j));
  }
  for (int j = 0; j < n; ++j) {
    launch.slots.push_back(rw.inputs[j]);
    params.push_back(absl::StrFormat("const %s* in%d", storage[j], j));
  }
  for (int j = 0; j < n; ++j) {
    launch.slots.push_back(rw.inits[j]);
    params.push_back(absl::StrFormat("const %s* init%d", storage[j], j));
  }
  std::string& k = shared_->source;
  Open(&launch, params);
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, total, idx);
  absl::StrAppend(&k, SplitIndex(rw.out_dims, idx, "    "));
  for (int j = 0; j < n; ++j) {
    absl::StrAppendFormat(&k, "    %s a%d = %s;\n", compute[j], j,
                          Load(rw.types[j], absl::StrFormat("init%d[0]", j)));
  }
  std::string indent = "    ", offset = "0";
  EmitWindowLoops(g, &k, &indent, &offset);
  absl::StrAppendFormat(&k, "%sconst long long at = %s;\n", indent, offset);
  std::vector<std::string> inputs;
  for (int j = 0; j < n; ++j) inputs.push_back(absl::StrCat("a", j));
  for (int j = 0; j < n; ++j) {
    absl::StrAppendFormat(&k, "%sconst %s e%d = %s;\n", indent, compute[j], j,
                          Load(rw.types[j], absl::StrFormat("in%d[at]", j)));
    inputs.push_back(absl::StrCat("e", j));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<std::string> results,
                        EmitExpression(rw.region, inputs, "v", indent, &k));
  for (int j = 0; j < n; ++j) {
    absl::StrAppendFormat(&k, "%sa%d = %s;\n", indent, j, results[j]);
  }
  CloseWindowLoops(rank, &k, &indent);
  for (int j = 0; j < n; ++j) {
    absl::StrAppendFormat(&k, "    out%d[i] = %s;\n", j,
                          Store(rw.types[j], absl::StrCat("a", j)));
  }
  absl::StrAppend(&k, "  }\n}\n");
  launch.origin = absl::StrFormat("reduce-window over [%s] into [%s]",
                                  absl::StrJoin(g.in_dims, ","),
                                  absl::StrJoin(rw.out_dims, ","));
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitSelectAndScatter(
    const host::SelectAndScatterKernel& ss) {
  const host::WindowGeometry& g = ss.geometry;
  const int rank = static_cast<int>(g.in_dims.size());
  const int64_t count = Product(g.in_dims);
  const int64_t windows = Product(ss.source_dims);
  if (count == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string op_storage,
                        CudaStorageType(ss.operand_type));
  PJRT_ASSIGN_OR_RETURN(std::string op_compute, ComputeType(ss.operand_type));
  PJRT_ASSIGN_OR_RETURN(std::string src_storage,
                        CudaStorageType(ss.source_type));
  PJRT_ASSIGN_OR_RETURN(std::string src_compute, ComputeType(ss.source_type));
  const int selected = Temporary(std::max<int64_t>(windows, 1) * 8);
  std::string& k = shared_->source;
  if (windows > 0) {
    const char* idx = IndexType(std::max(windows, count));
    Launch launch;
    launch.kernel = Name("select");
    launch.threads = kThreads;
    launch.blocks = BlocksFor(windows);
    launch.slots = {selected, ss.operand};
    Open(&launch, {"long long* selected",
                   absl::StrCat("const ", op_storage, "* operand")});
    absl::StrAppendFormat(&k, kLoopHead, idx, idx, windows, idx);
    absl::StrAppend(&k, SplitIndex(ss.source_dims, idx, "    "));
    absl::StrAppend(&k, "    long long sel = -1;\n");
    std::string indent = "    ", offset = "0";
    EmitWindowLoops(g, &k, &indent, &offset);
    absl::StrAppendFormat(&k, "%sconst long long at = %s;\n", indent, offset);
    absl::StrAppendFormat(&k, "%sif (sel < 0) {\n%s  sel = at;\n%s} else {\n",
                          indent, indent, indent);
    absl::StrAppendFormat(&k, "%s  const %s a = %s;\n%s  const %s b = %s;\n",
                          indent, op_compute,
                          Load(ss.operand_type, "operand[sel]"), indent,
                          op_compute, Load(ss.operand_type, "operand[at]"));
    PJRT_ASSIGN_OR_RETURN(
        std::vector<std::string> keep,
        EmitExpression(ss.select, {"a", "b"}, "v", indent + "  ", &k));
    absl::StrAppendFormat(&k, "%s  if (!%s) sel = at;\n%s}\n", indent, keep[0],
                          indent);
    CloseWindowLoops(rank, &k, &indent);
    absl::StrAppend(&k, "    selected[i] = sel;\n  }\n}\n");
    launch.origin = absl::StrFormat(
        "select-and-scatter's selection in %d windows", windows);
    Add(std::move(launch));
  }
  const char* idx = IndexType(std::max(windows, count));
  Launch launch;
  launch.kernel = Name("select_and_scatter");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(count);
  launch.slots = {ss.output, ss.source, ss.init, selected};
  Open(&launch, {absl::StrCat(src_storage, "* out"),
                 absl::StrCat("const ", src_storage, "* source"),
                 absl::StrCat("const ", src_storage, "* init"),
                 "const long long* selected"});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, count, idx);
  absl::StrAppend(&k, SplitIndex(g.in_dims, idx, "    "));
  absl::StrAppendFormat(&k, "    %s acc = %s;\n", src_compute,
                        Load(ss.source_type, "init[0]"));
  // The windows whose element c sits at window coordinate w: o * stride +
  // w * window_dilation == c * base_dilation + padding_low.
  const std::vector<int64_t> source_strides =
      host::RowMajorStrides(ss.source_dims);
  std::string indent = "    ", window_at = "0";
  for (int d = 0; d < rank; ++d) {
    const hlo::WindowDimension& wd = g.window[d];
    absl::StrAppendFormat(&k,
                          "%sconst long long q%d = (long long)c%d * %d + %d;\n",
                          indent, d, d, wd.base_dilation, wd.padding_low);
    absl::StrAppendFormat(
        &k,
        "%sconst long long lo%d = pj_ceildiv(q%d - %d, %d), hi%d = "
        "pj_floordiv(q%d, %d);\n",
        indent, d, d, (wd.size - 1) * wd.window_dilation, wd.stride, d, d,
        wd.stride);
    absl::StrAppendFormat(&k,
                          "%sfor (long long o%d = lo%d < 0 ? 0 : lo%d; o%d "
                          "<= hi%d && o%d < %d; "
                          "++o%d) {\n",
                          indent, d, d, d, d, d, d, ss.source_dims[d], d);
    indent += "  ";
    absl::StrAppendFormat(&k,
                          "%sconst long long r%d = q%d - o%d * %d;\n"
                          "%sif (r%d %% %d != 0 || r%d / %d >= %d) continue;\n",
                          indent, d, d, d, wd.stride, indent, d,
                          wd.window_dilation, d, wd.window_dilation, wd.size);
    absl::StrAppendFormat(&window_at, " + o%d * %d", d, source_strides[d]);
  }
  absl::StrAppendFormat(&k, "%sconst long long e = %s;\n", indent, window_at);
  absl::StrAppendFormat(&k, "%sif (selected[e] == (long long)i) {\n", indent);
  absl::StrAppendFormat(&k, "%s  const %s s = %s;\n", indent, src_compute,
                        Load(ss.source_type, "source[e]"));
  PJRT_ASSIGN_OR_RETURN(
      std::vector<std::string> sum,
      EmitExpression(ss.scatter, {"acc", "s"}, "v", indent + "  ", &k));
  absl::StrAppendFormat(&k, "%s  acc = %s;\n%s}\n", indent, sum[0], indent);
  for (int d = 0; d < rank; ++d) {
    indent.resize(indent.size() - 2);
    absl::StrAppendFormat(&k, "%s}\n", indent);
  }
  absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n",
                        Store(ss.source_type, "acc"));
  launch.origin = absl::StrFormat("select-and-scatter into [%s]",
                                  absl::StrJoin(g.in_dims, ","));
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitMap(const host::MapKernel& m) {
  if (m.count == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string out_storage,
                        CudaStorageType(m.output_type));
  const char* idx = IndexType(m.count);
  Launch launch;
  launch.kernel = Name("map");
  launch.threads = kThreads;
  launch.blocks = BlocksFor(m.count);
  launch.slots = {m.output};
  std::vector<std::string> params = {absl::StrCat(out_storage, "* out")};
  for (size_t j = 0; j < m.inputs.size(); ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string st, CudaStorageType(m.types[j]));
    launch.slots.push_back(m.inputs[j]);
    params.push_back(absl::StrFormat("const %s* in%d", st, j));
  }
  std::string& k = shared_->source;
  Open(&launch, params);
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, m.count, idx);
  std::vector<std::string> inputs;
  for (size_t j = 0; j < m.inputs.size(); ++j) {
    PJRT_ASSIGN_OR_RETURN(std::string ct, ComputeType(m.types[j]));
    absl::StrAppendFormat(&k, "    const %s x%d = %s;\n", ct, j,
                          Load(m.types[j], absl::StrFormat("in%d[i]", j)));
    inputs.push_back(absl::StrCat("x", j));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<std::string> results,
                        EmitExpression(m.expr, inputs, "v", "    ", &k));
  absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n",
                        Store(m.output_type, results[0]));
  launch.origin = absl::StrFormat("map over %d elements", m.count);
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitConvolution(
    const host::ConvolutionKernelBase& conv) {
  const host::ConvPlan& p = conv.plan;
  const hlo::ConvolutionDimensions& d = p.dims;
  const int rank = p.spatial + 2;
  std::vector<int64_t> out_dims(rank);
  out_dims[d.output_batch] = p.out_batch;
  out_dims[d.output_feature] = p.out_features;
  for (int s = 0; s < p.spatial; ++s)
    out_dims[d.output_spatial[s]] = p.out_spatial[s];
  const int64_t count = Product(out_dims);
  if (count == 0) return absl::OkStatus();
  PJRT_ASSIGN_OR_RETURN(std::string lhs_storage, CudaStorageType(p.lhs_type));
  PJRT_ASSIGN_OR_RETURN(std::string rhs_storage, CudaStorageType(p.rhs_type));
  PJRT_ASSIGN_OR_RETURN(std::string out_storage, CudaStorageType(p.out_type));
  PJRT_ASSIGN_OR_RETURN(std::string out_compute, ComputeType(p.out_type));
  // Complex convolutions (every operand of the result's type) sum in it.
  const bool complex = hlo::IsComplex(p.out_type);
  const std::string acc_type = complex     ? out_compute
                               : conv.wide ? "double"
                                           : "float";
  const char* idx = IndexType(count);
  Launch launch;
  launch.kernel = Name("convolution");
  launch.blocks = BlocksFor(count);
  launch.slots = {conv.out, conv.lhs, conv.rhs};
  if (absl::StatusOr<CudnnConvProblem> problem = CudnnConvFor(p);
      problem.ok()) {
    using Direction = CudnnConvProblem::Direction;
    const bool filter_gradient =
        problem->direction == Direction::kBackwardFilter;
    // XLA's lhs and kernel, widened to f32 copies when cuDNN sums them so.
    int lhs = conv.lhs, rhs = conv.rhs;
    if (problem->widened) {
      const int64_t lhs_count = p.batch * p.in_features * Product(p.in_spatial);
      const int64_t rhs_count =
          p.in_per_group * p.out_features * Product(p.taps);
      lhs = Temporary(lhs_count * 4);
      EmitWidthConvert(lhs, PrimitiveType::kF32, conv.lhs, p.lhs_type,
                       lhs_count);
      rhs = Temporary(rhs_count * 4);
      EmitWidthConvert(rhs, PrimitiveType::kF32, conv.rhs, p.rhs_type,
                       rhs_count);
    }
    // XLA's lhs, kernel and output as cuDNN's x, w and y.
    int x = lhs, w = rhs, y = conv.out;
    if (problem->direction == Direction::kBackwardData) std::swap(x, y);
    if (filter_gradient) {
      w = conv.out;
      y = rhs;
    }
    if (problem->CopiesFilter()) {
      // The filter packed as cuDNN takes it: copied in before (run
      // whichever computes), reversed if cuDNN is to read it so, or for a
      // filter gradient out after cuDNN.
      host::CopyStep copy;
      copy.element_bytes = hlo::ByteWidth(problem->type);
      copy.dims = problem->w_dims;
      const int packed = Temporary(Product(copy.dims) * copy.element_bytes);
      host::AffineMap as_it_lies = {0, problem->filter_strides};
      if (problem->reversed) {
        for (size_t d = 2; d < copy.dims.size(); ++d) {
          as_it_lies.offset += (copy.dims[d] - 1) * as_it_lies.strides[d];
          as_it_lies.strides[d] = -as_it_lies.strides[d];
        }
      }
      const host::AffineMap packed_map = {0, problem->w_strides};
      copy.src = filter_gradient ? packed : rhs;
      copy.dst = filter_gradient ? conv.out : packed;
      copy.src_map = filter_gradient ? packed_map : as_it_lies;
      copy.dst_map = filter_gradient ? as_it_lies : packed_map;
      const size_t before = out_.launches.size();
      PJRT_RETURN_IF_ERROR(Emit(copy));
      if (filter_gradient) {
        if (out_.launches.size() != before + 1) {
          return absl::InternalError(
              "a filter gradient's copy out of cuDNN's packed layout is not "
              "one launch");
        }
        launch.cudnn_then =
            std::make_shared<const Launch>(std::move(out_.launches.back()));
        out_.launches.pop_back();
      }
      w = packed;
    }
    launch.cudnn = std::make_shared<const CudnnConvProblem>(*problem);
    launch.cudnn_slots = {x, w, y};
  } else {
    launch.cudnn_refusal = std::string(problem.status().message());
  }
  std::string& k = shared_->source;
  Open(&launch, {absl::StrCat(out_storage, "* out"),
                 absl::StrCat("const ", lhs_storage, "* lhs"),
                 absl::StrCat("const ", rhs_storage, "* rhs")});
  absl::StrAppendFormat(&k, kLoopHead, idx, idx, count, idx);
  absl::StrAppend(&k, SplitIndex(out_dims, idx, "    "));
  absl::StrAppendFormat(&k,
                        "    const long long b = c%d, oc = c%d;\n"
                        "    const long long g = oc / %dLL;\n",
                        d.output_batch, d.output_feature, p.out_per_group);
  absl::StrAppendFormat(
      &k, "    const long long image = (%s + b) * %dLL + %s * %dLL;\n",
      p.batch_groups > 1 ? absl::StrFormat("g * %dLL", p.out_batch) : "0LL",
      p.lhs_strides[d.input_batch],
      p.feature_groups > 1 ? absl::StrFormat("g * %dLL", p.in_per_group)
                           : "0LL",
      p.lhs_strides[d.input_feature]);
  const char* part =
      p.out_type == PrimitiveType::kC128 ? "double" : "float";  // if complex
  absl::StrAppendFormat(
      &k, "    %s acc = %s;\n", acc_type,
      complex ? absl::StrFormat("pj_cmake((%s)0, (%s)0)", part, part) : "0");
  std::string indent = "    ", in_at = "image", w_at = "0";
  for (int s = 0; s < p.spatial; ++s) {
    const hlo::WindowDimension& w = p.window[s];
    absl::StrAppendFormat(&k,
                          "%sfor (long long t%d = 0; t%d < %dLL; ++t%d) {\n",
                          indent, s, s, p.taps[s], s);
    indent += "  ";
    absl::StrAppendFormat(
        &k,
        "%sconst long long x%d = (long long)c%d * %dLL + t%d * %dLL - %dLL;\n"
        "%sif (x%d < 0 || x%d %% %dLL != 0 || x%d / %dLL >= %dLL) "
        "continue;\n",
        indent, s, d.output_spatial[s], w.stride, s, w.window_dilation,
        w.padding_low, indent, s, s, w.base_dilation, s, w.base_dilation,
        p.in_spatial[s]);
    absl::StrAppendFormat(&in_at, " + (x%d / %dLL) * %dLL", s, w.base_dilation,
                          p.lhs_strides[d.input_spatial[s]]);
    absl::StrAppendFormat(
        &w_at, " + %s * %dLL",
        w.reversal ? absl::StrFormat("(%dLL - t%d)", p.taps[s] - 1, s)
                   : absl::StrFormat("t%d", s),
        p.rhs_strides[d.kernel_spatial[s]]);
  }
  absl::StrAppendFormat(
      &k, "%sconst long long at = %s, wat = %s + oc * %dLL;\n", indent, in_at,
      w_at, p.rhs_strides[d.kernel_output_feature]);
  absl::StrAppendFormat(&k, "%sfor (long long ci = 0; ci < %dLL; ++ci) {\n",
                        indent, p.in_per_group);
  const std::string lhs_value = Load(
      p.lhs_type,
      absl::StrFormat("lhs[at + ci * %dLL]", p.lhs_strides[d.input_feature]));
  const std::string rhs_value =
      Load(p.rhs_type, absl::StrFormat("rhs[wat + ci * %dLL]",
                                       p.rhs_strides[d.kernel_input_feature]));
  if (complex) {
    absl::StrAppendFormat(&k, "%s  acc = acc + %s * %s;\n%s}\n", indent,
                          lhs_value, rhs_value, indent);
  } else {
    absl::StrAppendFormat(&k, "%s  acc += (%s)%s * (%s)%s;\n%s}\n", indent,
                          acc_type, lhs_value, acc_type, rhs_value, indent);
  }
  for (int s = 0; s < p.spatial; ++s) {
    indent.resize(indent.size() - 2);
    absl::StrAppendFormat(&k, "%s}\n", indent);
  }
  std::string value;
  if (complex) {
    value = "acc";
  } else if (p.out_type == PrimitiveType::kPred) {
    value = "pj_to_pred(acc)";
  } else if (hlo::IsFloatingPoint(p.out_type)) {
    value = Store(p.out_type, absl::StrFormat("(%s)acc", out_compute));
  } else if (IsSubByteInt(p.out_type)) {
    // The exact integer sum, wrapped to its bits.
    value = Round(p.out_type,
                  absl::StrFormat(
                      "(%s)(long long)fmin(fmax((double)acc, -9.0e18), 9.0e18)",
                      out_compute));
  } else {
    value = absl::StrFormat("pj_convert<%s, double>(acc)", out_compute);
  }
  absl::StrAppendFormat(&k, "    out[i] = %s;\n  }\n}\n", value);
  launch.origin =
      absl::StrFormat("convolution into [%s]", absl::StrJoin(out_dims, ","));
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitWhile(const host::WhileKernel& w) {
  Launch launch;
  launch.kind = Launch::Kind::kWhile;
  ControlFlow& c = launch.control;
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<const SubProgram> condition,
                        Sub(*w.condition));
  PJRT_ASSIGN_OR_RETURN(std::shared_ptr<const SubProgram> body, Sub(*w.body));
  c.temporaries =
      Temporary(std::max(condition->temporary_bytes, body->temporary_bytes));
  c.predicate = Temporary(8);
  c.programs = {std::move(condition), std::move(body)};
  c.init = w.init;
  c.state = w.state;
  c.spare = w.spare;
  c.bytes = w.bytes;
  c.scratch = w.scratch;
  c.trip_count = w.trip_count;
  c.graphs = w.trip_count >= kGraphMinimumTrips &&
             GraphCapturable(c.programs[1]->launches);
  launch.origin =
      w.trip_count >= 0
          ? absl::StrFormat(
                "while loop of %d iterations over %d state buffers%s",
                w.trip_count, w.state.size(),
                c.graphs ? absl::StrFormat(", its body in CUDA graphs of %d",
                                           kGraphIterations)
                         : "")
          : absl::StrFormat("while loop over %d state buffers", w.state.size());
  Add(std::move(launch));
  return absl::OkStatus();
}

absl::Status Generator::EmitConditional(const host::ConditionalKernel& k) {
  Launch launch;
  launch.kind = Launch::Kind::kConditional;
  ControlFlow& c = launch.control;
  int64_t temporaries = 0;
  for (const host::ConditionalKernel::Branch& b : k.branches) {
    PJRT_ASSIGN_OR_RETURN(std::shared_ptr<const SubProgram> branch,
                          Sub(*b.program));
    temporaries = std::max(temporaries, branch->temporary_bytes);
    c.programs.push_back(std::move(branch));
    c.inputs.push_back(b.inputs);
  }
  c.temporaries = Temporary(temporaries);
  c.selector = k.selector;
  c.selector_is_pred = k.selector_is_pred;
  c.outputs = k.outputs;
  c.scratch = k.scratch;
  launch.origin =
      absl::StrFormat("conditional of %d branches", k.branches.size());
  Add(std::move(launch));
  return absl::OkStatus();
}

}  // namespace pjrt::compiler::cuda::codegen_internal
