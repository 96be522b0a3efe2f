#include "common/infra/process_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace zeroshard {

std::optional<ProcessMemory> ReadProcessMemory() {
  // size resident shared text lib data dt, in pages.
  std::ifstream in("/proc/self/statm");
  long long size = 0, resident = 0;
  if (!(in >> size >> resident)) return std::nullopt;
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  return ProcessMemory{static_cast<double>(size) * page, static_cast<double>(resident) * page};
}

std::optional<double> ResidentMemoryBytes() {
  const std::optional<ProcessMemory> mem = ReadProcessMemory();
  if (!mem) return std::nullopt;
  return mem->resident_bytes;
}

std::optional<double> PeakResidentMemoryBytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      double kib = 0;
      if (in >> kib) return kib * 1024;
      return std::nullopt;
    }
    in.ignore(1 << 16, '\n');
  }
  return std::nullopt;
}

}  // namespace zeroshard
