// The rendezvous store through CoordinatorCore: set/get/add, KvWait with a
// deadline that must fire (the blocking form in real time, a parked one on
// the FakeClock), wake-up on set, on generation end and on shutdown (parked
// waits: no thread, no sleep), keys of a dead generation dropped, atomic adds
// from many threads, and size limits.
#include <thread>

#include "absl/strings/str_cat.h"
#include "server/kv/kv_owner.h"
#include "server/kv/kv_store.h"
#include "tests/server/core_test_util.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using testing::TestOptions;

class KvTest : public ::testing::Test {
 protected:
  KvTest() : h_(TestOptions()) {
    a_ = h_.Join("a");
    b_ = h_.Join("b");
    h_.Advance(absl::Seconds(1));
    EXPECT_EQ(h_.core->generation(), 1u);
  }
  absl::Status Set(const std::string& key, const std::string& value, uint64_t gen = 1) {
    v1::KvSetRequest r;
    r.set_job_id("job");
    r.set_generation(gen);
    r.set_key(key);
    r.set_value(value);
    return h_.core->KvSet(r);
  }
  absl::StatusOr<std::string> Get(const std::string& key, uint64_t gen = 1) {
    v1::KvGetRequest r;
    r.set_job_id("job");
    r.set_generation(gen);
    r.set_key(key);
    return h_.core->KvGet(r);
  }
  absl::Status Wait(std::vector<std::string> keys, int64_t timeout_ms, uint64_t gen = 1) {
    v1::KvWaitRequest r;
    r.set_job_id("job");
    r.set_generation(gen);
    for (auto& k : keys) r.add_keys(k);
    r.set_timeout_ms(timeout_ms);
    return h_.core->KvWait(r);
  }
  // A parked wait (StartKvWait, the gRPC adapter's form: no thread waits);
  // its outcome lands in `*out` and `*done` is set, under the core's lock.
  absl::Status Park(std::vector<std::string> keys, absl::Status* out, bool* done,
                    int64_t timeout_ms = 10000) {
    v1::KvWaitRequest r;
    r.set_job_id("job");
    r.set_generation(1);
    for (auto& k : keys) r.add_keys(k);
    r.set_timeout_ms(timeout_ms);
    return h_.core
        ->StartKvWait(r, "test",
                      [out, done](absl::Status st) {
                        *out = std::move(st);
                        *done = true;
                      })
        .status();
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) {
    v1::KvAddRequest r;
    r.set_job_id("job");
    r.set_generation(1);
    r.set_key(key);
    r.set_delta(delta);
    return h_.core->KvAdd(r);
  }
  CoreHarness h_;
  uint64_t a_ = 0, b_ = 0;
};

TEST_F(KvTest, SetGetAddRoundTrip) {
  EXPECT_TRUE(absl::IsNotFound(Get("addr/0").status()));
  ASSERT_TRUE(Set("addr/0", std::string("\0\1binary", 8)).ok());
  EXPECT_EQ(*Get("addr/0"), std::string("\0\1binary", 8));
  ASSERT_TRUE(Set("addr/0", "v2").ok());
  EXPECT_EQ(*Get("addr/0"), "v2");
  EXPECT_EQ(*Add("count", 5), 5);
  EXPECT_EQ(*Add("count", -7), -2);
  EXPECT_EQ(*Get("count"), "-2");
  EXPECT_TRUE(absl::IsFailedPrecondition(Add("addr/0", 1).status()));
  ASSERT_TRUE(Set("big", "9223372036854775807").ok());
  EXPECT_TRUE(absl::IsOutOfRange(Add("big", 1).status()));
}

TEST_F(KvTest, WaitTimesOutAtItsDeadline) {
  const absl::Time start = absl::Now();
  absl::Status s = Wait({"never"}, 150);
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("never"), std::string::npos);
  EXPECT_GE(took, absl::Milliseconds(140));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST_F(KvTest, WaitWakesWhenEveryKeyIsSet) {
  absl::Status result;
  bool done = false;
  ASSERT_TRUE(Park({"x", "y"}, &result, &done).ok());
  EXPECT_EQ(h_.core->parked_kv_waits(), 1u);
  EXPECT_NE(h_.metrics.Render().find("\nzeroshard_kv_waits_parked 1\n"), std::string::npos);
  EXPECT_TRUE(Set("x", "1").ok());
  EXPECT_FALSE(done) << "one key of two";
  EXPECT_TRUE(Set("y", "2").ok());
  EXPECT_TRUE(done);
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(h_.core->parked_kv_waits(), 0u);
  EXPECT_NE(h_.metrics.Render().find("\nzeroshard_kv_waits_parked 0\n"), std::string::npos);
  EXPECT_TRUE(Wait({"x"}, 1).ok());  // Already there.
}

TEST_F(KvTest, WaitEndsWhenTheGenerationEnds) {
  absl::Status result;
  bool done = false;
  ASSERT_TRUE(Park({"never"}, &result, &done).ok());
  v1::LeaveRequest r;
  r.set_job_id("job");
  r.set_member_id(b_);
  EXPECT_TRUE(h_.core->Leave(r).ok());
  EXPECT_TRUE(done);
  EXPECT_TRUE(absl::IsAborted(result)) << result;
}

TEST_F(KvTest, AParkedWaitEndsAtItsDeadlineOnTheCoresClock) {
  absl::Status result;
  bool done = false;
  ASSERT_TRUE(Park({"never"}, &result, &done, 800).ok());  // Within the members' lease.
  h_.Advance(absl::Milliseconds(700));
  EXPECT_FALSE(done);
  h_.Advance(absl::Milliseconds(200));
  EXPECT_TRUE(done);
  EXPECT_TRUE(absl::IsDeadlineExceeded(result)) << result;
  EXPECT_NE(result.message().find("never"), std::string::npos) << result;
}

TEST_F(KvTest, KeysOfADeadGenerationAreDropped) {
  ASSERT_TRUE(Set("nccl_id", "secret").ok());
  h_.Join("c");
  h_.Heartbeat(a_).IgnoreError();
  h_.Heartbeat(b_).IgnoreError();
  h_.Advance(absl::Seconds(1));
  ASSERT_EQ(h_.core->generation(), 2u);
  EXPECT_TRUE(absl::IsNotFound(Get("nccl_id", 2).status()));
  EXPECT_TRUE(absl::IsAborted(Get("nccl_id", 1).status()));
}

TEST_F(KvTest, AddIsAtomicAcrossThreads) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) ASSERT_TRUE(Add("ctr", 1).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(*Get("ctr"), "4000");
}

TEST_F(KvTest, LimitsNameTheField) {
  absl::Status s = Set(std::string(257, 'k'), "v");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("key"), std::string::npos) << s;
  s = Set("", "v");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  s = Set("k", std::string((1 << 20) + 1, 'v'));
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("value"), std::string::npos) << s;
  s = Wait({"k"}, 0);
  EXPECT_NE(s.message().find("timeout_ms"), std::string::npos) << s;
  s = Wait({}, 10);
  EXPECT_NE(s.message().find("keys"), std::string::npos) << s;
  s = Wait({"k"}, 600001);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

// Each rank's keys hold at most its share of the store, so one rank
// filling its keys cannot refuse another's rendezvous (issue 40).
TEST(KvStoreTest, EachOwnerHoldsAtMostItsShare) {
  KvStore store;
  store.Reset("job/g1/");
  store.set_owner_limit(4096);
  const std::string mib(1000, 'x');
  absl::Status s;
  int written = 0;
  for (; written < 10 && (s = store.Set(absl::StrCat("blob", written, "/1"), mib)).ok();
       ++written) {
  }
  EXPECT_EQ(written, 4);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s;
  EXPECT_TRUE(store.Set("comm/0", mib).ok()) << "rank 0's share is untouched";
  EXPECT_TRUE(store.Set("nccl_unique_id", mib).ok()) << "shared keys count as rank 0's";
  EXPECT_TRUE(store.Set("blob0/1", "small").ok()) << "replacing frees the old value's bytes";
  EXPECT_TRUE(store.Set("blob9/1", mib).ok());
  store.Reset("job/g2/");
  EXPECT_TRUE(store.Set("blob0/1", mib).ok()) << "a new generation starts empty";
}

TEST(KvOwnerTest, TheLastComponentNamesTheRank) {
  EXPECT_EQ(KvKeyOwner("comm/3"), 3);
  EXPECT_EQ(KvKeyOwner("7"), 7);
  EXPECT_EQ(KvKeyOwner("gloo/x/rank_12"), 12);
  EXPECT_EQ(KvKeyOwner("shm/0"), 0);
  EXPECT_EQ(KvKeyOwner("nccl_unique_id"), 0);
  EXPECT_EQ(KvKeyOwner("comm/3a"), 0);
  EXPECT_EQ(KvKeyOwner("comm/"), 0);
  EXPECT_EQ(KvKeyOwner("comm/99999999999"), std::nullopt);
  EXPECT_TRUE(KvKeyNamesRank("rank_4"));
  EXPECT_FALSE(KvKeyNamesRank("arrived"));
  EXPECT_FALSE(KvKeyNamesRank("rank_"));
}

TEST_F(KvTest, ShutdownWakesWaiters) {
  absl::Status result;
  bool done = false;
  ASSERT_TRUE(Park({"never"}, &result, &done).ok());
  h_.core->Shutdown();
  EXPECT_TRUE(done);
  EXPECT_TRUE(absl::IsUnavailable(result)) << result;
}

}  // namespace
}  // namespace zeroshard::server
