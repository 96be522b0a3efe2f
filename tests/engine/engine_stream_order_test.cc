// The engine's stream-ordered path ([Note: stream-ordered collectives] in
// worker/comm/communicator.h) on the CPU: a decorator over Gloo whose ops
// finish at issue but say they complete on the stream, so the engine takes
// the path NCCL takes on a GPU (Sequence, in-flight list, one check before
// the norm is read) without one.
// - The results are bit-identical to the host-waited Gloo path (the
//   reference here; engine_equivalence_test ties that to the unsharded
//   reference), at stages 0-3, N = 1-3, fp32 and bf16.
// - Every stream-ordered op is Waited (its error checked) before the results
//   reach the host.
// - An op whose error surfaces only at its Wait (as an asynchronous NCCL
//   error does) fails Step with that error and aborts the communicator.
#include <atomic>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{5, 9};

struct OrderStats {
  std::atomic<int> on_stream{0};  // CompleteOnStream calls.
  std::atomic<int> unwaited{0};   // Stream-ordered ops not yet Waited.
  std::atomic<int> dropped{0};    // Destroyed unwaited with no abort first.
  std::atomic<bool> aborted{false};
};

// An op already complete on the host; its status is reported at Wait only.
class DeferredWork final : public Work {
 public:
  DeferredWork(absl::Status status, OrderStats* stats)
      : status_(std::move(status)), stats_(stats) {}
  ~DeferredWork() override {
    if (ordered_ && !waited_) {
      stats_->unwaited--;
      if (!stats_->aborted) stats_->dropped++;  // Its error would go unseen.
    }
  }
  absl::Status CompleteOnStream() override {
    ordered_ = true;
    stats_->on_stream++;
    stats_->unwaited++;
    return absl::OkStatus();
  }
  absl::Status Wait(absl::Duration) override {
    if (ordered_ && !waited_) stats_->unwaited--;
    waited_ = true;
    return status_;
  }

 private:
  absl::Status status_;
  OrderStats* stats_;
  bool ordered_ = false;
  bool waited_ = false;
};

class StreamOrderedComm final : public Communicator {
 public:
  // The `fail_at`-th op (0-based; -1 = none) reports UNAVAILABLE at Wait.
  StreamOrderedComm(Communicator* inner, OrderStats* stats, int fail_at)
      : inner_(inner), stats_(stats), fail_at_(fail_at) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::unique_ptr<Work> AllGather(const void* s, void* r, int64_t c, DType d,
                                  const CollectiveOptions& o) override {
    return Finish(inner_->AllGather(s, r, c, d, o), o);
  }
  std::unique_ptr<Work> ReduceScatter(const void* s, void* r, int64_t c, DType d, ReduceOp op,
                                      const CollectiveOptions& o) override {
    return Finish(inner_->ReduceScatter(s, r, c, d, op, o), o);
  }
  std::unique_ptr<Work> AllReduce(const void* s, void* r, int64_t c, DType d, ReduceOp op,
                                  const CollectiveOptions& o) override {
    return Finish(inner_->AllReduce(s, r, c, d, op, o), o);
  }
  std::unique_ptr<Work> Broadcast(const void* s, void* r, int64_t c, DType d, int root,
                                  const CollectiveOptions& o) override {
    return Finish(inner_->Broadcast(s, r, c, d, root, o), o);
  }
  absl::Status Barrier(const CollectiveOptions& o) override { return inner_->Barrier(o); }
  void Abort() override {
    stats_->aborted = true;
    inner_->Abort();
  }
  CommStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<Work> Finish(std::unique_ptr<Work> work, const CollectiveOptions& o) {
    absl::Status s = work->Wait(o.timeout);
    if (s.ok() && ops_++ == fail_at_) s = absl::UnavailableError("injected asynchronous error");
    return std::make_unique<DeferredWork>(std::move(s), stats_);
  }

  Communicator* inner_;
  OrderStats* stats_;
  const int fail_at_;
  int ops_ = 0;
};

RunConfig Config(int stage, DType dtype) {
  RunConfig c;
  c.stage = stage;
  c.compute = dtype;
  c.reduce = dtype;
  c.steps = 4;
  c.global_batch = 12;
  c.via_host_hooks = stage % 2 == 1;  // The GPU trainer's bridge, too.
  return c;
}

TEST(EngineStreamOrderTest, BitIdenticalToHostWaitedPathAndEveryOpWaited) {
  for (int n : {1, 2, 3}) {
    for (int stage = 0; stage <= 3; ++stage) {
      for (DType dtype : {DType::kFp32, DType::kBf16}) {
        const RunConfig config = Config(stage, dtype);
        const std::string name = absl::StrCat("N", n, " stage ", stage, " ", DTypeName(dtype));
        std::vector<RankResult> plain(n), ordered(n);
        std::vector<std::unique_ptr<OrderStats>> stats(n);
        ASSERT_TRUE(RunRanksAsThreads(
                        n, absl::StrCat("so", n, stage, DTypeName(dtype)),
                        [&](int rank, Communicator* comm) -> absl::Status {
                          ZS_ASSIGN_OR_RETURN(plain[rank], TrainRank(kDims, {}, config, comm));
                          stats[rank] = std::make_unique<OrderStats>();
                          StreamOrderedComm so(comm, stats[rank].get(), -1);
                          ZS_ASSIGN_OR_RETURN(ordered[rank], TrainRank(kDims, {}, config, &so));
                          return absl::OkStatus();
                        })
                        .ok())
            << name;
        for (int r = 0; r < n; ++r) {
          EXPECT_EQ(plain[r].grad_norms, ordered[r].grad_norms) << name;
          ASSERT_EQ(plain[r].params.size(), ordered[r].params.size());
          for (size_t u = 0; u < plain[r].params.size(); ++u) {
            EXPECT_EQ(std::memcmp(plain[r].params[u].data(), ordered[r].params[u].data(),
                                  plain[r].params[u].size() * 4),
                      0)
                << name << " rank " << r << " unit " << u;
          }
          if (n > 1) {
            EXPECT_GT(stats[r]->on_stream.load(), 0) << name;
          }
          EXPECT_EQ(stats[r]->unwaited.load(), 0) << name << ": an op was never checked";
          EXPECT_EQ(stats[r]->dropped.load(), 0) << name << ": an op was never checked";
          EXPECT_FALSE(stats[r]->aborted.load()) << name;
        }
      }
    }
  }
}

TEST(EngineStreamOrderTest, ErrorSeenOnlyAtWaitFailsStepAndAborts) {
  for (int stage : {1, 2, 3}) {
    const RunConfig config = Config(stage, DType::kFp32);
    std::vector<absl::Status> got(2);
    std::vector<std::unique_ptr<OrderStats>> stats(2);
    ASSERT_TRUE(RunRanksAsThreads(2, absl::StrCat("so_fail", stage),
                                  [&](int rank, Communicator* comm) -> absl::Status {
                                    stats[rank] = std::make_unique<OrderStats>();
                                    // Both ranks fail the same op, so neither waits on the other.
                                    StreamOrderedComm so(comm, stats[rank].get(), 3);
                                    got[rank] = TrainRank(kDims, {}, config, &so).status();
                                    return absl::OkStatus();
                                  })
                    .ok());
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(absl::IsUnavailable(got[r])) << "stage " << stage << ": " << got[r];
      EXPECT_NE(got[r].message().find("injected"), std::string::npos) << got[r];
      EXPECT_TRUE(stats[r]->aborted.load()) << "stage " << stage;
    }
  }
}

}  // namespace
}  // namespace zeroshard::testing
