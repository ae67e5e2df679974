package cloudtest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
)

// lister is a provider whose List answers infos or err; nothing else is called.
type lister struct {
	providers.Provider
	infos []providers.Info
	err   error
}

func (l lister) List(context.Context) ([]providers.Info, error) { return l.infos, l.err }
func (lister) Delete(context.Context, string) error             { return nil }

func TestLiveHarnessAlive(t *testing.T) {
	infos := []providers.Info{{ID: "a", State: "started"}, {ID: "b", State: "destroying"}, {ID: "c"}}
	gone := func(in providers.Info) bool { return in.State == "destroying" }
	for _, tc := range []struct {
		name   string
		h      LiveHarness
		want   []string
		wantOK bool
	}{
		{"All", LiveHarness{New: func() (providers.Provider, error) { return lister{infos: infos}, nil }}, []string{"a", "b", "c"}, true},
		{"Gone", LiveHarness{New: func() (providers.Provider, error) { return lister{infos: infos}, nil }, Gone: gone}, []string{"a", "c"}, true},
		{"ListFails", LiveHarness{New: func() (providers.Provider, error) { return lister{err: errors.New("503")}, nil }}, nil, false},
		{"NewFails", LiveHarness{New: func() (providers.Provider, error) { return nil, providers.ErrConfig }}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.h.Alive(t.Context())
			if ok != tc.wantOK {
				t.Fatalf("Alive() ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Alive() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvAndEndpoints(t *testing.T) {
	getenv := Env("A", "1", "B", "")
	if got := []string{getenv("A"), getenv("B"), getenv("C")}; !cmp.Equal(got, []string{"1", "", ""}) {
		t.Errorf("Env(A=1, B=)(A, B, C) = %q", got)
	}
	calls := []fakekit.Call{{Endpoint: "upload"}, {Endpoint: "exec"}}
	if diff := cmp.Diff([]string{"upload", "exec"}, Endpoints(calls)); diff != "" {
		t.Errorf("Endpoints() mismatch (-want +got):\n%s", diff)
	}
}
