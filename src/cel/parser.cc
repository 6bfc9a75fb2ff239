// Recursive-descent CEL parser. See include/draguard/cel/parser.h.
//
// Structure: a lexer turns the whole input into tokens (collecting "token recognition" errors),
// then one function per grammar rule of cel-spec's CEL.g4 builds the tree. Syntax errors stop the
// parse; semantic errors found while building (reserved identifiers, bad literals, bad macro
// arguments, unsupported syntax) are recorded and parsing continues, so several can be reported.
#include "draguard/cel/parser.h"

#include "utf8.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <utility>

namespace draguard::cel {
namespace {

enum class Tok : uint8_t {
  kEof, kIdent, kInt, kUint, kDouble, kString, kBytes, kTrue, kFalse, kNull, kIn,
  kLParen, kRParen, kLBracket, kRBracket, kLBrace, kRBrace, kDot, kComma, kColon, kQuestion,
  kNot, kMinus, kPlus, kStar, kSlash, kPercent, kEq, kNe, kLt, kLe, kGt, kGe, kAnd, kOr,
  kEscIdent,
};

struct Token {
  Tok kind = Tok::kEof;
  int32_t offset = 0;
  int32_t end = 0;
  std::string text;   // identifier name or raw literal text
  std::string value;  // decoded string / bytes value
  bool bad_code_point = false;
};

const char* TokName(Tok t) {
  switch (t) {
    case Tok::kEof: return "<EOF>";
    case Tok::kIdent: return "IDENTIFIER";
    case Tok::kInt: return "NUM_INT";
    case Tok::kUint: return "NUM_UINT";
    case Tok::kDouble: return "NUM_FLOAT";
    case Tok::kString: return "STRING";
    case Tok::kBytes: return "BYTES";
    case Tok::kTrue: return "'true'";
    case Tok::kFalse: return "'false'";
    case Tok::kNull: return "'null'";
    case Tok::kIn: return "'in'";
    case Tok::kLParen: return "'('";
    case Tok::kRParen: return "')'";
    case Tok::kLBracket: return "'['";
    case Tok::kRBracket: return "']'";
    case Tok::kLBrace: return "'{'";
    case Tok::kRBrace: return "'}'";
    case Tok::kDot: return "'.'";
    case Tok::kComma: return "','";
    case Tok::kColon: return "':'";
    case Tok::kQuestion: return "'?'";
    case Tok::kNot: return "'!'";
    case Tok::kMinus: return "'-'";
    case Tok::kPlus: return "'+'";
    case Tok::kStar: return "'*'";
    case Tok::kSlash: return "'/'";
    case Tok::kPercent: return "'%'";
    case Tok::kEq: return "'=='";
    case Tok::kNe: return "'!='";
    case Tok::kLt: return "'<'";
    case Tok::kLe: return "'<='";
    case Tok::kGt: return "'>'";
    case Tok::kGe: return "'>='";
    case Tok::kAnd: return "'&&'";
    case Tok::kOr: return "'||'";
    case Tok::kEscIdent: return "ESC_IDENTIFIER";
  }
  return "?";
}

constexpr const char* kExpectOperand =
    "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, "
    "BYTES, IDENTIFIER}";

bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int HexVal(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

using internal::AppendUtf8;

// Length of the UTF-8 sequence starting at s[i] (1 for invalid bytes).
size_t Utf8Len(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return std::min(n, s.size() - i);
}

class Lexer {
 public:
  Lexer(std::string_view src, std::vector<Diagnostic>& errors) : s_(src), errors_(errors) {}

  std::vector<Token> Run() {
    std::vector<Token> out;
    while (true) {
      SkipSpace();
      if (i_ >= s_.size()) break;
      Token t;
      if (Next(t)) out.push_back(std::move(t));
    }
    Token eof;
    eof.kind = Tok::kEof;
    eof.offset = eof.end = static_cast<int32_t>(s_.size());
    out.push_back(eof);
    return out;
  }

 private:
  void SkipSpace() {
    while (i_ < s_.size()) {
      char c = s_[i_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++i_;
      } else if (c == '/' && i_ + 1 < s_.size() && s_[i_ + 1] == '/') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  void Error(size_t at, size_t end, const std::string& what) {
    errors_.push_back({static_cast<int32_t>(at), 0, 0,
                       "Syntax error: token recognition error at: '" +
                           std::string(s_.substr(at, end - at)) + "'"});
  }

  bool Next(Token& t) {
    size_t start = i_;
    t.offset = static_cast<int32_t>(start);
    char c = s_[i_];
    auto one = [&](Tok k, size_t n) {
      t.kind = k;
      i_ += n;
      t.end = static_cast<int32_t>(i_);
      return true;
    };
    char n1 = i_ + 1 < s_.size() ? s_[i_ + 1] : '\0';
    switch (c) {
      case '(': return one(Tok::kLParen, 1);
      case ')': return one(Tok::kRParen, 1);
      case '[': return one(Tok::kLBracket, 1);
      case ']': return one(Tok::kRBracket, 1);
      case '{': return one(Tok::kLBrace, 1);
      case '}': return one(Tok::kRBrace, 1);
      case ',': return one(Tok::kComma, 1);
      case ':': return one(Tok::kColon, 1);
      case '?': return one(Tok::kQuestion, 1);
      case '+': return one(Tok::kPlus, 1);
      case '-': return one(Tok::kMinus, 1);
      case '*': return one(Tok::kStar, 1);
      case '/': return one(Tok::kSlash, 1);
      case '%': return one(Tok::kPercent, 1);
      case '!': return n1 == '=' ? one(Tok::kNe, 2) : one(Tok::kNot, 1);
      case '<': return n1 == '=' ? one(Tok::kLe, 2) : one(Tok::kLt, 1);
      case '>': return n1 == '=' ? one(Tok::kGe, 2) : one(Tok::kGt, 1);
      case '=':
        if (n1 == '=') return one(Tok::kEq, 2);
        break;
      case '&':
        if (n1 == '&') return one(Tok::kAnd, 2);
        break;
      case '|':
        if (n1 == '|') return one(Tok::kOr, 2);
        break;
      case '.':
        if (IsDigit(n1)) return Number(t);
        return one(Tok::kDot, 1);
      case '`': return EscIdent(t);
      default: break;
    }
    if (c == '&' || c == '|' || c == '=') {
      // ANTLR consumes the partial operator and the following character.
      size_t end = std::min(s_.size(), i_ + 2);
      Error(i_, end, "");
      i_ = end;
      return false;
    }
    if (IsDigit(c)) return Number(t);
    if (c == '"' || c == '\'') return String(t, start, false, false);
    if (IsIdentStart(c)) {
      // String prefixes: r, b, rb, br (any case).
      size_t j = i_;
      bool raw = false, bytes = false;
      for (int k = 0; k < 2 && j < s_.size(); ++k) {
        char p = s_[j];
        if ((p == 'r' || p == 'R') && !raw) {
          raw = true;
          ++j;
        } else if ((p == 'b' || p == 'B') && !bytes) {
          bytes = true;
          ++j;
        } else {
          break;
        }
      }
      if ((raw || bytes) && j < s_.size() && (s_[j] == '"' || s_[j] == '\'')) {
        i_ = j;
        return String(t, start, raw, bytes);
      }
      while (i_ < s_.size() && (IsIdentStart(s_[i_]) || IsDigit(s_[i_]))) ++i_;
      t.text = std::string(s_.substr(start, i_ - start));
      t.end = static_cast<int32_t>(i_);
      if (t.text == "true") t.kind = Tok::kTrue;
      else if (t.text == "false") t.kind = Tok::kFalse;
      else if (t.text == "null") t.kind = Tok::kNull;
      else if (t.text == "in") t.kind = Tok::kIn;
      else t.kind = Tok::kIdent;
      return true;
    }
    size_t len = Utf8Len(s_, i_);
    Error(i_, i_ + len, "");
    i_ += len;
    return false;
  }

  // `...` (escaped identifier): lexed so it can be reported as unsupported syntax.
  bool EscIdent(Token& t) {
    size_t j = i_ + 1;
    while (j < s_.size() && (IsIdentStart(s_[j]) || IsDigit(s_[j]) || s_[j] == '.' || s_[j] == '-' ||
                             s_[j] == '/' || s_[j] == ' ')) {
      ++j;
    }
    if (j < s_.size() && s_[j] == '`' && j > i_ + 1) {
      t.kind = Tok::kEscIdent;
      t.text = std::string(s_.substr(i_ + 1, j - i_ - 1));
      i_ = j + 1;
      t.end = static_cast<int32_t>(i_);
      return true;
    }
    size_t end = std::min(i_ + 2, s_.size());
    Error(i_, end, "");
    i_ = end;
    return false;
  }

  bool Number(Token& t) {
    size_t start = i_;
    if (s_[i_] == '0' && i_ + 2 < s_.size() && (s_[i_ + 1] == 'x' || s_[i_ + 1] == 'X') && IsHex(s_[i_ + 2])) {
      i_ += 2;
      while (i_ < s_.size() && IsHex(s_[i_])) ++i_;
      t.kind = Tok::kInt;
      if (i_ < s_.size() && (s_[i_] == 'u' || s_[i_] == 'U')) {
        ++i_;
        t.kind = Tok::kUint;
      }
    } else {
      bool is_float = false;
      while (i_ < s_.size() && IsDigit(s_[i_])) ++i_;
      if (i_ + 1 < s_.size() && s_[i_] == '.' && IsDigit(s_[i_ + 1])) {
        is_float = true;
        ++i_;
        while (i_ < s_.size() && IsDigit(s_[i_])) ++i_;
      }
      if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
        size_t j = i_ + 1;
        if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
        if (j < s_.size() && IsDigit(s_[j])) {
          is_float = true;
          i_ = j;
          while (i_ < s_.size() && IsDigit(s_[i_])) ++i_;
        }
      }
      t.kind = is_float ? Tok::kDouble : Tok::kInt;
      if (!is_float && i_ < s_.size() && (s_[i_] == 'u' || s_[i_] == 'U')) {
        ++i_;
        t.kind = Tok::kUint;
      }
    }
    t.text = std::string(s_.substr(start, i_ - start));
    t.end = static_cast<int32_t>(i_);
    return true;
  }

  // Decodes a quoted literal; i_ is at the opening quote.
  bool String(Token& t, size_t start, bool raw, bool bytes) {
    char q = s_[i_];
    bool triple = i_ + 2 < s_.size() && s_[i_ + 1] == q && s_[i_ + 2] == q;
    size_t j = i_ + (triple ? 3 : 1);
    std::string out;
    bool bad = false;
    bool bad_cp = false;
    while (true) {
      if (j >= s_.size()) {
        // Unterminated: ANTLR reports the rest of the input as unrecognized.
        Error(start, s_.size(), "");
        i_ = s_.size();
        return false;
      }
      char c = s_[j];
      if (triple) {
        if (c == q && j + 2 < s_.size() && s_[j + 1] == q && s_[j + 2] == q) {
          j += 3;
          break;
        }
      } else {
        if (c == q) {
          ++j;
          break;
        }
        if (c == '\n' || c == '\r') {
          Error(start, j, "");
          i_ = j;
          return false;
        }
      }
      if (c == '\\' && !raw) {
        if (j + 1 >= s_.size()) {
          bad = true;
          ++j;
          continue;
        }
        char e = s_[j + 1];
        j += 2;
        switch (e) {
          case 'a': out.push_back('\a'); break;
          case 'b': out.push_back('\b'); break;
          case 'f': out.push_back('\f'); break;
          case 'n': out.push_back('\n'); break;
          case 'r': out.push_back('\r'); break;
          case 't': out.push_back('\t'); break;
          case 'v': out.push_back('\v'); break;
          case '\\': out.push_back('\\'); break;
          case '\'': out.push_back('\''); break;
          case '"': out.push_back('"'); break;
          case '`': out.push_back('`'); break;
          case '?': out.push_back('?'); break;
          case 'x':
          case 'X': {
            if (j + 1 < s_.size() && IsHex(s_[j]) && IsHex(s_[j + 1])) {
              int v = HexVal(s_[j]) * 16 + HexVal(s_[j + 1]);
              j += 2;
              if (bytes) out.push_back(static_cast<char>(v));
              else AppendUtf8(out, static_cast<uint32_t>(v));
            } else {
              bad = true;
            }
            break;
          }
          case 'u':
          case 'U': {
            size_t n = e == 'u' ? 4 : 8;
            if (j + n > s_.size()) {
              bad = true;
              break;
            }
            uint32_t v = 0;
            bool ok = true;
            for (size_t k = 0; k < n; ++k) {
              if (!IsHex(s_[j + k])) ok = false;
              else v = v * 16 + static_cast<uint32_t>(HexVal(s_[j + k]));
            }
            if (!ok) {
              bad = true;
              break;
            }
            j += n;
            if (bytes || (v >= 0xD800 && v < 0xE000) || v > 0x10FFFF) {
              bad_cp = true;
            } else {
              AppendUtf8(out, v);
            }
            break;
          }
          default:
            if (e >= '0' && e <= '3' && j + 1 < s_.size() && s_[j] >= '0' && s_[j] <= '7' && s_[j + 1] >= '0' &&
                s_[j + 1] <= '7') {
              int v = (e - '0') * 64 + (s_[j] - '0') * 8 + (s_[j + 1] - '0');
              j += 2;
              if (bytes) out.push_back(static_cast<char>(v));
              else AppendUtf8(out, static_cast<uint32_t>(v));
            } else {
              bad = true;
            }
        }
        continue;
      }
      out.push_back(c);
      ++j;
    }
    i_ = j;
    if (bad) {
      Error(start, j - 1, "");
      return false;
    }
    t.kind = bytes ? Tok::kBytes : Tok::kString;
    t.text = std::string(s_.substr(start, j - start));
    t.value = std::move(out);
    t.bad_code_point = bad_cp;
    t.end = static_cast<int32_t>(j);
    return true;
  }

  std::string_view s_;
  std::vector<Diagnostic>& errors_;
  size_t i_ = 0;
};

// Thrown internally to unwind a syntax error; never escapes ParseDetailed.
struct SyntaxAbort {};

bool IsReserved(const std::string& s) {
  static constexpr const char* kReserved[] = {"as",      "break",  "const",  "continue", "else",
                                              "for",     "function", "if",   "import",   "let",
                                              "loop",    "package", "namespace", "return", "var",
                                              "void",    "while"};
  for (const char* r : kReserved) {
    if (s == r) return true;
  }
  return false;
}

constexpr const char* kAccuName = "@result";
constexpr const char* kReservedAccuName = "__result__";

class Parser {
 public:
  Parser(std::string_view src, const ParseOptions& opts, std::vector<Token> toks,
         std::vector<Diagnostic>& errors)
      : src_(src), opts_(opts), toks_(std::move(toks)), errors_(errors) {}

  ExprPtr ParseAll() {
    ExprPtr e = Expr_();
    if (Peek().kind != Tok::kEof) {
      SyntaxError(Peek(), "extraneous input '" + TokText(Peek()) + "' expecting <EOF>");
    }
    return e;
  }

  int max_depth() const { return max_depth_seen_; }
  int64_t nodes() const { return next_id_ - 1; }

 private:
  // ---- token helpers
  const Token& Peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& Advance() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool Accept(Tok k) {
    if (Peek().kind == k) {
      Advance();
      return true;
    }
    return false;
  }
  std::string TokText(const Token& t) const {
    if (t.kind == Tok::kEof) return "<EOF>";
    return std::string(src_.substr(t.offset, t.end - t.offset));
  }
  [[noreturn]] void SyntaxError(const Token& t, const std::string& msg) {
    errors_.push_back({t.offset, 0, 0, "Syntax error: " + msg});
    throw SyntaxAbort{};
  }
  void Expect(Tok k) {
    if (Peek().kind != k) {
      SyntaxError(Peek(), "mismatched input '" + TokText(Peek()) + "' expecting " + TokName(k));
    }
    Advance();
  }
  void SoftError(int32_t offset, const std::string& msg) { errors_.push_back({offset, 0, 0, msg}); }

  // ---- node construction with depth accounting
  ExprPtr Node(ExprKind k, int32_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->offset = offset;
    e->id = next_id_++;
    if (next_id_ > opts_.max_nodes + 1) {
      errors_.push_back({-1, 0, 0, "expression exceeds the node limit of " + std::to_string(opts_.max_nodes)});
      throw SyntaxAbort{};
    }
    return e;
  }
  // Records the depth of `e` given its children's depths; aborts past the limit.
  void Finish(Expr& e, int child_depth) {
    int d = child_depth + 1;
    if (depth_.size() <= static_cast<size_t>(e.id)) depth_.resize(static_cast<size_t>(e.id) + 64, 1);
    depth_[static_cast<size_t>(e.id)] = d;
    if (d > max_depth_seen_) max_depth_seen_ = d;
    if (d > opts_.max_depth) {
      errors_.push_back({-1, 0, 0, "max recursion depth exceeded"});
      throw SyntaxAbort{};
    }
  }
  int DepthOf(const Expr* e) const {
    if (e == nullptr) return 0;
    size_t i = static_cast<size_t>(e->id);
    return i < depth_.size() ? depth_[i] : 1;
  }

  // Gives a cloned subtree fresh ids and records its depths.
  int RenumberDepth(Expr& e) {
    e.id = next_id_++;
    int d = 0;
    auto sub = [&](ExprPtr& c) {
      if (c) d = std::max(d, RenumberDepth(*c));
    };
    sub(e.operand);
    for (auto& a : e.args) sub(a);
    for (auto& en : e.entries) {
      sub(en.key);
      sub(en.value);
    }
    for (auto& f : e.fields) sub(f.value);
    sub(e.iter_range);
    sub(e.accu_init);
    sub(e.loop_cond);
    sub(e.loop_step);
    sub(e.result);
    Finish(e, d);
    return d + 1;
  }

  ExprPtr Ident(const std::string& name, int32_t offset) {
    auto e = Node(ExprKind::kIdent, offset);
    e->name = name;
    Finish(*e, 0);
    return e;
  }
  ExprPtr Call(const std::string& fn, int32_t offset, std::vector<ExprPtr> args, ExprPtr target = nullptr) {
    auto e = Node(ExprKind::kCall, offset);
    e->name = fn;
    e->op = OpCodeOf(fn);
    int d = DepthOf(target.get());
    for (auto& a : args) d = std::max(d, DepthOf(a.get()));
    e->args = std::move(args);
    e->operand = std::move(target);
    Finish(*e, d);
    return e;
  }
  ExprPtr Call2(const std::string& fn, int32_t offset, ExprPtr a, ExprPtr b) {
    std::vector<ExprPtr> v;
    v.push_back(std::move(a));
    v.push_back(std::move(b));
    return Call(fn, offset, std::move(v));
  }
  ExprPtr Const(Constant c, int32_t offset) {
    auto e = Node(ExprKind::kConst, offset);
    e->constant = std::move(c);
    Finish(*e, 0);
    return e;
  }

  // Recursion guard for nested sub-expressions (parentheses, lists, arguments...).
  struct Nest {
    Parser& p;
    explicit Nest(Parser& parser) : p(parser) {
      if (++p.nesting_ > p.opts_.max_depth) {
        p.errors_.push_back({-1, 0, 0, "expression recursion limit exceeded: " + std::to_string(p.opts_.max_depth)});
        throw SyntaxAbort{};
      }
    }
    ~Nest() { --p.nesting_; }
  };

  // ---- grammar
  ExprPtr Expr_() {
    Nest guard(*this);
    ExprPtr cond = Or();
    if (Peek().kind != Tok::kQuestion) return cond;
    int32_t off = Advance().offset;
    ExprPtr a = Or();
    Expect(Tok::kColon);
    ExprPtr b = Expr_();
    std::vector<ExprPtr> args;
    args.push_back(std::move(cond));
    args.push_back(std::move(a));
    args.push_back(std::move(b));
    return Call("_?_:_", off, std::move(args));
  }

  ExprPtr Balanced(std::vector<ExprPtr>& terms, std::vector<int32_t>& ops, const std::string& fn, int lo,
                   int hi) {
    int mid = (lo + hi + 1) / 2;
    ExprPtr left = mid == lo ? std::move(terms[mid]) : Balanced(terms, ops, fn, lo, mid - 1);
    ExprPtr right = mid == hi ? std::move(terms[mid + 1]) : Balanced(terms, ops, fn, mid + 1, hi);
    return Call2(fn, ops[mid], std::move(left), std::move(right));
  }

  ExprPtr Or() {
    std::vector<ExprPtr> terms;
    std::vector<int32_t> ops;
    terms.push_back(And());
    while (Peek().kind == Tok::kOr) {
      ops.push_back(Advance().offset);
      terms.push_back(And());
    }
    if (ops.empty()) return std::move(terms[0]);
    return Balanced(terms, ops, "_||_", 0, static_cast<int>(ops.size()) - 1);
  }

  ExprPtr And() {
    std::vector<ExprPtr> terms;
    std::vector<int32_t> ops;
    terms.push_back(Relation());
    while (Peek().kind == Tok::kAnd) {
      ops.push_back(Advance().offset);
      terms.push_back(Relation());
    }
    if (ops.empty()) return std::move(terms[0]);
    return Balanced(terms, ops, "_&&_", 0, static_cast<int>(ops.size()) - 1);
  }

  static const char* RelOp(Tok k) {
    switch (k) {
      case Tok::kLt: return "_<_";
      case Tok::kLe: return "_<=_";
      case Tok::kGt: return "_>_";
      case Tok::kGe: return "_>=_";
      case Tok::kEq: return "_==_";
      case Tok::kNe: return "_!=_";
      case Tok::kIn: return "@in";
      default: return nullptr;
    }
  }

  ExprPtr Relation() {
    ExprPtr left = Additive();
    while (const char* op = RelOp(Peek().kind)) {
      int32_t off = Advance().offset;
      ExprPtr right = Additive();
      left = Call2(op, off, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr Additive() {
    ExprPtr left = Multiplicative();
    while (Peek().kind == Tok::kPlus || Peek().kind == Tok::kMinus) {
      const Token& t = Advance();
      const char* op = t.kind == Tok::kPlus ? "_+_" : "_-_";
      int32_t off = t.offset;
      ExprPtr right = Multiplicative();
      left = Call2(op, off, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr Multiplicative() {
    ExprPtr left = Unary();
    while (Peek().kind == Tok::kStar || Peek().kind == Tok::kSlash || Peek().kind == Tok::kPercent) {
      const Token& t = Advance();
      const char* op = t.kind == Tok::kStar ? "_*_" : t.kind == Tok::kSlash ? "_/_" : "_%_";
      int32_t off = t.offset;
      ExprPtr right = Unary();
      left = Call2(op, off, std::move(left), std::move(right));
    }
    return left;
  }

  ExprPtr Unary() {
    Tok k = Peek().kind;
    if (k == Tok::kMinus) {
      // A single '-' directly before a number is part of the literal (CEL.g4 `literal`).
      if ((Peek(1).kind == Tok::kInt || Peek(1).kind == Tok::kDouble)) {
        return Member();
      }
    }
    if (k != Tok::kMinus && k != Tok::kNot) return Member();
    int32_t off = Peek().offset;
    int count = 0;
    while (Peek().kind == k) {
      Advance();
      ++count;
    }
    if (Peek().kind == Tok::kEof) {
      SyntaxError(Peek(), std::string("no viable alternative at input '") + (k == Tok::kMinus ? "-" : "!") + "'");
    }
    ExprPtr operand = Member();
    if (count % 2 == 0) return operand;
    std::vector<ExprPtr> args;
    args.push_back(std::move(operand));
    return Call(k == Tok::kMinus ? "-_" : "!_", off, std::move(args));
  }

  ExprPtr Member() {
    ExprPtr e = Primary();
    while (true) {
      Tok k = Peek().kind;
      if (k == Tok::kDot) {
        const Token& dot = Advance();
        int32_t off = dot.offset;
        bool opt = false;
        if (Peek().kind == Tok::kQuestion) {
          Advance();
          opt = true;
        }
        const Token& id = Peek();
        if (id.kind == Tok::kEscIdent) {
          Advance();
          SoftError(id.offset, "unsupported syntax: '`'");
          if (Peek().kind == Tok::kLParen) {
            SyntaxError(Peek(), "mismatched input '(' expecting <EOF>");
          }
          auto s = Node(ExprKind::kSelect, off);
          s->name = id.text;
          int d = DepthOf(e.get());
          s->operand = std::move(e);
          Finish(*s, d);
          e = std::move(s);
          continue;
        }
        if (id.kind != Tok::kIdent) {
          if (id.kind == Tok::kString || id.kind == Tok::kBytes || id.kind == Tok::kInt ||
              id.kind == Tok::kUint || id.kind == Tok::kDouble) {
            SyntaxError(id, "no viable alternative at input '." + TokText(id) + "'");
          }
          SyntaxError(id, "mismatched input '" + TokText(id) + "' expecting IDENTIFIER");
        }
        Advance();
        if (opt && !opts_.optional_syntax) SoftError(off, "unsupported syntax '.?'");
        if (opt && opts_.optional_syntax) {
          Constant c;
          c.kind = ConstKind::kString;
          c.s = id.text;
          e = Call2("_?._", off, std::move(e), Const(std::move(c), id.offset));
          continue;
        }
        if (Peek().kind == Tok::kLParen && !opt) {
          int32_t open = Advance().offset;
          std::vector<ExprPtr> args = ExprList(Tok::kRParen);
          Expect(Tok::kRParen);
          e = ReceiverCallOrMacro(id.text, open, std::move(e), std::move(args));
          continue;
        }
        auto s = Node(ExprKind::kSelect, off);
        s->name = id.text;
        int d = DepthOf(e.get());
        s->operand = std::move(e);
        Finish(*s, d);
        e = std::move(s);
      } else if (k == Tok::kLBracket) {
        int32_t off = Advance().offset;
        bool opt = false;
        if (Peek().kind == Tok::kQuestion) {
          Advance();
          opt = true;
          if (!opts_.optional_syntax) SoftError(off, "unsupported syntax '[?'");
        }
        ExprPtr index = Expr_();
        Expect(Tok::kRBracket);
        e = Call2(opt && opts_.optional_syntax ? "_[?_]" : "_[_]", off, std::move(e), std::move(index));
      } else {
        return e;
      }
    }
  }

  std::vector<ExprPtr> ExprList(Tok close, std::vector<int32_t>* optional_indices = nullptr) {
    std::vector<ExprPtr> out;
    if (Peek().kind == close) return out;
    while (true) {
      if (close == Tok::kRBracket && Peek().kind == Tok::kQuestion) {
        int32_t q = Advance().offset;
        if (!opts_.optional_syntax || optional_indices == nullptr) {
          SoftError(q, "unsupported syntax '?'");
        } else {
          optional_indices->push_back(static_cast<int32_t>(out.size()));
        }
      }
      out.push_back(Expr_());
      if (Peek().kind != Tok::kComma) break;
      Advance();
      if (close == Tok::kRBracket && Peek().kind == close) break;  // trailing comma in lists
    }
    return out;
  }

  ExprPtr Primary() {
    const Token& t = Peek();
    switch (t.kind) {
      case Tok::kLParen: {
        Advance();
        ExprPtr e = Expr_();
        Expect(Tok::kRParen);
        return e;
      }
      case Tok::kLBracket: {
        int32_t off = Advance().offset;
        std::vector<int32_t> opt_idx;
        std::vector<ExprPtr> elems = ExprList(Tok::kRBracket, &opt_idx);
        Expect(Tok::kRBracket);
        auto e = Node(ExprKind::kList, off);
        e->optional_indices = std::move(opt_idx);
        int d = 0;
        for (auto& x : elems) d = std::max(d, DepthOf(x.get()));
        e->args = std::move(elems);
        Finish(*e, d);
        return e;
      }
      case Tok::kLBrace: {
        int32_t off = Advance().offset;
        auto e = Node(ExprKind::kMap, off);
        int d = 0;
        while (Peek().kind != Tok::kRBrace) {
          int32_t qoff = -1;
          if (Peek().kind == Tok::kQuestion) qoff = Advance().offset;
          if (Peek().kind == Tok::kColon) {
            SyntaxError(Peek(), std::string("extraneous input ':' expecting ") +
                                    "{'[', '{', '}', '(', '.', ',', '-', '!', '?', 'true', 'false', 'null', "
                                    "NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}");
          }
          MapEntry me;
          me.key = Expr_();
          if (Peek().kind != Tok::kColon) {
            SyntaxError(Peek(), "mismatched input '" + TokText(Peek()) + "' expecting ':'");
          }
          me.offset = Advance().offset;
          me.value = Expr_();
          if (qoff >= 0 && !opts_.optional_syntax) SoftError(qoff, "unsupported syntax '?'");
          me.optional = qoff >= 0 && opts_.optional_syntax;
          d = std::max({d, DepthOf(me.key.get()), DepthOf(me.value.get())});
          e->entries.push_back(std::move(me));
          if (!Accept(Tok::kComma)) break;
        }
        if (Peek().kind != Tok::kRBrace) {
          SyntaxError(Peek(), "mismatched input '" + TokText(Peek()) + "' expecting {'}', ','}");
        }
        Advance();
        Finish(*e, d);
        return e;
      }
      case Tok::kDot:
      case Tok::kIdent:
        return IdentLike();
      case Tok::kMinus: {
        // Signed numeric literal.
        int32_t off = Advance().offset;
        return NumberLiteral(Advance(), true, off);
      }
      case Tok::kInt:
      case Tok::kUint:
      case Tok::kDouble:
        return NumberLiteral(Advance(), false, t.offset);
      case Tok::kString:
      case Tok::kBytes: {
        const Token& s = Advance();
        Constant c;
        c.kind = s.kind == Tok::kString ? ConstKind::kString : ConstKind::kBytes;
        c.s = s.value;
        if (s.bad_code_point) SoftError(s.offset, "invalid unicode code point");
        return Const(std::move(c), s.offset);
      }
      case Tok::kTrue:
      case Tok::kFalse: {
        Constant c;
        c.kind = ConstKind::kBool;
        c.b = t.kind == Tok::kTrue;
        int32_t off = Advance().offset;
        return Const(std::move(c), off);
      }
      case Tok::kNull: {
        Constant c;
        int32_t off = Advance().offset;
        return Const(std::move(c), off);
      }
      case Tok::kEscIdent:
        SyntaxError(t, "mismatched input '" + TokText(t) + "' expecting " + kExpectOperand);
      case Tok::kEof:
        SyntaxError(t, std::string("mismatched input '<EOF>' expecting ") + kExpectOperand);
      default:
        SyntaxError(t, "mismatched input '" + TokText(t) + "' expecting " + kExpectOperand);
    }
  }

  ExprPtr NumberLiteral(const Token& t, bool neg, int32_t off) {
    Constant c;
    std::string text = t.text;
    if (t.kind == Tok::kInt) {
      c.kind = ConstKind::kInt;
      bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
      errno = 0;
      char* end = nullptr;
      unsigned long long v = std::strtoull(hex ? text.c_str() + 2 : text.c_str(), &end, hex ? 16 : 10);
      bool ok = errno == 0 && end != nullptr && *end == '\0';
      if (ok && !neg && v > static_cast<unsigned long long>(INT64_MAX)) ok = false;
      if (ok && neg && v > static_cast<unsigned long long>(INT64_MAX) + 1ULL) ok = false;
      if (!ok) {
        SoftError(off, "invalid int literal");
      } else {
        c.i = neg ? static_cast<int64_t>(0ULL - v) : static_cast<int64_t>(v);
      }
    } else if (t.kind == Tok::kUint) {
      c.kind = ConstKind::kUint;
      std::string digits = text.substr(0, text.size() - 1);
      bool hex = digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X');
      errno = 0;
      char* end = nullptr;
      unsigned long long v = std::strtoull(hex ? digits.c_str() + 2 : digits.c_str(), &end, hex ? 16 : 10);
      if (errno != 0 || end == nullptr || *end != '\0') {
        SoftError(off, "invalid uint literal");
      } else {
        c.u = v;
      }
      if (neg) {
        // '-' before an unsigned literal is the negation operator.
        auto lit = Const(std::move(c), t.offset);
        std::vector<ExprPtr> args;
        args.push_back(std::move(lit));
        return Call("-_", off, std::move(args));
      }
    } else if (t.kind == Tok::kDouble) {
      c.kind = ConstKind::kDouble;
      errno = 0;
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (errno == ERANGE && std::isinf(v)) {
        SoftError(off, "invalid double literal");
      } else {
        c.d = neg ? -v : v;
      }
    } else {
      SyntaxError(t, "mismatched input '" + TokText(t) + "' expecting " + kExpectOperand);
    }
    return Const(std::move(c), off);
  }

  ExprPtr IdentLike() {
    std::string name;
    bool leading_dot = false;
    if (Peek().kind == Tok::kDot) {
      Advance();
      leading_dot = true;
      if (Peek().kind != Tok::kIdent) {
        SyntaxError(Peek(), "mismatched input '" + TokText(Peek()) + "' expecting IDENTIFIER");
      }
    }
    const Token& id = Advance();
    int32_t id_off = id.offset;
    name = (leading_dot ? "." : "") + id.text;
    // Message literal: IDENT ('.' IDENT)* '{'.
    size_t k = 0;
    while (Peek(k).kind == Tok::kDot && Peek(k + 1).kind == Tok::kIdent) k += 2;
    if (Peek(k).kind == Tok::kLBrace) {
      for (size_t j = 0; j < k; j += 2) {
        Advance();
        name += "." + Advance().text;
      }
      return StructLiteral(name);
    }
    if (Peek().kind == Tok::kLParen) {
      int32_t open = Advance().offset;
      std::vector<ExprPtr> args = ExprList(Tok::kRParen);
      Expect(Tok::kRParen);
      if (IsReserved(id.text)) SoftError(id_off, "reserved identifier: " + id.text);
      return GlobalCallOrMacro(name, open, std::move(args));
    }
    if (IsReserved(id.text)) SoftError(id_off, "reserved identifier: " + id.text);
    return Ident(name, id_off);
  }

  ExprPtr StructLiteral(const std::string& type) {
    int32_t off = Advance().offset;  // '{'
    auto e = Node(ExprKind::kStruct, off);
    e->name = type;
    int d = 0;
    while (Peek().kind != Tok::kRBrace) {
      int32_t qoff = -1;
      if (Peek().kind == Tok::kQuestion) qoff = Advance().offset;
      const Token& f = Peek();
      if (f.kind != Tok::kIdent && f.kind != Tok::kEscIdent) {
        if (qoff >= 0) {
          SyntaxError(f, "mismatched input '" + TokText(f) + "' expecting {IDENTIFIER, ESC_IDENTIFIER}");
        }
        SyntaxError(f, "extraneous input '" + TokText(f) + "' expecting {'}', ',', '?', IDENTIFIER, ESC_IDENTIFIER}");
      }
      Advance();
      if (Peek().kind != Tok::kColon) {
        SyntaxError(Peek(), "mismatched input '" + TokText(Peek()) + "' expecting ':'");
      }
      StructField sf;
      sf.name = f.text;
      sf.offset = Advance().offset;
      sf.value = Expr_();
      if (f.kind == Tok::kEscIdent) SoftError(f.offset, "unsupported syntax: '`'");
      if (qoff >= 0 && !opts_.optional_syntax) SoftError(qoff, "unsupported syntax '?'");
      d = std::max(d, DepthOf(sf.value.get()));
      e->fields.push_back(std::move(sf));
      if (!Accept(Tok::kComma)) break;
    }
    if (Peek().kind != Tok::kRBrace) {
      SyntaxError(Peek(), "mismatched input '" + TokText(Peek()) + "' expecting {'}', ','}");
    }
    Advance();
    Finish(*e, d);
    return e;
  }

  // ---- macros
  ExprPtr GlobalCallOrMacro(const std::string& fn, int32_t off, std::vector<ExprPtr> args) {
    if (fn == "has" && args.size() == 1) {
      Expr* a = args[0].get();
      if (a->kind != ExprKind::kSelect || a->test_only) {
        SoftError(a->offset, "invalid argument to has() macro");
        return Call(fn, off, std::move(args));
      }
      auto s = Node(ExprKind::kSelect, off);
      s->name = a->name;
      s->test_only = true;
      int d = DepthOf(a->operand.get());
      s->operand = std::move(a->operand);
      Finish(*s, d);
      return s;
    }
    return Call(fn, off, std::move(args));
  }

  std::optional<std::string> SimpleName(const ExprPtr& e, const char* what) {
    if (e->kind != ExprKind::kIdent) {
      SoftError(e->offset, what);
      return std::nullopt;
    }
    return e->name;
  }

  ExprPtr Accu(int32_t off) { return Ident(kAccuName, off); }
  ExprPtr BoolLit(bool b, int32_t off) {
    Constant c;
    c.kind = ConstKind::kBool;
    c.b = b;
    return Const(std::move(c), off);
  }
  ExprPtr IntLit(int64_t v, int32_t off) {
    Constant c;
    c.kind = ConstKind::kInt;
    c.i = v;
    return Const(std::move(c), off);
  }
  ExprPtr Unary(const char* fn, int32_t off, ExprPtr a) {
    std::vector<ExprPtr> v;
    v.push_back(std::move(a));
    return Call(fn, off, std::move(v));
  }
  ExprPtr Ternary(int32_t off, ExprPtr c, ExprPtr a, ExprPtr b) {
    std::vector<ExprPtr> v;
    v.push_back(std::move(c));
    v.push_back(std::move(a));
    v.push_back(std::move(b));
    return Call("_?_:_", off, std::move(v));
  }
  ExprPtr ListOf(int32_t off, ExprPtr a) {
    auto l = Node(ExprKind::kList, off);
    int d = DepthOf(a.get());
    l->args.push_back(std::move(a));
    Finish(*l, d);
    return l;
  }
  ExprPtr EmptyList(int32_t off) {
    auto l = Node(ExprKind::kList, off);
    Finish(*l, 0);
    return l;
  }
  ExprPtr EmptyMap(int32_t off) {
    auto m = Node(ExprKind::kMap, off);
    Finish(*m, 0);
    return m;
  }

  ExprPtr Comprehension(int32_t off, std::string v1, std::string v2, ExprPtr range, std::string accu,
                        ExprPtr init, ExprPtr cond, ExprPtr step, ExprPtr result) {
    auto c = Node(ExprKind::kComprehension, off);
    c->iter_var = std::move(v1);
    c->iter_var2 = std::move(v2);
    c->accu_var = std::move(accu);
    int d = std::max({DepthOf(range.get()), DepthOf(init.get()), DepthOf(cond.get()), DepthOf(step.get()),
                      DepthOf(result.get())});
    c->iter_range = std::move(range);
    c->accu_init = std::move(init);
    c->loop_cond = std::move(cond);
    c->loop_step = std::move(step);
    c->result = std::move(result);
    Finish(*c, d);
    return c;
  }

  ExprPtr ReceiverCallOrMacro(const std::string& fn, int32_t off, ExprPtr target, std::vector<ExprPtr> args) {
    bool ext = opts_.extension_macros;
    // cel.bind(var, init, expr)
    if (opts_.bind_macro && fn == "bind" && args.size() == 3 && target->kind == ExprKind::kIdent && target->name == "cel") {
      auto v = SimpleName(args[0], "cel.bind() variable name must be a simple identifier");
      if (!v) return Call(fn, off, std::move(args), std::move(target));
      return Comprehension(off, "#unused", "", EmptyList(off), *v, std::move(args[1]), BoolLit(false, off),
                           Ident(*v, off), std::move(args[2]));
    }
    if (opts_.optional_syntax && (fn == "optMap" || fn == "optFlatMap") && args.size() == 2) {
      // cel-go optMap / optFlatMap: o.hasValue() ? [optional.of](cel.bind(v, o.value(), e)) : optional.none()
      auto v = SimpleName(args[0], "optMap() variable name must be a simple identifier");
      if (!v) return Call(fn, off, std::move(args), std::move(target));
      ExprPtr copy = CloneExpr(*target);
      RenumberDepth(*copy);
      std::vector<ExprPtr> none;
      ExprPtr has = Call("hasValue", off, {}, std::move(target));
      ExprPtr value = Call("value", off, {}, std::move(copy));
      ExprPtr bound = Comprehension(off, "#unused", "", EmptyList(off), *v, std::move(value), BoolLit(false, off),
                                    Ident(*v, off), std::move(args[1]));
      if (fn == "optMap") {
        std::vector<ExprPtr> of;
        of.push_back(std::move(bound));
        bound = Call("optional.of", off, std::move(of));
      }
      return Ternary(off, std::move(has), std::move(bound), Call("optional.none", off, std::move(none)));
    }
    bool quant = fn == "all" || fn == "exists" || fn == "exists_one" || fn == "existsOne";
    bool two = ext && args.size() == 3 &&
               (quant || fn == "transformList" || fn == "transformMap" || fn == "transformMapEntry");
    bool std_macro = (args.size() == 2 && (quant || fn == "map" || fn == "filter")) ||
                     (args.size() == 3 && fn == "map");
    if (ext && args.size() == 4 && (fn == "transformList" || fn == "transformMap")) two = true;
    if (!std_macro && !two) return Call(fn, off, std::move(args), std::move(target));
    if (fn == "map" && args.size() == 3) two = false;

    if (!two) {
      auto v = SimpleName(args[0], "argument must be a simple name");
      if (!v) return Call(fn, off, std::move(args), std::move(target));
      if (*v == kReservedAccuName) {
        SoftError(args[0]->offset, "iteration variable overwrites accumulator variable");
        return Call(fn, off, std::move(args), std::move(target));
      }
      if (fn == "all" || fn == "exists") {
        bool all = fn == "all";
        ExprPtr cond = all ? Accu(off) : Unary("!_", off, Accu(off));
        cond = Unary("@not_strictly_false", off, std::move(cond));
        ExprPtr step = Call2(all ? "_&&_" : "_||_", off, Accu(off), std::move(args[1]));
        return Comprehension(off, *v, "", std::move(target), kAccuName, BoolLit(all, off), std::move(cond),
                             std::move(step), Accu(off));
      }
      if (fn == "exists_one" || fn == "existsOne") {
        ExprPtr step = Ternary(off, std::move(args[1]), Call2("_+_", off, Accu(off), IntLit(1, off)), Accu(off));
        return Comprehension(off, *v, "", std::move(target), kAccuName, IntLit(0, off), BoolLit(true, off),
                             std::move(step), Call2("_==_", off, Accu(off), IntLit(1, off)));
      }
      if (fn == "map") {
        ExprPtr step;
        if (args.size() == 3) {
          step = Ternary(off, std::move(args[1]), Call2("_+_", off, Accu(off), ListOf(off, std::move(args[2]))),
                         Accu(off));
        } else {
          step = Call2("_+_", off, Accu(off), ListOf(off, std::move(args[1])));
        }
        return Comprehension(off, *v, "", std::move(target), kAccuName, EmptyList(off), BoolLit(true, off),
                             std::move(step), Accu(off));
      }
      // filter
      ExprPtr step = Ternary(off, std::move(args[1]), Call2("_+_", off, Accu(off), ListOf(off, Ident(*v, off))),
                             Accu(off));
      return Comprehension(off, *v, "", std::move(target), kAccuName, EmptyList(off), BoolLit(true, off),
                           std::move(step), Accu(off));
    }

    // Two-variable comprehensions (cel-go ext.TwoVarComprehensions).
    auto v1 = SimpleName(args[0], "argument must be a simple name");
    auto v2 = SimpleName(args[1], "argument must be a simple name");
    if (!v1 || !v2) return Call(fn, off, std::move(args), std::move(target));
    if (*v1 == kReservedAccuName || *v2 == kReservedAccuName) {
      SoftError(args[0]->offset, "iteration variable overwrites accumulator variable");
      return Call(fn, off, std::move(args), std::move(target));
    }
    if (*v1 == *v2) {
      SoftError(args[1]->offset, "duplicate variable name: " + *v1);
      return Call(fn, off, std::move(args), std::move(target));
    }
    if (fn == "all" || fn == "exists") {
      bool all = fn == "all";
      ExprPtr cond = all ? Accu(off) : Unary("!_", off, Accu(off));
      cond = Unary("@not_strictly_false", off, std::move(cond));
      ExprPtr step = Call2(all ? "_&&_" : "_||_", off, Accu(off), std::move(args[2]));
      return Comprehension(off, *v1, *v2, std::move(target), kAccuName, BoolLit(all, off), std::move(cond),
                           std::move(step), Accu(off));
    }
    if (fn == "exists_one" || fn == "existsOne") {
      ExprPtr step = Ternary(off, std::move(args[2]), Call2("_+_", off, Accu(off), IntLit(1, off)), Accu(off));
      return Comprehension(off, *v1, *v2, std::move(target), kAccuName, IntLit(0, off), BoolLit(true, off),
                           std::move(step), Call2("_==_", off, Accu(off), IntLit(1, off)));
    }
    if (fn == "transformList") {
      ExprPtr step;
      if (args.size() == 4) {
        step = Ternary(off, std::move(args[2]), Call2("_+_", off, Accu(off), ListOf(off, std::move(args[3]))),
                       Accu(off));
      } else {
        step = Call2("_+_", off, Accu(off), ListOf(off, std::move(args[2])));
      }
      return Comprehension(off, *v1, *v2, std::move(target), kAccuName, EmptyList(off), BoolLit(true, off),
                           std::move(step), Accu(off));
    }
    if (fn == "transformMap") {
      std::vector<ExprPtr> ins;
      ins.push_back(Accu(off));
      ins.push_back(Ident(*v1, off));
      ExprPtr step;
      if (args.size() == 4) {
        ins.push_back(std::move(args[3]));
        step = Ternary(off, std::move(args[2]), Call("cel.@mapInsert", off, std::move(ins)), Accu(off));
      } else {
        ins.push_back(std::move(args[2]));
        step = Call("cel.@mapInsert", off, std::move(ins));
      }
      return Comprehension(off, *v1, *v2, std::move(target), kAccuName, EmptyMap(off), BoolLit(true, off),
                           std::move(step), Accu(off));
    }
    // transformMapEntry
    std::vector<ExprPtr> ins;
    ins.push_back(Accu(off));
    ins.push_back(std::move(args[2]));
    ExprPtr step = Call("cel.@mapInsert", off, std::move(ins));
    return Comprehension(off, *v1, *v2, std::move(target), kAccuName, EmptyMap(off), BoolLit(true, off),
                         std::move(step), Accu(off));
  }

  std::string_view src_;
  const ParseOptions& opts_;
  std::vector<Token> toks_;
  std::vector<Diagnostic>& errors_;
  size_t pos_ = 0;
  int64_t next_id_ = 1;
  int nesting_ = 0;
  int max_depth_seen_ = 0;
  std::vector<int> depth_;
};

}  // namespace

ExprPtr CloneExpr(const Expr& e) {
  auto c = std::make_unique<Expr>();
  c->id = e.id;
  c->offset = e.offset;
  c->kind = e.kind;
  c->op = e.op;
  c->constant = e.constant;
  c->name = e.name;
  c->test_only = e.test_only;
  c->optional_indices = e.optional_indices;
  c->iter_var = e.iter_var;
  c->iter_var2 = e.iter_var2;
  c->accu_var = e.accu_var;
  auto sub = [](const ExprPtr& p) { return p ? CloneExpr(*p) : nullptr; };
  c->operand = sub(e.operand);
  for (const auto& a : e.args) c->args.push_back(CloneExpr(*a));
  for (const auto& en : e.entries) c->entries.push_back({sub(en.key), sub(en.value), en.offset, en.optional});
  for (const auto& f : e.fields) c->fields.push_back({f.name, sub(f.value), f.offset});
  c->iter_range = sub(e.iter_range);
  c->accu_init = sub(e.accu_init);
  c->loop_cond = sub(e.loop_cond);
  c->loop_step = sub(e.loop_step);
  c->result = sub(e.result);
  return c;
}

OpCode OpCodeOf(const std::string& f) {
  static constexpr struct {
    const char* name;
    OpCode op;
  } kOps[] = {{"_&&_", OpCode::kAnd}, {"_||_", OpCode::kOr},   {"_?_:_", OpCode::kCond},
              {"@not_strictly_false", OpCode::kNotStrictlyFalse},
              {"_==_", OpCode::kEq},  {"_!=_", OpCode::kNe},   {"_<_", OpCode::kLt},   {"_<=_", OpCode::kLe},
              {"_>_", OpCode::kGt},   {"_>=_", OpCode::kGe},   {"_+_", OpCode::kAdd},  {"_-_", OpCode::kSub},
              {"_*_", OpCode::kMul},  {"_/_", OpCode::kDiv},   {"_%_", OpCode::kMod},  {"_[_]", OpCode::kIndex},
              {"@in", OpCode::kIn},   {"!_", OpCode::kNot},    {"-_", OpCode::kNeg}};
  if (f.empty() || (f[0] != '_' && f[0] != '@' && f[0] != '!' && f[0] != '-')) return OpCode::kOther;
  for (const auto& o : kOps) {
    if (f == o.name) return o.op;
  }
  return OpCode::kOther;
}

SourcePosition PositionOf(const std::string& source, int32_t offset) {
  SourcePosition p{1, 1};
  size_t end = std::min(static_cast<size_t>(std::max(offset, 0)), source.size());
  for (size_t i = 0; i < end;) {
    if (source[i] == '\n') {
      ++p.line;
      p.column = 1;
      ++i;
      continue;
    }
    i += Utf8Len(source, i);
    ++p.column;
  }
  return p;
}

std::string FormatSourceError(const std::string& source, int32_t offset, const std::string& message) {
  if (offset < 0) return "<input>:-1:0: " + message;
  SourcePosition p = PositionOf(source, offset);
  std::string out = "<input>:" + std::to_string(p.line) + ":" + std::to_string(p.column) + ": " + message;
  // The source line holding the offset.
  size_t start = 0;
  for (int l = 1; l < p.line; ++l) start = source.find('\n', start) + 1;
  size_t stop = source.find('\n', start);
  if (stop == std::string::npos) stop = source.size();
  out += "\n | " + source.substr(start, stop - start) + "\n | " + std::string(p.column - 1, '.') + "^";
  return out;
}

std::string FormatDiagnostics(const std::string& source, const std::vector<Diagnostic>& errors) {
  std::string out;
  for (const auto& d : errors) {
    if (!out.empty()) out += "\n";
    out += "ERROR: " + FormatSourceError(source, d.offset, d.message);
  }
  return out;
}

ParseOutcome ParseDetailed(std::string_view source, const ParseOptions& options) {
  ParseOutcome out;
  std::string src(source);
  if (source.size() > options.max_length) {
    out.errors.push_back({-1, -1, 0,
                          "expression is " + std::to_string(source.size()) + " characters long, the limit is " +
                              std::to_string(options.max_length)});
    return out;
  }
  std::vector<Diagnostic> errors;
  Lexer lexer(source, errors);
  std::vector<Token> toks = lexer.Run();
  Parser parser(source, options, std::move(toks), errors);
  ExprPtr root;
  try {
    root = parser.ParseAll();
  } catch (const SyntaxAbort&) {
    root.reset();
  }
  if (!errors.empty() || root == nullptr) {
    std::stable_sort(errors.begin(), errors.end(),
                     [](const Diagnostic& a, const Diagnostic& b) { return a.offset < b.offset; });
    for (auto& d : errors) {
      if (d.offset >= 0) {
        SourcePosition p = PositionOf(src, d.offset);
        d.line = p.line;
        d.column = p.column;
      } else {
        d.line = -1;
        d.column = 0;
      }
    }
    out.errors = std::move(errors);
    return out;
  }
  out.ok = true;
  out.ast.source = std::move(src);
  out.ast.root = std::shared_ptr<Expr>(std::move(root));
  out.ast.max_depth = parser.max_depth();
  out.ast.node_count = parser.nodes();
  return out;
}

Result<Ast> Parse(std::string_view source, const ParseOptions& options) {
  ParseOutcome o = ParseDetailed(source, options);
  if (o.ok) return std::move(o.ast);
  bool limit = false;
  for (const auto& d : o.errors) limit = limit || d.offset < 0;
  std::string msg = FormatDiagnostics(std::string(source), o.errors);
  return limit ? Status::ResourceExhausted(msg) : Status::InvalidArgument(msg);
}

}  // namespace draguard::cel
