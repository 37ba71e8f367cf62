# Sourced by the host side of the multi-guest tests (ddp_pair.sh,
# mpi_pair.sh); not a test itself.

# Ends the test after the guests failed: each rank's stderr file in DIR
# (*.stderr) shows its last lines, then exit with the guests' STATUS.
fail_with_rank_logs() {  # NAME STATUS DIR
  echo "$1: FAIL: guests ended with status $2" >&2
  local f
  for f in "$3"/*.stderr; do
    [[ -s $f ]] && { echo "--- ${f##*/} (last lines)" >&2; tail -n 15 "$f" >&2; }
  done
  exit "$2"
}

# One value of a rank's JSON result file.
json_field() {  # FILE KEY
  /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}
