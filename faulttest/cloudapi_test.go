package faulttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/httpapi"
)

// The cloud clients against behaviours of the vendors' APIs that their own SDKs account
// for, each through the real binary: a gateway error after a command started, a paused
// Daytona sandbox given to --sandbox-id, and a LangSmith list that echoes its offset.

// cloudRun prepares a project under root for provider tg: a rubric with the checks
// c1 and c2, tg's config, and the hermetic environment.
func cloudRun(t *testing.T, tg *target, root, c1, c2 string) (dir string, env map[string]string) {
	t.Helper()
	dir = filepath.Join(root, "project")
	files := map[string]string{
		"README.md": "# cloud api\n",
		"r.toml":    fmt.Sprintf("name = \"cloudapi\"\n[[check]]\nid = \"c1\"\nrun = %q\n[[check]]\nid = \"c2\"\nrun = %q\n", c1, c2),
	}
	for k, v := range tg.files {
		files[k] = v
	}
	writeFiles(t, dir, files)
	for _, d := range []string{filepath.Join(dir, ".git"), filepath.Join(root, "home"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env = hermeticEnv(root, newMarker())
	for k, v := range tg.env {
		env[k] = v
	}
	return dir, env
}

// TestCloudCommandNotSentTwice: the gateway in front of the service answers 502 after
// the check's command started. Daytona, LangSmith and Vercel take no idempotency key for
// a command, so talkops must not send it again: the command runs once and the check
// errs (exit 3). Runloop's command_id makes the retry safe: once, and the run passes.
func TestCloudCommandNotSentTwice(t *testing.T) {
	talkopsBin(t)
	for _, p := range cloudProviders {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			tg := newTarget(t, p, root, "")
			runs := filepath.Join(root, "c1-runs") // the fakes run commands on this host
			dir, env := cloudRun(t, tg, root, "echo ran >> "+runs, "true")
			rt := tg.routes[opExec]
			tg.proxy.addBody(rt.method, rt.path, "c1-runs", 1, actLate, 502)
			code, _, stderr := runTalkops(t, dir, env, 2*time.Minute, "--sandbox", p, "--rubric", "r.toml",
				"--report-dir", filepath.Join(root, "report"), "--timeout", "90s")
			want := 3
			if p == pRunloop {
				want = 0
			}
			if code != want {
				t.Errorf("exit = %d, want %d\n%s", code, want, tail(stderr))
			}
			b, err := os.ReadFile(runs)
			if n := strings.Count(string(b), "ran\n"); err != nil || n != 1 {
				t.Errorf("the check's command ran %d times (%v), want once", n, err)
			}
			if p != pRunloop {
				report, _ := os.ReadFile(filepath.Join(root, "report", "result.json"))
				if !strings.Contains(string(report)+stderr, "not sent again") {
					t.Errorf("neither result.json nor stderr says the command was not sent again\n%s\n%s", report, tail(stderr))
				}
			}
			if alive := tg.alive(t, "", 0); len(alive) > 0 {
				t.Errorf("sandboxes left alive: %v", alive)
			}
		})
	}
}

// TestDaytonaAttachPaused: --sandbox-id names a paused Daytona sandbox; talkops starts it
// (Daytona's start accepts paused) instead of waiting for it to start by itself.
func TestDaytonaAttachPaused(t *testing.T) {
	talkopsBin(t)
	root := t.TempDir()
	tg := newTarget(t, pDaytona, root, "")
	dir, env := cloudRun(t, tg, root, "test -f README.md", "true")
	// The sandbox a previous job created and paused, made through the same proxy.
	p, err := daytona.New(daytona.Options{APIURL: tg.proxy.URL + "/api", PollInterval: 10 * time.Millisecond, RemoteOptions: httpapi.RemoteOptions{WorkingDir: filepath.Join(root, "remote-wd")}},
		func(k string) string { return map[string]string{"DAYTONA_API_KEY": "key"}[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, providers.Spec{RunID: "earlier-job", Labels: map[string]string{providers.LabelCreatedBy: "talkops", providers.LabelRunID: "earlier-job"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	tg.daytona.Pause(sb.ID())
	code, _, stderr := runTalkops(t, dir, env, 2*time.Minute, "--sandbox", pDaytona, "--sandbox-id", sb.ID(), "--rubric", "r.toml",
		"--report-dir", filepath.Join(root, "report"), "--timeout", "90s")
	// Provisioning is the subject: waiting for the paused sandbox to start by itself ends
	// it with exit 3 after ready_timeout. The checks' verdict is not (an attached sandbox
	// works in Daytona's default directory, /home/daytona, which this host lacks).
	if code == 3 || !strings.Contains(stderr, "provision ok") {
		t.Errorf("exit = %d, want provisioning to succeed: talkops must start the paused sandbox\n%s", code, tail(stderr))
	}
	if s, ok := tg.daytona.Sandbox(sb.ID()); !ok || s.State != "started" {
		t.Errorf("sandbox after the run = %+v, %v; want it started and kept (it was attached, not created)", s, ok)
	}
}

// TestLangSmithGCPastFirstHundred: `talkops sandbox gc` reaps every expired sandbox of a
// LangSmith account holding more than one page of them, from a server that echoes the
// offset it was given instead of the next page's.
func TestLangSmithGCPastFirstHundred(t *testing.T) {
	talkopsBin(t)
	root := t.TempDir()
	tg := newTarget(t, pLangSmith, root, "")
	tg.langsmith.ListEchoesOffset = true
	for i := range 150 {
		run := fmt.Sprintf("old-run-%03d", i)
		tg.langsmith.AddSandbox("talkops-"+run, map[string]string{providers.LabelCreatedBy: "talkops", providers.LabelRunID: run,
			providers.LabelExpiresAt: "2001-01-01T00:00:00Z"})
	}
	dir, env := cloudRun(t, tg, root, "true", "true")
	code, stdout, stderr := runTalkops(t, dir, env, 2*time.Minute, "sandbox", "gc", "--provider", pLangSmith)
	if code != 0 {
		t.Errorf("sandbox gc exit = %d, want 0\n%s%s", code, stdout, tail(stderr))
	}
	if _, alive := tg.cloud.ledger(); len(alive) > 0 {
		t.Errorf("%d of 150 expired sandboxes survived sandbox gc (first: %s)", len(alive), alive[0])
	}
}
