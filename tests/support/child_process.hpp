// Another process sharing a file with a test, for what only a real process shows: its end, its
// death, its locks and claims. Header-only, for the plain suites (no libtorch), the torch suites
// and the GUI suites alike.
//
// The child is this test executable started afresh (posix_spawn of /proc/self/exe), never a fork
// that goes on running: a test process has threads (Qt's, torch's, the sanitizers'), and a forked
// copy of it inherits whatever lock another thread held at the fork. Under AddressSanitizer such a
// child deadlocked on the allocator's lock and hung the suite until ctest's limit. What the child
// does is a named role, registered next to the test that uses it (OFFTUNE_CHILD_ROLE), run by
// main() before GoogleTest starts (run_child_role_if_asked). A role gets its arguments as strings:
// nothing of the parent's memory reaches it.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

extern char** environ;

namespace offtune::test {

// The child's side of the pipes to its parent.
class ChildControl {
 public:
  ChildControl(int done_fd, int go_fd) : done_fd_(done_fd), go_fd_(go_fd) {}
  // Tells the parent the role's first part is done, with its result (0: success); the parent's
  // ChildProcess constructor returns then. At most once; a role that never calls it reports its
  // return value when it returns.
  void ready(int code) {
    if (reported_) return;
    reported_ = true;
    const char c = static_cast<char>(code);
    if (::write(done_fd_, &c, 1) != 1) ::_exit(3);
  }
  // Waits for the parent's ChildProcess::go(); false if the parent went away instead.
  bool wait_go() const {
    char word = 0;
    return ::read(go_fd_, &word, 1) == 1;
  }
  bool reported() const { return reported_; }

 private:
  int done_fd_;
  int go_fd_;
  bool reported_ = false;
};

// A role: what a child does, from its arguments; returns its exit code (0: success). It reports
// through `control` (ready, wait_go) when it has a second part; no gtest assertions in a child.
using ChildRole = int (*)(const std::vector<std::string>& args, ChildControl& control);

inline std::map<std::string, ChildRole>& child_roles() {
  static std::map<std::string, ChildRole> roles;
  return roles;
}
struct RegisterChildRole {
  RegisterChildRole(const char* name, ChildRole role) { child_roles()[name] = role; }
};
#define OFFTUNE_CHILD_ROLE(name)                                                                  \
  int offtune_child_role_##name(const std::vector<std::string>&, ::offtune::test::ChildControl&); \
  static const ::offtune::test::RegisterChildRole offtune_child_role_reg_##name(                  \
      #name, &offtune_child_role_##name);                                                         \
  int offtune_child_role_##name

inline constexpr const char* kChildFlag = "--offtune-test-child";
inline constexpr int kChildDoneFd = 3;
inline constexpr int kChildGoFd = 4;

// Called first thing in main(): in a child started by ChildProcess, runs its role and returns the
// process's exit code (it never returns for a lingering child); elsewhere returns -1.
// argv: EXE --offtune-test-child ROLE linger|exit ARG...
inline int run_child_role_if_asked(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[1], kChildFlag) != 0) return -1;
  ChildControl control(kChildDoneFd, kChildGoFd);
  const auto it = child_roles().find(argv[2]);
  if (it == child_roles().end()) {
    control.ready(2);
    return 2;
  }
  const bool linger = std::strcmp(argv[3], "linger") == 0;
  int code = 2;
  try {
    code = it->second(std::vector<std::string>(argv + 4, argv + argc), control);
  } catch (...) {
    code = 2;
  }
  control.ready(code);
  while (linger) ::pause();
  ::_exit(code);  // no destructors of what the role left open: as a process that just ends
}

// Starts a role in a child process. The constructor returns once the role has reported (ready()
// or its return); then, as asked, the child exits (Exit) or stays alive until killed (Linger). A
// child still alive at destruction is killed.
class ChildProcess {
 public:
  enum class After { Exit, Linger };
  ChildProcess(const std::string& role, const std::vector<std::string>& args, After after) {
    int done[2];
    int go[2];
    if (::pipe2(done, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe failed";
      return;
    }
    if (::pipe2(go, O_CLOEXEC) != 0) {
      ::close(done[0]);
      ::close(done[1]);
      ADD_FAILURE() << "pipe failed";
      return;
    }
    std::vector<std::string> words = {"/proc/self/exe", kChildFlag, role,
                                      after == After::Linger ? "linger" : "exit"};
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, done[1], kChildDoneFd);  // dup2 clears CLOEXEC
    posix_spawn_file_actions_adddup2(&actions, go[0], kChildGoFd);
    const int rc = ::posix_spawn(&pid_, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(done[1]);
    ::close(go[0]);
    go_ = go[1];
    if (rc != 0) {
      pid_ = -1;
      ::close(done[0]);
      ADD_FAILURE() << "posix_spawn failed: " << std::strerror(rc);
      return;
    }
    char c = 1;
    if (::read(done[0], &c, 1) != 1 || c != 0) {
      ADD_FAILURE() << "the child role " << role << " failed: " << int{c};
    }
    ::close(done[0]);
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (go_ >= 0) ::close(go_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Lets a child waiting in wait_go() go on.
  void go() {
    const char c = 1;
    EXPECT_EQ(::write(go_, &c, 1), 1);
  }
  // Waits for a child that exits on its own; returns its exit status (-1 if it did not exit, or
  // was never started).
  int wait() {
    if (pid_ <= 0) return -1;  // never waitpid(-1): that is any child of this process
    int status = 0;
    EXPECT_EQ(::waitpid(pid_, &status, 0), pid_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // SIGKILL: no handler, no destructor, no chance to tidy up. Reaped, so that the pid is gone.
  void kill_now() {
    if (pid_ <= 0) {  // never kill(-1): that is every process this user may signal
      ADD_FAILURE() << "no child to kill";
      return;
    }
    EXPECT_EQ(::kill(pid_, SIGKILL), 0);
    int status = 0;
    EXPECT_EQ(::waitpid(pid_, &status, 0), pid_);
    EXPECT_TRUE(WIFSIGNALED(status));
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
};

}  // namespace offtune::test
