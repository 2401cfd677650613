package ipa

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"strings"

	"github.com/upgradelab/upgradelab/internal/jsonhttp"
)

// command is one command the agent serves: whether Ironic gets its
// answer at once (sync) or polls the command list for it, and what it
// does.
type command struct {
	async bool
	run   func(a *Agent, ctx context.Context, params map[string]any) (map[string]any, error)
}

// commands are the commands Ironic 21.4 sends in cleaning and in a direct
// deploy, by name.
var commands = map[string]command{
	"clean.get_clean_steps":          {run: listSteps("clean", cleanSteps)},
	"clean.execute_clean_step":       {async: true, run: executeStep("clean")},
	"deploy.get_deploy_steps":        {run: listSteps("deploy", deploySteps)},
	"deploy.execute_deploy_step":     {async: true, run: executeStep("deploy")},
	"standby.get_partition_uuids":    {run: (*Agent).partitionUUIDs},
	"image.install_bootloader":       {async: true, run: (*Agent).installBootloader},
	"standby.power_off":              {async: true, run: (*Agent).powerOff},
	"standby.sync":                   {run: func(*Agent, context.Context, map[string]any) (map[string]any, error) { return map[string]any{}, nil }},
	"system.get_agent_configuration": {run: func(*Agent, context.Context, map[string]any) (map[string]any, error) { return map[string]any{}, nil }},
}

// The generic hardware manager's steps, with IPA's priorities: Ironic runs
// the clean steps of priority above zero that its configuration does not
// override, and calls write_image itself.
var (
	cleanSteps = []step{
		{Step: "erase_devices_metadata", Priority: 99, Interface: "deploy", Abortable: true},
		{Step: "erase_devices", Priority: 10, Interface: "deploy", Abortable: true},
	}
	deploySteps = []step{{Step: "write_image", Priority: 0, Interface: "deploy"}}
)

// stepActions is what each step does to the host. erase_devices is the
// same metadata erase: the lab's disk keeps nothing a full erase would
// find beyond it.
var stepActions = map[string]func(a *Agent, ctx context.Context, args map[string]any) error{
	"erase_devices_metadata": func(a *Agent, _ context.Context, _ map[string]any) error { return a.host.EraseDisk() },
	"erase_devices":          func(a *Agent, _ context.Context, _ map[string]any) error { return a.host.EraseDisk() },
	"write_image":            (*Agent).writeImage,
}

// installTries is how many boots a fresh install gets before the boot
// loader falls back, as the lab's own provisioning gives.
const installTries = 3

func listSteps(kind string, steps []step) func(*Agent, context.Context, map[string]any) (map[string]any, error) {
	return func(*Agent, context.Context, map[string]any) (map[string]any, error) {
		return map[string]any{kind + "_steps": map[string]any{"GenericHardwareManager": steps},
			"hardware_manager_version": map[string]string{"generic_hardware_manager": "1.1"}}, nil
	}
}

func executeStep(kind string) func(*Agent, context.Context, map[string]any) (map[string]any, error) {
	return func(a *Agent, ctx context.Context, params map[string]any) (map[string]any, error) {
		s, _ := params["step"].(map[string]any)
		name, _ := s["step"].(string)
		act, ok := stepActions[name]
		if !ok {
			return nil, fmt.Errorf("unknown %s step %q", kind, name)
		}
		args, _ := s["args"].(map[string]any)
		if err := act(a, ctx, args); err != nil {
			return nil, err
		}
		return map[string]any{kind + "_result": nil, kind + "_step": s}, nil
	}
}

// writeImage writes image_info's image (its sha256 checked first) and
// the config drive.
func (a *Agent) writeImage(ctx context.Context, args map[string]any) error {
	info, _ := args["image_info"].(map[string]any)
	urls, _ := info["urls"].([]any)
	if len(urls) == 0 {
		return errors.New("write_image: image_info has no urls")
	}
	u, _ := urls[0].(string)
	sum, err := sha256Of(info)
	if err != nil {
		return err
	}
	root, err := a.host.WriteImage(ctx, u, sum)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.root = root
	a.mu.Unlock()
	cd, _ := args["configdrive"].(string)
	if cd == "" {
		cd, _ = info["configdrive"].(string)
	}
	if cd == "" {
		return nil
	}
	userData, metaData, err := readConfigDrive(cd)
	if err != nil {
		return err
	}
	return a.host.WriteConfigDrive(userData, metaData)
}

// sha256Of is the image's sha256 as image_info gives it (os_hash_* or a
// bare checksum); the lab's disks check sha256 only.
func sha256Of(info map[string]any) (string, error) {
	if algo, _ := info["os_hash_algo"].(string); algo != "" {
		v, _ := info["os_hash_value"].(string)
		if algo != "sha256" {
			return "", fmt.Errorf("write_image: checksum algorithm %s: the lab's disks check sha256", algo)
		}
		return v, nil
	}
	if c, _ := info["checksum"].(string); len(c) == 64 {
		return c, nil
	}
	return "", errors.New("write_image: image_info has no sha256 (os_hash_algo sha256 or a 64-digit checksum)")
}

// partitionUUIDs names the written root and the EFI partition, stable per
// host and root.
func (a *Agent) partitionUUIDs(context.Context, map[string]any) (map[string]any, error) {
	a.mu.Lock()
	root := a.root
	a.mu.Unlock()
	return map[string]any{"root uuid": uuidOf(a.host.Name() + "/" + string(root)), "efi system partition uuid": uuidOf(a.host.Name() + "/esp")}, nil
}

// installBootloader makes the written root boot next, with the lab's
// boot counting.
func (a *Agent) installBootloader(context.Context, map[string]any) (map[string]any, error) {
	a.mu.Lock()
	root := a.root
	a.mu.Unlock()
	if root == "" {
		return nil, errors.New("install_bootloader: no image was written")
	}
	return map[string]any{}, a.host.Activate(root, installTries)
}

// powerOff answers; the host shuts down once Ironic has the answer
// (postCommand), as IPA's systemctl poweroff does.
func (a *Agent) powerOff(context.Context, map[string]any) (map[string]any, error) {
	return map[string]any{}, nil
}

func uuidOf(s string) string {
	c := crc32.ChecksumIEEE([]byte(s))
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", c, c)
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// routes serves the command API.
func (a *Agent) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/commands/", a.listCommands)
	mux.HandleFunc("POST /v1/commands/", a.postCommand)
	return mux
}

func (a *Agent) listCommands(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	out := make([]Result, 0, len(a.commands))
	for _, c := range a.commands {
		out = append(out, *c)
	}
	a.mu.Unlock()
	jsonhttp.Reply(w, http.StatusOK, map[string]any{"commands": out})
}

// postCommand runs a command: a sync one before answering, an async one
// after answering RUNNING, with a heartbeat once it is done.
func (a *Agent) postCommand(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("agent_token") != a.params.Token {
		jsonhttp.Reply(w, http.StatusUnauthorized, fault{Code: "Client", String: "Token invalid."})
		return
	}
	var cmd Command
	if err := json.NewDecoder(r.Body).Decode(&cmd); err != nil {
		jsonhttp.Reply(w, http.StatusBadRequest, fault{Code: "Client", String: "Invalid command: " + err.Error()})
		return
	}
	spec, ok := commands[cmd.Name]
	if !ok {
		jsonhttp.Reply(w, http.StatusBadRequest, fault{Code: "Client", String: "Unknown command: " + cmd.Name})
		return
	}
	res, busy := a.start(cmd.Name)
	if busy != "" {
		jsonhttp.Reply(w, http.StatusConflict, fault{Code: "Client", String: "Agent is busy: executing command " + busy})
		return
	}
	a.record("IronicCommand", cmd.Name)
	if !spec.async {
		jsonhttp.Reply(w, http.StatusOK, a.finish(a.ctx, res, spec, cmd))
		return
	}
	running := *res
	jsonhttp.Reply(w, http.StatusOK, running)
	go func() {
		a.finish(a.ctx, res, spec, cmd)
		if cmd.Name != "standby.power_off" {
			a.heartbeatSoon()
			return
		}
		// The OS goes down inside the command, as IPA's does: no
		// heartbeat after it.
		if err := a.host.Shutdown(a.ctx); err != nil && a.ctx.Err() == nil {
			a.record("IronicPowerOffFailed", err.Error())
		}
	}()
}

// start appends a RUNNING result, unless the last command still runs
// (its name is returned).
func (a *Agent) start(name string) (*Result, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.commands); n > 0 && a.commands[n-1].Status == StatusRunning {
		return nil, a.commands[n-1].Name
	}
	_, short, _ := strings.Cut(name, ".")
	res := &Result{ID: newID(), Name: short, Status: StatusRunning}
	a.commands = append(a.commands, res)
	return res, ""
}

// finish runs the command (for as long as the boot lasts: ctx) and
// records how it ended.
func (a *Agent) finish(ctx context.Context, res *Result, spec command, cmd Command) Result {
	out, err := spec.run(a, ctx, cmd.Params)
	a.mu.Lock()
	if err != nil {
		res.Status, res.Error = StatusFailed, &CommandError{Type: "CommandExecutionError", Code: 500, Message: err.Error(), Details: err.Error()}
	} else {
		res.Status, res.Outcome = StatusSucceeded, out
	}
	done := *res
	a.mu.Unlock()
	if err != nil {
		a.record("IronicCommandFailed", cmd.Name+": "+err.Error())
	}
	return done
}
