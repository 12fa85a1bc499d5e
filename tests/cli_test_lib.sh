# Sourced by the shell tests of the built `offtune` (cli_end_to_end.sh, cli_crash_resume.sh,
# cli_script_sweep.sh, test_torchscript.sh): a temporary working directory removed at exit, the
# count of passed checks, the one way a check fails, and a JSON check in Python.
#   cli_test_dir [COMMAND]   make $T, cd into it, remove it at exit (running COMMAND first)
#   ok                       one more check passed
#   fail MESSAGE             print it, the count, and exit 1
#   py CODE MESSAGE          run CODE with $PY (python3 unless set); fail with MESSAGE if it fails
#   passed_summary [NAME]    the last line: "[NAME: ]N passed, 0 failed"
set -u
passed=0
cli_test_dir() {
  T="$(mktemp -d)"
  # shellcheck disable=SC2064  # the command and the directory are fixed now, on purpose
  trap "${1:+$1; }rm -rf '$T'" EXIT
  cd "$T" || exit 1
}
ok() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*" >&2; echo "$passed passed, 1 failed"; exit 1; }
py() { "${PY:-python3}" -c "$1" || fail "$2"; }
passed_summary() { echo "${1:+$1: }$passed passed, 0 failed"; }
