#pragma once
// An advisory lock on a file (flock), released when the object goes. How tune-workers on one host
// share what they must not do twice or at once: a GPU's timing, a template unit's compile, a
// kernel's reference outputs.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

namespace kiln::tune {

class FileLock {
 public:
  enum class Mode { Wait, Try };
  // Mode::Try returns at once, held() false when another process holds the lock. A file that
  // cannot be opened gives a lock that is not held (error() says why).
  FileLock(const std::string& path, Mode mode) {
    fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      error_ = errno;
      return;
    }
    if (::flock(fd_, mode == Mode::Try ? LOCK_EX | LOCK_NB : LOCK_EX) == 0) {
      held_ = true;
    } else {
      error_ = errno;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  bool held() const { return held_; }
  // errno of the failed open or flock (EWOULDBLOCK: another process holds it); 0 when held.
  int error() const { return error_; }

 private:
  int fd_ = -1;
  bool held_ = false;
  int error_ = 0;
};

}  // namespace kiln::tune
