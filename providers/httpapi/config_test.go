package httpapi_test

import (
	"errors"
	"strings"
	"testing"
	"time"

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

// A negative setting is named with its value, a duration as the user wrote it; 0 (the
// default) and positive values pass.
func TestCheckNotNegative(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{httpapi.CheckNotNegative("daytona", "memory_gb", -1), "daytona: memory_gb is -1: must not be negative (leave it out for the default)"},
		{httpapi.CheckNotNegative("langsmith", "disk_bytes", int64(-5)), "langsmith: disk_bytes is -5: must not be negative (leave it out for the default)"},
		{httpapi.CheckNotNegative("modal", "ready_timeout", -time.Second), "modal: ready_timeout is -1s: must not be negative (leave it out for the default)"},
	} {
		if !errors.Is(tc.err, providers.ErrConfig) || tc.err.Error() != tc.want {
			t.Errorf("err = %v, want a config error %q", tc.err, tc.want)
		}
	}
	if err := errors.Join(httpapi.CheckNotNegative("p", "a", 0), httpapi.CheckNotNegative("p", "b", time.Minute)); err != nil {
		t.Errorf("0 and a positive value: %v, want nil", err)
	}
}
