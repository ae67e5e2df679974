package tools

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// fetchFixture runs web_fetch with an Env.
type fetchFixture struct{ env *Env }

func (f fetchFixture) run(t *testing.T, _ string, in map[string]any) Result {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&fetchTool{env: f.env}).Run(t.Context(), data)
	if err != nil {
		t.Fatalf("web_fetch(%s) error: %v", data, err)
	}
	return res
}

// inside returns an address inside p other than its first where there is one.
func inside(p netip.Prefix) netip.Addr {
	if n := p.Addr().Next(); n.IsValid() && p.Contains(n) {
		return n
	}
	return p.Addr()
}

func TestWebFetchRefusesEverySpecialPurposeRange(t *testing.T) {
	t.Parallel()
	fx := fetchFixture{env: &Env{}}
	for _, p := range specialPurpose {
		ip := inside(p)
		host := ip.String()
		if ip.Is6() {
			host = "[" + host + "]"
		}
		res := fx.run(t, "web_fetch", map[string]any{"url": "http://" + host + ":9/"})
		if !res.IsError || !strings.Contains(res.Output, "refused") || !strings.Contains(res.Output, "special-purpose range") {
			t.Errorf("web_fetch(%s in %s) = %q, want refused naming the range", ip, p, res.Output)
		}
		// The same address reached through DNS is refused when the dialer connects.
		if err := (addrGuard{}).control("tcp", netip.AddrPortFrom(ip, 80).String(), nil); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("dial-time check of %s = %v, want ErrBlockedAddress", ip, err)
		}
	}
	// An IPv4 address dressed as IPv6 is the IPv4 address.
	if err := (addrGuard{}).check(netip.MustParseAddr("::ffff:198.18.0.1")); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("check(::ffff:198.18.0.1) = %v, want refused", err)
	}
	// A name resolving to loopback passes the URL check and is refused at connect time.
	res := fx.run(t, "web_fetch", map[string]any{"url": "http://localhost:9/"})
	if !res.IsError || !strings.Contains(res.Output, "not public") {
		t.Errorf("web_fetch(localhost) = %q, want refused at connect time", res.Output)
	}
	// A public address is not refused.
	if why := (addrGuard{local: func() ([]net.Addr, error) { return nil, nil }}).refuse(netip.MustParseAddr("93.184.215.14")); why != "" {
		t.Errorf("refuse(public address) = %q, want allowed", why)
	}
}

func TestWebFetchRefusesTheHostsOwnAddresses(t *testing.T) {
	t.Parallel()
	own := netip.MustParseAddr("93.184.215.14") // as if this host had a public address
	g := addrGuard{local: func() ([]net.Addr, error) {
		return []net.Addr{&net.IPNet{IP: net.IP(own.AsSlice()), Mask: net.CIDRMask(24, 32)}}, nil
	}}
	if err := g.check(own); !errors.Is(err, ErrBlockedAddress) || !strings.Contains(err.Error(), "an address of this host") {
		t.Errorf("check(own address) = %v, want refused as this host's", err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		pfx, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if err := (addrGuard{}).check(pfx.Addr()); !errors.Is(err, ErrBlockedAddress) {
			t.Errorf("check(interface address %s) = %v, want refused", pfx.Addr(), err)
		}
	}
}

func TestWebFetchRechecksRedirects(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://198.51.100.7/secret", http.StatusFound)
	}))
	defer srv.Close()
	loopback := func(ip netip.Addr) bool { return ip.IsLoopback() } // the test server only
	fx := fetchFixture{env: &Env{HTTPClient: newFetchClient(addrGuard{allow: loopback})}}
	res := fx.run(t, "web_fetch", map[string]any{"url": srv.URL + "/"})
	if !res.IsError || !strings.Contains(res.Output, "198.51.100.0/24") {
		t.Errorf("web_fetch(redirect to TEST-NET-2) = %q, want refused at the redirect", res.Output)
	}
}
