#include "pod_specs.h"

namespace draguard::engine {

std::string EscapePointerToken(const std::string& token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<PodSpecRef> FindPodSpecs(const admission::AdmissionRequest& request) {
  std::vector<PodSpecRef> out;
  const auto& obj = request.object;
  if (!obj.is_object()) return out;
  if (request.kind.group.empty() && request.kind.kind == "Pod") {
    auto it = obj.find("spec");
    if (it != obj.end() && it->is_object()) out.push_back({"/spec", &*it});
  }
  return out;
}

std::vector<ContainerRef> Containers(const PodSpecRef& spec) {
  std::vector<ContainerRef> out;
  for (const char* field : {"containers", "initContainers"}) {
    auto it = spec.spec->find(field);
    if (it == spec.spec->end() || !it->is_array()) continue;
    bool init = std::string(field) == "initContainers";
    for (std::size_t i = 0; i < it->size(); ++i) {
      const auto& c = (*it)[i];
      if (!c.is_object()) continue;
      ContainerRef ref;
      ref.pointer = spec.pointer + "/" + field + "/" + std::to_string(i);
      ref.container = &c;
      auto n = c.find("name");
      if (n != c.end() && n->is_string()) ref.name = n->get<std::string>();
      ref.kind = "container";
      if (init) {
        auto rp = c.find("restartPolicy");
        bool sidecar = rp != c.end() && rp->is_string() && *rp == "Always";
        ref.kind = sidecar ? "sidecar" : "initContainer";
      }
      out.push_back(std::move(ref));
    }
  }
  return out;
}

}  // namespace draguard::engine
