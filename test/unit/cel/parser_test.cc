// Parser tests: tree shape, positions, caret errors and hostile-input limits.
#include "draguard/cel/parser.h"

#include <gtest/gtest.h>

#include <string>

#include "draguard/cel/checker.h"
#include "draguard/cel/debug_string.h"
#include "draguard/cel/evaluator.h"

namespace draguard::cel {
namespace {

std::string Debug(const std::string& src) {
  auto r = Parse(src);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? ToDebugString(*r->root) : "";
}

TEST(CelParser, SelectorShape) {
  EXPECT_EQ(Debug("device.driver == 'gpu.nvidia.com'"),
            "_==_(\n  device^#*expr.Expr_IdentExpr#.driver^#*expr.Expr_SelectExpr#,\n"
            "  \"gpu.nvidia.com\"^#*expr.Constant_StringValue#\n)^#*expr.Expr_CallExpr#");
}

TEST(CelParser, ErrorHasCaretAndColumn) {
  auto r = Parse("device.driver == ");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("<input>:1:18: Syntax error: mismatched input '<EOF>'"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("\n | device.driver == \n | .................^"), std::string::npos)
      << r.status().message();
}

TEST(CelParser, ColumnsCountCodePoints) {
  ParseOutcome o = ParseDetailed("'é' == 1 +");
  ASSERT_FALSE(o.ok);
  EXPECT_EQ(o.errors[0].line, 1);
  EXPECT_EQ(o.errors[0].column, 11);
}

TEST(CelParser, LengthLimit) {
  std::string big(kMaxExpressionLength + 1, ' ');
  big[0] = '1';
  auto r = Parse(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  std::string ok = "1" + std::string(kMaxExpressionLength - 1, ' ');
  EXPECT_TRUE(Parse(ok).ok());
}

TEST(CelParser, DeepNestingIsAnErrorNotACrash) {
  // 10 Ki of '(' would overflow an unbounded recursive parser.
  std::string s(kMaxExpressionLength / 2, '(');
  s += "1";
  s += std::string(kMaxExpressionLength / 2 - 1, ')');
  auto r = Parse(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  // Long left-associative chains and selection chains are bounded by the tree-depth limit.
  std::string chain = "1";
  for (int i = 0; i < 2000; ++i) chain += "+1";
  EXPECT_FALSE(Parse(chain).ok());
  std::string sel = "a";
  for (int i = 0; i < 2000; ++i) sel += ".b";
  EXPECT_FALSE(Parse(sel).ok());
  std::string neg(5000, '-');
  neg += "1";
  EXPECT_TRUE(Parse(neg).ok());  // unary runs are folded, not nested
  std::string lists(3000, '[');
  EXPECT_FALSE(Parse(lists).ok());
}

TEST(CelParser, NestingJustBelowTheLimitWorksEndToEnd) {
  // Deep but legal input must parse, and every later pass must handle it.
  std::string parens = std::string(200, '(') + "true" + std::string(200, ')');
  auto a = Parse(parens);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::string deep = "1";
  for (int i = 0; i < 200; ++i) deep = "(" + deep + " + 1)";
  auto c = Compile(deep + " == 201", Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EvalOutcome o = Evaluate(c->ast, Activation{});
  ASSERT_EQ(o.value.kind(), ValueKind::kBool);
  EXPECT_TRUE(o.value.bool_value());
  std::string lists = std::string(120, '[') + "1" + std::string(120, ']');
  auto b = Parse("size(" + lists + ") == 1");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_FALSE(ToDebugString(*b->root).empty());
  std::string negs = "!";
  for (int i = 0; i < 100; ++i) negs = "!(" + negs;
  EXPECT_FALSE(Parse(negs).ok());  // incomplete input, but no crash
}

TEST(CelParser, LogicalChainsAreBalanced) {
  // 300 terms would exceed the depth limit as a left-leaning tree but not as a balanced one.
  std::string s = "true";
  for (int i = 0; i < 300; ++i) s += " && true";
  auto r = Parse(s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_LT(r->max_depth, 20);
}

TEST(CelParser, Literals) {
  EXPECT_EQ(Debug("-9223372036854775808"), "-9223372036854775808^#*expr.Constant_Int64Value#");
  EXPECT_FALSE(Parse("9223372036854775808").ok());
  EXPECT_EQ(Debug("0x10u"), "16u^#*expr.Constant_Uint64Value#");
  EXPECT_EQ(Debug("r'\\d'"), "\"\\\\d\"^#*expr.Constant_StringValue#");
  EXPECT_EQ(Debug("'''a\nb'''"), "\"a\\nb\"^#*expr.Constant_StringValue#");
  EXPECT_EQ(Debug("'\\u00e9\\x41\\101'"), "\"éAA\"^#*expr.Constant_StringValue#");
  EXPECT_EQ(Debug("b'\\xff'"), "b\"\xff\"^#*expr.Constant_BytesValue#");
  EXPECT_EQ(Debug(".5"), "0.5^#*expr.Constant_DoubleValue#");
  EXPECT_EQ(Debug("1e3"), "1000^#*expr.Constant_DoubleValue#");
  EXPECT_FALSE(Parse("'\\q'").ok());
  EXPECT_FALSE(Parse("'\\ud800'").ok());
}

TEST(CelParser, ReservedAndMessages) {
  EXPECT_FALSE(Parse("while").ok());
  auto r = Parse("Foo{a: 1}");
  ASSERT_TRUE(r.ok());  // parsed; the checker rejects message construction
  EXPECT_EQ(r->root->kind, ExprKind::kStruct);
}

TEST(CelParser, MacrosExpand) {
  auto r = Parse("[1,2].all(x, x > 0) && has(a.b) && cel.bind(v, 1, v == 1)");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::string d = ToDebugString(*r->root);
  EXPECT_NE(d.find("__comprehension__"), std::string::npos);
  EXPECT_NE(d.find("~test-only~"), std::string::npos);
  EXPECT_EQ(d.find("bind("), std::string::npos);
  auto bad = Parse("has(a)");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("1:5: invalid argument to has() macro"), std::string::npos);
}

}  // namespace
}  // namespace draguard::cel
