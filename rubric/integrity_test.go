package rubric

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
