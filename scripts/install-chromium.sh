#!/usr/bin/env bash
# Installs Debian's headless Chromium (/usr/bin/chromium) for the browser
# tests of the web pages (bot/webui_browser_test.go) when it is missing.
# Called by .ci/run before the tests; safe to run again.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
	echo "chromium present: $(command -v chromium || echo /usr/bin/chromium)"
	exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends chromium
echo "installed $(/usr/bin/chromium --version)"
