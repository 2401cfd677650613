#!/usr/bin/env bash
# Prints how many scenario runs `make e2e` runs at once on this machine:
# as many as its memory holds and its cores keep busy, at least 1.
# On 2 cores (six runs at once) a run's processes (its
# kube-apiserver about 600 MiB, etcd, CAPI's and the provider's managers,
# its share of the harness) hold about 1.2 GiB, RUN_MIB leaves room above
# that. With CAPI's reconcile rate limit (as it ships) a run keeps a core
# busy about a quarter of its time (26 runs: 1124 s of CPU over 4331 s of
# runs); the rest is CAPI's one-second pacing and its drain and error
# retries. Three runs per core keep both cores busy: the suite took
# 13m20s at six runs at once and 14m2s at eight (the cores saturated,
# every run slower).
set -euo pipefail
RUN_MIB=${RUN_MIB:-2048}
RUNS_PER_CORE=${RUNS_PER_CORE:-3}
avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
by_memory=$(( avail_mib / RUN_MIB ))
by_cpu=$(( $(nproc) * RUNS_PER_CORE ))
n=$(( by_memory < by_cpu ? by_memory : by_cpu ))
echo $(( n < 1 ? 1 : n ))
