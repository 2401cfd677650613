package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// controller-runtime's in-process users (envtest, the recorder's
	// caches) say only what went wrong; the commands print their progress.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		// A verdict already printed needs no second line.
		if !errors.Is(err, errRulesBroken) && !errors.Is(err, errRegressions) {
			fmt.Fprintln(os.Stderr, "upgradelab:", err)
		}
		stop()
		os.Exit(1)
	}
}
