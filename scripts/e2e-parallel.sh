#!/usr/bin/env bash
# Prints how many scenario runs `make e2e` runs at once on this machine:
# as many as its memory holds and its cores keep busy, at least 1.
# On 2 cores (four runs at once) a run's processes (its
# kube-apiserver about 600 MiB, etcd, CAPI's and the provider's managers,
# its share of the harness) hold about 1.2 GiB, RUN_MIB leaves room above
# that; a run keeps a core busy about 60 % of its time (its waits are
# modelled lab time and CAPI's own retries), so two runs per core keep the
# cores busy without stretching every run's waits.
set -euo pipefail
RUN_MIB=${RUN_MIB:-2048}
RUNS_PER_CORE=${RUNS_PER_CORE:-2}
avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
by_memory=$(( avail_mib / RUN_MIB ))
by_cpu=$(( $(nproc) * RUNS_PER_CORE ))
n=$(( by_memory < by_cpu ? by_memory : by_cpu ))
echo $(( n < 1 ? 1 : n ))
