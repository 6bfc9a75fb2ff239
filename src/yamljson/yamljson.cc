#include "draguard/yamljson/yamljson.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <sstream>

#include <yaml-cpp/eventhandler.h>
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

// --- Fast path for plain block-style YAML --------------------------------------------------
//
// Dumps (`kubectl get -o yaml`) are block maps and sequences of one-line scalars. This reads
// exactly that subset straight into JSON; anything else (anchors, tags, flow collections other
// than {} and [], comments, multi-line plain or quoted scalars, folded blocks, non-ASCII, tabs,
// duplicate keys, ...) returns nullopt and goes to yaml-cpp, so results are the same either way.
class FastBlock {
 public:
  explicit FastBlock(std::string_view text) : text_(text) {}

  std::optional<json> Parse() {
    for (unsigned char c : text_) {
      if ((c < 0x20 && c != '\n') || c >= 0x7f) return std::nullopt;
    }
    for (std::size_t pos = 0; pos < text_.size();) {
      std::size_t nl = text_.find('\n', pos);
      if (nl == std::string_view::npos) nl = text_.size();
      std::string_view raw = text_.substr(pos, nl - pos);
      pos = nl + 1;
      Line l;
      l.raw = raw;
      std::size_t n = raw.find_first_not_of(' ');
      if (n == std::string_view::npos) {
        l.blank = true;
        l.spaces = !raw.empty();
      } else {
        l.indent = static_cast<int>(n);
        l.text = raw.substr(n);
        if (l.text[0] == '#' || l.text[0] == '%') return std::nullopt;
        if (n == 0 && (raw.substr(0, 3) == "---" || raw.substr(0, 3) == "...")) return std::nullopt;
      }
      lines_.push_back(l);
    }
    std::size_t i = SkipBlank(0);
    if (i == lines_.size()) return std::nullopt;
    json out;
    if (!Block(i, lines_[i].indent, out, 0)) return std::nullopt;
    if (SkipBlank(i) != lines_.size()) return std::nullopt;
    return out;
  }

 private:
  struct Line {
    std::string_view raw, text;
    int indent = 0;
    bool blank = false, spaces = false;
  };

  static bool IsEntry(std::string_view t) { return t == "-" || t.substr(0, 2) == "- "; }
  static bool KeyChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || IsDigitChar(c) || c == '.' || c == '_' ||
           c == '/' || c == '-';
  }
  static bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

  std::size_t SkipBlank(std::size_t i) const {
    while (i < lines_.size() && lines_[i].blank) ++i;
    return i;
  }

  // The map or sequence whose first line is lines_[i], at `indent`.
  bool Block(std::size_t& i, int indent, json& out, int depth) {
    if (depth > 100) return false;
    return IsEntry(lines_[i].text) ? Seq(i, indent, out, depth) : Map(i, indent, out, depth);
  }

  bool Seq(std::size_t& i, int indent, json& out, int depth) {
    out = json::array();
    for (i = SkipBlank(i); i < lines_.size(); i = SkipBlank(i)) {
      Line& l = lines_[i];
      if (l.indent > indent) return false;
      if (l.indent < indent || !IsEntry(l.text)) return true;
      if (l.text.size() < 3 || l.text[2] == ' ' || IsEntry(l.text.substr(2))) return false;
      std::string_view rest = l.text.substr(2);
      json v;
      if (rest[0] != '"' && rest[0] != '\'' && (rest.find(": ") != std::string_view::npos || rest.back() == ':')) {
        l.indent = indent + 2;  // "- key: v": a map whose first line starts after the dash
        l.text = rest;
        if (!Map(i, indent + 2, v, depth + 1)) return false;
      } else {
        auto s = ScalarValue(rest);
        if (!s) return false;
        v = std::move(*s);
        ++i;
      }
      out.push_back(std::move(v));
    }
    return true;
  }

  bool Map(std::size_t& i, int indent, json& out, int depth) {
    out = json::object();
    for (i = SkipBlank(i); i < lines_.size(); i = SkipBlank(i)) {
      const Line& l = lines_[i];
      if (l.indent > indent) return false;
      if (l.indent < indent) return true;
      if (IsEntry(l.text)) return false;
      std::size_t colon = l.text.find(':');
      if (colon == 0 || colon == std::string_view::npos) return false;
      std::string_view key = l.text.substr(0, colon);
      if (key[0] == '-' || key == "null" || key == "Null" || key == "NULL") return false;  // null: not a key
      for (char c : key) {
        if (!KeyChar(c)) return false;
      }
      std::string_view rest = l.text.substr(colon + 1);
      if (!rest.empty() && rest[0] != ' ') return false;
      std::size_t v0 = rest.find_first_not_of(' ');
      rest = v0 == std::string_view::npos ? std::string_view() : rest.substr(v0);
      std::string k(key);
      if (out.contains(k)) return false;
      json v;
      if (rest.empty()) {
        std::size_t j = SkipBlank(i + 1);
        if (j < lines_.size() && (lines_[j].indent > indent || (lines_[j].indent == indent && IsEntry(lines_[j].text)))) {
          i = j;
          if (!Block(i, lines_[j].indent, v, depth + 1)) return false;
        } else {
          i = i + 1;  // v stays null
        }
      } else if (rest == "|" || rest == "|-") {
        if (!Literal(i, indent, rest == "|", v)) return false;
      } else {
        auto s = ScalarValue(rest);
        if (!s) return false;
        v = std::move(*s);
        ++i;
      }
      out[std::move(k)] = std::move(v);
    }
    return true;
  }

  // A literal block scalar ("|" clip or "|-" strip) under a key at `indent`.
  bool Literal(std::size_t& i, int indent, bool clip, json& out) {
    std::size_t j = i + 1;
    while (j < lines_.size() && lines_[j].blank) {
      if (lines_[j].spaces) return false;
      ++j;
    }
    if (j == lines_.size() || lines_[j].indent <= indent) return false;
    const int content = lines_[j].indent;
    std::string s;
    for (j = i + 1; j < lines_.size(); ++j) {
      const Line& l = lines_[j];
      if (l.blank) {
        if (l.spaces) return false;
        s.push_back('\n');
        continue;
      }
      if (l.indent < content) {
        if (l.indent > indent) return false;
        break;
      }
      s.append(l.raw.substr(static_cast<std::size_t>(content)));
      s.push_back('\n');
    }
    if (j == lines_.size() && text_.back() != '\n') return false;  // no final line break to keep
    while (!s.empty() && s.back() == '\n') s.pop_back();
    if (clip) s.push_back('\n');
    // Trailing empty lines belong to the scalar; the next entry starts after them.
    i = j;
    out = std::move(s);
    return true;
  }

  // A one-line scalar value; nullopt when it is anything but a simple plain or quoted scalar.
  static std::optional<json> ScalarValue(std::string_view v) {
    if (v == "{}") return json::object();
    if (v == "[]") return json::array();
    if (v[0] == '"') return DoubleQuoted(v);
    if (v[0] == '\'') return SingleQuoted(v);
    static constexpr std::string_view kIndicators = "?:,[]{}#&*!|>%@`";
    if (kIndicators.find(v[0]) != std::string_view::npos) return std::nullopt;
    if (v[0] == '-' && (v.size() == 1 || v[1] == ' ')) return std::nullopt;
    if (v.back() == ' ' || v.back() == ':') return std::nullopt;
    if (v.find_first_of("#[]{}") != std::string_view::npos || v.find(": ") != std::string_view::npos) {
      return std::nullopt;
    }
    return PlainValue(std::string(v));
  }

  static std::optional<json> DoubleQuoted(std::string_view v) {
    std::string s;
    for (std::size_t i = 1; i < v.size(); ++i) {
      char c = v[i];
      if (c == '"') {
        if (i + 1 != v.size()) return std::nullopt;
        return json(std::move(s));
      }
      if (c == '\\') {
        if (++i == v.size()) return std::nullopt;
        switch (v[i]) {
          case '"': s.push_back('"'); break;
          case '\\': s.push_back('\\'); break;
          case 'n': s.push_back('\n'); break;
          case 't': s.push_back('\t'); break;
          default: return std::nullopt;
        }
        continue;
      }
      s.push_back(c);
    }
    return std::nullopt;  // continues on the next line
  }

  static std::optional<json> SingleQuoted(std::string_view v) {
    std::string s;
    for (std::size_t i = 1; i < v.size(); ++i) {
      if (v[i] == '\'') {
        if (i + 1 < v.size() && v[i + 1] == '\'') {
          s.push_back('\'');
          ++i;
          continue;
        }
        if (i + 1 != v.size()) return std::nullopt;
        return json(std::move(s));
      }
      s.push_back(v[i]);
    }
    return std::nullopt;
  }

  std::string_view text_;
  std::vector<Line> lines_;
};

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

namespace {

// Records where each document starts; ignores everything else.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  YAML::Mark start;  ///< start of the last document
};

// yaml-cpp 0.7 never consumes a ',' that follows a document's root node outside a flow collection
// ("," or "\"x\" ,"): YAML::LoadAll then yields empty documents forever. Walks the documents first
// and refuses a stream in which one does not advance. yaml-cpp exceptions pass through.
Status CheckDocumentsAdvance(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts events;
  int previous = -1;
  while (parser.HandleNextDocument(events)) {
    if (events.start.pos == previous) {
      return Status::InvalidArgument("invalid YAML: line " + std::to_string(events.start.line + 1) + ", column " +
                                     std::to_string(events.start.column + 1) +
                                     ": unexpected ',' outside a flow collection");
    }
    previous = events.start.pos;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<json>> ParseDocuments(std::string_view text) {
  if (text.size() > kMaxBytes) return Status::ResourceExhausted("input larger than 16 MiB");
  // JSON input: take the strict JSON parser (exact numbers, no YAML surprises).
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && (text[first] == '{' || text[first] == '[')) {
    json doc = json::parse(text.begin(), text.end(), nullptr, false);
    if (!doc.is_discarded()) return std::vector<json>{std::move(doc)};
  }
  if (auto fast = FastBlock(text).Parse()) return std::vector<json>{std::move(*fast)};
  if (FlowDepth(text) > kMaxDepth) return Status::ResourceExhausted("YAML nested deeper than 128 levels");
  try {
    std::string copy(text);
    if (Status st = CheckDocumentsAdvance(copy); !st.ok()) return st;
    std::vector<json> out;
    for (const auto& node : YAML::LoadAll(copy)) {
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
