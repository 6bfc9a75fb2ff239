#include "h2_client.h"

#include <cstring>

#include <nghttp2/nghttp2.h>

namespace draguard::testing {

struct H2Client::Impl {
  H2Client* owner = nullptr;
  nghttp2_session* session = nullptr;
  std::map<std::int32_t, H2Response> responses;
  std::map<std::int32_t, std::string> bodies;  // request bodies being sent
  std::map<std::int32_t, std::size_t> sent;
  std::map<std::int32_t, bool> keep_open;       // body sent without END_STREAM

  static Impl* Self(void* user) { return static_cast<Impl*>(user); }
  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    auto& r = Self(user)->responses[frame->hd.stream_id];
    const std::string n(reinterpret_cast<const char*>(name), namelen);
    const std::string v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") {
      r.status = std::atoi(v.c_str());
    } else {
      r.headers[n] = v;
    }
    return 0;
  }
  static int OnData(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    Self(user)->responses[id].body.append(reinterpret_cast<const char*>(data), len);
    return 0;
  }
  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    Impl* m = Self(user);
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      m->owner->goaway_ = true;
      m->owner->goaway_code_ = frame->goaway.error_code;
    }
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
      auto& r = m->responses[frame->hd.stream_id];
      r.was_reset = true;
      r.reset = frame->rst_stream.error_code;
    }
    return 0;
  }
  static int OnClose(nghttp2_session*, int32_t id, uint32_t, void* user) {
    Self(user)->responses[id].closed = true;
    return 0;
  }
  static ssize_t ReadBody(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source*, void* user) {
    Impl* m = Self(user);
    const std::string& b = m->bodies[id];
    std::size_t& off = m->sent[id];
    const std::size_t n = std::min(length, b.size() - off);
    std::memcpy(buf, b.data() + off, n);
    off += n;
    if (off == b.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      if (m->keep_open[id]) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return static_cast<ssize_t>(n);
  }
};

H2Client::H2Client(std::vector<std::pair<std::int32_t, std::uint32_t>> settings) : impl_(std::make_unique<Impl>()) {
  impl_->owner = this;
  nghttp2_session_callbacks* cbs = nullptr;
  nghttp2_session_callbacks_new(&cbs);
  nghttp2_session_callbacks_set_on_header_callback(cbs, Impl::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, Impl::OnData);
  nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, Impl::OnFrameRecv);
  nghttp2_session_callbacks_set_on_stream_close_callback(cbs, Impl::OnClose);
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // A test client sends what it is told to, however large.
  nghttp2_option_set_max_send_header_block_length(opt, 1 << 20);
  nghttp2_session_client_new2(&impl_->session, cbs, impl_.get(), opt);
  nghttp2_option_del(opt);
  nghttp2_session_callbacks_del(cbs);
  std::vector<nghttp2_settings_entry> iv;
  for (auto [id, v] : settings) iv.push_back({id, v});
  nghttp2_submit_settings(impl_->session, NGHTTP2_FLAG_NONE, iv.data(), iv.size());
}

H2Client::~H2Client() { nghttp2_session_del(impl_->session); }

std::int32_t H2Client::Request(const std::string& method, const std::string& path, const std::string& body,
                               const std::vector<std::pair<std::string, std::string>>& headers, bool end_stream) {
  auto nv = [](const std::string& n, const std::string& v) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                      NGHTTP2_NV_FLAG_NONE};
  };
  static const std::string kMethod = ":method", kPath = ":path", kScheme = ":scheme", kAuthority = ":authority",
                           kHttps = "https", kLocal = "localhost";
  std::vector<nghttp2_nv> nva{nv(kMethod, method), nv(kPath, path), nv(kScheme, kHttps), nv(kAuthority, kLocal)};
  for (const auto& [n, v] : headers) nva.push_back(nv(n, v));
  nghttp2_data_provider data{};
  data.read_callback = Impl::ReadBody;
  if (end_stream) {
    const std::int32_t id = nghttp2_submit_request(impl_->session, nullptr, nva.data(), nva.size(),
                                                   body.empty() ? nullptr : &data, nullptr);
    if (id > 0) impl_->bodies[id] = body;
    return id;
  }
  // The stream stays open: HEADERS without END_STREAM, then the body (if any) without it either.
  const std::int32_t id = nghttp2_submit_headers(impl_->session, NGHTTP2_FLAG_NONE, -1, nullptr, nva.data(),
                                                 nva.size(), nullptr);
  if (id > 0 && !body.empty()) {
    impl_->bodies[id] = body;
    impl_->keep_open[id] = true;
    nghttp2_submit_data(impl_->session, NGHTTP2_FLAG_NONE, id, &data);
  }
  return id;
}

void H2Client::Reset(std::int32_t stream_id, std::uint32_t code) {
  nghttp2_submit_rst_stream(impl_->session, NGHTTP2_FLAG_NONE, stream_id, code);
}

std::string H2Client::TakeOutput() {
  std::string out;
  for (;;) {
    const uint8_t* p = nullptr;
    const ssize_t n = nghttp2_session_mem_send(impl_->session, &p);
    if (n <= 0) break;
    out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
  }
  return out;
}

bool H2Client::Receive(const std::string& bytes) {
  return nghttp2_session_mem_recv(impl_->session, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) >= 0;
}

const H2Response& H2Client::Response(std::int32_t stream_id) { return impl_->responses[stream_id]; }

std::uint32_t H2Client::server_max_streams() const {
  return nghttp2_session_get_remote_settings(impl_->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

std::string H2Client::Preface() {
  return std::string(NGHTTP2_CLIENT_MAGIC, NGHTTP2_CLIENT_MAGIC_LEN) + Frame(NGHTTP2_SETTINGS, 0, 0, "");
}

std::string H2Client::Frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream_id, const std::string& payload) {
  std::string f(9, '\0');
  const std::size_t len = payload.size();
  f[0] = static_cast<char>((len >> 16) & 0xff);
  f[1] = static_cast<char>((len >> 8) & 0xff);
  f[2] = static_cast<char>(len & 0xff);
  f[3] = static_cast<char>(type);
  f[4] = static_cast<char>(flags);
  f[5] = static_cast<char>((stream_id >> 24) & 0x7f);
  f[6] = static_cast<char>((stream_id >> 16) & 0xff);
  f[7] = static_cast<char>((stream_id >> 8) & 0xff);
  f[8] = static_cast<char>(stream_id & 0xff);
  return f + payload;
}

namespace {
// HPACK integer with an N-bit prefix (RFC 7541 §5.1).
void HpackInt(std::string* out, std::uint8_t first, int prefix, std::size_t v) {
  const std::size_t max = (1u << prefix) - 1;
  if (v < max) {
    out->push_back(static_cast<char>(first | v));
    return;
  }
  out->push_back(static_cast<char>(first | max));
  v -= max;
  while (v >= 128) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
}  // namespace

std::string H2Client::Headers(std::int32_t stream_id, const std::vector<std::pair<std::string, std::string>>& fields,
                              bool end_stream) {
  std::string block;
  for (const auto& [n, v] : fields) {
    block.push_back(0x00);  // literal without indexing, new name
    HpackInt(&block, 0x00, 7, n.size());
    block += n;
    HpackInt(&block, 0x00, 7, v.size());
    block += v;
  }
  return Frame(NGHTTP2_HEADERS, NGHTTP2_FLAG_END_HEADERS | (end_stream ? NGHTTP2_FLAG_END_STREAM : 0), stream_id, block);
}

}  // namespace draguard::testing
