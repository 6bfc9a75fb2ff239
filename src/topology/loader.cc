// One-shot loading of a single export (loader.h), through a one-worker import sandbox.
#include "draguard/read_file.h"
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
  auto bytes = ReadFile(path, limits.max_bytes);
  if (!bytes.ok()) {
    *r = bytes.status().code() == StatusCode::kResourceExhausted ? LoadErrorReason::kTooLarge : LoadErrorReason::kIo;
    return bytes.status();
  }
  Result<ParsedExport> res = ParseHwlocXml(*bytes, limits, r);
  if (!res.ok()) return Status(res.status().code(), path + ": " + res.status().message());
  return res;
}

}  // namespace draguard::topology
