# Sourced by the guest-side scripts (tests/rdma/preload_*.sh,
# benchmarks/rdma/syscalls.sh); not a test itself.

# Waits until something listens on TCP port PORT, up to TENTHS tenths of a
# second (default 200); says so on stderr and returns 1 otherwise.
wait_listening() {  # PORT [TENTHS]
  for _ in $(seq "${2:-200}"); do
    if ss -ltn | grep -q ":$1 "; then return 0; fi
    sleep 0.1
  done
  echo "FAIL: nothing listens on $1" >&2
  return 1
}
