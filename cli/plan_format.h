// What `zeroshard plan` prints: the table of every choice (memory by kind
// per rank, traffic and communication time per step, fit) and the
// recommendation, as text or JSON. Pure formatting; thread-safe.
// Text sizes are in one decimal unit for the whole table (GB = 1e9 bytes, as
// the ZeRO paper's example; MB for small models; common/byte_format.h);
// JSON gives bytes and seconds.
#pragma once

#include <string>

#include "common/run_plan.h"

namespace zeroshard::cli {

struct PlanHeader {
  std::string model;  // "medium (8 layers, 256 wide, ...)" or "7000000000 parameters".
  int64_t params = 0;
  bool params_only = false;  // No structure: gather buffers and activations unknown.
  const PlanMachine* machine = nullptr;
  int micro_batch = 0, seq_len = 0, micro_batches = 1;
  double bucket_mib = 0;          // --bucket-mib (stages 2-3 buckets; 0 = per unit).
  int64_t worker_host_bytes = 0;  // PlanModel::worker_host_bytes (CPU rows add it).
  std::string link_measured_on;   // --link-bandwidth measure's backend (this machine); "" = given.
  std::string compute_dtype, reduce_dtype;
};

std::string FormatPlanText(const PlanHeader& header, const RunPlan& plan);
std::string FormatPlanJson(const PlanHeader& header, const RunPlan& plan);

}  // namespace zeroshard::cli
