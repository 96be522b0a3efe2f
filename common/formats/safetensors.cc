#include "common/formats/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "common/formats/atomic_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace zeroshard {
namespace {

constexpr int64_t kMaxHeaderBytes = int64_t{100} << 20;  // The reference implementation's limit.

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t DTypeBytes(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2")
    return 1;
  return 0;
}

// The JSON header (F32 tensors laid end to end in order), padded with
// spaces to a multiple of 8 bytes as the format recommends.
absl::StatusOr<std::string> SafetensorsHeader(const std::vector<SafetensorsEntry>& tensors,
                                              const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  int64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor name \"", t.name, "\" is empty, reserved or repeated"));
    }
    for (int64_t d : t.shape) {
      if (d < 0)
        return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " has a negative dim"));
    }
    if (t.dtype != "F32" && t.dtype != "BF16") {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", t.name, ": cannot write ", t.dtype));
    }
    const int64_t bytes = Numel(t.shape) * DTypeBytes(t.dtype);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  return json;
}

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat("safetensors file ", path, ": ", what));
}

absl::Status ParseMetadata(const std::string& path, const nlohmann::json& v,
                           std::map<std::string, std::string>* out) {
  if (!v.is_object()) return Bad(path, "__metadata__ is not an object");
  for (auto m = v.begin(); m != v.end(); ++m) {
    if (!m.value().is_string())
      return Bad(path, absl::StrCat("__metadata__.", m.key(), " is not a string"));
    (*out)[m.key()] = m.value().get<std::string>();
  }
  return absl::OkStatus();
}

// One header entry: dtype, shape and data_offsets, consistent with each other.
absl::StatusOr<SafetensorsTensorInfo> ParseTensor(const std::string& path, const std::string& name,
                                                  const nlohmann::json& v) {
  SafetensorsTensorInfo t;
  t.name = name;
  if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
      !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
      v["data_offsets"].size() != 2) {
    return Bad(path, absl::StrCat("tensor ", t.name, " lacks dtype, shape or data_offsets"));
  }
  t.dtype = v["dtype"].get<std::string>();
  for (const auto& d : v["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return Bad(path, absl::StrCat("tensor ", t.name, " has a bad dim"));
    t.shape.push_back(d.get<int64_t>());
  }
  for (const auto& o : v["data_offsets"]) {
    if (!o.is_number_integer() || o.get<int64_t>() < 0)
      return Bad(path, absl::StrCat("tensor ", t.name, " has a bad offset"));
  }
  t.begin = v["data_offsets"][0].get<int64_t>();
  t.end = v["data_offsets"][1].get<int64_t>();
  const int64_t esize = DTypeBytes(t.dtype);
  if (esize == 0) return Bad(path, absl::StrCat("tensor ", t.name, " has unknown dtype ", t.dtype));
  if (t.end < t.begin || t.end - t.begin != Numel(t.shape) * esize) {
    return Bad(path, absl::StrCat("tensor ", t.name, " data_offsets [", t.begin, ", ", t.end,
                                  ") do not hold its shape"));
  }
  return t;
}

// Sorts the tensors by offset and checks they cover the data exactly: no
// gap, no overlap.
absl::Status CheckTensorsTileData(const std::string& path, SafetensorsInfo& info) {
  std::sort(info.tensors.begin(), info.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  int64_t expect = 0;
  for (const SafetensorsTensorInfo& t : info.tensors) {
    if (t.begin != expect) {
      return Bad(path, absl::StrCat("tensor ", t.name, " starts at byte ", t.begin, ", expected ",
                                    expect, t.begin < expect ? " (overlap)" : " (gap)"));
    }
    expect = t.end;
  }
  if (expect != info.data_bytes) {
    return Bad(path, absl::StrCat("tensors cover ", expect, " data bytes, the file holds ",
                                  info.data_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::function<absl::Status(size_t, float*)>& fill) {
  ZS_ASSIGN_OR_RETURN(const std::string header, SafetensorsHeader(tensors, metadata));
  // 0644 as for any exported file a user copies around.
  return WriteFileAtomicallyStreamed(
      path,
      [&](const AppendFn& append) -> absl::Status {
        const uint64_t n = header.size();
        ZS_RETURN_IF_ERROR(append(&n, 8));
        ZS_RETURN_IF_ERROR(append(header.data(), header.size()));
        std::vector<float> buf;
        std::vector<bf16> half;
        for (size_t i = 0; i < tensors.size(); ++i) {
          buf.assign(static_cast<size_t>(Numel(tensors[i].shape)), 0.f);
          ZS_RETURN_IF_ERROR(fill(i, buf.data()));
          if (tensors[i].dtype == "F32") {
            ZS_RETURN_IF_ERROR(append(buf.data(), buf.size() * sizeof(float)));
            continue;
          }
          half.resize(buf.size());
          for (size_t k = 0; k < buf.size(); ++k) half[k] = FloatToBf16(buf[k]);
          ZS_RETURN_IF_ERROR(append(half.data(), half.size() * sizeof(bf16)));
        }
        return absl::OkStatus();
      },
      0644);
}

absl::StatusOr<SafetensorsInfo> ReadSafetensorsInfo(const std::string& path) {
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("safetensors file ", path, ": ", ec.message()));
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&n), 8))
    return Bad(path, "shorter than 8 bytes");
  if (n > static_cast<uint64_t>(kMaxHeaderBytes) || 8 + n > file_size) {
    return Bad(path, absl::StrCat("header length ", n, " exceeds the file or 100 MiB"));
  }
  std::string json(n, '\0');
  if (!in.read(json.data(), static_cast<std::streamsize>(n))) return Bad(path, "header unreadable");
  nlohmann::json header = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return Bad(path, "header is not a JSON object");
  SafetensorsInfo info;
  info.data_offset = static_cast<int64_t>(8 + n);
  info.data_bytes = static_cast<int64_t>(file_size) - info.data_offset;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      ZS_RETURN_IF_ERROR(ParseMetadata(path, it.value(), &info.metadata));
      continue;
    }
    ZS_ASSIGN_OR_RETURN(SafetensorsTensorInfo t, ParseTensor(path, it.key(), it.value()));
    info.tensors.push_back(std::move(t));
  }
  ZS_RETURN_IF_ERROR(CheckTensorsTileData(path, info));
  return info;
}

absl::StatusOr<std::vector<float>> ReadSafetensorsF32(const std::string& path,
                                                      const SafetensorsInfo& info,
                                                      const std::string& name) {
  for (const SafetensorsTensorInfo& t : info.tensors) {
    if (t.name != name) continue;
    if (t.dtype != "F32")
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " is ", t.dtype, ", not F32"));
    std::vector<float> out(static_cast<size_t>((t.end - t.begin) / 4));
    std::ifstream in(path, std::ios::binary);
    in.seekg(info.data_offset + t.begin);
    if (!in.read(reinterpret_cast<char*>(out.data()), t.end - t.begin))
      return Bad(path, "tensor data unreadable");
    return out;
  }
  return absl::NotFoundError(absl::StrCat("tensor ", name, " is not in ", path));
}

}  // namespace zeroshard
