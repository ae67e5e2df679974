package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/talkops/talkops/providers"
)

// engineProxy sits between the provider and the test engine on 127.0.0.1. It forwards
// every request unchanged (exec's upgraded connections included) unless the test's
// intercept takes it: that is how a test makes one engine call hang or fail.
type engineProxy struct {
	srv     *httptest.Server
	closing chan struct{} // closed at the end of the test: hung handlers return

	mu        sync.Mutex
	intercept func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool
}

// newEngineProxy starts a proxy in front of the unix socket in DOCKER_HOST and returns
// a provider whose client talks to the proxy.
func newEngineProxy(t *testing.T, opts Options) (*engineProxy, *Provider) {
	t.Helper()
	requireEngine(t)
	host := client.DefaultDockerHost
	if h := strings.TrimSpace(os.Getenv("DOCKER_HOST")); h != "" {
		host = h
	}
	u, err := client.ParseHostURL(host)
	if err != nil || u.Scheme != "unix" {
		t.Skipf("the fault proxy needs a unix socket engine, DOCKER_HOST is %q", host)
	}
	sock := u.Host // ParseHostURL keeps a socket path in Host
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "docker"
		},
		Transport:     transport,
		FlushInterval: -1, // exec and attach streams
	}
	ep := &engineProxy{closing: make(chan struct{})}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ep.mu.Lock()
		intercept := ep.intercept
		ep.mu.Unlock()
		if intercept != nil && intercept(w, r, rp) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		close(ep.closing)
		ep.srv.Close()
		transport.CloseIdleConnections()
	})
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+ep.srv.Listener.Addr().String()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	opts.Client = cli
	if opts.Image == "" {
		opts.Image = testImage(t)
	}
	p := New(opts)
	t.Cleanup(func() { p.Close() })
	return ep, p
}

// set installs the intercept for the requests that follow.
func (ep *engineProxy) set(f func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.intercept = f
}

// hang holds a request without answering until the client gives up on it (it closes
// the connection) or the test ends, then closes gaveUp if the client gave up.
func (ep *engineProxy) hang(r *http.Request, gaveUp chan<- struct{}) {
	// The server notices a closed connection only once the body is read.
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
		close(gaveUp)
	case <-ep.closing:
	}
}

// closeBounded closes sb at the end of a test, bounded: a sandbox a test left stuck
// must fail that test, not hang the package.
func closeBounded(t *testing.T, sb providers.Sandbox) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 15*time.Second)
	defer cancel()
	sb.Close(ctx)
}

// removeLeft removes what a failed test left behind, so one failure does not leak a
// container into the engine's list.
func removeLeft(t *testing.T, p *Provider, tok string) {
	ctx := context.WithoutCancel(t.Context())
	ids, _ := aliveIDs(ctx, p, tok)
	for _, id := range ids {
		_ = p.Delete(ctx, id)
	}
}

// match reports whether r is method on a path matching re (after the /v1.xx prefix).
func match(r *http.Request, method string, re *regexp.Regexp) bool {
	return r.Method == method && re.MatchString(regexp.MustCompile(`^/v[0-9.]+`).ReplaceAllString(r.URL.Path, ""))
}

// W6: a create the engine never answers ends with ctx, and a create that lands after
// talkops gave up is removed by its name.
func TestCreateHungHonoursCtx(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// late forwards the abandoned create to the engine, as an engine that acts on
		// a request after its client left would, and holds removals until it landed.
		late bool
	}{
		{name: "engine never answers"},
		{name: "create lands after the cancel", late: true},
	}
	createRe := regexp.MustCompile(`^/containers/create$`)
	deleteRe := regexp.MustCompile(`^/containers/talkops-[^/]+$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ep, p := newEngineProxy(t, Options{})
			tok := token(t)
			t.Cleanup(func() { removeLeft(t, p, tok) })
			gaveUp := make(chan struct{})
			landed := make(chan struct{})
			var deletes sync.WaitGroup
			ep.set(func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
				switch {
				case match(r, http.MethodPost, createRe):
					if !tt.late {
						ep.hang(r, gaveUp)
						return true
					}
					body, _ := io.ReadAll(r.Body)
					select {
					case <-r.Context().Done():
						close(gaveUp)
					case <-ep.closing:
						return true
					}
					// The client left; the engine creates the container anyway.
					late := r.Clone(context.WithoutCancel(r.Context()))
					late.Body = io.NopCloser(strings.NewReader(string(body)))
					rec := httptest.NewRecorder()
					forward.ServeHTTP(rec, late)
					if rec.Code != http.StatusCreated {
						t.Errorf("late create: engine answered %d %s", rec.Code, rec.Body)
					}
					close(landed)
					return true
				case tt.late && match(r, http.MethodDelete, deleteRe):
					deletes.Add(1)
					defer deletes.Done()
					select {
					case <-landed:
					case <-time.After(5 * time.Second):
					}
					return false
				}
				return false
			})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				sb, err := p.Create(ctx, providers.Spec{RunID: "hung-create", Labels: map[string]string{testLabel: tok}})
				if err == nil {
					sb.Close(context.WithoutCancel(ctx))
				}
				done <- err
			}()
			select {
			case <-gaveUp:
				t.Fatal("the client gave up on the create before ctx ended")
			case <-time.After(300 * time.Millisecond):
			}
			cancel()
			cancelled := time.Now()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Create still running 10 s after ctx was cancelled")
			}
			// The clean-up looks for a late container for removeByNameTimeout; the whole
			// return must still fit well inside GitHub's 10 s cancel window.
			if took := time.Since(cancelled); took > removeByNameTimeout+2*time.Second {
				t.Errorf("Create returned %s after the cancel, want within the clean-up bound (%s) and a little", took, removeByNameTimeout)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Create = %v, want context.Canceled", err)
			}
			select {
			case <-gaveUp:
			case <-time.After(2 * time.Second):
				t.Error("the create request was still open 2 s after Create returned")
			}
			if tt.late {
				select {
				case <-landed:
				case <-time.After(10 * time.Second):
					t.Fatal("the late create never landed")
				}
			}
			deletes.Wait()
			if ids, ok := aliveIDs(context.WithoutCancel(t.Context()), p, tok); !ok || len(ids) != 0 {
				t.Errorf("containers left after the cancelled create: %v (listed: %v)", ids, ok)
			}
		})
	}
}

// W7: a removal that another remover already runs is done, once the container is gone.
func TestRemoveAlreadyInProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		remove func(ctx context.Context, p *Provider, sb providers.Sandbox) error
	}{
		{"Provider.Delete (gc)", func(ctx context.Context, p *Provider, sb providers.Sandbox) error { return p.Delete(ctx, sb.ID()) }},
		{"Sandbox.Close (teardown)", func(ctx context.Context, _ *Provider, sb providers.Sandbox) error { return sb.Close(ctx) }},
	}
	deleteRe := regexp.MustCompile(`^/containers/[0-9a-f]{64}$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ep, p := newEngineProxy(t, Options{})
			tok := token(t)
			sb, err := p.Create(t.Context(), providers.Spec{RunID: "racing-gc", Labels: map[string]string{testLabel: tok}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Delete(context.WithoutCancel(t.Context()), sb.ID()) })
			var other sync.WaitGroup
			t.Cleanup(other.Wait)
			var once sync.Once
			ep.set(func(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
				if !match(r, http.MethodDelete, deleteRe) {
					return false
				}
				first := false
				once.Do(func() { first = true })
				if !first {
					return false
				}
				// Another gc got there first: its removal finishes a little later.
				other.Go(func() {
					time.Sleep(400 * time.Millisecond)
					rec := httptest.NewRecorder()
					forward.ServeHTTP(rec, r.Clone(context.WithoutCancel(r.Context())))
				})
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusConflict)
				fmt.Fprintf(w, `{"message":"removal of container %s is already in progress"}`+"\n", sb.ID())
				return true
			})
			if err := tt.remove(t.Context(), p, sb); err != nil {
				t.Errorf("remove while another removal runs = %v, want nil", err)
			}
			// Returning means done: the container is gone now, not later.
			if ids, ok := aliveIDs(t.Context(), p, tok); !ok || len(ids) != 0 {
				t.Errorf("after the remove returned, alive = %v (listed: %v), want none", ids, ok)
			}
		})
	}
}

// W8: an exec start the engine never answers ends with ctx or Close, and the connection
// it waited on is closed, so nothing is left waiting.
func TestExecStartHungHonoursCtx(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cancel  func(cancel context.CancelFunc, sb providers.Sandbox) // ends the wait
		wantErr error
	}{
		{"ctx cancelled", func(cancel context.CancelFunc, _ providers.Sandbox) { cancel() }, context.Canceled},
		{"sandbox closed", func(_ context.CancelFunc, sb providers.Sandbox) {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				sb.Close(ctx)
			}()
		}, providers.ErrClosed},
	}
	startRe := regexp.MustCompile(`^/exec/[0-9a-f]+/start$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ep, p := newEngineProxy(t, Options{})
			sb, err := p.Create(t.Context(), providers.Spec{RunID: "hung-exec", Labels: map[string]string{testLabel: token(t)}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closeBounded(t, sb) })
			if res := run(t, sb, "echo through-the-proxy"); string(res.Stdout) != "through-the-proxy\n" {
				t.Fatalf("exec through the proxy = %q %q, want its output", res.Stdout, res.Stderr)
			}
			arrived := make(chan struct{})
			gaveUp := make(chan struct{})
			var once sync.Once
			ep.set(func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
				if !match(r, http.MethodPost, startRe) {
					return false
				}
				first := false
				once.Do(func() { first = true })
				if !first {
					return false
				}
				close(arrived)
				ep.hang(r, gaveUp)
				return true
			})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := sb.Exec(ctx, providers.Shell("echo never"))
				done <- err
			}()
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
				t.Fatal("the exec start never reached the engine")
			}
			tt.cancel(cancel, sb)
			stopped := time.Now()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Exec still waiting for the engine 10 s after it was stopped")
			}
			if took := time.Since(stopped); took > time.Second {
				t.Errorf("Exec returned %s after it was stopped, want within a second", took)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Exec = %v, want %v", err, tt.wantErr)
			}
			select {
			case <-gaveUp:
			case <-time.After(2 * time.Second):
				t.Error("the connection of the abandoned exec start is still open")
			}
		})
	}
}

// TestExecStartEngineError checks the hand-made exec start reports the engine's answer.
func TestExecStartEngineError(t *testing.T) {
	t.Parallel()
	ep, p := newEngineProxy(t, Options{})
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "exec-404", Labels: map[string]string{testLabel: token(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBounded(t, sb) })
	startRe := regexp.MustCompile(`^/exec/[0-9a-f]+/start$`)
	ep.set(func(w http.ResponseWriter, r *http.Request, _ http.Handler) bool {
		if !match(r, http.MethodPost, startRe) {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, `{"message":"No such exec instance: gone"}`)
		return true
	})
	_, err = sb.Exec(t.Context(), providers.Shell("true"))
	if err == nil || !strings.Contains(err.Error(), "No such exec instance: gone") || !strings.Contains(err.Error(), "is gone") {
		t.Errorf("Exec with a 404 start = %v, want the engine's message and the container-gone hint", err)
	}
}
