// CoordinatorStore against a real in-process CoordinatorServer on port 0:
// ranks as threads exchange an NCCL-style unique id and addresses, count
// with Add, time out in Wait, and lose their store when the generation ends.
#include "worker/rendezvous/coordinator_store.h"

#include <algorithm>
#include <thread>

#include "gtest/gtest.h"
#include "server/rpc/coordinator_server.h"

namespace zeroshard {
namespace {

class CoordinatorStoreTest : public ::testing::Test {
 protected:
  static constexpr int kRanks = 3;
  void SetUp() override {
    CoordinatorOptions o;
    o.core.job_id = "rdv";
    o.metrics_listen = "";
    o.core.min_workers = kRanks;
    o.core.settle = absl::Milliseconds(10);
    o.core.lease_timeout = absl::Seconds(30);
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = std::shared_ptr<CoordinatorClient>(*CoordinatorClient::Connect(server_->address()));
    for (int r = 0; r < kRanks; ++r) {
      v1::JoinRequest j;
      j.set_job_id("rdv");
      j.set_worker_id("rank" + std::to_string(r));
      members_.push_back(client_->Join(j)->member_id());
    }
    v1::GetGenerationRequest g;
    g.set_job_id("rdv");
    g.set_member_id(members_[0]);
    ASSERT_TRUE(client_
                    ->WatchGeneration(g, absl::Seconds(10),
                                      [&](const v1::GenerationInfo& info) {
                                        generation_ = info.generation();
                                        return info.state() != v1::GenerationInfo::STATE_RUNNING;
                                      })
                    .ok());
    ASSERT_EQ(generation_, 1u);
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<CoordinatorClient> client_;
  std::vector<uint64_t> members_;
  uint64_t generation_ = 0;
};

TEST_F(CoordinatorStoreTest, RanksExchangeAnIdAndAddressesAndCount) {
  const std::vector<uint8_t> unique_id = {0, 1, 2, 250, 255, 0, 7};
  std::vector<std::vector<uint8_t>> seen_id(kRanks);
  std::vector<int64_t> add_results(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      CoordinatorStore store(client_, "rdv", generation_);
      if (r == 0) {
        ASSERT_TRUE(store.Set("nccl_unique_id", unique_id).ok());
      }
      ASSERT_TRUE(store.Wait({"nccl_unique_id"}, absl::Seconds(10)).ok());
      seen_id[r] = *store.Get("nccl_unique_id");
      const std::string addr = "addr/" + std::to_string(r);
      ASSERT_TRUE(store.Set(addr, {static_cast<uint8_t>(r)}).ok());
      std::vector<std::string> all;
      for (int p = 0; p < kRanks; ++p) all.push_back("addr/" + std::to_string(p));
      ASSERT_TRUE(store.Wait(all, absl::Seconds(10)).ok());
      for (int p = 0; p < kRanks; ++p) {
        EXPECT_EQ(*store.Get(all[p]), std::vector<uint8_t>{static_cast<uint8_t>(p)});
      }
      add_results[r] = *store.Add("arrived", 1);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(seen_id[r], unique_id);
  std::sort(add_results.begin(), add_results.end());
  EXPECT_EQ(add_results, (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(CoordinatorStoreTest, MissingKeyAndWaitTimeout) {
  CoordinatorStore store(client_, "rdv", generation_);
  EXPECT_TRUE(absl::IsNotFound(store.Get("absent").status()));
  const absl::Time start = absl::Now();
  absl::Status s = store.Wait({"absent"}, absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(CoordinatorStoreTest, StoreOfAnEndedGenerationIsRefused) {
  CoordinatorStore store(client_, "rdv", generation_);
  ASSERT_TRUE(store.Set("k", {1}).ok());
  v1::LeaveRequest leave;
  leave.set_job_id("rdv");
  leave.set_member_id(members_[2]);
  ASSERT_TRUE(client_->Leave(leave).ok());
  absl::Status s = store.Set("k", {2});
  EXPECT_TRUE(absl::IsAborted(s)) << s;
  EXPECT_TRUE(absl::IsAborted(store.Get("k").status()));
}

}  // namespace
}  // namespace zeroshard
