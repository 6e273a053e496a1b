#!/usr/bin/env bash
# The headless browser the web-view tests drive: Debian's chromium and its driver. Safe to run again.
set -euo pipefail
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium chromium-driver >/dev/null
