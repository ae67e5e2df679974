package model

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Wire formats.
const (
	wireAnthropic = "anthropic"
	wireOpenAI    = "openai"
)

// provider describes one PROVIDER of a PROVIDER:NAME spec.
type provider struct {
	wire string
	// keyEnv is the environment variable holding the API key ("" = none needed).
	keyEnv string
	// baseURLEnv is the environment variable the official SDKs read a base URL from
	// (gateways and proxies set it); an explicit base URL wins.
	baseURLEnv string
	// keyOptional: a missing key is fine (local servers).
	keyOptional bool
	// baseURL is the default endpoint ("" = the SDK's).
	baseURL string
	// needsBaseURL: the endpoint is per-customer and must be given.
	needsBaseURL bool
	// defaultModel is used when the spec names no model.
	defaultModel string
}

// providers lists the providers New accepts. Every OpenAI-compatible server works with
// "openai" and a base URL; the others are shorthands with the right defaults.
var providers = map[string]provider{
	"anthropic":  {wire: wireAnthropic, keyEnv: "ANTHROPIC_API_KEY", baseURLEnv: "ANTHROPIC_BASE_URL", defaultModel: "claude-sonnet-4-5"},
	"openai":     {wire: wireOpenAI, keyEnv: "OPENAI_API_KEY", baseURLEnv: "OPENAI_BASE_URL", defaultModel: "gpt-4.1"},
	"openrouter": {wire: wireOpenAI, keyEnv: "OPENROUTER_API_KEY", baseURL: "https://openrouter.ai/api/v1"},
	"azure":      {wire: wireOpenAI, keyEnv: "AZURE_OPENAI_API_KEY", needsBaseURL: true},
	"ollama":     {wire: wireOpenAI, keyEnv: "OLLAMA_API_KEY", keyOptional: true, baseURL: "http://127.0.0.1:11434/v1"},
}

// ProviderNames lists the providers a spec may name, sorted.
func ProviderNames() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// KeyEnvs lists the environment variables the providers read API keys from, sorted.
func KeyEnvs() []string {
	names := make([]string, 0, len(providers))
	for _, p := range providers {
		names = append(names, p.keyEnv)
	}
	slices.Sort(names)
	return names
}

// Option configures New.
type Option func(*config)

type config struct {
	keyEnv         map[string]string
	prices         PriceTable
	httpClient     *http.Client
	retry          RetryPolicy
	maxTokens      int
	requestTimeout time.Duration
	promptCaching  bool
}

// WithKeyEnv reads the API key of provider from the environment variable env instead of
// the default (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...).
func WithKeyEnv(provider, env string) Option {
	return func(c *config) { c.keyEnv[provider] = env }
}

// WithPrices overrides and extends DefaultPrices (see PriceTable for the key syntax).
func WithPrices(t PriceTable) Option {
	return func(c *config) { c.prices = c.prices.Merge(t) }
}

// WithHTTPClient sets the HTTP client (default: a client with no overall timeout; each
// call is bounded by WithRequestTimeout and the caller's context).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *config) { c.httpClient = hc }
}

// WithRetry replaces DefaultRetryPolicy; zero fields take the default's values.
func WithRetry(p RetryPolicy) Option {
	return func(c *config) { c.retry = p }
}

// WithMaxTokens sets the default reply cap (default 8192) for requests with MaxTokens 0.
func WithMaxTokens(n int) Option {
	return func(c *config) { c.maxTokens = n }
}

// WithRequestTimeout bounds one HTTP attempt (default 10 minutes).
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) { c.requestTimeout = d }
}

// WithPromptCaching turns Anthropic prompt caching on or off (default on): cache_control
// breakpoints on the system prompt, the last tool definition and the newest message, so
// each turn re-reads the conversation so far from the cache at a tenth of the price.
func WithPromptCaching(on bool) Option {
	return func(c *config) { c.promptCaching = on }
}

// Spec is a parsed PROVIDER:NAME.
type Spec struct {
	Provider string
	Name     string
}

func (s Spec) String() string { return s.Provider + ":" + s.Name }

// ParseSpec parses "provider:name". A bare name starting with "claude" is Anthropic's, one
// starting with "gpt-" or "o" and a digit is OpenAI's.
func ParseSpec(spec string) (Spec, error) {
	spec = strings.TrimSpace(spec)
	prov, name, ok := strings.Cut(spec, ":")
	if !ok {
		name, prov = spec, inferProvider(spec)
		if prov == "" {
			return Spec{}, fmt.Errorf("%w %q: want PROVIDER:NAME, e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4.1 (providers: %s)",
				ErrBadSpec, spec, strings.Join(ProviderNames(), ", "))
		}
	}
	prov = strings.ToLower(strings.TrimSpace(prov))
	name = strings.TrimSpace(name)
	p, known := providers[prov]
	if !known {
		return Spec{}, fmt.Errorf("%w %q: unknown provider %q (providers: %s; any OpenAI-compatible server works as openai:NAME with a base URL)",
			ErrBadSpec, spec, prov, strings.Join(ProviderNames(), ", "))
	}
	if name == "" {
		name = p.defaultModel
	}
	if name == "" {
		return Spec{}, fmt.Errorf("%w %q: provider %s needs a model name, e.g. %s:NAME", ErrBadSpec, spec, prov, prov)
	}
	return Spec{Provider: prov, Name: name}, nil
}

func inferProvider(name string) string {
	switch {
	case strings.HasPrefix(name, "claude"):
		return "anthropic"
	case strings.HasPrefix(name, "gpt-"), len(name) > 1 && name[0] == 'o' && name[1] >= '0' && name[1] <= '9':
		return "openai"
	}
	return ""
}

// New builds the Model named by spec ("anthropic:claude-sonnet-4-5", "openai:gpt-4.1",
// "ollama:qwen3", ...) talking to baseURL ("" = the provider's default). API keys come
// from getenv only, never from the process environment directly: ANTHROPIC_API_KEY,
// OPENAI_API_KEY, OPENROUTER_API_KEY, AZURE_OPENAI_API_KEY (or the names set with
// WithKeyEnv). With spec "", the provider follows the key that is present (Anthropic
// first). Errors wrap ErrNoCredentials or ErrBadSpec, both usage errors.
//
// With baseURL "", ANTHROPIC_BASE_URL or OPENAI_BASE_URL (from getenv) is used for
// those providers, as the official SDKs do.
//
// An "openai" model with a non-default base URL may run without a key (vLLM, LiteLLM
// without auth); the base URL of an OpenAI-compatible server usually ends in "/v1".
func New(spec, baseURL string, getenv func(string) string, opts ...Option) (Model, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	cfg := config{
		keyEnv:         map[string]string{},
		prices:         DefaultPrices,
		retry:          DefaultRetryPolicy,
		maxTokens:      8192,
		requestTimeout: 10 * time.Minute,
		promptCaching:  true,
	}
	for _, o := range opts {
		o(&cfg)
	}
	keyEnv := func(prov string) string {
		if e, ok := cfg.keyEnv[prov]; ok {
			return e
		}
		return providers[prov].keyEnv
	}

	var s Spec
	if strings.TrimSpace(spec) == "" {
		for _, prov := range []string{"anthropic", "openai"} {
			if strings.TrimSpace(getenv(keyEnv(prov))) != "" {
				s = Spec{Provider: prov, Name: providers[prov].defaultModel}
				break
			}
		}
		if s.Provider == "" {
			return nil, fmt.Errorf("%w: set %s (for Anthropic) or %s (for OpenAI), or choose a model with --model PROVIDER:NAME (e.g. ollama:qwen3 for a local server)",
				ErrNoCredentials, keyEnv("anthropic"), keyEnv("openai"))
		}
	} else {
		var err error
		if s, err = ParseSpec(spec); err != nil {
			return nil, err
		}
	}
	p := providers[s.Provider]

	baseURL = strings.TrimSpace(baseURL)
	if baseURL == "" && p.baseURLEnv != "" {
		baseURL = strings.TrimSpace(getenv(p.baseURLEnv))
	}
	if baseURL == "" {
		baseURL = p.baseURL
	}
	if baseURL == "" && p.needsBaseURL {
		return nil, fmt.Errorf("%w %q: provider %s needs a base URL (e.g. https://RESOURCE.openai.azure.com/openai/v1/)", ErrBadSpec, spec, s.Provider)
	}
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: base URL %q must be an absolute http or https URL", ErrBadSpec, baseURL)
		}
	}

	env := keyEnv(s.Provider)
	key := ""
	if env != "" {
		key = strings.TrimSpace(getenv(env))
	}
	customEndpoint := baseURL != "" && baseURL != p.baseURL
	if key == "" && !p.keyOptional && !(p.wire == wireOpenAI && customEndpoint) {
		return nil, fmt.Errorf("%w: model %s needs an API key in %s", ErrNoCredentials, s, env)
	}

	hc := cfg.httpClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	price, priced := cfg.prices.Lookup(s.Provider, s.Name)
	c := &client{
		spec:   s,
		key:    key,
		retry:  cfg.retry,
		price:  price,
		priced: priced,
	}
	switch p.wire {
	case wireAnthropic:
		c.wire = newAnthropic(s.Name, baseURL, key, hc, cfg)
	case wireOpenAI:
		c.wire = newOpenAI(s.Provider, s.Name, baseURL, key, hc, cfg)
	}
	return c, nil
}

// wire is one provider's API: a single attempt, errors normalised to *APIError or
// *TransportError.
type wire interface {
	complete(ctx context.Context, req Request) (Response, error)
}

// client is the Model New returns: a wire format plus retries, pricing and redaction.
type client struct {
	spec   Spec
	key    string
	wire   wire
	retry  RetryPolicy
	price  Price
	priced bool
}

var (
	_ Model        = (*client)(nil)
	_ Pricer       = (*client)(nil)
	_ SecretHolder = (*client)(nil)
)

// Complete implements Model.
func (c *client) Complete(ctx context.Context, req Request) (Response, error) {
	resp, err := c.retry.do(ctx, c.spec.Provider, func(ctx context.Context) (Response, error) {
		r, err := c.wire.complete(ctx, req)
		if err != nil {
			return r, c.redactErr(err)
		}
		return r, nil
	})
	if err != nil {
		return Response{}, err
	}
	resp.Usage.Priced = c.priced
	if c.priced {
		resp.Usage.CostUSD = c.price.Cost(resp.Usage)
	}
	return resp, nil
}

// Price implements Pricer.
func (c *client) Price() (Price, bool) { return c.price, c.priced }

// Secrets implements SecretHolder.
func (c *client) Secrets() []string {
	if c.key == "" {
		return nil
	}
	return []string{c.key}
}

// String names the model as PROVIDER:NAME.
func (c *client) String() string { return c.spec.String() }

// redactErr removes the API key from a provider's error message (some echo a prefix of
// it; a misbehaving proxy could echo all of it).
func (c *client) redactErr(err error) error {
	if c.key == "" {
		return err
	}
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		apiErr.Message = strings.ReplaceAll(apiErr.Message, c.key, "***")
	}
	var trErr *TransportError
	if errors.As(err, &trErr) && trErr.Err != nil && strings.Contains(trErr.Err.Error(), c.key) {
		trErr.Err = errors.New(strings.ReplaceAll(trErr.Err.Error(), c.key, "***"))
	}
	return err
}
