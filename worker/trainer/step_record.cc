#include "worker/trainer/step_record.h"

#include <cmath>

#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

nlohmann::json MemoryJson(const MemoryByKind& m) {
  return {{"params", m.params},          {"grads", m.grads},           {"optimizer", m.optimizer},
          {"buffers", m.buffers},        {"redundancy", m.redundancy}, {"offloaded", m.offloaded},
          {"activations", m.activations}};
}

void PackMemory(const MemoryByKind& m, double* out) {
  out[0] = static_cast<double>(m.params);
  out[1] = static_cast<double>(m.grads);
  out[2] = static_cast<double>(m.optimizer);
  out[3] = static_cast<double>(m.buffers);
  out[4] = static_cast<double>(m.redundancy);
  out[5] = static_cast<double>(m.offloaded);
  out[6] = static_cast<double>(m.activations);
}

MemoryByKind UnpackMemory(const double* in) {
  return {static_cast<int64_t>(in[0]), static_cast<int64_t>(in[1]), static_cast<int64_t>(in[2]),
          static_cast<int64_t>(in[3]), static_cast<int64_t>(in[4]), static_cast<int64_t>(in[5]),
          static_cast<int64_t>(in[6])};
}

}  // namespace

std::array<double, RankStepStats::kDoubles> RankStepStats::Pack() const {
  std::array<double, kDoubles> out{};
  PackMemory(memory, &out[0]);
  PackMemory(peak_memory, &out[kMemoryDoubles]);
  for (int i = 0; i < 3; ++i) {
    out[2 * kMemoryDoubles + i] = static_cast<double>(comm_bytes[i]);
    out[2 * kMemoryDoubles + 3 + i] = comm_seconds[i];
  }
  return out;
}

RankStepStats RankStepStats::Unpack(const double* v) {
  RankStepStats s;
  s.memory = UnpackMemory(&v[0]);
  s.peak_memory = UnpackMemory(&v[kMemoryDoubles]);
  for (int i = 0; i < 3; ++i) {
    s.comm_bytes[i] = static_cast<int64_t>(v[2 * kMemoryDoubles + i]);
    s.comm_seconds[i] = v[2 * kMemoryDoubles + 3 + i];
  }
  return s;
}

std::string StepRecord::ToJsonLine() const {
  nlohmann::json ranks_json = nlohmann::json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    nlohmann::json bytes, seconds;
    for (int i = 0; i < 3; ++i) {
      bytes[kCommOpSlots[i]] = ranks[r].comm_bytes[i];
      seconds[kCommOpSlots[i]] = ranks[r].comm_seconds[i];
    }
    ranks_json.push_back({{"rank", r},
                          {"memory_bytes", MemoryJson(ranks[r].memory)},
                          {"peak_memory_bytes", MemoryJson(ranks[r].peak_memory)},
                          {"comm_bytes", bytes},
                          {"comm_seconds", seconds}});
  }
  nlohmann::json j = {{"step", step},
                      {"loss", loss},
                      {"world_size", world_size},
                      {"generation", generation},
                      {"stage", stage},
                      {"step_seconds", step_seconds},
                      {"tokens_per_second", tokens_per_second},
                      {"counted_tokens", counted_tokens},
                      {"redundancy_seconds", redundancy_seconds},
                      {"lr", lr},
                      {"grad_norm", grad_norm},
                      {"ranks", ranks_json}};
  if (val_loss >= 0) j["val_loss"] = val_loss;
  if (!sample.empty()) j["sample"] = sample;
  if (!events.empty()) j["events"] = events;
  if (start_step >= 0) j["start_step"] = start_step;
  if (!live_refused.empty()) j["live_refused"] = live_refused;
  if (!leaving.empty()) j["leaving"] = leaving;
  return j.dump();
}

// JSON has no NaN or infinity: nlohmann writes them as null; read null back
// as NaN so a diverged step still shows.
double NumberOr(const nlohmann::json& j, const char* key, double absent) {
  if (!j.contains(key)) return absent;
  const nlohmann::json& v = j.at(key);
  return v.is_null() ? std::nan("") : v.get<double>();
}

absl::StatusOr<StepRecord> StepRecord::FromJsonLine(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("step record: not a JSON object");
  }
  StepRecord r;
  try {
    r.step = j.at("step").get<int64_t>();
    if (!j.contains("loss")) return absl::InvalidArgumentError("step record: no loss");
    r.loss = NumberOr(j, "loss", 0.0);
    r.val_loss = NumberOr(j, "val_loss", -1.0);
    r.lr = NumberOr(j, "lr", 0.0);
    r.grad_norm = NumberOr(j, "grad_norm", 0.0);
    r.world_size = j.at("world_size").get<int>();
    r.generation = j.at("generation").get<uint64_t>();
    r.stage = j.at("stage").get<int>();
    r.step_seconds = NumberOr(j, "step_seconds", 0.0);
    r.redundancy_seconds = NumberOr(j, "redundancy_seconds", 0.0);
    r.tokens_per_second = NumberOr(j, "tokens_per_second", 0.0);
    r.counted_tokens = static_cast<int64_t>(NumberOr(j, "counted_tokens", 0.0));
    if (j.contains("sample") && j["sample"].is_string()) r.sample = j["sample"].get<std::string>();
    r.events = j.value("events", std::vector<std::string>{});
    r.start_step = j.value("start_step", int64_t{-1});
    r.live_refused = j.value("live_refused", std::string());
    r.leaving = j.value("leaving", std::vector<int>{});
    for (const auto& rj : j.at("ranks")) {
      RankStepStats s;
      for (auto [field, mem] :
           {std::pair{"memory_bytes", &s.memory}, std::pair{"peak_memory_bytes", &s.peak_memory}}) {
        const auto& m = rj.at(field);
        *mem = {m.at("params").get<int64_t>(),     m.at("grads").get<int64_t>(),
                m.at("optimizer").get<int64_t>(),  m.at("buffers").get<int64_t>(),
                m.value("redundancy", int64_t{0}), m.value("offloaded", int64_t{0}),
                m.value("activations", int64_t{0})};
      }
      for (int i = 0; i < 3; ++i) {
        s.comm_bytes[i] = rj.at("comm_bytes").at(kCommOpSlots[i]).get<int64_t>();
        s.comm_seconds[i] = rj.at("comm_seconds").at(kCommOpSlots[i]).get<double>();
      }
      r.ranks.push_back(s);
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(std::string("step record: ") + e.what());
  }
  return r;
}

}  // namespace zeroshard
