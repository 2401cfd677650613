#!/usr/bin/env bash
# Prints how many scenario runs `make e2e` runs at once on this machine:
# as many as its memory holds (a run's plane, lab and workload clusters
# peak at about RUN_MIB) and its cores keep busy (a run uses a core about
# half the time: RUNS_PER_CORE), at least 1.
set -euo pipefail
RUN_MIB=${RUN_MIB:-2048}
RUNS_PER_CORE=${RUNS_PER_CORE:-2}
avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
by_memory=$(( avail_mib / RUN_MIB ))
by_cpu=$(( $(nproc) * RUNS_PER_CORE ))
n=$(( by_memory < by_cpu ? by_memory : by_cpu ))
echo $(( n < 1 ? 1 : n ))
