package faulttest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/talkops/talkops/result"
)

// loadRuns is how many talkops processes TestLoad starts at once per provider.
const loadRuns = 20

// loadRun is one run of the load test.
type loadRun struct {
	n      int
	want   int
	code   int
	peakKB int64
	took   time.Duration
	runID  string
	err    []string
}

// TestLoad starts 20 talkops processes at once on one machine, per provider (docker and
// bwrap with a checks-only rubric, and docker with the scripted agent as well): every run
// must end with its own verdict (even runs pass, odd runs fail), leave no sandbox, state
// entry or process behind, and its peak RSS (getrusage ru_maxrss) is reported.
//
//	go test ./faulttest -run Load -v
//
// TALKOPS_LOAD_TABLE=FILE also writes the table to FILE.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 60 talkops processes; skipped with -short")
	}
	talkopsBin(t)
	var (
		mu    sync.Mutex
		lines []string
	)
	for _, tc := range []struct {
		provider string
		agent    bool
	}{{pBwrap, false}, {pDocker, false}, {pDocker, true}} {
		name := tc.provider + "/checks"
		if tc.agent {
			name = tc.provider + "/agent+checks"
		}
		t.Run(name, func(t *testing.T) {
			line := runLoad(t, tc.provider, tc.agent)
			mu.Lock()
			lines = append(lines, "| "+name+" "+line)
			mu.Unlock()
		})
	}
	table := "| provider / rubric | runs | wall time | exit codes as expected | leaked | peak RSS per run (min / median / max) |\n|---|---|---|---|---|---|\n" +
		strings.Join(lines, "\n") + "\n"
	t.Logf("load (%d simultaneous runs per row):\n%s", loadRuns, table)
	if path := os.Getenv("TALKOPS_LOAD_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Errorf("write the load table: %v", err)
		}
	}
}

// runLoad runs loadRuns simultaneous runs and returns the rest of its table row.
func runLoad(t *testing.T, provider string, agent bool) string {
	marker := newMarker()
	var model *scriptedModel
	if agent {
		model = newScriptedModel(t, scriptOptions{command: "echo agent-ran " + marker})
	}
	type prepared struct {
		root, dir string
		env       map[string]string
		args      []string
		tg        *target
	}
	runs := make([]*loadRun, loadRuns)
	preps := make([]prepared, loadRuns)
	for i := range loadRuns {
		root := t.TempDir()
		tg := newTarget(t, provider, root, "")
		c2 := "test -f README.md"
		want := 0
		if i%2 == 1 {
			c2, want = "echo not satisfied >&2; exit 1", 1
		}
		dir := filepath.Join(root, "project")
		files := map[string]string{
			"README.md": "# load\n",
			"r.toml":    fmt.Sprintf("name = \"load\"\n[[check]]\nid = \"c1\"\nrun = \"true\"\n[[check]]\nid = \"c2\"\nrun = %q\n", c2),
		}
		writeFiles(t, dir, files)
		for _, d := range []string{filepath.Join(dir, ".git"), filepath.Join(root, "home"), filepath.Join(root, "tmp")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		env := hermeticEnv(root, marker)
		for k, v := range tg.env {
			env[k] = v
		}
		args := []string{"--sandbox", provider, "--rubric", "r.toml", "-q", "--report-dir", filepath.Join(root, "report")}
		if agent {
			env["ANTHROPIC_API_KEY"] = modelKey
			args = append(args, "-p", "Run the task.", "-y", "--model", "anthropic:claude-test", "--base-url", model.URL)
		}
		runs[i] = &loadRun{n: i, want: want}
		preps[i] = prepared{root: root, dir: dir, env: env, args: args, tg: tg}
	}

	start := time.Now()
	var wg sync.WaitGroup
	for i := range loadRuns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, pr := runs[i], preps[i]
			began := time.Now()
			p := startTalkops(t, pr.dir, pr.env, pr.args...)
			code, ok := p.wait(3 * time.Minute)
			r.code, r.peakKB, r.took, r.runID = code, p.peakKB, time.Since(began), readRunID(pr.root)
			if !ok {
				r.err = append(r.err, "did not exit within 3 minutes")
			}
			if code != r.want {
				r.err = append(r.err, fmt.Sprintf("exit %d, want %d\nstderr:\n%s", code, r.want, tail(p.stderr.String())))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)

	leaked := 0
	var peaks []int64
	for i, r := range runs {
		pr := preps[i]
		if alive := pr.tg.alive(t, r.runID, 0); len(alive) > 0 {
			leaked += len(alive)
			r.err = append(r.err, fmt.Sprintf("sandboxes left: %v", alive))
		}
		if st := stateIDs(t, pr.root, ""); len(st) > 0 {
			r.err = append(r.err, fmt.Sprintf("state entries left: %v", st))
		}
		if res, err := result.Read(filepath.Join(pr.root, "report", "result.json")); err != nil {
			r.err = append(r.err, fmt.Sprintf("result.json: %v", err))
		} else if res.ExitCode != r.want {
			r.err = append(r.err, fmt.Sprintf("result.json exit_code %d, want %d (%s)", res.ExitCode, r.want, res.Reason))
		}
		for _, e := range r.err {
			t.Errorf("run %d: %s", r.n, e)
		}
		peaks = append(peaks, r.peakKB)
	}
	if left := waitNoLeftovers(marker, "", 5*time.Second); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	slices.Sort(peaks)
	ok := 0
	for _, r := range runs {
		if r.code == r.want {
			ok++
		}
	}
	mib := func(kb int64) string { return strconv.FormatFloat(float64(kb)/1024, 'f', 1, 64) }
	return fmt.Sprintf("| %d | %.1f s | %d / %d | %d | %s / %s / %s MiB |",
		loadRuns, wall.Seconds(), ok, loadRuns, leaked, mib(peaks[0]), mib(peaks[len(peaks)/2]), mib(peaks[len(peaks)-1]))
}

// readRunID returns the run id recorded in root's result.json ("" if there is none).
func readRunID(root string) string {
	res, err := result.Read(filepath.Join(root, "report", "result.json"))
	if err != nil {
		return ""
	}
	return res.Run.ID
}
