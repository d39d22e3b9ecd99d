#!/usr/bin/env bash
# Install Prometheus, Alertmanager, promtool and amtool from the Debian archive.
#
#   deploy/install-prometheus.sh          # idempotent; does nothing when all four are on PATH
#
# Used by the alert tests (tests/alerts/) and the end-to-end tests, which start the
# binaries themselves on loopback. The Debian packages ship systemd units/init scripts;
# we never want the package to start them (tests run the binaries with their own
# config), and inside a container without an init system the postinst's attempt to
# start them can fail the install. So, for the duration of the install only, a
# policy-rc.d that answers 101 ("action forbidden") is put in place unless one already
# exists, and removed again afterwards.
#
# Debian names the Alertmanager binary `prometheus-alertmanager`; for a uniform
# interface a symlink `alertmanager` is added in /usr/local/bin when missing.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "install-prometheus.sh: not root and no sudo; run as root" >&2
        exit 1
    fi
fi

have_all() {
    local b
    for b in promtool prometheus alertmanager amtool; do
        command -v "$b" >/dev/null 2>&1 || return 1
    done
}

link_alertmanager() {
    # Debian: /usr/bin/prometheus-alertmanager. Give it its upstream name.
    if ! command -v alertmanager >/dev/null 2>&1 && command -v prometheus-alertmanager >/dev/null 2>&1; then
        $SUDO ln -sf "$(command -v prometheus-alertmanager)" /usr/local/bin/alertmanager
    fi
}

link_alertmanager
if have_all; then
    echo "install-prometheus.sh: promtool, prometheus, alertmanager, amtool already on PATH"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive

# Keep the packaged services from being started by the postinst (see header).
POLICY=/usr/sbin/policy-rc.d
ADDED_POLICY=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\n# temporary, added by kafka-health deploy/install-prometheus.sh\nexit 101\n' \
        | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod 0755 "$POLICY"
    ADDED_POLICY=1
fi
cleanup() {
    if [ "$ADDED_POLICY" = 1 ]; then
        $SUDO rm -f "$POLICY"
    fi
}
trap cleanup EXIT

PKGS=(prometheus prometheus-alertmanager)
# apt-get update only when the package lists do not know the packages yet.
if ! apt-cache show "${PKGS[@]}" >/dev/null 2>&1; then
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PKGS[@]}"

link_alertmanager
if ! have_all; then
    echo "install-prometheus.sh: installed ${PKGS[*]} but a binary is still missing:" >&2
    for b in promtool prometheus alertmanager amtool; do
        command -v "$b" >/dev/null 2>&1 || echo "  missing: $b" >&2
    done
    exit 1
fi
echo "install-prometheus.sh: $(prometheus --version 2>&1 | head -1)"
echo "install-prometheus.sh: $(alertmanager --version 2>&1 | head -1)"
