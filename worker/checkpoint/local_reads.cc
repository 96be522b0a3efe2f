#include "worker/checkpoint/local_reads.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/formats/hashed_read.h"
#include "common/rpc/fd_frames.h"
#include "common/status_macros.h"

namespace zeroshard::checkpoint {
namespace {

constexpr size_t kMaxReplyBytes = 16 << 20;  // A file's block hashes: 8 bytes a MiB.

// A model file from its passed descriptor (an open file description of
// this rank's own: the coordinator reopens each file it sends, so ranks
// reading their parts of one file keep their own readahead; a shared one
// made a model load take 1.9 s against 1.3 through DownloadRange). Read
// direct where not cached (ReadOnlyFile), through an O_DIRECT twin. A
// checkpoint's files are read through the page cache instead. Both
// measured on the 2-core VM (bench/README.md, "Local reads"): a 2 GB BF16
// model loaded in 0.73 s direct against 1.68 s buffered (medians of 5);
// a 268 MB checkpoint restored at 2.3 GB/s buffered against 1.7-1.9 direct.
ReadOnlyFile ModelFile(const std::string& name, int fd) {
  return ReadOnlyFile::Adopt(absl::StrCat(name, " (local read)"), fd, ReopenReadOnly(fd, O_DIRECT));
}

// OK when the socket's other end runs as this user or root: a name in the
// abstract namespace can be taken by anyone, and the token goes to it.
absl::Status CheckPeer(int sock, const std::string& name) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::UnavailableError(
        absl::StrCat("local reads: SO_PEERCRED on ", name, ": ", std::strerror(errno)));
  }
  if (cred.uid == ::geteuid() || cred.uid == 0) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("local reads: ", name, " is held by uid ", cred.uid, ", not this user"));
}

absl::Status ReplyStatus(const v1::LocalReadReply& reply) {
  if (reply.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(reply.code()),
                      absl::StrCat("local read: ", reply.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalReads>> LocalReads::Connect(const std::string& socket_path,
                                                                std::string token,
                                                                absl::Duration timeout) {
  absl::StatusOr<UnixAddress> addr = MakeUnixAddress(socket_path);
  if (!addr.ok())
    return absl::UnavailableError(absl::StrCat("local reads: ", addr.status().message()));
  const int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0)
    return absl::UnavailableError(absl::StrCat("local reads: socket: ", strerror(errno)));
  // Before connect: a full backlog blocks connect for the send timeout.
  const timeval tv = absl::ToTimeval(timeout);
  (void)::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  (void)::setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  absl::Status st;
  if (::connect(sock, reinterpret_cast<const sockaddr*>(&addr->addr), addr->size) != 0) {
    st = absl::UnavailableError(
        absl::StrCat("local reads: connect ", socket_path, ": ", std::strerror(errno)));
  } else {
    st = CheckPeer(sock, socket_path);
  }
  if (!st.ok()) {
    ::close(sock);
    return st;
  }
  return std::unique_ptr<LocalReads>(new LocalReads(sock, std::move(token)));
}

LocalReads::~LocalReads() { ::close(sock_); }

absl::StatusOr<std::shared_ptr<const LocalReads::OpenFile>> LocalReads::Open(
    const std::string& job_id, int64_t step, const std::string& unit, v1::TensorKind kind) {
  absl::MutexLock lock(&mu_);
  auto key = std::make_tuple(step, unit, static_cast<int>(kind));
  if (auto it = files_.find(key); it != files_.end()) return it->second;
  v1::LocalReadRequest req;
  req.set_token(token_);
  req.mutable_file()->set_job_id(job_id);
  req.mutable_file()->set_has_step(true);
  req.mutable_file()->set_step(step);
  req.mutable_file()->set_unit(unit);
  req.mutable_file()->set_kind(kind);
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFile> file, Ask(req, step));
  files_.emplace(std::move(key), file);
  return file;
}

absl::StatusOr<ReceivedFrame> LocalReads::RoundTrip(v1::LocalReadRequest req,
                                                    v1::LocalReadReply* reply) {
  if (broken_) return absl::UnavailableError("local read: the connection broke before");
  req.set_request_id(++last_request_id_);
  const absl::Status sent = SendFrame(sock_, req.SerializeAsString());
  absl::StatusOr<ReceivedFrame> frame =
      sent.ok() ? ReceiveFrame(sock_, kMaxReplyBytes) : absl::StatusOr<ReceivedFrame>(sent);
  absl::Status st = frame.status();
  if (st.ok() && !reply->ParseFromString(frame->bytes())) {
    st = absl::DataLossError("local read: the coordinator's reply did not parse");
  } else if (st.ok() && reply->request_id() != req.request_id()) {
    st = absl::DataLossError("local read: a reply to another request");
  }
  if (!st.ok()) {
    // The stream may be cut inside a frame: nothing more is read from it.
    broken_ = true;
    ::shutdown(sock_, SHUT_RDWR);
    return absl::Status(st.code(), absl::StrCat("local read: ", st.message()));
  }
  ZS_RETURN_IF_ERROR(ReplyStatus(*reply));
  return frame;
}

absl::StatusOr<std::shared_ptr<const LocalReads::OpenFile>> LocalReads::Ask(
    const v1::LocalReadRequest& req, int64_t step) {
  v1::LocalReadReply reply;
  ZS_ASSIGN_OR_RETURN(ReceivedFrame frame, RoundTrip(req, &reply));
  const v1::CheckpointFile& meta = reply.file();
  if (reply.step() != step || frame.fd_count() != 1 || meta.unit() != req.file().unit() ||
      meta.kind() != req.file().kind() || meta.block_bytes() <= 0 || meta.block_bytes() % 4 != 0 ||
      meta.block_xxhash64_size() != (meta.bytes() + meta.block_bytes() - 1) / meta.block_bytes() ||
      meta.bytes() != meta.numel() * 4) {
    return absl::DataLossError(absl::StrCat("local read: the coordinator's answer for ",
                                            req.file().unit(), " does not describe its file"));
  }
  // Through the page cache, whatever the coordinator's reads do: its
  // readahead keeps the disk busier than direct reads here, and the
  // kernel's copy costs the ranks' threads (local_reads.h).
  return std::make_shared<const OpenFile>(OpenFile{
      meta, ReadOnlyFile::Adopt(absl::StrCat(meta.path(), " (local read)"), frame.TakeFd(0), -1)});
}

absl::Status LocalReads::Read(const std::string& job_id, int64_t step, const std::string& unit,
                              v1::TensorKind kind, ElementRange range, float* dst) {
  if (range.length == 0) return absl::OkStatus();
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<const OpenFile> file, Open(job_id, step, unit, kind));
  const v1::CheckpointFile& meta = file->meta;
  if (range.offset < 0 || range.length < 0 || range.offset > meta.numel() - range.length) {
    return absl::InvalidArgumentError(absl::StrCat("local read: elements [", range.offset, ", +",
                                                   range.length, ") are past ", meta.path(), "'s ",
                                                   meta.numel()));
  }
  int64_t next = range.offset;  // The element the next chunk starts at.
  const RangeSink sink{[&](size_t) { return reinterpret_cast<char*>(dst + (next - range.offset)); },
                       [&](const v1::RangeChunk& chunk) {
                         next = chunk.offset() + chunk.length();
                         return absl::OkStatus();
                       }};
  return ReadVerifiedBlocks(
      meta, file->in, range, meta.block_bytes() / 4, step, sink, [&](int64_t b, uint64_t hash) {
        if (hash == meta.block_xxhash64(static_cast<int>(b))) return absl::OkStatus();
        return absl::DataLossError(
            absl::StrFormat("local read: %s block %d has xxhash64 %016x, the manifest says %016x",
                            meta.path(), b, hash, meta.block_xxhash64(static_cast<int>(b))));
      });
}

absl::StatusOr<std::shared_ptr<const HfWeights>> LocalReads::OpenModel(const std::string& job_id) {
  v1::LocalReadRequest req;
  req.set_token(token_);
  req.mutable_file()->set_job_id(job_id);
  req.mutable_file()->set_model_weights(true);
  v1::LocalReadReply reply;
  ZS_RETURN_IF_ERROR(RoundTrip(req, &reply).status());
  const v1::LocalModelWeights model = reply.model();
  std::vector<ReadOnlyFile> opened;
  for (int i = 0; i < model.files_size(); ++i) {
    req.set_model_file(i + 1);
    ZS_ASSIGN_OR_RETURN(ReceivedFrame frame, RoundTrip(req, &reply));
    if (frame.fd_count() != 1) {
      return absl::DataLossError(absl::StrCat("local read: no descriptor for ", model.files(i)));
    }
    opened.push_back(ModelFile(model.files(i), frame.TakeFd(0)));
  }
  std::vector<HfWeights::TensorSource> sources;
  for (const v1::LocalModelTensor& t : model.tensors()) {
    sources.push_back(
        {t.name(), t.file(),
         SafetensorsTensorInfo{
             t.name(), t.dtype(), {t.shape().begin(), t.shape().end()}, t.begin(), t.end()},
         t.data_offset()});
  }
  ZS_ASSIGN_OR_RETURN(HfWeights weights,
                      HfWeights::FromParts({model.files().begin(), model.files().end()},
                                           std::move(opened), sources));
  return std::make_shared<const HfWeights>(std::move(weights));
}

absl::Status LocalReads::ReadModelWeights(const std::string& job_id, const UnitPlan& unit,
                                          ElementRange range, float* dst) {
  std::shared_ptr<const HfWeights> model;
  {
    absl::MutexLock lock(&mu_);
    if (model_ == nullptr) {
      ZS_ASSIGN_OR_RETURN(model_, OpenModel(job_id));
    }
    model = model_;
  }
  if (range.offset < 0 || range.length < 0 || range.offset > unit.padded_numel - range.length) {
    return absl::InvalidArgumentError(absl::StrCat("local read: elements [", range.offset, ", +",
                                                   range.length, ") are past unit ", unit.name));
  }
  return model->ReadUnitRange(unit, range.offset, range.length, dst);
}

}  // namespace zeroshard::checkpoint
