// Package ipxe is a lab host's network boot program: it runs the iPXE
// scripts a boot server hands out, as the iPXE a server's PXE ROM chains
// into does, far enough for what provisioners write. That is Ironic's
// boot.ipxe (a loop over the host's NICs chaining the per-MAC config
// under pxelinux.cfg/), Ironic's per-node config (kernel and initrd with
// retries, a poweroff after ten failures, sanboot to leave for the disk)
// and the one-line chain or exit scripts of api/netboot/v1.
//
// The language: one command a line, `:label` lines, # comments; commands
// joined by `||` (run the next if this one failed) and `&&` (if it
// succeeded), a line that fails ending the script; settings expanded
// before a line runs, innermost first, as ${name} or ${name:type}, with
// mac and netN/mac the booting port's and each port's MAC (type hexhyp
// writes them with hyphens). The commands: set, clear, inc, isset, iseq,
// goto, echo, prompt, sleep, imgfree, kernel, initrd, boot, chain, exit,
// sanboot, reboot and poweroff; any other fails its line with its name,
// as iPXE's "command not found" does.
//
// Where it is kinder than iPXE: no quoting or escapes, no menus or
// other settings than the MACs, a prompt never sees a key, and sanboot
// finds no SAN drive (the lab attaches none), so it fails as it does on
// a UEFI server with no hooked drive. Images are fetched whole with the
// Fetch the caller passes (http or https).
package ipxe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Magic is a script's first line.
const Magic = "#!ipxe"

// End says how a run ended.
type End string

const (
	// Boot: a kernel was booted (Outcome.Kernel, Outcome.Args).
	Boot End = "boot"
	// Exit: the script returned to the firmware, which tries its next
	// boot device.
	Exit End = "exit"
	// Reboot: the script restarted the host.
	Reboot End = "reboot"
	// PowerOff: the script powered the host off.
	PowerOff End = "poweroff"
)

// Outcome is how a run ended. Err is why it returned to the firmware
// (a failed command, or a fetch the server refused) when End is Exit.
type Outcome struct {
	End End
	// Kernel is the booted image's URL, Image its bytes, Args its command
	// line after the URL, Initrd the initrd's URL (empty without one).
	Kernel, Args, Initrd string
	Image                []byte
	Err                  error
}

// Env is the host a script runs on.
type Env struct {
	// MAC is the booting port's MAC (${mac}); NICs are every port's, in
	// the order iPXE numbers them (${net0/mac}, ...).
	MAC  string
	NICs []string
	// Fetch downloads a URL whole (an error for any status but 200).
	Fetch func(ctx context.Context, url string) ([]byte, error)
	// Sleep waits d of the host's time.
	Sleep func(ctx context.Context, d time.Duration) error
	// Echo receives what the script prints.
	Echo func(line string)
}

// maxCommands bounds one run: a script that loops without booting is
// stopped, as a watchdog would stop a server that spins in its ROM.
const maxCommands = 10000

// maxDepth bounds nested chains.
const maxDepth = 8

// Run chains uri: a script runs, anything else boots as a kernel.
func Run(ctx context.Context, env Env, uri string) Outcome {
	r := &run{env: env, vars: map[string]string{}}
	out, err := r.chain(ctx, uri, "", 0)
	if err != nil {
		return Outcome{End: Exit, Err: err}
	}
	if out == nil {
		return Outcome{End: Exit}
	}
	return *out
}

type run struct {
	env      Env
	vars     map[string]string
	commands int
	kernel   *Outcome // the selected image (kernel), with its initrd
}

// errExit ends a script with a status (0: success).
type errExit struct{ code int }

func (e errExit) Error() string { return fmt.Sprintf("exit %d", e.code) }

// chain loads uri (relative to base) and executes it: a script runs to its
// end; any other image boots with args.
func (r *run) chain(ctx context.Context, uri, base string, depth int) (*Outcome, error) {
	abs, err := resolve(base, uri)
	if err != nil {
		return nil, err
	}
	body, err := r.env.Fetch(ctx, abs)
	if err != nil {
		return nil, err
	}
	if !isScript(body) {
		return &Outcome{End: Boot, Kernel: abs, Image: body}, nil
	}
	if depth >= maxDepth {
		return nil, fmt.Errorf("%s: chains nest deeper than %d", abs, maxDepth)
	}
	return r.script(ctx, abs, body, depth)
}

func isScript(b []byte) bool {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.TrimSpace(string(line)) == Magic
}

func resolve(base, uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("%q: %w", uri, err)
	}
	if base != "" {
		b, err := url.Parse(base)
		if err != nil {
			return "", err
		}
		u = b.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("%q: not an http(s) URL", uri)
	}
	return u.String(), nil
}

// script runs one script's lines. It returns an Outcome when the script
// booted, rebooted or powered off; nil and nil when it ended or exited 0;
// an error when a line failed or it exited non-zero.
func (r *run) script(ctx context.Context, uri string, body []byte, depth int) (*Outcome, error) {
	lines := strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n")
	for pc := 1; pc < len(lines); pc++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		line := strings.TrimSpace(lines[pc])
		if line == "" || line[0] == '#' || line[0] == ':' {
			continue
		}
		if r.commands++; r.commands > maxCommands {
			return nil, fmt.Errorf("%s: ran %d commands without booting", uri, maxCommands)
		}
		out, jump, err := r.line(ctx, uri, r.expand(line), depth)
		var exit errExit
		switch {
		case errors.As(err, &exit) && exit.code == 0:
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("%s line %d: %w", uri, pc+1, err)
		case out != nil:
			return out, nil
		case jump != "":
			to := label(lines, jump)
			if to < 0 {
				return nil, fmt.Errorf("%s line %d: goto %s: no such label", uri, pc+1, jump)
			}
			pc = to
		}
	}
	return nil, nil
}

func label(lines []string, name string) int {
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == ":"+name {
			return i
		}
	}
	return -1
}

// line runs one line's commands with their || and && separators. A goto
// ends the line with the label to jump to.
func (r *run) line(ctx context.Context, uri, line string, depth int) (*Outcome, string, error) {
	words := strings.Fields(line)
	var status error
	process := true
	for {
		cmd, sep := words, ""
		for i, w := range words {
			if w == "||" || w == "&&" {
				cmd, sep = words[:i], w
				break
			}
		}
		words = words[len(cmd):]
		if sep != "" {
			words = words[1:]
		}
		if process {
			if len(cmd) > 0 && cmd[0] == "goto" {
				if len(cmd) != 2 {
					return nil, "", errors.New("goto: want one label")
				}
				return nil, cmd[1], nil
			}
			out, err := r.command(ctx, uri, cmd, depth)
			if out != nil {
				return out, "", nil
			}
			var exit errExit
			if errors.As(err, &exit) {
				return nil, "", err
			}
			status = err
		}
		switch sep {
		case "||":
			process = status != nil
		case "&&":
			process = status == nil
		default:
			return nil, "", status
		}
	}
}

// command runs one command. An empty command succeeds (a line may end in
// `||` to ignore a failure).
func (r *run) command(ctx context.Context, uri string, argv []string, depth int) (*Outcome, error) {
	if len(argv) == 0 {
		return nil, nil
	}
	args := argv[1:]
	switch argv[0] {
	case "set":
		if len(args) < 1 {
			return nil, errors.New("set: no setting named")
		}
		r.vars[settingName(args[0])] = strings.Join(args[1:], " ")
	case "clear":
		if len(args) != 1 {
			return nil, errors.New("clear: want one setting")
		}
		delete(r.vars, settingName(args[0]))
	case "inc":
		return nil, r.inc(args)
	case "isset":
		if len(args) == 0 || args[0] == "" {
			return nil, errors.New("isset: not set")
		}
	case "iseq":
		if len(args) != 2 || args[0] != args[1] {
			return nil, fmt.Errorf("iseq %s: not equal", strings.Join(args, " "))
		}
	case "echo":
		if r.env.Echo != nil {
			r.env.Echo(strings.TrimPrefix(strings.Join(args, " "), "-n "))
		}
	case "prompt":
		return nil, r.prompt(ctx, args)
	case "sleep":
		return nil, r.sleep(ctx, args)
	case "imgfree":
		r.kernel = nil
	case "kernel", "imgselect":
		return nil, r.loadKernel(ctx, uri, args)
	case "initrd", "module":
		return nil, r.loadInitrd(ctx, uri, args)
	case "boot":
		if r.kernel == nil {
			return nil, errors.New("boot: no kernel loaded")
		}
		out := *r.kernel
		return &out, nil
	case "chain", "chainload":
		return r.chainCommand(ctx, uri, args, depth)
	case "exit":
		code := 0
		if len(args) > 0 {
			code, _ = strconv.Atoi(args[0])
		}
		return nil, errExit{code}
	case "sanboot":
		return nil, errors.New("sanboot: no SAN drive to boot")
	case "reboot":
		return &Outcome{End: Reboot}, nil
	case "poweroff":
		return &Outcome{End: PowerOff}, nil
	default:
		return nil, fmt.Errorf("%s: command not found", argv[0])
	}
	return nil, nil
}

// settingName drops a setting's type (netid:int32 is netid).
func settingName(s string) string {
	name, _, _ := strings.Cut(s, ":")
	return name
}

func (r *run) inc(args []string) error {
	if len(args) == 0 {
		return errors.New("inc: no setting named")
	}
	name, by := settingName(args[0]), 1
	if len(args) > 1 {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return fmt.Errorf("inc %s: %q is not a number", name, args[1])
		}
		by = n
	}
	n, _ := strconv.Atoi(r.vars[name]) // unset counts from 0
	r.vars[name] = strconv.Itoa(n + by)
	return nil
}

// options splits leading --name value options (--timeout, --name, ...)
// and flags (--autofree, --no-describe, ...) from the arguments.
func options(args []string) (map[string]string, []string) {
	opts := map[string]string{}
	for len(args) > 0 && strings.HasPrefix(args[0], "--") {
		name := strings.TrimPrefix(args[0], "--")
		switch name {
		case "timeout", "name", "key", "drive", "filename":
			if len(args) > 1 {
				opts[name] = args[1]
				args = args[1:]
			}
		default:
			opts[name] = ""
		}
		args = args[1:]
	}
	return opts, args
}

// prompt waits its timeout (milliseconds) for a key that never comes and
// fails, as iPXE's prompt does on a timeout.
func (r *run) prompt(ctx context.Context, args []string) error {
	opts, _ := options(args)
	if ms, err := strconv.Atoi(opts["timeout"]); err == nil && ms > 0 {
		if err := r.env.Sleep(ctx, time.Duration(ms)*time.Millisecond); err != nil {
			return err
		}
	}
	return errors.New("prompt: no key pressed")
}

func (r *run) sleep(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return errors.New("sleep: want seconds")
	}
	s, err := strconv.Atoi(args[0])
	if err != nil || s < 0 {
		return fmt.Errorf("sleep: %q is not a number of seconds", args[0])
	}
	return r.env.Sleep(ctx, time.Duration(s)*time.Second)
}

func (r *run) loadKernel(ctx context.Context, base string, args []string) error {
	_, args = options(args)
	if len(args) == 0 {
		return errors.New("kernel: no image named")
	}
	abs, err := resolve(base, args[0])
	if err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	body, err := r.env.Fetch(ctx, abs)
	if err != nil {
		return fmt.Errorf("kernel: %w", err)
	}
	r.kernel = &Outcome{End: Boot, Kernel: abs, Args: strings.Join(args[1:], " "), Image: body}
	return nil
}

func (r *run) loadInitrd(ctx context.Context, base string, args []string) error {
	_, args = options(args)
	if len(args) == 0 {
		return errors.New("initrd: no image named")
	}
	if r.kernel == nil {
		return errors.New("initrd: no kernel loaded")
	}
	abs, err := resolve(base, args[0])
	if err != nil {
		return fmt.Errorf("initrd: %w", err)
	}
	if _, err := r.env.Fetch(ctx, abs); err != nil {
		return fmt.Errorf("initrd: %w", err)
	}
	r.kernel.Initrd = abs
	return nil
}

// chainCommand runs chain: a script that ends or exits 0 succeeds, one
// that fails fails the command; a kernel boots.
func (r *run) chainCommand(ctx context.Context, base string, args []string, depth int) (*Outcome, error) {
	_, args = options(args)
	if len(args) == 0 {
		return nil, errors.New("chain: no image named")
	}
	out, err := r.chain(ctx, args[0], base, depth+1)
	if err != nil {
		return nil, fmt.Errorf("chain: %w", err)
	}
	if out != nil && out.End == Boot && out.Args == "" {
		out.Args = strings.Join(args[1:], " ")
	}
	return out, nil
}

// expand replaces settings, innermost first, as iPXE does: the last ${
// and the first } after it, until none is left. An unset setting is
// empty. A value may itself spell a reference (set a $ makes ${a}{a}
// expand to itself), so expansion stops after maxExpansions.
func (r *run) expand(line string) string {
	for range maxExpansions {
		start := strings.LastIndex(line, "${")
		if start < 0 {
			return line
		}
		end := strings.Index(line[start:], "}")
		if end < 0 {
			return line
		}
		line = line[:start] + r.setting(line[start+2:start+end]) + line[start+end+1:]
		if len(line) > maxLine {
			return line[:maxLine]
		}
	}
	return line
}

// maxLine bounds an expanded line (a setting set to itself twice over,
// in a loop, would double each time).
const maxLine = 4096

// maxExpansions bounds the settings one line expands.
const maxExpansions = 64

// setting is one setting's value: mac and netN/mac from the host, the
// rest from set and inc.
func (r *run) setting(ref string) string {
	name, typ, _ := strings.Cut(ref, ":")
	var mac string
	switch {
	case name == "mac":
		mac = r.env.MAC
	case strings.HasPrefix(name, "net") && strings.HasSuffix(name, "/mac"):
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "net"), "/mac"))
		if err != nil || n < 0 || n >= len(r.env.NICs) {
			return ""
		}
		mac = r.env.NICs[n]
	default:
		return r.vars[name]
	}
	mac = strings.ToLower(mac)
	if typ == "hexhyp" {
		return strings.ReplaceAll(mac, ":", "-")
	}
	return mac
}
