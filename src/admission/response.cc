#include "draguard/admission/response.h"


#include <algorithm>
#include <set>
#include <utility>

namespace draguard::admission {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsKeyChar(char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; }

// Length of the UTF-8 prefix of `text` that fits in `max_bytes` without splitting a code point.
std::size_t Utf8Prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  std::size_t n = max_bytes;
  // Step back over continuation bytes (10xxxxxx) so that we cut before a lead byte.
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return n;
}

bool IsEmptyPatch(std::string_view patch) {
  std::size_t i = 0;
  auto skip_ws = [&] {
    while (i < patch.size() && (patch[i] == ' ' || patch[i] == '\n' || patch[i] == '\t' ||
                                patch[i] == '\r')) {
      ++i;
    }
  };
  skip_ws();
  if (i == patch.size()) return true;
  if (patch[i] != '[') return false;
  ++i;
  skip_ws();
  if (i >= patch.size() || patch[i] != ']') return false;
  ++i;
  skip_ws();
  return i == patch.size();
}

}  // namespace

AdmissionResponse Allowed() { return AdmissionResponse{}; }

AdmissionResponse Denied(std::string message, int code, std::string reason) {
  AdmissionResponse r;
  r.allowed = false;
  r.status = ResponseStatus{code, std::move(reason), std::move(message)};
  return r;
}

void AddWarning(AdmissionResponse& response, std::string warning) {
  response.warnings.push_back(std::move(warning));
}

void AddAuditAnnotation(AdmissionResponse& response, std::string key, std::string value) {
  response.audit_annotations[std::move(key)] = std::move(value);
}

void SetPatch(AdmissionResponse& response, std::string json_patch) {
  response.patch = std::move(json_patch);
}

bool IsValidAuditAnnotationKey(std::string_view key) {
  if (key.empty() || key.size() > 63) return false;
  if (!IsAlnum(key.front()) || !IsAlnum(key.back())) return false;
  for (char c : key) {
    if (!IsKeyChar(c)) return false;
  }
  return true;
}

std::string NormalizeAuditAnnotationKey(std::string_view key) {
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (IsKeyChar(c)) {
      out.push_back(c);
    } else {
      out.push_back('-');
    }
  }
  if (out.size() > 63) out.resize(63);
  while (!out.empty() && !IsAlnum(out.back())) out.pop_back();
  std::size_t start = 0;
  while (start < out.size() && !IsAlnum(out[start])) ++start;
  out.erase(0, start);
  if (out.empty()) out = "annotation";
  return out;
}

std::string TruncateUtf8(std::string_view text, std::size_t max_bytes) {
  // The byte after the cut is kept too: it tells whether the cut splits a character.
  std::string out(text.substr(0, text.size() <= max_bytes ? text.size() : max_bytes + 1));
  TruncateUtf8InPlace(out, max_bytes);
  return out;
}

void TruncateUtf8InPlace(std::string& text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return;
  if (max_bytes < 3) {
    text.resize(Utf8Prefix(text, max_bytes));
    return;
  }
  text.resize(Utf8Prefix(text, max_bytes - 3));
  text += "...";
}

std::vector<std::string> LimitWarnings(std::vector<std::string> warnings) {
  // Each warning is cut where it stands and kept ones are moved down over the dropped ones, so a
  // response's warnings are limited without copying them. Duplicates are found by a scan of the
  // first kept ones, and past kLinearDuplicateScan kept ones by a set of views of them (the vector
  // is never resized while they are taken, and a kept warning is never moved again).
  constexpr std::size_t kLinearDuplicateScan = 16;
  std::set<std::string_view> seen;
  std::size_t kept = 0;
  std::size_t total = 0;
  for (std::size_t i = 0; i < warnings.size(); ++i) {
    std::string& w = warnings[i];
    if (w.empty()) continue;
    TruncateUtf8InPlace(w, kMaxWarningChars);
    const bool duplicate =
        kept <= kLinearDuplicateScan
            ? std::find(warnings.begin(), warnings.begin() + static_cast<std::ptrdiff_t>(kept), w) !=
                  warnings.begin() + static_cast<std::ptrdiff_t>(kept)
            : seen.count(w) > 0;
    if (duplicate) continue;
    if (total + w.size() > kMaxWarningBytesTotal) break;
    total += w.size();
    if (kept != i) warnings[kept] = std::move(w);
    ++kept;
    if (kept == kLinearDuplicateScan + 1) {
      for (std::size_t k = 0; k < kept; ++k) seen.insert(warnings[k]);
    } else if (kept > kLinearDuplicateScan + 1) {
      seen.insert(warnings[kept - 1]);
    }
  }
  warnings.resize(kept);
  return warnings;
}

AdmissionResponse Complete(AdmissionResponse response, std::string_view uid, WebhookKind webhook) {
  response.uid = std::string(uid);
  if (!response.allowed) {
    if (!response.status) response.status = ResponseStatus{403, "Forbidden", "denied by draguard"};
    if (response.status->code < 400) response.status->code = 403;
    if (response.status->reason.empty()) response.status->reason = "Forbidden";
    TruncateUtf8InPlace(response.status->message, kMaxDenyMessageBytes);
    // A denied request is never patched.
    response.patch.clear();
  } else {
    response.status.reset();
  }
  if (!response.warnings.empty()) response.warnings = LimitWarnings(std::move(response.warnings));
  // Values are cut in place; the map is built anew only when a key has to be normalised.
  bool keys_valid = true;
  for (auto& [k, v] : response.audit_annotations) {
    keys_valid = keys_valid && IsValidAuditAnnotationKey(k);
    TruncateUtf8InPlace(v, kMaxAuditAnnotationValueBytes);
  }
  if (!keys_valid) {
    std::map<std::string, std::string> annotations;
    for (auto& [k, v] : response.audit_annotations) {
      annotations[IsValidAuditAnnotationKey(k) ? k : NormalizeAuditAnnotationKey(k)] = std::move(v);
    }
    response.audit_annotations = std::move(annotations);
  }
  if (webhook == WebhookKind::kValidating || IsEmptyPatch(response.patch)) response.patch.clear();
  return response;
}

}  // namespace draguard::admission
