package redfish

import (
	"io"
	"net/http"
	"time"
)

// Sushy's defaults for server-side retries, as Ironic's redfish driver
// gets them (sushy.Sushy: server_side_retries=10,
// server_side_retries_delay=3): a BMC that answers a read with a 5xx is
// usually busy, not broken, and is asked again after a pause.
const (
	DefaultRetries    = 10
	DefaultRetryDelay = 3 * time.Second
)

// Retrying is base with sushy's server-side retries: a GET answered with
// a 5xx status is sent again after delay, up to retries times, and the
// last answer is returned. Other methods are sent once, as sushy sends
// them (a POST or PATCH that failed may have done part of its work, and
// the reconcile that sent it decides what to do next). gofish has no
// retries of its own, so without this a read that a real BMC would have
// answered a moment later fails a whole reconcile, and the host's backoff
// grows with every call a reconcile makes.
func Retrying(base *http.Client, retries int, delay time.Duration) *http.Client {
	c := *base
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &retryTransport{next: next, retries: retries, delay: delay}
	return &c
}

type retryTransport struct {
	next    http.RoundTripper
	retries int
	delay   time.Duration
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if req.Method != http.MethodGet || (req.Body != nil && req.Body != http.NoBody) {
		return resp, err // only a bodiless read can be sent again as it was
	}
	for left := t.retries; left > 0 && err == nil && resp.StatusCode >= 500; left-- {
		timer := time.NewTimer(t.delay)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return resp, nil // the answer the caller would have had
		case <-timer.C:
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		resp, err = t.next.RoundTrip(req)
	}
	return resp, err
}
