package workspace

import (
	"bytes"
	"os/exec"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gitInit makes root a git work tree and tracks the given paths.
func gitInit(t *testing.T, root string, track ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, args := range [][]string{{"init", "-q"}, append([]string{"add", "-f", "--"}, track...)} {
		cmd := exec.Command("git", append([]string{"-C", root}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// In a git work tree, tracked files are sent whatever their folder is called (secrets
// aside); the skip list and .gitignore leave out untracked files only.
func TestPackGitTracked(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"go.mod":                "module x\n",
		"pkg/build/build.go":    "package build\n",
		"pkg/build/gen.tmp":     "tracked, with a skipped extension\n",
		"pkg/build/untracked.o": "untracked, inside a tracked folder that .gitignore names\n",
		"pkg/build/cache/c":     "untracked folder inside a tracked folder\n",
		"build/out.bin":         "untracked build output\n",
		"node_modules/m/i.js":   "untracked\n",
		".gitignore":            "*.log\nbuild/\n",
		"keep.log":              "tracked although ignored\n",
		"noise.log":             "untracked and ignored\n",
		".env":                  "TOKEN=x\n",
		".talkops/check.sh":     "#!/bin/sh\n",
		".talkops/runs/r/x":     "report\n",
	})
	gitInit(t, root, "go.mod", "pkg/build/build.go", "pkg/build/gen.tmp", ".gitignore", "keep.log", ".env")

	var buf bytes.Buffer
	st, err := Pack(t.Context(), root, Options{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		".gitignore", ".talkops/", ".talkops/check.sh", "go.mod", "keep.log",
		"pkg/", "pkg/build/", "pkg/build/build.go", "pkg/build/gen.tmp",
	}
	if diff := cmp.Diff(want, names(readTar(t, buf.Bytes()))); diff != "" {
		t.Errorf("archive paths (-want +got):\n%s", diff)
	}
	if !st.GitTracked {
		t.Error("Stats.GitTracked = false in a git work tree")
	}
	wantOut := []LeftOut{
		{".env", ReasonSecret}, {".git", ReasonSkipList}, {".talkops/runs", ReasonSkipList},
		{"build", ReasonSkipList}, {"node_modules", ReasonSkipList}, {"noise.log", ReasonGitignore},
		{"pkg/build/cache", ReasonGitignore}, {"pkg/build/untracked.o", ReasonGitignore},
	}
	if diff := cmp.Diff(wantOut, st.LeftOut); diff != "" {
		t.Errorf("Stats.LeftOut (-want +got):\n%s", diff)
	}
	wantBy := map[string]int{ReasonSecret: 1, ReasonSkipList: 4, ReasonGitignore: 3}
	if diff := cmp.Diff(wantBy, st.LeftOutByReason); diff != "" {
		t.Errorf("Stats.LeftOutByReason (-want +got):\n%s", diff)
	}
}

// Outside git, every path gets every rule, as before.
func TestPackNotGit(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeTree(t, root, map[string]string{"pkg/build/build.go": "package build\n", "main.go": "package main\n"})
	var buf bytes.Buffer
	st, err := Pack(t.Context(), root, Options{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"main.go", "pkg/"}, names(readTar(t, buf.Bytes()))); diff != "" {
		t.Errorf("archive paths (-want +got):\n%s", diff)
	}
	if st.GitTracked || len(st.LeftOut) != 1 || st.LeftOut[0] != (LeftOut{"pkg/build", ReasonSkipList}) {
		t.Errorf("GitTracked %v, LeftOut %v; want false, [pkg/build skip_list]", st.GitTracked, st.LeftOut)
	}
}

// Only the first MaxLeftOutListed paths are listed; the counts cover all.
func TestLeftOutCap(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]string{}
	for i := range MaxLeftOutListed + 7 {
		files["d"+string(rune('a'+i/26))+string(rune('a'+i%26))+"/x.bak"] = "x"
	}
	writeTree(t, root, files)
	var buf bytes.Buffer
	st, err := Pack(t.Context(), root, Options{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.LeftOut) != MaxLeftOutListed || st.LeftOutByReason[ReasonSkipList] != MaxLeftOutListed+7 {
		t.Errorf("listed %d, counted %v; want %d listed, %d counted", len(st.LeftOut), st.LeftOutByReason, MaxLeftOutListed, MaxLeftOutListed+7)
	}
}

func TestReferenced(t *testing.T) {
	t.Parallel()
	paths := []string{"pkg/build", "build", "dist", ".env"}
	tests := []struct {
		text string
		want []string
	}{
		{`main.go:3:2: cannot find module providing package github.com/ko/ko/pkg/build`, []string{"pkg/build"}},
		{"go build ./... failed", nil},
		{"open build/out.bin: no such file or directory", []string{"build"}},
		{"see pkg/builder and pkg/build.go", nil},
		{"missing: ./dist/app.js.", []string{"dist"}},
		{"reading pkg/build.", []string{"pkg/build"}},
	}
	for _, tc := range tests {
		if got := Referenced(tc.text, paths); !cmp.Equal(got, tc.want) {
			t.Errorf("Referenced(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}
