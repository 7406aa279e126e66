#include "tests/fuzz/proto_mutator.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace pjrt::fuzz {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

size_t Below(std::mt19937_64& rng, size_t n) {
  return n == 0 ? 0 : static_cast<size_t>(rng() % n);
}

// Numbers that find off-by-one and overflow mistakes: zero, small values,
// handles 1..16 (which the RPC harness maps to its objects), powers of two
// and their neighbours, and the limits of each width.
uint64_t InterestingInteger(std::mt19937_64& rng, uint64_t current) {
  switch (Below(rng, 9)) {
    case 0:
      return 0;
    case 1:
      return 1 + Below(rng, 16);
    case 2:
      return current + 1;
    case 3:
      return current - 1;
    case 4:
      return uint64_t{1} << Below(rng, 64);
    case 5:
      return (uint64_t{1} << Below(rng, 64)) - 1;
    case 6:
      return static_cast<uint64_t>(-static_cast<int64_t>(1 + Below(rng, 4)));
    case 7:
      return std::numeric_limits<int64_t>::max() - Below(rng, 2);
    default:
      return rng();
  }
}

std::string MutateBytes(std::string value, std::mt19937_64& rng) {
  switch (Below(rng, 8)) {
    case 0:
      return "";
    case 1:
      return value + value;
    default:
      break;
  }
  // libFuzzer's own byte mutations (bit flips, dictionary words, copies),
  // with room to grow.
  const size_t size = value.size();
  value.resize(std::max(size, std::min(kMaxMutatedBytes, 2 * size + 16)));
  value.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(value.data()), size,
                                value.size()));
  return value;
}

void MutateScalar(Message* message, const FieldDescriptor* field,
                  std::mt19937_64& rng, int index) {
  const Reflection* r = message->GetReflection();
  const bool repeated = field->is_repeated();
  auto get_u64 = [&]() -> uint64_t {
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        return static_cast<uint64_t>(
            repeated ? r->GetRepeatedInt32(*message, field, index)
                     : r->GetInt32(*message, field));
      case FieldDescriptor::CPPTYPE_INT64:
        return static_cast<uint64_t>(
            repeated ? r->GetRepeatedInt64(*message, field, index)
                     : r->GetInt64(*message, field));
      case FieldDescriptor::CPPTYPE_UINT32:
        return repeated ? r->GetRepeatedUInt32(*message, field, index)
                        : r->GetUInt32(*message, field);
      case FieldDescriptor::CPPTYPE_UINT64:
        return repeated ? r->GetRepeatedUInt64(*message, field, index)
                        : r->GetUInt64(*message, field);
      default:
        return 0;
    }
  };
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const auto v = static_cast<int32_t>(InterestingInteger(rng, get_u64()));
      repeated ? r->SetRepeatedInt32(message, field, index, v)
               : r->SetInt32(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      const auto v = static_cast<int64_t>(InterestingInteger(rng, get_u64()));
      repeated ? r->SetRepeatedInt64(message, field, index, v)
               : r->SetInt64(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const auto v = static_cast<uint32_t>(InterestingInteger(rng, get_u64()));
      repeated ? r->SetRepeatedUInt32(message, field, index, v)
               : r->SetUInt32(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const uint64_t v = InterestingInteger(rng, get_u64());
      repeated ? r->SetRepeatedUInt64(message, field, index, v)
               : r->SetUInt64(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double choices[] = {0.0,
                                -1.0,
                                1e308,
                                -1e-308,
                                std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(),
                                static_cast<double>(Below(rng, 1000))};
      const double v = choices[Below(rng, std::size(choices))];
      repeated ? r->SetRepeatedDouble(message, field, index, v)
               : r->SetDouble(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const float choices[] = {0.0f, -1.0f, 3e38f,
                               std::numeric_limits<float>::quiet_NaN(),
                               static_cast<float>(Below(rng, 1000))};
      const float v = choices[Below(rng, std::size(choices))];
      repeated ? r->SetRepeatedFloat(message, field, index, v)
               : r->SetFloat(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const bool v = !(repeated ? r->GetRepeatedBool(*message, field, index)
                                : r->GetBool(*message, field));
      repeated ? r->SetRepeatedBool(message, field, index, v)
               : r->SetBool(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* type = field->enum_type();
      // Mostly a declared value; sometimes one the schema does not know.
      const int v =
          Below(rng, 5) == 0
              ? static_cast<int>(InterestingInteger(rng, 0))
              : type->value(static_cast<int>(Below(rng, type->value_count())))
                    ->number();
      repeated ? r->SetRepeatedEnumValue(message, field, index, v)
               : r->SetEnumValue(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string v = repeated ? r->GetRepeatedString(*message, field, index)
                               : r->GetString(*message, field);
      v = MutateBytes(std::move(v), rng);
      if (field->type() == FieldDescriptor::TYPE_STRING) {
        // proto3 strings must be UTF-8: keep them ASCII.
        for (char& c : v)
          c = static_cast<char>(static_cast<unsigned char>(c) & 0x7f);
      }
      repeated ? r->SetRepeatedString(message, field, index, std::move(v))
               : r->SetString(message, field, std::move(v));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
}

}  // namespace

void MutateMessage(Message* message, std::mt19937_64& rng, int max_depth) {
  const auto* descriptor = message->GetDescriptor();
  const Reflection* r = message->GetReflection();
  if (descriptor->field_count() == 0) return;
  const FieldDescriptor* field = descriptor->field(
      static_cast<int>(Below(rng, descriptor->field_count())));
  // Prefer descending into what is already there.
  std::vector<const FieldDescriptor*> present;
  r->ListFields(*message, &present);
  if (!present.empty() && Below(rng, 4) != 0) {
    field = present[Below(rng, present.size())];
  }
  const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
  if (field->is_repeated()) {
    const int size = r->FieldSize(*message, field);
    const size_t choice = Below(rng, 4);
    if (size > 0 && choice == 0) {  // remove one
      r->SwapElements(message, field, static_cast<int>(Below(rng, size)),
                      size - 1);
      r->RemoveLast(message, field);
      return;
    }
    if (size == 0 || choice == 1) {  // add one
      if (size >= 64) return;
      if (is_message) {
        Message* added = r->AddMessage(message, field);
        if (size > 0 && Below(rng, 2) == 0) {
          added->CopyFrom(r->GetRepeatedMessage(
              *message, field, static_cast<int>(Below(rng, size))));
        } else if (max_depth > 0) {
          MutateMessage(added, rng, max_depth - 1);
        }
        return;
      }
      switch (field->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          r->AddInt32(message, field, 0);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          r->AddInt64(message, field, 0);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          r->AddUInt32(message, field, 0);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          r->AddUInt64(message, field, 0);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          r->AddDouble(message, field, 0);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          r->AddFloat(message, field, 0);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          r->AddBool(message, field, false);
          break;
        case FieldDescriptor::CPPTYPE_ENUM:
          r->AddEnumValue(message, field, 0);
          break;
        case FieldDescriptor::CPPTYPE_STRING:
          r->AddString(message, field, "");
          break;
        default:
          break;
      }
      MutateScalar(message, field, rng, size);
      return;
    }
    const int index = static_cast<int>(Below(rng, size));
    if (is_message) {
      if (max_depth > 0) {
        MutateMessage(r->MutableRepeatedMessage(message, field, index), rng,
                      max_depth - 1);
      }
    } else {
      MutateScalar(message, field, rng, index);
    }
    return;
  }
  if (is_message) {
    if (r->HasField(*message, field) && Below(rng, 8) == 0) {
      r->ClearField(message, field);  // also switches a oneof off
    } else if (max_depth > 0) {
      MutateMessage(r->MutableMessage(message, field), rng, max_depth - 1);
    }
    return;
  }
  MutateScalar(message, field, rng, -1);
}

}  // namespace pjrt::fuzz
