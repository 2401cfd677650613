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
	// controller-runtime's in-process users (envtest, the recorder's
	// caches) say only what went wrong; the commands print their progress.
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		// A verdict already printed needs no second line.
		if !errors.Is(err, errRulesBroken) && !errors.Is(err, errRegressions) {
			fmt.Fprintln(os.Stderr, "upgradelab:", err)
		}
		os.Exit(1)
	}
}
