// Command upgradelab runs the upgradelab harness: the management plane, the
// simulated lab and the upgrade scenarios.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "upgradelab:", err)
		stop()
		os.Exit(1)
	}
}
