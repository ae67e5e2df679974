package modal

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/talkops/talkops/internal/backoff"
)

// Metadata every call carries. Modal's server identifies the client by type and
// version; the type is CLIENT_TYPE_LIBMODAL_GO (9) of its ClientType enum, the only
// one meant for Go clients.
const (
	clientType    = "9"
	clientVersion = "1.0.0"
)

// Limits of Modal's gRPC channels.
const (
	maxMessageSize = 100 << 20
	windowSize     = 64 << 20
)

// Retry is the policy for calls that fail with a transient code.
type Retry struct {
	// Attempts is the number of tries in all; 0 means 4.
	Attempts int
	// Base is the first backoff (default 100 ms), doubled each time up to Max (default 2 s);
	// half of each wait is random, as for the HTTP providers (internal/backoff).
	Base, Max time.Duration
}

func (r Retry) withDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = 4
	}
	if r.Base <= 0 {
		r.Base = 100 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 2 * time.Second
	}
	return r
}

func (r Retry) delay(attempt int) time.Duration {
	return backoff.Jittered(r.Base, r.Max, attempt+1)
}

// retryable reports whether a call that failed with err may be tried again: the codes
// Modal's clients retry.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Canceled, codes.Internal, codes.Unknown:
		return true
	}
	return false
}

// Stats counts the RPCs a provider sent, by full method name, retries included.
type Stats struct {
	mu    sync.Mutex
	calls map[string]int
}

func (s *Stats) add(method string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[method]++
}

// Calls returns a copy of the counts.
func (s *Stats) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// Total is the number of RPCs sent.
func (s *Stats) Total() int {
	n := 0
	for _, v := range s.Calls() {
		n += v
	}
	return n
}

// target turns an http(s) URL into a gRPC target and its transport credentials: https
// is TLS with the system roots (and tlsConfig when set), http is plaintext (local
// servers only).
func target(raw string, tlsConfig *tls.Config) (string, credentials.TransportCredentials, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", nil, fmt.Errorf("%q is not an http(s) URL", raw)
	}
	host := u.Host
	if u.Port() == "" {
		port := "443"
		if u.Scheme == "http" {
			port = "80"
		}
		host = u.Hostname() + ":" + port
	}
	if u.Scheme == "http" {
		return host, insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if tlsConfig != nil {
		cfg = tlsConfig.Clone()
	}
	return host, credentials.NewTLS(cfg), nil
}

// dial opens a channel with Modal's limits and keepalive; interceptors add metadata and
// retries.
func dial(addr string, creds credentials.TransportCredentials, unary grpc.UnaryClientInterceptor, stream grpc.StreamClientInterceptor) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.MaxCallSendMsgSize(maxMessageSize)),
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		grpc.WithChainUnaryInterceptor(unary),
		grpc.WithChainStreamInterceptor(stream),
	)
}

// callPolicy is what the unary interceptor does around one call.
type callPolicy struct {
	retry Retry
	stats *Stats
	// header returns the metadata for a call of method (credentials, tokens).
	header func(ctx context.Context, method string) (metadata.MD, error)
	// noRetry lists methods that are never re-sent by the interceptor.
	noRetry map[string]bool
	// onUnauthenticated, when set, is called once after an UNAUTHENTICATED answer and
	// the call is tried again (a token the server no longer accepts).
	onUnauthenticated func()
}

// unary adds the metadata, the idempotency key and the retry metadata, and retries the
// transient codes with backoff. One key is used for every attempt of a call, so the
// server can tell a retry from a new request.
func (p *callPolicy) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	key := newID()
	start := time.Now()
	reauthed := false
	for attempt := 0; ; attempt++ {
		md, err := p.header(ctx, method)
		if err != nil {
			return err
		}
		md.Set("x-idempotency-key", key)
		md.Set("x-retry-attempt", strconv.Itoa(attempt))
		if attempt > 0 {
			md.Set("x-retry-delay", strconv.FormatFloat(time.Since(start).Seconds(), 'f', 3, 64))
		}
		p.stats.add(method)
		err = invoker(metadata.NewOutgoingContext(ctx, md), method, req, reply, cc, opts...)
		if err == nil || ctx.Err() != nil {
			return err
		}
		// A rejected token is fetched again once; rejected credentials (AuthTokenGet
		// itself) are final.
		if status.Code(err) == codes.Unauthenticated && p.onUnauthenticated != nil && !reauthed && method != authTokenGetMethod {
			reauthed = true
			p.onUnauthenticated()
			continue
		}
		if p.noRetry[method] || !retryable(err) || attempt+1 >= p.retry.Attempts {
			if st, ok := status.FromError(err); ok && attempt > 0 {
				return status.Error(st.Code(), fmt.Sprintf("%s [gave up after %d attempts]", st.Message(), attempt+1))
			}
			return err
		}
		if err := backoff.Sleep(ctx, p.retry.delay(attempt)); err != nil {
			return err
		}
	}
}

// stream adds the metadata to a server stream; callers resume broken streams themselves
// (by offset or entry id).
func (p *callPolicy) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	md, err := p.header(ctx, method)
	if err != nil {
		return nil, err
	}
	md.Set("x-idempotency-key", newID())
	md.Set("x-retry-attempt", "0")
	p.stats.add(method)
	return streamer(metadata.NewOutgoingContext(ctx, md), desc, cc, method, opts...)
}

// newID returns a random UUID (version 4) for idempotency keys and exec ids.
func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
