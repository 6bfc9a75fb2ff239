#include "draguard/base64.h"

#include <cstdint>

namespace draguard {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string Base64Encode(std::string_view data) {
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : data) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

Result<std::string> Base64Decode(std::string_view data, bool require_padding) {
  if (require_padding && data.size() % 4 != 0) {
    return Status::InvalidArgument("base64 length is not a multiple of 4");
  }
  std::size_t pad = 0;
  while (pad < 2 && pad < data.size() && data[data.size() - 1 - pad] == '=') ++pad;
  std::string_view body = data.substr(0, data.size() - pad);
  if (body.size() % 4 == 1) return Status::InvalidArgument("base64 length is invalid");
  if (pad > 0 && (body.size() + pad) % 4 != 0) return Status::InvalidArgument("base64 padding is invalid");
  std::string out;
  out.reserve(body.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : body) {
    int v = Value(c);
    if (v < 0) return Status::InvalidArgument("invalid base64 character");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

}  // namespace draguard
