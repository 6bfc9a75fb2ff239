// Test helpers: a throwaway PKI (EC P-256 CA + serving cert for 127.0.0.1, made at test time) and
// a scripted HTTPS fake of the Kubernetes API server that follows its conventions: Status objects,
// 201/409/401/403/404/410/500, chunked watch streams with one JSON event per line, bookmarks.
// Paths without a scripted route go to a generic object store: create, get, list with
// labelSelector/limit/continue, watch (every change after the given resourceVersion, then held
// open), update with resourceVersion preconditions, merge and JSON patch, delete, with injectable
// faults. An Accept header asking for PartialObjectMetadata(List) gets metadata only, as from
// kube-apiserver. ConfigMap lists and watches are scripted (ScriptList/ScriptWatch) unless
// ConfigMapsFromStore() sends them to the store too.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "draguard/kube/client.h"

namespace kubetest {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- PKI ------------------------------------------------------------------------------------

struct Pem {
  std::string cert, key;
};

inline std::string ToPem(X509* x) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, x);
  char* d = nullptr;
  long n = BIO_get_mem_data(b, &d);
  std::string s(d, static_cast<std::size_t>(n));
  BIO_free(b);
  return s;
}

inline std::string ToPem(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  char* d = nullptr;
  long n = BIO_get_mem_data(b, &d);
  std::string s(d, static_cast<std::size_t>(n));
  BIO_free(b);
  return s;
}

inline void AddExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) throw std::runtime_error("extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// A CA (issuer == nullptr) or a leaf with `sans` signed by `issuer`.
inline Pem MakeCert(const char* cn, const Pem* issuer,
                    const char* sans = "IP:127.0.0.1,IP:::1,DNS:localhost") {
  static long serial = 1;
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* x = X509_new();
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(x), -300);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
  X509_set_pubkey(x, key);
  X509* ca = nullptr;
  EVP_PKEY* ca_key = nullptr;
  if (issuer != nullptr) {
    BIO* b = BIO_new_mem_buf(issuer->cert.data(), static_cast<int>(issuer->cert.size()));
    ca = PEM_read_bio_X509(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    b = BIO_new_mem_buf(issuer->key.data(), static_cast<int>(issuer->key.size()));
    ca_key = PEM_read_bio_PrivateKey(b, nullptr, nullptr, nullptr);
    BIO_free(b);
    X509_set_issuer_name(x, X509_get_subject_name(ca));
    AddExt(x, ca, NID_basic_constraints, "critical,CA:FALSE");
    AddExt(x, ca, NID_ext_key_usage, "serverAuth");
    AddExt(x, ca, NID_subject_alt_name, sans);
    X509_sign(x, ca_key, EVP_sha256());
  } else {
    X509_set_issuer_name(x, X509_get_subject_name(x));
    AddExt(x, x, NID_basic_constraints, "critical,CA:TRUE");
    AddExt(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
    AddExt(x, x, NID_subject_key_identifier, "hash");
    X509_sign(x, key, EVP_sha256());
  }
  Pem out{ToPem(x), ToPem(key)};
  X509_free(x);
  EVP_PKEY_free(key);
  if (ca != nullptr) X509_free(ca);
  if (ca_key != nullptr) EVP_PKEY_free(ca_key);
  return out;
}

inline void WriteFile(const fs::path& p, const std::string& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << data;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "draguard-kube-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// ---- Kubernetes conventions -----------------------------------------------------------------

inline std::string StatusBody(int code, const std::string& reason, const std::string& message) {
  return json{{"kind", "Status"},  {"apiVersion", "v1"}, {"metadata", json::object()},
              {"status", "Failure"}, {"message", message}, {"reason", reason},
              {"code", code}}
      .dump();
}

inline json ConfigMapJson(const std::string& ns, const std::string& name, const std::string& rv,
                          const std::string& node = "") {
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata",
              {{"namespace", ns},
               {"name", name},
               {"resourceVersion", rv},
               {"labels", {{"draguard.io/topology", "hwloc"}}}}},
             {"data", {{"topology.xml", "<topology/>"}}}};
  if (!node.empty()) cm["metadata"]["labels"]["draguard.io/node"] = node;
  return cm;
}

inline std::string Event(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump() + "\n";
}

inline std::string Bookmark(const std::string& rv) {
  return Event("BOOKMARK", {{"kind", "ConfigMap"}, {"apiVersion", "v1"}, {"metadata", {{"resourceVersion", rv}}}});
}

// One scripted answer to a LIST or WATCH request.
struct Reply {
  Reply() = default;
  Reply(int status_code, std::string body_text, std::vector<std::string> stream = {}, bool hold = false)
      : status(status_code), body(std::move(body_text)), chunks(std::move(stream)), hold_open(hold) {}
  int status = 200;
  std::string body;                 // non-streamed body (LIST, errors)
  std::vector<std::string> chunks;  // streamed watch chunks (each a line or part of one)
  bool hold_open = false;           // after the chunks, keep the stream open until shutdown
  bool gated = false;               // stream the chunks only after ReleaseSlow()
};

// A request as the server saw it.
struct Seen {
  std::string method, path, authorization, body;
  std::multimap<std::string, std::string> params;
  std::string accept;
  std::string param(const std::string& k) const {
    auto it = params.find(k);
    return it == params.end() ? "" : it->second;
  }
};

class FakeApiServer {
 public:
  FakeApiServer(const std::string& cert_file, const std::string& key_file,
                const std::string& bind_host = "127.0.0.1")
      : server_(cert_file.c_str(), key_file.c_str()) {
    if (!server_.is_valid()) throw std::runtime_error("SSLServer invalid");
    server_.set_read_timeout(5, 0);
    server_.set_write_timeout(5, 0);
    server_.Post(R"(/apis/resource.k8s.io/v1/namespaces/([^/]+)/resourceclaimtemplates)",
                 [this](const httplib::Request& req, httplib::Response& res) { Create(req, res); });
    server_.Get(R"(/apis/resource.k8s.io/v1/namespaces/([^/]+)/resourceclaimtemplates/([^/]+))",
                [this](const httplib::Request& req, httplib::Response& res) { GetOne(req, res); });
    server_.Get(R"(/api/v1/configmaps)",
                [this](const httplib::Request& req, httplib::Response& res) { ConfigMaps(req, res); });
    server_.Get(R"(/api/v1/namespaces/([^/]+)/configmaps)",
                [this](const httplib::Request& req, httplib::Response& res) { ConfigMaps(req, res); });
    auto generic = [this](const httplib::Request& req, httplib::Response& res) { Generic(req, res); };
    server_.Get(".*", generic);
    server_.Post(".*", generic);
    server_.Put(".*", generic);
    server_.Patch(".*", generic);
    server_.Delete(".*", generic);
    port_ = server_.bind_to_any_port(bind_host);
    if (port_ <= 0) throw std::runtime_error("cannot bind " + bind_host);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!server_.is_running() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }

  ~FakeApiServer() {
    {
      std::lock_guard<std::mutex> l(mu_);
      closing_ = true;
      release_slow_ = true;
    }
    cv_.notify_all();
    server_.stop();
    thread_.join();
  }

  int port() const { return port_; }

  // Tokens the server accepts; empty = accept any.
  void AcceptTokens(std::set<std::string> tokens) {
    std::lock_guard<std::mutex> l(mu_);
    accepted_ = std::move(tokens);
  }
  void ScriptList(Reply r) {
    std::lock_guard<std::mutex> l(mu_);
    lists_.push_back(std::move(r));
  }
  void ScriptWatch(Reply r) {
    std::lock_guard<std::mutex> l(mu_);
    watches_.push_back(std::move(r));
  }
  // The default LIST answer once the script is used up.
  void SetDefaultList(std::string body) {
    std::lock_guard<std::mutex> l(mu_);
    default_list_ = std::move(body);
  }
  void ReleaseSlow() {
    {
      std::lock_guard<std::mutex> l(mu_);
      release_slow_ = true;
    }
    cv_.notify_all();
  }
  std::vector<Seen> seen() const {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }

  // ---- generic object store (every path without a scripted route) ----
  // Objects are keyed by their full path, e.g. /api/v1/namespaces/ns/secrets/name or
  // /api/v1/nodes/n. resourceVersions come from one counter, as in etcd.

  // Stores `object` at `path` (no checks), stamping resourceVersion, uid and name; returns it.
  json PutObject(const std::string& path, json object) {
    json stored;
    {
      std::lock_guard<std::mutex> l(mu_);
      stored = StoreLocked(path, std::move(object));
    }
    cv_.notify_all();
    return stored;
  }
  // The object at `path`, or null.
  json GetObject(const std::string& path) const {
    std::lock_guard<std::mutex> l(mu_);
    auto it = store_.find(path);
    return it == store_.end() ? json() : it->second;
  }
  // Removes the object at `path` (no-op when absent).
  void RemoveObject(const std::string& path) {
    {
      std::lock_guard<std::mutex> l(mu_);
      EraseLocked(path);
    }
    cv_.notify_all();
  }
  // ConfigMap lists and watches are answered from the store (not from the scripts).
  void ConfigMapsFromStore() {
    std::lock_guard<std::mutex> l(mu_);
    configmaps_from_store_ = true;
  }
  // Paths of stored objects that start with `prefix`.
  std::vector<std::string> ObjectPaths(const std::string& prefix = "") const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::string> out;
    for (const auto& [k, v] : store_)
      if (k.rfind(prefix, 0) == 0) out.push_back(k);
    return out;
  }
  // The next request with this method whose path (without query) matches `path_regex` gets
  // `reply` instead of the store's answer. Faults are used in the order they were added.
  void InjectFault(const std::string& method, const std::string& path_regex, Reply reply) {
    std::lock_guard<std::mutex> l(mu_);
    faults_.push_back(Fault{method, std::regex(path_regex), std::move(reply)});
  }
  // Continue tokens issued so far stop working: the next list with one answers 410 Gone.
  void ExpireContinueTokens() {
    std::lock_guard<std::mutex> l(mu_);
    ++continue_epoch_;
  }
  // Number of requests seen with `method` whose path starts with `prefix`.
  int Count(const std::string& method, const std::string& prefix) const {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const auto& x : seen_) n += x.method == method && x.path.rfind(prefix, 0) == 0;
    return n;
  }
  // Waits until `pred(seen)` holds; false after `timeout`.
  bool WaitSeen(const std::function<bool(const std::vector<Seen>&)>& pred,
                std::chrono::seconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, [&] { return pred(seen_); });
  }
  // Number of watch requests seen so far.
  static int Watches(const std::vector<Seen>& s) {
    int n = 0;
    for (const auto& x : s) n += x.param("watch") == "true";
    return n;
  }
  static int Lists(const std::vector<Seen>& s) {
    int n = 0;
    for (const auto& x : s) n += x.path.find("configmaps") != std::string::npos && x.param("watch") != "true";
    return n;
  }

 private:
  // Records the request; false (and a 401 Status) when the token is not accepted.
  bool Admit(const httplib::Request& req, httplib::Response& res) {
    Seen s{req.method, req.path, req.get_header_value("Authorization"), req.body, {}, req.get_header_value("Accept")};
    for (const auto& [k, v] : req.params) s.params.emplace(k, v);
    bool ok;
    {
      std::lock_guard<std::mutex> l(mu_);
      seen_.push_back(s);
      ok = accepted_.empty() || (s.authorization.rfind("Bearer ", 0) == 0 &&
                                 accepted_.count(s.authorization.substr(7)) > 0);
    }
    cv_.notify_all();
    if (!ok) {
      res.status = 401;
      res.set_content(StatusBody(401, "Unauthorized", "Unauthorized"), "application/json");
    }
    return ok;
  }

  // Answers with the first injected fault matching the request, if any (and removes it).
  bool TakeFault(const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (it->method == req.method && std::regex_match(req.path, it->path)) {
        Reply r = std::move(it->reply);
        faults_.erase(it);
        res.status = r.status;
        res.set_content(r.body, "application/json");
        return true;
      }
    }
    return false;
  }

  void Create(const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return;
    if (TakeFault(req, res)) return;
    std::string ns = req.matches[1];
    auto obj = json::parse(req.body, nullptr, false);
    std::string name = obj.is_discarded() ? "" : obj["metadata"].value("name", "");
    if (ns == "forbidden") {
      res.status = 403;
      res.set_content(StatusBody(403, "Forbidden",
                                 "resourceclaimtemplates.resource.k8s.io is forbidden: User "
                                 "\"system:serviceaccount:draguard:draguard\" cannot create resource "
                                 "\"resourceclaimtemplates\" in API group \"resource.k8s.io\" in the "
                                 "namespace \"forbidden\""),
                      "application/json");
      return;
    }
    if (ns == "broken") {
      res.status = 500;
      res.set_content(StatusBody(500, "InternalError", "etcdserver: request timed out"), "application/json");
      return;
    }
    if (ns == "slow") {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::seconds(20), [&] { return release_slow_; });
      res.status = 201;
      res.set_content(req.body, "application/json");
      return;
    }
    std::lock_guard<std::mutex> l(mu_);
    if (!objects_.insert(ns + "/" + name).second) {
      res.status = 409;
      res.set_content(StatusBody(409, "AlreadyExists",
                                 "resourceclaimtemplates.resource.k8s.io \"" + name + "\" already exists"),
                      "application/json");
      return;
    }
    bodies_[ns + "/" + name] = req.body;
    res.status = 201;
    res.set_content(req.body, "application/json");
  }

  void GetOne(const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return;
    std::string key = std::string(req.matches[1]) + "/" + std::string(req.matches[2]);
    std::lock_guard<std::mutex> l(mu_);
    auto it = bodies_.find(key);
    if (it == bodies_.end()) {
      res.status = 404;
      res.set_content(StatusBody(404, "NotFound",
                                 "resourceclaimtemplates.resource.k8s.io \"" + std::string(req.matches[2]) +
                                     "\" not found"),
                      "application/json");
      return;
    }
    res.status = 200;
    res.set_content(it->second, "application/json");
  }

  void ConfigMaps(const httplib::Request& req, httplib::Response& res) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (configmaps_from_store_) {
        l.unlock();
        Generic(req, res);
        return;
      }
    }
    if (!Admit(req, res)) return;
    bool watch = req.get_param_value("watch") == "true";
    Reply r;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto& q = watch ? watches_ : lists_;
      if (!q.empty()) {
        r = std::move(q.front());
        q.pop_front();
      } else if (watch) {
        r.hold_open = true;
      } else {
        r.body = default_list_;
      }
    }
    res.status = r.status;
    if (!watch || r.status != 200) {
      res.set_content(r.body, "application/json");
      return;
    }
    auto state = std::make_shared<Reply>(std::move(r));
    auto next = std::make_shared<std::size_t>(0);
    res.set_chunked_content_provider(
        "application/json", [this, state, next](std::size_t, httplib::DataSink& sink) {
          if (state->gated && *next == 0 && !state->chunks.empty()) {
            std::unique_lock<std::mutex> l(mu_);
            if (!release_slow_ && !closing_) {
              cv_.wait_for(l, std::chrono::milliseconds(50), [&] { return release_slow_ || closing_; });
              if (closing_) sink.done();
              return true;  // asked again; the events follow the release
            }
          }
          if (*next < state->chunks.size()) {
            const std::string& c = state->chunks[(*next)++];
            return sink.write(c.data(), c.size());
          }
          if (!state->hold_open) {
            sink.done();
            return true;
          }
          if (!sink.is_writable()) return false;
          std::unique_lock<std::mutex> l(mu_);
          cv_.wait_for(l, std::chrono::milliseconds(50), [&] { return closing_; });
          if (closing_) {
            sink.done();
          }
          return true;
        });
  }

  struct Fault {
    std::string method;
    std::regex path;
    Reply reply;
  };

  static std::string LastSegment(const std::string& path) { return path.substr(path.rfind('/') + 1); }

  // Resource kind for messages: the collection segment ("secrets").
  static std::string Resource(const std::vector<std::string>& segs, bool object) {
    if (segs.size() < (object ? 2u : 1u)) return "objects";
    return segs[segs.size() - (object ? 2 : 1)];
  }

  static std::vector<std::string> Split(const std::string& path) {
    std::vector<std::string> out;
    std::size_t i = 1;
    while (i <= path.size()) {
      std::size_t j = path.find('/', i);
      if (j == std::string::npos) j = path.size();
      if (j > i) out.push_back(path.substr(i, j - i));
      i = j + 1;
    }
    return out;
  }

  // True when `segs` name a collection (not one object): /api/v1/X, /api/v1/namespaces/N/X,
  // /apis/G/V/X, /apis/G/V/namespaces/N/X.
  static bool IsCollection(const std::vector<std::string>& segs) {
    std::size_t base = (!segs.empty() && segs[0] == "api") ? 2 : 3;  // api/v1 | apis/g/v
    if (segs.size() == base + 1) return true;
    if (segs.size() == base + 3 && segs[base] == "namespaces") return true;
    return false;
  }

  json StoreLocked(const std::string& path, json object) {
    if (!object.is_object()) object = json::object();
    auto& meta = object["metadata"];
    if (!meta.is_object()) meta = json::object();
    meta["resourceVersion"] = std::to_string(++rv_);
    if (!meta.contains("uid")) meta["uid"] = "uid-" + std::to_string(rv_);
    if (!meta.contains("name")) meta["name"] = LastSegment(path);
    events_.push_back({rv_, store_.count(path) != 0 ? "MODIFIED" : "ADDED", path, object});
    store_[path] = object;
    return object;
  }

  // Removes `path` and records its DELETED event (the last state at a new resourceVersion).
  void EraseLocked(const std::string& path) {
    auto it = store_.find(path);
    if (it == store_.end()) return;
    json last = it->second;
    last["metadata"]["resourceVersion"] = std::to_string(++rv_);
    events_.push_back({rv_, "DELETED", path, std::move(last)});
    store_.erase(it);
  }

  // True when the stored object at `key` belongs to the collection `segs` (path `path`): a
  // direct child, or, for a cluster-wide list of a namespaced resource, one in any namespace.
  static bool InCollection(const std::string& key, const std::string& path, const std::vector<std::string>& segs) {
    std::size_t base = segs[0] == "api" ? 2 : 3;
    std::string prefix = path + "/";
    if (key.rfind(prefix, 0) == 0 && key.find('/', prefix.size()) == std::string::npos) return true;
    if (segs.size() != base + 1) return false;
    std::string any_ns = path.substr(0, path.size() - segs.back().size()) + "namespaces/";
    if (key.rfind(any_ns, 0) != 0) return false;
    auto ks = Split(key);
    return ks.size() == base + 4 && ks[base + 2] == segs.back();
  }

  // What kube-apiserver answers for `as=PartialObjectMetadata`: the metadata only.
  static json MetadataOnly(const json& object) {
    return {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "PartialObjectMetadata"},
            {"metadata", object.contains("metadata") ? object["metadata"] : json::object()}};
  }

  // A watch of the store: every change to the collection after `resourceVersion`, then held
  // open (new changes streamed as they happen) until the server closes.
  void WatchStore(const httplib::Request& req, httplib::Response& res, const std::vector<std::string>& segs) {
    struct State {
      std::string path, selector;
      std::vector<std::string> segs;
      long from = 0;
      std::size_t next = 0;
      bool metadata = false;
    };
    auto st = std::make_shared<State>();
    st->path = req.path;
    st->segs = segs;
    st->selector = req.get_param_value("labelSelector");
    st->metadata = req.get_header_value("Accept").find("as=PartialObjectMetadata") != std::string::npos;
    const std::string rv = req.get_param_value("resourceVersion");
    st->from = rv.empty() ? 0 : std::stol(rv);
    res.status = 200;
    res.set_chunked_content_provider("application/json", [this, st](std::size_t, httplib::DataSink& sink) {
      std::string out;
      {
        std::unique_lock<std::mutex> l(mu_);
        if (st->next >= events_.size() && !closing_) {
          cv_.wait_for(l, std::chrono::milliseconds(50), [&] { return closing_ || st->next < events_.size(); });
        }
        if (closing_) {
          sink.done();
          return true;
        }
        for (; st->next < events_.size(); ++st->next) {
          const auto& e = events_[st->next];
          if (e.rv <= st->from || !InCollection(e.path, st->path, st->segs) || !MatchesSelector(e.object, st->selector)) continue;
          out += json{{"type", e.type}, {"object", st->metadata ? MetadataOnly(e.object) : e.object}}.dump() + "\n";
        }
      }
      if (out.empty()) return sink.is_writable();
      return sink.write(out.data(), out.size());
    });
  }

  static bool MatchesSelector(const json& obj, const std::string& selector) {
    if (selector.empty()) return true;
    const json* labels = nullptr;
    if (obj.contains("metadata") && obj["metadata"].contains("labels")) labels = &obj["metadata"]["labels"];
    std::size_t i = 0;
    while (i <= selector.size()) {
      std::size_t j = selector.find(',', i);
      if (j == std::string::npos) j = selector.size();
      std::string term = selector.substr(i, j - i);
      i = j + 1;
      if (term.empty()) continue;
      std::size_t eq = term.find('=');
      std::string key = term.substr(0, eq == std::string::npos ? term.size() : eq);
      bool has = labels != nullptr && labels->contains(key);
      if (eq == std::string::npos) {
        if (!has) return false;
        continue;
      }
      std::string value = term.substr(eq + (term.compare(eq, 2, "==") == 0 ? 2 : 1));
      if (!has || !(*labels)[key].is_string() || (*labels)[key].get<std::string>() != value) return false;
    }
    return true;
  }

  void Reject(httplib::Response& res, int code, const std::string& reason, const std::string& message) {
    res.status = code;
    res.set_content(StatusBody(code, reason, message), "application/json");
  }

  void Generic(const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return;
    if (TakeFault(req, res)) return;
    std::unique_lock<std::mutex> l(mu_);
    auto segs = Split(req.path);
    if (segs.size() < 3 || (segs[0] != "api" && segs[0] != "apis")) {
      Reject(res, 404, "NotFound", "the server could not find the requested resource");
      return;
    }
    bool collection = IsCollection(segs);
    const std::string& path = req.path;
    if (req.method == "GET" && collection && req.get_param_value("watch") == "true") {
      l.unlock();
      WatchStore(req, res, segs);
      return;
    }
    if (req.method == "GET" && collection) {
      // A cluster-wide list of a namespaced resource spans every namespace.
      std::vector<const json*> items;
      for (const auto& [k, v] : store_) {
        if (InCollection(k, path, segs) && MatchesSelector(v, req.get_param_value("labelSelector"))) items.push_back(&v);
      }
      const bool metadata = req.get_header_value("Accept").find("as=PartialObjectMetadataList") != std::string::npos;
      std::size_t offset = 0;
      std::string cont = req.get_param_value("continue");
      if (!cont.empty()) {
        auto colon = cont.find(':');
        if (colon == std::string::npos || std::stoi(cont.substr(0, colon)) != continue_epoch_) {
          Reject(res, 410, "Expired",
                 "The provided continue parameter is too old to display a consistent list result. You can "
                 "start a new list without the continue parameter.");
          return;
        }
        offset = std::stoul(cont.substr(colon + 1));
      }
      std::size_t limit = req.has_param("limit") ? std::stoul(req.get_param_value("limit")) : 0;
      json list = {{"apiVersion", segs[0] == "api" ? "v1" : segs[1] + "/" + segs[2]},
                   {"kind", "List"},
                   {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                   {"items", json::array()}};
      std::size_t end = limit == 0 ? items.size() : std::min(items.size(), offset + limit);
      for (std::size_t i = offset; i < end; ++i) list["items"].push_back(metadata ? MetadataOnly(*items[i]) : *items[i]);
      if (end < items.size()) {
        list["metadata"]["continue"] = std::to_string(continue_epoch_) + ":" + std::to_string(end);
        list["metadata"]["remainingItemCount"] = items.size() - end;
      }
      res.status = 200;
      res.set_content(list.dump(), "application/json");
      return;
    }
    if (req.method == "POST" && collection) {
      auto obj = json::parse(req.body, nullptr, false);
      if (obj.is_discarded() || !obj.is_object()) {
        Reject(res, 400, "BadRequest", "the body of the request was in an unknown format");
        return;
      }
      std::string name = obj.contains("metadata") ? obj["metadata"].value("name", "") : "";
      if (name.empty()) {
        Reject(res, 422, "Invalid", Resource(segs, false) + " is invalid: metadata.name: Required value");
        return;
      }
      std::string key = path + "/" + name;
      if (store_.count(key) != 0) {
        Reject(res, 409, "AlreadyExists", Resource(segs, false) + " \"" + name + "\" already exists");
        return;
      }
      if (obj["metadata"].contains("resourceVersion")) obj["metadata"].erase("resourceVersion");
      res.status = 201;
      res.set_content(StoreLocked(key, std::move(obj)).dump(), "application/json");
      l.unlock();
      cv_.notify_all();
      return;
    }
    if (collection) {
      Reject(res, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
      return;
    }
    auto it = store_.find(path);
    std::string name = LastSegment(path);
    if (it == store_.end()) {
      Reject(res, 404, "NotFound", Resource(segs, true) + " \"" + name + "\" not found");
      return;
    }
    if (req.method == "GET") {
      res.status = 200;
      res.set_content(it->second.dump(), "application/json");
      return;
    }
    if (req.method == "DELETE") {
      auto opts = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
      if (opts.is_object() && opts.contains("preconditions") && opts["preconditions"].is_object()) {
        const json& pre = opts["preconditions"];
        const json& meta = it->second["metadata"];
        if ((pre.contains("uid") && pre["uid"] != meta.value("uid", "")) ||
            (pre.contains("resourceVersion") && pre["resourceVersion"] != meta.value("resourceVersion", ""))) {
          Reject(res, 409, "Conflict",
                 "Operation cannot be fulfilled on " + Resource(segs, true) + " \"" + name +
                     "\": Precondition failed");
          return;
        }
      }
      EraseLocked(path);
      l.unlock();
      cv_.notify_all();
      res.status = 200;
      res.set_content(json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}}.dump(),
                      "application/json");
      return;
    }
    auto body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
      Reject(res, 400, "BadRequest", "the body of the request was in an unknown format");
      return;
    }
    json updated;
    std::string current_rv = it->second["metadata"].value("resourceVersion", "");
    if (req.method == "PUT") {
      std::string rv = body.contains("metadata") ? body["metadata"].value("resourceVersion", "") : "";
      if (!rv.empty() && rv != current_rv) {
        Reject(res, 409, "Conflict",
               "Operation cannot be fulfilled on " + Resource(segs, true) + " \"" + name +
                   "\": the object has been modified; please apply your changes to the latest version and try again");
        return;
      }
      updated = std::move(body);
      if (it->second["metadata"].contains("uid")) updated["metadata"]["uid"] = it->second["metadata"]["uid"];
    } else if (req.method == "PATCH") {
      std::string type = req.get_header_value("Content-Type");
      updated = it->second;
      try {
        if (type == "application/json-patch+json") {
          updated = updated.patch(body);
        } else if (type == "application/merge-patch+json" || type == "application/strategic-merge-patch+json") {
          std::string rv = body.contains("metadata") && body["metadata"].is_object()
                               ? body["metadata"].value("resourceVersion", "")
                               : "";
          if (!rv.empty() && rv != current_rv) {
            Reject(res, 409, "Conflict", "Operation cannot be fulfilled on " + Resource(segs, true) + " \"" +
                                             name + "\": the object has been modified");
            return;
          }
          updated.merge_patch(body);
        } else {
          Reject(res, 415, "UnsupportedMediaType", "the body of the request was in an unknown format");
          return;
        }
      } catch (const std::exception& e) {
        Reject(res, 422, "Invalid", e.what());
        return;
      }
    } else {
      Reject(res, 405, "MethodNotAllowed", "method not allowed");
      return;
    }
    res.status = 200;
    res.set_content(StoreLocked(path, std::move(updated)).dump(), "application/json");
    l.unlock();
    cv_.notify_all();
  }

  httplib::SSLServer server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool closing_ = false;
  bool release_slow_ = false;
  std::set<std::string> accepted_;
  std::set<std::string> objects_;
  std::map<std::string, std::string> bodies_;
  std::deque<Reply> lists_, watches_;
  std::string default_list_ =
      R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]})";
  std::vector<Seen> seen_;
  std::map<std::string, json> store_;
  struct StoreEvent {
    long rv;
    std::string type, path;
    json object;
  };
  std::vector<StoreEvent> events_;  // every change to store_, in order
  bool configmaps_from_store_ = false;
  std::vector<Fault> faults_;
  long rv_ = 100;
  int continue_epoch_ = 0;
};

// Test fixture base: a throwaway PKI in a temporary directory (ca.crt, tls.crt, tls.key and a
// bearer token file holding `token_file_contents` as written), a FakeApiServer serving with it
// on 127.0.0.1 and, unless `with_client` is false, a kube::Client that trusts the CA and reads the
// token file. SIGPIPE is ignored (a client may write to a stream the server has closed).
class FakeApiServerTest : public ::testing::Test {
 protected:
  explicit FakeApiServerTest(std::string token_file_contents = "token-one\n", bool with_client = true)
      : token_contents_(std::move(token_file_contents)), with_client_(with_client) {}

  void SetUp() override {
    std::signal(SIGPIPE, SIG_IGN);
    ca_ = MakeCert("test-ca", nullptr);
    auto leaf = MakeCert("kube-apiserver", &ca_);
    ca_file_ = (dir_.path() / "ca.crt").string();
    token_file_ = (dir_.path() / "token").string();
    WriteFile(ca_file_, ca_.cert);
    WriteFile(dir_.path() / "tls.crt", leaf.cert);
    WriteFile(dir_.path() / "tls.key", leaf.key);
    WriteFile(token_file_, token_contents_);
    server_ = std::make_unique<FakeApiServer>((dir_.path() / "tls.crt").string(),
                                              (dir_.path() / "tls.key").string());
    if (with_client_) {
      client_ = std::make_unique<draguard::kube::Client>("127.0.0.1", server_->port(), ca_file_, token_file_);
    }
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  TempDir dir_;
  Pem ca_;
  std::string ca_file_, token_file_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<draguard::kube::Client> client_;

 private:
  std::string token_contents_;
  bool with_client_;
};

inline std::string ListBody(const std::vector<json>& items, const std::string& rv, const std::string& cont = "") {
  json meta = {{"resourceVersion", rv}};
  if (!cont.empty()) meta["continue"] = cont;
  return json{{"kind", "ConfigMapList"}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", items}}.dump();
}

}  // namespace kubetest
