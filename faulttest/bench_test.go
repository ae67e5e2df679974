package faulttest

import (
	"flag"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSIGTERMToDeleted measures, per provider, how long after a SIGTERM (sent while
// a check runs) the sandbox is gone and the talkops process has exited: GitHub Actions
// sends SIGKILL 10 s after it cancels a job, so both must fit well inside that window.
// The cloud providers run against their fakes on loopback, so their figures are
// talkops's own share of the time.
//
//	eval "$(bash .ci/docker.sh start)"
//	go test ./faulttest -run '^$' -bench SIGTERMToDeleted -benchtime 5x
func BenchmarkSIGTERMToDeleted(b *testing.B) {
	talkopsBin(b)
	for _, provider := range append([]string{pLocal, pBwrap, pDocker, pModal}, cloudProviders...) {
		b.Run(provider, func(b *testing.B) {
			var deleted, exited time.Duration
			for range b.N {
				d, _, e := sigtermOnce(b, provider, "")
				deleted += d
				exited += e
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(deleted.Microseconds())/1000/float64(b.N), "ms-to-deleted")
			b.ReportMetric(float64(exited.Microseconds())/1000/float64(b.N), "ms-to-exit")
		})
	}
}

var benchTree = flag.String("benchtree", "", "directory BenchmarkSIGTERMToDeletedLargeWorkspace puts in the project (make one with providers/workspace/internal/gentree)")

// BenchmarkSIGTERMToDeletedLargeWorkspace is BenchmarkSIGTERMToDeleted on docker with a
// large tree synced into the workspace, so that teardown has that many files to remove:
//
//	go run ./providers/workspace/internal/gentree -dir /tmp/tree -files 20000 -size 200MB
//	go test ./faulttest -run '^$' -bench SIGTERMToDeletedLargeWorkspace -benchtime 3x -benchtree /tmp/tree
func BenchmarkSIGTERMToDeletedLargeWorkspace(b *testing.B) {
	if *benchTree == "" {
		b.Skip("-benchtree not set")
	}
	talkopsBin(b)
	var deleted, volDeleted, exited time.Duration
	for range b.N {
		d, v, e := sigtermOnce(b, pDocker, *benchTree)
		deleted += d
		volDeleted += v
		exited += e
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(deleted.Microseconds())/1000/float64(b.N), "ms-to-deleted")
	b.ReportMetric(float64(volDeleted.Microseconds())/1000/float64(b.N), "ms-to-volume-deleted")
	b.ReportMetric(float64(exited.Microseconds())/1000/float64(b.N), "ms-to-exit")
}

// sigtermOnce runs one check that never ends, sends SIGTERM once it runs, and returns the
// time until the sandbox is gone (for local: until its processes are; for docker: the
// container, its workspace volume is reported as ms-to-volume-deleted) and until exit.
// A non-empty tree is hard-linked into the project as tree/ first.
func sigtermOnce(b *testing.B, provider, tree string) (toDeleted, toVolumeDeleted, toExit time.Duration) {
	b.Helper()
	root := b.TempDir()
	marker := newMarker()
	tg := newTarget(b, provider, root, "")
	dir := filepath.Join(root, "project")
	files := map[string]string{
		"README.md": "# bench\n",
		"r.toml":    "[[check]]\nid = \"c1\"\nrun = \"" + strings.ReplaceAll(loopCmd(marker), `"`, `\"`) + "\"\n",
	}
	for k, v := range tg.files {
		files[k] = v
	}
	writeFiles(b, dir, files)
	writeFiles(b, root, map[string]string{"project/.git/HEAD": "", "home/.keep": "", "tmp/.keep": ""})
	if tree != "" {
		if out, err := exec.Command("cp", "-al", tree, filepath.Join(dir, "tree")).CombinedOutput(); err != nil {
			b.Fatalf("cp -al %s: %v\n%s", tree, err, out)
		}
	}
	env := hermeticEnv(root, marker)
	for k, v := range tg.env {
		env[k] = v
	}
	p := startTalkops(b, dir, env, "--sandbox", provider, "--rubric", "r.toml", "--output-format", "stream-json",
		"--report-dir", filepath.Join(root, "report"))
	if _, ok := p.waitEvent(func(e event) bool { return e.Type == "check.started" }, time.Minute); !ok {
		b.Fatalf("the check never started\n%s", tail(p.stderr.String()))
	}
	deadline := time.Now().Add(time.Minute)
	for !commandRunning(marker) {
		if time.Now().After(deadline) || p.exited() {
			b.Fatalf("the check's command never ran\n%s", tail(p.stderr.String()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	runID := p.runID()
	pid := p.cmd.Process.Pid
	t0 := time.Now()
	if err := p.signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	for {
		gone := !commandRunning(marker)
		switch provider {
		case pLocal:
		case pDocker:
			gone = gone && len(dockerLeft(b, tg.dockerEngine, runID, pid, false)) == 0
		default:
			gone = gone && len(tg.alive(b, runID, pid)) == 0
		}
		if gone {
			toDeleted = time.Since(t0)
			break
		}
		if time.Since(t0) > time.Minute {
			b.Fatalf("the sandbox still exists a minute after SIGTERM")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if provider == pDocker {
		for len(tg.alive(b, runID, pid)) > 0 {
			if time.Since(t0) > time.Minute {
				b.Fatalf("the workspace volume still exists a minute after SIGTERM")
			}
			time.Sleep(2 * time.Millisecond)
		}
		toVolumeDeleted = time.Since(t0)
	}
	code, ok := p.wait(time.Minute)
	if !ok || code != 143 {
		b.Fatalf("exit %d (exited: %v), want 143\n%s", code, ok, tail(p.stderr.String()))
	}
	return toDeleted, toVolumeDeleted, p.exitedAt.Sub(t0)
}

// commandRunning reports whether a process carrying marker in its command line runs.
func commandRunning(marker string) bool {
	for _, l := range leftovers(marker, "") {
		if strings.HasPrefix(l.Why, "command line") {
			return true
		}
	}
	return false
}
