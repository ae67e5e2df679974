package httpapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/talkops/talkops/providers"
	"github.com/talkops/talkops/providers/httpapi"
)

func TestRemoteOptionsResolve(t *testing.T) {
	t.Parallel()
	o := httpapi.RemoteOptions{}
	if err := o.Resolve("p", "/home/p"); err != nil || o.WorkingDir != "/home/p" {
		t.Fatalf("Resolve on zero options = %v, WorkingDir %q; want nil and the default", err, o.WorkingDir)
	}
	for _, tc := range []struct {
		opts httpapi.RemoteOptions
		want string
	}{
		{httpapi.RemoteOptions{WorkingDir: "rel"}, `p: working_dir is "rel", not an absolute path`},
		{httpapi.RemoteOptions{TempDir: "tmp"}, `p: temp_dir is "tmp", not an absolute path`},
	} {
		err := tc.opts.Resolve("p", "/home/p")
		if !errors.Is(err, providers.ErrConfig) || err.Error() != tc.want {
			t.Errorf("Resolve(%+v) = %v, want %q wrapping ErrConfig", tc.opts, err, tc.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"https://api.example.com", "http://127.0.0.1:8080/api"} {
		if err := httpapi.CheckURL("p", "api_url", ok, "https://x"); err != nil {
			t.Errorf("CheckURL(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "api.example.com", "ftp://x", "https://", "::"} {
		err := httpapi.CheckURL("p", "api_url / P_URL", bad, "https://x")
		if !errors.Is(err, providers.ErrConfig) || !strings.Contains(err.Error(), "api_url / P_URL") || !strings.Contains(err.Error(), "for example https://x") {
			t.Errorf("CheckURL(%q) = %v, want a config error naming the setting and the example", bad, err)
		}
	}
}

func TestEnv(t *testing.T) {
	t.Parallel()
	if v := httpapi.Env(nil)("HOME"); v != "" {
		t.Errorf("Env(nil) found %q", v)
	}
	if v := httpapi.Env(func(string) string { return "x" })("K"); v != "x" {
		t.Errorf("Env(f) = %q, want f's value", v)
	}
}
