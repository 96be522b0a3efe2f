#include "bench/coordinator/stream_load.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_security.h"
#include "grpcpp/client_context.h"
#include "grpcpp/completion_queue.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard::bench {
namespace {

enum class Op { kStart, kWrite, kRead, kWritesDone, kFinish };

// One worker's stream. Its ops come back on one thread's queue.
struct Beat {
  struct Tag {
    Beat* beat;
    Op op;
  };
  std::unique_ptr<v1::Coordinator::Stub> stub;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::HeartbeatRequest, v1::HeartbeatResponse>>
      stream;
  v1::HeartbeatRequest request;
  v1::HeartbeatResponse response;
  grpc::Status status;
  int in_flight = 0;  // Write and read of the current heartbeat.
  bool failed = false, closing = false, closed = false;
  Tag start{this, Op::kStart}, write{this, Op::kWrite}, read{this, Op::kRead},
      writes_done{this, Op::kWritesDone}, finish{this, Op::kFinish};

  void Send() {
    in_flight = 2;
    stream->Write(request, &write);
    stream->Read(&response, &read);
  }
  void Close() {
    closing = true;
    if (failed) {
      stream->Finish(&status, &finish);
    } else {
      stream->WritesDone(&writes_done);
    }
  }
};

struct Window {
  absl::Time begin, end;
  std::atomic<int64_t> answered{0}, errors{0};
};

// Handles one event; returns whether `b` is closed.
bool Handle(Beat::Tag* tag, bool ok, Window& w, int64_t& mine) {
  Beat* b = tag->beat;
  switch (tag->op) {
    case Op::kStart:
      if (!ok) b->failed = true;
      break;
    case Op::kWrite:
    case Op::kRead:
      if (!ok) b->failed = true;
      if (--b->in_flight > 0) return false;
      if (!b->failed) {
        const absl::Time now = absl::Now();
        if (now >= w.begin && now < w.end) ++mine;
        if (now < w.end) {
          b->Send();
          return false;
        }
      }
      break;
    case Op::kWritesDone:
      b->stream->Finish(&b->status, &b->finish);
      return false;
    case Op::kFinish:
      b->closed = true;
      return true;
  }
  if (b->failed && absl::Now() < w.end) ++w.errors;
  if (!b->closing) {
    b->Close();
  }
  return false;
}

void Drive(std::vector<Beat*> beats, grpc::CompletionQueue* queue, Window& w) {
  for (Beat* b : beats) b->stream = b->stub->AsyncHeartbeatStream(&b->ctx, queue, &b->start);
  size_t open = beats.size();
  int64_t mine = 0;
  bool cancelled = false;
  while (open > 0) {
    void* tag = nullptr;
    bool ok = false;
    const absl::Time bound = w.end + absl::Seconds(10);
    if (queue->AsyncNext(&tag, &ok, absl::ToChronoTime(bound)) !=
        grpc::CompletionQueue::GOT_EVENT) {
      if (cancelled) break;  // Should not happen: leave the rest to the process's exit.
      for (Beat* b : beats) b->ctx.TryCancel();
      cancelled = true;
      continue;
    }
    auto* t = static_cast<Beat::Tag*>(tag);
    // A started stream sends its first heartbeat; everything else is Handle's.
    if (t->op == Op::kStart && ok) {
      t->beat->Send();
      continue;
    }
    if (Handle(t, ok, w, mine)) --open;
  }
  w.answered += mine;
}

}  // namespace

StreamLoadResult RunStreamLoad(const std::vector<StreamLoadWorker>& workers, int threads,
                               double warmup_seconds, double seconds,
                               const std::function<double()>& sample) {
  std::vector<std::unique_ptr<Beat>> beats;
  for (const StreamLoadWorker& worker : workers) {
    auto b = std::make_unique<Beat>();
    b->stub = v1::Coordinator::NewStub(worker.channel);
    if (!worker.member_header.empty()) b->ctx.AddMetadata(kMemberHeader, worker.member_header);
    b->request.set_job_id(worker.job_id);
    b->request.set_member_id(worker.member_id);
    beats.push_back(std::move(b));
  }
  Window w;
  w.begin = absl::Now() + absl::Seconds(warmup_seconds);
  w.end = w.begin + absl::Seconds(seconds);
  std::vector<std::unique_ptr<grpc::CompletionQueue>> queues;
  std::vector<std::thread> drivers;
  for (int t = 0; t < threads; ++t) {
    std::vector<Beat*> mine;
    for (size_t i = t; i < beats.size(); i += threads) mine.push_back(beats[i].get());
    queues.push_back(std::make_unique<grpc::CompletionQueue>());
    drivers.emplace_back(Drive, std::move(mine), queues.back().get(), std::ref(w));
  }
  double sampled = 0;
  if (sample) {
    absl::SleepFor(w.begin - absl::Now());
    const double at_begin = sample();
    absl::SleepFor(w.end - absl::Now());
    sampled = sample() - at_begin;
  }
  for (auto& d : drivers) d.join();
  for (auto& q : queues) {
    q->Shutdown();
    void* tag = nullptr;
    bool ok = false;
    while (q->Next(&tag, &ok)) {
    }
  }
  return {static_cast<double>(w.answered.load()) / seconds, w.errors.load(), sampled};
}

}  // namespace zeroshard::bench
