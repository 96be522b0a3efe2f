// ProtoToJson (cli/proto_json.h), against values set by hand: 64-bit
// integers are JSON numbers (not strings as in protobuf's JSON mapping),
// NaN is null, enums are names, zero scalars are present, unset messages
// absent, repeated fields arrays.
#include "cli/proto_json.h"

#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"
#include "zeroshard/v1/coordinator.pb.h"

namespace zeroshard {
namespace {

TEST(ProtoJsonTest, NumbersAreNumbersAndNanIsNull) {
  v1::JobStatus st;
  st.set_job_id("job");
  st.set_step(int64_t{1} << 40);
  st.set_loss(std::nan(""));
  st.set_tokens_per_second(12.5);
  st.set_job_state(v1::JOB_STATE_RUNNING);
  v1::MemberInfo* m = st.add_members();
  m->set_worker_id("w0");
  m->set_rank(3);
  const nlohmann::json j = ProtoToJson(st);
  ASSERT_TRUE(j["step"].is_number_integer()) << j.dump();
  EXPECT_EQ(j["step"].get<int64_t>(), int64_t{1} << 40);
  EXPECT_TRUE(j["loss"].is_null()) << j.dump();
  EXPECT_DOUBLE_EQ(j["tokens_per_second"].get<double>(), 12.5);
  EXPECT_EQ(j["job_state"], "JOB_STATE_RUNNING");
  EXPECT_EQ(j["failures"], 0);            // Zero scalars are printed.
  EXPECT_FALSE(j.contains("last_lost"));  // An unset message is not.
  ASSERT_TRUE(j["members"].is_array());
  ASSERT_EQ(j["members"].size(), 1u);
  EXPECT_EQ(j["members"][0]["rank"], 3);
  EXPECT_EQ(j["members"][0]["worker_id"], "w0");
  st.mutable_last_lost()->set_rank(2);
  EXPECT_EQ(ProtoToJson(st)["last_lost"]["rank"], 2);
}

}  // namespace
}  // namespace zeroshard
