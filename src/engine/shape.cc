#include "draguard/engine/shape.h"

#include "draguard/dra/pod_specs.h"

namespace draguard::engine {
namespace {

using admission::Json;

const char* TypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "a list";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::null: return "null";
    default: return "a number";
  }
}

class Checker {
 public:
  Checker(const admission::AdmissionRequest& req) : req_(req) {}

  bool Full() const { return errors_.size() >= kMaxShapeErrors; }
  std::vector<std::string> Take() { return std::move(errors_); }

  // Follows `tokens` from `node` (as pod_specs' Expand does), reporting containers of the wrong
  // type on the way, and checks every node reached with `leaf`.
  template <typename Leaf>
  void Walk(const Json& node, const std::string& pointer, const std::vector<std::string>& tokens, std::size_t i,
            const Leaf& leaf) {
    if (Full() || node.is_null()) return;
    if (i == tokens.size()) {
      if (!Unchanged(pointer, node)) leaf(node, pointer);
      return;
    }
    if (!node.is_object()) return Bad(pointer, "an object", node);
    const std::string& tok = tokens[i];
    if (tok == "*") {
      for (const auto& [k, v] : node.items()) Walk(v, pointer + "/" + dra::EscapePointerToken(k), tokens, i + 1, leaf);
      return;
    }
    const bool list = tok.size() > 2 && tok.compare(tok.size() - 2, 2, "[]") == 0;
    const std::string key = list ? tok.substr(0, tok.size() - 2) : tok;
    auto it = node.find(key);
    if (it == node.end() || it->is_null()) return;
    const std::string p = pointer + "/" + dra::EscapePointerToken(key);
    if (!list) return Walk(*it, p, tokens, i + 1, leaf);
    if (!it->is_array()) return Bad(p, "a list", *it);
    for (std::size_t j = 0; j < it->size(); ++j) Walk((*it)[j], p + "/" + std::to_string(j), tokens, i + 1, leaf);
  }

  // A PodTemplateSpec ({metadata, spec}) or a bare PodSpec.
  void Template(const Json& node, const std::string& pointer) {
    if (!node.is_object()) return Bad(pointer, "an object (a pod template)", node);
    if (node.contains("containers") || node.contains("initContainers")) return PodSpec(node, pointer);
    auto spec = node.find("spec");
    if (spec == node.end() || spec->is_null()) return;
    if (!spec->is_object()) return Bad(pointer + "/spec", "an object (a pod spec)", *spec);
    PodSpec(*spec, pointer + "/spec");
  }

  void PodSpec(const Json& spec, const std::string& pointer) {
    for (const char* field : {"containers", "initContainers", "ephemeralContainers"}) {
      const Json* list = Present(spec, field);
      if (list == nullptr) continue;
      const std::string p = pointer + "/" + field;
      if (!list->is_array()) {
        Bad(p, "a list of containers", *list);
        continue;
      }
      for (std::size_t i = 0; i < list->size(); ++i) Container((*list)[i], p + "/" + std::to_string(i));
    }
    Resources(spec, pointer);
    if (const Json* claims = Present(spec, "resourceClaims"); claims != nullptr && !claims->is_array()) {
      Bad(pointer + "/resourceClaims", "a list", *claims);
    }
  }

  void Container(const Json& c, const std::string& pointer) {
    if (!c.is_object()) return Bad(pointer, "an object (a container)", c);
    if (const Json* name = Present(c, "name"); name != nullptr && !name->is_string()) {
      Bad(pointer + "/name", "a string", *name);
    }
    Resources(c, pointer);
  }

 private:
  static const Json* Present(const Json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  // obj.resources: {limits, requests: maps of quantities, claims: a list}.
  void Resources(const Json& obj, const std::string& pointer) {
    const Json* r = Present(obj, "resources");
    if (r == nullptr) return;
    const std::string p = pointer + "/resources";
    if (!r->is_object()) return Bad(p, "an object (resource requirements)", *r);
    for (const char* field : {"limits", "requests"}) {
      const Json* m = Present(*r, field);
      if (m == nullptr) continue;
      const std::string mp = p + "/" + field;
      if (!m->is_object()) {
        Bad(mp, "a map of resource names to quantities", *m);
        continue;
      }
      for (const auto& [k, v] : m->items()) {
        if (!v.is_string() && !v.is_number()) Bad(mp + "/" + dra::EscapePointerToken(k), "a quantity", v);
      }
    }
    if (const Json* claims = Present(*r, "claims"); claims != nullptr && !claims->is_array()) {
      Bad(p + "/claims", "a list", *claims);
    }
  }

  void Bad(const std::string& pointer, const char* expected, const Json& found) {
    if (Full()) return;
    errors_.push_back((pointer.empty() ? "/" : pointer) + " must be " + expected + ", not " + TypeName(found));
  }

  // On UPDATE, a template equal to the old object's at the same place was judged before.
  bool Unchanged(const std::string& pointer, const Json& node) const {
    if (req_.operation != admission::Operation::kUpdate || !req_.old_object.is_object()) return false;
    try {
      Json::json_pointer p(pointer);
      return req_.old_object.contains(p) && req_.old_object.at(p) == node;
    } catch (...) {
      return false;
    }
  }

  const admission::AdmissionRequest& req_;
  std::vector<std::string> errors_;
};

}  // namespace

std::vector<std::string> CustomResourceShapeErrors(const admission::AdmissionRequest& req, const policy::Policy& policy) {
  if (!req.object.is_object()) return {};
  if (req.operation != admission::Operation::kCreate && req.operation != admission::Operation::kUpdate) return {};
  Checker check(req);
  for (const auto& cr : policy.custom_resources) {
    if (cr.group != req.kind.group || cr.kind != req.kind.kind) continue;
    for (const auto& t : cr.pod_templates) {
      check.Walk(req.object, "", dra::SplitPath(t), 0,
                 [&](const Json& n, const std::string& p) { check.Template(n, p); });
    }
    for (const auto& c : cr.containers) {
      check.Walk(req.object, "", dra::SplitPath(c), 0,
                 [&](const Json& n, const std::string& p) { check.Container(n, p); });
    }
  }
  return check.Take();
}

}  // namespace draguard::engine
