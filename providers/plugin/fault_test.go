package plugin_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/plugin"
	"github.com/talkops/talkops/providers/plugin/plugintest"
)

// TestFaults injects a plugin fault at each operation: the call fails (never hangs) with
// a *plugin.ProcessError quoting the plugin's stderr, Close still tears down where the
// plugin can, and no plugin process outlives the provider's last sandbox.
func TestFaults(t *testing.T) {
	t.Parallel()
	bin := plugintest.GoPlugin(t)
	tests := []struct {
		fault string
		op    string // the step that must fail: create, exec, upload, download, close
		// stderr is what the error must quote from the plugin's stderr ("" for none).
		stderr string
		reason string
		leaks  bool // the sandbox stays (delete itself failed)
	}{
		{fault: "crash:hello", op: "create", stderr: "crashing in hello", reason: "exited"},
		{fault: "version", op: "create", reason: "protocol version 99"},
		{fault: "crash:create", op: "create", stderr: "crashing in create", reason: "exited"},
		{fault: "hang:create", op: "create", stderr: "hanging in create", reason: "did not answer"},
		{fault: "garbage:create", op: "create", reason: "not a protocol message"},
		{fault: "crash:exec", op: "exec", stderr: "crashing in exec", reason: "exited"},
		{fault: "hang:exec", op: "exec", stderr: "hanging in exec", reason: "did not answer"},
		{fault: "garbage:exec", op: "exec", reason: "not a protocol message"},
		{fault: "huge:exec", op: "exec", reason: "longer than 16 MiB"},
		{fault: "crash:upload_begin", op: "upload", stderr: "crashing in upload_begin", reason: "exited"},
		{fault: "crash:upload_chunk", op: "upload", stderr: "crashing in upload_chunk", reason: "exited"},
		// The plugin stops reading stdin: the next request (a chunk larger than the pipe)
		// blocks on the write until the call's deadline stops the plugin.
		{fault: "deaf:upload_begin", op: "upload", stderr: "no longer reading requests", reason: "did not read the request"},
		{fault: "crash:read", op: "download", stderr: "crashing in read", reason: "exited"},
		{fault: "crash:delete", op: "close", stderr: "crashing in delete", reason: "exited", leaks: true},
		{fault: "hang:delete", op: "close", stderr: "hanging in delete", reason: "did not answer", leaks: true},
	}
	for _, tc := range tests {
		t.Run(tc.fault, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			p, err := plugin.New(plugin.Options{Name: "faulty", Command: []string{bin},
				Options:      map[string]any{"root": root, "fault": tc.fault},
				StartTimeout: 10 * time.Second, CreateTimeout: 3 * time.Second, CallTimeout: 5 * time.Second, ExecGrace: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err = step(ctx, t, p, tc.op)
			var pe *plugin.ProcessError
			if !errors.As(err, &pe) {
				t.Fatalf("%s with fault %s: error = %v, want a *plugin.ProcessError", tc.op, tc.fault, err)
			}
			if !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), tc.stderr) {
				t.Errorf("error = %q, want it to say %q and quote the plugin's stderr %q", err, tc.reason, tc.stderr)
			}
			if ids := plugintest.Alive(root); len(ids) > 0 != tc.leaks {
				t.Errorf("sandboxes left: %v, want leaked=%v", ids, tc.leaks)
			}
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("plugin processes still running: %v", pids)
			}
		})
	}
}

// step creates a sandbox and runs up to op, returning op's error; everything is closed.
func step(ctx context.Context, t *testing.T, p *plugin.Provider, op string) error {
	sb, err := p.Create(ctx, providers.Spec{RunID: "r1", Labels: map[string]string{providers.LabelCreatedBy: "talkops"}})
	if op == "create" {
		if err == nil {
			_ = sb.Close(ctx)
			t.Fatal("Create succeeded")
		}
		return err
	}
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	var opErr error
	switch op {
	case "exec":
		_, opErr = sb.Exec(ctx, providers.Cmd{Argv: []string{"true"}, Timeout: time.Second})
	case "upload":
		// Random content, so the gzip stays above one chunk and a chunk is larger than a
		// pipe's buffer.
		body := make([]byte, 3<<20)
		_, _ = rand.NewChaCha8([32]byte{1}).Read(body)
		tgz, err := archive.TarGz(archive.Entry{Name: "big.bin", Body: body})
		if err != nil {
			t.Fatal(err)
		}
		opErr = sb.Upload(ctx, "", bytes.NewReader(tgz))
	case "download":
		_, opErr = sb.Download(ctx, "/etc/hostname")
	case "close":
		opErr = sb.Close(ctx)
		if opErr == nil {
			t.Fatal("Close succeeded")
		}
		return opErr
	}
	if err := sb.Close(ctx); err != nil {
		t.Errorf("Close after the %s fault = %v, want nil (a fresh plugin deletes the sandbox)", op, err)
	}
	return opErr
}

// TestPythonBridgeCrash: a bridge that dies mid-run takes its backend objects with it.
// The next call starts a fresh bridge; deleting the sandbox from there is
// ErrNotSupported, never a silent success, so the sandbox stays in talkops' ledger.
func TestPythonBridgeCrash(t *testing.T) {
	t.Parallel()
	python := plugintest.Python(t)
	root := t.TempDir()
	p, err := plugin.New(plugin.Options{Name: "acme", Python: python,
		BridgeArgs: plugin.BackendArgs("acme_sandbox.backend:AcmeSandboxBackend"),
		Env:        []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + plugintest.PythonDir(), "PYTHONDONTWRITEBYTECODE=1"},
		Options:    map[string]any{"root": root}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sb, err := p.Create(ctx, providers.Spec{RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	pids := plugintest.LivePIDs(root)
	if len(pids) != 1 {
		t.Fatalf("bridge pids = %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, err = sb.Exec(ctx, providers.Cmd{Argv: []string{"true"}})
	var pe *plugin.ProcessError
	if !errors.As(err, &pe) && !errors.Is(err, providers.ErrNotFound) {
		t.Errorf("Exec after the bridge died = %v, want a ProcessError or ErrNotFound", err)
	}
	err = sb.Close(ctx)
	if !errors.Is(err, providers.ErrNotSupported) {
		t.Errorf("Close after the bridge died = %v, want ErrNotSupported (the sandbox may still exist)", err)
	}
	if ids := plugintest.Alive(root); len(ids) != 1 {
		t.Errorf("sandboxes = %v, want the one the dead bridge made", ids)
	}
	if pids := plugintest.LivePIDs(root); len(pids) > 0 {
		t.Errorf("bridge processes left: %v", pids)
	}
}
