#include "hlo/opcode.h"

#include "absl/container/flat_hash_map.h"

namespace pjrt::hlo {

absl::string_view OpcodeName(Opcode opcode) {
  switch (opcode) {
#define PJRT_HLO_OPCODE_NAME(e, name, family) \
  case Opcode::e:                             \
    return name;
    PJRT_HLO_OPCODES(PJRT_HLO_OPCODE_NAME)
#undef PJRT_HLO_OPCODE_NAME
    case Opcode::kOther:
      break;
  }
  return "other";
}

absl::Span<const Opcode> AllOpcodes() {
  static constexpr Opcode kAll[] = {
#define PJRT_HLO_OPCODE_LIST(e, name, family) Opcode::e,
      PJRT_HLO_OPCODES(PJRT_HLO_OPCODE_LIST)
#undef PJRT_HLO_OPCODE_LIST
  };
  return kAll;
}

OpFamily FamilyOf(Opcode opcode) {
  switch (opcode) {
#define PJRT_HLO_OPCODE_FAMILY(e, name, family) \
  case Opcode::e:                               \
    return OpFamily::family;
    PJRT_HLO_OPCODES(PJRT_HLO_OPCODE_FAMILY)
#undef PJRT_HLO_OPCODE_FAMILY
    case Opcode::kOther:
      break;
  }
  return OpFamily::kStructure;
}

Opcode OpcodeFromName(absl::string_view name) {
  static const auto* by_name = [] {
    auto* map = new absl::flat_hash_map<absl::string_view, Opcode>;
#define PJRT_HLO_OPCODE_ENTRY(e, n, family) map->emplace(n, Opcode::e);
    PJRT_HLO_OPCODES(PJRT_HLO_OPCODE_ENTRY)
#undef PJRT_HLO_OPCODE_ENTRY
    return map;
  }();
  auto it = by_name->find(name);
  return it == by_name->end() ? Opcode::kOther : it->second;
}

}  // namespace pjrt::hlo
