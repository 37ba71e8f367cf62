#!/usr/bin/env bash
# Open MPI's remote-shell agent for the two-guest test (mpi_pair.sh), in
# place of ssh: mpirun runs it as `mpi_file_rsh.sh HOST COMMAND...` to start
# its daemon on HOST. It writes COMMAND to $VSOCKET_MPI_LAUNCH_DIR/
# $VSOCKET_MPI_RUN.launch (a directory both guests share), where the other
# guest's loop runs it, then waits, as ssh would, until that guest writes the
# command's exit status to $VSOCKET_MPI_RUN.done, and exits with it.
set -u
dir=${VSOCKET_MPI_LAUNCH_DIR:?} run=${VSOCKET_MPI_RUN:?}
shift  # the host: mpi_pair.sh has one remote guest
printf '%s\n' "$*" >"$dir/$run.launch.tmp" && mv "$dir/$run.launch.tmp" "$dir/$run.launch"
while [[ ! -s $dir/$run.done ]]; do sleep 0.2; done
exit "$(cat "$dir/$run.done")"
