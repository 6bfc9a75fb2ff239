// Fuzzes the policy parser (YAML via yaml-cpp): any input yields a policy or a clear error.
#include <cstdint>
#include <string_view>

#include "draguard/policy/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = draguard::policy::ParsePolicy(text, "fuzz");
  if (!p.ok() && p.status().message().empty()) __builtin_trap();
  return 0;
}
