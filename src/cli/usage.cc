// The usage text of the draguard binary, and the part of it for one subcommand.
#include <string>

#include "commands.h"

namespace draguard::cli {
namespace {

constexpr const char* kUsage = R"(draguard - deterministic GPU allocation for Kubernetes DRA

Usage:
  draguard serve [flags]                       run the admission webhook (HTTPS)
  draguard review [--mutate] -f FILE|-         print the response to an AdmissionReview
  draguard convert -f FILE|- [flags]           convert legacy GPU requests of manifests to DRA
  draguard render [flags]                      print the templates of mutation.catalogue
  draguard render --kueue [--config F]         print the Kueue configuration matching the policy
  draguard audit -f FILE|DIR|- [flags]         judge manifests and cluster dumps as the webhook would
  draguard topology show -f FILE|DIR [-o json|table] [--node NAME]
  draguard topology export [-o FILE] [--publish]  this machine's hwloc export (NVML-enriched)
  draguard topology slices -f FILE|DIR [--node NAME] [-o yaml|json] [--cpu-mode MODE]
                           [--nic-numa-attribute driver|standard] [--device-classes]
                                              the ResourceSlices the DRA drivers would publish
  draguard topology draw -f FILE|DIR [-o FILE.svg|DIR] [--node NAME]
                                              an SVG picture of each node's topology
  draguard cel check EXPR                      parse and type-check a DRA selector
  draguard cel eval EXPR --device JSON         evaluate a DRA selector against a device
  draguard cel eval EXPR --topology F --node N evaluate it against every simulated GPU of a node
  draguard backstop [--config F] [--name N]    print the ValidatingAdmissionPolicy backstop of DG001
  draguard uninstall-webhooks --validating N --mutating N
                                               delete the webhook configurations (pre-delete hook)
  draguard selftest --url https://SVC.NS.svc --ca-file F
                                               expect the DG001 denial from a running server
  draguard version                             print the version
  draguard help                                this text

serve flags:
  --listen HOST:PORT         HTTPS address (default 127.0.0.1:8443)
  --state-dir DIR            generated CA and certificate (default ./.draguard)
  --service-name NAME        Service name for certificate SANs (default draguard)
  --namespace NS             release namespace: SANs and always-exempt (default draguard)
  --tls-cert FILE            serving certificate (PEM); hot-reloaded
  --tls-key FILE             serving key (PEM); hot-reloaded
  --client-ca FILE           require client certificates signed by this CA
  --client-cn CN             allowed client certificate CN (repeatable, e.g. kube-apiserver)
  --config FILE              policy file (default: the bundled policy); hot-reloaded
  --topology-dir DIR         hwloc XML exports, one per node; bundled:examples = the two demo
                             machines (the default only outside a cluster with no source set)
  --topology-configmaps NS   watch topology ConfigMaps (draguard.io/topology=hwloc) in NS
                             through the API instead of --topology-dir (needs --kube)
  --kube auto|on|off         Kubernetes API access (default auto: in-cluster config when
                             KUBERNETES_SERVICE_HOST is set, else none); creates templates
  --kube-timeout SECONDS     deadline of one Kubernetes API call (default 10)
  --metrics-listen HOST:PORT plain-HTTP /metrics, /healthz, /readyz
  --shutdown-delay SECONDS   keep serving after SIGTERM (default 5)
  --max-body BYTES           request body cap (default 7340032)
  --read-timeout SECONDS     deadline of the TLS handshake, of the whole header block and of
                             the whole body (default 10)
  --request-timeout SECONDS  whole-request deadline (default 10)
  --keep-alive-timeout SECS  idle keep-alive connection lifetime (default 30)
  --workers N                review worker threads (default max(16, 4 x cores))
  --io-threads N             connection threads (default: cores)
  --body-budget BYTES        request body bytes held at once; beyond: wait 1 s, then 429
                             (default 16777216)
  --max-connections N        open connections; more are closed at accept (default 10000)
  --http2 true|false         offer HTTP/2 (h2) beside HTTP/1.1 by TLS ALPN (default true)
  --inline-review-max-body BYTES  review smaller /validate bodies on the IO thread, except claims (default 131072; 0: off)
  --max-queued N             accepted connections waiting for a worker before 503 (default 1024)
  --reload-interval SECONDS  how often certificate and policy files are checked (default 1)
  --tls-required-names NAMES DNS names the serving certificate must cover, comma-separated or
                             repeatable (default SERVICE.NAMESPACE.svc when --service-name is
                             given; "" = no check); others are refused like an expired one
  --tls-self-secret NAME     tls.mode=self: CA and serving certificate kept in this Secret
  --tls-self-validating NAME ValidatingWebhookConfiguration given the CA bundle (repeatable)
  --tls-self-mutating NAME   MutatingWebhookConfiguration given the CA bundle (repeatable)
  --tls-self-ca-days N       lifetime of a generated CA (default 3650)
  --tls-self-cert-days N     lifetime of an issued serving certificate (default 365)
  --tls-self-resync SECONDS  Secret and CA bundle check period (default 60)
  --tls-self-extra-sans NAMES  more names of the serving certificate besides the Service's: DNS
                             names or IP addresses, comma-separated or repeatable
  --audit-interval SECONDS   background audit period (default 0 = off; needs API access)
  --audit-page-size N        objects per list call of the background audit (default 500)
  --audit-max-results N      results per PolicyReport (default 1000)
  --audit-policy-reports on|off  write PolicyReports (default on)
  --audit-lease NAME         the audit Lease (default SERVICE-audit)
  --audit-lease-duration SECONDS  its leaseDurationSeconds: a replica takes over this long after
                             the holder stopped renewing (6 to 3600, default 60)
  --log-level LEVEL          debug | info | warn | error | off (default info)
  Signals: SIGTERM, SIGINT, SIGQUIT drain (readiness off, --shutdown-delay, in-flight requests
  finish; a second one ends the delay); SIGHUP reloads policy, certificate and topology;
  SIGUSR1, SIGUSR2 and SIGPIPE are ignored (logged).

review flags:
  --config FILE              policy file (default: the bundled policy)
  --topology-dir DIR         hwloc XML exports, one per node (default: the bundled examples)
  --namespace NS             release namespace, always exempt (default draguard)
  --mutate                   answer as /mutate; a response patch is also printed decoded
                             (pretty JSON) on stderr after "# patch (decoded from response.patch):"
  --show-patch               with --mutate: print that decoded patch on stdout, after the response
  --draw DIR                 with --mutate: the placement pictures of convert --draw in DIR

convert: reads Pods, workloads (Deployment, Job, ...) and custom resources of the policy from a
multi-document YAML or JSON file (a kind: List is expanded into its items) and converts every pod
spec as /mutate would at CREATE. stdout: every document in input order (converted when it changed),
then the ResourceClaimTemplates (and, under mutation.computeDomains, the ComputeDomains) they
reference. Warnings, errors and a summary go to stderr.
  --config FILE              policy file (default: the bundled policy)
  --topology-dir DIR|FILE    hwloc XML exports, a directory or one file (default: none, so
                             multi-GPU Pods are refused; bundled:examples = the demo machines)
  --namespace NS             namespace of objects without metadata.namespace (default "default")
  -o yaml|json               multi-document YAML (default) or one JSON List
  --draw DIR                 an SVG per converted or refused pod spec and node shape in DIR: the
                             devices its claim can receive, or the refusal and its nearest miss
  Exit codes: 0 converted or nothing to convert, 1 some pod spec could not be converted (printed
  unchanged), 2 usage error, unreadable input, bad policy or topology.

render: the ResourceClaimTemplates of the policy's mutation.catalogue (content-addressed names,
stable output), once per --namespace; without one they carry no namespace (kubectl apply -n NS).
  --config FILE              policy file (default: the bundled policy, whose catalogue is empty)
  --topology-dir DIR|FILE    hwloc XML exports, a directory or one file (default: none, so
                             multi-GPU Pods are refused; bundled:examples = the demo machines)
  --namespace NS, -n NS      namespace of the templates (repeatable)
  -o yaml|json               multi-document YAML (default) or one JSON List
  --kueue                    instead: the Kueue Configuration fragment (resources.deviceClassMappings)
                             that charges every DeviceClass of the policy's claims against
                             ClusterQueue quota: nvidia.com/gpu for whole GPUs, draguard.io/... for
                             MIG devices, NICs, CPUs and IMEX channels (YAML with comments, or JSON)
  Exit codes: 0 ok (an empty catalogue prints nothing), 1 a profile cannot be generated, 2 usage
  error, bad policy or topology, or classes Kueue cannot map as the policy names them.

backstop: a ValidatingAdmissionPolicy + binding (admissionregistration.k8s.io/v1) that the API
server evaluates itself, rejecting Pods with legacy GPU requests even while the webhook is down.
  --config FILE              policy file (default: the bundled policy)
  --name NAME                name of both objects (default draguard-backstop)
  --namespace NS             release namespace, always exempt
  -o yaml|json               multi-document YAML (default) or one JSON List

uninstall-webhooks: deletes webhook configurations through the in-cluster API (404 counts as done).
  --validating NAME          a ValidatingWebhookConfiguration (repeatable)
  --mutating NAME            a MutatingWebhookConfiguration (repeatable)
  --secret NAME              also delete this Secret (tls.mode=self) in --namespace NS
  --kube-timeout SECONDS     deadline of one API call (default 10)

selftest: posts a legacy-GPU Pod review to URL/validate over TLS (CA and host name verified).
  --url https://HOST[:PORT]  the webhook Service, e.g. https://draguard.draguard-system.svc:443
  --ca-file FILE             CA bundle that signed the serving certificate
  --expect deny|audit        deny (default): exit 0 only on the DG001 denial; audit: on its annotation
  --namespace NS             namespace of the reviewed Pod (default draguard-selftest; not exempt)
  --timeout SECONDS          whole-call deadline (default 10)

audit: reads every -f (repeatable; files, directories recursively, or - for stdin) as YAML or JSON
streams: multi-document YAML, helm template output, kind: List dumps (kubectl get -A -o yaml|json),
one document or List item at a time. Every Pod, workload, custom resource of the policy,
ResourceClaim and ResourceClaimTemplate is judged as a CREATE, as /mutate then /validate would.
  --config FILE              policy file (default: the bundled policy)
  --topology-dir DIR|FILE    hwloc XML exports, a directory or one file (default: the bundled examples)
  --namespace NS             namespace of objects without metadata.namespace (default "default")
  --release-namespace NS     the webhook's namespace, always exempt (as serve --namespace)
  -o table|json|yaml|policyreport
                             one line per finding (default), a JSON or YAML AuditReport, or
                             wgpolicyk8s.io/v1alpha2 PolicyReports (one per namespace)
  --fail-on deny|warn|audit  exit 1 also for warn (and audit) findings (default deny)
  --max-results N            results per PolicyReport (default 1000; the summary counts all)
  Exit codes: 0 nothing would be denied, 1 something would be denied, 2 usage error, unreadable or
  malformed input (reported with file and document index; the rest is still audited), bad policy.

Exit codes (other commands): 0 ok, 1 usage or configuration error, 2 runtime error.
)";


}  // namespace

std::string UsageText() { return kUsage; }

std::string CommandUsage(const std::string& command) {
  const std::string text = kUsage;
  std::string out = "Usage:\n";
  // The command's lines of the summary ("  draguard CMD ...", with their continuation lines).
  std::size_t pos = 0;
  bool in_command = false;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) {
      if (out.size() > 7) break;  // the summary ended
      continue;
    }
    if (line.rfind("  draguard ", 0) == 0) {
      in_command = line.rfind("  draguard " + command + " ", 0) == 0 || line == "  draguard " + command;
    } else if (line.rfind("      ", 0) != 0) {
      in_command = false;
    }
    if (in_command) out += line + "\n";
  }
  if (out.size() == 7) return text;  // not a command of the summary
  // The command's section: "CMD flags:" or "CMD:" up to the next blank line.
  for (const std::string& head : {command + " flags:", command + ":"}) {
    const std::size_t at = text.find("\n" + head);
    if (at == std::string::npos) continue;
    const std::size_t end = text.find("\n\n", at + 1);
    out += "\n" + text.substr(at + 1, (end == std::string::npos ? text.size() : end + 1) - (at + 1));
    break;
  }
  return out;
}

}  // namespace draguard::cli
