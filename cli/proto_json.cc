#include "cli/proto_json.h"

#include <cmath>

namespace zeroshard {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

nlohmann::json Finite(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// Element `index` of a repeated field, or the singular value when index < 0.
// lizard forgives(length)
nlohmann::json FieldValue(const Message& m, const Reflection& r, const FieldDescriptor& f,
                          int index) {
  const bool rep = index >= 0;
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Finite(rep ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Finite(rep ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r.GetRepeatedEnum(m, &f, index) : r.GetEnum(m, &f))->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r.GetRepeatedString(m, &f, index) : r.GetString(m, &f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(rep ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
  }
  return nullptr;
}

}  // namespace

nlohmann::json ProtoToJson(const Message& message) {
  nlohmann::json out = nlohmann::json::object();
  const google::protobuf::Descriptor* d = message.GetDescriptor();
  const Reflection* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      nlohmann::json items = nlohmann::json::array();
      for (int k = 0; k < r->FieldSize(message, f); ++k) {
        items.push_back(FieldValue(message, *r, *f, k));
      }
      out[f->name()] = std::move(items);
    } else if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || r->HasField(message, f)) {
      out[f->name()] = FieldValue(message, *r, *f, -1);
    }
  }
  return out;
}

}  // namespace zeroshard
