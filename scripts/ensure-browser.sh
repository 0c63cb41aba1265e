#!/usr/bin/env bash
# The web console's browser test drives Debian's chromium through Debian's chromedriver (headless,
# nothing downloaded). Installs both from the distribution's packages when they are missing and we
# are root with apt-get; otherwise says what to do and goes on: the test skips with a sentence.
set -uo pipefail

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "gridbus: installing chromium and chromium-driver (the web console's browser test)" >&2
  if apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; then
    exit 0
  fi
  echo "gridbus: could not install chromium; the web console's browser test will skip" >&2
else
  echo "gridbus: chromium and chromedriver are not installed, so the web console's browser test skips" >&2
  echo "  (Debian/Ubuntu: sudo apt-get install chromium chromium-driver)." >&2
fi
exit 0
