package actiontest_test

import (
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rhysd/actionlint"
	"go.yaml.in/yaml/v4"

	"github.com/talkops/talkops/internal/actiontest"
)

// jsInput finds the inputs main.js and post.js read by name: input('name').
var jsInput = regexp.MustCompile(`\binput\('([A-Za-z0-9_-]+)'\)`)

// TestActionMetadata checks what actionlint does not check in action.yml itself (it lints
// workflows and the inputs they pass, not the action's own wiring).
func TestActionMetadata(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	a, err := actiontest.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	table, err := actiontest.LoadInputs(root)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a JavaScript action with a post step that always runs", func(t *testing.T) {
		// node24 is the newest runtime GitHub documents for runs.using.
		want := actiontest.Runs{Using: "node24", Main: ".github/action/main.js", Post: ".github/action/post.js", PostIf: "always()"}
		if a.Runs != want {
			t.Errorf("runs = %+v, want %+v", a.Runs, want)
		}
		for _, f := range []string{a.Runs.Main, a.Runs.Post} {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Error(err)
			}
		}
	})

	t.Run("branding", func(t *testing.T) {
		if _, ok := actionlint.BrandingIcons[a.Branding.Icon]; !ok {
			t.Errorf("branding.icon %q is not one GitHub supports", a.Branding.Icon)
		}
		if _, ok := actionlint.BrandingColors[a.Branding.Color]; !ok {
			t.Errorf("branding.color %q is not one GitHub supports", a.Branding.Color)
		}
		if a.Name == "" || a.Description == "" {
			t.Error("name and description are required")
		}
	})

	t.Run("inputs are documented and optional", func(t *testing.T) {
		for name, in := range a.Inputs {
			if strings.TrimSpace(in.Description) == "" {
				t.Errorf("input %s has no description", name)
			}
			if in.Required {
				t.Errorf("input %s is required: GitHub does not enforce it; talkops validates its own flags", name)
			}
			if in.Default == nil {
				t.Errorf("input %s has no default; give it one (\"\" for unset)", name)
			}
		}
	})

	t.Run("every input is declared and used", func(t *testing.T) {
		used := map[string]string{}
		for command, c := range table.Commands() {
			for _, m := range []map[string]string{c.Flags, c.Switches, c.Env, c.Pinned} {
				for name := range m {
					used[name] = "inputs.json (" + command + ")"
				}
			}
			for name := range c.Pinned {
				if _, ok := c.Flags[name]; !ok {
					t.Errorf("inputs.json: %s pins %s, which is not one of its flags", command, name)
				}
			}
		}
		for _, f := range []string{"main.js", "post.js"} {
			src, err := os.ReadFile(filepath.Join(root, ".github", "action", f))
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range jsInput.FindAllStringSubmatch(string(src), -1) {
				used[m[1]] = f
			}
		}
		for name, where := range used {
			if _, ok := a.Inputs[name]; !ok {
				t.Errorf("%s uses input %s, which action.yml does not declare", where, name)
			}
		}
		for name := range a.Inputs {
			if _, ok := used[name]; !ok {
				t.Errorf("input %s is declared but neither inputs.json nor main.js uses it", name)
			}
		}
	})

	t.Run("no shell between the inputs and talkops", func(t *testing.T) {
		for _, f := range []string{"main.js", "post.js", "workflow.js"} {
			src, err := os.ReadFile(filepath.Join(root, ".github", "action", f))
			if err != nil {
				t.Fatal(err)
			}
			for _, bad := range []string{"shell:", "exec(", "execSync(", "execFile("} {
				if strings.Contains(string(src), bad) {
					t.Errorf("%s uses %s: start processes with spawn and an argument list, never a shell", f, bad)
				}
			}
		}
	})

	t.Run("outputs are the reporter's", func(t *testing.T) {
		// report/github writes these step outputs from talkops itself; a JavaScript
		// action's outputs are whatever its process writes, so they carry no value:.
		want := []string{"exit-code", "result-json", "score", "summary", "summary-path", "verdict"}
		if diff := cmp.Diff(want, slices.Sorted(maps.Keys(a.Outputs))); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
		for name, o := range a.Outputs {
			if o.Value != "" {
				t.Errorf("output %s has value: %q; a JavaScript action's outputs come from its process", name, o.Value)
			}
			if o.Description == "" {
				t.Errorf("output %s has no description", name)
			}
		}
	})
}

// TestActionVersionFile checks .github/action/VERSION, which picks the release the
// action downloads.
func TestActionVersionFile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "action", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(data))
	if v != "dev" && !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Errorf(".github/action/VERSION = %q, want dev or a release tag like v1.2.3", v)
	}
}

// TestShellcheck runs shellcheck on every script the action and CI run.
func TestShellcheck(t *testing.T) {
	t.Parallel()
	sc := need(t, "shellcheck", "apt-get install shellcheck")
	root := repoRoot(t)
	scripts, err := filepath.Glob(filepath.Join(root, ".github", "action", "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	scripts = append(scripts, filepath.Join(root, ".ci", "image.sh"))
	if len(scripts) < 3 {
		t.Fatalf("found only %v", scripts)
	}
	out, err := exec.CommandContext(t.Context(), sc, append([]string{"--severity=style"}, scripts...)...).CombinedOutput()
	if err != nil {
		t.Errorf("shellcheck: %v\n%s", err, out)
	}
}

// goreleaserConfig is the part of .goreleaser.yaml the installer and the image rely on.
type goreleaserConfig struct {
	Version     int    `yaml:"version"`
	ProjectName string `yaml:"project_name"`
	Builds      []struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Binary  string   `yaml:"binary"`
		Env     []string `yaml:"env"`
		Flags   []string `yaml:"flags"`
		Ldflags []string `yaml:"ldflags"`
		Goos    []string `yaml:"goos"`
		Goarch  []string `yaml:"goarch"`
	} `yaml:"builds"`
	Archives []struct {
		NameTemplate string   `yaml:"name_template"`
		Formats      []string `yaml:"formats"`
	} `yaml:"archives"`
	Checksum struct {
		NameTemplate string `yaml:"name_template"`
		Algorithm    string `yaml:"algorithm"`
	} `yaml:"checksum"`
	DockersV2 []struct {
		Dockerfile string            `yaml:"dockerfile"`
		Images     []string          `yaml:"images"`
		Platforms  []string          `yaml:"platforms"`
		Flags      []string          `yaml:"flags"`
		BuildArgs  map[string]string `yaml:"build_args"`
	} `yaml:"dockers_v2"`
}

// TestReleaseContract checks that .goreleaser.yaml, the installer, the Dockerfile and
// internal/version agree: archive and checksum names, the prebuilt image layout, and the
// -X symbols that carry the version.
func TestReleaseContract(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	var gr goreleaserConfig
	if err := yaml.Unmarshal([]byte(read(".goreleaser.yaml")), &gr); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	install := read(".github/action/install.sh")
	dockerfile := read("Dockerfile")
	makefile := read("Makefile")

	// The symbols the version is stamped into must exist.
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, "internal", "version", "version.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, sym := range []string{"version", "commit"} {
		if f.Scope.Lookup(sym) == nil {
			t.Errorf("internal/version has no package variable %s for -X", sym)
		}
		x := "-X github.com/talkops/talkops/internal/version." + sym + "="
		for name, text := range map[string]string{"Dockerfile": dockerfile, ".github/action/install.sh": install, "Makefile": makefile, ".goreleaser.yaml": strings.Join(gr.Builds[0].Ldflags, " ")} {
			if !strings.Contains(text, x) {
				t.Errorf("%s does not stamp %s", name, x)
			}
		}
	}

	if gr.Version != 2 || gr.ProjectName != "talkops" || len(gr.Builds) != 1 || len(gr.Archives) != 1 {
		t.Fatalf(".goreleaser.yaml: version %d, project %q, %d builds, %d archives; want v2, talkops, 1, 1", gr.Version, gr.ProjectName, len(gr.Builds), len(gr.Archives))
	}
	b := gr.Builds[0]
	checks := []struct {
		what      string
		got, want any
	}{
		{"builds[0].main", b.Main, "./cmd/talkops"},
		{"builds[0].binary", b.Binary, "talkops"},
		{"builds[0].env", b.Env, []string{"CGO_ENABLED=0"}},
		{"builds[0].flags", b.Flags, []string{"-trimpath"}},
		{"builds[0].goos", b.Goos, []string{"linux", "darwin"}},
		{"builds[0].goarch", b.Goarch, []string{"amd64", "arm64"}},
		// install.sh downloads talkops_${version#v}_${os}_${arch}.tar.gz and checksums.txt.
		{"archives[0].name_template", gr.Archives[0].NameTemplate, "{{ .ProjectName }}_{{ .Version }}_{{ .Os }}_{{ .Arch }}"},
		{"archives[0].formats", gr.Archives[0].Formats, []string{"tar.gz"}},
		{"checksum.name_template", gr.Checksum.NameTemplate, "checksums.txt"},
		{"checksum.algorithm", gr.Checksum.Algorithm, "sha256"},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf(".goreleaser.yaml %s (-want +got):\n%s", c.what, diff)
		}
	}
	for _, s := range []string{`archive="talkops_${version#v}_${os}_${arch}.tar.gz"`, `checksums.txt`, `tar -xzf "$tmp/$archive" -C "$tmp/x" talkops`} {
		if !strings.Contains(install, s) {
			t.Errorf("install.sh no longer contains %q, which .goreleaser.yaml's names rely on", s)
		}
	}
	if len(gr.DockersV2) == 0 {
		t.Fatal(".goreleaser.yaml builds no image")
	}
	for i, d := range gr.DockersV2 {
		if d.Dockerfile != "Dockerfile" || !slices.Contains(d.Flags, "--target=prebuilt") {
			t.Errorf("dockers_v2[%d]: dockerfile %q flags %v, want Dockerfile --target=prebuilt", i, d.Dockerfile, d.Flags)
		}
		if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, d.Platforms); diff != "" {
			t.Errorf("dockers_v2[%d].platforms (-want +got):\n%s", i, diff)
		}
	}
	if !strings.Contains(dockerfile, "COPY ${TARGETPLATFORM}/talkops /usr/local/bin/talkops") {
		t.Error("the Dockerfile's prebuilt stage no longer copies $TARGETPLATFORM/talkops, the layout dockers_v2 gives it")
	}
}

// dockerfileInstructions joins continuation lines and drops comments.
func dockerfileInstructions(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

// TestDockerfile checks the Dockerfile's structure (hadolint has no route here; the
// image test builds and runs it).
func TestDockerfile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	ins := dockerfileInstructions(string(data))
	var stages []string
	entrypoints := 0
	for _, in := range ins {
		word, rest, _ := strings.Cut(in, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			f := strings.Fields(rest)
			if len(f) != 3 || !strings.EqualFold(f[1], "AS") {
				t.Errorf("FROM %s: name every stage (FROM image AS name)", rest)
				continue
			}
			if strings.HasSuffix(f[0], ":latest") || !strings.Contains(f[0], ":") && !strings.HasPrefix(f[0], "$") && !slices.Contains(stages, f[0]) {
				t.Errorf("FROM %s: pin a tag", f[0])
			}
			stages = append(stages, f[2])
		case "ENTRYPOINT", "CMD":
			if !strings.HasPrefix(strings.TrimSpace(rest), "[") {
				t.Errorf("%s %s: use the exec (JSON) form so signals reach talkops", word, rest)
			}
			if word == "ENTRYPOINT" {
				entrypoints++
				if rest != `["/usr/bin/tini", "--", "/usr/local/bin/talkops"]` {
					t.Errorf("ENTRYPOINT %s, want tini then talkops", rest)
				}
			}
		}
	}
	if diff := cmp.Diff([]string{"runtime", "prebuilt", "compile", "release"}, stages); diff != "" {
		t.Errorf("stages (-want +got); prebuilt must come before compile for the legacy builder, release last as the default target:\n%s", diff)
	}
	if entrypoints != 1 {
		t.Errorf("%d ENTRYPOINT instructions, want 1 (in the runtime stage both targets share)", entrypoints)
	}
	src := strings.Join(ins, "\n")
	for _, want := range []string{
		"CGO_ENABLED=0 go build -trimpath",
		"USER ${RUN_AS}",
		"ARG RUN_AS=root",
		"org.opencontainers.image.source=",
		"org.opencontainers.image.revision=",
		"org.opencontainers.image.version=",
		"apt-get install -y --no-install-recommends bash ca-certificates git tini",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("the Dockerfile has no %q", want)
		}
	}
}
