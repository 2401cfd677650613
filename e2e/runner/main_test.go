package runner

import (
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain gives controller-runtime's in-process users (envtest, the
// recorder's caches) a logger: errors only, beside the tests' own output.
// Without one, controller-runtime prints a stack trace in the middle of
// the benchmark figures.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	os.Exit(m.Run())
}
