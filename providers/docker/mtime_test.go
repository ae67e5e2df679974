//go:build unix

package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/workspace"
)

// TestSyncKeepsSubSecondMtimes: the project's files reach the container with their mtimes
// to the nanosecond, over both upload paths (a plain tar to a local engine, gzip as over
// TCP). Go's test cache keys on those mtimes; rounded to the second, every test that reads
// a testdata file ran again in every sandbox sharing the host's build cache.
func TestSyncKeepsSubSecondMtimes(t *testing.T) {
	t.Parallel()
	project := t.TempDir()
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	for _, name := range []string{"testdata/input.toml", "main.go"} {
		p := filepath.Join(project, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(project, "testdata"), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	for _, way := range []struct {
		name string
		wrap func(*Sandbox) providers.Sandbox
	}{
		{"plain", func(sb *Sandbox) providers.Sandbox { return sb }},
		{"gzip", func(sb *Sandbox) providers.Sandbox { return gzipOnly{sb} }},
	} {
		t.Run(way.name, func(t *testing.T) {
			t.Parallel()
			sb := newSandbox(t, Options{})
			if _, err := workspace.Sync(t.Context(), way.wrap(sb), project, "", workspace.Options{}); err != nil {
				t.Fatalf("Sync: %v", err)
			}
			res := run(t, sb, `TZ=UTC stat -c '%n %y' testdata/input.toml main.go testdata`)
			want := "testdata/input.toml 2024-05-06 07:08:09.123456789 +0000\n" +
				"main.go 2024-05-06 07:08:09.123456789 +0000\n" +
				"testdata 2024-05-06 07:08:09.123456789 +0000\n"
			if got := string(res.Stdout); res.ExitCode != 0 || got != want {
				t.Errorf("mtimes in the container:\n%s(exit %d, %s)\nwant:\n%s", got, res.ExitCode, strings.TrimSpace(string(res.Stderr)), want)
			}
		})
	}
}
