// The main() of a GoogleTest binary that needs a CUDA device: skips (exit 77,
// CTest's SKIP_RETURN_CODE) with the reason printed when this process cannot
// open CUDA device 0, else runs every test. The probe device is released
// before the tests run.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "worker/device/device_factory.h"

namespace zeroshard::testing {

inline int RunGpuTestsOrSkip(const char* test_name, int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  absl::StatusOr<std::unique_ptr<Device>> probe = CreateDevice({.kind = "cuda", .ordinal = 0});
  if (!probe.ok()) {
    std::printf("SKIP %s: no usable GPU: %s\n", test_name,
                std::string(probe.status().message()).c_str());
    return 77;
  }
  probe->reset();
  return RUN_ALL_TESTS();
}

}  // namespace zeroshard::testing
