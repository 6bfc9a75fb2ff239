// Hardening of the server's TLS end to end: the client CN allow-list compares exact bytes of
// every CN, a reloaded certificate that is not valid yet or does not cover the service names is
// refused like an expired one, readiness follows a usable certificate, and the generated state
// folder never writes a key through a planted symlink.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "draguard/engine/registry.h"
#include "draguard/metrics/metrics.h"
#include "draguard/policy/store.h"
#include "draguard/server/server.h"
#include "draguard/server/tls.h"
#include "draguard/webhook/reviewer.h"
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

std::string PlainPod() { return Slurp(fs::path(DRAGUARD_TEST_DATA) / "reviews/DG001/plain-pod-allowed/request.json"); }

// What to put in a certificate built byte by byte (IssueCertificate cannot forge these).
struct RawCert {
  std::vector<std::string> cns;  ///< subject CN entries, raw bytes (NULs included)
  std::vector<std::string> dns;  ///< DNS SANs
  long not_before_s = -300;      ///< relative to now
  long not_after_s = 86400;
  bool client = false;           ///< clientAuth instead of serverAuth
};

// Issues `spec` from `ca` and writes NAME.crt / NAME.key into `dir`.
void IssueRaw(const server::PemPair& ca, const RawCert& spec, const fs::path& dir, const std::string& name) {
  BIO* cb = BIO_new_mem_buf(ca.cert_pem.data(), static_cast<int>(ca.cert_pem.size()));
  X509* ca_cert = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  BIO_free(cb);
  BIO* kb = BIO_new_mem_buf(ca.key_pem.data(), static_cast<int>(ca.key_pem.size()));
  EVP_PKEY* ca_key = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
  BIO_free(kb);
  ASSERT_NE(ca_cert, nullptr);
  ASSERT_NE(ca_key, nullptr);
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), static_cast<long>(std::chrono::steady_clock::now().time_since_epoch().count() & 0x7fffffff));
  X509_gmtime_adj(X509_getm_notBefore(x), spec.not_before_s);
  X509_gmtime_adj(X509_getm_notAfter(x), spec.not_after_s);
  X509_NAME* subject = X509_get_subject_name(x);
  for (const auto& cn : spec.cns) {
    // V_ASN1_UTF8STRING: the bytes are stored as given, embedded NULs included.
    ASSERT_EQ(X509_NAME_add_entry_by_NID(subject, NID_commonName, V_ASN1_UTF8STRING,
                                         reinterpret_cast<const unsigned char*>(cn.data()),
                                         static_cast<int>(cn.size()), -1, 0),
              1);
  }
  X509_set_issuer_name(x, X509_get_subject_name(ca_cert));
  X509_set_pubkey(x, key);
  auto add = [&](int nid, const std::string& value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, ca_cert, x, nullptr, nullptr, 0);
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    ASSERT_NE(ext, nullptr) << value;
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  };
  add(NID_basic_constraints, "critical,CA:FALSE");
  add(NID_key_usage, "critical,digitalSignature");
  add(NID_ext_key_usage, spec.client ? "clientAuth" : "serverAuth");
  std::string san;
  for (const auto& d : spec.dns) san += (san.empty() ? "DNS:" : ",DNS:") + d;
  if (!san.empty()) add(NID_subject_alt_name, san);
  ASSERT_GT(X509_sign(x, ca_key, EVP_sha256()), 0);
  auto pem = [](auto write) {
    BIO* b = BIO_new(BIO_s_mem());
    write(b);
    char* data = nullptr;
    long n = BIO_get_mem_data(b, &data);
    std::string s(data, static_cast<std::size_t>(n));
    BIO_free(b);
    return s;
  };
  const std::string cert_pem = pem([&](BIO* b) { PEM_write_bio_X509(b, x); });
  const std::string key_pem = pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
  X509_free(x);
  EVP_PKEY_free(key);
  X509_free(ca_cert);
  EVP_PKEY_free(ca_key);
  // Key first: a watcher firing in between must refuse the mismatched pair.
  ASSERT_TRUE(server::WriteFileAtomic((dir / (name + ".key")).string(), key_pem).ok());
  ASSERT_TRUE(server::WriteFileAtomic((dir / (name + ".crt")).string(), cert_pem).ok());
}

class TlsHardeningTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("draguard-tls-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    auto ca = server::CreateCertificateAuthority("test-ca", 30);
    ASSERT_TRUE(ca.ok());
    ca_ = *ca;
    ASSERT_TRUE(server::WriteFileAtomic(Path("ca.crt"), ca_.cert_pem).ok());
    RawCert serving;
    serving.cns = {"localhost"};
    serving.dns = {"localhost", "draguard.gpu.svc"};
    IssueRaw(ca_, serving, dir_, "tls");
    ASSERT_TRUE(policies_.LoadDefault().ok());
    opt_.host = "127.0.0.1";
    opt_.port = 0;
    opt_.tls_cert = Path("tls.crt");
    opt_.tls_key = Path("tls.key");
    opt_.workers = 4;
    opt_.shutdown_delay = std::chrono::milliseconds(0);
    opt_.reload_interval = std::chrono::hours(1);  // reloads are explicit here
    client_.ca_file = Path("ca.crt");
  }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  void Start() {
    server::ServerDeps deps;
    deps.policies = &policies_;
    deps.reviewer = &reviewer_;
    deps.registry = &metric_registry_;
    deps.metrics = &metrics_;
    deps.logger = logging::Logger::Null();
    server_ = std::make_unique<server::Server>(opt_, deps);
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
  }

  // True when a request with the client certificate NAME.crt is answered.
  bool Accepted(const std::string& name) {
    ClientOptions o = client_;
    o.cert_file = Path(name + ".crt");
    o.key_file = Path(name + ".key");
    std::string err;
    auto c = TlsConnection::Connect(server_->port(), o, &err);
    if (c == nullptr) return false;
    // With TLS 1.3 the verdict on the client certificate arrives after the handshake.
    HttpResponse r;
    return c->Request("POST", "/validate", PlainPod(), &r) && r.status == 200;
  }

  std::string ServingCn() {
    std::string err;
    auto c = TlsConnection::Connect(server_->port(), client_, &err);
    EXPECT_NE(c, nullptr) << err;
    return c ? c->PeerCommonName() : "";
  }

  fs::path dir_;
  server::PemPair ca_;
  policy::PolicyStore policies_{std::vector<std::string>{"draguard"}};
  engine::Registry registry_ = engine::DefaultRegistry();
  webhook::Reviewer reviewer_{registry_};
  metrics::Registry metric_registry_;
  metrics::ServerMetrics metrics_{metric_registry_};
  server::ServerOptions opt_;
  ClientOptions client_;
  std::unique_ptr<server::Server> server_;
};

TEST_F(TlsHardeningTest, ClientCnIsComparedAsExactBytesAcrossEveryCnEntry) {
  auto client = [](std::vector<std::string> cns) {
    RawCert c;
    c.cns = std::move(cns);
    c.client = true;
    return c;
  };
  IssueRaw(ca_, client({"kube-apiserver"}), dir_, "apiserver");
  IssueRaw(ca_, client({std::string("kube-apiserver\0.mallory", 23)}), dir_, "nul");
  IssueRaw(ca_, client({"kube-apiserver.mallory"}), dir_, "longer");
  IssueRaw(ca_, client({"kube-apiserve"}), dir_, "shorter");
  IssueRaw(ca_, client({"intruder", "kube-apiserver"}), dir_, "second");
  IssueRaw(ca_, client({"kube-apiserver", std::string("x\0y", 3)}), dir_, "nul-second");
  IssueRaw(ca_, client({"intruder", "mallory"}), dir_, "neither");
  IssueRaw(ca_, client({}), dir_, "none");
  IssueRaw(ca_, client({"front-proxy"}), dir_, "proxy");
  opt_.client_ca = Path("ca.crt");
  opt_.client_cns = {"kube-apiserver", "front-proxy"};
  Start();
  EXPECT_TRUE(Accepted("apiserver"));
  EXPECT_TRUE(Accepted("proxy"));    // any entry of the list
  EXPECT_TRUE(Accepted("second"));   // any CN of the certificate
  EXPECT_FALSE(Accepted("nul"));     // "kube-apiserver\0.mallory" is not "kube-apiserver"
  EXPECT_FALSE(Accepted("nul-second"));
  EXPECT_FALSE(Accepted("longer"));
  EXPECT_FALSE(Accepted("shorter"));
  EXPECT_FALSE(Accepted("neither"));
  EXPECT_FALSE(Accepted("none"));
}

TEST_F(TlsHardeningTest, NotYetValidCertificateIsRefusedAndTheOldOneKeepsServing) {
  Start();
  RawCert future;
  future.cns = {"future"};
  future.dns = {"localhost", "draguard.gpu.svc"};
  future.not_before_s = 3600;
  future.not_after_s = 7200;
  IssueRaw(ca_, future, dir_, "tls");
  Status st = server_->ReloadCertificates();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("is not valid yet (notBefore "), std::string::npos) << st.message();
  EXPECT_EQ(metrics_.tls_reloads.Value({"failure"}), 1);
  EXPECT_EQ(ServingCn(), "localhost");
  EXPECT_TRUE(server_->Ready());
}

TEST_F(TlsHardeningTest, CertificateNotCoveringTheServiceNamesIsRefused) {
  opt_.tls_required_names = {"draguard.gpu.svc"};
  Start();
  // Right name only in the CN: the API server never looks there.
  RawCert cn_only;
  cn_only.cns = {"draguard.gpu.svc"};
  cn_only.dns = {"localhost", "other.gpu.svc"};
  IssueRaw(ca_, cn_only, dir_, "tls");
  Status st = server_->ReloadCertificates();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not cover draguard.gpu.svc (its SANs: DNS:localhost, DNS:other.gpu.svc)"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(ServingCn(), "localhost");
  // A wildcard SAN covers it.
  RawCert wildcard;
  wildcard.cns = {"wildcard"};
  wildcard.dns = {"localhost", "*.gpu.svc"};
  IssueRaw(ca_, wildcard, dir_, "tls");
  ASSERT_TRUE(server_->ReloadCertificates().ok());
  EXPECT_EQ(ServingCn(), "wildcard");
  EXPECT_EQ(metrics_.tls_reloads.Value({"failure"}), 1);
}

TEST_F(TlsHardeningTest, StartRefusesACertificateThatDoesNotCoverTheServiceNames) {
  opt_.tls_required_names = {"webhook.elsewhere.svc"};
  server::ServerDeps deps;
  deps.policies = &policies_;
  deps.reviewer = &reviewer_;
  deps.registry = &metric_registry_;
  deps.metrics = &metrics_;
  server::Server srv(opt_, deps);
  Status st = srv.Start();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("does not cover webhook.elsewhere.svc"), std::string::npos) << st.message();
  EXPECT_FALSE(srv.Ready());
}

// Readiness asks the certificate source whether its pair is usable at a time; the server asks
// for now, so an expired current certificate turns /readyz off.
TEST_F(TlsHardeningTest, CertificateIsUsableOnlyWithinItsValidity) {
  RawCert short_lived;
  short_lived.cns = {"short"};
  short_lived.not_after_s = 600;
  IssueRaw(ca_, short_lived, dir_, "short");
  server::CertificateSource source(Path("short.crt"), Path("short.key"));
  const auto now = std::chrono::system_clock::now();
  EXPECT_FALSE(source.Usable(now));  // nothing loaded yet
  ASSERT_TRUE(source.Reload().ok());
  EXPECT_TRUE(source.Usable(now));
  EXPECT_FALSE(source.Usable(now + std::chrono::minutes(11)));
  EXPECT_FALSE(source.Usable(now - std::chrono::minutes(10)));
}

TEST(StateCertificates, APlantedSymlinkNeverReceivesTheCaKey) {
  const fs::path dir = fs::temp_directory_path() / ("draguard-state-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all);
  const fs::path victim = fs::temp_directory_path() / ("draguard-victim-" + std::to_string(::getpid()));
  std::ofstream(victim) << "original";
  for (const char* f : {"ca.key", "ca.crt", "tls.key", "tls.crt"}) {
    fs::create_symlink(victim, dir / (std::string(f) + ".tmp." + std::to_string(::getpid())));
  }
  auto paths = server::EnsureStateCertificates(dir.string(), {"localhost"}, {"127.0.0.1"});
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  EXPECT_TRUE(paths->generated);
  EXPECT_EQ(Slurp(victim), "original");
  EXPECT_NE(Slurp(dir / "ca.key").find("PRIVATE KEY"), std::string::npos);
  EXPECT_FALSE(fs::is_symlink(dir / "ca.key"));
  // A state folder that is a symlink is refused.
  const fs::path link = dir.string() + "-link";
  fs::remove_all(link);
  fs::create_directory_symlink(dir, link);
  auto refused = server::EnsureStateCertificates(link.string(), {"localhost"}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is not a directory owned by this user"), std::string::npos);
  fs::remove(link);
  fs::remove_all(dir);
  fs::remove(victim);
}

}  // namespace
}  // namespace draguard
