#include "draguard/yamljson/yamljson.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <yaml-cpp/yaml.h>

namespace draguard::yamljson {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 128;
constexpr std::size_t kMaxBytes = 16 * 1024 * 1024;

// What a plain (unquoted, untagged) scalar means.
json PlainValue(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  {
    int64_t v = 0;
    const char* b = s.data();
    const char* e = s.data() + s.size();
    if (*b == '+') ++b;
    auto [p, ec] = std::from_chars(b, e, v);
    if (ec == std::errc() && p == e) return v;
  }
  {
    bool numeric = !s.empty();
    bool digit = false;
    for (char c : s) {
      if (c >= '0' && c <= '9') digit = true;
      else if (c != '.' && c != 'e' && c != 'E' && c != '-' && c != '+') numeric = false;
    }
    if (numeric && digit) {
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      if (end == s.c_str() + s.size()) return d;
    }
  }
  return s;
}

json Scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() != "?") return s;  // quoted or explicitly tagged: a string
  return PlainValue(s);
}

Result<json> Convert(const YAML::Node& n, int depth) {
  if (depth > kMaxDepth) return Status::ResourceExhausted("YAML nested deeper than 128 levels");
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      return Scalar(n);
    case YAML::NodeType::Sequence: {
      json arr = json::array();
      for (const auto& e : n) {
        auto v = Convert(e, depth + 1);
        if (!v.ok()) return v.status();
        arr.push_back(std::move(v).value());
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      json obj = json::object();
      for (const auto& kv : n) {
        if (!kv.first.IsScalar()) return Status::InvalidArgument("YAML map keys must be scalars");
        auto v = Convert(kv.second, depth + 1);
        if (!v.ok()) return v.status();
        obj[kv.first.Scalar()] = std::move(v).value();
      }
      return obj;
    }
  }
  return json(nullptr);
}

// Flow-collection nesting ("[[[[", "{{{{"), which yaml-cpp parses recursively.
int FlowDepth(std::string_view text) {
  int depth = 0, max_depth = 0;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote != 0) {
      if (c == '\\' && quote == '"') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    else if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    else if ((c == ']' || c == '}') && depth > 0) --depth;
    if (max_depth > kMaxDepth) break;
  }
  return max_depth;
}

// --- JSON to YAML ---------------------------------------------------------------------------

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// True when `s` must be quoted: as a plain scalar it would be read back as something else, here
// (PlainValue) or by a YAML 1.1 reader such as go-yaml v2 (yes/on/y, sexagesimal, 0x, 0o, 1_000),
// or it is not a valid plain scalar at all (leading indicator, ": ", " #", outer whitespace).
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  if (PlainValue(s) != json(s)) return true;
  static const char* const kWords[] = {"y",    "n",     "yes",  "no",    "on",    "off",   "true",
                                       "false", "null", "~",    ".inf",  "-.inf", "+.inf", ".nan",
                                       "<<",   "="};
  const std::string lower = Lower(s);
  for (const char* w : kWords) {
    if (lower == w) return true;
  }
  // Anything that starts like a number (digits, sign, dot) and holds no letter beyond those a
  // number literal can contain: 1e3, 0x1F, 0o17, 0b1, 1_000, 12:30, .5, +1, 1.2.3.
  std::size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i < s.size() && (IsDigit(s[i]) || (s[i] == '.' && i + 1 < s.size() && IsDigit(s[i + 1])))) {
    bool number_like = true;
    for (char c : s) {
      if (!(IsDigit(c) || c == '.' || c == '_' || c == ':' || c == '+' || c == '-' || c == 'x' || c == 'X' ||
            c == 'o' || c == 'O' || c == 'b' || c == 'B' || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
        number_like = false;
        break;
      }
    }
    if (number_like) return true;
  }
  static const std::string_view kIndicators = "-?:,[]{}#&*!|>'\"%@`";
  if (kIndicators.find(s.front()) != std::string_view::npos) return true;
  if (s.front() == ' ' || s.front() == '\t' || s.back() == ' ' || s.back() == '\t' || s.back() == ':') return true;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos ||
      s.find(":\t") != std::string::npos || s.find("\t#") != std::string::npos) {
    return true;
  }
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;  // control characters and line breaks
  }
  // Non-breaking and other Unicode line/space separators a reader may trim or split on.
  if (s.find("\xc2\x85") != std::string::npos || s.find("\xc2\xa0") != std::string::npos ||
      s.find("\xe2\x80\xa8") != std::string::npos || s.find("\xe2\x80\xa9") != std::string::npos ||
      s.find("\xef\xbb\xbf") != std::string::npos) {
    return true;
  }
  return false;
}

// A literal block (|) keeps multi-line text readable; only used where it reads back exactly:
// exactly one trailing newline (clip chomping), no leading whitespace (indentation detection),
// printable characters only.
bool LiteralOk(const std::string& s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n') return false;
  if (s.front() == ' ' || s.front() == '\t' || s.front() == '\n') return false;
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
  }
  if (s.find("\xc2\x85") != std::string::npos || s.find("\xe2\x80\xa8") != std::string::npos ||
      s.find("\xe2\x80\xa9") != std::string::npos || s.find("\xef\xbb\xbf") != std::string::npos) {
    return false;
  }
  // Trailing whitespace on a line and whitespace-only lines survive a literal block, but a line
  // of only spaces before a less-indented one confuses some readers: quote those instead.
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t end = s.find('\n', start);
    std::string_view line(s.data() + start, end - start);
    if (!line.empty() && line.find_first_not_of(" \t") == std::string_view::npos) return false;
    start = end + 1;
  }
  return true;
}

// Keys are never literal blocks (that would make them "? |" complex keys).
void EmitString(YAML::Emitter& e, const std::string& s, bool key = false) {
  if (!key && s.find('\n') != std::string::npos && LiteralOk(s)) {
    // yaml-cpp ends the block with a line break of its own; clip chomping keeps exactly one.
    e << YAML::Literal << s.substr(0, s.size() - 1);
  } else if (NeedsQuotes(s)) {
    e << YAML::DoubleQuoted << s;
  } else {
    e << s;
  }
}

void Emit(YAML::Emitter& e, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      if (v.empty()) {
        e << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      e << YAML::BeginMap;
      for (const auto& [k, item] : v.items()) {
        e << YAML::Key;
        EmitString(e, k, /*key=*/true);
        e << YAML::Value;
        Emit(e, item);
      }
      e << YAML::EndMap;
      return;
    case json::value_t::array:
      if (v.empty()) {
        e << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      e << YAML::BeginSeq;
      for (const auto& item : v) Emit(e, item);
      e << YAML::EndSeq;
      return;
    case json::value_t::string:
      EmitString(e, v.get_ref<const std::string&>());
      return;
    case json::value_t::boolean:
      e << v.get<bool>();
      return;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      e << v.dump();  // nlohmann's shortest round-trip form, as a plain scalar
      return;
    case json::value_t::null:
    case json::value_t::discarded:
    case json::value_t::binary:
      e << YAML::Null;
      return;
  }
}

}  // namespace

std::string ToYaml(const json& value) {
  YAML::Emitter e;
  e.SetIndent(2);
  e.SetNullFormat(YAML::LowerNull);
  e.SetBoolFormat(YAML::TrueFalseBool);
  e.SetSeqFormat(YAML::Block);
  e.SetMapFormat(YAML::Block);
  Emit(e, value);
  std::string out(e.c_str(), e.size());
  if (out.empty() || out.back() != '\n') out += '\n';
  return out;
}

Result<std::vector<json>> ParseDocuments(std::string_view text) {
  if (text.size() > kMaxBytes) return Status::ResourceExhausted("input larger than 16 MiB");
  // JSON input: take the strict JSON parser (exact numbers, no YAML surprises).
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    json doc = json::parse(text.begin(), text.end(), nullptr, false);
    if (!doc.is_discarded()) return std::vector<json>{std::move(doc)};
  }
  if (FlowDepth(text) > kMaxDepth) return Status::ResourceExhausted("YAML nested deeper than 128 levels");
  try {
    std::vector<json> out;
    for (const auto& node : YAML::LoadAll(std::string(text))) {
      if (node.IsNull()) continue;
      auto v = Convert(node, 0);
      if (!v.ok()) return v.status();
      out.push_back(std::move(v).value());
    }
    return out;
  } catch (const YAML::Exception& e) {
    std::string where = e.mark.line >= 0 ? "line " + std::to_string(e.mark.line + 1) + ", column " +
                                               std::to_string(e.mark.column + 1) + ": "
                                         : "";
    return Status::InvalidArgument("invalid YAML: " + where + e.msg);
  }
}

}  // namespace draguard::yamljson
