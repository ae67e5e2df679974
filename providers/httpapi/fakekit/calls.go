package fakekit

import (
	"io"
	"net/http"
	"slices"
	"sync"
)

// Call is one request a fake received.
type Call struct {
	// Endpoint is the fake's name for the operation ("create", "exec", ...), "unknown"
	// for a path it does not serve.
	Endpoint string
	Method   string
	Path     string
	Status   int
	// RequestBytes is how much of the request body the fake read; ResponseBytes is the
	// size of the body it sent.
	RequestBytes, ResponseBytes int64
}

// Log is a fake's record of the requests it received, in the order they arrived. The
// zero value is ready; it is safe for concurrent use.
//
// A call takes its place in the log when it arrives and is filled in when it has been
// answered, so a client that has its answer (a streamed one may end before the handler
// returns) finds the call ahead of any it sends next.
type Log struct {
	mu    sync.Mutex
	calls []Call
}

// Start logs the arrival of c and returns its place for Finish.
func (l *Log) Start(c Call) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	return len(l.calls) - 1
}

// Finish records c, the completed call, at the place Start returned.
func (l *Log) Finish(i int, c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[i] = c
}

// Calls returns every call so far, in the order they arrived; a call still being served
// has only its Method and Path.
func (l *Log) Calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// Count returns how many answered calls endpoint received, rejected and failed ones
// included.
func (l *Log) Count(endpoint string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if c.Endpoint == endpoint {
			n++
		}
	}
	return n
}

// Handler serves each request with route, which answers it and returns the endpoint's
// name, and logs the call with its status and body sizes.
func (l *Log) Handler(route func(w http.ResponseWriter, r *http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := &countingBody{rc: r.Body}
		r.Body = body
		rec := NewRecorder(w)
		i := l.Start(Call{Method: r.Method, Path: r.URL.Path})
		endpoint := route(rec, r)
		l.Finish(i, Call{Endpoint: endpoint, Method: r.Method, Path: r.URL.Path, Status: rec.Status(),
			RequestBytes: body.n, ResponseBytes: rec.Bytes()})
	})
}

// Recorder is a ResponseWriter that remembers the status and body size of the response
// it passes on, and passes Flush on as well (streamed answers need it).
type Recorder struct {
	http.ResponseWriter
	status int
	n      int64
}

// NewRecorder wraps w.
func NewRecorder(w http.ResponseWriter) *Recorder { return &Recorder{ResponseWriter: w} }

// WriteHeader records the first status written, the one the client sees.
func (r *Recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *Recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(p)
	r.n += int64(n)
	return n, err
}

// Flush sends what was written so far, when the underlying writer can.
func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Status is the status sent, or 200 if the handler wrote nothing (net/http's default).
func (r *Recorder) Status() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// Bytes is the size of the body written so far.
func (r *Recorder) Bytes() int64 { return r.n }

type countingBody struct {
	rc io.ReadCloser
	n  int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.rc.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingBody) Close() error { return c.rc.Close() }
