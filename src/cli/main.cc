// draguard: GPU allocation policy webhook for Kubernetes DRA.
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "draguard/cel/cli.h"
#include "draguard/topology/cli.h"

namespace {

constexpr const char* kUsage = R"(draguard - deterministic GPU allocation for Kubernetes DRA

Usage:
  draguard serve [flags]                       run the admission webhook (HTTPS)
  draguard review [--mutate] -f FILE|-         print the response to an AdmissionReview
  draguard topology show -f FILE|DIR [-o json|table] [--node NAME]
  draguard cel check EXPR                      parse and type-check a DRA selector
  draguard cel eval EXPR --device JSON         evaluate a DRA selector against a device
  draguard cel eval EXPR --topology F --node N evaluate it against every simulated GPU of a node
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
  --topology-dir DIR         hwloc XML exports, one per node
  --topology-configmaps NS   watch topology ConfigMaps (draguard.io/topology=hwloc) in NS
                             through the API instead of --topology-dir (needs --kube)
  --kube auto|on|off         Kubernetes API access (default auto: in-cluster config when
                             KUBERNETES_SERVICE_HOST is set, else none); creates templates
  --kube-timeout SECONDS     deadline of one Kubernetes API call (default 10)
  --metrics-listen HOST:PORT plain-HTTP /metrics, /healthz, /readyz
  --shutdown-delay SECONDS   keep serving after SIGTERM (default 5)
  --max-body BYTES           request body cap (default 7340032)
  --read-timeout SECONDS     per-read socket timeout (default 10)
  --request-timeout SECONDS  whole-request deadline (default 10)
  --keep-alive-timeout SECS  idle keep-alive connection lifetime (default 30)
  --workers N                worker threads (default max(64, 8 x cores))
  --log-level LEVEL          debug | info | warn | error (default info)

Exit codes: 0 ok, 1 usage or configuration error, 2 runtime error.
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return draguard::cli::kExitUsage;
  }
  std::string cmd = args.front();
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << kUsage;
    return draguard::cli::kExitOk;
  }
  if (cmd == "version" || cmd == "--version") {
    std::cout << "draguard " << DRAGUARD_VERSION << "\n";
    return draguard::cli::kExitOk;
  }
  if (cmd == "serve") return draguard::cli::Serve(rest, std::cout, std::cerr);
  if (cmd == "review") return draguard::cli::Review(rest, std::cin, std::cout, std::cerr);
  if (cmd == "cel") {
    for (const auto& a : rest) {
      if (a == "--topology" || a.rfind("--topology=", 0) == 0) {
        return draguard::cli::CelEvalOnTopology(rest, std::cout, std::cerr);
      }
    }
    return draguard::cel::RunCelCommand(rest, std::cout, std::cerr);
  }
  if (cmd == "topology") return draguard::topology::RunTopologyCommand(rest, std::cout, std::cerr);
  std::cerr << "draguard: unknown command \"" << cmd << "\"\n\n" << kUsage;
  return draguard::cli::kExitUsage;
}
