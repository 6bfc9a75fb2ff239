// Conformance of draguard's CEL module against the official CEL test data (cel-spec v0.25.1 via
// npm @bufbuild/cel-spec 0.6.1): the parsing and comprehension suites extracted from cel-go and the
// cel-spec conformance sections that fall within the DRA environment. Skips (GTEST_SKIP) when the
// data is not installed; CI installs it with scripts/install-test-tools.sh.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <map>
#include <cmath>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "cel_spec_data.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/debug_string.h"
#include "draguard/cel/evaluator.h"
#include "draguard/cel/parser.h"

namespace draguard::cel {
namespace {

using nlohmann::json;

// Position "L:C" of the first error in cel-go's error text, or {-1, 0} when it has none.
std::pair<int, int> FirstErrorPosition(const std::string& err) {
  static const std::regex re(R"(ERROR: [^:]*:(-?\d+):(\d+):)");
  std::smatch m;
  if (!std::regex_search(err, m, re)) return {-1, 0};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

struct Tally {
  int pass = 0;
  int fail = 0;
  int skip = 0;
  std::vector<std::string> notes;
};

// The report goes to the working directory (the test binary directory under ctest).
std::string ReportPath() { return "cel_conformance_report.md"; }

void AppendReport(const std::string& title, const std::map<std::string, Tally>& t) {
  std::ostringstream md;
  md << "### " << title << "\n\n| section | pass | fail | skipped |\n|---|---:|---:|---:|\n";
  int p = 0, f = 0, s = 0;
  for (const auto& [name, x] : t) {
    md << "| " << name << " | " << x.pass << " | " << x.fail << " | " << x.skip << " |\n";
    p += x.pass;
    f += x.fail;
    s += x.skip;
  }
  md << "| **total** | " << p << " | " << f << " | " << s << " |\n\n";
  for (const auto& [name, x] : t) {
    for (const auto& n : x.notes) md << "- `" << name << "` " << n << "\n";
  }
  md << "\n";
  std::cout << md.str();
  std::ofstream(ReportPath(), std::ios::app) << md.str();
}

// Parsing and comprehension suites: AST in cel-go's debug form, or a syntax error position.
std::map<std::string, Tally> RunParseSuite(const json& cases) {
  std::map<std::string, Tally> tally;
  ParseOptions opts;
  opts.extension_macros = false;  // cel-go's parser tests use the standard macros only
  opts.bind_macro = false;
  opts.optional_syntax = false;   // and no optional syntax
  opts.max_depth = 32;            // and a recursion limit of 32
  for (const auto& c : cases) {
    std::string section = c["path"].get<std::string>();
    std::string expr = c["expr"].get<std::string>();
    Tally& t = tally[section];
    ParseOutcome out = ParseDetailed(expr, opts);
    if (c.contains("ast")) {
      std::string want = c["ast"].get<std::string>();
      if (!out.ok) {
        ++t.fail;
        t.notes.push_back("FAIL " + json(expr).dump() + ": unexpected error " +
                          json(FormatDiagnostics(expr, out.errors)).dump());
      } else if (std::string got = ToDebugString(*out.ast.root); got != want) {
        ++t.fail;
        t.notes.push_back("FAIL " + json(expr).dump() + ": AST differs: got " + json(got).dump());
      } else {
        ++t.pass;
      }
      continue;
    }
    std::string err = c.value("error", "");
    auto [line, col] = FirstErrorPosition(err);
    if (out.ok) {
      ++t.fail;
      t.notes.push_back("FAIL " + json(expr).dump() + ": parsed, expected error " + json(err).dump());
    } else if (line >= 0 && (out.errors[0].line != line || out.errors[0].column != col)) {
      ++t.fail;
      t.notes.push_back("FAIL " + json(expr).dump() + ": error at " + std::to_string(out.errors[0].line) + ":" +
                        std::to_string(out.errors[0].column) + ", expected " + std::to_string(line) + ":" +
                        std::to_string(col));
    } else {
      ++t.pass;
    }
  }
  return tally;
}

class CelConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& d = testing::LoadSpecData();
    if (!d.missing.empty()) GTEST_SKIP() << d.missing;
  }
};

TEST_F(CelConformance, ParsingSuite) {
  auto t = RunParseSuite(testing::LoadSpecData().json["parsing"]);
  AppendReport("cel-go parsing suite (AST or syntax-error position)", t);
  for (const auto& [name, x] : t) {
    EXPECT_EQ(x.fail, 0) << name;
    EXPECT_GT(x.pass, 0) << name;
  }
}

TEST_F(CelConformance, ComprehensionSuite) {
  auto t = RunParseSuite(testing::LoadSpecData().json["comprehension"]);
  AppendReport("cel-go comprehension suite (AST or syntax-error position)", t);
  for (const auto& [name, x] : t) {
    EXPECT_EQ(x.fail, 0) << name;
    EXPECT_GT(x.pass, 0) << name;
  }
}



// Type-check results of the parsing and comprehension suites in the standard environment (no
// variables): where cel-go reports a check error, ours is at the same position; where it infers a
// type, ours is the same.
std::map<std::string, Tally> RunCheckSuite(const json& cases, bool bind_macro) {
  std::map<std::string, Tally> tally;
  ParseOptions opts;
  opts.extension_macros = false;
  opts.bind_macro = bind_macro;  // cel-go checked the comprehension suite with ext.Bindings
  opts.optional_syntax = false;
  opts.max_depth = 32;
  for (const auto& c : cases) {
    if (!c.contains("ast")) continue;  // syntax errors are covered by the parse suites
    std::string section = c["path"].get<std::string>() + " (check)";
    std::string expr = c["expr"].get<std::string>();
    Tally& t = tally[section];
    auto parsed = Parse(expr, opts);
    if (!parsed.ok()) {
      ++t.fail;
      t.notes.push_back("FAIL " + json(expr).dump() + ": parse error");
      continue;
    }
    auto checked = Check(*parsed, Env());
    if (c.contains("error")) {
      auto [line, col] = FirstErrorPosition(c["error"].get<std::string>());
      if (checked.ok()) {
        ++t.fail;
        t.notes.push_back("FAIL " + json(expr).dump() + ": checked, expected " + json(c["error"]).dump());
        continue;
      }
      auto [gl, gc] = FirstErrorPosition(checked.status().message());
      if (gl != line || gc != col) {
        ++t.fail;
        t.notes.push_back("FAIL " + json(expr).dump() + ": first check error at " + std::to_string(gl) + ":" +
                          std::to_string(gc) + ", expected " + std::to_string(line) + ":" + std::to_string(col));
        continue;
      }
      ++t.pass;
      continue;
    }
    if (!checked.ok()) {
      ++t.fail;
      t.notes.push_back("FAIL " + json(expr).dump() + ": " + json(checked.status().message()).dump());
      continue;
    }
    if (c.contains("type")) {
      std::string want = c["type"].get<std::string>();
      std::string got = checked->result_type.ToString();
      if (got == "null_type") got = "null";
      if (got != want) {
        ++t.fail;
        t.notes.push_back("FAIL " + json(expr).dump() + ": type " + got + ", expected " + want);
        continue;
      }
    }
    ++t.pass;
  }
  return tally;
}

TEST_F(CelConformance, ParsingAndComprehensionSuitesTypeCheck) {
  auto t = RunCheckSuite(testing::LoadSpecData().json["parsing"], false);
  auto t2 = RunCheckSuite(testing::LoadSpecData().json["comprehension"], true);
  t.insert(t2.begin(), t2.end());
  AppendReport("cel-go parsing and comprehension suites, type-check expectations (standard environment)", t);
  for (const auto& [name, x] : t) EXPECT_EQ(x.fail, 0) << name;
}

// ---- conformance sections ----

// The sections of the cel-spec conformance suite that fall within the DRA environment.
const std::set<std::string>& InScopeSections() {
  static const std::set<std::string> kSections = {"parse",  "basic",      "comparisons",  "logic",   "integer_math",
                                                  "fp_math", "lists",     "macros",       "macros2", "string",
                                                  "string_ext", "bindings_ext", "conversions", "optionals"};
  return kSections;
}

std::string Base64Decode(const std::string& in) {
  static const std::string kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    size_t p = kChars.find(c);
    if (c == '-') p = 62;
    if (c == '_') p = 63;
    if (p == std::string::npos) continue;
    val = (val << 6) + static_cast<int>(p);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

// Converts a cel.expr.Value in protobuf JSON to a Value; nullopt for kinds outside our scope
// (objects, enums).
std::optional<Value> FromProtoJson(const json& v) {
  if (v.contains("nullValue")) return Value::Null();
  if (v.contains("boolValue")) return Value::Bool(v["boolValue"].get<bool>());
  if (v.contains("int64Value")) {
    const auto& x = v["int64Value"];
    return Value::Int(x.is_string() ? std::stoll(x.get<std::string>()) : x.get<int64_t>());
  }
  if (v.contains("uint64Value")) {
    const auto& x = v["uint64Value"];
    return Value::Uint(x.is_string() ? std::stoull(x.get<std::string>()) : x.get<uint64_t>());
  }
  if (v.contains("doubleValue")) {
    const auto& x = v["doubleValue"];
    if (x.is_string()) {
      std::string s = x.get<std::string>();
      if (s == "NaN") return Value::Double(std::nan(""));
      if (s == "Infinity") return Value::Double(HUGE_VAL);
      if (s == "-Infinity") return Value::Double(-HUGE_VAL);
      return Value::Double(std::stod(s));
    }
    return Value::Double(x.get<double>());
  }
  if (v.contains("stringValue")) return Value::String(v["stringValue"].get<std::string>());
  if (v.contains("bytesValue")) return Value::Bytes(Base64Decode(v["bytesValue"].get<std::string>()));
  if (v.contains("typeValue")) return Value::Type(v["typeValue"].get<std::string>());
  if (v.contains("listValue")) {
    ListValue l;
    if (v["listValue"].contains("values")) {
      for (const auto& e : v["listValue"]["values"]) {
        auto x = FromProtoJson(e);
        if (!x) return std::nullopt;
        l.push_back(*x);
      }
    }
    return Value::List(std::move(l));
  }
  if (v.contains("mapValue")) {
    MapValue m;
    if (v["mapValue"].contains("entries")) {
      for (const auto& e : v["mapValue"]["entries"]) {
        auto k = FromProtoJson(e["key"]);
        auto x = FromProtoJson(e["value"]);
        if (!k || !x) return std::nullopt;
        m.entries.emplace_back(*k, *x);
      }
    }
    return Value::Map(std::move(m));
  }
  return std::nullopt;
}

std::optional<Type> TypeFromProtoJson(const json& t) {
  if (t.contains("primitive")) {
    std::string p = t["primitive"].get<std::string>();
    if (p == "BOOL") return Type::Of(Type::Kind::kBool);
    if (p == "INT64") return Type::Of(Type::Kind::kInt);
    if (p == "UINT64") return Type::Of(Type::Kind::kUint);
    if (p == "DOUBLE") return Type::Of(Type::Kind::kDouble);
    if (p == "STRING") return Type::Of(Type::Kind::kString);
    if (p == "BYTES") return Type::Of(Type::Kind::kBytes);
    return std::nullopt;
  }
  if (t.contains("null")) return Type::Of(Type::Kind::kNull);
  if (t.contains("dyn")) return Type::Of(Type::Kind::kDyn);
  if (t.contains("listType")) {
    auto e = TypeFromProtoJson(t["listType"]["elemType"]);
    if (!e) return std::nullopt;
    return Type::ListOf(*e);
  }
  if (t.contains("mapType")) {
    auto k = TypeFromProtoJson(t["mapType"]["keyType"]);
    auto v = TypeFromProtoJson(t["mapType"]["valueType"]);
    if (!k || !v) return std::nullopt;
    return Type::MapOf(*k, *v);
  }
  return std::nullopt;
}

// Strict equality for expected results: same kinds all the way down.
bool SameValue(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kDouble: {
      double x = a.double_value(), y = b.double_value();
      return (std::isnan(x) && std::isnan(y)) || x == y;
    }
    case ValueKind::kList: {
      const auto& x = a.list_value();
      const auto& y = b.list_value();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!SameValue(x[i], y[i])) return false;
      }
      return true;
    }
    case ValueKind::kMap: {
      const auto& x = a.map_value();
      const auto& y = b.map_value();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* o = MapFind(y, k);
        if (o == nullptr || !SameValue(v, *o)) return false;
      }
      return true;
    }
    default: {
      Value e = Equals(a, b);
      return e.kind() == ValueKind::kBool && e.bool_value();
    }
  }
}

// Why a case is out of scope (a listed rule), or empty.
std::string OutOfScope(const json& o) {
  std::string expr = o["expr"].get<std::string>();
  expr = std::regex_replace(expr, std::regex("//[^\n]*"), "");
  if (o.contains("container")) return "rule P: needs protobuf messages (container)";
  std::string dumped = o.dump();
  if (dumped.find("objectValue") != std::string::npos || dumped.find("messageType") != std::string::npos ||
      dumped.find("enumValue") != std::string::npos) {
    return "rule P: needs protobuf messages, wrappers or enums";
  }
  if (std::regex_search(expr, std::regex(R"(\b(timestamp|duration|getFullYear|getHours)\s*\()")) ||
      std::regex_search(expr, std::regex(R"(google\.protobuf)"))) {
    return "rule T: needs timestamps, durations or well-known protobuf types";
  }
  if (std::regex_search(expr, std::regex(R"([A-Za-z_][A-Za-z0-9_.]*\s*\{)")) &&
      !std::regex_search(expr, std::regex(R"(^\s*\{)"))) {
    // A message literal (Foo{...}); map literals start with '{' directly.
    std::smatch m;
    if (std::regex_search(expr, m, std::regex(R"(([A-Z][A-Za-z0-9_.]*)\s*\{)"))) return "rule P: message construction";
  }
  if (o.contains("typeEnv")) {
    for (const auto& d : o["typeEnv"]) {
      if (d.contains("function")) return "rule F: declares custom functions";
      if (!d.contains("ident") || !TypeFromProtoJson(d["ident"]["type"])) return "rule P: variable of a protobuf type";
    }
  }
  if (o.contains("value") && !FromProtoJson(o["value"])) return "rule P: expected value is a protobuf message";
  return "";
}

struct CaseResult {
  bool pass = false;
  std::string detail;
};

CaseResult RunConformanceCase(const json& o) {
  std::string expr = o["expr"].get<std::string>();
  auto parsed = Parse(expr);
  bool want_error = o.contains("evalError");
  if (!parsed.ok()) {
    return {false, "parse error: " + parsed.status().message()};
  }
  Env env;
  Activation act;
  if (o.contains("typeEnv")) {
    for (const auto& d : o["typeEnv"]) env.Declare(d["name"].get<std::string>(), *TypeFromProtoJson(d["ident"]["type"]));
  }
  if (o.contains("bindings")) {
    for (const auto& [name, b] : o["bindings"].items()) {
      auto v = FromProtoJson(b["value"]);
      if (!v) return {false, "unsupported binding"};
      act.Bind(name, *v);
    }
  }
  if (!o.value("disableCheck", false)) {
    auto checked = Check(*parsed, env);
    if (!checked.ok()) return {false, "check error: " + checked.status().message()};
  }
  EvalOutcome out = Evaluate(*parsed, act);
  if (want_error) {
    if (out.value.is_error()) return {true, ""};
    return {false, "expected an error, got " + out.value.DebugString()};
  }
  Value want = o.contains("value") ? *FromProtoJson(o["value"]) : Value::Bool(true);
  if (out.value.is_error()) return {false, "unexpected error: " + out.value.error_message()};
  if (!SameValue(out.value, want)) return {false, "got " + out.value.DebugString() + ", want " + want.DebugString()};
  return {true, ""};
}

TEST_F(CelConformance, ConformanceSections) {
  std::map<std::string, Tally> tally;
  std::map<std::string, int> out_of_scope_rules;
  int skipped_sections = 0;
  for (const auto& c : testing::LoadSpecData().json["conformance"]) {
    std::string path = c["path"].get<std::string>();
    size_t a = path.find('/');
    size_t b = path.find('/', a + 1);
    std::string section = path.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    if (InScopeSections().count(section) == 0) {
      ++skipped_sections;
      continue;
    }
    Tally& t = tally[section];
    const json& o = c["original"];
    std::string name = path.substr(b == std::string::npos ? path.size() : b + 1) + "/" + c["name"].get<std::string>();
    if (std::string why = OutOfScope(o); !why.empty()) {
      ++t.skip;
      ++out_of_scope_rules[why];
      t.notes.push_back("SKIP " + name + ": " + why);
      continue;
    }
    CaseResult r = RunConformanceCase(o);
    if (r.pass) {
      ++t.pass;
    } else {
      ++t.fail;
      t.notes.push_back("FAIL " + name + " " + json(o["expr"].get<std::string>()).dump() + ": " + r.detail);
    }
  }
  AppendReport("cel-spec conformance sections in scope", tally);
  std::cout << "cases in out-of-scope sections (not run): " << skipped_sections << "\n";
  for (const auto& [rule, n] : out_of_scope_rules) std::cout << "  skipped by " << rule << ": " << n << "\n";
  int pass = 0, fail = 0;
  for (const auto& [name, x] : tally) {
    pass += x.pass;
    fail += x.fail;
  }
  ASSERT_GT(pass + fail, 0);
  double rate = 100.0 * pass / (pass + fail);
  std::cout << "in-scope pass rate: " << rate << "% (" << pass << "/" << (pass + fail) << ")\n";
  EXPECT_GE(rate, 95.0);
}

}  // namespace
}  // namespace draguard::cel
