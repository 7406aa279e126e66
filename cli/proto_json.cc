#include "cli/proto_json.h"

#include "google/protobuf/descriptor.h"

namespace pjrt::cli {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

nlohmann::json FieldValue(const Message& message, const FieldDescriptor* field,
                          int index) {
  const Reflection* r = message.GetReflection();
  const bool repeated = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return repeated ? r->GetRepeatedInt32(message, field, index)
                      : r->GetInt32(message, field);
    case FieldDescriptor::CPPTYPE_INT64:
      return repeated ? r->GetRepeatedInt64(message, field, index)
                      : r->GetInt64(message, field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return repeated ? r->GetRepeatedUInt32(message, field, index)
                      : r->GetUInt32(message, field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return repeated ? r->GetRepeatedUInt64(message, field, index)
                      : r->GetUInt64(message, field);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return repeated ? r->GetRepeatedDouble(message, field, index)
                      : r->GetDouble(message, field);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return repeated ? r->GetRepeatedFloat(message, field, index)
                      : r->GetFloat(message, field);
    case FieldDescriptor::CPPTYPE_BOOL:
      return repeated ? r->GetRepeatedBool(message, field, index)
                      : r->GetBool(message, field);
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* value = repeated ? r->GetRepeatedEnum(message, field, index)
                                   : r->GetEnum(message, field);
      return value->name();
    }
    case FieldDescriptor::CPPTYPE_STRING:
      return repeated ? r->GetRepeatedString(message, field, index)
                      : r->GetString(message, field);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(repeated ? r->GetRepeatedMessage(message, field, index)
                                  : r->GetMessage(message, field));
  }
  return nullptr;
}

}  // namespace

nlohmann::json ProtoToJson(const Message& message) {
  nlohmann::json out = nlohmann::json::object();
  const auto* descriptor = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->is_repeated()) {
      nlohmann::json list = nlohmann::json::array();
      for (int j = 0; j < r->FieldSize(message, field); ++j) {
        list.push_back(FieldValue(message, field, j));
      }
      out[field->name()] = std::move(list);
    } else if (field->containing_oneof() != nullptr &&
               !r->HasField(message, field)) {
      continue;  // only the oneof member that is set
    } else {
      out[field->name()] = FieldValue(message, field, 0);
    }
  }
  return out;
}

}  // namespace pjrt::cli
