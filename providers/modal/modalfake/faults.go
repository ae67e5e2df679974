package modalfake

import (
	"cmp"
	"context"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Fault is an injected failure of one RPC.
type Fault struct {
	// Code and Message are the status the call fails with (before the server acts,
	// unless AfterAct).
	Code    codes.Code
	Message string
	// AfterAct serves the call and then answers with the fault: the connection
	// dropped after the server acted.
	AfterAct bool
	// Hang never answers: the call blocks until the client gives up. With AfterAct the
	// call is served first: the server carries out a call its client gave up on.
	Hang bool
	// Stall, for a server stream, sends what there is and then goes quiet without
	// ending, until the client gives up.
	Stall bool
}

// Faults injects failures by method name ("SandboxCreate", "TaskExecStart", ...), counts
// the calls and holds calls for tests that need a call in flight. Safe for concurrent
// use; the zero value is ready.
type Faults struct {
	mu    sync.Mutex
	calls map[string]int
	nth   map[string]map[int]Fault
	every map[string]Fault
	holds map[string]*Held
	match map[string]bodyFault
}

type bodyFault struct {
	substr string
	left   int
	f      Fault
}

// Inject makes the nth call (1-based) of method fail with f.
func (fs *Faults) Inject(method string, nth int, f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.nth == nil {
		fs.nth = map[string]map[int]Fault{}
	}
	if fs.nth[method] == nil {
		fs.nth[method] = map[int]Fault{}
	}
	fs.nth[method][nth] = f
}

// InjectAll makes every call of method fail with f until Clear.
func (fs *Faults) InjectAll(method string, f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.every == nil {
		fs.every = map[string]Fault{}
	}
	fs.every[method] = f
}

// InjectMatching makes the next times calls of method whose request (as text) contains
// substr fail with f.
func (fs *Faults) InjectMatching(method, substr string, times int, f Fault) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.match == nil {
		fs.match = map[string]bodyFault{}
	}
	fs.match[method] = bodyFault{substr: substr, left: times, f: f}
}

// Hold makes the next call of method wait until the Held is released (or the client
// gives up; a call whose client gave up is not served).
func (fs *Faults) Hold(method string) *Held { return fs.hold(method, false) }

// HoldAfterAct serves the next call of method (a unary one) and then holds its answer until the Held
// is released or the client gives up: a slow reply to a call the server carried out
// either way. Arrived is closed once the call was served.
func (fs *Faults) HoldAfterAct(method string) *Held { return fs.hold(method, true) }

func (fs *Faults) hold(method string, afterAct bool) *Held {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.holds == nil {
		fs.holds = map[string]*Held{}
	}
	h := &Held{arrived: make(chan struct{}), release: make(chan struct{}), afterAct: afterAct}
	fs.holds[method] = h
	return h
}

// Clear removes every fault and hold of method (held calls are released).
func (fs *Faults) Clear(method string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.nth, method)
	delete(fs.every, method)
	delete(fs.match, method)
	if h := fs.holds[method]; h != nil {
		h.Release()
		delete(fs.holds, method)
	}
}

// Count returns how many calls method received, failed ones included.
func (fs *Faults) Count(method string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.calls[method]
}

// hit counts a call and returns its fault and hold, if any.
func (fs *Faults) hit(method, body string) (Fault, bool, *Held) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.calls == nil {
		fs.calls = map[string]int{}
	}
	fs.calls[method]++
	h := fs.holds[method]
	if h != nil {
		delete(fs.holds, method)
	}
	if m, ok := fs.match[method]; ok && m.left > 0 && strings.Contains(body, m.substr) {
		m.left--
		fs.match[method] = m
		return m.f, true, h
	}
	if f, ok := fs.every[method]; ok {
		return f, true, h
	}
	f, ok := fs.nth[method][fs.calls[method]]
	return f, ok, h
}

// Held is a call held in flight.
type Held struct {
	afterAct bool
	arrived  chan struct{}
	release  chan struct{}
	announce sync.Once
	freed    sync.Once
}

// Arrived is closed when the held call reaches the server.
func (h *Held) Arrived() <-chan struct{} { return h.arrived }

// Release lets the held call through (idempotent).
func (h *Held) Release() { h.freed.Do(func() { close(h.release) }) }

// wait blocks until release or ctx ends; it reports whether to serve the call.
func (h *Held) wait(ctx context.Context) bool {
	h.announce.Do(func() { close(h.arrived) })
	select {
	case <-h.release:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

func shortName(full string) string {
	return full[strings.LastIndex(full, "/")+1:]
}

// unary applies faults and holds to unary calls.
func (s *Server) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := shortName(info.FullMethod)
	s.record(ctx, method)
	f, faulty, held := s.Faults.hit(method, textOf(req))
	if held != nil && held.afterAct {
		resp, err := handler(ctx, req)
		if !held.wait(ctx) {
			return nil, status.Error(codes.Canceled, "the client gave up while the answer was held")
		}
		return resp, err
	}
	if held != nil && !held.wait(ctx) {
		return nil, status.Error(codes.Canceled, "the client gave up while the call was held")
	}
	if faulty {
		switch {
		case f.Hang && f.AfterAct:
			_, _ = handler(ctx, req)
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		case f.Hang:
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		case f.AfterAct:
			_, _ = handler(ctx, req)
			return nil, status.Error(f.Code, cmp.Or(f.Message, "connection reset after the call was served"))
		default:
			return nil, status.Error(f.Code, cmp.Or(f.Message, "injected fault"))
		}
	}
	return handler(ctx, req)
}

// stream applies faults and holds to server streams; a Stall fault is handed to the
// handler through the stream's context.
func (s *Server) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	method := shortName(info.FullMethod)
	ctx := ss.Context()
	s.record(ctx, method)
	f, faulty, held := s.Faults.hit(method, "")
	if held != nil && !held.wait(ctx) {
		return status.Error(codes.Canceled, "the client gave up while the call was held")
	}
	if faulty {
		switch {
		case f.Hang:
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		case f.Stall:
			return handler(srv, &stallStream{ServerStream: ss})
		case !f.AfterAct:
			return status.Error(f.Code, cmp.Or(f.Message, "injected fault"))
		}
		_ = handler(srv, ss)
		return status.Error(f.Code, cmp.Or(f.Message, "connection reset after the call was served"))
	}
	return handler(srv, ss)
}

// stallStream marks, in its context, a stream that must go quiet once it has sent what
// there is.
type stallStream struct{ grpc.ServerStream }

type stallKey struct{}

func (s *stallStream) Context() context.Context {
	return context.WithValue(s.ServerStream.Context(), stallKey{}, true)
}

// stalled reports whether the stream of ctx must stall.
func stalled(ctx context.Context) bool {
	v, _ := ctx.Value(stallKey{}).(bool)
	return v
}
