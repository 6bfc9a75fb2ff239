// libFuzzer target over what draguard reads back of a published topology (kubetopo/shape_object.h):
// a shape record (any bytes; the seeds are the records of real exports), a node's topology
// annotation, and the stored shape object around a record. Decoding must refuse with a reason or
// give a consistent shape, within bounded memory and time; never crash.
//
// Build: cmake -DDRAGUARD_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ ...; run e.g.
//   kubetopo_fuzz -max_total_time=60 test/fuzz/seeds/kubetopo
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "draguard/kube/watch.h"
#include "draguard/kubetopo/publisher.h"
#include "draguard/kubetopo/shape_object.h"
#include "draguard/topology/shape_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draguard;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  topology::ShapeInterner interner;

  // The record itself.
  auto record = topology::DecodeShapeRecord(bytes, interner);
  if (record.ok()) {
    const topology::Shape& s = *record->shape;
    for (const topology::Gpu& g : s.gpus) {
      if (g.pcie_root != topology::kNoIndex && g.pcie_root >= s.pcie_roots.size()) std::abort();
      if (g.memory_numa_node != topology::kNoIndex && s.NumaIndex(g.memory_numa_node) == topology::kNoIndex) std::abort();
    }
    for (const topology::GpuLink& l : s.nvlink.peers) {
      if (l.a >= s.gpus.size() || l.b >= s.gpus.size()) std::abort();
    }
    if (!record->numa_packages.empty() && record->numa_packages.size() != s.numa_nodes.size()) std::abort();
    // What decodes, encodes back to the same record (the digest names one content).
    topology::ParsedExport again;
    again.shape = s;
    again.cpus = *record->cpus;
    again.numa_packages = record->numa_packages;
    if (topology::EncodeShapeRecord(again) != bytes) std::abort();
  }

  // The same bytes stored as a shape object named by their digest.
  auto gz = kubetopo::Gzip(bytes);
  if (!gz.ok()) std::abort();
  kube::Object cm;
  cm.namespace_name = "ns";
  cm.name = std::string(kubetopo::kShapeObjectPrefix) + kubetopo::RecordDigest(bytes);
  cm.labels = {{kubetopo::kTopologyLabel, kubetopo::kShapeObjectLabelValue},
               {std::string(topology::kShapeLabel), record.ok() ? record->shape->fingerprint : "0123456789abcdef"}};
  cm.immutable = true;
  cm.binary_data[kubetopo::kShapeObjectKey] = *gz;
  auto verified = kubetopo::VerifyShapeObject(cm, interner);
  if (verified.ok() != record.ok()) std::abort();

  // The bytes as a node's topology annotation.
  kube::Object node;
  node.name = "n";
  node.labels[std::string(topology::kShapeLabel)] = "0123456789abcdef";
  node.annotations[kubetopo::kNodeAnnotation] = std::string(bytes);
  auto pub = kubetopo::ReadNodePublication(node);
  if (pub.ok() && pub->shape_object.size() != 32) std::abort();
  if (pub.ok() && !pub->facts.nvlink_clique.empty() && !topology::IsNvlinkClique(pub->facts.nvlink_clique)) std::abort();
  return 0;
}
