#include "common/formats/hf_weights.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dtype.h"
#include "common/formats/read_only_file.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kReadElements = int64_t{1} << 18;  // Raw bytes read per pread: <= 1 MiB.

int64_t Bytes(const std::string& dtype) {
  return dtype == "F32" ? 4 : (dtype == "BF16" || dtype == "F16") ? 2 : 0;
}

// The shard files: the index's weight_map values, or model.safetensors.
absl::StatusOr<std::vector<std::string>> ShardFiles(const fs::path& dir,
                                                    std::map<std::string, std::string>* map) {
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) {
    if (!fs::exists(dir / "model.safetensors")) {
      return absl::NotFoundError(absl::StrCat(dir.string(),
                                              ": neither model.safetensors nor "
                                              "model.safetensors.index.json"));
    }
    return std::vector<std::string>{"model.safetensors"};
  }
  std::ifstream in(index);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    return absl::DataLossError(absl::StrCat(index.string(), ": no weight_map object"));
  }
  std::set<std::string> files;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string()) {
      return absl::DataLossError(
          absl::StrCat(index.string(), ": weight_map.", it.key(), " is not a file name"));
    }
    const std::string file = it.value().get<std::string>();
    if (file.find('/') != std::string::npos || !fs::exists(dir / file)) {
      return absl::NotFoundError(absl::StrCat(index.string(), ": weight_map names ", file, " (for ",
                                              it.key(), "), which is missing"));
    }
    (*map)[it.key()] = file;
    files.insert(file);
  }
  return std::vector<std::string>(files.begin(), files.end());
}

// BF16 or F16 bits to fp32 (F32 is read into place: HfWeights::Read).
void Convert(const std::string& dtype, const char* raw, int64_t n, float* dst) {
  const bool bf16 = dtype == "BF16";
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, raw + 2 * i, 2);
    dst[i] = bf16 ? Bf16ToFloat(h) : HalfToFloat(h);
  }
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // Inf, NaN.
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in fp32.
  const float v = static_cast<float>(mant) * 0x1p-24f;
  return sign != 0 ? -v : v;
}

struct HfWeights::Fds {
  std::vector<ReadOnlyFile> files;
};

absl::StatusOr<HfWeights> HfWeights::Open(const std::string& dir_text) {
  const fs::path dir(dir_text);
  std::map<std::string, std::string> weight_map;
  HfWeights w;
  ZS_ASSIGN_OR_RETURN(w.files_, ShardFiles(dir, &weight_map));
  w.fds_ = std::make_shared<Fds>();
  for (size_t f = 0; f < w.files_.size(); ++f) {
    const std::string path = (dir / w.files_[f]).string();
    ZS_ASSIGN_OR_RETURN(const SafetensorsInfo info, ReadSafetensorsInfo(path));
    absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path);
    if (!file.ok()) return absl::NotFoundError(file.status().message());
    w.fds_->files.push_back(*std::move(file));
    w.data_bytes_ += info.data_bytes;
    for (const SafetensorsTensorInfo& t : info.tensors) {
      auto mapped = weight_map.find(t.name);
      if (mapped != weight_map.end() && mapped->second != w.files_[f]) continue;  // Not its home.
      w.tensors_[t.name] = Source{static_cast<int>(f), t, info.data_offset};
    }
  }
  return w;
}

std::vector<HfWeights::TensorSource> HfWeights::Sources() const {
  std::vector<TensorSource> out;
  for (const auto& [name, s] : tensors_) out.push_back({name, s.file, s.info, s.data_offset});
  return out;
}

const ReadOnlyFile& HfWeights::File(int i) const { return fds_->files.at(static_cast<size_t>(i)); }

absl::StatusOr<HfWeights> HfWeights::FromParts(std::vector<std::string> files,
                                               std::vector<ReadOnlyFile> opened,
                                               const std::vector<TensorSource>& sources) {
  if (files.size() != opened.size()) {
    return absl::InvalidArgumentError("model weights: files and descriptors differ in number");
  }
  HfWeights w;
  w.files_ = std::move(files);
  w.fds_ = std::make_shared<Fds>();
  w.fds_->files = std::move(opened);
  for (const TensorSource& t : sources) {
    if (t.file < 0 || t.file >= static_cast<int>(w.files_.size()) || Bytes(t.info.dtype) == 0 ||
        t.info.begin < 0 || t.info.end < t.info.begin || t.data_offset < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model weights: tensor ", t.name, " is described wrongly"));
    }
    w.tensors_[t.name] = Source{t.file, t.info, t.data_offset};
    w.data_bytes_ += t.info.end - t.info.begin;
  }
  return w;
}

absl::StatusOr<HfWeights> HfWeights::OpenFor(const std::string& dir,
                                             const std::vector<UnitSpec>& units) {
  ZS_ASSIGN_OR_RETURN(HfWeights w, Open(dir));
  ZS_RETURN_IF_ERROR(w.CheckUnits(units));
  return w;
}

std::string HfWeights::DType(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? "" : it->second.info.dtype;
}

absl::Status HfWeights::CheckUnits(const std::vector<UnitSpec>& units) const {
  for (const UnitSpec& u : units) {
    for (const TensorSpec& t : u.params) {
      auto it = tensors_.find(t.name);
      if (it == tensors_.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("model weights: tensor ", t.name, " is missing"));
      }
      const SafetensorsTensorInfo& info = it->second.info;
      if (info.shape != t.shape) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model weights: tensor ", t.name, " has shape [", absl::StrJoin(info.shape, ", "),
            "], the config needs [", absl::StrJoin(t.shape, ", "), "]"));
      }
      if (Bytes(info.dtype) == 0) {
        return absl::FailedPreconditionError(absl::StrCat("model weights: tensor ", t.name, " is ",
                                                          info.dtype, " (F32, BF16 or F16 load)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status HfWeights::ReadBytes(const Source& s, const std::string& name, void* dst,
                                  int64_t bytes, int64_t at) const {
  const absl::Status st = fds_->files[s.file].Read(dst, bytes, at);
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat("tensor ", name, ": ", st.message()));
}

absl::Status HfWeights::Read(const std::string& name, int64_t first, int64_t count,
                             float* dst) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model weights: tensor ", name, " is missing"));
  }
  const Source& s = it->second;
  const int64_t esize = Bytes(s.info.dtype);
  if (esize == 0 || first < 0 || first + count > (s.info.end - s.info.begin) / esize) {
    return absl::InvalidArgumentError(
        absl::StrCat("model weights: cannot read [", first, ", ", first + count, ") of ", name));
  }
  if (s.info.dtype == "F32") {  // Already the destination's bytes.
    return ReadBytes(s, name, dst, count * 4, s.data_offset + s.info.begin + first * 4);
  }
  // Kept per thread: a fresh buffer each call would be faulted in anew.
  thread_local std::vector<char> raw;
  raw.resize(static_cast<size_t>(kReadElements * esize));
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(count - done, kReadElements);
    const int64_t at = s.data_offset + s.info.begin + (first + done) * esize;
    ZS_RETURN_IF_ERROR(ReadBytes(s, name, raw.data(), n * esize, at));
    Convert(s.info.dtype, raw.data(), n, dst + done);
    done += n;
  }
  return absl::OkStatus();
}

namespace {

// fn(param, lo, hi) for each parameter of `unit` that [offset, offset +
// length) overlaps, [lo, hi) being the overlap in unit elements; the first
// error stops it.
template <typename Fn>
absl::Status ForEachOverlap(const UnitPlan& unit, int64_t offset, int64_t length, Fn&& fn) {
  const int64_t end = offset + length;
  for (const ParamPlacement& p : unit.params) {
    const int64_t lo = std::max(offset, p.offset), hi = std::min(end, p.offset + p.numel);
    if (lo < hi) ZS_RETURN_IF_ERROR(fn(p, lo, hi));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status HfWeights::CheckBf16Range(const UnitPlan& unit, int64_t offset, int64_t length) const {
  return ForEachOverlap(unit, offset, length, [&](const ParamPlacement& p, int64_t, int64_t) {
    if (DType(p.name) == "BF16") return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("model weights: tensor ", p.name, " of unit ", unit.name, " is not BF16"));
  });
}

absl::StatusOr<std::vector<std::vector<float>>> HfWeights::ReadWholeUnits(
    const ShardPlan& plan) const {
  std::vector<std::vector<float>> units;
  for (const UnitPlan& u : plan.units) {
    std::vector<float> buf(u.padded_numel);
    ZS_RETURN_IF_ERROR(ReadUnitRange(u, 0, u.padded_numel, buf.data()));
    units.push_back(std::move(buf));
  }
  return units;
}

bool HfWeights::IsBf16Range(const UnitPlan& unit, int64_t offset, int64_t length) const {
  return CheckBf16Range(unit, offset, length).ok();
}

absl::Status HfWeights::ReadUnitRangeBf16(const UnitPlan& unit, int64_t offset, int64_t length,
                                          uint16_t* dst) const {
  ZS_RETURN_IF_ERROR(CheckBf16Range(unit, offset, length));
  std::fill(dst, dst + length, uint16_t{0});
  return ForEachOverlap(unit, offset, length, [&](const ParamPlacement& p, int64_t lo, int64_t hi) {
    const Source& s = tensors_.at(p.name);  // CheckBf16Range: present.
    const int64_t bytes = (hi - lo) * 2;
    const int64_t at = s.data_offset + s.info.begin + (lo - p.offset) * 2;
    return ReadBytes(s, p.name, dst + (lo - offset), bytes, at);
  });
}

absl::Status HfWeights::ReadUnitRange(const UnitPlan& unit, int64_t offset, int64_t length,
                                      float* dst) const {
  std::fill(dst, dst + length, 0.0f);
  return ForEachOverlap(unit, offset, length, [&](const ParamPlacement& p, int64_t lo, int64_t hi) {
    return Read(p.name, lo - p.offset, hi - lo, dst + (lo - offset));
  });
}

}  // namespace zeroshard
