package faulttest

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

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
	case fSIGINT, fSIGTERM, fSIGKILL:
		op := map[string]string{sProvision: opCreate, sSync: opUpload, sTeardown: opDelete}[r.stage]
		if op == "" {
			return nil
		}
		h := f.Hold(g.rpcs[op])
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
