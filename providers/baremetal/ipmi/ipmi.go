package ipmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AddressScheme is the BareMetalHost bmc.address scheme (Metal3's, for
// Ironic's ipmi hardware type).
const AddressScheme = "ipmi://"

// DefaultPort is IPMI over LAN's (RMCP's) UDP port.
const DefaultPort = 623

// Address is a parsed ipmi://HOST[:PORT].
type Address struct {
	Host string
	Port int
}

// ParseAddress reads ipmi://HOST[:PORT] (BMO's form; the port defaults
// to 623).
func ParseAddress(addr string) (Address, error) {
	if !strings.HasPrefix(addr, AddressScheme) {
		return Address{}, fmt.Errorf("bmc address %q: want scheme %s", addr, AddressScheme)
	}
	u, err := url.Parse(addr)
	if err != nil || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
		return Address{}, fmt.Errorf("bmc address %q: want %sHOST[:PORT]", addr, AddressScheme)
	}
	a := Address{Host: u.Hostname(), Port: DefaultPort}
	if p := u.Port(); p != "" {
		if a.Port, err = strconv.Atoi(p); err != nil || a.Port < 1 || a.Port > 65535 {
			return Address{}, fmt.Errorf("bmc address %q: port %q is not a port number", addr, p)
		}
	}
	return a, nil
}

// ErrCredentials means no IPMI session could be opened, each try: a wrong
// user name or password (RAKP), or a BMC that did not answer; ipmitool
// tells the two apart no better.
var ErrCredentials = errors.New("the BMC refused the IPMI session (user name or password), or did not answer")

// Client runs ipmitool against one BMC.
type Client struct {
	addr     Address
	user     string
	passFile string
	// Binary is ipmitool's path; Timeout bounds each command (ipmitool
	// retries by itself within it).
	binary  string
	timeout time.Duration
	on      bool
}

// Options say how ipmitool is run.
type Options struct {
	// Binary is ipmitool's path (default: ipmitool on PATH).
	Binary string
	// Timeout per command (default 30 s).
	Timeout time.Duration
}

// Dial writes the password file and reads the power state, which opens a
// session and so checks the credentials.
func Dial(ctx context.Context, addr Address, user, password string, o Options) (*Client, error) {
	f, err := os.CreateTemp("", "ipmi-password-")
	if err != nil {
		return nil, err
	}
	_, werr := f.WriteString(password)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		return nil, werr
	}
	c := &Client{addr: addr, user: user, passFile: f.Name(), binary: o.Binary, timeout: o.Timeout}
	if c.binary == "" {
		c.binary = "ipmitool"
	}
	if c.timeout == 0 {
		c.timeout = 30 * time.Second
	}
	if err := c.refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close removes the password file.
func (c *Client) Close() { os.Remove(c.passFile) }

// retryable are ipmitool failures Ironic's ipmitool driver runs the
// command again for (its IPMITOOL_RETRYABLE_FAILURES): a lost or busy
// session, which a lossy management network or a BMC that just reset
// gives. A wrong password looks the same to ipmitool, and fails each try.
var retryable = []string{"Unable to establish IPMI v2 / RMCP+ session", "insufficient resources for session", "Node busy", "Timeout", "no response"}

// attempts is how many times a retryable failure is run again in all.
const attempts = 3

// run runs one ipmitool command and returns its standard output, running
// it again (up to attempts times) after a retryable failure, as Ironic
// does within its command retry timeout.
func (c *Client) run(ctx context.Context, args ...string) (string, error) {
	var err error
	for try := 1; ; try++ {
		var out string
		var again bool
		out, again, err = c.runOnce(ctx, args...)
		if err == nil || !again || try == attempts || ctx.Err() != nil {
			return out, err
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return "", err
		}
	}
}

func (c *Client) runOnce(ctx context.Context, args ...string) (stdoutText string, retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	full := append([]string{"-I", "lanplus", "-H", c.addr.Host, "-p", strconv.Itoa(c.addr.Port),
		"-U", c.user, "-f", c.passFile, "-L", "ADMINISTRATOR", "-R", "3", "-N", "2"}, args...)
	cmd := exec.CommandContext(ctx, c.binary, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out := strings.TrimSpace(stdout.String() + "\n" + stderr.String())
	// ipmitool exits 0 after some failures it prints (bootdev): read
	// the words too.
	if err == nil && strings.Contains(out, " failed: ") {
		err = errors.New("failed")
	}
	if err != nil {
		endpoint := net.JoinHostPort(c.addr.Host, strconv.Itoa(c.addr.Port))
		retry = slices.ContainsFunc(retryable, func(s string) bool { return strings.Contains(out, s) })
		if strings.Contains(out, "Unable to establish IPMI v2 / RMCP+ session") {
			return "", retry, fmt.Errorf("BMC %s: ipmitool %s: %w", endpoint, strings.Join(args, " "), ErrCredentials)
		}
		return "", retry, fmt.Errorf("BMC %s: ipmitool %s: %w: %s", endpoint, strings.Join(args, " "), err, out)
	}
	return stdout.String(), false, nil
}

func (c *Client) refresh(ctx context.Context) error {
	out, err := c.run(ctx, "chassis", "power", "status")
	if err != nil {
		return err
	}
	switch {
	case strings.Contains(out, "Chassis Power is on"):
		c.on = true
	case strings.Contains(out, "Chassis Power is off"):
		c.on = false
	default:
		return fmt.Errorf("ipmitool chassis power status: unexpected %q", strings.TrimSpace(out))
	}
	return nil
}

// PoweredOn reads the power state as of Dial (or the last change).
func (c *Client) PoweredOn() bool { return c.on }

// PowerOn turns the server on, or resets it when it is on, so it boots
// again either way (Ironic's reboot).
func (c *Client) PowerOn(ctx context.Context) error {
	if c.on {
		_, err := c.run(ctx, "chassis", "power", "reset")
		return err
	}
	if _, err := c.run(ctx, "chassis", "power", "on"); err != nil {
		return err
	}
	c.on = true
	return nil
}

// PowerOff cuts the power at once.
func (c *Client) PowerOff(ctx context.Context) error {
	if !c.on {
		return nil
	}
	if _, err := c.run(ctx, "chassis", "power", "off"); err != nil {
		return err
	}
	c.on = false
	return nil
}

// GracefulShutdown asks the OS to shut down (ACPI soft off). The caller
// reads the power state to learn whether it did.
func (c *Client) GracefulShutdown(ctx context.Context) error {
	if !c.on {
		return nil
	}
	_, err := c.run(ctx, "chassis", "power", "soft")
	return err
}

// Device is a boot device chassis bootdev sets.
type Device string

const (
	DevicePXE  Device = "pxe"
	DeviceDisk Device = "disk"
)

// BootOnce makes the next boot use dev, in UEFI mode (Ironic passes
// options=efiboot for UEFI hosts; without it the BMC boots legacy).
func (c *Client) BootOnce(ctx context.Context, dev Device) error {
	_, err := c.run(ctx, "chassis", "bootdev", string(dev), "options=efiboot")
	return err
}
