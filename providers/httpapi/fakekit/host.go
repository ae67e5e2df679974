package fakekit

import (
	"net/http"
	"net/http/httptest"
)

// Host is the HTTP side the fakes share: the test server, its URL and the log of the
// calls it answered. A fake embeds it and starts it with its router.
type Host struct {
	// URL is the server's root, set by Start.
	URL string

	srv *httptest.Server
	log Log
}

// Start serves route, which answers a request and names its endpoint for the log, on a
// new test server.
func (h *Host) Start(route func(w http.ResponseWriter, r *http.Request) string) {
	h.Serve(h.log.Handler(route))
}

// Serve serves handler, which logs its calls itself through CallLog, on a new test
// server.
func (h *Host) Serve(handler http.Handler) {
	h.srv = httptest.NewServer(handler)
	h.URL = h.srv.URL
}

// CallLog is the log Calls and Count read, for a handler given to Serve.
func (h *Host) CallLog() *Log { return &h.log }

// Stop closes the server; the fake's own state is the fake's to release.
func (h *Host) Stop() { h.srv.Close() }

// Calls returns every request received so far, in order of arrival.
func (h *Host) Calls() []Call { return h.log.Calls() }

// Count returns how many requests endpoint received, rejected ones included.
func (h *Host) Count(endpoint string) int { return h.log.Count(endpoint) }
