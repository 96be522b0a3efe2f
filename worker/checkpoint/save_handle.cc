// CheckpointClient::SaveAsync and SaveHandle: snapshot, then upload on a
// background thread so training overlaps the save.
#include <algorithm>
#include <utility>

#include "worker/checkpoint/checkpoint_client.h"

namespace zeroshard::checkpoint {

std::unique_ptr<SaveHandle> CheckpointClient::SaveAsync(const SaveMetadata& meta,
                                                        const std::vector<UnitShardView>& shards,
                                                        absl::Time deadline) {
  std::unique_ptr<SaveHandle> h(new SaveHandle());
  h->client_ = this;
  h->meta_ = meta;
  // The snapshot: one buffer per view holding master, m, v back to back.
  for (const UnitShardView& v : shards) {
    const size_t n = v.range.length > 0 ? static_cast<size_t>(v.range.length) : 0;
    std::vector<float>& buf = h->snapshot_.emplace_back(3 * n);
    UnitShardView copy = v;
    if (n > 0 && v.master && v.exp_avg && v.exp_avg_sq) {
      std::copy(v.master, v.master + n, buf.begin());
      std::copy(v.exp_avg, v.exp_avg + n, buf.begin() + n);
      std::copy(v.exp_avg_sq, v.exp_avg_sq + n, buf.begin() + 2 * n);
      copy.master = buf.data();
      copy.exp_avg = buf.data() + n;
      copy.exp_avg_sq = buf.data() + 2 * n;
    }  // Else left as given, so Save reports the null buffer.
    h->views_.push_back(copy);
  }
  SaveHandle* raw = h.get();
  raw->thread_ = std::thread([raw, deadline] {
    raw->result_ = raw->client_->Save(raw->meta_, raw->views_, deadline);
    raw->snapshot_.clear();
    raw->snapshot_.shrink_to_fit();
    raw->done_.Notify();
  });
  return h;
}

SaveHandle::~SaveHandle() {
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<SaveResult> SaveHandle::Wait(absl::Duration timeout) {
  if (!done_.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError("checkpoint save still running");
  }
  if (thread_.joinable()) thread_.join();
  return result_;
}

}  // namespace zeroshard::checkpoint
