// cel-go compatible debug rendering of an Ast. See include/draguard/cel/debug_string.h.
#include "draguard/cel/debug_string.h"

#include <charconv>
#include <cmath>

#include "value_format.h"

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
      case ExprKind::kCall: CallExpr(e); break;
      case ExprKind::kList: ListExpr(e); break;
      case ExprKind::kMap: MapExpr(e); break;
      case ExprKind::kStruct: StructExpr(e); break;
      case ExprKind::kComprehension: ComprehensionExpr(e); break;
    }
    Append(Adornment(e));
  }

  std::string Take() { return std::move(out_); }

 private:
  void CallExpr(const Expr& e) {
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
  }

  void ListExpr(const Expr& e) {
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
  }

  // Entries of a map or message literal: `count` entries, each written by `entry(i)`.
  template <typename F>
  void Entries(size_t count, F entry) {
    if (count == 0) return;
    Line();
    ++indent_;
    for (size_t i = 0; i < count; ++i) {
      if (i > 0) {
        Append(",");
        Line();
      }
      entry(i);
      Append("^#*expr.Expr_CreateStruct_Entry#");
    }
    --indent_;
    Line();
  }

  void MapExpr(const Expr& e) {
    Append("{");
    Entries(e.entries.size(), [&](size_t i) {
      if (e.entries[i].optional) Append("?");
      Buffer(*e.entries[i].key);
      Append(":");
      Buffer(*e.entries[i].value);
    });
    Append("}");
  }

  void StructExpr(const Expr& e) {
    Append(e.name);
    Append("{");
    Entries(e.fields.size(), [&](size_t i) {
      Append(e.fields[i].name);
      Append(":");
      Buffer(*e.fields[i].value);
    });
    Append("}");
  }

  // One labelled part of a comprehension: "// label", the part, and a trailing comma unless last.
  void Part(const char* label, const Expr& part, bool last = false) {
    Append(label);
    Line();
    Buffer(part);
    if (!last) {
      Append(",");
      Line();
    }
  }

  void ComprehensionExpr(const Expr& e) {
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
    Part("// Target", *e.iter_range);
    Append("// Accumulator");
    Line();
    Append(e.accu_var);
    Append(",");
    Line();
    Part("// Init", *e.accu_init);
    Part("// LoopCondition", *e.loop_cond);
    Part("// LoopStep", *e.loop_step);
    Part("// Result", *e.result, true);
    Append(")");
    --indent_;
  }

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

std::string GoQuote(const std::string& s) { return internal::Quote(s, internal::QuoteStyle::kGo); }

}  // namespace draguard::cel
