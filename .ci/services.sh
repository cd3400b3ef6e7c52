# Sourced by .ci/run: services the tests need.
# Headless Chromium for the continuation wait-page test (tests/continuations, T29).
if ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq chromium >/dev/null
  else
    echo "services.sh: chromium is missing and apt-get is unavailable; browser tests will be skipped" >&2
  fi
fi
