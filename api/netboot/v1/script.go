package v1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// MACParam is the query parameter the firmware appends to the boot
// server's URL: the MAC of the port that booted, as iPXE's ${mac}.
const MACParam = "mac"

// Magic is a script's first line.
const Magic = "#!ipxe"

// Script is one boot script: Chain loads and boots the image at an HTTP
// URL; with Chain empty the script exits and the firmware tries its next
// boot device (what Ironic's default script does for a host it does not
// deploy, so the host boots its disk).
type Script struct {
	Chain string
}

// String is Format as a string.
func (s Script) String() string { return string(s.Format()) }

// Format writes s in iPXE's syntax.
func (s Script) Format() []byte {
	if s.Chain == "" {
		return []byte(Magic + "\nexit\n")
	}
	return []byte(Magic + "\nchain " + s.Chain + "\n")
}

// ErrNotScript means the body does not start with Magic.
var ErrNotScript = errors.New("not an iPXE script (no " + Magic + " line)")

// Parse reads a script: the magic line, then commands, one a line; blank
// lines and comments (#) are skipped. chain (or its alias boot with a
// URL) with an http or https URL, and exit, are understood; anything else
// is an error naming the line, as iPXE stops on an unknown command.
func Parse(b []byte) (Script, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != Magic {
		return Script{}, ErrNotScript
	}
	for n := 2; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cmd, arg, _ := strings.Cut(line, " ")
		arg = strings.TrimSpace(arg)
		switch cmd {
		case "exit":
			return Script{}, nil
		case "chain":
			u, err := url.Parse(arg)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return Script{}, fmt.Errorf("line %d: chain %q: want an http(s) URL", n, arg)
			}
			return Script{Chain: arg}, nil
		default:
			return Script{}, fmt.Errorf("line %d: %q: unknown command (only chain and exit are run)", n, cmd)
		}
	}
	if err := sc.Err(); err != nil {
		return Script{}, err
	}
	return Script{}, errors.New("the script ends without chain or exit")
}
