# Sourced by .ci/run: external tools the tests use, installed when missing.
# - chromium: the continuation wait page in a real headless browser (tests/continuations, T29)
# - vim: the vim syntax file is checked by running real vim (tests/editors)
# node and npm come with the machine; the VS Code grammar tests run `npm ci` themselves.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v vim >/dev/null 2>&1 || missing+=(vim)
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
