// `draguard topology show`: the topology model of hwloc exports as JSON or a table.
// `draguard topology slices`: the ResourceSlices (or DeviceClasses) the DRA drivers would publish.
// `draguard topology draw`: an SVG picture per node.
#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "draguard/dra/resource_slices.h"
#include "draguard/k8s/names.h"
#include "draguard/topology/draw.h"
#include "draguard/write_file.h"
#include "draguard/topology/format.h"
#include "draguard/topology/snapshot.h"

namespace draguard::cli {
namespace {

constexpr const char* kUsage =
    "usage: draguard topology show -f FILE|DIR [-o json|table] [--node NAME]\n"
    "  -f, --file FILE|DIR   hwloc XML export, or a directory of <node>.xml / <node>.hwloc.xml files\n"
    "  -o, --output FORMAT   json (default) or table\n"
    "      --node NAME       show only this node\n"
    "usage: draguard topology export [-o FILE] [--nvml-library PATH] [--no-nvml]   (see export --help)\n"
    "usage: draguard topology slices -f FILE|DIR [--node NAME] [-o yaml|json] [--cpu-mode none|grouped|individual]\n"
    "                                [--device-classes]\n"
    "                                [--nic-numa-attribute driver|standard]\n"
    "  --cpu-mode MODE       also the CPU devices of dra-driver-cpu (dra.cpu): grouped (one per NUMA node,\n"
    "                        the driver's default), individual (one per CPU) or none (default)\n"
    "  --nic-numa-attribute  what dranet publishes as NUMA node: driver (dra.net/numaNode; v1.4.0, default)\n"
    "                        or standard (also resource.kubernetes.io/numaNode; its main branch after v1.4.0)\n"
    "usage: draguard topology draw -f FILE|DIR [-o FILE.svg|DIR] [--node NAME] [--racks]\n"
    "  one SVG per node: to stdout (one node), to FILE.svg (one node), or DIR/<node>.svg, and with\n"
    "  DIR, when some node is in an NVLink clique, DIR/_nvlink-cliques.svg: the nodes by clique\n"
    "  --racks               only that rack view of all nodes: to stdout, FILE.svg or DIR\n";

// The flags `topology show` and `topology slices` share (-f, -o, --node, -h), and `switch_flag`
// (empty: none), a flag without a value. Returns -1 to go on, else the exit code to return.
struct FileFlags {
  std::string path;
  std::string output;
  std::string node;
  bool switch_set = false;
};
int ParseFileFlags(const std::vector<std::string>& args, std::string_view cmd, std::string_view switch_flag,
                   FileFlags& f, std::ostream& out, std::ostream& err) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= args.size()) return false;
      dst = args[++i];
      return true;
    };
    bool ok = true;
    if (a == "-f" || a == "--file") {
      ok = value(f.path);
    } else if (a.rfind("--file=", 0) == 0) {
      f.path = a.substr(7);
    } else if (a == "-o" || a == "--output") {
      ok = value(f.output);
    } else if (a.rfind("--output=", 0) == 0) {
      f.output = a.substr(9);
    } else if (a == "--node") {
      ok = value(f.node);
    } else if (a.rfind("--node=", 0) == 0) {
      f.node = a.substr(7);
    } else if (!switch_flag.empty() && a == switch_flag) {
      f.switch_set = true;
    } else if (a == "-h" || a == "--help") {
      out << kUsage;
      return kExitOk;
    } else {
      err << cmd << ": unknown argument \"" << a << "\"\n" << kUsage;
      return kExitUsage;
    }
    if (!ok) {
      err << cmd << ": " << a << " needs a value\n" << kUsage;
      return kExitUsage;
    }
  }
  return -1;
}

// Loads the exports of `path` for `cmd`, printing the loader's warnings; nullptr (error printed)
// when nothing could be loaded.
std::shared_ptr<const topology::Snapshot> Load(const std::string& path, std::string_view cmd, std::ostream& err) {
  std::vector<topology::LoadProblem> problems;
  auto snap = topology::LoadSnapshot(path, topology::LoaderLimits{}, &problems);
  if (!snap.ok()) {
    err << cmd << ": " << snap.status().message() << "\n";
    return nullptr;
  }
  for (const topology::LoadProblem& p : problems) {
    err << cmd << ": warning: " << (p.reason == topology::LoadErrorReason::kConflict ? "" : "skipped ")
        << p.status.message() << "\n";
  }
  return *snap;
}

int Show(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FileFlags f;
  f.output = "json";
  if (const int rc = ParseFileFlags(args, "topology show", "", f, out, err); rc >= 0) return rc;
  const std::string& path = f.path;
  const std::string& output = f.output;
  const std::string& node = f.node;
  if (path.empty()) {
    err << "topology show: -f FILE|DIR is required\n" << kUsage;
    return kExitUsage;
  }
  if (output != "json" && output != "table") {
    err << "topology show: unknown output format \"" << output << "\" (json or table)\n";
    return kExitUsage;
  }
  const std::shared_ptr<const topology::Snapshot> snap = Load(path, "topology show", err);
  if (snap == nullptr) return kExitRuntime;
  const topology::Snapshot& s = *snap;
  if (!node.empty() && s.Find(node) == nullptr) {
    err << "topology show: node \"" << node << "\" not found in " << path << "\n";
    return kExitRuntime;
  }
  if (s.node_count() == 0) {
    err << "topology show: no loadable hwloc export in " << path << "\n";
    return kExitRuntime;
  }
  out << (output == "json" ? topology::FormatJson(s, node) : topology::FormatTable(s, node));
  return kExitOk;
}

int Slices(const std::vector<std::string>& all_args, std::ostream& out, std::ostream& err) {
  // --cpu-mode and --nic-numa-attribute are only `slices` flags: taken out before the shared ones
  // are parsed.
  std::vector<std::string> args;
  std::map<std::string, std::string> own = {{"--cpu-mode", "none"}, {"--nic-numa-attribute", "driver"}};
  for (size_t i = 0; i < all_args.size(); ++i) {
    const std::string& a = all_args[i];
    const std::string flag = a.substr(0, a.find('='));
    auto it = own.find(flag);
    if (it == own.end()) {
      args.push_back(a);
    } else if (flag.size() < a.size()) {
      it->second = a.substr(flag.size() + 1);
    } else if (i + 1 >= all_args.size()) {
      err << "topology slices: " << flag << " needs a value\n" << kUsage;
      return kExitUsage;
    } else {
      it->second = all_args[++i];
    }
  }
  const std::string& cpu_mode = own["--cpu-mode"];
  dra::SliceOptions options;
  if (const std::string& nic = own["--nic-numa-attribute"]; nic == "standard") {
    options.nic_standard_numa_node = true;
  } else if (nic != "driver") {
    err << "topology slices: unknown --nic-numa-attribute \"" << nic << "\" (driver or standard)\n";
    return kExitUsage;
  }
  if (cpu_mode == "grouped") {
    options.cpu_mode = topology::CpuDeviceMode::kGrouped;
  } else if (cpu_mode == "individual") {
    options.cpu_mode = topology::CpuDeviceMode::kIndividual;
  } else if (cpu_mode != "none") {
    err << "topology slices: unknown --cpu-mode \"" << cpu_mode << "\" (none, grouped or individual)\n";
    return kExitUsage;
  }
  FileFlags f;
  f.output = "yaml";
  if (const int rc = ParseFileFlags(args, "topology slices", "--device-classes", f, out, err); rc >= 0) return rc;
  const std::string& path = f.path;
  const std::string& output = f.output;
  std::string node = f.node;
  const bool classes = f.switch_set;
  if (output != "yaml" && output != "json") {
    err << "topology slices: unknown output format \"" << output << "\" (yaml or json)\n";
    return kExitUsage;
  }
  if (classes) {
    if (!path.empty() || !node.empty()) {
      err << "topology slices: --device-classes takes no -f or --node\n" << kUsage;
      return kExitUsage;
    }
    std::vector<std::string> comments;
    auto objects = dra::BuildDeviceClasses(&comments, options.cpu_mode != topology::CpuDeviceMode::kNone);
    PrintObjects(out, output, std::move(objects), comments);
    return kExitOk;
  }
  if (path.empty()) {
    err << "topology slices: -f FILE|DIR is required\n" << kUsage;
    return kExitUsage;
  }
  std::error_code ec;
  const bool dir = std::filesystem::is_directory(path, ec);
  if (!dir && !node.empty() && !k8s::IsDnsSubdomain(node)) {
    err << "topology slices: --node \"" << node
        << "\" is not a valid Kubernetes node name (lower-case letters, digits, '-' and '.')\n";
    return kExitUsage;
  }
  const std::shared_ptr<const topology::Snapshot> snap = Load(path, "topology slices", err);
  if (snap == nullptr) return kExitRuntime;
  const topology::Snapshot& s = *snap;
  if (s.node_count() == 0) {
    err << "topology slices: no loadable hwloc export in " << path << "\n";
    return kExitRuntime;
  }
  // (topology node, Kubernetes node name) in name order.
  std::vector<std::pair<const topology::NodeTopology*, std::string>> nodes;
  if (dir) {
    if (!node.empty() && s.Find(node) == nullptr) {
      err << "topology slices: node \"" << node << "\" not found in " << path << "\n";
      return kExitRuntime;
    }
    for (const auto& n : s.nodes()) {
      if (node.empty() || n->name == node) nodes.emplace_back(n.get(), n->name);
    }
  } else {
    nodes.emplace_back(s.nodes().front().get(), node.empty() ? s.nodes().front()->name : node);
  }
  std::vector<nlohmann::json> objects;
  std::vector<std::string> comments;
  for (auto& [topo, name] : nodes) {
    // The loader names nodes as Kubernetes does (k8s::NodeNameFrom); a file name with nothing
    // usable in it is left as it is.
    if (!k8s::IsDnsSubdomain(name)) {
      err << "topology slices: node \"" << name << "\" has no usable Kubernetes name; pass -f FILE --node NAME\n";
      return kExitRuntime;
    }
    auto built = dra::BuildResourceSlices(*topo, name, options);
    if (!built.ok()) {
      err << "topology slices: node \"" << name << "\": " << built.status().message() << "\n";
      return kExitRuntime;
    }
    for (const auto& note : built->notes) {
      // Notes about drivers without devices (dra.cpu refusing the node) have no slice to go with.
      const bool printed = std::any_of(built->drivers.begin(), built->drivers.end(),
                                       [&](const dra::DriverSlices& d) { return note.rfind(d.driver + ":", 0) == 0; });
      if (!printed) err << "topology slices: note: node \"" << name << "\": " << note << "\n";
    }
    if (built->drivers.empty()) {
      err << "topology slices: note: node \"" << name << "\" has no NVIDIA GPU and no NIC"
          << (options.cpu_mode == topology::CpuDeviceMode::kNone ? "" : " and no CPU device") << ": no ResourceSlice\n";
      continue;
    }
    for (auto& d : built->drivers) {
      for (std::size_t k = 0; k < d.slices.size(); ++k) {
        std::string c = "node " + name + ", driver " + d.driver + ": simulated by draguard from " + topo->source;
        for (const auto& note : built->notes) {
          if (note.rfind(d.driver + ":", 0) == 0) c += "\n# " + note;
        }
        for (const auto& line : d.unknown[k]) c += "\n# " + line;
        objects.push_back(std::move(d.slices[k]));
        comments.push_back(std::move(c));
      }
    }
    if (output == "json" && !built->unknown_names.empty()) {
      std::string list;
      for (const auto& u : built->unknown_names) list += (list.empty() ? "" : ", ") + u;
      err << "topology slices: note: node \"" << name << "\": the drivers also publish values the export cannot "
          << "tell, not printed (-o yaml lists them per device): " << list << "\n";
    }
  }
  PrintObjects(out, output, std::move(objects), comments);
  return kExitOk;
}

}  // namespace

int TopologyDraw(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  FileFlags f;
  if (const int rc = ParseFileFlags(args, "topology draw", "--racks", f, out, err); rc >= 0) return rc;
  if (f.path.empty()) {
    err << "topology draw: -f FILE|DIR is required\n" << kUsage;
    return kExitUsage;
  }
  const std::shared_ptr<const topology::Snapshot> snap = Load(f.path, "topology draw", err);
  if (snap == nullptr) return kExitRuntime;
  std::vector<const topology::NodeTopology*> nodes;
  for (const auto& n : snap->nodes()) {
    if (f.node.empty() || n->name == f.node) nodes.push_back(n.get());
  }
  if (nodes.empty()) {
    err << "topology draw: " << (f.node.empty() ? "no loadable hwloc export" : "node \"" + f.node + "\" not found")
        << " in " << f.path << "\n";
    return kExitRuntime;
  }
  const bool to_file = f.output.size() > 4 && f.output.ends_with(".svg");
  // The rack view: every node by NVLink clique, alone (--racks) or beside the nodes' pictures.
  constexpr const char* kRacksName = "_nvlink-cliques";
  const bool cliques = std::any_of(nodes.begin(), nodes.end(), [](const auto* n) { return !n->nvlink_clique.empty(); });
  if (f.switch_set) {
    const std::string svg = topology::DrawRacksSvg(nodes);
    if (f.output.empty()) {
      out << svg;
      return kExitOk;
    }
    Status st = to_file ? WriteFileAtomic(f.output, svg, 0644) : WriteSvgFile(f.output, kRacksName, svg).status();
    if (!st.ok()) {
      err << "topology draw: " << st.message() << "\n";
      return kExitRuntime;
    }
    if (!to_file) out << (std::filesystem::path(f.output) / (std::string(kRacksName) + ".svg")).string() << "\n";
    return kExitOk;
  }
  if (f.output.empty() || to_file) {
    if (nodes.size() > 1) {
      err << "topology draw: " << nodes.size() << " nodes in " << f.path
          << ": pass -o DIR for one file per node, or --node NAME\n";
      return kExitUsage;
    }
    const std::string svg = topology::DrawSvg(*nodes.front());
    if (!to_file) {
      out << svg;
      return kExitOk;
    }
    if (const Status st = WriteFileAtomic(f.output, svg, 0644); !st.ok()) {
      err << "topology draw: " << st.message() << "\n";
      return kExitRuntime;
    }
    return kExitOk;
  }
  for (const topology::NodeTopology* n : nodes) {
    auto written = WriteSvgFile(f.output, n->name, topology::DrawSvg(*n));
    if (!written.ok()) {
      err << "topology draw: node \"" << n->name << "\": " << written.status().message() << "\n";
      return kExitRuntime;
    }
    out << *written << "\n";
  }
  if (cliques && nodes.size() > 1) {
    auto written = WriteSvgFile(f.output, kRacksName, topology::DrawRacksSvg(nodes));
    if (!written.ok()) {
      err << "topology draw: " << written.status().message() << "\n";
      return kExitRuntime;
    }
    out << *written << "\n";
  }
  return kExitOk;
}

int Topology(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    (args.empty() ? err : out) << kUsage;
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (args[0] == "show") return Show(args, out, err);
  if (args[0] == "export") return TopologyExport(args, out, err);
  if (args[0] == "slices") return Slices(args, out, err);
  if (args[0] == "draw") return TopologyDraw(args, out, err);
  err << "topology: unknown subcommand \"" << args[0] << "\"\n" << kUsage;
  return kExitUsage;
}

}  // namespace draguard::cli
