#include "server/state/training_state.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace zeroshard::server {
namespace {

constexpr int64_t kMaxBytes = int64_t{1} << 56;  // 64 PiB: anything above is absurd.
constexpr double kMaxSeconds = 1e9;
const std::set<std::string>& KnownOps() {
  static const std::set<std::string> ops = {"all_gather", "reduce_scatter", "all_reduce",
                                            "broadcast", "barrier"};
  return ops;
}

absl::Status CheckBytes(int64_t v, const std::string& field) {
  if (v < 0 || v > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", v, " is outside [0, ", kMaxBytes, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckSeconds(double v, const std::string& field) {
  if (!std::isfinite(v) || v < 0 || v > kMaxSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", v, " is not a finite value in [0, ", kMaxSeconds, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckMemory(const v1::MemoryBytes& m, const std::string& field) {
  for (auto [v, name] :
       {std::pair{m.params(), "params"}, std::pair{m.grads(), "grads"},
        std::pair{m.optimizer(), "optimizer"}, std::pair{m.buffers(), "buffers"},
        std::pair{m.redundancy(), "redundancy"}, std::pair{m.offloaded(), "offloaded"},
        std::pair{m.activations(), "activations"}}) {
    if (auto s = CheckBytes(v, absl::StrCat(field, ".", name)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

TrainingState::TrainingState(MetricsRegistry* metrics, int64_t last_step, double last_loss)
    : step_(last_step),
      loss_(last_loss),
      val_loss_(std::numeric_limits<double>::quiet_NaN()),
      step_metric_(metrics->Gauge("zeroshard_step", "Optimizer steps completed by the job.")),
      loss_metric_(metrics->Gauge("zeroshard_loss", "Mean training loss of the latest step.")),
      val_loss_metric_(
          metrics->Gauge("zeroshard_val_loss", "Validation loss at the latest evaluation.")),
      tokens_metric_(metrics->Gauge("zeroshard_tokens_per_second",
                                    "Global training throughput of the latest step, tokens/s.")),
      step_seconds_metric_(
          metrics->Histogram("zeroshard_step_seconds", "Wall time of one optimizer step, seconds.",
                             {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60})),
      memory_metric_(metrics->Gauge(
          "zeroshard_memory_bytes",
          "Bytes a rank holds, by kind (model state, buffers, activations).", {"rank", "kind"})),
      peak_memory_metric_(metrics->Gauge("zeroshard_peak_memory_bytes",
                                         "Peak bytes a rank held, by kind.", {"rank", "kind"})),
      device_memory_metric_(metrics->Gauge(
          "zeroshard_device_memory_bytes",
          "A rank's device memory (GPU, or host RAM on the CPU device), total or free.",
          {"rank", "device", "state"})),
      comm_bytes_metric_(metrics->Counter("zeroshard_comm_bytes_total",
                                          "Bytes a rank sent into collectives in its generation.",
                                          {"rank", "op"})),
      comm_seconds_metric_(metrics->Counter(
          "zeroshard_comm_seconds_total", "Seconds a rank spent in collectives in its generation.",
          {"rank", "op"})),
      comm_calls_metric_(metrics->Counter("zeroshard_comm_calls_total",
                                          "Collective calls a rank made in its generation.",
                                          {"rank", "op"})),
      step_metrics_(metrics) {
  step_metric_->Set({}, static_cast<double>(step_));
  // No loss before the first step: the series is absent, not NaN.
  if (std::isfinite(loss_)) loss_metric_->Set({}, loss_);
}

absl::Status TrainingState::Validate(const v1::StepReport& r) {
  if (r.step() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("step = ", r.step(), " is negative"));
  }
  if (std::isinf(r.loss())) return absl::InvalidArgumentError("loss is infinite");
  if (!std::isfinite(r.tokens_per_second()) || r.tokens_per_second() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens_per_second = ", r.tokens_per_second(), " is not finite and >= 0"));
  }
  if (auto s = CheckSeconds(r.step_seconds(), "step_seconds"); !s.ok()) return s;
  if (auto s = CheckMemory(r.memory(), "memory"); !s.ok()) return s;
  if (auto s = CheckMemory(r.peak_memory(), "peak_memory"); !s.ok()) return s;
  const v1::DeviceMemory& d = r.device_memory();
  if (d.total_bytes() < 0 || d.free_bytes() < 0 || d.free_bytes() > d.total_bytes() ||
      d.device().size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device_memory: free_bytes ", d.free_bytes(), " and total_bytes ", d.total_bytes(),
        " must satisfy 0 <= free <= total, device name <= 256 bytes"));
  }
  if (auto s = StepMetrics::Validate(r); !s.ok()) return s;
  if (r.comm_size() > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm has ", r.comm_size(), " entries; at most 16"));
  }
  std::set<std::string> seen;
  for (int i = 0; i < r.comm_size(); ++i) {
    const v1::CommStat& c = r.comm(i);
    const std::string field = absl::StrCat("comm[", i, "]");
    if (KnownOps().count(c.op()) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".op \"", c.op().substr(0, 64),
          "\" is not one of all_gather, reduce_scatter, all_reduce, broadcast, barrier"));
    }
    if (!seen.insert(c.op()).second) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".op ", c.op(), " is repeated"));
    }
    if (auto s = CheckBytes(c.bytes(), field + ".bytes"); !s.ok()) return s;
    if (auto s = CheckSeconds(c.seconds(), field + ".seconds"); !s.ok()) return s;
    if (c.calls() < 0) return absl::InvalidArgumentError(field + ".calls is negative");
  }
  return absl::OkStatus();
}

int64_t TrainingState::AgreedStepWith(const v1::StepReport& r, int world_size) const {
  int64_t agreed = r.step();
  for (int rank = 0; rank < world_size; ++rank) {
    if (rank == r.rank()) continue;
    auto it = ranks_.find(rank);
    if (it == ranks_.end()) return step_;
    agreed = std::min(agreed, it->second.step());
  }
  return std::max(agreed, step_);
}

bool TrainingState::Record(const v1::StepReport& r, int world_size) {
  const int64_t agreed = AgreedStepWith(r, world_size);
  const bool advanced = agreed > step_;
  const bool current = r.step() == agreed;
  step_metrics_.Record(r, current, advanced);
  if (current) {
    step_ = agreed;
    loss_ = r.loss();
    tokens_per_second_ = r.tokens_per_second();
    step_seconds_ = r.step_seconds();
    if (!std::isnan(r.val_loss())) {
      val_loss_ = r.val_loss();
      val_loss_metric_->Set({}, val_loss_);
    }
    step_metric_->Set({}, static_cast<double>(step_));
    loss_metric_->Set({}, loss_);
    tokens_metric_->Set({}, tokens_per_second_);
  }
  if (advanced) step_seconds_metric_->Observe({}, r.step_seconds());

  v1::RankStatus& rank = ranks_[r.rank()];
  rank.set_rank(r.rank());
  rank.set_step(r.step());
  *rank.mutable_memory() = r.memory();
  *rank.mutable_peak_memory() = r.peak_memory();
  *rank.mutable_comm() = r.comm();
  *rank.mutable_device_memory() = r.device_memory();

  const std::string rank_label = absl::StrCat(r.rank());
  auto set_memory = [&](MetricFamily* f, const v1::MemoryBytes& m) {
    f->Set({rank_label, "params"}, static_cast<double>(m.params()));
    f->Set({rank_label, "grads"}, static_cast<double>(m.grads()));
    f->Set({rank_label, "optimizer"}, static_cast<double>(m.optimizer()));
    f->Set({rank_label, "buffers"}, static_cast<double>(m.buffers()));
    f->Set({rank_label, "redundancy"}, static_cast<double>(m.redundancy()));
    f->Set({rank_label, "offloaded"}, static_cast<double>(m.offloaded()));
    f->Set({rank_label, "activations"}, static_cast<double>(m.activations()));
  };
  set_memory(memory_metric_, r.memory());
  set_memory(peak_memory_metric_, r.peak_memory());
  if (r.has_device_memory()) {
    const v1::DeviceMemory& d = r.device_memory();
    device_memory_metric_->Set({rank_label, d.device(), "total"},
                               static_cast<double>(d.total_bytes()));
    device_memory_metric_->Set({rank_label, d.device(), "free"},
                               static_cast<double>(d.free_bytes()));
  }
  for (const v1::CommStat& c : r.comm()) {
    comm_bytes_metric_->Set({rank_label, c.op()}, static_cast<double>(c.bytes()));
    comm_seconds_metric_->Set({rank_label, c.op()}, c.seconds());
    comm_calls_metric_->Set({rank_label, c.op()}, static_cast<double>(c.calls()));
  }
  return advanced;
}

void TrainingState::ThroughputStopped() { tokens_metric_->Set({}, 0); }

void TrainingState::ClearRanks() {
  ranks_.clear();
  step_metrics_.ClearRanks();
  ThroughputStopped();
  for (MetricFamily* f : {memory_metric_, peak_memory_metric_, comm_bytes_metric_,
                          comm_seconds_metric_, comm_calls_metric_, device_memory_metric_}) {
    f->Clear();
  }
}

void TrainingState::FillStatus(v1::JobStatus* status) const {
  status->set_step(step_);
  status->set_loss(loss_);
  status->set_val_loss(val_loss_);
  status->set_tokens_per_second(tokens_per_second_);
  status->set_step_seconds(step_seconds_);
  for (const auto& [rank, rs] : ranks_) *status->add_ranks() = rs;
}

}  // namespace zeroshard::server
