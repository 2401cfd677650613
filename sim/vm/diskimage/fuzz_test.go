package diskimage

import (
	"bytes"
	"testing"
)

// Any 1024 bytes either fail to parse or round-trip through Encode to a
// block that parses to the same variables.
func FuzzParseEnv(f *testing.F) {
	e := NewEnv()
	e.Set("A_STATE", "written")
	b, _ := e.Encode()
	f.Add(b)
	f.Add(bytes.Repeat([]byte("#"), 1024))
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := ParseEnv(b)
		if err != nil {
			return
		}
		out, err := env.Encode()
		if err != nil {
			t.Fatalf("a parsed block does not encode: %v", err)
		}
		again, err := ParseEnv(out)
		if err != nil {
			t.Fatalf("an encoded block does not parse: %v", err)
		}
		for _, n := range env.Names() {
			if again.Get(n) != env.Get(n) {
				t.Fatalf("%s: %q became %q", n, env.Get(n), again.Get(n))
			}
		}
	})
}

// ReadGPT never panics or hangs on a disk's first sectors, whatever they hold.
func FuzzReadGPT(f *testing.F) {
	f.Add(make([]byte, 4096))
	hdr := make([]byte, 4096)
	copy(hdr[512:], "EFI PART")
	f.Add(hdr)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ReadGPT(bytes.NewReader(b))
	})
}
