#include "draguard/write_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace draguard {

Status WriteFileAtomic(const std::string& path, const std::string& data, unsigned mode) {
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return Status::InvalidArgument("cannot write " + path + ": not a file name");
  // mkstemp: O_CREAT|O_EXCL with a random name, mode 0600; never opens an existing file or symlink.
  std::string tmp = (dir == "/" ? "" : dir) + "/." + base + ".tmp.XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return Status::Unavailable("cannot create a temporary file in " + dir + ": " + std::strerror(errno));
  auto fail = [&](const std::string& what) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return Status::Unavailable(what + " " + tmp + ": " + std::strerror(e));
  };
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) return fail("cannot set the mode of");
  std::size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("cannot write");
    off += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("cannot sync");
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::Unavailable("cannot write " + tmp + ": " + std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    return Status::Unavailable("cannot rename to " + path + ": " + std::strerror(e));
  }
  // The rename itself survives a crash once the directory is synced.
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace draguard
