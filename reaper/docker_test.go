package reaper

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/docker"
	"github.com/talkops/talkops/providers/state"
)

// requireDocker returns a client and the test image, skipping without an engine
// (failing under CI=true, where .ci/docker.sh starts one).
func requireDocker(t *testing.T) (*client.Client, string) {
	t.Helper()
	img := os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
	if os.Getenv("DOCKER_HOST") == "" || img == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DOCKER_HOST and TALKOPS_TEST_DOCKER_IMAGE must be set in CI: eval \"$(bash .ci/docker.sh start)\"")
		}
		t.Skip("no Docker engine configured: eval \"$(bash .ci/docker.sh start)\" sets DOCKER_HOST and TALKOPS_TEST_DOCKER_IMAGE")
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	if _, err := cli.Ping(t.Context()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Docker engine not reachable: %v", err)
		}
		t.Skipf("Docker engine not reachable: %v", err)
	}
	return cli, img
}

// deadPID returns the PID of a process that has exited (and been reaped).
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	pid := c.Process.Pid
	if PIDAlive(pid) {
		t.Skipf("pid %d was reused at once", pid)
	}
	return pid
}

// orphan creates a container the way a killed talkops run leaves one: labelled, running,
// its owner gone. It is removed at the end of the test whatever gc did.
func orphan(t *testing.T, cli *client.Client, img string, labels map[string]string) string {
	t.Helper()
	l := map[string]string{providers.LabelCreatedBy: "talkops", providers.LabelRunID: "orphan-" + t.Name()}
	for k, v := range labels {
		l[k] = v
	}
	created, err := cli.ContainerCreate(t.Context(), &container.Config{
		Image: img, Entrypoint: []string{"sleep", "2147483647"}, Labels: l,
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the test may have reaped it already
		err := cli.ContainerRemove(context.WithoutCancel(t.Context()), created.ID, container.RemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			t.Errorf("remove container %s: %v", created.ID, err)
		}
	})
	if err := cli.ContainerStart(t.Context(), created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	return created.ID
}

func TestDockerOrphanListedAndCollected(t *testing.T) {
	cli, img := requireDocker(t)
	host, _ := os.Hostname()
	dead := deadPID(t)
	gone := orphan(t, cli, img, map[string]string{
		providers.LabelOwnerPID: strconv.Itoa(dead), providers.LabelOwnerHost: host,
		providers.LabelExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
	})
	live := orphan(t, cli, img, map[string]string{
		providers.LabelOwnerPID: strconv.Itoa(os.Getpid()), providers.LabelOwnerHost: host,
		providers.LabelExpiresAt: time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
	})
	p := docker.New(docker.Options{})
	defer p.Close()
	listers := map[string]providers.Lister{docker.Name: p}
	ledger := &memLedger{entries: []state.Entry{{Provider: docker.Name, ID: gone, PID: dead}}}

	entries, err := ListLedger(t.Context(), listers, ledger, Options{})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Entry{}
	for _, e := range entries {
		byID[e.ID] = e
	}
	if e, ok := byID[gone]; !ok || e.Owner != OwnerGone || !e.InLedger || e.State != "running" {
		t.Errorf("ls entry for the orphan = %+v (found %v), want owner gone, in ledger, running", e, ok)
	}
	if e, ok := byID[live]; !ok || e.Owner != OwnerAlive {
		t.Errorf("ls entry for the live run's container = %+v (found %v), want owner alive", e, ok)
	}

	// --older-than 0: the orphan qualifies at once; the live one is protected by its owner.
	rep, err := GCLedger(t.Context(), listers, ledger, 0, true, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasID(rep.Deleted, gone) || hasID(rep.Deleted, live) {
		t.Errorf("dry-run report deleted = %v, want the orphan only", rep.Deleted)
	}
	if !running(t, cli, gone) || len(ledger.forgotten) != 0 {
		t.Fatal("--dry-run removed the orphan or touched the ledger")
	}

	rep, err = GCLedger(t.Context(), listers, ledger, 0, false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasID(rep.Deleted, gone) || !hasID(rep.Kept, live) {
		t.Errorf("gc report = %+v, want the orphan deleted and the live one kept", rep)
	}
	if running(t, cli, gone) {
		t.Error("gc left the orphan running")
	}
	if !running(t, cli, live) {
		t.Error("gc removed the container of a live run")
	}
	if !slices.Contains(ledger.forgotten, docker.Name+"/"+gone) {
		t.Errorf("ledger forgotten = %v, want the orphan's entry removed", ledger.forgotten)
	}
}

func hasID(as []Action, id string) bool {
	return slices.ContainsFunc(as, func(a Action) bool { return a.ID == id })
}

func running(t *testing.T, cli *client.Client, id string) bool {
	t.Helper()
	info, err := cli.ContainerInspect(t.Context(), id)
	if cerrdefs.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return info.State != nil && info.State.Running
}
