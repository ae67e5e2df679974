package actiontest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The action under a real Actions runner: nektos/act in host mode runs
// testdata/action-test.yml, whose `uses: ./` step is this repository's action.yml, with
// the talkops binary built from this checkout and served as release v0.0.0-test (so
// install.sh's download and checksum path runs too).

const actVersion = "v0.2.89" // go install github.com/nektos/act@v0.2.89 (.ci/run)

const testVersion = "v0.0.0-test"

var (
	releaseOnce sync.Once
	releaseDir  string // holds releaseBin; removed after the tests
	releaseURL  string
	releaseBin  string // the talkops binary, for the tests' own calls
	releaseErr  error
	releaseSrv  *httptest.Server
)

// TestMain stops the release server and removes the binary built for it.
func TestMain(m *testing.M) {
	code := m.Run()
	if releaseSrv != nil {
		releaseSrv.Close()
	}
	if releaseDir != "" {
		_ = os.RemoveAll(releaseDir)
	}
	os.Exit(code)
}

// release builds talkops from this checkout once and serves it, GitHub-release-shaped,
// on 127.0.0.1.
func release(t *testing.T) (url, bin string) {
	t.Helper()
	root := repoRoot(t)
	releaseOnce.Do(func() {
		dir, err := os.MkdirTemp("", "talkops-release-")
		if err != nil {
			releaseErr = err
			return
		}
		releaseDir = dir
		releaseBin = filepath.Join(dir, "talkops")
		build := exec.Command("go", "build", "-o", releaseBin, "./cmd/talkops")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			releaseErr = fmt.Errorf("go build ./cmd/talkops: %w\n%s", err, out)
			return
		}
		exe, err := os.ReadFile(releaseBin)
		if err != nil {
			releaseErr = err
			return
		}
		name := fmt.Sprintf("talkops_%s_linux_%s.tar.gz", strings.TrimPrefix(testVersion, "v"), runtime.GOARCH)
		archive := tarGz(t, map[string]string{"talkops": string(exe)})
		sum := sha256.Sum256(archive)
		files := map[string][]byte{
			"/download/" + testVersion + "/" + name:       archive,
			"/download/" + testVersion + "/checksums.txt": []byte(hex.EncodeToString(sum[:]) + "  " + name + "\n"),
		}
		releaseSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, ok := files[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			_, _ = w.Write(body)
		}))
		releaseURL = releaseSrv.URL
	})
	if releaseErr != nil {
		t.Fatal(releaseErr)
	}
	return releaseURL, releaseBin
}

// actBinary finds act on PATH or in GOPATH/bin; CI=true makes a missing act a failure.
func actBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("act"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "act")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return need(t, "act", "go install github.com/nektos/act@"+actVersion)
}

// needBwrap skips (fails under CI=true) when bubblewrap cannot create its namespaces.
func needBwrap(t *testing.T) {
	t.Helper()
	if err := exec.Command("bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap does not work here and CI=true: %v", err)
		}
		t.Skipf("bubblewrap does not work here: %v", err)
	}
}

// actJob is one act run of testdata/action-test.yml.
type actJob struct {
	env   map[string]string // --env values: the TALKOPS_TEST_* inputs and anything else
	state string            // XDG_STATE_HOME: talkops's sandbox ledger
	dir   string
}

// newActJob prepares a job whose project (the action's working-directory) holds files.
func newActJob(t *testing.T, files map[string]string, inputs map[string]string) *actJob {
	t.Helper()
	url, _ := release(t)
	dir := t.TempDir()
	proj := filepath.Join(dir, "project")
	for name, content := range files {
		p := filepath.Join(proj, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := &actJob{dir: dir, state: filepath.Join(dir, "state"), env: map[string]string{
		"TALKOPS_TEST_REPO":    repoRoot(t),
		"TALKOPS_TEST_VERSION": testVersion,
		"TALKOPS_RELEASE_URL":  url,
		"TALKOPS_TEST_PROJECT": proj,
		"TALKOPS_TEST_RECORD":  filepath.Join(dir, "record"),
		"TALKOPS_TEST_SANDBOX": "local",
	}}
	j.env["XDG_STATE_HOME"] = j.state
	for k, v := range inputs {
		j.env["TALKOPS_TEST_"+strings.ToUpper(strings.ReplaceAll(k, "-", "_"))] = v
	}
	return j
}

func (j *actJob) project() string { return j.env["TALKOPS_TEST_PROJECT"] }

// actRun is what one act run left: the recorded outcome and outputs of the action's step,
// and act's log (every step's output, annotations, summaries, the post step).
type actRun struct {
	record map[string]string
	log    string
}

// start starts act; wait collects its result.
func (j *actJob) start(t *testing.T) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	act := actBinary(t)
	root := repoRoot(t)
	args := []string{"workflow_dispatch", "-W", filepath.Join(root, "internal", "actiontest", "testdata", "action-test.yml"),
		"-C", root, "-P", "ubuntu-latest=-self-hosted"}
	for k, v := range j.env {
		args = append(args, "--env", k+"="+v)
	}
	cmd := exec.Command(act, args...)
	home := filepath.Join(j.dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	// act keeps its workspace and tool cache under HOME; one per job keeps them apart.
	cmd.Env = append(os.Environ(), "HOME="+home)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &log
}

func (j *actJob) wait(t *testing.T, cmd *exec.Cmd, log *bytes.Buffer) actRun {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Logf("act: %v", err) // a failed job; the record says how
		}
	case <-time.After(4 * time.Minute):
		_ = cmd.Process.Kill()
		if err := <-done; err != nil {
			t.Logf("act: %v", err)
		}
		t.Fatalf("act did not finish within 4 minutes:\n%s", log)
	}
	run := actRun{record: map[string]string{}, log: actLog(log.String())}
	data, err := os.ReadFile(j.env["TALKOPS_TEST_RECORD"])
	if err != nil {
		t.Fatalf("the workflow's record step did not run: %v\n%s", err, run.log)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			run.record[k] = v
		}
	}
	return run
}

func (j *actJob) run(t *testing.T) actRun {
	t.Helper()
	cmd, log := j.start(t)
	return j.wait(t, cmd, log)
}

// actLog drops act's repeated complaints that the checkout is not a plain git repository
// (a worktree), which say nothing about the action.
func actLog(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, "inside a git repository") || strings.Contains(line, "unable to get git") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// talkops runs the released binary with the job's ledger.
func (j *actJob) talkops(t *testing.T, args ...string) string {
	t.Helper()
	_, bin := release(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+j.state)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("talkops %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

type sandboxEntry struct {
	ID       string `json:"id"`
	RunID    string `json:"run_id"`
	OwnerPID int    `json:"owner_pid"`
	InLedger bool   `json:"in_ledger"`
}

// sandboxes lists the bwrap sandboxes in the job's ledger whose run id starts with prefix.
// The bwrap provider also lists other processes' sandboxes on this host (other tests'
// jobs, all with run ids gh-1-1-*), so only the ledger's entries count.
func (j *actJob) sandboxes(t *testing.T, prefix string) []sandboxEntry {
	t.Helper()
	var all, out []sandboxEntry
	if err := json.Unmarshal([]byte(j.talkops(t, "sandbox", "ls", "--json", "--provider", "bwrap")), &all); err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		if e.InLedger && strings.HasPrefix(e.RunID, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// waitSandbox waits until the action's talkops (run id gh-...) has its sandbox and runs
// the slow check in it, and returns the sandbox entry.
func (j *actJob) waitSandbox(t *testing.T, prefix string) sandboxEntry {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if got := j.sandboxes(t, prefix); len(got) == 1 && got[0].OwnerPID > 0 && checkRunning(got[0].OwnerPID) {
			return got[0]
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no sandbox for run %s* with its check running within 2 minutes", prefix)
	return sandboxEntry{}
}

// checkRunning reports whether talkops pid has a child running the slow rubric check
// (sleep), i.e. the run is past provisioning and inside its rubric stage.
func checkRunning(pid int) bool {
	out, err := exec.Command("pgrep", "-f", "sleep 317").Output()
	if err != nil {
		return false
	}
	for _, p := range strings.Fields(string(out)) {
		for anc := p; anc != "" && anc != "1" && anc != "0"; anc = ppid(anc) {
			if anc == fmt.Sprint(pid) {
				return true
			}
		}
	}
	return false
}

func ppid(pid string) string {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	// pid (comm) state ppid ...; comm may hold spaces, so split after the last ')'.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return ""
	}
	return fields[1]
}

func cmdline(pid string) string {
	data, _ := os.ReadFile("/proc/" + pid + "/cmdline")
	return strings.ReplaceAll(string(data), "\x00", " ")
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// talkopsCmd is the released binary run in the job's project with the job's ledger.
func talkopsCmd(bin string, j *actJob, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = j.project()
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+j.state)
	return cmd
}
