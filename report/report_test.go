package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/events"
	"github.com/talkops/talkops/result"
)

func envFunc(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDetect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want int
	}{
		{"local", nil, 1},
		{"github", map[string]string{"GITHUB_ACTIONS": "true"}, 2},
		{"gitlab", map[string]string{"GITLAB_CI": "true"}, 2},
		{"both", map[string]string{"GITHUB_ACTIONS": "true", "GITLAB_CI": "true"}, 3},
	}
	for _, tt := range tests {
		if got := len(Detect(Options{Dir: t.TempDir(), Getenv: envFunc(tt.env)})); got != tt.want {
			t.Errorf("%s: Detect() = %d publishers, want %d", tt.name, got, tt.want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	err := Options{Dir: "x", ErrorConclusion: "red"}.Validate()
	if err == nil || !strings.Contains(err.Error(), `"red"`) {
		t.Errorf("Validate(red) = %v", err)
	}
	var warnings []string
	sink := events.Func(func(e events.Event) { warnings = append(warnings, e.Message) })
	pubs := Detect(Options{Dir: t.TempDir(), Getenv: envFunc(map[string]string{"GITHUB_ACTIONS": "true"}), ErrorConclusion: "red", Sink: sink})
	if err := Multi(pubs...).Finish(t.Context(), loadRich(t)); err == nil || len(warnings) != 1 {
		t.Errorf("a misconfigured publisher: Finish() = %v, warnings %q; want the error once", err, warnings)
	}
}

// TestPublishFromFork is `talkops report --from` on a fork PR: no API calls are possible
// (no server exists), yet the files, annotations, step summary and outputs appear.
func TestPublishFromFork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	event := filepath.Join(dir, "event.json")
	if err := os.WriteFile(event, []byte(`{"pull_request":{"number":42,"head":{"sha":"1111111111111111111111111111111111111111","repo":{"full_name":"mallory/infra"}},"base":{"repo":{"full_name":"acme/infra"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_TOKEN": "ghs_0123456789abcdefghijklmnopqrstuvwxyz",
		"GITHUB_API_URL": "http://127.0.0.1:1/api/v3", "GITHUB_REPOSITORY": "acme/infra",
		"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": event,
		"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"), "GITHUB_OUTPUT": filepath.Join(dir, "output"),
	}
	var stdout bytes.Buffer
	out := filepath.Join(dir, "out")
	r, err := PublishFrom(t.Context(), filepath.Join("testdata", "rich.result.json"),
		Options{Dir: out, Getenv: envFunc(env), Stdout: &stdout, Secrets: []string{fixtureSecret}})
	if err != nil {
		t.Fatalf("PublishFrom() = %v", err)
	}
	if r.Verdict != "fail" {
		t.Errorf("verdict %q", r.Verdict)
	}
	for _, name := range []string{SummaryFile, JUnitFile, CodeQualityFile, SARIFFile, RDJSONLFile} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := strings.Count(stdout.String(), "::error "); n == 0 {
		t.Errorf("no annotations on stdout:\n%s", stdout.String())
	}
	summary, err := os.ReadFile(env["GITHUB_STEP_SUMMARY"])
	if err != nil || !strings.Contains(string(summary), "fork") {
		t.Errorf("step summary (%v) does not explain the fork:\n%s", err, summary)
	}
	outputs, _ := os.ReadFile(env["GITHUB_OUTPUT"])
	if !strings.Contains(string(outputs), "result-json<<") || !strings.Contains(string(outputs), "rich.result.json") {
		t.Errorf("outputs lack result-json:\n%s", outputs)
	}
}

func TestPublishFromInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "result.json")
	if err := os.WriteFile(path, []byte(`{"schema":"talkops.result/v1","verdict":"pass","run":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := PublishFrom(t.Context(), path, Options{Dir: dir, Getenv: envFunc(nil)})
	if !errors.Is(err, result.ErrInvalid) || !strings.Contains(err.Error(), "/run") {
		t.Fatalf("PublishFrom(invalid) = %v, want ErrInvalid naming /run", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SummaryFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("files derived from an invalid result.json")
	}
}

// TestHostileFindingInertInEveryFile: the rich fixture's last finding carries a fence
// breaker, mentions, a workflow command, our marker, a known secret and a token shape.
func TestHostileFindingInertInEveryFile(t *testing.T) {
	t.Parallel()
	_, files := writeRich(t)
	for name, data := range files {
		s := string(data)
		for _, bad := range []string{fixtureSecret, "ghp_abcdefghij", "@org/team", "@octocat", "talkops:result", "<!--"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s contains %q", name, bad)
			}
		}
		if !strings.Contains(s, "injected annotation") {
			t.Errorf("%s lost the hostile finding altogether", name)
		}
		for l := range strings.Lines(s) {
			if strings.HasPrefix(strings.TrimSpace(l), "::error::") {
				t.Errorf("%s: a line starts with a workflow command: %q", name, l)
			}
		}
	}
	// summary.md fences untrusted multi-line text with a fence longer than its backticks;
	// in tables it is escaped.
	md := string(files[SummaryFile])
	if !strings.Contains(md, `pwned \`+"`"+`\`+"`"+`\`+"`"+`\`+"`"+` fence ::error::injected annotation`) {
		t.Errorf("summary.md: the hostile message is not escaped in the findings table:\n%s", md)
	}
}

func TestCIDetection(t *testing.T) {
	t.Parallel()
	got := CI(envFunc(map[string]string{"JENKINS_URL": "https://ci", "JOB_NAME": "infra/PR-7", "CHANGE_ID": "7",
		"GIT_COMMIT": "ABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCD"}))
	want := &result.CI{Provider: "jenkins", Repo: "infra/PR-7", Event: "change", PR: 7, HeadSHA: "abcdefabcdefabcdefabcdefabcdefabcdefabcd"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CI(jenkins) mismatch (-want +got):\n%s", diff)
	}
	if got := CI(envFunc(nil)); got != nil {
		t.Errorf("CI(no CI) = %+v, want nil", got)
	}
}

func TestMaskSecretsAndSink(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	env := envFunc(map[string]string{"GITHUB_ACTIONS": "true", "ANTHROPIC_API_KEY": "sk-ant-key-value-1234"})
	if err := MaskSecrets(Options{Getenv: env, Stdout: &out, Secrets: []string{"listed-secret"}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "::add-mask::listed-secret\n") || !strings.Contains(out.String(), "::add-mask::sk-ant-key-value-1234\n") {
		t.Errorf("MaskSecrets wrote %q", out.String())
	}
	out.Reset()
	Sink(Options{Getenv: env, Stdout: &out}).Emit(events.Event{Type: events.StageStarted, Stage: "setup"})
	if out.String() != "::group::setup\n" {
		t.Errorf("Sink wrote %q", out.String())
	}
	out.Reset()
	Sink(Options{Getenv: envFunc(nil), Stdout: &out}).Emit(events.Event{Type: events.StageStarted, Stage: "setup"})
	if out.Len() != 0 {
		t.Errorf("Sink outside Actions wrote %q", out.String())
	}
}

func TestSecretsFromEnvReadsOnlyTheInjectedEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"GITHUB_TOKEN":     "ghp-well-known",
		"MY_DEPLOY_TOKEN":  "by-suffix",
		"EXTRA":            "named-by-talkops-redact",
		"PASSED":           "named-by-caller",
		"PLAIN":            "not-a-secret",
		RedactEnv:          "EXTRA",
		"UNLISTED_API_KEY": "absent-from-environ",
	}
	getenv := func(k string) string { return env[k] }
	environ := func() []string {
		return []string{"GITHUB_TOKEN=x", "MY_DEPLOY_TOKEN=x", "EXTRA=x", "PASSED=x", "PLAIN=x"}
	}
	got := SecretsFromEnv(getenv, environ, "PASSED")
	slices.Sort(got)
	want := []string{"by-suffix", "ghp-well-known", "named-by-caller", "named-by-talkops-redact"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SecretsFromEnv (-want +got):\n%s", diff)
	}
}
