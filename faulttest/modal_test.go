package faulttest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/talkops/talkops/providers/modal/modalfake"
)

// grpcFake is a provider fake that speaks gRPC (Modal): there is no HTTP proxy in front
// of it, so rows inject their faults into the fake itself, by RPC.
type grpcFake struct {
	srv *modalfake.Server
	// rpcs maps the matrix's operations to the RPC that carries them.
	rpcs map[string]string

	mu    sync.Mutex
	holds []*modalfake.Held
}

// newModalTarget starts the Modal fake for one row: credentials, its certificate through
// SSL_CERT_FILE, and a config that points talkops at it.
func newModalTarget(t testing.TB, tg *target, root string) {
	t.Helper()
	s := modalfake.New("ak-matrix", "as-matrix")
	t.Cleanup(s.Close)
	cert := filepath.Join(root, "modalfake.pem")
	if err := os.WriteFile(cert, s.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	tg.env["MODAL_TOKEN_ID"], tg.env["MODAL_TOKEN_SECRET"], tg.env["SSL_CERT_FILE"] = "ak-matrix", "as-matrix", cert
	tg.files[".talkops/config.toml"] = fmt.Sprintf("[sandboxes.providers.modal]\nserver_url = %q\nworking_dir = %q\nready_timeout = \"10s\"\n",
		s.URL, filepath.Join(root, "remote-wd"))
	tg.grpc = &grpcFake{srv: s, rpcs: map[string]string{
		opCreate: "SandboxCreate",
		opUpload: "ContainerFilesystemExec", // the first filesystem call of a run opens the archive
		opExec:   "TaskExecStart",
		opDelete: "SandboxTerminate",
	}}
	tg.alive = func(testing.TB, string, int) []string { return s.Ledger().Alive }
}

// install puts the row's fault into the fake before the run starts; it returns the held
// call a signal row waits for, if any.
func (g *grpcFake) install(r row, marker string) interface{ Arrived() <-chan struct{} } {
	f := &g.srv.Faults
	rpc := g.rpcs[r.op]
	switch r.fault {
	case f500Once:
		// The check's own start fails before the server acted: the client finds that out
		// with TaskExecPoll and sends it again.
		f.InjectMatching("TaskExecStart", marker+"-c1", 1, modalfake.Fault{Code: codes.Internal})
	case f500:
		f.InjectAll(rpc, modalfake.Fault{Code: codes.Internal, Message: "internal error"})
	case f503Once:
		f.Inject(rpc, 1, modalfake.Fault{Code: codes.Unavailable})
	case fHang, fCancel:
		f.InjectAll(rpc, modalfake.Fault{Hang: true})
	case fDrop:
		f.Inject(rpc, 1, modalfake.Fault{Code: codes.Unavailable, AfterAct: true})
	case fSIGINT, fSIGTERM, fSIGKILL, fSIGKILLActed:
		op := map[string]string{sProvision: opCreate, sSync: opUpload, sTeardown: opDelete}[r.stage]
		if op == "" {
			return nil
		}
		h := f.Hold(g.rpcs[op])
		if r.fault == fSIGKILLActed {
			h = f.HoldAfterAct(g.rpcs[op])
		}
		g.mu.Lock()
		g.holds = append(g.holds, h)
		g.mu.Unlock()
		return h
	}
	return nil
}

// release lets held calls through.
func (g *grpcFake) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, h := range g.holds {
		h.Release()
	}
}

// clear removes every fault, so gc can reach the service.
func (g *grpcFake) clear() {
	g.release()
	for _, rpc := range g.rpcs {
		g.srv.Faults.Clear(rpc)
	}
}

// TestModalCreateCutShort runs the real binary against the Modal fake and signals it
// while SandboxCreate is in flight, after the server made the sandbox (Modal finishes a
// create whose client gave up). SIGTERM and SIGINT: the run finds the sandbox by its name and terminates
// it before it exits. SIGKILL: nothing can run and the local ledger never learned the
// id, but the run wrote a pending entry before the create and the sandbox was tagged
// with its run id, so the GitHub Action's post step, `talkops sandbox gc --run-id=<id>
// --older-than=0s`, knows the sandbox's owner is dead, deletes it and removes the
// pending entry.
func TestModalCreateCutShort(t *testing.T) {
	talkopsBin(t)
	for _, fault := range []string{fSIGTERM, fSIGINT, fSIGKILL} {
		sig := map[string]syscall.Signal{fSIGTERM: syscall.SIGTERM, fSIGINT: syscall.SIGINT, fSIGKILL: syscall.SIGKILL}[fault]
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			m := startModalCreateHeld(t)
			srv, held, p, root, dir, env := m.srv, m.held, m.p, m.root, m.dir, m.env
			_ = p.signal(sig)
			code, exited := p.wait(30 * time.Second)
			if !exited {
				t.Fatalf("talkops did not exit within 30s of %s", sig)
			}
			if want := signalWant(fault); code != want {
				t.Errorf("exit %d, want %d\nstderr:\n%s", code, want, tail(p.stderr.String()))
			}
			alive := srv.Ledger().Alive
			if sig != syscall.SIGKILL {
				if len(alive) != 0 {
					t.Fatalf("after %s during the create, sandboxes %v are still running\nstderr:\n%s", fault, alive, tail(p.stderr.String()))
				}
				return
			}
			if len(alive) != 1 {
				t.Fatalf("after SIGKILL the fake holds %v; want the one sandbox the create made", alive)
			}
			held.Release()
			runID := p.runID()
			if runID == "" {
				t.Fatal("no run.started event: the run id is unknown")
			}
			if sb, ok := srv.Sandbox(alive[0]); !ok || sb.TimeoutSecs == 0 {
				t.Errorf("sandbox %+v: want a timeout_secs backstop", sb)
			}
			if ids := stateIDs(t, root, ""); !slices.Equal(ids, []string{pModal + ":"}) {
				t.Errorf("state dir after SIGKILL lists %v; want only the pending create", ids)
			}
			// No --provider: the pending entry names the provider to ask, as in the
			// Action's post step.
			gcCode, gcOut, gcErr := runGC(t, pModal, dir, env, "sandbox", "gc", "--older-than", "0s", "--run-id", runID)
			if gcCode != 0 || !regexp.MustCompile(`(?m)^deleted +`+pModal+` +`+alive[0]+` `).MatchString(gcOut) {
				t.Errorf("talkops sandbox gc (exit %d) did not delete sandbox %s of run %s:\n%s%s", gcCode, alive[0], runID, gcOut, gcErr)
			}
			if left := srv.Ledger().Alive; len(left) != 0 {
				t.Errorf("after gc the fake still runs %v", left)
			}
			if ids := stateIDs(t, root, ""); len(ids) != 0 {
				t.Errorf("after gc the state dir lists %v; want nothing", ids)
			}
		})
	}
}

// modalCreateHeld is a run of the real binary on the Modal fake whose SandboxCreate the
// fake carried out and whose answer it holds.
type modalCreateHeld struct {
	srv       *modalfake.Server
	held      *modalfake.Held
	p         *proc
	root, dir string
	env       map[string]string
}

func startModalCreateHeld(t *testing.T) modalCreateHeld {
	t.Helper()
	root := t.TempDir()
	marker := newMarker()
	tg := newTarget(t, pModal, root, "")
	srv := tg.grpc.srv
	files := map[string]string{
		"README.md": "# cut short\n",
		"r.toml":    "name = \"cut\"\n[[check]]\nid = \"c1\"\nrun = \"true\"\n",
	}
	dir, env := tg.project(t, root, marker, files)
	held := srv.Faults.HoldAfterAct("SandboxCreate")
	t.Cleanup(held.Release)
	p := startTalkops(t, dir, env, "--sandbox", pModal, "--rubric", "r.toml", "--output-format", "stream-json",
		"--report-dir", filepath.Join(root, "report"), "--timeout", "60s")
	if !arrived(p, held.Arrived(), 60*time.Second) {
		t.Fatalf("SandboxCreate never reached the fake\nstderr:\n%s", tail(p.stderr.String()))
	}
	if l := srv.Ledger(); l.Created != 1 || len(l.Alive) != 1 {
		t.Fatalf("ledger while the create is held: %+v; want the sandbox made", l)
	}
	return modalCreateHeld{srv: srv, held: held, p: p, root: root, dir: dir, env: env}
}

// TestGCLeavesALiveCreateAlone: while a run's create is in flight (the service made the
// sandbox, the answer has not arrived), `talkops sandbox gc --run-id=<id>
// --older-than=0s` keeps both the sandbox and the pending entry: their owner is alive.
// The run then goes on, passes, and leaves nothing.
func TestGCLeavesALiveCreateAlone(t *testing.T) {
	talkopsBin(t)
	m := startModalCreateHeld(t)
	var runID string
	for deadline := time.Now().Add(10 * time.Second); runID == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		runID = m.p.runID()
	}
	if runID == "" {
		t.Fatal("no run.started event: the run id is unknown")
	}
	alive := m.srv.Ledger().Alive
	gcCode, gcOut, gcErr := runGC(t, pModal, m.dir, m.env, "sandbox", "gc", "--older-than", "0s", "--run-id", runID)
	if gcCode != 0 || !regexp.MustCompile(`(?m)^kept +`+pModal+` +\(pending\) +`+runID+` +create in flight`).MatchString(gcOut) ||
		!regexp.MustCompile(`(?m)^kept +`+pModal+` +`+alive[0]+` .*owner pid \d+ is running`).MatchString(gcOut) {
		t.Errorf("talkops sandbox gc (exit %d) during the create; want the sandbox and the pending create kept:\n%s%s", gcCode, gcOut, gcErr)
	}
	if left := m.srv.Ledger().Alive; !slices.Equal(left, alive) {
		t.Errorf("gc during the create left %v, want %v", left, alive)
	}
	m.held.Release()
	code, exited := m.p.wait(60 * time.Second)
	if !exited || code != 0 {
		t.Fatalf("run exit %d (exited %v), want 0\nstderr:\n%s", code, exited, tail(m.p.stderr.String()))
	}
	if left := m.srv.Ledger().Alive; len(left) != 0 {
		t.Errorf("after the run the fake still runs %v", left)
	}
	if ids := stateIDs(t, m.root, ""); len(ids) != 0 {
		t.Errorf("after the run the state dir lists %v; want nothing", ids)
	}
}
