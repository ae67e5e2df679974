package faulttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/talkops/talkops/providers/fake"
)

const fakePackage = "github.com/talkops/talkops/providers/fake"

// TestReleaseBuildHasNoFakeProvider checks that the test switch is not in the product:
// the release build's import graph has no fake provider (the test build's has, so the
// check can fail), and a release binary asked for the fake with the environment that
// used to switch it on rejects the name as an unknown provider.
func TestReleaseBuildHasNoFakeProvider(t *testing.T) {
	deps := func(tags ...string) []string {
		args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, tags...)
		out, err := exec.Command("go", append(args, "github.com/talkops/talkops/cmd/talkops")...).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", strings.Join(tags, " "), err)
		}
		return strings.Fields(string(out))
	}
	if slices.Contains(deps(), fakePackage) {
		t.Errorf("the release build of cmd/talkops imports %s", fakePackage)
	}
	if !slices.Contains(deps("-tags", "talkops_testprovider"), fakePackage) {
		t.Errorf("the talkops_testprovider build of cmd/talkops does not import %s: the fault tests cannot run the fake", fakePackage)
	}

	bin := filepath.Join(t.TempDir(), "talkops")
	if err := buildTalkops(bin); err != nil {
		t.Fatal(err)
	}
	dir, root := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"HOME": root, "XDG_STATE_HOME": filepath.Join(root, "state"), "PATH": os.Getenv("PATH"),
		fake.EnvEnable: "1", fake.EnvDir: filepath.Join(root, "fake"), fake.EnvLedger: filepath.Join(root, "ledger.json"),
	}
	p := startProcess(t, dir, env, bin, "--sandbox=fake", "--rubric", "true")
	code, ok := p.wait(time.Minute)
	if !ok {
		t.Fatalf("the release binary did not exit within a minute\nstderr:\n%s", p.stderr)
	}
	if code != 2 || !strings.Contains(p.stderr.String(), `unknown provider "fake"`) {
		t.Errorf("release binary, --sandbox fake with %s=1: exit %d, stderr:\n%s\nwant exit 2 and unknown provider \"fake\"",
			fake.EnvEnable, code, p.stderr)
	}
	if _, err := os.Stat(filepath.Join(root, "ledger.json")); err == nil {
		t.Errorf("the release binary created a fake sandbox")
	}
}
