#include "cli/plan_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace zeroshard::cli {
namespace {

std::string Gb(int64_t bytes) { return absl::StrFormat("%.2f", bytes / 1e9); }

std::string Machine(const PlanMachine& m) {
  std::string s = absl::StrCat(m.workers, m.cuda ? " GPU" : " CPU", " workers");
  if (m.cuda) absl::StrAppend(&s, ", device memory ", m.device_memory > 0 ? Gb(m.device_memory) + " GB" : "unknown");
  absl::StrAppend(&s, ", host memory ", m.host_memory > 0 ? Gb(m.host_memory) + " GB" : "unknown");
  absl::StrAppend(&s, ", nvme ", m.nvme > 0 ? Gb(m.nvme) + " GB" : "none");
  absl::StrAppend(&s, ", link ", m.link_bytes_per_second > 0
                                     ? absl::StrFormat("%.2f GB/s", m.link_bytes_per_second / 1e9)
                                     : std::string("not given"));
  return s;
}

std::string Row(const PlanChoice& c, bool params_only) {
  const MemoryPrediction& p = c.memory;
  auto opt = [](int64_t b) { return Gb(b); };
  return absl::StrFormat(
      "%5d %5s %7s | %8s %8s %9s %8s %8s %8s | %9s %8s %8s | %9.1f %8s | %s%s\n", c.stage,
      c.checkpointing ? "blocks" : "none", OptimizerOffloadName(c.offload), opt(p.state.params),
      opt(p.state.grads), opt(p.state.optimizer),
      params_only ? std::string("-") : opt(p.gather_buffers + p.state.buffers),
      params_only ? std::string("-") : opt(p.activations), opt(p.host_offload), opt(c.device_need),
      opt(c.host_need), opt(c.nvme_need), c.traffic.wire_bytes() / 1e6,
      c.comm_seconds > 0 ? absl::StrFormat("%.4f", c.comm_seconds) : std::string("-"),
      c.fits ? "yes" : "no: ", c.fits ? "" : c.why_not);
}

}  // namespace

std::string FormatPlanText(const PlanHeader& h, const RunPlan& plan) {
  std::string s = absl::StrCat("zeroshard plan: ", h.model, "; ", Machine(*h.machine), "\n");
  absl::StrAppend(&s, "  ", h.compute_dtype, " compute, ", h.reduce_dtype,
                  " gradients, AdamW (fp32 master, m, v: 12 bytes a parameter)");
  if (!h.params_only) {
    absl::StrAppend(&s, ", micro-batch ", h.micro_batch, " x ", h.seq_len, " tokens, ",
                    h.micro_batches, " micro-batch(es) a step");
  }
  absl::StrAppend(&s, "\n  sizes in GB (1e9 bytes) per rank unless marked; traffic = bytes one rank "
                      "sends per step (ring), comm = traffic / link bandwidth\n");
  if (h.params_only) {
    absl::StrAppend(&s, "  --params alone: only the figures that depend on the parameter count "
                        "(model state, offload, traffic); gather buffers, activations and "
                        "checkpointing need the model's structure (--model or the dimensions)\n");
  }
  absl::StrAppend(&s, absl::StrFormat(
      "%5s %5s %7s | %8s %8s %9s %8s %8s %8s | %9s %8s %8s | %9s %8s | %s\n", "stage", "ckpt",
      "offload", "params", "grads", "optimizer", "buffers", "activ", "host-opt", "peak/rank",
      "host(all)", "nvme", "traffic MB", "comm s", "fits"));
  for (const PlanChoice& c : plan.choices) absl::StrAppend(&s, Row(c, h.params_only));
  absl::StrAppend(&s, "recommended: ",
                  plan.recommended >= 0 ? plan.choices[plan.recommended].Name() : "none", "\n  why: ",
                  plan.reason, "\n");
  return s;
}

std::string FormatPlanJson(const PlanHeader& h, const RunPlan& plan) {
  nlohmann::json j;
  const PlanMachine& m = *h.machine;
  j["model"] = h.model;
  j["params"] = h.params;
  j["params_only"] = h.params_only;
  j["machine"] = {{"workers", m.workers}, {"cuda", m.cuda}, {"device_memory_bytes", m.device_memory},
                  {"host_memory_bytes", m.host_memory}, {"nvme_bytes", m.nvme},
                  {"link_bytes_per_second", m.link_bytes_per_second}};
  j["compute_dtype"] = h.compute_dtype;
  j["reduce_dtype"] = h.reduce_dtype;
  j["micro_batch"] = h.micro_batch;
  j["seq_len"] = h.seq_len;
  j["micro_batches"] = h.micro_batches;
  nlohmann::json rows = nlohmann::json::array();
  for (const PlanChoice& c : plan.choices) {
    const MemoryPrediction& p = c.memory;
    nlohmann::json traffic;
    for (int op = 0; op < static_cast<int>(Collective::kCount); ++op) {
      const CollectiveTraffic& t = c.traffic.ops[op];
      traffic[CollectiveName(static_cast<Collective>(op))] = {
          {"calls", t.calls}, {"bytes", t.bytes}, {"wire_bytes", t.wire_bytes}};
    }
    rows.push_back({{"stage", c.stage},
                    {"activation_checkpointing", c.checkpointing ? "blocks" : "none"},
                    {"offload_optimizer", OptimizerOffloadName(c.offload)},
                    {"params_bytes", p.state.params}, {"grads_bytes", p.state.grads},
                    {"optimizer_bytes", p.state.optimizer},
                    {"resident_buffers_bytes", p.state.buffers},
                    {"gather_buffers_bytes", p.gather_buffers}, {"activation_bytes", p.activations},
                    {"host_offload_bytes", p.host_offload}, {"nvme_bytes_per_rank", p.nvme},
                    {"peak_bytes_per_rank", c.device_need}, {"host_bytes_all", c.host_need},
                    {"nvme_bytes_all", c.nvme_need}, {"traffic", traffic},
                    {"wire_bytes_per_step", c.traffic.wire_bytes()},
                    {"comm_seconds_per_step", c.comm_seconds}, {"fits", c.fits},
                    {"why_not", c.why_not}});
  }
  j["choices"] = rows;
  j["recommended"] = plan.recommended >= 0 ? nlohmann::json(plan.choices[plan.recommended].Name())
                                           : nlohmann::json(nullptr);
  j["recommended_index"] = plan.recommended;
  j["reason"] = plan.reason;
  return j.dump(2) + "\n";
}

}  // namespace zeroshard::cli
