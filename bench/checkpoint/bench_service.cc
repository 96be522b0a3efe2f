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
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", *creds, &s.port);
  b.RegisterService(s.impl.get());
  b.SetMaxReceiveMessageSize(8 << 20);
  s.server = b.BuildAndStart();
  return s;
}

}  // namespace zeroshard::bench
