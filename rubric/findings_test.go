package rubric

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/result"
)

// parseSamples maps each tool-output sample in testdata/parse to its format. Goldens are
// <sample>.golden.json; rewrite them with go test -update.
var parseSamples = []struct{ file, format string }{
	{"tofu-validate.json", FormatTofuValidateJSON},
	{"tofu-validate-ok.json", FormatTofuValidateJSON},
	{"golangci-lint.sarif", FormatSARIF},
	{"tfsec.sarif", FormatSARIF},
	{"tflint.checkstyle.xml", FormatCheckstyle},
	{"go-test.junit.xml", FormatJUnit},
	{"pytest.junit.xml", FormatJUnit},
	{"reviewdog.rdjson", FormatRDJSON},
	{"reviewdog.rdjsonl", FormatRDJSONL},
}

func TestParseFindingsGolden(t *testing.T) {
	t.Parallel()
	for _, s := range parseSamples {
		t.Run(s.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("testdata/parse", s.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseFindings(s.format, data, FindingContext{Rubric: "infra-gate", Check: "lint", WorkDir: "/workspace"})
			if err != nil {
				t.Fatalf("ParseFindings(%s): %v", s.format, err)
			}
			gotJSON, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			gotJSON = append(gotJSON, '\n')
			golden := filepath.Join("testdata/parse", s.file+".golden.json")
			if *update {
				if err := os.WriteFile(golden, gotJSON, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -update): %v", err)
			}
			if diff := cmp.Diff(string(want), string(gotJSON)); diff != "" {
				t.Errorf("ParseFindings(%s) mismatch (-want +got):\n%s", s.file, diff)
			}
			for i, f := range got {
				if f.Source != "check:lint" || len(f.Fingerprint) != 64 || f.Message == "" {
					t.Errorf("finding %d = %+v: want Source check:lint, a sha256 fingerprint and a message", i, f)
				}
				switch f.Severity {
				case result.SeverityError, result.SeverityWarning, result.SeverityNotice:
				default:
					t.Errorf("finding %d severity %q, want error|warning|notice", i, f.Severity)
				}
				if strings.HasPrefix(f.Path, "/") || strings.HasPrefix(f.Path, "../") || strings.HasPrefix(f.Path, "./") {
					t.Errorf("finding %d path %q is not workspace-relative", i, f.Path)
				}
			}
		})
	}
}

func TestParseFindingsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format, input, want string
	}{
		{FormatSARIF, "", "parse sarif output: the output is empty"},
		{FormatSARIF, "{\n  \"version\": \"2.1.0\",\n  \"runs\": [ oops ]\n}", "parse sarif output: line 3, column 13: invalid character 'o'"},
		{FormatSARIF, `{"version":"2.1.0"}`, `not a SARIF log: no "runs" array`},
		{FormatSARIF, `{"version":"1.0.0","runs":[]}`, `SARIF version "1.0.0" is not supported`},
		{FormatSARIF, `{"runs": {"results": []}}`, "cannot unmarshal object"},
		{FormatRDJSON, `{"diagnostics":[{"message":"m","severity":{}}]}`, "diagnostic 1: severity {} is neither a name nor a number"},
		{FormatRDJSONL, "{\"message\":\"ok\"}\n{not json}\n", "parse rdjsonl output: line 2:"},
		{FormatJUnit, "<html><body>502 Bad Gateway</body></html>", "root element is <html>, want <testsuites> or <testsuite>"},
		{FormatJUnit, "<testsuite><testcase name=\"a\">", "parse junit output: line 1: XML syntax error"},
		{FormatJUnit, "<?xml version=\"1.0\" encoding=\"UTF-16\"?><testsuite/>", `unsupported XML encoding "UTF-16"`},
		{FormatCheckstyle, "<testsuites/>", "root element is <testsuites>, want <checkstyle>"},
		{FormatCheckstyle, "   ", "the output is empty"},
		{FormatTofuValidateJSON, `{"diagnostics": []}`, `not "tofu validate -json" output`},
		{FormatTofuValidateJSON, "Error: Module not installed\n", "invalid character 'E'"},
		{"eslint", "[]", `unknown format "eslint"; valid formats are sarif, rdjson`},
	}
	for _, tt := range tests {
		t.Run(tt.format+"/"+tt.want, func(t *testing.T) {
			t.Parallel()
			got, err := ParseFindings(tt.format, []byte(tt.input), FindingContext{Check: "c"})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseFindings(%s, %q) = %v, %v; want error containing %q", tt.format, tt.input, got, err, tt.want)
			}
		})
	}
}

func TestParseFindingsLimits(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := 0; i < MaxFindings+10; i++ {
		b.WriteString(`{"message":"m","location":{"path":"a.go","range":{"start":{"line":1}}}}` + "\n")
	}
	got, total, err := parseFindings(FormatRDJSONL, []byte(b.String()), FindingContext{Check: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxFindings || total != MaxFindings+10 {
		t.Errorf("parseFindings kept %d of %d, want %d of %d", len(got), total, MaxFindings, MaxFindings+10)
	}

	long := strings.Repeat("é", MaxMessageBytes) // 2 bytes each
	got, err = ParseFindings(FormatRDJSONL, []byte(`{"message":"`+long+`\u0000`+"\xff"+`"}`), FindingContext{Check: "c"})
	if err != nil {
		t.Fatal(err)
	}
	m := got[0].Message
	if len(m) > MaxMessageBytes || !strings.HasSuffix(m, "…") || strings.ContainsRune(m, 0) {
		t.Errorf("message is %d bytes, ends %q: want at most %d bytes, cut with an ellipsis, no NUL", len(m), m[len(m)-8:], MaxMessageBytes)
	}
}

func TestNormPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, workDir, want string
		ok                bool
	}{
		{"main.tf", "/workspace", "main.tf", true},
		{"./modules/web/../web/main.tf", "/workspace", "modules/web/main.tf", true},
		{"/workspace/infra/main.tf", "/workspace", "infra/main.tf", true},
		{"/workspace/", "/workspace", "", true},
		{"/workspace2/x.tf", "/workspace", "", false},
		{"/etc/passwd", "/workspace", "", false},
		{"../outside.tf", "/workspace", "", false},
		{"/abs.tf", "", "", false},
		{"/home/daytona/x.tf", "/", "home/daytona/x.tf", true},
		{"https://example.com/x.tf", "/workspace", "", false},
		{"", "/workspace", "", true},
	}
	for _, tt := range tests {
		got, ok := normPath(tt.in, tt.workDir)
		if got != tt.want || ok != tt.ok {
			t.Errorf("normPath(%q, %q) = %q, %v; want %q, %v", tt.in, tt.workDir, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFingerprintIgnoresLines(t *testing.T) {
	t.Parallel()
	a := Fingerprint("gate", "lint", "SC2086", "deploy.sh", "Double quote to prevent globbing (line 12)")
	b := Fingerprint("gate", "lint", "SC2086", "deploy.sh", "Double  quote to prevent globbing (line 40)")
	if a != b {
		t.Errorf("fingerprints differ across a line shift: %s vs %s", a, b)
	}
	for _, other := range []string{
		Fingerprint("gate2", "lint", "SC2086", "deploy.sh", "Double quote to prevent globbing"),
		Fingerprint("gate", "lint2", "SC2086", "deploy.sh", "Double quote to prevent globbing"),
		Fingerprint("gate", "lint", "SC2087", "deploy.sh", "Double quote to prevent globbing"),
		Fingerprint("gate", "lint", "SC2086", "other.sh", "Double quote to prevent globbing"),
		Fingerprint("gate", "lint", "SC2086", "deploy.sh", "Quote to prevent globbing"),
		Fingerprint("gatelint", "", "SC2086", "deploy.sh", "Double quote to prevent globbing"),
	} {
		if other == a {
			t.Errorf("fingerprint %s does not depend on every field", a)
		}
	}
}
