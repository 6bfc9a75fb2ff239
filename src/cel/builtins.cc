// The builtin function table and the dispatch of calls on it. See builtins.h.
#include "builtins.h"

#include <unordered_map>

namespace draguard::cel::internal {
namespace {

// One function: its overloads, by receiver kind for member functions.
struct Function {
  std::string_view name;
  bool member = false;
  std::vector<const Overload*> overloads;
};

class Registry {
 public:
  Registry() {
    for (auto library : {CoreOverloads(), OptionalOverloads(), StringOverloads(), RegexOverloads(), ListOverloads(),
                         QuantityOverloads(), SemverOverloads()}) {
      for (const Overload& o : library) Add(o);
    }
  }

  FunctionId Resolve(std::string_view name, bool member) const {
    const auto& index = member ? member_ : global_;
    auto it = index.find(name);
    return it == index.end() ? kUnknownFunction : it->second;
  }
  const Function& At(FunctionId id) const { return functions_[id]; }

 private:
  void Add(const Overload& o) {
    auto& index = o.member ? member_ : global_;
    auto [it, added] = index.emplace(o.function, static_cast<FunctionId>(functions_.size()));
    if (added) functions_.push_back(Function{o.function, o.member, {}});
    functions_[it->second].overloads.push_back(&o);
  }

  std::vector<Function> functions_;
  std::unordered_map<std::string_view, FunctionId> global_, member_;
};

const Registry& Builtins() {
  static const Registry kRegistry;
  return kRegistry;
}

std::string ArgTypeList(const CallArgs& args) {
  std::string s = "(";
  for (size_t i = 0; i < args.size(); ++i) s += (i ? ", " : "") + args[i].TypeName();
  return s + ")";
}

Value Unbound(std::string_view name, const CallArgs& args) {
  return Value::Error("no such overload: " + std::string(name) + ArgTypeList(args) + " (unbound function)");
}

// Charges a member call on a string or list receiver; false when the budget is exhausted.
bool ChargeReceiver(const Value& receiver, CallContext& ctx) {
  if (receiver.kind() == ValueKind::kString) return ctx.Charge(static_cast<int64_t>(receiver.string_value().size() / 16));
  if (receiver.kind() == ValueKind::kList) return ctx.Charge(static_cast<int64_t>(receiver.list_value().size()));
  return true;
}

bool HasReceiverLibrary(ValueKind k) {
  return k == ValueKind::kQuantity || k == ValueKind::kSemver || k == ValueKind::kOptional ||
         k == ValueKind::kString || k == ValueKind::kList;
}

// The answer to a call no overload accepts. A receiver of a kind with member functions answers
// "no such overload" (string and list receivers after their charge), as do operator names, the
// optional namespace and member int / string / size; anything else is an unbound function.
Value Unmatched(std::string_view name, bool member, const CallArgs& args, CallContext& ctx) {
  bool op_name = name.size() >= 3 && name[0] == '_';
  if (member && args.size() >= 1) {
    ValueKind k = args[0].kind();
    if (HasReceiverLibrary(k) && !op_name && !ChargeReceiver(args[0], ctx)) return CallContext::CostError();
    if (HasReceiverLibrary(k) || op_name) return NoOverload(name, args);
    if (name == "int" || name == "string" || name == "size") return NoOverload(name, args);
    return Unbound(name, args);
  }
  if (op_name || name.starts_with("optional.")) return NoOverload(name, args);
  return Unbound(name, args);
}

// The overload of `f` serving these arguments, or null.
const Overload* Select(const Function& f, const CallArgs& args) {
  for (const Overload* o : f.overloads) {
    if (!o->receiver || (args.size() >= 1 && args[0].kind() == *o->receiver)) return o;
  }
  return nullptr;
}

}  // namespace

Value CallContext::CostError() { return Value::Error("operation cancelled: actual cost limit exceeded"); }

FunctionId ResolveFunction(std::string_view name, bool member) { return Builtins().Resolve(name, member); }

std::string_view FunctionName(FunctionId id) { return Builtins().At(id).name; }

bool IsMemberFunction(FunctionId id) { return Builtins().At(id).member; }

Value CallFunction(FunctionId id, std::string_view name, bool member, const CallArgs& args, CallContext& ctx) {
  const Overload* o = id == kUnknownFunction ? nullptr : Select(Builtins().At(id), args);
  if (o == nullptr) return Unmatched(name, member, args, ctx);
  // An overload for one receiver kind owns every call on that kind.
  bool owns_receiver = o->receiver.has_value();
  if (owns_receiver && !ChargeReceiver(args[0], ctx)) return CallContext::CostError();
  if (std::optional<Value> r = o->fn(name, args, ctx)) return std::move(*r);
  return owns_receiver ? NoOverload(name, args) : Unmatched(name, member, args, ctx);
}

Value NoOverload(std::string_view name, const CallArgs& args) {
  return Value::Error("no such overload: " + std::string(name) + ArgTypeList(args));
}

}  // namespace draguard::cel::internal
