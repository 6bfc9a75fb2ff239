// What an audit run found: counters (Summary), PolicyReports per namespace (ReportBuilder), and
// the streaming writers of `draguard audit -o table|json|yaml|policyreport`.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/audit/allocation.h"
#include "draguard/audit/judge.h"

namespace draguard::audit {

/// Counters over one audit run.
struct Summary {
  std::uint64_t documents = 0;  ///< documents and List items read
  std::uint64_t objects = 0;    ///< objects judged
  std::uint64_t skipped = 0;    ///< objects of kinds the webhook does not review
  std::uint64_t malformed = 0;  ///< documents that could not be read or are not objects
  std::map<std::string, std::uint64_t> verdicts;  ///< verdict name → objects
  std::map<std::pair<std::string, std::string>, std::uint64_t> findings;  ///< (rule, action) → findings
  std::uint64_t converted = 0;        ///< objects /mutate converts (or whose Pods it converts)
  std::uint64_t refused = 0;          ///< objects /mutate cannot convert
  std::uint64_t mutation_exempt = 0;  ///< objects exempt from conversion
  std::map<std::string, std::uint64_t> refusals;  ///< why not convertible → objects (at most 20 reasons, then "other")
  std::uint64_t allocation_pods = 0;        ///< bound Pods with GPUs whose allocation was analysed
  std::uint64_t allocation_unresolved = 0;  ///< of those, Pods using a claim that was not found
  /// (alignment, origin, result) → containers with GPUs (AlignmentName, ClaimOriginName, pass|warn|fail).
  std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> allocations;
  std::uint64_t nvlink_spread = 0;  ///< running job units whose GPU Pods span NVLink cliques (NvlinkSpread)

  /// Counts one verdict.
  void Add(const ObjectVerdict& v);
  /// Counts one analysed allocation.
  void AddAllocation(const PodAllocation& a);
  /// Counts one job unit NvlinkSpread reports, and its findings (not as a judged object).
  void AddSpread(const ObjectVerdict& v);
  /// Containers whose allocation has the result `result` (pass, warn, fail).
  std::uint64_t allocation_results(const std::string& result) const;
  /// Adds the counters of `other`.
  void Merge(const Summary& other);
  /// Objects the webhook would deny.
  std::uint64_t denied() const;
  /// The counters as JSON (the `summary` of the json and yaml outputs).
  admission::Json ToJson() const;
};

/// The PolicyReport result of a finding: deny and audit → "fail", warn → "warn", error → "error".
const char* ReportResult(const std::string& action);

/// Collects wgpolicyk8s.io/v1alpha2 PolicyReports, one per namespace (a ClusterPolicyReport for
/// objects without one): at most `max_results` results each, the summary counts everything.
/// Passing objects count as `pass`, exempt ones as `skip`; neither adds a result.
class ReportBuilder {
 public:
  /// `max_results` caps the results of each report.
  explicit ReportBuilder(std::size_t max_results = 1000) : max_results_(max_results) {}
  /// Adds the results of one judged object.
  void Add(const ObjectVerdict& v);
  /// Adds one result (rule `allocation`) per container of `a` with something to align
  /// (Reportable): its result, the message naming the devices, and properties alignment, origin,
  /// node, devices and claims. Passing results take only the room failing and warning ones leave.
  void AddAllocation(const PodAllocation& a);
  /// The reports, by namespace ("" = the ClusterPolicyReport), named `name`, with `labels`.
  std::vector<admission::Json> Reports(const std::string& name,
                                       const std::map<std::string, std::string>& labels) const;
  /// Adds the reports of `other` (results beyond the cap are counted as dropped).
  void Merge(const ReportBuilder& other);
  /// Namespaces seen so far.
  std::size_t size() const { return reports_.size(); }

 private:
  struct Report {
    admission::Json results = admission::Json::array();
    admission::Json passes = admission::Json::array();  // allocation results that pass, after `results`
    std::uint64_t pass = 0, fail = 0, warn = 0, error = 0, skip = 0, dropped = 0;
  };
  std::size_t max_results_;
  std::map<std::string, Report> reports_;
};

/// Writes the results of `draguard audit` as they arrive; memory stays bounded (policyreport
/// keeps at most its capped results per namespace).
class Writer {
 public:
  virtual ~Writer() = default;
  /// One judged object; `where` says where it was read ("FILE: document N").
  virtual void Object(const ObjectVerdict& v, const std::string& where) = 0;
  /// A document that could not be judged.
  virtual void Malformed(const std::string& where, const std::string& error) = 0;
  /// What one Pod was allocated (`a.where` says where it was read).
  virtual void Allocation(const PodAllocation& a) = 0;
  /// Ends the output.
  virtual void End(const Summary& summary) = 0;
};

/// A writer for `format` (table | json | yaml | policyreport), or null for another format.
/// `max_results` caps the results per PolicyReport.
std::unique_ptr<Writer> MakeWriter(std::string_view format, std::ostream& out, std::size_t max_results = 1000);

/// The human summary printed after the results ("N objects read, ...").
std::string SummaryText(const Summary& s);

}  // namespace draguard::audit
