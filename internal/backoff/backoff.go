// Package backoff is the wait between retries that the model clients and the sandbox
// providers' HTTP client share: exponential steps with equal jitter, and a sleep that
// ends with its context.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jittered returns the wait after the attempt-th failure (1-based): base doubled per
// earlier failure and capped at limit, of which half is fixed and half random ("equal
// jitter"), so clients that failed together do not retry together.
func Jittered(base, limit time.Duration, attempt int) time.Duration {
	step := base << min(attempt-1, 20)
	if step <= 0 || step > limit {
		step = limit
	}
	half := step / 2
	return half + rand.N(half+1)
}

// Sleep waits for d or until ctx is done, returning ctx.Err() in that case.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
