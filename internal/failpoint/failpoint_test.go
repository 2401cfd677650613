package failpoint

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]map[string]bool{
		"":               {},
		"a":              {"a": true},
		"a , b ,,":       {"a": true, "b": true},
		"trigger-marked": {"trigger-marked": true},
	} {
		if got := parse(in); !maps.Equal(got, want) {
			t.Errorf("parse(%q) = %v, want %v", in, got, want)
		}
	}
}

// A process with the point armed ends at it with ExitCode; one without
// goes on.
func TestCrashEndsTheProcessOnlyWhenArmed(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") != "" {
		Crash("here")
		os.Exit(0)
	}
	for _, tc := range []struct {
		armed string
		want  int
	}{{"here", ExitCode}, {"elsewhere", 0}, {"", 0}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashEndsTheProcessOnlyWhenArmed$")
		cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"="+tc.armed)
		err := cmd.Run()
		got := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			got = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("armed %q: exit code %d, want %d", tc.armed, got, tc.want)
		}
	}
}
