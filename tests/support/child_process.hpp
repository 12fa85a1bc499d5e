// Another process sharing a file with a test, for what only a real process shows: its end, its
// death, its locks and claims. Header-only, for the plain suites (no libtorch) and the others
// alike.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

namespace offtune::test {

// Forks. The child runs `first`, which reports by its return value (0: success; no gtest in a
// forked child), and tells the parent through a pipe; then, as asked: exits (Exit), stays alive
// until killed (Linger), or waits for go() and exits with what `then` returns. The constructor
// returns once `first` has run. A child still alive at destruction is killed.
class ChildProcess {
 public:
  enum class After { Exit, Linger };
  ChildProcess(const std::function<int()>& first, After after)
      : ChildProcess(first, nullptr, after == After::Linger) {}
  ChildProcess(const std::function<int()>& first, const std::function<int()>& then)
      : ChildProcess(first, then, false) {}
  ~ChildProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (go_ >= 0) close(go_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Lets a child made with `then` go on.
  void go() {
    const char c = 1;
    EXPECT_EQ(write(go_, &c, 1), 1);
  }
  // Waits for a child that exits on its own; returns its exit status (-1 if it did not exit).
  int wait() {
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // SIGKILL: no handler, no destructor, no chance to tidy up. Reaped, so that the pid is gone.
  void kill_now() {
    EXPECT_EQ(kill(pid_, SIGKILL), 0);
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    EXPECT_TRUE(WIFSIGNALED(status));
    pid_ = -1;
  }

 private:
  ChildProcess(const std::function<int()>& first, const std::function<int()>& then, bool linger) {
    int done[2];
    int go[2];
    if (pipe(done) != 0 || pipe(go) != 0) {
      ADD_FAILURE() << "pipe failed";
      return;
    }
    pid_ = fork();
    if (pid_ == 0) {
      close(done[0]);
      close(go[1]);
      int code = 2;
      try {
        code = first();
        const char c = static_cast<char>(code);
        if (write(done[1], &c, 1) != 1) _exit(3);
        if (then) {
          char word = 0;
          if (code == 0 && read(go[0], &word, 1) == 1) code = then();
        }
        while (linger) pause();
      } catch (...) {
        code = 2;
      }
      _exit(code);  // no destructors, no gtest teardown
    }
    close(done[1]);
    close(go[0]);
    go_ = go[1];
    char c = 1;
    if (read(done[0], &c, 1) != 1 || c != 0) ADD_FAILURE() << "the child failed: " << int{c};
    close(done[0]);
  }

  pid_t pid_ = -1;
  int go_ = -1;
};

}  // namespace offtune::test
