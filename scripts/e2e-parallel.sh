#!/usr/bin/env bash
# Prints how many scenario runs `make e2e` runs at once on this machine:
# as many as its memory holds and its cores keep busy, at least 1.
# On 2 cores (four runs at once) a run's processes (its kube-apiserver
# about 600 MiB, etcd, CAPI's and the provider's managers, its share of
# the harness) hold about 1.2 GiB; RUN_MIB leaves room above that. With
# CAPI's reconcile rate limit (as it ships) a run keeps a core busy a
# quarter to a third of its time; the rest is CAPI's own pacing (a
# drained Machine waits 20 s before CAPI looks again) and its retries.
# Two runs per core, not three: on a 2-core AMD EPYC machine six at once
# (load average above 20) stretched every run, used 1620 s of CPU
# against 1430 s at four, and failed two api-availability verdicts (a
# VIP failover the starved harness modelled 21 ms late); four at once
# passed every run, in 17m40s against 15m52s.
set -euo pipefail
RUN_MIB=${RUN_MIB:-2048}
RUNS_PER_CORE=${RUNS_PER_CORE:-2}
avail_mib=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
by_memory=$(( avail_mib / RUN_MIB ))
by_cpu=$(( $(nproc) * RUNS_PER_CORE ))
n=$(( by_memory < by_cpu ? by_memory : by_cpu ))
echo $(( n < 1 ? 1 : n ))
