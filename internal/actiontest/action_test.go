package actiontest_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	passRubric = "name = \"act\"\n\n[[check]]\nid = \"readme\"\ntitle = \"README exists\"\nrun = [\"test\", \"-s\", \"README.md\"]\n"
	failRubric = "name = \"act\"\n\n[[check]]\nid = \"missing\"\ntitle = \"a file that is not there\"\nrun = [\"test\", \"-s\", \"MISSING.md\"]\n"
	// slowRubric's check runs until the test stops it; checkRunning looks for "sleep 317".
	slowRubric = "name = \"act\"\n\n[[check]]\nid = \"slow\"\ntitle = \"sleeps\"\nrun = [\"sleep\", \"317\"]\ntimeout = \"10m\"\n"
)

type resultFile struct {
	Verdict     string `json:"verdict"`
	ExitCode    int    `json:"exit_code"`
	Interrupted string `json:"interrupted"`
	Run         struct {
		ID       string `json:"id"`
		Provider string `json:"provider"`
	} `json:"run"`
}

// TestActionUnderAct runs the action with a checks-only rubric through act: its outputs,
// the step summary, annotations, and talkops's exit code as the step's.
func TestActionUnderAct(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		rubric      string
		inputs      map[string]string
		wantOutcome string
		wantRecord  map[string]string
		wantLog     []string // each in act's log
	}{
		{
			name:        "pass",
			rubric:      passRubric,
			inputs:      map[string]string{"report-dir": "out"},
			wantOutcome: "success",
			wantRecord:  map[string]string{"VERDICT": "pass", "SCORE": "1", "EXIT_CODE": "0"},
			wantLog: []string{
				"Verified sha256",                 // install.sh checked the download
				"Summary - ### ✅ talkops · act",   // the step summary
				"talkops exited with code 0",      // main.js
				"talkops sandbox gc --run-id=gh-", // post.js sweeps the run
				"0 deleted, 0 failed",             // a finished run leaves nothing
			},
		},
		{
			name:        "a failed rubric fails the step with exit code 1 and an annotation",
			rubric:      failRubric,
			inputs:      map[string]string{"report-dir": "out"},
			wantOutcome: "failure",
			wantRecord:  map[string]string{"VERDICT": "fail", "SCORE": "0", "EXIT_CODE": "1"},
			wantLog:     []string{"::error", "a file that is not there", "talkops exited with code 1"},
		},
		{
			name:        "a usage error is exit code 2",
			rubric:      passRubric,
			inputs:      map[string]string{"extra-args": "--no-such-flag"},
			wantOutcome: "failure",
			wantLog:     []string{"--no-such-flag", "talkops exited with code 2"},
		},
		{
			name:        "an input value is one argument, never shell",
			rubric:      passRubric,
			inputs:      map[string]string{"sandbox-setup": "setup.sh; touch INJECTED"},
			wantOutcome: "failure",
			wantLog:     []string{"setup.sh; touch INJECTED", "talkops exited with code 2"},
		},
		{
			name:        "a bad switch value stops before talkops",
			rubric:      passRubric,
			inputs:      map[string]string{"advisory": "yes"},
			wantOutcome: "failure",
			wantLog:     []string{`the input advisory (--advisory) must be true or false, got "yes"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inputs := map[string]string{"rubric": "rubric.toml"}
			for k, v := range tt.inputs {
				inputs[k] = v
			}
			j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": tt.rubric}, inputs)
			run := j.run(t)
			if got := run.record["OUTCOME"]; got != tt.wantOutcome {
				t.Errorf("step outcome %q, want %q\n%s", got, tt.wantOutcome, run.log)
			}
			for k, want := range tt.wantRecord {
				if got := run.record[k]; got != want {
					t.Errorf("output %s = %q, want %q", k, got, want)
				}
			}
			for _, want := range tt.wantLog {
				if !strings.Contains(run.log, want) {
					t.Errorf("act's log does not contain %q:\n%s", want, run.log)
				}
			}
			if _, err := os.Stat(filepath.Join(j.project(), "INJECTED")); err == nil {
				t.Error("an input value ran as shell code")
			}
			if tt.wantRecord == nil {
				return
			}
			want := filepath.Join(j.project(), "out", "result.json")
			if run.record["RESULT_JSON"] != want {
				t.Errorf("output result-json = %q, want %q", run.record["RESULT_JSON"], want)
			}
			if !strings.HasPrefix(run.record["SUMMARY"], tt.wantRecord["VERDICT"]+":") {
				t.Errorf("output summary = %q", run.record["SUMMARY"])
			}
			if _, err := os.Stat(run.record["SUMMARY_PATH"]); err != nil {
				t.Errorf("output summary-path: %v", err)
			}
			var r resultFile
			readJSON(t, want, &r)
			if r.Verdict != tt.wantRecord["VERDICT"] || !strings.HasPrefix(r.Run.ID, "gh-") {
				t.Errorf("result.json verdict %q run.id %q, want %s and the action's gh- run id", r.Verdict, r.Run.ID, tt.wantRecord["VERDICT"])
			}
		})
	}
}

// TestActionPostReapsOnlyItsRun SIGKILLs the action's talkops mid-run, as the runner does
// when its cancel window runs out, leaving a bwrap sandbox behind. The post step must
// delete it, and keep the sandboxes of two other runs on the same runner: one whose
// talkops still runs, and one whose talkops was SIGKILLed too (gc without --run-id
// would delete that one).
func TestActionPostReapsOnlyItsRun(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": slowRubric},
		map[string]string{"rubric": "rubric.toml", "sandbox": "bwrap", "report-dir": "out"})
	_, bin := release(t)

	others := map[string]*exec.Cmd{}
	t.Cleanup(func() {
		for _, cmd := range others {
			_ = cmd.Process.Signal(syscall.SIGTERM) // the live one tears its sandbox down
			_ = cmd.Wait()
		}
		j.talkops(t, "sandbox", "gc", "--provider=bwrap", "--older-than=0s", "--run-id=other-orphan")
	})
	for _, id := range []string{"other-live", "other-orphan"} {
		cmd := talkopsCmd(bin, j, "run", "--sandbox=bwrap", "--rubric=rubric.toml", "--run-id="+id, "--report-dir=other-"+id)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		others[id] = cmd
		j.waitSandbox(t, id)
	}
	if err := others["other-orphan"].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	cmd, log := j.start(t)
	mine := j.waitSandbox(t, "gh-")
	if err := syscall.Kill(mine.OwnerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	run := j.wait(t, cmd, log)
	t.Logf("act finished %s after the SIGKILL", time.Since(killed).Round(time.Millisecond))

	checkReapedAfterKill(t, j, run, mine)
	for _, id := range []string{"other-live", "other-orphan"} {
		if got := j.sandboxes(t, id); len(got) != 1 {
			t.Errorf("the post step touched run %s's sandbox: %+v", id, got)
		}
	}
}

// checkReapedAfterKill: the step of a talkops that was SIGKILLed fails with 137, and the
// post step deletes the run's sandbox with sandbox gc for that run id alone.
func checkReapedAfterKill(t *testing.T, j *actJob, run actRun, mine sandboxEntry) {
	t.Helper()
	if run.record["OUTCOME"] != "failure" || run.record["EXIT_CODE"] != "137" {
		t.Errorf("step outcome %q exit-code %q, want failure and 137 (SIGKILL)\n%s", run.record["OUTCOME"], run.record["EXIT_CODE"], run.log)
	}
	for _, want := range []string{
		"talkops was killed by SIGKILL",
		"talkops sandbox gc --run-id=" + mine.RunID + " --older-than=0s\n",
		"1 deleted, 0 failed",
	} {
		if !strings.Contains(run.log, want) {
			t.Errorf("act's log does not contain %q:\n%s", want, run.log)
		}
	}
	if left := j.sandboxes(t, mine.RunID); len(left) != 0 {
		t.Errorf("the run's bwrap sandbox is still there after the post step: %+v\n%s", left, run.log)
	}
}

// TestActionPostReapsExtraArgsSandbox: the sandbox input is left at its default (local)
// and extra-args asks for --sandbox=bwrap, which overrides it for the run. talkops is
// SIGKILLed mid-run; the post step must still delete the bwrap sandbox the run left.
func TestActionPostReapsExtraArgsSandbox(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": slowRubric},
		map[string]string{"rubric": "rubric.toml", "report-dir": "out", "extra-args": "--sandbox=bwrap"})
	delete(j.env, "TALKOPS_TEST_SANDBOX") // the input's default
	cmd, log := j.start(t)
	mine := j.waitSandbox(t, "gh-")
	if err := syscall.Kill(mine.OwnerPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	run := j.wait(t, cmd, log)
	checkReapedAfterKill(t, j, run, mine)
}

// TestActionRefusesExtraArgs: extra-args cannot set the run id the post step reaps by, end
// the flags before the action's own, or let the repository's config pick the sandbox
// (a bare --sandbox). main.js stops with a usage error naming the line before it
// installs or runs anything.
func TestActionRefusesExtraArgs(t *testing.T) {
	t.Parallel()
	node := need(t, "node", "apt-get install nodejs")
	for _, tc := range []struct{ extra, want string }{
		{"--run-id=mine", "extra-args: --run-id=mine: the action sets the run id"},
		{"--log-level=debug\n--run-id\nmine", "extra-args: --run-id: the action sets the run id"},
		{"--", "extra-args: --: the action adds flags after extra-args"},
		{"--sandbox", "extra-args: --sandbox: a bare --sandbox lets the repository's config choose the sandbox; set the sandbox input"},
	} {
		t.Run(tc.extra, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			state := filepath.Join(dir, "state")
			main := exec.Command(node, filepath.Join(repoRoot(t), ".github", "action", "main.js"))
			main.Env = append(os.Environ(), "INPUT_EXTRA-ARGS="+tc.extra, "INPUT_VERSION=v0.0.0-none", "TALKOPS_RELEASE_URL=http://127.0.0.1:1",
				"GITHUB_STATE="+state, "GITHUB_OUTPUT="+filepath.Join(dir, "output"))
			out, err := main.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("main.js: %v, want exit 2\n%s", err, out)
			}
			if want := "::error title=talkops::" + tc.want; !strings.Contains(string(out), want) {
				t.Errorf("main.js output does not contain %q:\n%s", want, out)
			}
			if _, err := os.Stat(state); !os.IsNotExist(err) {
				t.Errorf("main.js saved step state (%v): it must stop before the run starts", err)
			}
		})
	}
}

// TestPostReapsTheProviderTheRunRecorded runs post.js on its own after a run that used
// another provider than the state names (bwrap, while the step state says local): however
// the run came to its provider, the post step reaps by the run's ledger entries.
func TestPostReapsTheProviderTheRunRecorded(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	node := need(t, "node", "apt-get install nodejs")
	j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": slowRubric}, nil)
	_, bin := release(t)
	talkops := talkopsCmd(bin, j, "run", "--sandbox=bwrap", "--rubric=rubric.toml", "--run-id=recorded", "--report-dir=out")
	if err := talkops.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = talkops.Process.Kill() })
	j.waitSandbox(t, "recorded")
	if err := talkops.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = talkops.Wait()

	post := exec.Command(node, filepath.Join(repoRoot(t), ".github", "action", "post.js"))
	post.Env = append(os.Environ(), "XDG_STATE_HOME="+j.state, "STATE_run_id=recorded", "STATE_bin="+bin,
		"STATE_sandbox=local", "STATE_pid="+strconv.Itoa(talkops.Process.Pid))
	out, err := post.CombinedOutput()
	if err != nil {
		t.Fatalf("post.js: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "1 deleted, 0 failed") {
		t.Errorf("post.js did not delete the run's sandbox:\n%s", out)
	}
	if left := j.sandboxes(t, "recorded"); len(left) != 0 {
		t.Errorf("sandbox left: %+v\n%s", left, out)
	}
}

// TestActionForwardsSignals sends SIGTERM (and SIGINT) to the action's node process, as
// the runner does when a job is cancelled: talkops gets it at once, tears its sandbox
// down and exits 143 (130), and the step's exit code is talkops's.
func TestActionForwardsSignals(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGTERM, "SIGTERM", 143}, {syscall.SIGINT, "SIGINT", 130}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": slowRubric},
				map[string]string{"rubric": "rubric.toml", "sandbox": "bwrap", "report-dir": "out"})
			cmd, log := j.start(t)
			mine := j.waitSandbox(t, "gh-")
			node := ppid(strconv.Itoa(mine.OwnerPID))
			if !strings.Contains(cmdline(node), ".github/action/main.js") {
				t.Fatalf("talkops's parent %s is %q, not the action's main.js", node, cmdline(node))
			}
			pid, _ := strconv.Atoi(node)
			sent := time.Now()
			if err := syscall.Kill(pid, tc.sig); err != nil {
				t.Fatal(err)
			}
			run := j.wait(t, cmd, log)
			t.Logf("act finished %s after the %s", time.Since(sent).Round(time.Millisecond), tc.name)

			code := strconv.Itoa(tc.code)
			if run.record["OUTCOME"] != "failure" || run.record["EXIT_CODE"] != code {
				t.Errorf("step outcome %q exit-code %q, want failure and %s\n%s", run.record["OUTCOME"], run.record["EXIT_CODE"], code, run.log)
			}
			if want := "talkops exited with code " + code + " after " + tc.name; !strings.Contains(run.log, want) {
				t.Errorf("act's log does not contain %q:\n%s", want, run.log)
			}
			var r resultFile
			readJSON(t, filepath.Join(j.project(), "out", "result.json"), &r)
			if r.Interrupted != tc.name || r.ExitCode != tc.code {
				t.Errorf("result.json interrupted %q exit %d, want %s %d", r.Interrupted, r.ExitCode, tc.name, tc.code)
			}
			// talkops's own teardown deleted the sandbox; the post step found nothing left.
			if !strings.Contains(run.log, "0 deleted, 0 failed") {
				t.Errorf("the post step should find nothing to delete after talkops's own teardown:\n%s", run.log)
			}
			if left := j.sandboxes(t, mine.RunID); len(left) != 0 {
				t.Errorf("sandbox left after %s: %+v", tc.name, left)
			}
		})
	}
}

// TestActionCancelUnderAct cancels the job the way act does it (SIGINT to act). act stops
// the running step by killing the node process with SIGKILL (exec.CommandContext), so
// main.js cannot forward anything; talkops, in the killed node's terminal session, ends
// without its teardown. Whatever is left, the post step must leave no sandbox and no
// talkops behind.
func TestActionCancelUnderAct(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": slowRubric},
		map[string]string{"rubric": "rubric.toml", "sandbox": "bwrap", "report-dir": "out"})
	cmd, log := j.start(t)
	mine := j.waitSandbox(t, "gh-")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	run := j.wait(t, cmd, log)
	if run.record["OUTCOME"] != "failure" {
		t.Errorf("step outcome %q after the cancel, want failure\n%s", run.record["OUTCOME"], run.log)
	}
	if !strings.Contains(run.log, "talkops sandbox gc --run-id="+mine.RunID) {
		t.Errorf("the post step did not run after the cancel:\n%s", run.log)
	}
	for _, line := range strings.Split(run.log, "\n") {
		if strings.Contains(line, "still runs after") || strings.Contains(line, " deleted, ") {
			t.Log(line) // which way the post step found things
		}
	}
	if alive(mine.OwnerPID) {
		t.Errorf("talkops (pid %d) still runs after the job\n%s", mine.OwnerPID, run.log)
	}
	if left := j.sandboxes(t, mine.RunID); len(left) != 0 {
		t.Errorf("sandbox left after the cancel: %+v\n%s", left, run.log)
	}
}

// TestPostStopsLeftoverTalkops runs post.js on its own, with the state the main step
// saves, while the talkops it names still runs: the situation of a main step killed
// before it could forward a signal (act cannot produce it: there talkops ends with the
// killed node's terminal session). post.js must stop talkops with SIGTERM, let it tear down, and sweep.
func TestPostStopsLeftoverTalkops(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	node := need(t, "node", "apt-get install nodejs")
	j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": slowRubric}, nil)
	_, bin := release(t)
	talkops := talkopsCmd(bin, j, "run", "--sandbox=bwrap", "--rubric=rubric.toml", "--run-id=leftover", "--report-dir=out")
	if err := talkops.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- talkops.Wait() }()
	t.Cleanup(func() { _ = talkops.Process.Kill() })
	j.waitSandbox(t, "leftover")

	post := exec.Command(node, filepath.Join(repoRoot(t), ".github", "action", "post.js"))
	post.Env = append(os.Environ(), "XDG_STATE_HOME="+j.state, "STATE_run_id=leftover", "STATE_bin="+bin,
		"STATE_sandbox=bwrap", "STATE_pid="+strconv.Itoa(talkops.Process.Pid))
	out, err := post.CombinedOutput()
	if err != nil {
		t.Fatalf("post.js: %v\n%s", err, out)
	}
	for _, want := range []string{"still runs after the main step ended; sending SIGTERM", "talkops sandbox gc --run-id=leftover", "0 deleted, 0 failed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("post.js output does not contain %q:\n%s", want, out)
		}
	}
	select {
	case err := <-exited:
		t.Logf("talkops: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("talkops still runs after post.js")
	}
	if code := talkops.ProcessState.ExitCode(); code != 143 {
		t.Errorf("talkops exited %d, want 143 (its own SIGTERM teardown)", code)
	}
	if left := j.sandboxes(t, "leftover"); len(left) != 0 {
		t.Errorf("sandbox left: %+v", left)
	}
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// TestActionDecidesTrustedSettings commits a .talkops/config.toml that asks for another
// sandbox, auto-approval and an attacker's model endpoint, as a pull request can. The
// action passes the sandbox, the base URL and the approval mode explicitly, so the run
// uses the workflow's values; result.json records each value with its source.
func TestActionDecidesTrustedSettings(t *testing.T) {
	t.Parallel()
	const projectConfig = "[sandboxes]\ndefault = \"docker\"\n\n[approval]\nmode = \"yes\"\n\n[model]\nbase_url = \"http://192.0.2.1/v1\"\n"
	tests := []struct {
		name   string
		inputs map[string]string
		want   map[string][2]string // key -> value, source
	}{
		{
			name:   "defaults",
			inputs: map[string]string{},
			want: map[string][2]string{
				"sandboxes.default": {"local", "flag --sandbox"},
				"approval.mode":     {"default", "env TALKOPS_APPROVAL_MODE"},
				"model.base_url":    {"", "flag --base-url"},
			},
		},
		{
			name:   "smart-approve",
			inputs: map[string]string{"smart-approve": "true"},
			want: map[string][2]string{
				"approval.mode": {"smart", "flag --smart"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inputs := map[string]string{"rubric": "rubric.toml", "report-dir": "out"}
			for k, v := range tt.inputs {
				inputs[k] = v
			}
			j := newActJob(t, map[string]string{"README.md": "a project\n", "rubric.toml": passRubric, ".talkops/config.toml": projectConfig}, inputs)
			run := j.run(t)
			if run.record["EXIT_CODE"] == "2" && strings.Contains(run.log, ".talkops/config.toml") {
				// talkops itself refuses trusted-only keys in the project file: the
				// repository decides nothing either way.
				return
			}
			if run.record["OUTCOME"] != "success" {
				t.Fatalf("step outcome %q exit-code %q, want success\n%s", run.record["OUTCOME"], run.record["EXIT_CODE"], run.log)
			}
			var r struct {
				Config []struct{ Key, Value, Source string } `json:"config"`
			}
			readJSON(t, run.record["RESULT_JSON"], &r)
			got := map[string][2]string{}
			for _, c := range r.Config {
				got[c.Key] = [2]string{c.Value, c.Source}
			}
			for key, want := range tt.want {
				if got[key] != want {
					t.Errorf("%s = %q from %q, want %q from %q", key, got[key][0], got[key][1], want[0], want[1])
				}
			}
		})
	}
}
