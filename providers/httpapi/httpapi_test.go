package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
)

// script serves a fixed sequence of responses and records the waits the client takes.
type script struct {
	mu     sync.Mutex
	steps  []step
	bodies []string
	calls  int
}

type step struct {
	status int
	header map[string]string
	body   string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	i := min(s.calls, len(s.steps)-1)
	s.calls++
	s.bodies = append(s.bodies, string(b))
	st := s.steps[i]
	s.mu.Unlock()
	for k, v := range st.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(st.status)
	_, _ = io.WriteString(w, st.body) // a failed write is the client's error, which the tests check
}

func newClient(t *testing.T, h http.Handler) (*Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var waits []time.Duration
	c := &Client{
		Provider: "prov",
		BaseURL:  srv.URL + "/api",
		Header:   http.Header{"Authorization": {"Bearer secret-token"}},
		Retry:    Retry{Attempts: 4, Base: 100 * time.Millisecond, Max: time.Second, MaxRetryAfter: 30 * time.Second},
		DecodeError: func(_ int, body []byte) (string, string) {
			var e struct{ Code, Message string }
			_ = json.Unmarshal(body, &e)
			return e.Code, e.Message
		},
		Stats: &Stats{},
	}
	c.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return c, &waits
}

func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		method     string
		mode       RetryMode
		steps      []step
		wantCalls  int
		wantStatus int // 0: success
		wantErr    string
		// wantMaybeDone: the error says the request may have been carried out.
		wantMaybeDone bool
		checkWaits    func(t *testing.T, waits []time.Duration)
	}{
		{
			name: "RetryAfterSecondsHonoured", method: "POST",
			steps:     []step{{429, map[string]string{"Retry-After": "7"}, `{"message":"slow down"}`}, {200, nil, `{}`}},
			wantCalls: 2,
			checkWaits: func(t *testing.T, w []time.Duration) {
				if len(w) != 1 || w[0] < 7*time.Second {
					t.Errorf("waits = %v, want one wait of at least 7s", w)
				}
			},
		},
		{
			name: "RetryAfterMs", method: "GET",
			steps:     []step{{503, map[string]string{"Retry-After-Ms": "1500"}, ``}, {200, nil, `{}`}},
			wantCalls: 2,
			checkWaits: func(t *testing.T, w []time.Duration) {
				if len(w) != 1 || w[0] < 1500*time.Millisecond {
					t.Errorf("waits = %v, want one wait of at least 1.5s", w)
				}
			},
		},
		{
			name: "RateLimitResetHeader", method: "POST",
			steps: []step{{429, map[string]string{
				"X-RateLimit-Remaining-sandbox-create": "0", "X-RateLimit-Reset-sandbox-create": "12",
				"X-RateLimit-Remaining-authenticated": "4000", "X-RateLimit-Reset-authenticated": "50",
			}, `{"message":"too many creates"}`}, {200, nil, `{}`}},
			wantCalls: 2,
			checkWaits: func(t *testing.T, w []time.Duration) {
				if len(w) != 1 || w[0] < 12*time.Second || w[0] > 20*time.Second {
					t.Errorf("waits = %v, want one wait of about 12s (the exhausted counter's reset)", w)
				}
			},
		},
		{
			name: "BackoffGrowsWithJitter", method: "GET",
			steps:     []step{{500, nil, ``}, {502, nil, ``}, {504, nil, ``}, {200, nil, `{}`}},
			wantCalls: 4,
			checkWaits: func(t *testing.T, w []time.Duration) {
				bounds := [][2]time.Duration{{50 * time.Millisecond, 100 * time.Millisecond}, {100 * time.Millisecond, 200 * time.Millisecond}, {200 * time.Millisecond, 400 * time.Millisecond}}
				if len(w) != 3 {
					t.Fatalf("waits = %v, want 3", w)
				}
				for i, b := range bounds {
					if w[i] < b[0] || w[i] > b[1] {
						t.Errorf("wait %d = %v, want within %v", i, w[i], b)
					}
				}
			},
		},
		{
			name: "GivesUpWithProviderMessage", method: "DELETE",
			steps:      []step{{503, nil, `{"code":"unavailable","message":"try later"}`}},
			wantCalls:  4,
			wantStatus: 503,
			wantErr:    "prov: DELETE /api/thing: 503 Service Unavailable: try later (unavailable) [gave up after 4 attempts]",
		},
		{
			name: "RetryAfterTooLong", method: "POST",
			steps:      []step{{429, map[string]string{"Retry-After": "120"}, `{"message":"quota"}`}},
			wantCalls:  1,
			wantStatus: 429,
			wantErr:    "server asked to wait 2m0s, more than the 30s limit",
		},
		{
			name: "PostNotRetriedOn500", method: "POST",
			steps:         []step{{500, nil, `{"message":"boom"}`}, {200, nil, `{}`}},
			wantCalls:     1,
			wantStatus:    500,
			wantErr:       "500 Internal Server Error: boom [the server may have carried out the request, so it was not sent again]",
			wantMaybeDone: true,
		},
		{
			// A proxy's 502 or 503 can come after the service acted on the request.
			name: "PostNotRetriedOn502", method: "POST",
			steps:         []step{{502, nil, ``}, {200, nil, `{}`}},
			wantCalls:     1,
			wantStatus:    502,
			wantErr:       "502 Bad Gateway",
			wantMaybeDone: true,
		},
		{
			name: "PostNotRetriedOn503", method: "POST",
			steps:         []step{{503, map[string]string{"Retry-After": "1"}, `{"message":"upstream reset"}`}, {200, nil, `{}`}},
			wantCalls:     1,
			wantStatus:    503,
			wantErr:       "503 Service Unavailable: upstream reset [the server may have carried out the request, so it was not sent again]",
			wantMaybeDone: true,
		},
		{
			name: "PostRetriedOn429", method: "POST",
			steps:     []step{{429, nil, ``}, {429, nil, ``}, {200, nil, `{}`}},
			wantCalls: 3,
		},
		{
			name: "PostClientErrorIsNotAmbiguous", method: "POST",
			steps:      []step{{422, nil, `{"message":"bad field"}`}},
			wantCalls:  1,
			wantStatus: 422,
			wantErr:    "422 Unprocessable Entity: bad field",
		},
		{
			name: "PostIdempotentRetriedOn500", method: "POST", mode: RetryIdempotent,
			steps:     []step{{500, nil, `{"message":"boom"}`}, {200, nil, `{}`}},
			wantCalls: 2,
		},
		{
			name: "ClientErrorNotRetried", method: "GET",
			steps:      []step{{404, nil, `{"code":"not_found","message":"no such sandbox"}`}},
			wantCalls:  1,
			wantStatus: 404,
			wantErr:    "404 Not Found: no such sandbox (not_found)",
		},
		{
			name: "ShouldRetryHeader", method: "POST",
			steps:     []step{{409, map[string]string{"X-Should-Retry": "true"}, ``}, {200, nil, `{}`}},
			wantCalls: 2,
		},
		{
			name: "BodyTextWhenNoJSON", method: "GET",
			steps:      []step{{400, nil, "plain failure text"}},
			wantCalls:  1,
			wantStatus: 400,
			wantErr:    "400 Bad Request: plain failure text",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{steps: tc.steps}
			c, waits := newClient(t, sc)
			err := c.JSON(t.Context(), Request{Method: tc.method, Path: "thing", JSON: map[string]int{"n": 1}, Retry: tc.mode}, nil)
			if sc.calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", sc.calls, tc.wantCalls)
			}
			if tc.wantStatus == 0 {
				if err != nil {
					t.Fatalf("JSON() = %v, want nil", err)
				}
			} else {
				if StatusCode(err) != tc.wantStatus || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("JSON() error = %v (status %d), want status %d containing %q", err, StatusCode(err), tc.wantStatus, tc.wantErr)
				}
				if strings.Contains(err.Error(), "secret-token") {
					t.Errorf("error %q leaks the credential", err)
				}
				if got := errors.Is(err, ErrMaybeDone); got != tc.wantMaybeDone {
					t.Errorf("errors.Is(%v, ErrMaybeDone) = %v, want %v", err, got, tc.wantMaybeDone)
				}
			}
			for i, b := range sc.bodies {
				if b != `{"n":1}` {
					t.Errorf("attempt %d body = %q, want the JSON body resent", i+1, b)
				}
			}
			if tc.checkWaits != nil {
				tc.checkWaits(t, *waits)
			}
			if got := c.Stats.Snapshot(); got.Requests != int64(tc.wantCalls) || got.Retries != int64(tc.wantCalls-1) {
				t.Errorf("stats = %+v, want %d requests and %d retries", got, tc.wantCalls, tc.wantCalls-1)
			}
		})
	}
}

func TestDeadlineBeforeNextAttempt(t *testing.T) {
	sc := &script{steps: []step{{429, map[string]string{"Retry-After": "10"}, `{"message":"later"}`}}}
	c, _ := newClient(t, sc)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	err := c.JSON(ctx, Request{Method: "GET", Path: "x"}, nil)
	if StatusCode(err) != 429 || !strings.Contains(err.Error(), "deadline comes before the next attempt") {
		t.Fatalf("error = %v, want the 429 returned at once because the deadline is near", err)
	}
	if sc.calls != 1 {
		t.Errorf("calls = %d, want 1", sc.calls)
	}
}

func TestTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	for _, mode := range []RetryMode{RetryUnprocessed, RetryIdempotent, RetryNever} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			c := &Client{Provider: "prov", BaseURL: "http://" + addr, Retry: Retry{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond}, Stats: &Stats{}}
			err := c.JSON(t.Context(), Request{Method: "POST", Path: "x", Retry: mode}, nil)
			if err == nil {
				t.Fatal("JSON() against a closed port = nil, want an error")
			}
			want := int64(3)
			if mode == RetryNever {
				want = 1
			}
			if got := c.Stats.Snapshot().Requests; got != want {
				t.Errorf("attempts = %d, want %d (a refused connection never reached the server)", got, want)
			}
			if errors.Is(err, ErrMaybeDone) {
				t.Errorf("error %v says the request may have been carried out; a refused connection never reached the server", err)
			}
		})
	}
}

// TestConnectionLostAfterSend: a request whose connection drops after it was sent may
// have been carried out; RetryUnprocessed does not send it again and says so.
func TestConnectionLostAfterSend(t *testing.T) {
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		mu.Lock()
		calls++
		mu.Unlock()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		mode          RetryMode
		wantCalls     int
		wantMaybeDone bool
	}{
		{RetryUnprocessed, 1, true},
		{RetryIdempotent, 3, false},
		{RetryNever, 1, false},
	} {
		t.Run(fmt.Sprint(tc.mode), func(t *testing.T) {
			mu.Lock()
			calls = 0
			mu.Unlock()
			c := &Client{Provider: "prov", BaseURL: srv.URL, Retry: Retry{Attempts: 3, Base: time.Millisecond, Max: time.Millisecond}}
			err := c.JSON(t.Context(), Request{Method: "POST", Path: "x", JSON: map[string]int{"n": 1}, Retry: tc.mode}, nil)
			if err == nil {
				t.Fatal("JSON() over a dropped connection = nil, want an error")
			}
			mu.Lock()
			got := calls
			mu.Unlock()
			if got != tc.wantCalls {
				t.Errorf("requests received = %d, want %d", got, tc.wantCalls)
			}
			if errors.Is(err, ErrMaybeDone) != tc.wantMaybeDone {
				t.Errorf("errors.Is(%v, ErrMaybeDone) = %v, want %v", err, !tc.wantMaybeDone, tc.wantMaybeDone)
			}
		})
	}
}

func TestCancelDuringWait(t *testing.T) {
	sc := &script{steps: []step{{503, map[string]string{"Retry-After": "5"}, ``}}}
	srv := httptest.NewServer(sc)
	defer srv.Close()
	c := &Client{Provider: "prov", BaseURL: srv.URL}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	err := c.JSON(ctx, Request{Method: "GET", Path: "x"}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("returned after %v, want promptly after the cancel", d)
	}
}

func TestAcceptAndStats(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/poll", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusRequestTimeout)
	})
	mux.HandleFunc("/api/echo", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret-token" || r.Header.Get("X-Extra") != "1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"got":%q,"query":%q}`, b, r.URL.RawQuery)
	})
	c, _ := newClient(t, mux)
	resp, err := c.Do(t.Context(), Request{Method: "POST", Path: "poll", Accept: []int{408}})
	if err != nil || resp.StatusCode != 408 {
		t.Fatalf("Do(accept 408) = %v, %v; want the 408 response", resp, err)
	}
	resp.Body.Close()
	var out struct{ Got, Query string }
	err = c.JSON(t.Context(), Request{Method: "POST", Path: "/echo", Query: map[string][]string{"a": {"1", "2"}}, Header: http.Header{"X-Extra": {"1"}}, Body: BytesBody([]byte("hello"), "text/plain")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(struct{ Got, Query string }{"hello", "a=1&a=2"}, out); diff != "" {
		t.Errorf("echo mismatch (-want +got):\n%s", diff)
	}
	st := c.Stats.Snapshot()
	if st.Requests != 2 || st.BytesSent != 5 || st.BytesReceived < int64(len(`{"got":"hello","query":"a=1&a=2"}`)) {
		t.Errorf("stats = %+v, want 2 requests, 5 bytes sent and the response bytes received", st)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the redirect target received a request with Authorization %q", r.Header.Get("Authorization"))
	}))
	defer other.Close()
	c, _ := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
	}))
	err := c.JSON(t.Context(), Request{Method: "GET", Path: "x"}, nil)
	if StatusCode(err) != http.StatusFound {
		t.Errorf("error = %v, want the 302 returned as an error", err)
	}
}

func TestMultipartFile(t *testing.T) {
	var got map[string]string
	c, _ := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength <= 0 {
			t.Errorf("Content-Length = %d, want the computed length", r.ContentLength)
		}
		mr, err := r.MultipartReader()
		if err != nil {
			t.Error(err)
			return
		}
		got = map[string]string{}
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			got[p.FormName()+"|"+p.FileName()] = string(b)
		}
	}))
	body, err := MultipartFile([][2]string{{"path", "/home/user/x.tgz"}}, "file", "x.tgz", BytesBody([]byte("tar bytes"), ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.JSON(t.Context(), Request{Method: "POST", Path: "up", Body: body}, nil); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"path|": "/home/user/x.tgz", "file|x.tgz": "tar bytes"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("multipart parts mismatch (-want +got):\n%s", diff)
	}
}

func TestPoll(t *testing.T) {
	t.Run("Done", func(t *testing.T) {
		n := 0
		err := Poll(t.Context(), time.Second, time.Millisecond, time.Millisecond, func(context.Context) (bool, error) {
			n++
			return n == 3, nil
		})
		if err != nil || n != 3 {
			t.Errorf("Poll = %v after %d checks, want nil after 3", err, n)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		err := Poll(t.Context(), 30*time.Millisecond, time.Millisecond, 5*time.Millisecond, func(context.Context) (bool, error) { return false, nil })
		if !errors.Is(err, ErrWaitTimeout) {
			t.Errorf("Poll = %v, want ErrWaitTimeout", err)
		}
	})
	t.Run("CheckError", func(t *testing.T) {
		boom := errors.New("boom")
		err := Poll(t.Context(), time.Second, time.Millisecond, time.Millisecond, func(context.Context) (bool, error) { return false, boom })
		if !errors.Is(err, boom) {
			t.Errorf("Poll = %v, want boom", err)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := Poll(ctx, time.Second, time.Millisecond, time.Millisecond, func(context.Context) (bool, error) { return false, nil })
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrWaitTimeout) {
			t.Errorf("Poll = %v, want context.Canceled and not a timeout", err)
		}
	})
}

func TestConfigError(t *testing.T) {
	err := error(&ConfigError{Provider: "vercel", Vars: []string{"VERCEL_TEAM_ID"}, Problem: "is not set", Hint: "set it"})
	if !errors.Is(err, providers.ErrConfig) {
		t.Errorf("errors.Is(ConfigError, ErrConfig) = false")
	}
	if got, want := err.Error(), "vercel: VERCEL_TEAM_ID is not set (set it)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
