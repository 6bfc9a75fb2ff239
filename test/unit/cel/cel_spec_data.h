// Loads the cel-spec test data exported by test/tools/export_cel_spec.js (npm @bufbuild/cel-spec,
// installed by scripts/install-test-tools.sh). Test-only helper.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace draguard::cel::testing {

/// Why the data is unavailable, or empty when it loaded.
struct SpecData {
  nlohmann::json json;  ///< the exported document when loaded
  std::string missing;  ///< reason when not loaded
};

/// Runs node on the export script once per process and caches the result.
inline const SpecData& LoadSpecData() {
  static const SpecData data = [] {
    SpecData d;
    std::string dir = std::string(DRAGUARD_SOURCE_DIR) + "/test/tools";
    std::string probe = dir + "/node_modules/@bufbuild/cel-spec/package.json";
    if (std::FILE* f = std::fopen(probe.c_str(), "r")) {
      std::fclose(f);
    } else {
      d.missing = "cel-spec test data not installed (" + probe +
                  " missing); run scripts/install-test-tools.sh";
      return d;
    }
    std::string cmd = "node '" + dir + "/export_cel_spec.js' 2>/dev/null";
    std::FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) {
      d.missing = "cannot run node";
      return d;
    }
    std::string out;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    int rc = pclose(p);
    if (rc != 0 || out.empty()) {
      d.missing = "node failed to export the cel-spec data (is node installed?)";
      return d;
    }
    d.json = nlohmann::json::parse(out, nullptr, false);
    if (d.json.is_discarded()) d.missing = "exported cel-spec data is not valid JSON";
    return d;
  }();
  return data;
}

}  // namespace draguard::cel::testing
