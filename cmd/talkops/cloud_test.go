package main

import (
	"cmp"
	"fmt"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers/agentcore/agentcorefake"
	"github.com/talkops/talkops/providers/daytona/daytonafake"
	"github.com/talkops/talkops/providers/langsmith/langsmithfake"
	"github.com/talkops/talkops/providers/runloop/runloopfake"
	"github.com/talkops/talkops/providers/vercel/vercelfake"
)

// TestCloudProvidersThroughCLI runs the whole pipeline on each cloud provider against its
// fake service (the real wire format; commands really run behind it): the project is
// synced, the checks pass in the remote working directory, and the sandbox is deleted. A
// missing credential is a usage error before anything is created.
func TestCloudProvidersThroughCLI(t *testing.T) {
	t.Parallel()
	const rubric = "[[check]]\nid = \"synced\"\nrun = \"test -f README.md && test ! -e .env\"\n"
	type fakeService struct {
		url    string
		env    map[string]string
		urlKey string // the table key that points the client at the fake; "" = api_url
		counts func() (created, alive int)
	}
	tests := []struct {
		provider string
		missing  string // the credential the usage error must name
		start    func(t *testing.T) fakeService
	}{
		{"daytona", "DAYTONA_API_KEY", func(t *testing.T) fakeService {
			s := daytonafake.New("key")
			t.Cleanup(s.Close)
			return fakeService{url: s.APIURL(), env: map[string]string{"DAYTONA_API_KEY": "key"},
				counts: func() (int, int) { l := s.Ledger(); return l.Created, len(l.Alive) }}
		}},
		{"vercel", "VERCEL_TOKEN", func(t *testing.T) fakeService {
			s := vercelfake.New("tok", "team", "prj")
			t.Cleanup(s.Close)
			return fakeService{url: s.URL, env: map[string]string{"VERCEL_TOKEN": "tok", "VERCEL_TEAM_ID": "team", "VERCEL_PROJECT_ID": "prj"},
				counts: func() (int, int) { l := s.Ledger(); return l.Created, len(l.Alive) }}
		}},
		{"runloop", "RUNLOOP_API_KEY", func(t *testing.T) fakeService {
			s := runloopfake.New("key")
			t.Cleanup(s.Close)
			return fakeService{url: s.URL, env: map[string]string{"RUNLOOP_API_KEY": "key"},
				counts: func() (int, int) { l := s.Ledger(); return l.Created, len(l.Alive) }}
		}},
		{"agentcore", "AWS_REGION", func(t *testing.T) fakeService {
			s := agentcorefake.New("AKIDTALKOPSTEST")
			t.Cleanup(s.Close)
			return fakeService{url: s.URL, urlKey: "endpoint", env: map[string]string{
				"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDTALKOPSTEST", "AWS_SECRET_ACCESS_KEY": "secret",
				"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"},
				counts: func() (int, int) { l := s.Ledger(); return l.Started, len(l.Alive) }}
		}},
		{"langsmith", "LANGSMITH_API_KEY", func(t *testing.T) fakeService {
			s := langsmithfake.New("key")
			t.Cleanup(s.Close)
			return fakeService{url: s.APIURL(), env: map[string]string{"LANGSMITH_API_KEY": "key"},
				counts: func() (int, int) { l := s.Ledger(); return l.Created, len(l.Alive) }}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			svc := tc.start(t)
			urlKey := cmp.Or(svc.urlKey, "api_url")
			cfg := fmt.Sprintf("[sandboxes.providers.%s]\n%s = %q\nworking_dir = %q\n", tc.provider, urlKey, svc.url, t.TempDir())
			dir := project(t, map[string]string{"r.toml": rubric, "README.md": "hi", ".env": "SECRET=1",
				".talkops/config.toml": cfg})

			// The endpoint is trusted-only; this test's user vouches for its project.
			trust := "--trust-project-config"
			got := runIn(t, dir, testEnv(t, nil), trust, "--sandbox", tc.provider, "--rubric", "r.toml")
			if got.code != 2 || !strings.Contains(got.stderr, tc.missing) {
				t.Fatalf("without credentials: exit %d, want 2 naming %s\n%s", got.code, tc.missing, got.stderr)
			}
			if created, _ := svc.counts(); created != 0 {
				t.Fatalf("a usage error created %d sandboxes", created)
			}

			got = runIn(t, dir, testEnv(t, svc.env), trust, "--sandbox", tc.provider, "--rubric", "r.toml")
			if got.code != 0 {
				t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
			if created, alive := svc.counts(); created != 1 || alive != 0 {
				t.Errorf("fake ledger: created %d, alive %d; want 1 created and none alive", created, alive)
			}
		})
	}
}
