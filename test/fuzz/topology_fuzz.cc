// libFuzzer target over the topology loader: the pre-parse screen and the full (isolated)
// libhwloc import of arbitrary bytes. Any crash, leak or sanitizer report in draguard's own code
// is a bug; libhwloc crashes on hostile input are contained by the forked import and must come
// back as a refused export with a reason.
//
// Build: cmake -DDRAGUARD_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ ...; run e.g.
//   topology_fuzz -max_total_time=60 -max_len=200000 test/data/hwloc
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "draguard/topology/import_sandbox.h"
#include "draguard/topology/loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draguard::topology;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  LoaderLimits limits;
  limits.max_bytes = 1u << 20;
  limits.import_timeout_ms = 5000;

  LoadErrorReason reason = LoadErrorReason::kNone;
  std::string format;
  const draguard::Status screened = ScreenHwlocXml(xml, limits, &reason, &format);
  if (screened.ok() != (reason == LoadErrorReason::kNone)) std::abort();
  if (!screened.ok()) return 0;
  if (format != "1.x" && format != "2.0") std::abort();

  // One long-lived isolated worker for the whole run (forking per input is slow).
  static ImportPool pool(1);
  std::vector<LoadErrorReason> reasons;
  auto results = pool.ParseBatch({xml}, limits, &reasons);
  auto& parsed = results[0];
  reason = reasons[0];
  if (parsed.ok() != (reason == LoadErrorReason::kNone)) std::abort();
  if (parsed.ok()) {
    const Shape& s = parsed.value().shape;
    // Internal consistency of what the loader produced.
    if (s.fingerprint.size() != 16 || s.derived.link_peers.size() != s.gpus.size()) std::abort();
    if (parsed.value().gpu_uuids.size() != s.gpus.size()) std::abort();
    for (const Gpu& g : s.gpus) {
      if (g.pcie_root != kNoIndex && g.pcie_root >= s.pcie_roots.size()) std::abort();
    }
    for (const GpuLink& l : s.nvlink.peers) {
      if (l.a >= l.b || l.b >= s.gpus.size()) std::abort();
    }
  }
  return 0;
}
