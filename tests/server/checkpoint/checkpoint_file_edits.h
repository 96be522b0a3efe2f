// Test helpers that damage or rewrite a committed checkpoint on disk: read
// a file whole, flip one byte, edit the manifest's file entries, strip the
// block hashes (the format written before them).
#pragma once

#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_manifest.h"

namespace zeroshard::testing {

inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void FlipByte(const std::string& path, int64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  const char c = static_cast<char>(f.get());
  f.seekp(offset);
  f.put(static_cast<char>(c ^ 0x5a));
}

// Rewrites the manifest in `dir` through `edit` (each file's entry).
inline void EditManifest(const std::string& dir,
                         const std::function<void(v1::CheckpointFile&)>& edit) {
  auto m = server::LoadManifest(dir, server::HashCheck::kNone);
  ASSERT_TRUE(m.ok()) << m.status();
  for (v1::CheckpointFile& f : *m->manifest.mutable_files()) edit(f);
  auto json = server::ManifestToJson(m->manifest);
  ASSERT_TRUE(json.ok());
  std::ofstream(dir + "/" + server::kManifestName, std::ios::trunc) << *json;
}

inline void StripBlockHashes(const std::string& dir) {
  EditManifest(dir, [](v1::CheckpointFile& f) {
    f.clear_block_bytes();
    f.clear_block_xxhash64();
  });
}

}  // namespace zeroshard::testing
