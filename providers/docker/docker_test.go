package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/archive"
	"github.com/talkops/talkops/providers/providertest"
)

// testImage is the image the engine tests use: TALKOPS_TEST_DOCKER_IMAGE, as printed by
// `.ci/docker.sh start` (a busybox image imported from a local rootfs).
func testImage(t *testing.T) string {
	t.Helper()
	requireEngine(t)
	img := os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
	if img == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("TALKOPS_TEST_DOCKER_IMAGE is not set; eval \"$(bash .ci/docker.sh start)\" sets it")
		}
		t.Skip("TALKOPS_TEST_DOCKER_IMAGE is not set; eval \"$(bash .ci/docker.sh start)\" starts an engine and imports one")
	}
	return img
}

// requireEngine skips when no Docker engine is configured, except under CI=true.
func requireEngine(t *testing.T) {
	t.Helper()
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatal("no Docker engine: DOCKER_HOST is unset and /var/run/docker.sock is missing; eval \"$(bash .ci/docker.sh start)\" starts one")
			}
			t.Skip("no Docker engine (DOCKER_HOST unset, no /var/run/docker.sock); eval \"$(bash .ci/docker.sh start)\" starts one")
		}
	}
	p := New(Options{})
	defer p.Close()
	if _, err := p.engine(t.Context()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Docker engine not reachable in CI: %v", err)
		}
		t.Skipf("Docker engine not reachable: %v", err)
	}
}

func token(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// testLabel marks the containers of one test, so tests running side by side on one
// engine do not see each other's sandboxes.
const testLabel = "talkops.test"

type harness struct {
	p   *Provider
	tok string
	img string
}

func newHarness(ctx context.Context, t *testing.T) (providertest.Harness, error) {
	img := testImage(t)
	return &harness{p: New(Options{Image: img}), tok: token(t), img: img}, nil
}

func (h *harness) NewProvider(ctx context.Context, t *testing.T) providers.Provider { return h.p }

func (h *harness) Spec(t *testing.T) providers.Spec {
	return providers.Spec{Labels: map[string]string{testLabel: h.tok}}
}

func (h *harness) Alive(ctx context.Context) ([]string, bool) { return aliveIDs(ctx, h.p, h.tok) }

func (h *harness) Close() { h.p.Close() }

func aliveIDs(ctx context.Context, p *Provider, tok string) ([]string, bool) {
	infos, err := p.List(ctx)
	if err != nil {
		return nil, false
	}
	var ids []string
	for _, in := range infos {
		if in.Labels[testLabel] == tok {
			ids = append(ids, in.ID)
		}
	}
	return ids, true
}

// TestContract is not parallel: the suite compares the engine's container list before
// and after, so it runs before the parallel tests start.
func TestContract(t *testing.T) {
	testImage(t)
	providertest.Run(t, newHarness)
}

func newSandbox(t *testing.T, opts Options) *Sandbox {
	t.Helper()
	if opts.Image == "" {
		opts.Image = testImage(t)
	}
	p := New(opts)
	t.Cleanup(func() { p.Close() })
	sb, err := p.Create(t.Context(), providers.Spec{
		RunID:  t.Name(),
		Labels: map[string]string{testLabel: token(t)},
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := sb.Close(context.WithoutCancel(t.Context())); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return sb.(*Sandbox)
}

func run(t *testing.T, sb providers.Sandbox, script string) providers.ExecResult {
	t.Helper()
	res, err := sb.Exec(t.Context(), providers.Shell(script))
	if err != nil {
		t.Fatalf("Exec(%q): %v", script, err)
	}
	return res
}

func TestContainerConfig(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{Memory: "128m", Pids: 77})
	info, err := sb.cli.ContainerInspect(t.Context(), sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{
		"network":    string(info.HostConfig.NetworkMode),
		"memory":     info.HostConfig.Memory,
		"swap":       info.HostConfig.MemorySwap,
		"pids":       *info.HostConfig.PidsLimit,
		"init":       info.HostConfig.Init != nil && *info.HostConfig.Init,
		"created-by": info.Config.Labels[providers.LabelCreatedBy],
		"run-id":     info.Config.Labels[providers.LabelRunID],
		"owner-pid":  info.Config.Labels[providers.LabelOwnerPID],
		"name":       strings.HasPrefix(info.Name, "/"+NamePrefix),
		"workdir":    info.Config.WorkingDir,
	}
	want := map[string]any{
		"network":    "none",
		"memory":     int64(128 << 20),
		"swap":       int64(128 << 20),
		"pids":       int64(77),
		"init":       true,
		"created-by": "talkops",
		"run-id":     t.Name(),
		"owner-pid":  fmt.Sprint(os.Getpid()),
		"name":       true,
		"workdir":    "/workspace",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("container config (-want +got):\n%s", diff)
	}
}

// TestIsolation checks, from inside the container, what the host keeps to itself.
func TestIsolation(t *testing.T) { // not parallel: t.Setenv plants the canary
	img := testImage(t)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("host-secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "main.tf"), []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TALKOPS_TEST_CANARY", "canary-value-5678")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, "hello-from-host")
			c.Close()
		}
	})
	t.Cleanup(wg.Wait)
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	nc := fmt.Sprintf("nc -w 2 127.0.0.1 %d </dev/null; echo rc=$?", port)

	sb := newSandbox(t, Options{Image: img})
	tgz, err := archive.TarGz(archive.Entry{Name: "main.tf", Body: []byte("original\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Upload(t.Context(), ".", bytes.NewReader(tgz)); err != nil {
		t.Fatal(err)
	}

	t.Run("host file outside the workspace", func(t *testing.T) {
		res := run(t, sb, "cat "+secret)
		if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "host-secret") {
			t.Errorf("cat %s = %d %q, want a failure", secret, res.ExitCode, res.Stdout)
		}
	})
	t.Run("host loopback server unreachable", func(t *testing.T) {
		res := run(t, sb, nc)
		if strings.Contains(string(res.Stdout), "hello-from-host") || strings.Contains(string(res.Stdout), "rc=0") {
			t.Errorf("container reached the host's 127.0.0.1:%d: %q", port, res.Stdout)
		}
		res = run(t, sb, "cat /proc/net/dev")
		if strings.Count(string(res.Stdout), ":") != 1 || !strings.Contains(string(res.Stdout), "lo:") {
			t.Errorf("/proc/net/dev = %q, want only lo", res.Stdout)
		}
	})
	t.Run("host network option reaches it", func(t *testing.T) {
		// The positive control: the same command works when the network is shared.
		hostNet := newSandbox(t, Options{Image: img, Network: "host"})
		res := run(t, hostNet, nc)
		if !strings.Contains(string(res.Stdout), "hello-from-host") {
			t.Errorf("with network = host, nc = %q %q, want the host's greeting", res.Stdout, res.Stderr)
		}
	})
	t.Run("writes do not reach the host project", func(t *testing.T) {
		res := run(t, sb, "echo changed > main.tf; echo new > added.txt; cat main.tf")
		if string(res.Stdout) != "changed\n" {
			t.Fatalf("write in sandbox failed: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
		}
		b, err := os.ReadFile(filepath.Join(project, "main.tf"))
		if err != nil || string(b) != "original\n" {
			t.Errorf("host main.tf = %q, %v; want it unchanged", b, err)
		}
		if _, err := os.Stat(filepath.Join(project, "added.txt")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("added.txt appeared in the host project: %v", err)
		}
	})
	t.Run("host environment not visible", func(t *testing.T) {
		res := run(t, sb, "env; cat /proc/1/environ")
		if strings.Contains(string(res.Stdout), "canary-value-5678") {
			t.Errorf("host env var visible in sandbox:\n%s", res.Stdout)
		}
	})
}

func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{Memory: "32m"})
	start := time.Now()
	res, err := sb.Exec(t.Context(), providers.Cmd{
		Argv:    []string{"sh", "-c", `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo survived ${#x}`},
		Timeout: 2 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.TimedOut {
		t.Fatalf("memory hog hung until the timeout (%s)", time.Since(start))
	}
	if res.ExitCode != 137 || !strings.Contains(string(res.Stderr), "talkops: killed: memory limit (32 MiB) exceeded") {
		t.Errorf("memory hog = exit %d, stdout %q, stderr %q; want 137 and the cause", res.ExitCode, res.Stdout, res.Stderr)
	}
	if res := run(t, sb, "kill -9 $$"); res.ExitCode != 137 || strings.Contains(string(res.Stderr), "memory limit") {
		t.Errorf("plain SIGKILL = exit %d stderr %q, want 137 without a memory-limit note", res.ExitCode, res.Stderr)
	}
}

func TestPidsLimit(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{Pids: 16})
	res := run(t, sb, `i=0; while [ $i -lt 40 ]; do sleep 2 & i=$((i+1)); done; wait`)
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "fork") {
		t.Errorf("fork bomb = exit %d, stderr %q; want a failed fork", res.ExitCode, res.Stderr)
	}
}

func TestTimeoutKillsDetachedChildren(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{})
	start := time.Now()
	res, err := sb.Exec(t.Context(), providers.Cmd{
		Argv:    []string{"sh", "-c", "setsid sleep 301 & sleep 302"},
		Timeout: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 124 || time.Since(start) > 15*time.Second {
		t.Errorf("Exec = %+v after %s, want TimedOut, 124, promptly", res, time.Since(start))
	}
	ps := run(t, sb, "ps -o args | grep -c '^sleep 30[12]' || true")
	if got := strings.TrimSpace(string(ps.Stdout)); got != "0" {
		t.Errorf("%s sleeps survived the timeout", got)
	}
}

func TestExecErrors(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{})
	if _, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"pwd"}, Dir: "/nonexistent"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Exec with a missing Dir = %v, want fs.ErrNotExist", err)
	}
	res, err := sb.Exec(t.Context(), providers.Cmd{Argv: []string{"/bin/no-such-program"}})
	if err != nil || res.ExitCode != 127 || !strings.Contains(string(res.Stderr), "no-such-program") {
		t.Errorf("Exec(missing program) = %+v, %v; want exit 127 naming it", res, err)
	}
}

func TestCreateErrors(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	tests := []struct {
		name       string
		opts       Options
		want       string
		wantConfig bool
	}{
		{"missing image, never pull", Options{Image: "talkops-no-such-image:1", Pull: PullNever}, "docker pull talkops-no-such-image:1", false},
		{"missing image, pull fails", Options{Image: "127.0.0.1:1/talkops/none:1"}, "pulling it failed", false},
		{"bad memory", Options{Image: img, Memory: "huge"}, `memory = "huge"`, true},
		{"bad pull", Options{Image: img, Pull: "sometimes"}, `pull = "sometimes"`, true},
		{"bad workdir", Options{Image: img, WorkingDir: "rel"}, "working_dir", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New(tt.opts)
			defer p.Close()
			sb, err := p.Create(t.Context(), providers.Spec{RunID: "bad"})
			if err == nil {
				sb.Close(t.Context())
				t.Fatalf("Create(%+v) succeeded, want an error containing %q", tt.opts, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Create(%+v) = %v, want it to contain %q", tt.opts, err, tt.want)
			}
			if got := errors.Is(err, providers.ErrConfig); got != tt.wantConfig {
				t.Errorf("errors.Is(%v, ErrConfig) = %v, want %v", err, got, tt.wantConfig)
			}
		})
	}
}

func TestUnreachableEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	p := New(Options{})
	defer p.Close()
	_, err := p.Create(t.Context(), providers.Spec{})
	if err == nil || !strings.Contains(err.Error(), "not reachable") || !strings.Contains(err.Error(), "DOCKER_HOST") {
		t.Errorf("Create with no engine = %v, want an error naming the engine and DOCKER_HOST", err)
	}
}

func TestListAttachDelete(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	tok := token(t)
	p := New(Options{Image: img})
	defer p.Close()
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "list-me", TTL: time.Hour, Labels: map[string]string{testLabel: tok}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.WithoutCancel(t.Context())) })
	run(t, sb, "echo kept > note")

	infos, err := p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var found *providers.Info
	for i := range infos {
		if infos[i].ID == sb.ID() {
			found = &infos[i]
		}
	}
	if found == nil {
		t.Fatalf("List = %v, want it to hold %s", infos, sb.ID())
	}
	if found.RunID != "list-me" || found.State != "running" || found.ExpiresAt.Before(time.Now().Add(50*time.Minute)) || found.Provider != Name {
		t.Errorf("List entry = %+v, want run id list-me, running, expiry ~1h from now", *found)
	}

	att, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, att, "cat note"); string(res.Stdout) != "kept\n" {
		t.Errorf("attached sandbox reads %q, want kept", res.Stdout)
	}
	if err := att.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A configured working_dir (--sandbox-id with [sandboxes.providers.docker]
	// working_dir) wins over the container's own.
	inTmp, err := p.Attach(t.Context(), sb.ID(), providers.AttachOptions{WorkDir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, inTmp, "pwd"); string(res.Stdout) != "/tmp\n" || inTmp.WorkDir() != "/tmp" {
		t.Errorf("attached with WorkDir /tmp: pwd %q, WorkDir() %q", res.Stdout, inTmp.WorkDir())
	}
	if err := inTmp.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ids, _ := aliveIDs(t.Context(), p, tok); !slices.Contains(ids, sb.ID()) || len(ids) != 2 {
		t.Errorf("after closing the attached handle, alive = %v, want the container and its volume kept", ids)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context(), sb.ID()); err != nil {
		t.Errorf("second Delete = %v, want nil", err)
	}
	if ids, _ := aliveIDs(t.Context(), p, tok); len(ids) != 0 {
		t.Errorf("after Delete, alive = %v", ids)
	}
	if _, err := sb.Exec(t.Context(), providers.Shell("true")); err == nil {
		t.Error("Exec on a deleted container succeeded")
	}
}

func TestCreateCancelledMidway(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	tok := token(t)
	p := New(Options{Image: img})
	defer p.Close()
	// Cancel at several points of Create; nothing may be left behind.
	for _, d := range []time.Duration{time.Millisecond, 20 * time.Millisecond, 80 * time.Millisecond, 200 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		sb, err := p.Create(ctx, providers.Spec{RunID: "cancel", Labels: map[string]string{testLabel: tok}})
		cancel()
		if err == nil {
			if err := sb.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The engine may still be finishing a removal; give it a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, _ := aliveIDs(t.Context(), p, tok)
		if len(ids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers left by cancelled Creates: %v", ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestDownloadSymlinkStaysInside(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{})
	run(t, sb, "echo inside > /etc/talkops-target; ln -s /etc/talkops-target link; mkdir d")
	rc, err := sb.Download(t.Context(), "link")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "inside\n" {
		t.Errorf("Download(link) = %q, want the container's target", b)
	}
	if _, err := sb.Download(t.Context(), "d"); err == nil {
		t.Error("Download(directory) succeeded, want an error")
	}
}

func TestOptionsResolve(t *testing.T) {
	t.Parallel()
	got, err := Options{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := resolved{image: DefaultImage, network: "none", memory: 2 << 30, pids: DefaultPids, workDir: "/workspace", pull: PullMissing}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(resolved{})); diff != "" {
		t.Errorf("Options{}.resolve() (-want +got):\n%s", diff)
	}
	got, err = Options{Memory: "0", Pids: -1, CPUs: 1.5}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if got.memory != 0 || got.pids != 0 || got.nanoCPU != 1_500_000_000 {
		t.Errorf("unlimited options resolved to memory %d pids %d nanoCPU %d", got.memory, got.pids, got.nanoCPU)
	}
}

func TestContainerName(t *testing.T) {
	t.Parallel()
	for run, prefix := range map[string]string{"": "talkops-run-", "PR #12 / job": "talkops-pr-12-job-"} {
		if got := containerName(run); !strings.HasPrefix(got, prefix) || len(got) != len(prefix)+8 {
			t.Errorf("containerName(%q) = %q, want %s<8 hex>", run, got, prefix)
		}
	}
}

func TestNonRootUser(t *testing.T) {
	t.Parallel()
	sb := newSandbox(t, Options{User: "65534:65534"})
	tgz, err := archive.TarGz(archive.Entry{Name: "sub/f.txt", Body: []byte("x\n")})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Upload(t.Context(), ".", bytes.NewReader(tgz)); err != nil {
		t.Fatal(err)
	}
	res := run(t, sb, "id -u; echo y >> sub/f.txt && touch new && cat sub/f.txt")
	if got, want := string(res.Stdout), "65534\nx\ny\n"; got != want || res.ExitCode != 0 {
		t.Errorf("as user 65534: stdout %q exit %d stderr %q; want %q: the workspace and uploads must be writable", got, res.ExitCode, res.Stderr, want)
	}
}
