package mcp

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/talkops/talkops/agent/tools"
)

// errRedirect refuses redirects: an MCP endpoint has no reason to send one, and following
// it would carry the configured headers to wherever it points.
var errRedirect = fmt.Errorf("MCP endpoints are not followed through redirects")

// httpClient is the client of one URL server: the configured headers on every request, no
// redirects, and a dialer that refuses private and special-purpose addresses (web_fetch's
// rule) except the address a trusted configuration names in its URL.
func httpClient(cfg Server) *http.Client {
	return &http.Client{
		Transport: headerTransport{base: guardedTransport(explicitAddrs(cfg)), headers: cfg.Headers},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errRedirect
		},
	}
}

// explicitAddrs says which non-public addresses a server may reach: those a trusted
// configuration names, by writing the address itself in the URL (an IP, or localhost for
// loopback) or by allow_private = true for an internal host name. A project file's server
// gets none.
func explicitAddrs(cfg Server) func(netip.Addr) bool {
	if !cfg.Trusted {
		return func(netip.Addr) bool { return false }
	}
	if cfg.AllowPrivate {
		return func(netip.Addr) bool { return true }
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return func(netip.Addr) bool { return false }
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return func(ip netip.Addr) bool { return ip.Unmap().IsLoopback() }
	}
	named, err := netip.ParseAddr(host)
	if err != nil {
		return func(netip.Addr) bool { return false }
	}
	return func(ip netip.Addr) bool { return ip.Unmap() == named.Unmap() }
}

// guardedTransport dials only public addresses, or one allowed explicitly; the check runs
// at connect time, so a DNS answer cannot smuggle in an internal address.
func guardedTransport(allowed func(netip.Addr) bool) *http.Transport {
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", tools.ErrBlockedAddress, address)
			}
			if tools.BlockedAddress(ap.Addr()) && !allowed(ap.Addr()) {
				return fmt.Errorf("%w: %s (a private or special-purpose address is reached only when the user's own configuration writes it in the url, or sets allow_private = true)",
					tools.ErrBlockedAddress, ap.Addr())
			}
			return nil
		},
	}
	return &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0, // a tool call may take long; the call's context bounds it
		MaxIdleConns:          4,
	}
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}
