#include "h2_connection.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nghttp2/nghttp2.h>

namespace draguard::server {

using Clock = std::chrono::steady_clock;

namespace {

// A token bucket: `burst` tokens at most, `rate` more per second.
class TokenBucket {
 public:
  TokenBucket(std::size_t burst, std::size_t rate, Clock::time_point now)
      : burst_(static_cast<double>(burst)), rate_(static_cast<double>(rate)), tokens_(burst_), at_(now) {}
  // Takes one token; false when none is left.
  bool Take(Clock::time_point now) {
    if (now > at_) {
      tokens_ = std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - at_).count());
      at_ = now;
    }
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }

 private:
  double burst_, rate_, tokens_;
  Clock::time_point at_;
};

constexpr Clock::time_point kNever = Clock::time_point::max();
// A body waiting for the budget is tried again this often (as on HTTP/1.1).
constexpr std::chrono::milliseconds kBudgetRetry{10};

nghttp2_nv Nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

struct H2Connection::Impl {
  enum class State {
    kHeaders,     // header block not complete
    kBody,        // reading the body (budget reserved, or no body)
    kBudget,      // body held (no window granted) until its bytes fit in the budget
    kDispatched,  // given to on_request, not answered yet
    kAnswered,    // response submitted
  };
  struct Stream {
    std::int32_t id = 0;
    State state = State::kHeaders;
    HttpRequest req;
    std::size_t header_bytes = 0, header_count = 0;
    bool too_large = false;                 // header caps passed: 431 when the block ends
    std::optional<std::uint64_t> content_length;
    bool complete = false;                  // END_STREAM received
    std::size_t want = 0;                   // bytes to reserve in the budget
    std::size_t reserved = 0;               // bytes reserved
    std::size_t unconsumed = 0;             // received, no window granted back yet
    Clock::time_point header_deadline = kNever, body_deadline = kNever, budget_until = kNever,
                      write_deadline = kNever;
    std::string response_body;
    std::size_t sent = 0;
  };

  H2Limits lim;
  H2Callbacks cb;
  nghttp2_session* session = nullptr;
  Clock::time_point now;
  std::unordered_map<std::int32_t, std::unique_ptr<Stream>> streams;
  // Requests given to on_request whose stream closed before the answer: they still count against
  // the stream limit (a reset does not end the work it started).
  std::unordered_set<std::int32_t> ghosts;
  TokenBucket churn;
  std::size_t requests = 0;
  Clock::time_point idle_since;
  bool dead = false;       // a fatal error or a GOAWAY that ends the connection at once
  bool shutdown = false;   // the final GOAWAY was submitted

  Impl(H2Limits l, H2Callbacks c, Clock::time_point t)
      : lim(l), cb(std::move(c)), now(t), churn(l.churn_burst, l.churn_rate, t), idle_since(t) {}
  ~Impl() {
    for (auto& [id, s] : streams) Release(*s);
    if (session != nullptr) nghttp2_session_del(session);
  }

  Stream* Find(std::int32_t id) {
    auto it = streams.find(id);
    return it == streams.end() ? nullptr : it->second.get();
  }

  void Release(Stream& s) {
    if (s.reserved != 0) cb.release(s.reserved);
    s.reserved = 0;
  }

  // Gives the flow-control window of held bytes back to the peer.
  void Consume(std::int32_t id, std::size_t n) {
    if (n != 0) nghttp2_session_consume(session, id, n);
  }

  void Abuse(std::string_view reason, uint32_t code) {
    if (dead) return;
    dead = true;
    cb.on_abuse(reason);
    nghttp2_session_terminate_session(session, code);
  }

  // A stream that ended without an answer, a refused stream or an empty DATA frame.
  void Churn() {
    if (!churn.Take(now)) Abuse("stream_churn", NGHTTP2_ENHANCE_YOUR_CALM);
  }

  void Submit(Stream& s, HttpResponse res) {
    s.state = State::kAnswered;
    s.write_deadline = now + lim.write_timeout;
    s.response_body = std::move(res.body);
    std::string status = std::to_string(res.status);
    std::string length = std::to_string(s.response_body.size());
    // Lower-case names (HTTP/2), without the connection-specific fields (RFC 9113 §8.2.2).
    std::vector<std::pair<std::string, std::string_view>> fields;
    fields.reserve(res.headers.size());
    for (const auto& [k, v] : res.headers) {
      std::string n(k);
      std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (n == "connection" || n == "keep-alive" || n == "transfer-encoding" || n == "content-length") continue;
      fields.emplace_back(std::move(n), v);
    }
    std::vector<nghttp2_nv> nva;
    nva.reserve(3 + fields.size());
    nva.push_back(Nv(":status", status));
    if (!res.content_type.empty()) nva.push_back(Nv("content-type", res.content_type));
    for (const auto& [n, v] : fields) nva.push_back(Nv(n, v));
    nva.push_back(Nv("content-length", length));
    nghttp2_data_provider data{};
    data.source.ptr = &s;
    data.read_callback = ReadBody;
    if (nghttp2_submit_response(session, s.id, nva.data(), nva.size(), s.response_body.empty() ? nullptr : &data) != 0) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_INTERNAL_ERROR);
    }
  }

  // An answer before the request is complete (or instead of it): the stream ends there; what the
  // client still sends for it is discarded, and it is asked to stop sending (RST_STREAM NO_ERROR
  // after the answer).
  void Refuse(Stream& s, int code, const std::string& message, bool retry_after = false) {
    HttpResponse res;
    cb.error(code, message, &res);
    if (retry_after) res.headers.emplace_back("retry-after", "1");
    Release(s);
    Consume(s.id, s.unconsumed);
    s.unconsumed = 0;
    std::string().swap(s.req.body);
    Submit(s, std::move(res));
  }

  void Dispatch(Stream& s) {
    s.state = State::kDispatched;
    s.body_deadline = kNever;
    cb.on_request(s.id, std::move(s.req));
  }

  // The body may be read once its bytes fit in the budget.
  void TryReserve(Stream& s) {
    if (!cb.reserve(s.want)) {
      if (s.state != State::kBudget) {
        s.state = State::kBudget;
        s.budget_until = std::min(s.body_deadline, now + lim.budget_wait);
      }
      return;
    }
    s.reserved = s.want;
    s.state = State::kBody;
    s.budget_until = kNever;
    if (s.content_length) s.req.body.reserve(s.req.body.size() + *s.content_length + lim.body_padding);
    Consume(s.id, s.unconsumed);
    s.unconsumed = 0;
    if (s.complete) Dispatch(s);
  }

  void OnHeaderBlock(Stream& s, bool end_stream) {
    s.header_deadline = kNever;
    if (s.too_large) {
      return Refuse(s, 431, "request header fields larger than " + std::to_string(lim.max_header_bytes) +
                                " bytes or more than " + std::to_string(lim.max_headers) + " fields");
    }
    s.req.start = now;
    s.req.deadline = cb.deadline(s.req);
    s.body_deadline = std::min(s.req.deadline, s.req.start + lim.body_timeout);
    if (end_stream) {
      s.complete = true;
      return Dispatch(s);
    }
    if (s.content_length && *s.content_length > lim.max_body) {
      return Refuse(s, 413, "request body too large: the limit is " + std::to_string(lim.max_body) + " bytes");
    }
    s.want = s.content_length ? static_cast<std::size_t>(*s.content_length) : lim.max_body;
    s.state = State::kBody;
    if (s.want == 0) return;
    TryReserve(s);
  }

  void OnEndStream(Stream& s) {
    s.complete = true;
    if (s.state == State::kBody) {
      // A body of unannounced length reserved the whole cap: keep only what it took.
      if (!s.content_length && s.reserved > s.req.body.size()) {
        cb.release(s.reserved - s.req.body.size());
        s.reserved = s.req.body.size();
      }
      Dispatch(s);
    } else if (s.state == State::kBudget) {
      // Still waiting: a body of unannounced length now needs only what it took.
      if (!s.content_length) s.want = s.req.body.size();
      TryReserve(s);  // dispatches when it fits; else Expire tries again
    }
    // kAnswered: refused already.
  }

  // --- nghttp2 callbacks ----------------------------------------------------------------------

  static Impl* Self(void* user) { return static_cast<Impl*>(user); }

  static int OnBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    Impl* m = Self(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    const std::int32_t id = frame->hd.stream_id;
    // Requests in progress count whether or not their stream is still open.
    if (m->streams.size() + m->ghosts.size() >= m->lim.max_concurrent_streams) {
      nghttp2_submit_rst_stream(m->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
      m->Churn();
      return 0;
    }
    if (m->requests >= m->lim.max_requests) {
      // Beyond the last stream of our GOAWAY (sent or about to be): safe for the client to retry.
      nghttp2_submit_rst_stream(m->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
      return 0;
    }
    if (++m->requests == m->lim.max_requests) {
      // The last stream this connection takes; the client opens another connection for more.
      nghttp2_submit_goaway(m->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR, nullptr, 0);
    }
    auto s = std::make_unique<Stream>();
    s->id = id;
    s->header_deadline = m->now + m->lim.header_timeout;
    m->streams.emplace(id, std::move(s));
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    Impl* m = Self(user);
    Stream* s = m->Find(frame->hd.stream_id);
    if (s == nullptr || s->state == State::kAnswered) return 0;
    s->header_bytes += namelen + valuelen + 32;  // RFC 9113 §6.5.2
    ++s->header_count;
    if (s->header_bytes > m->lim.max_header_bytes || s->header_count > m->lim.max_headers) s->too_large = true;
    if (s->too_large || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers: counted only
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
    if (!n.empty() && n[0] == ':') {
      if (n == ":method") {
        s->req.method = std::string(v);
      } else if (n == ":path") {
        const std::size_t q = v.find('?');
        s->req.path = std::string(v.substr(0, q));
        if (q != std::string_view::npos) s->req.query = std::string(v.substr(q + 1));
      }
      return 0;
    }
    if (n == "content-length") {  // validated by nghttp2 (digits, matches the DATA)
      std::uint64_t len = 0;
      std::from_chars(v.data(), v.data() + v.size(), len);
      s->content_length = len;
    }
    s->req.headers.emplace_back(std::string(n), std::string(v));
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    Impl* m = Self(user);
    const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS: {
        Stream* s = m->Find(frame->hd.stream_id);
        if (s == nullptr) return 0;
        if (s->state == State::kHeaders) {
          m->OnHeaderBlock(*s, end_stream);
        } else if (end_stream && s->state != State::kAnswered) {
          m->OnEndStream(*s);  // trailers
        }
        return 0;
      }
      case NGHTTP2_DATA: {
        if (frame->hd.length == 0 && !end_stream) m->Churn();  // empty DATA frames cost without carrying anything
        Stream* s = m->Find(frame->hd.stream_id);
        if (s != nullptr && end_stream && s->state != State::kAnswered && s->state != State::kHeaders) m->OnEndStream(*s);
        return 0;
      }
      default:
        return 0;
    }
  }

  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    Impl* m = Self(user);
    Stream* s = m->Find(id);
    if (s == nullptr || (s->state != State::kBody && s->state != State::kBudget)) {
      m->Consume(id, len);  // discarded: the window goes back at once
      return 0;
    }
    if (s->req.body.size() + len > m->lim.max_body) {
      m->Consume(id, len);
      m->Refuse(*s, 413, "request body too large: the limit is " + std::to_string(m->lim.max_body) + " bytes");
      return 0;
    }
    s->req.body.append(reinterpret_cast<const char*>(data), len);
    if (s->state == State::kBody) {
      m->Consume(id, len);
    } else {
      s->unconsumed += len;  // no window until the budget has room (the peer stops sending)
    }
    return 0;
  }

  static int OnFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    Impl* m = Self(user);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
      // An answer sent before the request ended: ask the client to stop sending (RFC 9113 §8.1).
      Stream* s = m->Find(frame->hd.stream_id);
      if (s != nullptr && !s->complete) {
        nghttp2_submit_rst_stream(m->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_NO_ERROR);
      }
    }
    if (frame->hd.type == NGHTTP2_GOAWAY && !m->dead &&
        (frame->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM || frame->goaway.error_code == NGHTTP2_INTERNAL_ERROR)) {
      // nghttp2's own limits: its RST_STREAM rate (CVE-2023-44487) ends the session with
      // INTERNAL_ERROR, a flood of frames to acknowledge with ENHANCE_YOUR_CALM. Our own GOAWAYs
      // set `dead` first.
      m->dead = true;
      m->cb.on_abuse("reset_rate");
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
    Impl* m = Self(user);
    auto it = m->streams.find(id);
    if (it == m->streams.end()) return 0;
    Stream& s = *it->second;
    const bool answered = s.state == State::kAnswered && s.sent == s.response_body.size();
    if (s.state == State::kDispatched) m->ghosts.insert(id);
    m->Release(s);
    m->streams.erase(it);
    if (m->streams.empty() && m->ghosts.empty()) m->idle_since = m->now;
    if (!answered || error_code != NGHTTP2_NO_ERROR) m->Churn();
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source* source, void*) {
    auto* s = static_cast<Stream*>(source->ptr);
    const std::size_t n = std::min(length, s->response_body.size() - s->sent);
    std::memcpy(buf, s->response_body.data() + s->sent, n);
    s->sent += n;
    if (s->sent == s->response_body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
};

H2Connection::H2Connection(H2Limits limits, H2Callbacks callbacks, Clock::time_point now)
    : impl_(std::make_unique<Impl>(limits, std::move(callbacks), now)) {
  Impl& m = *impl_;
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_option* opt = nullptr;
  if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0) {
    if (cbs != nullptr) nghttp2_session_callbacks_del(cbs);
    m.dead = true;
    return;
  }
  nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, Impl::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(cbs, Impl::OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, Impl::OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, Impl::OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_send_callback(cbs, Impl::OnFrameSend);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, Impl::OnStreamClose);
  // Window is given back as the application takes the bytes (the budget decides), not on receipt.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  nghttp2_option_set_no_closed_streams(opt, 1);
  nghttp2_option_set_max_continuations(opt, 8);                 // CVE-2024-28182
  nghttp2_option_set_stream_reset_rate_limit(opt, limits.reset_burst, limits.reset_rate);  // CVE-2023-44487
  nghttp2_option_set_max_outbound_ack(opt, 1000);                // SETTINGS/PING floods of a client that does not read
  nghttp2_option_set_max_settings(opt, 32);
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  const int rc = nghttp2_session_server_new2(&m.session, cbs, &m, opt);
  nghttp2_session_callbacks_del(cbs);
  nghttp2_option_del(opt);
  if (rc != 0) {
    m.session = nullptr;
    m.dead = true;
    return;
  }
  const std::array<nghttp2_settings_entry, 5> settings{{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, static_cast<uint32_t>(limits.max_concurrent_streams)},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits.stream_window},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(limits.max_header_bytes)},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 4096},  // the HPACK decoder's dynamic table
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  }};
  if (nghttp2_submit_settings(m.session, NGHTTP2_FLAG_NONE, settings.data(), settings.size()) != 0 ||
      nghttp2_session_set_local_window_size(m.session, NGHTTP2_FLAG_NONE, 0,
                                            static_cast<int32_t>(limits.connection_window)) != 0) {
    m.dead = true;
  }
}

H2Connection::~H2Connection() = default;

bool H2Connection::Receive(const char* data, std::size_t size, Clock::time_point now) {
  Impl& m = *impl_;
  if (m.session == nullptr) return false;
  m.now = now;
  const ssize_t rc = nghttp2_session_mem_recv(m.session, reinterpret_cast<const uint8_t*>(data), size);
  if (rc < 0) {
    if (!m.dead) {
      m.dead = true;
      m.cb.on_abuse("protocol");
    }
    return false;
  }
  return Alive();
}

void H2Connection::TakeOutput(std::string* out) {
  Impl& m = *impl_;
  if (m.session == nullptr) return;
  for (;;) {
    const uint8_t* p = nullptr;
    const ssize_t n = nghttp2_session_mem_send(m.session, &p);
    if (n <= 0) {
      if (n < 0) m.dead = true;
      return;
    }
    out->append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
  }
}

void H2Connection::Respond(std::int32_t id, HttpResponse response, Clock::time_point now) {
  Impl& m = *impl_;
  m.now = now;
  if (m.ghosts.erase(id) != 0) {
    if (m.streams.empty() && m.ghosts.empty()) m.idle_since = now;
    return;
  }
  Impl::Stream* s = m.Find(id);
  if (s == nullptr || s->state != Impl::State::kDispatched || m.session == nullptr) return;
  m.Release(*s);
  m.Submit(*s, std::move(response));
}

void H2Connection::Expire(Clock::time_point now) {
  Impl& m = *impl_;
  if (m.session == nullptr) return;
  m.now = now;
  std::vector<std::int32_t> ids;
  ids.reserve(m.streams.size());
  for (const auto& [id, s] : m.streams) ids.push_back(id);
  for (const std::int32_t id : ids) {
    Impl::Stream* s = m.Find(id);
    if (s == nullptr) continue;
    switch (s->state) {
      case Impl::State::kHeaders:
        // A header block must end before anything else is read: a slow one ends the connection.
        if (s->header_deadline <= now) m.Abuse("slow_headers", NGHTTP2_NO_ERROR);
        break;
      case Impl::State::kBudget:
        if (s->body_deadline <= now) {
          m.Refuse(*s, 408, "request body not received before the deadline");
        } else {
          m.TryReserve(*s);
          if (s->state == Impl::State::kBudget && s->budget_until <= now) {
            m.Refuse(*s, 429, "too many request bytes in flight; retry shortly", true);
          }
        }
        break;
      case Impl::State::kBody:
        if (s->body_deadline <= now) m.Refuse(*s, 408, "request body not received before the deadline");
        break;
      case Impl::State::kAnswered:
        if (s->write_deadline <= now) {
          s->write_deadline = kNever;
          nghttp2_submit_rst_stream(m.session, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        }
        break;
      case Impl::State::kDispatched:
        break;  // the handler answers by the request deadline
    }
  }
  if (!m.shutdown && m.streams.empty() && m.ghosts.empty() && m.idle_since + m.lim.idle_timeout <= now) {
    Shutdown();
  }
}

Clock::time_point H2Connection::NextDeadline() const {
  const Impl& m = *impl_;
  Clock::time_point t = kNever;
  for (const auto& [id, s] : m.streams) {
    switch (s->state) {
      case Impl::State::kHeaders: t = std::min(t, s->header_deadline); break;
      case Impl::State::kBudget: t = std::min({t, s->body_deadline, m.now + kBudgetRetry}); break;
      case Impl::State::kBody: t = std::min(t, s->body_deadline); break;
      case Impl::State::kAnswered: t = std::min(t, s->write_deadline); break;
      case Impl::State::kDispatched: break;
    }
  }
  if (!m.shutdown && m.streams.empty() && m.ghosts.empty()) t = std::min(t, m.idle_since + m.lim.idle_timeout);
  return t;
}

void H2Connection::ShutdownNotice() {
  Impl& m = *impl_;
  if (m.session != nullptr && !m.shutdown) nghttp2_submit_shutdown_notice(m.session);
}

void H2Connection::Shutdown() {
  Impl& m = *impl_;
  if (m.session == nullptr || m.shutdown) return;
  m.shutdown = true;
  nghttp2_submit_goaway(m.session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(m.session),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

bool H2Connection::Alive() const {
  const Impl& m = *impl_;
  if (m.session == nullptr) return false;
  // Once ended (an error, a limit) only the GOAWAY waiting to be sent keeps it.
  return nghttp2_session_want_write(m.session) != 0 || (!m.dead && nghttp2_session_want_read(m.session) != 0);
}

std::size_t H2Connection::Busy() const { return impl_->streams.size() + impl_->ghosts.size(); }

}  // namespace draguard::server
