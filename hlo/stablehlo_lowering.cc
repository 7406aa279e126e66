// StableHLO ops that become more than one HLO line or need their
// attributes rewritten: constants, broadcasts, convolutions, all-to-all,
// complex min/max, collectives, while and conditional.
#include "hlo/stablehlo_internal.h"

namespace pjrt::hlo::stablehlo_internal {

absl::StatusOr<std::string> Translator::LiteralText(const Operation& op,
                                                    const Attribute& value,
                                                    const Shape& shape,
                                                    bool* splat) {
  const PrimitiveType type = shape.element_type();
  if (value.dense_resource) {
    return Unsupported(op, absl::StrCat("dense_resource<", value.text,
                                        "> constants are not supported; "
                                        "print the program with its "
                                        "constants in full"));
  }
  if (value.kind != AttrKind::kDense) {
    return Invalid(op, "the value must be dense<...>");
  }
  if (!shape.IsArray() && !IsArrayType(type)) {
    return Unsupported(
        op, absl::StrCat("constants of type ", mlir::MlirTypeString(shape),
                         " are not supported"));
  }
  const bool complex = IsComplex(type);
  const int64_t count = shape.ElementCount();
  const PrimitiveType part = type == PrimitiveType::kC64 ? PrimitiveType::kF32
                             : type == PrimitiveType::kC128
                                 ? PrimitiveType::kF64
                                 : type;
  const bool is_float = IsFloatingPoint(part);
  const bool wide = part == PrimitiveType::kF64;
  const int parts = complex ? 2 : 1;
  // Scalars are read one at a time, from the text or the hex bytes, so that
  // a large constant costs its HLO text and no more.
  int64_t scalar_count = 0;
  std::function<absl::StatusOr<std::string>(int64_t)> scalar;
  if (value.dense_hex) {
    const int bits = type == PrimitiveType::kPred ? 8 : BitWidth(part);
    const int bytes = std::max(1, bits / 8);
    const std::string& hex = value.hex;
    if (hex.size() % 2 != 0) return Invalid(op, "odd number of hex digits");
    const int64_t total = static_cast<int64_t>(hex.size() / 2);
    const int64_t per = int64_t{bytes} * parts;
    if (total != per && total != per * count) {
      return Invalid(op, absl::StrFormat("the hex value holds %d bytes; %s "
                                         "needs %d (or %d for a splat)",
                                         total, mlir::MlirTypeString(shape),
                                         per * count, per));
    }
    for (char h : hex) {
      if (!absl::ascii_isxdigit(static_cast<unsigned char>(h))) {
        return Invalid(op,
                       "the hex value holds a character that is not a "
                       "hexadecimal digit");
      }
    }
    scalar_count = total / bytes;
    scalar = [&hex, bytes, bits, type, part, is_float,
              wide](int64_t e) -> absl::StatusOr<std::string> {
      uint64_t pattern = 0;
      for (int k = 0; k < bytes; ++k) {
        int v = 0;
        for (int d = 0; d < 2; ++d) {
          const char h = hex[2 * (e * bytes + k) + d];
          v = v * 16 + (absl::ascii_isdigit(h)
                            ? h - '0'
                            : absl::ascii_tolower(h) - 'a' + 10);
        }
        pattern |= static_cast<uint64_t>(v) << (8 * k);
      }
      if (is_float) return FloatText(FloatFromBits(part, pattern), wide);
      if (type == PrimitiveType::kPred)
        return std::string(pattern ? "true" : "false");
      if (IsSignedInteger(type) && bits < 64 && ((pattern >> (bits - 1)) & 1)) {
        return absl::StrCat(
            static_cast<int64_t>(pattern | (~uint64_t{0} << bits)));
      }
      return absl::StrCat(pattern);
    };
  } else {
    if (value.dense_complex && !complex) {
      return Invalid(
          op, absl::StrCat("complex values for ", mlir::MlirTypeString(shape)));
    }
    // Real values for a complex type have zero imaginary parts.
    const bool widen = complex && !value.dense_complex;
    scalar_count = static_cast<int64_t>(value.scalars.size()) * (widen ? 2 : 1);
    scalar = [&value, &op, this, widen, type, is_float, part,
              wide](int64_t k) -> absl::StatusOr<std::string> {
      if (widen && k % 2 == 1) return std::string("0");
      const absl::string_view s = value.scalars[widen ? k / 2 : k];
      if (s == "true" || s == "false") {
        if (type == PrimitiveType::kPred) return std::string(s);
        return std::string(s == "true" ? "1" : "0");
      }
      absl::string_view digits = s;
      const bool negative = absl::ConsumePrefix(&digits, "-");
      if (absl::StartsWith(digits, "0x") || absl::StartsWith(digits, "0X")) {
        uint64_t pattern = 0;
        if (!absl::SimpleHexAtoi(digits, &pattern)) {
          return Invalid(op, absl::StrCat("cannot read ", s));
        }
        if (is_float) {
          const double v = FloatFromBits(part, pattern);
          return FloatText(negative ? -v : v, wide);
        }
        return absl::StrCat(negative ? "-" : "", pattern);
      }
      return std::string(s);
    };
  }
  const int64_t n = scalar_count / parts;
  if (n != 1 && n != count) {
    return Invalid(op, absl::StrFormat("the value has %d element(s); %s has %d",
                                       n, mlir::MlirTypeString(shape), count));
  }
  const auto element = [&](int64_t i) -> absl::StatusOr<std::string> {
    PJRT_ASSIGN_OR_RETURN(std::string first, scalar(parts * i));
    if (!complex) return first;
    PJRT_ASSIGN_OR_RETURN(std::string second, scalar(parts * i + 1));
    return absl::StrCat("(", first, ", ", second, ")");
  };
  if (count == 0) {
    // No elements: a broadcast of a zero scalar, however large the other
    // dimensions (HLO text would spell out their braces).
    *splat = true;
    return std::string(type == PrimitiveType::kPred ? "false"
                       : complex                    ? "(0, 0)"
                                                    : "0");
  }
  *splat = n == 1 && count != 1;
  const int rank = shape.rank();
  if (*splat || rank == 0) return element(0);
  std::string out;
  // One level of braces per dimension, opened and closed as the row-major
  // index rolls over.
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < count; ++i) {
    int open = rank;
    for (int d = rank - 1; d >= 0 && index[d] == 0; --d) open = d;
    if (i > 0) out += ", ";
    out.append(static_cast<size_t>(rank - open), '{');
    PJRT_ASSIGN_OR_RETURN(std::string text, element(i));
    out += text;
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < shape.dimensions(d)) break;
      index[d] = 0;
      out += "}";
    }
  }
  return out;
}

absl::Status Translator::Constant(Builder* b, const Operation& op) {
  PJRT_ASSIGN_OR_RETURN(const Attribute* value, RequireAttr(op, {"value"}));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  if (shape.IsTuple() || shape.IsToken()) {
    return Unsupported(op, "tuple and token constants are not supported");
  }
  bool splat = false;
  PJRT_ASSIGN_OR_RETURN(std::string literal,
                        LiteralText(op, *value, shape, &splat));
  const PrimitiveType type = shape.element_type();
  if ((IsSignedInteger(type) || IsUnsignedInteger(type)) &&
      shape.ElementCount() <= kMaxConstantOperand) {
    absl::StatusOr<std::vector<int64_t>> ints = IntsOf(op, *value, "value");
    if (ints.ok() && ints->size() == 1)
      ints->resize(shape.ElementCount(), (*ints)[0]);
    if (ints.ok() &&
        static_cast<int64_t>(ints->size()) == shape.ElementCount()) {
      b->integer_constants[op.results[0]] = *std::move(ints);
    }
  }
  if (splat) {
    const std::string scalar =
        EmitLine(b, &op, Shape(shape.element_type(), {}), "constant", literal);
    return Define(
        b, op,
        {Value{Emit(b, &op, shape, "broadcast", {scalar}, "dimensions={}"),
               shape}});
  }
  return Define(b, op,
                {Value{EmitLine(b, &op, shape, "constant", literal), shape}});
}

absl::Status Translator::BroadcastInDim(Builder* b, const Operation& op,
                                        Value operand, const Shape& result,
                                        const std::vector<int64_t>& dims) {
  if (static_cast<int>(dims.size()) != operand.shape.rank()) {
    return Invalid(
        op, absl::StrFormat("broadcast_dimensions has %d entries; "
                            "the operand %s has rank %d",
                            dims.size(), mlir::MlirTypeString(operand.shape),
                            operand.shape.rank()));
  }
  // HLO's broadcast keeps each operand dimension's size; StableHLO's also
  // expands size-1 dimensions, which are reshaped away first.
  std::vector<int64_t> kept_dims, kept_sizes;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= result.rank()) {
      return Invalid(op,
                     absl::StrFormat("broadcast dimension %d is out of "
                                     "range for the result %s",
                                     dims[i], mlir::MlirTypeString(result)));
    }
    const int64_t size = operand.shape.dimensions(i);
    if (size == 1 && result.dimensions(dims[i]) != 1) continue;
    kept_dims.push_back(dims[i]);
    kept_sizes.push_back(size);
  }
  if (kept_dims.size() != dims.size()) {
    const Shape reshaped(operand.shape.element_type(), kept_sizes);
    operand =
        Value{Emit(b, &op, reshaped, "reshape", {operand.name}), reshaped};
  }
  return Define(b, op,
                {Value{Emit(b, &op, result, "broadcast", {operand.name},
                            absl::StrCat("dimensions=", Braced(kept_dims))),
                       result}});
}

std::string Translator::WindowText(const std::vector<int64_t>& size,
                                   const std::vector<int64_t>& stride,
                                   const std::vector<std::vector<int64_t>>& pad,
                                   const std::vector<int64_t>& lhs_dilate,
                                   const std::vector<int64_t>& rhs_dilate,
                                   const std::vector<int64_t>& reversal) {
  if (size.empty()) return "";
  std::string out = absl::StrCat("window={size=", absl::StrJoin(size, "x"));
  if (!stride.empty())
    absl::StrAppend(&out, " stride=", absl::StrJoin(stride, "x"));
  if (!pad.empty()) {
    std::vector<std::string> parts;
    for (const auto& p : pad) {
      parts.push_back(
          absl::StrCat(p.size() > 0 ? p[0] : 0, "_", p.size() > 1 ? p[1] : 0));
    }
    absl::StrAppend(&out, " pad=", absl::StrJoin(parts, "x"));
  }
  if (!lhs_dilate.empty()) {
    absl::StrAppend(&out, " lhs_dilate=", absl::StrJoin(lhs_dilate, "x"));
  }
  if (!rhs_dilate.empty()) {
    absl::StrAppend(&out, " rhs_dilate=", absl::StrJoin(rhs_dilate, "x"));
  }
  if (!reversal.empty()) {
    absl::StrAppend(&out, " rhs_reversal=", absl::StrJoin(reversal, "x"));
  }
  out += "}";
  return out;
}

absl::Status Translator::Convolution(Builder* b, const Operation& op) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape result, ResultType(op));
  PJRT_ASSIGN_OR_RETURN(const Attribute* numbers,
                        RequireAttr(op, {"dimension_numbers"}));
  // [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
  std::string labels[3];
  std::vector<int64_t> kernel_spatial;
  {
    std::string body = numbers->body;
    std::vector<std::string> parts;
    size_t x = body.find("]x[");
    size_t arrow = body.find("->");
    if (x == std::string::npos || arrow == std::string::npos) {
      return ErrorAt(numbers->position, absl::StatusCode::kUnimplemented,
                     absl::StrCat(op.name, ": dimension numbers '", body,
                                  "' are not in the [b, 0, 1, f]x[0, 1, i, "
                                  "o]->[b, 0, 1, f] form"));
    }
    parts = {body.substr(0, x + 1), body.substr(x + 2, arrow - x - 2),
             body.substr(arrow + 2)};
    for (int p = 0; p < 3; ++p) {
      for (char c : parts[p]) {
        if (c == '[' || c == ']' || c == ',' || c == ' ') continue;
        labels[p].push_back(c);
      }
    }
    // Spatial sizes of the kernel, in spatial order.
    int spatial = 0;
    for (char c : labels[1]) spatial += absl::ascii_isdigit(c) ? 1 : 0;
    kernel_spatial.assign(spatial, 1);
    if (static_cast<int>(labels[1].size()) != in[1].shape.rank()) {
      return Invalid(op, absl::StrFormat("the kernel labels %s do not match "
                                         "the kernel's rank %d",
                                         labels[1], in[1].shape.rank()));
    }
    for (size_t i = 0; i < labels[1].size(); ++i) {
      const char c = labels[1][i];
      if (absl::ascii_isdigit(c) && c - '0' < spatial) {
        kernel_spatial[c - '0'] = in[1].shape.dimensions(i);
      }
    }
  }
  const size_t s = kernel_spatial.size();
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> stride,
                        Ints(op, {"window_strides"}));
  std::vector<std::vector<int64_t>> pad;
  if (const Attribute* p = Attr(op, {"padding"})) {
    PJRT_ASSIGN_OR_RETURN(pad, Matrix(op, *p, "padding"));
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> lhs, Ints(op, {"lhs_dilation"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> rhs, Ints(op, {"rhs_dilation"}));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> reversal,
                        Ints(op, {"window_reversal"}));
  for (auto* v : {&stride, &lhs, &rhs, &reversal}) {
    if (!v->empty() && v->size() != s) {
      return Invalid(op, absl::StrFormat("a window attribute has %d entries "
                                         "for %d spatial dimensions",
                                         v->size(), s));
    }
  }
  if (!pad.empty() && pad.size() != s) {
    return Invalid(op, absl::StrFormat("padding has %d rows for %d spatial "
                                       "dimensions",
                                       pad.size(), s));
  }
  PJRT_ASSIGN_OR_RETURN(int64_t features, Int(op, {"feature_group_count"}, 1));
  PJRT_ASSIGN_OR_RETURN(int64_t batches, Int(op, {"batch_group_count"}, 1));
  std::string attributes =
      WindowText(kernel_spatial, stride, pad, lhs, rhs, reversal);
  if (!attributes.empty()) attributes += ", ";
  absl::StrAppend(&attributes, "dim_labels=", labels[0], "_", labels[1], "->",
                  labels[2]);
  if (features != 1) {
    absl::StrAppend(&attributes, ", feature_group_count=", features);
  }
  if (batches != 1)
    absl::StrAppend(&attributes, ", batch_group_count=", batches);
  return Define(b, op,
                {Value{Emit(b, &op, result, "convolution",
                            {in[0].name, in[1].name}, attributes),
                       result}});
}

absl::Status Translator::AllToAll(Builder* b, const Operation& op) {
  PJRT_ASSIGN_OR_RETURN(int64_t split, Int(op, {"split_dimension"}, {}));
  PJRT_ASSIGN_OR_RETURN(int64_t concat, Int(op, {"concat_dimension"}, {}));
  PJRT_ASSIGN_OR_RETURN(int64_t count, Int(op, {"split_count"}, {}));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (in.empty() || op.result_types.size() != in.size()) {
    return Invalid(op, "needs one result per operand");
  }
  PJRT_ASSIGN_OR_RETURN(std::string tail, ReplicaGroups(op));
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  if (channel.has_value()) absl::StrAppend(&tail, ", channel_id=", *channel);
  // Each operand is an all-to-all of its own. HLO's array all-to-all splits
  // and concatenates one dimension; with two, the split dimension is first
  // made [count, size / count], the all-to-all exchanges along the count
  // axis, and a transpose and a reshape move what arrived into the concat
  // dimension, in the order of the senders.
  std::vector<Value> results;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& shape = in[i].shape;
    const Shape& result = op.result_types[i];
    const int rank = shape.rank();
    if (split < 0 || split >= rank || concat < 0 || concat >= rank ||
        count < 1 || shape.dimensions(split) % count != 0) {
      return Invalid(
          op,
          absl::StrFormat("split_dimension %d, concat_dimension %d and "
                          "split_count %d do not fit the operand %s",
                          split, concat, count, mlir::MlirTypeString(shape)));
    }
    if (split == concat) {
      results.push_back(
          Value{Emit(b, &op, result, "all-to-all", {in[i].name},
                     absl::StrCat("dimensions={", split, "}, ", tail)),
                result});
      continue;
    }
    std::vector<int64_t> dims(shape.dimensions().begin(),
                              shape.dimensions().end());
    std::vector<int64_t> y = dims;
    y[split] = count;
    y.insert(y.begin() + split + 1, dims[split] / count);
    const Shape split_shape(shape.element_type(), y);
    const std::string reshaped =
        Emit(b, &op, split_shape, "reshape", {in[i].name});
    const std::string exchanged =
        Emit(b, &op, split_shape, "all-to-all", {reshaped},
             absl::StrCat("dimensions={", split, "}, ", tail));
    // The count axis goes just before the concat dimension (numbered in y).
    const int64_t c = concat < split ? concat : concat + 1;
    std::vector<int64_t> order;
    for (int64_t a = 0; a < static_cast<int64_t>(y.size()); ++a) {
      if (a == split) continue;
      if (a == c) order.push_back(split);
      order.push_back(a);
    }
    std::vector<int64_t> t;
    for (int64_t a : order) t.push_back(y[a]);
    const Shape transposed_shape(shape.element_type(), t);
    const std::string transposed =
        Emit(b, &op, transposed_shape, "transpose", {exchanged},
             absl::StrCat("dimensions=", Braced(order)));
    results.push_back(
        Value{Emit(b, &op, result, "reshape", {transposed}), result});
  }
  return Define(b, op, std::move(results));
}

absl::StatusOr<std::string> Translator::PlaceInGroup(
    Builder* b, const Operation& op,
    const std::vector<std::vector<int64_t>>& groups, bool by_partition) {
  // Each process's place in its group (-1: in none), by its id; the entry
  // past the largest id is -1, and a larger id reads it (dynamic-slice
  // clamps).
  int64_t largest = -1;
  for (const auto& g : groups) {
    for (int64_t id : g) {
      if (id < 0 || id >= kMaxAttributeValues) {
        return Invalid(op, absl::StrFormat("replica_groups holds %d, not a "
                                           "process id in [0, %d)",
                                           id, kMaxAttributeValues));
      }
      largest = std::max(largest, id);
    }
  }
  std::vector<int64_t> place(largest + 2, -1);
  for (const auto& g : groups) {
    for (size_t k = 0; k < g.size(); ++k) {
      if (place[g[k]] != -1) {
        return Invalid(op, absl::StrFormat("process %d is in replica_groups "
                                           "twice",
                                           g[k]));
      }
      place[g[k]] = static_cast<int64_t>(k);
    }
  }
  const Shape s32(PrimitiveType::kS32, {});
  const Shape table_shape(PrimitiveType::kS32,
                          {static_cast<int64_t>(place.size())});
  const std::string table =
      EmitLine(b, &op, table_shape, "constant",
               absl::StrCat("{", absl::StrJoin(place, ", "), "}"));
  const Shape u32(PrimitiveType::kU32, {});
  const std::string id =
      Emit(b, &op, s32, "convert",
           {EmitLine(b, &op, u32, by_partition ? "partition-id" : "replica-id",
                     "")});
  return Emit(b, &op, s32, "reshape",
              {Emit(b, &op, Shape(PrimitiveType::kS32, {1}), "dynamic-slice",
                    {table, id}, "dynamic_slice_sizes={1}")});
}

absl::Status Translator::CollectiveReduce(Builder* b, const Operation& op,
                                          absl::string_view /*name*/) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  if (op.regions.size() != 1) return Invalid(op, "needs one reducer region");
  if (shape.IsTuple()) return Invalid(op, "takes no tuple operand");
  PJRT_ASSIGN_OR_RETURN(const Attribute* groups_attr,
                        RequireAttr(op, {"replica_groups"}));
  PJRT_ASSIGN_OR_RETURN(auto groups,
                        Matrix(op, *groups_attr, "replica_groups"));
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  PJRT_ASSIGN_OR_RETURN(std::string mine,
                        PlaceInGroup(b, op, groups, channel.has_value()));
  // Every group reduces as an all-reduce (the processes up to the largest
  // named that are in no group, alone); its first process keeps the
  // result, the others get zeros.
  std::vector<bool> named;
  for (const auto& g : groups) {
    for (int64_t id : g) {
      if (static_cast<size_t>(id) >= named.size()) named.resize(id + 1);
      named[id] = true;
    }
  }
  std::vector<std::string> texts;
  for (const auto& g : groups) texts.push_back(Braced(g));
  for (size_t id = 0; id < named.size(); ++id) {
    if (!named[id]) texts.push_back(absl::StrCat("{", id, "}"));
  }
  PJRT_ASSIGN_OR_RETURN(std::string reducer,
                        ClosedRegion(b, op, op.regions[0], "reducer"));
  std::string attributes = absl::StrCat(
      "replica_groups={", absl::StrJoin(texts, ","), "}, to_apply=%", reducer);
  if (channel) absl::StrAppend(&attributes, ", channel_id=", *channel);
  const std::string reduced =
      Emit(b, &op, shape, "all-reduce", {in[0].name}, attributes);
  const Shape s32(PrimitiveType::kS32, {});
  const std::string is_root = Emit(
      b, &op, shape.WithElementType(PrimitiveType::kPred), "broadcast",
      {Emit(b, &op, Shape(PrimitiveType::kPred, {}), "compare",
            {mine, EmitLine(b, &op, s32, "constant", "0")}, "direction=EQ")},
      "dimensions={}");
  return Define(b, op,
                {Value{Emit(b, &op, shape, "select",
                            {is_root, reduced, EmitZeros(b, &op, shape)}),
                       shape}});
}

absl::Status Translator::DynamicRootBroadcast(Builder* b, const Operation& op) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (in.size() < 2 || op.result_types.size() != in.size() - 1) {
    return Invalid(op,
                   "with has_dynamic_root takes its operands, then the "
                   "roots, and has one result per operand");
  }
  const size_t n = in.size() - 1;
  const Shape& roots = in[n].shape;
  if (roots.IsTuple() || roots.rank() != 1 ||
      roots.dimensions(0) != static_cast<int64_t>(n) ||
      !(IsSignedInteger(roots.element_type()) ||
        IsUnsignedInteger(roots.element_type()))) {
    return Invalid(op, absl::StrFormat("its roots are %s; they must be "
                                       "integers, one per operand (%d)",
                                       mlir::MlirTypeString(roots), n));
  }
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  if (channel.has_value()) {
    return Unsupported(op,
                       "has_dynamic_root across partitions (with a "
                       "channel) is not supported; across replicas it is");
  }
  PJRT_ASSIGN_OR_RETURN(const Attribute* groups_attr,
                        RequireAttr(op, {"replica_groups"}));
  PJRT_ASSIGN_OR_RETURN(auto groups,
                        Matrix(op, *groups_attr, "replica_groups"));
  std::vector<std::string> texts;
  for (const auto& g : groups) {
    if (g.size() != groups[0].size()) {
      return Unsupported(op, "has_dynamic_root needs groups of one size");
    }
    texts.push_back(Braced(g));
  }
  const int64_t size = groups.empty() ? 0 : groups[0].size();
  // Every process gathers its group's operands and keeps the root's: the
  // root's bits, whatever it is.
  const Shape s32(PrimitiveType::kS32, {});
  const std::string zero = EmitLine(b, &op, s32, "constant", "0");
  const std::string attributes = absl::StrCat(
      "dimensions={0}, replica_groups={", absl::StrJoin(texts, ","), "}");
  std::vector<Value> results;
  for (size_t i = 0; i < n; ++i) {
    const Shape& shape = op.result_types[i];
    if (shape.IsTuple() || in[i].shape != shape) {
      return Invalid(op, absl::StrFormat("result %d is %s but operand %d is %s",
                                         i, mlir::MlirTypeString(shape), i,
                                         mlir::MlirTypeString(in[i].shape)));
    }
    std::vector<int64_t> one = {1};
    one.insert(one.end(), shape.dimensions().begin(), shape.dimensions().end());
    std::vector<int64_t> all = one;
    all[0] = size;
    const Shape piece(shape.element_type(), one);
    const std::string gathered =
        Emit(b, &op, Shape(shape.element_type(), all), "all-gather",
             {Emit(b, &op, piece, "reshape", {in[i].name})}, attributes);
    const std::string root =
        Emit(b, &op, s32, "convert",
             {Emit(b, &op, Shape(roots.element_type(), {}), "reshape",
                   {Emit(b, &op, Shape(roots.element_type(), {1}), "slice",
                         {in[n].name},
                         absl::StrFormat("slice={[%d:%d]}", i, i + 1))})});
    std::vector<std::string> starts = {gathered, root};
    for (int d = 0; d < shape.rank(); ++d) starts.push_back(zero);
    results.push_back(
        Value{Emit(b, &op, shape, "reshape",
                   {Emit(b, &op, piece, "dynamic-slice", starts,
                         absl::StrCat("dynamic_slice_sizes=", Braced(one)))}),
              shape});
  }
  return Define(b, op, std::move(results));
}

absl::Status Translator::CollectiveBroadcast(Builder* b, const Operation& op,
                                             absl::string_view /*name*/) {
  const Attribute* dynamic = Attr(op, {"has_dynamic_root"});
  if (dynamic != nullptr &&
      (dynamic->kind == AttrKind::kUnit || dynamic->boolean)) {
    return DynamicRootBroadcast(b, op);
  }
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  if (in.empty() || op.result_types.size() != in.size()) {
    return Invalid(op, "needs one result per operand");
  }
  PJRT_ASSIGN_OR_RETURN(const Attribute* groups_attr,
                        RequireAttr(op, {"replica_groups"}));
  PJRT_ASSIGN_OR_RETURN(auto groups,
                        Matrix(op, *groups_attr, "replica_groups"));
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  // HLO's collective-broadcast, which the shared passes make permutes
  // (hlo/passes.h).
  std::vector<std::string> texts;
  for (const auto& g : groups) texts.push_back(Braced(g));
  std::string attributes =
      absl::StrCat("replica_groups={", absl::StrJoin(texts, ","), "}");
  if (channel) absl::StrAppend(&attributes, ", channel_id=", *channel);
  if (in.size() == 1) {
    const Shape& shape = op.result_types[0];
    return Define(b, op,
                  {Value{Emit(b, &op, shape, "collective-broadcast", Names(in),
                              attributes),
                         shape}});
  }
  const Shape tuple_shape = Shape::Tuple(op.result_types);
  const std::string tuple =
      Emit(b, &op, tuple_shape, "collective-broadcast", Names(in), attributes);
  std::vector<Value> results;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& shape = op.result_types[i];
    results.push_back(Value{Emit(b, &op, shape, "get-tuple-element", {tuple},
                                 absl::StrCat("index=", i)),
                            shape});
  }
  return Define(b, op, std::move(results));
}

absl::StatusOr<std::vector<int64_t>> Translator::ConstantOperand(
    Builder* b, const Operation& op, size_t i, absl::string_view what) {
  if (i >= op.operands.size()) {
    return Invalid(op, absl::StrFormat("needs %s as operand %d", what, i));
  }
  const auto it = b->integer_constants.find(op.operands[i].name);
  if (it == b->integer_constants.end()) {
    return Unsupported(
        op, absl::StrFormat("%s (operand %d, %s) must be an integer constant "
                            "of this region: pjrtd runs static shapes",
                            what, i, op.operands[i].name));
  }
  return it->second;
}

absl::Status Translator::DynamicWithConstants(Builder* b, const Operation& op,
                                              absl::string_view name) {
  const auto ints = [](const std::vector<int64_t>& values) {
    Attribute a;
    a.kind = AttrKind::kArray;
    for (int64_t v : values) {
      Attribute e;
      e.kind = AttrKind::kInt;
      e.text = absl::StrCat(v);
      a.elements.push_back(std::move(e));
    }
    return a;
  };
  // The static op: `keep` operands, and the constants as attributes.
  const auto rewrite =
      [&](absl::string_view static_name, size_t keep,
          const std::vector<std::pair<std::string, Attribute>>& attributes) {
        Operation s = op;
        s.name = absl::StrCat("stablehlo.", static_name);
        s.operands.resize(keep);
        if (s.has_operand_types && s.operand_types.size() > keep) {
          s.operand_types.resize(keep);
        }
        for (const auto& attribute : attributes) {
          const std::string& key = attribute.first;
          std::erase_if(s.attributes, [&](const mlir::NamedAttribute& a) {
            return a.first == key;
          });
          s.attributes.emplace_back(key, attribute.second);
        }
        return s;
      };
  Operation s;
  absl::Status status;
  if (name == "dynamic_pad") {
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 5));
    PJRT_ASSIGN_OR_RETURN(auto low,
                          ConstantOperand(b, op, 2, "edge_padding_low"));
    PJRT_ASSIGN_OR_RETURN(auto high,
                          ConstantOperand(b, op, 3, "edge_padding_high"));
    PJRT_ASSIGN_OR_RETURN(auto interior,
                          ConstantOperand(b, op, 4, "interior_padding"));
    s = rewrite("pad", 2,
                {{"edge_padding_low", ints(low)},
                 {"edge_padding_high", ints(high)},
                 {"interior_padding", ints(interior)}});
    status = PadOp(b, s, "pad");
  } else if (name == "dynamic_gather") {
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 3));
    PJRT_ASSIGN_OR_RETURN(auto sizes, ConstantOperand(b, op, 2, "slice_sizes"));
    s = rewrite("gather", 2, {{"slice_sizes", ints(sizes)}});
    status = GatherOp(b, s, "gather");
  } else if (name == "dynamic_conv") {
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 3));
    PJRT_ASSIGN_OR_RETURN(auto padding, ConstantOperand(b, op, 2, "padding"));
    if (padding.size() % 2 != 0) {
      return Invalid(op, "padding must hold (low, high) pairs");
    }
    Attribute rows;
    rows.kind = AttrKind::kArray;
    for (size_t i = 0; i + 1 < padding.size(); i += 2) {
      rows.elements.push_back(ints({padding[i], padding[i + 1]}));
    }
    s = rewrite("convolution", 2, {{"padding", rows}});
    status = Convolution(b, s);
  } else {  // real_dynamic_slice
    PJRT_RETURN_IF_ERROR(ExpectOperands(op, 4));
    PJRT_ASSIGN_OR_RETURN(auto start,
                          ConstantOperand(b, op, 1, "start_indices"));
    PJRT_ASSIGN_OR_RETURN(auto limit,
                          ConstantOperand(b, op, 2, "limit_indices"));
    PJRT_ASSIGN_OR_RETURN(auto strides, ConstantOperand(b, op, 3, "strides"));
    s = rewrite("slice", 1,
                {{"start_indices", ints(start)},
                 {"limit_indices", ints(limit)},
                 {"strides", ints(strides)}});
    status = SliceOp(b, s, "slice");
  }
  // What the static op read of the attributes it was given, the dynamic op
  // used (the copy's own are forgotten: their memory goes with it).
  for (const auto& [key, value] : s.attributes) {
    if (!used_.erase(&value)) continue;
    for (const auto& [k, v] : op.attributes) {
      if (k == key) used_.insert(&v);
    }
  }
  return status;
}

absl::Status Translator::ComplexMinMax(Builder* b, const Operation& op,
                                       bool maximum) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 2));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultType(op));
  const PrimitiveType part = shape.element_type() == PrimitiveType::kC64
                                 ? PrimitiveType::kF32
                                 : PrimitiveType::kF64;
  std::vector<int64_t> dims(shape.dimensions().begin(),
                            shape.dimensions().end());
  const Shape real(part, dims), pred(PrimitiveType::kPred, dims);
  const auto compare = [&](const std::string& x, const std::string& y,
                           absl::string_view direction) {
    return Emit(b, &op, pred, "compare", {x, y},
                absl::StrCat("direction=", direction));
  };
  const std::string ar = Emit(b, &op, real, "real", {in[0].name});
  const std::string br = Emit(b, &op, real, "real", {in[1].name});
  const std::string ai = Emit(b, &op, real, "imag", {in[0].name});
  const std::string bi = Emit(b, &op, real, "imag", {in[1].name});
  // The first operand wins when its real part is beyond the second's, or
  // equal to it with the imaginary part beyond or equal.
  const std::string beyond = compare(ar, br, maximum ? "GT" : "LT");
  const std::string tie =
      Emit(b, &op, pred, "and",
           {compare(ar, br, "EQ"), compare(ai, bi, maximum ? "GE" : "LE")});
  const std::string pick = Emit(b, &op, pred, "or", {beyond, tie});
  return Define(
      b, op,
      {Value{Emit(b, &op, shape, "select", {pick, in[0].name, in[1].name}),
             shape}});
}

absl::StatusOr<std::string> Translator::ReplicaGroups(const Operation& op) {
  return ReplicaGroupsOf(op, Attr(op, {"replica_groups"}));
}

absl::StatusOr<std::string> Translator::ReplicaGroupsOf(const Operation& op,
                                                        const Attribute* a) {
  if (a == nullptr) return std::string("replica_groups={}");
  PJRT_ASSIGN_OR_RETURN(auto rows, Matrix(op, *a, "replica_groups"));
  std::vector<std::string> groups;
  for (const auto& row : rows) {
    std::vector<int64_t> ids;
    for (int64_t id : row) {
      if (id >= 0) ids.push_back(id);  // -1 pads ragged groups
    }
    groups.push_back(Braced(ids));
  }
  return absl::StrCat("replica_groups={", absl::StrJoin(groups, ","), "}");
}

absl::Status Translator::Collective(Builder* b, const Operation& op,
                                    absl::string_view opcode,
                                    std::string attributes) {
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  PJRT_ASSIGN_OR_RETURN(std::string groups, ReplicaGroups(op));
  std::vector<std::string> parts;
  if (!attributes.empty()) parts.push_back(attributes);
  parts.push_back(groups);
  PJRT_ASSIGN_OR_RETURN(std::optional<int64_t> channel, ChannelId(op));
  if (channel.has_value())
    parts.push_back(absl::StrCat("channel_id=", *channel));
  if (const Attribute* global = Attr(op, {"use_global_device_ids"})) {
    if (global->kind == AttrKind::kUnit || global->boolean) {
      parts.push_back("use_global_device_ids=true");
    }
  }
  if (!op.regions.empty()) {
    PJRT_ASSIGN_OR_RETURN(std::string reducer,
                          ClosedRegion(b, op, op.regions[0], "reducer"));
    parts.push_back(absl::StrCat("to_apply=%", reducer));
  }
  const std::string all = absl::StrJoin(parts, ", ");
  if (in.size() > 1 && opcode != "all-reduce") {
    // HLO's all-gather and reduce-scatter of several operands: one each,
    // alike (what a tuple of them would do).
    if (op.result_types.size() != in.size()) {
      return Invalid(op, "needs one result per operand");
    }
    std::vector<Value> results;
    for (size_t i = 0; i < in.size(); ++i) {
      const Shape& result = op.result_types[i];
      results.push_back(
          Value{Emit(b, &op, result, opcode, {in[i].name}, all), result});
    }
    return Define(b, op, std::move(results));
  }
  const std::vector<std::string> names = Names(in);
  return DefineFrom(b, op,
                    Value{Emit(b, &op, shape, opcode, names, all), shape});
}

absl::Status Translator::While(Builder* b, const Operation& op) {
  if (op.regions.size() != 2) return Invalid(op, "needs cond and body regions");
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  // Values either region uses from outside become loop-carried elements
  // that the body passes through unchanged.
  std::vector<std::string> capture_names;
  {
    absl::flat_hash_set<std::string> seen;
    for (const Region& r : op.regions) {
      for (std::string& name : FreeValues(r)) {
        if (seen.insert(name).second) capture_names.push_back(std::move(name));
      }
    }
  }
  std::vector<Value> captured;
  for (const std::string& name : capture_names) {
    PJRT_ASSIGN_OR_RETURN(Value v,
                          Lookup(b, mlir::ValueUse{name, op.position}));
    captured.push_back(std::move(v));
  }
  std::vector<Shape> shapes;
  std::vector<std::string> names;
  for (const Value& v : in) {
    shapes.push_back(v.shape);
    names.push_back(v.name);
  }
  std::vector<Shape> all = shapes;
  for (const Value& v : captured) {
    all.push_back(v.shape);
    names.push_back(v.name);
  }
  const Shape tuple = Shape::Tuple(all);
  PJRT_ASSIGN_OR_RETURN(
      std::string cond,
      TupleRegion(b, op, op.regions[0], "cond", captured, capture_names, shapes,
                  /*pass_captures_through=*/false));
  PJRT_ASSIGN_OR_RETURN(
      std::string body,
      TupleRegion(b, op, op.regions[1], "body", captured, capture_names, shapes,
                  /*pass_captures_through=*/true));
  const std::string init = Emit(b, &op, tuple, "tuple", names);
  Value loop{Emit(b, &op, tuple, "while", {init},
                  absl::StrCat("condition=%", cond, ", body=%", body)),
             tuple};
  std::vector<Value> results;
  for (size_t i = 0; i < in.size(); ++i) {
    results.push_back(
        Value{EmitGte(b, &op, loop, static_cast<int>(i)), shapes[i]});
  }
  return Define(b, op, std::move(results));
}

absl::Status Translator::Conditional(Builder* b, const Operation& op) {
  PJRT_RETURN_IF_ERROR(ExpectOperands(op, 1));
  PJRT_ASSIGN_OR_RETURN(std::vector<Value> in, Operands(b, op));
  PJRT_ASSIGN_OR_RETURN(Shape shape, ResultsShape(op));
  const bool is_if = op.name == "stablehlo.if";
  if (is_if && op.regions.size() != 2) {
    return Invalid(op, "needs a true and a false region");
  }
  if (op.regions.empty()) return Invalid(op, "needs at least one branch");
  std::vector<std::string> operands = {in[0].name};
  std::vector<std::string> branches;
  for (size_t r = 0; r < op.regions.size(); ++r) {
    std::vector<std::string> capture_names = FreeValues(op.regions[r]);
    std::vector<Value> captured;
    std::vector<Shape> shapes;
    std::vector<std::string> names;
    for (const std::string& name : capture_names) {
      PJRT_ASSIGN_OR_RETURN(Value v,
                            Lookup(b, mlir::ValueUse{name, op.position}));
      shapes.push_back(v.shape);
      names.push_back(v.name);
      captured.push_back(std::move(v));
    }
    operands.push_back(Emit(b, &op, Shape::Tuple(shapes), "tuple", names));
    PJRT_ASSIGN_OR_RETURN(
        std::string branch,
        TupleRegion(b, op, op.regions[r], "branch", captured, capture_names, {},
                    /*pass_captures_through=*/false));
    branches.push_back(absl::StrCat("%", branch));
  }
  std::string attributes =
      is_if ? absl::StrCat("true_computation=", branches[0],
                           ", false_computation=", branches[1])
            : absl::StrCat("branch_computations={",
                           absl::StrJoin(branches, ", "), "}");
  return DefineFrom(
      b, op,
      Value{Emit(b, &op, shape, "conditional", operands, attributes), shape});
}

}  // namespace pjrt::hlo::stablehlo_internal
