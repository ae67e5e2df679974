package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/talkops/talkops/agent/tools"
	"github.com/talkops/talkops/providers"
)

// Defaults for zero Options fields.
const (
	DefaultStartTimeout = time.Minute
	DefaultCallTimeout  = 5 * time.Minute
	// DefaultMaxMessage caps one message from a server (a tool list, a call's result),
	// as execute keeps 4 MiB of each stream: a bigger one fails that call instead of
	// filling talkops's memory (over stdio the SDK then drops the session).
	DefaultMaxMessage = 4 << 20
)

// stderrTail is how much of a server's stderr is kept for error messages.
const stderrTail = 4 << 10

// Options configure Start.
type Options struct {
	// Sandbox runs stdio servers when it is a providers.StreamExecer.
	Sandbox providers.Sandbox
	// StartTimeout bounds one server's start and tool listing; CallTimeout one call.
	StartTimeout time.Duration
	CallTimeout  time.Duration
	// MaxMessage caps one message from a server, in bytes.
	MaxMessage int
	// Version is sent to servers as the client's version.
	Version string
	// Warn reports a problem that does not stop the run (a server moved to the host, a
	// tool skipped).
	Warn func(msg string)
}

// Set is the running servers of one run.
type Set struct {
	opts    Options
	servers []*server
	tools   []tools.Tool
	closed  sync.Once
}

// server is one started server.
type server struct {
	cfg     Server
	session *sdk.ClientSession
	stderr  *tailBuffer
	where   string          // "sandbox", "host" or the URL host
	stop    func()          // kills the process (stdio); nil for URL servers
	done    <-chan struct{} // closed when the process exited (stdio)
	exit    func() string   // how the exited process ended, for messages; nil if unknown
}

// Start starts every server, one after the other, and lists their tools. When one fails
// the others are stopped and the error names the server and ends with its stderr.
func Start(ctx context.Context, servers []Server, opts Options) (*Set, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.Warn == nil {
		opts.Warn = func(string) {}
	}
	set := &Set{opts: opts}
	for _, cfg := range servers {
		s, err := set.start(ctx, cfg)
		if err != nil {
			set.Close(context.WithoutCancel(ctx))
			return nil, err
		}
		set.servers = append(set.servers, s)
		if err := set.addTools(ctx, s); err != nil {
			set.Close(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	return set, nil
}

// Tools returns every server's tools, in configuration order.
func (set *Set) Tools() []tools.Tool { return set.tools }

// Close stops every server: processes are killed and sessions closed. It returns once
// they are gone, or when ctx ends (the teardown budget), and is idempotent.
func (set *Set) Close(ctx context.Context) {
	if set == nil {
		return
	}
	set.closed.Do(func() {
		var wg sync.WaitGroup
		for _, srv := range set.servers {
			wg.Go(func() { srv.close(ctx) })
		}
		wg.Wait()
	})
}

func (s *server) close(ctx context.Context) {
	if s.stop != nil {
		// Kill first: a polite close could wait on a server that ignores stdin's end.
		s.stop()
		select {
		case <-s.done:
		case <-ctx.Done():
			return
		}
	}
	if s.session != nil {
		closed := make(chan struct{})
		go func() {
			_ = s.session.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-ctx.Done():
		}
	}
}

// died reports whether a stdio server's process has exited.
func (s *server) died() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stderrNote says how an exited server ended and ends with its stderr tail, for an error
// message; "" for a URL server.
func (s *server) stderrNote() string {
	if s.stderr == nil {
		return ""
	}
	note := ""
	if s.died() && s.exit != nil {
		note = "; " + s.exit()
	}
	tail := strings.TrimSpace(s.stderr.String())
	if tail == "" {
		return note + "; it wrote nothing to stderr"
	}
	return note + "; its stderr ends with:\n" + tail
}

// describe names the server and where it was configured and runs, for messages.
func (s *server) describe() string {
	where := s.place()
	if s.cfg.Source != "" {
		where = s.cfg.Source + ", " + where
	}
	return fmt.Sprintf("MCP server %q (%s)", s.cfg.Name, where)
}

func (set *Set) start(ctx context.Context, cfg Server) (*server, error) {
	sctx, cancel := context.WithTimeout(ctx, set.opts.StartTimeout)
	defer cancel()
	s := &server{cfg: cfg}
	var transport sdk.Transport
	switch {
	case cfg.URL != "":
		s.where = cfg.URL
		transport = &sdk.StreamableClientTransport{
			Endpoint:             cfg.URL,
			HTTPClient:           httpClient(cfg),
			MaxRetries:           -1,
			DisableStandaloneSSE: true,
			MaxEventSize:         set.opts.MaxMessage,
		}
	default:
		r, w, err := set.startProcess(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("%s did not start: %w", s.describe(), err)
		}
		transport = &sdk.IOTransport{Reader: r, Writer: w, MaxLineLength: set.opts.MaxMessage}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "talkops", Version: set.opts.Version}, nil)
	session, err := client.Connect(sctx, transport, nil)
	if err != nil {
		if s.stop != nil {
			// Give a crashing process a moment to finish writing its stderr.
			select {
			case <-s.done:
			case <-time.After(time.Second):
			}
			s.stop()
			<-s.done
		}
		why := err.Error()
		if errors.Is(sctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			why = fmt.Sprintf("no answer to initialize within %s", set.opts.StartTimeout)
		}
		return nil, fmt.Errorf("%s did not start: %s%s", s.describe(), why, s.stderrNote())
	}
	s.session = session
	return s, nil
}

// place says where a server runs, for messages.
func (s *server) place() string {
	if s.cfg.URL != "" {
		return "called from the host"
	}
	return "on the " + s.where
}

// startProcess starts a stdio server in the sandbox when the sandbox can stream, else
// on the host, and returns its stdout and stdin.
func (set *Set) startProcess(ctx context.Context, s *server) (io.ReadCloser, io.WriteCloser, error) {
	cfg := s.cfg
	s.stderr = &tailBuffer{max: stderrTail}
	argv := append([]string{cfg.Command}, cfg.Args...)
	streamer, canStream := set.opts.Sandbox.(providers.StreamExecer)
	if !cfg.Host && canStream {
		s.where = "sandbox"
		// The server lives until Close; only the run's end bounds it, not ctx of Start.
		st, err := streamer.ExecStream(context.WithoutCancel(ctx), providers.Cmd{Argv: argv, Env: cfg.Env, Stderr: s.stderr})
		if err != nil {
			return nil, nil, err
		}
		s.stop, s.done = st.Kill, st.Done()
		s.exit = func() string {
			res, err := st.Wait()
			if err != nil {
				return err.Error()
			}
			// Exec reports a program it cannot run as exit 126 or 127 with a message
			// of its own, which the stream's stderr never saw.
			msg := fmt.Sprintf("it exited with code %d", res.ExitCode)
			if res.ExitCode == 126 || res.ExitCode == 127 {
				msg += " (" + strings.TrimSpace(lastLine(string(res.Stderr))) + ")"
			}
			return msg
		}
		return st.Stdout, st.Stdin, nil
	}
	if !cfg.Host {
		set.opts.Warn(fmt.Sprintf("MCP server %q runs on the host: this sandbox provider cannot stream a command's stdin and stdout", cfg.Name))
	}
	s.where = "host"
	return startHost(s, argv)
}

// startHost runs argv on the host in its own process group, with an environment of PATH
// and the configured env only, killed with talkops.
func startHost(s *server, argv []string) (io.ReadCloser, io.WriteCloser, error) {
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(prog, argv[1:]...)
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		env = append(env, k+"="+s.cfg.Env[k])
	}
	cmd.Env = env
	cmd.Stderr = s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.exit = func() string { return "it exited: " + cmd.ProcessState.String() }
	var once sync.Once
	s.done = done
	s.stop = func() {
		once.Do(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	}
	return stdout, stdin, nil
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
