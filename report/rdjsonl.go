package report

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// rdDiagnostic is reviewdog's Diagnostic (RDFormat) in its JSON form. Only fields of the
// format are written: reviewdog decodes strictly.
type rdDiagnostic struct {
	Message  string      `json:"message"`
	Location *rdLocation `json:"location,omitempty"`
	Severity string      `json:"severity"`
	Source   rdSource    `json:"source"`
	Code     *rdCode     `json:"code,omitempty"`
}

type rdLocation struct {
	Path  string   `json:"path"`
	Range *rdRange `json:"range,omitempty"`
}

type rdRange struct {
	Start rdPosition  `json:"start"`
	End   *rdPosition `json:"end,omitempty"`
}

type rdPosition struct {
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

type rdSource struct {
	Name string `json:"name"`
}

type rdCode struct {
	Value string `json:"value"`
}

func rdSeverity(s string) string {
	switch s {
	case result.SeverityError:
		return "ERROR"
	case result.SeverityWarning:
		return "WARNING"
	case result.SeverityNotice:
		return "INFO"
	}
	return "UNKNOWN_SEVERITY"
}

// RDJSONL renders every finding as one reviewdog Diagnostic per line, so
// `reviewdog -f=rdjsonl` can post them with any of its reporters. Without columns the
// range is line-wise and inclusive; with columns the end column is exclusive, as the
// format specifies.
func RDJSONL(r *result.Result, red *hygiene.Redactor) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, f := range render.Findings(r) {
		msg := f.Message
		if f.Title != "" {
			msg = f.Title + ": " + msg
		}
		d := rdDiagnostic{
			Message:  red.Text(msg),
			Severity: rdSeverity(f.Severity),
			Source:   rdSource{Name: "talkops"},
		}
		if f.Rule != "" {
			d.Code = &rdCode{Value: red.Text(f.Rule)}
		}
		if f.Located {
			d.Location = &rdLocation{Path: f.Path}
			if f.StartLine > 0 {
				rg := &rdRange{Start: rdPosition{Line: f.StartLine}}
				end := f.EndLineOrStart()
				switch {
				case f.StartColumn > 0 && end == f.StartLine:
					rg.Start.Column = f.StartColumn
					if f.EndColumn >= f.StartColumn {
						rg.End = &rdPosition{Line: end, Column: f.EndColumn + 1}
					}
				case end != f.StartLine:
					rg.End = &rdPosition{Line: end}
				}
				d.Location.Range = rg
			}
		}
		if err := enc.Encode(d); err != nil {
			return nil, fmt.Errorf("encode rdjsonl: %w", err)
		}
	}
	return buf.Bytes(), nil
}
