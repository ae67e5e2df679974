package modal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/talkops/talkops/internal/backoff"
	"github.com/talkops/talkops/providers/httpapi"
	"github.com/talkops/talkops/providers/httpapi/remote"
	pb "github.com/talkops/talkops/providers/modal/internal/modalpb"
)

// routerRefreshMargin is how long before its expiry the command router's JWT is
// replaced.
const routerRefreshMargin = 30 * time.Second

// writeChunk is the largest file_write_request sent; Modal's messages may be 100 MiB.
const writeChunk = 16 << 20

// driver runs scripts and moves files for one sandbox: commands through the task's
// command router, files through the control plane's filesystem RPCs.
type driver struct {
	p         *Provider
	sandboxID string
	taskID    string

	mu      sync.Mutex
	router  pb.TaskCommandRouterClient
	conn    *grpc.ClientConn
	url     string
	jwt     *tokenCache
	routerP *callPolicy
}

var _ remote.Driver = (*driver)(nil)

// routerClient returns the client of the task's command router, asking the control
// plane for its URL and JWT the first time.
func (d *driver) routerClient(ctx context.Context) (pb.TaskCommandRouterClient, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.router != nil {
		return d.router, nil
	}
	if d.jwt == nil {
		d.jwt = &tokenCache{now: time.Now, fetch: d.fetchRouterAccess}
	}
	if _, err := d.jwt.get(ctx, routerRefreshMargin); err != nil {
		return nil, err
	}
	u, err := url.Parse(d.url)
	if err != nil || u.Scheme != "https" {
		return nil, fmt.Errorf("modal: the command router URL %q is not https", d.url)
	}
	addr, tc, err := target(d.url, d.p.opts.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("modal: command router: %w", err)
	}
	d.routerP = &callPolicy{retry: d.p.opts.Retry, stats: d.p.opts.Stats, header: d.routerHeader,
		// A start is re-sent only after TaskExecPoll says the exec does not exist.
		noRetry:           map[string]bool{pb.TaskCommandRouter_TaskExecStart_FullMethodName: true},
		onUnauthenticated: d.jwt.invalidate}
	conn, err := dial(addr, tc, d.routerP.unary, d.routerP.stream)
	if err != nil {
		return nil, fmt.Errorf("modal: command router: %w", err)
	}
	d.conn, d.router = conn, pb.NewTaskCommandRouterClient(conn)
	return d.router, nil
}

// fetchRouterAccess asks for the router's URL and a fresh JWT.
func (d *driver) fetchRouterAccess(ctx context.Context) (string, error) {
	resp, err := d.p.api.TaskGetCommandRouterAccess(ctx, &pb.TaskGetCommandRouterAccessRequest{TaskId: d.taskID})
	if err != nil {
		return "", fmt.Errorf("modal: command router access for task %s: %w", d.taskID, describe(err))
	}
	if resp.GetJwt() == "" || resp.GetUrl() == "" {
		return "", errors.New("modal: TaskGetCommandRouterAccess returned no URL or JWT")
	}
	d.url = resp.GetUrl()
	return resp.GetJwt(), nil
}

func (d *driver) routerHeader(ctx context.Context, _ string) (metadata.MD, error) {
	tok, err := d.jwt.get(ctx, routerRefreshMargin)
	if err != nil {
		return nil, err
	}
	return metadata.Pairs("authorization", "Bearer "+tok,
		"x-modal-client-type", clientType, "x-modal-client-version", clientVersion), nil
}

// Run runs the script with sh -c through the command router: start (with a client
// exec id), stream stdout and stderr by offset, wait for the exit status.
func (d *driver) Run(ctx context.Context, r remote.Run) (remote.Result, error) {
	router, err := d.routerClient(ctx)
	if err != nil {
		return remote.Result{}, err
	}
	req := &pb.TaskExecStartRequest{
		TaskId:       d.taskID,
		ExecId:       newID(),
		CommandArgs:  []string{"sh", "-c", r.Script},
		StdoutConfig: pb.TaskExecStdoutConfig_TASK_EXEC_STDOUT_CONFIG_PIPE,
		StderrConfig: pb.TaskExecStderrConfig_TASK_EXEC_STDERR_CONFIG_PIPE,
	}
	if r.Timeout > 0 {
		req.TimeoutSecs = proto.Uint32(uint32((r.Timeout + time.Second - 1) / time.Second))
	}
	start := time.Now()
	if err := d.startExec(ctx, router, req); err != nil {
		return remote.Result{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	out := newStdio(d, router, req.ExecId, pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT, r.Stdout)
	errs := newStdio(d, router, req.ExecId, pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR, r.Stderr)
	go out.run(ctx)
	go errs.run(ctx)
	// On every return, also a failed one, the streams are stopped and gone: none writes
	// to r.Stdout or r.Stderr once Run has returned.
	defer func() {
		cancel()
		<-out.done
		<-errs.done
	}()

	wait, err := router.TaskExecWait(ctx, &pb.TaskExecWaitRequest{TaskId: d.taskID, ExecId: req.ExecId})
	if err != nil {
		return remote.Result{}, fmt.Errorf("wait for exec %s: %w", req.ExecId, describe(err))
	}
	elapsed := time.Since(start)
	// The command has exited: its output is complete on the server. A stream that went
	// quiet without ending is reopened at its offset.
	for _, s := range []*stdio{out, errs} {
		if err := s.finish(ctx, d.p.opts.StreamGrace); err != nil {
			return remote.Result{}, fmt.Errorf("read output of exec %s: %w", req.ExecId, err)
		}
	}
	res := remote.Result{Stdout: out.buf.Bytes(), Stderr: errs.buf.Bytes(), Streamed: true}
	switch x := wait.GetExitStatus().(type) {
	case *pb.TaskExecWaitResponse_Code:
		res.ExitCode = int(x.Code)
	case *pb.TaskExecWaitResponse_Signal:
		res.ExitCode = 128 + int(x.Signal)
		// A kill at the server-side timeout_secs is the command timing out.
		res.TimedOut = r.Timeout > 0 && elapsed >= r.Timeout
	default:
		return remote.Result{}, fmt.Errorf("exec %s: TaskExecWait returned no exit status", req.ExecId)
	}
	return res, nil
}

// startExec sends TaskExecStart. When it fails in a way that may have reached the
// server, it asks TaskExecPoll whether the exec exists: only a NOT_FOUND answer lets it
// send the start again, so a command never runs twice.
func (d *driver) startExec(ctx context.Context, router pb.TaskCommandRouterClient, req *pb.TaskExecStartRequest) error {
	retry := d.p.opts.Retry
	for attempt := 0; ; attempt++ {
		_, err := router.TaskExecStart(ctx, req)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return fmt.Errorf("start exec: %w", describe(err))
		}
		_, perr := router.TaskExecPoll(ctx, &pb.TaskExecPollRequest{TaskId: d.taskID, ExecId: req.ExecId})
		switch {
		case perr == nil:
			return nil // it started: read its output
		case status.Code(perr) != codes.NotFound:
			return fmt.Errorf("start exec: %w; whether it started is unknown (%w), so it is not sent again", describe(err), describe(perr))
		case attempt+1 >= retry.Attempts:
			return fmt.Errorf("start exec: %w [gave up after %d attempts]", describe(err), attempt+1)
		}
		if err := backoff.Sleep(ctx, retry.delay(attempt)); err != nil {
			return err
		}
	}
}

// stdio reads one output stream of an exec from its offset, reopening the stream when
// it breaks or goes quiet.
type stdio struct {
	d      *driver
	router pb.TaskCommandRouterClient
	execID string
	fd     pb.TaskExecStdioFileDescriptor
	w      io.Writer
	buf    bytes.Buffer

	mu     sync.Mutex
	cancel context.CancelFunc // the current stream's
	kicked bool
	done   chan struct{}
	err    error
}

func newStdio(d *driver, router pb.TaskCommandRouterClient, execID string, fd pb.TaskExecStdioFileDescriptor, w io.Writer) *stdio {
	return &stdio{d: d, router: router, execID: execID, fd: fd, w: w, done: make(chan struct{})}
}

func (s *stdio) run(ctx context.Context) {
	defer close(s.done)
	var offset uint64
	failures := 0
	for {
		sctx, cancel := context.WithCancel(ctx)
		s.mu.Lock()
		s.cancel = cancel
		s.mu.Unlock()
		stream, err := s.router.TaskExecStdioRead(sctx, &pb.TaskExecStdioReadRequest{TaskId: s.d.taskID, ExecId: s.execID, Offset: offset, FileDescriptor: s.fd})
		for err == nil {
			var msg *pb.TaskExecStdioReadResponse
			if msg, err = stream.Recv(); err == nil && len(msg.GetData()) > 0 {
				s.buf.Write(msg.GetData())
				if s.w != nil {
					_, _ = s.w.Write(msg.GetData())
				}
				offset += uint64(len(msg.GetData()))
				failures = 0
			}
		}
		cancel()
		s.mu.Lock()
		kicked := s.kicked
		s.kicked = false
		s.mu.Unlock()
		switch {
		case errors.Is(err, io.EOF):
			return
		case ctx.Err() != nil:
			s.err = ctx.Err()
			return
		case kicked:
			continue
		case !retryable(err) || failures+1 >= s.d.p.opts.Retry.Attempts:
			s.err = describe(err)
			return
		}
		failures++
		if s.err = backoff.Sleep(ctx, s.d.p.opts.Retry.delay(failures)); s.err != nil {
			return
		}
	}
}

// finish waits for the stream to end; every grace period it has not, its current
// stream is cancelled and reopened at the offset read so far.
func (s *stdio) finish(ctx context.Context, grace time.Duration) error {
	for {
		t := time.NewTimer(grace)
		select {
		case <-s.done:
			t.Stop()
			return s.err
		case <-ctx.Done():
			t.Stop()
			<-s.done
			return ctx.Err()
		case <-t.C:
			s.mu.Lock()
			s.kicked = true
			if s.cancel != nil {
				s.cancel()
			}
			s.mu.Unlock()
		}
	}
}

// fsExec runs one filesystem request and collects its output batches.
func (d *driver) fsExec(ctx context.Context, req *pb.ContainerFilesystemExecRequest) (*pb.ContainerFilesystemExecResponse, []byte, error) {
	req.TaskId = d.taskID
	resp, err := d.p.api.ContainerFilesystemExec(ctx, req)
	if err != nil {
		return nil, nil, describe(err)
	}
	var out bytes.Buffer
	for attempt := 0; ; {
		stream, err := d.p.api.ContainerFilesystemExecGetOutput(ctx, &pb.ContainerFilesystemExecGetOutputRequest{ExecId: resp.GetExecId(), Timeout: 55})
		for err == nil {
			var batch *pb.FilesystemRuntimeOutputBatch
			if batch, err = stream.Recv(); err != nil {
				break
			}
			for _, b := range batch.GetOutput() {
				out.Write(b)
			}
			if e := batch.GetError(); e != nil {
				return resp, nil, &fsError{code: e.GetErrorCode(), msg: e.GetErrorMessage()}
			}
			if batch.GetEof() {
				return resp, out.Bytes(), nil
			}
		}
		// The output of one request is fetched once; a broken stream before any batch
		// arrived is asked again, one that broke mid-way is an error.
		if ctx.Err() != nil || out.Len() > 0 || !retryable(err) || attempt+1 >= d.p.opts.Retry.Attempts {
			if errors.Is(err, io.EOF) {
				err = errors.New("output stream ended without eof")
			}
			return resp, nil, describe(err)
		}
		attempt++
		if err := backoff.Sleep(ctx, d.p.opts.Retry.delay(attempt)); err != nil {
			return resp, nil, err
		}
	}
}

type fsError struct {
	code pb.SystemErrorCode
	msg  string
}

func (e *fsError) Error() string {
	return fmt.Sprintf("%s (%s)", e.msg, e.code)
}

func (e *fsError) Unwrap() error {
	if e.code == pb.SystemErrorCode_SYSTEM_ERROR_CODE_NOENT {
		return fs.ErrNotExist
	}
	return nil
}

// open opens path in the sandbox and returns its file descriptor.
func (d *driver) open(ctx context.Context, path, mode string) (string, error) {
	resp, _, err := d.fsExec(ctx, &pb.ContainerFilesystemExecRequest{FileExecRequestOneof: &pb.ContainerFilesystemExecRequest_FileOpenRequest{
		FileOpenRequest: &pb.ContainerFileOpenRequest{Path: path, Mode: mode}}})
	if err != nil {
		return "", fmt.Errorf("open %s: %w", path, err)
	}
	if resp.GetFileDescriptor() == "" {
		return "", fmt.Errorf("open %s: no file descriptor returned", path)
	}
	return resp.GetFileDescriptor(), nil
}

func (d *driver) closeFile(ctx context.Context, fd string) error {
	_, _, err := d.fsExec(ctx, &pb.ContainerFilesystemExecRequest{FileExecRequestOneof: &pb.ContainerFilesystemExecRequest_FileCloseRequest{
		FileCloseRequest: &pb.ContainerFileCloseRequest{FileDescriptor: fd}}})
	return err
}

// WriteFile writes body to path: open("wb"), writes of up to writeChunk, close.
func (d *driver) WriteFile(ctx context.Context, path string, body *httpapi.Body) error {
	rc, err := body.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	fd, err := d.open(ctx, path, "wb")
	if err != nil {
		return err
	}
	buf := make([]byte, min(writeChunk, max(body.Size, 1)))
	for {
		n, rerr := io.ReadFull(rc, buf)
		if n > 0 {
			_, _, err := d.fsExec(ctx, &pb.ContainerFilesystemExecRequest{FileExecRequestOneof: &pb.ContainerFilesystemExecRequest_FileWriteRequest{
				FileWriteRequest: &pb.ContainerFileWriteRequest{FileDescriptor: fd, Data: buf[:n]}}})
			if err != nil {
				_ = d.closeFile(context.WithoutCancel(ctx), fd)
				return fmt.Errorf("write %s: %w", path, err)
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			_ = d.closeFile(context.WithoutCancel(ctx), fd)
			return rerr
		}
	}
	if err := d.closeFile(ctx, fd); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// ReadFile reads the whole file at path: open("rb"), read, close.
func (d *driver) ReadFile(ctx context.Context, path string) (io.ReadCloser, error) {
	fd, err := d.open(ctx, path, "rb")
	if err != nil {
		return nil, err
	}
	_, data, err := d.fsExec(ctx, &pb.ContainerFilesystemExecRequest{FileExecRequestOneof: &pb.ContainerFilesystemExecRequest_FileReadRequest{
		FileReadRequest: &pb.ContainerFileReadRequest{FileDescriptor: fd}}})
	cerr := d.closeFile(context.WithoutCancel(ctx), fd)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("close %s: %w", path, cerr)
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

// Delete terminates the sandbox and drops the router connection.
func (d *driver) Delete(ctx context.Context) error {
	err := d.p.Delete(ctx, d.sandboxID)
	d.mu.Lock()
	if d.conn != nil {
		_ = d.conn.Close()
		d.conn, d.router = nil, nil
	}
	d.mu.Unlock()
	return err
}
