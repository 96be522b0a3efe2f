#include "cli/plan_format.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/byte_format.h"
#include "nlohmann/json.hpp"

namespace zeroshard::cli {
namespace {

std::string Machine(const PlanHeader& h) {
  const PlanMachine& m = *h.machine;
  std::string s = absl::StrCat(m.workers, m.cuda ? " GPU" : " CPU", " workers");
  auto size = [](int64_t b, const char* none) { return b > 0 ? FormatDecimalBytes(b) : none; };
  if (m.cuda) absl::StrAppend(&s, ", device memory ", size(m.device_memory, "unknown"), " per GPU");
  absl::StrAppend(&s, ", host memory ", size(m.host_memory, "unknown"));
  absl::StrAppend(&s, ", nvme ", size(m.nvme, "none"));
  absl::StrAppend(&s, ", link ",
                  m.link_bytes_per_second > 0
                      ? absl::StrFormat("%.2f GB/s", m.link_bytes_per_second / 1e9)
                      : std::string("not given (no comm time)"));
  if (!h.link_measured_on.empty()) {
    absl::StrAppend(&s, " (measured: ", h.link_measured_on, " all-gather, 2 ranks here)");
  }
  return s;
}

// One unit for every size in the table: the one its largest figure reads in.
ByteUnit TableUnit(const RunPlan& plan) {
  int64_t largest = 0;
  for (const PlanChoice& c : plan.choices) {
    largest = std::max({largest, c.device_need, c.host_need, c.nvme_need});
  }
  return DecimalUnitFor(largest);
}

ByteUnit TrafficUnit(const RunPlan& plan) {
  int64_t largest = 0;
  for (const PlanChoice& c : plan.choices) largest = std::max(largest, c.traffic.wire_bytes());
  return DecimalUnitFor(largest);
}

std::string Row(const PlanChoice& c, bool params_only, const ByteUnit& u, const ByteUnit& t) {
  const MemoryPrediction& p = c.memory;
  auto in = [&u](int64_t b) { return BytesIn(b, u); };
  return absl::StrFormat(
      "%5d %6s %7s | %8s %8s %9s %8s %8s %8s | %9s %9s %9s | %9s %8s | %s%s\n", c.stage,
      c.checkpointing ? "blocks" : "none", OptimizerOffloadName(c.offload), in(p.state.params),
      in(p.state.grads), in(p.state.optimizer),
      params_only ? std::string("-") : in(p.gather_buffers + p.state.buffers),
      params_only ? std::string("-") : in(p.activations), in(p.host_offload), in(c.device_need),
      in(c.host_need), in(c.nvme_need), BytesIn(c.traffic.wire_bytes(), t),
      c.comm_seconds > 0 ? absl::StrFormat("%.3g", c.comm_seconds) : std::string("-"),
      c.fits ? "yes" : "no: ", c.fits ? "" : c.why_not);
}

// What the columns mean, in the table's units.
std::string Legend(const PlanHeader& h, const ByteUnit& u, const ByteUnit& t) {
  std::string s = absl::StrCat(
      "  sizes in ", u.name,
      " per rank, (all) = every worker together; ckpt = "
      "--activation-checkpointing, offload = --offload-optimizer\n"
      "  buffers = transient gather/reduce buffers (bound), host-opt = optimizer state in host "
      "memory, nvme = offload files\n"
      "  traffic = ",
      t.name, " one rank sends per step (ring), comm = traffic / link bandwidth\n");
  if (h.machine->cuda && !h.params_only) {
    absl::StrAppend(&s,
                    "  activ = activations + the CUDA kernels' workspace (attention "
                    "backward's scratch or bf16 matmul inputs)\n");
  }
  if (!h.machine->cuda && !h.params_only) {
    absl::StrAppend(&s,
                    "  CPU workers: peak/rank = the kinds + the largest unit's initial fp32 "
                    "values (",
                    FormatDecimalBytes(h.worker_host_bytes), ") + process overhead (",
                    FormatDecimalBytes(h.machine->process_overhead),
                    ", measured); device and host memory are the same RAM\n");
  }
  if (h.params_only) {
    absl::StrAppend(&s,
                    "  --params alone: only the figures that depend on the parameter count "
                    "(model state, offload, traffic); gather buffers, activations and "
                    "checkpointing need the model's structure (--model or the dimensions)\n");
  }
  return s;
}

}  // namespace

std::string FormatPlanText(const PlanHeader& h, const RunPlan& plan) {
  const ByteUnit u = TableUnit(plan), t = TrafficUnit(plan);
  std::string s = absl::StrCat("zeroshard plan: ", h.model, "; ", Machine(h), "\n");
  // fp32 compute: the parameters are the master weights unless offloaded
  // (common/memory_model.h).
  absl::StrAppend(&s, "  ", h.compute_dtype, " compute, ", h.reduce_dtype, " gradients, AdamW ",
                  h.compute_dtype == "fp32"
                      ? "(m, v: 8 bytes a parameter, the fp32 parameters being the master; "
                        "fp32 master, m, v: 12 when offloaded)"
                      : "(fp32 master, m, v: 12 bytes a parameter)");
  if (!h.params_only) {
    absl::StrAppend(&s, ", micro-batch ", h.micro_batch, " x ", h.seq_len, " tokens, ",
                    h.micro_batches, " micro-batch(es) a step, ",
                    h.bucket_mib > 0 ? absl::StrCat(h.bucket_mib, " MiB buckets at stages 2-3")
                                     : std::string("one collective per unit"));
  }
  absl::StrAppend(&s, "\n", Legend(h, u, t));
  absl::StrAppend(
      &s, absl::StrFormat("%5s %6s %7s | %8s %8s %9s %8s %8s %8s | %9s %9s %9s | %9s %8s | %s\n",
                          "stage", "ckpt", "offload", "params", "grads", "optimizer", "buffers",
                          "activ", "host-opt", "peak/rank", "host(all)", "nvme(all)", "traffic",
                          "comm s", "fits"));
  for (const PlanChoice& c : plan.choices) absl::StrAppend(&s, Row(c, h.params_only, u, t));
  absl::StrAppend(
      &s, "recommended: ", plan.recommended >= 0 ? plan.choices[plan.recommended].Name() : "none",
      "\n  why: ", plan.reason, "\n");
  return s;
}

std::string FormatPlanJson(const PlanHeader& h, const RunPlan& plan) {
  nlohmann::json j;
  const PlanMachine& m = *h.machine;
  j["model"] = h.model;
  j["params"] = h.params;
  j["params_only"] = h.params_only;
  j["machine"] = {{"workers", m.workers},
                  {"cuda", m.cuda},
                  {"device_memory_bytes", m.device_memory},
                  {"host_memory_bytes", m.host_memory},
                  {"nvme_bytes", m.nvme},
                  {"link_bytes_per_second", m.link_bytes_per_second}};
  j["compute_dtype"] = h.compute_dtype;
  j["reduce_dtype"] = h.reduce_dtype;
  j["micro_batch"] = h.micro_batch;
  j["seq_len"] = h.seq_len;
  j["micro_batches"] = h.micro_batches;
  j["bucket_mib"] = h.bucket_mib;
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
                    {"params_bytes", p.state.params},
                    {"grads_bytes", p.state.grads},
                    {"optimizer_bytes", p.state.optimizer},
                    {"resident_buffers_bytes", p.state.buffers},
                    {"gather_buffers_bytes", p.gather_buffers},
                    {"activation_bytes", p.activations},
                    {"host_offload_bytes", p.host_offload},
                    {"nvme_bytes_per_rank", p.nvme},
                    {"peak_bytes_per_rank", c.device_need},
                    {"host_bytes_all", c.host_need},
                    {"nvme_bytes_all", c.nvme_need},
                    {"traffic", traffic},
                    {"wire_bytes_per_step", c.traffic.wire_bytes()},
                    {"comm_seconds_per_step", c.comm_seconds},
                    {"fits", c.fits},
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
