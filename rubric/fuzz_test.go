package rubric

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/talkops/talkops/result"
)

func seedFiles(f *testing.F, patterns ...string) [][]byte {
	f.Helper()
	var out [][]byte
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, data)
		}
	}
	if len(out) == 0 {
		f.Fatalf("no seed files match %q", patterns)
	}
	return out
}

// FuzzParseTOML: any input either fails with a positioned *Error or yields a rubric whose
// canonical text parses back to the same rubric.
func FuzzParseTOML(f *testing.F) {
	for _, s := range seedFiles(f, "testdata/rubrics/*.toml", "../examples/*.toml") {
		f.Add(s)
	}
	f.Add([]byte("[[check]]\nid = \"a\"\nrun = []\n[judge]\nvotes = 2\n"))
	f.Add([]byte("check = [{ id = \"a\", run = \"x\", timeout = \"1.5h\", weight = 1e-3 }]\n[[criterion]]\nid='b'\nquestion='''q\n?'''\nevidence=['check:a']\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseTOML(data, "fuzz.toml")
		if err != nil {
			var rerr *Error
			if !errors.As(err, &rerr) {
				t.Fatalf("error %T is not a *rubric.Error: %v", err, err)
			}
			if rerr.File != "fuzz.toml" || rerr.Line < 0 || rerr.Col < 0 || rerr.Msg == "" {
				t.Fatalf("malformed error %+v", rerr)
			}
			return
		}
		if r.Name == "" {
			r.Name = "fuzz"
		}
		if _, err := finish(r); err != nil {
			t.Fatal(err)
		}
		again, err := parseTOML([]byte(r.Text), "canonical.toml")
		if err != nil {
			t.Fatalf("canonical text does not parse: %v\n%s", err, r.Text)
		}
		if _, err := finish(again); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the rubric (-first +again):\n%s", diff)
		}
	})
}

// FuzzParseText: free text either fails with a *Error or yields non-empty one-line
// criteria that survive the canonical round trip.
func FuzzParseText(f *testing.F) {
	for _, s := range seedFiles(f, "testdata/text/*") {
		f.Add(s)
	}
	f.Add([]byte("- a\n  b\n\n1) c\n# H\nd:\n- e"))
	f.Add([]byte(strings.Repeat("x", MaxTextChars+1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseText(data, flagName)
		if err != nil {
			var rerr *Error
			if !errors.As(err, &rerr) {
				t.Fatalf("error %T is not a *rubric.Error: %v", err, err)
			}
			return
		}
		if utf8.RuneCount(data) > MaxTextChars {
			t.Fatalf("accepted %d characters", utf8.RuneCount(data))
		}
		if len(r.Criteria) == 0 {
			t.Fatal("no criteria and no error")
		}
		for _, c := range r.Criteria {
			if c.Title == "" || c.Title != strings.TrimSpace(c.Title) || strings.ContainsAny(c.Title, "\r\n") {
				t.Fatalf("criterion title %q is empty, untrimmed or multi-line", c.Title)
			}
		}
		r.Name = "inline"
		if _, err := finish(r); err != nil {
			t.Fatal(err)
		}
		again, err := parseTOML([]byte(r.Text), "canonical.toml")
		if err != nil {
			t.Fatalf("canonical text does not parse: %v\n%s", err, r.Text)
		}
		if diff := cmp.Diff(r.Criteria, again.Criteria, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the criteria (-first +again):\n%s", diff)
		}
	})
}

// FuzzParseFindings: no tool output makes a parser panic, and every finding it returns is
// well formed.
func FuzzParseFindings(f *testing.F) {
	for i, s := range parseSamples {
		data, err := os.ReadFile(filepath.Join("testdata/parse", s.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), data)
	}
	f.Fuzz(func(t *testing.T, format uint8, data []byte) {
		name := Formats[int(format)%len(Formats)]
		found, err := ParseFindings(name, data, FindingContext{Rubric: "r", Check: "c", WorkDir: "/workspace"})
		if err != nil {
			return
		}
		for _, fd := range found {
			switch fd.Severity {
			case result.SeverityError, result.SeverityWarning, result.SeverityNotice:
			default:
				t.Fatalf("severity %q", fd.Severity)
			}
			if fd.Message == "" || len(fd.Message) > MaxMessageBytes || !utf8.ValidString(fd.Message) || strings.ContainsRune(fd.Message, 0) {
				t.Fatalf("bad message %q", fd.Message)
			}
			if strings.HasPrefix(fd.Path, "/") || fd.Path == ".." || strings.HasPrefix(fd.Path, "../") {
				t.Fatalf("path %q escapes the workspace", fd.Path)
			}
			if fd.StartLine < 0 || fd.EndLine < 0 || (fd.EndLine != 0 && fd.EndLine <= fd.StartLine) {
				t.Fatalf("lines %d-%d", fd.StartLine, fd.EndLine)
			}
		}
	})
}
