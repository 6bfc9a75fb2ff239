// Tests of the builtin function table: resolution by the checker, dispatch on the receiver's
// kind, the answers to calls no overload accepts, and the charge of receiver calls.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "builtins.h"
#include "draguard/cel/checker.h"
#include "draguard/cel/evaluator.h"

namespace draguard::cel {
namespace {

using internal::CallArgs;
using internal::CallContext;
using internal::CallFunction;
using internal::ResolveFunction;

// The first call node named `name` in `e`, or null.
const Expr* FindCall(const Expr& e, const std::string& name) {
  if (e.kind == ExprKind::kCall && e.name == name) return &e;
  std::vector<const Expr*> children;
  for (const ExprPtr* c : {&e.operand, &e.iter_range, &e.accu_init, &e.loop_cond, &e.loop_step, &e.result}) {
    if (*c) children.push_back(c->get());
  }
  for (const auto& a : e.args) children.push_back(a.get());
  for (const Expr* c : children) {
    if (const Expr* found = FindCall(*c, name)) return found;
  }
  return nullptr;
}

Value Call(std::string_view name, bool member, const CallArgs& args, CallContext& ctx) {
  return CallFunction(ResolveFunction(name, member), name, member, args, ctx);
}

Value Call(std::string_view name, bool member, const CallArgs& args) {
  CallContext ctx(kDefaultCostLimit, nullptr);
  return Call(name, member, args, ctx);
}

TEST(CelBuiltins, ResolvesByNameAndCallStyle) {
  FunctionId contains = ResolveFunction("contains", true);
  ASSERT_NE(contains, kUnknownFunction);
  EXPECT_EQ(internal::FunctionName(contains), "contains");
  EXPECT_TRUE(internal::IsMemberFunction(contains));
  EXPECT_EQ(ResolveFunction("contains", false), kUnknownFunction);
  FunctionId sets = ResolveFunction("sets.contains", false);
  ASSERT_NE(sets, kUnknownFunction);
  EXPECT_FALSE(internal::IsMemberFunction(sets));
  EXPECT_NE(sets, contains);
  EXPECT_EQ(ResolveFunction("noSuchFunction", true), kUnknownFunction);
}

TEST(CelBuiltins, CheckerRecordsTheResolvedFunctionOfEachCall) {
  auto sel = CompileSelector(
      "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('1Gi')) && "
      "sets.contains(['gpu.nvidia.com'], [device.driver])");
  ASSERT_TRUE(sel.ok()) << sel.status().message();
  ASSERT_NE(sel->calls, nullptr);
  const Expr* greater = FindCall(*sel->ast.root, "isGreaterThan");
  const Expr* quantity = FindCall(*sel->ast.root, "quantity");
  const Expr* sets = FindCall(*sel->ast.root, "contains");  // parsed as a receiver call on `sets`
  ASSERT_TRUE(greater && quantity && sets);
  EXPECT_EQ(sel->calls->Find(greater->id), ResolveFunction("isGreaterThan", true));
  EXPECT_EQ(sel->calls->Find(quantity->id), ResolveFunction("quantity", false));
  EXPECT_EQ(sel->calls->Find(sets->id), ResolveFunction("sets.contains", false));
  EXPECT_EQ(sel->calls->Find(FindCall(*sel->ast.root, "_&&_")->id), kUnknownFunction);
  EXPECT_EQ(sel->calls->Find(-1), kUnknownFunction);
  EXPECT_EQ(sel->calls->Find(1 << 20), kUnknownFunction);
}

TEST(CelBuiltins, PicksTheOverloadByReceiverKind) {
  EXPECT_EQ(Call("indexOf", true, {Value::String("abcb"), Value::String("b")}).DebugString(), "1");
  EXPECT_EQ(Call("lastIndexOf", true, {Value::String("abcb"), Value::String("b")}).DebugString(), "3");
  ListValue l{Value::Int(1), Value::Int(2)};
  EXPECT_EQ(Call("indexOf", true, {Value::List(l), Value::Int(2)}).DebugString(), "1");
  EXPECT_EQ(Call("reverse", true, {Value::List(l)}).DebugString(), "[2, 1]");
  EXPECT_EQ(Call("reverse", true, {Value::String("ab")}).DebugString(), "\"ba\"");
  EXPECT_EQ(Call("compareTo", true, {Value::Sem(*Semver::Parse("1.2.3")), Value::Sem(*Semver::Parse("1.2.4"))})
                .DebugString(),
            "-1");
  EXPECT_EQ(Call("compareTo", true, {Value::Quant(*Quantity::Parse("2")), Value::Quant(*Quantity::Parse("1"))})
                .DebugString(),
            "1");
}

TEST(CelBuiltins, UnmatchedCallsAnswerAsCelGo) {
  auto message = [](const Value& v) { return v.is_error() ? v.error_message() : "not an error: " + v.DebugString(); };
  Value q = Value::Quant(*Quantity::Parse("1Gi"));
  // A receiver kind with member functions: no such overload.
  EXPECT_EQ(message(Call("indexOf", true, {q, Value::Int(1)})), "no such overload: indexOf(kubernetes.Quantity, int)");
  EXPECT_EQ(message(Call("foo", true, {Value::String("a")})), "no such overload: foo(string)");
  EXPECT_EQ(message(Call("value", true, {Value::OptionalNone(), Value::Int(1)})),
            "no such overload: value(optional_type, int)");
  // Other receivers: unbound, except int / string / size.
  EXPECT_EQ(message(Call("indexOf", true, {Value::Int(1), Value::Int(1)})),
            "no such overload: indexOf(int, int) (unbound function)");
  EXPECT_EQ(message(Call("string", true, {Value::Int(1)})), "no such overload: string(int)");
  // Globals: a known function with arguments of the wrong kinds, an unknown one, the optional namespace.
  EXPECT_EQ(message(Call("int", false, {Value::Bool(true)})), "no such overload: int(bool)");
  EXPECT_EQ(message(Call("int", false, {Value::Int(1), Value::Int(2)})),
            "no such overload: int(int, int) (unbound function)");
  EXPECT_EQ(message(Call("math.greatest", false, {Value::Int(1)})),
            "no such overload: math.greatest(int) (unbound function)");
  EXPECT_EQ(message(Call("optional.foo", false, {Value::Int(1)})), "no such overload: optional.foo(int)");
}

TEST(CelBuiltins, ReceiverCallsAreChargedTheReceiversSize) {
  Value s = Value::String(std::string(64, 'a'));
  ListValue items(5, Value::Int(0));
  struct Case {
    std::string name;
    Value receiver;
    int64_t cost;
  };
  for (const Case& c : {Case{"contains", s, 4}, Case{"foo", s, 4}, Case{"size", s, 0}, Case{"sort", Value::List(items), 10},
                        Case{"foo", Value::List(items), 5}, Case{"foo", Value::Quant(*Quantity::Parse("1")), 0}}) {
    CallContext ctx(kDefaultCostLimit, nullptr);
    CallArgs args{c.receiver};
    if (c.name == "contains") args.push_back(Value::String("b"));
    Call(c.name, true, args, ctx);
    EXPECT_EQ(ctx.cost(), c.cost) << c.name << " on " << c.receiver.TypeName();
  }
  CallContext small(3, nullptr);
  Value r = Call("contains", true, {s, Value::String("b")}, small);
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.error_message(), "operation cancelled: actual cost limit exceeded");
}

}  // namespace
}  // namespace draguard::cel
