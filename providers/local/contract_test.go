//go:build unix

package local_test

import (
	"context"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/providers/providertest"
)

type harness struct {
	p *local.Provider
}

func newHarness(ctx context.Context, t *testing.T) (providertest.Harness, error) {
	return &harness{p: local.New(local.Options{})}, nil
}

func (h *harness) NewProvider(ctx context.Context, t *testing.T) providers.Provider { return h.p }

func (h *harness) Spec(t *testing.T) providers.Spec {
	return providers.Spec{ProjectDir: t.TempDir()}
}

func (h *harness) Alive(ctx context.Context) ([]string, bool) { return h.p.Alive(), true }

func (h *harness) Close() {}

func TestContract(t *testing.T) { providertest.Run(t, newHarness) }
