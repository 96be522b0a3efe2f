// The metrics registry's text format against hand-written expected output,
// and `promtool check metrics` on the /metrics a real in-process
// coordinator serves after step reports.
#include "common/infra/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "common/rpc/coordinator_client.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_server.h"
#include "tests/server/http_get.h"
#include "tests/support/exposition.h"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

using server::testing::HttpGet;

std::multiset<std::string> SortedLines(const std::string& text) {
  std::multiset<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.insert(line);
  return out;
}

TEST(MetricsRegistryTest, RendersTextExposition) {
  MetricsRegistry r;
  MetricFamily* c = r.Counter("demo_bytes_total", "Bytes moved.", {"rank", "op"});
  MetricFamily* g = r.Gauge("demo_loss", "A loss.");
  MetricFamily* h = r.Histogram("demo_seconds", "Step time.", {0.5, 1});
  r.Gauge("demo_unused", "Never set: declared, no samples.");
  c->Add({"0", "all_gather"}, 3);
  c->Add({"0", "all_gather"}, 4);
  c->Add({"1", "we\"ird\\"}, 1);
  c->Add({"1", "we\"ird\\"}, -5);  // Counters never go down.
  c->Add({"1", "we\"ird\\"}, std::nan(""));
  g->Set({}, std::nan(""));
  h->Observe({}, 0.25);
  h->Observe({}, 0.75);
  h->Observe({}, 3);
  h->Observe({}, std::nan(""));  // Not an observation.
  // prometheus-cpp's TextSerializer: families by name, label names sorted,
  // label values escaped.
  const std::string expected =
      "# HELP demo_bytes_total Bytes moved.\n"
      "# TYPE demo_bytes_total counter\n"
      "demo_bytes_total{op=\"all_gather\",rank=\"0\"} 7\n"
      "demo_bytes_total{op=\"we\\\"ird\\\\\",rank=\"1\"} 1\n"
      "# HELP demo_loss A loss.\n"
      "# TYPE demo_loss gauge\n"
      "demo_loss Nan\n"
      "# HELP demo_seconds Step time.\n"
      "# TYPE demo_seconds histogram\n"
      "demo_seconds_count 3\n"
      "demo_seconds_sum 4\n"
      "demo_seconds_bucket{le=\"0.5\"} 1\n"
      "demo_seconds_bucket{le=\"1\"} 2\n"
      "demo_seconds_bucket{le=\"+Inf\"} 3\n"
      "# HELP demo_unused Never set: declared, no samples.\n"
      "# TYPE demo_unused gauge\n";
  // Series within a family come in prometheus-cpp's (hash) order: compare
  // the lines as sets, and the families' order by their HELP lines.
  const std::string text = r.Render();
  EXPECT_EQ(SortedLines(text), SortedLines(expected)) << text;
  size_t last = 0;
  for (const char* family : {"demo_bytes_total", "demo_loss", "demo_seconds", "demo_unused"}) {
    const size_t at = text.find(std::string("# HELP ") + family + " ");
    ASSERT_NE(at, std::string::npos) << family;
    EXPECT_GE(at, last) << family;
    EXPECT_EQ(text.find(std::string("# TYPE ") + family + " "), text.find('\n', at) + 1)
        << family;  // TYPE right after HELP.
    last = at;
  }
  c->Remove({"0", "all_gather"});
  EXPECT_EQ(c->Value({"0", "all_gather"}), 0);
  EXPECT_FALSE(c->Has({"0", "all_gather"}));
  EXPECT_EQ(c->Value({"1", "we\"ird\\"}), 1);
  c->Clear();
  EXPECT_EQ(r.Render().find("\ndemo_bytes_total{"), std::string::npos);
}

TEST(MetricsRegistryTest, CounterSetMirrorsATotalAndReadsASmallerOneAsAReset) {
  MetricsRegistry r;
  MetricFamily* c = r.Counter("demo_total", "Mirrored.", {"rank"});
  c->Set({"0"}, 100);
  c->Set({"0"}, 250);
  EXPECT_EQ(c->Value({"0"}), 250);
  c->Set({"0"}, 40);  // The worker restarted its count.
  EXPECT_EQ(c->Value({"0"}), 40);
  c->Set({"0"}, -3);  // Never negative.
  EXPECT_EQ(c->Value({"0"}), 40);
  EXPECT_NE(r.Render().find("demo_total{rank=\"0\"} 40\n"), std::string::npos) << r.Render();
}

TEST(MetricsRegistryTest, FormatsValues) {
  MetricsRegistry r;
  MetricFamily* g = r.Gauge("demo_value", "Values.", {"case"});
  g->Set({"a"}, 0.1);
  g->Set({"b"}, 1e21);
  g->Set({"c"}, -std::numeric_limits<double>::infinity());
  g->Set({"d"}, 12345678);
  const std::string text = r.Render();
  for (const char* line : {"demo_value{case=\"a\"} 0.1\n", "demo_value{case=\"b\"} 1e+21\n",
                           "demo_value{case=\"c\"} -Inf\n", "demo_value{case=\"d\"} 12345678\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
}

class MetricsEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoordinatorOptions o;
    o.core.job_id = "metrics";
    o.core.min_workers = 2;
    o.core.settle = absl::Milliseconds(20);
    auto s = CoordinatorServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    client_ = *CoordinatorClient::Connect(server_->address());
  }

  // Joins w0 and w1 into `ids` and waits for their generation to run.
  ::testing::AssertionResult JoinTwoAndWaitRunning(std::vector<uint64_t>& ids,
                                                   uint64_t& generation) {
    for (const char* w : {"w0", "w1"}) {
      v1::JoinRequest j;
      j.set_job_id("metrics");
      j.set_worker_id(w);
      j.set_hostname(std::string("host-") + w);
      j.set_pod(std::string("pod-") + w);
      ids.push_back(client_->Join(j)->member_id());
    }
    v1::GetGenerationRequest g;
    g.set_job_id("metrics");
    g.set_member_id(ids[1]);
    const absl::Status s =
        client_->WatchGeneration(g, absl::Seconds(10), [&](const v1::GenerationInfo& info) {
          generation = info.generation();
          return info.state() != v1::GenerationInfo::STATE_RUNNING;
        });
    if (!s.ok()) return ::testing::AssertionFailure() << s;
    return ::testing::AssertionSuccess();
  }

  // Each member (rank i = ids[i]) reports step 3 with loss, throughput,
  // memory and one all_gather stat.
  ::testing::AssertionResult ReportStep3(const std::vector<uint64_t>& ids, uint64_t generation) {
    for (int rank = 0; rank < 2; ++rank) {
      v1::StepReport r;
      r.set_job_id("metrics");
      r.set_member_id(ids[rank]);
      r.set_generation(generation);
      r.set_rank(rank);
      r.set_step(3);
      r.set_loss(2.5);
      r.set_tokens_per_second(1000);
      r.set_step_seconds(0.3);
      r.set_tokens(8192);
      r.set_grad_norm(3.0);
      r.set_clip_coef(0.5);
      r.set_rss_bytes(int64_t{100 << 20} * (rank + 1));
      r.mutable_memory()->set_params(1024 * (rank + 1));
      r.mutable_memory()->set_optimizer(4096);
      r.mutable_memory()->set_activations(3000 * (rank + 1));
      r.mutable_device_memory()->set_device("cuda:0 test");
      r.mutable_device_memory()->set_total_bytes(int64_t{1} << 30);
      r.mutable_device_memory()->set_free_bytes(int64_t{1} << 29);
      v1::CommStat* c = r.add_comm();
      c->set_op("all_gather");
      c->set_bytes(1 << 20);
      c->set_seconds(0.01);
      c->set_calls(4);
      if (absl::Status s = client_->ReportStep(r); !s.ok()) {
        return ::testing::AssertionFailure() << "rank " << rank << ": " << s;
      }
    }
    return ::testing::AssertionSuccess();
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::unique_ptr<CoordinatorClient> client_;
};

TEST_F(MetricsEndpointTest, PromtoolAcceptsRealMetricsWithTrainingState) {
  std::vector<uint64_t> ids;
  uint64_t generation = 0;
  ASSERT_TRUE(JoinTwoAndWaitRunning(ids, generation));
  // Before the first step there is no loss series (not a NaN one).
  const std::string before = HttpGet(server_->metrics_port(), "/metrics").body;
  EXPECT_EQ(before.find("\nzeroshard_loss "), std::string::npos) << before;
  ASSERT_TRUE(ReportStep3(ids, generation));
  const auto response = HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_EQ(response.code, 200);
  const std::string& text = response.body;
  for (const char* line :
       {"zeroshard_generation 1\n", "zeroshard_workers 2\n", "zeroshard_step 3\n",
        "zeroshard_loss 2.5\n", "zeroshard_tokens_per_second 1000\n",
        "zeroshard_memory_bytes{kind=\"params\",rank=\"1\"} 2048\n",
        "zeroshard_device_memory_bytes{device=\"cuda:0 test\",rank=\"1\",state=\"total\"} "
        "1073741824\n",
        "zeroshard_device_memory_bytes{device=\"cuda:0 test\",rank=\"0\",state=\"free\"} "
        "536870912\n",
        "zeroshard_comm_bytes_total{op=\"all_gather\",rank=\"0\"} 1048576\n",
        "zeroshard_comm_seconds_total{op=\"all_gather\",rank=\"0\"} 0.01\n",
        "zeroshard_step_seconds_bucket{le=\"0.5\"} 1\n", "zeroshard_step_seconds_count 1\n",
        "zeroshard_generation_changes_total{reason=\"start\"} 1\n",
        // Every reason at 0 from the start, so increase() sees its first event.
        "zeroshard_generation_changes_total{reason=\"handoff\"} 0\n",
        "zeroshard_generation_changes_total{reason=\"lease_expired\"} 0\n",
        "zeroshard_member_removals_total{reason=\"leave\"} 0\n", "zeroshard_heartbeats_total 0\n",
        "zeroshard_joins_total 2\n", "zeroshard_memory_bytes{kind=\"redundancy\",rank=\"1\"} 0\n",
        "zeroshard_memory_bytes{kind=\"activations\",rank=\"1\"} 6000\n",
        // This test runs on glibc's malloc; the coordinator's binaries on
        // tcmalloc (coordinator_process_test checks theirs).
        "zeroshard_build_info{allocator=\"glibc\",insecure=\"false\",version=\"",
        // Counted once per step, not per rank: both ranks reported step 3.
        "zeroshard_tokens_total 8192\n", "zeroshard_grad_norm 3\n",
        "zeroshard_grad_norm_clipped 1.5\n", "zeroshard_grad_clips_total 1\n",
        "zeroshard_worker_rss_bytes{rank=\"1\"} 209715200\n",
        "zeroshard_rank_info{host=\"host-w1\",pod=\"pod-w1\",rank=\"1\",worker_id=\"w1\"} 1\n",
        "zeroshard_rank_info{host=\"host-w0\",pod=\"pod-w0\",rank=\"0\",worker_id=\"w0\"} 1\n",
        "# TYPE process_cpu_seconds_total counter\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\n" << text;
  }
  EXPECT_EQ(HttpGet(server_->metrics_port(), "/healthz").code, 200);
  EXPECT_EQ(HttpGet(server_->metrics_port(), "/readyz").code, 200);

  const std::string promtool = "promtool";
  if (zeroshard::testing::RunCommand("command -v promtool").exit_code != 0) {
    GTEST_SKIP() << "promtool is not installed (scripts/setup-test-tools.sh installs it)";
  }
  const std::string path = zeroshard::testing::MakeTempDir("metrics") + "/metrics.txt";
  std::ofstream(path) << text;
  const auto check = zeroshard::testing::RunCommand(promtool + " check metrics < " + path);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

// The coordinator's own process (the in-process server is this test's
// process): figures checked against what the test reads itself.
TEST_F(MetricsEndpointTest, ProcessMetricsDescribeThisProcess) {
  const std::string text = HttpGet(server_->metrics_port(), "/metrics").body;
  const zeroshard::testing::Samples m = zeroshard::testing::ParseExposition(text);
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes",
                           "process_virtual_memory_bytes", "process_open_fds", "process_max_fds",
                           "process_start_time_seconds"}) {
    ASSERT_TRUE(m.count(name)) << name << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE process_resident_memory_bytes gauge\n"), std::string::npos);
  long long pages = 0, resident = 0;
  std::ifstream("/proc/self/statm") >> pages >> resident;
  const double rss = static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  EXPECT_NEAR(m.at("process_resident_memory_bytes"), rss, 0.5 * rss);
  EXPECT_GE(m.at("process_virtual_memory_bytes"), m.at("process_resident_memory_bytes"));
  EXPECT_GT(m.at("process_open_fds"), 2);
  rlimit lim{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &lim), 0);
  EXPECT_EQ(m.at("process_max_fds"), static_cast<double>(lim.rlim_cur));
  const double now = static_cast<double>(absl::ToUnixSeconds(absl::Now()));
  EXPECT_LE(m.at("process_start_time_seconds"), now + 1);
  EXPECT_GT(m.at("process_start_time_seconds"), now - 3600);
  rusage ru{};
  ASSERT_EQ(::getrusage(RUSAGE_SELF, &ru), 0);
  EXPECT_GT(m.at("process_cpu_seconds_total"), 0);
  EXPECT_LE(m.at("process_cpu_seconds_total"),
            static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 2);
}

TEST_F(MetricsEndpointTest, ReadyzTurnsUnavailableAfterShutdownStarts) {
  const int port = server_->metrics_port();
  EXPECT_EQ(HttpGet(port, "/readyz").code, 200);
  server_->Shutdown();
  EXPECT_NE(HttpGet(port, "/readyz").code, 200);  // Closed or 503.
}

}  // namespace
}  // namespace zeroshard
