// The shm backend: collectives on host memory between ranks on one host,
// through POSIX shared memory (one segment per rank, mapped by every rank)
// instead of TCP. Each byte is copied once into the writer's slot and once
// out by each reader, with no system call on the way when the peers are
// ready (a futex only when a rank must sleep), where loopback TCP copies it
// through the kernel twice per hop and wakes a transport thread per message.
// It is what NCCL's SHM transport and MPI's shared-memory layers do inside a
// node; Gloo has no such transport.
//
// Rendezvous runs through a zeroshard::Store (one prefix per generation, as
// Gloo's): each rank publishes its segment's name, process id and host
// identity, maps every peer's, and the ranks meet once in shared memory
// before each unlinks its name. Ranks on different hosts (or in different
// IPC namespaces, such as separate pods) get FAILED_PRECONDITION or
// NOT_FOUND at creation: use Gloo there.
//
// Operations, in-place rules and dtypes are those of communicator.h and the
// Gloo backend (control dtypes int64 and fp64 in AllReduce). Reductions are
// deterministic and bit-identical on every rank (shm_collectives.h); they
// may differ in the last bits from Gloo's ring, whose summation order
// differs. Operations run in issue order on one background thread (OpQueue).
//
// Memory: 2 x slot_bytes of /dev/shm per rank (reserved at creation), plus
// fp32 scratch of up to one slot.
//
// Errors (Wait's status): a peer that aborted or whose process exited:
// UNAVAILABLE (found within ~20 ms); the op's CollectiveOptions::timeout
// passed: DEADLINE_EXCEEDED; after Abort: ABORTED; bad arguments:
// INVALID_ARGUMENT (without running). After any failure the communicator is
// unusable (its ranks' rounds are out of step): later ops fail with the
// first failure's status.
//
// Stats: as the Gloo backend (op_queue.h).
//
// Thread safety: as Communicator.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace zeroshard {

struct ShmOptions {
  absl::Duration timeout = absl::Seconds(60);  // Rendezvous timeout.
  // Bytes per slot (two per rank): the largest piece of an op one round
  // moves. A multiple of 64, at least 4096.
  size_t slot_bytes = size_t{1} << 20;
};

// Connects `world_size` ranks of this host through `store` (keys under
// `prefix`); every rank calls this with the same prefix, world size and
// options. Blocks until all have mapped each other's segments. Errors:
// INVALID_ARGUMENT for a bad rank, world size or slot size;
// DEADLINE_EXCEEDED when a rank does not show up within opts.timeout;
// FAILED_PRECONDITION when a rank is on another host; RESOURCE_EXHAUSTED
// when /dev/shm is full; NOT_FOUND or UNAVAILABLE for a segment that cannot
// be opened or mapped.
absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(Store& store,
                                                                    const std::string& prefix,
                                                                    int rank, int world_size,
                                                                    const ShmOptions& opts = {});

}  // namespace zeroshard
