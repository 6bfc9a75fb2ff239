#include "h2_connection.h"

#include <utility>

#include <nghttp2/nghttp2.h>

#include <gtest/gtest.h>

#include "h2_client.h"

namespace draguard::server {
namespace {

using Clock = std::chrono::steady_clock;
using testing::H2Client;

// One server connection and one client, bytes carried in memory, time moved by the test.
class H2Test : public ::testing::Test {
 protected:
  void Start(H2Limits lim = Defaults(), std::vector<std::pair<std::int32_t, std::uint32_t>> client_settings = {}) {
    lim_ = lim;
    H2Callbacks cb;
    cb.on_request = [this](std::int32_t id, HttpRequest req) {
      requests_.emplace_back(id, std::move(req));
      if (auto_answer_) Answer(id, 200, "ok " + requests_.back().second.path);
    };
    cb.deadline = [](const HttpRequest& r) { return r.start + std::chrono::seconds(10); };
    cb.error = [](int code, const std::string& message, HttpResponse* res) {
      res->status = code;
      res->content_type = "text/plain";
      res->body = message;
    };
    cb.reserve = [this](std::size_t n) {
      if (!budget_open_ || held_ + n > budget_) return false;
      held_ += n;
      return true;
    };
    cb.release = [this](std::size_t n) { held_ -= n; };
    cb.on_abuse = [this](std::string_view reason) { abuse_.emplace_back(reason); };
    conn_ = std::make_unique<H2Connection>(lim, std::move(cb), now_);
    client_ = std::make_unique<H2Client>(std::move(client_settings));
    Pump();
  }
  static H2Limits Defaults() {
    H2Limits lim;
    lim.max_body = 64 * 1024;
    lim.max_header_bytes = 4096;
    lim.max_headers = 20;
    return lim;
  }
  void Answer(std::int32_t id, int status, std::string body) {
    HttpResponse res;
    res.status = status;
    res.content_type = "application/json";
    res.body = std::move(body);
    res.headers.emplace_back("Retry-After", "1");
    res.headers.emplace_back("Connection", "close");  // not HTTP/2: dropped
    conn_->Respond(id, std::move(res), now_);
  }
  // Carries bytes both ways until neither side has anything to send (what reaches a server that
  // gave up is dropped).
  void Pump(const std::string& raw = "") {
    std::string to_server = raw;
    for (int i = 0; i < 10000; ++i) {
      to_server += client_->TakeOutput();
      const bool sent = !to_server.empty();
      if (sent && server_alive_) server_alive_ = conn_->Receive(to_server.data(), to_server.size(), now_);
      to_server.clear();
      std::string to_client;
      conn_->TakeOutput(&to_client);
      if (!to_client.empty()) client_->Receive(to_client);
      if (!sent && to_client.empty()) return;
    }
    FAIL() << "no quiescence";
  }
  // A request and its RST_STREAM, in that order on the wire.
  std::string RequestThenReset(const std::string& method, const std::string& path, const std::string& body,
                               bool end_stream) {
    const auto id = client_->Request(method, path, body, {}, end_stream);
    std::string wire = client_->TakeOutput();
    client_->Reset(id, NGHTTP2_CANCEL);
    return wire + client_->TakeOutput();
  }
  void Advance(std::chrono::milliseconds d) {
    now_ += d;
    conn_->Expire(now_);
    Pump();
  }

  Clock::time_point now_ = Clock::time_point() + std::chrono::hours(1);
  H2Limits lim_;
  std::unique_ptr<H2Connection> conn_;
  std::unique_ptr<H2Client> client_;
  std::vector<std::pair<std::int32_t, HttpRequest>> requests_;
  std::vector<std::string> abuse_;
  bool auto_answer_ = true;
  bool server_alive_ = true;
  bool budget_open_ = true;
  std::size_t budget_ = 1 << 30, held_ = 0;
};

TEST_F(H2Test, RequestIsParsedAndAnswered) {
  Start();
  const std::string body = R"({"kind":"AdmissionReview"})";
  const auto id = client_->Request("POST", "/validate?timeout=5s", body,
                                   {{"content-type", "application/json"}, {"content-length", std::to_string(body.size())}});
  Pump();
  ASSERT_EQ(requests_.size(), 1u);
  const HttpRequest& req = requests_[0].second;
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/validate");
  EXPECT_EQ(req.query, "timeout=5s");
  EXPECT_EQ(req.Header("content-type"), "application/json");
  EXPECT_EQ(req.body, body);
  EXPECT_GE(req.body.capacity(), body.size());
  const auto& r = client_->Response(id);
  EXPECT_TRUE(r.closed);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok /validate");
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  EXPECT_EQ(r.headers.at("content-length"), "12");
  EXPECT_EQ(r.headers.at("retry-after"), "1");
  EXPECT_EQ(r.headers.count("connection"), 0u);
  EXPECT_EQ(held_, 0u);  // the body's budget is given back with the answer
  EXPECT_EQ(conn_->Busy(), 0u);
  EXPECT_TRUE(abuse_.empty());
}

TEST_F(H2Test, ManyRequestsOnOneConnectionAnsweredOutOfOrder) {
  Start();
  auto_answer_ = false;
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(client_->Request("POST", "/validate", std::string(100 + i, 'x')));
  Pump();
  ASSERT_EQ(requests_.size(), 20u);
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it) Answer(it->first, 200, std::to_string(it->second.body.size()));
  Pump();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(client_->Response(ids[i]).status, 200);
    EXPECT_EQ(client_->Response(ids[i]).body, std::to_string(100 + i));
  }
}

TEST_F(H2Test, TooManyHeaderFieldsOrBytesAre431AndTheConnectionGoesOn) {
  Start();
  std::vector<std::pair<std::string, std::string>> many;
  for (int i = 0; i < 25; ++i) many.emplace_back("x-h" + std::to_string(i), "v");
  const auto a = client_->Request("GET", "/healthz", "", many);
  const auto b = client_->Request("GET", "/healthz", "", {{"x-big", std::string(5000, 'a')}});
  Pump();
  EXPECT_EQ(client_->Response(a).status, 431);
  EXPECT_EQ(client_->Response(b).status, 431);
  EXPECT_TRUE(requests_.empty());
  const auto c = client_->Request("GET", "/healthz", "");
  Pump();
  EXPECT_EQ(client_->Response(c).status, 200);
}

TEST_F(H2Test, BodyOverTheCapIs413ByContentLengthOrByData) {
  Start();
  const auto a = client_->Request("POST", "/validate", std::string(70 * 1024, 'x'),
                                  {{"content-length", std::to_string(70 * 1024)}});
  const auto b = client_->Request("POST", "/validate", std::string(70 * 1024, 'y'));  // no content-length
  Pump();
  EXPECT_EQ(client_->Response(a).status, 413);
  EXPECT_EQ(client_->Response(b).status, 413);
  EXPECT_TRUE(requests_.empty());
  EXPECT_EQ(held_, 0u);
  const auto c = client_->Request("POST", "/validate", std::string(1000, 'z'));
  Pump();
  EXPECT_EQ(client_->Response(c).status, 200);  // the window of the refused bodies came back
}

TEST_F(H2Test, StreamsBeyondTheLimitAreRefusedAndResetRequestsStillCount) {
  H2Limits lim = Defaults();
  lim.max_concurrent_streams = 4;
  Start(lim);
  EXPECT_EQ(client_->server_max_streams(), 4u);
  auto_answer_ = false;
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(client_->Request("POST", "/validate", "{}"));
  Pump();
  ASSERT_EQ(requests_.size(), 4u);
  // The client resets all four while their reviews run: the work goes on, so new streams are
  // still refused until the answers are in.
  for (auto id : ids) client_->Reset(id, NGHTTP2_CANCEL);
  Pump();
  EXPECT_EQ(conn_->Busy(), 4u);
  const auto refused = client_->Request("POST", "/validate", "{}");
  Pump();
  EXPECT_TRUE(client_->Response(refused).was_reset);
  EXPECT_EQ(client_->Response(refused).reset, static_cast<std::uint32_t>(NGHTTP2_REFUSED_STREAM));
  EXPECT_EQ(requests_.size(), 4u);
  for (auto id : ids) Answer(id, 200, "late");  // dropped: the streams are gone
  EXPECT_EQ(conn_->Busy(), 0u);
  auto_answer_ = true;
  const auto ok = client_->Request("POST", "/validate", "{}");
  Pump();
  EXPECT_EQ(client_->Response(ok).status, 200);
}

TEST_F(H2Test, RapidResetEndsTheConnection) {
  Start();
  auto_answer_ = false;  // reviews that take a while: each reset stream leaves work behind
  std::string burst;
  for (int i = 0; i < 2000 && !client_->goaway(); ++i) {
    burst += RequestThenReset("POST", "/validate", "{}", true);
    if (i % 50 == 49) Pump(std::exchange(burst, {}));
  }
  Pump(burst);
  EXPECT_TRUE(client_->goaway());
  EXPECT_EQ(client_->goaway_code(), static_cast<std::uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  EXPECT_FALSE(conn_->Alive());
  ASSERT_FALSE(abuse_.empty());
  // The work it could start is bounded by the stream limit, not by the resets sent.
  EXPECT_LE(requests_.size(), lim_.max_concurrent_streams);
}

TEST_F(H2Test, RapidResetOfCheapRequestsHitsTheResetRateLimit) {
  Start();
  std::string burst;
  for (int i = 0; i < 2000 && !client_->goaway(); ++i) {
    burst += RequestThenReset("GET", "/healthz", "", false);
    if (i % 50 == 49) Pump(std::exchange(burst, {}));
  }
  Pump(burst);
  EXPECT_TRUE(client_->goaway());
  EXPECT_EQ(client_->goaway_code(), static_cast<std::uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  EXPECT_FALSE(conn_->Alive());
}

TEST_F(H2Test, ClientWindowOfZeroStallsTheAnswerUntilTheWriteDeadline) {
  Start(Defaults(), {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}});
  const auto id = client_->Request("POST", "/validate", "{}");
  Pump();
  ASSERT_EQ(requests_.size(), 1u);
  EXPECT_EQ(client_->Response(id).status, 200);  // the headers go; the body waits for window
  EXPECT_TRUE(client_->Response(id).body.empty());
  EXPECT_EQ(conn_->Busy(), 1u);
  EXPECT_LE(conn_->NextDeadline(), now_ + lim_.write_timeout);
  Advance(lim_.write_timeout);
  EXPECT_TRUE(client_->Response(id).was_reset);
  EXPECT_EQ(client_->Response(id).reset, static_cast<std::uint32_t>(NGHTTP2_CANCEL));
  EXPECT_EQ(conn_->Busy(), 0u);
}

TEST_F(H2Test, WindowOverflowIsAConnectionError) {
  Start();
  std::string inc = {'\x7f', '\xff', '\xff', '\xff'};
  Pump(H2Client::Frame(NGHTTP2_WINDOW_UPDATE, 0, 0, inc) + H2Client::Frame(NGHTTP2_WINDOW_UPDATE, 0, 0, inc));
  EXPECT_TRUE(client_->goaway());
  EXPECT_EQ(client_->goaway_code(), static_cast<std::uint32_t>(NGHTTP2_FLOW_CONTROL_ERROR));
  EXPECT_FALSE(conn_->Alive());
}

TEST_F(H2Test, SlowBodyIs408AtTheBodyDeadline) {
  Start();
  const auto id = client_->Request("POST", "/validate", std::string(10, 'x'), {{"content-length", "100"}}, false);
  Pump();
  EXPECT_TRUE(requests_.empty());
  Advance(lim_.body_timeout - std::chrono::milliseconds(1));
  EXPECT_EQ(client_->Response(id).status, 0);
  Advance(std::chrono::milliseconds(1));
  EXPECT_EQ(client_->Response(id).status, 408);
  EXPECT_EQ(held_, 0u);
}

TEST_F(H2Test, UnfinishedHeaderBlockEndsTheConnectionAtItsDeadline) {
  Start();
  // HEADERS without END_HEADERS: only CONTINUATION may follow, and none comes.
  std::string block = H2Client::Headers(1, {{":method", "GET"}, {":path", "/healthz"}, {":scheme", "https"}}, true);
  block[4] = static_cast<char>(NGHTTP2_FLAG_END_STREAM);
  Pump(block);
  EXPECT_TRUE(conn_->Alive());
  Advance(lim_.header_timeout);
  EXPECT_TRUE(client_->goaway());
  EXPECT_FALSE(conn_->Alive());
  EXPECT_EQ(abuse_, std::vector<std::string>{"slow_headers"});
}

TEST_F(H2Test, BodyWaitsForTheBudgetWithoutWindowThen429) {
  Start();
  budget_open_ = false;
  const auto id = client_->Request("POST", "/validate", std::string(1000, 'x'), {{"content-length", "1000"}});
  Pump();
  EXPECT_TRUE(requests_.empty());
  Advance(std::chrono::milliseconds(500));
  EXPECT_EQ(client_->Response(id).status, 0);
  Advance(lim_.budget_wait);
  EXPECT_EQ(client_->Response(id).status, 429);
  EXPECT_EQ(client_->Response(id).headers.at("retry-after"), "1");
  // Once the budget has room, a waiting body goes on.
  const auto id2 = client_->Request("POST", "/validate", std::string(1000, 'y'), {{"content-length", "1000"}});
  Pump();
  budget_open_ = true;
  Advance(std::chrono::milliseconds(20));
  EXPECT_EQ(client_->Response(id2).status, 200);
  EXPECT_EQ(held_, 0u);
}

TEST_F(H2Test, EmptyDataFramesAreCappedAsChurn) {
  Start();
  const auto id = client_->Request("POST", "/validate", "", {}, false);
  Pump();
  std::string flood;
  for (int i = 0; i < 1000; ++i) flood += H2Client::Frame(NGHTTP2_DATA, 0, id, "");
  Pump(flood);
  EXPECT_TRUE(client_->goaway());
  EXPECT_EQ(client_->goaway_code(), static_cast<std::uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
  EXPECT_EQ(abuse_, std::vector<std::string>{"stream_churn"});
}

TEST_F(H2Test, IdleConnectionIsClosedAfterTheIdleTimeout) {
  Start();
  const auto id = client_->Request("GET", "/healthz", "");
  Pump();
  EXPECT_EQ(client_->Response(id).status, 200);
  Advance(lim_.idle_timeout - std::chrono::milliseconds(1));
  EXPECT_TRUE(conn_->Alive());
  Advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(client_->goaway());
  EXPECT_EQ(client_->goaway_code(), static_cast<std::uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_FALSE(conn_->Alive());
}

TEST_F(H2Test, RequestLimitPerConnectionEndsWithGoaway) {
  H2Limits lim = Defaults();
  lim.max_requests = 3;
  Start(lim);
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(client_->Request("GET", "/healthz", ""));
  Pump();
  EXPECT_EQ(requests_.size(), 3u);
  EXPECT_TRUE(client_->goaway());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(client_->Response(ids[i]).status, 200);
  for (int i = 3; i < 5; ++i) {  // beyond the GOAWAY's last stream: refused, safe to retry elsewhere
    EXPECT_EQ(client_->Response(ids[i]).status, 0);
    EXPECT_EQ(client_->Response(ids[i]).reset, static_cast<std::uint32_t>(NGHTTP2_REFUSED_STREAM));
  }
  EXPECT_FALSE(conn_->Alive());
}

TEST_F(H2Test, GracefulShutdownAnswersWhatIsInProgress) {
  Start();
  auto_answer_ = false;
  const auto id = client_->Request("POST", "/validate", "{}");
  Pump();
  conn_->ShutdownNotice();
  Pump();
  EXPECT_TRUE(client_->goaway());
  conn_->Shutdown();
  Pump();
  EXPECT_TRUE(conn_->Alive());  // one request in progress
  Answer(id, 200, "done");
  Pump();
  EXPECT_EQ(client_->Response(id).body, "done");
  EXPECT_FALSE(conn_->Alive());
}

TEST_F(H2Test, GarbageIsAProtocolErrorWithoutACrash) {
  Start();
  H2Connection fresh(lim_, H2Callbacks{[](std::int32_t, HttpRequest) {},
                                       [](const HttpRequest& r) { return r.start; },
                                       [](int, const std::string&, HttpResponse*) {},
                                       [](std::size_t) { return true; }, [](std::size_t) {},
                                       [](std::string_view) {}},
                     now_);
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_FALSE(fresh.Receive(junk.data(), junk.size(), now_));
  std::string out;
  fresh.TakeOutput(&out);  // what is left to send goes, then the connection ends
  EXPECT_FALSE(fresh.Alive());
}

}  // namespace
}  // namespace draguard::server
