package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server serves the catalog's payloads over HTTP on loopback:
// GET /images/NAME (Range requests work) and GET /images/NAME.sha256.
type Server struct {
	catalog *Catalog
	srv     *http.Server
	url     string

	mu       sync.Mutex
	payloads map[string][]byte
}

// Serve starts a server on addr (e.g. "127.0.0.1:0").
func Serve(catalog *Catalog, addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("image server: %w", err)
	}
	s := &Server{catalog: catalog, payloads: map[string][]byte{}, url: "http://" + l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/{file}", s.serveImage)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(l)
	return s, nil
}

// URL is the base URL, e.g. http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.url }

// ImageURL is where an image's payload is served.
func (s *Server) ImageURL(name string) string { return s.url + "/images/" + name }

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

func (s *Server) payload(name string) ([]byte, bool) {
	b, ok := s.catalog.Images[name]
	if !ok {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payloads[name]
	if !ok {
		p = Payload(b)
		s.payloads[name] = p
	}
	return p, true
}

func (s *Server) serveImage(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	name, wantSum := strings.CutSuffix(file, ".sha256")
	p, ok := s.payload(name)
	if !ok {
		http.Error(w, fmt.Sprintf("image %q is not in the catalog", name), http.StatusNotFound)
		return
	}
	if wantSum {
		fmt.Fprintf(w, "%s  %s\n", Checksum(p), name)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(p))
}

// ErrChecksum is returned when fetched bytes do not hash to the expected sum.
var ErrChecksum = errors.New("checksum mismatch")

// Fetch downloads url and returns its bytes only when they hash to
// wantSHA256; on a mismatch nothing is returned, so nothing gets written.
func Fetch(ctx context.Context, client *http.Client, url, wantSHA256 string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("fetch %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	h := sha256.New()
	data, err := io.ReadAll(io.TeeReader(io.LimitReader(resp.Body, 64<<20), h))
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", url, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantSHA256 {
		return nil, fmt.Errorf("fetch %s: %w: expected sha256 %s, the bytes hash to %s; nothing was written", url, ErrChecksum, wantSHA256, got)
	}
	return data, nil
}
