package model

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/talkops/talkops/internal/backoff"
)

// RetryPolicy bounds how a Model retries calls that failed for a temporary reason: HTTP
// 408, 409, 429 and 5xx, and transport failures (refused, reset or dropped connections,
// truncated bodies). 400, 401, 403, 404 and 422 fail at once.
//
// The wait before a retry is the provider's Retry-After (or retry-after-ms) when it sent
// one, honoured exactly; otherwise exponential backoff from BaseDelay, capped at MaxDelay,
// with jitter (a random wait between half and all of the backoff). A call gives up early,
// returning the last error, when the next wait would push the total waiting past
// MaxTotalWait or past the context's deadline: waiting that cannot end in a usable reply
// is never done.
//
// The SDKs' own retries are disabled (option.WithMaxRetries(0)) so that one policy, with
// one set of caps and observable through WithRetryHook, applies to every provider.
type RetryPolicy struct {
	// MaxAttempts is the number of calls including the first; 1 disables retries.
	MaxAttempts int
	// BaseDelay is the first backoff.
	BaseDelay time.Duration
	// MaxDelay caps one backoff (not a provider's Retry-After).
	MaxDelay time.Duration
	// MaxTotalWait caps the sum of all waits of one Complete call.
	MaxTotalWait time.Duration
	// Sleep waits for d or until ctx is done. Nil uses a timer; tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultRetryPolicy is the policy New uses unless WithRetry is given.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:  5,
	BaseDelay:    time.Second,
	MaxDelay:     30 * time.Second,
	MaxTotalWait: 2 * time.Minute,
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultRetryPolicy.MaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultRetryPolicy.BaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultRetryPolicy.MaxDelay
	}
	if p.MaxTotalWait <= 0 {
		p.MaxTotalWait = DefaultRetryPolicy.MaxTotalWait
	}
	if p.Sleep == nil {
		p.Sleep = backoff.Sleep
	}
	return p
}

// RetryEvent describes one retry, for WithRetryHook.
type RetryEvent struct {
	Provider string
	// Attempt is the attempt that failed (1-based); attempt+1 follows after Wait.
	Attempt int
	Wait    time.Duration
	Err     error
}

type retryHookKey struct{}

type progressKey struct{}

// WithProgress returns a context under which a Model call reports each sign of life from
// the provider to progress: for a streamed reply, every chunk of bytes received. The agent
// feeds its stall watchdog with it, so a slow but streaming reply is not a stall.
// progress must be cheap and safe for concurrent use.
func WithProgress(ctx context.Context, progress func()) context.Context {
	return context.WithValue(ctx, progressKey{}, progress)
}

func progressFunc(ctx context.Context) func() {
	f, _ := ctx.Value(progressKey{}).(func())
	return f
}

// WithRetryHook returns a context under which every retry of a Model call reports to hook
// before it waits (like net/http/httptrace). The agent uses it to emit warnings.
func WithRetryHook(ctx context.Context, hook func(RetryEvent)) context.Context {
	return context.WithValue(ctx, retryHookKey{}, hook)
}

func retryHook(ctx context.Context) func(RetryEvent) {
	h, _ := ctx.Value(retryHookKey{}).(func(RetryEvent))
	return h
}

// backoff returns the wait before attempt+1 after attempt failed with err.
func (p RetryPolicy) backoff(attempt int, err error) time.Duration {
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.RetryAfter > 0 {
		return apiErr.RetryAfter
	}
	return backoff.Jittered(p.BaseDelay, p.MaxDelay, attempt)
}

// retryable reports whether err is worth another attempt.
func retryable(err error) bool {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Temporary()
	}
	var tErr *TransportError
	return errors.As(err, &tErr)
}

// do calls call until it succeeds, fails permanently, or the policy gives up. It stamps the
// attempt count on the returned error.
func (p RetryPolicy) do(ctx context.Context, provider string, call func(context.Context) (Response, error)) (Response, error) {
	p = p.withDefaults()
	var waited time.Duration
	for attempt := 1; ; attempt++ {
		resp, err := call(ctx)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return Response{}, &ctxError{provider: provider, err: ctx.Err()}
		}
		stamp(err, attempt)
		if !retryable(err) || attempt >= p.MaxAttempts {
			return Response{}, err
		}
		wait := p.backoff(attempt, err)
		if waited+wait > p.MaxTotalWait {
			return Response{}, err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return Response{}, err
		}
		if h := retryHook(ctx); h != nil {
			h(RetryEvent{Provider: provider, Attempt: attempt, Wait: wait, Err: err})
		}
		if err := p.Sleep(ctx, wait); err != nil {
			return Response{}, &ctxError{provider: provider, err: err}
		}
		waited += wait
	}
}

func stamp(err error, attempt int) {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		apiErr.Attempts = attempt
	}
	var tErr *TransportError
	if errors.As(err, &tErr) {
		tErr.Attempts = attempt
	}
}

// ctxError is a call abandoned because its context ended; errors.Is finds the context error.
type ctxError struct {
	provider string
	err      error
}

func (e *ctxError) Error() string { return e.provider + " API call abandoned: " + e.err.Error() }
func (e *ctxError) Unwrap() error { return e.err }

// parseRetryAfter reads retry-after-ms (milliseconds, OpenAI and Anthropic send it) or
// Retry-After (seconds or an HTTP date) from h. Negative or unparsable values are ignored.
func parseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
