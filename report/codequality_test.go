package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
)

type cqRow struct {
	CheckName   string `json:"check_name"`
	Description string `json:"description"`
	Severity    string `json:"severity"`
	Fingerprint string `json:"fingerprint"`
	Location    struct {
		Path  string `json:"path"`
		Lines struct {
			Begin int `json:"begin"`
		} `json:"lines"`
	} `json:"location"`
}

func codeQualityRows(t *testing.T, r *result.Result, secrets ...string) []cqRow {
	t.Helper()
	data, err := CodeQuality(r, hygiene.NewRedactor(secrets...))
	if err != nil {
		t.Fatalf("CodeQuality() = %v", err)
	}
	var rows []cqRow
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatalf("code quality report is not a JSON array: %v\n%s", err, data)
	}
	return rows
}

func outcomeResult(verdict string, partial bool, source, reason string) *result.Result {
	r := &result.Result{Schema: result.Schema, Verdict: verdict, Partial: partial, Reason: reason, ExitCode: 3}
	r.Run.ID = "run-" + reason
	r.Run.ProjectDir = "/src/project"
	if source != "" {
		r.Rubric = &result.Rubric{Name: "plan-secure", Source: source}
	}
	return r
}

// An errored or budget-cut run must not produce an empty report, which GitLab shows as
// "no issues".
func TestCodeQualityRunWithoutVerdict(t *testing.T) {
	t.Parallel()
	type want struct{ Check, Severity, Path string }
	cases := []struct {
		name string
		r    *result.Result
		want want
	}{
		{"error, rubric file", outcomeResult(result.VerdictError, false, ".talkops/rubric.toml", "sandbox create failed"),
			want{"talkops/run-error", "blocker", ".talkops/rubric.toml"}},
		{"error, @file resolved to an absolute path", outcomeResult(result.VerdictError, false, "@/src/project/rubrics/plan.md", "judge unreachable"),
			want{"talkops/run-error", "blocker", "rubrics/plan.md"}},
		{"error, inline rubric", outcomeResult(result.VerdictError, false, "inline", "judge unreachable"),
			want{"talkops/run-error", "blocker", ".talkops/config.toml"}},
		{"error, rubric outside the project", outcomeResult(result.VerdictError, false, "/etc/rubric.toml", "x"),
			want{"talkops/run-error", "blocker", ".talkops/config.toml"}},
		{"error before the rubric was read", outcomeResult(result.VerdictError, false, "", "bad config"),
			want{"talkops/run-error", "blocker", ".talkops/config.toml"}},
		{"partial fail", outcomeResult(result.VerdictFail, true, ".talkops/rubric.toml", ""),
			want{"talkops/run-partial", "major", ".talkops/rubric.toml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rows := codeQualityRows(t, tc.r)
			if len(rows) != 1 {
				t.Fatalf("got %d issues, want 1: %+v", len(rows), rows)
			}
			got := rows[0]
			if diff := cmp.Diff(tc.want, want{got.CheckName, got.Severity, got.Location.Path}); diff != "" {
				t.Errorf("issue mismatch (-want +got):\n%s", diff)
			}
			if got.Location.Lines.Begin != 1 || got.Fingerprint == "" {
				t.Errorf("issue line %d fingerprint %q, want line 1 and a fingerprint", got.Location.Lines.Begin, got.Fingerprint)
			}
			if !strings.Contains(got.Description, tc.r.Verdict) || (tc.r.Reason != "" && !strings.Contains(got.Description, tc.r.Reason)) {
				t.Errorf("description %q does not name the verdict and reason", got.Description)
			}
		})
	}
}

func TestCodeQualityRunOutcomeFingerprint(t *testing.T) {
	t.Parallel()
	fp := func(r *result.Result) string { return codeQualityRows(t, r)[0].Fingerprint }
	first := fp(outcomeResult(result.VerdictError, false, ".talkops/rubric.toml", "sandbox create failed"))
	if again := fp(outcomeResult(result.VerdictError, false, ".talkops/rubric.toml", "judge timed out")); again != first {
		t.Errorf("fingerprint changed between two errored runs of one rubric: %s, %s", first, again)
	}
	if partial := fp(outcomeResult(result.VerdictFail, true, ".talkops/rubric.toml", "")); partial == first {
		t.Errorf("an error and a partial run share fingerprint %s", first)
	}
	other := outcomeResult(result.VerdictError, false, ".talkops/rubric.toml", "sandbox create failed")
	other.Rubric.Name = "another"
	if fp(other) == first {
		t.Errorf("two rubrics share fingerprint %s", first)
	}
}

func TestCodeQualityRunOutcomeRedacted(t *testing.T) {
	t.Parallel()
	rows := codeQualityRows(t, outcomeResult(result.VerdictError, false, "inline", "token "+fixtureSecret+" rejected"), fixtureSecret)
	if strings.Contains(rows[0].Description, fixtureSecret) {
		t.Errorf("description leaks the secret: %q", rows[0].Description)
	}
}

func TestCodeQualityVerdictHasNoOutcomeIssue(t *testing.T) {
	t.Parallel()
	for _, v := range []string{result.VerdictPass, result.VerdictFail} {
		if rows := codeQualityRows(t, outcomeResult(v, false, ".talkops/rubric.toml", "")); len(rows) != 0 {
			t.Errorf("verdict %s without findings: got %+v, want []", v, rows)
		}
	}
}
