package actiontest_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v4"

	"github.com/talkops/talkops/report"
)

// TestGitLabExample checks examples/gitlab/.gitlab-ci.yml against what talkops writes:
// the report file names come from package report, the directory from the job's own
// --report-dir.
func TestGitLabExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "gitlab", ".gitlab-ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]struct {
		Image struct {
			Name       string   `yaml:"name"`
			Entrypoint []string `yaml:"entrypoint"`
		} `yaml:"image"`
		Script    []string `yaml:"script"`
		Artifacts struct {
			When    string   `yaml:"when"`
			Paths   []string `yaml:"paths"`
			Reports struct {
				JUnit       string `yaml:"junit"`
				CodeQuality string `yaml:"codequality"`
			} `yaml:"reports"`
		} `yaml:"artifacts"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf(".gitlab-ci.yml: %v", err)
	}
	job, ok := doc["talkops"]
	if !ok {
		t.Fatal(".gitlab-ci.yml has no talkops job")
	}
	if !strings.HasPrefix(job.Image.Name, "ghcr.io/talkops/talkops:") {
		t.Errorf("image %q, want ghcr.io/talkops/talkops", job.Image.Name)
	}
	if diff := cmp.Diff([]string{""}, job.Image.Entrypoint); diff != "" {
		t.Errorf("image.entrypoint (-want +got); GitLab must be able to start its shell:\n%s", diff)
	}
	script := strings.Join(job.Script, "\n")
	m := regexp.MustCompile(`--report-dir (\S+)`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("the script sets no --report-dir: %q", script)
	}
	dir := m[1]
	if !strings.Contains(script, "exec talkops") {
		t.Errorf("the script does not exec talkops, so GitLab's stop signal would not reach it: %q", script)
	}
	for _, c := range []struct{ what, got, want string }{
		{"artifacts.reports.junit", job.Artifacts.Reports.JUnit, dir + "/" + report.JUnitFile},
		{"artifacts.reports.codequality", job.Artifacts.Reports.CodeQuality, dir + "/" + report.CodeQualityFile},
		{"artifacts.when", job.Artifacts.When, "always"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if diff := cmp.Diff([]string{dir + "/"}, job.Artifacts.Paths); diff != "" {
		t.Errorf("artifacts.paths (-want +got); result.json and every report live there:\n%s", diff)
	}
}

// TestJenkinsExample checks examples/jenkins/Jenkinsfile the same way.
func TestJenkinsExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "jenkins", "Jenkinsfile"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	m := regexp.MustCompile(`--report-dir (\S+)`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("the Jenkinsfile sets no --report-dir")
	}
	dir := m[1]
	for _, want := range []string{
		"image 'ghcr.io/talkops/talkops:",
		"args '--entrypoint='",
		"junit testResults: '" + dir + "/" + report.JUnitFile + "'",
		"archiveArtifacts artifacts: '" + dir + "/**'", // result.json and every report
		"exec talkops",
		"credentials(",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("the Jenkinsfile has no %q", want)
		}
	}
	if strings.Count(src, "{") != strings.Count(src, "}") {
		t.Error("the Jenkinsfile's braces do not balance")
	}
}
