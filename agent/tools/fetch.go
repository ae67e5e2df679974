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

// ErrBlockedAddress is returned when web_fetch would connect to a loopback, private,
// link-local (cloud metadata) or otherwise internal address.
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

// blockedIP reports whether connecting to ip could reach something internal.
func blockedIP(ip netip.Addr) bool {
	ip = ip.Unmap()
	cgnat := netip.MustParsePrefix("100.64.0.0/10")
	return !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsMulticast() ||
		ip.IsUnspecified() || cgnat.Contains(ip)
}

// BlockedAddress reports whether connecting to ip could reach something internal: the
// rule web_fetch applies, for other host-side clients (MCP over HTTP) to share.
func BlockedAddress(ip netip.Addr) bool { return blockedIP(ip) }

// NewFetchClient returns web_fetch's default client: no proxy, a 30 s timeout, at most 5
// redirects and only to http or https, and a dialer that refuses non-public addresses at
// connect time (so DNS tricks cannot reach the metadata service or the runner's loopback).
func NewFetchClient() *http.Client {
	dialer := &net.Dialer{
		Timeout: 10 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrBlockedAddress, address)
			}
			if blockedIP(ap.Addr()) {
				return fmt.Errorf("%w: %s", ErrBlockedAddress, ap.Addr())
			}
			return nil
		},
	}
	return &http.Client{
		Timeout: fetchTimeout,
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 20 * time.Second,
			MaxIdleConns:          4,
		},
		CheckRedirect: checkRedirect,
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

var (
	reDropBlocks = regexp.MustCompile(`(?is)<(script|style|noscript|svg|template)\b.*?</(script|style|noscript|svg|template)\s*>|<!--.*?-->`)
	reBreaks     = regexp.MustCompile(`(?i)<br\s*/?>|</(p|div|tr|h[1-6]|pre|section|article|header|footer|table|ul|ol|blockquote)\s*>`)
	reItems      = regexp.MustCompile(`(?i)<li\b[^>]*>`)
	reTags       = regexp.MustCompile(`(?s)<[^>]*>`)
	reSpaces     = regexp.MustCompile(`[ \t\f\r\v]+`)
	reBlankLines = regexp.MustCompile(`\n{3,}`)
)

// htmlToText reduces an HTML page to its readable text.
func htmlToText(s string) string {
	s = reDropBlocks.ReplaceAllString(s, " ")
	s = reBreaks.ReplaceAllString(s, "\n")
	s = reItems.ReplaceAllString(s, "\n- ")
	s = reTags.ReplaceAllString(s, " ")
	s = html.UnescapeString(s)
	s = reSpaces.ReplaceAllString(s, " ")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	s = strings.Join(lines, "\n")
	return strings.TrimSpace(reBlankLines.ReplaceAllString(s, "\n\n"))
}
