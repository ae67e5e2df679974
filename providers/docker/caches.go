package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/cache"
)

// LabelSandbox names, on a shared cache's volumes, the container they belong to: the
// container holds the overlay mounted, so gc and Delete remove it before the layers.
const LabelSandbox = "talkops.sandbox"

// cacheVolumes shows one host cache in the container, copy-on-write: overlay is a volume
// of the local driver that mounts an overlay file system whose lower layer is the host
// directory and whose upper and work directories are the directories of two more volumes
// (upper, work). The engine, which runs as root, creates all three and deletes them with
// what the run wrote, so talkops never touches root-owned files on the host, the host
// directory is never written, and nothing the run wrote survives the sandbox.
type cacheVolumes struct {
	providers.Cache
	overlay, upper, work string
}

// shareCaches creates the volumes of every cache that can be shared with the sandbox
// named name and says why the others are not. Caches need an engine on this machine: the
// lower layer is a host path, which a remote engine would look up on its own host. Only
// a cancelled ctx is an error; anything else leaves the cache out with a note.
func shareCaches(ctx context.Context, cli *client.Client, name string, labels map[string]string, caches []providers.Cache, workDir string) ([]cacheVolumes, []string, error) {
	if len(caches) == 0 {
		return nil, nil, nil
	}
	if !engineOnThisMachine(cli) {
		return nil, []string{fmt.Sprintf("caches not shared: the docker engine at %s is not reached through a unix socket on this machine, so it cannot layer host directories", cli.DaemonHost())}, nil
	}
	layerLabels := map[string]string{LabelSandbox: name}
	for k, v := range labels {
		layerLabels[k] = v
	}
	var shared []cacheVolumes
	var notes []string
	for i, c := range caches {
		if why := cacheUnfit(c, workDir); why != "" {
			notes = append(notes, fmt.Sprintf("cache %s not shared: %s", c.Name, why))
			continue
		}
		if c.HostDir == "" {
			shared = append(shared, cacheVolumes{Cache: c}) // a tool's home: a tmpfs, no volume
			continue
		}
		base := name + "-cache" + strconv.Itoa(i)
		cv := cacheVolumes{Cache: c, overlay: base, upper: base + "-upper", work: base + "-work"}
		err := createCacheVolumes(ctx, cli, cv, layerLabels)
		if err == nil {
			shared = append(shared, cv)
			continue
		}
		rerr := removeVolumesNow(ctx, cli, cv.volumes())
		if ctx.Err() != nil {
			return nil, nil, errors.Join(ctx.Err(), rerr, removeVolumesNow(ctx, cli, cacheVolumeNames(shared)))
		}
		notes = append(notes, fmt.Sprintf("cache %s not shared: %v", c.Name, errors.Join(err, rerr)))
	}
	return shared, notes, nil
}

// cacheUnfit says why a cache cannot be layered, "" when it can.
func cacheUnfit(c providers.Cache, workDir string) string {
	if c.HostDir == "" {
		// A tool's home, nothing of the host's: only its path needs checking.
	} else if fi, err := os.Stat(c.HostDir); err != nil || !fi.IsDir() {
		return fmt.Sprintf("%s is not a directory on the host", c.HostDir)
	}
	// The overlay's options are a comma-separated list in which ':' separates lower
	// layers; such paths would need escaping that not every engine passes on intact.
	if strings.ContainsAny(c.HostDir, ",:\\") {
		return fmt.Sprintf("host directory %q contains ',', ':' or '\\', which an overlay's options cannot carry", c.HostDir)
	}
	p := path.Clean(c.Path)
	if !path.IsAbs(p) || p == "/" {
		return fmt.Sprintf("sandbox path %q: want an absolute path other than /", c.Path)
	}
	if cache.Within(p, workDir) || cache.Within(workDir, p) {
		return fmt.Sprintf("sandbox path %s overlaps the working directory %s", p, workDir)
	}
	return ""
}

// createCacheVolumes creates the upper and work volumes, then the overlay volume over
// their directories. The engine mounts the overlay only when the container starts.
func createCacheVolumes(ctx context.Context, cli *client.Client, cv cacheVolumes, labels map[string]string) error {
	upper, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: cv.upper, Labels: labels})
	if err != nil {
		return fmt.Errorf("create volume %s: %w", cv.upper, err)
	}
	work, err := cli.VolumeCreate(ctx, volume.CreateOptions{Name: cv.work, Labels: labels})
	if err != nil {
		return fmt.Errorf("create volume %s: %w", cv.work, err)
	}
	for _, mp := range []string{upper.Mountpoint, work.Mountpoint} {
		if mp == "" || strings.ContainsAny(mp, ",:\\") {
			return fmt.Errorf("the engine's volume directory %q cannot be an overlay layer", mp)
		}
	}
	_, err = cli.VolumeCreate(ctx, volume.CreateOptions{Name: cv.overlay, Labels: labels, Driver: "local", DriverOpts: map[string]string{
		"type":   "overlay",
		"device": "overlay",
		"o":      "lowerdir=" + cv.HostDir + ",upperdir=" + upper.Mountpoint + ",workdir=" + work.Mountpoint,
	}})
	if err != nil {
		return fmt.Errorf("create volume %s: %w", cv.overlay, err)
	}
	return nil
}

// volumes lists the cache's volumes, the overlay first: it must go before its layers. A
// tool's home has none.
func (cv cacheVolumes) volumes() []string {
	if cv.overlay == "" {
		return nil
	}
	return []string{cv.overlay, cv.upper, cv.work}
}

func cacheVolumeNames(cvs []cacheVolumes) []string {
	var out []string
	for _, cv := range cvs {
		out = append(out, cv.volumes()...)
	}
	return out
}

func cacheMounts(cvs []cacheVolumes) []mount.Mount {
	out := make([]mount.Mount, 0, len(cvs))
	for _, cv := range cvs {
		if cv.overlay == "" {
			// A tool's home, writable whatever user the container runs as (the tools
			// write locks and state there) and gone with the container. The engine
			// mounts by depth, so the home's cache parts land inside it.
			out = append(out, mount.Mount{Type: mount.TypeTmpfs, Target: path.Clean(cv.Path), TmpfsOptions: &mount.TmpfsOptions{Mode: 0o1777}})
			continue
		}
		out = append(out, mount.Mount{Type: mount.TypeVolume, Source: cv.overlay, Target: path.Clean(cv.Path)})
	}
	return out
}

// failedCache finds the cache whose volume the container could not mount, from the
// error of a container start, which names the volume's directory: the engine's
// "error while mounting volume '/…/volumes/<name>/_data': …" when the overlay does not
// mount, the runtime's "error mounting "/…/volumes/<name>/_data" to rootfs at …" when its
// target is refused. -1 when the error names none.
func failedCache(err error, cvs []cacheVolumes) int {
	if err == nil {
		return -1
	}
	msg := err.Error()
	for i, cv := range cvs {
		if cv.overlay != "" && strings.Contains(msg, "/"+cv.overlay+"/_data") {
			return i
		}
	}
	return -1
}

// removeVolumesNow removes volumes in order, on a short bound that outlives ctx: it
// cleans up after a create that failed or was cancelled, and gc removes what it misses.
func removeVolumesNow(ctx context.Context, cli *client.Client, names []string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeByNameTimeout)
	defer cancel()
	var errs []error
	for _, n := range names {
		if err := removeVolume(rctx, cli, n); err != nil {
			errs = append(errs, fmt.Errorf("remove volume %s (gc removes it later): %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// sandboxCacheVolumes lists the cache volumes of the container named name.
func sandboxCacheVolumes(ctx context.Context, cli *client.Client, name string) ([]string, error) {
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", LabelSandbox+"="+name), filters.Arg("label", providers.LabelCreatedBy+"=talkops"))})
	if err != nil {
		return nil, err
	}
	var overlays, layers []string
	for _, v := range vols.Volumes {
		if v.Driver == "local" && v.Options["type"] == "overlay" {
			overlays = append(overlays, v.Name)
		} else {
			layers = append(layers, v.Name)
		}
	}
	return append(overlays, layers...), nil
}

var _ providers.CacheSharer = (*Sandbox)(nil)

// SharedCaches reports the caches the container sees and why the others are missing.
func (s *Sandbox) SharedCaches() ([]providers.Cache, []string) {
	out := make([]providers.Cache, len(s.caches))
	for i, c := range s.caches {
		out[i] = c.Cache
	}
	return out, s.cacheNotes
}
