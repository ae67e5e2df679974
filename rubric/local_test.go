package rubric

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/result"
)

// newLocal returns a local-provider sandbox working in dir, closed at the end of the test.
func newLocal(t *testing.T, dir string) providers.Sandbox {
	t.Helper()
	p := local.New(local.Options{})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "rubric-test", ProjectDir: dir})
	if err != nil {
		t.Fatalf("local.Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if alive := p.Alive(); len(alive) != 0 {
			t.Errorf("sandboxes still alive after Close: %v", alive)
		}
	})
	return sb
}

// TestLocalProvider runs the rubric's sandbox-facing parts against the real local provider:
// the example rubric, a parse_file download, and cancelling a running
// process tree.
func TestLocalProvider(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("gofmt"); err != nil {
		t.Skip("gofmt not on PATH")
	}
	dir := t.TempDir()
	writeFile(t, dir, "go.mod", "module github.com/talkops/talkops\n")
	writeFile(t, dir, "README.md", "# talkops\n")
	writeFile(t, dir, "main.go", "package main\n\nfunc main() {}\n")
	writeFile(t, dir, ".github/workflows/ci.yml", "on: push\n")
	sb := newLocal(t, dir)

	t.Run("example rubric", func(t *testing.T) {
		r, err := Parse("../examples/checks.toml", ".")
		if err != nil {
			t.Fatal(err)
		}
		items := RunChecks(t.Context(), sb, r, nil)
		if _, status := Score(items, r.PassThreshold); status != result.RubricSatisfied {
			t.Errorf("examples/checks.toml on the local provider: %s\n%+v", status, items)
		}
	})

	t.Run("parse_file", func(t *testing.T) {
		r := mustParseTOML(t, `
name = "gate"
[[check]]
id         = "lint"
run        = "mkdir -p reports && printf '%s' '{\"runs\":[{\"results\":[{\"ruleId\":\"R\",\"message\":{\"text\":\"m\"},\"locations\":[{\"physicalLocation\":{\"artifactLocation\":{\"uri\":\"main.go\"},\"region\":{\"startLine\":3}}}]}]}]}' > reports/lint.sarif"
parse      = "sarif"
parse_file = "reports/lint.sarif"
`)
		items := RunChecks(t.Context(), sb, r, nil)
		if items[0].Status != result.StatusPass || len(items[0].Findings) != 1 || items[0].Findings[0].Path != "main.go" {
			t.Errorf("parse_file check = %s (%s) with findings %+v, want pass with one finding on main.go", items[0].Status, items[0].Reason, items[0].Findings)
		}
	})

	t.Run("cancel a running check", func(t *testing.T) {
		r := mustParseTOML(t, "[[check]]\nid = \"slow\"\nrun = \"sleep 60 & sleep 60; wait\"\n[[check]]\nid = \"next\"\nrun = \"true\"\n")
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		sink := events.Func(func(e events.Event) {
			if e.Type == events.CheckStarted {
				go func() {
					time.Sleep(100 * time.Millisecond) // let the shell start its children
					cancel(errors.New("SIGINT"))
				}()
			}
		})
		done := make(chan []result.Item, 1)
		go func() { done <- RunChecks(ctx, sb, r, sink) }()
		select {
		case items := <-done:
			var got []string
			for _, it := range items {
				got = append(got, it.ID+"="+string(it.Status)+": "+it.Reason)
			}
			want := []string{"slow=error: interrupted while running: SIGINT", "next=skipped: not run: SIGINT"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after cancel (-want +got):\n%s", diff)
			}
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatal("RunChecks did not return after cancellation")
		}
	})
}
