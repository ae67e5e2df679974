package faulttest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"testing"
)

// faultProxy is a reverse proxy in front of a fake cloud service or the Docker engine. It
// forwards every request unchanged except those a rule matches, which it fails, hangs,
// drops or holds: the faults fakekit's status injection cannot express, and a way to
// keep talkops inside one stage while the test sends it a signal.
type faultProxy struct {
	URL string

	srv       *httptest.Server
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	target    *url.URL
	closing   chan struct{} // closed when the test ends: held and hung requests return

	mu    sync.Mutex
	rules []*rule
}

// action is what a rule does to the requests it matches.
type action int

const (
	// actStatus answers with rule.status without forwarding.
	actStatus action = iota
	// actHang never answers: the request stays open until the client gives up.
	actHang
	// actDrop forwards the request, then closes the connection without answering: the
	// service acted, the client never learns the outcome.
	actDrop
	// actHold announces the request (rule.arrived), waits for rule.release or the client
	// giving up, then forwards it.
	actHold
	// actBody answers 200 with rule.reply (a malformed body) without forwarding.
	actBody
	// actLate forwards the request and lets the service act on it, then answers
	// rule.status instead of the service's answer: a gateway that lost the reply.
	actLate
	// actHoldReply forwards the request and lets the service act on it, then announces
	// it (rule.arrived) and holds the answer until rule.release or the client giving
	// up: a signal lands after the service acted and before the client learns of it.
	actHoldReply
)

// rule matches requests by method and path. nth counts matching requests from 1; 0
// matches all of them.
type rule struct {
	method string
	path   *regexp.Regexp
	body   string // when set, the request body must contain it
	nth    int
	act    action
	status int
	reply  string // actBody's answer

	seen     int
	arrived  chan struct{}
	release  chan struct{}
	abandon  chan struct{}
	announce sync.Once
	freed    sync.Once
	dropped  sync.Once
}

// Arrived is closed when the rule first fires.
func (r *rule) Arrived() <-chan struct{} { return r.arrived }

// Release lets held requests through (idempotent).
func (r *rule) Release() { r.freed.Do(func() { close(r.release) }) }

// Abandon drops held requests without forwarding them (idempotent).
func (r *rule) Abandon() { r.dropped.Do(func() { close(r.abandon) }) }

// newFaultProxy starts a proxy on 127.0.0.1 in front of upstream ("http://127.0.0.1:port"
// or "unix:///path/to/docker.sock").
func newFaultProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("fault proxy upstream %q: %v", upstream, err)
	}
	transport := &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: 16}
	target := u
	if u.Scheme == "unix" {
		sock := u.Path
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}
		target = &url.URL{Scheme: "http", Host: "docker"}
	}
	p := &faultProxy{transport: transport, target: target, closing: make(chan struct{})}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		},
		Transport:     transport,
		FlushInterval: -1, // stream (docker attach, long polls)
		// A client that gave up is not news: answer 502 without logging.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(func() {
		close(p.closing)
		p.srv.CloseClientConnections()
		p.srv.Close()
		transport.CloseIdleConnections()
	})
	return p
}

// add installs a rule and returns it.
func (p *faultProxy) add(method, pathRE string, nth int, act action, status int) *rule {
	return p.addBody(method, pathRE, "", nth, act, status)
}

// addBody installs a rule that also requires the request body to contain body.
func (p *faultProxy) addBody(method, pathRE, body string, nth int, act action, status int) *rule {
	r := &rule{method: method, path: regexp.MustCompile(pathRE), body: body, nth: nth, act: act, status: status,
		arrived: make(chan struct{}), release: make(chan struct{}), abandon: make(chan struct{})}
	p.mu.Lock()
	p.rules = append(p.rules, r)
	p.mu.Unlock()
	return r
}

// release lets every held request through; the rules stay.
func (p *faultProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		r.Release()
	}
}

// clear removes every rule; held requests are dropped, never forwarded.
func (p *faultProxy) clear() {
	p.mu.Lock()
	rules := p.rules
	p.rules = nil
	p.mu.Unlock()
	for _, r := range rules {
		r.Abandon()
	}
}

// match returns the rule that fires on req (whose body is buffered), counting the
// request for every rule it matches up to that one.
func (p *faultProxy) match(req *http.Request, body []byte) *rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rules {
		if r.method != "" && r.method != req.Method {
			continue
		}
		if !r.path.MatchString(req.URL.Path) {
			continue
		}
		if r.body != "" && !bytes.Contains(body, []byte(r.body)) {
			continue
		}
		r.seen++
		if r.nth != 0 && r.seen != r.nth {
			continue
		}
		if r.act != actHoldReply { // announced once the service acted
			r.announce.Do(func() { close(r.arrived) })
		}
		return r
	}
	return nil
}

func (p *faultProxy) serve(w http.ResponseWriter, req *http.Request) {
	// Buffer the body: rules may look into it, and a held or hung request is only seen
	// to be abandoned by its client once the server has read the body.
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	r := p.match(req, body)
	if r == nil {
		p.proxy.ServeHTTP(w, req)
		return
	}
	switch r.act {
	case actStatus:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(r.status)
		fmt.Fprintf(w, `{"message":"faulttest: injected %d","error":{"message":"faulttest: injected %d"}}`, r.status, r.status)
	case actBody:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, r.reply)
	case actHang:
		select {
		case <-req.Context().Done():
		case <-p.closing:
		}
	case actHold:
		select {
		case <-r.release:
		case <-r.abandon:
			panic(http.ErrAbortHandler)
		case <-req.Context().Done():
			return
		case <-p.closing:
			return
		}
		p.proxy.ServeHTTP(w, req)
	case actHoldReply:
		resp, err := p.forward(req, body)
		r.announce.Do(func() { close(r.arrived) })
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		defer resp.Body.Close()
		select {
		case <-r.release:
		case <-r.abandon:
			panic(http.ErrAbortHandler)
		case <-req.Context().Done():
			return
		case <-p.closing:
			return
		}
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	case actLate:
		if resp, err := p.forward(req, body); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(r.status)
		fmt.Fprintf(w, `{"message":"faulttest: %d after the service acted","error":{"message":"faulttest: %d after the service acted"}}`, r.status, r.status)
	case actDrop:
		if resp, err := p.forward(req, body); err == nil {
			resp.Body.Close() // for an upgraded connection (docker exec) this closes it
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			panic(http.ErrAbortHandler)
		}
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
		}
	}
}

// forward sends req (whose body was buffered) to the service and returns its answer.
func (p *faultProxy) forward(req *http.Request, body []byte) (*http.Response, error) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	out := req.Clone(req.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	return p.transport.RoundTrip(out)
}
