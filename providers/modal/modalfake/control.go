package modalfake

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/talkops/talkops/providers/httpapi/fakekit"
	pb "github.com/talkops/talkops/providers/modal/internal/modalpb"
)

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// control serves modal.client.ModalClient.
type control struct {
	pb.UnimplementedModalClientServer
	s *Server
}

func (c *control) AuthTokenGet(ctx context.Context, _ *pb.AuthTokenGetRequest) (*pb.AuthTokenGetResponse, error) {
	if err := c.s.checkClient(ctx, "AuthTokenGet"); err != nil {
		return nil, err
	}
	tok, exp := issue(c.s.TokenTTL)
	c.s.mu.Lock()
	c.s.tokens[tok] = exp
	c.s.mu.Unlock()
	return &pb.AuthTokenGetResponse{Token: tok}, nil
}

func (c *control) AppGetOrCreate(ctx context.Context, req *pb.AppGetOrCreateRequest) (*pb.AppGetOrCreateResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	if req.GetAppName() == "" {
		return nil, status.Error(codes.InvalidArgument, "app_name is required")
	}
	key := req.GetEnvironmentName() + "/" + req.GetAppName()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	id, ok := c.s.apps[key]
	if !ok {
		if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_CREATE_IF_MISSING {
			return nil, status.Errorf(codes.NotFound, "App %q not found", req.GetAppName())
		}
		id = newID("ap-")
		c.s.apps[key] = id
	}
	return &pb.AppGetOrCreateResponse{AppId: id}, nil
}

func (c *control) ImageGetOrCreate(ctx context.Context, req *pb.ImageGetOrCreateRequest) (*pb.ImageGetOrCreateResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	cmds := req.GetImage().GetDockerfileCommands()
	if len(cmds) == 0 || !strings.HasPrefix(cmds[0], "FROM ") {
		return nil, status.Error(codes.InvalidArgument, "the image needs a FROM command")
	}
	sum := sha256.Sum256([]byte(strings.Join(cmds, "\n") + req.GetBuilderVersion()))
	id := "im-" + hex.EncodeToString(sum[:10])
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if _, ok := c.s.images[id]; !ok {
		c.s.images[id] = 0
	}
	if c.s.BuildAfter > 0 && c.s.images[id] < c.s.BuildAfter {
		return &pb.ImageGetOrCreateResponse{ImageId: id}, nil
	}
	return &pb.ImageGetOrCreateResponse{ImageId: id, Result: c.s.buildResult()}, nil
}

func (s *Server) buildResult() *pb.GenericResult {
	if s.ImageFailure != "" {
		return &pb.GenericResult{Status: pb.GenericResult_GENERIC_STATUS_FAILURE, Exception: s.ImageFailure}
	}
	return &pb.GenericResult{Status: pb.GenericResult_GENERIC_STATUS_SUCCESS}
}

func (c *control) ImageJoinStreaming(req *pb.ImageJoinStreamingRequest, stream grpc.ServerStreamingServer[pb.ImageJoinStreamingResponse]) error {
	if err := c.s.checkClient(stream.Context(), ""); err != nil {
		return err
	}
	c.s.mu.Lock()
	n, ok := c.s.images[req.GetImageId()]
	if ok {
		n++
		c.s.images[req.GetImageId()] = n
	}
	done := n >= c.s.BuildAfter
	c.s.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "Image %s not found", req.GetImageId())
	}
	entry := req.GetLastEntryId() + "+"
	if err := stream.Send(&pb.ImageJoinStreamingResponse{EntryId: entry}); err != nil {
		return err
	}
	if !done {
		return stream.Send(&pb.ImageJoinStreamingResponse{EntryId: entry + "+", Eof: true})
	}
	return stream.Send(&pb.ImageJoinStreamingResponse{EntryId: entry + "+", Result: c.s.buildResult(), Eof: true})
}

func (c *control) SecretGetOrCreate(ctx context.Context, req *pb.SecretGetOrCreateRequest) (*pb.SecretGetOrCreateResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	if req.GetObjectCreationType() != pb.ObjectCreationType_OBJECT_CREATION_TYPE_EPHEMERAL {
		return nil, status.Error(codes.InvalidArgument, "the fake only creates EPHEMERAL secrets")
	}
	id := newID("st-")
	env := map[string]string{}
	for k, v := range req.GetEnvDict() {
		env[k] = v
	}
	c.s.mu.Lock()
	c.s.secrets[id] = env
	c.s.mu.Unlock()
	return &pb.SecretGetOrCreateResponse{SecretId: id}, nil
}

func (c *control) SandboxCreate(ctx context.Context, req *pb.SandboxCreateRequest) (*pb.SandboxCreateResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	s := c.s
	def := req.GetDefinition()
	if req.GetAppId() == "" || def == nil || def.GetImageId() == "" {
		return nil, status.Error(codes.InvalidArgument, "app_id, definition and definition.image_id are required")
	}
	if def.Workdir != nil && !strings.HasPrefix(def.GetWorkdir(), "/") {
		return nil, status.Errorf(codes.InvalidArgument, "workdir %q must be an absolute path", def.GetWorkdir())
	}
	tags := map[string]string{}
	for _, t := range req.GetTags() {
		if t.GetTagName() == "" {
			return nil, status.Error(codes.InvalidArgument, "tag_name must not be empty")
		}
		tags[t.GetTagName()] = t.GetTagValue()
	}
	if def.GetTimeoutSecs() > 24*3600 {
		return nil, status.Error(codes.InvalidArgument, "timeout_secs must be at most 86400")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	key := ""
	if v := md.Get("x-idempotency-key"); len(v) > 0 {
		key = v[0]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byKey[key]; ok && key != "" {
		return &pb.SandboxCreateResponse{SandboxId: id}, nil
	}
	for _, sid := range def.GetSecretIds() {
		if _, ok := s.secrets[sid]; !ok {
			return nil, status.Errorf(codes.NotFound, "Secret %s not found", sid)
		}
	}
	if def.Name != nil {
		for _, b := range s.boxes.Live() {
			if b.appID == req.GetAppId() && b.name == def.GetName() {
				return nil, status.Errorf(codes.AlreadyExists, "Sandbox with name %q already exists", def.GetName())
			}
		}
	}
	timeout := def.GetTimeoutSecs()
	if timeout == 0 {
		timeout = 300
	}
	b := &box{id: newID("sb-"), name: def.GetName(), appID: req.GetAppId(), imageID: def.GetImageId(), taskID: newID("ta-"),
		workdir: def.GetWorkdir(), secretIDs: def.GetSecretIds(), tags: tags, timeoutSecs: timeout,
		created: time.Now(), home: homeDir(), procs: &fakekit.Procs{}, execs: map[string]*execution{}}
	if b.workdir == "" {
		b.workdir = "/"
	}
	if err := os.MkdirAll(b.workdir, 0o755); err != nil {
		return nil, status.Errorf(codes.Internal, "create workdir: %v", err)
	}
	b.env = s.envOf(req.GetAppId())
	id := b.id
	b.ttl = time.AfterFunc(time.Duration(timeout)*time.Second, func() { s.terminate(id) })
	s.boxes.Add(b.id, b)
	if key != "" {
		s.byKey[key] = b.id
	}
	return &pb.SandboxCreateResponse{SandboxId: b.id}, nil
}

// envOf is the environment an app belongs to; s.mu is held.
func (s *Server) envOf(appID string) string {
	for k, id := range s.apps {
		if id == appID {
			env, _, _ := strings.Cut(k, "/")
			return env
		}
	}
	return ""
}

func (c *control) SandboxGetFromName(ctx context.Context, req *pb.SandboxGetFromNameRequest) (*pb.SandboxGetFromNameResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	if req.GetSandboxName() == "" || req.GetAppName() == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox_name and app_name are required")
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if appID, ok := c.s.apps[req.GetEnvironmentName()+"/"+req.GetAppName()]; ok {
		for _, b := range c.s.boxes.Live() {
			if b.appID == appID && b.name == req.GetSandboxName() {
				return &pb.SandboxGetFromNameResponse{SandboxId: b.id}, nil
			}
		}
	}
	return nil, status.Errorf(codes.NotFound, "Sandbox with name %q not found in App %q", req.GetSandboxName(), req.GetAppName())
}

//nolint:revive // the name is the Modal service's rpc SandboxGetTaskId, dictated by the generated gRPC server interface
func (c *control) SandboxGetTaskId(ctx context.Context, req *pb.SandboxGetTaskIdRequest) (*pb.SandboxGetTaskIdResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	if d := c.s.TaskDelay; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	b, ok := c.s.boxes.Get(req.GetSandboxId())
	if !ok {
		if c.s.finished[req.GetSandboxId()] {
			return &pb.SandboxGetTaskIdResponse{TaskResult: &pb.GenericResult{Status: pb.GenericResult_GENERIC_STATUS_TERMINATED}}, nil
		}
		return nil, status.Errorf(codes.NotFound, "Sandbox %s not found", req.GetSandboxId())
	}
	b.polls++
	if c.s.NeverReady || b.polls <= c.s.TaskAfter {
		return &pb.SandboxGetTaskIdResponse{}, nil
	}
	return &pb.SandboxGetTaskIdResponse{TaskId: &b.taskID}, nil
}

func (c *control) TaskGetCommandRouterAccess(ctx context.Context, req *pb.TaskGetCommandRouterAccessRequest) (*pb.TaskGetCommandRouterAccessResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	if _, err := c.s.boxByTask(req.GetTaskId()); err != nil {
		return nil, err
	}
	jwt, exp := issue(c.s.RouterTTL)
	c.s.mu.Lock()
	c.s.jwts[jwt] = exp
	c.s.mu.Unlock()
	return &pb.TaskGetCommandRouterAccessResponse{Jwt: jwt, Url: c.s.URL}, nil
}

func (c *control) SandboxTerminate(ctx context.Context, req *pb.SandboxTerminateRequest) (*pb.SandboxTerminateResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	if c.s.terminate(req.GetSandboxId()) {
		return &pb.SandboxTerminateResponse{}, nil
	}
	c.s.mu.Lock()
	done := c.s.finished[req.GetSandboxId()]
	c.s.mu.Unlock()
	if done {
		return &pb.SandboxTerminateResponse{ExistingResult: &pb.GenericResult{Status: pb.GenericResult_GENERIC_STATUS_TERMINATED}}, nil
	}
	return nil, status.Errorf(codes.NotFound, "Sandbox %s not found", req.GetSandboxId())
}

func (c *control) SandboxList(ctx context.Context, req *pb.SandboxListRequest) (*pb.SandboxListResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	live := c.s.boxes.Live()
	sortByCreatedDesc(live)
	page := c.s.PageSize
	if page <= 0 {
		page = 100
	}
	resp := &pb.SandboxListResponse{}
	for _, b := range live {
		if req.GetEnvironmentName() != b.env || (req.GetAppId() != "" && req.GetAppId() != b.appID) {
			continue
		}
		created := float64(b.created.UnixNano()) / 1e9
		if req.GetBeforeTimestamp() > 0 && created >= req.GetBeforeTimestamp() {
			continue
		}
		match := true
		for _, t := range req.GetTags() {
			if v, ok := b.tags[t.GetTagName()]; !ok || v != t.GetTagValue() {
				match = false
			}
		}
		if !match {
			continue
		}
		info := &pb.SandboxInfo{Id: b.id, CreatedAt: created, AppId: b.appID, Name: b.name,
			TaskInfo: &pb.TaskInfo{Id: b.taskID, StartedAt: created}}
		for k, v := range b.tags {
			info.Tags = append(info.Tags, &pb.SandboxTag{TagName: k, TagValue: v})
		}
		resp.Sandboxes = append(resp.Sandboxes, info)
		if len(resp.Sandboxes) == page {
			break
		}
	}
	return resp, nil
}

func (c *control) ContainerFilesystemExec(ctx context.Context, req *pb.ContainerFilesystemExecRequest) (*pb.ContainerFilesystemExecResponse, error) {
	if err := c.s.checkClient(ctx, ""); err != nil {
		return nil, err
	}
	if _, err := c.s.boxByTask(req.GetTaskId()); err != nil {
		return nil, err
	}
	s := c.s
	execID := newID("fe-")
	resp := &pb.ContainerFilesystemExecResponse{ExecId: execID}
	var res fsResult
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r := req.GetFileExecRequestOneof().(type) {
	case *pb.ContainerFilesystemExecRequest_FileOpenRequest:
		var f *os.File
		var err error
		switch r.FileOpenRequest.GetMode() {
		case "rb", "r":
			f, err = os.Open(r.FileOpenRequest.GetPath())
		case "wb", "w":
			f, err = os.Create(r.FileOpenRequest.GetPath())
		case "ab", "a":
			f, err = os.OpenFile(r.FileOpenRequest.GetPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		default:
			return nil, status.Errorf(codes.InvalidArgument, "unsupported mode %q", r.FileOpenRequest.GetMode())
		}
		if err != nil {
			res.err = sysError(err)
			break
		}
		fd := newID("fd-")
		s.files[fd] = f
		resp.FileDescriptor = &fd
	case *pb.ContainerFilesystemExecRequest_FileWriteRequest:
		f, ok := s.files[r.FileWriteRequest.GetFileDescriptor()]
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "unknown file descriptor")
		}
		if _, err := f.Write(r.FileWriteRequest.GetData()); err != nil {
			res.err = sysError(err)
		}
	case *pb.ContainerFilesystemExecRequest_FileReadRequest:
		f, ok := s.files[r.FileReadRequest.GetFileDescriptor()]
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "unknown file descriptor")
		}
		var data []byte
		var err error
		if r.FileReadRequest.N != nil {
			data = make([]byte, r.FileReadRequest.GetN())
			var n int
			n, err = io.ReadFull(f, data)
			data = data[:n]
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = nil
			}
		} else {
			data, err = io.ReadAll(f)
		}
		if err != nil {
			res.err = sysError(err)
		}
		res.out = data
	case *pb.ContainerFilesystemExecRequest_FileFlushRequest:
		f, ok := s.files[r.FileFlushRequest.GetFileDescriptor()]
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "unknown file descriptor")
		}
		_ = f.Sync()
	case *pb.ContainerFilesystemExecRequest_FileCloseRequest:
		fd := r.FileCloseRequest.GetFileDescriptor()
		f, ok := s.files[fd]
		if !ok {
			return nil, status.Error(codes.InvalidArgument, "unknown file descriptor")
		}
		delete(s.files, fd)
		if err := f.Close(); err != nil {
			res.err = sysError(err)
		}
	default:
		return nil, status.Error(codes.Unimplemented, "the fake serves open, read, write, flush and close")
	}
	s.fsOut[execID] = res
	return resp, nil
}

// sysError turns a host error into the SystemErrorMessage Modal sends.
func sysError(err error) *pb.SystemErrorMessage {
	code := pb.SystemErrorCode_SYSTEM_ERROR_CODE_UNSPECIFIED
	switch {
	case errors.Is(err, fs.ErrNotExist):
		code = pb.SystemErrorCode_SYSTEM_ERROR_CODE_NOENT
	case errors.Is(err, syscall.EISDIR):
		code = pb.SystemErrorCode_SYSTEM_ERROR_CODE_ISDIR
	case errors.Is(err, fs.ErrPermission):
		code = pb.SystemErrorCode_SYSTEM_ERROR_CODE_ACCES
	}
	return &pb.SystemErrorMessage{ErrorCode: code, ErrorMessage: err.Error()}
}

// fsBatch is the largest output batch the fake sends.
const fsBatch = 1 << 20

func (c *control) ContainerFilesystemExecGetOutput(req *pb.ContainerFilesystemExecGetOutputRequest, stream grpc.ServerStreamingServer[pb.FilesystemRuntimeOutputBatch]) error {
	if err := c.s.checkClient(stream.Context(), ""); err != nil {
		return err
	}
	c.s.mu.Lock()
	res, ok := c.s.fsOut[req.GetExecId()]
	c.s.mu.Unlock()
	if !ok {
		return status.Errorf(codes.NotFound, "filesystem exec %s not found", req.GetExecId())
	}
	if res.err != nil {
		return stream.Send(&pb.FilesystemRuntimeOutputBatch{Error: res.err, Eof: true})
	}
	var idx uint64
	for out := res.out; len(out) > 0; idx++ {
		n := min(len(out), fsBatch)
		if err := stream.Send(&pb.FilesystemRuntimeOutputBatch{Output: [][]byte{out[:n]}, BatchIndex: idx}); err != nil {
			return err
		}
		out = out[n:]
	}
	if stalled(stream.Context()) {
		<-stream.Context().Done()
		return status.FromContextError(stream.Context().Err()).Err()
	}
	return stream.Send(&pb.FilesystemRuntimeOutputBatch{BatchIndex: idx, Eof: true})
}
