#!/usr/bin/env bash
# Checks what a user of an installed vsocket gets, from a finished build:
#   1. `cmake --install BUILD_DIR` into a fresh prefix under /tmp: the files
#      are where GNUInstallDirs puts them, the interposer still exports only
#      the interposed functions, and the installed vsocket-run finds the
#      installed interposer;
#   2. examples/ builds against that prefix both ways, with find_package
#      (CMAKE_PREFIX_PATH) and with pkg-config (PKG_CONFIG_PATH; also
#      --static against libvsocket.a), and each echo client/server pair
#      runs on shared memory over loopback, once more under the installed
#      vsocket-run with VSOCKET_STATS=1, and python3 under it;
#   3. `man` renders every installed man page (MANPATH=prefix/share/man);
#   4. `cpack -G DEB` builds the package, which is inspected (dpkg-deb -I,
#      -c).  Only when CI is set, or VSOCKET_THROWAWAY_ROOT=1 (what
#      scripts/test-in-fresh-root.sh sets), and as root, it is also
#      installed with dpkg, a real program runs under /usr/bin/vsocket-run,
#      redis-server and a preloaded redis-benchmark run there while
#      /usr/bin/vsocket-stat shows both on shm (scripts/install-deps.sh
#      --apps installs redis), and `dpkg --purge vsocket` removes it again.  Otherwise nothing outside
#      the temporary directory is touched.
#
#   scripts/test-install.sh BUILD_DIR      e.g. build-release
#
# Exit status 0 only if every check passed.  Takes 10-30 s.
set -euo pipefail

[[ $# == 1 && -d $1 ]] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)

work=$(mktemp -d /tmp/vsocket-test-install.XXXXXX)
pids=()
dpkg_installed=""
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [[ -n $dpkg_installed ]]; then dpkg --purge vsocket >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

step() { echo "-- $*"; }
fail() { echo "test-install: FAIL: $*" >&2; exit 1; }

cache_value() {  # NAME: the build's cached value
  sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"
}
libdir=$(cache_value CMAKE_INSTALL_LIBDIR)
[[ -n $libdir ]] || fail "no CMAKE_INSTALL_LIBDIR in $build/CMakeCache.txt"

# ---- 1. install into a fresh prefix ----
prefix=$work/prefix
step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log" >&2; fail "cmake --install"; }
for f in bin/vsocket-run bin/vsocket-stat bin/vsocket-bench \
         "$libdir/libvsocket.so.0" "$libdir/libvsocket.so" "$libdir/libvsocket.a" \
         "$libdir/libvsocket_preload.so" \
         include/vsocket/vsocket.h include/vsocket/vsocket.hpp \
         "$libdir/cmake/vsocket/vsocketConfig.cmake" \
         "$libdir/cmake/vsocket/vsocketConfigVersion.cmake" \
         "$libdir/cmake/vsocket/vsocketTargets.cmake" \
         "$libdir/pkgconfig/vsocket.pc" \
         share/man/man1/vsocket-run.1.gz share/man/man1/vsocket-bench.1.gz \
         share/man/man1/vsocket-stat.1.gz share/man/man7/vsocket.7.gz; do
  [[ -e $prefix/$f ]] || fail "not installed: $f"
done
grep -qx "prefix=$prefix" "$prefix/$libdir/pkgconfig/vsocket.pc" ||
  fail "vsocket.pc does not name the install prefix $prefix"

step "the installed interposer exports only the interposed functions"
preload=$prefix/$libdir/libvsocket_preload.so
expected=$(sed -e 's:/\*.*\*/::g' "$top/preload/exports.map" |
             awk '/global:/ { g = 1; next } /local:/ { g = 0 } g' |
             tr ';' '\n' | tr -d ' \t' | grep -v '^$' | sort)
defined=$(nm -D --defined-only "$preload" | awk '{ print $3 }' | sort)
[[ $expected == "$defined" ]] ||
  fail "exports differ from preload/exports.map: $(diff <(echo "$expected") <(echo "$defined") | grep '^[<>]' | tr '\n' ' ')"
if readelf -d "$preload" | grep -E -q 'libstdc\+\+|libgcc_s'; then
  fail "the installed interposer links the C++ runtime dynamically"
fi

step "the installed vsocket-run finds the installed interposer"
got=$("$prefix/bin/vsocket-run" -- sh -c 'echo "$LD_PRELOAD"')
[[ $got == "$(realpath "$preload")" ]] || fail "vsocket-run preloads '$got', not $preload"
"$prefix/bin/vsocket-bench" --help >/dev/null || fail "installed vsocket-bench --help"

# ---- 2. the example, against the installed tree ----
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
step "examples/ with find_package(vsocket) (CMAKE_PREFIX_PATH=$prefix)"
cmake -S "$top/examples" -B "$work/example-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/example-cmake.log" 2>&1 &&
  cmake --build "$work/example-cmake" >>"$work/example-cmake.log" 2>&1 ||
  { cat "$work/example-cmake.log" >&2; fail "building examples/ with CMake"; }
for how in pkgconfig pkgconfig-static; do
  step "examples/ with make and pkg-config ($how)"
  cp -r "$top/examples" "$work/example-$how"
  static=0
  [[ $how == *static ]] && static=1
  make -C "$work/example-$how" STATIC=$static >"$work/example-$how.log" 2>&1 ||
    { cat "$work/example-$how.log" >&2; fail "building examples/ with pkg-config ($how)"; }
done

# Runs a server (stdout: "port N") and a client against it.  Usage:
#   run_pair NAME SERVER_CMD... :: CLIENT_CMD...    (the client gets the port)
run_pair() {
  local name=$1; shift
  local server=() client=()
  while [[ $1 != :: ]]; do server+=("$1"); shift; done
  shift
  client=("$@")
  local out=$work/$name
  "${server[@]}" >"$out.server.out" 2>"$out.server.err" &
  local spid=$!
  pids+=("$spid")
  local port="" i
  for ((i = 0; i < 100; i++)); do
    # (the shell may not have created the file yet)
    port=$(sed -n 's/^port \([0-9]*\)$/\1/p' "$out.server.out" 2>/dev/null || true)
    [[ -n $port ]] && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$out.server.err" >&2; fail "$name: the server did not listen"; }
  local status=0
  timeout 30 "${client[@]}" "$port" >"$out.client.out" 2>"$out.client.err" || status=$?
  if ((status)); then
    cat "$out.client.out" "$out.client.err" >&2
    fail "$name: the client exited $status"
  fi
  status=0
  timeout 10 tail --pid="$spid" -f /dev/null || fail "$name: the server did not exit"
  wait "$spid" || status=$?
  ((status == 0)) || { cat "$out.server.err" >&2; fail "$name: the server exited $status"; }
  if [[ -s $out.client.out ]]; then echo "   $name: $(tr '\n' ' ' <"$out.client.out")"; fi
}

libpath=$prefix/$libdir
ex=$work/example-cmake
step "echo over loopback, each build of the example"
run_pair cmake "$ex/vsocket-echo-server" 0 :: "$ex/vsocket-echo-client" -e shm
for how in pkgconfig pkgconfig-static; do
  ex=$work/example-$how
  run_pair "$how" env LD_LIBRARY_PATH="$libpath" "$ex/vsocket-echo-server" 0 :: \
    env LD_LIBRARY_PATH="$libpath" "$ex/vsocket-echo-client" -b 1048576 -e shm
done

step "echo under the installed vsocket-run, VSOCKET_STATS=1"
ex=$work/example-cmake
run_pair under-run env VSOCKET_STATS=1 "$prefix/bin/vsocket-run" "$ex/vsocket-echo-server" 0 :: \
  env VSOCKET_STATS=1 "$prefix/bin/vsocket-run" "$ex/vsocket-echo-client" -e shm
for side in server client; do
  grep -q '^{"pid":[0-9]*,"transports":{"shm":{"connections":1,' "$work/under-run.$side.err" ||
    { cat "$work/under-run.$side.err" >&2; fail "no shm statistics line from the $side"; }
done

# A plain program, python3's socket module, under the installed launcher.
cat >"$work/echo.py" <<'EOF'
import socket, sys
if sys.argv[1] == "server":
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    print("port", s.getsockname()[1], flush=True)
    c, _ = s.accept()
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
else:
    c = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
    data = bytes(range(256)) * 4096
    c.sendall(data)
    c.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += b
    sys.exit(0 if got == data else "echo differs")
EOF
if command -v python3 >/dev/null; then
  step "python3 echo under the installed vsocket-run --stats"
  run_pair python "$prefix/bin/vsocket-run" --stats -- python3 "$work/echo.py" server :: \
    "$prefix/bin/vsocket-run" --stats -- python3 "$work/echo.py" client
  for side in server client; do
    grep -q '"transports":{"shm":{"connections":1,' "$work/python.$side.err" ||
      { cat "$work/python.$side.err" >&2; fail "python3 $side: not on shm"; }
  done
  echo "   python: both statistics lines say shm"
fi

# ---- 3. man pages ----
step "man renders each page (MANPATH=$prefix/share/man)"
for page in 1:vsocket-run 1:vsocket-stat 1:vsocket-bench 7:vsocket; do
  section=${page%%:*} name=${page#*:}
  text=$(MANPATH=$prefix/share/man MANWIDTH=80 man -P cat "$section" "$name" 2>"$work/man.err") ||
    { cat "$work/man.err" >&2; fail "man $section $name"; }
  grep -q "^NAME" <<<"$text" && grep -q "$name" <<<"$text" ||
    fail "man $section $name rendered no NAME section"
  [[ -s $work/man.err ]] && { cat "$work/man.err" >&2; fail "man $section $name warned"; }
done

# ---- 4. the Debian package ----
step "cpack -G DEB"
(cd "$build" && cpack -G DEB -B "$work/package" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB"; }
deb=$(ls "$work"/package/vsocket_*.deb)
dpkg-deb -I "$deb" >"$work/deb.info"
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's:^\./:/:' >"$work/deb.files"
grep -q '^ Package: vsocket$' "$work/deb.info" || fail "package name"
for dep in libc6 libstdc++6 librdmacm1 libibverbs1; do
  if [[ $dep == librdmacm1 || $dep == libibverbs1 ]] &&
     [[ $(cache_value VSOCKET_HAVE_RDMA) != ON ]]; then continue; fi
  grep -q "^ Depends:.*\b$dep\b" "$work/deb.info" ||
    { cat "$work/deb.info" >&2; fail "the package does not depend on $dep"; }
done
for f in /usr/bin/vsocket-run /usr/bin/vsocket-stat /usr/bin/vsocket-bench \
         "/usr/$libdir/libvsocket_preload.so" "/usr/$libdir/libvsocket.so.0" \
         "/usr/$libdir/libvsocket.a" "/usr/$libdir/pkgconfig/vsocket.pc" \
         "/usr/$libdir/cmake/vsocket/vsocketConfig.cmake" \
         /usr/include/vsocket/vsocket.h \
         /usr/share/man/man1/vsocket-run.1.gz /usr/share/man/man1/vsocket-bench.1.gz \
         /usr/share/man/man1/vsocket-stat.1.gz /usr/share/man/man7/vsocket.7.gz; do
  grep -qx "$f" "$work/deb.files" || fail "not in the package: $f"
done
echo "   $(basename "$deb"): $(sed -n 's/^ Depends: //p' "$work/deb.info")"

if [[ -z ${CI:-} && ${VSOCKET_THROWAWAY_ROOT:-} != 1 ]]; then
  echo "   (not installing the package: neither CI nor VSOCKET_THROWAWAY_ROOT=1 is set)"
  echo "test-install: all checks passed"
  exit 0
fi
((EUID == 0)) || fail "installing the package (CI is set) needs root"
if dpkg-query -W -f='${Status}' vsocket 2>/dev/null | grep -q "ok installed"; then
  fail "a vsocket package is already installed here; not replacing it"
fi
step "dpkg -i $(basename "$deb")"
dpkg_installed=1
dpkg -i "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg -i"; }
[[ $(man -w vsocket-run) == /usr/share/man/man1/vsocket-run.1.gz ]] || fail "man -w vsocket-run"
man -P cat vsocket-run >/dev/null 2>&1 || fail "man vsocket-run after the install"
unset PKG_CONFIG_PATH
[[ $(pkg-config --variable=prefix vsocket) == /usr ]] || fail "pkg-config finds no vsocket in /usr"
step "examples/ with find_package(vsocket) against the package"
cmake -S "$top/examples" -B "$work/example-deb" >"$work/example-deb.log" 2>&1 &&
  cmake --build "$work/example-deb" >>"$work/example-deb.log" 2>&1 ||
  { cat "$work/example-deb.log" >&2; fail "building examples/ against the package"; }
grep -q "^vsocket_DIR:PATH=/usr/$libdir/cmake/vsocket$" "$work/example-deb/CMakeCache.txt" ||
  fail "find_package(vsocket) did not find the package's /usr/$libdir/cmake/vsocket"
run_pair deb-example "$work/example-deb/vsocket-echo-server" 0 :: \
  "$work/example-deb/vsocket-echo-client" -e shm
vsocket-bench --help >/dev/null || fail "/usr/bin/vsocket-bench --help"
step "python3 echo under /usr/bin/vsocket-run --stats"
[[ $(command -v vsocket-run) == /usr/bin/vsocket-run ]] || fail "vsocket-run is not /usr/bin/vsocket-run"
run_pair packaged /usr/bin/vsocket-run --stats -- python3 "$work/echo.py" server :: \
  /usr/bin/vsocket-run --stats -- python3 "$work/echo.py" client
for side in server client; do
  grep -q '"transports":{"shm":{"connections":1,' "$work/packaged.$side.err" ||
    { cat "$work/packaged.$side.err" >&2; fail "packaged python3 $side: not on shm"; }
done
echo "   packaged: both statistics lines say shm"

step "redis-server and redis-benchmark under /usr/bin/vsocket-run, seen by vsocket-stat"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
  fail "redis-server and redis-benchmark are needed (scripts/install-deps.sh --apps)"
[[ $(command -v vsocket-stat) == /usr/bin/vsocket-stat ]] || fail "vsocket-stat is not /usr/bin/vsocket-stat"
redis_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/vsocket-run --stats -- redis-server --port "$redis_port" --bind 127.0.0.1 \
  --save '' --appendonly no >"$work/redis.out" 2>"$work/redis.err" &
redis_pid=$!
pids+=("$redis_pid")
hex_port=$(printf ':%04X$' "$redis_port")
for ((i = 0; i < 100; i++)); do  # listening (state 0A) in /proc/net/tcp
  awk -v p="$hex_port" '$2 ~ p && $4 == "0A" { found = 1; exit } END { exit !found }' \
    /proc/net/tcp && break
  kill -0 "$redis_pid" 2>/dev/null || break
  sleep 0.1
done
((i < 100)) && kill -0 "$redis_pid" 2>/dev/null ||
  { cat "$work/redis.out" "$work/redis.err" >&2; fail "redis-server did not listen"; }
/usr/bin/vsocket-run --stats -- redis-benchmark -p "$redis_port" -c 4 -n 100000000 -t ping,set \
  -q >"$work/bench.out" 2>"$work/bench.err" &
bench_pid=$!
pids+=("$bench_pid")
sleep 2
vsocket-stat --json >"$work/stat.json" || fail "vsocket-stat --json"
vsocket-stat -p "$redis_pid" >"$work/stat.txt" || fail "vsocket-stat -p $redis_pid"
python3 - "$work/stat.json" "$redis_pid" "$bench_pid" <<'PY' || { cat "$work/stat.json" "$work/bench.err" >&2; fail "vsocket-stat does not show both redis processes on shm"; }
import json, sys
procs = {p["pid"]: p for p in json.load(open(sys.argv[1]))["processes"]}
for pid, program in ((int(sys.argv[2]), "redis-server"), (int(sys.argv[3]), "redis-benchmark")):
    p = procs[pid]
    assert p["program"].startswith(program[:15]), p["program"]
    on_shm = [c for c in p["connections"] if c["transport"] == "shm" and c["bytes_sent"] > 0]
    assert len(on_shm) >= 4, p["connections"]
    print("   %s (pid %d): %d connections on shm, %d bytes sent" %
          (program, pid, len(on_shm), sum(c["bytes_sent"] for c in on_shm)))
PY
grep -q "redis-server" "$work/stat.txt" || { cat "$work/stat.txt" >&2; fail "vsocket-stat -p: no redis-server"; }
kill -INT "$bench_pid" "$redis_pid"
wait "$bench_pid" 2>/dev/null || true
wait "$redis_pid" 2>/dev/null || true
grep -q '"transports":{"shm":{"connections":' "$work/redis.err" ||
  { cat "$work/redis.err" >&2; fail "redis-server's statistics line says no shm"; }
echo "   redis-server: $(grep -o '"shm":{[^}]*}' "$work/redis.err")"
step "dpkg --purge vsocket"
dpkg --purge vsocket >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log" >&2; fail "dpkg --purge vsocket"; }
dpkg_installed=""
[[ ! -e /usr/bin/vsocket-run ]] || fail "/usr/bin/vsocket-run is still there after dpkg --purge"
if dpkg-query -W vsocket >/dev/null 2>&1; then fail "dpkg still lists vsocket after --purge"; fi
echo "test-install: all checks passed"
