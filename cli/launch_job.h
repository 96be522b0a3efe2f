// The body of `zeroshard launch`, apart from flag parsing: check the request
// before starting anything, start the coordinator and the workers, watch
// them, stop them all on failure or Ctrl-C, print the summary.
#pragma once

#include <string>

#include "common/model/job_config.h"
#include "common/rpc/rpc_security.h"

namespace zeroshard::cli {

struct LaunchOptions {
  JobConfig job;
  int workers = 4;
  std::string stage_flag = "3";  // --stage as given: "0".."3" or "auto" (cli/launch_plan.h).
  std::string compute_dtype = "fp32";
  std::string reduce_dtype = "fp32";
  std::string activation_checkpointing = "none";  // --activation-checkpointing none|blocks.
  std::string coordinator;                        // "" = embedded.
  std::string metrics_listen = "127.0.0.1:0";     // Embedded coordinator's /metrics.
  std::string run_dir;                            // "" = runs/<time>.
  int keep_checkpoints = 0;                       // Committed checkpoints kept (0 = all).
  int threads = 0;                                // Per worker; 0 = cores / workers.
  std::string adamw_isa = "auto";                 // The workers' --adamw-isa.
  // Seconds the embedded coordinator stays up after the job, for a last
  // Prometheus scrape; < 0 = 5 s when --metrics-listen names a fixed port,
  // else 0.
  double linger_seconds = -1;
  // TLS files and token file, for the embedded coordinator's port and for
  // the workers and this launch's client (rpc_security.h).
  ClientSecurity security;
  // The embedded coordinator's --token-file: security.token_file when one
  // was given, else the fresh "role token" file of launch_tokens.h (set by
  // RunLaunch).
  std::string coordinator_token_file;
};

// Returns the process exit code: 0 trained, 1 failed, 2 bad request,
// 130 interrupted.
int RunLaunch(LaunchOptions options);

}  // namespace zeroshard::cli
