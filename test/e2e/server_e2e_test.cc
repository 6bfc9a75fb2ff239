// End-to-end tests of the HTTPS admission server over real TLS on an ephemeral loopback port,
// with certificate verification against a CA generated for each test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "draguard/admission/response.h"
#include "draguard/base64.h"
#include "draguard/engine/registry.h"
#include "draguard/metrics/metrics.h"
#include "draguard/mutation/provisioner.h"
#include "draguard/policy/store.h"
#include "draguard/server/server.h"
#include "draguard/server/tls.h"
#include "draguard/topology/snapshot.h"
#include "draguard/webhook/reviewer.h"
#include "../unit/webhook/cel_bomb.h"  // the CEL-bomb reviews of the reviewer tests
#include "h2_client.h"
#include "tls_client.h"

namespace draguard {
namespace {

namespace fs = std::filesystem;
using testing::ClientOptions;
using testing::HttpResponse;
using testing::TlsConnection;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string ReviewData(const std::string& c) {
  return Slurp(fs::path(DRAGUARD_TEST_DATA) / "reviews" / c / "request.json");
}

// Waits for `cond` with a generous bound; the bound only matters when the test fails.
template <typename F>
bool Eventually(F cond) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (cond()) return true;
    std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return cond();
}

// Records the timeout each Ensure was given; throws when asked to.
class RecordingProvisioner : public mutation::TemplateProvisioner {
 public:
  Status Ensure(std::string_view, const mutation::GeneratedTemplate&, std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mu);
    timeouts.push_back(timeout);
    if (throws) throw std::runtime_error("provisioner exploded");
    return Status::Ok();
  }
  std::mutex mu;
  std::vector<std::chrono::milliseconds> timeouts;
  bool throws = false;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A parameterised test's name has a '/' ("Suite/Name/3"): one directory per test, flat, so
    // that TearDown removes all of it.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / ("draguard-e2e-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto ca = server::CreateCertificateAuthority("test-ca", 30);
    ASSERT_TRUE(ca.ok());
    ca_ = *ca;
    ASSERT_TRUE(server::WriteFileAtomic(Path("ca.crt"), ca_.cert_pem).ok());
    WriteServingCert("localhost");
    ASSERT_TRUE(policies_.LoadDefault().ok());
    opt_.host = "127.0.0.1";
    opt_.port = 0;
    opt_.tls_cert = Path("tls.crt");
    opt_.tls_key = Path("tls.key");
    opt_.workers = 8;
    opt_.shutdown_delay = std::chrono::milliseconds(0);
    opt_.reload_interval = std::chrono::milliseconds(20);
    client_.ca_file = Path("ca.crt");
  }

  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  void WriteServingCert(const std::string& cn) {
    server::IssueOptions io;
    io.common_name = cn;
    io.dns = {"localhost"};
    io.ips = {"127.0.0.1"};
    auto leaf = server::IssueCertificate(ca_, io);
    ASSERT_TRUE(leaf.ok());
    // Key first, then certificate: the watcher may fire between the two writes and must
    // refuse the mismatched intermediate state.
    ASSERT_TRUE(server::WriteFileAtomic(Path("tls.key"), leaf->key_pem).ok());
    ASSERT_TRUE(server::WriteFileAtomic(Path("tls.crt"), leaf->cert_pem).ok());
  }

  std::string IssueClient(const std::string& cn, const server::PemPair& ca) {
    server::IssueOptions io;
    io.common_name = cn;
    io.server_auth = false;
    io.client_auth = true;
    auto leaf = server::IssueCertificate(ca, io);
    EXPECT_TRUE(leaf.ok());
    EXPECT_TRUE(server::WriteFileAtomic(Path(cn + ".crt"), leaf->cert_pem).ok());
    EXPECT_TRUE(server::WriteFileAtomic(Path(cn + ".key"), leaf->key_pem).ok());
    return Path(cn);
  }

  void Start() {
    server::ServerDeps deps;
    deps.policies = &policies_;
    deps.reviewer = with_provisioner_ ? &provisioning_reviewer_ : &reviewer_;
    deps.registry = &metric_registry_;
    deps.metrics = &metrics_;
    deps.logger = logging::Logger::Null();
    if (topology_) deps.topology = [this] { return topology_; };
    server_ = std::make_unique<server::Server>(opt_, deps);
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_GT(server_->port(), 0);
  }

  std::unique_ptr<TlsConnection> Connect(const ClientOptions& o) {
    std::string err;
    auto c = TlsConnection::Connect(server_->port(), o, &err);
    EXPECT_NE(c, nullptr) << err;
    return c;
  }
  std::unique_ptr<TlsConnection> Connect() { return Connect(client_); }

  nlohmann::json Post(TlsConnection& c, const std::string& path, const std::string& body,
                      int want_status = 200) {
    HttpResponse r;
    EXPECT_TRUE(c.Request("POST", path, body, &r));
    EXPECT_EQ(r.status, want_status) << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/json");
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }

  fs::path dir_;
  server::PemPair ca_;
  std::atomic<int> policy_failures_{0};
  policy::PolicyStore policies_{{"draguard"}, [this](const Status& st) {
                                  if (!st.ok()) policy_failures_++;
                                }};
  engine::Registry registry_ = engine::DefaultRegistry();
  webhook::Reviewer reviewer_{registry_};
  RecordingProvisioner provisioner_;
  webhook::Reviewer provisioning_reviewer_{registry_, {}, &provisioner_};
  bool with_provisioner_ = false;  // Start() serves provisioning_reviewer_
  std::shared_ptr<const topology::Snapshot> topology_;  // served when set
  metrics::Registry metric_registry_;
  metrics::ServerMetrics metrics_{metric_registry_};
  server::ServerOptions opt_;
  ClientOptions client_;
  std::unique_ptr<server::Server> server_;
};

TEST_F(ServerTest, DeniesLegacyAndAllowsPlainAndDraPodsOnOneKeepAliveConnection) {
  Start();
  auto c = Connect();
  auto deny = Post(*c, "/validate", ReviewData("DG001/legacy-limit"));
  EXPECT_EQ(deny["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(deny["kind"], "AdmissionReview");
  EXPECT_EQ(deny["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(deny["response"]["allowed"], false);
  EXPECT_EQ(deny["response"]["status"]["code"], 403);
  EXPECT_EQ(deny["response"]["status"]["message"].get<std::string>().rfind("DG001", 0), 0u);
  EXPECT_NE(deny["response"]["status"]["message"].get<std::string>().find("cuda-vectoradd"),
            std::string::npos);
  EXPECT_FALSE(deny["response"].contains("patch"));
  EXPECT_FALSE(deny["response"].contains("patchType"));
  for (const char* ok : {"DG001/plain-pod-allowed", "DG001/dra-pod-allowed"}) {
    auto allow = Post(*c, "/validate", ReviewData(ok));
    EXPECT_EQ(allow["response"]["allowed"], true) << ok;
    EXPECT_FALSE(allow["response"].contains("patch")) << ok;
  }
  // /mutate answers too, with no patch for a request it does not convert.
  auto m = Post(*c, "/mutate", ReviewData("DG001/plain-pod-allowed"));
  EXPECT_EQ(m["response"]["allowed"], true);
  EXPECT_FALSE(m["response"].contains("patch"));
  EXPECT_EQ(metrics_.requests.Value({"validate", "CREATE", "Pod", "deny"}), 1);
  EXPECT_EQ(metrics_.requests.Value({"validate", "CREATE", "Pod", "allow"}), 2);
  EXPECT_EQ(metrics_.rule_results.Value({"DG001", "deny", "fail"}), 1);
  // Only /mutate counts conversions: one Pod with nothing to convert, every other reason at 0.
  EXPECT_EQ(metrics_.conversions.Value({"unchanged"}), 1);
  EXPECT_EQ(metrics_.conversions.Value({"converted"}), 0);
  EXPECT_EQ(metrics_.conversions.Value({"not-placeable"}), 0);
}

TEST_F(ServerTest, MutateConvertsALegacyPodWithAPatchThatApplies) {
  Start();
  auto c = Connect();
  const std::string body = ReviewData("DG001/legacy-limit");
  auto m = Post(*c, "/mutate", body);
  ASSERT_EQ(m["response"]["allowed"], true) << m.dump();
  ASSERT_EQ(m["response"]["patchType"], "JSONPatch");
  auto raw = Base64Decode(m["response"]["patch"].get<std::string>());
  ASSERT_TRUE(raw.ok()) << raw.status().message();
  auto patch = nlohmann::json::parse(*raw);
  auto pod = nlohmann::json::parse(body)["request"]["object"];
  auto converted = pod.patch(patch);
  EXPECT_EQ(metrics_.conversions.Value({"converted"}), 1);
  EXPECT_EQ(converted["spec"]["resourceClaims"][0]["name"], "draguard-gpu");
  EXPECT_EQ(converted["spec"]["resourceClaims"][0]["resourceClaimTemplateName"].get<std::string>().rfind("draguard-", 0),
            0u);
  EXPECT_EQ(converted["spec"]["containers"][0]["resources"]["claims"][0]["request"], "gpu");
  EXPECT_EQ(converted.dump().find("nvidia.com/gpu"), std::string::npos);
  // The converted Pod passes /validate.
  auto review = nlohmann::json::parse(body);
  review["request"]["object"] = converted;
  auto v = Post(*c, "/validate", review.dump());
  EXPECT_EQ(v["response"]["allowed"], true) << v.dump();
}

TEST_F(ServerTest, HealthReadinessAndMetrics) {
  Start();
  auto c = Connect();
  HttpResponse r;
  ASSERT_TRUE(c->Request("GET", "/healthz", "", &r, ""));
  EXPECT_EQ(r.status, 200);
  ASSERT_TRUE(c->Request("GET", "/readyz", "", &r, ""));
  EXPECT_EQ(r.status, 200);
  Post(*c, "/validate", ReviewData("DG001/legacy-limit"));
  ASSERT_TRUE(c->Request("GET", "/metrics", "", &r, ""));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.headers["content-type"].find("version=0.0.4"), std::string::npos);
  for (const char* m : {"draguard_admission_requests_total{", "draguard_admission_duration_seconds_bucket{",
                        "draguard_admission_inflight", "draguard_rule_results_total{",
                        "draguard_mutate_conversions_total{reason=\"not-placeable\"} 0",
                        "draguard_tls_reload_total{result=\"success\"} 1",
                        "draguard_tls_cert_expiry_timestamp_seconds "}) {
    EXPECT_NE(r.body.find(m), std::string::npos) << m;
  }
  ASSERT_TRUE(c->Request("GET", "/nope", "", &r, ""));
  EXPECT_EQ(r.status, 404);
}

TEST_F(ServerTest, MetricsOnAPlainHttpListener) {
  opt_.metrics_host = "127.0.0.1";
  opt_.metrics_port = 0;
  Start();
  ASSERT_GT(server_->metrics_port(), 0);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(server_->metrics_port()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string resp;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) resp.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  EXPECT_EQ(resp.rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_NE(resp.find("draguard_tls_cert_expiry_timestamp_seconds"), std::string::npos);
}

TEST_F(ServerTest, RefusesTls11AndNonAeadCiphers) {
  Start();
  ClientOptions old = client_;
  old.min_version = TLS1_1_VERSION;
  old.max_version = TLS1_1_VERSION;
  old.ciphers = "DEFAULT@SECLEVEL=0";
  std::string err;
  EXPECT_EQ(TlsConnection::Connect(server_->port(), old, &err), nullptr);
  ClientOptions cbc = client_;
  cbc.max_version = TLS1_2_VERSION;
  cbc.ciphers = "ECDHE-ECDSA-AES128-SHA:AES128-SHA";
  EXPECT_EQ(TlsConnection::Connect(server_->port(), cbc, &err), nullptr);
  ClientOptions tls12 = client_;
  tls12.max_version = TLS1_2_VERSION;
  auto c = Connect(tls12);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Version(), "TLSv1.2");
  auto tls13 = Connect();
  EXPECT_EQ(tls13->Version(), "TLSv1.3");
}

TEST_F(ServerTest, CertificateRotationWithoutRestartWhileKeepAliveClientIsConnected) {
  Start();
  auto before = Connect();
  EXPECT_EQ(before->PeerCommonName(), "localhost");
  Post(*before, "/validate", ReviewData("DG001/plain-pod-allowed"));
  WriteServingCert("rotated.localhost");
  ASSERT_TRUE(Eventually([&] { return metrics_.tls_reloads.Value({"success"}) >= 2; }));
  auto after = Connect();
  EXPECT_EQ(after->PeerCommonName(), "rotated.localhost");
  Post(*after, "/validate", ReviewData("DG001/legacy-limit"));
  // The connection made before the rotation keeps working.
  Post(*before, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

TEST_F(ServerTest, InvalidNewCertificateIsRefusedAndOldOneKeepsServing) {
  Start();
  // A key that does not match the certificate.
  server::IssueOptions io;
  io.common_name = "other";
  auto other = server::IssueCertificate(ca_, io);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(server::WriteFileAtomic(Path("tls.key"), other->key_pem).ok());
  ASSERT_TRUE(Eventually([&] { return metrics_.tls_reloads.Value({"failure"}) >= 1; }));
  EXPECT_FALSE(server_->ReloadCertificates().ok());
  auto c = Connect();
  EXPECT_EQ(c->PeerCommonName(), "localhost");
  Post(*c, "/validate", ReviewData("DG001/plain-pod-allowed"));
  // Garbage is refused too.
  ASSERT_TRUE(server::WriteFileAtomic(Path("tls.crt"), "not a certificate").ok());
  EXPECT_FALSE(server_->ReloadCertificates().ok());
  EXPECT_TRUE(server_->Ready());
}

// Without --tls-required-names, a reload must keep every name of the certificate in service:
// one for other names only would fail every verified handshake of today's clients.
TEST_F(ServerTest, AReloadThatDropsANameInServiceIsRefusedAndTheOldCertificateKeepsServing) {
  opt_.reload_interval = std::chrono::hours(1);  // reloads are explicit here: the watcher counts none
  Start();
  auto issue = [&](const std::string& cn, std::vector<std::string> dns, std::vector<std::string> ips) {
    server::IssueOptions io;
    io.common_name = cn;
    io.dns = std::move(dns);
    io.ips = std::move(ips);
    auto leaf = server::IssueCertificate(ca_, io);
    ASSERT_TRUE(leaf.ok());
    ASSERT_TRUE(server::WriteFileAtomic(Path("tls.key"), leaf->key_pem).ok());
    ASSERT_TRUE(server::WriteFileAtomic(Path("tls.crt"), leaf->cert_pem).ok());
  };
  issue("evil", {"evil.example"}, {});
  Status st = server_->ReloadCertificates();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("drops DNS:localhost of the certificate in service"), std::string::npos)
      << st.message();
  issue("no-ip", {"localhost", "evil.example"}, {});
  st = server_->ReloadCertificates();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("drops IP:127.0.0.1"), std::string::npos) << st.message();
  EXPECT_EQ(metrics_.tls_reloads.Value({"failure"}), 2);
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->PeerCommonName(), "localhost");
  // More names than before is fine.
  issue("more", {"localhost", "extra.example"}, {"127.0.0.1", "::1"});
  ASSERT_TRUE(server_->ReloadCertificates().ok());
  EXPECT_EQ(Connect()->PeerCommonName(), "more");
}

TEST_F(ServerTest, ClientCertificatesRequiredWhenConfigured) {
  IssueClient("kube-apiserver", ca_);
  IssueClient("intruder", ca_);
  auto foreign_ca = server::CreateCertificateAuthority("foreign", 30);
  ASSERT_TRUE(foreign_ca.ok());
  server::IssueOptions io;
  io.common_name = "kube-apiserver";
  io.server_auth = false;
  io.client_auth = true;
  auto foreign = server::IssueCertificate(*foreign_ca, io);
  ASSERT_TRUE(server::WriteFileAtomic(Path("foreign.crt"), foreign->cert_pem).ok());
  ASSERT_TRUE(server::WriteFileAtomic(Path("foreign.key"), foreign->key_pem).ok());
  opt_.client_ca = Path("ca.crt");
  opt_.client_cns = {"kube-apiserver"};
  Start();

  auto refused = [&](const std::string& who) {
    ClientOptions o = client_;
    if (!who.empty()) {
      o.cert_file = Path(who + ".crt");
      o.key_file = Path(who + ".key");
    }
    std::string err;
    auto c = TlsConnection::Connect(server_->port(), o, &err);
    if (c == nullptr) return true;
    // With TLS 1.3 the server's verdict on the client certificate arrives after the handshake.
    HttpResponse r;
    return !c->Request("POST", "/validate", ReviewData("DG001/plain-pod-allowed"), &r);
  };
  EXPECT_TRUE(refused(""));
  EXPECT_TRUE(refused("intruder"));
  EXPECT_TRUE(refused("foreign"));
  EXPECT_FALSE(refused("kube-apiserver"));
}

TEST_F(ServerTest, ClientCertificatesNotRequiredByDefault) {
  IssueClient("kube-apiserver", ca_);
  Start();
  ClientOptions o = client_;
  o.cert_file = Path("kube-apiserver.crt");
  o.key_file = Path("kube-apiserver.key");
  auto with_cert = Connect(o);
  Post(*with_cert, "/validate", ReviewData("DG001/plain-pod-allowed"));
  auto without = Connect();
  Post(*without, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

TEST_F(ServerTest, OversizedBodyGets413AndServerKeepsServing) {
  opt_.max_body = 64 * 1024;
  Start();
  auto c = Connect();
  std::string huge(opt_.max_body + 1, ' ');
  HttpResponse r;
  ASSERT_TRUE(c->Request("POST", "/validate", huge, &r));
  EXPECT_EQ(r.status, 413);
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.body;
  EXPECT_NE(j["error"].get<std::string>().find("too large"), std::string::npos) << r.body;
  auto fresh = Connect();
  Post(*fresh, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

// An early error answer reaches a client that is still uploading: the server reads and discards
// the rest of the body (bounded) instead of resetting the connection under the client's writes.
TEST_F(ServerTest, EarlyErrorAnswersReachAClientStillUploading) {
  opt_.max_body = 1024 * 1024;
  opt_.body_budget = 1536 * 1024;
  Start();
  {
    // Announced larger than the cap: 413 at the header, while 8 MiB are still on their way.
    auto c = Connect();
    std::string huge(8 * 1024 * 1024, ' ');
    ASSERT_TRUE(c->Write(testing::BuildRequest("POST", "/validate", huge)));
    HttpResponse r;
    ASSERT_TRUE(c->ReadResponse(&r));
    EXPECT_EQ(r.status, 413) << r.body;
    EXPECT_EQ(r.headers["connection"], "close");
    EXPECT_TRUE(c->WaitForClose());
  }
  {
    // 429 from the body budget while the client is uploading a body the budget cannot hold now.
    auto holder = Connect();
    std::string held = testing::BuildRequest("POST", "/validate", std::string(1000 * 1000, ' '));
    ASSERT_TRUE(holder->Write(held.substr(0, held.size() - 10)));
    ASSERT_TRUE(Eventually([&] { return metrics_.inflight.Value({}) >= 1; }));
    auto c = Connect();
    ASSERT_TRUE(c->Write(testing::BuildRequest("POST", "/validate", std::string(1000 * 1000, ' '))));
    HttpResponse r;
    ASSERT_TRUE(c->ReadResponse(&r));
    EXPECT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(r.headers["retry-after"], "1");
    ASSERT_TRUE(holder->Write(held.substr(held.size() - 10)));
    ASSERT_TRUE(holder->ReadResponse(&r));
    EXPECT_EQ(r.status, 400) << r.body;  // a body of spaces is no review
  }
  {
    // The discarding is bounded: a client that never stops sending is cut off.
    auto c = Connect();
    ASSERT_TRUE(c->Write(testing::BuildRequest("POST", "/validate", std::string(2 * 1024 * 1024, ' '))));
    const std::string chunk(1024 * 1024, ' ');
    bool cut = false;
    for (int i = 0; i < 1024 && !cut; ++i) cut = !c->Write(chunk);
    EXPECT_TRUE(cut) << "the server kept reading 1 GiB after its answer";
  }
  auto fresh = Connect();
  Post(*fresh, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

struct BadRequest {
  const char* name;
  std::string body;
  std::string content_type;
  int status;
  const char* error;
};

class BadRequests : public ServerTest, public ::testing::WithParamInterface<BadRequest> {};

TEST_P(BadRequests, GetAClearJsonErrorAndTheServerKeepsServing) {
  Start();
  auto c = Connect();
  HttpResponse r;
  ASSERT_TRUE(c->Request("POST", "/validate", GetParam().body, &r, GetParam().content_type));
  EXPECT_EQ(r.status, GetParam().status) << r.body;
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.body;
  EXPECT_NE(j["error"].get<std::string>().find(GetParam().error), std::string::npos) << r.body;
  // Same connection, then a new one: both still served.
  Post(*c, "/validate", ReviewData("DG001/legacy-limit"));
  auto again = Connect();
  Post(*again, "/validate", ReviewData("DG001/legacy-limit"));
}

INSTANTIATE_TEST_SUITE_P(
    All, BadRequests,
    ::testing::Values(
        BadRequest{"not_json", "this is not json", "application/json", 400, "not valid JSON"},
        BadRequest{"empty", "", "application/json", 400, "empty body"},
        BadRequest{"truncated", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","req)",
                   "application/json", 400, "not valid JSON"},
        BadRequest{"not_a_review", R"({"apiVersion":"v1","kind":"Pod"})", "application/json", 400,
                   "expected \"AdmissionReview\""},
        BadRequest{"no_request", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})",
                   "application/json", 400, "has no request"},
        BadRequest{"wrong_api_version",
                   R"({"apiVersion":"admission.k8s.io/v9","kind":"AdmissionReview","request":{}})",
                   "application/json", 400, "not supported"},
        BadRequest{"deep_nesting", std::string(5000, '[') + std::string(5000, ']'), "application/json",
                   400, "nesting deeper"},
        BadRequest{"wrong_content_type", "{}", "text/plain", 415, "Content-Type must be application/json"},
        BadRequest{"json_with_charset_ok_but_bad_body", "{}", "application/json; charset=utf-8", 400,
                   "expected \"AdmissionReview\""}),
    [](const ::testing::TestParamInfo<BadRequest>& i) { return std::string(i.param.name); });

TEST_F(ServerTest, SlowClientSendingHalfABodyIsCutOffWithoutBlockingOthers) {
  opt_.read_timeout = std::chrono::milliseconds(500);
  Start();
  auto slow = Connect();
  std::string body = ReviewData("DG001/legacy-limit");
  std::string req = testing::BuildRequest("POST", "/validate", body);
  ASSERT_TRUE(slow->Write(req.substr(0, req.size() - body.size() / 2)));
  // Others are served while the slow client holds its connection.
  for (int i = 0; i < 3; ++i) {
    auto other = Connect();
    Post(*other, "/validate", ReviewData("DG001/plain-pod-allowed"));
  }
  // The server gives up on the slow client (read timeout) and closes its connection.
  HttpResponse r;
  bool got_response = slow->ReadResponse(&r);
  if (got_response) {
    EXPECT_GE(r.status, 400);
    EXPECT_TRUE(slow->WaitForClose());
  }
  auto after = Connect();
  Post(*after, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

// The connection's timer moves lazily (a later deadline leaves it where it is): a half body on a
// connection that has served requests is still cut off at the read timeout, not at the longer
// keep-alive timeout the idle phase set before it.
TEST_F(ServerTest, HalfBodyAfterServedRequestsIsCutOffAtTheReadTimeout) {
  opt_.read_timeout = std::chrono::milliseconds(300);
  opt_.keep_alive_timeout = std::chrono::seconds(60);
  Start();
  auto c = Connect();
  for (int i = 0; i < 3; ++i) Post(*c, "/validate", ReviewData("DG001/plain-pod-allowed"));
  // While `c` is idle, a header block that never ends is closed at its read timeout, which
  // falls after every deadline `c` has had: `c`'s timer has fired by then and waits for the idle
  // deadline, a minute away.
  auto loris = Connect();
  ASSERT_TRUE(loris->Write("POST /validate HTTP/1.1\r\nHost: x\r\n"));
  ASSERT_TRUE(loris->WaitForClose());
  std::string body = ReviewData("DG001/legacy-limit");
  std::string req = testing::BuildRequest("POST", "/validate", body);
  ASSERT_TRUE(c->Write(req.substr(0, req.size() - body.size() / 2)));
  HttpResponse r;
  ASSERT_TRUE(c->ReadResponse(&r));
  EXPECT_EQ(r.status, 408) << r.body;
  EXPECT_TRUE(c->WaitForClose());
}

TEST_F(ServerTest, ApiServerTimeoutBudgetIsHonoured) {
  Start();
  auto c = Connect();
  // A budget already used up: the body arrives after the deadline and is refused quickly.
  HttpResponse r;
  ASSERT_TRUE(c->Request("POST", "/validate?timeout=0.001ms", ReviewData("DG001/legacy-limit"), &r));
  EXPECT_TRUE(r.status == 200 || r.status == 408) << r.status;
  // A normal budget is fine.
  auto c2 = Connect();
  ASSERT_TRUE(c2->Request("POST", "/validate?timeout=10s", ReviewData("DG001/legacy-limit"), &r));
  EXPECT_EQ(r.status, 200);
}

TEST_F(ServerTest, TemplateProvisioningRunsUnderTheApiServerTimeout) {
  with_provisioner_ = true;
  Start();
  auto c = Connect();
  // ?timeout=2s leaves 1.8 s after the margin, less than mutation.apiTimeoutMs (3 s by default).
  auto m = Post(*c, "/mutate?timeout=2s", ReviewData("DG001/legacy-limit"));
  EXPECT_EQ(m["response"]["allowed"], true) << m.dump();
  EXPECT_EQ(m["response"]["patchType"], "JSONPatch");
  std::lock_guard<std::mutex> lock(provisioner_.mu);
  ASSERT_EQ(provisioner_.timeouts.size(), 1u);
  EXPECT_GT(provisioner_.timeouts[0], std::chrono::milliseconds(0));
  EXPECT_LE(provisioner_.timeouts[0], std::chrono::milliseconds(1800));
}

TEST_F(ServerTest, AnExceptionInsideTheReviewIsAnsweredWithTheUid) {
  with_provisioner_ = true;
  provisioner_.throws = true;
  Start();
  auto c = Connect();
  auto m = Post(*c, "/mutate", ReviewData("DG001/legacy-limit"), 500);
  EXPECT_EQ(m["kind"], "AdmissionReview");
  EXPECT_EQ(m["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  EXPECT_EQ(m["response"]["allowed"], false);
  EXPECT_EQ(m["response"]["status"]["code"], 500);
  EXPECT_NE(m["response"]["status"]["message"].get<std::string>().find("provisioner exploded"), std::string::npos);
  EXPECT_EQ(metrics_.http_errors.Value({"500"}), 1);
  // The connection and the server keep serving.
  auto v = Post(*c, "/validate", ReviewData("DG001/plain-pod-allowed"));
  EXPECT_EQ(v["response"]["allowed"], true);
}

TEST_F(ServerTest, ShutdownTurnsReadinessOffFirstAndFinishesInFlightRequests) {
  opt_.shutdown_delay = std::chrono::minutes(5);  // ended explicitly below
  Start();
  auto inflight = Connect();
  std::string body = ReviewData("DG001/legacy-limit");
  std::string req = testing::BuildRequest("POST", "/validate", body);
  std::size_t half = req.size() - body.size() / 2;
  ASSERT_TRUE(inflight->Write(req.substr(0, half)));
  ASSERT_TRUE(Eventually([&] { return metrics_.inflight.Value({}) >= 1; }));

  server_->BeginShutdown();
  EXPECT_FALSE(server_->Ready());
  auto probe = Connect();  // still accepting during the delay
  HttpResponse r;
  ASSERT_TRUE(probe->Request("GET", "/readyz", "", &r, ""));
  EXPECT_EQ(r.status, 503);

  server_->SkipShutdownDelay();
  // Stop accepting happens now; the in-flight request still completes.
  ASSERT_TRUE(inflight->Write(req.substr(half)));
  ASSERT_TRUE(inflight->ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["response"]["allowed"], false);
  probe.reset();
  inflight.reset();
  server_->Wait();
  std::string err;
  EXPECT_EQ(TlsConnection::Connect(server_->port(), client_, &err), nullptr);
}

TEST_F(ServerTest, ManyConcurrentKeepAliveConnections) {
  opt_.workers = 0;  // production default: ≥ 64
  Start();
  std::vector<std::unique_ptr<TlsConnection>> conns;
  for (int i = 0; i < 64; ++i) conns.push_back(Connect());
  for (auto& c : conns) {
    ASSERT_NE(c, nullptr);
    Post(*c, "/validate", ReviewData("DG001/plain-pod-allowed"));
  }
  for (auto& c : conns) Post(*c, "/validate", ReviewData("DG001/legacy-limit"));
}

TEST_F(ServerTest, PolicyFileIsHotReloadedAndABadOneIsRefused) {
  std::ofstream(Path("policy.yaml")) << "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: enforce\n";
  ASSERT_TRUE(policies_.LoadFile(Path("policy.yaml")).ok());
  policies_.Watch(opt_.reload_interval);
  Start();
  auto c = Connect();
  EXPECT_EQ(Post(*c, "/validate", ReviewData("DG001/legacy-limit"))["response"]["allowed"], false);
  auto before = policies_.Current();
  // A bad file is refused; the enforcing policy keeps serving.
  ASSERT_TRUE(server::WriteFileAtomic(Path("policy.yaml"),
                                      "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: loose\n").ok());
  ASSERT_TRUE(Eventually([&] { return policy_failures_.load() >= 1; }));
  EXPECT_EQ(policies_.Current(), before);
  EXPECT_EQ(Post(*c, "/validate", ReviewData("DG001/legacy-limit"))["response"]["allowed"], false);
  // A good file takes effect without a restart.
  ASSERT_TRUE(server::WriteFileAtomic(Path("policy.yaml"),
                                      "apiVersion: draguard.io/v1alpha1\nkind: Policy\nmode: audit\n").ok());
  ASSERT_TRUE(Eventually([&] { return policies_.Current()->mode == policy::Mode::kAudit; }));
  EXPECT_EQ(Post(*c, "/validate", ReviewData("DG001/legacy-limit"))["response"]["allowed"], true);
}

// ---- Transport: framing, connection handling, caps, drain (one regression test per defect) ----

// A plain TCP connection to the TLS port that never starts the handshake.
int RawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{20, 0};  // bounds the test only when the server fails to close
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string Review(const std::string& path, const std::string& body) {
  return testing::BuildRequest("POST", path, body);
}

TEST_F(ServerTest, PipelinedRequestsAreAllAnsweredInOrder) {
  Start();
  auto c = Connect();
  std::string three = Review("/validate", ReviewData("DG001/legacy-limit")) +
                      testing::BuildRequest("GET", "/healthz", "", "") +
                      Review("/validate", ReviewData("DG001/plain-pod-allowed"));
  ASSERT_TRUE(c->Write(three));  // one write: all three are buffered at the server together
  HttpResponse r1, r2, r3;
  ASSERT_TRUE(c->ReadResponse(&r1));
  ASSERT_TRUE(c->ReadResponse(&r2));
  ASSERT_TRUE(c->ReadResponse(&r3));
  EXPECT_EQ(nlohmann::json::parse(r1.body)["response"]["allowed"], false);
  EXPECT_EQ(r2.body, "ok\n");
  EXPECT_EQ(nlohmann::json::parse(r3.body)["response"]["allowed"], true);
}

// Each Write is one TLS record, and the server reads at most one record at a time: the header and
// the body arrive in pieces, so the parse of what has been read stops short and goes on as the
// rest arrives, on a connection that keeps serving.
TEST_F(ServerTest, ARequestArrivingInPiecesIsAnswered) {
  Start();
  auto c = Connect();
  const std::string body = ReviewData("DG001/legacy-limit");
  const std::string req = Review("/validate", body);
  const std::size_t head_end = req.find("\r\n\r\n") + 4;
  for (const std::size_t cut : {std::size_t{5}, head_end / 2, head_end - 1, head_end + 3, head_end + body.size() / 2}) {
    SCOPED_TRACE(cut);
    ASSERT_TRUE(c->Write(req.substr(0, cut)));
    ASSERT_TRUE(c->Write(req.substr(cut, 7)));
    ASSERT_TRUE(c->Write(req.substr(cut + 7)));
    HttpResponse r;
    ASSERT_TRUE(c->ReadResponse(&r));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(nlohmann::json::parse(r.body)["response"]["allowed"], false);
  }
  Post(*c, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

TEST_F(ServerTest, ClientConnectionCloseIsHonoured) {
  Start();
  auto c = Connect();
  ASSERT_TRUE(c->Write("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  HttpResponse r;
  ASSERT_TRUE(c->ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(c->WaitForClose());
}

TEST_F(ServerTest, AnErrorThatLeavesTheStreamUnsyncedClosesTheConnection) {
  opt_.max_body = 64 * 1024;
  Start();
  auto c = Connect();
  // Announced too large: 413, Connection: close, and the unread body is never parsed as requests.
  std::string req = "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Content-Length: 70000\r\n\r\n";
  std::string filler;
  for (int i = 0; i < 100; ++i) filler += "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(c->Write(req + filler));
  HttpResponse r;
  ASSERT_TRUE(c->ReadResponse(&r));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_FALSE(c->ReadResponse(&r)) << "a second response followed: " << r.status;
}

struct Framing {
  const char* name;
  std::string head;  // after the request line
  int status;
};

class BadFraming : public ServerTest, public ::testing::WithParamInterface<Framing> {};

// RFC 9112 §6.3: ambiguous framing is refused with 400 and the connection closed, so a smuggled
// request behind it is never answered.
TEST_P(BadFraming, IsRefusedAndTheConnectionClosed) {
  Start();
  auto c = Connect();
  std::string smuggled = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  std::string req = "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
                    GetParam().head + "\r\n0\r\n\r\n" + smuggled;
  ASSERT_TRUE(c->Write(req));
  HttpResponse r;
  ASSERT_TRUE(c->ReadResponse(&r));
  EXPECT_EQ(r.status, GetParam().status) << r.body;
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_FALSE(c->ReadResponse(&r)) << "the smuggled request was answered: " << r.status;
  auto fresh = Connect();
  Post(*fresh, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

INSTANTIATE_TEST_SUITE_P(
    All, BadFraming,
    ::testing::Values(
        Framing{"cl_then_te", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400},
        Framing{"te_then_cl", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400},
        Framing{"te_gzip_then_cl", "Transfer-Encoding: gzip\r\nContent-Length: 5\r\n", 400},
        Framing{"two_content_lengths", "Content-Length: 5\r\nContent-Length: 6\r\n", 400},
        Framing{"content_length_list", "Content-Length: 5, 6\r\n", 400},
        Framing{"unknown_transfer_coding", "Transfer-Encoding: gzip\r\n", 501}),
    [](const ::testing::TestParamInfo<Framing>& i) { return std::string(i.param.name); });

TEST_F(ServerTest, ChunkedBodiesAreRead) {
  Start();
  auto c = Connect();
  std::string body = ReviewData("DG001/legacy-limit");
  std::ostringstream req;
  req << "POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      << "Transfer-Encoding: chunked\r\n\r\n"
      << std::hex << 10 << "\r\n" << body.substr(0, 10) << "\r\n"
      << std::hex << body.size() - 10 << "\r\n" << body.substr(10) << "\r\n0\r\n\r\n";
  ASSERT_TRUE(c->Write(req.str()));
  HttpResponse r;
  ASSERT_TRUE(c->ReadResponse(&r));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["response"]["allowed"], false);
}

TEST_F(ServerTest, HeaderCapsAnswer431AndClose) {
  opt_.max_headers = 20;
  opt_.max_header_bytes = 4096;
  Start();
  {
    auto c = Connect();
    std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; i < 21; ++i) req += "X-" + std::to_string(i) + ": y\r\n";
    ASSERT_TRUE(c->Write(req + "\r\n"));
    HttpResponse r;
    ASSERT_TRUE(c->ReadResponse(&r));
    EXPECT_EQ(r.status, 431);
    EXPECT_EQ(r.headers["connection"], "close");
    EXPECT_TRUE(c->WaitForClose());
  }
  {
    auto c = Connect();
    ASSERT_TRUE(c->Write("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(5000, 'a') + "\r\n\r\n"));
    HttpResponse r;
    ASSERT_TRUE(c->ReadResponse(&r));
    EXPECT_EQ(r.status, 431);
    EXPECT_TRUE(c->WaitForClose());
  }
  auto fresh = Connect();
  Post(*fresh, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

TEST_F(ServerTest, HandshakeHeaderAndIdleDeadlinesCloseSilentConnections) {
  opt_.read_timeout = std::chrono::milliseconds(200);
  opt_.keep_alive_timeout = std::chrono::seconds(1);
  Start();
  // No TLS handshake at all.
  int raw = RawConnect(server_->port());
  ASSERT_GE(raw, 0);
  char b;
  ssize_t n = ::read(raw, &b, 1);  // closed by the server, not ended by our 20 s bound
  EXPECT_TRUE(n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) << n;
  ::close(raw);
  // A header block that never ends (a byte at a time would not help: the deadline is for the block).
  auto loris = Connect();
  ASSERT_TRUE(loris->Write("POST /validate HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(loris->WaitForClose());
  // An idle keep-alive connection.
  auto idle = Connect();
  HttpResponse r;
  ASSERT_TRUE(idle->Request("GET", "/healthz", "", &r, ""));
  EXPECT_TRUE(idle->WaitForClose());
}

TEST_F(ServerTest, BodyBudgetAnswers429WithRetryAfter) {
  opt_.body_budget = 64 * 1024;
  Start();
  // Holds 60 KB of budget while its body is incomplete.
  auto holder = Connect();
  std::string big = ReviewData("DG001/legacy-limit");
  big += std::string(60000 - big.size(), ' ');
  std::string req = Review("/validate", big);
  ASSERT_TRUE(holder->Write(req.substr(0, req.size() - 100)));
  ASSERT_TRUE(Eventually([&] { return metrics_.inflight.Value({}) >= 1; }));
  auto other = Connect();
  HttpResponse r;
  ASSERT_TRUE(other->Request("POST", "/validate", std::string(10000, ' '), &r));
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_NE(metric_registry_.Render().find("draguard_body_budget_refused_total 1"), std::string::npos);
  // The holder completes; then the budget is free again.
  ASSERT_TRUE(holder->Write(req.substr(req.size() - 100)));
  ASSERT_TRUE(holder->ReadResponse(&r));
  EXPECT_EQ(r.status, 200) << r.body;
  auto again = Connect();
  Post(*again, "/validate", ReviewData("DG001/plain-pod-allowed"));
}

TEST_F(ServerTest, DrainAnswersKeepAliveConnectionsWithConnectionCloseAndClosesIdleOnesAtTheEnd) {
  opt_.shutdown_delay = std::chrono::minutes(5);  // ended explicitly below
  Start();
  auto busy = Connect();
  Post(*busy, "/validate", ReviewData("DG001/plain-pod-allowed"));
  auto idle = Connect();
  Post(*idle, "/validate", ReviewData("DG001/plain-pod-allowed"));
  server_->BeginShutdown();
  // A keep-alive connection's next request is answered, with `Connection: close`, then closed.
  HttpResponse r;
  ASSERT_TRUE(busy->Request("POST", "/validate", ReviewData("DG001/legacy-limit"), &r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(busy->WaitForClose());
  // A new connection during the delay is served, told to close, and closed.
  auto late = Connect();
  ASSERT_TRUE(late->Request("POST", "/validate", ReviewData("DG001/legacy-limit"), &r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(late->WaitForClose());
  // A connection that stays idle through the delay is closed when it ends.
  server_->SkipShutdownDelay();
  EXPECT_TRUE(idle->WaitForClose());
  server_->Wait();
}

// The end of the drain loses nothing: keep-alive clients under load, each honouring
// `Connection: close` by reconnecting, as kube-apiserver does. Every request written on a
// connection the server accepted is answered, also on connections accepted just before the
// listener closes; a client whose connection is refused has sent nothing.
TEST_F(ServerTest, DrainEndLosesNoRequestOfKeepAliveClients) {
  opt_.shutdown_delay = std::chrono::seconds(2);
  Start();
  const std::string body = ReviewData("DG001/plain-pod-allowed");
  std::atomic<int> answered{0}, lost{0}, after_drain{0};
  std::atomic<bool> draining{false};
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&] {
      for (;;) {
        std::string err;
        auto c = TlsConnection::Connect(server_->port(), client_, &err);
        if (c == nullptr) return;  // refused (or reset in the handshake): nothing was sent
        for (;;) {
          HttpResponse r;
          if (!c->Request("POST", "/validate", body, &r)) {
            ++lost;
            return;
          }
          if (r.status != 200) ++lost;
          ++answered;
          if (draining.load()) ++after_drain;
          if (r.headers["connection"] == "close") break;
        }
      }
    });
  }
  ASSERT_TRUE(Eventually([&] { return answered.load() >= 200; }));
  draining = true;
  server_->BeginShutdown();
  for (auto& t : clients) t.join();
  server_->Wait();
  EXPECT_EQ(lost.load(), 0) << answered.load() << " answered";
  EXPECT_GT(after_drain.load(), 16);
}

TEST_F(ServerTest, StartThenImmediateShutdownNeverHangs) {
  for (int i = 0; i < 20; ++i) {
    Start();
    server_->BeginShutdown();
    server_->SkipShutdownDelay();
    server_->Wait();  // a lost stop would hang here (ctest's timeout fails it)
    std::string err;
    EXPECT_EQ(TlsConnection::Connect(server_->port(), client_, &err), nullptr);
    server_.reset();
  }
}

TEST_F(ServerTest, QueueFullIsShedWith503AndRetryAfter) {
  with_provisioner_ = true;
  opt_.workers = 1;
  opt_.max_queued = 0;
  Start();
  // Occupy the only worker: a review whose template provisioning blocks until released.
  std::unique_lock<std::mutex> block(provisioner_.mu);
  auto busy = Connect();
  ASSERT_TRUE(busy->Write(Review("/mutate", ReviewData("DG001/legacy-limit"))));
  ASSERT_TRUE(Eventually([&] { return metrics_.inflight.Value({}) >= 1; }));
  HttpResponse r;
  // The busy request may still be between the listener and the worker: retry until it is shed.
  ASSERT_TRUE(Eventually([&] {
    auto c = Connect();
    return c->Request("POST", "/mutate", ReviewData("DG001/plain-pod-allowed"), &r) && r.status == 503;
  }));
  EXPECT_EQ(r.headers["retry-after"], "1");
  EXPECT_EQ(r.headers["connection"], "close");
  // A claim's /validate review may evaluate CEL: it needs a worker, and is shed too.
  {
    auto c = Connect();
    ASSERT_TRUE(c->Request("POST", "/validate", ReviewData("DG002/custom-class-targets-nvidia-denied"), &r));
    EXPECT_EQ(r.status, 503);
  }
  // A small Pod's /validate review is answered on the IO thread: the busy worker does not hold it.
  {
    auto c = Connect();
    ASSERT_TRUE(c->Request("POST", "/validate", ReviewData("DG001/plain-pod-allowed"), &r));
    EXPECT_EQ(r.status, 200);
  }
  block.unlock();
  ASSERT_TRUE(busy->ReadResponse(&r));
  EXPECT_EQ(r.status, 200);
}

// Hostile load: idle keep-alives, slowloris headers, slow bodies, oversized headers, pipelining
// and smuggling attempts at once, then a drain in the middle. Every valid probe on a fresh
// connection is answered 200; the few workers are never held by a connection.
TEST_F(ServerTest, HostileLoadLosesNoValidRequestAndDrainLosesNothing) {
  opt_.workers = 4;
  opt_.read_timeout = std::chrono::seconds(3);    // bounds the slow bodies still open at the end
  opt_.shutdown_delay = std::chrono::minutes(5);  // ended explicitly below
  {
    // A topology, so that the satisfiability rule evaluates every selector of the CEL bombs.
    const fs::path dir = dir_ / "topology";
    fs::create_directories(dir);
    fs::copy_file(fs::path(DRAGUARD_TEST_DATA) / "hwloc" / "aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
                  dir / "g4dn.xml");
    auto snap = topology::LoadSnapshot(dir.string());
    ASSERT_TRUE(snap.ok()) << snap.status().ToString();
    topology_ = *snap;
  }
  Start();
  // CEL bombs: nested lists.range (refused by the estimated cost before evaluation) and nested
  // all() that passes the estimate but stops at the review's CEL budget. Both are denied.
  const std::string& range_bomb = draguard::test_support::kRangeBomb;
  const std::string& literal_bomb = draguard::test_support::kLiteralBomb;
  std::vector<std::unique_ptr<TlsConnection>> bombs;
  ClientOptions patient = client_;
  patient.timeout_ms = 120000;  // a sanitizer build evaluates slowly; the server bounds it anyway
  for (const auto& sel : {range_bomb, literal_bomb}) {
    auto c = Connect(patient);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->Write(Review("/validate", draguard::test_support::CelBombReview("u-bomb", sel))));
    bombs.push_back(std::move(c));
  }
  const std::string valid = ReviewData("DG001/plain-pod-allowed");
  std::vector<std::unique_ptr<TlsConnection>> hostile;
  std::vector<std::unique_ptr<TlsConnection>> idle;
  for (int i = 0; i < 150; ++i) {  // idle keep-alive connections, one request each
    auto c = Connect();
    ASSERT_NE(c, nullptr);
    Post(*c, "/validate", valid);
    idle.push_back(std::move(c));
  }
  for (int i = 0; i < 50; ++i) {  // slowloris: a header block that never ends
    auto c = Connect();
    ASSERT_TRUE(c->Write("POST /validate HTTP/1.1\r\nHost: x\r\nX-a: b\r\n"));
    hostile.push_back(std::move(c));
  }
  for (int i = 0; i < 50; ++i) {  // slow bodies: announced, never sent in full
    auto c = Connect();
    ASSERT_TRUE(c->Write("POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: 65536\r\n\r\n{"));
    hostile.push_back(std::move(c));
  }
  for (int i = 0; i < 5; ++i) {  // oversized header blocks
    auto c = Connect();
    ASSERT_TRUE(c->Write("GET /healthz HTTP/1.1\r\nX-Big: " + std::string(70000, 'a') + "\r\n\r\n"));
    hostile.push_back(std::move(c));
  }
  for (int i = 0; i < 5; ++i) {  // smuggling attempts
    auto c = Connect();
    ASSERT_TRUE(c->Write("POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n"));
    hostile.push_back(std::move(c));
  }
  auto pipelined = Connect();
  ASSERT_TRUE(pipelined->Write(Review("/validate", valid) + Review("/validate", valid) +
                               Review("/validate", valid)));
  int lost = 0;
  auto probe = [&](bool draining) {
    auto c = Connect();
    HttpResponse r;
    if (c == nullptr || !c->Request("POST", "/validate", valid, &r) || r.status != 200) {
      ++lost;
      return;
    }
    if (draining) {
      EXPECT_EQ(r.headers["connection"], "close");
    }
  };
  for (int i = 0; i < 50; ++i) probe(false);
  for (int i = 0; i < 3; ++i) {
    HttpResponse r;
    ASSERT_TRUE(pipelined->ReadResponse(&r));
    EXPECT_EQ(r.status, 200);
  }
  // The estimate refuses the first; the second stops at the review's CEL budget (or, on a slow
  // sanitizer build, at the review's deadline: both bound the work).
  for (std::size_t i = 0; i < bombs.size(); ++i) {
    HttpResponse r;
    ASSERT_TRUE(bombs[i]->ReadResponse(&r));
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = nlohmann::json::parse(r.body);
    EXPECT_FALSE(j["response"]["allowed"].get<bool>());
    const std::string message = j["response"]["status"]["message"].get<std::string>();
    if (i == 0) {
      EXPECT_NE(message.find("DG011"), std::string::npos) << message;
      EXPECT_NE(message.find("exceeds cost limit"), std::string::npos) << message;
    } else {
      EXPECT_TRUE(message.find("CEL cost budget of the review exhausted") != std::string::npos ||
                  message.find("review deadline reached during CEL evaluation") != std::string::npos)
          << message;
    }
  }
  // SIGTERM in the middle: readiness off, probes still answered; when the delay ends the idle
  // keep-alives are closed.
  server_->BeginShutdown();
  EXPECT_FALSE(server_->Ready());
  for (int i = 0; i < 20; ++i) probe(true);
  EXPECT_EQ(lost, 0);
  server_->SkipShutdownDelay();
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(idle[static_cast<std::size_t>(i)]->WaitForClose());
  server_->Wait();  // slow bodies are in progress: they end at their deadline
}

TEST(ParseGoDuration, ApiServerForms) {
  using std::chrono::milliseconds;
  EXPECT_EQ(server::ParseGoDuration("10s"), milliseconds(10000));
  EXPECT_EQ(server::ParseGoDuration("1m30s"), milliseconds(90000));
  EXPECT_EQ(server::ParseGoDuration("500ms"), milliseconds(500));
  EXPECT_EQ(server::ParseGoDuration("1.5s"), milliseconds(1500));
  EXPECT_LE(server::ParseGoDuration("").count(), 0);
  EXPECT_LE(server::ParseGoDuration("ten").count(), 0);
  EXPECT_LE(server::ParseGoDuration("10x").count(), 0);
}

TEST(ParseHostPort, Forms) {
  std::string h;
  int p = 0;
  EXPECT_TRUE(server::ParseHostPort("127.0.0.1:8443", &h, &p).ok());
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 8443);
  EXPECT_TRUE(server::ParseHostPort("[::1]:0", &h, &p).ok());
  EXPECT_EQ(h, "::1");
  EXPECT_FALSE(server::ParseHostPort("8443", &h, &p).ok());
  EXPECT_FALSE(server::ParseHostPort("h:99999", &h, &p).ok());
  EXPECT_FALSE(server::ParseHostPort("h:x", &h, &p).ok());
}

// --- HTTP/2 (ALPN h2) over the same TLS: the same answers, and the protocol's own attacks ----------

constexpr char kAlpnBoth[] = "\x02h2\x08http/1.1";

// Sends what the h2 client has and reads until `done` holds or the connection ends (each read
// bounded by the client's timeout).
template <typename F>
bool Exchange(TlsConnection& c, testing::H2Client& h, F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    const std::string out = h.TakeOutput();
    if (!out.empty() && !c.Write(out)) return done();
    if (done()) return true;
    std::string in;
    if (!c.ReadSome(&in)) return done();
    if (!h.Receive(in)) return done();
  }
  return done();
}

class ServerH2Test : public ServerTest {
 protected:
  std::unique_ptr<TlsConnection> ConnectH2() {
    ClientOptions o = client_;
    o.alpn = std::string(kAlpnBoth, sizeof kAlpnBoth - 1);
    auto c = Connect(o);
    if (c) {
      EXPECT_EQ(c->Alpn(), "h2");
    }
    return c;
  }
  static bool Closed(testing::H2Client& h, const std::vector<std::int32_t>& ids) {
    for (auto id : ids) {
      if (!h.Response(id).closed) return false;
    }
    return true;
  }
};

TEST_F(ServerH2Test, AnswersAsHttp1Does) {
  Start();
  auto c = ConnectH2();
  ASSERT_NE(c, nullptr);
  auto h1 = Connect();
  testing::H2Client h;
  const std::vector<std::pair<std::string, std::string>> json = {{"content-type", "application/json"}};
  struct Case {
    std::string path, body;
  };
  const std::vector<Case> cases = {{"/validate", ReviewData("DG001/legacy-limit")},
                                   {"/validate", ReviewData("DG001/dra-pod-allowed")},
                                   {"/mutate", ReviewData("DG001/plain-pod-allowed")},
                                   {"/validate?timeout=10s", ReviewData("DG001/plain-pod-allowed")}};
  std::vector<std::int32_t> ids;
  for (const auto& k : cases) ids.push_back(h.Request("POST", k.path, k.body, json));
  const auto health = h.Request("GET", "/healthz", "");
  const auto missing = h.Request("GET", "/nope", "");
  const auto wrong_type = h.Request("POST", "/validate", "{}", {{"content-type", "text/plain"}});
  std::vector<std::int32_t> all = ids;
  all.insert(all.end(), {health, missing, wrong_type});
  ASSERT_TRUE(Exchange(*c, h, [&] { return Closed(h, all); }));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    HttpResponse r1;
    ASSERT_TRUE(h1->Request("POST", cases[i].path, cases[i].body, &r1));
    const auto& r2 = h.Response(ids[i]);
    EXPECT_EQ(r2.status, r1.status) << cases[i].path;
    EXPECT_EQ(r2.body, r1.body) << cases[i].path;  // byte for byte
    EXPECT_EQ(r2.headers.at("content-type"), "application/json");
  }
  EXPECT_EQ(h.Response(health).status, 200);
  EXPECT_EQ(h.Response(health).body, "ok\n");
  EXPECT_EQ(h.Response(missing).status, 404);
  EXPECT_EQ(h.Response(wrong_type).status, 415);
  const std::string m = metric_registry_.Render();
  EXPECT_NE(m.find("draguard_connections_total{protocol=\"h2\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("draguard_connections_total{protocol=\"http/1.1\"} 1"), std::string::npos);
}

TEST_F(ServerH2Test, HundredConcurrentStreamsOnOneConnection) {
  Start();
  auto c = ConnectH2();
  ASSERT_NE(c, nullptr);
  testing::H2Client h;
  const std::string body = ReviewData("DG001/legacy-limit");
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(h.Request("POST", i % 2 == 0 ? "/validate" : "/mutate", body, {{"content-type", "application/json"}}));
  }
  ASSERT_TRUE(Exchange(*c, h, [&] { return Closed(h, ids); }));
  for (auto id : ids) {
    ASSERT_EQ(h.Response(id).status, 200);
    auto j = nlohmann::json::parse(h.Response(id).body);
    EXPECT_EQ(j["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
  }
}

TEST_F(ServerH2Test, Http1ClientsAndTheFlagOff) {
  Start();
  ClientOptions o = client_;
  o.alpn = std::string("\x08http/1.1", 9);
  auto c = Connect(o);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Alpn(), "http/1.1");
  Post(*c, "/validate", ReviewData("DG001/legacy-limit"));
  server_.reset();
  opt_.http2 = false;
  Start();
  o.alpn = std::string(kAlpnBoth, sizeof kAlpnBoth - 1);
  auto off = Connect(o);
  ASSERT_NE(off, nullptr);
  EXPECT_EQ(off->Alpn(), "");  // no ALPN answer: the client speaks HTTP/1.1
  Post(*off, "/validate", ReviewData("DG001/legacy-limit"));
}

TEST_F(ServerH2Test, HostileRapidResetIsCutAndOthersAreServed) {
  Start();
  auto c = ConnectH2();
  ASSERT_NE(c, nullptr);
  testing::H2Client h;
  const std::string body = ReviewData("DG001/legacy-limit");
  std::string burst;
  for (int i = 0; i < 3000; ++i) {
    const auto id = h.Request("POST", "/mutate", body, {{"content-type", "application/json"}});
    burst += h.TakeOutput();
    h.Reset(id, 8 /* CANCEL */);
    burst += h.TakeOutput();
    if (burst.size() > 256 * 1024) {
      if (!c->Write(burst)) break;  // the server has already closed
      burst.clear();
    }
  }
  c->Write(burst);
  // Only reading now: the server ends the connection with a GOAWAY, then FIN.
  for (std::string in; !h.goaway() && c->ReadSome(&in); in.clear()) h.Receive(in);
  ASSERT_TRUE(h.goaway());
  // Our stream-churn cap (ENHANCE_YOUR_CALM, 11) or nghttp2's RST_STREAM rate limit
  // (INTERNAL_ERROR, 2), whichever runs out first: that depends on how many streams the server
  // answered before their resets arrived (a slower build answers fewer).
  EXPECT_TRUE(h.goaway_code() == 11u || h.goaway_code() == 2u) << h.goaway_code();
  EXPECT_TRUE(Eventually([&] { return c->PeerClosed(); }));
  EXPECT_NE(metric_registry_.Render().find("draguard_http2_abuse_total{reason="), std::string::npos);
  // Other clients are served meanwhile.
  auto other = ConnectH2();
  ASSERT_NE(other, nullptr);
  testing::H2Client h2;
  const auto id = h2.Request("POST", "/validate", body, {{"content-type", "application/json"}});
  ASSERT_TRUE(Exchange(*other, h2, [&] { return h2.Response(id).closed; }));
  EXPECT_EQ(h2.Response(id).status, 200);
}

TEST_F(ServerH2Test, HostileHeadersBodiesAndStreamsAreRefusedPerStream) {
  opt_.max_body = 64 * 1024;
  Start();
  auto c = ConnectH2();
  ASSERT_NE(c, nullptr);
  testing::H2Client h;
  std::vector<std::pair<std::string, std::string>> many = {{"content-type", "application/json"}};
  for (int i = 0; i < 150; ++i) many.emplace_back("x-h" + std::to_string(i), "v");
  const auto too_many = h.Request("POST", "/validate", "{}", many);
  const auto too_big = h.Request("POST", "/validate", "{}", {{"x-big", std::string(70 * 1024, 'a')}});
  const auto body_cap = h.Request("POST", "/validate", std::string(65 * 1024 + 1, 'x'),
                                  {{"content-type", "application/json"}, {"content-length", std::to_string(65 * 1024 + 1)}});
  ASSERT_TRUE(Exchange(*c, h, [&] { return Closed(h, {too_many, too_big, body_cap}) || h.goaway(); }));
  EXPECT_EQ(h.Response(too_many).status, 431);
  // A header block past the limit is refused by status, or by the HPACK decoder's own bound.
  EXPECT_TRUE(h.Response(too_big).status == 431 || h.goaway());
  if (!h.goaway()) {
    EXPECT_EQ(h.Response(body_cap).status, 413);
  }
  // Streams beyond SETTINGS_MAX_CONCURRENT_STREAMS, written raw (nghttp2's client would hold them
  // back): 100 requests whose bodies stay open, then one more, refused.
  auto c2 = ConnectH2();
  ASSERT_NE(c2, nullptr);
  std::string wire = testing::H2Client::Preface();
  const std::vector<std::pair<std::string, std::string>> fields = {
      {":method", "POST"}, {":path", "/validate"}, {":scheme", "https"}, {":authority", "localhost"},
      {"content-type", "application/json"},
      {"content-length", "2"}};
  for (int id = 1; id <= 201; id += 2) wire += testing::H2Client::Headers(id, fields, false);
  ASSERT_TRUE(c2->Write(wire));
  std::string in;
  std::uint32_t code_201 = 0;
  bool reset_201 = false;
  while (!reset_201 && c2->ReadSome(&in)) {
    while (in.size() >= 9) {  // frames: 24-bit length, type, flags, stream id
      const std::size_t len = (static_cast<unsigned char>(in[0]) << 16) | (static_cast<unsigned char>(in[1]) << 8) |
                              static_cast<unsigned char>(in[2]);
      if (in.size() < 9 + len) break;
      const int type = in[3];
      const std::uint32_t sid = ((static_cast<unsigned char>(in[5]) & 0x7f) << 24) |
                                (static_cast<unsigned char>(in[6]) << 16) | (static_cast<unsigned char>(in[7]) << 8) |
                                static_cast<unsigned char>(in[8]);
      if (type == 3 /* RST_STREAM */ && len == 4) {
        EXPECT_EQ(sid, 201u) << "only the stream over the limit is refused; code "
                             << ((static_cast<unsigned char>(in[11]) << 8) | static_cast<unsigned char>(in[12]));
        if (sid == 201) {
          reset_201 = true;
          code_201 = (static_cast<unsigned char>(in[9]) << 24) | (static_cast<unsigned char>(in[10]) << 16) |
                     (static_cast<unsigned char>(in[11]) << 8) | static_cast<unsigned char>(in[12]);
        }
      }
      in.erase(0, 9 + len);
    }
  }
  ASSERT_TRUE(reset_201);
  EXPECT_TRUE(code_201 == 7 /* REFUSED_STREAM */ || code_201 == 1 /* PROTOCOL_ERROR */) << code_201;
}

TEST_F(ServerH2Test, ClientThatNeverReadsIsCutByTheDeadlines) {
  opt_.read_timeout = std::chrono::milliseconds(300);  // and the write timeout
  opt_.write_timeout = std::chrono::milliseconds(300);
  opt_.keep_alive_timeout = std::chrono::seconds(1);
  Start();
  auto c = ConnectH2();
  ASSERT_NE(c, nullptr);
  testing::H2Client h({{4 /* INITIAL_WINDOW_SIZE */, 0}});
  for (int i = 0; i < 50; ++i) h.Request("GET", "/metrics", "");
  ASSERT_TRUE(c->Write(h.TakeOutput()));
  // Nothing is read: the answers wait for window that never comes; each stream is reset at the
  // write deadline, and the idle connection is closed at the keep-alive timeout.
  EXPECT_TRUE(Eventually([&] { return c->PeerClosed(); }));
  auto other = ConnectH2();
  ASSERT_NE(other, nullptr);
  testing::H2Client h2;
  const auto id = h2.Request("GET", "/healthz", "");
  ASSERT_TRUE(Exchange(*other, h2, [&] { return h2.Response(id).closed; }));
  EXPECT_EQ(h2.Response(id).status, 200);
}

TEST_F(ServerH2Test, ShutdownSendsGoawayAndStopsWithAnIdleConnectionOpen) {
  Start();
  auto c = ConnectH2();
  ASSERT_NE(c, nullptr);
  testing::H2Client h;
  const auto id = h.Request("GET", "/healthz", "");
  ASSERT_TRUE(Exchange(*c, h, [&] { return h.Response(id).closed; }));
  server_->BeginShutdown();
  ASSERT_TRUE(Exchange(*c, h, [&] { return h.goaway(); }));
  EXPECT_EQ(h.goaway_code(), 0u);
  server_->Wait();  // the idle h2 connection does not hold the server
  EXPECT_TRUE(Eventually([&] { return c->PeerClosed(); }));
}

}  // namespace
}  // namespace draguard
