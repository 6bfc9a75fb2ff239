// Gzip / Gunzip (publisher.h) with zlib.
#include <zlib.h>

#include "draguard/kubetopo/publisher.h"

namespace draguard::kubetopo {

Result<std::string> Gzip(std::string_view data) {
  z_stream z{};
  // windowBits 15 + 16: a gzip wrapper with a zero timestamp and no file name.
  if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return Status::Internal("zlib: deflateInit2 failed");
  }
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int r = deflate(&z, Z_FINISH);
  const size_t n = z.total_out;
  deflateEnd(&z);
  if (r != Z_STREAM_END) return Status::Internal("zlib: deflate failed");
  out.resize(n);
  return out;
}

Result<std::string> Gunzip(std::string_view data, size_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) return Status::Internal("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buf[64 * 1024];
  int r = Z_OK;
  while (r != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    r = inflate(&z, Z_NO_FLUSH);
    if (r != Z_OK && r != Z_STREAM_END) {
      inflateEnd(&z);
      return Status::InvalidArgument("not valid gzip data");
    }
    const size_t got = sizeof buf - z.avail_out;
    if (out.size() + got > max_bytes) {
      inflateEnd(&z);
      return Status::ResourceExhausted("decompressed export is over the " + std::to_string(max_bytes) +
                                       "-byte limit");
    }
    out.append(buf, got);
    if (r == Z_OK && got == 0 && z.avail_in == 0) {
      inflateEnd(&z);
      return Status::InvalidArgument("truncated gzip data");
    }
  }
  inflateEnd(&z);
  return out;
}

}  // namespace draguard::kubetopo
