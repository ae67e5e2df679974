// Package httpapi is the small JSON-over-HTTP client the remote sandbox providers share:
// retries with backoff and jitter that honour Retry-After and rate-limit headers, provider
// error bodies surfaced with their status, and request and byte counters for benchmarks.
//
// A Client never logs and never puts request headers or bodies into an error, so the
// credentials it carries cannot leak through it; errors carry the method, the URL path
// (without the query), the status and the provider's own message.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/talkops/talkops/internal/backoff"
)

// Client sends requests to one provider's API. The zero value is not usable: set at least
// Provider and BaseURL. A Client is safe for concurrent use once configured.
type Client struct {
	// Provider names the provider in errors ("daytona").
	Provider string
	// BaseURL is joined with relative request paths ("https://app.daytona.io/api").
	BaseURL string
	// HTTP is the transport; nil means a client that refuses redirects (so credentials
	// never follow a redirect to another host) and has no overall timeout (requests are
	// bounded by their context and Request.Timeout).
	HTTP *http.Client
	// Header is added to every request (authentication, user agent).
	Header http.Header
	// Retry bounds the retries; the zero value means DefaultRetry.
	Retry Retry
	// DecodeError extracts the provider's error code and message from an error body.
	// nil, or an empty message, falls back to the body text.
	DecodeError func(status int, body []byte) (code, message string)
	// Stats, when set, counts every attempt and every body byte.
	Stats *Stats

	// sleep waits between attempts; tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// Retry bounds how often and how long a request is retried.
type Retry struct {
	// Attempts is the total number of attempts, the first included (default 4).
	Attempts int
	// Base is the first backoff step; each retry doubles it, with jitter (default 500 ms).
	Base time.Duration
	// Max caps one computed backoff step (default 8 s).
	Max time.Duration
	// MaxRetryAfter is the longest server-requested wait (Retry-After, rate-limit reset)
	// the client accepts; a longer one ends the retries at once (default 60 s).
	MaxRetryAfter time.Duration
}

// DefaultRetry is used when Client.Retry is the zero value.
var DefaultRetry = Retry{Attempts: 4, Base: 500 * time.Millisecond, Max: 8 * time.Second, MaxRetryAfter: 60 * time.Second}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = DefaultRetry.Attempts
	}
	if r.Base <= 0 {
		r.Base = DefaultRetry.Base
	}
	if r.Max <= 0 {
		r.Max = DefaultRetry.Max
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = DefaultRetry.MaxRetryAfter
	}
	return r
}

// RetryMode says which failures of a request may be retried.
type RetryMode int

const (
	// RetryAuto retries GET, HEAD, PUT, DELETE and OPTIONS as RetryIdempotent and every
	// other method as RetryUnprocessed.
	RetryAuto RetryMode = iota
	// RetryIdempotent retries 429, every 5xx and transport errors: safe when repeating
	// the request cannot do the work twice (reads, deletes, creates with a unique name,
	// requests with an idempotency key).
	RetryIdempotent
	// RetryUnprocessed retries only failures that mean the server did not act on the
	// request: 429 and a connection that was refused. Any 5xx, a 502 or 503 from a
	// proxy included, and a connection lost after the request went out may come after
	// the server acted (a command ran), so those are returned, marked ErrMaybeDone, not
	// repeated.
	RetryUnprocessed
	// RetryNever sends the request once.
	RetryNever
)

// ErrMaybeDone is wrapped by the error of a RetryUnprocessed request that failed after it
// was sent, in a way that does not tell whether the server carried it out (a 5xx, a
// connection lost): it was not sent again, so it may have happened once or not at all.
var ErrMaybeDone = errors.New("the server may have carried out the request, so it was not sent again")

// Request is one API call.
type Request struct {
	Method string
	// Path is joined to Client.BaseURL, unless it is an absolute http(s) URL.
	Path  string
	Query url.Values
	// Header is added to the client's headers for this request.
	Header http.Header
	// JSON, when non-nil, is marshalled as the body with Content-Type application/json.
	JSON any
	// Body is a raw body; ignored when JSON is set.
	Body *Body
	// Retry selects the retried failures.
	Retry RetryMode
	// Timeout bounds each attempt, response body included; 0 means only ctx does.
	Timeout time.Duration
	// Accept lists non-2xx statuses handed back as a response instead of an *Error
	// (408 for long polls, 404 for downloads, ...).
	Accept []int
}

// Body is a request body that can be sent again on a retry.
type Body struct {
	// Open returns a fresh reader of the whole body, once per attempt.
	Open func() (io.ReadCloser, error)
	// Size is the length in bytes, or -1 when unknown (sent chunked).
	Size        int64
	ContentType string
}

// BytesBody returns a Body over b.
func BytesBody(b []byte, contentType string) *Body {
	return &Body{
		Open:        func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		Size:        int64(len(b)),
		ContentType: contentType,
	}
}

// FileBody returns a Body that reads the file at path on every attempt.
func FileBody(path, contentType string) (*Body, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("stat request body: %w", err)
	}
	return &Body{
		Open:        func() (io.ReadCloser, error) { return os.Open(path) },
		Size:        fi.Size(),
		ContentType: contentType,
	}, nil
}

// Error is a request that ended with a status the caller did not accept, after retries.
type Error struct {
	Provider string
	Method   string
	// Path is the URL path without the query.
	Path   string
	Status int
	// Code is the provider's machine-readable error code, when it sends one.
	Code string
	// Message is the provider's message (or the start of the body).
	Message string
	// RetryAfter is the wait the server asked for, if any.
	RetryAfter time.Duration
	// Attempts is how many times the request was sent.
	Attempts int
	// GaveUp explains why retrying stopped early, when it did.
	GaveUp string
	// MaybeDone is set when the request may have been carried out and was not sent
	// again (see ErrMaybeDone).
	MaybeDone bool
}

// Is makes errors.Is(e, ErrMaybeDone) report MaybeDone.
func (e *Error) Is(target error) bool { return target == ErrMaybeDone && e.MaybeDone }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s: %d %s", e.Provider, e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " [gave up after %d attempts]", e.Attempts)
	}
	if e.GaveUp != "" {
		fmt.Fprintf(&b, " [%s]", e.GaveUp)
	}
	if e.MaybeDone {
		fmt.Fprintf(&b, " [%s]", ErrMaybeDone)
	}
	return b.String()
}

// StatusCode returns the HTTP status of the *Error in err's chain, or 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// ErrorCode returns the provider error code of the *Error in err's chain, or "".
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Stats counts requests and body bytes. The zero value is ready; it is safe for
// concurrent use.
type Stats struct {
	requests, retries, sent, received atomic.Int64
}

// Counts is a snapshot of Stats.
type Counts struct {
	Requests      int64 // attempts sent, retries included
	Retries       int64 // attempts that were retries
	BytesSent     int64 // request body bytes
	BytesReceived int64 // response body bytes read
}

// Snapshot returns the current counts.
func (s *Stats) Snapshot() Counts {
	return Counts{
		Requests:      s.requests.Load(),
		Retries:       s.retries.Load(),
		BytesSent:     s.sent.Load(),
		BytesReceived: s.received.Load(),
	}
}

// maxErrorBody bounds how much of an error body is read.
const maxErrorBody = 64 << 10

// Do sends req, retrying as req.Retry allows, and returns the response of the first
// attempt with a 2xx or accepted status. The caller closes the body. Any other final
// status is an *Error; a transport failure is returned wrapped.
func (c *Client) Do(ctx context.Context, req Request) (*http.Response, error) {
	body := req.Body
	if req.JSON != nil {
		b, err := json.Marshal(req.JSON)
		if err != nil {
			return nil, fmt.Errorf("%s: encode %s %s: %w", c.Provider, req.Method, req.Path, err)
		}
		body = BytesBody(b, "application/json")
	}
	u, err := c.url(req.Path, req.Query)
	if err != nil {
		return nil, err
	}
	mode := req.Retry
	if mode == RetryAuto {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
			mode = RetryIdempotent
		default:
			mode = RetryUnprocessed
		}
	}
	policy := c.Retry.withDefaults()
	if mode == RetryNever {
		policy.Attempts = 1
	}
	for attempt := 1; ; attempt++ {
		resp, err := c.once(ctx, req, u, body)
		if attempt > 1 && c.Stats != nil {
			c.Stats.retries.Add(1)
		}
		var wait time.Duration
		var apiErr *Error
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", c.Provider, req.Method, u.Path, ctx.Err())
			}
			if !retryableTransport(err, mode) || attempt >= policy.Attempts {
				if mode == RetryUnprocessed && !errors.Is(err, syscall.ECONNREFUSED) {
					return nil, fmt.Errorf("%s: %s %s (attempt %d): %w [%w]", c.Provider, req.Method, u.Path, attempt, err, ErrMaybeDone)
				}
				return nil, fmt.Errorf("%s: %s %s (attempt %d): %w", c.Provider, req.Method, u.Path, attempt, err)
			}
		case resp.StatusCode/100 == 2 || accepted(resp.StatusCode, req.Accept):
			return resp, nil
		default:
			apiErr = c.errorFrom(req.Method, u.Path, resp)
			apiErr.Attempts = attempt
			if !retryableStatus(resp, mode) || attempt >= policy.Attempts {
				apiErr.MaybeDone = mode == RetryUnprocessed && resp.StatusCode >= 500
				return nil, apiErr
			}
			wait = apiErr.RetryAfter
			if wait > policy.MaxRetryAfter {
				apiErr.GaveUp = fmt.Sprintf("server asked to wait %s, more than the %s limit", wait, policy.MaxRetryAfter)
				return nil, apiErr
			}
		}
		wait = max(wait, backoff.Jittered(policy.Base, policy.Max, attempt))
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			if apiErr != nil {
				apiErr.GaveUp = "the deadline comes before the next attempt"
				return nil, apiErr
			}
			return nil, fmt.Errorf("%s: %s %s (attempt %d, deadline before next attempt): %w", c.Provider, req.Method, u.Path, attempt, err)
		}
		if err := c.wait(ctx, wait); err != nil {
			if apiErr != nil {
				return nil, errors.Join(apiErr, err)
			}
			return nil, fmt.Errorf("%s: %s %s: %w", c.Provider, req.Method, u.Path, err)
		}
	}
}

// JSON sends req and decodes a 2xx JSON response into out (when out is non-nil). An
// accepted non-2xx status is returned as an *Error, so callers can branch on it.
func (c *Client) JSON(ctx context.Context, req Request, out any) error {
	resp, err := c.Do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		e := c.errorFrom(req.Method, resp.Request.URL.Path, resp)
		return e
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: read %s %s response: %w", c.Provider, req.Method, resp.Request.URL.Path, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode %s %s response: %w (body starts %q)", c.Provider, req.Method, resp.Request.URL.Path, err, head(data, 200))
	}
	return nil
}

func (c *Client) url(path string, q url.Values) (*url.URL, error) {
	raw := path
	if !strings.HasPrefix(path, "http://") && !strings.HasPrefix(path, "https://") {
		raw = strings.TrimRight(c.BaseURL, "/") + "/" + strings.TrimLeft(path, "/")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: bad request URL %q: %w", c.Provider, raw, err)
	}
	if len(q) > 0 {
		merged := u.Query()
		for k, vs := range q {
			for _, v := range vs {
				merged.Add(k, v)
			}
		}
		u.RawQuery = merged.Encode()
	}
	return u, nil
}

func (c *Client) once(ctx context.Context, req Request, u *url.URL, body *Body) (*http.Response, error) {
	cancel := context.CancelFunc(func() {})
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
	}
	var rd io.Reader
	var rc io.ReadCloser
	if body != nil {
		var err error
		rc, err = body.Open()
		if err != nil {
			cancel()
			return nil, fmt.Errorf("open request body: %w", err)
		}
		rd = &countReader{r: rc, n: c.sentCounter()}
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, u.String(), rd)
	if err != nil {
		cancel()
		if rc != nil {
			rc.Close()
		}
		return nil, err
	}
	if body != nil {
		hreq.ContentLength = body.Size
		if body.Size == 0 {
			hreq.Body = http.NoBody
			rc.Close()
		}
		if body.ContentType != "" {
			hreq.Header.Set("Content-Type", body.ContentType)
		}
	}
	for k, vs := range c.Header {
		hreq.Header[k] = append([]string(nil), vs...)
	}
	for k, vs := range req.Header {
		hreq.Header[k] = append([]string(nil), vs...)
	}
	if hreq.Header.Get("Accept") == "" {
		hreq.Header.Set("Accept", "application/json")
	}
	if c.Stats != nil {
		c.Stats.requests.Add(1)
	}
	resp, err := c.httpClient().Do(hreq)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &countBody{rc: resp.Body, n: c.receivedCounter(), cancel: cancel}
	return resp, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return defaultHTTP
}

var defaultHTTP = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func (c *Client) sentCounter() *atomic.Int64 {
	if c.Stats == nil {
		return nil
	}
	return &c.Stats.sent
}

func (c *Client) receivedCounter() *atomic.Int64 {
	if c.Stats == nil {
		return nil
	}
	return &c.Stats.received
}

func (c *Client) wait(ctx context.Context, d time.Duration) error {
	if c.sleep != nil {
		return c.sleep(ctx, d)
	}
	return backoff.Sleep(ctx, d)
}

// errorFrom reads (and closes) resp's body and builds the *Error.
func (c *Client) errorFrom(method, path string, resp *http.Response) *Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	e := &Error{Provider: c.Provider, Method: method, Path: path, Status: resp.StatusCode, RetryAfter: retryAfter(resp)}
	if c.DecodeError != nil {
		e.Code, e.Message = c.DecodeError(resp.StatusCode, data)
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(head(data, 512)))
	}
	return e
}

func accepted(status int, list []int) bool {
	for _, s := range list {
		if s == status {
			return true
		}
	}
	return false
}

func retryableStatus(resp *http.Response, mode RetryMode) bool {
	switch strings.ToLower(resp.Header.Get("X-Should-Retry")) {
	case "true":
		return mode != RetryNever
	case "false":
		return false
	}
	switch mode {
	case RetryIdempotent:
		return resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	case RetryUnprocessed:
		return resp.StatusCode == http.StatusTooManyRequests
	}
	return false
}

func retryableTransport(err error, mode RetryMode) bool {
	switch mode {
	case RetryIdempotent:
		return true
	case RetryUnprocessed:
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	return false
}

// retryAfter reads how long the server asked the client to wait: Retry-After (seconds or
// an HTTP date), retry-after-ms, or, on a 429 without those, the rate-limit reset headers
// (X-RateLimit-Reset[-*], seconds until reset or a Unix time).
func retryAfter(resp *http.Response) time.Duration {
	h := resp.Header
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second))
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(time.Until(t), 0)
		}
	}
	if resp.StatusCode != http.StatusTooManyRequests {
		return 0
	}
	var longest time.Duration
	for k, vs := range h {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, "x-ratelimit-reset") || len(vs) == 0 {
			continue
		}
		remainingKey := "X-Ratelimit-Remaining" + k[len("X-Ratelimit-Reset"):]
		if r := h.Get(remainingKey); r != "" && r != "0" {
			continue // this counter is not the exhausted one
		}
		n, err := strconv.ParseFloat(vs[0], 64)
		if err != nil || n < 0 {
			continue
		}
		d := time.Duration(n * float64(time.Second))
		if n > 1e9 { // a Unix time
			d = max(time.Until(time.Unix(int64(n), 0)), 0)
		}
		longest = max(longest, d)
	}
	return longest
}

func head(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.n != nil {
		c.n.Add(int64(n))
	}
	return n, err
}

func (c *countReader) Close() error {
	if cl, ok := c.r.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

type countBody struct {
	rc     io.ReadCloser
	n      *atomic.Int64
	cancel context.CancelFunc
}

func (c *countBody) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	if c.n != nil {
		c.n.Add(int64(n))
	}
	return n, err
}

func (c *countBody) Close() error {
	err := c.rc.Close()
	c.cancel()
	return err
}

// MultipartFile returns a multipart/form-data Body with the given text fields (in order)
// followed by one file part named field, whose content is file. The length is computed, so
// the request is not sent chunked; the content is streamed, never held in memory.
func MultipartFile(fields [][2]string, field, filename string, file *Body) (*Body, error) {
	var pre bytes.Buffer
	mw := multipart.NewWriter(&pre)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			return nil, err
		}
	}
	if _, err := mw.CreateFormFile(field, filename); err != nil {
		return nil, err
	}
	prefix := append([]byte(nil), pre.Bytes()...)
	var post bytes.Buffer
	post.WriteString("\r\n--" + mw.Boundary() + "--\r\n")
	suffix := post.Bytes()
	size := int64(-1)
	if file.Size >= 0 {
		size = int64(len(prefix)) + file.Size + int64(len(suffix))
	}
	return &Body{
		Open: func() (io.ReadCloser, error) {
			rc, err := file.Open()
			if err != nil {
				return nil, err
			}
			return struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(prefix), rc, bytes.NewReader(suffix)), rc}, nil
		},
		Size:        size,
		ContentType: mw.FormDataContentType(),
	}, nil
}
