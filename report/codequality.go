package report

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// cqIssue is one GitLab Code Quality entry (a subset of the Code Climate issue format;
// GitLab reads description, check_name, fingerprint, severity and location).
type cqIssue struct {
	Type        string     `json:"type"`
	CheckName   string     `json:"check_name"`
	Description string     `json:"description"`
	Categories  []string   `json:"categories"`
	Severity    string     `json:"severity"`
	Fingerprint string     `json:"fingerprint"`
	Location    cqLocation `json:"location"`
	EngineName  string     `json:"engine_name"`
}

type cqLocation struct {
	Path  string  `json:"path"`
	Lines cqLines `json:"lines"`
}

type cqLines struct {
	Begin int `json:"begin"`
	End   int `json:"end,omitempty"`
}

const cqDescriptionBytes = 1000

// CodeQualitySeverity maps a finding to Code Quality's scale: an error from a required
// rubric item is a blocker, other errors are critical, a warning from a required item is
// major, other warnings minor, notices info.
func CodeQualitySeverity(f render.Finding) string {
	switch f.Severity {
	case result.SeverityError:
		if f.Required {
			return "blocker"
		}
		return "critical"
	case result.SeverityWarning:
		if f.Required {
			return "major"
		}
		return "minor"
	}
	return "info"
}

// CodeQuality renders the located findings as a GitLab Code Quality report (a JSON array,
// no byte-order mark). Findings without a repository path cannot be placed in a merge
// request and are left out; they are in summary.md, junit.xml and findings.rdjsonl.
// A run that ended without a verdict, or with a partial one, adds one issue saying so,
// because an empty report reads as a clean change in GitLab's widget.
func CodeQuality(r *result.Result, red *hygiene.Redactor) ([]byte, error) {
	issues := []cqIssue{}
	if is, ok := runOutcomeIssue(r, red); ok {
		issues = append(issues, is)
	}
	for _, f := range render.Findings(r) {
		if !f.Located {
			continue
		}
		desc := f.Message
		if f.Title != "" {
			desc = f.Title + ": " + desc
		}
		begin := max(1, f.StartLine)
		lines := cqLines{Begin: begin}
		if end := f.EndLineOrStart(); end > begin {
			lines.End = end
		}
		issues = append(issues, cqIssue{
			Type:        "issue",
			CheckName:   red.Text(ruleID(f)),
			Description: hygiene.Truncate(oneLine(red.Text(desc)), cqDescriptionBytes),
			Categories:  []string{"Bug Risk"},
			Severity:    CodeQualitySeverity(f),
			Fingerprint: f.PublicFingerprint(),
			Location:    cqLocation{Path: f.Path, Lines: lines},
			EngineName:  "talkops",
		})
	}
	data, err := json.MarshalIndent(issues, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode code quality report: %w", err)
	}
	return append(data, '\n'), nil
}

// ruleID names a finding's rule: its own rule, else talkops/<source>.
func ruleID(f render.Finding) string {
	if f.Rule != "" {
		return f.Rule
	}
	if f.Source != "" {
		return "talkops/" + f.Source
	}
	return "talkops/finding"
}

// projectConfigPath is where a run-outcome issue points when the rubric has no file in
// the repository (inline, or outside the project).
const projectConfigPath = ".talkops/config.toml"

// runOutcomeIssue is the issue for a run that errored (blocker) or was cut short by a
// budget (major). Its fingerprint depends only on the rubric and the outcome, so GitLab
// matches it between pipelines and shows it as resolved once a run gets a verdict.
func runOutcomeIssue(r *result.Result, red *hygiene.Redactor) (cqIssue, bool) {
	var severity, outcome string
	switch {
	case r.Verdict == result.VerdictError:
		severity, outcome = "blocker", "error"
	case r.Partial:
		severity, outcome = "major", "partial"
	default:
		return cqIssue{}, false
	}
	rubricName := ""
	if r.Rubric != nil {
		rubricName = r.Rubric.Name
	}
	sum := sha256.Sum256([]byte("talkops/v1\x00run-outcome\x00" + rubricName + "\x00" + outcome))
	desc := "talkops run did not reach a verdict: " + render.Headline(r, red)
	if outcome == "partial" {
		desc = "talkops run is partial: " + render.Headline(r, red)
	}
	return cqIssue{
		Type:        "issue",
		CheckName:   "talkops/run-" + outcome,
		Description: hygiene.Truncate(oneLine(red.Text(desc)), cqDescriptionBytes),
		Categories:  []string{"Bug Risk"},
		Severity:    severity,
		Fingerprint: hex.EncodeToString(sum[:]),
		Location:    cqLocation{Path: rubricRepoPath(r), Lines: cqLines{Begin: 1}},
		EngineName:  "talkops",
	}, true
}

// rubricRepoPath is the rubric file's path relative to the project, or the project's
// config file when the rubric is inline, missing or outside the project.
func rubricRepoPath(r *result.Result) string {
	if r.Rubric == nil {
		return projectConfigPath
	}
	src := strings.TrimPrefix(r.Rubric.Source, "@")
	if src == "" || src == "inline" || strings.HasPrefix(src, "~") {
		return projectConfigPath
	}
	if filepath.IsAbs(src) {
		if r.Run.ProjectDir == "" {
			return projectConfigPath
		}
		rel, err := filepath.Rel(r.Run.ProjectDir, src)
		if err != nil {
			return projectConfigPath
		}
		src = rel
	}
	src = filepath.ToSlash(filepath.Clean(src))
	if src == "." || src == ".." || strings.HasPrefix(src, "../") || filepath.IsAbs(src) {
		return projectConfigPath
	}
	return src
}
