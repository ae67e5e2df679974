package rubric

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestParseSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "criteria.md", "- validate passes\n- no open ingress\n")
	writeFile(t, dir, "rubrics/gate.toml", "name = \"gate\"\n[[check]]\nid = \"t\"\nrun = \"true\"\n")
	writeFile(t, dir, "notes.txt", "   \n\t\n")
	if err := os.Mkdir(filepath.Join(dir, "dir.toml"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		spec       string
		wantFormat string
		wantName   string
		wantSource string
		wantRel    string
		wantItems  int
		wantErr    string // substring of the error; "" = success
		wantNotExi bool
	}{
		{name: "inline sentence", spec: "tofu plan succeeds with zero syntax errors", wantFormat: FormatText, wantName: "inline", wantSource: "inline", wantItems: 1},
		{name: "inline mentioning a toml file", spec: "the change keeps main.toml valid", wantFormat: FormatText, wantName: "inline", wantSource: "inline", wantItems: 1},
		{name: "at text file", spec: "@criteria.md", wantFormat: FormatText, wantName: "criteria", wantSource: "@criteria.md", wantRel: "criteria.md", wantItems: 2},
		{name: "at toml file", spec: "@rubrics/gate.toml", wantFormat: FormatTOML, wantName: "gate", wantSource: "@rubrics/gate.toml", wantRel: "rubrics/gate.toml", wantItems: 1},
		{name: "toml path", spec: "rubrics/gate.toml", wantFormat: FormatTOML, wantName: "gate", wantSource: "rubrics/gate.toml", wantRel: "rubrics/gate.toml", wantItems: 1},
		{name: "absolute toml path", spec: filepath.Join(dir, "rubrics/gate.toml"), wantFormat: FormatTOML, wantName: "gate", wantRel: "rubrics/gate.toml", wantItems: 1},
		{name: "empty", spec: "", wantErr: "--rubric: the rubric is empty"},
		{name: "blank", spec: " \n\t", wantErr: "--rubric: the rubric is empty"},
		{name: "bare at", spec: "@", wantErr: `--rubric: "@" must be followed by a file name`},
		{name: "missing toml path", spec: "nope.toml", wantErr: "nope.toml: rubric file not found", wantNotExi: true},
		{name: "missing at file", spec: "@nope.md", wantErr: "nope.md: rubric file not found", wantNotExi: true},
		{name: "directory", spec: "dir.toml", wantErr: "dir.toml: cannot read the rubric file"},
		{name: "blank file", spec: "@notes.txt", wantErr: "notes.txt: the rubric has no criteria"},
		{name: "only headings", spec: "# Title\n## Section", wantErr: "--rubric: the rubric has no criteria"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := Parse(tt.spec, dir)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Parse(%q) = nil error, want %q", tt.spec, tt.wantErr)
				}
				var rerr *Error
				if !errors.As(err, &rerr) {
					t.Errorf("Parse(%q) error %T is not a *rubric.Error", tt.spec, err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Parse(%q) = %q, want it to contain %q", tt.spec, err, tt.wantErr)
				}
				if got := errors.Is(err, fs.ErrNotExist); got != tt.wantNotExi {
					t.Errorf("errors.Is(Parse(%q), fs.ErrNotExist) = %v, want %v", tt.spec, got, tt.wantNotExi)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			got := struct{ Format, Name, Source, Rel string }{r.Format, r.Name, r.Source, r.RelPath}
			want := struct{ Format, Name, Source, Rel string }{tt.wantFormat, tt.wantName, tt.wantSource, tt.wantRel}
			if tt.wantSource == "" {
				want.Source = tt.spec
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse(%q) mismatch (-want +got):\n%s", tt.spec, diff)
			}
			if n := len(r.Checks) + len(r.Criteria); n != tt.wantItems {
				t.Errorf("Parse(%q) has %d items, want %d", tt.spec, n, tt.wantItems)
			}
			if len(r.SHA256) != 64 || r.Text == "" {
				t.Errorf("Parse(%q): SHA256 %q, Text %q: want both set", tt.spec, r.SHA256, r.Text)
			}
		})
	}
}

func TestParseHomeExpansion(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	writeFile(t, home, "rubrics/r.toml", "[[check]]\nid = \"a\"\nrun = \"true\"\n")
	r, err := Parse("~/rubrics/r.toml", t.TempDir())
	if err != nil {
		t.Fatalf("Parse(~/rubrics/r.toml): %v", err)
	}
	if want := filepath.Join(home, "rubrics/r.toml"); r.Path != want {
		t.Errorf("Path = %q, want %q", r.Path, want)
	}
	if r.RelPath != "" {
		t.Errorf("RelPath = %q, want empty for a rubric outside the project", r.RelPath)
	}
}

func TestTextLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		wantErr string
	}{
		{name: "exactly the limit in multibyte characters", text: strings.Repeat("é", MaxTextChars)},
		{name: "one over", text: strings.Repeat("a", MaxTextChars+1), wantErr: "--rubric: the rubric text is 12001 characters; the limit is 12000"},
		{name: "many lines over", text: strings.Repeat("check this\n", 1200), wantErr: "the rubric text is 13200 characters"},
		{name: "invalid utf-8", text: "valid \xff\xfe", wantErr: "not valid UTF-8"},
		{name: "nul byte", text: "a\x00b", wantErr: "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tt.text, t.TempDir())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse(%d chars) = %v, want success", len(tt.text), err)
				}
				return
			}
			var rerr *Error
			if !errors.As(err, &rerr) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse(...) = %v, want a *rubric.Error containing %q", err, tt.wantErr)
			}
		})
	}

	// The limit applies to @file text too, and names the file.
	dir := t.TempDir()
	writeFile(t, dir, "long.md", strings.Repeat("x", MaxTextChars+5))
	_, err := Parse("@long.md", dir)
	if err == nil || !strings.HasPrefix(err.Error(), "long.md: the rubric text is 12005 characters") {
		t.Errorf("Parse(@long.md) = %v, want the limit error naming long.md", err)
	}
}

func TestSplitCriteria(t *testing.T) {
	t.Parallel()
	type crit struct{ Title, Question string }
	tests := []struct {
		name string
		text string
		want []crit
	}{
		{
			name: "single sentence",
			text: "tofu plan succeeds with zero syntax errors and no open security group ingress",
			want: []crit{{"tofu plan succeeds with zero syntax errors and no open security group ingress", "tofu plan succeeds with zero syntax errors and no open security group ingress"}},
		},
		{
			name: "several sentences on one line stay one criterion",
			text: "Validation passes. No SSH rule is open to the world.",
			want: []crit{{"Validation passes. No SSH rule is open to the world.", "Validation passes. No SSH rule is open to the world."}},
		},
		{
			name: "lines",
			text: "validate passes\nno 0.0.0.0/0 SSH rules\n",
			want: []crit{{"validate passes", "validate passes"}, {"no 0.0.0.0/0 SSH rules", "no 0.0.0.0/0 SSH rules"}},
		},
		{
			name: "dash star plus and bullet characters",
			text: "- one\n* two\n+ three\n• four",
			want: []crit{{"one", "one"}, {"two", "two"}, {"three", "three"}, {"four", "four"}},
		},
		{
			name: "numbered lists",
			text: "1. one\n2) two\n(3) three\n10. ten\na) letter",
			want: []crit{{"one", "one"}, {"two", "two"}, {"three", "three"}, {"ten", "ten"}, {"letter", "letter"}},
		},
		{
			name: "blank lines and CRLF only separate",
			text: "\r\n\r\nfirst\r\n\r\n   \r\nsecond\r\n\r\n",
			want: []crit{{"first", "first"}, {"second", "second"}},
		},
		{
			name: "indented continuation of a bullet",
			text: "- no ingress open to 0.0.0.0/0,\n  including through variables\n- README updated",
			want: []crit{{"no ingress open to 0.0.0.0/0, including through variables", "no ingress open to 0.0.0.0/0, including through variables"}, {"README updated", "README updated"}},
		},
		{
			name: "unindented line after a bullet is its own criterion",
			text: "- validate passes\nplan shows no destroy",
			want: []crit{{"validate passes", "validate passes"}, {"plan shows no destroy", "plan shows no destroy"}},
		},
		{
			name: "task boxes and empty bullets",
			text: "- [ ] tests pass\n- [x] lint is clean\n-\n- [ ]",
			want: []crit{{"tests pass", "tests pass"}, {"lint is clean", "lint is clean"}},
		},
		{
			name: "lead-in and heading become sections",
			text: "# Security\nThe change must:\n- avoid open ingress\n\n## Docs\n- README updated",
			want: []crit{{"avoid open ingress", "The change must: avoid open ingress"}, {"README updated", "Docs: README updated"}},
		},
		{
			name: "a line ending in a colon without a list is a criterion",
			text: "Explain the plan output:\nNothing else",
			want: []crit{{"Explain the plan output:", "Explain the plan output:"}, {"Nothing else", "Nothing else"}},
		},
		{
			name: "negative numbers and emphasis are not bullets",
			text: "-5 is not a bullet\n**bold** neither",
			want: []crit{{"-5 is not a bullet", "-5 is not a bullet"}, {"**bold** neither", "**bold** neither"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := parseText([]byte(tt.text), flagName)
			if err != nil {
				t.Fatalf("parseText(%q): %v", tt.text, err)
			}
			var got []crit
			for i, c := range r.Criteria {
				got = append(got, crit{c.Title, c.Question})
				if want := "criterion-" + strconv.Itoa(i+1); c.ID != want || !c.Required || c.Weight != 1 {
					t.Errorf("criterion %d = {ID %q, Required %v, Weight %v}, want {%q, true, 1}", i, c.ID, c.Required, c.Weight, want)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseText(%q) criteria mismatch (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestParseTOMLFull(t *testing.T) {
	t.Parallel()
	r, err := Parse("testdata/rubrics/opentofu.toml", ".")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Rubric{
		Name:          "opentofu-plan-secure",
		Description:   "tofu plan succeeds with zero syntax errors and no open security group ingress",
		Source:        "testdata/rubrics/opentofu.toml",
		Format:        FormatTOML,
		RelPath:       "testdata/rubrics/opentofu.toml",
		PassThreshold: 0.8,
		ProtectPaths:  []string{".talkops/**", "infra/policy/**"},
		Judge:         JudgeConfig{Model: "anthropic:claude-sonnet-4-5", Votes: 3, MaxEvidenceBytes: 120000},
		Checks: []Check{
			{ID: "fmt", Title: "HCL is formatted", Argv: []string{"tofu", "fmt", "-check", "-recursive", "-diff"}, Timeout: 5 * time.Minute, Weight: 0.5},
			{ID: "init", Argv: []string{"tofu", "init", "-backend=false", "-input=false", "-no-color"}, Timeout: 10 * time.Minute, Required: true, Weight: 1},
			{ID: "validate", Title: "Zero syntax/validation errors", Argv: []string{"tofu", "validate", "-json", "-no-color"}, Timeout: 5 * time.Minute, Required: true, Weight: 1, Parse: FormatTofuValidateJSON},
			{ID: "plan", Title: "tofu plan succeeds",
				Argv:    []string{"/bin/sh", "-c", "tofu plan -input=false -lock=false -refresh=false -no-color -detailed-exitcode -out=plan.tfplan; test $? -ne 1"},
				Script:  "tofu plan -input=false -lock=false -refresh=false -no-color -detailed-exitcode -out=plan.tfplan; test $? -ne 1",
				Timeout: 5 * time.Minute, Required: true, Weight: 1},
			{ID: "tfsec", Title: "No high-severity tfsec findings", Argv: []string{"tfsec", ".", "--format", "sarif", "--out", "reports/tfsec.sarif", "--minimum-severity", "HIGH"},
				Timeout: 5 * time.Minute, Weight: 2, Parse: FormatSARIF, ParseFile: "reports/tfsec.sarif"},
		},
		Criteria: []Criterion{
			{ID: "ingress-intent", Title: "Open ingress not introduced indirectly",
				Question: "Considering only the evidence, does the change avoid creating internet-reachable\ningress indirectly (variables whose default is an open CIDR, dynamic blocks, modules, prefix\nlists, or aws_vpc_security_group_ingress_rule resources)? Answer fail if any such path exists.",
				Evidence: []Selector{{Kind: SelectDiff}, {Kind: SelectFile, Arg: "infra/**/*.tf"}, {Kind: SelectCheck, Arg: "validate"}, {Kind: SelectCommands}},
				Weight:   2, PassExamples: []string{"cidr_blocks = [var.office_cidr] where var has no default"},
				FailExamples: []string{`variable "allowed_cidr" { default = "0.0.0.0/0" } used in ingress`}},
			{ID: "task-scope", Title: "Change stays within the requested scope",
				Question: "Does the diff only touch what the task asked for, with no unrelated resources deleted or recreated?",
				Evidence: []Selector{{Kind: SelectDiff}, {Kind: SelectFinalMessage}}, Required: true, Weight: 1},
		},
	}
	if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(Rubric{}, "Path", "Text", "SHA256")); diff != "" {
		t.Errorf("Parse(opentofu.toml) mismatch (-want +got):\n%s", diff)
	}
	if got := r.Checks[3].Cmd().Argv; got[0] != "/bin/sh" || got[1] != "-c" {
		t.Errorf("shell-string check Cmd().Argv = %q, want /bin/sh -c", got)
	}
}

func TestParseTOMLDefaults(t *testing.T) {
	t.Parallel()
	r := mustParseTOML(t, "[[check]]\nid = \"tests\"\nrun = [\"go\", \"test\", \"./...\"]\n")
	want := &Rubric{
		Name: "rubric", Source: "rubric.toml", Format: FormatTOML, RelPath: "rubric.toml", PassThreshold: 1,
		Judge:  JudgeConfig{Votes: 1, MaxEvidenceBytes: DefaultMaxEvidenceBytes},
		Checks: []Check{{ID: "tests", Argv: []string{"go", "test", "./..."}, Timeout: DefaultTimeout, Required: true, Weight: 1}},
	}
	if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(Rubric{}, "Path", "Text", "SHA256")); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
}

// TestTOMLErrors checks that every kind of mistake is a *rubric.Error that points at the
// right line and column and says what would be valid.
func TestTOMLErrors(t *testing.T) {
	t.Parallel()
	const check = "[[check]]\nid = \"fmt\"\nrun = [\"tofu\", \"fmt\"]\n"
	tests := []struct {
		name string
		src  string
		want []string // each must appear, in order, in the error text
	}{
		{name: "syntax", src: "name = \"x\n", want: []string{"rubric.toml:1:", "invalid TOML"}},
		{name: "duplicate key", src: "name = \"a\"\nname = \"b\"\n" + check, want: []string{"rubric.toml:2:1: invalid TOML"}},
		{name: "unknown top-level key with suggestion", src: "nmae = \"x\"\n" + check,
			want: []string{`rubric.toml:1:1: unknown key "nmae" (did you mean "name"?); valid keys are schema, name, description`}},
		{name: "unknown check key", src: check + "severity = \"error\"\n",
			want: []string{`rubric.toml:4:1: [[check]] "fmt": unknown key "severity"; valid keys are id, title, run, expect_exit`}},
		{name: "threshold wrong type", src: "pass_threshold = \"high\"\n" + check,
			want: []string{"rubric.toml:1:18: pass_threshold must be a number from 0 to 1", "got a string"}},
		{name: "threshold out of range", src: "pass_threshold = 1.5\n" + check,
			want: []string{"rubric.toml:1:18: pass_threshold must be a number from 0 to 1 (the weighted score needed to pass), got 1.5"}},
		{name: "duplicate id across kinds", src: check + "\n[[criterion]]\nid = \"fmt\"\nquestion = \"q?\"\n",
			want: []string{`rubric.toml:6:6: duplicate id "fmt" (first used on line 2)`}},
		{name: "duplicate check ids", src: check + check,
			want: []string{`rubric.toml:5:6: duplicate id "fmt" (first used on line 2)`}},
		{name: "even votes", src: "[judge]\nvotes = 2\n" + check,
			want: []string{"rubric.toml:2:9: [judge]: votes must be odd so that a majority exists (1, 3, 5, 7 or 9), got 2"}},
		{name: "votes out of range", src: "[judge]\nvotes = 11\n" + check,
			want: []string{"rubric.toml:2:9: [judge]: votes must be an odd number from 1 to 9, got 11"}},
		{name: "votes wrong type", src: "[judge]\nvotes = \"3\"\n" + check,
			want: []string{"rubric.toml:2:9: [judge]: votes must be an odd number from 1 to 9, got a string"}},
		{name: "judge unknown key", src: "[judge]\ntemperature = 0\n" + check,
			want: []string{`rubric.toml:2:1: [judge]: unknown key "temperature"; valid keys are model, votes, max_evidence_bytes`}},
		{name: "check without run", src: "[[check]]\nid = \"fmt\"\ntitle = \"HCL is formatted\"\n",
			want: []string{`rubric.toml:1:3: [[check]] "fmt": run is missing; give an argv array such as run = ["tofu", "validate", "-json"] or a shell string`}},
		{name: "run empty array", src: "[[check]]\nid = \"fmt\"\nrun = []\n",
			want: []string{`rubric.toml:3:1: [[check]] "fmt": run is an empty array`}},
		{name: "run wrong type", src: "[[check]]\nid = \"fmt\"\nrun = 42\n",
			want: []string{`rubric.toml:3:7: [[check]] "fmt": run must be an argv array of strings or a shell string, got an integer`}},
		{name: "run element not a string", src: "[[check]]\nid = \"srv\"\nrun = [\"serve\", 8080]\n",
			want: []string{`rubric.toml:3:17: [[check]] "srv": run[1] must be a string, got an integer (quote numbers: "8080")`}},
		{name: "run blank shell string", src: "[[check]]\nid = \"fmt\"\nrun = \"  \"\n",
			want: []string{`rubric.toml:3:7: [[check]] "fmt": run is an empty shell string`}},
		{name: "timeout not a duration", src: check + "timeout = \"5 minutes\"\n",
			want: []string{`rubric.toml:4:11: [[check]] "fmt": timeout "5 minutes" is not a duration; write it like "90s", "5m" or "1h30m"`}},
		{name: "timeout integer", src: check + "timeout = 300\n",
			want: []string{`rubric.toml:4:11: [[check]] "fmt": timeout must be a string, got an integer`}},
		{name: "timeout too long", src: check + "timeout = \"48h\"\n",
			want: []string{`rubric.toml:4:11: [[check]] "fmt": timeout must be more than 0 and at most 24h0m0s, got 48h`}},
		{name: "expect_exit out of range", src: check + "expect_exit = 256\n",
			want: []string{`rubric.toml:4:15: [[check]] "fmt": expect_exit must be an exit code from 0 to 255, got 256`}},
		{name: "expect_exit wrong type", src: check + "expect_exit = \"0\"\n",
			want: []string{`rubric.toml:4:15: [[check]] "fmt": expect_exit must be an exit code from 0 to 255, got a string`}},
		{name: "required wrong type", src: check + "required = \"yes\"\n",
			want: []string{`rubric.toml:4:12: [[check]] "fmt": required must be true or false, got a string`}},
		{name: "negative weight", src: check + "weight = -1\n",
			want: []string{`rubric.toml:4:10: [[check]] "fmt": weight must be a number from 0 to 1000000`}},
		{name: "unknown parse format", src: check + "parse = \"json\"\n",
			want: []string{`rubric.toml:4:9: [[check]] "fmt": parse "json" is not a known format; valid formats are sarif, rdjson, rdjsonl, junit, checkstyle, tofu-validate-json`}},
		{name: "parse_file without parse", src: check + "parse_file = \"out.sarif\"\n",
			want: []string{`rubric.toml:4:1: [[check]] "fmt": parse_file needs parse`}},
		{name: "parse_file escaping", src: check + "parse = \"sarif\"\nparse_file = \"../out.sarif\"\n",
			want: []string{`rubric.toml:5:14: [[check]] "fmt": parse_file "../out.sarif" must be a relative path inside the sandbox working directory`}},
		{name: "id missing", src: "[[check]]\nrun = \"true\"\n",
			want: []string{`rubric.toml:1:3: [[check]] #1: id is missing; give every check an id such as id = "validate"`}},
		{name: "id invalid", src: "[[check]]\nid = \"my check\"\nrun = \"true\"\n",
			want: []string{`rubric.toml:2:6: [[check]] #1: id "my check" is not valid: use 1-64 characters`}},
		{name: "id reserved", src: "[[check]]\nid = \"integrity\"\nrun = \"true\"\n",
			want: []string{`rubric.toml:2:6: [[check]] #1: id "integrity" is reserved`}},
		{name: "name invalid", src: "name = \"my rubric!\"\n" + check,
			want: []string{`rubric.toml:1:8: name "my rubric!" is not valid: use 1-64 characters`}},
		{name: "check as a table", src: "[check]\nid = \"fmt\"\nrun = \"true\"\n",
			want: []string{"rubric.toml:1:2: check must be an array of tables: write each one as [[check]], got a table"}},
		{name: "protect_paths escaping", src: "protect_paths = [\"ok/**\", \"../secrets\"]\n" + check,
			want: []string{`rubric.toml:1:27: protect_paths[1] "../secrets": the glob must not contain "." or ".." segments`}},
		{name: "protect_paths absolute", src: "protect_paths = [\"/etc/**\"]\n" + check,
			want: []string{`rubric.toml:1:18: protect_paths[0] "/etc/**": the glob is absolute`}},
		{name: "no items", src: "name = \"empty\"\n",
			want: []string{"rubric.toml:1:1: the rubric has no items: add at least one [[check]]"}},
		{name: "schema mismatch", src: "schema = \"talkops.rubric/v2\"\n" + check,
			want: []string{`rubric.toml:1:10: schema must be "talkops.rubric/v1" (or left out), got "talkops.rubric/v2"`}},
		{name: "criterion without question", src: "[[criterion]]\nid = \"scope\"\ntitle = \"Scope\"\n",
			want: []string{`rubric.toml:1:3: [[criterion]] "scope": question is missing`}},
		{name: "criterion unknown selector", src: "[[criterion]]\nid = \"c\"\nquestion = \"q?\"\nevidence = [\"diff\", \"transcript\"]\n",
			want: []string{`rubric.toml:4:21: [[criterion]] "c": evidence[1] "transcript": unknown evidence selector; valid selectors are "commands", "diff", "final_message", "check:<id>" or "file:<glob>"`}},
		{name: "criterion cites unknown check", src: check + "[[criterion]]\nid = \"c\"\nquestion = \"q?\"\nevidence = [\"check:fmt\", \"check:vet\"]\n",
			want: []string{`rubric.toml:7:26: [[criterion]] "c": evidence[1] "check:vet": no [[check]] has id "vet"`}},
		{name: "criterion bad file glob", src: "[[criterion]]\nid = \"c\"\nquestion = \"q?\"\nevidence = [\"file:infra/[a.tf\"]\n",
			want: []string{`rubric.toml:4:13: [[criterion]] "c": evidence[0] "file:infra/[a.tf": bad pattern syntax`}},
		{name: "inline table check without run", src: "check = [{ id = \"a\" }]\n",
			want: []string{`rubric.toml:1:10: [[check]] "a": run is missing`}},
		{name: "several errors sorted by position", src: "[[check]]\nid = \"a\"\nrun = \"true\"\ntimeout = \"soon\"\nweight = \"heavy\"\n[judge]\nvotes = 4\n",
			want: []string{`rubric.toml:4:11: [[check]] "a": timeout "soon"`, "\nrubric.toml:5:10: [[check]] \"a\": weight must be", "\nrubric.toml:7:9: [judge]: votes must be odd"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, dir, "rubric.toml", tt.src)
			_, err := Parse("rubric.toml", dir)
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want %q", tt.src, tt.want)
			}
			var rerr *Error
			if !errors.As(err, &rerr) {
				t.Fatalf("Parse error %T (%v) is not a *rubric.Error", err, err)
			}
			msg := err.Error()
			rest := msg
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("Parse(%q) error:\n%s\nwant it to contain (in order) %q", tt.src, msg, w)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestCanonicalAndSHA(t *testing.T) {
	t.Parallel()
	a := mustParseTOML(t, `
# a comment that does not matter
name = "gate"
[[check]]
id = "fmt"
run = ["tofu", "fmt", "-check"]
required = true        # the default, written out
timeout = "300s"
`)
	b := mustParseTOML(t, "name=\"gate\"\ncheck=[{run=[\"tofu\",\"fmt\",\"-check\"],id=\"fmt\",timeout=\"5m\"}]\n")
	if a.SHA256 != b.SHA256 || a.Text != b.Text {
		t.Errorf("equivalent rubrics hash differently:\n%s\n%s\n--- vs ---\n%s\n%s", a.SHA256, a.Text, b.SHA256, b.Text)
	}
	c := mustParseTOML(t, "name=\"gate\"\ncheck=[{run=[\"tofu\",\"fmt\"],id=\"fmt\"}]\n")
	if c.SHA256 == a.SHA256 {
		t.Errorf("different rubrics share sha256 %s", a.SHA256)
	}
	// Free text: the same criteria in another layout hash the same.
	x, err := Parse("- validate passes\n- no open ingress", ".")
	if err != nil {
		t.Fatal(err)
	}
	y, err := Parse("validate passes\r\n\r\n  no open ingress  ", ".")
	if err != nil {
		t.Fatal(err)
	}
	if x.SHA256 != y.SHA256 {
		t.Errorf("free-text layouts hash differently:\n%s\n%s", x.Text, y.Text)
	}
}

// TestCanonicalGolden pins the canonical text (and so the sha256) of the testdata rubrics;
// a change here changes every user's rubric hash and must be deliberate. Run with -update
// to rewrite testdata/canonical/.
func TestCanonicalGolden(t *testing.T) {
	t.Parallel()
	sources, err := filepath.Glob("testdata/rubrics/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	texts, err := filepath.Glob("testdata/text/*")
	if err != nil {
		t.Fatal(err)
	}
	sources = append(sources, texts...)
	sources = append(sources, "../examples/checks.toml")
	for _, src := range sources {
		t.Run(filepath.Base(src), func(t *testing.T) {
			t.Parallel()
			r, err := Parse("@"+src, ".")
			if err != nil {
				t.Fatalf("Parse(@%s): %v", src, err)
			}
			got := "# sha256 " + r.SHA256 + "\n" + r.Text
			golden := filepath.Join("testdata/canonical", filepath.Base(src)+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("read golden (run go test -update): %v", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("canonical text of %s changed (-want +got):\n%s", src, diff)
			}
			// The canonical text parses back to the same rubric.
			again, err := parseTOML([]byte(r.Text), "canonical")
			if err != nil {
				t.Fatalf("canonical text does not parse: %v\n%s", err, r.Text)
			}
			again.Name = r.Name
			if _, err := finish(again); err != nil {
				t.Fatal(err)
			}
			if again.SHA256 != r.SHA256 {
				t.Errorf("re-parsed canonical text hashes %s, want %s", again.SHA256, r.SHA256)
			}
		})
	}
}
