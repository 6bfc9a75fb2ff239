// `topology::DrawSvg`: for every export in the repository, the picture is well-formed XML (libxml2,
// no recovery) and shows every GPU's bus id, every RDMA NIC and every NVLink / XGMI pair of the
// model as a line between the two GPUs' circles; the bytes are deterministic; hostile strings stay
// well-formed; placement marks colour and outline the devices they name.
#include <libxml/parser.h>
#include <libxml/xpath.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "draguard/topology/draw.h"
#include "draguard/topology/loader.h"
#include "draguard/topology/snapshot.h"

namespace draguard::topology {
namespace {

namespace fs = std::filesystem;

// A parsed SVG document and XPath queries on it.
class Svg {
 public:
  explicit Svg(const std::string& text) {
    doc_ = xmlReadMemory(text.data(), static_cast<int>(text.size()), "draw.svg", nullptr,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (doc_ != nullptr) ctx_ = xmlXPathNewContext(doc_);
  }
  ~Svg() {
    if (ctx_ != nullptr) xmlXPathFreeContext(ctx_);
    if (doc_ != nullptr) xmlFreeDoc(doc_);
  }
  Svg(const Svg&) = delete;
  Svg& operator=(const Svg&) = delete;

  bool ok() const { return doc_ != nullptr && ctx_ != nullptr; }

  // The string values of the nodes `xpath` selects (attribute values or text content).
  std::vector<std::string> Strings(const std::string& xpath) const {
    std::vector<std::string> out;
    xmlXPathObjectPtr r = xmlXPathEvalExpression(reinterpret_cast<const xmlChar*>(xpath.c_str()), ctx_);
    EXPECT_NE(r, nullptr) << xpath;
    if (r == nullptr) return out;
    if (r->nodesetval != nullptr) {
      for (int i = 0; i < r->nodesetval->nodeNr; ++i) {
        xmlChar* s = xmlNodeGetContent(r->nodesetval->nodeTab[i]);
        out.emplace_back(s != nullptr ? reinterpret_cast<const char*>(s) : "");
        xmlFree(s);
      }
    }
    xmlXPathFreeObject(r);
    return out;
  }

 private:
  xmlDocPtr doc_ = nullptr;
  xmlXPathContextPtr ctx_ = nullptr;
};

std::vector<std::string> RepoExports() {
  std::vector<std::string> out;
  for (const char* dir : {"hwloc", "hwloc-synthetic"}) {
    for (const auto& e : fs::directory_iterator(std::string(DRAGUARD_TEST_DATA) + "/" + dir)) {
      if (e.path().extension() == ".xml") out.push_back(e.path().string());
    }
  }
  for (const auto& e : fs::directory_iterator(std::string(DRAGUARD_SOURCE_DIR) + "/deploy/examples/topology")) {
    if (e.path().extension() == ".xml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::shared_ptr<const NodeTopology> Load(const std::string& path, ShapeInterner& interner) {
  auto parsed = ParseHwlocFile(path);
  if (!parsed.ok()) return nullptr;
  return MakeNodeTopology(std::move(parsed).value(), fs::path(path).stem().string(), path, "1", interner);
}

// "M1 2 L3 4 L5 6" -> {(1,2), (5,6)}: where a path starts and ends.
std::pair<std::string, std::string> Ends(const std::string& d) {
  std::vector<std::string> points;
  std::string cur;
  for (char c : d + "M") {
    if (c == 'M' || c == 'L') {
      if (!cur.empty()) points.push_back(cur.substr(0, cur.find_last_not_of(' ') + 1));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (points.empty()) return {};
  return {points.front(), points.back()};
}

class DrawExportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DrawExportTest, ShowsEveryGpuRdmaNicAndLink) {
  ShapeInterner interner;
  auto node = Load(GetParam(), interner);
  if (node == nullptr) {
    // Exports the loader refuses (no I/O, hwloc 3 format) have nothing to draw.
    EXPECT_FALSE(ParseHwlocFile(GetParam()).ok());
    return;
  }
  const Shape& s = *node->shape;
  const std::string text = DrawSvg(*node);
  Svg svg(text);
  ASSERT_TRUE(svg.ok()) << "not well-formed XML";
  EXPECT_EQ(svg.Strings("/*[local-name()='svg']/@width").size(), 1u);

  // Every GPU: a box whose text shows its bus id, model and index, inside the box of its PCIe root.
  for (uint32_t i = 0; i < s.gpus.size(); ++i) {
    const Gpu& g = s.gpus[i];
    const std::string box = "//*[@class='gpu'][@data-bus-id='" + g.pci_bus_id + "']";
    const auto texts = svg.Strings(box + "/*[local-name()='text']");
    ASSERT_FALSE(texts.empty()) << g.pci_bus_id;
    EXPECT_NE(std::find(texts.begin(), texts.end(), g.pci_bus_id), texts.end()) << g.pci_bus_id;
    EXPECT_EQ(texts.front().rfind("GPU" + std::to_string(i) + " ", 0), 0u) << texts.front();
    const std::string root = s.PcieRootId(g);
    if (!root.empty()) {
      EXPECT_EQ(svg.Strings("//*[@class='root'][@data-pcie-root='" + root + "']" + box.substr(1)).size(), 1u)
          << g.pci_bus_id << " not inside " << root;
    }
  }
  EXPECT_EQ(svg.Strings("//*[@class='gpu']/@data-bus-id").size(), s.gpus.size());

  // Every RDMA NIC: a box with its name and "RDMA".
  std::size_t rdma = 0;
  for (const Nic& n : s.nics) {
    if (!n.rdma) continue;
    ++rdma;
    const auto texts = svg.Strings("//*[@class='nic rdma'][@data-nic='" + n.name + "']/*[local-name()='text']");
    ASSERT_FALSE(texts.empty()) << n.name;
    EXPECT_EQ(texts.front(), "NIC " + n.name + " · RDMA");
  }
  EXPECT_EQ(svg.Strings("//*[@class='nic rdma']").size(), rdma);

  // Every NUMA node with its CPU count.
  for (const NumaNode& m : s.numa_nodes) {
    const auto texts = svg.Strings("//*[@class='numa'][@data-numa='" + std::to_string(m.os_index) + "']/*[local-name()='text']");
    ASSERT_GE(texts.size(), 2u) << m.os_index;
    EXPECT_EQ(texts[1].rfind(std::to_string(m.cpus) + " CPUs · ", 0), 0u) << texts[1];
  }

  // Every package: a box holding exactly its NUMA nodes (in the tree and in the drawn
  // rectangles), with their CPU total; a node in no package sits in no package box.
  std::map<uint32_t, std::pair<uint32_t, std::set<std::string>>> packages;  // CPUs, NUMA OS indexes
  for (uint32_t k = 0; k < s.numa_nodes.size(); ++k) {
    const std::string numa = std::to_string(s.numa_nodes[k].os_index);
    const uint32_t package = node->NumaPackage(k);
    if (package == kNoIndex) {
      EXPECT_TRUE(svg.Strings("//*[@class='package']//*[@class='numa'][@data-numa='" + numa + "']").empty()) << numa;
      continue;
    }
    packages[package].first += s.numa_nodes[k].cpus;
    packages[package].second.insert(numa);
  }
  EXPECT_EQ(svg.Strings("//*[@class='package']").size(), packages.size());
  auto rect = [&](const std::string& box) {
    std::vector<int> r;
    for (const char* a : {"x", "y", "width", "height"}) {
      const auto v = svg.Strings(box + "/*[local-name()='rect']/@" + a);
      r.push_back(v.size() == 1 ? std::stoi(v.front()) : -1);
    }
    return r;
  };
  for (const auto& [package, content] : packages) {
    const std::string box = "//*[@class='package'][@data-package='" + std::to_string(package) + "']";
    const auto texts = svg.Strings(box + "/*[local-name()='text']");
    ASSERT_EQ(texts.size(), 2u) << package;
    EXPECT_EQ(texts[0], "Package P#" + std::to_string(package));
    EXPECT_EQ(texts[1].rfind(std::to_string(content.first) + " CPUs · ", 0), 0u) << texts[1];
    const auto inside = svg.Strings(box + "/*[@class='numa']/@data-numa");
    EXPECT_EQ(std::set<std::string>(inside.begin(), inside.end()), content.second) << package;
    const auto outer = rect(box);
    for (const std::string& numa : content.second) {
      const auto r = rect(box + "/*[@class='numa'][@data-numa='" + numa + "']");
      EXPECT_TRUE(r[0] > outer[0] && r[1] > outer[1] && r[0] + r[2] < outer[0] + outer[2] &&
                  r[1] + r[3] < outer[1] + outer[3])
          << "NUMA node " << numa << " drawn outside package " << package;
    }
  }

  // Every linked pair: a path from GPU a's circle to GPU b's circle.
  for (const auto& [ic, name] : {std::pair{&s.nvlink, "NVLink"}, std::pair{&s.xgmi, "XGMI"}}) {
    const std::string panel = "//*[@class='interconnect'][@data-name='" + std::string(name) + "']";
    std::map<std::string, std::string> circle;  // "GPU3" -> "x y"
    const auto labels = svg.Strings(panel + "/*[local-name()='text'][@text-anchor='middle'][@font-weight='bold']");
    const auto xs = svg.Strings(panel + "/*[local-name()='circle'][@r='20']/@cx");
    const auto ys = svg.Strings(panel + "/*[local-name()='circle'][@r='20']/@cy");
    ASSERT_EQ(xs.size(), ys.size());
    for (std::size_t k = 0; k < xs.size() && k < labels.size(); ++k) circle[labels[k]] = xs[k] + " " + ys[k];
    std::set<std::pair<std::string, std::string>> drawn;
    const auto as = svg.Strings(panel + "/*[@class='link']/@data-a");
    const auto bs = svg.Strings(panel + "/*[@class='link']/@data-b");
    const auto ds = svg.Strings(panel + "/*[@class='link']/@d");
    ASSERT_EQ(as.size(), ic->peers.size()) << name;
    ASSERT_EQ(ds.size(), as.size());
    for (std::size_t k = 0; k < as.size(); ++k) drawn.emplace(as[k] + "|" + bs[k], ds[k]);
    for (const GpuLink& l : ic->peers) {
      const std::string key = s.gpus[l.a].pci_bus_id + "|" + s.gpus[l.b].pci_bus_id;
      auto it = std::find_if(drawn.begin(), drawn.end(), [&](const auto& p) { return p.first == key; });
      ASSERT_NE(it, drawn.end()) << name << " pair " << key;
      const auto [from, to] = Ends(it->second);
      EXPECT_EQ(from, circle["GPU" + std::to_string(l.a)]) << key;
      EXPECT_EQ(to, circle["GPU" + std::to_string(l.b)]) << key;
    }
    if (!ic->peers.empty()) {
      const auto legend = svg.Strings(panel + "/*[local-name()='text'][1]");
      ASSERT_FALSE(legend.empty());
      EXPECT_NE(legend.front().find(" per direction"), std::string::npos) << legend.front();
    }
  }

  // Deterministic: a second load and drawing gives the same bytes.
  ShapeInterner other;
  EXPECT_EQ(DrawSvg(*Load(GetParam(), other)), text);
}

INSTANTIATE_TEST_SUITE_P(RepoExports, DrawExportTest, ::testing::ValuesIn(RepoExports()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n;
                           for (char c : fs::path(p.param).stem().string()) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

// The NVSwitch DGX-2H (16 GPUs, 120 pairs through the switches) and the g4dn (8 T4, no NVLink,
// one RDMA NIC): the two shapes the picture must stay readable for.
TEST(DrawTest, Dgx2hDrawsItsPairsThroughTheSwitchHub) {
  ShapeInterner interner;
  auto node = Load(std::string(DRAGUARD_TEST_DATA) +
                       "/hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml",
                   interner);
  ASSERT_NE(node, nullptr);
  Svg svg(DrawSvg(*node));
  ASSERT_TRUE(svg.ok());
  EXPECT_EQ(svg.Strings("//*[@class='link']").size(), 120u);
  EXPECT_EQ(svg.Strings("//*[local-name()='text'][.='NVSwitch']").size(), 1u);
  EXPECT_EQ(svg.Strings("//*[@class='interconnect']/*[local-name()='text'][1]"),
            std::vector<std::string>{"NVLink through NVSwitch: 120 GPU pairs at 150 GB/s per direction"});
  EXPECT_EQ(svg.Strings("//*[@class='root']").size(), 4u);
}

TEST(DrawTest, G4dnHasNoLinkPanel) {
  ShapeInterner interner;
  auto node = Load(std::string(DRAGUARD_TEST_DATA) + "/hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
                   interner);
  ASSERT_NE(node, nullptr);
  Svg svg(DrawSvg(*node));
  ASSERT_TRUE(svg.ok());
  EXPECT_TRUE(svg.Strings("//*[@class='interconnect']").empty());
  EXPECT_EQ(svg.Strings("//*[@class='gpu']").size(), 8u);
  EXPECT_EQ(svg.Strings("//*[@class='numa']/*[local-name()='text'][2]"),
            (std::vector<std::string>{"48 CPUs · 189 GiB", "48 CPUs · 189 GiB"}));
}

// A hand-built node whose strings carry markup, control characters and invalid UTF-8.
std::shared_ptr<NodeTopology> HostileNode() {
  Shape s;
  s.numa_nodes.push_back({0, uint64_t{64} << 30, 32, "DRAM\"<x>"});
  PcieRoot r;
  r.id = "pci0000:17";
  r.numa_nodes = {0};
  s.pcie_roots.push_back(r);
  for (int i = 0; i < 2; ++i) {
    Gpu g;
    g.pci_bus_id = "0000:1" + std::to_string(8 + i) + ":00.0";
    g.model = std::string("A&B <\x01\xff\xc3> ]]> \xe2\x82\xac") + std::to_string(i);
    g.memory_bytes = uint64_t{80} << 30;
    g.pcie_root = 0;
    g.numa_nodes = {0};
    s.gpus.push_back(g);
  }
  Nic n;
  n.name = "ib0'\"&";
  n.pci_bus_id = "0000:1a:00.0";
  n.pcie_root = 0;
  n.numa_nodes = {0};
  n.rdma = true;
  s.nics.push_back(n);
  s.nvlink.source = "NVLinkBandwidth";
  s.nvlink.peers.push_back({0, 1, 300000});
  FinalizeShape(s);
  auto node = std::make_shared<NodeTopology>();
  node->name = "node<&>\x02";
  node->shape = std::make_shared<const Shape>(std::move(s));
  return node;
}

TEST(DrawTest, HostileStringsStayWellFormed) {
  auto node = HostileNode();
  Svg svg(DrawSvg(*node));
  ASSERT_TRUE(svg.ok());
  const auto first = svg.Strings("//*[@class='gpu'][1]/*[local-name()='text'][1]");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first.front(), "GPU0 A&B <\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd> ]]> \xe2\x82\xac" "0");
  EXPECT_EQ(svg.Strings("//*[@class='nic rdma']/@data-nic"), std::vector<std::string>{"ib0'\"&"});
  EXPECT_EQ(svg.Strings("/*[local-name()='svg']/*[local-name()='title']"),
            std::vector<std::string>{"topology of node<&>\xef\xbf\xbd"});
}

// A NUMA node that can take a CPU request's CPUs is outlined in the request's colour and says so.
TEST(DrawTest, NumaNodesMarkTheirCpuRequests) {
  auto node = HostileNode();
  DrawMarks marks;
  marks.gpu_requests = {{"gpu"}, {}};
  marks.numa_requests.resize(node->shape->numa_nodes.size());
  ASSERT_FALSE(marks.numa_requests.empty());
  marks.numa_requests[0] = {"cpu"};
  Svg svg(DrawSvg(*node, marks));
  ASSERT_TRUE(svg.ok());
  EXPECT_EQ(svg.Strings("//*[@class='numa'][@data-requests]/@data-requests"), std::vector<std::string>{"cpu"});
  EXPECT_EQ(svg.Strings("//*[@class='legend']/*[local-name()='text']"),
            (std::vector<std::string>{"request gpu", "request cpu"}));
  const auto strokes = svg.Strings("//*[@class='numa'][@data-requests]/*[local-name()='rect']/@stroke");
  ASSERT_EQ(strokes.size(), 1u);
  EXPECT_NE(strokes[0], "#000000");
  EXPECT_NE(DrawSvg(*node, marks), DrawSvg(*node));
}

TEST(DrawTest, MarksColourRequestsAndOutlineTheMiss) {
  auto node = HostileNode();
  DrawMarks marks;
  marks.caption = {"Pod default/train"};
  marks.gpu_requests = {{"gpu"}, {}};
  marks.nic_requests = {{"gpu-nic"}};
  const std::string plain = DrawSvg(*node);
  Svg svg(DrawSvg(*node, marks));
  ASSERT_TRUE(svg.ok());
  EXPECT_EQ(svg.Strings("//*[@data-requests]/@data-requests"), (std::vector<std::string>{"gpu", "gpu-nic"}));
  const auto fills = svg.Strings("//*[@class='gpu']/*[local-name()='rect']/@fill");
  ASSERT_EQ(fills.size(), 2u);
  EXPECT_NE(fills[0], fills[1]);
  EXPECT_EQ(svg.Strings("//*[@class='legend']/*[local-name()='text']"),
            (std::vector<std::string>{"request gpu", "request gpu-nic"}));
  EXPECT_TRUE(svg.Strings("//*[@class='miss']").empty());
  EXPECT_EQ(svg.Strings("//*[@class='machine']/*[local-name()='text'][3]"), std::vector<std::string>{"Pod default/train"});

  DrawMarks refused;
  refused.miss = "needs 4 NVLink-connected GPUs, the node has 2";
  refused.miss_gpus = {1};
  Svg miss(DrawSvg(*node, refused));
  ASSERT_TRUE(miss.ok());
  EXPECT_EQ(miss.Strings("//*[@class='miss']/*[local-name()='text']"),
            std::vector<std::string>{"refused: needs 4 NVLink-connected GPUs, the node has 2"});
  EXPECT_EQ(miss.Strings("//*[@data-miss='true']/@data-bus-id"), std::vector<std::string>{"0000:19:00.0"});
  EXPECT_NE(DrawSvg(*node, refused), plain);

  // A long reason wraps at word boundaries to the width of the picture; no word is lost.
  refused.miss.clear();
  for (int i = 0; i < 40; ++i) refused.miss += "word" + std::to_string(i) + " ";
  refused.miss += "end";
  Svg wrapped(DrawSvg(*node, refused));
  ASSERT_TRUE(wrapped.ok());
  const auto lines = wrapped.Strings("//*[@class='miss']/*[local-name()='text']");
  ASSERT_GT(lines.size(), 1u);
  std::string joined;
  for (const auto& l : lines) {
    EXPECT_LE(l.size(), 120u) << l;
    joined += (joined.empty() ? "" : " ") + l;
  }
  EXPECT_EQ(joined, "refused: " + refused.miss);
  const int width = std::stoi(wrapped.Strings("/*[local-name()='svg']/@width").front());
  EXPECT_LT(width, 1000);
}

// The rack view: a column per NVLink clique in clique order (nodes by name), nodes without one
// last; well-formed with hostile names; columns of more than kMaxRackNodes nodes say how many
// more there are.
TEST(DrawRacksSvg, OneColumnPerClique) {
  auto shape = std::make_shared<Shape>();
  shape->gpus.resize(4);
  shape->gpus[0].model = "NVIDIA GB200";
  FinalizeShape(*shape);
  std::vector<std::shared_ptr<NodeTopology>> owned;
  auto node = [&](const std::string& name, const std::string& clique) {
    auto n = std::make_shared<NodeTopology>();
    n->name = name;
    n->nvlink_clique = clique;
    n->shape = shape;
    owned.push_back(n);
    return n.get();
  };
  const std::string a = "0c6e5a52-4f7b-4e0a-9d43-3f1b7f2a9c10.1", b = "0c6e5a52-4f7b-4e0a-9d43-3f1b7f2a9c10.2";
  std::vector<const NodeTopology*> nodes = {node("rack2-tray1", b), node("cpu-only", ""), node("rack1-tray2", a),
                                            node("rack1-tray1", a), node("<evil>&\x01", b)};
  const std::string text = DrawRacksSvg(nodes);
  Svg svg(text);
  ASSERT_TRUE(svg.ok()) << text;
  EXPECT_EQ(svg.Strings("//*[local-name()='g'][@class='rack']/@data-clique"), (std::vector<std::string>{a, b}));
  EXPECT_EQ(svg.Strings("//*[local-name()='g'][@class='rack'][1]/*[local-name()='g'][@class='tray']/@data-node"),
            (std::vector<std::string>{"rack1-tray1", "rack1-tray2"}));
  EXPECT_EQ(svg.Strings("//*[local-name()='g'][@class='no-clique']/*[local-name()='g']/@data-node"),
            (std::vector<std::string>{"cpu-only"}));
  EXPECT_NE(text.find("2 nodes · 8 GPUs"), std::string::npos);
  EXPECT_NE(text.find("4 GPUs · NVIDIA GB200"), std::string::npos);
  EXPECT_NE(text.find("2 cliques · 5 nodes"), std::string::npos);
  EXPECT_EQ(DrawRacksSvg(nodes), text);  // deterministic
  std::reverse(nodes.begin(), nodes.end());
  EXPECT_EQ(DrawRacksSvg(nodes), text);  // whatever the order given

  std::vector<const NodeTopology*> many;
  for (std::size_t i = 0; i < kMaxRackNodes + 3; ++i) many.push_back(node("n" + std::to_string(1000 + i), a));
  const std::string big = DrawRacksSvg(many);
  EXPECT_TRUE(Svg(big).ok());
  EXPECT_NE(big.find("(3 more nodes not drawn)"), std::string::npos);
  EXPECT_TRUE(Svg(DrawRacksSvg({})).ok());
}

}  // namespace
}  // namespace draguard::topology
