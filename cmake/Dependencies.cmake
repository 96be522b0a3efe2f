# Every third-party dependency is found here, once. See shared/TOOLCHAIN.md.
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)  # libssl-dev: HMAC and random bytes for member secrets
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Gloo CONFIG REQUIRED)
find_package(civetweb CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)  # Debian prometheus-cpp-dev 1.0.1
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(GTest CONFIG REQUIRED)
find_package(benchmark CONFIG REQUIRED)
# libdnnl-dev 2.6 (oneDNN): the CPU kernels' sgemm (dnnl_sgemm, JIT-compiled
# for the CPU it runs on), threaded with OpenMP (libgomp).
find_package(dnnl CONFIG REQUIRED)
find_package(OpenMP REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# Tokenizers (common/tokenizer): libpcre2-dev (the pre-tokenizer regexes,
# with lookahead), libutf8proc-dev (NFC), libsentencepiece-dev (.model files;
# its pkg-config file also names the trainer, which is not needed).
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
find_library(ZEROSHARD_SENTENCEPIECE_LIBRARY sentencepiece REQUIRED)
find_program(PROMTOOL_PROGRAM promtool)
find_package(Python3 COMPONENTS Interpreter)
