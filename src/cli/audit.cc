// `draguard audit`: judges every Pod, workload, configured custom resource and DRA claim of
// manifests and cluster dumps as a CREATE, with the webhook's own decision step, and reports the
// findings. Reads streams one document (or List item) at a time.
//
// With Pods, ResourceClaims and ResourceSlices in the input, it also reports what each bound Pod
// was really allocated (audit/allocation.h).
//
// Exit codes: 0 nothing the webhook would deny, 1 something it would deny or an allocation weaker
// than its claim promised (or, with --fail-on warn|audit, warn or audit), 2 usage error, unreadable
// or malformed input, bad policy or topology.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "draguard/audit/allocation.h"
#include "draguard/audit/judge.h"
#include "draguard/audit/nvlink_spread.h"
#include "draguard/audit/reader.h"
#include "draguard/audit/report.h"
#include "draguard/engine/registry.h"
#include "draguard/policy/store.h"
#include "draguard/topology/store.h"
#include "draguard/webhook/reviewer.h"
#include "flags.h"

namespace draguard::cli {
namespace {

constexpr int kAuditOk = 0;
constexpr int kAuditDenied = 1;
constexpr int kAuditError = 2;

// Inputs at least this large get a progress line when stderr is a terminal.
constexpr std::uintmax_t kProgressBytes = std::uintmax_t{64} << 20;

constexpr const char* kAuditUsageText =
    "usage: draguard audit -f FILE|DIR|- [-f ...] [--config POLICY] [--topology-dir DIR|FILE] "
    "[--namespace NS] [--release-namespace NS] [-o table|json|yaml|policyreport] [--fail-on deny|warn|audit] "
    "[--max-results N]\n";

// Throttled "\r…" line on stderr.
class Progress {
 public:
  Progress(std::ostream& err, bool enabled, std::uintmax_t total) : err_(err), enabled_(enabled), total_(total) {}
  void Update(std::uint64_t objects, std::uintmax_t bytes) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(500)) return;
    last_ = now;
    err_ << "\rdraguard audit: " << objects << " objects, " << (bytes >> 20) << " / " << (total_ >> 20) << " MiB"
         << std::flush;
    shown_ = true;
  }
  void Done() {
    if (shown_) err_ << "\r\033[K" << std::flush;
  }

 private:
  std::ostream& err_;
  bool enabled_;
  std::uintmax_t total_;
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
};

std::uintmax_t InputBytes(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::uintmax_t total = 0;
  std::error_code ec;
  for (const auto& p : paths) {
    if (p == "-") continue;
    if (fs::is_regular_file(p, ec)) {
      total += fs::file_size(p, ec);
    } else if (fs::is_directory(p, ec)) {
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        if (it->is_regular_file(ec)) total += it->file_size(ec);
      }
    }
  }
  return total;
}

}  // namespace

int Audit(const std::vector<std::string>& args, std::istream& in, std::ostream& out, std::ostream& err) {
  Flags f = ParseFlags(args,
                       {"-f", "--file", "--config", "--topology-dir", "--namespace", "--release-namespace", "-o",
                        "--output", "--fail-on", "--max-results"},
                       {});
  if (!f.error.empty() || !f.positional.empty()) {
    err << "draguard audit: " << (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error) << "\n"
        << kAuditUsageText;
    return kAuditError;
  }
  std::vector<std::string> paths;
  for (const char* flag : {"-f", "--file"}) {
    if (auto it = f.values.find(flag); it != f.values.end()) paths.insert(paths.end(), it->second.begin(), it->second.end());
  }
  if (paths.empty()) {
    err << "draguard audit: -f FILE|DIR|- is required\n" << kAuditUsageText;
    return kAuditError;
  }
  const std::string format = f.Has("-o") ? f.Get("-o") : f.Get("--output", "table");
  const std::string fail_on = f.Get("--fail-on", "deny");
  if (fail_on != "deny" && fail_on != "warn" && fail_on != "audit") {
    err << "draguard audit: --fail-on must be deny, warn or audit, not \"" << fail_on << "\"\n";
    return kAuditError;
  }
  std::size_t max_results = 1000;
  if (f.Has("--max-results")) {
    const std::string v = f.Get("--max-results");
    char* end = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n == 0 || n > 100000) {
      err << "draguard audit: --max-results must be 1..100000, not \"" << v << "\"\n";
      return kAuditError;
    }
    max_results = static_cast<std::size_t>(n);
  }
  auto writer = audit::MakeWriter(format, out, max_results);
  if (writer == nullptr) {
    err << "draguard audit: -o must be table, json, yaml or policyreport, not \"" << format << "\"\n";
    return kAuditError;
  }
  std::string default_ns = f.Get("--namespace", "default");
  if (default_ns.empty()) default_ns = "default";

  std::vector<std::string> extra;
  if (std::string rel = f.Get("--release-namespace"); !rel.empty()) extra.push_back(rel);
  policy::PolicyStore policies(extra);
  if (!LoadCliPolicy(f, policies, "audit", err)) return kAuditError;
  auto store = LoadCliTopology(f, "audit", err);
  if (store == nullptr) return kAuditError;
  auto topo = store->Current();
  auto pol = policies.Current();
  engine::Registry registry = engine::DefaultRegistry();
  webhook::Reviewer reviewer(registry);
  audit::JudgeContext ctx{reviewer, registry, *pol, topo.get(), std::chrono::system_clock::now(), default_ns};
  audit::SchedulerClaimIndex scheduler_claims;  // the Pods read so far prove kube-scheduler's claims
  ctx.scheduler_claims = &scheduler_claims;

  const std::uintmax_t total = InputBytes(paths);
  Progress progress(err, isatty(STDERR_FILENO) == 1 && total >= kProgressBytes, total);
  std::uintmax_t done_bytes = 0, file_bytes = 0;
  audit::Summary summary;
  std::uint64_t warned = 0, audited = 0;
  bool input_error = false;
  // What bound Pods were really allocated: Pods, ResourceClaims and ResourceSlices joined in any order.
  audit::AllocationJoin allocations(topo.get());
  const audit::AllocationJoin::Sink allocated = [&](audit::PodAllocation&& a) {
    summary.AddAllocation(a);
    writer->Allocation(a);
  };
  // Running multi-node jobs whose Pods span NVLink cliques (DG017), once every Pod is read.
  audit::NvlinkSpread spread(topo.get(), *pol);

  audit::DocumentSink sink = [&](audit::Document&& d) {
    ++summary.documents;
    file_bytes = d.offset;
    progress.Update(summary.objects, done_bytes + file_bytes);
    const std::string where = d.Where();
    auto malformed = [&](const std::string& why) {
      ++summary.malformed;
      input_error = true;
      err << "draguard audit: " << where << ": " << why << "\n";
      writer->Malformed(where, why);
    };
    if (!d.error.empty()) {
      malformed(d.error);
      return true;
    }
    const auto& o = d.object;
    if (!o.is_object() || !o.contains("kind") || !o["kind"].is_string() || !o.contains("apiVersion") ||
        !o["apiVersion"].is_string()) {
      malformed("not a Kubernetes object (apiVersion and kind are required)");
      return true;
    }
    const std::string api = o["apiVersion"].get<std::string>();
    const auto slash = api.find('/');
    const std::string group = slash == std::string::npos ? "" : api.substr(0, slash);
    const std::string& kind = o["kind"].get_ref<const std::string&>();
    if (group == "resource.k8s.io" && kind == "ResourceSlice") allocations.AddSlice(o);
    if (group == "resource.k8s.io" && kind == "ResourceClaim") allocations.AddClaim(o);
    if (group.empty() && kind == "Pod") {
      allocations.AddPod(o, allocated, where, default_ns);
      spread.AddPod(o, default_ns);
    }
    if (!audit::IsAudited(group, kind, *pol)) {
      ++summary.skipped;
      return true;
    }
    try {
      audit::ObjectVerdict v = audit::JudgeObject(std::move(d.object), ctx);
      summary.Add(v);
      for (const auto& fi : v.findings) {
        warned += fi.action == "warn" || fi.action == "error" ? 1 : 0;
        audited += fi.action == "audit" ? 1 : 0;
      }
      writer->Object(v, where);
    } catch (const std::exception& e) {
      malformed(std::string("could not be judged: ") + e.what());
    }
    return true;
  };

  for (const auto& path : paths) {
    file_bytes = 0;
    if (path == "-") {
      audit::ReadStream(in, "-", sink);
    } else if (Status st = audit::ReadPath(path, sink); !st.ok()) {
      err << "draguard audit: " << st.message() << "\n";
      input_error = true;
    }
    std::error_code ec;
    done_bytes += path == "-" ? 0 : (std::filesystem::is_regular_file(path, ec) ? file_bytes : 0);
  }
  allocations.Finish(allocated);
  std::uint64_t spread_denied = 0;
  for (const audit::ObjectVerdict& v : spread.Spread()) {
    summary.AddSpread(v);
    for (const auto& fi : v.findings) {
      spread_denied += fi.action == "deny" ? 1 : 0;
      warned += fi.action == "warn" ? 1 : 0;
      audited += fi.action == "audit" ? 1 : 0;
    }
    writer->Object(v, "running Pods");
  }
  progress.Done();
  if (allocations.stats().dropped > 0) {
    err << "draguard audit: the allocation audit reached its caps " << allocations.stats().dropped
        << " times (claims and devices beyond them are left out, Pods beyond them analysed with what was read "
           "before them); list the slices and claims before the Pods\n";
  }
  writer->End(summary);
  (format == "table" ? out : err) << (format == "table" ? "\n" : "") << audit::SummaryText(summary);

  if (input_error) return kAuditError;
  bool fail = summary.denied() > 0 || spread_denied > 0 || summary.allocation_results("fail") > 0;
  if (fail_on == "warn" || fail_on == "audit") fail = fail || warned > 0 || summary.allocation_results("warn") > 0;
  if (fail_on == "audit") fail = fail || audited > 0;
  return fail ? kAuditDenied : kAuditOk;
}

}  // namespace draguard::cli
