package rubric

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/result"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestProtectedGlobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, ".talkops/rubric[1].toml", "protect_paths = [\"infra/policy/**\", \"Jenkinsfile\"]\n[[check]]\nid = \"a\"\nrun = \"true\"\n")
	r, err := Parse("@.talkops/rubric[1].toml", dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".github/workflows/**", ".gitlab-ci.yml", "Jenkinsfile", `.talkops/rubric\[1].toml`, "infra/policy/**"}
	if diff := cmp.Diff(want, r.ProtectedGlobs()); diff != "" {
		t.Errorf("ProtectedGlobs mismatch (-want +got):\n%s", diff)
	}
	if !matchProtected(r.ProtectedGlobs()[3], ".talkops/rubric[1].toml") || matchProtected(r.ProtectedGlobs()[3], ".talkops/rubric1.toml") {
		t.Errorf("the escaped rubric path must match only the rubric file")
	}
}

func TestGlobs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, name string
		match, prot   bool
	}{
		{".github/workflows/**", ".github/workflows/ci.yml", true, true},
		{".github/workflows/**", ".github/workflows/sub/x.yml", true, true},
		{".github/workflows/**", ".github/dependabot.yml", false, false},
		{"infra/**/*.tf", "infra/main.tf", true, true},
		{"infra/**/*.tf", "infra/a/b/c.tf", true, true},
		{"infra/**/*.tf", "infra/a/b/c.tfvars", false, false},
		{"*.tf", "sub/main.tf", false, false},
		{"**/*.tf", "sub/main.tf", true, true},
		{"infra/policy", "infra/policy/deny.rego", false, true},
		{"Jenkinsfile", "Jenkinsfile", true, true},
		{"Jenkinsfile", "ci/Jenkinsfile", false, false},
		{"**/**/**/**/**/x", "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/y", false, false},
	}
	for _, tt := range tests {
		if got := MatchGlob(tt.pattern, tt.name); got != tt.match {
			t.Errorf("MatchGlob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.match)
		}
		if got := matchProtected(tt.pattern, tt.name); got != tt.prot {
			t.Errorf("matchProtected(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.prot)
		}
	}
}

func TestIntegrity(t *testing.T) {
	t.Parallel()
	r := mustParseTOML(t, "name = \"gate\"\nprotect_paths = [\"policy/**\"]\n[[check]]\nid = \"a\"\nrun = \"true\"\n")
	before := map[string]string{
		".github/workflows/ci.yml": sum("ci"),
		"policy/deny.rego":         sum("deny"),
		"policy/old.rego":          sum("old"),
		"src/main.go":              sum("main"), // not protected: ignored
	}
	tests := []struct {
		name   string
		after  map[string]string
		wantID []string
		want   []string // statuses
	}{
		{name: "unchanged", after: before, wantID: []string{"integrity"}, want: []string{"pass"}},
		{name: "unprotected change", after: with(before, "src/main.go", sum("edited")), wantID: []string{"integrity"}, want: []string{"pass"}},
		{
			name:   "modified added removed",
			after:  with(with(with(before, ".github/workflows/ci.yml", sum("ci-weakened")), "policy/new.rego", sum("allow")), "policy/old.rego", ""),
			wantID: []string{"integrity:.github/workflows/ci.yml", "integrity:policy/new.rego", "integrity:policy/old.rego"},
			want:   []string{"fail", "fail", "fail"},
		},
		{name: "rubric file edited", after: with(before, "rubric.toml", sum("x")), wantID: []string{"integrity:rubric.toml"}, want: []string{"fail"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			items := Integrity(before, tt.after, r)
			var ids, statuses []string
			for _, it := range items {
				ids = append(ids, it.ID)
				statuses = append(statuses, string(it.Status))
				if it.Kind != KindIntegrity || !it.Required || it.Weight != 0 {
					t.Errorf("item %s: kind %s, required %v, weight %v; want integrity, true, 0", it.ID, it.Kind, it.Required, it.Weight)
				}
				if it.Status == result.StatusFail && (len(it.Findings) != 1 || it.Findings[0].Path != strings.TrimPrefix(it.ID, "integrity:")) {
					t.Errorf("failing item %s has findings %+v, want one on its path", it.ID, it.Findings)
				}
			}
			if diff := cmp.Diff(tt.wantID, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, statuses); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
	if got := Integrity(nil, before, r); len(got) != 1 || got[0].Status != result.StatusError {
		t.Errorf("Integrity(nil, ...) = %+v, want one error item", got)
	}
}

// with returns a copy of m with k set to v ("" deletes k).
func with(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for mk, mv := range m {
		out[mk] = mv
	}
	if v == "" {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func TestSnapshot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, ".github/workflows/ci.yml", "on: push\n")
	writeFile(t, dir, ".github/workflows/nested/release.yml", "on: tag\n")
	writeFile(t, dir, ".github/dependabot.yml", "version: 2\n")
	writeFile(t, dir, "Jenkinsfile", "pipeline {}\n")
	writeFile(t, dir, "policy/deny rule.rego", "deny[msg] { true }\n")
	writeFile(t, dir, "policy/-n.rego", "dash\n")
	writeFile(t, dir, "policy/.git/config", "[core]\n")
	writeFile(t, dir, "src/main.go", "package main\n")
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "policy/link.rego")); err != nil {
		t.Fatal(err)
	}
	globs := []string{".github/workflows/**", ".gitlab-ci.yml", "Jenkinsfile", "policy/**"}
	sb := newHostSandbox(t, dir)
	got, err := Snapshot(t.Context(), sb, globs)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	want := map[string]string{
		".github/workflows/ci.yml":             sum("on: push\n"),
		".github/workflows/nested/release.yml": sum("on: tag\n"),
		"Jenkinsfile":                          sum("pipeline {}\n"),
		"policy/deny rule.rego":                sum("deny[msg] { true }\n"),
		"policy/-n.rego":                       sum("dash\n"),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Snapshot mismatch (-want +got):\n%s", diff)
	}

	// The agent weakens the workflow and drops a policy; Integrity names both.
	writeFile(t, dir, ".github/workflows/ci.yml", "on: push\njobs: {}\n")
	os.Remove(filepath.Join(dir, "policy/-n.rego"))
	after, err := Snapshot(t.Context(), sb, globs)
	if err != nil {
		t.Fatal(err)
	}
	r := mustParseTOML(t, "protect_paths = [\"policy/**\"]\n[[check]]\nid = \"a\"\nrun = \"true\"\n")
	var ids []string
	for _, it := range Integrity(got, after, r) {
		ids = append(ids, it.ID+"="+string(it.Status))
	}
	if diff := cmp.Diff([]string{"integrity:.github/workflows/ci.yml=fail", "integrity:policy/-n.rego=fail"}, ids); diff != "" {
		t.Errorf("Integrity mismatch (-want +got):\n%s", diff)
	}

	if _, err := Snapshot(t.Context(), sb, []string{"../etc/**"}); err == nil {
		t.Errorf("Snapshot accepted a glob outside the workspace")
	}
}

// busyboxSandbox runs commands with busybox's sh, find and sha256sum only, as in an
// Alpine image.
type busyboxSandbox struct{ *hostSandbox }

func (b busyboxSandbox) Exec(ctx context.Context, cmd providers.Cmd) (providers.ExecResult, error) {
	if len(cmd.Argv) > 0 && cmd.Argv[0] == "/bin/sh" {
		cmd.Argv = append([]string{"sh"}, cmd.Argv[1:]...)
	}
	return b.hostSandbox.Exec(ctx, cmd)
}

func TestSnapshotBusybox(t *testing.T) {
	t.Parallel()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed")
	}
	bin := t.TempDir()
	for _, applet := range []string{"sh", "find", "sha256sum", "["} {
		if err := os.Symlink(bb, filepath.Join(bin, applet)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	writeFile(t, dir, ".gitlab-ci.yml", "stages: [test]\n")
	writeFile(t, dir, "infra/policy/a.rego", "a\n")
	sb := busyboxSandbox{newHostSandbox(t, dir)}
	sb.env = []string{"PATH=" + bin}
	got, err := Snapshot(t.Context(), sb, []string{".gitlab-ci.yml", "infra/policy/**"})
	if err != nil {
		t.Fatalf("Snapshot with busybox: %v", err)
	}
	want := map[string]string{".gitlab-ci.yml": sum("stages: [test]\n"), "infra/policy/a.rego": sum("a\n")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Snapshot mismatch (-want +got):\n%s", diff)
	}
}

func TestSnapshotErrors(t *testing.T) {
	t.Parallel()
	sb := &fakeSandbox{exec: func(context.Context, providers.Cmd) (providers.ExecResult, error) {
		return providers.ExecResult{ExitCode: 1, Stderr: []byte("find: ./policy: Permission denied\n")}, nil
	}}
	_, err := Snapshot(t.Context(), sb, []string{"policy/**"})
	if err == nil || !strings.Contains(err.Error(), "exit code 1: find: ./policy: Permission denied") {
		t.Errorf("Snapshot = %v, want the exit code and stderr", err)
	}
	if args := sb.argvs()[0]; !cmp.Equal(args[3:], []string{"talkops-snapshot", "./policy"}) {
		t.Errorf("Snapshot argv tail = %q, want the roots as arguments, never in the script", args[3:])
	}
}

func TestParseSumLine(t *testing.T) {
	t.Parallel()
	h := sum("x")
	tests := []struct {
		line, path string
		ok         bool
	}{
		{h + "  ./a/b.txt", "a/b.txt", true},
		{h + " *./bin.dat", "bin.dat", true},
		{`\` + h + `  ./new\nline`, "new\nline", true},
		{`\` + h + `  ./back\\slash`, `back\slash`, true},
		{"sha256sum: ./x: Permission denied", "", false},
		{strings.ToUpper(h) + "  ./x", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		p, s, ok := parseSumLine(tt.line)
		if p != tt.path || ok != tt.ok || (ok && s != h) {
			t.Errorf("parseSumLine(%q) = %q, %q, %v; want %q, %v", tt.line, p, s, ok, tt.path, tt.ok)
		}
	}
}
