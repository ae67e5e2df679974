package result

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/report/schema"
)

func ptr[T any](v T) *T { return &v }

// full returns a result that sets every field, so the schema is exercised end to end.
func full() *Result {
	start := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	item := Item{
		ID: "no-open-ingress", Kind: "check", Title: "no open ingress", Required: true, Weight: 1,
		Status: StatusFail, Score: ptr(0.0), Reason: "0.0.0.0/0 on tcp/22", DurationMS: 400,
		Unstable: true,
		Check: &Check{Argv: []string{"sh", "-c", "true"}, ExitCode: ptr(1), ExpectExit: 0, TimedOut: true,
			StdoutTail: "out", StderrTail: "err"},
		Judge: &Judge{Model: "m", Votes: []Vote{{Verdict: "fail", Confidence: "high", Gap: "g", EvidenceRefs: []string{"E1"}}},
			Evidence: []Evidence{{ID: "E1", Source: "plan.json", SHA256: "ab", Bytes: 10, Truncated: true}}},
	}
	return &Result{
		Schema: Schema,
		Run: Run{ID: "r1", Version: "0.1.0", Commit: "abc", StartedAt: start, FinishedAt: start.Add(time.Minute),
			DurationMS: 60000, ProjectDir: "/src", ReportDir: "/src/talkops", Prompt: "p",
			CI: &CI{Provider: "github", Repo: "o/r", Event: "pull_request", PR: 7,
				HeadSHA: strings.Repeat("a", 40), Fork: true}},
		Verdict: VerdictFail, Partial: true, Interrupted: "SIGINT", Score: ptr(0.5), Reason: "why", ExitCode: 1,
		Config:  []ConfigValue{{Key: "k", Value: "v", Source: "flag"}},
		Sandbox: &Sandbox{Provider: "docker", ID: "c1", WorkDir: "/workspace", Attached: true, Snapshot: "s"},
		Stages:  []Stage{{Name: "provision", Status: StageOK, StartedAt: start, DurationMS: 10, Error: "e"}},
		Sync: &Sync{Files: 1, Dirs: 1, Bytes: 10, BytesSent: 5, DurationMS: 1, Ignored: 2, TooLarge: []string{"big"},
			Secrets: []string{".env"}, Symlinks: []string{"l"}, Disabled: true, DisabledWhy: "w", RemoteTarget: "t"},
		Setup: &Setup{Script: "s.sh", ExitCode: 0, TimedOut: true, DurationMS: 3, OutputTail: "o"},
		Agent: &Agent{Model: "m", Turns: 3, FinalAnswer: "done", StopReason: "done",
			Usage:   Usage{InputTokens: 1, OutputTokens: 2, CachedInputTokens: 3, CostUSD: 0.01},
			Denials: []Denial{{Tool: "execute", Input: "rm", Reason: "r", Turn: 1}}, ToolCalls: 4, Transcript: "t.jsonl"},
		Rubric: &Rubric{Name: "rb", Source: "inline", SHA256: "ab", Text: "t", PassThreshold: 0.8, Status: "failed",
			Iterations: []Iteration{{N: 1, Items: []Item{item}, Score: 0.5, Status: "failed"}},
			Counts:     Counts{Pass: 1, Fail: 1}, Items: []Item{item}},
		Findings: []Finding{{Path: "a.tf", StartLine: 1, EndLine: 2, StartColumn: 1, EndColumn: 3, Severity: SeverityError,
			Rule: "r", Title: "t", Message: "m", Source: "agent", Fingerprint: "f", Snippet: "x", InDiff: true}},
		Errors:   []Error{{Stage: "judge", Message: "m"}},
		Teardown: &Teardown{Status: "deleted", DurationMS: 5, Error: "e"},
	}
}

// inProgress is what the runner writes before the run has finished.
func inProgress() *Result {
	return &Result{Schema: Schema, Run: Run{ID: "r1", Version: "dev", StartedAt: time.Now()},
		Verdict: VerdictError, Reason: "run in progress", ExitCode: 3}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(r *Result)
		raw    string // used instead of the edited result when set
		errHas []string
	}{
		{name: "full"},
		{name: "in progress", edit: func(r *Result) { *r = *inProgress() }},
		{name: "bad verdict", edit: func(r *Result) { r.Verdict = "maybe" }, errHas: []string{"/verdict", "pass"}},
		{name: "bad item status", edit: func(r *Result) { r.Rubric.Items[0].Status = "ok" },
			errHas: []string{"/rubric/items/0/status"}},
		{name: "bad severity", edit: func(r *Result) { r.Findings[0].Severity = "critical" },
			errHas: []string{"/findings/0/severity", "notice"}},
		{name: "empty message", edit: func(r *Result) { r.Findings[0].Message = "" }, errHas: []string{"/findings/0/message"}},
		{name: "score above one", edit: func(r *Result) { r.Score = ptr(1.5) }, errHas: []string{"/score"}},
		{name: "bad head sha", edit: func(r *Result) { r.Run.CI.HeadSHA = "main; rm -rf /" }, errHas: []string{"/run/ci/head_sha"}},
		{name: "bad ci provider", edit: func(r *Result) { r.Run.CI.Provider = "circle" }, errHas: []string{"/run/ci/provider"}},
		{name: "other schema", edit: func(r *Result) { r.Schema = "talkops.result/v9" }, errHas: []string{`"talkops.result/v9"`, "talkops.result/v1"}},
		{name: "not json", raw: `{"schema": `, errHas: []string{"not JSON"}},
		{name: "missing verdict", raw: `{"schema":"talkops.result/v1","run":{"id":"x","version":"v","started_at":"2026-01-01T00:00:00Z","duration_ms":0},"score":null,"exit_code":0,"stages":null}`,
			errHas: []string{"verdict"}},
		{name: "bad time", raw: `{"schema":"talkops.result/v1","run":{"id":"x","version":"v","started_at":"yesterday","duration_ms":0},"verdict":"pass","score":null,"exit_code":0,"stages":null}`,
			errHas: []string{"/run/started_at"}},
		{name: "unknown fields are accepted", raw: `{"schema":"talkops.result/v1","future":1,"run":{"id":"x","version":"v","started_at":"2026-01-01T00:00:00Z","duration_ms":0},"verdict":"pass","score":1,"exit_code":0,"stages":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := []byte(tt.raw)
			if tt.raw == "" {
				r := full()
				if tt.edit != nil {
					tt.edit(r)
				}
				var err error
				if data, err = json.Marshal(r); err != nil {
					t.Fatal(err)
				}
			}
			err := Validate(data)
			if len(tt.errHas) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want an error wrapping ErrInvalid", err)
			}
			for _, want := range tt.errHas {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to mention %q", err, want)
				}
			}
		})
	}
}

func TestValidateTooLarge(t *testing.T) {
	t.Parallel()
	data := make([]byte, MaxSize+1)
	if err := Validate(data); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Validate(%d bytes) = %v, want a size error", len(data), err)
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	want := full()
	path, err := Write(dir, want)
	if err != nil {
		t.Fatalf("Write() = %v", err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatalf("Read() = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read(Write(r)) mismatch (-want +got):\n%s", diff)
	}
}

func TestWriteRejectsInvalid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := full()
	r.Verdict = "passed"
	if _, err := Write(dir, r); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Write(verdict passed) = %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "result.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("result.json exists after a rejected Write (stat err %v)", err)
	}
}

func TestReadRejectsInvalid(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "result.json")
	if err := os.WriteFile(path, []byte(`{"schema":"talkops.result/v1","verdict":"pass"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Read(path)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Read() = %v, want ErrInvalid naming %s", err, path)
	}
}

// TestSchemaCoversStruct keeps the schema and the Go types in step: every JSON field of
// Result (recursively) must be described in the schema, so adding a field without
// describing it fails here rather than in a user's pipeline.
func TestSchemaCoversStruct(t *testing.T) {
	t.Parallel()
	var root map[string]any
	if err := json.Unmarshal(schema.ResultJSON, &root); err != nil {
		t.Fatal(err)
	}
	defs, _ := root["$defs"].(map[string]any)
	resolve := func(n map[string]any) map[string]any {
		for n != nil {
			ref, ok := n["$ref"].(string)
			if !ok {
				return n
			}
			n, _ = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
		}
		return n
	}
	timeType := reflect.TypeFor[time.Time]()
	var walk func(path string, typ reflect.Type, node map[string]any)
	walk = func(path string, typ reflect.Type, node map[string]any) {
		node = resolve(node)
		if node == nil {
			t.Errorf("%s: no schema", path)
			return
		}
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		switch {
		case typ == timeType:
			return
		case typ.Kind() == reflect.Slice:
			items, _ := node["items"].(map[string]any)
			walk(path+"[]", typ.Elem(), items)
		case typ.Kind() == reflect.Struct:
			props, _ := node["properties"].(map[string]any)
			for f := range typ.Fields() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if name == "" || name == "-" {
					continue
				}
				child, ok := props[name].(map[string]any)
				if !ok {
					t.Errorf("%s.%s: field %s is not in the schema", path, name, f.Name)
					continue
				}
				walk(path+"."+name, f.Type, child)
			}
		}
	}
	walk("result", reflect.TypeFor[Result](), root)
}
