// Package modalfake is an in-process fake of Modal's gRPC API for tests: a real gRPC
// server on a loopback port, with TLS (a self-signed certificate the test trusts), that
// serves the control plane (modal.client.ModalClient) and the command router
// (modal.task_command_router.TaskCommandRouter) on one listener, from the same minimal
// schema the client uses.
//
// Covered, exactly the RPCs the modal provider calls: AuthTokenGet, AppGetOrCreate,
// ImageGetOrCreate and ImageJoinStreaming, SecretGetOrCreate (EPHEMERAL), SandboxCreate
// (name unique per app among running sandboxes, ALREADY_EXISTS on a duplicate; tags set
// with the sandbox; the x-idempotency-key makes a retried create return the first
// sandbox), SandboxGetFromName (a running sandbox by app name, environment and name;
// NOT_FOUND otherwise), SandboxGetTaskId, TaskGetCommandRouterAccess (the router
// URL is the fake's own), SandboxTerminate, SandboxList (environment, app and tag
// filters, include_finished, before_timestamp paging), ContainerFilesystemExec and
// ContainerFilesystemExecGetOutput (open "rb"/"wb", read, write, flush, close; ENOENT
// and EISDIR as SystemErrorMessage), and on the router TaskExecStart, TaskExecStdioRead
// (from an offset), TaskExecWait and TaskExecPoll.
//
// Auth: every control-plane call must carry the token id and secret; every call but
// AuthTokenGet an auth token the fake issued and that has not expired (TokenTTL); router
// calls a router JWT it issued (RouterTTL). The client type and version must be set.
//
// Commands run for real on the host with sh, in a new process group, in the sandbox's
// working directory with the sandbox's and the exec's secrets as environment; timeout_secs
// kills the group and the exit is reported as signal 9. Files are the host's files: the
// fake does not jail paths. Terminate kills every process of the sandbox; a sandbox's
// timeout_secs terminates it too (the TTL backstop).
//
// Faults: Faults injects a status code, a hang, a drop or a hang after the call was
// served, or a stalled stream into any RPC by name, and holds calls in flight, before the
// server acts or after it (a create the client gave up on still makes its sandbox);
// TaskAfter and TaskDelay make SandboxGetTaskId slow, BuildAfter makes an image build
// take several join streams, ImageFailure fails it.
//
// What a first live run against Modal must confirm: that the server accepts our client
// type and version metadata; that SandboxGetTaskId answers with a task id once the
// sandbox is scheduled; the router URL scheme and the JWT's exp claim; what TaskExecWait
// reports for a command killed at timeout_secs; whether TaskExecPoll answers NOT_FOUND
// for an exec id it never saw (the client relies on it before re-sending a start);
// whether TaskExecStdioRead ends at EOF once the command exits; the chunking of
// file_write_request data the server accepts; that an EPHEMERAL secret outlives
// the sandbox's creation without a heartbeat; that SandboxList's tag filter finds a
// sandbox by the tags sent with SandboxCreate; and that SandboxGetFromName finds a
// sandbox of an app made by AppGetOrCreate (Modal's clients document it for deployed
// apps).
package modalfake

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/talkops/talkops/providers/httpapi/fakekit"
	pb "github.com/talkops/talkops/providers/modal/internal/modalpb"
)

// Server is the fake. Configure its exported fields before the first call.
type Server struct {
	// URL is the server's address, https://127.0.0.1:port.
	URL string
	// TokenID and TokenSecret are the credentials every control-plane call must carry.
	TokenID, TokenSecret string
	// TokenTTL and RouterTTL are the lifetimes of the auth tokens and router JWTs the
	// fake issues; 0 means an hour.
	TokenTTL, RouterTTL time.Duration
	// TaskAfter is how many SandboxGetTaskId calls a new sandbox answers without a task
	// id; NeverReady never gives one; TaskDelay delays each answer.
	TaskAfter  int
	NeverReady bool
	TaskDelay  time.Duration
	// BuildAfter is how many join streams an image build takes (0: built at once);
	// ImageFailure, when set, fails every build with that exception.
	BuildAfter   int
	ImageFailure string
	// PageSize bounds SandboxList answers; 0 means 100.
	PageSize int
	// Faults fails, delays and holds calls by RPC name.
	Faults Faults

	certPEM []byte
	lis     net.Listener
	grpc    *grpc.Server

	mu       sync.Mutex
	boxes    fakekit.Boxes[*box]
	byKey    map[string]string // idempotency key → sandbox id
	apps     map[string]string // environment/name → app id
	secrets  map[string]map[string]string
	images   map[string]int // image id → join streams so far
	tokens   map[string]time.Time
	jwts     map[string]time.Time
	files    map[string]*os.File
	fsOut    map[string]fsResult
	calls    []Call
	finished map[string]bool // terminated sandbox ids
}

// Call is one RPC the fake received, with its metadata.
type Call struct {
	Method   string
	Metadata metadata.MD
}

type box struct {
	id, name, appID, env, imageID, taskID, workdir string
	secretIDs                                      []string
	tags                                           map[string]string
	timeoutSecs                                    uint32
	created                                        time.Time
	polls                                          int
	home                                           string
	procs                                          *fakekit.Procs
	ttl                                            *time.Timer
	execs                                          map[string]*execution
}

type fsResult struct {
	out []byte
	err *pb.SystemErrorMessage
}

// New starts a fake that accepts the token id and secret. Close it when done.
func New(tokenID, tokenSecret string) *Server {
	cert, certPEM, err := selfSigned()
	if err != nil {
		panic(fmt.Sprintf("modalfake: certificate: %v", err))
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("modalfake: listen: %v", err))
	}
	s := &Server{TokenID: tokenID, TokenSecret: tokenSecret, certPEM: certPEM, lis: lis,
		byKey: map[string]string{}, apps: map[string]string{}, secrets: map[string]map[string]string{},
		images: map[string]int{}, tokens: map[string]time.Time{}, jwts: map[string]time.Time{},
		files: map[string]*os.File{}, fsOut: map[string]fsResult{}, finished: map[string]bool{}}
	s.URL = "https://" + lis.Addr().String()
	s.grpc = grpc.NewServer(
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})),
		grpc.MaxRecvMsgSize(100<<20), grpc.MaxSendMsgSize(100<<20),
		grpc.ChainUnaryInterceptor(s.unary), grpc.ChainStreamInterceptor(s.stream))
	pb.RegisterModalClientServer(s.grpc, &control{s: s})
	pb.RegisterTaskCommandRouterServer(s.grpc, &router{s: s})
	go func() { _ = s.grpc.Serve(lis) }()
	return s
}

// CertPEM is the server's certificate, for a client's roots (or SSL_CERT_FILE).
func (s *Server) CertPEM() []byte { return s.certPEM }

// TLSConfig trusts the server's certificate.
func (s *Server) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.certPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// Close kills every command still running and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	for _, b := range s.boxes.Live() {
		b.procs.KillAll()
		if b.ttl != nil {
			b.ttl.Stop()
		}
		os.RemoveAll(b.home)
	}
	for _, f := range s.files {
		f.Close()
	}
	s.mu.Unlock()
	s.grpc.Stop()
}

// Ledger is the fake's record of sandboxes; Alive holds ids, in creation order.
type Ledger = fakekit.Ledger

// Ledger returns the record of sandboxes created and terminated.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.boxes.Ledger()
}

// Sandbox describes one live sandbox, for assertions.
type Sandbox struct {
	ID, Name, AppID, Environment, ImageID, TaskID, Workdir string
	SecretIDs                                              []string
	Tags                                                   map[string]string
	TimeoutSecs                                            uint32
}

// Sandbox returns a live sandbox by id.
func (s *Server) Sandbox(id string) (Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes.Get(id)
	if !ok {
		return Sandbox{}, false
	}
	return Sandbox{ID: b.id, Name: b.name, AppID: b.appID, Environment: b.env, ImageID: b.imageID, TaskID: b.taskID,
		Workdir: b.workdir, SecretIDs: slices.Clone(b.secretIDs), Tags: b.tags, TimeoutSecs: b.timeoutSecs}, true
}

// Secret returns the environment of a secret.
func (s *Server) Secret(id string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.secrets[id]
}

// Calls returns every call so far, in arrival order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Count returns how many calls method received.
func (s *Server) Count(method string) int { return s.Faults.Count(method) }

func (s *Server) record(ctx context.Context, method string) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: method, Metadata: md.Copy()})
	s.mu.Unlock()
}

func textOf(req any) string {
	if m, ok := req.(proto.Message); ok {
		return prototext.Format(m)
	}
	return ""
}

func newID(prefix string) string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// issue makes a token that expires after ttl, in JWT form with an exp claim (the client
// reads exp to know when to refresh).
func issue(ttl time.Duration) (string, time.Time) {
	if ttl <= 0 {
		ttl = time.Hour
	}
	exp := time.Now().Add(ttl)
	payload := fmt.Sprintf(`{"exp":%d,"jti":%q}`, exp.Unix(), newID(""))
	return "eyJhbGciOiJub25lIn0." + b64(payload) + ".sig", exp
}

// checkClient checks the metadata every control-plane call carries.
func (s *Server) checkClient(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	one := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if one("x-modal-client-type") == "" || one("x-modal-client-version") == "" {
		return status.Error(codes.FailedPrecondition, "x-modal-client-type and x-modal-client-version are required")
	}
	if one("x-modal-token-id") != s.TokenID || one("x-modal-token-secret") != s.TokenSecret {
		return status.Error(codes.Unauthenticated, "Token ID or secret is invalid")
	}
	if method == "AuthTokenGet" {
		return nil
	}
	s.mu.Lock()
	exp, ok := s.tokens[one("x-modal-auth-token")]
	s.mu.Unlock()
	if !ok || time.Now().After(exp) {
		return status.Error(codes.Unauthenticated, "auth token is missing or expired")
	}
	return nil
}

func (s *Server) checkRouter(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get("authorization")
	if len(v) == 0 {
		return status.Error(codes.Unauthenticated, "missing authorization")
	}
	s.mu.Lock()
	exp, ok := s.jwts[trimBearer(v[0])]
	s.mu.Unlock()
	if !ok || time.Now().After(exp) {
		return status.Error(codes.Unauthenticated, "router JWT is invalid or expired")
	}
	return nil
}

func trimBearer(v string) string {
	if len(v) > 7 && v[:7] == "Bearer " {
		return v[7:]
	}
	return v
}

// terminate kills a sandbox's processes and forgets it; it reports whether it was alive.
func (s *Server) terminate(id string) bool {
	s.mu.Lock()
	b, ok := s.boxes.Get(id)
	if ok {
		s.boxes.Delete(id)
		s.finished[id] = true
		if b.ttl != nil {
			b.ttl.Stop()
		}
	}
	s.mu.Unlock()
	if ok {
		b.procs.KillAll()
		os.RemoveAll(b.home)
	}
	return ok
}

func (s *Server) boxByTask(taskID string) (*box, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.boxes.Live() {
		if b.taskID == taskID {
			return b, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "task %s not found", taskID)
}

func sortByCreatedDesc(bs []*box) {
	sort.SliceStable(bs, func(i, j int) bool { return bs[i].created.After(bs[j].created) })
}

func homeDir() string {
	d, err := os.MkdirTemp("", "modalfake-home-")
	if err != nil {
		return filepath.Join(os.TempDir(), "modalfake-home")
	}
	return d
}
