// Cheap pre-parse screen of an hwloc XML export: refuses hostile or unusable input before it
// reaches libxml2/libhwloc, and detects the XML dialect so that v3 files get a useful error.
#include <cstring>
#include <string>
#include <string_view>

#include "draguard/k8s/names.h"
#include "draguard/topology/loader.h"

namespace draguard::topology {
namespace {

Status Fail(LoadErrorReason* out, LoadErrorReason reason, Status status) {
  if (out != nullptr) *out = reason;
  return status;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Extracts attribute `name` from a start tag (text between '<' and '>').
std::string_view Attribute(std::string_view tag, std::string_view name) {
  size_t pos = 0;
  while ((pos = tag.find(name, pos)) != std::string_view::npos) {
    const bool word_start = pos > 0 && IsSpace(tag[pos - 1]);
    size_t p = pos + name.size();
    while (p < tag.size() && IsSpace(tag[p])) ++p;
    if (word_start && p < tag.size() && tag[p] == '=') {
      ++p;
      while (p < tag.size() && IsSpace(tag[p])) ++p;
      if (p < tag.size() && (tag[p] == '"' || tag[p] == '\'')) {
        const char q = tag[p];
        const size_t end = tag.find(q, p + 1);
        if (end != std::string_view::npos) return tag.substr(p + 1, end - p - 1);
      }
    }
    pos += name.size();
  }
  return {};
}

}  // namespace

const char* LoadErrorReasonName(LoadErrorReason reason) {
  switch (reason) {
    case LoadErrorReason::kNone: return "none";
    case LoadErrorReason::kEmpty: return "empty";
    case LoadErrorReason::kTooLarge: return "too_large";
    case LoadErrorReason::kNotXml: return "not_xml";
    case LoadErrorReason::kEntity: return "entity";
    case LoadErrorReason::kTooDeep: return "too_deep";
    case LoadErrorReason::kUnsupportedVersion: return "unsupported_version";
    case LoadErrorReason::kMalformed: return "malformed";
    case LoadErrorReason::kNoPci: return "no_pci";
    case LoadErrorReason::kIo: return "io";
    case LoadErrorReason::kConflict: return "conflict";
  }
  return "unknown";
}

Status ScreenHwlocXml(std::string_view xml, const LoaderLimits& limits, LoadErrorReason* reason,
                      std::string* format_out) {
  if (reason != nullptr) *reason = LoadErrorReason::kNone;
  if (xml.size() > limits.max_bytes) {
    return Fail(reason, LoadErrorReason::kTooLarge,
                Status::ResourceExhausted("export is " + std::to_string(xml.size()) + " bytes, over the " +
                                          std::to_string(limits.max_bytes) + "-byte limit"));
  }
  size_t i = 0;
  if (xml.substr(0, 3) == "\xEF\xBB\xBF") i = 3;  // UTF-8 BOM
  while (i < xml.size() && IsSpace(xml[i])) ++i;
  if (i == xml.size()) return Fail(reason, LoadErrorReason::kEmpty, Status::InvalidArgument("export is empty"));
  if (xml[i] != '<') {
    return Fail(reason, LoadErrorReason::kNotXml,
                Status::InvalidArgument("export is not XML (does not start with '<')"));
  }
  // Entity declarations have no business in an hwloc export; refusing them defeats "billion
  // laughs" and external-entity tricks regardless of the XML backend libhwloc uses.
  if (xml.find("<!ENTITY") != std::string_view::npos) {
    return Fail(reason, LoadErrorReason::kEntity,
                Status::InvalidArgument("export declares XML entities (<!ENTITY>); refused (entity expansion)"));
  }

  // Single pass over the markup: prolog, root element, nesting depth and balance.
  uint32_t depth = 0;
  uint32_t max_depth = 0;
  bool seen_root = false;
  std::string format;
  while (i < xml.size()) {
    const size_t lt = xml.find('<', i);
    if (lt == std::string_view::npos) break;
    if (!seen_root && lt > i) {
      for (size_t k = i; k < lt; ++k) {
        if (!IsSpace(xml[k])) {
          return Fail(reason, LoadErrorReason::kNotXml,
                      Status::InvalidArgument("export is not XML (text before the root element)"));
        }
      }
    }
    std::string_view rest = xml.substr(lt);
    if (rest.substr(0, 4) == "<!--") {
      const size_t end = xml.find("-->", lt + 4);
      if (end == std::string_view::npos) {
        return Fail(reason, LoadErrorReason::kMalformed, Status::InvalidArgument("export is truncated (open comment)"));
      }
      i = end + 3;
      continue;
    }
    if (rest.substr(0, 9) == "<![CDATA[") {
      const size_t end = xml.find("]]>", lt + 9);
      if (end == std::string_view::npos) {
        return Fail(reason, LoadErrorReason::kMalformed, Status::InvalidArgument("export is truncated (open CDATA)"));
      }
      i = end + 3;
      continue;
    }
    if (rest.substr(0, 2) == "<?") {
      const size_t end = xml.find("?>", lt + 2);
      if (end == std::string_view::npos) {
        return Fail(reason, LoadErrorReason::kMalformed,
                    Status::InvalidArgument("export is truncated (open processing instruction)"));
      }
      i = end + 2;
      continue;
    }
    if (rest.substr(0, 2) == "<!") {
      // DOCTYPE: an internal subset ('[') could declare entities or attribute defaults.
      size_t k = lt + 2;
      while (k < xml.size() && xml[k] != '>' && xml[k] != '[') ++k;
      if (k < xml.size() && xml[k] == '[') {
        return Fail(reason, LoadErrorReason::kEntity,
                    Status::InvalidArgument("export has a DTD internal subset; refused (entity expansion)"));
      }
      if (k == xml.size()) {
        return Fail(reason, LoadErrorReason::kMalformed, Status::InvalidArgument("export is truncated (open DOCTYPE)"));
      }
      i = k + 1;
      continue;
    }
    // An element tag: find its end outside quoted attribute values.
    size_t k = lt + 1;
    char quote = 0;
    for (; k < xml.size(); ++k) {
      const char c = xml[k];
      if (quote != 0) {
        if (c == quote) quote = 0;
      } else if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '>') {
        break;
      }
    }
    if (k == xml.size()) {
      return Fail(reason, LoadErrorReason::kMalformed,
                  Status::InvalidArgument("export is truncated (unterminated tag at byte " + std::to_string(lt) + ")"));
    }
    std::string_view tag = xml.substr(lt + 1, k - lt - 1);
    i = k + 1;
    if (!tag.empty() && tag[0] == '/') {
      if (depth == 0) {
        return Fail(reason, LoadErrorReason::kMalformed,
                    Status::InvalidArgument("export is not well-formed (unbalanced end tag)"));
      }
      --depth;
      if (depth == 0) break;  // end of the root element
      continue;
    }
    const bool self_closing = !tag.empty() && tag.back() == '/';
    if (!seen_root) {
      seen_root = true;
      size_t n = 0;
      while (n < tag.size() && !IsSpace(tag[n]) && tag[n] != '/') ++n;
      const std::string_view name = tag.substr(0, n);
      if (name != "topology" && name != "root") {
        return Fail(reason, LoadErrorReason::kNotXml,
                    Status::InvalidArgument("not an hwloc export: root element is <" + std::string(name.substr(0, 64)) +
                                            ">, expected <topology>"));
      }
      const std::string_view version = Attribute(tag, "version");
      if (name == "root" || version.empty()) {
        format = "1.x";
      } else if (version.substr(0, 2) == "2.") {
        format = "2.0";
      } else {
        const std::string v(version.substr(0, 16));
        const bool v3 = version.substr(0, 2) == "3." || (version.size() > 1 && version[0] > '3');
        return Fail(reason, LoadErrorReason::kUnsupportedVersion,
                    Status::FailedPrecondition(
                        v3 ? "hwloc XML format " + v +
                                 " is not supported: draguard reads hwloc v1 and v2 XML through libhwloc 2.9, "
                                 "which cannot import v3 files; re-export with `lstopo --of xml "
                                 "--export-xml-flags v2` (or HWLOC_TOPOLOGY_EXPORT_XML_FLAG_V2) from hwloc 3.x"
                           : "unknown hwloc XML format version \"" + v + "\"; expected v1 or v2"));
      }
    }
    if (!self_closing) {
      ++depth;
      if (depth > max_depth) max_depth = depth;
      if (depth > limits.max_depth) {
        return Fail(reason, LoadErrorReason::kTooDeep,
                    Status::ResourceExhausted("export nests elements deeper than " + std::to_string(limits.max_depth) +
                                              " levels; refused"));
      }
    } else if (depth == 0) {
      break;  // a self-closing root: nothing inside
    }
  }
  if (!seen_root) {
    return Fail(reason, LoadErrorReason::kNotXml, Status::InvalidArgument("export has no root element"));
  }
  if (depth != 0) {
    return Fail(reason, LoadErrorReason::kMalformed,
                Status::InvalidArgument("export is truncated (" + std::to_string(depth) + " elements left open)"));
  }
  if (format_out != nullptr) *format_out = format;
  return Status::Ok();
}

std::string NodeNameFromFileName(std::string_view file_name) {
  if (file_name.empty() || file_name[0] == '.') return {};
  if (file_name.find('/') != std::string_view::npos) return {};
  for (std::string_view suffix : {std::string_view(".hwloc.xml"), std::string_view(".xml")}) {
    if (file_name.size() > suffix.size() && file_name.substr(file_name.size() - suffix.size()) == suffix) {
      return k8s::NodeNameFrom(file_name.substr(0, file_name.size() - suffix.size()));
    }
  }
  return {};
}

}  // namespace draguard::topology
