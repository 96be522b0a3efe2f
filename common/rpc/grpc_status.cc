#include "common/rpc/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace zeroshard {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, const char* context) {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  if (!status.error_message().empty()) {
    return absl::Status(code, absl::StrCat(context, ": ", status.error_message()));
  }
  const char* meaning = code == absl::StatusCode::kUnimplemented
                            ? " (the server does not serve this RPC)"
                            : " (no message from the server)";
  return absl::Status(code, absl::StrCat(context, ": ", absl::StatusCodeToString(code), meaning));
}

}  // namespace zeroshard
