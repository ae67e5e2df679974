package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/modal"
	"github.com/talkops/talkops/providers/modal/modalfake"
)

// modalService starts the Modal fake and returns it with the environment and the project
// config that point talkops at it: the token, the fake's server URL, its certificate
// through SSL_CERT_FILE, and a working directory on this host (the fake runs commands
// here).
func modalService(t *testing.T) (*modalfake.Server, map[string]string, string) {
	t.Helper()
	srv := modalfake.New("ak-cli", "as-cli")
	t.Cleanup(srv.Close)
	cert := filepath.Join(t.TempDir(), "modalfake.pem")
	if err := os.WriteFile(cert, srv.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	// The fake's address is in the project file, where endpoints are trusted-only.
	env := map[string]string{"MODAL_TOKEN_ID": "ak-cli", "MODAL_TOKEN_SECRET": "as-cli", "SSL_CERT_FILE": cert, "TALKOPS_TRUST_PROJECT_CONFIG": "true"}
	cfg := fmt.Sprintf("[sandboxes.providers.modal]\nserver_url = %q\nworking_dir = %q\nready_timeout = \"10s\"\n", srv.URL, t.TempDir())
	return srv, env, cfg
}

// TestModalThroughCLI runs the pipeline on --sandbox modal against the fake: missing
// credentials are a usage error before anything is created; a run syncs the project
// (without .env), runs the setup script and the checks in the sandbox, and terminates
// it; a run attached with --sandbox-id never terminates the sandbox.
func TestModalThroughCLI(t *testing.T) {
	t.Parallel()
	srv, svcEnv, cfg := modalService(t)
	const rubric = "[[check]]\nid = \"synced\"\nrun = \"test -f README.md && test ! -e .env\"\n" +
		"[[check]]\nid = \"setup-ran\"\nrun = \"test -f setup-done\"\n"
	dir := project(t, map[string]string{"r.toml": rubric, "README.md": "hi", ".env": "SECRET=1",
		"setup.sh": "touch setup-done\n", ".talkops/config.toml": cfg})

	got := runIn(t, dir, testEnv(t, map[string]string{"TALKOPS_TRUST_PROJECT_CONFIG": "true"}), "--sandbox", "modal", "--rubric", "r.toml")
	if got.code != 2 || !strings.Contains(got.stderr, "MODAL_TOKEN_ID") || !strings.Contains(got.stderr, "MODAL_TOKEN_SECRET") || !strings.Contains(got.stderr, ".modal.toml") {
		t.Fatalf("without credentials: exit %d, want 2 naming MODAL_TOKEN_ID, MODAL_TOKEN_SECRET and ~/.modal.toml\n%s", got.code, got.stderr)
	}
	if l := srv.Ledger(); l.Created != 0 || srv.Count("SandboxCreate") != 0 {
		t.Fatalf("a usage error created %d sandboxes", l.Created)
	}

	got = runIn(t, dir, testEnv(t, svcEnv), "--sandbox", "modal", "--rubric", "r.toml", "--sandbox-setup", "setup.sh")
	if got.code != 0 {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	if l := srv.Ledger(); l.Created != 1 || len(l.Alive) != 0 {
		t.Errorf("fake ledger: created %d, alive %v; want 1 created and none alive", l.Created, l.Alive)
	}
	if strings.Contains(got.stdout+got.stderr, "as-cli") {
		t.Error("the token secret appears in the output")
	}

	// Attach: the sandbox exists before the run and is still there after it.
	p, err := modal.New(modal.Options{ServerURL: srv.URL, TLSConfig: srv.TLSConfig(), WorkingDir: t.TempDir()},
		func(k string) string { return svcEnv[k] })
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "pre-made", Labels: map[string]string{providers.LabelCreatedBy: "talkops"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	got = runIn(t, dir, testEnv(t, svcEnv), "--sandbox", "modal", "--sandbox-id", sb.ID(), "--rubric", "r.toml", "--sandbox-setup", "setup.sh")
	if got.code != 0 {
		t.Fatalf("attached run: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	if _, ok := srv.Sandbox(sb.ID()); !ok {
		t.Error("the attached run terminated the sandbox it did not create")
	}
	if l := srv.Ledger(); l.Created != 2 {
		t.Errorf("the attached run created a sandbox: %d created in all, want 2", l.Created)
	}
}

// TestModalKilledRunIsReaped: SIGTERM during a check terminates the sandbox before talkops
// exits 143; SIGKILL leaves it, and `talkops sandbox gc` finds it by its tags and
// terminates it.
func TestModalKilledRunIsReaped(t *testing.T) {
	t.Parallel()
	const longCheck = "[[check]]\nid = \"long\"\nrun = \"echo started; sleep 60\"\n"
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			srv, svcEnv, cfg := modalService(t)
			dir := project(t, map[string]string{"r.toml": longCheck, ".talkops/config.toml": cfg})
			env := testEnv(t, svcEnv)
			cmd, out := startTalkops(t, dir, env, "--sandbox", "modal", "--rubric", "r.toml", "-q")
			runID := waitStage(t, dir, "rubric", 60*time.Second)
			time.Sleep(300 * time.Millisecond)
			if got := sandboxList(t, dir, env, "modal", runID); len(got) != 1 {
				t.Fatalf("while running, sandbox ls = %+v, want the run's sandbox", got)
			}
			signalled := time.Now()
			_ = cmd.Process.Signal(sig)
			code := waitExit(t, cmd, 30*time.Second)
			switch sig {
			case syscall.SIGTERM:
				if code != 143 {
					t.Fatalf("SIGTERM: exit %d, want 143\n%s", code, out)
				}
				if alive := srv.Ledger().Alive; len(alive) != 0 {
					t.Fatalf("after SIGTERM the sandbox remains: %v", alive)
				}
				t.Logf("SIGTERM → sandbox terminated and talkops exited in %s", time.Since(signalled).Round(time.Millisecond))
			case syscall.SIGKILL:
				if alive := srv.Ledger().Alive; len(alive) != 1 {
					t.Fatalf("after SIGKILL, the fake holds %v, want the orphan", alive)
				}
				gc := runIn(t, dir, env, "sandbox", "gc", "--provider", "modal", "--older-than", "0s", "--run-id", runID)
				if gc.code != 0 {
					t.Fatalf("sandbox gc: exit %d\n%s%s", gc.code, gc.stdout, gc.stderr)
				}
				if alive := srv.Ledger().Alive; len(alive) != 0 {
					t.Fatalf("after gc the orphan remains: %v\n%s", alive, gc.stdout)
				}
			}
		})
	}
}
