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

json Scalar(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  if (n.Tag() != "?") return s;  // quoted or explicitly tagged: a string
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

}  // namespace

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
