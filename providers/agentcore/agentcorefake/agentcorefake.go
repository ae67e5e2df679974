// Package agentcorefake is an in-process fake of the AWS Bedrock AgentCore Code Interpreter
// data plane for tests: the real restJson1 wire protocol (paths, query and header
// bindings, JSON bodies, `x-amzn-errortype` error responses) and, for
// InvokeCodeInterpreter, the binary `application/vnd.amazon.eventstream` framing, encoded
// with the SDK's own eventstream encoder. Point the AWS SDK at it with BaseEndpoint and
// static credentials; every request must carry a SigV4 Authorization header for the
// fake's access key and the `bedrock-agentcore` service.
//
// Covered operations:
//
//	PUT  /code-interpreters/{id}/sessions/start          StartCodeInterpreterSession (clientToken de-duplication)
//	GET  /code-interpreters/{id}/sessions/get?sessionId=  GetCodeInterpreterSession
//	PUT  /code-interpreters/{id}/sessions/stop?sessionId= StopCodeInterpreterSession
//	POST /code-interpreters/{id}/sessions/list           ListCodeInterpreterSessions (status filter, maxResults, nextToken)
//	POST /code-interpreters/{id}/tools/invoke            InvokeCodeInterpreter: executeCommand, writeFiles, readFiles, removeFiles
//
// Left out: executeCode, listFiles, startCommandExecution, getTask and stopTask (answered
// with a ValidationException), certificates and filesystem configurations (accepted and
// ignored), trace headers, and every other AgentCore API (browsers, memory, runtimes).
//
// Behaviour modelled on the service: a session has its own working directory, which is
// not /tmp (like the managed interpreter's /opt/amazon/genesis1p-tools/var), and the file
// tools resolve every path against it, a leading "/" included (an absolute path lands
// under the working directory, as on AgentCore); a path that climbs out of it is refused.
// readFiles answers a UTF-8 file as a text resource and any other file as a blob.
// executeCommand runs `/bin/sh -c <command>` for real on the host, in the session's
// working directory, in a new process group, and answers with one `result` event whose
// structuredContent carries stdout, stderr, exitCode and executionTime; the service puts
// no time limit on a command, and neither does the fake (a client that disconnects leaves
// its command running). The response headers are sent before the command runs, so a
// client sees the stream open at once. A stopped session's commands are killed, its status
// becomes TERMINATED, and later invocations answer ResourceNotFoundException.
// sessionTimeoutSeconds is enforced: the session terminates when it passes.
//
// Before a session is READY (ReadyAfter, NeverReady) GetCodeInterpreterSession answers
// without a status and invocations answer ConflictException: the service documents only
// READY and TERMINATED, so the slow start is the fake's own invention for fault tests.
package agentcorefake

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/talkops/talkops/providers/httpapi/fakekit"
)

// DefaultInterpreter is the AWS-managed code interpreter every fake knows.
const DefaultInterpreter = "aws.codeinterpreter.v1"

// HomeSuffix is appended to each session's temporary directory to make its working
// directory, mirroring the managed interpreter's deep working directory.
const HomeSuffix = "opt/amazon/genesis1p-tools/var"

// Server is the fake. Configure its exported fields before the first request.
type Server struct {
	// Host serves the fake at Host.URL and logs its calls.
	fakekit.Host
	// AccessKeyID is the access key every request must be signed with.
	AccessKeyID string
	// Interpreters are the code interpreter identifiers that exist; nil means only
	// DefaultInterpreter.
	Interpreters []string
	// ReadyAfter is how many GetCodeInterpreterSession reads of a new session answer
	// without a status before it is READY; NeverReady keeps it so.
	ReadyAfter int
	NeverReady bool
	// MaxRequestBytes caps an InvokeCodeInterpreter request body (the documented inline
	// limit is 100 MB); a larger one is refused with a ValidationException. 0 means
	// 100,000,000 bytes.
	MaxRequestBytes int64
	// StartDelay holds each StartCodeInterpreterSession answer back after the session was
	// started, as a slow network would.
	StartDelay time.Duration
	// MaxPage caps the items of one ListCodeInterpreterSessions page below maxResults
	// (a service may answer fewer); 0 means no cap.
	MaxPage int
	// Faults fail calls before they are served. Endpoints: "start", "get", "stop",
	// "list", and "invoke:<tool>" ("invoke:executeCommand", "invoke:writeFiles", ...).
	Faults fakekit.Faults
	// FaultsAfterRun fail "invoke:<tool>" calls after the tool ran: the work is done but
	// the client gets the error status, as when a response is lost.
	FaultsAfterRun fakekit.Faults

	mu         sync.Mutex
	sessions   map[string]*session
	order      []string
	tokens     map[string]string              // clientToken → session id
	streamErrs map[string]map[int]StreamError // "invoke:<tool>" → call number → error
	counts     map[string]int                 // calls per endpoint
}

// StreamError is an exception event sent in place of an InvokeCodeInterpreter result:
// Member is the stream union member ("throttlingException", "internalServerException",
// "resourceNotFoundException", ...).
type StreamError struct {
	Member, Message string
}

// Call is one request the fake received; Endpoint is "start", "get", "stop", "list" or
// "invoke:<tool>".
type Call = fakekit.Call

// Session is the fake's record of one session.
type Session struct {
	ID, Name, Interpreter, ClientToken string
	TimeoutSeconds                     int
	// Status is "READY", "TERMINATED", or "" while the session starts.
	Status                   string
	CreatedAt, LastUpdatedAt time.Time
	// Home is the session's working directory on the host.
	Home string
}

type session struct {
	Session
	root   string // the temporary directory holding Home
	reads  int
	procs  *fakekit.Procs
	expiry *time.Timer
}

// New starts a fake that accepts requests signed with accessKeyID. Close it when done.
func New(accessKeyID string) *Server {
	s := &Server{AccessKeyID: accessKeyID, sessions: map[string]*session{}, tokens: map[string]string{},
		streamErrs: map[string]map[int]StreamError{}, counts: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /code-interpreters/{id}/sessions/start", s.start)
	mux.HandleFunc("GET /code-interpreters/{id}/sessions/get", s.get)
	mux.HandleFunc("PUT /code-interpreters/{id}/sessions/stop", s.stop)
	mux.HandleFunc("POST /code-interpreters/{id}/sessions/list", s.list)
	mux.HandleFunc("POST /code-interpreters/{id}/tools/invoke", s.invoke)
	s.Serve(s.authenticate(mux))
	return s
}

// Close kills every command, removes every session's files and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	for _, ss := range s.sessions {
		ss.procs.KillAll()
		if ss.expiry != nil {
			ss.expiry.Stop()
		}
	}
	s.mu.Unlock()
	s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		_ = os.RemoveAll(ss.root)
	}
}

// InjectStreamError makes the nth call (1-based, counted like Faults) of the tool's
// endpoint ("invoke:executeCommand", ...) answer 200 and then an exception event.
func (s *Server) InjectStreamError(endpoint string, nth int, e StreamError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streamErrs[endpoint] == nil {
		s.streamErrs[endpoint] = map[int]StreamError{}
	}
	s.streamErrs[endpoint][nth] = e
}

// Ledger is the fake's record of sessions.
type Ledger struct {
	Started, Stopped int
	// Alive lists the sessions not terminated, in start order.
	Alive []string
}

// Ledger returns the record of sessions.
func (s *Server) Ledger() Ledger {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Ledger{Started: len(s.order)}
	for _, id := range s.order {
		if s.sessions[id].Status == "TERMINATED" {
			l.Stopped++
		} else {
			l.Alive = append(l.Alive, id)
		}
	}
	return l
}

// Session returns the record of a session.
func (s *Server) Session(id string) (Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if !ok {
		return Session{}, false
	}
	return ss.Session, true
}

// Terminate ends a session as its timeout would.
func (s *Server) Terminate(id string) {
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss != nil {
		s.terminate(ss)
	}
}

// authenticate refuses requests without a SigV4 Authorization header for the fake's key
// and the bedrock-agentcore service, as AWS does.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if auth == "" || r.Header.Get("X-Amz-Date") == "" {
			writeError(w, http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
			return
		}
		scheme, rest, _ := strings.Cut(auth, " ")
		cred := ""
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(f), "Credential="); ok {
				cred = v
			}
		}
		parts := strings.Split(cred, "/") // AKID/date/region/service/aws4_request
		if scheme != "AWS4-HMAC-SHA256" || len(parts) != 5 || parts[4] != "aws4_request" || !strings.Contains(rest, "Signature=") {
			writeError(w, http.StatusForbidden, "IncompleteSignatureException", "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.")
			return
		}
		if parts[0] != s.AccessKeyID {
			writeError(w, http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
			return
		}
		if parts[3] != "bedrock-agentcore" {
			writeError(w, http.StatusForbidden, "InvalidSignatureException", fmt.Sprintf("Credential should be scoped to correct service: 'bedrock-agentcore', not %q.", parts[3]))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// serve runs one endpoint: it applies injected faults, calls fn with the request's
// context and the call's number (1-based, per endpoint) and logs the call.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, endpoint string, body []byte, fn func(ctx context.Context, w *fakekit.Recorder, n int)) {
	rec := fakekit.NewRecorder(w)
	s.mu.Lock()
	s.counts[endpoint]++
	n := s.counts[endpoint]
	s.mu.Unlock()
	i := s.CallLog().Start(Call{Endpoint: endpoint, Method: r.Method, Path: r.URL.Path})
	defer func() {
		s.CallLog().Finish(i, Call{Endpoint: endpoint, Method: r.Method, Path: r.URL.Path, Status: rec.Status(),
			RequestBytes: int64(len(body)), ResponseBytes: rec.Bytes()})
	}()
	if f, ok := s.Faults.Hit(endpoint); ok {
		writeFault(rec, f)
		return
	}
	fn(r.Context(), rec, n)
}

func readBody(r *http.Request) ([]byte, error) {
	return io.ReadAll(r.Body)
}

func (s *Server) knownInterpreter(id string) bool {
	if s.Interpreters == nil {
		return id == DefaultInterpreter
	}
	return slices.Contains(s.Interpreters, id)
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		return
	}
	s.serve(w, r, "start", body, func(_ context.Context, w *fakekit.Recorder, _ int) {
		interp := r.PathValue("id")
		var req struct {
			Name                  *string `json:"name"`
			SessionTimeoutSeconds *int    `json:"sessionTimeoutSeconds"`
			ClientToken           string  `json:"clientToken"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(w, http.StatusBadRequest, "SerializationException", "could not parse the request body: "+err.Error())
			return
		}
		if !s.knownInterpreter(interp) {
			writeError(w, http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Code interpreter %s not found", interp))
			return
		}
		if req.Name != nil && (len(*req.Name) < 1 || len(*req.Name) > 100) {
			writeValidation(w, "name", fmt.Sprintf("Value at 'name' failed to satisfy constraint: Member must have length between 1 and 100 (got %d)", len(*req.Name)))
			return
		}
		timeout := 900
		if req.SessionTimeoutSeconds != nil {
			timeout = *req.SessionTimeoutSeconds
			if timeout < 1 || timeout > 28800 {
				writeValidation(w, "sessionTimeoutSeconds", fmt.Sprintf("Value %d at 'sessionTimeoutSeconds' failed to satisfy constraint: Member must have value between 1 and 28800", timeout))
				return
			}
		}
		s.mu.Lock()
		if id, ok := s.tokens[req.ClientToken]; ok && req.ClientToken != "" {
			ss := s.sessions[id]
			s.mu.Unlock()
			writeJSON(w, map[string]any{"codeInterpreterIdentifier": ss.Interpreter, "sessionId": ss.ID, "createdAt": ss.CreatedAt})
			return
		}
		s.mu.Unlock()
		root, err := os.MkdirTemp("", "agentcorefake-*")
		if err != nil {
			writeError(w, http.StatusInternalServerError, "InternalServerException", err.Error())
			return
		}
		home := filepath.Join(root, HomeSuffix)
		if err := os.MkdirAll(home, 0o755); err != nil {
			writeError(w, http.StatusInternalServerError, "InternalServerException", err.Error())
			return
		}
		now := time.Now().UTC()
		ss := &session{Session: Session{ID: newID(), Interpreter: interp, ClientToken: req.ClientToken,
			TimeoutSeconds: timeout, CreatedAt: now, LastUpdatedAt: now, Home: home}, root: root, procs: &fakekit.Procs{}}
		if req.Name != nil {
			ss.Name = *req.Name
		}
		if s.ReadyAfter == 0 && !s.NeverReady {
			ss.Status = "READY"
		}
		ss.expiry = time.AfterFunc(time.Duration(timeout)*time.Second, func() { s.terminate(ss) })
		s.mu.Lock()
		s.sessions[ss.ID] = ss
		s.order = append(s.order, ss.ID)
		if req.ClientToken != "" {
			s.tokens[req.ClientToken] = ss.ID
		}
		s.mu.Unlock()
		if s.StartDelay > 0 {
			t := time.NewTimer(s.StartDelay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		writeJSON(w, map[string]any{"codeInterpreterIdentifier": interp, "sessionId": ss.ID, "createdAt": now})
	})
}

// lookup finds the session named by the request, answering the error itself when there is
// none.
func (s *Server) lookup(w *fakekit.Recorder, interp, id string) *session {
	if id == "" {
		writeValidation(w, "sessionId", "1 validation error detected: Value null at 'sessionId' failed to satisfy constraint: Member must not be null")
		return nil
	}
	s.mu.Lock()
	ss := s.sessions[id]
	s.mu.Unlock()
	if ss == nil || ss.Interpreter != interp {
		writeError(w, http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Session %s not found for code interpreter %s", id, interp))
		return nil
	}
	return ss
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "get", nil, func(_ context.Context, w *fakekit.Recorder, _ int) {
		ss := s.lookup(w, r.PathValue("id"), r.URL.Query().Get("sessionId"))
		if ss == nil {
			return
		}
		s.mu.Lock()
		ss.reads++
		if ss.Status == "" && !s.NeverReady && ss.reads > s.ReadyAfter {
			ss.Status = "READY"
			ss.LastUpdatedAt = time.Now().UTC()
		}
		out := map[string]any{"codeInterpreterIdentifier": ss.Interpreter, "sessionId": ss.ID, "createdAt": ss.CreatedAt,
			"sessionTimeoutSeconds": ss.TimeoutSeconds}
		if ss.Name != "" {
			out["name"] = ss.Name
		}
		if ss.Status != "" {
			out["status"] = ss.Status
		}
		s.mu.Unlock()
		writeJSON(w, out)
	})
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		return
	}
	s.serve(w, r, "stop", body, func(_ context.Context, w *fakekit.Recorder, _ int) {
		ss := s.lookup(w, r.PathValue("id"), r.URL.Query().Get("sessionId"))
		if ss == nil {
			return
		}
		s.mu.Lock()
		done := ss.Status == "TERMINATED"
		s.mu.Unlock()
		if done {
			writeError(w, http.StatusConflict, "ConflictException", fmt.Sprintf("Session %s is already terminated", ss.ID))
			return
		}
		s.terminate(ss)
		s.mu.Lock()
		out := map[string]any{"codeInterpreterIdentifier": ss.Interpreter, "sessionId": ss.ID, "lastUpdatedAt": ss.LastUpdatedAt}
		s.mu.Unlock()
		writeJSON(w, out)
	})
}

// terminate ends a session: its commands are killed and its status is TERMINATED.
func (s *Server) terminate(ss *session) {
	s.mu.Lock()
	if ss.Status == "TERMINATED" {
		s.mu.Unlock()
		return
	}
	ss.Status = "TERMINATED"
	ss.LastUpdatedAt = time.Now().UTC()
	if ss.expiry != nil {
		ss.expiry.Stop()
	}
	s.mu.Unlock()
	ss.procs.KillAll()
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		return
	}
	s.serve(w, r, "list", body, func(_ context.Context, w *fakekit.Recorder, _ int) {
		interp := r.PathValue("id")
		var req struct {
			MaxResults *int   `json:"maxResults"`
			NextToken  string `json:"nextToken"`
			Status     string `json:"status"`
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				writeError(w, http.StatusBadRequest, "SerializationException", "could not parse the request body: "+err.Error())
				return
			}
		}
		if !s.knownInterpreter(interp) {
			writeError(w, http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Code interpreter %s not found", interp))
			return
		}
		pageSize := 10
		if req.MaxResults != nil {
			pageSize = *req.MaxResults
			if pageSize < 1 || pageSize > 100 {
				writeValidation(w, "maxResults", fmt.Sprintf("Value %d at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100", pageSize))
				return
			}
		}
		if req.Status != "" && req.Status != "READY" && req.Status != "TERMINATED" {
			writeValidation(w, "status", fmt.Sprintf("Value %q at 'status' failed to satisfy constraint: Member must satisfy enum value set: [READY, TERMINATED]", req.Status))
			return
		}
		startAt := 0
		if req.NextToken != "" {
			b, err := base64.RawURLEncoding.DecodeString(req.NextToken)
			n, err2 := strconv.Atoi(string(b))
			if err != nil || err2 != nil || n < 0 {
				writeValidation(w, "nextToken", "Invalid pagination token")
				return
			}
			startAt = n
		}
		s.mu.Lock()
		var matched []map[string]any
		for _, id := range s.order {
			ss := s.sessions[id]
			if ss.Interpreter != interp || (req.Status != "" && ss.Status != req.Status) {
				continue
			}
			item := map[string]any{"codeInterpreterIdentifier": ss.Interpreter, "sessionId": ss.ID,
				"createdAt": ss.CreatedAt, "lastUpdatedAt": ss.LastUpdatedAt}
			if ss.Name != "" {
				item["name"] = ss.Name
			}
			if ss.Status != "" {
				item["status"] = ss.Status
			}
			matched = append(matched, item)
		}
		s.mu.Unlock()
		out := map[string]any{"items": []map[string]any{}}
		if s.MaxPage > 0 {
			pageSize = min(pageSize, s.MaxPage)
		}
		if startAt < len(matched) {
			end := min(startAt+pageSize, len(matched))
			out["items"] = matched[startAt:end]
			if end < len(matched) {
				out["nextToken"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))
			}
		}
		writeJSON(w, out)
	})
}

// invokeRequest is InvokeCodeInterpreter's JSON body.
type invokeRequest struct {
	Name      string `json:"name"`
	Arguments struct {
		Command string   `json:"command"`
		Paths   []string `json:"paths"`
		Content []struct {
			Path string  `json:"path"`
			Text *string `json:"text"`
			Blob []byte  `json:"blob"` // base64 in JSON
		} `json:"content"`
	} `json:"arguments"`
}

// result is a CodeInterpreterResult event payload.
type result struct {
	Content           []contentBlock `json:"content"`
	StructuredContent *structured    `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError"`
}

type contentBlock struct {
	Type     string    `json:"type"`
	Text     *string   `json:"text,omitempty"`
	Resource *resource `json:"resource,omitempty"`
}

type resource struct {
	Type     string  `json:"type"`
	URI      string  `json:"uri"`
	MimeType string  `json:"mimeType,omitempty"`
	Text     *string `json:"text,omitempty"`
	Blob     []byte  `json:"blob,omitempty"`
}

type structured struct {
	Stdout        string  `json:"stdout"`
	Stderr        string  `json:"stderr"`
	ExitCode      int     `json:"exitCode"`
	ExecutionTime float64 `json:"executionTime"`
}

func textBlock(s string) contentBlock { return contentBlock{Type: "text", Text: &s} }

func (s *Server) invoke(w http.ResponseWriter, r *http.Request) {
	limit := s.MaxRequestBytes
	if limit <= 0 {
		limit = 100_000_000
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return
	}
	var req invokeRequest
	jsonErr := json.Unmarshal(body, &req)
	endpoint := "invoke:" + req.Name
	s.serve(w, r, endpoint, body, func(ctx context.Context, w *fakekit.Recorder, n int) {
		switch {
		case int64(len(body)) > limit:
			writeValidation(w, "arguments", fmt.Sprintf("Request body exceeds the maximum allowed size of %d bytes", limit))
			return
		case jsonErr != nil:
			writeError(w, http.StatusBadRequest, "SerializationException", "could not parse the request body: "+jsonErr.Error())
			return
		}
		ss := s.lookup(w, r.PathValue("id"), r.Header.Get("x-amzn-code-interpreter-session-id"))
		if ss == nil {
			return
		}
		s.mu.Lock()
		status := ss.Status
		streamErr, hasStreamErr := s.streamErrs[endpoint][n]
		s.mu.Unlock()
		switch status {
		case "TERMINATED":
			writeError(w, http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf("Session %s has been terminated", ss.ID))
			return
		case "":
			writeError(w, http.StatusConflict, "ConflictException", fmt.Sprintf("Session %s is not ready", ss.ID))
			return
		}
		var run func(ctx context.Context) (result, *apiError)
		switch req.Name {
		case "executeCommand":
			run = func(ctx context.Context) (result, *apiError) {
				return s.executeCommand(ctx, ss, req.Arguments.Command), nil
			}
		case "writeFiles":
			run = func(context.Context) (result, *apiError) { return writeFiles(ss, req) }
		case "readFiles":
			run = func(context.Context) (result, *apiError) { return readFiles(ss, req.Arguments.Paths) }
		case "removeFiles":
			run = func(context.Context) (result, *apiError) { return removeFiles(ss, req.Arguments.Paths) }
		default:
			writeValidation(w, "name", fmt.Sprintf("tool %q is not supported by this fake", req.Name))
			return
		}
		// The command keeps running when the client goes away, as on AgentCore.
		ctx = context.WithoutCancel(ctx)
		if f, ok := s.FaultsAfterRun.Hit(endpoint); ok {
			_, _ = run(ctx)
			writeFault(w, f)
			return
		}
		if req.Name == "executeCommand" {
			// Open the stream before the command runs, as a streaming service does.
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			w.Header().Set("x-amzn-code-interpreter-session-id", ss.ID)
			w.WriteHeader(http.StatusOK)
			w.Flush()
		}
		res, aerr := run(ctx)
		if aerr != nil {
			writeError(w, aerr.status, aerr.code, aerr.message)
			return
		}
		if req.Name != "executeCommand" {
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			w.Header().Set("x-amzn-code-interpreter-session-id", ss.ID)
			w.WriteHeader(http.StatusOK)
		}
		s.mu.Lock()
		killed := ss.Status == "TERMINATED"
		s.mu.Unlock()
		switch {
		case hasStreamErr:
			writeException(w, streamErr.Member, streamErr.Message)
		case killed && req.Name == "executeCommand":
			writeException(w, "resourceNotFoundException", fmt.Sprintf("Session %s was terminated while the command ran", ss.ID))
		default:
			writeEvent(w, res)
		}
	})
}

type apiError struct {
	status        int
	code, message string
}

func validation(msg string) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "ValidationException", message: msg}
}

func (s *Server) executeCommand(ctx context.Context, ss *session, command string) result {
	start := time.Now()
	o := ss.procs.Run(ctx, fakekit.Command{Path: "/bin/sh", Args: []string{"-c", command}, Dir: ss.Home, Env: fakekit.BaseEnv(ss.Home)})
	out := structured{Stdout: string(o.Stdout), Stderr: string(o.Stderr), ExitCode: o.ExitCode,
		ExecutionTime: time.Since(start).Seconds()}
	if o.StartErr != nil {
		out.ExitCode, out.Stderr = 126, o.StartErr.Error()
	}
	res := result{StructuredContent: &out, IsError: out.ExitCode != 0}
	if out.Stdout != "" {
		res.Content = append(res.Content, textBlock(out.Stdout))
	}
	if out.Stderr != "" {
		res.Content = append(res.Content, textBlock(out.Stderr))
	}
	if len(res.Content) == 0 {
		res.Content = []contentBlock{textBlock("")}
	}
	return res
}

// resolve maps a tool path onto the session's working directory the way AgentCore does:
// a leading "/" is dropped, and the rest is relative to the working directory.
func resolve(ss *session, p string) (string, *apiError) {
	rel := path.Clean("/" + p)[1:]
	if p == "" || rel == "" {
		return "", validation(fmt.Sprintf("invalid path %q", p))
	}
	if strings.Contains("/"+p+"/", "/../") {
		return "", validation(fmt.Sprintf("invalid path %q: it leaves the session working directory", p))
	}
	return filepath.Join(ss.Home, filepath.FromSlash(rel)), nil
}

func writeFiles(ss *session, req invokeRequest) (result, *apiError) {
	if len(req.Arguments.Content) == 0 {
		return result{}, validation("writeFiles needs at least one content block")
	}
	for _, c := range req.Arguments.Content {
		dst, aerr := resolve(ss, c.Path)
		if aerr != nil {
			return result{}, aerr
		}
		var data []byte
		switch {
		case c.Text != nil && c.Blob != nil:
			return result{}, validation(fmt.Sprintf("content for %q has both text and blob", c.Path))
		case c.Text != nil:
			data = []byte(*c.Text)
		default:
			data = c.Blob
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return result{Content: []contentBlock{textBlock(err.Error())}, IsError: true}, nil
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return result{Content: []contentBlock{textBlock(err.Error())}, IsError: true}, nil
		}
	}
	return result{Content: []contentBlock{textBlock(fmt.Sprintf("Successfully wrote %d file(s)", len(req.Arguments.Content)))}}, nil
}

func readFiles(ss *session, paths []string) (result, *apiError) {
	if len(paths) == 0 {
		return result{}, validation("readFiles needs at least one path")
	}
	var res result
	for _, p := range paths {
		src, aerr := resolve(ss, p)
		if aerr != nil {
			return result{}, aerr
		}
		data, err := os.ReadFile(src)
		if err != nil {
			msg := err.Error()
			if os.IsNotExist(err) {
				msg = "File not found: " + p
			}
			res.Content = append(res.Content, textBlock(msg))
			res.IsError = true
			continue
		}
		rc := &resource{URI: "file://" + p}
		if utf8.Valid(data) {
			t := string(data)
			rc.Type, rc.MimeType, rc.Text = "text", "text/plain", &t
		} else {
			rc.Type, rc.MimeType, rc.Blob = "blob", "application/octet-stream", data
		}
		res.Content = append(res.Content, contentBlock{Type: "resource", Resource: rc})
	}
	return res, nil
}

func removeFiles(ss *session, paths []string) (result, *apiError) {
	for _, p := range paths {
		dst, aerr := resolve(ss, p)
		if aerr != nil {
			return result{}, aerr
		}
		if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
			return result{Content: []contentBlock{textBlock(err.Error())}, IsError: true}, nil
		}
	}
	return result{Content: []contentBlock{textBlock(fmt.Sprintf("Removed %d file(s)", len(paths)))}}, nil
}

var encoder = struct {
	sync.Mutex
	*eventstream.Encoder
}{Encoder: eventstream.NewEncoder()}

func encode(w io.Writer, msg eventstream.Message) {
	encoder.Lock()
	defer encoder.Unlock()
	_ = encoder.Encode(w, msg)
}

// writeEvent sends res as one `result` event frame.
func writeEvent(w http.ResponseWriter, res result) {
	payload, _ := json.Marshal(res)
	var msg eventstream.Message
	msg.Headers.Set(":message-type", eventstream.StringValue("event"))
	msg.Headers.Set(":event-type", eventstream.StringValue("result"))
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Payload = payload
	encode(w, msg)
}

// writeException sends an exception frame of the stream union member.
func writeException(w http.ResponseWriter, member, message string) {
	payload, _ := json.Marshal(map[string]string{"message": message})
	var msg eventstream.Message
	msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
	msg.Headers.Set(":exception-type", eventstream.StringValue(member))
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Payload = payload
	encode(w, msg)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-RequestId", newID())
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writeError answers with an AWS restJson1 error: the type in x-amzn-errortype, the
// message in the body.
func writeError(w http.ResponseWriter, status int, code, message string) {
	b, _ := json.Marshal(map[string]string{"message": message})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-errortype", code)
	w.Header().Set("x-amzn-RequestId", newID())
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeValidation(w http.ResponseWriter, field, message string) {
	b, _ := json.Marshal(map[string]any{"message": message, "reason": "FieldValidationFailed",
		"fieldList": []map[string]string{{"name": field, "message": message}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-errortype", "ValidationException")
	w.Header().Set("x-amzn-RequestId", newID())
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// writeFault answers an injected fault; a fault without a body gets the error type AWS
// uses for its status.
func writeFault(w http.ResponseWriter, f fakekit.Fault) {
	f.SetHeaders(w.Header())
	if f.Body != "" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-amzn-RequestId", newID())
		if w.Header().Get("x-amzn-errortype") == "" {
			w.Header().Set("x-amzn-errortype", defaultType(f.Status))
		}
		w.WriteHeader(f.Status)
		_, _ = io.WriteString(w, f.Body)
		return
	}
	writeError(w, f.Status, defaultType(f.Status), http.StatusText(f.Status))
}

func defaultType(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "ThrottlingException"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableException"
	case http.StatusNotFound:
		return "ResourceNotFoundException"
	case http.StatusConflict:
		return "ConflictException"
	case http.StatusForbidden:
		return "AccessDeniedException"
	case http.StatusBadRequest:
		return "ValidationException"
	}
	return "InternalServerException"
}

// newID returns 26 random characters of Crockford base32, like AgentCore's session ids.
func newID() string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	b := make([]byte, 26)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}
