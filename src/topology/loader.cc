// One-shot loading of a single export (loader.h), through a one-worker import sandbox.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "draguard/topology/import_sandbox.h"
#include "draguard/topology/loader.h"

namespace draguard::topology {

Result<ParsedExport> ParseHwlocXml(std::string_view xml, const LoaderLimits& limits, LoadErrorReason* reason) {
  ImportPool pool(1);
  std::vector<LoadErrorReason> reasons;
  std::vector<Result<ParsedExport>> res = pool.ParseBatch({xml}, limits, &reasons);
  if (reason != nullptr) *reason = reasons[0];
  return std::move(res[0]);
}

Result<ParsedExport> ParseHwlocFile(const std::string& path, const LoaderLimits& limits, LoadErrorReason* reason) {
  LoadErrorReason local = LoadErrorReason::kNone;
  LoadErrorReason* r = reason != nullptr ? reason : &local;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *r = LoadErrorReason::kIo;
    return Status::NotFound(path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    *r = LoadErrorReason::kIo;
    return Status::InvalidArgument(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    *r = LoadErrorReason::kTooLarge;
    return Status::ResourceExhausted(path + ": export is " + std::to_string(st.st_size) + " bytes, over the " +
                                     std::to_string(limits.max_bytes) + "-byte limit");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *r = LoadErrorReason::kIo;
    return Status::Unavailable(path + ": cannot open: " + std::strerror(errno));
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  // The file may have grown between stat and read; the screen re-checks the size.
  Result<ParsedExport> res = ParseHwlocXml(bytes, limits, r);
  if (!res.ok()) return Status(res.status().code(), path + ": " + res.status().message());
  return res;
}

}  // namespace draguard::topology
