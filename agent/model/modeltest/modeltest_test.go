package modeltest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/agent/model"
	"github.com/talkops/talkops/agent/model/modeltest"
)

func TestLoadScript(t *testing.T) {
	t.Parallel()
	sc, err := modeltest.LoadScript("testdata/two-turns.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Steps) != 3 {
		t.Fatalf("steps = %d, want 3", len(sc.Steps))
	}
	if got := time.Duration(sc.Steps[2].Delay); got != 10*time.Millisecond {
		t.Errorf("delay = %v, want 10ms", got)
	}
	if got := sc.Steps[1].Usage.CacheReadTokens; got != 800 {
		t.Errorf("cache_read_tokens = %d, want 800", got)
	}

	dir := t.TempDir()
	bad := []struct{ name, body, want string }{
		{"unknown field", `{"steps":[{"txt":"x"}]}`, `unknown field "txt"`},
		{"nameless call", `{"steps":[{"tool_calls":[{"input":{}}]}]}`, "steps[0].tool_calls[0]: name is required"},
		{"bad delay", `{"steps":[{"delay":"soon"}]}`, `duration "soon"`},
	}
	for _, b := range bad {
		p := filepath.Join(dir, strings.ReplaceAll(b.name, " ", "-")+".json")
		if err := os.WriteFile(p, []byte(b.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := modeltest.LoadScript(p); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: err = %v, want it to mention %q", b.name, err, b.want)
		}
	}
	if _, err := modeltest.LoadScript(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

// TestListenScriptFromFile drives a served JSON script with the real client, as another
// process would.
func TestListenScriptFromFile(t *testing.T) {
	t.Parallel()
	sc, err := modeltest.LoadScript("testdata/two-turns.json")
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "calls.jsonl")
	srv, err := modeltest.Listen("127.0.0.1:0", sc, modeltest.WithRecord(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m, err := model.New("openai:gpt-4.1", srv.OpenAIURL(), func(string) string { return "k" })
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "write hello.txt"}}, Tools: []model.Tool{{Name: "write_file", Schema: []byte(`{"type":"object"}`)}}}
	r, err := m.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Message.ToolCalls) != 1 || r.Message.ToolCalls[0].Name != "write_file" {
		t.Fatalf("reply = %+v", r.Message)
	}
	req.Messages = append(req.Messages, r.Message, model.Message{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: r.Message.ToolCalls[0].ID, Content: "wrote 3 bytes"}}})
	r, err = m.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Message.Text != "Done: hello.txt written." {
		t.Errorf("final = %q", r.Message.Text)
	}
	var formats []string
	for _, c := range srv.Calls() {
		formats = append(formats, c.Format)
	}
	if diff := cmp.Diff([]string{"openai", "openai", "openai"}, formats); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	srv.Close()
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 3 {
		t.Errorf("record has %d lines, want 3", n)
	}
}
