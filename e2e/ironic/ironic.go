package ironic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/upgradelab/upgradelab/internal/loopback"
	"github.com/upgradelab/upgradelab/internal/proc"
	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/lab"
)

// Binaries are the programs of Debian's Ironic packages Start runs.
var binaries = []string{"/usr/bin/ironic", "/usr/bin/ironic-dbsync", "/usr/bin/ironic-inspector", "/usr/bin/ironic-inspector-dbsync"}

// ErrNotInstalled is returned by Start when Ironic's programs are missing.
var ErrNotInstalled = errors.New("Ironic is not installed: run scripts/install-deps.sh metal3 (Debian packages ironic-api, ironic-conductor and ironic-inspector)")

// Options say where Ironic keeps its files and whom it trusts.
type Options struct {
	// Dir holds ironic.conf, inspector.conf, the databases, the logs and
	// the HTTP boot root (http/).
	Dir string
	// Ready bounds the wait for the APIs to answer (default 2 min: they
	// start beside the plane, on the same cores).
	Ready time.Duration
	// TrustedCA is a CA file Ironic trusts for every BMC, as a site's
	// trust store would hold its BMCs' CA (baremetal-operator names no CA
	// per host); empty trusts only what each node's redfish_verify_ca
	// names.
	TrustedCA string
}

// Ironic is a running Ironic and ironic-inspector with Ironic's HTTP
// boot root served.
type Ironic struct {
	// URL is the API's root, http://127.0.0.1:PORT.
	URL string
	// HTTPURL serves the boot root (the ISOs Ironic builds).
	HTTPURL string
	// BMOURL is the API as baremetal-operator v0.11 reaches it (see
	// compat).
	BMOURL string
	// InspectorURL is ironic-inspector's API.
	InspectorURL string
	// Version is the Ironic release (ironic --version), APIVersion the
	// highest API microversion it offers.
	Version, APIVersion string
	// Dir is Options.Dir.
	Dir string

	proc, inspector *proc.Process
	http            *http.Server
	compat          *http.Server

	// started closes when Launch's start-up has ended, startErr is how;
	// cancelStart cuts it short.
	started     chan struct{}
	startErr    error
	cancelStart context.CancelFunc
}

// Start configures Ironic and ironic-inspector in o.Dir, creates their
// databases and starts them, returning once both APIs answer.
func Start(ctx context.Context, o Options) (*Ironic, error) {
	ir, err := Launch(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := ir.Wait(); err != nil {
		ir.Stop()
		return nil, err
	}
	return ir, nil
}

// Launch is Start without the wait: it writes the configuration and
// serves the boot root, so every URL is set when it returns, and
// creates the databases and starts both services in the background.
// Wait says when their APIs answer. Their start-up is seconds of
// Python, which a caller spends starting something else.
func Launch(ctx context.Context, o Options) (*Ironic, error) {
	for _, b := range binaries {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%w (%s: %w)", ErrNotInstalled, b, err)
		}
	}
	ports, err := loopback.Ports(4)
	if err != nil {
		return nil, err
	}
	ir := &Ironic{Dir: o.Dir, URL: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), HTTPURL: fmt.Sprintf("http://127.0.0.1:%d", ports[1]),
		BMOURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2]), InspectorURL: fmt.Sprintf("http://127.0.0.1:%d", ports[3])}
	confs, err := ir.writeConfigs(o, ports[0], ports[3])
	if err != nil {
		return nil, err
	}
	if err := ir.serveHTTP(ports[1]); err != nil {
		return nil, err
	}
	if err := ir.serveCompat(ports[2], ir.URL); err != nil {
		ir.Stop()
		return nil, err
	}
	lctx, cancel := context.WithCancel(ctx)
	ir.started, ir.cancelStart = make(chan struct{}), cancel
	go func() {
		defer close(ir.started)
		if ir.startErr = createDatabases(lctx, confs); ir.startErr == nil {
			ir.startErr = ir.launch(lctx, o, confs)
		}
	}()
	return ir, nil
}

// Wait returns once both APIs answer, or with why they did not.
func (ir *Ironic) Wait() error {
	<-ir.started
	return ir.startErr
}

// configs are the paths of the two services' configuration files.
type configs struct{ ironic, inspector string }

// createDatabases creates both schemas at once (each is seconds of
// Python).
func createDatabases(ctx context.Context, c configs) error {
	errs := make(chan error, 2)
	for _, cmd := range [][]string{{"/usr/bin/ironic-dbsync", "--config-file", c.ironic, "create_schema"},
		{"/usr/bin/ironic-inspector-dbsync", "--config-file", c.inspector, "upgrade"}} {
		go func() {
			if out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%s: %w\n%s", strings.Join(cmd, " "), err, out)
				return
			}
			errs <- nil
		}()
	}
	return errors.Join(<-errs, <-errs)
}

// launch starts inspector and Ironic and waits for both APIs.
func (ir *Ironic) launch(ctx context.Context, o Options, c configs) error {
	env := cleanEnv(os.Environ())
	var err error
	if ir.inspector, err = proc.StartIn("ironic-inspector", "/usr/bin/ironic-inspector", []string{"--config-file", c.inspector}, env, o.Dir); err != nil {
		return err
	}
	if o.TrustedCA != "" {
		env = append(env, "REQUESTS_CA_BUNDLE="+o.TrustedCA)
	}
	if ir.proc, err = proc.StartIn("ironic", "/usr/bin/ironic", []string{"--config-file", c.ironic}, env, o.Dir); err != nil {
		return err
	}
	ready := o.Ready
	if ready == 0 {
		ready = 2 * time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, ready)
	defer cancel()
	// The release, asked while the API comes up (a second of Python).
	version := make(chan string, 1)
	go func() {
		out, _ := exec.CommandContext(ctx, "/usr/bin/ironic", "--version").CombinedOutput()
		version <- strings.TrimSpace(string(out))
	}()
	if err := ir.proc.WaitHealthy(wctx, ir.URL+"/v1"); err != nil {
		return err
	}
	if err := ir.inspector.WaitHealthy(wctx, ir.InspectorURL+"/v1"); err != nil {
		return err
	}
	if ir.APIVersion, err = NewClient(ir.URL).Version(ctx); err != nil {
		return err
	}
	ir.Version = <-version
	return nil
}

// Stop cuts short a start-up still under way (Launch), writes every
// node's details to nodes.json in Dir (what Ironic knew last, for the
// run's artifacts) and ends Ironic, inspector and the HTTP servers.
func (ir *Ironic) Stop() {
	if ir.started != nil {
		ir.cancelStart()
		<-ir.started
	}
	if ir.proc != nil && ir.proc.Running() {
		if err := ir.dumpNodes(); err != nil {
			_ = os.WriteFile(filepath.Join(ir.Dir, "nodes.json"), []byte(fmt.Sprintf("{\"error\": %q}\n", err.Error())), 0o644)
		}
		ir.proc.Stop(10 * time.Second)
	}
	if ir.inspector != nil {
		ir.inspector.Stop(10 * time.Second)
	}
	if ir.http != nil {
		ir.http.Close()
	}
	if ir.compat != nil {
		ir.compat.Close()
	}
}

// dumpNodes writes Ironic's answer to a detailed node list to nodes.json.
func (ir *Ironic) dumpNodes() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var nodes json.RawMessage
	if err := NewClient(ir.URL).Do(ctx, http.MethodGet, "/v1/nodes?detail=true", nil, &nodes); err != nil {
		return err
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, nodes, "", "  "); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(ir.Dir, "nodes.json"), pretty.Bytes(), 0o644)
}

// Processes are ironic's and ironic-inspector's, for their CPU and
// memory.
func (ir *Ironic) Processes() []*proc.Process { return []*proc.Process{ir.proc, ir.inspector} }

// cleanEnv is env without the CA bundle variables Python's requests
// prefers to the CA sushy passes for a BMC.
func cleanEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if strings.HasPrefix(kv, "REQUESTS_CA_BUNDLE=") || strings.HasPrefix(kv, "CURL_CA_BUNDLE=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// serveHTTP serves the boot root on port.
func (ir *Ironic) serveHTTP(port int) error {
	root := filepath.Join(ir.Dir, "http")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("ironic's HTTP boot root: %w", err)
	}
	ir.http = &http.Server{Handler: http.FileServer(http.Dir(root)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ir.http.Serve(ln) }()
	return nil
}

// writeConfigs writes ironic.conf, inspector.conf (and a bootloader
// image) and returns their paths.
func (ir *Ironic) writeConfigs(o Options, apiPort, inspectorPort int) (configs, error) {
	c := configs{ironic: filepath.Join(o.Dir, "ironic.conf"), inspector: filepath.Join(o.Dir, "inspector.conf")}
	for _, d := range []string{o.Dir, filepath.Join(o.Dir, "tmp"), filepath.Join(o.Dir, "http")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return c, err
		}
	}
	bootloader := filepath.Join(o.Dir, "esp.img")
	if err := writeESP(bootloader); err != nil {
		return c, err
	}
	files := []struct {
		path string
		tmpl *template.Template
		data map[string]any
	}{
		{c.ironic, configTemplate, map[string]any{
			"Dir": o.Dir, "APIPort": apiPort, "URL": ir.URL, "HTTPURL": ir.HTTPURL, "Bootloader": bootloader, "Allowed": o.Dir,
			"InspectorURL": ir.InspectorURL, "InspectorCallback": fmt.Sprintf("http://0.0.0.0:%d", inspectorPort)}},
		{c.inspector, inspectorTemplate, map[string]any{"Dir": o.Dir, "Port": inspectorPort, "IronicURL": ir.URL}},
	}
	for _, f := range files {
		var b strings.Builder
		if err := f.tmpl.Execute(&b, f.data); err != nil {
			return c, err
		}
		if err := os.WriteFile(f.path, []byte(b.String()), 0o644); err != nil {
			return c, err
		}
	}
	return c, nil
}

// BootScriptURL is Ironic's iPXE entry script, which a site's DHCP
// offers network-booting hosts: it chains the config Ironic writes for
// the booting port's MAC. Ironic writes it the first time it prepares a
// network boot; until then it is a 404 and the host boots on.
func (ir *Ironic) BootScriptURL() string { return ir.HTTPURL + "/boot.ipxe" }

// MinScale is the fastest time scale a lab under Ironic runs at. Ironic
// acts in wall time: after asking a BMC for power it polls the power
// state for about a second before it moves the node on (to inspect
// wait, say), and inspector refuses an inspection report that arrives
// before that. On a real server the firmware's POST alone outlasts it;
// the lab's shortest power-on to a running ramdisk (POST and boot,
// 70 s) must too, with room for a loaded machine: 3.5 s at 0.05.
const MinScale = timescale.Scale(0.05)

// MinScaleIPMI is MinScale for a lab with hosts Ironic reaches over IPMI
// only. Ironic keeps its ipmitool commands to one BMC five seconds apart
// ([ipmi] min_command_interval), so the power status that moves a node
// on after it powered the host comes five seconds or more after the
// power-on: the lab's 70 s from power-on to a running ramdisk must
// outlast that, with room for a loaded machine: 14 s at 0.2.
const MinScaleIPMI = timescale.Scale(0.2)

// MinScaleFor is the floor for def: MinScaleIPMI when any host's BMC
// serves IPMI only, else MinScale.
func MinScaleFor(def *lab.Definition) timescale.Scale {
	for _, h := range def.Spec.Hosts {
		if !h.BMC.Serves(lab.ProtocolRedfish) {
			return MinScaleIPMI
		}
	}
	return MinScale
}
