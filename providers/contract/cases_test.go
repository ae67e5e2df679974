package contract

import (
	"context"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
)

// localHarness runs the checks against the local provider, optionally through wrap.
type localHarness struct {
	dir  string
	wrap func(providers.Provider) providers.Provider
}

func (h *localHarness) NewProvider(context.Context, T) providers.Provider {
	var p providers.Provider = local.New(local.Options{})
	if h.wrap != nil {
		p = h.wrap(p)
	}
	return p
}
func (h *localHarness) Spec(T) providers.Spec                  { return providers.Spec{ProjectDir: h.dir} }
func (h *localHarness) Alive(context.Context) ([]string, bool) { return nil, false }
func (h *localHarness) Close()                                 {}

// swapping is a provider whose sandboxes capture stdout as stderr and the other way round.
type swapping struct{ providers.Provider }

func (p swapping) Create(ctx context.Context, spec providers.Spec) (providers.Sandbox, error) {
	sb, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return swappingSandbox{sb}, nil
}

type swappingSandbox struct{ providers.Sandbox }

func (s swappingSandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	res, err := s.Sandbox.Exec(ctx, cmd)
	res.Stdout, res.Stderr = res.Stderr, res.Stdout
	return res, err
}

// TestOutputChecksCatchSwappedStreams checks that the output comparisons of ExecEcho and
// StdoutStderrApart pass on the local provider and fail, naming what differs, when a
// provider mixes up the captured streams.
func TestOutputChecksCatchSwappedStreams(t *testing.T) {
	only := []string{"ExecEcho", "StdoutStderrApart"}
	maker := func(wrap func(providers.Provider) providers.Provider) HarnessMaker {
		return func(context.Context, T) (Harness, error) { return &localHarness{dir: t.TempDir(), wrap: wrap}, nil }
	}
	for _, r := range Check(t.Context(), maker(nil), only...) {
		if !r.Passed {
			t.Errorf("%s on local failed: %v", r.Case.Name, r.Messages)
		}
	}
	swap := func(p providers.Provider) providers.Provider { return swapping{p} }
	want := map[string]string{
		"ExecEcho":          `stdout "", stderr "[hello]\n`,
		"StdoutStderrApart": `stdout = "err1\nerr2\n", want "out1\nout2\n"`,
	}
	results := Check(t.Context(), maker(swap), only...)
	if len(results) != len(only) {
		t.Fatalf("Check ran %d cases, want %d", len(results), len(only))
	}
	for _, r := range results {
		msgs := strings.Join(r.Messages, "\n")
		if r.Passed {
			t.Errorf("%s passed with swapped stdout and stderr", r.Case.Name)
		} else if !strings.Contains(msgs, want[r.Case.Name]) {
			t.Errorf("%s messages = %q, want them to contain %q", r.Case.Name, msgs, want[r.Case.Name])
		}
	}
}
