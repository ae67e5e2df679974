package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/talkops/talkops/internal/backoff"
)

func TestJitteredDoublesWithinCap(t *testing.T) {
	t.Parallel()
	base, limit := 100*time.Millisecond, time.Second
	for _, tc := range []struct {
		attempt int
		step    time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},  // 1.6 s capped
		{80, time.Second}, // the shift stays bounded
	} {
		for range 50 {
			if d := backoff.Jittered(base, limit, tc.attempt); d < tc.step/2 || d > tc.step {
				t.Fatalf("attempt %d: wait %s, want between %s and %s", tc.attempt, d, tc.step/2, tc.step)
			}
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}
