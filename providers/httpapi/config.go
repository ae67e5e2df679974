package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/talkops/talkops/providers"
)

// ConfigError is a missing or invalid provider setting, found by a constructor before
// anything was created. It wraps providers.ErrConfig, which the CLI maps to exit code 2.
type ConfigError struct {
	Provider string
	// Vars names the environment variables or settings involved.
	Vars []string
	// Problem says what is wrong ("is not set", "must be a URL").
	Problem string
	// Hint says how to fix it.
	Hint string
}

func (e *ConfigError) Error() string {
	msg := fmt.Sprintf("%s: %s %s", e.Provider, strings.Join(e.Vars, " / "), e.Problem)
	if e.Hint != "" {
		msg += " (" + e.Hint + ")"
	}
	return msg
}

// Unwrap returns providers.ErrConfig.
func (e *ConfigError) Unwrap() error { return providers.ErrConfig }

// RemoteOptions are the settings every HTTP sandbox provider shares that are not user
// configuration: where commands run and stage files, and the HTTP client's transport.
// A provider's Options embeds it, so the fields read as the provider's own.
type RemoteOptions struct {
	// WorkingDir is the sandbox working directory; Spec.WorkDir overrides it.
	WorkingDir string `toml:"-"`
	// TempDir is where command scripts stage files inside the sandbox (pid files, large
	// stdin, output kept for the client); default /tmp.
	TempDir string `toml:"-"`
	// HTTPClient, Retry and Stats are passed to the HTTP client.
	HTTPClient *http.Client `toml:"-"`
	Retry      Retry        `toml:"-"`
	Stats      *Stats       `toml:"-"`
}

// Resolve fills in defaultWorkingDir and checks both directories with CheckSandboxDirs.
func (o *RemoteOptions) Resolve(provider, defaultWorkingDir string) error {
	if o.WorkingDir == "" {
		o.WorkingDir = defaultWorkingDir
	}
	return CheckSandboxDirs(provider, o.WorkingDir, o.TempDir)
}

// CheckSandboxDirs returns a *ConfigError naming provider unless workingDir, and tempDir
// when set, are absolute paths inside the sandbox.
func CheckSandboxDirs(provider, workingDir, tempDir string) error {
	if !strings.HasPrefix(workingDir, "/") {
		return &ConfigError{Provider: provider, Vars: []string{"working_dir"}, Problem: fmt.Sprintf("is %q, not an absolute path", workingDir)}
	}
	if tempDir != "" && !strings.HasPrefix(tempDir, "/") {
		return &ConfigError{Provider: provider, Vars: []string{"temp_dir"}, Problem: fmt.Sprintf("is %q, not an absolute path", tempDir)}
	}
	return nil
}

// NewClient returns a client of one of provider's APIs that uses o's transport, retry
// bounds and counters.
func (o RemoteOptions) NewClient(provider, baseURL string, header http.Header, decodeError func(status int, body []byte) (code, message string)) *Client {
	return &Client{Provider: provider, BaseURL: baseURL, HTTP: o.HTTPClient, Header: header, Retry: o.Retry, DecodeError: decodeError, Stats: o.Stats}
}

// CheckNotNegative returns a *ConfigError naming provider, setting and its value when v
// is negative; 0 is the provider's default.
func CheckNotNegative[T ~int | ~int64](provider, setting string, v T) error {
	if v < 0 {
		return &ConfigError{Provider: provider, Vars: []string{setting}, Problem: fmt.Sprintf("is %v: must not be negative", v), Hint: "leave it out for the default"}
	}
	return nil
}

// CheckURL returns a *ConfigError naming provider and setting unless rawURL is an
// absolute http(s) URL; example shows a valid one.
func CheckURL(provider, setting, rawURL, example string) error {
	if u, err := url.Parse(rawURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return &ConfigError{Provider: provider, Vars: []string{setting}, Problem: fmt.Sprintf("is %q, not an http(s) URL", rawURL), Hint: "for example " + example}
	}
	return nil
}

// Env returns getenv, or, when it is nil, a lookup that finds nothing: a provider's New
// reads its credentials only through the function it is given.
func Env(getenv func(string) string) func(string) string {
	if getenv == nil {
		return func(string) string { return "" }
	}
	return getenv
}
