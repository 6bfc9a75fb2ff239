// ParseServeConfig: the defaults, every flag of `draguard serve`, and a message naming the flag
// for every bad value.
#include "serve_config.h"

#include <fstream>
#include <sstream>

#include "commands.h"

#include <gtest/gtest.h>

namespace draguard::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

ServeConfig Parse(const std::vector<std::string>& args) {
  auto cfg = ParseServeConfig(args);
  EXPECT_TRUE(cfg.ok()) << cfg.status().message();
  return cfg.ok() ? *cfg : ServeConfig{};
}

// The bundled demo exports: by name, or for a local newcomer with no source; never in a cluster.
TEST(TopologySourceFor, NoDemoTopologyInACluster) {
  EXPECT_EQ(TopologySourceFor(Parse({}), /*in_cluster=*/false), TopologySource::kExamples);
  EXPECT_EQ(TopologySourceFor(Parse({}), /*in_cluster=*/true), TopologySource::kNone);
  EXPECT_EQ(TopologySourceFor(Parse({"--topology-dir", "bundled:examples"}), true), TopologySource::kExamples);
  EXPECT_EQ(TopologySourceFor(Parse({"--topology-dir", "/topology"}), false), TopologySource::kDirectory);
  EXPECT_EQ(TopologySourceFor(Parse({"--topology-configmaps", "gpu", "--kube", "on"}), false),
            TopologySource::kConfigMaps);
}

TEST(ParseServeConfig, DefaultsAreTheDocumentedOnes) {
  const ServeConfig c = Parse({});
  const server::ServerOptions& s = c.server;
  EXPECT_EQ(s.host, "127.0.0.1");
  EXPECT_EQ(s.port, 8443);
  EXPECT_EQ(s.metrics_host, "");
  EXPECT_EQ(s.metrics_port, 0);
  EXPECT_EQ(s.shutdown_delay, milliseconds(5000));
  EXPECT_EQ(s.read_timeout, milliseconds(10000));
  EXPECT_EQ(s.write_timeout, milliseconds(10000));
  EXPECT_EQ(s.request_deadline, milliseconds(10000));
  EXPECT_EQ(s.keep_alive_timeout, seconds(30));
  EXPECT_EQ(s.reload_interval, milliseconds(1000));
  EXPECT_EQ(s.max_body, 7340032u);
  EXPECT_EQ(s.workers, 0u);
  EXPECT_EQ(s.max_queued, 1024u);
  EXPECT_TRUE(s.http2);
  EXPECT_EQ(s.tls_cert, "");
  EXPECT_EQ(s.tls_key, "");
  EXPECT_EQ(s.client_ca, "");
  EXPECT_TRUE(s.client_cns.empty());
  EXPECT_EQ(c.log_level, logging::Level::kInfo);
  EXPECT_EQ(c.namespace_name, "draguard");
  EXPECT_EQ(c.service_name, "draguard");
  EXPECT_EQ(c.state_dir, ".draguard");
  EXPECT_FALSE(c.tls_from_flags);
  EXPECT_FALSE(c.policy_file.has_value());
  EXPECT_EQ(c.topology_dir, "");
  EXPECT_EQ(c.topology_configmaps, "");
  EXPECT_EQ(c.kube, KubeMode::kAuto);
  EXPECT_EQ(c.kube_timeout, milliseconds(10000));
}

TEST(ParseServeConfig, EveryFlag) {
  // Files are only named, never opened: parsing has no I/O.
  const ServeConfig c = Parse({"--listen", "[::1]:9443", "--state-dir", "/var/lib/dg", "--service-name", "hook",
                               "--namespace", "gpu-system", "--tls-cert", "/no/tls.crt", "--tls-key", "/no/tls.key",
                               "--client-ca", "/no/ca.crt", "--client-cn", "kube-apiserver", "--client-cn=a,,b",
                               "--config", "/no/policy.yaml", "--topology-dir", "/no/topology",
                               "--kube", "on", "--kube-timeout", "2.5", "--metrics-listen", "0.0.0.0:9090",
                               "--shutdown-delay", "0", "--max-body", "1024", "--read-timeout", "1.5",
                               "--request-timeout=3", "--keep-alive-timeout", "60", "--workers", "16",
                               "--max-queued", "0", "--reload-interval", "0.02", "--log-level", "debug",
                               "--http2=false"});
  const server::ServerOptions& s = c.server;
  EXPECT_EQ(s.host, "::1");
  EXPECT_EQ(s.port, 9443);
  EXPECT_EQ(c.state_dir, "/var/lib/dg");
  EXPECT_EQ(c.service_name, "hook");
  EXPECT_EQ(c.namespace_name, "gpu-system");
  EXPECT_TRUE(c.tls_from_flags);
  EXPECT_EQ(s.tls_cert, "/no/tls.crt");
  EXPECT_EQ(s.tls_key, "/no/tls.key");
  EXPECT_EQ(s.client_ca, "/no/ca.crt");
  EXPECT_EQ(s.client_cns, (std::vector<std::string>{"kube-apiserver", "a", "b"}));
  EXPECT_EQ(c.policy_file, std::optional<std::string>("/no/policy.yaml"));
  EXPECT_EQ(c.topology_dir, "/no/topology");
  EXPECT_EQ(c.kube, KubeMode::kOn);
  EXPECT_EQ(c.kube_timeout, milliseconds(2500));
  EXPECT_EQ(s.metrics_host, "0.0.0.0");
  EXPECT_EQ(s.metrics_port, 9090);
  EXPECT_EQ(s.shutdown_delay, milliseconds(0));
  EXPECT_EQ(s.max_body, 1024u);
  EXPECT_EQ(s.read_timeout, milliseconds(1500));
  EXPECT_EQ(s.write_timeout, milliseconds(1500));  // follows --read-timeout
  EXPECT_EQ(s.request_deadline, milliseconds(3000));
  EXPECT_EQ(s.keep_alive_timeout, seconds(60));
  EXPECT_EQ(s.workers, 16u);
  EXPECT_EQ(s.max_queued, 0u);
  EXPECT_FALSE(s.http2);
  EXPECT_EQ(s.reload_interval, milliseconds(20));
  EXPECT_EQ(c.log_level, logging::Level::kDebug);

  const ServeConfig cm = Parse({"--topology-configmaps", "topo", "--kube=off", "--kube", "auto", "--log-level=off"});
  EXPECT_EQ(cm.topology_configmaps, "topo");
  EXPECT_EQ(cm.kube, KubeMode::kAuto);  // the last value counts
  EXPECT_EQ(cm.log_level, logging::Level::kOff);
  EXPECT_EQ(Parse({"--kube", "off"}).kube, KubeMode::kOff);
  EXPECT_TRUE(Parse({"--http2", "true"}).server.http2);
  EXPECT_FALSE(Parse({"--http2", "off"}).server.http2);
  EXPECT_EQ(Parse({"--log-level", "warning"}).log_level, logging::Level::kWarn);
  EXPECT_EQ(Parse({"--log-level", "error"}).log_level, logging::Level::kError);
  EXPECT_EQ(Parse({"--listen", "0.0.0.0:0"}).server.port, 0);
  EXPECT_EQ(Parse({"--config="}).policy_file, std::optional<std::string>(""));  // given, empty: refused when loaded
  EXPECT_EQ(Parse({"--topology-dir="}).topology_dir, "");                        // the bundled examples
}

TEST(ParseServeConfig, SelfTls) {
  EXPECT_FALSE(Parse({}).tls_self.has_value());
  const ServeConfig c = Parse({"--tls-self-secret", "dg-tls", "--tls-self-validating", "dg", "--tls-self-mutating",
                               "dg", "--tls-self-mutating", "dg2", "--tls-self-ca-days", "100",
                               "--tls-self-cert-days", "10", "--tls-self-resync", "30", "--tls-self-extra-sans",
                               "127.0.0.1,localhost", "--tls-self-extra-sans", "::1"});
  ASSERT_TRUE(c.tls_self.has_value());
  EXPECT_EQ(c.tls_self->secret, "dg-tls");
  EXPECT_EQ(c.tls_self->validating, std::vector<std::string>{"dg"});
  EXPECT_EQ(c.tls_self->mutating, (std::vector<std::string>{"dg", "dg2"}));
  EXPECT_EQ(c.tls_self->ca_days, 100);
  EXPECT_EQ(c.tls_self->cert_days, 10);
  EXPECT_EQ(c.tls_self->resync, milliseconds(30000));
  EXPECT_EQ(c.tls_self->extra_sans, (std::vector<std::string>{"127.0.0.1", "localhost", "::1"}));
  const ServeConfig d = Parse({"--tls-self-secret", "s"});
  EXPECT_EQ(d.tls_self->ca_days, 3650);
  EXPECT_EQ(d.tls_self->cert_days, 365);
  EXPECT_EQ(d.tls_self->resync, milliseconds(60000));
}

TEST(ParseServeConfig, KeepAliveIsWholeSecondsAndAtLeastOne) {
  EXPECT_EQ(Parse({"--keep-alive-timeout", "2.9"}).server.keep_alive_timeout, seconds(2));
  EXPECT_EQ(Parse({"--keep-alive-timeout", "0"}).server.keep_alive_timeout, seconds(1));
  EXPECT_EQ(Parse({"--keep-alive-timeout", "86400"}).server.keep_alive_timeout, seconds(86400));
}

struct BadCase {
  std::vector<std::string> args;
  std::string flag;     // named in the message
  std::string message;  // printed after "draguard serve: "
};

TEST(ParseServeConfig, EveryBadValueIsRefusedNamingItsFlag) {
  const std::vector<BadCase> cases = {
      {{"--bogus"}, "--bogus", "unknown flag --bogus (see draguard help)"},
      {{"--listen"}, "--listen", "flag --listen needs a value (see draguard help)"},
      {{"--log-level", "loud"}, "--log-level",
       "--log-level: log level \"loud\" is not one of debug, info, warn, error, off"},
      {{"--listen", "8443"}, "--listen", "--listen: address \"8443\" is not HOST:PORT"},
      {{"--listen", "[]:1"}, "--listen", "--listen: address \"[]:1\" has no host"},
      {{"--listen", "h:99999"}, "--listen", "--listen: port in \"h:99999\" is out of range"},
      {{"--metrics-listen", "h:x"}, "--metrics-listen", "--metrics-listen: port in \"h:x\" is not a number"},
      {{"--metrics-listen="}, "--metrics-listen", "--metrics-listen: address \"\" is not HOST:PORT"},
      {{"--shutdown-delay", "soon"}, "--shutdown-delay", "--shutdown-delay must be a number of seconds"},
      {{"--read-timeout", "-1"}, "--read-timeout", "--read-timeout must be a number of seconds"},
      {{"--request-timeout", "86401"}, "--request-timeout", "--request-timeout must be a number of seconds"},
      {{"--keep-alive-timeout", "10s"}, "--keep-alive-timeout", "--keep-alive-timeout must be a number of seconds"},
      {{"--reload-interval="}, "--reload-interval", "--reload-interval must be a number of seconds"},
      {{"--max-body", "7M"}, "--max-body", "--max-body must be a non-negative integer"},
      {{"--max-body", "1023"}, "--max-body", "--max-body must be at least 1024"},
      {{"--workers", "-1"}, "--workers", "--workers must be a non-negative integer"},
      {{"--max-queued", "1234567890123"}, "--max-queued", "--max-queued must be a non-negative integer"},
      {{"--client-cn", "kube-apiserver"}, "--client-cn", "--client-cn needs --client-ca"},
      {{"--kube", "maybe"}, "--kube", "--kube must be auto, on or off"},
      {{"--http2", "yes"}, "--http2", "--http2 must be true or false"},
      {{"--kube-timeout", "0"}, "--kube-timeout", "--kube-timeout must be a positive number of seconds"},
      {{"--kube-timeout", "x"}, "--kube-timeout", "--kube-timeout must be a positive number of seconds"},
      {{"--topology-configmaps="}, "--topology-configmaps", "--topology-configmaps needs a namespace"},
      {{"--topology-configmaps", "t", "--topology-dir", "d"}, "--topology-dir",
       "--topology-configmaps and --topology-dir exclude each other"},
      {{"--topology-configmaps", "t", "--kube", "off"}, "--kube",
       "--topology-configmaps needs Kubernetes API access (not --kube=off)"},
      {{"--tls-cert", "tls.crt"}, "--tls-key", "--tls-cert and --tls-key go together"},
      {{"--tls-key", "tls.key"}, "--tls-cert", "--tls-cert and --tls-key go together"},
      {{"--tls-self-validating", "v"}, "--tls-self-secret", "--tls-self-* flags need --tls-self-secret"},
      {{"--tls-self-secret="}, "--tls-self-secret", "--tls-self-secret needs a Secret name"},
      {{"--tls-self-secret", "s", "--tls-cert", "c", "--tls-key", "k"}, "--tls-self-secret",
       "--tls-self-secret and --tls-cert/--tls-key exclude each other"},
      {{"--tls-self-secret", "s", "--kube", "off"}, "--tls-self-secret",
       "--tls-self-secret needs Kubernetes API access (not --kube=off)"},
      {{"--tls-self-secret", "s", "--tls-self-mutating="}, "--tls-self-mutating", "--tls-self-mutating needs a name"},
      {{"--tls-self-secret", "s", "--tls-self-ca-days", "0"}, "--tls-self-ca-days",
       "--tls-self-ca-days must be a number of days (1-36500)"},
      {{"--tls-self-secret", "s", "--tls-self-ca-days", "30"}, "--tls-self-cert-days",
       "--tls-self-cert-days must not exceed --tls-self-ca-days"},
      {{"--tls-self-secret", "s", "--tls-self-resync", "0.5"}, "--tls-self-resync",
       "--tls-self-resync must be a number of seconds (at least 1)"},
      {{"--tls-self-secret", "s", "--tls-self-extra-sans", "https://x"}, "--tls-self-extra-sans",
       "--tls-self-extra-sans: https://x is neither a lower-case DNS name nor an IP address"},
      {{"--tls-self-extra-sans", "x"}, "--tls-self", "--tls-self-* flags need --tls-self-secret"},
  };
  for (const BadCase& c : cases) {
    auto cfg = ParseServeConfig(c.args);
    ASSERT_FALSE(cfg.ok()) << c.message;
    EXPECT_EQ(cfg.status().code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(cfg.status().message(), c.message);
    EXPECT_NE(cfg.status().message().find(c.flag), std::string::npos) << c.message;
  }
  auto positional = ParseServeConfig({"now"});
  ASSERT_FALSE(positional.ok());
  EXPECT_EQ(positional.status().message(), "unexpected argument now (see draguard help)");
}

TEST(ParseServeConfig, BackgroundAuditFlags) {
  auto off = ParseServeConfig({});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->audit.interval.count(), 0);  // off by default
  EXPECT_EQ(off->audit.page_size, 500u);
  EXPECT_EQ(off->audit.max_results, 1000u);
  EXPECT_TRUE(off->audit.policy_reports);
  EXPECT_EQ(off->audit.lease_duration.count(), 60);
  auto on = ParseServeConfig({"--audit-interval", "300", "--audit-page-size", "100", "--audit-max-results", "50",
                              "--audit-policy-reports", "off", "--audit-lease", "my-lease", "--audit-lease-duration", "15"});
  ASSERT_TRUE(on.ok()) << on.status().message();
  EXPECT_EQ(on->audit.interval.count(), 300);
  EXPECT_EQ(on->audit.page_size, 100u);
  EXPECT_EQ(on->audit.max_results, 50u);
  EXPECT_FALSE(on->audit.policy_reports);
  EXPECT_EQ(on->audit.lease_name, "my-lease");
  EXPECT_EQ(on->audit.lease_duration.count(), 15);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--audit-interval", "5"}, {"--audit-interval", "x"}, {"--audit-page-size", "0"},
           {"--audit-page-size", "5001"}, {"--audit-max-results", "-1"}, {"--audit-policy-reports", "yes"},
           {"--audit-lease-duration", "5"}, {"--audit-lease-duration", "3601"},
           {"--audit-interval", "60", "--kube", "off"}}) {
    auto bad = ParseServeConfig(args);
    ASSERT_FALSE(bad.ok()) << args[0];
    EXPECT_NE(bad.status().message().find(args[0] == "--kube" ? "--audit-interval" : args[0].substr(0, 12)),
              std::string::npos)
        << bad.status().message();
  }
}

// The certificate must cover the name the API server dials, once the Service is named.
TEST(ParseServeConfig, RequiredCertificateNames) {
  EXPECT_FALSE(Parse({}).server.tls_required_names.has_value());  // the names in service
  EXPECT_EQ(Parse({"--service-name", "dg", "--namespace", "gpu"}).server.tls_required_names,
            (std::vector<std::string>{"dg.gpu.svc"}));
  EXPECT_EQ(Parse({"--service-name", "dg", "--tls-required-names", "a.example,*.b.example",
                   "--tls-required-names", "c.example"})
                .server.tls_required_names.value(),
            (std::vector<std::string>{"a.example", "*.b.example", "c.example"}));
  EXPECT_TRUE(Parse({"--service-name", "dg", "--tls-required-names", ""}).server.tls_required_names->empty());
  auto bad = ParseServeConfig({"--tls-required-names", "https://x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--tls-required-names: https://x is not a DNS name"), std::string::npos);
}

// `draguard help` and `draguard serve --help` document every flag serve accepts.
TEST(ServeUsage, EveryFlagIsInTheHelpText) {
  const std::string all = UsageText();
  const std::string serve = CommandUsage("serve");
  ASSERT_NE(serve.find("draguard serve [flags]"), std::string::npos) << serve;
  for (const std::string& flag : ServeFlagNames()) {
    EXPECT_NE(all.find("  " + flag + " "), std::string::npos) << flag << " is missing from draguard help";
    EXPECT_NE(serve.find("  " + flag + " "), std::string::npos) << flag << " is missing from draguard serve --help";
  }
  // ... and the configuration reference too.
  std::ifstream in(std::string(DRAGUARD_SOURCE_DIR) + "/docs/configuration.md");
  std::stringstream doc;
  doc << in.rdbuf();
  ASSERT_FALSE(doc.str().empty());
  for (const std::string& flag : ServeFlagNames()) {
    EXPECT_NE(doc.str().find("`" + flag), std::string::npos) << flag << " is missing from docs/configuration.md";
  }
}

TEST(ServeUsage, EachCommandHasItsOwnPart) {
  for (const char* cmd : {"review", "convert", "render", "audit", "backstop", "selftest", "uninstall-webhooks"}) {
    const std::string text = CommandUsage(cmd);
    EXPECT_NE(text.find(std::string("draguard ") + cmd), std::string::npos) << cmd << ":\n" << text;
    EXPECT_LT(text.size(), UsageText().size()) << cmd;
  }
  const std::string cel = CommandUsage("cel");
  EXPECT_NE(cel.find("draguard cel check"), std::string::npos);
  EXPECT_NE(cel.find("draguard cel eval"), std::string::npos);
  EXPECT_EQ(CommandUsage("no-such-command"), UsageText());
}

}  // namespace
}  // namespace draguard::cli
