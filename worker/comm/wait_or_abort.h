// The one way zeroshard waits for a collective with a timeout, and what it
// does when the wait gives up.
//
// [Note: failed collective buffers] A collective whose wait failed (a
// timeout above all) may still be running in the backend, which can write
// its buffers until the communicator is destroyed, and a later collective
// could pair with a peer's stale one. So WaitOrAbort aborts the
// communicator (its generation is broken anyway) and the caller must never
// free that op's buffers: it hands them to KeepForever, which keeps them
// reachable until the process exits (leak checkers see them as held, not
// lost). What is kept is bounded: the buffers of ops that failed, once per
// failed generation.
//
// Thread safety: WaitOrAbort as the Work it waits on (one thread);
// KeepForever from any thread.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace zeroshard {

// Waits for `work` up to `timeout`; on failure aborts `comm` and returns the
// error (DEADLINE_EXCEEDED, UNAVAILABLE, ABORTED, ... as the backend said),
// its message led by the operation's name ("all_gather: ...") where the
// Work knows it.
absl::Status WaitOrAbort(Communicator& comm, Work& work, absl::Duration timeout);

// Keeps `buffer` (host or device memory a backend may still write) alive and
// unreused until the process exits.
void KeepForever(void* buffer);
void KeepForever(std::shared_ptr<void> buffer);

}  // namespace zeroshard
