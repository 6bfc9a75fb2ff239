// Client: in-cluster configuration, bearer tokens and rotation, CA verification, and the
// ResourceClaimTemplate calls against a local HTTPS fake API server.
#include "draguard/kube/client.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>

#include "fake_apiserver.h"

namespace draguard::kube {
namespace {

// The ResourceClaimTemplates collection of namespace `ns`.
std::string Templates(const std::string& ns) { return "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaimtemplates"; }

using kubetest::FakeApiServer;
using kubetest::json;
using kubetest::MakeCert;
using kubetest::TempDir;
using kubetest::WriteFile;

std::string Template(const std::string& name) {
  return json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceClaimTemplate"},
              {"metadata", {{"name", name}, {"labels", {{"app.kubernetes.io/managed-by", "draguard"}}}}},
              {"spec",
               {{"spec",
                 {{"devices",
                   {{"requests",
                     json::array({{{"name", "gpu"},
                                   {"exactly", {{"deviceClassName", "gpu.nvidia.com"}, {"count", 1}}}}})}}}}}}}}
      .dump();
}

// Sets a file's mtime (to hide a rewrite from the stat() fingerprint).
void SetMtime(const std::string& path, const struct timespec& t) {
  struct timespec times[2] = {t, t};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

struct timespec Mtime(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mtim;
}

// The tests make their own Clients (other hosts, CAs, token files): no fixture client.
class ClientTest : public kubetest::FakeApiServerTest {
 protected:
  ClientTest() : FakeApiServerTest("token-one\n", /*with_client=*/false) {}

  ClientConfig Config() {
    ClientConfig c;
    c.host = "127.0.0.1";
    c.port = server_->port();
    c.ca_file = ca_file_;
    c.token_file = token_file_;
    return c;
  }
};

TEST_F(ClientTest, CreateThenAlreadyExistsThenGet) {
  Client client("127.0.0.1", server_->port(), ca_file_, token_file_);
  CreateResult first = client.CreateObject(Templates("team-a"), Template("draguard-abc"));
  ASSERT_EQ(first.outcome, CreateResult::Outcome::kCreated) << first.error.message;
  EXPECT_TRUE(first.ok());

  CreateResult again = client.CreateObject(Templates("team-a"), Template("draguard-abc"));
  EXPECT_EQ(again.outcome, CreateResult::Outcome::kAlreadyExists);
  EXPECT_TRUE(again.ok());

  GetResult got = client.GetObject(Templates("team-a") + "/draguard-abc");
  ASSERT_EQ(got.outcome, GetResult::Outcome::kFound) << got.error.message;
  EXPECT_EQ(json::parse(got.object_json)["metadata"]["name"], "draguard-abc");

  GetResult missing = client.GetObject(Templates("team-a") + "/draguard-nope");
  EXPECT_EQ(missing.outcome, GetResult::Outcome::kNotFound);
  EXPECT_EQ(missing.error.code, 404);
  EXPECT_EQ(missing.error.reason, "NotFound");

  auto seen = server_->seen();
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "POST");
  EXPECT_EQ(seen[0].path, "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaimtemplates");
  EXPECT_EQ(seen[0].authorization, "Bearer token-one");
  EXPECT_EQ(json::parse(seen[0].body)["kind"], "ResourceClaimTemplate");
}

TEST_F(ClientTest, ForbiddenCarriesTheStatusFields) {
  Client client(Config());
  CreateResult r = client.CreateObject(Templates("forbidden"), Template("draguard-x"));
  ASSERT_EQ(r.outcome, CreateResult::Outcome::kError);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error.code, 403);
  EXPECT_EQ(r.error.reason, "Forbidden");
  EXPECT_NE(r.error.message.find("cannot create resource \"resourceclaimtemplates\""), std::string::npos);
  Status st = r.error.ToStatus();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("403 Forbidden"), std::string::npos);
}

TEST_F(ClientTest, ServerErrorIsUnavailable) {
  Client client(Config());
  CreateResult r = client.CreateObject(Templates("broken"), Template("draguard-x"));
  ASSERT_EQ(r.outcome, CreateResult::Outcome::kError);
  EXPECT_EQ(r.error.code, 500);
  EXPECT_EQ(r.error.reason, "InternalError");
  EXPECT_EQ(r.error.message, "etcdserver: request timed out");
  EXPECT_EQ(r.error.ToStatus().code(), StatusCode::kUnavailable);
}

TEST_F(ClientTest, DeadlineBoundsASlowServer) {
  Client client(Config());
  auto start = std::chrono::steady_clock::now();
  CreateResult r = client.CreateObject(Templates("slow"), Template("draguard-x"), std::chrono::milliseconds(300));
  auto took = std::chrono::steady_clock::now() - start;
  server_->ReleaseSlow();
  ASSERT_EQ(r.outcome, CreateResult::Outcome::kError);
  EXPECT_EQ(r.error.code, 0);
  EXPECT_EQ(r.error.reason, "Timeout") << r.error.message;
  EXPECT_EQ(r.error.ToStatus().code(), StatusCode::kUnavailable);
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST_F(ClientTest, WrongCaIsRefused) {
  auto other = MakeCert("other-ca", nullptr);
  std::string other_file = (dir_.path() / "other-ca.crt").string();
  WriteFile(other_file, other.cert);
  Client client("127.0.0.1", server_->port(), other_file, token_file_);
  CreateResult r = client.CreateObject(Templates("team-a"), Template("draguard-x"));
  ASSERT_EQ(r.outcome, CreateResult::Outcome::kError);
  EXPECT_EQ(r.error.code, 0);
  EXPECT_EQ(r.error.reason, "TLS") << r.error.message;
  // Nothing reached the handler: the token was never sent to an unverified server.
  EXPECT_TRUE(server_->seen().empty());
}

TEST_F(ClientTest, CertificateForAnotherAddressIsRefused) {
  // Signed by the trusted CA, but for other names: the host/IP check must fail.
  auto leaf = MakeCert("elsewhere", &ca_, "IP:127.0.0.2,IP:::2,DNS:kubernetes.default.svc");
  WriteFile(dir_.path() / "other.crt", leaf.cert);
  WriteFile(dir_.path() / "other.key", leaf.key);
  FakeApiServer other((dir_.path() / "other.crt").string(), (dir_.path() / "other.key").string());
  Client client("127.0.0.1", other.port(), ca_file_, token_file_);
  CreateResult r = client.CreateObject(Templates("team-a"), Template("draguard-x"));
  ASSERT_EQ(r.outcome, CreateResult::Outcome::kError);
  EXPECT_EQ(r.error.reason, "TLS") << r.error.message;
  EXPECT_TRUE(other.seen().empty());
  // "localhost" is not in the certificate either.
  Client by_name("localhost", other.port(), ca_file_, token_file_);
  EXPECT_EQ(by_name.CreateObject(Templates("team-a"), Template("draguard-x")).error.reason, "TLS");
  // ...but it is in the normal one, so a DNS name verifies too.
  Client good("localhost", server_->port(), ca_file_, token_file_);
  CreateResult ok = good.CreateObject(Templates("team-a"), Template("draguard-dns"));
  EXPECT_EQ(ok.outcome, CreateResult::Outcome::kCreated) << ok.error.message;
}

TEST_F(ClientTest, MissingCaFileIsATlsError) {
  Client client("127.0.0.1", server_->port(), (dir_.path() / "nope.crt").string(), token_file_);
  CreateResult r = client.CreateObject(Templates("team-a"), Template("draguard-x"));
  EXPECT_EQ(r.error.reason, "TLS");
  EXPECT_NE(r.error.message.find("cannot load CA file"), std::string::npos);
}

TEST_F(ClientTest, ConnectionRefusedIsATransportError) {
  int port = server_->port();
  server_.reset();  // nothing listens on the port any more
  Client client("127.0.0.1", port, ca_file_, token_file_);
  CreateResult r = client.CreateObject(Templates("team-a"), Template("draguard-x"), std::chrono::seconds(5));
  ASSERT_EQ(r.outcome, CreateResult::Outcome::kError);
  EXPECT_EQ(r.error.code, 0);
  EXPECT_EQ(r.error.ToStatus().code(), StatusCode::kUnavailable);
}

TEST_F(ClientTest, RotatedTokenIsPickedUpWhenTheFileChanges) {
  Client client(Config());
  ASSERT_TRUE(client.CreateObject(Templates("team-a"), Template("t1")).ok());
  // Kubelet swaps the projected file (new inode): the next call sends the new token.
  std::string tmp = token_file_ + ".new";
  WriteFile(tmp, "token-two-longer\n");
  std::filesystem::rename(tmp, token_file_);
  server_->AcceptTokens({"token-two-longer"});
  ASSERT_TRUE(client.CreateObject(Templates("team-a"), Template("t2")).ok());
  auto seen = server_->seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].authorization, "Bearer token-one");
  EXPECT_EQ(seen[1].authorization, "Bearer token-two-longer");
}

TEST_F(ClientTest, TokenIsReReadOnceAfterA401) {
  Client client(Config());
  ASSERT_TRUE(client.CreateObject(Templates("team-a"), Template("t1")).ok());
  // Rewrite in place with the same size and mtime: invisible to the fingerprint.
  auto mtime = Mtime(token_file_);
  WriteFile(token_file_, "token-two\n");
  SetMtime(token_file_, mtime);
  server_->AcceptTokens({"token-two"});
  CreateResult r = client.CreateObject(Templates("team-a"), Template("t2"));
  EXPECT_EQ(r.outcome, CreateResult::Outcome::kCreated) << r.error.message;
  auto seen = server_->seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].authorization, "Bearer token-one");  // refused with 401
  EXPECT_EQ(seen[2].authorization, "Bearer token-two");  // retried once with the re-read token

  // A 401 with an unchanged token is not retried.
  server_->AcceptTokens({"nobody"});
  CreateResult refused = client.CreateObject(Templates("team-a"), Template("t3"));
  EXPECT_EQ(refused.error.code, 401);
  EXPECT_EQ(refused.error.reason, "Unauthorized");
  EXPECT_EQ(server_->seen().size(), 4u);
}

TEST_F(ClientTest, TokenIsReReadAfterTheInterval) {
  auto now = std::make_shared<std::atomic<int64_t>>(0);
  ClientConfig c = Config();
  c.token_reread_interval = std::chrono::seconds(60);
  c.clock = [now] { return std::chrono::steady_clock::time_point(std::chrono::seconds(now->load())); };
  Client client(c);
  ASSERT_TRUE(client.CreateObject(Templates("team-a"), Template("t1")).ok());
  auto mtime = Mtime(token_file_);
  WriteFile(token_file_, "token-two\n");
  SetMtime(token_file_, mtime);
  now->store(30);  // before the interval: the cached token is still used (and accepted)
  ASSERT_TRUE(client.CreateObject(Templates("team-a"), Template("t2")).ok());
  now->store(61);  // after it: re-read without needing a 401
  ASSERT_TRUE(client.CreateObject(Templates("team-a"), Template("t3")).ok());
  auto seen = server_->seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[1].authorization, "Bearer token-one");
  EXPECT_EQ(seen[2].authorization, "Bearer token-two");
}

TEST_F(ClientTest, Ipv6ServiceAddressFromTheEnvironment) {
  std::unique_ptr<FakeApiServer> v6;
  try {
    v6 = std::make_unique<FakeApiServer>((dir_.path() / "tls.crt").string(), (dir_.path() / "tls.key").string(),
                                         "::1");
  } catch (const std::exception& e) {
    GTEST_SKIP() << "no IPv6 loopback: " << e.what();
  }
  WriteFile(dir_.path() / "namespace", "draguard-system");
  InClusterOptions o;
  o.token_file = token_file_;
  o.ca_file = ca_file_;
  o.namespace_file = (dir_.path() / "namespace").string();
  std::string port = std::to_string(v6->port());
  o.getenv = [&](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "KUBERNETES_SERVICE_HOST") return std::string("[::1]");
    if (std::string(name) == "KUBERNETES_SERVICE_PORT") return port;
    return std::nullopt;
  };
  auto config = InClusterConfig(o);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(ServerUrl(*config), "https://[::1]:" + port);
  Client client(*config);
  CreateResult r = client.CreateObject(Templates("team-a"), Template("v6"));
  EXPECT_EQ(r.outcome, CreateResult::Outcome::kCreated) << r.error.message;
  EXPECT_EQ(v6->seen().size(), 1u);
}

TEST(InClusterConfigTest, ReadsEnvironmentAndFiles) {
  TempDir dir;
  WriteFile(dir.path() / "token", "abc\n");
  WriteFile(dir.path() / "ca.crt", "pem");
  WriteFile(dir.path() / "namespace", "draguard-system\n");
  InClusterOptions o;
  o.token_file = (dir.path() / "token").string();
  o.ca_file = (dir.path() / "ca.crt").string();
  o.namespace_file = (dir.path() / "namespace").string();
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "fd00:10:96::1"},
                                            {"KUBERNETES_SERVICE_PORT", "6443"}};
  o.getenv = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto c = InClusterConfig(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "fd00:10:96::1");
  EXPECT_EQ(c->port, 6443);
  EXPECT_EQ(c->namespace_name, "draguard-system");
  EXPECT_EQ(c->token_file, o.token_file);
  EXPECT_EQ(ServerUrl(*c), "https://[fd00:10:96::1]:6443");

  env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  env["KUBERNETES_SERVICE_PORT"] = "443";
  c = InClusterConfig(o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ServerUrl(*c), "https://10.96.0.1:443");

  env["KUBERNETES_SERVICE_PORT"] = "https";
  EXPECT_EQ(InClusterConfig(o).status().code(), StatusCode::kInvalidArgument);

  env.erase("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(InClusterConfig(o).status().code(), StatusCode::kFailedPrecondition);

  env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1";
  env["KUBERNETES_SERVICE_PORT"] = "443";
  o.token_file = (dir.path() / "missing").string();
  EXPECT_EQ(InClusterConfig(o).status().code(), StatusCode::kNotFound);
}

// $DRAGUARD_SERVICEACCOUNT_DIR replaces the default service-account directory: token, CA and
// namespace come from there; explicitly given InClusterOptions paths still win; empty = default.
TEST(InClusterConfigTest, ServiceAccountDirFromTheEnvironment) {
  TempDir dir;
  WriteFile(dir.path() / "token", "abc\n");
  WriteFile(dir.path() / "ca.crt", "pem");
  WriteFile(dir.path() / "namespace", " dev-ns\n");
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "127.0.0.1"},
                                            {"KUBERNETES_SERVICE_PORT", "6443"}};
  InClusterOptions o;
  o.getenv = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  EXPECT_EQ(ServiceAccountDir(o), "/var/run/secrets/kubernetes.io/serviceaccount");
  env["DRAGUARD_SERVICEACCOUNT_DIR"] = "";
  EXPECT_EQ(ServiceAccountDir(o), kDefaultServiceAccountDir);

  const std::string sa = dir.path().string();
  env["DRAGUARD_SERVICEACCOUNT_DIR"] = sa + "/";
  EXPECT_EQ(ServiceAccountDir(o), sa);
  EXPECT_EQ(ServiceAccountNamespace(o), "dev-ns");
  auto c = InClusterConfig(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->token_file, sa + "/token");
  EXPECT_EQ(c->ca_file, sa + "/ca.crt");
  EXPECT_EQ(c->namespace_name, "dev-ns");
  EXPECT_EQ(ServerUrl(*c), "https://127.0.0.1:6443");

  // Explicit paths are kept; only the defaults move.
  TempDir other;
  WriteFile(other.path() / "token", "xyz");
  WriteFile(other.path() / "namespace", "other-ns");
  o.token_file = (other.path() / "token").string();
  o.namespace_file = (other.path() / "namespace").string();
  c = InClusterConfig(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->token_file, o.token_file);
  EXPECT_EQ(c->ca_file, sa + "/ca.crt");
  EXPECT_EQ(c->namespace_name, "other-ns");
  EXPECT_EQ(ServiceAccountNamespace(o), "other-ns");

  // A missing file is reported with the directory's path; a missing namespace file is no error.
  o.token_file.clear();
  o.namespace_file.clear();
  std::filesystem::remove(dir.path() / "namespace");
  EXPECT_EQ(ServiceAccountNamespace(o), "");
  c = InClusterConfig(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->namespace_name, "");
  std::filesystem::remove(dir.path() / "ca.crt");
  Status st = InClusterConfig(o).status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find(sa + "/ca.crt"), std::string::npos) << st.message();
}

// Out of the cluster through the in-cluster path: a ServiceAccount's token and CA in a directory
// named by $DRAGUARD_SERVICEACCOUNT_DIR reach a real (fake) API server.
TEST_F(ClientTest, ServiceAccountDirReachesTheApiServer) {
  WriteFile(dir_.path() / "namespace", "draguard-system");
  const std::string port = std::to_string(server_->port());
  InClusterOptions o;
  o.getenv = [&](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "KUBERNETES_SERVICE_HOST") return std::string("127.0.0.1");
    if (std::string(name) == "KUBERNETES_SERVICE_PORT") return port;
    if (std::string(name) == "DRAGUARD_SERVICEACCOUNT_DIR") return dir_.path().string();
    return std::nullopt;
  };
  auto config = InClusterConfig(o);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->token_file, token_file_);
  EXPECT_EQ(config->ca_file, ca_file_);
  EXPECT_EQ(config->namespace_name, "draguard-system");
  Client client(*config);
  CreateResult r = client.CreateObject(Templates("team-a"), Template("from-sa-dir"));
  EXPECT_EQ(r.outcome, CreateResult::Outcome::kCreated) << r.error.message;
  auto seen = server_->seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].authorization, "Bearer token-one");
}

// Client::Call against the fake's generic object store: every verb, preconditions, pagination.
TEST_F(ClientTest, CallCoversTheVerbsTheConventionsAndPagination) {
  Client client(Config());
  const std::string secrets = "/api/v1/namespaces/draguard/secrets";
  json secret = {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", {{"name", "tls"}}}};
  ApiResult created = client.Call({"POST", secrets, secret.dump()});
  ASSERT_EQ(created.status, 201) << created.error.message;
  std::string rv = json::parse(created.body)["metadata"]["resourceVersion"];
  EXPECT_EQ(client.Call({"POST", secrets, secret.dump()}).error.reason, "AlreadyExists");

  ApiResult got = client.Call({"GET", secrets + "/tls"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(json::parse(got.body)["metadata"]["name"], "tls");
  EXPECT_EQ(client.Call({"GET", secrets + "/" + PathEscape("no such")}).status, 404);

  json update = json::parse(got.body);
  update["data"] = {{"k", "dg=="}};
  ApiResult put = client.Call({"PUT", secrets + "/tls", update.dump()});
  ASSERT_EQ(put.status, 200) << put.error.message;
  update["metadata"]["resourceVersion"] = rv;  // stale
  ApiResult stale = client.Call({"PUT", secrets + "/tls", update.dump()});
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(stale.error.reason, "Conflict");

  ApiResult patched = client.Call({"PATCH", secrets + "/tls", R"({"metadata":{"labels":{"a":"b"}}})",
                                   "application/merge-patch+json"});
  ASSERT_EQ(patched.status, 200) << patched.error.message;
  EXPECT_EQ(json::parse(patched.body)["data"]["k"], "dg==");
  EXPECT_EQ(json::parse(patched.body)["metadata"]["labels"]["a"], "b");

  for (int i = 0; i < 5; ++i) {
    server_->PutObject("/api/v1/namespaces/ns" + std::to_string(i % 2) + "/pods/p" + std::to_string(i),
                       {{"kind", "Pod"}});
  }
  ApiResult page = client.Call({"GET", "/api/v1/pods?limit=3"});
  ASSERT_TRUE(page.ok());
  json first = json::parse(page.body);
  EXPECT_EQ(first["items"].size(), 3u);
  std::string cont = first["metadata"]["continue"];
  json rest = json::parse(client.Call({"GET", "/api/v1/pods?limit=3&continue=" + PathEscape(cont)}).body);
  EXPECT_EQ(rest["items"].size(), 2u);
  EXPECT_FALSE(rest["metadata"].contains("continue"));
  server_->ExpireContinueTokens();
  EXPECT_EQ(client.Call({"GET", "/api/v1/pods?limit=3&continue=" + PathEscape(cont)}).status, 410);

  server_->InjectFault("DELETE", secrets + "/tls", kubetest::Reply(500, kubetest::StatusBody(500, "InternalError", "boom")));
  EXPECT_EQ(client.Call({"DELETE", secrets + "/tls"}).error.reason, "InternalError");
  EXPECT_EQ(client.Call({"DELETE", secrets + "/tls"}).status, 200);
  EXPECT_TRUE(server_->GetObject(secrets + "/tls").is_null());
}

}  // namespace
}  // namespace draguard::kube
