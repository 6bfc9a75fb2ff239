// `draguard convert`: rewrites the legacy GPU requests of a manifest file offline, exactly as
// /mutate would at CREATE, and prints the converted manifests followed by the
// ResourceClaimTemplates they reference.
//
// Exit codes (like diff/grep, so a script can tell "not everything converted" from "broken"):
// 0 everything converted or nothing needed converting, 1 some pod spec could not be converted
// (that document is printed unchanged), 2 usage error, unreadable input or bad policy/topology.
#include <iostream>
#include <memory>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "draguard/mutation/mutation.h"
#include "draguard/policy/store.h"
#include "draguard/topology/store.h"
#include "draguard/yamljson/yamljson.h"
#include "flags.h"

namespace draguard::cli {
namespace {

using nlohmann::json;

constexpr int kConvertOk = 0;
constexpr int kConvertIncomplete = 1;
constexpr int kConvertUsage = 2;

constexpr const char* kConvertUsageText =
    "usage: draguard convert -f FILE|- [--config POLICY] [--topology-dir DIR|FILE] [--namespace NS] "
    "[-o yaml|json] [--draw DIR]\n";

// "Kind/name" of a document, for messages.
std::string Describe(const json& doc) {
  if (!doc.is_object()) return "(not an object)";
  std::string kind = doc.value("kind", "");
  std::string name;
  if (auto md = doc.find("metadata"); md != doc.end() && md->is_object()) {
    name = md->value("name", "");
    if (name.empty()) name = md->value("generateName", "");
  }
  return (kind.empty() ? "(no kind)" : kind) + "/" + (name.empty() ? "(no name)" : name);
}

struct Document {
  std::string label;  // "document 2" or "document 2 item 0"
  json value;
};

}  // namespace

int Convert(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  Flags f = ParseFlags(args, {"-f", "--file", "--config", "--topology-dir", "--namespace", "-o", "--output", "--draw"}, {});
  if (!f.error.empty() || !f.positional.empty()) {
    err << "draguard convert: " << (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error)
        << "\n" << kConvertUsageText;
    return kConvertUsage;
  }
  std::string file = f.Has("-f") ? f.Get("-f") : f.Get("--file");
  if (file.empty()) {
    err << "draguard convert: -f FILE|- is required\n" << kConvertUsageText;
    return kConvertUsage;
  }
  std::string format = CliOutputFormat(f, "convert", err);
  if (format.empty()) return kConvertUsage;
  std::string default_ns = f.Get("--namespace", "default");
  if (default_ns.empty()) default_ns = "default";

  auto text = ReadCliInput(file, in);
  if (!text.ok()) {
    err << "draguard convert: " << text.status().message() << "\n";
    return kConvertUsage;
  }
  auto parsed = yamljson::ParseDocuments(*text);
  if (!parsed.ok()) {
    err << "draguard convert: " << file << ": " << parsed.status().message() << "\n";
    return kConvertUsage;
  }

  policy::PolicyStore policies;
  if (!LoadCliPolicy(f, policies, "convert", err)) return kConvertUsage;
  auto store = LoadCliTopology(f, "convert", err);
  if (store == nullptr) return kConvertUsage;
  auto topo = store->Current();
  auto pol = policies.Current();

  // Flatten: a `kind: List` contributes its items, in order.
  std::vector<json> input = std::move(parsed).value();
  std::vector<Document> docs;
  for (std::size_t i = 0; i < input.size(); ++i) {
    json& d = input[i];
    const std::string label = "document " + std::to_string(i);
    if (d.is_object() && d.value("kind", "") == "List" && d.contains("items") && d["items"].is_array()) {
      for (std::size_t k = 0; k < d["items"].size(); ++k) {
        docs.push_back({label + " item " + std::to_string(k), std::move(d["items"][k])});
      }
    } else {
      docs.push_back({label, std::move(d)});
    }
  }

  const std::string draw_dir = f.Get("--draw");
  if (f.Has("--draw") && draw_dir.empty()) {
    err << "draguard convert: --draw needs a directory\n" << kConvertUsageText;
    return kConvertUsage;
  }
  std::set<std::string> drawn;
  std::vector<json> objects;
  std::vector<json> templates;
  std::vector<json> domains;  // ComputeDomains of multi-node jobs' Pods (mutation.computeDomains)
  std::set<std::pair<std::string, std::string>> seen;  // (namespace, name)
  int converted = 0, refused = 0;
  for (auto& doc : docs) {
    if (!doc.value.is_object()) {
      objects.push_back(std::move(doc.value));
      continue;
    }
    const std::string where = doc.label + " (" + Describe(doc.value) + ")";
    mutation::ObjectConversion c = mutation::ConvertObject(doc.value, default_ns, *pol, topo.get());
    if (!draw_dir.empty() && (c.changed || !c.errors.empty()) &&
        !WritePlacementPictures(draw_dir, doc.value, default_ns, *pol, topo.get(), "convert", drawn, err)) {
      return kConvertUsage;
    }
    for (const auto& w : c.warnings) err << "draguard convert: warning: " << where << ": " << w << "\n";
    if (!c.errors.empty()) {
      for (const auto& e : c.errors) err << "draguard convert: error: " << where << ": " << e << "\n";
      ++refused;
      objects.push_back(std::move(doc.value));  // printed unchanged, its templates not needed
      continue;
    }
    if (!c.changed) {
      objects.push_back(std::move(doc.value));
      continue;
    }
    ++converted;
    objects.push_back(std::move(c.object));
    for (auto& t : c.templates) {
      const json& tmpl = t.object;
      std::string ns = tmpl.contains("metadata") ? tmpl["metadata"].value("namespace", "") : "";
      if (seen.emplace(ns, t.name).second) templates.push_back(std::move(t.object));
    }
    for (auto& cd : c.compute_domains) {
      const std::string ns = cd.object["metadata"].value("namespace", "");
      if (seen.emplace(ns, cd.name).second) domains.push_back(std::move(cd.object));
    }
  }

  const std::size_t template_count = templates.size();
  const std::size_t domain_count = domains.size();
  for (auto& t : templates) objects.push_back(std::move(t));
  for (auto& d : domains) objects.push_back(std::move(d));
  PrintObjects(out, format, std::move(objects));
  err << "draguard convert: " << converted << " converted, " << refused << " not convertible, "
      << (docs.size() - converted - refused) << " unchanged; " << template_count
      << " ResourceClaimTemplate(s)" << (domain_count > 0 ? ", " + std::to_string(domain_count) + " ComputeDomain(s)" : "")
      << "\n";
  return refused > 0 ? kConvertIncomplete : kConvertOk;
}

}  // namespace draguard::cli
