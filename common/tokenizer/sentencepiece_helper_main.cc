// zeroshard-sentencepiece: SentencePiece in a process of its own
// (sentencepiece_protocol.h says why and how). Serves one client on
// standard input (a stream socket) until it closes. Links libsentencepiece
// and the C++ library only.
#include <sentencepiece_processor.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/tokenizer/sentencepiece_protocol.h"

namespace {

namespace proto = zeroshard::tokenizer::spm_protocol;

std::string Ints(const std::vector<int>& v) {
  std::string out(v.size() * 4, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const int32_t x = v[i];
    std::memcpy(out.data() + i * 4, &x, 4);
  }
  return out;
}

// The reply to one request: true with the payload, or false with a message.
bool Serve(sentencepiece::SentencePieceProcessor& sp, char op, const std::string& in,
           std::string* out) {
  switch (op) {
    case proto::kLoad: {
      const auto s = sp.LoadFromSerializedProto(in);
      *out = s.ok() ? "" : s.ToString();
      return s.ok();
    }
    case proto::kInfo:
      *out = Ints({sp.GetPieceSize(), sp.bos_id(), sp.eos_id(), sp.unk_id()});
      return true;
    case proto::kEncode: {
      std::vector<int> ids;
      const auto s = sp.Encode(in, &ids);
      *out = s.ok() ? Ints(ids) : s.ToString();
      return s.ok();
    }
    case proto::kDecode: {
      std::vector<int> ids(in.size() / 4);
      std::memcpy(ids.data(), in.data(), ids.size() * 4);
      const auto s = sp.Decode(ids, out);
      if (!s.ok()) *out = s.ToString();
      return s.ok();
    }
    case proto::kPiece: {
      const int id = sp.PieceToId(in);
      *out = Ints({sp.IdToPiece(id) == in ? id : -1});
      return true;
    }
    default:
      *out = std::string("unknown request ") + op;
      return false;
  }
}

}  // namespace

int main() {
  sentencepiece::SentencePieceProcessor sp;
  char op = 0;
  std::string in, out;
  while (proto::ReadFrame(STDIN_FILENO, &op, &in)) {
    const bool ok = Serve(sp, op, in, &out);
    if (!proto::WriteFrame(STDIN_FILENO, ok ? 0 : 1, out)) return 1;
  }
  return 0;
}
