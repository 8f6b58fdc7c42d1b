#!/bin/sh
# mpi_rsh.sh HOST COMMAND...: OpenMPI's plm_rsh_agent for the emulated rack. Instead of ssh, start COMMAND (an orted)
# in the worker namespace that owns address HOST (10.77.0.(11+rank) -> $RACK_PREFIX-w<rank>), so every MPI rank runs
# in its own namespace and talks to the others over the bridge.
host=$1
shift
case "$host" in
  10.77.0.*) rank=$(( ${host##*.} - 11 )) ;;
  *) echo "mpi_rsh.sh: $host is not a rack worker address" >&2; exit 1 ;;
esac
exec ip netns exec "$RACK_PREFIX-w$rank" /bin/sh -c "$*"
