// Package fleet runs many clusters on one management plane and one lab,
// upgrades them in one wave, and measures what the wave costs the plane.
// It is the engine of upgradelab fleet and upgradelab fleet curve
// (cmd/upgradelab); docs/FLEET.md says how to run a fleet and read its
// report.
//
// # The fleet
//
// A fleet file (fixtures/fleets; [File], [Parse]) names groups of
// clusters, each Count copies of one scenario file, with an optional
// cluster shape that replaces the scenario's and is checked against its
// strategy and lab as the scenario file would be (scenario.WithCluster).
// [Load] gives every cluster a copy of its scenario's lab and composes one
// lab of them (lab.Compose): hosts renamed CLUSTER-HOST, with MACs and
// addresses of their own, a network widened to its /16 when it runs out.
// The file's hosts: adds idle hosts beyond what the clusters take, copies
// of the first cluster's first host, enrolled nowhere. A fleet takes only
// fault-free scenarios on the modelled lab (backend test), all in the
// fleet's one form: a fault acts on a whole plane or lab, not on one
// cluster.
//
// # The run
//
// [Run] starts one runner.Env with the managers of every strategy in the
// fleet and runs each cluster as an ordinary runner.Run with
// runner.Options.Shared. A shared run sees the Env from a namespace of its
// own (Env.InNamespace), labelled for its strategy's extensions only, so
// the in-place extension never serves a scale-in cluster's namespace
// (CAPI would update its Machines in place). It enrolls, records and is
// judged on its own lab hosts only, and it reads its namespace from one
// watch-fed cache of the whole plane (Env.Watched) rather than one per run.
// Each run reads the plane's RBAC refusals at its end, so one refusal
// breaks rbac-sufficient on every cluster.
//
// The wave is the fleet's runner.Wave. The runner calls Admit before a run
// enrolls its hosts, Start before its upgrade step and End once after it
// (or when the run stops early), and pauses the run's scenario timeout
// while it waits. Admit lets at most provision.concurrent clusters
// provision at once (0: all), a place freed when one arrives at Start or
// ends. No upgrade starts until every cluster has arrived or ended, so the
// wave's time is the upgrade alone; then the clusters go all at once or in
// batches of wave.batch, in the order they arrived, each batch once the one
// before has ended.
//
// A loaded plane is slower than a lone run's, so a fleet widens the
// provider config's provisioning and upgrade intervals ([DefaultProvision],
// [DefaultUpgrade], never below the config's) and the settle
// ([DefaultSettle]), and adds what it widened to each scenario's timeout
// (runner.Options.ExtraTime). With Options.RateLimitedReconciles (the
// command's default) CAPI's managers run as CAPI ships them: the
// ReconcilerRateLimiting gate also holds each reconcile until the
// manager's cache has the controller's last write, and without that guard
// KCP on a saturated plane can create a second init Machine for a
// one-replica control plane.
//
// # Measuring
//
// The meter reads at three marks (plane up, wave start, end) each plane
// process's CPU and memory and the harness's own (proc.ReadUsage; the peak
// is the kernel's VmHWM, which no sample misses), the API server's
// apiserver_request_total by verb, resource and code, and each manager's
// controller-runtime metrics from the diagnostics address it is started
// with (Plane.MetricsURLs). Between marks it samples the total RSS and the
// workqueue depths (every 2 s by default), parsing only the workqueue_depth
// family.
//
// The harness profiles its own CPU for the whole run ([HarnessProfile])
// and charges each sample to the innermost upgradelab package on its stack
// ([Component]): which part of the harness (workload API servers,
// recorders, runners) a larger fleet costs. kube-apiserver is profiled
// through its own /debug/pprof/profile for Options.APIServerProfile (30 s
// by default), starting that long into the provisioning and into the wave
// ([APIServerProfileProvisioning], [APIServerProfileWave]); each sample is
// charged to the request handler on its stack (PATCH, PUT, the watch
// cache, ...). With the request counts by kind, the report names what
// costs the API server most. Options.ManagerArgs gives managers more
// flags (client QPS and burst, concurrency), and the report names them.
//
// [Report] puts it together: wall, provisioning and wave times, the spread
// of per-cluster provisioning, upgrade and settle times, and the costs
// above; a figure whose metrics could not be read is listed as unread,
// never shown as zero. [Report.Write] keeps fleet.txt and fleet.json. Each
// cluster's verdicts are ordinary result.Result values, whose Cluster
// names the fleet cluster and joins their Key; the command writes them as
// report.html, results.json and junit.xml.
//
// # The cost curve
//
// [LoadScaled] scales a fleet file's groups to a lab size: counts in
// proportion, at least one cluster a group, so the mix stays whole. The
// curve command runs each size as a fleet on a plane of its own, one after
// another, and [WriteCurve] keeps curve.txt, curve.json and curve.svg (time
// and memory against the lab size, drawn by hand as SVG). [ReadReport]
// reads a fleet.json back, so a curve can take points run before.
// BenchmarkFleetWave100 is make bench's run of fixtures/fleets/hundred.yaml.
package fleet
