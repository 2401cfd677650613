package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/upgradelab/upgradelab/sim/nic"
)

// Server serves the catalog's payloads over HTTP on loopback:
// GET /images/NAME (Range requests work) and GET /images/NAME.sha256,
// and the NIC firmware packages: GET /firmware/NAME.
type Server struct {
	catalog  *Catalog
	firmware nic.Catalog
	srv      *http.Server
	url      string

	mu       sync.Mutex
	payloads map[string][]byte
}

// Serve starts a server on addr (e.g. "127.0.0.1:0") for the OS images of
// catalog and the NVM images of firmware.
func Serve(catalog *Catalog, firmware nic.Catalog, addr string) (*Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("image server: %w", err)
	}
	s := &Server{catalog: catalog, firmware: firmware, payloads: map[string][]byte{}, url: "http://" + l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /images/{file}", s.serveImage)
	mux.HandleFunc("GET /firmware/{name}", s.serveFirmware)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(l)
	return s, nil
}

// URL is the base URL, e.g. http://127.0.0.1:PORT.
func (s *Server) URL() string { return s.url }

// ImageURL is where an image's payload is served.
func (s *Server) ImageURL(name string) string { return s.url + "/images/" + name }

// FirmwareURL is where an NVM image's package is served; its last path
// element is the image's name, which is what the lab's BMCs flash.
func (s *Server) FirmwareURL(name string) string { return s.url + "/firmware/" + name }

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

// serveFirmware answers with the package's descriptor (the NVM image
// with its firmware and admin-queue API versions), the part of a real
// NVM update package a tool reads before flashing. The lab's BMCs flash
// by name and do not download it.
func (s *Server) serveFirmware(w http.ResponseWriter, r *http.Request) {
	img, ok := s.firmware[r.PathValue("name")]
	if !ok {
		http.Error(w, fmt.Sprintf("NVM image %q is not in the lab's NVM catalog", r.PathValue("name")), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(img)
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
