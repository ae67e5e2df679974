package model

import (
	"sort"
	"strings"
)

// Price is what a model charges, in US dollars per million tokens.
type Price struct {
	Input  float64 `json:"input" toml:"input"`
	Output float64 `json:"output" toml:"output"`
	// CacheRead is the price of input tokens read from the prompt cache; 0 means Input.
	CacheRead float64 `json:"cache_read,omitempty" toml:"cache_read"`
	// CacheWrite is the price of input tokens written to the cache; 0 means Input.
	CacheWrite float64 `json:"cache_write,omitempty" toml:"cache_write"`
}

// Cost returns the price of u's tokens in US dollars.
func (p Price) Cost(u Usage) float64 {
	read, write := p.CacheRead, p.CacheWrite
	if read == 0 {
		read = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	return (float64(u.InputTokens)*p.Input +
		float64(u.CacheReadTokens)*read +
		float64(u.CacheWriteTokens)*write +
		float64(u.OutputTokens)*p.Output) / 1e6
}

// PriceTable maps a model name, or a prefix of one, to its price. Lookup picks the longest
// key that is a prefix of the name, so "claude-sonnet-4-5" prices the dated snapshot
// "claude-sonnet-4-5-20250929" and "gpt-4.1-mini" wins over "gpt-4.1". A key may be
// written "provider:name" to apply to one provider only.
type PriceTable map[string]Price

// DefaultPrices are list prices (standard tier, prompts under 200k tokens) as published by
// Anthropic and OpenAI in 2025. Override or extend them with WithPrices; models served by
// Ollama are free. Prices change: a wrong entry only affects cost reporting and the
// --max-cost budget.
var DefaultPrices = PriceTable{
	// Anthropic: cache writes (5-minute TTL) cost 1.25x input, cache reads 0.1x.
	"claude-opus-4-6":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
	"claude-3-5-haiku":  {Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	// Later models of a family default to the family's current price.
	"claude-opus-":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-sonnet-": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-haiku-":  {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
	// OpenAI: cached input as published; there is no cache-write charge.
	"gpt-5":        {Input: 1.25, Output: 10, CacheRead: 0.125, CacheWrite: 1.25},
	"gpt-5-mini":   {Input: 0.25, Output: 2, CacheRead: 0.025, CacheWrite: 0.25},
	"gpt-5-nano":   {Input: 0.05, Output: 0.4, CacheRead: 0.005, CacheWrite: 0.05},
	"gpt-4.1":      {Input: 2, Output: 8, CacheRead: 0.5, CacheWrite: 2},
	"gpt-4.1-mini": {Input: 0.4, Output: 1.6, CacheRead: 0.1, CacheWrite: 0.4},
	"gpt-4.1-nano": {Input: 0.1, Output: 0.4, CacheRead: 0.025, CacheWrite: 0.1},
	"gpt-4o":       {Input: 2.5, Output: 10, CacheRead: 1.25, CacheWrite: 2.5},
	"gpt-4o-mini":  {Input: 0.15, Output: 0.6, CacheRead: 0.075, CacheWrite: 0.15},
	"o3":           {Input: 2, Output: 8, CacheRead: 0.5, CacheWrite: 2},
	"o3-mini":      {Input: 1.1, Output: 4.4, CacheRead: 0.55, CacheWrite: 1.1},
	"o4-mini":      {Input: 1.1, Output: 4.4, CacheRead: 0.275, CacheWrite: 1.1},
	// Local models cost nothing.
	"ollama:": {},
}

// Lookup returns the price for the model name served by provider, and whether one is known.
func (t PriceTable) Lookup(provider, name string) (Price, bool) {
	qualified := provider + ":" + name
	best, bestLen, found := Price{}, -1, false
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic on ties
	for _, k := range keys {
		match := false
		if strings.Contains(k, ":") {
			match = strings.HasPrefix(qualified, k)
		} else {
			match = strings.HasPrefix(name, k)
		}
		// A provider-qualified key beats an unqualified one of the same name length.
		l := len(k)
		if match && l > bestLen {
			best, bestLen, found = t[k], l, true
		}
	}
	return best, found
}

// Merge returns a table with t's entries overridden and extended by over's.
func (t PriceTable) Merge(over PriceTable) PriceTable {
	out := make(PriceTable, len(t)+len(over))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}
