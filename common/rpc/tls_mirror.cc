#include "common/rpc/tls_mirror.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdlib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/formats/atomic_file.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

std::atomic<int64_t> g_applied{0}, g_refused{0};

std::unique_ptr<X509, decltype(&X509_free)> FirstCert(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  return {PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free};
}

struct Texts {
  std::string ca, cert, key;
  bool operator==(const Texts&) const = default;
};

absl::StatusOr<Texts> ReadSet(const TlsFiles& f) {
  Texts t;
  for (auto [path, out] :
       {std::pair{&f.ca, &t.ca}, std::pair{&f.cert, &t.cert}, std::pair{&f.key, &t.key}}) {
    if (path->empty()) continue;
    ZS_ASSIGN_OR_RETURN(*out, ReadWholeFile(*path));
  }
  return t;
}

absl::Status WriteSet(const TlsFiles& copy, const Texts& t) {
  // Each file is replaced atomically, but the set is not: gRPC may read a
  // new certificate with the old key at one refresh. It checks that the
  // pair matches and keeps the previous one then, picking the new pair up
  // at the next refresh.
  for (auto [path, text] :
       {std::pair{&copy.ca, &t.ca}, std::pair{&copy.cert, &t.cert}, std::pair{&copy.key, &t.key}}) {
    if (path->empty()) continue;
    ZS_RETURN_IF_ERROR(WriteFileAtomically(*path, *text));
  }
  return absl::OkStatus();
}

struct Mirror {
  TlsFiles source, copy;
  Texts applied;
  std::string last_refused;  // The refused set's reason, printed once.
};

class Mirrors {
 public:
  static Mirrors& Get() {
    static Mirrors* m = new Mirrors();  // Lives until exit with its thread.
    return *m;
  }

  absl::StatusOr<TlsFiles> Add(const TlsFiles& source) {
    absl::MutexLock lock(&mu_);
    for (const Mirror& m : mirrors_) {
      if (m.source.ca == source.ca && m.source.cert == source.cert && m.source.key == source.key) {
        return m.copy;
      }
    }
    ZS_ASSIGN_OR_RETURN(const Texts t, ReadSet(source));
    if (std::string why = ValidateTlsSet(t.ca, t.cert, t.key); !why.empty()) {
      return absl::InvalidArgumentError(why);
    }
    Mirror m{source, {}, t, ""};
    ZS_ASSIGN_OR_RETURN(const std::string dir, Dir());
    const std::string base = absl::StrCat(dir, "/", mirrors_.size(), "-");
    if (!source.ca.empty()) m.copy.ca = base + "ca.pem";
    if (!source.cert.empty()) m.copy.cert = base + "cert.pem";
    if (!source.key.empty()) m.copy.key = base + "key.pem";
    ZS_RETURN_IF_ERROR(WriteSet(m.copy, t));
    mirrors_.push_back(m);
    if (!thread_started_) {
      thread_started_ = true;
      std::thread([this] { Poll(); }).detach();
    }
    return m.copy;
  }

 private:
  absl::StatusOr<std::string> Dir() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!dir_.empty()) return dir_;
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/zeroshard-tls-XXXXXX");
    if (::mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("TLS copies: mkdtemp ", pattern, " failed"));
    }
    dir_ = pattern;
    static std::string* removed_at_exit = new std::string(dir_);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(*removed_at_exit, ignored);
    });
    return dir_;
  }

  void Poll() {
    for (;;) {
      absl::SleepFor(absl::Seconds(kTlsRefreshSeconds));
      absl::MutexLock lock(&mu_);
      for (Mirror& m : mirrors_) Refresh(m);
    }
  }

  static void Refresh(Mirror& m) {
    absl::StatusOr<Texts> t = ReadSet(m.source);
    if (t.ok() && *t == m.applied) return;
    std::string why =
        t.ok() ? ValidateTlsSet(t->ca, t->cert, t->key) : std::string(t.status().message());
    if (why.empty()) {
      if (absl::Status s = WriteSet(m.copy, *t); !s.ok()) why = std::string(s.message());
    }
    if (!why.empty()) {
      if (why != m.last_refused) {
        std::fprintf(stderr,
                     "zeroshard: TLS files changed but are not usable (%s): keeping the "
                     "previous certificate and key\n",
                     why.c_str());
        ++g_refused;
        m.last_refused = why;
      }
      return;
    }
    m.applied = *std::move(t);
    m.last_refused.clear();
    ++g_applied;
  }

 public:
  // TlsServingProblem (tls_mirror.h).
  std::string ServingProblem() {
    absl::MutexLock lock(&mu_);
    for (const Mirror& m : mirrors_) {
      if (m.applied.cert.empty()) continue;
      auto leaf = FirstCert(m.applied.cert);
      if (leaf == nullptr) continue;  // Validated when applied: cannot happen.
      if (X509_cmp_current_time(X509_get0_notAfter(leaf.get())) < 0) {
        return absl::StrCat("tls: the served certificate ", m.source.cert, " expired at ",
                            AsnTime(X509_get0_notAfter(leaf.get())));
      }
      if (X509_cmp_current_time(X509_get0_notBefore(leaf.get())) > 0) {
        return absl::StrCat("tls: the served certificate ", m.source.cert, " is not valid before ",
                            AsnTime(X509_get0_notBefore(leaf.get())));
      }
    }
    return "";
  }

 private:
  static std::string AsnTime(const ASN1_TIME* t) {
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
    ASN1_TIME_print(bio.get(), t);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(n));
  }

  absl::Mutex mu_;
  std::vector<Mirror> mirrors_ ABSL_GUARDED_BY(mu_);
  std::string dir_ ABSL_GUARDED_BY(mu_);
  bool thread_started_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

std::string ValidateTlsSet(const std::string& ca, const std::string& cert, const std::string& key) {
  if (!ca.empty() && FirstCert(ca) == nullptr) return "the CA file holds no PEM certificate";
  if (cert.empty() != key.empty())
    return cert.empty() ? "the certificate is empty" : "the key is empty";
  if (cert.empty()) return "";
  auto leaf = FirstCert(cert);
  if (leaf == nullptr) return "the certificate file holds no PEM certificate";
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(key.data(), static_cast<int>(key.size())), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (pkey == nullptr) return "the key file holds no PEM private key";
  if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
    return "the key does not match the certificate";
  }
  return "";
}

absl::StatusOr<TlsFiles> MirrorTlsFiles(const TlsFiles& source) {
  absl::StatusOr<TlsFiles> copy = Mirrors::Get().Add(source);
  if (!copy.ok() && absl::IsInvalidArgument(copy.status())) {
    return absl::InvalidArgumentError(absl::StrCat("TLS files ", source.cert, " ", source.key, " ",
                                                   source.ca, ": ", copy.status().message()));
  }
  return copy;
}

std::string TlsServingProblem() { return Mirrors::Get().ServingProblem(); }

TlsReloadCounts TlsReloads() { return {g_applied.load(), g_refused.load()}; }

}  // namespace zeroshard
