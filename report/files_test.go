package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/talkops/talkops/report/hygiene"
	"github.com/talkops/talkops/result"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixtureSecret is a secret value the rich fixture leaks into a finding.
const fixtureSecret = "hunter2-super-secret"

func loadRich(t *testing.T) *result.Result {
	t.Helper()
	r, err := result.Read(filepath.Join("testdata", "rich.result.json"))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return r
}

func writeRich(t *testing.T) (string, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	paths, err := WriteFiles(dir, loadRich(t), fixtureSecret)
	if err != nil {
		t.Fatalf("WriteFiles() = %v", err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = data
	}
	want := []string{SummaryFile, JUnitFile, CodeQualityFile, SARIFFile, RDJSONLFile}
	for _, name := range want {
		if _, ok := files[name]; !ok {
			t.Fatalf("WriteFiles() did not write %s (wrote %v)", name, paths)
		}
	}
	return dir, files
}

func TestWriteFilesGolden(t *testing.T) {
	t.Parallel()
	_, files := writeRich(t)
	for name, got := range files {
		t.Run(name, func(t *testing.T) {
			golden := filepath.Join("testdata", "golden", name)
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
			}
		})
	}
}

func TestSARIFValidAgainstSchema(t *testing.T) {
	t.Parallel()
	_, files := writeRich(t)
	c := jsonschema.NewCompiler()
	sch, err := c.Compile(filepath.Join("testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatalf("compile SARIF schema: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(files[SARIFFile]))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("results.sarif does not follow the SARIF 2.1.0 schema: %v", err)
	}

	// What GitHub code scanning requires beyond the schema.
	var log struct {
		Schema  string `json:"$schema"`
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string `json:"name"`
					Rules []struct {
						ID               string `json:"id"`
						ShortDescription struct{ Text string }
						FullDescription  struct{ Text string }
						Help             struct{ Text string }
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				Level     string `json:"level"`
				Message   struct{ Text string }
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
						Region           struct{ StartLine int }
					}
				}
				PartialFingerprints map[string]string `json:"partialFingerprints"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(files[SARIFFile], &log); err != nil {
		t.Fatal(err)
	}
	if log.Version != "2.1.0" || log.Schema == "" || len(log.Runs) != 1 {
		t.Fatalf("version %q, $schema %q, %d runs; want 2.1.0, set, 1", log.Version, log.Schema, len(log.Runs))
	}
	run := log.Runs[0]
	if run.Tool.Driver.Name != "talkops" {
		t.Errorf("driver name %q, want talkops", run.Tool.Driver.Name)
	}
	rules := map[string]bool{}
	for _, r := range run.Tool.Driver.Rules {
		if r.ID == "" || r.ShortDescription.Text == "" || r.FullDescription.Text == "" || r.Help.Text == "" {
			t.Errorf("rule %+v lacks id, shortDescription, fullDescription or help", r)
		}
		if len(r.ShortDescription.Text) > 1024 || len(r.FullDescription.Text) > 1024 {
			t.Errorf("rule %s descriptions longer than 1024", r.ID)
		}
		rules[r.ID] = true
	}
	// The rich fixture has four located findings and one without a path.
	if len(run.Results) != 4 {
		t.Errorf("%d results, want 4 (the unlocated finding is left out)", len(run.Results))
	}
	for _, res := range run.Results {
		if !rules[res.RuleID] {
			t.Errorf("result rule %q not among the driver's rules", res.RuleID)
		}
		if res.Message.Text == "" || len(res.Locations) != 1 {
			t.Errorf("result %s: message %q, %d locations", res.RuleID, res.Message.Text, len(res.Locations))
			continue
		}
		pl := res.Locations[0].PhysicalLocation
		if u := pl.ArtifactLocation.URI; u == "" || strings.HasPrefix(u, "/") || strings.Contains(u, "..") {
			t.Errorf("result %s: uri %q is not repository-relative", res.RuleID, u)
		}
		if pl.Region.StartLine < 1 {
			t.Errorf("result %s: startLine %d", res.RuleID, pl.Region.StartLine)
		}
		if res.PartialFingerprints["primaryLocationLineHash"] == "" {
			t.Errorf("result %s: no primaryLocationLineHash", res.RuleID)
		}
	}
	if got := run.Results[0].Locations[0].PhysicalLocation.ArtifactLocation.URI; got != "infra/sg.tf" {
		t.Errorf("sandbox path not made relative: %q, want infra/sg.tf", got)
	}
}

// TestSARIFInvocationOnlySucceedsWhenTheRunCompleted: a run without a verdict, a partial
// run and an interrupted one are not successful executions, even when --advisory made
// their exit code 0.
func TestSARIFInvocationOnlySucceedsWhenTheRunCompleted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*result.Result)
		want bool
	}{
		{"pass", func(r *result.Result) { r.Verdict, r.ExitCode = result.VerdictPass, 0 }, true},
		{"fail", func(r *result.Result) { r.Verdict, r.ExitCode = result.VerdictFail, 1 }, true},
		{"error", func(r *result.Result) { r.Verdict, r.ExitCode = result.VerdictError, 3 }, false},
		{"advisory error", func(r *result.Result) { r.Verdict, r.ExitCode, r.Advisory = result.VerdictError, 0, true }, false},
		{"partial", func(r *result.Result) { r.Verdict, r.ExitCode, r.Partial = result.VerdictFail, 124, true }, false},
		{"advisory partial", func(r *result.Result) {
			r.Verdict, r.ExitCode, r.Partial, r.Advisory = result.VerdictFail, 0, true, true
		}, false},
		{"interrupted", func(r *result.Result) { r.Verdict, r.ExitCode, r.Interrupted = result.VerdictFail, 130, "SIGINT" }, false},
	}
	for _, tc := range tests {
		r := loadRich(t)
		tc.edit(r)
		data, err := SARIF(r, hygiene.NewRedactor())
		if err != nil {
			t.Fatal(err)
		}
		var log struct {
			Runs []struct {
				Invocations []struct {
					ExecutionSuccessful bool `json:"executionSuccessful"`
					ExitCode            int  `json:"exitCode"`
				} `json:"invocations"`
			} `json:"runs"`
		}
		if err := json.Unmarshal(data, &log); err != nil {
			t.Fatal(err)
		}
		if len(log.Runs) != 1 || len(log.Runs[0].Invocations) != 1 {
			t.Fatalf("%s: %d runs, want 1 with one invocation", tc.name, len(log.Runs))
		}
		if inv := log.Runs[0].Invocations[0]; inv.ExecutionSuccessful != tc.want || inv.ExitCode != r.ExitCode {
			t.Errorf("%s: executionSuccessful %v exitCode %d, want %v %d", tc.name, inv.ExecutionSuccessful, inv.ExitCode, tc.want, r.ExitCode)
		}
	}
}

func TestJUnitParsesBack(t *testing.T) {
	t.Parallel()
	_, files := writeRich(t)
	type outcome struct {
		Message string `xml:"message,attr"`
		Type    string `xml:"type,attr"`
		Body    string `xml:",chardata"`
	}
	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Skipped  int      `xml:"skipped,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Classname string   `xml:"classname,attr"`
				Name      string   `xml:"name,attr"`
				File      string   `xml:"file,attr"`
				Failure   *outcome `xml:"failure"`
				Error     *outcome `xml:"error"`
				Skipped   *outcome `xml:"skipped"`
				SystemOut string   `xml:"system-out"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(files[JUnitFile], &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v", err)
	}
	type row struct{ Suite, Class, Name, File, State, Type string }
	var got []row
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			st := "pass"
			typ := ""
			switch {
			case c.Failure != nil:
				st, typ = "failure", c.Failure.Type
			case c.Error != nil:
				st, typ = "error", c.Error.Type
			case c.Skipped != nil:
				st = "skipped"
			}
			got = append(got, row{s.Name, c.Classname, c.Name, c.File, st, typ})
		}
	}
	want := []row{
		{"opentofu-plan-secure", "rubric.opentofu-plan-secure", "check:validate", "", "pass", ""},
		{"opentofu-plan-secure", "rubric.opentofu-plan-secure", "check:no-open-ingress", "infra/sg.tf", "failure", "required"},
		{"opentofu-plan-secure", "rubric.opentofu-plan-secure", "judge:ingress-intent", "", "error", "evaluation"},
		{"opentofu-plan-secure", "rubric.opentofu-plan-secure", "judge:docs-updated", "", "skipped", ""},
		{"talkops", "talkops", "run", "", "pass", ""},
		{"talkops", "talkops", "findings", "infra/variables.tf", "pass", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("testcases mismatch (-want +got):\n%s", diff)
	}
	if doc.Tests != 6 || doc.Failures != 1 || doc.Errors != 1 || doc.Skipped != 1 {
		t.Errorf("totals tests=%d failures=%d errors=%d skipped=%d, want 6 1 1 1", doc.Tests, doc.Failures, doc.Errors, doc.Skipped)
	}
	fail := doc.Suites[0].Cases[1].Failure
	if !strings.Contains(fail.Body, "infra/sg.tf:12 error [talkops/open-ingress]") {
		t.Errorf("failure body does not list the item's finding:\n%s", fail.Body)
	}
	if strings.Contains(doc.Suites[0].Cases[1].SystemOut, "\x1b") {
		t.Errorf("system-out keeps terminal escapes")
	}
}

func TestCodeQualityFields(t *testing.T) {
	t.Parallel()
	_, files := writeRich(t)
	if bytes.HasPrefix(files[CodeQualityFile], []byte("\xef\xbb\xbf")) {
		t.Fatal("code quality report starts with a byte-order mark")
	}
	var issues []struct {
		Description string `json:"description"`
		CheckName   string `json:"check_name"`
		Fingerprint string `json:"fingerprint"`
		Severity    string `json:"severity"`
		Location    struct {
			Path  string `json:"path"`
			Lines struct {
				Begin int `json:"begin"`
			} `json:"lines"`
		} `json:"location"`
	}
	if err := json.Unmarshal(files[CodeQualityFile], &issues); err != nil {
		t.Fatal(err)
	}
	type row struct {
		Check, Severity, Path string
		Line                  int
	}
	var got []row
	fps := map[string]bool{}
	for _, is := range issues {
		if is.Description == "" || is.Fingerprint == "" {
			t.Errorf("issue %+v lacks description or fingerprint", is)
		}
		if fps[is.Fingerprint] {
			t.Errorf("duplicate fingerprint %s", is.Fingerprint)
		}
		fps[is.Fingerprint] = true
		got = append(got, row{is.CheckName, is.Severity, is.Location.Path, is.Location.Lines.Begin})
	}
	want := []row{
		{"talkops/open-ingress", "blocker", "infra/sg.tf", 12},
		{"talkops/unused-variable", "minor", "infra/variables.tf", 3},
		{"talkops/agent", "info", "infra/main.tf", 40},
		{"talkops/injection", "critical", "infra/sg.tf", 30},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("code quality issues mismatch (-want +got):\n%s", diff)
	}
}

func TestRDJSONL(t *testing.T) {
	t.Parallel()
	_, files := writeRich(t)
	lines := strings.Split(strings.TrimSuffix(string(files[RDJSONLFile]), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d diagnostics, want 5 (every finding)", len(lines))
	}
	var first struct {
		Message  string
		Severity string
		Location struct {
			Path  string
			Range struct {
				Start struct{ Line, Column int }
				End   struct{ Line, Column int }
			}
		}
		Code struct{ Value string }
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Severity != "ERROR" || first.Location.Path != "infra/sg.tf" || first.Location.Range.Start.Line != 12 ||
		first.Location.Range.Start.Column != 5 || first.Location.Range.End.Column != 42 || first.Code.Value != "talkops/open-ingress" {
		t.Errorf("first diagnostic = %+v", first)
	}
}

func TestFingerprintStableAcrossLineShifts(t *testing.T) {
	t.Parallel()
	r := loadRich(t)
	before, err := SARIF(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range r.Findings {
		if r.Findings[i].StartLine > 0 {
			r.Findings[i].StartLine += 7
			if r.Findings[i].EndLine > 0 {
				r.Findings[i].EndLine += 7
			}
		}
	}
	after, err := SARIF(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	fps := func(data []byte) []string {
		var log struct {
			Runs []struct {
				Results []struct {
					PartialFingerprints map[string]string `json:"partialFingerprints"`
				} `json:"results"`
			} `json:"runs"`
		}
		if err := json.Unmarshal(data, &log); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, res := range log.Runs[0].Results {
			out = append(out, res.PartialFingerprints["primaryLocationLineHash"])
		}
		return out
	}
	if diff := cmp.Diff(fps(before), fps(after)); diff != "" {
		t.Errorf("fingerprints changed when lines shifted (-before +after):\n%s", diff)
	}
}
