package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/talkops/talkops/internal/tomlpos"
)

// pathSep joins key parts in position-index keys (see tomlpos.Join).
const pathSep = tomlpos.Sep

// pos is a 1-based position in a config file.
type pos struct {
	line, col int
}

func posOf(p tomlpos.Pos) pos { return pos{line: p.Line, col: p.Col} }

// posIndex remembers where every key and value of a document is. Paths are key parts
// joined with pathSep; an element of an array (of tables) is the part "#<index>".
type posIndex struct{ *tomlpos.Index }

func joinPath(parts []string) string { return tomlpos.Join(parts...) }

func (ix posIndex) key(parts []string) pos {
	if ix.Index == nil {
		return pos{}
	}
	return posOf(ix.Key[joinPath(parts)])
}

// val returns the value's position, or the key's if the value has none recorded.
func (ix posIndex) val(parts []string) pos {
	if ix.Index == nil {
		return pos{}
	}
	if p, ok := ix.Value[joinPath(parts)]; ok {
		return posOf(p)
	}
	return ix.key(parts)
}

// decodeTOML parses data twice: with go-toml's decoder, which validates the document
// (syntax, duplicate keys, table redefinitions), into plain maps; and with its parser, to
// record the position of every key and value.
func decodeTOML(data []byte) (map[string]any, posIndex, error) {
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, posIndex{}, err
	}
	ix, err := tomlpos.Build(data)
	if err != nil {
		return nil, posIndex{}, err
	}
	return doc, posIndex{ix}, nil
}

// fileSource describes one config file being read.
type fileSource struct {
	abs     string // absolute path
	display string // as shown in errors: relative, ~/..., or absolute
	label   string // as shown in sources, before ":line"
	base    string // directory relative paths in the file resolve against
	layer   layer
	ix      posIndex
}

func (f *fileSource) errAt(p pos, key, msg string, err error) *Error {
	e := &Error{File: f.display, Line: p.line, Column: p.col, Key: key, Msg: msg, Err: err}
	var ve *valueError
	if errors.As(err, &ve) {
		e.Valid, e.ValidWhat = ve.valid, ve.validWhat
	}
	if e.Line == 0 {
		// Every position should be in the index; the table start is the honest fallback.
		e.Line = 1
	}
	return e
}

// sourceAt is the source of the value at path.
func (f *fileSource) sourceAt(path []string) source {
	p := f.ix.key(path)
	return source{label: f.label + ":" + strconv.Itoa(p.line), file: f, line: p.line, col: p.col, val: f.ix.val(path), base: f.base, layer: f.layer}
}

// decodeError turns go-toml's error into an *Error at the position go-toml found.
func (f *fileSource) decodeError(err error) *Error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		if line < 1 {
			line = 1
		}
		return &Error{File: f.display, Line: line, Column: col, Key: strings.Join(de.Key(), "."),
			Msg: "invalid TOML: " + strings.TrimPrefix(de.Error(), "toml: "), Err: err}
	}
	// go-toml reports document problems as *DecodeError; anything else has no position.
	return &Error{File: f.display, Line: 1, Msg: "invalid TOML: " + strings.TrimPrefix(err.Error(), "toml: "), Err: err}
}

// schema is the tree of valid tables and keys, built from the key table.
type schema struct {
	name      string
	key       *Key // leaf
	children  []*schema
	providers bool // the [sandboxes.providers.NAME] tables
	mcp       bool // the [mcp.servers.NAME] tables
}

func (s *schema) child(name string) *schema {
	for _, c := range s.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

func (s *schema) childNames() []string {
	out := make([]string, len(s.children))
	for i, c := range s.children {
		out[i] = c.name
	}
	return out
}

func (s *schema) add(parts []string, leaf *Key) *schema {
	n := s
	for _, part := range parts {
		c := n.child(part)
		if c == nil {
			c = &schema{name: part}
			n.children = append(n.children, c)
		}
		n = c
	}
	n.key = leaf
	return n
}

// providersTable is the dotted name of the per-provider tables.
const providersTable = "sandboxes.providers"

// mcpServersTable is the dotted name of the MCP server tables.
const mcpServersTable = "mcp.servers"

var root = buildSchema()

func buildSchema() *schema {
	s := &schema{}
	for i := range keys {
		k := &keys[i]
		s.add(strings.Split(k.Name, "."), k)
		for _, a := range k.Aliases {
			s.add(strings.Split(a, "."), k)
		}
		if k.Name == "sandboxes.sync_workspace" {
			// Keep [sandboxes.sync] next to sync_workspace in "valid keys" lists.
			s.add([]string{"sandboxes", "sync"}, nil)
		}
	}
	s.add(strings.Split(providersTable, "."), nil).providers = true
	s.add(strings.Split(mcpServersTable, "."), nil).mcp = true
	return s
}

// typeName names a TOML value's type for "want a table, got ..." messages.
func typeName(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a table"
	case []any:
		return "an array"
	}
	return describe(v)
}

// sortedKeys orders a table's keys as they appear in the file, so the first error
// reported is the first in the file.
func sortedKeys(m map[string]any, ix posIndex, path []string) []string {
	return keysInFileOrder(m, func(name string) pos { return ix.key(append(slices.Clone(path), name)) })
}

// keysInFileOrder returns m's keys ordered by where at says each is written (then by
// name, for keys without a position).
func keysInFileOrder(m map[string]any, at func(name string) pos) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		pa, pb := at(a), at(b)
		if pa.line != pb.line {
			return pa.line - pb.line
		}
		if pa.col != pb.col {
			return pa.col - pb.col
		}
		return strings.Compare(a, b)
	})
	return names
}

// fileValues is what one config file sets.
type fileValues struct {
	settings  map[string]setting // by canonical key name
	spelled   map[string]string  // canonical key name → spelling used in the file
	providers map[string]*ProviderTable
	mcp       map[string]*ProviderTable
	layer     layer
}

// readDoc validates a decoded document against the schema and collects its settings.
func (l *loader) readDoc(f *fileSource, doc map[string]any) (*fileValues, error) {
	fv := &fileValues{settings: map[string]setting{}, spelled: map[string]string{}, providers: map[string]*ProviderTable{}, mcp: map[string]*ProviderTable{}, layer: f.layer}
	if f.layer == layerUser && l.opts.Providers != nil {
		// [sandboxes] default may name a custom provider defined further down the file.
		sb, _ := doc["sandboxes"].(map[string]any)
		provs, _ := sb["providers"].(map[string]any)
		for _, name := range sortedKeys(provs, f.ix, []string{"sandboxes", "providers"}) {
			tbl, ok := provs[name].(map[string]any)
			if ok && isPluginTable(tbl) && !slices.Contains(l.opts.Providers, name) {
				l.opts.Providers = append(slices.Clone(l.opts.Providers), name)
			}
		}
	}
	if err := l.walk(f, fv, root, doc, nil); err != nil {
		return nil, err
	}
	return fv, nil
}

func (l *loader) walk(f *fileSource, fv *fileValues, s *schema, m map[string]any, path []string) error {
	for _, name := range sortedKeys(m, f.ix, path) {
		v := m[name]
		p := append(slices.Clone(path), name)
		dotted := strings.Join(p, ".")
		c := s.child(name)
		switch {
		case c == nil:
			what, valid := "key", s.childNames()
			if len(path) == 0 {
				what = "section"
			}
			e := f.errAt(f.ix.key(p), dotted, fmt.Sprintf("unknown %s %q", what, dotted), nil)
			e.Valid, e.ValidWhat = valid, what+"s"
			return e
		case c.key != nil:
			if err := l.readKey(f, fv, c.key, dotted, p, v); err != nil {
				return err
			}
		default:
			sub, ok := v.(map[string]any)
			if !ok {
				return f.errAt(f.ix.val(p), dotted, fmt.Sprintf("%s: want a table [%s], got %s", dotted, dotted, typeName(v)), nil)
			}
			if c.providers {
				if err := l.readProviders(f, fv, sub, p); err != nil {
					return err
				}
				continue
			}
			if c.mcp {
				if err := l.readMCPServers(f, fv, sub, p); err != nil {
					return err
				}
				continue
			}
			if err := l.walk(f, fv, c, sub, p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *loader) readKey(f *fileSource, fv *fileValues, k *Key, dotted string, path []string, v any) error {
	if prev, ok := fv.spelled[k.Name]; ok {
		return f.errAt(f.ix.key(path), dotted, fmt.Sprintf("%s and %s are the same setting; set only %s", prev, dotted, k.Name), nil)
	}
	if _, isTable := v.(map[string]any); isTable {
		return f.errAt(f.ix.val(path), dotted, fmt.Sprintf("%s: want a %s, got a table", dotted, k.Type), nil)
	}
	parsed, err := parseTOML(k, v, l.opts.Providers)
	if err != nil {
		return f.errAt(f.ix.val(path), dotted, dotted+": "+err.Error(), err)
	}
	if err := runCheck(k, parsed); err != nil {
		return f.errAt(f.ix.val(path), dotted, dotted+": "+err.Error(), err)
	}
	src := f.sourceAt(path)
	fv.spelled[k.Name] = dotted
	fv.settings[k.Name] = setting{val: l.resolvePath(k, parsed, src.base), raw: parsed, src: src}
	return nil
}

func runCheck(k *Key, v any) error {
	if k.Check == nil {
		return nil
	}
	return k.Check(v)
}

func (l *loader) readProviders(f *fileSource, fv *fileValues, m map[string]any, path []string) error {
	for _, name := range sortedKeys(m, f.ix, path) {
		p := append(slices.Clone(path), name)
		dotted := strings.Join(p, ".")
		tbl, isTable := m[name].(map[string]any)
		// A built-in's table may have an options key of its own; only other names are plugins.
		plugin := isTable && isPluginTable(tbl) && !slices.Contains(l.builtin, name)
		if err := l.checkPlugin(f, name, dotted, p, tbl, plugin); err != nil {
			return err
		}
		if l.opts.Providers != nil && !slices.Contains(l.opts.Providers, name) {
			e := f.errAt(f.ix.key(p), dotted, fmt.Sprintf("unknown provider %q in [%s]; a custom provider is a table with command or backend in ~/.talkops/config.toml",
				name, dotted), nil)
			e.Valid, e.ValidWhat = l.opts.Providers, "providers"
			return e
		}
		if !isTable {
			return f.errAt(f.ix.val(p), dotted, fmt.Sprintf("%s: want a table [%s], got %s", dotted, dotted, typeName(m[name])), nil)
		}
		pt := newTable(f, tbl, p, name)
		pt.Plugin = plugin
		if wd, ok := tbl[workingDirKey]; ok {
			s, isString := wd.(string)
			wp := append(slices.Clone(p), workingDirKey)
			if !isString || s == "" {
				return f.errAt(f.ix.val(wp), dotted+"."+workingDirKey,
					fmt.Sprintf("%s.%s: want a non-empty path inside the sandbox, got %s", dotted, workingDirKey, describe(wd)), nil)
			}
		}
		fv.providers[name] = pt
	}
	return nil
}

// newTable builds the table at path p (its name is the last part) with the positions of
// its keys.
func newTable(f *fileSource, tbl map[string]any, p []string, name string) *ProviderTable {
	pt := &ProviderTable{Name: name, Values: map[string]any{}, pos: map[string]filePos{}}
	pt.header = filePos{file: f, pos: f.ix.key(p)}
	prefix := joinPath(p) + pathSep
	for k, kp := range f.ix.Key {
		if strings.HasPrefix(k, prefix) {
			rel := strings.TrimPrefix(k, prefix)
			pt.pos[rel] = filePos{file: f, pos: posOf(kp), val: posOf(f.ix.Value[k])}
		}
	}
	for k, v := range tbl {
		pt.Values[k] = v
	}
	return pt
}

// mcpTrustedKeys are the [mcp.servers.NAME] keys only a trusted file (the user's
// ~/.talkops/config.toml) may set: they run a command, on the sandbox or the host, send
// credentials, or open the private network. A project file comes with the code under review, so it may only name a
// plain URL, and talkops never exempts such a server from the private-address refusal.
// Trust class: trusted-only (like every key that runs host commands or carries secrets).
var mcpTrustedKeys = []string{"command", "args", "env", "headers", "host", "allow_private"}

// readMCPServers reads the [mcp.servers.NAME] tables. The agent's MCP package decodes
// their keys; this only enforces where they may come from.
func (l *loader) readMCPServers(f *fileSource, fv *fileValues, m map[string]any, path []string) error {
	for _, name := range sortedKeys(m, f.ix, path) {
		p := append(slices.Clone(path), name)
		dotted := strings.Join(p, ".")
		tbl, ok := m[name].(map[string]any)
		if !ok {
			return f.errAt(f.ix.val(p), dotted, fmt.Sprintf("%s: want a table [%s], got %s", dotted, dotted, typeName(m[name])), nil)
		}
		if f.layer == layerProject {
			for _, k := range sortedKeys(tbl, f.ix, p) {
				if slices.Contains(mcpTrustedKeys, k) {
					kp := append(slices.Clone(p), k)
					return f.errAt(f.ix.key(kp), dotted+"."+k, fmt.Sprintf(
						"%s.%s: a project config file cannot add an MCP server that runs a command, receives headers or environment, "+
							"or reaches private addresses "+
							"(the file comes with the code under review); configure server %q in ~/.talkops/config.toml or pass --mcp-config",
						dotted, k, name), nil)
				}
			}
		}
		pt := newTable(f, tbl, p, name)
		pt.table = mcpServersTable
		fv.mcp[name] = pt
	}
	return nil
}

// pluginKeys make a [sandboxes.providers.NAME] table a custom provider (a plugin): the
// executable to run (command), the Python class the bridge serves (backend), or only the
// options for a provider found by Python entry point.
//
// These keys are trusted-only: they make talkops run a program on the host, so only the
// user's own ~/.talkops/config.toml may set them, never a project's .talkops/config.toml
// (which a pull request can change). A project file may still select a configured plugin
// by name and set its working_dir, which only changes the inside of the sandbox.
var pluginKeys = []string{"command", "backend", "options"}

func isPluginTable(tbl map[string]any) bool {
	for _, k := range pluginKeys {
		if _, ok := tbl[k]; ok {
			return true
		}
	}
	return false
}

// checkPlugin enforces where a plugin table may be, and makes a valid one's name a valid
// provider for the rest of the load (flags, environment and the project file).
func (l *loader) checkPlugin(f *fileSource, name, dotted string, p []string, tbl map[string]any, plugin bool) error {
	if !plugin {
		return nil
	}
	key := ""
	for _, k := range pluginKeys {
		if _, ok := tbl[k]; ok {
			key = k
			break
		}
	}
	kp := append(slices.Clone(p), key)
	if f.layer != layerUser {
		return f.errAt(f.ix.key(kp), dotted+"."+key, fmt.Sprintf(
			"%s.%s is trusted-only: a custom provider runs a program on this machine, so it is configured in ~/.talkops/config.toml, not in a project's config", dotted, key), nil)
	}
	if l.opts.Providers != nil && !slices.Contains(l.opts.Providers, name) {
		l.opts.Providers = append(slices.Clone(l.opts.Providers), name)
	}
	return nil
}

// PluginNames returns the names of the custom providers in the user config file under
// home, in file order, for the command line's --sandbox NAME before the whole
// configuration is loaded. A missing or invalid file gives none (Load reports it).
func PluginNames(home string) []string {
	data, err := os.ReadFile(filepath.Join(home, ".talkops", "config.toml"))
	if err != nil {
		return nil
	}
	doc, ix, err := decodeTOML(data)
	if err != nil {
		return nil
	}
	sb, _ := doc["sandboxes"].(map[string]any)
	provs, _ := sb["providers"].(map[string]any)
	var names []string
	for _, name := range sortedKeys(provs, ix, []string{"sandboxes", "providers"}) {
		if tbl, ok := provs[name].(map[string]any); ok && isPluginTable(tbl) {
			names = append(names, name)
		}
	}
	return names
}
