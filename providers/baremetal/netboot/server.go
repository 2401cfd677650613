package netboot

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	netbootv1 "github.com/upgradelab/upgradelab/api/netboot/v1"
)

// Path is where the scripts are: GET Path?mac=MAC.
const Path = "/boot"

// Server serves GET Path?mac=MAC with that MAC's boot script.
type Server struct {
	mu      sync.Mutex
	scripts map[string]netbootv1.Script // by lower-case MAC
}

// New is an empty boot server.
func New() *Server { return &Server{scripts: map[string]netbootv1.Script{}} }

// Chain makes mac's next network boot load imageURL.
func (s *Server) Chain(mac, imageURL string) {
	s.mu.Lock()
	s.scripts[strings.ToLower(mac)] = netbootv1.Script{Chain: imageURL}
	s.mu.Unlock()
}

// Forget withdraws mac's script.
func (s *Server) Forget(mac string) {
	s.mu.Lock()
	delete(s.scripts, strings.ToLower(mac))
	s.mu.Unlock()
}

// Serve answers on l (plain HTTP, as Ironic's boot server: iPXE fetches
// scripts before it could check a certificate) until ctx ends; a
// controller-runtime manager runs it with Runnable.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(l); err != http.ErrServerClosed {
		return fmt.Errorf("boot server: %w", err)
	}
	return nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	mac := strings.ToLower(r.URL.Query().Get(netbootv1.MACParam))
	s.mu.Lock()
	script, ok := s.scripts[mac]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(script.Format())
}
