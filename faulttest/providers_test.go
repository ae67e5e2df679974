package faulttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/daytona/daytonafake"
	"github.com/talkops/talkops/providers/fake"
	"github.com/talkops/talkops/providers/httpapi/fakekit"
	"github.com/talkops/talkops/providers/langsmith/langsmithfake"
	"github.com/talkops/talkops/providers/runloop/runloopfake"
	"github.com/talkops/talkops/providers/state"
	"github.com/talkops/talkops/providers/vercel/vercelfake"
)

// Provider names as --sandbox takes them.
const (
	pFake      = "fake"
	pLocal     = "local"
	pBwrap     = "bwrap"
	pDocker    = "docker"
	pDaytona   = "daytona"
	pVercel    = "vercel"
	pRunloop   = "runloop"
	pLangSmith = "langsmith"
	pModal     = "modal"
)

var cloudProviders = []string{pDaytona, pVercel, pRunloop, pLangSmith}

// API operations a fault can target.
const (
	opCreate = "create"
	opUpload = "upload"
	opExec   = "exec"
	opDelete = "delete"
	// opCommand is the request that carries a command's text (Docker: exec create;
	// elsewhere the exec call itself).
	opCommand = "command"
)

// route is the method and path (a regexp on the proxy's side) of one API operation.
type route struct{ method, path string }

// target is one provider as a test runs it: the environment and project files that
// select it, a fault proxy in front of its API (cloud fakes, Docker), its own fault
// injection, and a way to list what the run left behind.
type target struct {
	name  string
	env   map[string]string
	files map[string]string
	proxy *faultProxy
	// dockerEngine is the engine behind the proxy (docker only).
	dockerEngine string
	// routes are the proxy paths of each operation (proxied targets only).
	routes map[string]route
	// cloud is the fake service (cloud targets only).
	cloud *cloudFake
	// daytona and langsmith are those fakes, for tests that set their state.
	daytona   *daytonafake.Server
	langsmith *langsmithfake.Server
	// grpc is the fake of a gRPC provider (Modal), which takes its faults directly.
	grpc *grpcFake
	// alive lists the sandboxes created by the talkops process pid (run id runID) that
	// still exist.
	alive func(t testing.TB, runID string, pid int) []string
}

// cloudFake is a cloud provider's in-process fake with fakekit fault injection.
type cloudFake struct {
	faults    *fakekit.Faults
	endpoints map[string]string // operation → fakekit endpoint name
	ledger    func() (created int, alive []string)
}

// skipUnless skips (outside CI) or fails (CI=true) when the engine a provider needs is
// missing; it returns the environment the provider needs.
func engineEnv(t testing.TB, name string) map[string]string {
	t.Helper()
	missing := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s", why)
		}
		t.Skip(why)
	}
	switch name {
	case pDocker:
		host, image := os.Getenv("DOCKER_HOST"), os.Getenv("TALKOPS_TEST_DOCKER_IMAGE")
		if host == "" || image == "" {
			missing("no Docker engine: run `eval \"$(bash .ci/docker.sh start)\"` to test the docker provider")
		}
		return map[string]string{"DOCKER_HOST": host, "TALKOPS_SANDBOX_IMAGE": image}
	case pBwrap:
		if _, err := exec.LookPath("bwrap"); err != nil {
			missing("bwrap is not installed (apt-get install bubblewrap)")
		}
	}
	return map[string]string{}
}

// newTarget prepares provider name for one run whose files live under root. fakeFaults
// is the fake provider's TALKOPS_TEST_FAKE_FAULTS.
func newTarget(t testing.TB, name, root, fakeFaults string) *target {
	t.Helper()
	tg := &target{name: name, env: engineEnv(t, name), files: map[string]string{}}
	switch name {
	case pFake:
		ledger := filepath.Join(root, "fake-ledger.json")
		tg.env[fake.EnvEnable] = "1"
		tg.env[fake.EnvDir] = filepath.Join(root, "fake")
		tg.env[fake.EnvLedger] = ledger
		tg.env[fake.EnvFaults] = fakeFaults
		tg.alive = func(t testing.TB, _ string, _ int) []string {
			recs, err := fake.ReadLedger(ledger)
			if err != nil {
				t.Errorf("read the fake provider's ledger: %v", err)
			}
			var ids []string
			for _, r := range recs {
				if r.DeletedAt.IsZero() {
					ids = append(ids, r.ID)
				}
			}
			return ids
		}
	case pLocal:
		// The local provider deletes nothing; what could leak is processes (checked for
		// every target) and its state file entry.
		tg.alive = func(t testing.TB, _ string, _ int) []string { return stateIDs(t, root, pLocal) }
	case pBwrap:
		base := filepath.Join(root, "state", "talkops", "bwrap")
		tg.alive = func(t testing.TB, _ string, _ int) []string {
			ents, err := os.ReadDir(base)
			if err != nil && !os.IsNotExist(err) {
				t.Errorf("read the bwrap state dir: %v", err)
			}
			var ids []string
			for _, e := range ents {
				// The trash holds torn-down link trees, not sandboxes; it stays once made.
				if e.Name() != ".trash" {
					ids = append(ids, e.Name())
				}
			}
			return ids
		}
	case pDocker:
		engine := tg.env["DOCKER_HOST"]
		tg.proxy = newFaultProxy(t, engine)
		tg.env["DOCKER_HOST"] = "tcp://" + tg.proxy.srv.Listener.Addr().String()
		tg.routes = map[string]route{
			opCreate:  {"POST", `/containers/create$`},
			opUpload:  {"PUT", `/containers/[^/]+/archive$`},
			opExec:    {"POST", `/exec/[^/]+/start$`},
			opCommand: {"POST", `/containers/[^/]+/exec$`},
			opDelete:  {"DELETE", `/containers/[^/]+$`},
		}
		tg.alive = func(t testing.TB, runID string, pid int) []string { return dockerAlive(t, engine, runID, pid) }
		tg.dockerEngine = engine
	case pDaytona:
		s := daytonafake.New("key")
		t.Cleanup(s.Close)
		tg.daytona = s
		tg.proxy = newFaultProxy(t, s.URL)
		s.URL = tg.proxy.URL // toolboxProxyUrl in answers then points at the proxy too
		tg.env["DAYTONA_API_KEY"] = "key"
		tg.files[".talkops/config.toml"] = cloudConfig(pDaytona, s.APIURL(), root)
		tg.routes = map[string]route{
			opCreate: {"POST", `^/api/sandbox$`},
			opUpload: {"POST", `^/toolbox/[^/]+/files/upload$`},
			opExec:   {"POST", `^/toolbox/[^/]+/process/execute$`},
			opDelete: {"DELETE", `^/api/sandbox/[^/]+$`},
		}
		tg.cloud = &cloudFake{faults: &s.Faults,
			endpoints: map[string]string{opCreate: "create", opUpload: "upload", opExec: "exec", opDelete: "delete"},
			ledger:    func() (int, []string) { l := s.Ledger(); return l.Created, l.Alive }}
	case pVercel:
		s := vercelfake.New("tok", "team", "prj")
		t.Cleanup(s.Close)
		tg.proxy = newFaultProxy(t, s.URL)
		tg.env["VERCEL_TOKEN"], tg.env["VERCEL_TEAM_ID"], tg.env["VERCEL_PROJECT_ID"] = "tok", "team", "prj"
		tg.files[".talkops/config.toml"] = cloudConfig(pVercel, tg.proxy.URL, root)
		tg.routes = map[string]route{
			opCreate: {"POST", `^/v[23]/sandboxes$`},
			opUpload: {"POST", `/fs/write$`},
			opExec:   {"POST", `/cmd$`},
			opDelete: {"DELETE", `^/v2/sandboxes/[^/]+$`},
		}
		tg.cloud = &cloudFake{faults: &s.Faults,
			endpoints: map[string]string{opCreate: "create", opUpload: "write", opExec: "cmd", opDelete: "delete"},
			ledger:    func() (int, []string) { l := s.Ledger(); return l.Created, l.Alive }}
	case pRunloop:
		s := runloopfake.New("key")
		t.Cleanup(s.Close)
		tg.proxy = newFaultProxy(t, s.URL)
		tg.env["RUNLOOP_API_KEY"] = "key"
		tg.files[".talkops/config.toml"] = cloudConfig(pRunloop, tg.proxy.URL, root)
		tg.routes = map[string]route{
			opCreate: {"POST", `^/v1/devboxes$`},
			opUpload: {"POST", `/upload_file$`},
			opExec:   {"POST", `^/v1/devboxes/[^/]+/execute$`},
			opDelete: {"POST", `^/v1/devboxes/[^/]+/shutdown$`},
		}
		tg.cloud = &cloudFake{faults: &s.Faults,
			endpoints: map[string]string{opCreate: "create", opUpload: "upload", opExec: "execute", opDelete: "shutdown"},
			ledger:    func() (int, []string) { l := s.Ledger(); return l.Created, l.Alive }}
	case pLangSmith:
		s := langsmithfake.New("key")
		t.Cleanup(s.Close)
		tg.langsmith = s
		tg.proxy = newFaultProxy(t, s.URL)
		s.URL = tg.proxy.URL // dataplane_url in answers then points at the proxy too
		tg.env["LANGSMITH_API_KEY"] = "key"
		tg.files[".talkops/config.toml"] = cloudConfig(pLangSmith, s.APIURL(), root)
		tg.routes = map[string]route{
			opCreate: {"POST", `^/v2/sandboxes/boxes$`},
			opUpload: {"POST", `^/dp/[^/]+/upload$`},
			opExec:   {"POST", `^/dp/[^/]+/execute$`},
			opDelete: {"DELETE", `^/v2/sandboxes/boxes/[^/]+$`},
		}
		tg.cloud = &cloudFake{faults: &s.Faults,
			endpoints: map[string]string{opCreate: "create", opUpload: "upload", opExec: "execute", opDelete: "delete"},
			ledger:    func() (int, []string) { l := s.Ledger(); return l.Created, l.Alive }}
	case pModal:
		newModalTarget(t, tg, root)
	default:
		t.Fatalf("unknown provider %q", name)
	}
	if tg.cloud != nil || tg.grpc != nil {
		// The fake's endpoint is in the project's config, where it is trusted-only: this
		// harness's user vouches for the project.
		tg.env["TALKOPS_TRUST_PROJECT_CONFIG"] = "true"
	}
	if tg.cloud != nil {
		c := tg.cloud
		tg.alive = func(testing.TB, string, int) []string { _, a := c.ledger(); return a }
	}
	return tg
}

// cloudConfig points a cloud provider at its fake (through the proxy), gives it a working
// directory under root (the fakes run commands on this host) and a 10 s readiness bound,
// so a sandbox that never becomes usable fails the run in seconds, not minutes.
func cloudConfig(name, apiURL, root string) string {
	return fmt.Sprintf("[sandboxes.providers.%s]\napi_url = %q\nworking_dir = %q\nready_timeout = \"10s\"\n", name, apiURL, filepath.Join(root, "remote-wd"))
}

// stateIDs lists the state file entries of provider under root's XDG_STATE_HOME.
func stateIDs(t testing.TB, root, provider string) []string {
	t.Helper()
	entries, err := state.List(filepath.Join(root, "state", "talkops", "sandboxes"))
	if err != nil && !os.IsNotExist(err) {
		t.Errorf("read the state dir: %v", err)
	}
	var ids []string
	for _, e := range entries {
		if provider == "" || e.Provider == provider {
			ids = append(ids, e.Provider+":"+e.ID)
		}
	}
	return ids
}

// dockerAlive lists containers of the run (by run id label) or of the talkops process
// (by owner pid label) on the engine itself, not through the proxy.
func dockerAlive(t testing.TB, engine, runID string, pid int) []string {
	return dockerLeft(t, engine, runID, pid, true)
}

// dockerLeft is dockerAlive, with or without the volumes.
func dockerLeft(t testing.TB, engine, runID string, pid int, withVolumes bool) []string {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.WithHost(engine), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Errorf("docker client: %v", err)
		return nil
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", providers.LabelCreatedBy+"=talkops"))})
	if err != nil {
		t.Errorf("docker ps: %v", err)
		return nil
	}
	ours := func(labels map[string]string) bool {
		return (runID != "" && labels[providers.LabelRunID] == runID) || (pid > 0 && labels["talkops.owner-pid"] == strconv.Itoa(pid))
	}
	var ids []string
	for _, c := range list {
		if ours(c.Labels) {
			ids = append(ids, c.ID[:12])
		}
	}
	if !withVolumes {
		slices.Sort(ids)
		return ids
	}
	// The workspace volumes too: teardown and gc must remove them as well. (Listing
	// volumes waits while the engine removes one, so timing containers leaves them out.)
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", providers.LabelCreatedBy+"=talkops"))})
	if err != nil {
		t.Errorf("docker volume ls: %v", err)
		return nil
	}
	for _, v := range vols.Volumes {
		if ours(v.Labels) {
			ids = append(ids, volumePrefix+v.Name)
		}
	}
	slices.Sort(ids)
	return ids
}

// volumePrefix marks the volumes in dockerAlive's list.
const volumePrefix = "volume:"
