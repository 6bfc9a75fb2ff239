// SVG pictures of a node's topology (draw.h): a box tree measured and placed in integer
// coordinates, then written in one pass.
#include "draguard/topology/draw.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string_view>

namespace draguard::topology {
namespace {

constexpr int kCharWidth = 8;       // advance of one character at font-size 12 (monospace, rounded up)
constexpr int kLineHeight = 16;
constexpr int kPad = 8;
constexpr int kGap = 10;
constexpr int kMachineWidth = 1800; // widest row of NUMA nodes before they wrap
constexpr int kNumaWidth = 880;     // widest row of PCIe roots inside a NUMA node
constexpr std::size_t kModelChars = 26;

// Request colours, in order of first appearance.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7",
                                    "#9c755f"};
constexpr const char* kMissColour = "#d62728";

// Appends `s` escaped for XML text and attribute values: markup characters as entities, valid
// UTF-8 kept, invalid bytes and control characters (which XML 1.0 forbids) as U+FFFD.
void AppendEscaped(std::string& out, std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      constexpr std::pair<char, const char*> kEntities[] = {
          {'&', "&amp;"}, {'<', "&lt;"}, {'>', "&gt;"}, {'"', "&quot;"}, {'\'', "&#39;"}};
      const auto* e = std::find_if(std::begin(kEntities), std::end(kEntities),
                                   [c](const auto& kv) { return kv.first == static_cast<char>(c); });
      if (e != std::end(kEntities)) {
        out += e->second;
      } else {
        out += (c < 0x20 || c == 0x7f) ? "\xEF\xBF\xBD" : std::string(1, static_cast<char>(c));
      }
      ++i;
      continue;
    }
    std::size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && len == 3) {  // no overlong forms, no surrogates
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
    }
    if (ok && len == 4) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
}

std::string Escaped(std::string_view s) {
  std::string out;
  AppendEscaped(out, s);
  return out;
}

// Display width in characters (UTF-8 continuation bytes do not count).
int Chars(std::string_view s) {
  int n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

// "32 GiB", "15.1 GiB", "512 MiB".
std::string Bytes(uint64_t bytes) {
  const uint64_t mib = bytes >> 20;
  if (mib < 1024) return std::to_string(mib) + " MiB";
  const uint64_t tenths = (bytes * 10 + (uint64_t{1} << 29)) >> 30;
  if (tenths % 10 == 0 || tenths >= 1000) return std::to_string((tenths + 5) / 10) + " GiB";
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " GiB";
}

// "150 GB/s" for MB/s figures (hwloc's bandwidth matrices).
std::string Bandwidth(uint64_t mbps) {
  if (mbps >= 1000 && mbps % 1000 == 0) return std::to_string(mbps / 1000) + " GB/s";
  if (mbps >= 1000) return std::to_string(mbps / 1000) + "." + std::to_string(mbps % 1000 / 100) + " GB/s";
  return std::to_string(mbps) + " MB/s";
}

std::string Truncated(const std::string& s, std::size_t chars) {
  if (static_cast<std::size_t>(Chars(s)) <= chars) return s;
  std::string out;
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const bool start = (static_cast<unsigned char>(s[i]) & 0xc0) != 0x80;
    if (start && ++n > chars - 1) break;
    out += s[i];
  }
  return out + "\xE2\x80\xA6";
}

std::string JoinNumbers(const std::vector<uint32_t>& v) {
  std::string out;
  for (uint32_t x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

// One box of the tree: lines of text (the first bold), children laid out in rows.
struct Box {
  std::string cls;                 // machine, numa, root, gpu, nic, io
  std::vector<std::string> lines;  // unescaped
  std::vector<Box> children;
  int max_width = 0;               // children wrap past this inner width (0: one per row)
  int min_width = 0;
  std::string fill = "#ffffff";
  std::string stroke = "#000000";
  int stroke_width = 1;
  bool dashed = false;
  std::string data;                // extra attributes (already escaped), e.g. data-bus-id
  std::string tooltip;             // <title> of the box
  int x = 0, y = 0, w = 0, h = 0;
};

void Measure(Box& b) {
  int text_w = 0;
  for (const auto& l : b.lines) text_w = std::max(text_w, Chars(l) * kCharWidth);
  const int text_h = static_cast<int>(b.lines.size()) * kLineHeight;
  int content_w = 0, y = kPad + text_h + (b.children.empty() ? 0 : kPad / 2);
  int row_w = 0, row_h = 0;
  for (Box& c : b.children) {
    Measure(c);
    const bool wrap = row_w > 0 && (b.max_width == 0 || row_w + kGap + c.w > b.max_width);
    if (wrap) {
      y += row_h + kGap;
      row_w = 0;
      row_h = 0;
    }
    c.x = kPad + (row_w > 0 ? row_w + kGap : 0);  // relative to the parent until Place()
    c.y = y;
    row_w = c.x - kPad + c.w;
    row_h = std::max(row_h, c.h);
    content_w = std::max(content_w, row_w);
  }
  b.w = std::max({text_w, content_w, b.min_width}) + 2 * kPad;
  b.h = y + row_h + kPad;
}

void Place(Box& b, int ox, int oy) {
  b.x += ox;
  b.y += oy;
  for (Box& c : b.children) Place(c, b.x, b.y);
}

void Emit(const Box& b, std::string& out) {
  out += "<g class=\"" + b.cls + "\"" + b.data + ">";
  if (!b.tooltip.empty()) out += "<title>" + Escaped(b.tooltip) + "</title>";
  out += "<rect x=\"" + std::to_string(b.x) + "\" y=\"" + std::to_string(b.y) + "\" width=\"" + std::to_string(b.w) +
         "\" height=\"" + std::to_string(b.h) + "\" fill=\"" + b.fill + "\" stroke=\"" + b.stroke +
         "\" stroke-width=\"" + std::to_string(b.stroke_width) + "\"" +
         (b.dashed ? " stroke-dasharray=\"6 3\"" : "") + "/>";
  for (std::size_t i = 0; i < b.lines.size(); ++i) {
    out += "<text x=\"" + std::to_string(b.x + kPad) + "\" y=\"" +
           std::to_string(b.y + kPad + static_cast<int>(i + 1) * kLineHeight - 4) + "\"" +
           (i == 0 ? " font-weight=\"bold\"" : "") + ">";
    AppendEscaped(out, b.lines[i]);
    out += "</text>";
  }
  out += "\n";
  for (const Box& c : b.children) Emit(c, out);
  out += "</g>\n";
}

// The start of an SVG document of `width` x `height` titled `title` (escaped), on white.
std::string SvgStart(int width, int height, const std::string& title) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) + "\" height=\"" +
         std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
         "\" font-family=\"DejaVu Sans Mono, monospace\" font-size=\"12\">\n<title>";
  AppendEscaped(out, title);
  out += "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  return out;
}

// Colours by request name, in order of first appearance over GPUs, NICs, then NUMA nodes (CPUs).
std::map<std::string, std::string> RequestColours(const DrawMarks& marks, std::vector<std::string>* order) {
  std::map<std::string, std::string> colours;
  auto add = [&](const std::vector<std::vector<std::string>>& per_device) {
    for (const auto& reqs : per_device) {
      for (const auto& r : reqs) {
        if (colours.count(r) != 0) continue;
        colours[r] = kPalette[colours.size() % std::size(kPalette)];
        order->push_back(r);
      }
    }
  };
  add(marks.gpu_requests);
  add(marks.nic_requests);
  add(marks.numa_requests);
  return colours;
}

std::string JoinRequests(const std::vector<std::string>& reqs) {
  std::string out;
  for (const auto& r : reqs) out += (out.empty() ? "" : ", ") + r;
  return out;
}

// The device boxes; `colours` from RequestColours.
struct DeviceBoxes {
  std::vector<Box> gpus;
  std::vector<Box> nics;
};

DeviceBoxes MakeDevices(const NodeTopology& node, const DrawMarks& marks,
                        const std::map<std::string, std::string>& colours) {
  const Shape& s = *node.shape;
  const std::set<uint32_t> miss(marks.miss_gpus.begin(), marks.miss_gpus.end());
  DeviceBoxes d;
  for (uint32_t i = 0; i < s.gpus.size(); ++i) {
    const Gpu& g = s.gpus[i];
    Box b;
    b.cls = "gpu";
    b.fill = "#dedede";
    b.lines.push_back("GPU" + std::to_string(i) + " " + Truncated(g.model.empty() ? "(no model)" : g.model, kModelChars));
    std::string second = g.memory_bytes ? Bytes(*g.memory_bytes) : "memory unknown";
    if (g.mig_mode == MigMode::kEnabled) second += " · MIG " + std::to_string(g.mig_instances.size());
    b.lines.push_back(second);
    b.lines.push_back(g.pci_bus_id);
    b.data = " data-bus-id=\"" + Escaped(g.pci_bus_id) + "\"";
    b.tooltip = "GPU" + std::to_string(i) + " " + g.model + " " + g.pci_bus_id;
    if (i < marks.gpu_requests.size() && !marks.gpu_requests[i].empty()) {
      b.fill = colours.at(marks.gpu_requests[i].front());
      b.stroke_width = 3;
      b.lines.push_back("→ " + JoinRequests(marks.gpu_requests[i]));
      b.data += " data-requests=\"" + Escaped(JoinRequests(marks.gpu_requests[i])) + "\"";
    }
    if (miss.count(i) != 0) {
      b.stroke = kMissColour;
      b.stroke_width = 3;
      b.dashed = true;
      b.data += " data-miss=\"true\"";
    }
    d.gpus.push_back(std::move(b));
  }
  for (uint32_t i = 0; i < s.nics.size(); ++i) {
    const Nic& n = s.nics[i];
    Box b;
    b.cls = n.rdma ? "nic rdma" : "nic";
    b.fill = n.rdma ? "#bcd4ee" : "#eeeeee";
    b.lines.push_back("NIC " + Truncated(n.name, kModelChars - 4) + (n.rdma ? " · RDMA" : ""));
    b.lines.push_back(n.pci_bus_id);
    b.data = " data-nic=\"" + Escaped(n.name) + "\" data-bus-id=\"" + Escaped(n.pci_bus_id) + "\"";
    b.tooltip = "NIC " + n.name + " " + n.pci_bus_id + (n.rdma ? " RDMA" : "");
    if (i < marks.nic_requests.size() && !marks.nic_requests[i].empty()) {
      b.fill = colours.at(marks.nic_requests[i].front());
      b.stroke_width = 3;
      b.lines.push_back("→ " + JoinRequests(marks.nic_requests[i]));
      b.data += " data-requests=\"" + Escaped(JoinRequests(marks.nic_requests[i])) + "\"";
    }
    d.nics.push_back(std::move(b));
  }
  // One width for every device, so that rows line up.
  int w = 0;
  for (const auto* v : {&d.gpus, &d.nics}) {
    for (const Box& b : *v) {
      for (const auto& l : b.lines) w = std::max(w, Chars(l) * kCharWidth);
    }
  }
  for (auto* v : {&d.gpus, &d.nics}) {
    for (Box& b : *v) b.min_width = w;
  }
  return d;
}

// The root boxes (only roots with a GPU or NIC) by NUMA index (kNoIndex: no locality); the GPUs
// and NICs without a root go to `unrooted`.
Box MakeTree(const NodeTopology& node, DeviceBoxes devices, const DrawMarks& marks,
             const std::map<std::string, std::string>& colours) {
  const Shape& s = *node.shape;
  std::vector<Box> roots(s.pcie_roots.size());
  std::vector<bool> used(s.pcie_roots.size(), false);
  Box unrooted;
  unrooted.cls = "io";
  unrooted.lines = {"I/O without a known PCIe root"};
  unrooted.max_width = kNumaWidth;
  auto put = [&](uint32_t root, Box b) {
    if (root < roots.size()) {
      roots[root].children.push_back(std::move(b));
      used[root] = true;
    } else {
      unrooted.children.push_back(std::move(b));
    }
  };
  for (uint32_t i = 0; i < s.gpus.size(); ++i) put(s.gpus[i].pcie_root, std::move(devices.gpus[i]));
  for (uint32_t i = 0; i < s.nics.size(); ++i) put(s.nics[i].pcie_root, std::move(devices.nics[i]));

  std::vector<Box> numa(s.numa_nodes.size());
  std::vector<int> empty_roots(s.numa_nodes.size(), 0);
  for (uint32_t k = 0; k < numa.size(); ++k) {
    const NumaNode& m = s.numa_nodes[k];
    numa[k].cls = "numa";
    numa[k].fill = "#efdfde";
    numa[k].max_width = kNumaWidth;
    numa[k].lines.push_back("NUMA node P#" + std::to_string(m.os_index) + (m.subtype.empty() ? "" : " (" + m.subtype + ")"));
    numa[k].lines.push_back(std::to_string(m.cpus) + " CPUs · " + Bytes(m.memory_bytes));
    numa[k].data = " data-numa=\"" + std::to_string(m.os_index) + "\"";
    if (k < marks.numa_requests.size() && !marks.numa_requests[k].empty()) {
      numa[k].stroke = colours.at(marks.numa_requests[k].front());
      numa[k].stroke_width = 4;
      numa[k].lines.push_back("CPUs → " + JoinRequests(marks.numa_requests[k]));
      numa[k].data += " data-requests=\"" + Escaped(JoinRequests(marks.numa_requests[k])) + "\"";
    }
  }
  Box no_numa;
  no_numa.cls = "io";
  no_numa.lines = {"PCIe roots without NUMA locality"};
  no_numa.max_width = kNumaWidth;
  int no_numa_empty = 0;
  for (uint32_t r = 0; r < s.pcie_roots.size(); ++r) {
    const PcieRoot& pr = s.pcie_roots[r];
    const uint32_t k = pr.numa_nodes.empty() ? kNoIndex : s.NumaIndex(pr.numa_nodes.front());
    if (!used[r]) {
      (k == kNoIndex ? no_numa_empty : empty_roots[k]) += 1;
      continue;
    }
    Box& b = roots[r];
    b.cls = "root";
    b.max_width = 2 * (b.children.front().min_width + 2 * kPad) + kGap;  // two devices per row
    b.lines.push_back("PCIe root " + pr.id + (pr.numa_nodes.size() > 1 ? " (NUMA " + JoinNumbers(pr.numa_nodes) + ")" : ""));
    b.data = " data-pcie-root=\"" + Escaped(pr.id) + "\"";
    (k == kNoIndex ? no_numa : numa[k]).children.push_back(std::move(b));
  }
  auto note_empty = [](Box& b, int n) {
    if (n > 0) b.lines.push_back(std::to_string(n) + " PCIe root" + (n == 1 ? "" : "s") + " without GPU or NIC");
  };
  Box machine;
  machine.cls = "machine";
  machine.max_width = kMachineWidth;
  // A package's box takes the place of its first NUMA node and holds all of its nodes; a node in
  // no known package stays where it is.
  std::map<uint32_t, std::size_t> package_at;              // package OS index -> its box in machine.children
  std::map<uint32_t, std::vector<uint32_t>> package_numa;  // package OS index -> its NUMA node indexes
  for (uint32_t k = 0; k < numa.size(); ++k) {
    note_empty(numa[k], empty_roots[k]);
    const uint32_t package = node.NumaPackage(k);
    if (package == kNoIndex) {
      machine.children.push_back(std::move(numa[k]));
      continue;
    }
    if (package_at.try_emplace(package, machine.children.size()).second) {
      Box b;
      b.cls = "package";
      b.fill = "#dde8dd";
      b.max_width = kMachineWidth - 2 * kPad;
      b.data = " data-package=\"" + std::to_string(package) + "\"";
      machine.children.push_back(std::move(b));
    }
    package_numa[package].push_back(k);
    machine.children[package_at[package]].children.push_back(std::move(numa[k]));
  }
  for (const auto& [package, nodes] : package_numa) {
    uint64_t cpus = 0, memory = 0;
    std::vector<uint32_t> os_indexes;
    for (uint32_t k : nodes) {
      cpus += s.numa_nodes[k].cpus;
      memory += s.numa_nodes[k].memory_bytes;
      os_indexes.push_back(s.numa_nodes[k].os_index);
    }
    Box& b = machine.children[package_at[package]];
    b.lines.push_back("Package P#" + std::to_string(package));
    b.lines.push_back(std::to_string(cpus) + " CPUs · " + Bytes(memory));
    b.tooltip = "Package P#" + std::to_string(package) + ": NUMA node" + (nodes.size() == 1 ? " " : "s ") +
                JoinNumbers(os_indexes);
  }
  note_empty(no_numa, no_numa_empty);
  if (!no_numa.children.empty() || no_numa_empty > 0) machine.children.push_back(std::move(no_numa));
  if (!unrooted.children.empty()) machine.children.push_back(std::move(unrooted));
  return machine;
}

struct Point {
  int x = 0;
  int y = 0;
};

// One interconnect panel: the GPUs on a circle, a line per linked pair (through a hub for
// switch-derived pairs). Returns the panel's height; appends its elements to `out`.
int EmitLinkPanel(const Shape& s, const Interconnect& ic, const std::string& name, const DrawMarks& marks,
                  const std::map<std::string, std::string>& colours, int top, int width, std::string& out) {
  const int n = static_cast<int>(s.gpus.size());
  const int radius = std::max(110, n * 16);
  const Point centre{width / 2, top + 48 + radius};
  std::vector<Point> at(s.gpus.size());
  for (int i = 0; i < n; ++i) {
    const double a = -M_PI / 2 + 2 * M_PI * i / n;
    at[i] = {centre.x + static_cast<int>(std::lround(radius * std::cos(a))),
             centre.y + static_cast<int>(std::lround(radius * std::sin(a)))};
  }
  uint64_t max_mbps = 1;
  std::map<uint64_t, int> by_bandwidth;
  for (const GpuLink& l : ic.peers) {
    max_mbps = std::max(max_mbps, l.mbps);
    ++by_bandwidth[l.mbps];
  }
  std::string legend = name + (ic.via_switch ? " through NVSwitch" : "") + ": ";
  bool first = true;
  for (auto it = by_bandwidth.rbegin(); it != by_bandwidth.rend(); ++it) {
    legend += (first ? "" : ", ") + std::to_string(it->second) + " GPU pair" + (it->second == 1 ? "" : "s") + " at " +
              Bandwidth(it->first);
    first = false;
  }
  legend += " per direction";
  out += "<g class=\"interconnect\" data-name=\"" + Escaped(name) + "\">\n";
  out += "<text x=\"" + std::to_string(kPad) + "\" y=\"" + std::to_string(top + 20) + "\" font-weight=\"bold\">";
  AppendEscaped(out, legend);
  out += "</text>\n";
  const bool label_lines = !ic.via_switch && ic.peers.size() <= 16 && by_bandwidth.size() > 1;
  for (const GpuLink& l : ic.peers) {
    if (l.a >= at.size() || l.b >= at.size()) continue;
    const Point a = at[l.a], b = at[l.b];
    const int stroke = 1 + static_cast<int>(3 * l.mbps / max_mbps);
    std::string d = "M" + std::to_string(a.x) + " " + std::to_string(a.y);
    if (ic.via_switch) d += " L" + std::to_string(centre.x) + " " + std::to_string(centre.y);
    d += " L" + std::to_string(b.x) + " " + std::to_string(b.y);
    out += "<path class=\"link\" data-a=\"" + Escaped(s.gpus[l.a].pci_bus_id) + "\" data-b=\"" +
           Escaped(s.gpus[l.b].pci_bus_id) + "\" data-mbps=\"" + std::to_string(l.mbps) + "\" d=\"" + d +
           "\" fill=\"none\" stroke=\"#2f7d32\" stroke-opacity=\"0.6\" stroke-width=\"" + std::to_string(stroke) +
           "\"><title>GPU" + std::to_string(l.a) + " – GPU" + std::to_string(l.b) + ": " + Bandwidth(l.mbps) +
           "</title></path>";
    if (label_lines) {
      out += "<text x=\"" + std::to_string((a.x + b.x) / 2) + "\" y=\"" + std::to_string((a.y + b.y) / 2 - 3) +
             "\" text-anchor=\"middle\" font-size=\"10\">" + Bandwidth(l.mbps) + "</text>";
    }
    out += "\n";
  }
  if (ic.via_switch) {
    out += "<circle cx=\"" + std::to_string(centre.x) + "\" cy=\"" + std::to_string(centre.y) +
           "\" r=\"34\" fill=\"#dedede\" stroke=\"#000000\"/><text x=\"" + std::to_string(centre.x) + "\" y=\"" +
           std::to_string(centre.y + 4) + "\" text-anchor=\"middle\">NVSwitch</text>\n";
  }
  const std::set<uint32_t> miss(marks.miss_gpus.begin(), marks.miss_gpus.end());
  for (int i = 0; i < n; ++i) {
    std::string fill = "#dedede", stroke = "#000000";
    if (static_cast<std::size_t>(i) < marks.gpu_requests.size() && !marks.gpu_requests[i].empty()) {
      fill = colours.at(marks.gpu_requests[i].front());
    }
    if (miss.count(i) != 0) stroke = kMissColour;
    out += "<circle cx=\"" + std::to_string(at[i].x) + "\" cy=\"" + std::to_string(at[i].y) + "\" r=\"20\" fill=\"" +
           fill + "\" stroke=\"" + stroke + "\" stroke-width=\"2\"/><text x=\"" + std::to_string(at[i].x) + "\" y=\"" +
           std::to_string(at[i].y + 4) + "\" text-anchor=\"middle\" font-weight=\"bold\">GPU" + std::to_string(i) +
           "</text>\n";
  }
  int y = centre.y + radius + 36;
  for (const CpuLink& c : ic.cpu_peers) {
    out += "<text x=\"" + std::to_string(kPad) + "\" y=\"" + std::to_string(y) + "\" class=\"cpu-link\">GPU" +
           std::to_string(c.gpu) + " – CPU package P#" + std::to_string(c.package_os_index) + ": " +
           Bandwidth(c.mbps) + "</text>\n";
    y += kLineHeight;
  }
  out += "</g>\n";
  return y - top;
}

}  // namespace

std::string DrawSvg(const NodeTopology& node, const DrawMarks& marks) {
  const Shape& s = *node.shape;
  std::vector<std::string> order;
  const std::map<std::string, std::string> colours = RequestColours(marks, &order);
  Box machine = MakeTree(node, MakeDevices(node, marks, colours), marks, colours);
  std::size_t rdma = 0;
  for (const Nic& n : s.nics) rdma += n.rdma;
  machine.lines.push_back("Machine " + node.name);
  machine.lines.push_back("shape " + s.fingerprint + " · " + std::to_string(s.gpus.size()) + " GPUs · " +
                          std::to_string(s.nics.size()) + " NICs (" + std::to_string(rdma) + " RDMA) · " +
                          std::to_string(s.numa_nodes.size()) + " NUMA nodes");
  for (const auto& c : marks.caption) machine.lines.push_back(c);
  Measure(machine);
  Place(machine, kPad, kPad);

  std::string body;
  int height = machine.y + machine.h;
  int width = machine.x + machine.w;
  // Banner, legend and panels below the tree.
  if (!marks.miss.empty()) {
    // Wrapped at word boundaries to the width of the machine box.
    const std::size_t chars = static_cast<std::size_t>(std::max(60, machine.w / kCharWidth - 4));
    std::vector<std::string> lines;
    std::string line = "refused:";
    std::size_t at = 0;
    while (at < marks.miss.size()) {
      std::size_t end = marks.miss.find(' ', at);
      if (end == std::string::npos) end = marks.miss.size();
      const std::string word = marks.miss.substr(at, end - at);
      if (static_cast<std::size_t>(Chars(line) + 1 + Chars(word)) > chars && !line.empty()) {
        lines.push_back(line);
        line = word;
      } else {
        line += (line.empty() ? "" : " ") + word;
      }
      at = end + 1;
    }
    lines.push_back(line);
    int text_w = 0;
    for (const auto& l : lines) text_w = std::max(text_w, Chars(l) * kCharWidth);
    const int box_h = static_cast<int>(lines.size()) * kLineHeight + kPad;
    width = std::max(width, text_w + 4 * kPad);
    body += "<g class=\"miss\"><rect x=\"" + std::to_string(kPad) + "\" y=\"" + std::to_string(height + kGap) +
            "\" width=\"" + std::to_string(text_w + 2 * kPad) + "\" height=\"" + std::to_string(box_h) +
            "\" fill=\"#fde0dd\" stroke=\"" + kMissColour + "\" stroke-width=\"2\"/>";
    for (std::size_t i = 0; i < lines.size(); ++i) {
      body += "<text x=\"" + std::to_string(2 * kPad) + "\" y=\"" +
              std::to_string(height + kGap + static_cast<int>(i + 1) * kLineHeight) + "\" fill=\"" + kMissColour +
              "\" font-weight=\"bold\">";
      AppendEscaped(body, lines[i]);
      body += "</text>";
    }
    body += "</g>\n";
    height += kGap + box_h;
  }
  if (!order.empty()) {
    int x = kPad;
    body += "<g class=\"legend\">";
    for (const auto& r : order) {
      body += "<rect x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(height + kGap) +
              "\" width=\"14\" height=\"14\" fill=\"" + colours.at(r) + "\" stroke=\"#000000\"/><text x=\"" +
              std::to_string(x + 20) + "\" y=\"" + std::to_string(height + kGap + 12) + "\">request ";
      AppendEscaped(body, r);
      body += "</text>";
      x += 20 + (Chars(r) + 10) * kCharWidth;
    }
    body += "</g>\n";
    width = std::max(width, x);
    height += kGap + 16;
  }
  const int panel_width = std::max(width, 2 * std::max(110, static_cast<int>(s.gpus.size()) * 16) + 200);
  for (const auto& [ic, name] : {std::pair{&s.nvlink, "NVLink"}, std::pair{&s.xgmi, "XGMI"}}) {
    if (ic->peers.empty() && ic->cpu_peers.empty()) continue;
    height += EmitLinkPanel(s, *ic, name, marks, colours, height + kGap, panel_width, body) + kGap;
    width = panel_width;
  }
  width += kPad;
  height += kPad;

  std::string out = SvgStart(width, height, "topology of " + node.name);
  Emit(machine, out);
  out += body;
  out += "</svg>\n";
  return out;
}

std::string DrawRacksSvg(const std::vector<const NodeTopology*>& nodes) {
  std::map<std::string, std::vector<const NodeTopology*>> racks;  // "" = no clique, drawn last
  for (const NodeTopology* n : nodes) {
    if (n != nullptr) racks[n->nvlink_clique].push_back(n);
  }
  Box floor;
  floor.cls = "racks";
  floor.lines.push_back("NVLink cliques");
  floor.max_width = kMachineWidth;
  std::size_t cliques = 0;
  auto column = [&](const std::string& clique, std::vector<const NodeTopology*>& members) {
    std::sort(members.begin(), members.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
    Box rack;
    rack.cls = clique.empty() ? "no-clique" : "rack";
    rack.fill = clique.empty() ? "#f7f7f7" : "#eef3fb";
    rack.dashed = clique.empty();
    std::size_t gpus = 0;
    for (const auto* n : members) gpus += n->shape->gpus.size();
    rack.lines.push_back(clique.empty() ? "no NVLink clique" : "clique " + clique);
    rack.lines.push_back(std::to_string(members.size()) + (members.size() == 1 ? " node · " : " nodes · ") +
                         std::to_string(gpus) + " GPUs");
    if (!clique.empty()) rack.data = " data-clique=\"" + Escaped(clique) + "\"";
    for (std::size_t i = 0; i < members.size() && i < kMaxRackNodes; ++i) {
      const NodeTopology& n = *members[i];
      Box tray;
      tray.cls = "tray";
      tray.fill = "#ffffff";
      tray.data = " data-node=\"" + Escaped(n.name) + "\"";
      tray.lines.push_back(Truncated(n.name, 40));
      std::string model = n.shape->gpus.empty() ? "" : n.shape->gpus.front().model;
      tray.lines.push_back(std::to_string(n.shape->gpus.size()) + " GPUs" +
                           (model.empty() ? "" : " · " + Truncated(model, kModelChars)));
      tray.lines.push_back("shape " + n.shape->fingerprint);
      tray.tooltip = n.name + (clique.empty() ? "" : " in clique " + clique);
      rack.children.push_back(std::move(tray));
    }
    if (members.size() > kMaxRackNodes) {
      rack.lines.push_back("(" + std::to_string(members.size() - kMaxRackNodes) + " more nodes not drawn)");
    }
    floor.children.push_back(std::move(rack));
  };
  for (auto& [clique, members] : racks) {
    if (clique.empty()) continue;
    ++cliques;
    column(clique, members);
  }
  if (auto it = racks.find(""); it != racks.end()) column("", it->second);
  floor.lines.push_back(std::to_string(cliques) + (cliques == 1 ? " clique · " : " cliques · ") +
                        std::to_string(nodes.size()) + " nodes");
  Measure(floor);
  Place(floor, kPad, kPad);
  const int width = floor.x + floor.w + kPad, height = floor.y + floor.h + kPad;
  std::string out = SvgStart(width, height, "NVLink cliques");
  Emit(floor, out);
  out += "</svg>\n";
  return out;
}

}  // namespace draguard::topology
