// Package version reports the build's version and commit, from -ldflags when the release
// build sets them and from the module's build info otherwise.
package version

import (
	"runtime/debug"
)

// Set by -ldflags "-X github.com/talkops/talkops/internal/version.version=... -X ...commit=...".
var (
	version = ""
	commit  = ""
)

// Info is the build's identity.
type Info struct {
	Version  string
	Commit   string
	Modified bool
}

// Get returns the build's version and commit.
func Get() Info {
	info := Info{Version: version, Commit: commit}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fill(info)
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if info.Commit == "" {
				info.Commit = s.Value
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return fill(info)
}

func fill(info Info) Info {
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// String is "VERSION (COMMIT)".
func (i Info) String() string {
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		c += "-dirty"
	}
	return i.Version + " (" + c + ")"
}
