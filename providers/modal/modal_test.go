package modal_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/internal/cloudtest"
	"github.com/talkops/talkops/providers/modal"
	"github.com/talkops/talkops/providers/modal/modalfake"
	"github.com/talkops/talkops/providers/providertest"
)

const (
	tokenID     = "ak-test"
	tokenSecret = "as-test"
)

var env = cloudtest.Env

// fastRetry keeps retry tests quick.
var fastRetry = modal.Retry{Attempts: 4, Base: time.Millisecond, Max: 5 * time.Millisecond}

func newServer(t *testing.T) *modalfake.Server {
	t.Helper()
	srv := modalfake.New(tokenID, tokenSecret)
	srv.TaskAfter = 2
	t.Cleanup(srv.Close)
	return srv
}

func options(t *testing.T, srv *modalfake.Server) modal.Options {
	return modal.Options{ServerURL: srv.URL, WorkingDir: t.TempDir(), TempDir: t.TempDir(), PollInterval: 5 * time.Millisecond,
		ReadyTimeout: 10 * time.Second, StreamGrace: 200 * time.Millisecond, Retry: fastRetry, TLSConfig: srv.TLSConfig()}
}

func newProvider(t *testing.T, srv *modalfake.Server, mod func(*modal.Options)) *modal.Provider {
	t.Helper()
	opts := options(t, srv)
	if mod != nil {
		mod(&opts)
	}
	p, err := modal.New(opts, env("MODAL_TOKEN_ID", tokenID, "MODAL_TOKEN_SECRET", tokenSecret, "MODAL_CONFIG_PATH", "/nonexistent/.modal.toml"))
	if err != nil {
		t.Fatalf("modal.New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func TestContract(t *testing.T) {
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		srv := modalfake.New(tokenID, tokenSecret)
		srv.TaskAfter = 1
		return cloudtest.FakeHarness{Provider: func(t *testing.T) providers.Provider { return newProvider(t, srv, nil) },
			Ledger: func() []string { return srv.Ledger().Alive }, Stop: srv.Close}, nil
	})
}

// TestLive runs the contract suite against Modal when MODAL_TOKEN_ID is set and -short
// is not. It creates sandboxes in the app "talkops-contract-test" of the token's
// default environment, from the default image.
func TestLive(t *testing.T) {
	if testing.Short() {
		t.Skip("live test skipped in -short mode")
	}
	if os.Getenv("MODAL_TOKEN_ID") == "" {
		t.Skip("MODAL_TOKEN_ID is not set; skipping the live Modal contract test")
	}
	providertest.Run(t, func(context.Context, *testing.T) (providertest.Harness, error) {
		return cloudtest.LiveHarness{
			New: func() (providers.Provider, error) {
				return modal.New(modal.Options{AppName: "talkops-contract-test"}, os.Getenv)
			},
		}, nil
	})
}

// TestAttachWorkDir: --sandbox-id with a configured working_dir runs commands there, not
// in the provider's default directory.
func TestAttachWorkDir(t *testing.T) {
	srv := newServer(t)
	cloudtest.AttachWorkDir(t, newProvider(t, srv, nil), cloudtest.Spec("run-attach-wd"))
}
