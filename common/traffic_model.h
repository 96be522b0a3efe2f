// The traffic model: the collectives one rank's engine runs in one training
// step, and the bytes each moves, as pure functions of the shard plan and
// the order in which the model brackets its units (the hooks of
// worker/engine/unit_hooks.h). It predicts the communicator's counters
// (worker/comm/communicator.h CommStats) exactly; tests/engine/
// memory_model_engine_test.cc checks it.
//
// Sources: shared/DESIGN.md "Step at each stage" and "Communication per
// step" (stages 0-2 move 2Ψ per rank, stage 3 3Ψ; ZeRO paper section 7,
// Rajbhandari et al., SC'20), applied to the engine's actual schedule
// (worker/engine/sharded_engine.h "How it works"), per unit u with padded
// size P_u, compute and reduce dtype sizes c and g, M micro-batches:
//   stage 0: Step all-reduces each unit's gradient once:    g P_u.
//   stage 1: Step reduce-scatters it (g P_u) and all-gathers the new
//            compute copy (c P_u); + one 8-byte all-reduce (the squared
//            global norm) when N > 1.
//   stage 2: one reduce-scatter (g P_u) per outermost backward bracket of
//            u, every micro-batch; Step's all-gather (c P_u); + the norm.
//   stage 3: as stage 2 without Step's all-gather; instead one all-gather
//            (c P_u) each time a bracket finds u not gathered, plus the
//            prefetches of the next `prefetch` units of the bracket order
//            (the order the engine recorded in the previous step) not yet
//            gathered; a gathered unit is freed when its outermost bracket
//            closes unless the order expects it within that window, and
//            Step frees the rest. Simulated over the bracket order by the
//            engine's rule and the same GatherOrder (common/gather_order.h),
//            so prefetch hits are exact.
//   buckets (bucket_bytes > 0; the engine's "buckets"): a gather bucket's
//            units go in one all-gather (one call, their bytes summed), and
//            the reduce-scatters of stages 2-3 are the engine's reduce
//            buckets (a bracket whose unit still waits there joins it; one
//            call per bucket issued, at the latest at Step), simulated the
//            same way. Counts assume a backend that runs a group as one op
//            (shm, Gloo; communicator.h).
// Sizes are the counters' (nccl-tests' algbw size): the full N * count
// buffer for all-gather and reduce-scatter, the count for all-reduce.
// Wire bytes a rank sends (and receives) on a ring are that size times the
// bus factor (nccl-tests doc/PERFORMANCE.md): (N-1)/N for all-gather and
// reduce-scatter, 2(N-1)/N for all-reduce; time at bus bandwidth B is
// sum(size * factor) / B.
//
// Units: bytes, seconds, bytes per second. Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/shard_plan.h"

namespace zeroshard {

// One bracket the model makes: Pre*(unit) ... Post*(unit), outermost only,
// in call order.
struct UnitBracket {
  int unit = 0;
  bool backward = false;  // PreBackward/PostBackward; else PreForward/PostForward.
};

enum class Collective { kAllGather = 0, kReduceScatter, kAllReduce, kBroadcast, kCount };
const char* CollectiveName(Collective op);  // "all_gather", as CommOpName.
// The ring bus factor above; 1 for broadcast.
double RingBusFactor(Collective op, int world_size);

struct CollectiveTraffic {
  int64_t calls = 0;
  int64_t bytes = 0;       // Counter size (algbw), summed over calls.
  int64_t wire_bytes = 0;  // Sent by this rank (= received), bytes * bus factor, rounded.
};

struct TrafficPrediction {
  CollectiveTraffic ops[static_cast<int>(Collective::kCount)];
  const CollectiveTraffic& of(Collective op) const { return ops[static_cast<int>(op)]; }
  CollectiveTraffic& of(Collective op) { return ops[static_cast<int>(op)]; }
  int64_t wire_bytes() const;  // Sent per rank per step, every collective.
  // Seconds at `bus_bytes_per_second` (> 0) bus bandwidth, latency ignored.
  double seconds(double bus_bytes_per_second) const;
};

struct TrafficInputs {
  int stage = 0;
  DType compute_dtype = DType::kFp32;
  DType reduce_dtype = DType::kFp32;
  int micro_batches = 1;              // Forward/backward passes per step.
  std::vector<UnitBracket> brackets;  // One micro-batch's, in order.
  int prefetch = 1;                   // EngineOptions::prefetch (stage 3), 0..64.
  int64_t bucket_bytes = 0;           // EngineOptions::bucket_bytes (stages 2-3), >= 0.
};

// One step of one rank of `plan`, after the first (stage 3 prefetches in the
// order the previous step recorded). INVALID_ARGUMENT for a stage outside
// 0..3, micro_batches < 1, a prefetch outside 0..64, or a bracket naming a
// unit outside the plan.
absl::StatusOr<TrafficPrediction> PredictTraffic(const ShardPlan& plan, const TrafficInputs& in);

// From a bare parameter count Ψ (unknown structure): each unit bracketed
// once forward and once backward, every stage-3 gather used (DESIGN.md's
// 2Ψ / 3Ψ, times the micro-batches for the per-bracket collectives).
// in.stage must be a ZeRO stage (IsZeroStage, zero_stage.h).
TrafficPrediction PredictTrafficFromParams(int64_t psi, int world_size, const TrafficInputs& in);

}  // namespace zeroshard
