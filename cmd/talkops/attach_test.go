package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/daytona"
	"github.com/talkops/talkops/providers/daytona/daytonafake"
	"github.com/talkops/talkops/providers/httpapi"
)

// TestAttachUsesConfiguredWorkingDir: a run attached with --sandbox-id to a cloud sandbox
// runs its checks in the working_dir of
// [sandboxes.providers.NAME], not the provider's default directory.
func TestAttachUsesConfiguredWorkingDir(t *testing.T) {
	t.Parallel()
	srv := daytonafake.New("key")
	t.Cleanup(srv.Close)
	env := map[string]string{"DAYTONA_API_KEY": "key"}
	// The sandbox is made beforehand with another working directory (the fake runs
	// commands on this host, so both are host directories).
	p, err := daytona.New(daytona.Options{APIURL: srv.APIURL(), RemoteOptions: httpapi.RemoteOptions{WorkingDir: t.TempDir(), TempDir: t.TempDir()}},
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Create(t.Context(), providers.Spec{RunID: "pre-made", Labels: map[string]string{providers.LabelCreatedBy: "talkops"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())

	workDir := t.TempDir()
	rubric := fmt.Sprintf("[[check]]\nid = \"in-working-dir\"\nrun = 'test \"$(pwd)\" = %q'\n", workDir)
	cfg := fmt.Sprintf("[sandboxes.providers.daytona]\napi_url = %q\nworking_dir = %q\n", srv.APIURL(), workDir)
	dir := project(t, map[string]string{"r.toml": rubric, "README.md": "hi", ".talkops/config.toml": cfg})
	got := runIn(t, dir, testEnv(t, env), "--trust-project-config", "--sandbox", "daytona", "--sandbox-id", sb.ID(), "--rubric", "r.toml")
	if got.code != 0 {
		t.Fatalf("attached run: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
	}
	res := readResult(t, dir)
	if res.Sandbox == nil || !res.Sandbox.Attached || res.Sandbox.WorkDir != workDir {
		t.Errorf("result.json sandbox = %+v, want attached in %s", res.Sandbox, workDir)
	}
	if !strings.Contains(got.stdout, "in-working-dir") {
		t.Errorf("the check did not run:\n%s", got.stdout)
	}
	if _, ok := srv.Sandbox(sb.ID()); !ok {
		t.Error("the attached run deleted the sandbox it did not create")
	}
}
