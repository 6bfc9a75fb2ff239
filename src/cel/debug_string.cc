// cel-go compatible debug rendering of an Ast. See include/draguard/cel/debug_string.h.
#include "draguard/cel/debug_string.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace draguard::cel {
namespace {

class Writer {
 public:
  void Buffer(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kConst: Append(Literal(e.constant)); break;
      case ExprKind::kIdent: Append(e.name); break;
      case ExprKind::kSelect:
        Buffer(*e.operand);
        Append(".");
        Append(e.name);
        if (e.test_only) Append("~test-only~");
        break;
      case ExprKind::kCall:
        if (e.operand) {
          Buffer(*e.operand);
          Append(".");
        }
        Append(e.name);
        Append("(");
        if (!e.args.empty()) {
          ++indent_;
          Line();
          for (size_t i = 0; i < e.args.size(); ++i) {
            if (i > 0) {
              Append(",");
              Line();
            }
            Buffer(*e.args[i]);
          }
          --indent_;
          Line();
        }
        Append(")");
        break;
      case ExprKind::kList:
        Append("[");
        if (!e.args.empty()) {
          Line();
          ++indent_;
          for (size_t i = 0; i < e.args.size(); ++i) {
            if (i > 0) {
              Append(",");
              Line();
            }
            for (int32_t oi : e.optional_indices) {
              if (oi == static_cast<int32_t>(i)) Append("?");
            }
            Buffer(*e.args[i]);
          }
          --indent_;
          Line();
        }
        Append("]");
        break;
      case ExprKind::kMap:
        Append("{");
        if (!e.entries.empty()) {
          Line();
          ++indent_;
          for (size_t i = 0; i < e.entries.size(); ++i) {
            if (i > 0) {
              Append(",");
              Line();
            }
            if (e.entries[i].optional) Append("?");
            Buffer(*e.entries[i].key);
            Append(":");
            Buffer(*e.entries[i].value);
            Append("^#*expr.Expr_CreateStruct_Entry#");
          }
          --indent_;
          Line();
        }
        Append("}");
        break;
      case ExprKind::kStruct:
        Append(e.name);
        Append("{");
        if (!e.fields.empty()) {
          Line();
          ++indent_;
          for (size_t i = 0; i < e.fields.size(); ++i) {
            if (i > 0) {
              Append(",");
              Line();
            }
            Append(e.fields[i].name);
            Append(":");
            Buffer(*e.fields[i].value);
            Append("^#*expr.Expr_CreateStruct_Entry#");
          }
          --indent_;
          Line();
        }
        Append("}");
        break;
      case ExprKind::kComprehension:
        Append("__comprehension__(");
        ++indent_;
        Line();
        Append("// Variable");
        Line();
        Append(e.iter_var);
        Append(",");
        Line();
        if (!e.iter_var2.empty()) {
          Append(e.iter_var2);
          Append(",");
          Line();
        }
        Append("// Target");
        Line();
        Buffer(*e.iter_range);
        Append(",");
        Line();
        Append("// Accumulator");
        Line();
        Append(e.accu_var);
        Append(",");
        Line();
        Append("// Init");
        Line();
        Buffer(*e.accu_init);
        Append(",");
        Line();
        Append("// LoopCondition");
        Line();
        Buffer(*e.loop_cond);
        Append(",");
        Line();
        Append("// LoopStep");
        Line();
        Buffer(*e.loop_step);
        Append(",");
        Line();
        Append("// Result");
        Line();
        Buffer(*e.result);
        Append(")");
        --indent_;
        break;
    }
    Append(Adornment(e));
  }

  std::string Take() { return std::move(out_); }

 private:
  static const char* Adornment(const Expr& e) {
    switch (e.kind) {
      case ExprKind::kConst:
        switch (e.constant.kind) {
          case ConstKind::kNull: return "^#*expr.Constant_NullValue#";
          case ConstKind::kBool: return "^#*expr.Constant_BoolValue#";
          case ConstKind::kInt: return "^#*expr.Constant_Int64Value#";
          case ConstKind::kUint: return "^#*expr.Constant_Uint64Value#";
          case ConstKind::kDouble: return "^#*expr.Constant_DoubleValue#";
          case ConstKind::kString: return "^#*expr.Constant_StringValue#";
          case ConstKind::kBytes: return "^#*expr.Constant_BytesValue#";
        }
        return "";
      case ExprKind::kIdent: return "^#*expr.Expr_IdentExpr#";
      case ExprKind::kSelect: return "^#*expr.Expr_SelectExpr#";
      case ExprKind::kCall: return "^#*expr.Expr_CallExpr#";
      case ExprKind::kList: return "^#*expr.Expr_ListExpr#";
      case ExprKind::kMap:
      case ExprKind::kStruct: return "^#*expr.Expr_StructExpr#";
      case ExprKind::kComprehension: return "^#*expr.Expr_ComprehensionExpr#";
    }
    return "";
  }

  static std::string Literal(const Constant& c) {
    switch (c.kind) {
      case ConstKind::kNull: return "null";
      case ConstKind::kBool: return c.b ? "true" : "false";
      case ConstKind::kInt: return std::to_string(c.i);
      case ConstKind::kUint: return std::to_string(c.u) + "u";
      case ConstKind::kDouble: return FormatGoFloat(c.d);
      case ConstKind::kString: return GoQuote(c.s);
      case ConstKind::kBytes: return "b\"" + c.s + "\"";
    }
    return "";
  }

  void Append(const std::string& s) {
    if (line_start_) {
      line_start_ = false;
      for (int i = 0; i < indent_; ++i) out_ += "  ";
    }
    out_ += s;
  }
  void Line() {
    out_ += "\n";
    line_start_ = true;
  }

  std::string out_;
  int indent_ = 0;
  bool line_start_ = false;
};

bool IsPrintable(uint32_t cp) {
  // Approximation of Go's unicode.IsPrint: control characters, surrogates, private use and
  // noncharacters are not printable; other assigned code points are treated as printable.
  if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return false;
  if (cp == 0xAD) return false;
  if (cp >= 0xD800 && cp < 0xE000) return false;
  if (cp >= 0xE000 && cp < 0xF900) return false;
  if ((cp & 0xFFFE) == 0xFFFE) return false;
  if (cp >= 0x2028 && cp <= 0x2029) return false;
  if (cp >= 0x200B && cp <= 0x200F) return false;
  if (cp >= 0xFFF0 && cp <= 0xFFFB) return false;
  if (cp >= 0xE0000) return false;
  return cp <= 0x10FFFF;
}

}  // namespace

std::string ToDebugString(const Expr& e) {
  Writer w;
  w.Buffer(e);
  return w.Take();
}

std::string FormatGoFloat(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[512];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

std::string GoQuote(const std::string& s) {
  std::string out = "\"";
  static const char* kHex = "0123456789abcdef";
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp = c;
    size_t n = 1;
    if (c >= 0x80) {
      n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
      bool valid = n > 0 && i + n <= s.size();
      if (valid) {
        cp = n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < n; ++k) {
          unsigned char cc = static_cast<unsigned char>(s[i + k]);
          if ((cc & 0xC0) != 0x80) valid = false;
          cp = (cp << 6) | (cc & 0x3F);
        }
      }
      if (!valid) {
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
        ++i;
        continue;
      }
    }
    switch (cp) {
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      default:
        if (IsPrintable(cp)) {
          out.append(s, i, n);
        } else if (cp < 0x80) {
          out += "\\x";
          out += kHex[cp >> 4];
          out += kHex[cp & 15];
        } else {
          char buf[16];
          if (cp < 0x10000) std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
          else std::snprintf(buf, sizeof(buf), "\\U%08x", cp);
          out += buf;
        }
    }
    i += n;
  }
  out += "\"";
  return out;
}

}  // namespace draguard::cel
