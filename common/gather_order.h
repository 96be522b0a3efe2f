// GatherOrder: which units the stage-3 engine will use or all-gather next,
// learned from the previous step. The engine keeps two: the order in which
// the model opens units (its all-gather prefetch: FSDP2's recorded
// forward/backward order, Zhao et al., VLDB'23, section 3.3), and the order
// of its all-gathers, so the parameter store (worker/offload/param_store.h)
// can read shards from NVMe ahead of them (ZeRO-Infinity's prefetch,
// Rajbhandari et al., SC'21, section 6.2: the order is traced in the first
// iteration and the same order is assumed for the following ones). The
// traffic model (traffic_model.h) replays the first to count the gathers.
//
// How it works: the order starts as the one the engine knows a priori,
// forward 0..U-1 then backward U-1..0 (Seed), and every step replaces it by
// the gathers it saw (Record, EndStep): with a tied unit (the GPT's
// embedding and head) or the engine's own prefetch the real order differs,
// and it repeats from step to step. A cursor follows the last order as the
// gathers come; a gather that is not the expected one moves the cursor to
// that unit's first occurrence (an eval forward pass, a changed pattern),
// so predictions recover instead of staying off.
//
// Thread safety: none; the training thread owns it.
#pragma once

#include <cstddef>
#include <vector>

namespace zeroshard {

class GatherOrder {
 public:
  // Forward then backward order over `num_units` units.
  explicit GatherOrder(int num_units);
  // Records the gather of `unit` and returns up to `count` units expected
  // after it, in order.
  std::vector<int> Record(int unit, int count);
  // The step ended: the gathers recorded since the last EndStep become the
  // order (unless there were none). Returns up to `count` units expected
  // first in the next step.
  std::vector<int> EndStep(int count);
  // Whether `unit` is among the `count` units expected next (what Record or
  // EndStep last returned for that count).
  bool Expects(int unit, int count) const;
  // Up to `count` units expected next, without recording a gather.
  std::vector<int> Ahead(int count) const;
  const std::vector<int>& order() const { return order_; }

 private:
  static constexpr size_t kMaxRecorded = 1 << 16;  // A bound on a runaway step.

  std::vector<int> order_;     // The expected gathers of one step.
  std::vector<int> recorded_;  // This step's, so far.
  size_t cursor_ = 0;          // Index in order_ of the next expected gather.
};

}  // namespace zeroshard
