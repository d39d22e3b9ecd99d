#!/usr/bin/env bash
# Install Debian's headless-capable Chromium, used by tests/report/ to render the static
# HTML report and check that every chart loads.
#
#   deploy/install-chromium.sh          # idempotent; does nothing when /usr/bin/chromium exists
#
# Only the Debian archive is used (no snap, no browser download at run time).
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    echo "install-chromium.sh: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-chromium.sh: not root and no sudo; run as root" >&2
        exit 1
    fi
fi

# apt-get update only when the package lists do not know the package yet.
if ! apt-cache show chromium >/dev/null 2>&1; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium

if [ ! -x /usr/bin/chromium ]; then
    echo "install-chromium.sh: installed the chromium package but /usr/bin/chromium is missing" >&2
    exit 1
fi
echo "install-chromium.sh: $(/usr/bin/chromium --version 2>/dev/null || echo chromium installed)"
