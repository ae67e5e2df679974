package modal

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/talkops/talkops/providers/httpapi"
)

// account is what a Modal client needs to authenticate, resolved the way Modal's
// own clients do: each MODAL_* variable wins over the same key of the active profile in
// the config file.
type account struct {
	tokenID, tokenSecret string
	environment          string
	serverURL            string
}

// profile is one [name] table of ~/.modal.toml.
type profile struct {
	TokenID     string `toml:"token_id"`
	TokenSecret string `toml:"token_secret"`
	Environment string `toml:"environment"`
	ServerURL   string `toml:"server_url"`
	Active      bool   `toml:"active"`
}

// configPath is MODAL_CONFIG_PATH, else ~/.modal.toml.
func configPath(getenv func(string) string) string {
	if p := getenv("MODAL_CONFIG_PATH"); p != "" {
		return p
	}
	home := getenv("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".modal.toml")
}

// loadCredentials resolves the token and settings from the environment and the config
// file. A missing token is a *httpapi.ConfigError naming both variables and the file.
func loadCredentials(getenv func(string) string) (account, error) {
	path := configPath(getenv)
	prof, name, err := readProfile(path, getenv("MODAL_PROFILE"))
	if err != nil {
		return account{}, &httpapi.ConfigError{Provider: Name, Vars: []string{path}, Problem: "cannot be read: " + err.Error(),
			Hint: "fix the file, or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"}
	}
	c := account{
		tokenID:     cmp.Or(getenv("MODAL_TOKEN_ID"), prof.TokenID),
		tokenSecret: cmp.Or(getenv("MODAL_TOKEN_SECRET"), prof.TokenSecret),
		environment: cmp.Or(getenv("MODAL_ENVIRONMENT"), prof.Environment),
		serverURL:   cmp.Or(getenv("MODAL_SERVER_URL"), prof.ServerURL),
	}
	var missing []string
	if c.tokenID == "" {
		missing = append(missing, "MODAL_TOKEN_ID")
	}
	if c.tokenSecret == "" {
		missing = append(missing, "MODAL_TOKEN_SECRET")
	}
	if len(missing) > 0 {
		where := fmt.Sprintf("and %s has no profile with token_id and token_secret", path)
		if name != "" {
			where = fmt.Sprintf("and profile %q of %s lacks token_id or token_secret", name, path)
		}
		verb := "is"
		if len(missing) > 1 {
			verb = "are"
		}
		return account{}, &httpapi.ConfigError{Provider: Name, Vars: missing,
			Problem: verb + " not set " + where, Hint: "create a token with `modal token new` or in the Modal dashboard under Settings → API Tokens"}
	}
	return c, nil
}

// readProfile reads the profile to use from the config file: want when set (it must
// exist), else the one marked active = true, else "default". A missing file is no
// profile, not an error.
func readProfile(path, want string) (profile, string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if want != "" {
			return profile{}, "", fmt.Errorf("MODAL_PROFILE is %q but the file does not exist", want)
		}
		return profile{}, "", nil
	}
	if err != nil {
		return profile{}, "", err
	}
	var profiles map[string]profile
	if err := toml.Unmarshal(data, &profiles); err != nil {
		return profile{}, "", err
	}
	if want != "" {
		p, ok := profiles[want]
		if !ok {
			return profile{}, "", fmt.Errorf("MODAL_PROFILE is %q but the file has no [%s] profile", want, want)
		}
		return p, want, nil
	}
	for name, p := range profiles {
		if p.Active {
			return p, name, nil
		}
	}
	if p, ok := profiles["default"]; ok {
		return p, "default", nil
	}
	return profile{}, "", nil
}

// authRefreshMargin is how long before its expiry a cached auth token is replaced.
const authRefreshMargin = 5 * time.Minute

// tokenCache holds a JWT and fetches a new one when it is about to expire.
type tokenCache struct {
	mu      sync.Mutex
	token   string
	expires time.Time
	fetch   func(ctx context.Context) (string, error)
	now     func() time.Time
}

// get returns a token valid for at least margin more.
func (tc *tokenCache) get(ctx context.Context, margin time.Duration) (string, error) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.token != "" && tc.now().Add(margin).Before(tc.expires) {
		return tc.token, nil
	}
	tok, err := tc.fetch(ctx)
	if err != nil {
		return "", err
	}
	tc.token, tc.expires = tok, jwtExpiry(tok, tc.now())
	return tok, nil
}

// invalidate forgets the token, so the next get fetches one.
func (tc *tokenCache) invalidate() {
	tc.mu.Lock()
	tc.token = ""
	tc.mu.Unlock()
}

// jwtExpiry reads the exp claim of a JWT without checking its signature (the server
// does that); a token without a readable exp is treated as valid for ten minutes.
func jwtExpiry(tok string, now time.Time) time.Time {
	fallback := now.Add(10 * time.Minute)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return fallback
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return fallback
	}
	var claims struct {
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp <= 0 {
		return fallback
	}
	return time.Unix(int64(claims.Exp), 0)
}
