// Regular expressions: `matches` (RE2, as cel-go) and the Kubernetes regex library (find,
// findAll); the per-evaluation regex cache and the patterns compiled at check time. See builtins.h.
#include "builtins.h"
#include "regex_cache.h"

namespace draguard::cel {
namespace internal {
namespace {

using Result = std::optional<Value>;

std::unique_ptr<re2::RE2> Compile(const std::string& pattern) {
  re2::RE2::Options o;
  o.set_log_errors(false);
  return std::make_unique<re2::RE2>(pattern, o);
}

// s.matches(pattern), charged by the length of `s`.
Value Matches(const std::string& s, const std::string& pattern, CallContext& ctx) {
  std::string err;
  const re2::RE2* re = ctx.Regex(pattern, &err);
  if (re == nullptr) return Value::Error("invalid regular expression: " + err);
  if (!ctx.Charge(static_cast<int64_t>(s.size()))) return CallContext::CostError();
  return Value::Bool(re2::RE2::PartialMatch(s, *re));
}

Result MemberMatches(std::string_view, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 2 || !ArgIs(a, 1, ValueKind::kString)) return std::nullopt;
  return Matches(a[0].string_value(), a[1].string_value(), ctx);
}

// matches(s, pattern): the member form, with the charge of a call on a string receiver.
Result GlobalMatches(std::string_view, const CallArgs& a, CallContext& ctx) {
  if (a.size() != 2 || !ArgIs(a, 0, ValueKind::kString) || !ArgIs(a, 1, ValueKind::kString)) return std::nullopt;
  const std::string& s = a[0].string_value();
  if (!ctx.Charge(static_cast<int64_t>(s.size() / 16))) return CallContext::CostError();
  return Matches(s, a[1].string_value(), ctx);
}

// s.find(pattern): the first match, "" if none; s.findAll(pattern[, n]): all matches (at most n when n >= 0).
Result Find(std::string_view fn, const CallArgs& a, CallContext& ctx) {
  size_t n = a.size();
  bool all = fn == "findAll";
  if (!ArgIs(a, 1, ValueKind::kString) || (all ? (n != 2 && n != 3) || (n == 3 && !ArgIs(a, 2, ValueKind::kInt)) : n != 2)) {
    return std::nullopt;
  }
  const std::string& s = a[0].string_value();
  std::string err;
  const re2::RE2* re = ctx.Regex(a[1].string_value(), &err);
  if (re == nullptr) return Value::Error("invalid regular expression: " + err);
  if (!ctx.Charge(static_cast<int64_t>(s.size()))) return CallContext::CostError();
  re2::StringPiece input(s);
  re2::StringPiece match;
  if (!all) {
    if (!re->Match(input, 0, input.size(), re2::RE2::UNANCHORED, &match, 1)) return Value::String("");
    return Value::String(std::string(match.data(), match.size()));
  }
  int64_t limit = n == 3 ? a[2].int_value() : -1;
  ListValue out;
  size_t pos = 0;
  while ((limit < 0 || static_cast<int64_t>(out.size()) < limit) && pos <= s.size() &&
         re->Match(input, pos, input.size(), re2::RE2::UNANCHORED, &match, 1)) {
    out.push_back(Value::String(std::string(match.data(), match.size())));
    size_t end = static_cast<size_t>(match.data() - s.data()) + match.size();
    pos = match.empty() ? end + 1 : end;
  }
  return Value::List(std::move(out));
}

const Overload kRegex[] = {
    Member("matches", ValueKind::kString, &MemberMatches),
    Global("matches", &GlobalMatches),
    Member("find", ValueKind::kString, &Find),
    Member("findAll", ValueKind::kString, &Find),
};

}  // namespace

std::span<const Overload> RegexOverloads() { return kRegex; }

const re2::RE2* CallContext::Regex(const std::string& pattern, std::string* error) {
  if (pre_ != nullptr) {
    auto p = pre_->by_pattern.find(pattern);
    if (p != pre_->by_pattern.end()) return p->second.get();
  }
  auto it = regex_.find(pattern);
  if (it == regex_.end()) it = regex_.emplace(pattern, Compile(pattern)).first;
  if (!it->second->ok()) {
    *error = it->second->error();
    return nullptr;
  }
  return it->second.get();
}

}  // namespace internal

std::shared_ptr<const CompiledRegexes> PrecompileRegexes(const Expr& root) {
  auto out = std::make_shared<CompiledRegexes>();
  std::vector<const Expr*> stack{&root};
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (e->kind == ExprKind::kCall && e->name == "matches") {
      const Expr* pat = nullptr;
      if (e->operand && e->args.size() == 1) pat = e->args[0].get();
      if (!e->operand && e->args.size() == 2) pat = e->args[1].get();
      if (pat && pat->kind == ExprKind::kConst && pat->constant.kind == ConstKind::kString &&
          out->by_pattern.find(pat->constant.s) == out->by_pattern.end()) {
        auto re = internal::Compile(pat->constant.s);
        if (re->ok()) out->by_pattern.emplace(pat->constant.s, std::move(re));
      }
    }
    for (const ExprPtr* c : {&e->operand, &e->iter_range, &e->accu_init, &e->loop_cond, &e->loop_step, &e->result}) {
      if (*c) stack.push_back(c->get());
    }
    for (const auto& a : e->args) stack.push_back(a.get());
    for (const auto& en : e->entries) {
      stack.push_back(en.key.get());
      stack.push_back(en.value.get());
    }
    for (const auto& f : e->fields) stack.push_back(f.value.get());
  }
  if (out->by_pattern.empty()) return nullptr;
  return out;
}

}  // namespace draguard::cel
