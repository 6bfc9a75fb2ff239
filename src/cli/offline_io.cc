// Input, policy, topology and output handling shared by the offline commands (review, convert,
// render): see commands.h.
#include <cctype>
#include <filesystem>
#include <iterator>
#include <utility>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "draguard/mutation/pictures.h"
#include "draguard/read_file.h"
#include "draguard/write_file.h"
#include "draguard/policy/store.h"
#include "draguard/topology/store.h"
#include "draguard/yamljson/yamljson.h"
#include "flags.h"

namespace draguard::cli {

namespace {

Result<std::unique_ptr<topology::Store>> LoadTopology(const std::string& path) {
  auto store = std::make_unique<topology::Store>();
  std::unique_ptr<topology::Source> source;
  std::error_code ec;
  if (path.empty()) {
    // No topology: converted manifests are applied to a real cluster, never pinned to demo nodes.
    source = std::make_unique<topology::InMemorySource>(std::vector<topology::InMemoryExport>{});
  } else if (path == "bundled:examples") {
    source = topology::MakeBundledExampleSource();
  } else if (std::filesystem::is_directory(path, ec)) {
    source = topology::MakeDirectorySource(path);
  } else if (std::filesystem::is_regular_file(path, ec)) {
    source = topology::MakeFileSource(path);
  } else {
    return Status::NotFound(path + ": no such file or directory");
  }
  if (Status st = store->Start(std::move(source), /*watch=*/false); !st.ok()) return st;
  return store;
}

}  // namespace

bool LoadCliPolicy(const Flags& f, policy::PolicyStore& policies, const std::string& command, std::ostream& err) {
  Status st = f.Has("--config") ? policies.LoadFile(f.Get("--config")) : policies.LoadDefault();
  if (!st.ok()) err << "draguard " << command << ": " << st.message() << "\n";
  return st.ok();
}

std::unique_ptr<topology::Store> LoadCliTopology(const Flags& f, const std::string& command, std::ostream& err) {
  auto store = LoadTopology(f.Get("--topology-dir"));
  if (!store.ok()) {
    err << "draguard " << command << ": --topology-dir: " << store.status().message() << "\n";
    return nullptr;
  }
  return std::move(store).value();
}

Result<std::string> ReadCliInput(const std::string& file, std::istream& in) {
  std::string text;
  if (file == "-") {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return text;
  }
  return ReadFile(file, kMaxCliInputBytes);
}

std::string CliOutputFormat(const Flags& f, const std::string& command, std::ostream& err) {
  std::string format = f.Has("-o") ? f.Get("-o") : f.Get("--output", "yaml");
  if (format == "yaml" || format == "json") return format;
  err << "draguard " << command << ": -o must be yaml or json, not \"" << format << "\"\n";
  return "";
}

void PrintObjects(std::ostream& out, const std::string& format, std::vector<nlohmann::json> objects,
                  const std::vector<std::string>& comments) {
  if (format == "json") {
    nlohmann::json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", nlohmann::json::array()}};
    for (auto& o : objects) list["items"].push_back(std::move(o));
    out << list.dump(2) << "\n";
    return;
  }
  for (std::size_t i = 0; i < objects.size(); ++i) {
    out << "---\n";
    if (i < comments.size() && !comments[i].empty()) out << "# " << comments[i] << "\n";
    out << yamljson::ToYaml(objects[i]);
  }
}

Result<std::string> WriteSvgFile(const std::string& dir, const std::string& name, const std::string& svg) {
  std::string file;
  for (char c : name) file += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ? c : '_';
  if (file.empty() || file == "." || file == "..") file = "_" + file;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::InvalidArgument("cannot create directory " + dir + ": " + ec.message());
  const std::string path = (std::filesystem::path(dir) / (file + ".svg")).string();
  if (Status st = WriteFileAtomic(path, svg, 0644); !st.ok()) return st;
  return path;
}

bool WritePlacementPictures(const std::string& dir, const nlohmann::json& object, const std::string& namespace_name,
                            const policy::Policy& policy, const topology::Snapshot* topology,
                            const std::string& command, std::set<std::string>& written, std::ostream& err) {
  for (const mutation::PlacementPicture& p : mutation::DrawPlacements(object, namespace_name, policy, topology)) {
    std::string name = p.name;
    for (int n = 2; !written.insert(name).second; ++n) name = p.name + "-" + std::to_string(n);
    auto path = WriteSvgFile(dir, name, p.svg);
    if (!path.ok()) {
      err << "draguard " << command << ": --draw: " << path.status().message() << "\n";
      return false;
    }
    err << "draguard " << command << ": drew " << *path << "\n";
  }
  return true;
}

}  // namespace draguard::cli
