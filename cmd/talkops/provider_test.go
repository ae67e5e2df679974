package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers/plugin/plugintest"
)

// TestProviderTestInterrupted: a signal during `talkops provider test` stops the check
// that is running (its sandbox is deleted and no plugin process is left), reports the
// remaining checks as not run, and exits 130 (SIGINT) or 143 (SIGTERM).
func TestProviderTestInterrupted(t *testing.T) {
	t.Parallel()
	goPlugin := plugintest.GoPlugin(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			t.Parallel()
			// The plugin never answers exec: the first check holds a sandbox and waits
			// until the signal ends it.
			env, root := pluginUserEnv(t, fmt.Sprintf("command = [%q]\noptions = { root = \"$ROOT\", fault = \"hang:exec\" }\n", goPlugin))
			cmd, out := startTalkops(t, project(t, nil), env, "provider", "test", "acme", "--only", "ProvisionClose,ExecEcho,NoLeaks")
			deadline := time.Now().Add(30 * time.Second)
			for len(plugintest.Alive(root)) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no sandbox was created within 30s\n%s", out)
				}
				time.Sleep(20 * time.Millisecond)
			}
			_ = cmd.Process.Signal(tc.sig)
			if code := waitExit(t, cmd, 60*time.Second); code != tc.code {
				t.Errorf("exit %d, want %d\n%s", code, tc.code, out)
			}
			got := out.String()
			for _, want := range []string{
				"STOP  ProvisionClose", "----  ExecEcho", "----  NoLeaks",
				"0 of 3 guarantees hold for acme; interrupted: 1 stopped, 2 not run",
			} {
				if !strings.Contains(got, want) {
					t.Errorf("output does not contain %q:\n%s", want, got)
				}
			}
			if strings.Contains(got, "FAIL") {
				t.Errorf("an interrupted check is reported as a failure:\n%s", got)
			}
			if ids := plugintest.Alive(root); len(ids) > 0 {
				t.Errorf("sandboxes left after the interrupted check: %v", ids)
			}
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("plugin processes left: %v", pids)
			}
		})
	}
}
