package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/talkops/talkops/agent/model"
)

// web_fetch limits.
const (
	fetchMaxBytes     = 5 << 20
	fetchTimeout      = 30 * time.Second
	fetchMaxRedirects = 5
)

// ErrBlockedAddress is returned when web_fetch would connect to an address in a
// special-purpose range (loopback, private, link-local cloud metadata, documentation,
// benchmarking, ...) or one of the host's own addresses.
var ErrBlockedAddress = errors.New("address is not public")

type fetchTool struct{ env *Env }

func (t *fetchTool) Kind() Kind { return Network }

func (t *fetchTool) Def() model.Tool {
	return model.Tool{
		Name: "web_fetch",
		Description: fmt.Sprintf("Fetch a public http or https URL (GET) from the host, not the sandbox. HTML is converted to text. "+
			"At most %d MiB are read; private and internal addresses are refused.", fetchMaxBytes>>20),
		Schema: schema([]string{"url"}, map[string]any{
			"url": str("The http:// or https:// URL."),
		}),
	}
}

// specialPurpose are the IANA IPv4 and IPv6 Special-Purpose Address Registries' blocks
// (plus multicast and the deprecated site-local and IPv4-compatible ranges): none is a
// public web server, and several reach the runner, its network or its cloud.
var specialPurpose = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		// IPv4 (iana-ipv4-special-registry)
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24", "192.88.99.0/24",
		"192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
		// IPv6 (iana-ipv6-special-registry)
		"::/96", "::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64",
		"2001::/23", "2001:db8::/32", "2002::/16", "2620:4f:8000::/48", "3fff::/20", "5f00::/16",
		"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// addrGuard decides which addresses web_fetch may connect to.
type addrGuard struct {
	// local lists the host's own interface addresses; nil means net.InterfaceAddrs.
	local func() ([]net.Addr, error)
	// allow, in tests, admits an address the guard would refuse (an httptest server's
	// loopback); nil in production.
	allow func(netip.Addr) bool
}

// refuse says why connecting to ip could reach something internal, or "" if it may.
func (g addrGuard) refuse(ip netip.Addr) string {
	ip = ip.Unmap()
	if g.allow != nil && g.allow(ip) {
		return ""
	}
	if !ip.IsValid() {
		return "not an IP address"
	}
	for _, p := range specialPurpose {
		if p.Contains(ip) {
			return "special-purpose range " + p.String()
		}
	}
	local := g.local
	if local == nil {
		local = net.InterfaceAddrs
	}
	addrs, err := local()
	if err != nil {
		return "the host's own addresses cannot be listed: " + err.Error()
	}
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Unmap() == ip {
			return "an address of this host"
		}
	}
	return ""
}

// check returns an ErrBlockedAddress error for a refused address.
func (g addrGuard) check(ip netip.Addr) error {
	if why := g.refuse(ip); why != "" {
		return fmt.Errorf("%w: %s is in %s", ErrBlockedAddress, ip, why)
	}
	return nil
}

// control runs at connect time, after DNS, for every connection (redirects included):
// a name that resolves to an internal address is refused here.
func (g addrGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrBlockedAddress, address)
	}
	return g.check(ap.Addr())
}

// checkHost refuses a URL whose host is a literal internal address, before any request.
func (g addrGuard) checkHost(u *url.URL) error {
	if ip, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
		return g.check(ip)
	}
	return nil
}

// BlockedAddress reports whether connecting to ip could reach something internal: the
// rule web_fetch applies, for other host-side clients (MCP over HTTP) to share.
func BlockedAddress(ip netip.Addr) bool { return addrGuard{}.refuse(ip) != "" }

// NewFetchClient returns web_fetch's default client: no proxy, a 30 s timeout, at most 5
// redirects and only to http or https, every redirect target checked, and a dialer that
// refuses special-purpose and the host's own addresses at connect time (so DNS tricks
// cannot reach the metadata service or the runner's loopback).
func NewFetchClient() *http.Client { return newFetchClient(addrGuard{}) }

func newFetchClient(g addrGuard) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: g.control}
	return &http.Client{
		Timeout: fetchTimeout,
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 20 * time.Second,
			MaxIdleConns:          4,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if err := checkRedirect(req, via); err != nil {
				return err
			}
			return g.checkHost(req.URL)
		},
	}
}

// fetchClient returns Env.HTTPClient, or one default client shared by every call.
func (e *Env) fetchClient() *http.Client {
	if e.HTTPClient != nil {
		return e.HTTPClient
	}
	e.fetchOnce.Do(func() { e.defaultFetch = NewFetchClient() })
	return e.defaultFetch
}

func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= fetchMaxRedirects {
		return fmt.Errorf("stopped after %d redirects", fetchMaxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("refusing a redirect to %s: only http and https are allowed", req.URL.Scheme)
	}
	return nil
}

func (t *fetchTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		URL string `json:"url"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	u, err := url.Parse(strings.TrimSpace(in.URL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errorf("url must be an absolute http:// or https:// URL, got %q", in.URL), nil
	}
	if u.User != nil {
		return errorf("url must not carry credentials"), nil
	}
	client := t.env.fetchClient()
	if t.env.HTTPClient == nil {
		if err := (addrGuard{}).checkHost(u); err != nil {
			return errorf("fetch %s refused: %v", u, err), nil
		}
	}
	if client.CheckRedirect == nil {
		c := *client
		c.CheckRedirect = checkRedirect
		client = &c
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return errorf("bad url: %v", err), nil
	}
	req.Header.Set("User-Agent", "talkops-agent (+https://github.com/talkops/talkops)")
	req.Header.Set("Accept", "text/html, text/plain, application/json, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, ErrBlockedAddress) {
			return errorf("fetch %s refused: %v", u, err), nil
		}
		return errorf("fetch %s failed: %v", u, err), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, fetchMaxBytes+1))
	if err != nil {
		return errorf("fetch %s: reading the body failed: %v", u, err), nil
	}
	cut := len(body) > fetchMaxBytes
	if cut {
		body = body[:fetchMaxBytes]
	}
	ctype := resp.Header.Get("Content-Type")
	media, _, _ := mime.ParseMediaType(ctype)
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\nStatus: %s\nContent-Type: %s\n", resp.Request.URL, resp.Status, ctype)
	if cut {
		fmt.Fprintf(&b, "[body cut at %d MiB]\n", fetchMaxBytes>>20)
	}
	b.WriteByte('\n')
	switch {
	case media == "text/html" || media == "application/xhtml+xml":
		b.WriteString(htmlToText(string(body)))
	case strings.HasPrefix(media, "text/") || strings.HasSuffix(media, "json") || strings.HasSuffix(media, "xml") ||
		strings.HasSuffix(media, "yaml") || media == "application/javascript" || (media == "" && utf8.Valid(body)):
		b.Write(body)
	default:
		fmt.Fprintf(&b, "[%d bytes of %s content not shown]", len(body), media)
	}
	return Result{Output: b.String(), IsError: resp.StatusCode >= 400}, nil
}

// htmlRegexps are compiled on the first HTML page fetched, not at every start of the binary.
var htmlRegexps = sync.OnceValue(func() (re struct{ dropBlocks, breaks, items, tags, spaces, blankLines *regexp.Regexp }) {
	re.dropBlocks = regexp.MustCompile(`(?is)<(script|style|noscript|svg|template)\b.*?</(script|style|noscript|svg|template)\s*>|<!--.*?-->`)
	re.breaks = regexp.MustCompile(`(?i)<br\s*/?>|</(p|div|tr|h[1-6]|pre|section|article|header|footer|table|ul|ol|blockquote)\s*>`)
	re.items = regexp.MustCompile(`(?i)<li\b[^>]*>`)
	re.tags = regexp.MustCompile(`(?s)<[^>]*>`)
	re.spaces = regexp.MustCompile(`[ \t\f\r\v]+`)
	re.blankLines = regexp.MustCompile(`\n{3,}`)
	return re
})

// htmlToText reduces an HTML page to its readable text.
func htmlToText(s string) string {
	re := htmlRegexps()
	s = re.dropBlocks.ReplaceAllString(s, " ")
	s = re.breaks.ReplaceAllString(s, "\n")
	s = re.items.ReplaceAllString(s, "\n- ")
	s = re.tags.ReplaceAllString(s, " ")
	s = html.UnescapeString(s)
	s = re.spaces.ReplaceAllString(s, " ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	s = strings.Join(lines, "\n")
	return strings.TrimSpace(re.blankLines.ReplaceAllString(s, "\n\n"))
}
