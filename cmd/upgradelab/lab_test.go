package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLabUpWritesStateAndStatusReadsIt(t *testing.T) {
	state := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	up := newRootCommand()
	var out bytes.Buffer
	up.SetOut(&out)
	up.SetArgs([]string{"lab", "up", "--lab", "../../fixtures/labs/three-node.yaml", "--state", state, "--time-scale", "0"})
	done := make(chan error, 1)
	go func() { done <- up.ExecuteContext(ctx) }()

	deadline := time.Now().Add(10 * time.Second)
	var status bytes.Buffer
	for {
		status.Reset()
		st := newRootCommand()
		st.SetOut(&status)
		st.SetArgs([]string{"lab", "status", "--state", state})
		if st.Execute() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("lab status never found the lab")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("lab up: %v", err)
	}
	got := status.String()
	for _, want := range []string{"lab three-node: running", "cp-0", "cp-1", "cp-2", "eno1 9.20 idle"} {
		if !strings.Contains(got, want) {
			t.Errorf("lab status output lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(out.String(), filepath.Join(state, "lab.json")) {
		t.Errorf("lab up did not print where lab.json is:\n%s", out.String())
	}

	bad := newRootCommand()
	bad.SetArgs([]string{"lab", "up", "--lab", "../../fixtures/labs/three-node.yaml", "--state", state, "--time-scale", "fast"})
	if err := bad.Execute(); err == nil || !strings.Contains(err.Error(), `time scale "fast"`) {
		t.Fatalf("bad --time-scale: %v", err)
	}
}
