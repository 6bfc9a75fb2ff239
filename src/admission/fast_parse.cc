#include "fast_parse.h"

#include "envelope.h"

#include <array>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <vector>
#include <cstdint>
#include <string>
#include <utility>

#include <simdjson.h>

namespace draguard::admission::internal {
namespace {

namespace dom = simdjson::dom;

// Where a value sits, as far as the rule-fields decode cares. Only request.object is ever trimmed
// (the envelope is read straight from the parsed text, envelope.h).
enum class Ctx : std::uint8_t {
  kKeepAll,     // everything below is kept
  kObject,      // somewhere inside a reviewed object
  kMetadata,    // an object under a "metadata" key inside a reviewed object
  kSpec,        // an object under a "spec" key inside a reviewed object
  kContainers,  // the list under spec.containers / initContainers / ephemeralContainers
  kContainer,   // an element of such a list
};

// Container members no rule, no decision and no conversion outcome depends on: the bulk of real
// Pods (environment, command lines, probes, mounts). The reviewed objects keep everything else.
constexpr std::array<std::string_view, 11> kSkippedContainerFields = {
    "args", "command", "env", "envFrom", "lifecycle", "livenessProbe", "ports", "readinessProbe",
    "startupProbe", "volumeDevices", "volumeMounts"};

bool InObject(Ctx c) { return c >= Ctx::kObject; }

// The context of member `key` of an object in context `parent`; nullopt: leave the member out.
std::optional<Ctx> MemberCtx(Ctx parent, std::string_view key) {
  switch (parent) {
    case Ctx::kKeepAll: return Ctx::kKeepAll;
    case Ctx::kMetadata:
      if (key == "managedFields") return std::nullopt;
      break;
    case Ctx::kContainer:
      if (IsSkippedContainerField(key)) return std::nullopt;
      break;
    case Ctx::kSpec:
      if (key == "containers" || key == "initContainers" || key == "ephemeralContainers") return Ctx::kContainers;
      break;
    case Ctx::kObject:
    case Ctx::kContainers:
      break;
  }
  if (key == "metadata") return Ctx::kMetadata;
  if (key == "spec") return Ctx::kSpec;
  return Ctx::kObject;
}

Ctx ElementCtx(Ctx parent) {
  if (parent == Ctx::kContainers) return Ctx::kContainer;
  return InObject(parent) ? Ctx::kObject : Ctx::kKeepAll;
}

// Builds the document model of `e`. nlohmann_json's own parser is the reference: the same number
// types (non-negative integers unsigned, negative signed, others double) and, for a duplicate
// key, the last value.
Json Build(dom::element e, Ctx ctx) {
  switch (e.type()) {
    case dom::element_type::OBJECT: {
      Json out(Json::value_t::object);
      auto& members = out.get_ref<Json::object_t&>();
      const dom::object obj = e.get_object().value_unsafe();
      for (dom::key_value_pair field : obj) {
        std::optional<Ctx> c = MemberCtx(ctx, field.key);
        if (!c) continue;
        members.insert_or_assign(std::string(field.key), Build(field.value, *c));
      }
      return out;
    }
    case dom::element_type::ARRAY: {
      Json out(Json::value_t::array);
      auto& items = out.get_ref<Json::array_t&>();
      const dom::array a = e.get_array().value_unsafe();
      const Ctx c = ElementCtx(ctx);
      items.reserve(a.size());
      for (dom::element item : a) items.push_back(Build(item, c));
      return out;
    }
    case dom::element_type::STRING: return Json(std::string(e.get_string().value_unsafe()));
    case dom::element_type::INT64: {
      const std::int64_t v = e.get_int64().value_unsafe();
      if (v >= 0) return Json(static_cast<std::uint64_t>(v));
      return Json(v);
    }
    case dom::element_type::UINT64: return Json(e.get_uint64().value_unsafe());
    case dom::element_type::DOUBLE: return Json(e.get_double().value_unsafe());
    case dom::element_type::BOOL: return Json(e.get_bool().value_unsafe());
    case dom::element_type::NULL_VALUE: return Json(nullptr);
  }
  return Json(nullptr);
}

// The most kept members of one object that Rebuild merges into an existing object; a larger one is
// built anew.
constexpr std::size_t kMaxMergedMembers = 32;

// Makes `out` equal to what Build(e, ctx) returns, reusing the nodes and string buffers `out`
// already has (a recycled document of an earlier review, usually of the same shape): members are
// merged by key, arrays resized, strings assigned in place. Whatever `out` held and `e` does not
// is removed.
void Rebuild(Json& out, dom::element e, Ctx ctx) {
  switch (e.type()) {
    case dom::element_type::OBJECT: {
      if (!out.is_object()) {
        out = Build(e, ctx);
        return;
      }
      // The kept members, sorted by key as the map is; of equal keys the last stays last.
      struct Kept {
        std::string_view key;
        dom::element value;
        Ctx ctx;
      };
      union Slot {  // left unconstructed until used
        Slot() {}
        Kept k;
      };
      static_assert(std::is_trivially_copyable_v<Kept> && std::is_trivially_destructible_v<Kept>);
      std::array<Slot, kMaxMergedMembers> slots;
      auto kept = [&slots](std::size_t i) -> Kept& { return slots[i].k; };
      std::size_t n = 0;
      const dom::object obj = e.get_object().value_unsafe();
      for (dom::key_value_pair field : obj) {
        std::optional<Ctx> c = MemberCtx(ctx, field.key);
        if (!c) continue;
        if (n == slots.size()) {
          out = Build(e, ctx);
          return;
        }
        new (&slots[n++].k) Kept{field.key, field.value, *c};
      }
      for (std::size_t i = 1; i < n; ++i) {  // insertion sort: stable, few members
        const Kept k = kept(i);
        std::size_t j = i;
        for (; j > 0 && k.key < kept(j - 1).key; --j) kept(j) = kept(j - 1);
        kept(j) = k;
      }
      auto& members = out.get_ref<Json::object_t&>();
      auto it = members.begin();
      for (std::size_t i = 0; i < n; ++i) {
        const Kept& k = kept(i);
        if (i + 1 < n && kept(i + 1).key == k.key) continue;  // a later duplicate wins
        while (it != members.end() && std::string_view(it->first) < k.key) it = members.erase(it);
        if (it != members.end() && std::string_view(it->first) == k.key) {
          Rebuild(it->second, k.value, k.ctx);
          ++it;
        } else {
          members.emplace_hint(it, std::string(k.key), Build(k.value, k.ctx));
        }
      }
      members.erase(it, members.end());
      return;
    }
    case dom::element_type::ARRAY: {
      if (!out.is_array()) {
        out = Build(e, ctx);
        return;
      }
      auto& items = out.get_ref<Json::array_t&>();
      const dom::array a = e.get_array().value_unsafe();
      const Ctx c = ElementCtx(ctx);
      items.resize(a.size());
      std::size_t i = 0;
      for (dom::element item : a) Rebuild(items[i++], item, c);
      return;
    }
    case dom::element_type::STRING:
      if (out.is_string()) {
        out.get_ref<std::string&>().assign(e.get_string().value_unsafe());
        return;
      }
      break;
    default:
      break;
  }
  out = Build(e, ctx);
}

}  // namespace

bool IsSkippedContainerField(std::string_view key) {
  for (std::string_view k : kSkippedContainerFields) {
    if (k == key) return true;
  }
  return false;
}

// Parsers sized for DecodePool::kPooledBodyBytes, lent to one decode at a time.
class ParserPool {
 public:
  // A parser for texts up to kPooledBodyBytes at `max_depth`: a kept one, or a new one.
  std::unique_ptr<dom::parser> Take(std::size_t max_depth) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!free_.empty()) {
        std::unique_ptr<dom::parser> p = std::move(free_.back());
        free_.pop_back();
        if (p->max_depth() == max_depth) return p;
      }
    }
    auto p = std::make_unique<dom::parser>(DecodePool::kPooledBodyBytes);
    if (p->allocate(DecodePool::kPooledBodyBytes, max_depth) != simdjson::SUCCESS) return nullptr;
    return p;
  }
  // Gives a parser back; past kMaxPooledParsers it is freed.
  void Give(std::unique_ptr<dom::parser> p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < DecodePool::kMaxPooledParsers) free_.push_back(std::move(p));
  }
  // A recycled document (null when none is kept), for a decode to build its reviewed object into.
  Json TakeDocument() {
    std::lock_guard<std::mutex> lock(mu_);
    if (documents_.empty()) return Json();
    Json d = std::move(documents_.back());
    documents_.pop_back();
    return d;
  }
  // Keeps `d` for a later decode; past kMaxPooledParsers it is freed (by the caller, unlocked).
  void Recycle(Json& d) {
    std::lock_guard<std::mutex> lock(mu_);
    if (documents_.size() < DecodePool::kMaxPooledParsers) documents_.push_back(std::move(d));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<dom::parser>> free_;
  std::vector<Json> documents_;
};

namespace {

// A value of simdjson's DOM as an envelope node (envelope.h). `trim`: Take(false) keeps the rule
// fields only.
class TapeNode {
 public:
  // `recycled`: a document TakeObject may rebuild in place of allocating a new one, or null.
  TapeNode(dom::element e, bool trim, Json* recycled = nullptr) : e_(e), trim_(trim), recycled_(recycled) {}
  bool IsNull() const { return e_.is_null(); }
  bool IsObject() const { return e_.type() == dom::element_type::OBJECT; }
  bool IsString() const { return e_.type() == dom::element_type::STRING; }
  bool IsArray() const { return e_.type() == dom::element_type::ARRAY; }
  bool IsBool() const { return e_.type() == dom::element_type::BOOL; }
  // The last member named `key`, as nlohmann's parser keeps it.
  std::optional<TapeNode> Member(std::string_view key) const {
    std::optional<TapeNode> found;
    const dom::object obj = e_.get_object().value_unsafe();
    for (dom::key_value_pair field : obj) {
      if (field.key == key) found.emplace(field.value, trim_, recycled_);
    }
    return found;
  }
  template <class F>
  void ForEachMember(F f) const {
    const dom::object obj = e_.get_object().value_unsafe();
    for (dom::key_value_pair field : obj) f(field.key, TapeNode(field.value, trim_, recycled_));
  }
  std::string_view String() const { return e_.get_string().value_unsafe(); }
  bool Bool() const { return e_.get_bool().value_unsafe(); }
  // How many elements the array has (at least 0xFFFFFF when simdjson saturates): a capacity hint.
  std::size_t Size() const { return e_.get_array().value_unsafe().size(); }
  template <class F>
  bool ForEachElement(F f) const {
    const dom::array items = e_.get_array().value_unsafe();
    for (dom::element item : items) {
      if (!f(TapeNode(item, trim_, recycled_))) return false;
    }
    return true;
  }
  Json Take(bool whole) { return Build(e_, Scope(whole)); }
  // As Take, rebuilt in the recycled document when the decode has one (the reviewed object; a
  // null document is built anew by Rebuild).
  Json TakeObject(bool whole) {
    if (recycled_ == nullptr) return Take(whole);
    Rebuild(*recycled_, e_, Scope(whole));
    return std::move(*recycled_);
  }

 private:
  Ctx Scope(bool whole) const { return whole || !trim_ ? Ctx::kKeepAll : Ctx::kObject; }

  dom::element e_;
  bool trim_;
  Json* recycled_;
};

// Parses `text` with `parser` and reads the review from it; sets `*refused` when simdjson refuses it.
// `recycled`: a document to rebuild request.object into, or null.
Result<AdmissionRequest> DecodeWith(dom::parser& parser, std::string_view text, bool padded, bool trim,
                                    bool* refused, Json* recycled = nullptr) {
  dom::element root;
  if (parser.parse(text.data(), text.size(), /*realloc_if_needed=*/!padded).get(root) != simdjson::SUCCESS) {
    *refused = true;
    return Status::InvalidArgument("refused by the fast parser");
  }
  return DecodeEnvelope(TapeNode(root, trim, recycled));
}

// A parser lent by a pool, given back when the lease ends.
class Lease {
 public:
  Lease(ParserPool* pool, std::unique_ptr<dom::parser> parser) : pool_(pool), parser_(std::move(parser)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease();
  dom::parser& parser() { return *parser_; }

 private:
  ParserPool* pool_;
  std::unique_ptr<dom::parser> parser_;
};

}  // namespace

Lease::~Lease() { pool_->Give(std::move(parser_)); }

Result<AdmissionRequest> FastDecode(std::string_view text, std::size_t readable_past_end, std::size_t max_depth,
                                    bool rule_fields_only, ParserPool* pool, bool* refused) {
  static_assert(kBodyPadding >= simdjson::SIMDJSON_PADDING, "the parser reads this far past a text");
  *refused = false;
  const bool padded = readable_past_end >= kBodyPadding;
  if (pool && text.size() <= DecodePool::kPooledBodyBytes) {
    if (std::unique_ptr<dom::parser> parser = pool->Take(max_depth)) {
      Lease lease(pool, std::move(parser));
      Json recycled = text.size() <= DecodePool::kRecycledBodyBytes ? pool->TakeDocument() : Json();
      return DecodeWith(lease.parser(), text, padded, rule_fields_only, refused, &recycled);
    }
  }
  // One parser for this call: its buffers (about 14 bytes per input byte, touched only as far as
  // the text needs) are freed with the call, so a burst of large bodies leaves no arena behind.
  dom::parser parser(text.size());
  if (parser.allocate(text.size(), max_depth) != simdjson::SUCCESS) {
    *refused = true;
    return Status::ResourceExhausted("the fast parser could not allocate");
  }
  return DecodeWith(parser, text, padded, rule_fields_only, refused);
}

}  // namespace draguard::admission::internal

namespace draguard::admission {

DecodePool::DecodePool() : parsers_(std::make_unique<internal::ParserPool>()) {}
DecodePool::~DecodePool() = default;

void DecodePool::Recycle(Json& object, std::size_t body_bytes) const {
  if (body_bytes > kRecycledBodyBytes || !object.is_object()) return;
  parsers_->Recycle(object);
}

}  // namespace draguard::admission
