package report

import (
	"encoding/json"
	"fmt"

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
func CodeQuality(r *result.Result, red *hygiene.Redactor) ([]byte, error) {
	issues := []cqIssue{}
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
