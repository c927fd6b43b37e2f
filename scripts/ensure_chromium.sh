#!/bin/sh
# Make sure the test tools from Debian are present: Chromium for the Playwright browser tests (never
# `playwright install`) and strace for the system-call offline test. Installed with apt when missing and we are root.
missing=""
[ -x /usr/bin/chromium ] || missing="$missing chromium"
command -v strace >/dev/null 2>&1 || missing="$missing strace"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's$missing for the tests..."
  # shellcheck disable=SC2086
  (apt-get install -y -q $missing >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null)) \
    && exit 0
fi
echo "WARNING:$missing missing and could not be installed; the tests that need them will be skipped." >&2
exit 0
