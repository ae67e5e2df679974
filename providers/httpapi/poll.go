package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrWaitTimeout is wrapped by Poll when the bound passes before the condition holds.
var ErrWaitTimeout = errors.New("timed out waiting")

// Poll calls check until it reports done, returns an error, ctx ends, or timeout passes.
// The pause between calls starts at initial and grows by half each time up to maxPause.
// A timeout of 0 means only ctx bounds the wait.
func Poll(ctx context.Context, timeout, initial, maxPause time.Duration, check func(ctx context.Context) (bool, error)) error {
	if initial <= 0 {
		initial = 250 * time.Millisecond
	}
	if maxPause < initial {
		maxPause = initial
	}
	pctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	start := time.Now()
	pause := initial
	for {
		done, err := check(pctx)
		if err != nil {
			if ctx.Err() == nil && pctx.Err() != nil {
				return fmt.Errorf("%w after %s: %w", ErrWaitTimeout, time.Since(start).Round(time.Millisecond), err)
			}
			return err
		}
		if done {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-pctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("%w after %s", ErrWaitTimeout, time.Since(start).Round(time.Millisecond))
		case <-t.C:
		}
		pause = min(pause+pause/2, maxPause)
	}
}
