#include "bench/checkpoint/manifest_format.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "google/protobuf/util/json_util.h"
#include "zeroshard/v1/checkpoint.pb.h"

namespace zeroshard::bench {

void StripBlockHashes(const std::string& step_dir) {
  const std::string path = step_dir + "/manifest.json";
  std::ifstream in(path);
  const std::string json((std::istreambuf_iterator<char>(in)), {});
  v1::CheckpointManifest m;
  std::string out;
  if (!in || !google::protobuf::util::JsonStringToMessage(json, &m).ok()) {
    std::fprintf(stderr, "cannot parse %s\n", path.c_str());
    std::exit(1);
  }
  for (v1::CheckpointFile& f : *m.mutable_files()) {
    f.clear_block_bytes();
    f.clear_block_xxhash64();
  }
  if (!google::protobuf::util::MessageToJsonString(m, &out).ok() ||
      !(std::ofstream(path, std::ios::trunc) << out)) {
    std::fprintf(stderr, "cannot rewrite %s\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace zeroshard::bench
