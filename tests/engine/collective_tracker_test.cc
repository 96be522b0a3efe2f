// CollectiveTracker's early returns with collectives still issued
// ([Note: failed collective buffers]): the buffer of the op whose wait
// failed and of every op after it are retired (the backend may still write
// them), the communicator is aborted, earlier ops' buffers stay, and an
// error before any wait (AbandonIssued) retires every issued op's buffer.
// A fake communicator whose ops complete with statuses the test sets.
#include "worker/engine/collective_tracker.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "worker/device/cpu_device.h"
#include "worker/device/device_buffer.h"

namespace zeroshard {
namespace {

class ScriptedWork final : public Work {
 public:
  explicit ScriptedWork(absl::Status status) : status_(std::move(status)) {}
  absl::Status Wait(absl::Duration) override { return status_; }

 private:
  absl::Status status_;
};

// Op i's Wait returns statuses[i] (OK past the end).
class ScriptedComm final : public Communicator {
 public:
  explicit ScriptedComm(std::vector<absl::Status> statuses) : statuses_(std::move(statuses)) {}
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  std::unique_ptr<Work> AllGather(const void*, void*, int64_t, DType,
                                  const CollectiveOptions&) override {
    return Next();
  }
  std::unique_ptr<Work> ReduceScatter(const void*, void*, int64_t, DType, ReduceOp,
                                      const CollectiveOptions&) override {
    return Next();
  }
  std::unique_ptr<Work> AllReduce(const void*, void*, int64_t, DType, ReduceOp,
                                  const CollectiveOptions&) override {
    return Next();
  }
  std::unique_ptr<Work> Broadcast(const void*, void*, int64_t, DType, int,
                                  const CollectiveOptions&) override {
    return Next();
  }
  absl::Status Barrier(const CollectiveOptions&) override { return absl::OkStatus(); }
  void Abort() override { ++aborts; }
  CommStats stats() const override { return {}; }

  int aborts = 0;

 private:
  std::unique_ptr<Work> Next() {
    const size_t i = issued_++;
    return std::make_unique<ScriptedWork>(i < statuses_.size() ? statuses_[i] : absl::OkStatus());
  }
  std::vector<absl::Status> statuses_;
  size_t issued_ = 0;
};

struct Rig {
  explicit Rig(std::vector<absl::Status> statuses, int ops)
      : comm(std::move(statuses)), tracker(&comm, absl::Seconds(1)) {
    for (int i = 0; i < ops; ++i) {
      buffers.emplace_back(&device, &accountant, MemoryKind::kParams);
      EXPECT_TRUE(buffers.back().Allocate(4096).ok());
    }
    for (int i = 0; i < ops; ++i) {
      issued.push_back(
          {comm.AllGather(nullptr, buffers[i].data(), 1, DType::kFp32, {}), &buffers[i]});
    }
  }
  ~Rig() { tracker.AbandonRetired(); }

  CpuDevice device{1};
  MemoryAccountant accountant;
  ScriptedComm comm;
  CollectiveTracker tracker;
  std::vector<DeviceBuffer> buffers;
  std::vector<IssuedWork> issued;
};

TEST(CollectiveTrackerTest, AFailedWaitRetiresItsBufferAndEveryLaterOnesAndAborts) {
  for (const bool sequence : {false, true}) {
    Rig rig({absl::OkStatus(), absl::DeadlineExceededError("op 1 timed out")}, 4);
    const absl::Status s =
        sequence ? rig.tracker.SequenceEach(rig.issued) : rig.tracker.AwaitEach(rig.issued);
    EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
    EXPECT_TRUE(rig.buffers[0].allocated()) << "op 0 finished: its buffer stays";
    for (int i = 1; i < 4; ++i) EXPECT_FALSE(rig.buffers[i].allocated()) << "op " << i;
    EXPECT_GE(rig.comm.aborts, 1);
    EXPECT_TRUE(rig.issued.empty());
    EXPECT_TRUE(rig.tracker.failed());
  }
}

TEST(CollectiveTrackerTest, EveryWaitOkKeepsEveryBufferAndAbortsNothing) {
  Rig rig({}, 3);
  EXPECT_TRUE(rig.tracker.AwaitEach(rig.issued).ok());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(rig.buffers[i].allocated());
  EXPECT_EQ(rig.comm.aborts, 0);
  EXPECT_TRUE(rig.issued.empty());
}

TEST(CollectiveTrackerTest, AbandoningIssuedOpsRetiresEachBufferOnce) {
  Rig rig({}, 3);
  const absl::Status cause = absl::InternalError("the optimizer store failed");
  rig.tracker.AbandonIssued(rig.issued, cause);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(rig.buffers[i].allocated());
  EXPECT_EQ(rig.comm.aborts, 1);
  EXPECT_TRUE(rig.issued.empty());
  EXPECT_EQ(rig.tracker.status(), cause) << "the cause is kept: teardown waits briefly";
  rig.tracker.AbandonIssued(rig.issued, cause);  // Nothing issued: nothing to do.
  EXPECT_EQ(rig.comm.aborts, 1);
}

}  // namespace
}  // namespace zeroshard
