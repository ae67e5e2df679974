package render

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
)

func TestRelPath(t *testing.T) {
	t.Parallel()
	r := &result.Result{Run: result.Run{ProjectDir: "/home/runner/work/x"}, Sandbox: &result.Sandbox{WorkDir: "/workspace"}}
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"infra/sg.tf", "infra/sg.tf", true},
		{"./infra/sg.tf", "infra/sg.tf", true},
		{"/workspace/infra/sg.tf", "infra/sg.tf", true},
		{"/home/runner/work/x/a.tf", "a.tf", true},
		{"file:///workspace/a.tf", "a.tf", true},
		{`infra\win.tf`, "infra/win.tf", true},
		{"/etc/passwd", "", false},
		{"../outside.tf", "", false},
		{"infra/../../outside.tf", "", false},
		{"/workspace", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := RelPath(r, tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("RelPath(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRank(t *testing.T) {
	t.Parallel()
	r := &result.Result{
		Rubric: &result.Rubric{Items: []result.Item{{ID: "req", Required: true}, {ID: "opt"}}},
		Findings: []result.Finding{
			{Message: "notice", Severity: "notice", Source: "agent"},
			{Message: "warn", Severity: "warning", Source: "agent"},
			{Message: "err plain", Severity: "error", Source: "agent"},
			{Message: "err required", Severity: "error", Source: "check:req"},
			{Message: "err in diff", Severity: "error", Source: "check:opt", InDiff: true},
		},
	}
	var got []string
	for _, f := range Rank(Findings(r)) {
		got = append(got, f.Message)
	}
	want := []string{"err in diff", "err required", "err plain", "warn", "notice"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Rank mismatch (-want +got):\n%s", diff)
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	base := result.Finding{Path: "a.tf", Rule: "r", Source: "agent", Message: "open port on line 12", StartLine: 12}
	moved := base
	moved.StartLine, moved.Message = 19, "open port on line 19"
	if Fingerprint(base) != Fingerprint(moved) {
		t.Errorf("fingerprint changed when the finding moved")
	}
	other := base
	other.Path = "b.tf"
	if Fingerprint(base) == Fingerprint(other) {
		t.Errorf("fingerprint ignores the path")
	}
	withSnippet := base
	withSnippet.Snippet = "cidr_blocks = [\"0.0.0.0/0\"]"
	spaced := withSnippet
	spaced.Snippet = "  cidr_blocks   =  [\"0.0.0.0/0\"] "
	if Fingerprint(withSnippet) != Fingerprint(spaced) {
		t.Errorf("fingerprint depends on snippet whitespace")
	}
	dup := &result.Result{Findings: []result.Finding{base, moved}}
	fs := Findings(dup)
	if fs[0].UniqueFingerprint() == fs[1].UniqueFingerprint() || fs[1].Occurrence != 2 {
		t.Errorf("duplicate fingerprints not made unique: %+v", fs)
	}
}

func TestMarkdownBudget(t *testing.T) {
	t.Parallel()
	r := &result.Result{Verdict: "fail", Run: result.Run{Version: "1.0.0", ID: "r"}}
	for i := range 600 {
		r.Findings = append(r.Findings, result.Finding{Path: fmt.Sprintf("f%d.tf", i), StartLine: i + 1,
			Severity: "warning", Message: strings.Repeat("long message ", 20), Source: "agent"})
	}
	for _, limit := range []int{2000, 10000, 65535} {
		md := Markdown(r, Options{MaxBytes: limit, Marker: "<!-- talkops:result:v1 -->", Notes: []string{"a note"}, MaxFindings: 5000})
		if len(md) > limit {
			t.Errorf("Markdown(MaxBytes %d) = %d bytes", limit, len(md))
		}
		if !strings.HasPrefix(md, "<!-- talkops:result:v1 -->\n") {
			t.Errorf("Markdown(MaxBytes %d) does not start with the marker", limit)
		}
		if !strings.Contains(md, "more findings") || !strings.Contains(md, "a note") || !strings.Contains(md, "</sub>") {
			t.Errorf("Markdown(MaxBytes %d) lacks the overflow line, the notes or the footer:\n%s", limit, md[max(0, len(md)-600):])
		}
	}
}

func TestHeadline(t *testing.T) {
	t.Parallel()
	score := 0.5
	r := &result.Result{Verdict: "error", Score: &score, Reason: "judge down\nsecond line ghp_" + strings.Repeat("a", 36),
		Rubric:   &result.Rubric{PassThreshold: 0.8, Counts: result.Counts{Pass: 1, Fail: 1, Error: 1}},
		Findings: []result.Finding{{}, {}}}
	got := Headline(r, hygiene.NewRedactor())
	want := "error: score 0.50 (threshold 0.80), 1 of 3 items failed, 1 could not be evaluated, 2 findings — judge down"
	if got != want {
		t.Errorf("Headline() = %q, want %q", got, want)
	}
}

func TestFindingsIncludeItemFindings(t *testing.T) {
	t.Parallel()
	shared := result.Finding{Path: "a.tf", StartLine: 1, Severity: "error", Message: "m", Source: "check:lint", Fingerprint: "f1"}
	own := result.Finding{Path: "b.tf", StartLine: 2, Severity: "warning", Message: "n", Source: "check:lint", Fingerprint: "f2"}
	r := &result.Result{
		Findings: []result.Finding{shared},
		Rubric:   &result.Rubric{Items: []result.Item{{ID: "lint", Required: true, Findings: []result.Finding{shared, own}}}},
	}
	fs := Findings(r)
	if len(fs) != 2 || fs[1].Path != "b.tf" || fs[1].Item == nil || !fs[1].Required {
		t.Fatalf("Findings() = %+v, want the top-level one and the item's own, owned by the required item", fs)
	}
	if got := Headline(r, nil); !strings.Contains(got, "2 findings") {
		t.Errorf("Headline() = %q, want it to count item findings", got)
	}
}
