// The HLO parser's attributes: the ones it knows become typed fields of
// Attributes; others are kept raw for the op that reads them.
#include "hlo/parser_internal.h"

namespace pjrt::hlo::parser_internal {

absl::Status Parser::ParseAttribute(Draft* draft) {
  if (!At(TokenKind::kName) || Peek().text[0] == '%') {
    return Expected(
        absl::StrCat("an attribute name after ',' in ", DisplayName(*draft)));
  }
  const Token& name_token = Next();
  const std::string name(name_token.text);
  if (draft->attributes.has(name)) {
    return ErrorAt(name_token,
                   absl::StrFormat("attribute %s of %s is given twice", name,
                                   DisplayName(*draft)));
  }
  PJRT_RETURN_IF_ERROR(Expect(TokenKind::kEqual,
                              absl::StrFormat("'=' after attribute %s", name)));
  const size_t start_pos = pos_;
  const size_t start = Peek().offset;
  bool known = false;
  absl::Status status = ParseKnownAttribute(name, draft, &known);
  if (!status.ok()) {
    // An op pjrtd does not know may use a known name differently: keep it
    // as text rather than reject it.
    if (draft->opcode != Opcode::kOther) return status;
    pos_ = start_pos;
    known = false;
  }
  if (!known) PJRT_RETURN_IF_ERROR(SkipRawValue(name));
  const size_t end = std::max(start, EndOfPrevious());
  draft->attributes.present.push_back(name);
  draft->attributes.raw.emplace_back(
      name, std::string(text_.substr(start, end - start)));
  return absl::OkStatus();
}

absl::Status Parser::ParseKnownAttribute(absl::string_view name, Draft* draft,
                                         bool* known) {
  *known = true;
  Attributes& a = draft->attributes;
  const std::string what = absl::StrCat(name, "= of ", DisplayName(*draft));
  if (int order = CalledComputationOrder(name); order >= 0) {
    return ParseComputationRefs(name, order, draft);
  }
  if (name == "dimensions") {
    // Usually {0,1}; a bare number is accepted too.
    if (At(TokenKind::kInt)) {
      PJRT_ASSIGN_OR_RETURN(int64_t d, ParseInt64(what));
      a.dimensions = {d};
      return absl::OkStatus();
    }
    PJRT_ASSIGN_OR_RETURN(a.dimensions, ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "lhs_batch_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.lhs_batch_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "rhs_batch_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.rhs_batch_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "lhs_contracting_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.lhs_contracting_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "rhs_contracting_dims") {
    PJRT_ASSIGN_OR_RETURN(a.dot_dimension_numbers.rhs_contracting_dimensions,
                          ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "dynamic_slice_sizes") {
    PJRT_ASSIGN_OR_RETURN(a.dynamic_slice_sizes, ParseIntList(what));
    return absl::OkStatus();
  }
  if (name == "iota_dimension") {
    PJRT_ASSIGN_OR_RETURN(a.iota_dimension, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "index") {
    PJRT_ASSIGN_OR_RETURN(a.tuple_index, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "exponent_bits") {
    PJRT_ASSIGN_OR_RETURN(a.exponent_bits, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "mantissa_bits") {
    PJRT_ASSIGN_OR_RETURN(a.mantissa_bits, ParseNonNegativeInt(what));
    return absl::OkStatus();
  }
  if (name == "channel_id") {
    PJRT_ASSIGN_OR_RETURN(int64_t id, ParseInt64(what));
    a.channel_id = id;
    return absl::OkStatus();
  }
  if (name == "custom_call_target") {
    if (!At(TokenKind::kString))
      return Expected(absl::StrCat("a string for ", what));
    a.custom_call_target = UnescapeString(Next().text);
    return absl::OkStatus();
  }
  if (name == "use_global_device_ids") {
    PJRT_ASSIGN_OR_RETURN(a.use_global_device_ids, ParseBool(what));
    return absl::OkStatus();
  }
  if (name == "is_stable") {
    PJRT_ASSIGN_OR_RETURN(a.is_stable, ParseBool(what));
    return absl::OkStatus();
  }
  if (name == "replica_groups") return ParseReplicaGroups(&a);
  if (name == "source_target_pairs") {
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kLBrace, absl::StrCat("'{' to start ", what)));
    if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
    while (true) {
      const Token& pair_start = Peek();
      PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> pair, ParseIntList(what));
      if (pair.size() != 2) {
        return ErrorAt(pair_start,
                       absl::StrFormat("a source-target pair has 2 numbers, "
                                       "found %d in {%s}",
                                       pair.size(), absl::StrJoin(pair, ",")));
      }
      a.source_target_pairs.emplace_back(pair[0], pair[1]);
      if (TryConsume(TokenKind::kComma)) continue;
      return Expect(TokenKind::kRBrace, absl::StrCat("',' or '}' in ", what));
    }
  }
  if (name == "slice") return ParseSlice(&a);
  if (name == "padding" && draft->opcode == Opcode::kPad) {
    return ParsePadding(&a);
  }
  if (name == "direction" && draft->opcode == Opcode::kCompare) {
    static constexpr std::pair<absl::string_view, ComparisonDirection>
        kDirections[] = {
            {"EQ", ComparisonDirection::kEq}, {"NE", ComparisonDirection::kNe},
            {"LT", ComparisonDirection::kLt}, {"LE", ComparisonDirection::kLe},
            {"GT", ComparisonDirection::kGt}, {"GE", ComparisonDirection::kGe},
        };
    for (const auto& [spelling, direction] : kDirections) {
      if (AtName(spelling)) {
        Next();
        a.comparison_direction = direction;
        return absl::OkStatus();
      }
    }
    return Expected(absl::StrCat("EQ, NE, LT, LE, GT or GE for ", what));
  }
  if (name == "type" && draft->opcode == Opcode::kCompare) {
    static constexpr std::pair<absl::string_view, ComparisonType> kTypes[] = {
        {"FLOAT", ComparisonType::kFloat},
        {"TOTALORDER", ComparisonType::kTotalOrder},
        {"SIGNED", ComparisonType::kSigned},
        {"UNSIGNED", ComparisonType::kUnsigned},
    };
    for (const auto& [spelling, type] : kTypes) {
      if (AtName(spelling)) {
        Next();
        a.comparison_type = type;
        return absl::OkStatus();
      }
    }
    return Expected(
        absl::StrCat("FLOAT, TOTALORDER, SIGNED or UNSIGNED for ", what));
  }
  *known = false;
  return absl::OkStatus();
}

// name or {name, name, ...}
absl::Status Parser::ParseComputationRefs(absl::string_view attribute,
                                          int order, Draft* draft) {
  const auto parse_one = [&]() -> absl::Status {
    if (!At(TokenKind::kName)) {
      return Expected(absl::StrFormat("a computation name for %s= of %s",
                                      attribute, DisplayName(*draft)));
    }
    const Token& token = Next();
    CalledRef ref;
    ref.order = order;
    ref.attribute = std::string(attribute);
    ref.name = std::string(StripPercent(token.text));
    ref.line = token.line;
    ref.column = token.column;
    draft->called.push_back(std::move(ref));
    return absl::OkStatus();
  };
  if (!TryConsume(TokenKind::kLBrace)) return parse_one();
  if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
  while (true) {
    PJRT_RETURN_IF_ERROR(parse_one());
    if (TryConsume(TokenKind::kComma)) continue;
    return Expect(TokenKind::kRBrace,
                  absl::StrFormat("',' or '}' in %s=", attribute));
  }
}

// {{0,1},{2,3}}, or [G,S]<=[dims] with an optional T(permutation): the ids
// 0..N-1 laid out as `dims`, transposed, and cut into G groups of S.
absl::Status Parser::ParseReplicaGroups(Attributes* attributes) {
  if (At(TokenKind::kLBrace)) {
    Next();
    if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
    while (true) {
      PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> group,
                            ParseIntList("a replica group"));
      attributes->replica_groups.push_back(std::move(group));
      if (TryConsume(TokenKind::kComma)) continue;
      return Expect(TokenKind::kRBrace, "',' or '}' in replica_groups=");
    }
  }
  const Token& start = Peek();
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> group_shape,
                        ParseBracketedInts("the replica group shape"));
  PJRT_RETURN_IF_ERROR(
      Expect(TokenKind::kLeq, "'<=' after the replica group shape"));
  PJRT_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                        ParseBracketedInts("the replica id layout"));
  std::vector<int64_t> permutation;
  if (AtName("T") && At(TokenKind::kLParen, 1)) {
    Next();
    Next();
    while (true) {
      PJRT_ASSIGN_OR_RETURN(int64_t p, ParseInt64("the transpose permutation"));
      permutation.push_back(p);
      if (TryConsume(TokenKind::kComma)) continue;
      PJRT_RETURN_IF_ERROR(Expect(TokenKind::kRParen,
                                  "',' or ')' in the transpose permutation"));
      break;
    }
  } else {
    for (size_t i = 0; i < dims.size(); ++i) {
      permutation.push_back(static_cast<int64_t>(i));
    }
  }
  const std::string written =
      std::string(text_.substr(start.offset, EndOfPrevious() - start.offset));
  if (group_shape.size() != 2 || group_shape[0] < 0 || group_shape[1] < 0) {
    return ErrorAt(start,
                   absl::StrFormat("replica_groups=%s: the group shape must be "
                                   "[number of groups, group size]",
                                   written));
  }
  int64_t total = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && total > kMaxIotaReplicaIds / d)) {
      return ErrorAt(
          start, absl::StrFormat("replica_groups=%s: the id layout must have "
                                 "non-negative sizes and at most %d ids",
                                 written, kMaxIotaReplicaIds));
    }
    total *= d;
  }
  if (group_shape[0] > 0 && group_shape[1] > total / group_shape[0]) {
    total = -1;  // cannot match
  }
  if (group_shape[1] == 0 && group_shape[0] > 0) {
    return ErrorAt(start, absl::StrFormat("replica_groups=%s: groups of 0 ids "
                                          "are not groups",
                                          written));
  }
  if (total < 0 || group_shape[0] * group_shape[1] != total) {
    return ErrorAt(start,
                   absl::StrFormat("replica_groups=%s: %d groups of %d do not "
                                   "cover the %d ids of the layout",
                                   written, group_shape[0], group_shape[1],
                                   total < 0 ? 0 : total));
  }
  // Each list may name every device of a launch; all of them together are
  // bounded too, since a short attribute expands to a long list.
  expanded_replica_ids_ += total;
  if (expanded_replica_ids_ > kMaxExpandedReplicaIds) {
    return ErrorAt(start,
                   absl::StrFormat("replica_groups=%s: the module's iota "
                                   "replica groups expand to more than %d ids "
                                   "in all",
                                   written, kMaxExpandedReplicaIds));
  }
  std::vector<bool> seen(dims.size(), false);
  bool valid = permutation.size() == dims.size();
  for (int64_t p : permutation) {
    if (!valid || p < 0 || p >= static_cast<int64_t>(dims.size()) || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid) {
    return ErrorAt(
        start,
        absl::StrFormat("replica_groups=%s: T(%s) is not a permutation "
                        "of the %d layout dimensions",
                        written, absl::StrJoin(permutation, ","), dims.size()));
  }
  // Element r of the transposed array, at index idx, is the id at index
  // idx' of the layout with idx'[permutation[i]] = idx[i].
  const size_t rank = dims.size();
  std::vector<int64_t> strides(rank, 1);
  for (size_t i = rank; i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  std::vector<int64_t> transposed_dims(rank);
  for (size_t i = 0; i < rank; ++i) transposed_dims[i] = dims[permutation[i]];
  std::vector<int64_t> index(rank, 0);
  std::vector<int64_t> ids;
  ids.reserve(total);
  for (int64_t r = 0; r < total; ++r) {
    int64_t id = 0;
    for (size_t i = 0; i < rank; ++i) id += index[i] * strides[permutation[i]];
    ids.push_back(id);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < transposed_dims[i]) break;
      index[i] = 0;
    }
  }
  attributes->replica_groups.assign(group_shape[0], {});
  for (int64_t g = 0; g < group_shape[0]; ++g) {
    attributes->replica_groups[g].assign(
        ids.begin() + g * group_shape[1],
        ids.begin() + (g + 1) * group_shape[1]);
  }
  return absl::OkStatus();
}

// {[0:2:1], [1:3]} or {}.
absl::Status Parser::ParseSlice(Attributes* attributes) {
  PJRT_RETURN_IF_ERROR(Expect(TokenKind::kLBrace, "'{' to start slice="));
  if (TryConsume(TokenKind::kRBrace)) return absl::OkStatus();
  while (true) {
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kLBracket,
               "'[' to start a dimension of slice=, as in [0:2:1]"));
    SliceDimension dim;
    PJRT_ASSIGN_OR_RETURN(dim.start, ParseInt64("a slice start"));
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kColon, "':' after the slice start"));
    PJRT_ASSIGN_OR_RETURN(dim.limit, ParseInt64("a slice limit"));
    if (TryConsume(TokenKind::kColon)) {
      PJRT_ASSIGN_OR_RETURN(dim.stride, ParseInt64("a slice stride"));
    }
    PJRT_RETURN_IF_ERROR(
        Expect(TokenKind::kRBracket, "']' to end a dimension of slice="));
    attributes->slice.push_back(dim);
    if (TryConsume(TokenKind::kComma)) continue;
    return Expect(TokenKind::kRBrace, "',' or '}' in slice=");
  }
}

// low_high[_interior] per dimension, joined by 'x': 0_0x1_-1_2.
absl::Status Parser::ParsePadding(Attributes* attributes) {
  const Token& token = Peek();
  if (token.kind != TokenKind::kNumberWord && token.kind != TokenKind::kInt) {
    // A rank-0 pad prints as `padding=` with nothing after it.
    if (token.kind == TokenKind::kComma || token.kind == TokenKind::kRBrace ||
        token.kind == TokenKind::kEof ||
        (pos_ > 0 && token.line != tokens_[pos_ - 1].line)) {
      return absl::OkStatus();
    }
    return Expected("a padding such as 0_0x1_1 for padding=");
  }
  const auto bad = [&]() {
    return ErrorAt(token, absl::StrCat("padding ", token.text,
                                       " is not of the form low_high or "
                                       "low_high_interior per dimension, "
                                       "joined by 'x' (as in 0_0x1_-1_2)"));
  };
  for (absl::string_view part : absl::StrSplit(token.text, 'x')) {
    std::vector<absl::string_view> numbers = absl::StrSplit(part, '_');
    if (numbers.size() != 2 && numbers.size() != 3) return bad();
    int64_t values[3] = {0, 0, 0};
    for (size_t i = 0; i < numbers.size(); ++i) {
      if (!absl::SimpleAtoi(numbers[i], &values[i]) || numbers[i].empty() ||
          numbers[i][0] == '+') {
        return bad();
      }
    }
    attributes->padding.push_back({values[0], values[1], values[2]});
  }
  Next();
  return absl::OkStatus();
}

absl::StatusOr<bool> Parser::ParseBool(absl::string_view what) {
  if (AtName("true")) {
    Next();
    return true;
  }
  if (AtName("false")) {
    Next();
    return false;
  }
  return Expected(absl::StrCat("true or false for ", what));
}

absl::Status Parser::SkipRawValue(absl::string_view attribute) {
  const Token& first = Peek();
  if (first.kind == TokenKind::kComma || first.kind == TokenKind::kEof ||
      IsCloser(first.kind)) {
    return Expected(absl::StrCat("a value for attribute ", attribute));
  }
  std::vector<const Token*> open;
  int last_line = first.line;
  bool first_token = true;
  while (true) {
    const Token& token = Peek();
    if (open.empty() && !first_token) {
      // At the top level the value ends at ',', at a closer that is not its
      // own, or where something new starts: a new line, `name=`, ENTRY, ROOT.
      if (token.kind == TokenKind::kComma || token.kind == TokenKind::kEof ||
          IsCloser(token.kind) || token.line != last_line ||
          (token.kind == TokenKind::kName &&
           (At(TokenKind::kEqual, 1) || token.text == "ENTRY" ||
            token.text == "ROOT"))) {
        return absl::OkStatus();
      }
    }
    if (token.kind == TokenKind::kEof) {
      const Token& opener = *open.back();
      return ErrorAt(
          opener, absl::StrFormat("'%s' in the value of attribute %s is never "
                                  "closed",
                                  opener.text, attribute));
    }
    if (IsOpener(token.kind)) {
      open.push_back(&token);
    } else if (IsCloser(token.kind)) {
      const Token& opener = *open.back();
      if (token.text[0] != CloserFor(opener.kind)) {
        return ErrorAt(
            token,
            absl::StrFormat("expected '%c' to close '%s' (line %d, "
                            "column %d) in the value of attribute %s, "
                            "found %s",
                            CloserFor(opener.kind), opener.text, opener.line,
                            opener.column, attribute, DescribeToken(token)));
      }
      open.pop_back();
    }
    last_line = token.line;
    first_token = false;
    Next();
  }
}

}  // namespace pjrt::hlo::parser_internal
