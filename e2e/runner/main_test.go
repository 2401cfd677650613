package runner

import (
	"fmt"
	"log"
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain keeps library logs out of the tests' and benchmarks' output:
// controller-runtime's in-process users (envtest, the recorder's caches)
// print errors only (without a logger they print a stack trace among the
// benchmark figures), and net/http's complaints from CAPI's in-memory
// workload API servers ("superfluous response.WriteHeader", hundreds per
// run) go to a file, kept and named at the end (when not empty) if a test
// failed or with -v.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	stdlog, err := os.CreateTemp("", "upgradelab-runner-stdlog-*.txt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	log.SetOutput(stdlog)
	code := m.Run()
	info, err := stdlog.Stat()
	stdlog.Close()
	if err == nil && info.Size() > 0 && (code != 0 || testing.Verbose()) {
		fmt.Fprintf(os.Stderr, "net/http's log: %s\n", stdlog.Name())
	} else {
		os.Remove(stdlog.Name())
	}
	os.Exit(code)
}
