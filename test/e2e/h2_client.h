// A test HTTP/2 client on nghttp2's client session, without a transport: frames out (TakeOutput),
// bytes in (Receive). The end-to-end tests pump it over TLS, the unit tests straight into an
// H2Connection. Also writes raw frames for the hostile tests.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace draguard::testing {

/// One stream's answer as the client saw it.
struct H2Response {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::string body;
  bool closed = false;        ///< the stream ended (answered or reset)
  std::uint32_t reset = 0;    ///< RST_STREAM error code (0 = none, or NO_ERROR after the answer)
  bool was_reset = false;     ///< an RST_STREAM came for it
};

/// The client side of one HTTP/2 connection.
class H2Client {
 public:
  /// `settings`: the client's SETTINGS (id, value), e.g. {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}.
  explicit H2Client(std::vector<std::pair<std::int32_t, std::uint32_t>> settings = {});
  ~H2Client();
  H2Client(const H2Client&) = delete;
  H2Client& operator=(const H2Client&) = delete;

  /// Submits a request; with `end_stream` false the stream stays open after the body (a client
  /// still uploading). Returns the stream id (< 0: refused by nghttp2).
  std::int32_t Request(const std::string& method, const std::string& path, const std::string& body,
                       const std::vector<std::pair<std::string, std::string>>& headers = {},
                       bool end_stream = true);
  /// Submits RST_STREAM.
  void Reset(std::int32_t stream_id, std::uint32_t code);
  /// Frames to send now.
  std::string TakeOutput();
  /// Feeds bytes from the server; false on a protocol error.
  bool Receive(const std::string& bytes);
  /// The answer of a stream (empty before anything came).
  const H2Response& Response(std::int32_t stream_id);
  /// A GOAWAY came; its error code.
  bool goaway() const { return goaway_; }
  std::uint32_t goaway_code() const { return goaway_code_; }
  /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (0 before its SETTINGS came).
  std::uint32_t server_max_streams() const;

  /// The connection preface and an empty SETTINGS frame, written raw (for a client that then
  /// sends raw frames).
  static std::string Preface();
  /// A raw frame: 9-byte header and payload.
  static std::string Frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream_id, const std::string& payload);
  /// A HEADERS frame (END_HEADERS, optionally END_STREAM) with a literal-without-indexing header
  /// block of `fields` (HPACK, no Huffman).
  static std::string Headers(std::int32_t stream_id, const std::vector<std::pair<std::string, std::string>>& fields,
                             bool end_stream);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  bool goaway_ = false;
  std::uint32_t goaway_code_ = 0;
  friend struct Impl;
};

}  // namespace draguard::testing
