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
// Buckets (SetBuckets; DeepSpeed ZeRO-3's prefetch bucket, coalesced into
// one all-gather): the order's positions are cut greedily into runs whose
// distinct units weigh at most `capacity` together (a unit heavier than it
// alone makes a bucket). The window `count` then means the rest of the
// bucket the cursor is in plus the next `count` buckets, where it otherwise
// means the next `count` positions (each position its own bucket).
//
// Thread safety: none; the training thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zeroshard {

class GatherOrder {
 public:
  // Forward then backward order over `num_units` units.
  explicit GatherOrder(int num_units);
  // Cuts the order into buckets by unit_weight[u] (a unit outside it weighs
  // 0) of at most `capacity`; capacity <= 0 = every position alone. Kept
  // across EndStep (the new order is cut the same way).
  void SetBuckets(std::vector<int64_t> unit_weight, int64_t capacity);
  // Records the gather of `unit` and returns the units of the window of
  // `count` after it (Ahead).
  std::vector<int> Record(int unit, int count);
  // The step ended: the gathers recorded since the last EndStep become the
  // order (unless there were none). Returns the window of `count` at the
  // next step's start.
  std::vector<int> EndStep(int count);
  // Whether `unit` is in the window of `count` (what Record or EndStep last
  // returned for that count).
  bool Expects(int unit, int count) const;
  // The window of `count` in order, without recording a gather.
  std::vector<int> Ahead(int count) const;
  // The same window by bucket: [0] the distinct units of the rest of the
  // cursor's bucket (empty without buckets, or at a step's start), then
  // those of each of the next `count` buckets.
  std::vector<std::vector<int>> WindowBuckets(int count) const;
  const std::vector<int>& order() const { return order_; }

 private:
  static constexpr size_t kMaxRecorded = 1 << 16;  // A bound on a runaway step.

  // End (one past) of the window of `count`: an index into order_.
  size_t WindowEnd(int count) const;
  // Where the cursor's bucket ends (cursor_ at a step's start).
  size_t CurrentBucketEnd() const { return cursor_ == 0 ? 0 : bucket_end_[cursor_ - 1]; }
  void CutBuckets();

  std::vector<int> order_;     // The expected gathers of one step.
  std::vector<int> recorded_;  // This step's, so far.
  size_t cursor_ = 0;          // Index in order_ of the next expected gather.
  std::vector<int64_t> weight_;
  int64_t capacity_ = 0;
  std::vector<size_t> bucket_end_;  // Per position of order_: its bucket's end.
};

}  // namespace zeroshard
