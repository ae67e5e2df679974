package modalfake

import (
	"context"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talkops/talkops/providers/httpapi/fakekit"
	pb "github.com/talkops/talkops/providers/modal/internal/modalpb"
)

// router serves modal.task_command_router.TaskCommandRouter.
type router struct {
	pb.UnimplementedTaskCommandRouterServer
	s *Server
}

// execution is one command started with TaskExecStart.
type execution struct {
	mu      sync.Mutex
	out     [2][]byte // stdout, stderr
	changed chan struct{}
	done    bool
	code    int32
	signal  int32
	exited  chan struct{}
}

type stdioWriter struct {
	e  *execution
	fd int
}

func (w stdioWriter) Write(p []byte) (int, error) {
	w.e.mu.Lock()
	w.e.out[w.fd] = append(w.e.out[w.fd], p...)
	close(w.e.changed)
	w.e.changed = make(chan struct{})
	w.e.mu.Unlock()
	return len(p), nil
}

func (r *router) TaskExecStart(ctx context.Context, req *pb.TaskExecStartRequest) (*pb.TaskExecStartResponse, error) {
	if err := r.s.checkRouter(ctx); err != nil {
		return nil, err
	}
	b, err := r.s.boxByTask(req.GetTaskId())
	if err != nil {
		return nil, err
	}
	if req.GetExecId() == "" || len(req.GetCommandArgs()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec_id and command_args are required")
	}
	total := 0
	for _, a := range req.GetCommandArgs() {
		total += len(a)
	}
	if total > 65536 {
		return nil, status.Errorf(codes.InvalidArgument, "command arguments are %d bytes, more than 65536", total)
	}
	dir := b.workdir
	if req.Workdir != nil {
		dir = req.GetWorkdir()
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, status.Errorf(codes.FailedPrecondition, "workdir %s does not exist", dir)
	}
	r.s.mu.Lock()
	if _, dup := b.execs[req.GetExecId()]; dup {
		r.s.mu.Unlock()
		return nil, status.Errorf(codes.AlreadyExists, "exec %s already exists", req.GetExecId())
	}
	env := fakekit.BaseEnv(b.home)
	for _, sid := range append(append([]string{}, b.secretIDs...), req.GetSecretIds()...) {
		for k, v := range r.s.secrets[sid] {
			env = append(env, k+"="+v)
		}
	}
	e := &execution{changed: make(chan struct{}), exited: make(chan struct{})}
	b.execs[req.GetExecId()] = e
	r.s.mu.Unlock()

	args := req.GetCommandArgs()
	cmd := fakekit.Command{Path: args[0], Args: args[1:], Dir: dir, Env: env,
		Stdout: stdioWriter{e, 0}, Stderr: stdioWriter{e, 1}}
	if req.TimeoutSecs != nil && req.GetTimeoutSecs() > 0 {
		cmd.Timeout = time.Duration(req.GetTimeoutSecs()) * time.Second
	}
	if p, err := lookPath(args[0], env); err == nil {
		cmd.Path = p
	}
	// The command outlives this call, as on Modal; the fake's Close kills what still runs.
	go func(ctx context.Context) {
		o := b.procs.Run(ctx, cmd)
		e.mu.Lock()
		switch {
		case o.StartErr != nil:
			e.code = 127
			e.out[1] = append(e.out[1], []byte(o.StartErr.Error()+"\n")...)
		case o.TimedOut || o.Killed:
			e.signal = 9
		default:
			e.code = int32(o.ExitCode)
		}
		e.done = true
		close(e.changed)
		e.changed = make(chan struct{})
		e.mu.Unlock()
		close(e.exited)
	}(context.WithoutCancel(ctx))
	return &pb.TaskExecStartResponse{}, nil
}

func (r *router) execution(taskID, execID string) (*execution, error) {
	b, err := r.s.boxByTask(taskID)
	if err != nil {
		return nil, err
	}
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	e, ok := b.execs[execID]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "exec %s not found", execID)
	}
	return e, nil
}

func (r *router) TaskExecPoll(ctx context.Context, req *pb.TaskExecPollRequest) (*pb.TaskExecPollResponse, error) {
	if err := r.s.checkRouter(ctx); err != nil {
		return nil, err
	}
	e, err := r.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case !e.done:
		return &pb.TaskExecPollResponse{}, nil
	case e.signal != 0:
		return &pb.TaskExecPollResponse{ExitStatus: &pb.TaskExecPollResponse_Signal{Signal: e.signal}}, nil
	}
	return &pb.TaskExecPollResponse{ExitStatus: &pb.TaskExecPollResponse_Code{Code: e.code}}, nil
}

func (r *router) TaskExecWait(ctx context.Context, req *pb.TaskExecWaitRequest) (*pb.TaskExecWaitResponse, error) {
	if err := r.s.checkRouter(ctx); err != nil {
		return nil, err
	}
	e, err := r.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return nil, err
	}
	select {
	case <-e.exited:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.signal != 0 {
		return &pb.TaskExecWaitResponse{ExitStatus: &pb.TaskExecWaitResponse_Signal{Signal: e.signal}}, nil
	}
	return &pb.TaskExecWaitResponse{ExitStatus: &pb.TaskExecWaitResponse_Code{Code: e.code}}, nil
}

// TaskExecStdioRead streams one output of an exec from the offset until the command
// has exited and everything was sent.
func (r *router) TaskExecStdioRead(req *pb.TaskExecStdioReadRequest, stream grpc.ServerStreamingServer[pb.TaskExecStdioReadResponse]) error {
	ctx := stream.Context()
	if err := r.s.checkRouter(ctx); err != nil {
		return err
	}
	e, err := r.execution(req.GetTaskId(), req.GetExecId())
	if err != nil {
		return err
	}
	fd := 0
	if req.GetFileDescriptor() == pb.TaskExecStdioFileDescriptor_TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR {
		fd = 1
	}
	offset := req.GetOffset()
	for {
		e.mu.Lock()
		var data []byte
		if offset < uint64(len(e.out[fd])) {
			data = append([]byte(nil), e.out[fd][offset:]...)
		}
		done, changed := e.done, e.changed
		e.mu.Unlock()
		if len(data) > 0 {
			for len(data) > 0 {
				n := min(len(data), fsBatch)
				if err := stream.Send(&pb.TaskExecStdioReadResponse{Data: data[:n]}); err != nil {
					return err
				}
				data = data[n:]
				offset += uint64(n)
			}
			continue
		}
		if stalled(ctx) {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		}
		if done {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}
