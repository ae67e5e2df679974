package faulttest

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/talkops/talkops/providers/httpapi/fakekit"
	"github.com/talkops/talkops/result"
)

// Stages a fault lands in. sFirstUse means wherever the run first makes the faulty call.
const (
	sProvision = "provision"
	sSync      = "sync"
	sSetup     = "setup"
	sCheck1    = "check 1"
	sCheck2    = "check 2"
	sTeardown  = "teardown"
	sPublish   = "publish"
	sFirstUse  = "first use"
	sStart     = "start"
	sAgentTurn = "agent turn"
	sAgentTool = "agent tool call"
	sJudge     = "judge"
	// sCleanCheck is a check running in the clean room, after an agent pass.
	sCleanCheck = "check in clean room"
)

// Faults.
const (
	fSIGINT  = "SIGINT"
	fSIGTERM = "SIGTERM"
	fSIGKILL = "SIGKILL, then gc"
	// fSIGKILLActed lands while the create's answer is held after the service made the
	// sandbox: the run never learns its id, only its pending ledger entry is left.
	fSIGKILLActed = "SIGKILL after the server acted, then gc"
	fCancel       = "hang, then GitHub's cancel (SIGINT, SIGTERM 2 s later)"
	f500          = "500 on every call"
	f503Once      = "503 once"
	f500Once      = "500 once"
	fHang         = "hang (no answer)"
	fDrop         = "connection dropped after the server acted"
	fInjected     = "injected error"
	fReportRO     = "report dir on a read-only mount"
	fReportGone   = "report dir replaced by a file mid-run"
	fReportFile   = "--report-dir under a regular file"
	fGitHub500    = "GitHub API 500 on every call"

	f429           = "429 on every call"
	f429Once       = "429 once"
	fDropAlways    = "connection dropped on every call"
	fDropOnce      = "connection dropped once"
	fStall         = "hang, stall watchdog 3 s"
	fMalformedArgs = "malformed tool-call arguments"
	fMalformedBody = "malformed response body"
	fNullBody      = "reply body is JSON null"
)

// row is one cell of the fault matrix.
type row struct {
	provider string
	stage    string
	fault    string
	op       string // the API operation a provider fault targets (create, upload, exec, delete)
	want     []int  // acceptable exit codes, the README's first
}

// weakness is a problem the matrix found in code this package does not own, reported to
// its owner. A row's problem that matches one is logged and shown in the table as KNOWN
// instead of failing the test; any other problem fails it.
type weakness struct {
	tag   string
	rows  func(row) bool
	match []string // substrings of the problem message
}

// W1–W9 were all fixed by their owners (see RELIABILITY.md); every row must pass. A new
// weakness that cannot be fixed at once is listed here with its tag and the rows it affects.
var weaknesses = []weakness{}

// knownWeakness returns the tag of the weakness that explains problem, if any.
func knownWeakness(r row, problem string) string {
	for _, w := range weaknesses {
		if !w.rows(r) {
			continue
		}
		for _, m := range w.match {
			if strings.Contains(problem, m) {
				return w.tag
			}
		}
	}
	return ""
}

func (r row) name() string {
	parts := []string{r.provider, r.stage}
	if r.op != "" {
		parts = append(parts, r.op)
	}
	parts = append(parts, r.fault)
	clean := strings.NewReplacer(" ", "_", "/", "_", ",", "", "(", "", ")", "", ":", "")
	for i, p := range parts {
		parts[i] = clean.Replace(p)
	}
	return strings.Join(parts, "/")
}

// outcome is what a row observed.
type outcome struct {
	row
	code        int
	result      string        // "ok", "stale (…)", "missing: stderr says …", or the problem
	hit         string        // the stage result.json marks interrupted, failed or timed out
	leaked      int           // sandboxes alive after talkops exited
	leftAfterGC int           // sandboxes alive after `talkops sandbox gc`
	procs       int           // processes left behind
	exitAfter   time.Duration // from the fault (or the start, for faults set up front) to the exit
	took        time.Duration
	problems    []string
	known       []string // tags of known weaknesses that explain problems
	failed      bool     // a problem no known weakness explains
}

func (o *outcome) problem(format string, args ...any) {
	o.problems = append(o.problems, fmt.Sprintf(format, args...))
}

// matrixRows builds the matrix: every signal at every stage each provider can be held
// in, the provider faults on every API operation of the fakes, report-dir faults and
// publish faults.
func matrixRows() []row {
	var rows []row
	signals := []string{fSIGINT, fSIGTERM, fSIGKILL}
	sig := func(p string, stages ...string) {
		for _, s := range stages {
			for _, f := range signals {
				rows = append(rows, row{provider: p, stage: s, fault: f, want: []int{signalWant(f)}})
			}
		}
	}
	// Stages that can be held open: provision and teardown through the fake's delays or a
	// held API call, sync through a held upload, setup and checks by a command that runs
	// until killed. local and bwrap create and delete instantly and bwrap's sync is a
	// local copy, so they have no provision, sync or teardown rows.
	sig(pFake, sProvision, sSetup, sCheck1, sCheck2, sTeardown)
	sig(pLocal, sSetup, sCheck1, sCheck2)
	sig(pBwrap, sSetup, sCheck1, sCheck2)
	sig(pDocker, sProvision, sSync, sSetup, sCheck1, sCheck2, sTeardown)
	sig(pDaytona, sProvision, sSync, sSetup, sCheck1, sCheck2, sTeardown)
	sig(pModal, sProvision, sSync, sSetup, sCheck1, sCheck2, sTeardown)
	for _, p := range []string{pVercel, pRunloop, pLangSmith} {
		sig(p, sProvision, sSync, sCheck2, sTeardown)
	}
	// The providers whose fakes can answer a create late, after making the sandbox.
	// Docker's containers carry owner labels, so its rows add nothing.
	for _, p := range []string{pDaytona, pModal, pVercel, pRunloop, pLangSmith} {
		rows = append(rows, row{provider: p, stage: sProvision, fault: fSIGKILLActed, want: []int{signalWant(fSIGKILL)}})
	}
	sig(pFake, sPublish)
	rows = append(rows, row{provider: pFake, stage: sPublish, fault: fGitHub500, want: []int{0}})

	// The agent and the judge: a signal while a model call is in flight, while the
	// agent's command runs in the sandbox, and while the judge is asked; then every model
	// fault on the agent's calls and the judge's.
	sig(pFake, sAgentTurn, sAgentTool, sJudge)
	sig(pLocal, sAgentTool)
	sig(pBwrap, sAgentTool)
	sig(pDocker, sAgentTurn, sAgentTool)
	// Clean-room verification: the check holds in the second sandbox; both go.
	for _, p := range []string{pFake, pLocal, pBwrap, pDocker} {
		sig(p, sCleanCheck)
	}
	for _, f := range []struct {
		fault string
		want  int
	}{{f429, 3}, {f429Once, 0}, {f500, 3}, {f500Once, 0}, {fDropAlways, 3}, {fDropOnce, 0},
		{fHang, 124}, {fStall, 124}, {fMalformedArgs, 0}, {fMalformedBody, 3}, {fNullBody, 3}} {
		rows = append(rows, row{provider: pFake, stage: sAgentTurn, op: opModel, fault: f.fault, want: []int{f.want}})
	}
	for _, f := range []struct {
		fault string
		want  int
	}{{f500, 3}, {fMalformedArgs, 3}, {fHang, 124}, {fNullBody, 3}} {
		rows = append(rows, row{provider: pFake, stage: sJudge, op: opJudge, fault: f.fault, want: []int{f.want}})
	}

	// The fake provider's own faults.
	for _, op := range []string{opCreate, opUpload, opExec, opDelete} {
		rows = append(rows, row{provider: pFake, stage: sFirstUse, op: op, fault: fInjected, want: []int{3}})
	}
	// API faults on every operation of the cloud fakes and the Docker engine.
	for _, p := range append([]string{pDocker, pModal}, cloudProviders...) {
		for _, op := range []string{opCreate, opUpload, opExec, opDelete} {
			rows = append(rows,
				row{provider: p, stage: sFirstUse, op: op, fault: f500, want: []int{3}},
				row{provider: p, stage: sFirstUse, op: op, fault: fDrop, want: []int{0, 3}},
			)
			if p != pDocker {
				rows = append(rows, row{provider: p, stage: sFirstUse, op: op, fault: f503Once, want: []int{0}})
			}
			if op == opDelete {
				rows = append(rows, row{provider: p, stage: sTeardown, op: op, fault: fCancel, want: []int{130}})
			} else {
				rows = append(rows, row{provider: p, stage: sFirstUse, op: op, fault: fHang, want: []int{124}})
			}
		}
		// README: a command is not re-sent after a 500, because it may have run; the
		// check it belonged to could not be evaluated, so the verdict is error. Runloop
		// is the exception: its command_id makes the retry safe; so is Modal, whose client
		// asks TaskExecPoll whether the exec exists before it sends it again.
		want := 3
		if p == pRunloop || p == pModal {
			want = 0
		}
		rows = append(rows, row{provider: p, stage: sCheck1, op: opExec, fault: f500Once, want: []int{want}})
	}
	// The report directory.
	for _, p := range []string{pLocal, pFake} {
		rows = append(rows,
			row{provider: p, stage: sStart, fault: fReportRO, want: []int{3}},
			row{provider: p, stage: sSetup, fault: fReportGone, want: []int{3}},
			row{provider: p, stage: sStart, fault: fReportFile, want: []int{2}},
		)
	}
	return rows
}

func signalWant(f string) int {
	switch f {
	case fSIGINT:
		return 130
	case fSIGTERM:
		return 143
	}
	return 128 + int(syscall.SIGKILL)
}

// TestMatrix runs the real talkops binary once per row and checks, after every fault:
// every sandbox created was deleted (or, after SIGKILL or a failed delete, reaped by
// `talkops sandbox gc`), result.json exists and validates against the schema (or stderr
// says exactly why it could not be written), the exit code is the README's, and no
// process of the run is left. It prints the matrix; RELIABILITY.md keeps the latest.
//
//	go test ./faulttest -run Matrix -v
//
// TALKOPS_FAULTTEST_PARALLEL bounds the rows run at once (default 4);
// TALKOPS_FAULTTEST_ONLY=substring runs only the rows whose name contains it;
// TALKOPS_MATRIX_TABLE=FILE also writes the table to FILE.
func TestMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault matrix runs the real binary a few hundred times; skipped with -short")
	}
	talkopsBin(t)
	rows := matrixRows()
	if only := os.Getenv("TALKOPS_FAULTTEST_ONLY"); only != "" {
		rows = slices.DeleteFunc(rows, func(r row) bool { return !strings.Contains(r.name(), only) })
	}
	parallel := 4
	if v, err := strconv.Atoi(os.Getenv("TALKOPS_FAULTTEST_PARALLEL")); err == nil && v > 0 {
		parallel = v
	}
	var (
		mu       sync.Mutex
		outcomes []*outcome
		wg       sync.WaitGroup
		sem      = make(chan struct{}, parallel)
	)
	start := time.Now()
	for _, r := range rows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			t.Run(r.name(), func(t *testing.T) {
				o := runRow(t, r)
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				for _, p := range o.problems {
					if tag := knownWeakness(r, p); tag != "" {
						o.known = append(o.known, tag)
						t.Logf("known weakness %s: %s", tag, p)
						continue
					}
					o.failed = true
					t.Error(p)
				}
			})
		}()
	}
	wg.Wait()
	table := matrixTable(outcomes, rows, time.Since(start), parallel)
	t.Logf("fault matrix (%d rows, %s):\n%s", len(outcomes), time.Since(start).Round(time.Second), table)
	if path := os.Getenv("TALKOPS_MATRIX_TABLE"); path != "" {
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			t.Errorf("write the matrix table: %v", err)
		}
	}
}

// rubricFor is a two-check rubric; the check the row interrupts runs until killed, and
// the check a 500 hits carries the marker in its command text.
func rubricFor(r row, marker string) string {
	c1, c2 := "true", "test -f README.md"
	switch {
	case r.fault == f500Once:
		c1 = "echo " + marker + "-c1"
	case r.stage == sCheck1 || r.stage == sCleanCheck:
		c1 = loopCmd(marker)
	case r.stage == sCheck2:
		c2 = loopCmd(marker)
	}
	rb := fmt.Sprintf("name = \"matrix\"\n[[check]]\nid = \"c1\"\nrun = %q\ntimeout = \"2m\"\n[[check]]\nid = \"c2\"\nrun = %q\ntimeout = \"2m\"\n", c1, c2)
	if r.stage == sJudge {
		rb += "[[criterion]]\nid = \"crit\"\nquestion = \"Did the agent run its command?\"\n"
	}
	return rb
}

// agentic reports whether the row runs the agent (and so a model).
func (r row) agentic() bool {
	return r.op == opModel || r.op == opJudge || r.stage == sAgentTurn || r.stage == sAgentTool || r.stage == sJudge ||
		r.stage == sCleanCheck
}

// runRow runs one row and reports what it observed.
func runRow(t *testing.T, r row) *outcome {
	o := &outcome{row: r}
	began := time.Now()
	defer func() { o.took = time.Since(began) }()

	root := t.TempDir()
	marker := newMarker()
	fakeFaults := ""
	if r.provider == pFake {
		switch {
		case r.stage == sProvision:
			fakeFaults = "create-delay=30s"
		case r.stage == sTeardown:
			fakeFaults = "close-delay=3s"
		case r.fault == fInjected:
			fakeFaults = map[string]string{opCreate: "create=error", opUpload: "upload-fail=1", opExec: "exec-fail=1", opDelete: "close-fail=100"}[r.op]
		}
	}
	tg := newTarget(t, r.provider, root, fakeFaults)

	files := map[string]string{
		"README.md": "# matrix\n",
		"r.toml":    rubricFor(r, marker),
		"setup.sh":  "echo ready\n",
	}
	goFile := filepath.Join(root, "go")
	switch {
	case r.stage == sSetup && r.fault == fReportGone:
		files["setup.sh"] = fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done\necho go\n", goFile)
	case r.stage == sSetup:
		files["setup.sh"] = "echo setting up\n" + loopCmd(marker) + "\n"
	}
	dir, env := tg.project(t, root, marker, files)
	reportDir := filepath.Join(root, "report")
	timeout := "60s"
	if r.fault == fHang {
		timeout = hangTimeout.String()
	}
	args := []string{"--sandbox", r.provider, "--rubric", "r.toml", "--sandbox-setup", "setup.sh",
		"--output-format", "stream-json", "--report-dir", reportDir, "--timeout", timeout}

	var model *scriptedModel
	if r.agentic() {
		o := scriptOptions{command: "echo agent-ran", fault: r.fault, op: r.op}
		switch {
		case r.stage == sAgentTool:
			o.command = loopCmd(marker)
		case r.stage == sAgentTurn && isSignal(r.fault):
			o.hold = opModel
		case r.stage == sJudge && isSignal(r.fault):
			o.hold = opJudge
		}
		model = newScriptedModel(t, o)
		env["ANTHROPIC_API_KEY"] = modelKey
		args = append(args, "-p", "Run the task.", "-y", "--model", "anthropic:claude-test", "--base-url", model.URL)
		if r.fault == fStall {
			env["TALKOPS_STALL_TIMEOUT"] = "3s"
		}
	}

	var gh *githubFake
	if r.stage == sPublish {
		gh = newGitHubFake(t)
		for k, v := range gh.actionsEnv(t, root) {
			env[k] = v
		}
		if r.fault == fGitHub500 {
			gh.failAll(500)
		} else {
			gh.hold("PATCH /check-runs/")
		}
	}

	// Faults installed before the start.
	var held interface{ Arrived() <-chan struct{} }
	switch {
	case r.op == opModel || r.op == opJudge:
		// The scripted model plays them.
	case tg.grpc != nil:
		if h := tg.grpc.install(r, marker); h != nil {
			held = h
		}
	case r.fault == f500Once:
		rt, ok := tg.routes[opCommand]
		if !ok {
			rt = tg.routes[opExec]
		}
		tg.proxy.addBody(rt.method, rt.path, marker+"-c1", 1, actStatus, 500)
	case r.fault == f500 || r.fault == f503Once:
		if tg.cloud != nil {
			ep := tg.cloud.endpoints[r.op]
			status := map[string]int{f500: 500, f503Once: 503}[r.fault]
			if r.fault == f500 {
				tg.cloud.faults.InjectAll(ep, fakekit.Fault{Status: status})
			} else {
				tg.cloud.faults.Inject(ep, 1, fakekit.Fault{Status: status})
			}
		} else {
			rt := tg.routes[r.op]
			tg.proxy.add(rt.method, rt.path, 0, actStatus, 500)
		}
	case r.fault == fHang || r.fault == fCancel:
		rt := tg.routes[r.op]
		held = tg.proxy.add(rt.method, rt.path, 0, actHang, 0)
	case r.fault == fDrop:
		rt := tg.routes[r.op]
		tg.proxy.add(rt.method, rt.path, 1, actDrop, 0)
	case isSignal(r.fault) && tg.proxy != nil:
		op := map[string]string{sProvision: opCreate, sSync: opUpload, sTeardown: opDelete}[r.stage]
		if op != "" {
			rt := tg.routes[op]
			act := actHold
			if r.fault == fSIGKILLActed {
				act = actHoldReply
			}
			held = tg.proxy.add(rt.method, rt.path, 1, act, 0)
		}
	case r.fault == fReportFile:
		if err := os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		reportDir = filepath.Join(root, "file", "sub")
		args[slices.Index(args, "--report-dir")+1] = reportDir
	}

	var p *proc
	if r.fault == fReportRO {
		if err := os.MkdirAll(reportDir, 0o755); err != nil {
			t.Fatal(err)
		}
		unshare, err := exec.LookPath("unshare")
		if err != nil || os.Geteuid() != 0 {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but a read-only mount needs root and unshare(1): %v", err)
			}
			t.Skip("a read-only report dir needs root and unshare(1)")
		}
		script := `mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"`
		p = startProcess(t, dir, env, unshare, append([]string{"-m", "sh", "-c", script, "sh", reportDir, talkopsBin(t)}, args...)...)
	} else {
		p = startTalkops(t, dir, env, args...)
	}

	// Wait for the stage, then inject the fault.
	faultAt := time.Now()
	if isSignal(r.fault) || r.fault == fCancel || r.fault == fReportGone {
		if !reach(t, r, p, held, gh, model, reportDir, marker) {
			o.problem("the run never reached %s (exit %v)\nstdout:\n%s\nstderr:\n%s", r.stage, p.exited(), tail(p.stdout.String()), tail(p.stderr.String()))
		}
	}
	if isSignal(r.fault) || r.fault == fCancel {
		faultAt = time.Now()
	}
	switch r.fault {
	case fSIGINT, fSIGTERM, fSIGKILL, fSIGKILLActed:
		s := map[string]syscall.Signal{fSIGINT: syscall.SIGINT, fSIGTERM: syscall.SIGTERM, fSIGKILL: syscall.SIGKILL, fSIGKILLActed: syscall.SIGKILL}[r.fault]
		_ = p.signal(s)
		if s != syscall.SIGKILL {
			// Let the signal land while the call is still held, then let it through
			// (teardown's delete must go on; a cancelled create is never forwarded).
			time.Sleep(300 * time.Millisecond)
			if tg.proxy != nil {
				tg.proxy.release()
			}
			if tg.grpc != nil {
				tg.grpc.release()
			}
			if gh != nil {
				gh.releaseHeld()
			}
		}
	case fCancel:
		_ = p.signal(syscall.SIGINT)
		time.Sleep(2 * time.Second)
		_ = p.signal(syscall.SIGTERM)
	case fReportGone:
		if err := os.Rename(reportDir, reportDir+".moved"); err == nil {
			_ = os.WriteFile(reportDir, []byte("not a directory"), 0o644)
		}
		_ = os.WriteFile(goFile, nil, 0o644)
	}
	// A hung provider call may legitimately hold the run for the run timeout plus the
	// teardown budget (2 min); everything else must end promptly.
	limit := 60 * time.Second
	if r.fault == fHang {
		limit = 75 * time.Second
	}
	code, exited := p.wait(limit)
	o.code = code
	o.exitAfter = time.Since(faultAt)
	if !exited {
		o.problem("talkops did not exit within %s of the fault; killed", limit)
	}
	if r.fault == fHang && o.exitAfter > hangTimeout+15*time.Second {
		o.problem("talkops exited %s after a hung call, though --timeout is %s", o.exitAfter.Round(100*time.Millisecond), hangTimeout)
	}
	if (r.fault == fSIGINT || r.fault == fSIGTERM || r.fault == fCancel) && o.exitAfter > githubCancelWindow {
		o.problem("talkops exited %s after the first signal; GitHub sends SIGKILL after %s", o.exitAfter.Round(100*time.Millisecond), githubCancelWindow)
	}
	if !slices.Contains(r.want, code) {
		o.problem("exit %d, want %v (README exit codes)\nstderr:\n%s", code, r.want, tail(p.stderr.String()))
	}

	// Clear every fault: gc must be able to reach the service.
	if tg.proxy != nil {
		tg.proxy.clear()
	}
	if tg.grpc != nil {
		tg.grpc.clear()
	}
	if tg.cloud != nil {
		for _, ep := range tg.cloud.endpoints {
			tg.cloud.faults.Clear(ep)
		}
	}
	checkResult(o, p, reportDir, !exited)

	// What was left, before and after gc.
	runID, pid := p.runID(), p.cmd.Process.Pid
	alive := tg.alive(t, runID, pid)
	o.leaked = len(alive)
	if r.fault == fSIGKILLActed && o.leaked == 0 {
		o.problem("the service made no sandbox before the kill: the row tests nothing")
	}
	states := stateIDs(t, root, "")
	if isKill(r.fault) || len(alive) > 0 || len(states) > 0 {
		gcEnv := maps.Clone(env)
		delete(gcEnv, "TALKOPS_TEST_FAKE_FAULTS")
		gcArgs := []string{"sandbox", "gc", "--older-than", "0s"}
		if r.provider != pLocal {
			gcArgs = append(gcArgs, "--provider", r.provider)
		}
		if runID != "" {
			// Only this run's sandboxes: other tests share the Docker engine.
			gcArgs = append(gcArgs, "--run-id", runID)
		}
		gcCode, gcOut, gcErr := runGC(t, r.provider, dir, gcEnv, gcArgs...)
		alive = tg.alive(t, runID, pid)
		if states := stateIDs(t, root, ""); len(alive) > 0 || len(states) > 0 || gcCode != 0 {
			o.problem("after `talkops %s` (exit %d) these sandboxes remain: %v; the state dir lists %v\n%s%s",
				strings.Join(gcArgs, " "), gcCode, alive, states, gcOut, gcErr)
		}
	} else if o.leaked == 0 && len(states) > 0 {
		o.problem("the state dir lists %v though nothing is alive", states)
	}
	o.leftAfterGC = len(alive)
	if left := waitNoLeftovers(marker, root, 5*time.Second); len(left) > 0 {
		o.procs = len(left)
		o.problem("processes left behind: %v", left)
		for _, l := range left {
			_ = syscall.Kill(l.PID, syscall.SIGKILL)
		}
	}
	return o
}

// project writes files, with the target's own files over them, as the project under
// root with its .git, makes the user's home and tmp under root, and returns the project
// directory and a hermetic environment holding the target's variables.
func (tg *target) project(t testing.TB, root, marker string, files map[string]string) (dir string, env map[string]string) {
	t.Helper()
	dir = filepath.Join(root, "project")
	for k, v := range tg.files {
		files[k] = v
	}
	writeFiles(t, dir, files)
	for _, d := range []string{filepath.Join(dir, ".git"), filepath.Join(root, "home"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env = hermeticEnv(root, marker)
	for k, v := range tg.env {
		env[k] = v
	}
	return dir, env
}

// hangTimeout is the --timeout of rows whose provider call never answers.
const hangTimeout = 6 * time.Second

// githubCancelWindow is how long GitHub Actions waits after cancelling a job (SIGINT,
// SIGTERM 7.5 s later) before it sends SIGKILL.
const githubCancelWindow = 10 * time.Second

// gcLocks serialise this package's own `talkops sandbox gc` runs per provider: two gc
// runs on one engine race to delete the same orphan (see W7).
var gcLocks sync.Map

func runGC(t *testing.T, provider, dir string, env map[string]string, args ...string) (int, string, string) {
	mu, _ := gcLocks.LoadOrStore(provider, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	return runTalkops(t, dir, env, 60*time.Second, args...)
}

func isSignal(f string) bool { return f == fSIGINT || f == fSIGTERM || isKill(f) }

func isKill(f string) bool { return f == fSIGKILL || f == fSIGKILLActed }

// reach waits until the run is inside the row's stage.
func reach(t *testing.T, r row, p *proc, held interface{ Arrived() <-chan struct{} }, gh *githubFake, model *scriptedModel, reportDir, marker string) bool {
	const within = 60 * time.Second
	running := func() bool {
		deadline := time.Now().Add(within)
		for time.Now().Before(deadline) && !p.exited() {
			for _, l := range leftovers(marker, "") {
				if strings.HasPrefix(l.Why, "command line") {
					return true
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	event := func(typ, id string) bool {
		_, ok := p.waitEvent(func(e event) bool {
			return e.Type == typ && (id == "" || strings.Contains(string(e.Data), `"id":"`+id+`"`))
		}, within)
		return ok
	}
	switch {
	case r.fault == fCancel:
		return event("teardown.started", "")
	case held != nil:
		return arrived(p, held.Arrived(), within)
	case r.stage == sPublish:
		return arrived(p, gh.held, within)
	case r.stage == sAgentTurn:
		return arrived(p, model.agentSeen, within)
	case r.stage == sJudge:
		return arrived(p, model.judgeSeen, within)
	case r.stage == sAgentTool:
		return waitStage(p, filepath.Join(reportDir, "result.json"), "agent", within) && running()
	case r.stage == sProvision || (r.stage == sSetup && r.fault == fReportGone):
		return waitStage(p, filepath.Join(reportDir, "result.json"), result.StageName(r.stage), within)
	case r.stage == sSetup:
		return waitStage(p, filepath.Join(reportDir, "result.json"), sSetup, within) && running()
	case r.stage == sCheck1 || r.stage == sCleanCheck:
		return event("check.started", "c1") && running()
	case r.stage == sCheck2:
		return event("check.started", "c2") && running()
	case r.stage == sTeardown:
		return event("teardown.started", "")
	}
	t.Fatalf("row %s: no way to reach stage %q", r.name(), r.stage)
	return false
}

// arrived waits for ch (a call reached a fake) unless the process exits first.
func arrived(p *proc, ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-p.done:
		return false
	case <-time.After(within):
		return false
	}
}

// waitStage polls result.json, which the runner rewrites at each stage start, until the
// stage is running.
func waitStage(p *proc, path string, stage result.StageName, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && !p.exited() {
		if data, err := os.ReadFile(path); err == nil {
			var res result.Result
			if json.Unmarshal(data, &res) == nil {
				for _, s := range res.Stages {
					if s.Name == stage && s.Status == "running" {
						return true
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// checkResult validates result.json with result.Read (the schema), or, for the
// report-dir faults, checks that stderr says why it could not be written. A run that was
// SIGKILLed (by the row, or by the test because it hung) is only checked for a valid file.
func checkResult(o *outcome, p *proc, reportDir string, killed bool) {
	path := filepath.Join(reportDir, "result.json")
	stderr := p.stderr.String()
	switch o.fault {
	case fReportFile:
		o.result = "none (usage error)"
		if !strings.Contains(stderr, "--report-dir") {
			o.problem("stderr does not name --report-dir:\n%s", tail(stderr))
		}
		return
	case fReportRO, fReportGone:
		if !strings.Contains(stderr, "result.json") {
			o.problem("result.json could not be written and stderr does not say so:\n%s", tail(stderr))
		}
		if res, err := result.Read(path); err == nil && res.Reason != "run in progress" {
			o.problem("result.json was written despite the fault (%s)", res.Reason)
		}
		o.result = "not written; stderr says why"
		return
	}
	res, err := result.Read(path)
	if err != nil {
		o.result = "invalid"
		o.problem("result.json: %v\nstderr:\n%s", err, tail(stderr))
		return
	}
	o.result = "ok"
	for _, s := range res.Stages {
		switch s.Status {
		case result.StageInterrupted, result.StageTimeout, result.StageFailed:
			if o.hit == "" {
				o.hit = string(s.Name) + " " + string(s.Status)
			}
		}
	}
	if isKill(o.fault) || killed {
		o.result = "ok (last write before the kill)"
		return
	}
	if res.ExitCode != o.code {
		o.problem("result.json exit_code %d, process exit %d", res.ExitCode, o.code)
	}
	if want := map[string]string{fSIGINT: "SIGINT", fSIGTERM: "SIGTERM"}[o.fault]; want != "" && res.Interrupted != want {
		o.problem("result.json interrupted = %q, want %q", res.Interrupted, want)
	}
	if o.stage == sCleanCheck {
		if v := res.Verification; v == nil || v.Mode != result.VerifyClean || len(v.CleanRooms) != 1 || v.CleanRooms[0].Teardown != "deleted" {
			o.problem("result.json verification = %+v, want one clean room, deleted", v)
		}
	}
	switch {
	case res.Teardown == nil:
		o.problem("result.json has no teardown record")
	case o.op == opDelete || o.fault == fCancel:
	case res.Teardown.Status != "deleted" && res.Teardown.Status != "none":
		o.problem("teardown %s: %s", res.Teardown.Status, res.Teardown.Error)
	}
}

func tail(s string) string {
	const n = 3000
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// matrixTable renders the outcomes as a Markdown table in row order.
func matrixTable(outs []*outcome, rows []row, took time.Duration, parallel int) string {
	order := map[string]int{}
	for i, r := range rows {
		order[r.name()] = i
	}
	slices.SortFunc(outs, func(a, b *outcome) int { return order[a.name()] - order[b.name()] })
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows in %s, %d at a time.\n\n", len(outs), took.Round(time.Second), parallel)
	b.WriteString("| provider | stage | fault | exit (want) | exit after | result.json | stage hit | leaked → after gc | procs left | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, o := range outs {
		fault := o.fault
		if o.op != "" {
			fault = o.op + ": " + fault
		}
		want := make([]string, len(o.want))
		for i, w := range o.want {
			want[i] = strconv.Itoa(w)
		}
		verdict := "ok"
		switch {
		case o.failed:
			verdict = "FAIL: " + oneLine(o.problems[0])
		case len(o.known) > 0:
			tags := slices.Compact(slices.Sorted(slices.Values(o.known)))
			for i, tg := range tags {
				tags[i], _, _ = strings.Cut(tg, " ")
			}
			verdict = "known " + strings.Join(tags, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s (%s) | %.1f s | %s | %s | %d → %d | %d | %s |\n",
			o.provider, o.stage, fault, codeName(o.code), strings.Join(want, "/"), o.exitAfter.Seconds(), o.result, dash(o.hit), o.leaked, o.leftAfterGC, o.procs, verdict)
	}
	return b.String()
}

func codeName(c int) string {
	if c == 128+int(syscall.SIGKILL) {
		return "killed"
	}
	return strconv.Itoa(c)
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
