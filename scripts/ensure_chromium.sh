#!/bin/sh
# Make sure Debian's Chromium is present for the Playwright browser tests (never `playwright install`).
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's chromium for the browser tests..."
  (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)) \
    && exit 0
fi
echo "WARNING: /usr/bin/chromium is missing and could not be installed; browser tests will be skipped." >&2
exit 0
