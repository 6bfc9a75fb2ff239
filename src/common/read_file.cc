#include "draguard/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace draguard {

Result<std::string> ReadFile(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Status::NotFound("cannot open " + path + ": " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::NotFound("cannot open " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  if (static_cast<unsigned long long>(st.st_size) > max_bytes) {
    return Status::ResourceExhausted(path + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::NotFound("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) return data;
    data.append(buf, static_cast<std::size_t>(n));
    // The file may grow while it is read.
    if (data.size() > max_bytes) {
      return Status::ResourceExhausted(path + ": larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
}

}  // namespace draguard
