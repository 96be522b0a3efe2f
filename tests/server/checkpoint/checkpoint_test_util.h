// Shared fixtures for the checkpoint tests: a small model's units with odd
// shapes, reference state (master, m, v per unit, padded with zeros), and
// chunk builders. The reference state is generated independently of the code
// under test, from a seeded RNG.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/rpc/plan_proto.h"
#include "common/shard_plan.h"
#include "zeroshard/v1/checkpoint.pb.h"

namespace zeroshard::testing {

inline std::vector<UnitSpec> OddUnits() {
  return {
      {"embed", {{"wte", {37, 8}, DType::kFp32}, {"wpe", {5, 8}, DType::kFp32}}},
      {"block.0", {{"h.0.w", {8, 13}, DType::kFp32}, {"h.0.b", {13}, DType::kFp32}}},
      {"block.1", {{"h.1.w", {8, 13}, DType::kFp32}, {"h.1.b", {13}, DType::kFp32}}},
      {"head", {{"ln_f.g", {8}, DType::kFp32}, {"scalar", {}, DType::kFp32}}},
  };
}

inline const v1::TensorKind kKinds[] = {v1::TENSOR_KIND_MASTER, v1::TENSOR_KIND_EXP_AVG,
                                        v1::TENSOR_KIND_EXP_AVG_SQ};

// Full state of one unit: [kind index][element], sized to numel (no padding).
using UnitState = std::vector<std::vector<float>>;
using ModelState = std::map<std::string, UnitState>;

inline ModelState RandomState(const std::vector<UnitSpec>& units, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  ModelState out;
  for (const UnitSpec& u : units) {
    int64_t numel = 0;
    for (const TensorSpec& t : u.params) {
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      numel += n;
    }
    UnitState s(3, std::vector<float>(static_cast<size_t>(numel)));
    for (auto& k : s)
      for (float& x : k) x = dist(rng);
    out[u.name] = std::move(s);
  }
  return out;
}

// Element e of a unit's padded buffer (padding reads as 0).
inline float At(const UnitState& s, int kind, int64_t e) {
  return e < static_cast<int64_t>(s[kind].size()) ? s[kind][static_cast<size_t>(e)] : 0.f;
}

inline v1::ShardChunk MakeChunk(const std::string& id, int rank, const std::string& unit,
                                v1::TensorKind kind, int64_t offset,
                                const std::vector<float>& values) {
  v1::ShardChunk c;
  c.set_checkpoint_id(id);
  c.set_rank(rank);
  c.set_unit(unit);
  c.set_kind(kind);
  c.set_offset(offset);
  c.set_length(static_cast<int64_t>(values.size()));
  c.set_dtype(v1::DTYPE_FP32);
  c.set_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  c.set_xxhash64(XXH64(c.data().data(), c.data().size(), 0));
  return c;
}

// Every chunk rank `rank` uploads, `chunk_elems` elements at most each.
inline std::vector<v1::ShardChunk> RankChunks(const std::string& id, const ShardPlan& plan,
                                              const ModelState& state, int rank,
                                              int64_t chunk_elems) {
  std::vector<v1::ShardChunk> out;
  for (const UnitPlan& u : plan.units) {
    const ElementRange shard = u.shard(rank);
    for (int k = 0; k < 3; ++k) {
      for (int64_t off = shard.offset; off < shard.end(); off += chunk_elems) {
        const int64_t n = std::min(chunk_elems, shard.end() - off);
        std::vector<float> v(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i)
          v[static_cast<size_t>(i)] = At(state.at(u.name), k, off + i);
        out.push_back(MakeChunk(id, rank, u.name, kKinds[k], off, v));
      }
    }
  }
  return out;
}

inline v1::BeginCheckpointRequest MakeBegin(const ShardPlan& plan, int64_t step, int rank,
                                            int stage = 3) {
  v1::BeginCheckpointRequest r;
  r.set_job_id("job");
  r.set_step(step);
  r.set_rank(rank);
  r.set_world_size(plan.world_size);
  r.set_stage(stage);
  r.set_model_config_json(R"({"d_model":8})");
  ShardPlanToProto(plan, r.mutable_plan());
  r.set_optimizer_step(step);
  r.set_data_cursor(step * 16);
  r.set_rng_state("rng-" + std::to_string(rank));
  return r;
}

}  // namespace zeroshard::testing
