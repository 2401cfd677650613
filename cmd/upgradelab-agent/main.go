package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/upgradelab/upgradelab/internal/timescale"
	"github.com/upgradelab/upgradelab/sim/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "upgradelab-agent:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("upgradelab-agent", flag.ContinueOnError)
	hardware := fs.String("hardware", "", "URL of the lab's hardware channel for this host (https://...)")
	caFile := fs.String("ca", "", "lab CA certificate (PEM): trusted for the channel and required of API clients")
	certFile := fs.String("cert", "", "this agent's client certificate for the channel (PEM)")
	keyFile := fs.String("key", "", "its key (PEM)")
	apiCert := fs.String("api-cert", "", "serving certificate of the agent's update API (PEM)")
	apiKey := fs.String("api-key", "", "its key (PEM)")
	listen := fs.String("listen", "127.0.0.1:0", "address of the agent's update API")
	scale := fs.String("time-scale", "1", "real time per modelled time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for name, v := range map[string]string{"-hardware": *hardware, "-ca": *caFile, "-cert": *certFile, "-key": *keyFile, "-api-cert": *apiCert, "-api-key": *apiKey} {
		if v == "" {
			return fmt.Errorf("%s is required", name)
		}
	}
	ts, err := timescale.Parse(*scale)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("-ca %s: no certificate in it", *caFile)
	}
	clientCert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		return fmt.Errorf("-cert/-key: %w", err)
	}
	servingCert, err := tls.LoadX509KeyPair(*apiCert, *apiKey)
	if err != nil {
		return fmt.Errorf("-api-cert/-api-key: %w", err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{clientCert}, MinVersion: tls.VersionTLS12,
	}}}

	remote, err := dialWithRetry(ctx, *hardware, client)
	if err != nil {
		return err
	}
	events, err := remote.Events(ctx)
	if err != nil {
		return fmt.Errorf("hardware channel events: %w", err)
	}
	a := agent.New(remote, remote, ts, agent.DefaultTiming)
	api, err := agent.ServeAPI(a, servingCert, pool, *listen)
	if err != nil {
		return err
	}
	defer api.Close()
	fmt.Fprintf(out, "agent %s: hardware channel %s, update API %s\n", remote.Name(), *hardware, api.URL())
	a.Run(ctx, events)
	return nil
}

// dialWithRetry waits for the channel as an init waits for its devices.
func dialWithRetry(ctx context.Context, url string, client *http.Client) (*agent.Remote, error) {
	var lastErr error
	for range 50 {
		r, err := agent.Dial(ctx, url, client)
		if err == nil {
			return r, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, lastErr
}
