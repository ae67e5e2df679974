package contract

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Result is the outcome of one case run by Check.
type Result struct {
	Case     Case
	Passed   bool
	Skipped  bool
	Messages []string // failures and skip reasons, sub-checks prefixed with their name
	Duration time.Duration
	// Interrupted: ctx was cancelled while the case ran, so its outcome says nothing
	// about the provider. Its cleanups (closing its sandboxes) still ran.
	Interrupted bool
	// NotRun: ctx was cancelled before the case started.
	NotRun bool
}

// Check runs the cases named in only (every case when only is empty) one after the
// other, outside `go test`, and returns their outcomes. Each case gets a fresh harness.
// Once ctx is cancelled, the case running then ends (its cleanups close what it
// created) and is marked Interrupted, and every later case is NotRun.
func Check(ctx context.Context, newHarness HarnessMaker, only ...string) []Result {
	var out []Result
	for _, c := range cases {
		if len(only) > 0 && !slices.Contains(only, c.Name) {
			continue
		}
		if ctx.Err() != nil {
			out = append(out, Result{Case: c, NotRun: true})
			continue
		}
		start := time.Now()
		r := newRunner(ctx, "")
		r.run(func(t T) { c.RunCase(t, newHarness) }) //nolint:contextcheck // the case's t.Context() derives from ctx

		out = append(out, Result{Case: c, Passed: !r.failed, Skipped: r.skipped && !r.failed,
			Messages: r.messages(), Duration: time.Since(start), Interrupted: ctx.Err() != nil})
	}
	return out
}

// runner is a T for one case or sub-check, run on its own goroutine so that Fatal can
// end it with runtime.Goexit as testing does.
type runner struct {
	prefix string
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	cleanups []func()
}

var _ T = (*runner)(nil)

func newRunner(parent context.Context, prefix string) *runner {
	ctx, cancel := context.WithCancel(parent)
	return &runner{prefix: prefix, ctx: ctx, cancel: cancel}
}

// run calls f on a new goroutine and waits for it and its cleanups.
func (r *runner) run(f func(T)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer r.finish()
		defer func() {
			if p := recover(); p != nil {
				r.fail(fmt.Sprintf("panic: %v", p))
			}
		}()
		f(r)
	}()
	<-done
}

// finish cancels the context, then runs the cleanups last-registered first.
func (r *runner) finish() {
	r.cancel()
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		fn := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		func() {
			defer func() {
				if p := recover(); p != nil {
					r.fail(fmt.Sprintf("panic in cleanup: %v", p))
				}
			}()
			fn()
		}()
	}
}

func (r *runner) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, r.prefix+msg)
}

func (r *runner) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

func (r *runner) Helper() {}

func (r *runner) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }

func (r *runner) Fatal(args ...any) {
	r.fail(fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *runner) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *runner) Logf(string, ...any) {}

func (r *runner) Skip(args ...any) { r.skip(fmt.Sprint(args...)) }

func (r *runner) Skipf(format string, args ...any) { r.skip(fmt.Sprintf(format, args...)) }

func (r *runner) skip(msg string) {
	r.mu.Lock()
	r.skipped = true
	r.msgs = append(r.msgs, r.prefix+"skipped: "+msg)
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *runner) Context() context.Context { return r.ctx }

// Run runs a sub-check; its failures are the parent's, prefixed with its name.
func (r *runner) Run(name string, f func(T)) bool {
	child := newRunner(r.ctx, r.prefix+name+": ")
	child.run(f)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, child.msgs...)
	if child.failed {
		r.failed = true
	}
	return !child.failed
}
