// The review of `/validate-topology`: the admission check that keeps every shape object's content
// equal to what its name says (kubetopo/shape_object.h), so that no writer, a node's exporter
// least of all, can publish a shape under another shape's name. Chart: a ValidatingWebhook on
// CREATE and UPDATE of ConfigMaps labelled draguard.io/topology=shape in the release namespace,
// failurePolicy Fail.
//
// Unlike /validate it does not depend on the policy: no mode, no exemption, no rule IDs. The
// response goes through the one response builder (admission::Complete).
#pragma once

#include <cstddef>
#include <string_view>

#include "draguard/admission/codec.h"
#include "draguard/webhook/reviewer.h"

namespace draguard::webhook {

/// Decodes `body` (an AdmissionReview) and answers it: a CREATE or UPDATE of a ConfigMap is
/// allowed when it is a valid shape object (kubetopo::VerifyShapeObject: name = digest of the
/// content, labels, immutable, a record within the limits whose fingerprint is the label's) and
/// denied (403) with the reason otherwise; other operations and kinds are allowed. Bad bodies
/// get 400 like /validate. `readable_past_end`: see admission::DecodeReview.
ReviewOutcome ReviewTopologyObject(std::string_view body, const admission::DecodeLimits& limits,
                                   std::size_t readable_past_end = 0);

}  // namespace draguard::webhook
