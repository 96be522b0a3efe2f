// `zeroshard tokenize`: text files, directories or JSONL in; one llm.c token
// shard out (worker/data/token_file.h), with the model's own tokenizer
// (common/tokenizer/tokenizer.h). Documents are encoded in batches on every
// thread and written in input order, so the shard does not depend on the
// thread count; each gives the ids worker/data/document_tokens.h says.
// `--decode SHARD` prints a shard's text back.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/commands.h"
#include "cli/tokenize_progress.h"
#include "common/parallel_for.h"
#include "common/status_macros.h"
#include "common/tokenizer/incremental_decode.h"
#include "common/tokenizer/tokenizer.h"
#include "worker/data/document_tokens.h"
#include "worker/data/documents.h"
#include "worker/data/token_file.h"

namespace zeroshard::cli {
namespace {

using tokenizer::Tokenizer;

constexpr int64_t kBatchBytes = int64_t{16} << 20;
constexpr size_t kBatchDocs = 8192;

struct TokenizeOptions {
  std::vector<std::string> inputs;
  std::string out;
  std::string tokenizer;
  std::string model;
  std::string text_field = "text";
  std::string decode;
  int threads = 0;
};

absl::StatusOr<std::unique_ptr<Tokenizer>> FindTokenizer(const TokenizeOptions& o) {
  if (o.tokenizer.empty() && o.model.empty()) {
    return absl::InvalidArgumentError("give --tokenizer PATH or --model DIR");
  }
  return tokenizer::LoadTokenizer(o.tokenizer.empty() ? o.model : o.tokenizer);
}

absl::Status Tokenize(const TokenizeOptions& o) {
  if (o.inputs.empty()) return absl::InvalidArgumentError("give input files, directories or JSONL");
  if (o.out.empty()) return absl::InvalidArgumentError("give --out FILE");
  ZS_ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tok, FindTokenizer(o));
  ZS_ASSIGN_OR_RETURN(DocumentReader reader, DocumentReader::Open(o.inputs, o.text_field));
  ZS_ASSIGN_OR_RETURN(TokenFileWriter writer, TokenFileWriter::Open(o.out, tok->vocab_size()));
  const int threads = ResolveThreads(o.threads);
  const absl::Time start = absl::Now();
  ProgressLine progress;
  int64_t documents = 0;
  std::vector<Document> batch;
  std::vector<std::vector<int32_t>> ids;
  for (bool more = true; more;) {
    batch.clear();
    int64_t bytes = 0;
    while (bytes < kBatchBytes && batch.size() < kBatchDocs) {
      Document d;
      ZS_ASSIGN_OR_RETURN(more, reader.Next(&d));
      if (!more) break;
      bytes += static_cast<int64_t>(d.text.size());
      batch.push_back(std::move(d));
    }
    ZS_RETURN_IF_ERROR(EncodeDocuments(*tok, batch, threads, &ids));
    for (const std::vector<int32_t>& d : ids) ZS_RETURN_IF_ERROR(writer.Append(d));
    documents += static_cast<int64_t>(batch.size());
    progress.Update(reader.read_bytes(), reader.total_bytes(), writer.count());
  }
  progress.Finish();
  const int64_t tokens = writer.count();
  const int width = writer.width();
  ZS_RETURN_IF_ERROR(writer.Close());
  const double s = std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start));
  std::cout << absl::StrFormat(
      "tokenize: %d documents, %d tokens (%s, llm.c version %d) in %.2f s: %.0f tokens/s, "
      "%.1f MB/s on %d threads -> %s\n  tokenizer: %s\n",
      documents, tokens, width == 2 ? "uint16" : "uint32", width == 2 ? 1 : 7, s, tokens / s,
      reader.read_bytes() / s / 1e6, threads, o.out, tok->Describe());
  return absl::OkStatus();
}

// A shard's text, 1M tokens at a time (equal to decoding them all at once), to --out or standard
// output.
absl::Status Decode(const TokenizeOptions& o) {
  ZS_ASSIGN_OR_RETURN(const std::unique_ptr<Tokenizer> tok, FindTokenizer(o));
  ZS_ASSIGN_OR_RETURN(const TokenFile file, ReadTokenFile(o.decode, tok->vocab_size()));
  std::FILE* out = o.out.empty() ? stdout : std::fopen(o.out.c_str(), "wb");
  if (out == nullptr) return absl::InvalidArgumentError(absl::StrCat(o.out, ": cannot be written"));
  constexpr int64_t kChunk = 1 << 20;
  std::vector<int32_t> ids;
  absl::Status status;
  // Runs decoded apart would each lose a SentencePiece word's space.
  tokenizer::IncrementalDecoder decoder(*tok);
  auto write = [&](const absl::StatusOr<std::string>& text) {
    status = text.status();
    if (status.ok() && std::fwrite(text->data(), 1, text->size(), out) != text->size()) {
      status = absl::InvalidArgumentError("write failed");
    }
  };
  for (int64_t at = 0; at < file.count() && status.ok(); at += kChunk) {
    ids.clear();
    for (int64_t i = at; i < std::min(file.count(), at + kChunk); ++i) ids.push_back(file.at(i));
    write(decoder.Append(ids));
  }
  if (status.ok()) write(decoder.Finish());  // The ids it held back, if any.
  if (out != stdout) std::fclose(out);
  return status;
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& app, std::vector<Command>& commands) {
  CLI::App* sub =
      app.add_subcommand("tokenize",
                         "text files, directories or JSONL to an llm.c token shard, with a model's "
                         "tokenizer (--decode: a shard back to text)");
  auto o = std::make_shared<TokenizeOptions>();
  sub->add_option("inputs", o->inputs, "text files, directories, or .jsonl (one document a line)");
  sub->add_option("--out", o->out, "the shard to write (with --decode: the text; default stdout)");
  sub->add_option("--tokenizer", o->tokenizer,
                  "tokenizer.json, a SentencePiece .model, or a directory holding one");
  sub->add_option("--model", o->model, "a Hugging Face model directory (its tokenizer is used)");
  sub->add_option("--text-field", o->text_field, "the JSONL field holding a document's text")
      ->capture_default_str();
  sub->add_option("--threads", o->threads, "encoding threads (0 = every core, at most 16)")
      ->capture_default_str();
  sub->add_option("--decode", o->decode, "print this shard's text instead");
  commands.push_back({sub, [o] {
                        const absl::Status s = o->decode.empty() ? Tokenize(*o) : Decode(*o);
                        if (s.ok()) return 0;
                        std::cerr << "zeroshard tokenize: " << s.message() << "\n";
                        return 2;
                      }});
}

}  // namespace zeroshard::cli
