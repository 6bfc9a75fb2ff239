// `draguard review`: answers one AdmissionReview offline, exactly as the server would.
#include <chrono>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "draguard/base64.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/store.h"
#include "draguard/topology/store.h"
#include "draguard/webhook/reviewer.h"
#include "draguard/yamljson/yamljson.h"
#include "flags.h"

namespace draguard::cli {

int Review(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
           std::ostream& err) {
  Flags f = ParseFlags(args, {"-f", "--file", "--config", "--topology-dir", "--namespace", "--draw"},
                       {"--mutate", "--show-patch"});
  if (!f.error.empty() || !f.positional.empty() || (f.Has("--draw") && (!f.Has("--mutate") || f.Get("--draw").empty()))) {
    err << "draguard review: "
        << (!f.error.empty()        ? f.error
            : !f.positional.empty() ? "unexpected argument " + f.positional.front()
                                    : std::string("--draw DIR needs --mutate and a directory"))
        << "\nusage: draguard review [--mutate [--show-patch] [--draw DIR]] -f FILE|- [--config FILE]\n";
    return kExitUsage;
  }
  std::string file = f.Has("-f") ? f.Get("-f") : f.Get("--file");
  if (file.empty()) {
    err << "draguard review: -f FILE|- is required\n";
    return kExitUsage;
  }
  auto input = ReadCliInput(file, in);
  if (!input.ok()) {
    err << "draguard review: " << input.status().message() << "\n";
    return kExitUsage;
  }
  const std::string& text = *input;
  // YAML input is converted to JSON first; JSON goes through untouched.
  std::string body = text;
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] != '{') {
    auto docs = yamljson::ParseDocuments(text);
    if (!docs.ok()) {
      err << "draguard review: " << file << ": " << docs.status().message() << "\n";
      return kExitRuntime;
    }
    if (docs->size() != 1) {
      err << "draguard review: " << file << ": expected one AdmissionReview document\n";
      return kExitRuntime;
    }
    body = docs->front().dump();
  }

  policy::PolicyStore policies({f.Get("--namespace", "draguard")});
  if (!LoadCliPolicy(f, policies, "review", err)) return kExitUsage;
  topology::Store topology_store;
  {
    std::string dir = f.Get("--topology-dir");
    auto source = dir.empty() ? topology::MakeBundledExampleSource() : topology::MakeDirectorySource(dir);
    if (Status st = topology_store.Start(std::move(source), /*watch=*/false); !st.ok()) {
      err << "draguard review: --topology-dir: " << st.message() << "\n";
      return kExitUsage;
    }
  }
  auto topo = topology_store.Current();
  engine::Registry rules = engine::DefaultRegistry();
  webhook::Reviewer reviewer(rules);
  auto kind = f.Has("--mutate") ? admission::WebhookKind::kMutating : admission::WebhookKind::kValidating;
  webhook::ReviewOutcome outcome =
      reviewer.Review(body, kind, *policies.Current(), topo.get(), std::chrono::system_clock::now(),
                      std::chrono::steady_clock::now() + webhook::kDefaultReviewTimeout);
  if (outcome.http_status != 200) {
    err << "draguard review: HTTP " << outcome.http_status << ": " << outcome.error << "\n";
    out << outcome.body << "\n";
    return kExitRuntime;
  }
  // Pretty-print the exact bytes the server would send; add the decoded patch for humans. stdout
  // stays the response alone (one JSON document) unless --show-patch asks for the patch there too.
  nlohmann::json doc = nlohmann::json::parse(outcome.body, nullptr, false);
  out << doc.dump(2) << "\n";
  const nlohmann::json* patch = nullptr;
  if (doc.is_object()) {
    if (auto r = doc.find("response"); r != doc.end() && r->is_object()) {
      if (auto p = r->find("patch"); p != r->end() && p->is_string()) patch = &*p;
    }
  }
  if (f.Has("--draw")) {
    // The object the review converted, as /mutate saw it.
    const nlohmann::json review = nlohmann::json::parse(body, nullptr, false);
    const nlohmann::json* request = review.is_object() && review.contains("request") ? &review["request"] : nullptr;
    if (request != nullptr && request->is_object() && request->contains("object")) {
      std::set<std::string> drawn;
      const std::string ns = request->value("namespace", "");
      if (!WritePlacementPictures(f.Get("--draw"), (*request)["object"], ns.empty() ? "default" : ns,
                                  *policies.Current(), topo.get(), "review", drawn, err)) {
        return kExitRuntime;
      }
    }
  }
  if (patch != nullptr) {
    std::ostream& dst = f.Has("--show-patch") ? out : err;
    auto raw = Base64Decode(patch->get<std::string>());
    nlohmann::json ops = raw.ok() ? nlohmann::json::parse(*raw, nullptr, false) : nlohmann::json();
    if (ops.is_discarded() || !raw.ok()) {
      err << "draguard review: response.patch does not decode to JSON\n";
    } else {
      dst << "# patch (decoded from response.patch):\n" << ops.dump(2) << "\n";
    }
  }
  return kExitOk;
}

}  // namespace draguard::cli
