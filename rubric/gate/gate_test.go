package gate

import (
	"strings"
	"testing"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/result"
)

// A failing check whose output names a path the sync left out says so in its reason and
// a warning; passing checks and checks naming other paths are left alone.
func TestWarnLeftOut(t *testing.T) {
	it := result.Iteration{Items: []result.Item{
		{ID: "tests", Kind: "check", Status: result.StatusFail, Reason: "exit 1",
			Check: &result.Check{StderrTail: "open fixtures/big.bin: no such file or directory"}},
		{ID: "lint", Kind: "check", Status: result.StatusPass,
			Check: &result.Check{StdoutTail: "fixtures/big.bin ok"}},
		{ID: "build", Kind: "check", Status: result.StatusFail,
			Check: &result.Check{StderrTail: "main.go:3: syntax error"}},
	}}
	var warnings []string
	sink := events.Func(func(e events.Event) {
		if e.Type == events.Warning {
			warnings = append(warnings, e.Message)
		}
	})
	warnLeftOut(&it, []result.LeftOut{{Path: "fixtures/big.bin", Reason: "larger than max_file_size"}}, sink)
	if r := it.Items[0].Reason; !strings.HasPrefix(r, "exit 1; its output names fixtures/big.bin (larger than max_file_size), left out") {
		t.Errorf("failing check's reason = %q", r)
	}
	if it.Items[1].Reason != "" || it.Items[2].Reason != "" {
		t.Errorf("other items changed: %q, %q", it.Items[1].Reason, it.Items[2].Reason)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "check tests failed and its output names fixtures/big.bin") {
		t.Errorf("warnings = %q", warnings)
	}
}
