package report

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/report/render"
	"github.com/talkops/talkops/result"
)

// Names of the files WriteFiles derives from result.json.
const (
	SummaryFile     = "summary.md"
	JUnitFile       = "junit.xml"
	CodeQualityFile = "gl-code-quality-report.json"
	SARIFFile       = "results.sarif"
	RDJSONLFile     = "findings.rdjsonl"
)

// summaryFileBytes caps summary.md; the complete data stays in result.json.
const summaryFileBytes = 4 << 20

// WriteFiles writes the derived files (summary.md, junit.xml, gl-code-quality-report.json,
// results.sarif, findings.rdjsonl) into dir and returns their paths. Every string from
// the run is redacted of the given secrets and of well-known token shapes. It writes
// every file it can and joins the errors of those it could not.
func WriteFiles(dir string, r *result.Result, secrets ...string) ([]string, error) {
	if r == nil {
		return nil, errors.New("write report files: no result")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write report files: %w", err)
	}
	red := hygiene.NewRedactor(secrets...)
	md := func(r *result.Result, red *hygiene.Redactor) ([]byte, error) {
		return []byte(render.Markdown(r, render.Options{
			Redactor:    red,
			MaxBytes:    summaryFileBytes,
			MaxFindings: 500,
			MoreAt:      "result.json and " + SARIFFile,
		})), nil
	}
	outputs := []struct {
		name   string
		render func(*result.Result, *hygiene.Redactor) ([]byte, error)
	}{
		{SummaryFile, md},
		{JUnitFile, JUnit},
		{CodeQualityFile, CodeQuality},
		{SARIFFile, SARIF},
		{RDJSONLFile, RDJSONL},
	}
	var paths []string
	var errs []error
	for _, o := range outputs {
		data, err := o.render(r, red)
		if err == nil {
			p := filepath.Join(dir, o.name)
			if err = writeFile(p, data); err == nil {
				paths = append(paths, p)
				continue
			}
		}
		errs = append(errs, fmt.Errorf("write %s: %w", o.name, err))
	}
	return paths, errors.Join(errs...)
}

// writeFile replaces path atomically, so a CI step reading it never sees half a file.
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
