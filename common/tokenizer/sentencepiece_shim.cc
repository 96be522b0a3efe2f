// SentencePieceShim over helper processes (sentencepiece_protocol.h): a
// pool that grows to as many helpers as threads call at once, each loaded
// with the model once.
#include "common/tokenizer/sentencepiece_shim.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/tokenizer/sentencepiece_protocol.h"

namespace zeroshard::tokenizer {
namespace {

namespace proto = spm_protocol;

// The helper binary: $ZEROSHARD_SENTENCEPIECE_HELPER, else beside this
// program.
std::string HelperPath() {
  if (const char* env = std::getenv("ZEROSHARD_SENTENCEPIECE_HELPER")) return env;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (self.parent_path() / proto::kHelperName).string();
}

class Helper {
 public:
  static std::unique_ptr<Helper> Start(std::string* error) {
    const std::string path = HelperPath();
    if (access(path.c_str(), X_OK) != 0) {
      *error = path +
               " is missing: SentencePiece runs in that helper process (Debian's "
               "libsentencepiece carries a protobuf that clashes with gRPC's)";
      return nullptr;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
      *error = std::string("socketpair: ") + std::strerror(errno);
      return nullptr;
    }
    const pid_t pid = fork();
    if (pid == 0) {  // Only async-signal-safe calls until exec.
      dup2(sv[1], STDIN_FILENO);
      char* argv[] = {const_cast<char*>(path.c_str()), nullptr};
      execv(path.c_str(), argv);
      _exit(127);
    }
    close(sv[1]);
    if (pid < 0) {
      close(sv[0]);
      *error = std::string("fork: ") + std::strerror(errno);
      return nullptr;
    }
    return std::unique_ptr<Helper>(new Helper(pid, sv[0]));
  }

  // Closing the socket ends the helper; it is reaped within a second, else
  // killed.
  ~Helper() {
    close(fd_);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }

  bool Call(char op, const std::string& in, std::string* out, std::string* error) const {
    char status = 1;
    if (!proto::WriteFrame(fd_, op, in) || !proto::ReadFrame(fd_, &status, out)) {
      *error = "the SentencePiece helper process stopped answering";
      return false;
    }
    if (status != 0) *error = *out;
    return status == 0;
  }

 private:
  Helper(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  pid_t pid_;
  int fd_;
};

std::vector<int> ToInts(const std::string& bytes) {
  std::vector<int> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

class Shim final : public SentencePieceShim {
 public:
  bool Init(const std::string& bytes, std::string* error) {
    model_ = bytes;
    std::string info;
    if (!Call(proto::kInfo, "", &info, error)) return false;
    const std::vector<int> v = ToInts(info);
    pieces_ = v[0], bos_ = v[1], eos_ = v[2];
    return true;
  }
  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const override {
    std::string out;
    if (!Call(proto::kEncode, std::string(text), &out, error)) return false;
    *ids = ToInts(out);
    return true;
  }
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const override {
    std::string in(ids.size() * 4, '\0');
    std::memcpy(in.data(), ids.data(), in.size());
    return Call(proto::kDecode, in, text, error);
  }
  int PieceSize() const override { return pieces_; }
  int BosId() const override { return bos_; }
  int EosId() const override { return eos_; }
  int IdOf(std::string_view piece) const override {
    std::string out, error;
    return Call(proto::kPiece, std::string(piece), &out, &error) ? ToInts(out)[0] : -1;
  }

 private:
  // A free helper (a new one, loaded with the model, when none is free), the
  // call, and the helper back to the pool.
  bool Call(char op, const std::string& in, std::string* out, std::string* error) const {
    std::unique_ptr<Helper> h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        h = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (h == nullptr) {
      h = Helper::Start(error);
      if (h == nullptr || !h->Call(proto::kLoad, model_, out, error)) return false;
    }
    const bool ok = h->Call(op, in, out, error);
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(h));
    return ok;
  }

  std::string model_;
  int pieces_ = 0, bos_ = -1, eos_ = -1;
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<Helper>> free_;
};

}  // namespace

std::unique_ptr<SentencePieceShim> SentencePieceShim::Load(const std::string& bytes,
                                                           std::string* error) {
  auto shim = std::make_unique<Shim>();
  if (!shim->Init(bytes, error)) return nullptr;
  return shim;
}

}  // namespace zeroshard::tokenizer
