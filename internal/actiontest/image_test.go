package actiontest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/result"
)

// docker runs the docker CLI and returns its stdout; stderr goes into the error.
func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "docker", args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// engine skips the test when there is no Docker engine, unless CI=true, where the image
// must be built: .ci/run starts an engine with .ci/docker.sh.
func engine(t *testing.T) {
	t.Helper()
	miss := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s and CI=true; start one: eval \"$(bash .ci/docker.sh start)\"", why)
		}
		t.Skipf("%s; start one to run this test: eval \"$(bash .ci/docker.sh start)\"", why)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		miss("no docker CLI")
	}
	if os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			miss("no Docker engine (DOCKER_HOST unset, no /var/run/docker.sock)")
		}
	}
	if _, err := docker(t, "version", "--format", "{{.Server.Version}}"); err != nil {
		miss(fmt.Sprintf("the Docker engine does not answer (%v)", err))
	}
}

// buildImages runs .ci/image.sh, as CI does, and returns the root and non-root images.
func buildImages(t *testing.T, root string) (img, nonroot string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "bash", filepath.Join(root, ".ci", "image.sh"))
	cmd.Dir = root
	// Tags of this test run only: another checkout building talkops:ci on the same engine
	// at the same time must not swap the image under this test.
	tag := "talkops-test:" + strconv.Itoa(os.Getpid())
	cmd.Env = append(os.Environ(), "TALKOPS_IMAGE="+tag, "TALKOPS_IMAGE_NONROOT="+tag+"-nonroot")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", tag, tag+"-nonroot").Run() }) // t.Context() is done by now
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if strings.Contains(errb.String(), "needs root") && os.Getenv("CI") != "true" {
			t.Skipf(".ci/image.sh: %s", strings.TrimSpace(errb.String()))
		}
		t.Fatalf(".ci/image.sh: %v\n%s", err, errb.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		switch k {
		case "TALKOPS_IMAGE":
			img = v
		case "TALKOPS_IMAGE_NONROOT":
			nonroot = v
		}
	}
	if img == "" || nonroot == "" {
		t.Fatalf(".ci/image.sh printed %q, want TALKOPS_IMAGE and TALKOPS_IMAGE_NONROOT exports", out.String())
	}
	return img, nonroot
}

type imageConfig struct {
	Config struct {
		User       string
		WorkingDir string
		Entrypoint []string
		Cmd        []string
		Labels     map[string]string
	}
}

func inspect(t *testing.T, image string) imageConfig {
	t.Helper()
	out, err := docker(t, "image", "inspect", image)
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []imageConfig
	if err := json.Unmarshal([]byte(out), &cfgs); err != nil || len(cfgs) != 1 {
		t.Fatalf("docker image inspect %s: %v (%d results)", image, err, len(cfgs))
	}
	return cfgs[0]
}

// TestImage builds the container image the way CI does (.ci/image.sh: the Dockerfile's
// prebuilt target FROM a locally imported Debian base) and checks what GitLab and
// Jenkins jobs rely on.
func TestImage(t *testing.T) {
	engine(t)
	root := repoRoot(t)
	img, nonroot := buildImages(t, root)
	headOut, err := exec.CommandContext(t.Context(), "git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	head := strings.TrimSpace(string(headOut))

	t.Run("version", func(t *testing.T) {
		out, err := docker(t, "run", "--rm", "--network", "none", img, "version")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "talkops ") || lines[1] != "commit "+head {
			t.Errorf("talkops version in the image printed %q, want talkops <version> and commit %s", out, head)
		}
	})

	t.Run("metadata", func(t *testing.T) {
		for _, tt := range []struct {
			image, user string
		}{{img, "root"}, {nonroot, "talkops"}} {
			cfg := inspect(t, tt.image).Config
			if diff := cmp.Diff([]string{"/usr/bin/tini", "--", "/usr/local/bin/talkops"}, cfg.Entrypoint); diff != "" {
				t.Errorf("%s entrypoint (-want +got):\n%s", tt.image, diff)
			}
			if cfg.User != tt.user {
				t.Errorf("%s user = %q, want %q", tt.image, cfg.User, tt.user)
			}
			if cfg.WorkingDir != "/workspace" {
				t.Errorf("%s workdir = %q, want /workspace", tt.image, cfg.WorkingDir)
			}
			for k, want := range map[string]string{
				"org.opencontainers.image.title":    "talkops",
				"org.opencontainers.image.source":   "https://github.com/talkops/talkops",
				"org.opencontainers.image.revision": head,
			} {
				if got := cfg.Labels[k]; got != want {
					t.Errorf("%s label %s = %q, want %q", tt.image, k, got, want)
				}
			}
			if cfg.Labels["org.opencontainers.image.version"] == "" {
				t.Errorf("%s has no org.opencontainers.image.version label", tt.image)
			}
		}
	})

	t.Run("tools for setup scripts", func(t *testing.T) {
		// What setup scripts and the local sandbox use: bash, git, CA certificates; and
		// the binary is static (CGO_ENABLED=0).
		script := `set -e; bash --version | head -1; git --version; test -s /etc/ssl/certs/ca-certificates.crt
ldd /usr/local/bin/talkops 2>&1 | grep -q "not a dynamic executable"`
		if out, err := docker(t, "run", "--rm", "--network", "none", "--entrypoint", "bash", img, "-c", script); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})

	t.Run("GitLab and Jenkins override the entrypoint", func(t *testing.T) {
		// GitLab: image.entrypoint [""] then its own shell; Jenkins: --entrypoint= and a
		// user of its own.
		out, err := docker(t, "run", "--rm", "--network", "none", "--entrypoint", "", "--user", "1234:1234", img,
			"sh", "-c", "exec talkops version")
		if err != nil || !strings.HasPrefix(out, "talkops ") {
			t.Errorf("talkops version with the entrypoint overridden: %q, %v", out, err)
		}
	})

	t.Run("non-root variant", func(t *testing.T) {
		out, err := docker(t, "run", "--rm", "--network", "none", "--entrypoint", "sh", nonroot, "-c", "id -u; id -g; touch /workspace/x && echo writable")
		if want := "10001\n10001\nwritable\n"; err != nil || out != want {
			t.Errorf("non-root image: %q, %v; want %q", out, err, want)
		}
	})

	t.Run("SIGTERM reaches talkops", func(t *testing.T) {
		signalTest(t, img)
	})
}

// signalTest runs a rubric whose check sleeps, stops the container (SIGTERM, as
// GitLab and Jenkins do on cancel) and expects talkops, behind tini, to tear down and
// exit 143 well before docker's kill timeout, with result.json saying so.
func signalTest(t *testing.T, img string) {
	proj := t.TempDir()
	files := map[string]string{
		"rubric.toml": "name = \"slow\"\n\n[[check]]\nid = \"slow\"\ntitle = \"sleeps\"\nrun = [\"sleep\", \"120\"]\ntimeout = \"5m\"\n",
		"README.md":   "slow\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(proj, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	user := strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
	id, err := docker(t, "run", "-d", "--network", "none", "--user", user,
		"-e", "HOME=/tmp", "-e", "XDG_STATE_HOME=/tmp/state",
		"-v", proj+":/workspace", img,
		"run", "--rubric", "rubric.toml", "--sandbox", "local", "--report-dir", "/workspace/out")
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(id)
	t.Cleanup(func() { _ = exec.Command("docker", "rm", "-f", id).Run() }) // t.Context() is done by now

	// Wait until the check is running: result.json exists and records the rubric stage.
	resultPath := filepath.Join(proj, "out", "result.json")
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(resultPath)
		if err == nil && bytes.Contains(data, []byte(`"rubric"`)) {
			break
		}
		if time.Now().After(deadline) {
			logs, _ := docker(t, "logs", id)
			t.Fatalf("the check never started (result.json: %v); logs:\n%s", err, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	if _, err := docker(t, "stop", "--time", "30", id); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	out, err := docker(t, "inspect", "--format", "{{.State.ExitCode}}", id)
	if err != nil {
		t.Fatal(err)
	}
	if code := strings.TrimSpace(out); code != "143" {
		logs, _ := docker(t, "logs", id)
		t.Fatalf("container exit code %s after docker stop (%s), want 143 (talkops after SIGTERM); logs:\n%s", code, took, logs)
	}
	// Exit 143 is talkops's own answer to SIGTERM; had the signal not reached it, docker
	// would have killed it after 30 s and the code would be 137.
	t.Logf("docker stop returned after %s", took)
	r, err := result.Read(resultPath)
	if err != nil {
		t.Fatalf("result.json after SIGTERM: %v", err)
	}
	if r.ExitCode != 143 || r.Interrupted != "SIGTERM" {
		t.Errorf("result.json: exit_code %d, interrupted %q; want 143, SIGTERM", r.ExitCode, r.Interrupted)
	}
}
