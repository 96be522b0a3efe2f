#include "common/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

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
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
  return 0;
}

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat("safetensors file ", path, ": ", what));
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const std::vector<SafetensorsEntry>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              const std::function<absl::Status(size_t, float*)>& fill) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  int64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor name \"", t.name, "\" is empty, reserved or repeated"));
    }
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("tensor ", t.name, " has a negative dim"));
    }
    const int64_t bytes = Numel(t.shape) * 4;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return absl::InternalError(absl::StrCat("create ", tmp, ": ", std::strerror(errno)));
  uint64_t n = json.size();
  bool ok = std::fwrite(&n, 8, 1, f) == 1 && std::fwrite(json.data(), 1, json.size(), f) == json.size();
  absl::Status st;
  std::vector<float> buf;
  for (size_t i = 0; ok && st.ok() && i < tensors.size(); ++i) {
    buf.assign(static_cast<size_t>(Numel(tensors[i].shape)), 0.f);
    st = fill(i, buf.data());
    if (st.ok()) ok = std::fwrite(buf.data(), 4, buf.size(), f) == buf.size();
  }
  ok = ok && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const int err = errno;
  std::fclose(f);
  if (!st.ok() || !ok) {
    std::remove(tmp.c_str());
    if (!st.ok()) return st;
    return absl::Status(err == ENOSPC ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal,
                        absl::StrCat("write ", tmp, ": ", std::strerror(err)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("rename ", tmp, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<SafetensorsInfo> ReadSafetensorsInfo(const std::string& path) {
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("safetensors file ", path, ": ", ec.message()));
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&n), 8)) return Bad(path, "shorter than 8 bytes");
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
    const nlohmann::json& v = it.value();
    if (it.key() == "__metadata__") {
      if (!v.is_object()) return Bad(path, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return Bad(path, absl::StrCat("__metadata__.", m.key(), " is not a string"));
        info.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    SafetensorsTensorInfo t;
    t.name = it.key();
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2) {
      return Bad(path, absl::StrCat("tensor ", t.name, " lacks dtype, shape or data_offsets"));
    }
    t.dtype = v["dtype"].get<std::string>();
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return Bad(path, absl::StrCat("tensor ", t.name, " has a bad dim"));
      t.shape.push_back(d.get<int64_t>());
    }
    for (const auto& o : v["data_offsets"]) {
      if (!o.is_number_integer() || o.get<int64_t>() < 0) return Bad(path, absl::StrCat("tensor ", t.name, " has a bad offset"));
    }
    t.begin = v["data_offsets"][0].get<int64_t>();
    t.end = v["data_offsets"][1].get<int64_t>();
    const int64_t esize = DTypeBytes(t.dtype);
    if (esize == 0) return Bad(path, absl::StrCat("tensor ", t.name, " has unknown dtype ", t.dtype));
    if (t.end < t.begin || t.end - t.begin != Numel(t.shape) * esize) {
      return Bad(path, absl::StrCat("tensor ", t.name, " data_offsets [", t.begin, ", ", t.end,
                                    ") do not hold its shape"));
    }
    info.tensors.push_back(std::move(t));
  }
  std::sort(info.tensors.begin(), info.tensors.end(),
            [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  int64_t expect = 0;
  for (const SafetensorsTensorInfo& t : info.tensors) {
    if (t.begin != expect) {
      return Bad(path, absl::StrCat("tensor ", t.name, " starts at byte ", t.begin, ", expected ", expect,
                                    t.begin < expect ? " (overlap)" : " (gap)"));
    }
    expect = t.end;
  }
  if (expect != info.data_bytes) {
    return Bad(path, absl::StrCat("tensors cover ", expect, " data bytes, the file holds ", info.data_bytes));
  }
  return info;
}

absl::StatusOr<std::vector<float>> ReadSafetensorsF32(const std::string& path, const SafetensorsInfo& info,
                                                      const std::string& name) {
  for (const SafetensorsTensorInfo& t : info.tensors) {
    if (t.name != name) continue;
    if (t.dtype != "F32") return absl::InvalidArgumentError(absl::StrCat("tensor ", name, " is ", t.dtype, ", not F32"));
    std::vector<float> out(static_cast<size_t>((t.end - t.begin) / 4));
    std::ifstream in(path, std::ios::binary);
    in.seekg(info.data_offset + t.begin);
    if (!in.read(reinterpret_cast<char*>(out.data()), t.end - t.begin)) return Bad(path, "tensor data unreadable");
    return out;
  }
  return absl::NotFoundError(absl::StrCat("tensor ", name, " is not in ", path));
}

}  // namespace zeroshard
