package v1

import (
	"strings"
	"testing"
)

func TestParseReadsChainAndExit(t *testing.T) {
	for _, c := range []struct {
		in, chain, err string
	}{
		{"#!ipxe\nchain http://10.0.0.1:8080/deploy.iso?ipa-api-url=x\n", "http://10.0.0.1:8080/deploy.iso?ipa-api-url=x", ""},
		{"#!ipxe\n# Ironic's default: boot the local disk\n\nexit\n", "", ""},
		{Script{Chain: "https://h/x"}.String(), "https://h/x", ""},
		{"chain http://h/x\n", "", "not an iPXE script"},
		{"#!ipxe\nchain tftp://h/x\n", "", "line 2: chain \"tftp://h/x\": want an http(s) URL"},
		{"#!ipxe\nkernel http://h/vmlinuz\n", "", "line 2: \"kernel\": unknown command"},
		{"#!ipxe\n", "", "ends without chain or exit"},
	} {
		s, err := Parse([]byte(c.in))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%q: %v", c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%q: error %v, want %q", c.in, err, c.err)
		case s.Chain != c.chain:
			t.Errorf("%q: chain %q, want %q", c.in, s.Chain, c.chain)
		}
	}
}

// FuzzParseBootScript: any body a boot server sends parses or errs; a
// parsed script formats back to one that parses the same.
func FuzzParseBootScript(f *testing.F) {
	f.Add([]byte("#!ipxe\nchain http://h/x\n"))
	f.Add([]byte("#!ipxe\nexit\n"))
	f.Add([]byte("#!ipxe\r\n  chain   https://h:1/x?y=z  \r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Parse(s.Format())
		if err != nil || again != s {
			t.Fatalf("%q parsed to %+v, formatted and parsed again to %+v, %v", b, s, again, err)
		}
	})
}
