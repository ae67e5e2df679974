package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/result"
)

type findingTool struct{ env *Env }

func (t *findingTool) Kind() Kind { return ReadOnly }

func (t *findingTool) Def() model.Tool {
	return model.Tool{
		Name: "report_finding",
		Description: "Record one issue you found (a misconfiguration, a bug, a security problem, a failing check) as a structured finding. " +
			"Findings become annotations on the pull request and entries in the reports. Report each distinct issue once, " +
			"with the file and lines it is about when there is one.",
		Schema: schema([]string{"severity", "title", "message"}, map[string]any{
			"path":       str("File the issue is in, relative to the working directory (omit for a project-wide issue)."),
			"start_line": integer("First line of the issue (1-based)."),
			"end_line":   integer("Last line of the issue (inclusive); omit for one line."),
			"severity": map[string]any{"type": "string", "enum": []string{result.SeverityError, result.SeverityWarning, result.SeverityNotice},
				"description": "error: must be fixed; warning: should be fixed; notice: worth knowing."},
			"title":   str("One-line summary."),
			"message": str("What is wrong, why it matters and how to fix it."),
			"rule":    str("A short stable id for the kind of issue, e.g. \"open-ssh-ingress\" or a linter rule id."),
		}),
	}
}

// Fingerprint identifies a finding across runs: the sha256 of rule, path, title and
// message (no line numbers, so an unchanged issue keeps its fingerprint when code moves).
func Fingerprint(f result.Finding) string {
	h := sha256.New()
	for _, s := range []string{f.Rule, f.Path, f.Title, f.Message} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (t *findingTool) Run(ctx context.Context, input json.RawMessage) (Result, error) {
	var in struct {
		Path      string `json:"path"`
		StartLine int    `json:"start_line"`
		EndLine   int    `json:"end_line"`
		Severity  string `json:"severity"`
		Title     string `json:"title"`
		Message   string `json:"message"`
		Rule      string `json:"rule"`
	}
	if err := decode(input, &in); err != nil {
		return invalid(err), nil
	}
	in.Severity = strings.ToLower(strings.TrimSpace(in.Severity))
	switch in.Severity {
	case result.SeverityError, result.SeverityWarning, result.SeverityNotice:
	default:
		return errorf("severity must be error, warning or notice, got %q", in.Severity), nil
	}
	in.Title = strings.TrimSpace(in.Title)
	in.Message = strings.TrimSpace(in.Message)
	if in.Message == "" {
		return errorf("message is required"), nil
	}
	if in.StartLine < 0 || in.EndLine < 0 {
		return errorf("line numbers are 1-based and must not be negative"), nil
	}
	if in.EndLine != 0 && in.StartLine == 0 {
		return errorf("end_line needs start_line"), nil
	}
	if in.EndLine != 0 && in.EndLine < in.StartLine {
		return errorf("end_line %d is before start_line %d", in.EndLine, in.StartLine), nil
	}
	if in.StartLine != 0 && in.Path == "" {
		return errorf("line numbers need a path"), nil
	}
	p := ""
	if in.Path != "" {
		abs, err := t.env.sandboxPath(in.Path)
		if err != nil {
			return invalid(err), nil
		}
		p = path.Clean(t.env.rel(abs))
	}
	f := result.Finding{
		Path:      p,
		StartLine: in.StartLine,
		EndLine:   in.EndLine,
		Severity:  in.Severity,
		Rule:      strings.TrimSpace(in.Rule),
		Title:     in.Title,
		Message:   in.Message,
		Source:    "agent",
	}
	f.Fingerprint = Fingerprint(f)
	where := "project-wide"
	if p != "" {
		where = p
		if f.StartLine > 0 {
			where += fmt.Sprintf(":%d", f.StartLine)
		}
	}
	return Result{Output: fmt.Sprintf("Recorded %s finding %q at %s.", f.Severity, f.Title, where), Finding: &f}, nil
}
