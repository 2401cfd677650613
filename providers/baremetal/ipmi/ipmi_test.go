package ipmi

import (
	"strings"
	"testing"
)

func TestParseAddressTakesBMOsForm(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Address
		err  string
	}{
		{"ipmi://10.0.0.5", Address{Host: "10.0.0.5", Port: 623}, ""},
		{"ipmi://127.0.0.1:16883", Address{Host: "127.0.0.1", Port: 16883}, ""},
		{"ipmi://[fd00::5]:6230", Address{Host: "fd00::5", Port: 6230}, ""},
		{"redfish://10.0.0.5", Address{}, "want scheme ipmi://"},
		{"ipmi://", Address{}, "want ipmi://HOST[:PORT]"},
		{"ipmi://10.0.0.5:99999", Address{}, "not a port number"},
		{"ipmi://10.0.0.5/redfish/v1", Address{}, "want ipmi://HOST[:PORT]"},
	} {
		got, err := ParseAddress(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %+v %v, want %+v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.in, err, c.err)
		}
	}
}
