// Package providertest runs the sandbox contract (providers/contract) as Go tests: every
// provider package adds one test:
//
//	func TestContract(t *testing.T) { providertest.Run(t, newHarness) }
//
// where newHarness builds a Harness: a provider under test plus whatever it needs (a fake
// server, a container engine, a temporary project directory). Run runs one named subtest
// per contract case; each gets a fresh harness and a fresh provider, and every sandbox a
// subtest creates is closed through t.Cleanup on a context that is not cancelled, after
// which the harness's Alive list must no longer hold it. The guarantees themselves are
// listed in package contract.
package providertest

import (
	"context"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/contract"
)

// Harness sets up one provider under test. Run calls the HarnessMaker once per subtest
// and Close when the subtest ends, after every sandbox of the subtest was closed.
type Harness interface {
	// NewProvider returns a provider under test; called once per subtest.
	NewProvider(ctx context.Context, t *testing.T) providers.Provider
	// Spec returns a Spec for Create (ProjectDir etc. set up by the harness in
	// t.TempDir()). The suite fills in RunID, Labels and TTL when they are empty and
	// adds its own Env keys (all prefixed PROVIDERTEST_).
	Spec(t *testing.T) providers.Spec
	// Alive lists the ids of sandboxes the provider still holds (engine or fake
	// ledger), for the NoLeaks check; return nil, false if the harness cannot tell.
	Alive(ctx context.Context) (ids []string, ok bool)
	// Close releases what the harness set up.
	Close()
}

// HarnessMaker makes a Harness for one subtest. An error fails the subtest.
type HarnessMaker func(ctx context.Context, t *testing.T) (Harness, error)

// Run runs the contract suite against the provider newHarness builds.
func Run(t *testing.T, newHarness HarnessMaker) {
	t.Helper()
	maker := func(ctx context.Context, ct contract.T) (contract.Harness, error) {
		h, err := newHarness(ctx, ct.(testT).T)
		if err != nil || h == nil {
			return nil, err
		}
		return harness{h}, nil
	}
	for _, c := range contract.Cases() {
		t.Run(c.Name, func(t *testing.T) { c.RunCase(testT{t}, maker) })
	}
}

// testT is a *testing.T as a contract.T.
type testT struct{ *testing.T }

func (t testT) Run(name string, f func(contract.T)) bool {
	return t.T.Run(name, func(t *testing.T) { f(testT{t}) })
}

// harness is a Harness as a contract.Harness.
type harness struct{ h Harness }

func (h harness) NewProvider(ctx context.Context, t contract.T) providers.Provider {
	return h.h.NewProvider(ctx, t.(testT).T)
}

func (h harness) Spec(t contract.T) providers.Spec { return h.h.Spec(t.(testT).T) }

func (h harness) Alive(ctx context.Context) ([]string, bool) { return h.h.Alive(ctx) }

func (h harness) Close() { h.h.Close() }
