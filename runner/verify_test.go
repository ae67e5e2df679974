package runner_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/result"
	"github.com/talkops/talkops/runner"
)

// stubAgent finishes at once.
type stubAgent struct{}

func (stubAgent) Run(context.Context, string) (runner.AgentOutcome, error) {
	return runner.AgentOutcome{Final: "done"}, nil
}

func (stubAgent) Revise(context.Context, string) (runner.AgentOutcome, error) {
	return runner.AgentOutcome{Final: "revised"}, nil
}

// stubWorkspace records calls; Apply fails when failApply is set.
type stubWorkspace struct {
	failApply bool
	applied   []string // sandbox ids
	closed    bool
}

func (w *stubWorkspace) Baseline(context.Context, providers.Sandbox) (*result.WorkspaceRecord, error) {
	return &result.WorkspaceRecord{Entries: 1}, nil
}

func (w *stubWorkspace) Changes(_ context.Context, _ providers.Sandbox, n int) (*result.ChangeSet, error) {
	return &result.ChangeSet{Pass: n, Paths: []result.PathChange{}}, nil
}

func (w *stubWorkspace) Materialize(string) error { return errors.New("not used") }

func (w *stubWorkspace) Apply(_ context.Context, sb providers.Sandbox, room *result.CleanRoom) error {
	w.applied = append(w.applied, sb.ID())
	if w.failApply {
		return errors.New("injected apply failure")
	}
	room.Written = 1
	return nil
}

func (w *stubWorkspace) Close() error { w.closed = true; return nil }

// stubRubric asks for a revision until the last iteration, and records where it ran.
type stubRubric struct {
	ranIn []string
}

func (r *stubRubric) Describe() result.Rubric { return result.Rubric{Name: "stub"} }

func (r *stubRubric) Evaluate(_ context.Context, sb providers.Sandbox, in runner.EvalInput) (runner.Evaluation, error) {
	r.ranIn = append(r.ranIn, sb.ID())
	status := result.RubricNeedsRevision
	if in.Iteration == 2 {
		status = result.RubricSatisfied
	}
	item := result.Item{ID: "c", Kind: "check", Status: result.StatusPass, Required: true}
	return runner.Evaluation{Iteration: result.Iteration{N: in.Iteration, Status: status, Score: 1, Items: []result.Item{item}},
		Revision: "again"}, nil
}

func cleanOptions(t *testing.T, p *fake.Provider) (runner.Options, *stubWorkspace, *stubRubric) {
	t.Helper()
	opts := baseOptions(t)
	opts.Provider = p
	opts.NewAgent = func(context.Context, providers.Sandbox) (runner.Agent, error) { return stubAgent{}, nil }
	ws, rb := &stubWorkspace{}, &stubRubric{}
	opts.Workspace, opts.Rubric = ws, rb
	opts.CleanRoom = runner.CleanRoomProvisioned
	opts.MaxIterations = 2
	return opts, ws, rb
}

// Each evaluation runs in its own new clean room, never in the agent's sandbox, and every
// clean room is deleted.
func TestEachEvaluationGetsACleanRoom(t *testing.T) {
	t.Parallel()
	p := fake.New(fake.Options{Dir: t.TempDir()})
	opts, ws, rb := cleanOptions(t, p)
	res := runner.Run(t.Context(), opts)
	if res.ExitCode != runner.ExitPass {
		t.Fatalf("exit %d (%s), want 0", res.ExitCode, res.Reason)
	}
	v := res.Verification
	if v == nil || v.Mode != result.VerifyClean || len(v.CleanRooms) != 2 {
		t.Fatalf("verification = %+v, want two clean rooms", v)
	}
	agentSB := res.Sandbox.ID
	seen := map[string]bool{agentSB: true}
	for i, room := range v.CleanRooms {
		if room.Teardown != "deleted" || room.Iteration != i+1 || seen[room.SandboxID] {
			t.Errorf("clean room %d = %+v, want a new sandbox, deleted", i, room)
		}
		seen[room.SandboxID] = true
		if rb.ranIn[i] != room.SandboxID || ws.applied[i] != room.SandboxID {
			t.Errorf("evaluation %d ran in %s and the change set went to %s, want the clean room %s",
				i+1, rb.ranIn[i], ws.applied[i], room.SandboxID)
		}
	}
	if alive, err := p.Alive(); err != nil || len(alive) != 0 {
		t.Errorf("sandboxes alive after the run: %v (%v)", alive, err)
	}
	if !ws.closed {
		t.Error("the workspace record was not closed")
	}
}

// A clean room that cannot be prepared is an infrastructure error (exit 3), never a
// verdict from the agent's sandbox; both sandboxes are deleted.
func TestCleanRoomFailureIsAnError(t *testing.T) {
	t.Parallel()
	p := fake.New(fake.Options{Dir: t.TempDir()})
	opts, ws, rb := cleanOptions(t, p)
	ws.failApply = true
	res := runner.Run(t.Context(), opts)
	if res.ExitCode != runner.ExitError || !strings.Contains(res.Reason, "clean room") {
		t.Fatalf("exit %d (%s), want 3 naming the clean room", res.ExitCode, res.Reason)
	}
	if len(rb.ranIn) != 0 {
		t.Errorf("the rubric ran in %v although no clean room was ready", rb.ranIn)
	}
	if room := res.Verification.CleanRooms[0]; room.Teardown != "deleted" || !strings.Contains(room.Error, "injected") {
		t.Errorf("clean room = %+v, want deleted with the error", room)
	}
	if alive, err := p.Alive(); err != nil || len(alive) != 0 {
		t.Errorf("sandboxes alive after the run: %v (%v)", alive, err)
	}
}

// A provider that cannot make a clean room verifies in place and says so.
func TestNoCleanRoomFallsBackWithAWarning(t *testing.T) {
	t.Parallel()
	p := fake.New(fake.Options{Dir: t.TempDir()})
	opts, _, rb := cleanOptions(t, p)
	opts.CleanRoom, opts.NoCleanRoom = "", "the test provider cannot"
	res := runner.Run(t.Context(), opts)
	v := res.Verification
	if res.ExitCode != runner.ExitPass || v.Mode != result.VerifyInPlace || v.Requested != result.VerifyClean ||
		!strings.Contains(v.Warning, "the test provider cannot") || len(v.CleanRooms) != 0 {
		t.Fatalf("exit %d, verification %+v, want in-place with the reason", res.ExitCode, v)
	}
	if rb.ranIn[0] != res.Sandbox.ID {
		t.Errorf("evaluation ran in %s, want the agent's sandbox %s", rb.ranIn[0], res.Sandbox.ID)
	}
}
