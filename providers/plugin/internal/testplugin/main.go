// Command testplugin is a sandbox provider plugin written in Go, for talkops' tests: each
// sandbox is a directory on the host and commands run in it with sh. Its hello options
// choose the sandboxes' root directory and, for fault tests, a fault to inject:
//
//	root  = "/path"         where sandboxes are made (required)
//	fault = "crash:exec"    exit 3 when the operation is asked for
//	        "hang:create"   never answer that operation
//	        "garbage:exec"  answer with a line that is not JSON
//	        "huge:exec"     answer with a 20 MiB line
//	        "deaf:upload_begin"  answer that operation, then never read stdin again
//	        "version"       answer hello with protocol version 99
//
// Each process writes its pid to ROOT/pids/PID so tests can check none outlives a run.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

type request struct {
	ID     int64           `json:"id"`
	Op     string          `json:"op"`
	Params json.RawMessage `json:"params"`
}

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type server struct {
	wmu   sync.Mutex
	out   *bufio.Writer
	root  string
	fault string

	mu      sync.Mutex
	uploads map[string]*os.File
	upMeta  map[string]upload
}

type upload struct {
	sandbox, path string
	extract       bool
}

func main() {
	s := &server{out: bufio.NewWriter(os.Stdout), uploads: map[string]*os.File{}, upMeta: map[string]upload{}}
	fmt.Fprintln(os.Stderr, "testplugin: started, pid", os.Getpid())
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	var wg sync.WaitGroup
	for {
		line, err := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var req request
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				fmt.Fprintln(os.Stderr, "testplugin: bad request:", jerr)
				os.Exit(2)
			}
			if req.Op == "hello" || req.Op == "shutdown" {
				s.handle(req) // in order: everything after hello needs its options
				if req.Op == "shutdown" {
					wg.Wait()
					return
				}
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); s.handle(req) }()
			if kind, target, _ := strings.Cut(s.fault, ":"); kind == "deaf" && target == req.Op {
				fmt.Fprintf(os.Stderr, "testplugin: no longer reading requests after %s as asked\n", req.Op)
				for {
					time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock and exit
				}
			}
		}
		if err != nil {
			// stdin closed without a shutdown: talkops is gone. Exit now; what runs in
			// the sandboxes stays for `talkops sandbox gc`, as on a remote platform.
			fmt.Fprintln(os.Stderr, "testplugin: stdin closed, exiting")
			return
		}
	}
}

func (s *server) send(v any) {
	b, _ := json.Marshal(v)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _ = s.out.Write(b)
	_ = s.out.WriteByte('\n')
	_ = s.out.Flush()
}

func (s *server) reply(id int64, result any, err error) {
	if err != nil {
		code := "failed"
		var ce codeError
		switch {
		case errors.As(err, &ce):
			code = ce.code
		case errors.Is(err, fs.ErrNotExist):
			code = "not_found"
		}
		s.send(map[string]any{"id": id, "error": wireError{Code: code, Message: err.Error()}})
		return
	}
	if result == nil {
		result = struct{}{}
	}
	s.send(map[string]any{"id": id, "result": result})
}

type codeError struct{ code, msg string }

func (e codeError) Error() string { return e.msg }

func (s *server) injected(op string) {
	kind, target, _ := strings.Cut(s.fault, ":")
	if target != op {
		return
	}
	switch kind {
	case "crash":
		fmt.Fprintf(os.Stderr, "testplugin: crashing in %s as asked\n", op)
		os.Exit(3)
	case "hang":
		fmt.Fprintf(os.Stderr, "testplugin: hanging in %s as asked\n", op)
		select {}
	case "garbage":
		s.wmu.Lock()
		_, _ = s.out.WriteString("this is not json {\n")
		_ = s.out.Flush()
		s.wmu.Unlock()
		select {}
	case "huge":
		s.wmu.Lock()
		_, _ = s.out.WriteString(`{"id":0,"result":"` + strings.Repeat("x", 20<<20) + "\"}\n")
		_ = s.out.Flush()
		s.wmu.Unlock()
		select {}
	}
}

func (s *server) handle(req request) {
	if req.Op != "hello" {
		s.injected(req.Op)
	}
	var (
		res any
		err error
	)
	switch req.Op {
	case "hello":
		res, err = s.hello(req.Params)
	case "shutdown":
	case "create":
		res, err = s.create(req.Params)
	case "attach":
		res, err = s.attach(req.Params)
	case "exec":
		res, err = s.exec(req.Params)
	case "upload_begin":
		res, err = s.uploadBegin(req.Params)
	case "upload_chunk":
		err = s.uploadChunk(req.Params)
	case "upload_end":
		err = s.uploadEnd(req.Params, true)
	case "upload_abort":
		err = s.uploadEnd(req.Params, false)
	case "read":
		res, err = s.read(req.Params)
	case "delete":
		err = s.delete(req.Params)
	case "list":
		res, err = s.list(req.Params)
	default:
		err = codeError{"not_supported", "unknown operation " + req.Op}
	}
	s.reply(req.ID, res, err)
}

func (s *server) hello(raw json.RawMessage) (any, error) {
	var p struct {
		Protocol int `json:"protocol"`
		Options  struct {
			Root  string `json:"root"`
			Fault string `json:"fault"`
		} `json:"options"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	if p.Options.Root == "" {
		return nil, codeError{"invalid", "option root is required"}
	}
	s.root, s.fault = p.Options.Root, p.Options.Fault
	if err := os.MkdirAll(filepath.Join(s.root, "pids"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.root, "pids", strconv.Itoa(os.Getpid())), nil, 0o644); err != nil {
		return nil, err
	}
	s.injected("hello")
	version := 1
	if s.fault == "version" {
		version = 99
	}
	return map[string]any{"protocol": version, "name": "testplugin",
		"capabilities": map[string]bool{"attach": true, "list": true, "ttl": false, "snapshots": false}}, nil
}

type meta struct {
	ID        string            `json:"id"`
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"created_at"`
}

func (s *server) dir(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return "", codeError{"not_found", "no sandbox " + strconv.Quote(id)}
	}
	d := filepath.Join(s.root, "sandboxes", id)
	if _, err := os.Stat(filepath.Join(d, "meta.json")); err != nil {
		return "", codeError{"not_found", "no sandbox " + strconv.Quote(id)}
	}
	return d, nil
}

func (s *server) create(raw json.RawMessage) (any, error) {
	var p struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := "sb-" + hex.EncodeToString(b)
	d := filepath.Join(s.root, "sandboxes", id)
	if err := os.MkdirAll(filepath.Join(d, "fs", "workspace"), 0o755); err != nil {
		return nil, err
	}
	m, _ := json.Marshal(meta{ID: id, Labels: p.Labels, CreatedAt: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(d, "meta.json"), m, 0o644); err != nil {
		return nil, err
	}
	return map[string]string{"sandbox_id": id, "working_dir": filepath.Join(d, "fs", "workspace")}, nil
}

func (s *server) attach(raw json.RawMessage) (any, error) {
	var p struct {
		ID string `json:"sandbox_id"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	d, err := s.dir(p.ID)
	if err != nil {
		return nil, err
	}
	return map[string]string{"sandbox_id": p.ID, "working_dir": filepath.Join(d, "fs", "workspace")}, nil
}

func (s *server) exec(raw json.RawMessage) (any, error) {
	var p struct {
		ID          string            `json:"sandbox_id"`
		Command     string            `json:"command"`
		Workdir     string            `json:"workdir"`
		Env         map[string]string `json:"env"`
		Timeout     int64             `json:"timeout_seconds"`
		OutputLimit int               `json:"output_limit"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	d, err := s.dir(p.ID)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(p.Timeout)*time.Second)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", p.Command)
	cmd.Dir = p.Workdir
	if cmd.Dir == "" {
		cmd.Dir = filepath.Join(d, "fs", "workspace")
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(d, "fs")}
	for k, v := range p.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var stdout, stderr capped
	stdout.limit, stderr.limit = p.OutputLimit, p.OutputLimit
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	res := map[string]any{"exit_code": 0}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		res["exit_code"], res["timed_out"] = 124, true
	case errors.As(err, &ee):
		res["exit_code"] = ee.ExitCode()
	case err != nil:
		return nil, err
	}
	res["stdout"], res["stderr"] = stdout.bytes(), stderr.bytes()
	res["truncated"] = stdout.dropped > 0 || stderr.dropped > 0
	return res, nil
}

// capped keeps the head and tail of a stream, limit bytes in all.
type capped struct {
	limit      int
	head, tail []byte
	dropped    int
}

func (c *capped) Write(b []byte) (int, error) {
	n := len(b)
	if c.limit <= 0 {
		c.head = append(c.head, b...)
		return n, nil
	}
	half := c.limit / 2
	if room := half - len(c.head); room > 0 {
		k := min(room, len(b))
		c.head = append(c.head, b[:k]...)
		b = b[k:]
	}
	c.tail = append(c.tail, b...)
	if over := len(c.tail) - (c.limit - half); over > 0 {
		c.dropped += over
		c.tail = append(c.tail[:0], c.tail[over:]...)
	}
	return n, nil
}

func (c *capped) bytes() []byte { return append(append([]byte{}, c.head...), c.tail...) }

func (s *server) uploadBegin(raw json.RawMessage) (any, error) {
	var p struct {
		ID      string `json:"sandbox_id"`
		Path    string `json:"path"`
		Extract bool   `json:"extract"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	if _, err := s.dir(p.ID); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "testplugin-upload-*")
	if err != nil {
		return nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	uid := hex.EncodeToString(b)
	s.mu.Lock()
	s.uploads[uid], s.upMeta[uid] = f, upload{p.ID, p.Path, p.Extract}
	s.mu.Unlock()
	return map[string]string{"upload_id": uid}, nil
}

func (s *server) uploadChunk(raw json.RawMessage) error {
	var p struct {
		UploadID string `json:"upload_id"`
		Data     []byte `json:"data"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	s.mu.Lock()
	f := s.uploads[p.UploadID]
	s.mu.Unlock()
	if f == nil {
		return codeError{"invalid", "no upload " + p.UploadID}
	}
	_, err := f.Write(p.Data)
	return err
}

func (s *server) uploadEnd(raw json.RawMessage, commit bool) error {
	var p struct {
		UploadID string `json:"upload_id"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	s.mu.Lock()
	f, m := s.uploads[p.UploadID], s.upMeta[p.UploadID]
	delete(s.uploads, p.UploadID)
	delete(s.upMeta, p.UploadID)
	s.mu.Unlock()
	if f == nil {
		return codeError{"invalid", "no upload " + p.UploadID}
	}
	defer os.Remove(f.Name())
	if err := f.Close(); err != nil || !commit {
		return err
	}
	if m.extract {
		if err := os.MkdirAll(m.path, 0o755); err != nil {
			return err
		}
		out, err := exec.Command("tar", "-xzf", f.Name(), "-C", m.path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("tar: %w: %s", err, out)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		return err
	}
	data, err := os.ReadFile(f.Name())
	if err != nil {
		return err
	}
	return os.WriteFile(m.path, data, 0o644)
}

func (s *server) read(raw json.RawMessage) (any, error) {
	var p struct {
		ID     string `json:"sandbox_id"`
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
		Length int    `json:"length"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	if _, err := s.dir(p.ID); err != nil {
		return nil, err
	}
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		return nil, codeError{"invalid", p.Path + " is not a regular file"}
	}
	buf := make([]byte, p.Length)
	n, err := f.ReadAt(buf, p.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return map[string]any{"data": buf[:n], "eof": errors.Is(err, io.EOF) || n < p.Length}, nil
}

func (s *server) delete(raw json.RawMessage) error {
	var p struct {
		ID string `json:"sandbox_id"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return err
	}
	d, err := s.dir(p.ID)
	if err != nil {
		return err
	}
	// Stop what still runs in it (commands whose working directory is inside it, from
	// this or an earlier plugin process), then remove it.
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && strings.HasPrefix(cwd, d+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return os.RemoveAll(d)
}

func (s *server) list(raw json.RawMessage) (any, error) {
	var p struct {
		Labels map[string]string `json:"labels"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, err
	}
	entries, _ := os.ReadDir(filepath.Join(s.root, "sandboxes"))
	out := []meta{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(s.root, "sandboxes", e.Name(), "meta.json"))
		if err != nil {
			continue
		}
		var m meta
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		match := true
		for k, v := range p.Labels {
			if m.Labels[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, m)
		}
	}
	return map[string]any{"sandboxes": out}, nil
}
