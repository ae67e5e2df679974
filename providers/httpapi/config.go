package httpapi

import (
	"fmt"
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
