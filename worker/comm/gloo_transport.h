// Gloo TCP transport helpers: device creation and aborting a context from
// another thread.
//
// [Note: aborting a Gloo context] Gloo's collectives block in
// waitRecv/waitSend until their own timeout, and Context::closeConnections
// does not wake them. What does is Gloo's reaction to an application-side
// timeout: when any unbound-buffer wait times out, the TCP context signals an
// IoException to every pair, closes them, and every pending wait on the
// context throws. That path is public, so AbortGlooContext triggers it on
// purpose: a wait of 1 ms on a fresh buffer that nobody sends to. Peers see
// the connections close and fail too, so one rank's Abort ends the
// generation's collectives everywhere within a round trip. (The TCP context's
// signalException itself is protected, and the packaged headers that declare
// it cannot be included: gloo/common/memory.h is missing from libgloo-dev.)
#pragma once

#include <memory>
#include <string>

#include "gloo/context.h"
#include "gloo/transport/device.h"

namespace zeroshard {

// A TCP device listening on `hostname` (port chosen by the kernel). The first
// call sets SIGPIPE to ignored for the process (see the .cc). Throws
// gloo exceptions (e.g. an unresolvable hostname); the caller maps them.
std::shared_ptr<gloo::transport::Device> CreateTcpDevice(const std::string& hostname);

// Makes every pending and later operation on `context` throw
// gloo::IoException ("... timeout caused pair closure"). Safe to call from any
// thread, concurrently with operations, and more than once. Never throws.
void AbortGlooContext(gloo::Context& context);

}  // namespace zeroshard
