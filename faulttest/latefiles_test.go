package faulttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBwrapLateProjectFilesStayOut runs the real binary on bwrap with a layered workspace
// and creates files in the host project while the checks run: a withheld .env, an
// ignored file, an oversized one and plain files the rules would allow. None of them
// shows in the sandbox: its workspace is what the sync plan selected at the start.
//
// The first check waits for the host's signal, an in-place write to a file the plan
// kept (the one change a layered workspace does show, the file being the same inode);
// the host writes it only after creating the late files.
func TestBwrapLateProjectFilesStayOut(t *testing.T) {
	t.Parallel()
	root, env := providerRunEnv(t, pBwrap)
	dir := filepath.Join(root, "project")
	writeFiles(t, dir, map[string]string{
		"README.md":            "readme\n",
		"signal.txt":           "wait\n",
		".gitignore":           "*.log\n",
		".talkops/config.toml": "[sandboxes.sync]\nmax_file_size = \"1KiB\"\n",
		"r.toml": `name = "late"
[[check]]
id = "wait"
run = 'i=0; while ! grep -q go signal.txt; do i=$((i+1)); [ $i -lt 600 ] || exit 1; sleep 0.1; done'
[[check]]
id = "absent"
run = 'for f in .env late.txt late.log huge.bin newdir/late.go; do if test -e "$f"; then echo "visible: $f"; exit 1; fi; done; test -f README.md'
`,
	})
	reportDir := filepath.Join(root, "report")
	p := startTalkops(t, dir, env, "--sandbox", pBwrap, "--rubric", "r.toml", "--output-format", "stream-json", "--report-dir", reportDir)
	if _, ok := p.waitEvent(func(e event) bool { return e.Type == "check.started" }, time.Minute); !ok {
		t.Fatalf("the run never reached its first check\nstdout:\n%s\nstderr:\n%s", p.stdout, p.stderr)
	}
	writeFiles(t, dir, map[string]string{
		".env":           "TOKEN=late-s3cr3t\n",
		"late.txt":       "allowed by the rules\n",
		"late.log":       "ignored\n",
		"huge.bin":       strings.Repeat("x", 4096),
		"newdir/late.go": "package late\n",
	})
	// In place (O_TRUNC keeps the inode), so the waiting check sees it.
	if err := os.WriteFile(filepath.Join(dir, "signal.txt"), []byte("go\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, ok := p.wait(2 * time.Minute)
	if !ok {
		t.Fatalf("talkops did not exit\nstderr:\n%s", p.stderr)
	}
	r, b := readReport(t, reportDir, tail(p.stderr.String()))
	if r.Sync == nil || r.Sync.Mode != "overlay" {
		t.Fatalf("result: sync %+v, want a layered workspace", r.Sync)
	}
	if code != 0 {
		t.Errorf("exit %d, want 0 (no late file visible)\n%s\n%s", code, b, tail(p.stderr.String()))
	}
	if strings.Contains(p.stdout.String()+p.stderr.String()+string(b), "late-s3cr3t") {
		t.Errorf("the late .env's value appears in the output")
	}
	if left := waitNoLeftovers(env[markerVar], root, 5*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}
