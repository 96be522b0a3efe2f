#include "bench/checkpoint/bench_service.h"

#include <cstdio>
#include <cstdlib>

#include "grpcpp/server_builder.h"

namespace zeroshard::bench {

CheckpointBenchService StartCheckpointBenchService(const std::string& dir, const TlsFiles& tls) {
  CheckpointBenchService s;
  auto store = server::CheckpointStore::Open({dir, 1, nullptr, nullptr});
  auto creds = MakeServerCredentials(tls);
  if (!store.ok() || !creds.ok()) {
    std::fprintf(stderr, "checkpoint bench service: %s\n",
                 (!store.ok() ? store.status() : creds.status()).ToString().c_str());
    std::exit(1);
  }
  s.store = *std::move(store);
  s.impl = std::make_unique<server::CheckpointServiceImpl>(s.store.get());
  auto local = server::LocalReadServer::Start(s.store.get(), [](absl::string_view) {
    return absl::OkStatus();  // No tokens here, as a coordinator without --token-file.
  });
  if (!local.ok()) {
    std::fprintf(stderr, "checkpoint bench service: %s\n", local.status().ToString().c_str());
    std::exit(1);
  }
  s.local_reads = *std::move(local);
  s.impl->SetLocalReadSocket(s.local_reads->socket_path());
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", *creds, &s.port);
  b.RegisterService(s.impl.get());
  b.SetMaxReceiveMessageSize(8 << 20);
  s.server = b.BuildAndStart();
  return s;
}

}  // namespace zeroshard::bench
