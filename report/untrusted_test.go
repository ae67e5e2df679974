package report

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

func forged(verdict string, items ...result.Item) *result.Result {
	one := 1.0
	return &result.Result{Schema: result.Schema, Verdict: verdict, Score: &one, ExitCode: 0,
		Run:    result.Run{ID: "r1", Version: "0.3.0", StartedAt: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)},
		Rubric: &result.Rubric{Name: "security-gate", PassThreshold: 0.8, Status: "satisfied", Items: items}}
}

func item(id string, status result.ItemStatus, required bool) result.Item {
	return result.Item{ID: id, Kind: "check", Required: required, Weight: 1, Status: status}
}

func TestRecompute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		r         *result.Result
		verdict   string
		exit      int
		wantScore float64
	}{
		{name: "forged pass with a failing required item", r: forged("pass", item("a", "pass", true), item("b", "fail", true)),
			verdict: "fail", exit: 1, wantScore: 0.5},
		{name: "forged pass under the threshold", r: forged("pass", item("a", "pass", false), item("b", "fail", false)),
			verdict: "fail", exit: 1, wantScore: 0.5},
		{name: "forged pass with an errored item", r: forged("pass", item("a", "pass", true), item("b", "error", false)),
			verdict: "error", exit: 3, wantScore: 1},
		{name: "forged pass with an unknown status", r: forged("pass", item("a", "pass", true), item("b", "passed", false)),
			verdict: "error", exit: 3, wantScore: 1},
		{name: "honest pass", r: forged("pass", item("a", "pass", true)), verdict: "pass", exit: 0, wantScore: 1},
		{name: "a claimed failure stands", r: forged("fail", item("a", "pass", true)), verdict: "fail", exit: 1, wantScore: 1},
		{name: "an unknown verdict is an error", r: forged("green", item("a", "pass", true)), verdict: "error", exit: 3, wantScore: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			Recompute(tt.r)
			if tt.r.Verdict != tt.verdict || tt.r.ExitCode != tt.exit || *tt.r.Score != tt.wantScore {
				t.Errorf("Recompute() = verdict %s, exit %d, score %v; want %s, %d, %v",
					tt.r.Verdict, tt.r.ExitCode, *tt.r.Score, tt.verdict, tt.exit, tt.wantScore)
			}
		})
	}
	partial := forged("pass", item("a", "pass", true))
	partial.Partial = true
	if Recompute(partial); partial.Verdict != "fail" || partial.ExitCode != 124 {
		t.Errorf("partial pass: verdict %s, exit %d; want fail, 124", partial.Verdict, partial.ExitCode)
	}
}

func TestReadArtifactRejectsUnknownKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, err := result.Write(dir, forged("pass", item("a", "pass", true)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readArtifact(path); err != nil {
		t.Fatalf("readArtifact(written by talkops) = %v", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	forgedPath := filepath.Join(dir, "forged.json")
	if err := os.WriteFile(forgedPath, []byte(strings.Replace(string(data), `"verdict"`, `"trusted": true, "verdict"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = readArtifact(forgedPath)
	if !errors.Is(err, result.ErrInvalid) || !strings.Contains(err.Error(), `"trusted"`) {
		t.Errorf("readArtifact(unknown key) = %v, want ErrInvalid naming the key", err)
	}
	if _, err := readArtifact("/dev/zero"); !errors.Is(err, result.ErrInvalid) {
		t.Errorf("readArtifact(/dev/zero) = %v, want ErrInvalid", err)
	}
}

// TestPublishFromAdvisory: report --from exits as an advisory run did (3 and 124 become
// 0, a fail stays 1), but only for a trusted result: an untrusted artifact cannot claim
// the mode to turn its error green.
func TestPublishFromAdvisory(t *testing.T) {
	t.Parallel()
	partial := forged("pass", item("a", "pass", true))
	partial.Partial = true
	tests := []struct {
		name      string
		r         *result.Result
		advisory  bool
		untrusted string
		exit      int
	}{
		{name: "error", r: forged("error", item("a", "error", true)), exit: 3},
		{name: "advisory error", r: forged("error", item("a", "error", true)), advisory: true, exit: 0},
		{name: "advisory budget", r: partial, advisory: true, exit: 0},
		{name: "advisory fail", r: forged("fail", item("a", "fail", true)), advisory: true, exit: 1},
		{name: "advisory claimed by an untrusted artifact", r: forged("error", item("a", "error", true)), advisory: true,
			untrusted: "the triggering run came from the fork mallory/infra", exit: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tt.r.Advisory = tt.advisory
			path, err := result.Write(dir, tt.r)
			if err != nil {
				t.Fatal(err)
			}
			r, err := PublishFrom(t.Context(), path, Options{Dir: dir, Getenv: func(string) string { return "" }, Untrusted: tt.untrusted})
			if err != nil {
				t.Fatalf("PublishFrom() = %v", err)
			}
			if r.ExitCode != tt.exit || r.Advisory != tt.advisory {
				t.Errorf("exit %d advisory %v, want %d %v", r.ExitCode, r.Advisory, tt.exit, tt.advisory)
			}
		})
	}
}
