// Kubernetes object names: the DNS-1123 shapes apimachinery checks (k8s.io/apimachinery
// pkg/util/validation), and the node name draguard derives from an export's file name.
#pragma once

#include <string>
#include <string_view>

namespace draguard::k8s {

/// True when `s` is a DNS-1123 label (1-63 characters of [a-z0-9-], alphanumeric at both ends).
bool IsDnsLabel(std::string_view s);

/// True when `s` is a DNS-1123 subdomain as apimachinery checks it (at most 253 characters of
/// dot-separated [a-z0-9]([-a-z0-9]*[a-z0-9])? parts; no per-part length limit), the shape of a
/// Node's name.
bool IsDnsSubdomain(std::string_view s);

/// The Kubernetes node name for `name` (a file name without its extension, or a host name), in
/// lower case (as the kubelet names a node after its host name): kept when that is a DNS subdomain
/// (`gpu-node-1`, `IP-10-0-0-1.ec2.internal` -> `ip-10-0-0-1.ec2.internal`); else, as the
/// cluster-test harness names its Nodes, every character other than [a-z0-9-] (`_`, `.`, `+`, ...)
/// as '-', cut to 63 characters and trimmed of '-' at both ends (`aws_g4dn-metal_2s-8259CL` ->
/// `aws-g4dn-metal-2s-8259cl`). "" when nothing is left.
std::string NodeNameFrom(std::string_view name);

}  // namespace draguard::k8s
