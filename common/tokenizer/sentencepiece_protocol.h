// The pipe protocol between zeroshard and its SentencePiece helper process
// (sentencepiece_helper_main.cc). Why a process: Debian's libsentencepiece
// (0.1.97) exports the protobuf 3.14 it bundles, 1,602 google::protobuf
// symbols, and a process that also loads libprotobuf 3.21 for gRPC (every
// zeroshard binary) resolves one set against the other: the version check
// aborts, and worse would follow. The helper links libsentencepiece alone.
//
// Frames over a stream socket, little-endian: a request is op (1 byte),
// payload length (uint32), payload; a reply is status (1 byte, 0 = ok, 1 =
// error with the message as payload), length, payload.
//   'L' model bytes         -> nothing       (load a serialized .model)
//   'I' nothing             -> 4 int32: piece count, BOS, EOS, unk ids
//   'E' UTF-8 text          -> int32 ids
//   'D' int32 ids           -> text
//   'P' a piece             -> int32 id (-1 when the model has none)
// Header-only, standard types only (the helper includes no abseil).
#pragma once

#include <cstdint>
#include <string>

namespace zeroshard::tokenizer::spm_protocol {

inline constexpr char kLoad = 'L', kInfo = 'I', kEncode = 'E', kDecode = 'D', kPiece = 'P';
inline constexpr char kHelperName[] = "zeroshard-sentencepiece";

// Reads exactly n bytes; false on EOF or error.
bool ReadFull(int fd, void* buf, size_t n);
// Writes all n bytes (MSG_NOSIGNAL: a dead peer is an error, not SIGPIPE).
bool WriteFull(int fd, const void* buf, size_t n);
// One frame: a tag byte and a payload.
bool WriteFrame(int fd, char tag, const std::string& payload);
bool ReadFrame(int fd, char* tag, std::string* payload);

}  // namespace zeroshard::tokenizer::spm_protocol
