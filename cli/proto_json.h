// A protobuf message as JSON for people and scripts (`zeroshard status
// --json`): integers of every width are JSON numbers (protobuf's own JSON
// mapping prints 64-bit integers as strings), non-finite doubles are null
// (protobuf prints "NaN"), enums are their names, field names as in the
// .proto, every singular scalar present (zero values included), message
// fields only when set. Pure; thread-safe.
#pragma once

#include "google/protobuf/message.h"
#include "nlohmann/json.hpp"

namespace zeroshard {

nlohmann::json ProtoToJson(const google::protobuf::Message& message);

}  // namespace zeroshard
