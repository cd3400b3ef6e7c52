# Sourced by .ci/run: services the tests need.
# Headless Chromium for the continuation wait-page test (tests/continuations, T29); the test
# is skipped when chromium is missing, so a failed install only warns.
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    _txcl_sudo=""
    if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then _txcl_sudo="sudo"; fi
    { $_txcl_sudo apt-get update -qq && $_txcl_sudo apt-get install -y -qq chromium >/dev/null; } \
      || echo "services.sh: could not install chromium; the browser test will be skipped" >&2
    unset _txcl_sudo
  else
    echo "services.sh: chromium is missing and apt-get is unavailable; the browser test will be skipped" >&2
  fi
fi
