package contract

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/talkops/talkops/providers"
)

// Configured is the harness of `talkops provider test`: it builds the provider as the
// user configured it for each check, and gives sandboxes a scratch project directory (the
// local provider runs in it), never the user's project.
type Configured struct {
	Name       string
	WorkingDir string // [sandboxes.providers.NAME] working_dir; "" is the provider's default
	New        func() (providers.Provider, error)
}

// NewProvider builds the provider; a configuration mistake fails the check. The check's
// end closes it, releasing what it holds (an engine client's connections).
func (h *Configured) NewProvider(_ context.Context, t T) providers.Provider {
	p, err := h.New()
	if err != nil {
		t.Fatalf("build the %s provider: %v", h.Name, err)
	}
	t.Cleanup(func() { closeProvider(p) })
	return p
}

// closeProvider closes a provider that holds resources; the others have nothing to close.
func closeProvider(p providers.Provider) {
	if c, ok := p.(io.Closer); ok {
		_ = c.Close()
	}
}

// Spec gives each sandbox its own scratch project directory.
func (h *Configured) Spec(t T) providers.Spec {
	dir, err := os.MkdirTemp("", "talkops-provider-test-")
	if err != nil {
		t.Fatalf("scratch project: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return providers.Spec{ProjectDir: dir, WorkDir: h.WorkingDir}
}

// Alive lists what the provider reports, when it can list.
func (h *Configured) Alive(ctx context.Context) ([]string, bool) {
	return ListedIDs(ctx, h.New, nil)
}

// ListedIDs builds a provider with newProvider and returns the ids its List reports,
// leaving out those skip says to; ok is false when the provider cannot be built, cannot
// list, or the list failed. It is the Alive of the contract's harnesses.
func ListedIDs(ctx context.Context, newProvider func() (providers.Provider, error), skip func(providers.Info) bool) (ids []string, ok bool) {
	p, err := newProvider()
	if err != nil {
		return nil, false
	}
	defer closeProvider(p)
	l, ok := p.(providers.Lister)
	if !ok {
		return nil, false
	}
	infos, err := l.List(ctx)
	if err != nil {
		return nil, false
	}
	ids = make([]string, 0, len(infos))
	for _, in := range infos {
		if skip == nil || !skip(in) {
			ids = append(ids, in.ID)
		}
	}
	return ids, true
}

// Close releases nothing: every sandbox and provider is closed by its check.
func (h *Configured) Close() {}

// Report prints one line per result (PASS, FAIL or SKIP, the guarantee, the time, then
// any messages; STOP for a case an interruption cut short, "----" for one it kept from
// running) and a summary for provider name, and returns how many checks failed. An
// interrupted case is not a failure: its outcome says nothing about the provider.
func Report(w io.Writer, name string, results []Result) (failed int) {
	held, stopped, notRun := 0, 0, 0
	for _, r := range results {
		status := "PASS"
		switch {
		case r.NotRun:
			notRun++
			fmt.Fprintf(w, "----  %-23s %s (not run: interrupted)\n", r.Case.Name, r.Case.Guarantee)
			continue
		case r.Interrupted:
			status = "STOP"
			stopped++
		case !r.Passed:
			status = "FAIL"
			failed++
		case r.Skipped:
			status = "SKIP"
		default:
			held++
		}
		fmt.Fprintf(w, "%s  %-23s %s (%s)\n", status, r.Case.Name, r.Case.Guarantee, r.Duration.Round(10*time.Millisecond))
		if r.Interrupted {
			fmt.Fprintf(w, "      interrupted; what it created was closed\n")
			continue
		}
		for _, m := range r.Messages {
			fmt.Fprintf(w, "      %s\n", strings.ReplaceAll(m, "\n", "\n      "))
		}
	}
	fmt.Fprintf(w, "%d of %d guarantees hold for %s", held, len(results), name)
	if skipped := len(results) - held - failed - stopped - notRun; skipped > 0 {
		fmt.Fprintf(w, " (%d not applicable)", skipped)
	}
	if stopped+notRun > 0 {
		fmt.Fprintf(w, "; interrupted: %d stopped, %d not run", stopped, notRun)
	}
	fmt.Fprintln(w)
	return failed
}
