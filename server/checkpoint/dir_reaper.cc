#include "server/checkpoint/dir_reaper.h"

#include <filesystem>
#include <system_error>
#include <utility>

namespace zeroshard::server {

DirReaper::DirReaper() : thread_([this] { Run(); }) {}

DirReaper::~DirReaper() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void DirReaper::Remove(std::string dir) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(dir));
}

void DirReaper::Run() {
  for (;;) {
    std::string dir;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](DirReaper* r)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) { return r->stop_ || !r->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stop_, nothing left.
      dir = std::move(queue_.front());
      queue_.pop_front();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

}  // namespace zeroshard::server
