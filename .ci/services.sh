# Sourced by ./run-tests (which .ci/run calls): external tools the tests use, installed with
# apt-get when missing.
# - chromium: the continuation wait page in a real headless browser (tests/continuations, T29)
# - vim: the vim syntax file is checked by running real vim (tests/editors)
# - neovim: a real LSP client for `txcl lsp` (tests/test_nothing_read_runs.py, tests/lsp)
# - postgresql: the server binaries (initdb, pg_ctl) for the tests on PostgreSQL; the suite
#   starts a throwaway server from them (txcl/testing/postgres.py)
# - nats-server: the NATS JetStream broker of the nats:// transport tests (txcl/testing/nats.py
#   starts a throwaway one)
# node and npm come with the machine; the VS Code grammar tests run `npm ci` themselves.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v vim >/dev/null 2>&1 || missing+=(vim)
command -v nvim >/dev/null 2>&1 || missing+=(neovim)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
  || missing+=(postgresql)
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
