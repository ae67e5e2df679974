package plugin_test

import (
	"context"
	"os"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/plugin"
	"github.com/talkops/talkops/providers/plugin/plugintest"
	"github.com/talkops/talkops/providers/providertest"
)

// harness runs the contract suite over the protocol: a plugin process per provider,
// sandboxes as directories under root.
type harness struct {
	root string
	opts plugin.Options
}

func (h *harness) NewProvider(_ context.Context, t *testing.T) providers.Provider {
	p, err := plugin.New(h.opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (h *harness) Spec(t *testing.T) providers.Spec { return providers.Spec{} }

func (h *harness) Alive(context.Context) ([]string, bool) { return plugintest.Alive(h.root), true }

func (h *harness) Close() {}

func TestContractGoPlugin(t *testing.T) {
	t.Parallel()
	bin := plugintest.GoPlugin(t)
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		root := t.TempDir()
		t.Cleanup(func() {
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("plugin processes still running after the test: %v", pids)
			}
		})
		return &harness{root: root, opts: plugin.Options{Name: "goplugin", Command: []string{bin},
			Options: map[string]any{"root": root}}}, nil
	})
}

func TestContractPythonBackend(t *testing.T) {
	t.Parallel()
	python := plugintest.Python(t)
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		root := t.TempDir()
		t.Cleanup(func() {
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("bridge processes still running after the test: %v", pids)
			}
		})
		return &harness{root: root, opts: plugin.Options{Name: "acme", Python: python,
			BridgeArgs: plugin.BackendArgs("acme_sandbox.backend:AcmeSandboxBackend"),
			Env:        []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + plugintest.PythonDir(), "PYTHONDONTWRITEBYTECODE=1"},
			Options:    map[string]any{"root": root}}}, nil
	})
}

// TestContractPythonEntryPoint runs the suite against a SandboxProvider found by its
// talkops.sandbox_providers entry point (testdata/acme_provider-1.0.dist-info), which
// can also attach by id.
func TestContractPythonEntryPoint(t *testing.T) {
	t.Parallel()
	python := plugintest.Python(t)
	providertest.Run(t, func(_ context.Context, t *testing.T) (providertest.Harness, error) {
		root := t.TempDir()
		t.Cleanup(func() {
			if pids := plugintest.LivePIDs(root); len(pids) > 0 {
				t.Errorf("bridge processes still running after the test: %v", pids)
			}
		})
		return &harness{root: root, opts: plugin.Options{Name: "acmeep", Python: python,
			BridgeArgs: plugin.EntryPointArgs("acmeep"),
			Env:        []string{"PATH=" + os.Getenv("PATH"), "PYTHONPATH=" + plugintest.PythonDir(), "PYTHONDONTWRITEBYTECODE=1"},
			Options:    map[string]any{"root": root}}}, nil
	})
}
