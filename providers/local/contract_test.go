//go:build unix

package local_test

import (
	"context"
	"slices"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/local"
	"github.com/talkops/talkops/providers/providertest"
)

type harness struct {
	p *local.Provider
}

// newHarness records sandboxes in a state directory, so the suite also checks that
// Close removes their records: Alive is what the provider holds open or still lists.
func newHarness(ctx context.Context, t *testing.T) (providertest.Harness, error) {
	return &harness{p: local.New(local.Options{StateDir: t.TempDir()})}, nil
}

func (h *harness) NewProvider(ctx context.Context, t *testing.T) providers.Provider { return h.p }

func (h *harness) Spec(t *testing.T) providers.Spec {
	return providers.Spec{ProjectDir: t.TempDir()}
}

func (h *harness) Alive(ctx context.Context) ([]string, bool) {
	infos, err := h.p.List(ctx)
	if err != nil {
		return nil, false
	}
	ids := h.p.Alive()
	for _, in := range infos {
		if !slices.Contains(ids, in.ID) {
			ids = append(ids, in.ID)
		}
	}
	return ids, true
}

func (h *harness) Close() {}

func TestContract(t *testing.T) { providertest.Run(t, newHarness) }
