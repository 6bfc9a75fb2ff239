// Kubernetes object names (names.h).
#include "draguard/k8s/names.h"

#include <algorithm>

namespace draguard::k8s {
namespace {

bool Alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9]([-a-z0-9]*[a-z0-9])? of any length.
bool IsLabelShape(std::string_view s) {
  if (s.empty() || !Alnum(s.front()) || !Alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return Alnum(c) || c == '-'; });
}

}  // namespace

bool IsDnsLabel(std::string_view s) { return s.size() <= 63 && IsLabelShape(s); }

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = s.find('.', start);
    if (!IsLabelShape(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start))) {
      return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

std::string NodeNameFrom(std::string_view name) {
  // test/cluster/cluster.sh and NodeName in test/cluster/e2e/harness_test.go do the same.
  std::string lower(name);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (IsDnsSubdomain(lower)) return lower;
  constexpr std::size_t kMax = 63;
  std::string out;
  for (char c : lower) {
    out.push_back(Alnum(c) || c == '-' ? c : '-');
    if (out.size() == kMax) break;
  }
  const std::size_t first = out.find_first_not_of('-');
  if (first == std::string::npos) return "";
  return out.substr(first, out.find_last_not_of('-') - first + 1);
}

}  // namespace draguard::k8s
