#!/usr/bin/env bash
# Installs Debian packages for the scripts that need them, the one way they
# all do it. Run as root; anyone else is told the command to run.
#
#   scripts/apt-install.sh PACKAGE...
#
# A dpkg run that was interrupted (a killed install or purge) leaves every
# later apt-get refusing to work until `dpkg --configure -a` has run; this
# script runs it first, and says so, rather than failing the whole suite.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 PACKAGE..." >&2
  exit 2
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing packages: $*; install them with: sudo apt-get install $*" >&2
  exit 1
fi
if [ -n "$(dpkg --audit 2>/dev/null)" ]; then
  echo "an earlier dpkg run was interrupted; finishing it with dpkg --configure -a" >&2
  DEBIAN_FRONTEND=noninteractive dpkg --configure -a >/dev/null
fi
echo "installing $*" >&2
apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
