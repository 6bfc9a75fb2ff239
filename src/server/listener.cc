#include "listener.h"

#include "h2_connection.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <malloc.h>
#include <signal.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/err.h>

namespace draguard::server {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view SV(beast::string_view v) { return {v.data(), v.size()}; }

// A request body read into a std::string by appending, so that each byte is written once
// (http::string_body resizes, zero-filling, and then copies). The session reserves the announced
// length plus the decoder's padding before the body is read.
struct AppendStringBody {
  using value_type = std::string;

  class reader {
   public:
    template <bool kIsRequest, class Fields>
    reader(http::header<kIsRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>& length, beast::error_code& ec) {
      if (length && *length > body_.max_size()) {
        ec = http::error::buffer_overflow;
        return;
      }
      ec = {};
    }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      const std::size_t extra = beast::buffer_bytes(buffers);
      if (extra > body_.max_size() - body_.size()) {
        ec = http::error::buffer_overflow;
        return 0;
      }
      for (const auto b : beast::buffers_range_ref(buffers)) body_.append(static_cast<const char*>(b.data()), b.size());
      ec = {};
      return extra;
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && Hex(s[i + 1]) >= 0 && Hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(Hex(s[i + 1]) * 16 + Hex(s[i + 2])));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Review workers with a bounded queue of complete requests.
class WorkerPool {
 public:
  WorkerPool(std::size_t workers, std::size_t max_queued)
      : workers_(std::max<std::size_t>(1, workers)), max_queued_(max_queued) {
    for (std::size_t i = 0; i < workers_; ++i) {
      threads_.emplace_back([this] { Work(); });
    }
  }
  ~WorkerPool() { Stop(); }

  // False when every worker is busy and max_queued requests wait already (the caller sheds).
  bool TryPost(std::function<void()> fn) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || queue_.size() + busy_ >= workers_ + max_queued_) return false;
      queue_.push_back(std::move(fn));
    }
    cv_.notify_one();
    return true;
  }

  // Runs what is queued, then joins.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
        ++busy_;
      }
      fn();
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
  }

  std::size_t workers_;
  std::size_t max_queued_;
  std::size_t busy_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
};

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void Stop() = 0;  // posted to the session's loop
  virtual void Drain() {}   // posted to the session's loop (h2: GOAWAY notice)
};

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

std::string HttpRequest::Param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    std::size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    std::size_t eq = pair.find('=');
    if (PercentDecode(pair.substr(0, eq)) == name) {
      return eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return "";
}

struct Listener::Impl {
  ListenerOptions opt;
  std::vector<HttpRoute> routes;
  // One event loop per IO thread, each run by its thread alone (no loop shared between threads:
  // their handlers never contend for a scheduler lock). `ioc` is the first; it also runs the
  // acceptor and the trim timer. Declared first, destroyed last: the accept still pending in
  // `ioc` when it is destroyed holds a socket of the next loop, so that loop must outlive it.
  std::vector<std::unique_ptr<asio::io_context>> more_iocs;
  asio::io_context ioc{1};
  std::size_t next_loop = 0;  // round-robin over the loops; used on the acceptor's strand only
  SSL_CTX* ssl = nullptr;  // null = plain HTTP
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  std::optional<asio::steady_timer> accept_retry;
  std::unique_ptr<WorkerPool> pool;
  std::vector<std::thread> io_threads;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> work;
  int bound_port = 0;
  std::atomic<bool> draining{false};
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> budget_used{0};
  // Bytes freed since the last malloc_trim (bodies, closed connections); see Trim().
  std::atomic<std::size_t> churn{0};
  std::optional<asio::steady_timer> trim_timer;
  bool started = false, stopped = false;

  mutable std::mutex mu;  // guards sessions
  std::condition_variable sessions_cv;
  std::unordered_map<std::uint64_t, std::weak_ptr<SessionBase>> sessions;
  std::uint64_t next_id = 0;

  ~Impl() {
    if (ssl != nullptr) SSL_CTX_free(ssl);
  }

  std::uint64_t Register(std::weak_ptr<SessionBase> s) {
    std::lock_guard<std::mutex> lock(mu);
    std::uint64_t id = ++next_id;
    sessions.emplace(id, std::move(s));
    return id;
  }
  void Unregister(std::uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    sessions.erase(id);
    if (sessions.empty()) sessions_cv.notify_all();
  }
  template <class F>
  void ForEachSession(F f) {
    std::vector<std::shared_ptr<SessionBase>> live;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [id, w] : sessions) {
        if (auto s = w.lock()) live.push_back(std::move(s));
      }
    }
    for (auto& s : live) f(*s);
  }

  bool Reserve(std::size_t n) {
    if (opt.body_budget == 0 || n == 0) return true;
    std::size_t cur = budget_used.load();
    for (;;) {
      // A single body larger than the whole budget is still admitted when nothing else is held.
      if (cur != 0 && cur + n > opt.body_budget) return false;
      if (budget_used.compare_exchange_weak(cur, cur + n)) return true;
    }
  }
  void Release(std::size_t n) {
    if (opt.body_budget != 0 && n != 0) budget_used.fetch_sub(n);
    if (n >= kLargeBody) churn.fetch_add(kTrimChurn);  // small bodies reuse the same heap chunks
  }

  // glibc keeps freed heap pages: after a burst of large bodies or of connections (a TLS
  // handshake allocates ~40 KB for a moment) give them back, at most once a second.
  void Trim() {
    trim_timer->expires_after(std::chrono::seconds(1));
    trim_timer->async_wait([this](beast::error_code ec) {
      if (ec || stopping.load()) return;
      if (churn.exchange(0) >= kTrimChurn) ::malloc_trim(0);
      Trim();
    });
  }
  // malloc_trim stalls every allocating thread and the pages it returns fault back in: only after
  // large bodies or many connections (a trim per request would cost ~3× the throughput).
  static constexpr std::size_t kTrimChurn = 16 * 1024 * 1024;
  static constexpr std::size_t kLargeBody = 256 * 1024;

  // The route of a request, or null (then *path_known tells a 405 from a 404).
  const HttpRoute* FindRoute(const HttpRequest& req, bool* path_known) const {
    const HttpRoute* route = nullptr;
    *path_known = false;
    for (const auto& r : routes) {
      if (r.path != req.path) continue;
      *path_known = true;
      if (r.method == req.method) route = &r;
    }
    return route;
  }
  // True when a request of `route` is answered on the IO thread, without the hand-off.
  static bool RunsInline(const HttpRoute& route, const HttpRequest& req) {
    return !route.on_worker || (route.run_inline && route.run_inline(req));
  }
  // Runs a handler; an exception is answered 500 (last resort: handlers answer their own).
  void RunHandler(const HttpRoute& route, const HttpRequest& req, HttpResponse* res) const {
    try {
      route.handler(req, res);
    } catch (const std::exception& e) {
      if (opt.on_exception) opt.on_exception(e.what());
      *res = HttpResponse{};
      Error(500, "internal error", res);
    } catch (...) {
      if (opt.on_exception) opt.on_exception("unknown exception");
      *res = HttpResponse{};
      Error(500, "internal error", res);
    }
  }
  void Error(int code, const std::string& message, HttpResponse* res) const {
    res->status = code;
    if (opt.error) {
      opt.error(code, message, res);
    } else {
      res->content_type = "text/plain";
      res->body = message + "\n";
    }
  }
  // The answer to a request the worker queue has no room for.
  void Shed(HttpResponse* res) const {
    if (opt.on_shed) opt.on_shed();
    Error(503, "server overloaded: worker queue full", res);
    res->headers.emplace_back("Retry-After", "1");
    res->close = true;
  }

  void Accept();
  // Starts serving an accepted connection (closes it when max_connections are open).
  void Adopt(tcp::socket socket);
  // Takes the connections still queued in the kernel, then closes the acceptor (on its strand).
  void CloseAcceptor();
  // The loop the next accepted connection lives on.
  asio::io_context& NextLoop() {
    const std::size_t i = next_loop++ % (1 + more_iocs.size());
    return i == 0 ? ioc : *more_iocs[i - 1];
  }
};

namespace {

// TLS over a non-blocking socket, OpenSSL reading and writing the descriptor itself: no BIO pair
// and no staging buffers, so an idle connection keeps only its SSL object (record buffers are
// released when empty). Models Beast's AsyncReadStream/AsyncWriteStream; one operation of each
// direction at a time, all on the connection's loop (run by one thread).
class TlsStream {
 public:
  using executor_type = tcp::socket::executor_type;
  using next_layer_type = tcp::socket;

  TlsStream(tcp::socket socket, SSL_CTX* ctx) : socket_(std::move(socket)), ssl_(SSL_new(ctx)) {
    beast::error_code ignored;
    socket_.non_blocking(true, ignored);
    if (ssl_ != nullptr) {
      SSL_set_fd(ssl_, static_cast<int>(socket_.native_handle()));
      SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                             SSL_MODE_RELEASE_BUFFERS);
      // One read(2) per TLS record or more, not one for its header and one for the rest.
      SSL_set_read_ahead(ssl_, 1);
      SSL_set_accept_state(ssl_);
    }
  }
  ~TlsStream() {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;
  // Only between operations (an h2 connection takes the stream over after the handshake): the
  // descriptor OpenSSL uses moves with the socket.
  TlsStream(TlsStream&& o) noexcept : socket_(std::move(o.socket_)), ssl_(std::exchange(o.ssl_, nullptr)) {}

  // The protocol ALPN chose ("" when none).
  std::string_view Alpn() const {
    const unsigned char* p = nullptr;
    unsigned int n = 0;
    if (ssl_ != nullptr) SSL_get0_alpn_selected(ssl_, &p, &n);
    return p == nullptr ? std::string_view() : std::string_view(reinterpret_cast<const char*>(p), n);
  }

  executor_type get_executor() { return socket_.get_executor(); }
  tcp::socket& next_layer() { return socket_; }

  template <class Handler>
  void async_handshake(Handler&& handler) {
    Run(kHandshake, nullptr, 0,
        [h = std::forward<Handler>(handler)](beast::error_code ec, std::size_t) mutable { h(ec); });
  }

  template <class Buffers, class Token>
  auto async_read_some(const Buffers& buffers, Token&& token) {
    return asio::async_initiate<Token, void(beast::error_code, std::size_t)>(
        [this](auto handler, asio::mutable_buffer b) { Run(kRead, b.data(), b.size(), std::move(handler)); },
        token, First<asio::mutable_buffer>(buffers));
  }

  // Writes what it can of `data` now, without waiting: the bytes written (`*ec` set when the
  // stream ended). The caller goes on with an asynchronous write of the rest. Only between
  // operations of the same direction.
  std::size_t TryWrite(std::string_view data, beast::error_code* ec) {
    std::size_t done = 0;
    while (ssl_ != nullptr && done < data.size()) {
      std::size_t n = 0;
      if (Attempt(kWrite, const_cast<char*>(data.data() + done), data.size() - done, &n, ec) != SSL_ERROR_NONE) break;
      done += n;
    }
    return done;
  }

  template <class Buffers, class Token>
  auto async_write_some(const Buffers& buffers, Token&& token) {
    // Writes the first non-empty buffer; a composed write goes on with the rest. Responses are
    // written as one buffer (Serialize), so a small answer is one TLS record.
    return asio::async_initiate<Token, void(beast::error_code, std::size_t)>(
        [this](auto handler, asio::const_buffer b) {
          Run(kWrite, const_cast<void*>(b.data()), b.size(), std::move(handler));
        },
        token, First<asio::const_buffer>(buffers));
  }

 private:
  enum Kind { kHandshake, kRead, kWrite };

  template <class Buffer, class Buffers>
  static Buffer First(const Buffers& buffers) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers); ++it) {
      Buffer b(*it);
      if (b.size() > 0) return b;
    }
    return Buffer();
  }

  // Completes an operation. `inline_ok`: the caller is a completion handler of this loop (the
  // wait for readiness), not the initiating function, so the handler may run right here; from
  // the initiating function it is posted (asio's rule), which costs a scheduler round.
  template <class Handler>
  void Complete(Handler&& handler, beast::error_code ec, std::size_t n, bool inline_ok) {
    if (inline_ok) return handler(ec, n);
    asio::post(socket_.get_executor(),
               [h = std::forward<Handler>(handler), ec, n]() mutable { h(ec, n); });
  }

  template <class Handler>
  void Run(Kind kind, void* data, std::size_t len, Handler&& handler, bool inline_ok = false) {
    if (ssl_ == nullptr) return Complete(std::forward<Handler>(handler), asio::error::no_memory, 0, inline_ok);
    if (kind != kHandshake && len == 0) return Complete(std::forward<Handler>(handler), {}, 0, inline_ok);
    std::size_t n = 0;
    beast::error_code ec;
    const int err = Attempt(kind, data, len, &n, &ec);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      socket_.async_wait(err == SSL_ERROR_WANT_READ ? tcp::socket::wait_read : tcp::socket::wait_write,
                         [this, kind, data, len, h = std::forward<Handler>(handler)](
                             beast::error_code ec) mutable {
                           if (ec) return h(ec, 0);
                           Run(kind, data, len, std::move(h), /*inline_ok=*/true);
                         });
      return;
    }
    Complete(std::forward<Handler>(handler), ec, n, inline_ok);
  }

  // One non-blocking OpenSSL call. Returns SSL_ERROR_NONE (done: `*n` bytes), SSL_ERROR_WANT_READ
  // or SSL_ERROR_WANT_WRITE (wait, then call again with the same arguments), or another code with
  // `*ec` set (the end of the stream).
  int Attempt(Kind kind, void* data, std::size_t len, std::size_t* n, beast::error_code* ec) {
    ERR_clear_error();
    const int r = kind == kHandshake ? SSL_do_handshake(ssl_)
                  : kind == kRead    ? SSL_read_ex(ssl_, data, len, n)
                                     : SSL_write_ex(ssl_, data, len, n);
    if (r == 1) return SSL_ERROR_NONE;
    const int err = SSL_get_error(ssl_, r);
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return err;
    ERR_clear_error();
    // A clean close_notify or a peer that just went away are both the end of the stream.
    *ec = err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL ? beast::error_code(asio::error::eof)
                                                                   : beast::error_code(asio::error::connection_reset);
    return err;
  }

  tcp::socket socket_;
  SSL* ssl_;
};

// The bytes of `res` as an HTTP/1.1 response: status line, Content-Type, the extra headers,
// Content-Length, "Connection: close" when the connection ends after it, then the body.
std::string Serialize(const HttpResponse& res, bool close) {
  const beast::string_view reason = http::obsolete_reason(static_cast<http::status>(res.status));
  std::size_t size = 96 + reason.size() + res.content_type.size() + res.body.size();
  for (const auto& [k, v] : res.headers) size += k.size() + v.size() + 4;
  std::string out;
  out.reserve(size);
  out += "HTTP/1.1 ";
  out += std::to_string(res.status);
  out.push_back(' ');
  out.append(reason.data(), reason.size());
  out += "\r\n";
  if (!res.content_type.empty()) {
    out += "Content-Type: ";
    out += res.content_type;
    out += "\r\n";
  }
  for (const auto& [k, v] : res.headers) {
    out += k;
    out += ": ";
    out += v;
    out += "\r\n";
  }
  out += "Content-Length: ";
  out += std::to_string(res.body.size());
  out += "\r\n";
  if (close) out += "Connection: close\r\n";
  out += "\r\n";
  out += res.body;
  return out;
}

enum class Phase { kHandshake, kIdle, kHeader, kBudget, kBody, kWorker, kWrite, kLinger, kClosed };

// Serves a connection whose handshake chose h2 (defined with H2Session below).
void StartH2(Listener::Impl* l, TlsStream stream);

// The first read of a request: the largest TLS record plaintext.
constexpr std::size_t kFirstReadBytes = 16 * 1024;

template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Args>
  Session(Listener::Impl* l, Args&&... args)
      : l_(l), stream_(std::forward<Args>(args)...), timer_(stream_.get_executor()) {}

  ~Session() override {
    EndRequest();
    l_->churn.fetch_add(kConnectionBytes);
    l_->Unregister(id_);
  }

  void Begin(std::uint64_t id) {
    id_ = id;
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      WaitRequest();
    } else {
      phase_ = Phase::kHandshake;
      Arm(l_->opt.handshake_timeout);
      stream_.async_handshake([self = this->shared_from_this()](beast::error_code ec) {
                                self->Disarm();
                                self->l_->churn.fetch_add(kConnectionBytes);  // handshake scratch freed
                                if (ec) return self->Close();
                                const bool h2 = self->stream_.Alpn() == "h2";
                                if (self->l_->opt.on_connection) self->l_->opt.on_connection(h2 ? "h2" : "http/1.1");
                                if (h2) return self->HandOff();
                                self->WaitRequest();
                              });
    }
  }

  void Stop() override {
    // A connection that has been answered and waits idle closes. One that has not been answered
    // yet (its handshake or its first request may be on the way: the client may already have
    // sent it) gets the stop grace to deliver it, and is then answered with `Connection: close`.
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->phase_ == Phase::kIdle && self->served_ > 0) return self->Close();
      if (self->phase_ == Phase::kHandshake || self->phase_ == Phase::kIdle ||
          self->phase_ == Phase::kHeader || self->phase_ == Phase::kLinger) {
        self->ArmAt(std::min(self->deadline_, Clock::now() + kStopGrace));
      }
    });
  }

 private:
  tcp::socket& Socket() { return beast::get_lowest_layer(stream_); }

  // The connection speaks h2: an H2Session takes the stream over; this session ends.
  void HandOff() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      phase_ = Phase::kClosed;
      StopTimer();
      StartH2(l_, std::move(stream_));
    }
  }

  // One timer per connection, moved lazily: a phase sets its deadline, and the timer is moved
  // only when that deadline is earlier than the expiry it waits for; an expiry before the current
  // deadline waits again for the rest. A keep-alive request thus seldom touches the timer (each
  // move costs a cancelled wait, a handler run and the reactor's lock). A generation number
  // retires the expiries of replaced waits.
  // Once the listener stops, no phase waits longer than the stop grace.
  void Arm(std::chrono::milliseconds d) {
    ArmAt(Clock::now() + (l_->stopping.load() ? std::min(d, kStopGrace) : d));
  }
  void ArmAt(Clock::time_point t) {
    deadline_ = t;
    if (!waiting_ || t < armed_at_) Wait(t);
  }
  void Disarm() { deadline_ = Clock::time_point::max(); }
  void Wait(Clock::time_point t) {
    armed_at_ = t;
    waiting_ = true;
    timer_.expires_at(t);  // cancels the wait it replaces
    timer_.async_wait([self = this->shared_from_this(), gen = ++timer_gen_](beast::error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->waiting_ = false;
      if (self->deadline_ == Clock::time_point::max()) return;
      if (Clock::now() < self->deadline_) return self->Wait(self->deadline_);
      self->OnTimeout();
    });
  }
  // Stops the timer for good (a closed connection): its wait no longer holds the session.
  void StopTimer() {
    Disarm();
    waiting_ = false;
    ++timer_gen_;
    timer_.cancel();
  }

  void OnTimeout() {
    if (phase_ == Phase::kBudget) return WaitForBudget();
    if (phase_ == Phase::kBody) {
      // Answer 408: cancel the read, its handler sends the answer.
      timed_out_ = true;
      beast::error_code ignored;
      Socket().cancel(ignored);
      return;
    }
    Close();
  }

  void Close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    StopTimer();
    beast::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_both, ignored);
    Socket().close(ignored);
    EndRequest();
  }

  // Waits for the next request; an empty buffer is the idle keep-alive state.
  void WaitRequest() {
    if (phase_ == Phase::kClosed) return;
    if (buffer_.size() > 0) return ReadHeader();
    if (l_->stopping.load() && served_ > 0) return Close();
    buffer_.shrink_to_fit();
    phase_ = Phase::kIdle;
    Arm(l_->opt.idle_timeout);
    // Room for a whole TLS record (16 KiB of plaintext at most): a request of that size, body
    // included, is read by one SSL_read, with no growing and copying of the buffer.
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes),
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t n) {
                              if (ec || self->phase_ != Phase::kIdle) return self->Close();
                              self->buffer_.commit(n);
                              self->ReadHeader();
                            });
  }

  void ReadHeader() {
    phase_ = Phase::kHeader;
    Arm(l_->opt.header_timeout);
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(
        std::min<std::size_t>(l_->opt.max_header_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser_->body_limit(l_->opt.max_body);
    // The header usually arrived with the read that woke the session: parsed here, with no
    // completion to schedule; the rest is read as it arrives.
    parser_->eager(false);
    beast::error_code ec;
    if (ParseBuffered([this] { return parser_->is_header_done(); }, &ec)) return OnHeader(ec);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              self->OnHeader(ec);
                            });
  }

  // Feeds the bytes already read to the parser, as http::async_read_header / async_read would
  // before reading: true when `done()` holds or the parser failed (`*ec`), false when it needs
  // bytes that have not arrived yet (those reads then go on from the parser's state).
  template <class Done>
  bool ParseBuffered(Done done, beast::error_code* ec) {
    while (!done()) {
      if (buffer_.size() == 0) return false;
      const std::size_t used = parser_->put(buffer_.data(), *ec);
      buffer_.consume(used);
      if (*ec == http::error::need_more) {
        *ec = {};
        return false;
      }
      if (*ec) return true;
      if (used == 0) return false;  // left to the asynchronous read, which reads more first
    }
    return true;
  }

  void OnHeader(beast::error_code ec) {
    if (phase_ != Phase::kHeader) return;
    Disarm();
    if (ec) {
      static const auto& http_category = http::make_error_code(http::error::end_of_stream).category();
      // Transport errors, timeouts and a peer that went away: nothing to answer.
      if (ec.category() != http_category || ec == http::error::end_of_stream ||
          ec == http::error::partial_message) {
        return Close();
      }
      if (ec == http::error::body_limit) {  // announced Content-Length over the cap
        return Fail(413, "request body too large: the limit is " + std::to_string(l_->opt.max_body) +
                             " bytes");
      }
      if (ec == http::error::header_limit) {
        return Fail(431, "request header block larger than " +
                             std::to_string(l_->opt.max_header_bytes) + " bytes");
      }
      if (ec == http::error::bad_content_length || ec == http::error::bad_transfer_encoding) {
        return Fail(400, "conflicting message framing (Content-Length / Transfer-Encoding)");
      }
      return Fail(400, "malformed HTTP request: " + ec.message());
    }

    auto& msg = parser_->get();
    req_ = HttpRequest{};
    std::size_t count = 0, content_lengths = 0, transfer_encodings = 0;
    std::string te;
    for (const auto& f : msg) {
      ++count;
      std::string name = Lower(SV(f.name_string()));
      if (name == "content-length") ++content_lengths;
      if (name == "transfer-encoding") {
        ++transfer_encodings;
        te = Lower(SV(f.value()));
      }
      if (count <= l_->opt.max_headers) req_.headers.emplace_back(std::move(name), std::string(SV(f.value())));
    }
    if (count > l_->opt.max_headers) {
      return Fail(431, "more than " + std::to_string(l_->opt.max_headers) + " request header fields");
    }
    // RFC 9112 §6.3: a request with both framings, or with a transfer coding other than a final
    // chunked, cannot be framed reliably: refuse it and close (request smuggling defence).
    if (transfer_encodings > 0 && content_lengths > 0) {
      return Fail(400, "both Transfer-Encoding and Content-Length present");
    }
    if (transfer_encodings > 0 && !parser_->chunked()) {
      return Fail(transfer_encodings > 1 ? 400 : 501, "unsupported Transfer-Encoding \"" + te + "\"");
    }
    if (msg.version() != 11 && msg.version() != 10) return Fail(505, "HTTP version not supported");

    std::string_view target(msg.target().data(), msg.target().size());
    std::size_t qpos = target.find('?');
    req_.method = std::string(SV(msg.method_string()));
    req_.path = std::string(target.substr(0, qpos));
    if (qpos != std::string_view::npos) req_.query = std::string(target.substr(qpos + 1));
    req_.start = Clock::now();
    req_.deadline = l_->opt.deadline ? l_->opt.deadline(req_) : req_.start + std::chrono::seconds(10);
    keep_alive_ = msg.keep_alive();
    ++served_;

    bool path_known = false;
    route_ = l_->FindRoute(req_, &path_known);
    const bool has_body = parser_->chunked() || parser_->content_length().value_or(0) > 0;
    if (route_ == nullptr) {
      HttpResponse res;
      int code = path_known ? 405 : 404;
      Error(code, path_known ? "method not allowed" : "no such endpoint", &res);
      if (has_body) res.close = true;  // the unread body would be parsed as a request
      return Write(std::move(res));
    }
    if (route_->on_worker && l_->opt.inflight) {
      l_->opt.inflight(1);
      counted_ = true;
    }
    if (!has_body) return Dispatch();
    if (parser_->content_length() && *parser_->content_length() > l_->opt.max_body) {
      return Fail(413, "request body too large: the limit is " + std::to_string(l_->opt.max_body) +
                           " bytes");
    }
    std::size_t want = parser_->content_length() ? static_cast<std::size_t>(*parser_->content_length())
                                                 : l_->opt.max_body;
    want_ = want;
    budget_until_ = std::min(BodyDeadline(), Clock::now() + kBudgetWait);
    WaitForBudget();
  }

  // The body is read only once its bytes fit in the budget: wait briefly (the bytes of other
  // bodies are released as their reviews end), then answer 429.
  void WaitForBudget() {
    if (!l_->Reserve(want_)) {
      if (Clock::now() < budget_until_) {
        phase_ = Phase::kBudget;
        ArmAt(std::min(budget_until_, Clock::now() + std::chrono::milliseconds(10)));
        return;
      }
      if (l_->opt.on_budget_refused) l_->opt.on_budget_refused();
      HttpResponse res;
      Error(429, "too many request bytes in flight; retry shortly", &res);
      res.headers.emplace_back("Retry-After", "1");
      res.close = true;
      return Write(std::move(res));
    }
    reserved_ = want_;
    if (Lower(req_.Header("expect")) == "100-continue") {
      auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      phase_ = Phase::kBody;
      ArmAt(BodyDeadline());
      asio::async_write(stream_, asio::buffer(*cont),
                        [self = this->shared_from_this(), cont](beast::error_code ec, std::size_t) {
                          if (ec || self->phase_ != Phase::kBody) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    phase_ = Phase::kBody;
    ArmAt(BodyDeadline());
    ReadBody();
  }

  Clock::time_point BodyDeadline() const {
    return std::min(req_.deadline, req_.start + l_->opt.body_timeout);
  }

  void ReadBody() {
    // Room past the body (a parser may read there) in the one allocation the body gets.
    if (parser_->content_length()) parser_->get().body().reserve(want_ + l_->opt.body_padding);
    // A body read with its header (one TLS record holds up to 16 KiB) is parsed here.
    parser_->eager(true);
    beast::error_code ec;
    if (ParseBuffered([this] { return parser_->is_done(); }, &ec)) return OnBody(ec);
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                       self->OnBody(ec);
                     });
  }

  void OnBody(beast::error_code ec) {
    if (phase_ != Phase::kBody) return;
    Disarm();
    if (timed_out_) return Fail(408, "request body not received before the deadline");
    if (ec == http::error::body_limit) {
      return Fail(413, "request body too large: the limit is " + std::to_string(l_->opt.max_body) +
                           " bytes");
    }
    if (ec) return Fail(400, "request body could not be read (truncated or malformed)");
    req_.body = std::move(parser_->get().body());
    parser_.reset();
    Dispatch();
  }

  void Dispatch() {
    if (parser_) {
      req_.body = std::move(parser_->get().body());
      parser_.reset();
    }
    if (Listener::Impl::RunsInline(*route_, req_)) {
      HttpResponse res;
      Run(&res);
      return Write(std::move(res));
    }
    phase_ = Phase::kWorker;
    auto self = this->shared_from_this();
    bool queued = l_->pool->TryPost([self] {
      auto res = std::make_shared<HttpResponse>();
      self->Run(res.get());
      // The body is no longer needed: release it before the response is written.
      std::string().swap(self->req_.body);
      asio::post(self->stream_.get_executor(), [self, res] {
        self->ReleaseBudget();
        self->Write(std::move(*res));
      });
    });
    if (!queued) {
      HttpResponse res;
      l_->Shed(&res);
      Write(std::move(res));
    }
  }

  void Run(HttpResponse* res) { l_->RunHandler(*route_, req_, res); }

  void Error(int code, const std::string& message, HttpResponse* res) { l_->Error(code, message, res); }

  // An error after which the connection cannot be trusted to stay in sync: answer and close.
  void Fail(int code, const std::string& message) {
    HttpResponse res;
    Error(code, message, &res);
    res.close = true;
    Write(std::move(res));
  }

  void Write(HttpResponse res) {
    if (phase_ == Phase::kClosed) return;
    ReleaseBudget();
    parser_.reset();
    const bool close = res.close || !keep_alive_ || l_->draining.load() || l_->stopping.load() ||
                       served_ >= l_->opt.keep_alive_max_requests;
    // The whole response in one buffer: one TLS record for a small answer, no serializer.
    auto wire = std::make_shared<std::string>(Serialize(res, close));
    phase_ = Phase::kWrite;
    Arm(l_->opt.write_timeout);
    // Posted, not started here: the handlers already queued on this loop (other connections'
    // requests read in the same round) run first, so a round's responses leave together after
    // its reviews instead of one between each (fewer wake-ups of the clients; docs/performance.md).
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), wire, close] {
      if (self->phase_ != Phase::kWrite) return;
      std::size_t done = 0;
      if constexpr (std::is_same_v<Stream, TlsStream>) {
        // Most answers fit the socket's buffer: written here, with no completion to schedule.
        beast::error_code ec;
        done = self->stream_.TryWrite(*wire, &ec);
        if (ec || done == wire->size()) return self->OnWritten(ec, close, /*defer_read=*/true);
      }
      asio::async_write(self->stream_, asio::buffer(*wire) + done,
                        [self, wire, close](beast::error_code ec, std::size_t) {
                          if (self->phase_ != Phase::kWrite) return;
                          self->OnWritten(ec, close, /*defer_read=*/false);
                        });
    });
  }

  // The response is written (or the write failed): the next request, or the end. `defer_read`:
  // the write ended just now, so the client cannot have sent its next request yet; reading after
  // the loop's other ready handlers finds it there more often than reading now (a read that
  // finds nothing costs a read(2) and a re-arm of the descriptor).
  void OnWritten(beast::error_code ec, bool close, bool defer_read) {
    Disarm();
    EndRequest();
    if (ec) return Close();
    if (close) return Linger();
    if (!defer_read) return WaitRequest();
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->phase_ == Phase::kWrite) self->WaitRequest();
    });
  }

  // Closing with unread bytes in the socket would send a reset that can destroy the response
  // at the client (one still uploading the body an early 413 or 429 refused has not read it
  // yet): send FIN, discard what still arrives, bounded in time and bytes, then close.
  void Linger() {
    phase_ = Phase::kLinger;
    beast::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_send, ignored);
    Arm(kLingerTime);
    LingerRead();
  }
  void LingerRead() {
    auto buf = std::make_shared<std::array<char, 4096>>();
    Socket().async_read_some(asio::buffer(*buf),
                             [self = this->shared_from_this(), buf](beast::error_code ec, std::size_t n) {
                               if (self->phase_ != Phase::kLinger) return;
                               self->lingered_ += n;
                               if (ec || self->lingered_ > kLingerBytes) return self->Close();
                               self->LingerRead();
                             });
  }

  void ReleaseBudget() {
    l_->Release(reserved_);
    reserved_ = 0;
  }
  void EndRequest() {
    ReleaseBudget();
    if (counted_) {
      counted_ = false;
      if (l_->opt.inflight) l_->opt.inflight(-1);
    }
  }

  static constexpr std::size_t kConnectionBytes = 32 * 1024;  // heap a connection's life churns
  static constexpr std::chrono::milliseconds kBudgetWait{1000};  // then 429
  // What a closing connection still reads and discards after its last answer (nginx's
  // lingering_close): enough for the rest of a refused body, too little to hold a connection.
  static constexpr std::chrono::milliseconds kLingerTime{5000};
  static constexpr std::size_t kLingerBytes = 64 * 1024 * 1024;
  // After the listener stops: time left to a connection that has not been answered yet.
  static constexpr std::chrono::milliseconds kStopGrace{2000};
  Listener::Impl* l_;
  Stream stream_;
  asio::steady_timer timer_;
  std::uint64_t timer_gen_ = 0;
  Clock::time_point deadline_ = Clock::time_point::max();  // of the current phase; max: none
  Clock::time_point armed_at_{};                           // the expiry the timer waits for
  bool waiting_ = false;                                   // a wait is pending
  std::uint64_t id_ = 0;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<AppendStringBody>> parser_;
  HttpRequest req_;
  const HttpRoute* route_ = nullptr;
  Phase phase_ = Phase::kIdle;
  bool keep_alive_ = true;
  bool timed_out_ = false;
  bool counted_ = false;
  std::size_t reserved_ = 0;
  std::size_t want_ = 0;
  Clock::time_point budget_until_;
  std::size_t served_ = 0;
  std::size_t lingered_ = 0;
};

// An HTTP/2 connection: the TLS stream after a handshake that chose h2, H2Connection for the
// protocol. Reads and writes run at the same time (one of each at most); each request goes to the
// route's handler inline or on a worker as on HTTP/1.1, with the same deadline, budget, metrics
// and error answers; its answer is submitted on the connection's loop.
class H2Session final : public SessionBase, public std::enable_shared_from_this<H2Session> {
 public:
  H2Session(Listener::Impl* l, TlsStream stream)
      : l_(l),
        stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        conn_(Limits(l->opt), Callbacks(), Clock::now()),
        rbuf_(kFirstReadBytes) {}

  ~H2Session() override {
    l_->churn.fetch_add(kConnectionBytes);
    l_->Unregister(id_);
  }

  void Begin(std::uint64_t id) {
    id_ = id;
    if (l_->draining.load()) conn_.ShutdownNotice();
    Flush();
    Read();
    Rearm();
  }

  void Stop() override {
    // GOAWAY with the last stream taken: the requests in progress are answered (each bounded by
    // its deadlines), then the connection ends; an idle one ends at once.
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      self->conn_.Shutdown();
      self->Flush();
      self->Rearm();
    });
  }

  void Drain() override {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      self->conn_.ShutdownNotice();
      self->Flush();
    });
  }

 private:
  static H2Limits Limits(const ListenerOptions& o) {
    H2Limits lim;
    lim.max_concurrent_streams = std::max<std::size_t>(1, o.http2_max_streams);
    lim.max_header_bytes = o.max_header_bytes;
    lim.max_headers = o.max_headers;
    lim.max_body = o.max_body;
    lim.body_padding = o.body_padding;
    lim.max_requests = std::max<std::size_t>(1, o.keep_alive_max_requests);
    lim.header_timeout = o.header_timeout;
    lim.body_timeout = o.body_timeout;
    lim.write_timeout = o.write_timeout;
    lim.idle_timeout = o.idle_timeout;
    return lim;
  }

  H2Callbacks Callbacks() {
    H2Callbacks cb;
    cb.on_request = [this](std::int32_t id, HttpRequest req) { OnRequest(id, std::move(req)); };
    cb.deadline = [l = l_](const HttpRequest& req) {
      return l->opt.deadline ? l->opt.deadline(req) : req.start + std::chrono::seconds(10);
    };
    cb.error = [l = l_](int code, const std::string& message, HttpResponse* res) { l->Error(code, message, res); };
    cb.reserve = [l = l_](std::size_t n) { return l->Reserve(n); };
    cb.release = [l = l_](std::size_t n) { l->Release(n); };
    cb.on_abuse = [l = l_](std::string_view reason) {
      if (l->opt.on_http2_abuse) l->opt.on_http2_abuse(reason);
    };
    return cb;
  }

  void OnRequest(std::int32_t id, HttpRequest req) {
    bool path_known = false;
    const HttpRoute* route = l_->FindRoute(req, &path_known);
    if (route == nullptr) {
      HttpResponse res;
      l_->Error(path_known ? 405 : 404, path_known ? "method not allowed" : "no such endpoint", &res);
      return conn_.Respond(id, std::move(res), Clock::now());
    }
    const bool counted = route->on_worker && l_->opt.inflight;
    if (counted) l_->opt.inflight(1);
    if (Listener::Impl::RunsInline(*route, req)) {
      HttpResponse res;
      l_->RunHandler(*route, req, &res);
      return Answer(id, std::move(res), counted);
    }
    auto self = shared_from_this();
    auto shared = std::make_shared<HttpRequest>(std::move(req));
    const bool queued = l_->pool->TryPost([self, id, route, shared, counted] {
      auto res = std::make_shared<HttpResponse>();
      self->l_->RunHandler(*route, *shared, res.get());
      std::string().swap(shared->body);  // released before the answer is written
      asio::post(self->stream_.get_executor(), [self, id, res, counted] {
        self->Answer(id, std::move(*res), counted);
        self->Flush();
        self->Rearm();
      });
    });
    if (!queued) {
      HttpResponse res;
      l_->Shed(&res);
      Answer(id, std::move(res), counted);
    }
  }

  void Answer(std::int32_t id, HttpResponse res, bool counted) {
    if (counted) l_->opt.inflight(-1);
    conn_.Respond(id, std::move(res), Clock::now());
  }

  void Read() {
    if (reading_ || closed_) return;
    reading_ = true;
    stream_.async_read_some(asio::buffer(rbuf_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->reading_ = false;
      if (self->closed_) return;
      if (ec) return self->Close();
      const bool ok = self->conn_.Receive(self->rbuf_.data(), n, Clock::now());
      self->Flush();
      if (ok) self->Read();
      self->Rearm();
    });
  }

  // Sends what the connection has to send; one write at a time, the next batch gathered meanwhile.
  void Flush() {
    if (closed_) return;
    conn_.TakeOutput(&out_);
    if (writing_) return;
    if (out_.empty()) {
      if (!conn_.Alive()) Finish();  // GOAWAY sent and nothing left in progress
      return;
    }
    writing_ = true;
    write_deadline_ = Clock::now() + l_->opt.write_timeout;
    std::swap(out_, wbuf_);
    asio::async_write(stream_, asio::buffer(wbuf_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      self->writing_ = false;
      self->write_deadline_ = Clock::time_point::max();
      self->wbuf_.clear();
      if (self->wbuf_.capacity() > kKeepBuffer) std::string().swap(self->wbuf_);
      if (self->closed_) return;
      if (ec) return self->Close();
      self->Flush();
      self->Rearm();
    });
  }

  // One timer: the connection's earliest deadline, and the write in progress (a client that does
  // not read). Moved only when the deadline comes earlier than the expiry it waits for.
  void Rearm() {
    if (closed_) return;
    const Clock::time_point t = std::min(conn_.NextDeadline(), write_deadline_);
    if (t == Clock::time_point::max()) return;
    if (waiting_ && armed_at_ <= t) return;
    armed_at_ = t;
    waiting_ = true;
    timer_.expires_at(t);
    timer_.async_wait([self = shared_from_this(), gen = ++timer_gen_](beast::error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->waiting_ = false;
      if (self->closed_) return;
      const auto now = Clock::now();
      if (self->writing_ && self->write_deadline_ <= now) return self->Close();
      self->conn_.Expire(now);
      self->Flush();
      self->Rearm();
    });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    ++timer_gen_;
    timer_.cancel();
    beast::error_code ignored;
    stream_.next_layer().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.next_layer().close(ignored);
  }

  // The last frame (a GOAWAY) is written: FIN, then what the client still sends is discarded,
  // bounded in time and bytes, so that closing with unread bytes does not reset the connection
  // and destroy the GOAWAY at the client (as HTTP/1.1's lingering close).
  void Finish() {
    if (closed_) return;
    closed_ = true;
    ++timer_gen_;
    beast::error_code ignored;
    tcp::socket& socket = stream_.next_layer();
    socket.cancel(ignored);  // a pending TLS read ends (its handler sees closed_)
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    timer_.expires_after(kLingerTime);
    timer_.async_wait([self = shared_from_this()](beast::error_code) { self->CloseSocket(); });
    LingerRead();
  }
  void LingerRead() {
    auto buf = std::make_shared<std::array<char, 4096>>();
    stream_.next_layer().async_read_some(asio::buffer(*buf), [self = shared_from_this(), buf](beast::error_code ec,
                                                                                               std::size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ > kLingerBytes) return self->CloseSocket();
      self->LingerRead();
    });
  }
  void CloseSocket() {
    beast::error_code ignored;
    timer_.cancel();
    stream_.next_layer().close(ignored);
  }

  static constexpr std::chrono::milliseconds kLingerTime{2000};
  static constexpr std::size_t kLingerBytes = 64 * 1024 * 1024;
  static constexpr std::size_t kConnectionBytes = 32 * 1024;
  static constexpr std::size_t kKeepBuffer = 64 * 1024;
  Listener::Impl* l_;
  TlsStream stream_;
  asio::steady_timer timer_;
  H2Connection conn_;
  std::vector<char> rbuf_;
  std::string out_, wbuf_;
  std::uint64_t id_ = 0;
  std::uint64_t timer_gen_ = 0;
  std::size_t lingered_ = 0;
  Clock::time_point armed_at_{};
  Clock::time_point write_deadline_ = Clock::time_point::max();
  bool waiting_ = false, reading_ = false, writing_ = false, closed_ = false;
};

void StartH2(Listener::Impl* l, TlsStream stream) {
  auto s = std::make_shared<H2Session>(l, std::move(stream));
  s->Begin(l->Register(s));
}

// ALPN: h2 when the client offers it, else http/1.1; a client that offers neither goes on without
// ALPN (and speaks HTTP/1.1).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
               void*) {
  static const unsigned char kProtocols[] = "\x02h2\x08http/1.1";
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kProtocols, sizeof kProtocols - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

void Listener::Impl::Accept() {
  // A connection's handlers all run on its loop's one thread: no strand is needed to keep them
  // apart, and none is paid for on every completion.
  acceptor.async_accept(NextLoop().get_executor(), [this](beast::error_code ec, tcp::socket socket) {
    if (!ec) Adopt(std::move(socket));
    if (stopping.load() || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors or similar: retry shortly instead of spinning.
      accept_retry->expires_after(std::chrono::milliseconds(50));
      accept_retry->async_wait([this](beast::error_code) {
        if (!stopping.load()) Accept();
      });
      return;
    }
    Accept();
  });
}

void Listener::Impl::Adopt(tcp::socket socket) {
  std::size_t open;
  {
    std::lock_guard<std::mutex> lock(mu);
    open = sessions.size();
  }
  beast::error_code ignored;
  if (open >= opt.max_connections) {
    socket.close(ignored);
    return;
  }
  socket.set_option(tcp::no_delay(true), ignored);
  if (ssl) {
    auto s = std::make_shared<Session<TlsStream>>(this, std::move(socket), ssl);
    s->Begin(Register(s));
  } else {
    auto s = std::make_shared<Session<tcp::socket>>(this, std::move(socket));
    s->Begin(Register(s));
  }
}

void Listener::Impl::CloseAcceptor() {
  // The connections the kernel has completed but not handed over yet would be reset by the
  // close: take them first; their clients may have sent a request already.
  beast::error_code ec;
  acceptor.non_blocking(true, ec);
  while (!ec) {
    tcp::socket socket(NextLoop().get_executor());
    acceptor.accept(socket, ec);
    if (!ec) Adopt(std::move(socket));
  }
  acceptor.close(ec);
}

Listener::Listener(ListenerOptions options, std::vector<HttpRoute> routes)
    : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(options);
  impl_->routes = std::move(routes);
}

Listener::~Listener() { Stop(); }

Status Listener::Start() {
  Impl& m = *impl_;
  // OpenSSL writes to the socket with write(2): a peer that went away must be an error, not a
  // SIGPIPE that ends the process (cpp-httplib's server did the same).
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    ::signal(SIGPIPE, SIG_IGN);
  }
  if (m.opt.configure_tls) {
    m.ssl = SSL_CTX_new(TLS_server_method());
    std::string error;
    if (m.ssl == nullptr) return Status::Internal("TLS setup failed: SSL_CTX_new");
    if (!m.opt.configure_tls(m.ssl, &error)) {
      return Status::InvalidArgument("TLS setup failed: " + error);
    }
    // Idle connections keep no TLS record buffers.
    SSL_CTX_set_mode(m.ssl, SSL_MODE_RELEASE_BUFFERS);
    if (m.opt.http2) SSL_CTX_set_alpn_select_cb(m.ssl, SelectAlpn, nullptr);
  }
  beast::error_code ec;
  auto addr = asio::ip::make_address(m.opt.host == "localhost" ? "127.0.0.1" : m.opt.host, ec);
  if (ec) return Status::InvalidArgument("cannot listen on \"" + m.opt.host + "\": not an IP address");
  tcp::endpoint ep(addr, static_cast<unsigned short>(m.opt.port));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + m.opt.host + ":" + std::to_string(m.opt.port) +
                               ": " + ec.message());
  }
  m.bound_port = m.acceptor.local_endpoint().port();
  m.accept_retry.emplace(m.acceptor.get_executor());
  m.trim_timer.emplace(asio::make_strand(m.ioc));
  asio::post(m.trim_timer->get_executor(), [&m] { m.Trim(); });
  m.pool = std::make_unique<WorkerPool>(m.opt.workers, m.opt.max_queued);
  const std::size_t loops = std::max<std::size_t>(1, m.opt.io_threads);
  for (std::size_t i = 1; i < loops; ++i) m.more_iocs.push_back(std::make_unique<asio::io_context>(1));
  m.work.push_back(asio::make_work_guard(m.ioc));
  for (auto& c : m.more_iocs) m.work.push_back(asio::make_work_guard(*c));
  // The socket listens already: connections queue in the kernel until the loop takes them.
  asio::post(m.acceptor.get_executor(), [&m] { m.Accept(); });
  for (std::size_t i = 0; i < loops; ++i) {
    asio::io_context& loop = i == 0 ? m.ioc : *m.more_iocs[i - 1];
    m.io_threads.emplace_back([&loop] {
      for (;;) {
        try {
          loop.run();
          return;
        } catch (...) {
          // A handler must not end the loop; keep serving.
        }
      }
    });
  }
  m.started = true;
  return Status::Ok();
}

int Listener::port() const { return impl_->bound_port; }

std::size_t Listener::connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->sessions.size();
}

void Listener::BeginDrain() {
  Impl& m = *impl_;
  if (!m.started) return;
  m.draining.store(true);
  m.ForEachSession([](SessionBase& s) { s.Drain(); });
}

void Listener::Stop() {
  Impl& m = *impl_;
  if (!m.started || m.stopped) return;
  m.stopped = true;
  m.draining.store(true);
  m.stopping.store(true);
  {
    std::mutex done_mu;
    std::condition_variable done_cv;
    bool done = false;
    asio::post(m.acceptor.get_executor(), [&] {
      m.CloseAcceptor();
      if (m.accept_retry) m.accept_retry->cancel();
      asio::post(m.trim_timer->get_executor(), [&m] { m.trim_timer->cancel(); });
      std::lock_guard<std::mutex> lock(done_mu);
      done = true;
      done_cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(done_mu);
    done_cv.wait(lock, [&] { return done; });
  }
  m.ForEachSession([](SessionBase& s) { s.Stop(); });
  {
    // Requests in progress finish (each bounded by its deadline and the write timeout).
    std::unique_lock<std::mutex> lock(m.mu);
    m.sessions_cv.wait(lock, [&m] { return m.sessions.empty(); });
  }
  m.work.clear();
  m.ioc.stop();
  for (auto& c : m.more_iocs) c->stop();
  for (auto& t : m.io_threads) t.join();
  m.pool->Stop();
}

}  // namespace draguard::server
