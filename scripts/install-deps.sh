#!/usr/bin/env bash
# Installs the Debian 12 packages vsocket needs to build, test and benchmark
# (scdoc: the man pages; man-db, dpkg-dev and file: scripts/test-install.sh
# renders them and builds the Debian package with dpkg-shlibdeps).
# Idempotent: does nothing when everything is present.  Needs root.
#   --apps  also the real programs used by tests and benchmarks/apps
#   --fuzz  also clang, for the libFuzzer targets (scripts/fuzz.sh only; the
#           default build and CI's test stage do not need it)
#   --ccache also ccache (scripts/test.sh with VSOCKET_CCACHE_DIR set)
# Options combine: install-deps.sh --apps --ccache.
set -euo pipefail
packages=(
  g++ cmake make pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  libibverbs-dev librdmacm-dev liburing-dev
  python3 iperf3 socat netcat-openbsd ucspi-tcp openbsd-inetd
  scdoc man-db dpkg-dev file
)
args=" $* "
if [[ $args == *" --fuzz "* ]]; then
  # The compiler-rt runtimes (libFuzzer, ASan) are only a recommendation of
  # clang, which --no-install-recommends leaves out.
  packages+=(clang libclang-rt-14-dev)
fi
if [[ $args == *" --ccache "* ]]; then
  packages+=(ccache)
fi
if [[ $args == *" --apps "* ]]; then
  packages+=(curl sockperf redis-server redis-tools nginx-light wrk memcached
             libmemcached-tools python3-torch vsftpd apache2
             openmpi-bin python3-mpi4py python3-numpy)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Servers in these packages must not start as system services here.
  added_policy=""
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    added_policy=1
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if [[ -n "$added_policy" ]]; then rm -f /usr/sbin/policy-rc.d; fi
fi
