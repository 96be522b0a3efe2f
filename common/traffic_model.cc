#include "common/traffic_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/gather_order.h"
#include "common/reduce_bucket.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"

namespace zeroshard {
namespace {

void Add(TrafficPrediction& t, Collective op, int64_t bytes, int world_size) {
  CollectiveTraffic& c = t.of(op);
  ++c.calls;
  c.bytes += bytes;
  c.wire_bytes += std::llround(static_cast<double>(bytes) * RingBusFactor(op, world_size));
}

// Stage 3's all-gathers over one step (micro_batches x brackets) by the
// engine's rule (worker/engine/sharded_engine.h, GatherWindow): when a unit
// opens, gathered units outside the window (the rest of its bucket and the
// next `prefetch` buckets; without buckets the next `prefetch` units) are
// freed, the unit is gathered with the rest of its bucket unless it still
// is, and each next bucket's ungathered units in one op; a closed unit
// stays gathered only while the order expects it within the window. The
// order is the one the previous step recorded (the steady state): the
// brackets themselves.
void SimulateGathers(const ShardPlan& plan, const TrafficInputs& in, TrafficPrediction& t) {
  const int64_t c = DTypeSize(in.compute_dtype);
  const int units = static_cast<int>(plan.units.size());
  GatherOrder order(units);
  std::vector<int64_t> weight;
  for (const UnitPlan& u : plan.units) weight.push_back(c * u.padded_numel);
  order.SetBuckets(weight, in.bucket_bytes);
  for (int mb = 0; mb < in.micro_batches; ++mb) {
    for (const UnitBracket& b : in.brackets) order.Record(b.unit, 0);
  }
  order.EndStep(0);
  std::vector<bool> gathered(units, false);
  auto gather = [&](std::vector<int> group, const std::vector<int>& bucket) {
    for (int u : bucket) {
      if (!gathered[u] && std::find(group.begin(), group.end(), u) == group.end())
        group.push_back(u);
    }
    int64_t bytes = 0;
    for (int u : group) {
      gathered[u] = true;
      bytes += weight[u];
    }
    if (!group.empty()) Add(t, Collective::kAllGather, bytes, plan.world_size);
  };
  for (int mb = 0; mb < in.micro_batches; ++mb) {
    for (const UnitBracket& b : in.brackets) {
      order.Record(b.unit, in.prefetch);
      const std::vector<std::vector<int>> window = order.WindowBuckets(in.prefetch);
      for (int u = 0; u < units; ++u) {
        if (u != b.unit && !order.Expects(u, in.prefetch)) gathered[u] = false;
      }
      gather(gathered[b.unit] ? std::vector<int>{} : std::vector<int>{b.unit}, window[0]);
      for (size_t k = 1; k < window.size(); ++k) gather({}, window[k]);
      gathered[b.unit] = order.Expects(b.unit, in.prefetch);
    }
  }
}

// Stages 2-3's reduce-scatters: every backward bracket's unit through the
// engine's reduce bucket (common/reduce_bucket.h), one call per group.
void SimulateReduces(const ShardPlan& plan, const TrafficInputs& in, TrafficPrediction& t) {
  const int64_t g = DTypeSize(in.reduce_dtype);
  ReduceBucket bucket(in.bucket_bytes);
  auto issue = [&](const std::vector<int>& units) {
    int64_t bytes = 0;
    for (int u : units) bytes += g * plan.units[u].padded_numel;
    Add(t, Collective::kReduceScatter, bytes, plan.world_size);
  };
  for (int mb = 0; mb < in.micro_batches; ++mb) {
    for (const UnitBracket& b : in.brackets) {
      if (!b.backward) continue;
      bucket.Take(b.unit);
      bucket.Add(b.unit, g * plan.units[b.unit].padded_numel, issue);
    }
  }
  bucket.Flush(issue);
}

}  // namespace

const char* CollectiveName(Collective op) {
  switch (op) {
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kCount:
      break;
  }
  return "?";
}

double RingBusFactor(Collective op, int world_size) {
  const double n = world_size < 1 ? 1 : world_size;
  switch (op) {
    case Collective::kAllGather:
    case Collective::kReduceScatter:
      return (n - 1.0) / n;
    case Collective::kAllReduce:
      return 2.0 * (n - 1.0) / n;
    default:
      return 1.0;
  }
}

int64_t TrafficPrediction::wire_bytes() const {
  int64_t sum = 0;
  for (const CollectiveTraffic& c : ops) sum += c.wire_bytes;
  return sum;
}

double TrafficPrediction::seconds(double bus_bytes_per_second) const {
  return bus_bytes_per_second > 0 ? static_cast<double>(wire_bytes()) / bus_bytes_per_second : 0;
}

absl::StatusOr<TrafficPrediction> PredictTraffic(const ShardPlan& plan, const TrafficInputs& in) {
  if (!IsZeroStage(in.stage)) {
    return absl::InvalidArgumentError(absl::StrCat("stage: ", in.stage, " (expected 0..3)"));
  }
  if (in.micro_batches < 1) return absl::InvalidArgumentError("micro_batches: must be >= 1");
  if (in.prefetch < 0 || in.prefetch > 64) {
    return absl::InvalidArgumentError(absl::StrCat("prefetch: ", in.prefetch, " (expected 0..64)"));
  }
  if (in.bucket_bytes < 0) return absl::InvalidArgumentError("bucket_bytes: must be >= 0");
  const int units = static_cast<int>(plan.units.size());
  for (const UnitBracket& b : in.brackets) {
    if (b.unit < 0 || b.unit >= units) {
      return absl::InvalidArgumentError(
          absl::StrCat("bracket unit ", b.unit, " outside the plan's ", units));
    }
  }
  const int n = plan.world_size;
  const int64_t c = DTypeSize(in.compute_dtype), g = DTypeSize(in.reduce_dtype);
  const ZeroStage& z = ZeroStageOf(in.stage);
  TrafficPrediction t;
  if (z.shards_params) SimulateGathers(plan, in, t);
  if (z.reduction == GradReduction::kReduceScatterInBackward) SimulateReduces(plan, in, t);
  for (const UnitPlan& u : plan.units) {
    if (z.reduction == GradReduction::kAllReduceAtStep) {
      Add(t, Collective::kAllReduce, g * u.padded_numel, n);
    }
    if (z.reduction == GradReduction::kReduceScatterAtStep) {
      Add(t, Collective::kReduceScatter, g * u.padded_numel, n);
    }
    if (z.gathers_after_step) Add(t, Collective::kAllGather, c * u.padded_numel, n);
  }
  if (z.shards_optimizer && n > 1) Add(t, Collective::kAllReduce, 8, n);  // The squared norm.
  return t;
}

TrafficPrediction PredictTrafficFromParams(int64_t psi, int world_size, const TrafficInputs& in) {
  const int64_t c = DTypeSize(in.compute_dtype), g = DTypeSize(in.reduce_dtype);
  const int m = in.micro_batches < 1 ? 1 : in.micro_batches;
  const ZeroStage& z = ZeroStageOf(in.stage);
  TrafficPrediction t;
  switch (z.reduction) {
    case GradReduction::kAllReduceAtStep:
      Add(t, Collective::kAllReduce, g * psi, world_size);
      break;
    case GradReduction::kReduceScatterAtStep:
      Add(t, Collective::kReduceScatter, g * psi, world_size);
      break;
    case GradReduction::kReduceScatterInBackward:
      for (int mb = 0; mb < m; ++mb) {
        Add(t, Collective::kReduceScatter, g * psi, world_size);
        if (z.shards_params) {
          Add(t, Collective::kAllGather, c * psi, world_size);  // Forward.
          Add(t, Collective::kAllGather, c * psi, world_size);  // Backward.
        }
      }
      break;
  }
  if (z.gathers_after_step) Add(t, Collective::kAllGather, c * psi, world_size);
  if (z.shards_optimizer && world_size > 1) Add(t, Collective::kAllReduce, 8, world_size);
  return t;
}

}  // namespace zeroshard
