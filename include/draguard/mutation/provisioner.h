// Template provisioning: making sure the ResourceClaimTemplates a converted Pod references exist
// before the Pod is admitted. The interface is small so that the webhook stays free of API types;
// the Kubernetes-backed implementation lives in the provision module.
#pragma once

#include <chrono>
#include <string_view>

#include "draguard/mutation/mutation.h"
#include "draguard/status.h"

namespace draguard::mutation {

/// Ensures generated templates exist. Implementations must be thread-safe.
class TemplateProvisioner {
 public:
  virtual ~TemplateProvisioner() = default;
  /// Ensures `tmpl` exists in `namespace_name` with the same spec. OK when it was created or was
  /// already there with identical content; FailedPrecondition when a different object holds the
  /// name; Unavailable when the API server could not be reached or answer within `timeout`. The
  /// reviewer passes what is left of the review's deadline, at most mutation.apiTimeoutMs; the
  /// call must return within it.
  virtual Status Ensure(std::string_view namespace_name, const GeneratedTemplate& tmpl,
                        std::chrono::milliseconds timeout) = 0;
  /// Ensures the ComputeDomain `cd` exists in `namespace_name` with the same spec, under the same
  /// rules as Ensure. The default refuses: a provisioner that cannot create them says so.
  virtual Status EnsureComputeDomain(std::string_view namespace_name, const GeneratedComputeDomain& cd,
                                     std::chrono::milliseconds timeout) {
    (void)namespace_name;
    (void)timeout;
    return Status::FailedPrecondition("cannot create ComputeDomain " + cd.name + ": this provisioner makes templates only");
  }
};

}  // namespace draguard::mutation
