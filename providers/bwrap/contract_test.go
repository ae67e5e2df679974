package bwrap_test

import (
	"context"
	"os"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/bwrap"
	"github.com/talkops/talkops/providers/providertest"
)

type harness struct {
	p *bwrap.Provider
}

func newHarness(ctx context.Context, t *testing.T) (providertest.Harness, error) {
	return &harness{p: bwrap.New(bwrap.Options{StateDir: t.TempDir()})}, nil
}

func (h *harness) NewProvider(ctx context.Context, t *testing.T) providers.Provider { return h.p }

func (h *harness) Spec(t *testing.T) providers.Spec { return providers.Spec{} }

// Alive lists the sandbox directories still on disk.
func (h *harness) Alive(ctx context.Context) ([]string, bool) {
	infos, err := h.p.List(ctx)
	if err != nil {
		return nil, false
	}
	ids := make([]string, 0, len(infos))
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	return ids, true
}

func (h *harness) Close() {}

func TestContract(t *testing.T) {
	if _, err := bwrap.New(bwrap.Options{StateDir: t.TempDir()}).List(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !bwrapRuns(t) {
		if os.Getenv("CI") == "true" {
			t.Fatal("bubblewrap is required in CI (.ci/docker.sh start installs it)")
		}
		t.Skip("bubblewrap cannot run here (apt-get install -y bubblewrap)")
	}
	providertest.Run(t, newHarness)
}

func bwrapRuns(t *testing.T) bool {
	sb, err := bwrap.New(bwrap.Options{StateDir: t.TempDir()}).Create(t.Context(), providers.Spec{RunID: "probe"})
	if err != nil {
		t.Logf("bwrap probe: %v", err)
		return false
	}
	return sb.Close(t.Context()) == nil
}
