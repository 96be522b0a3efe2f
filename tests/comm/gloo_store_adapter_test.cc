// GlooStoreAdapter: prefixes, blocking get, timeouts as gloo::IoException with
// the precise absl::Status kept.
#include "worker/comm/gloo_store_adapter.h"

#include <thread>

#include "gloo/common/error.h"
#include "gtest/gtest.h"
#include "worker/comm/in_memory_store.h"

namespace zeroshard {
namespace {

TEST(GlooStoreAdapterTest, KeysCarryThePrefix) {
  InMemoryStore store;
  GlooStoreAdapter adapter(store, "job/gen7/", absl::Seconds(5));
  adapter.set("rank_0", std::vector<char>{'a', 'b'});
  auto raw = store.Get("job/gen7/rank_0");
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(*raw, std::vector<uint8_t>({'a', 'b'}));
  EXPECT_EQ(store.Get("rank_0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(adapter.get("rank_0"), std::vector<char>({'a', 'b'}));
  EXPECT_TRUE(adapter.last_error().ok());
}

TEST(GlooStoreAdapterTest, GetWaitsForALateKey) {
  InMemoryStore store;
  GlooStoreAdapter adapter(store, "p/", absl::Seconds(5));
  std::thread late([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(store.Set("p/k", {'x'}).ok());
  });
  EXPECT_EQ(adapter.get("k"), std::vector<char>({'x'}));
  late.join();
}

TEST(GlooStoreAdapterTest, TimeoutThrowsAndKeepsDeadlineExceeded) {
  InMemoryStore store;
  GlooStoreAdapter adapter(store, "p/", absl::Milliseconds(50));
  EXPECT_THROW(adapter.wait({"never"}, std::chrono::milliseconds(30)), gloo::IoException);
  EXPECT_EQ(adapter.last_error().code(), absl::StatusCode::kDeadlineExceeded);
  // get() without a timeout uses the adapter's.
  GlooStoreAdapter other(store, "q/", absl::Milliseconds(50));
  EXPECT_THROW(other.get("never"), gloo::IoException);
  EXPECT_EQ(other.last_error().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace zeroshard
