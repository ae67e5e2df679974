package config

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/talkops/talkops/result"
)

const workingDirKey = "working_dir"

// filePos is where a provider table's key and value are.
type filePos struct {
	file *fileSource
	pos  pos // the key
	val  pos // the value
}

// ProviderTable is one [sandboxes.providers.NAME] table: working_dir, common to every
// provider, and the provider-specific keys, which the provider decodes itself with Decode
// so that it reports unknown keys and bad values at their file:line.
type ProviderTable struct {
	Name string
	// Plugin is set for a custom provider: a table in the user config with command,
	// backend or options (see pluginKeys), which the plugin provider decodes.
	Plugin bool
	// WorkingDir overrides the provider's working directory inside the sandbox; "" keeps
	// the provider's default.
	WorkingDir string
	// Values holds the provider-specific keys (everything but working_dir) as go-toml
	// decodes them: string, int64, float64, bool, time values, []any, map[string]any.
	Values map[string]any

	header filePos
	pos    map[string]filePos // by key path relative to the table (pathSep-joined)
	table  string             // the dotted parent table; "" is providersTable
	// trustProject lets the project file set fields not tagged `trust:"safe"`.
	trustProject bool
}

// tableName is the dotted name of the table holding t: sandboxes.providers or mcp.servers.
func (t ProviderTable) tableName() string {
	if t.table == "" {
		return providersTable
	}
	return t.table
}

// merge lays src (a higher-precedence file's table) over t, key by key: a key src sets
// replaces t's whole value for that key, nested tables included.
func (t *ProviderTable) merge(src *ProviderTable) {
	vals, ps := maps.Clone(t.Values), maps.Clone(t.pos)
	for k, v := range src.Values {
		vals[k] = v
		for p := range ps {
			if p == k || strings.HasPrefix(p, k+pathSep) {
				delete(ps, p)
			}
		}
	}
	maps.Copy(ps, src.pos)
	t.Values, t.pos, t.header = vals, ps, src.header
	t.Plugin = t.Plugin || src.Plugin
}

// finish moves working_dir out of Values.
func (t *ProviderTable) finish() {
	if wd, ok := t.Values[workingDirKey].(string); ok {
		t.WorkingDir = wd
		t.Values = maps.Clone(t.Values)
		delete(t.Values, workingDirKey)
	}
}

// Source says where key (dotted, relative to the table, e.g. "image" or
// "mounts[0].source") was set, as "file:line"; "" for the table itself is the header.
func (t ProviderTable) Source(key string) string {
	fp, ok := t.header, true
	if key != "" {
		fp, ok = t.pos[joinPath(splitKey(key))]
	}
	if !ok || fp.file == nil {
		return ""
	}
	return fp.file.label + ":" + strconv.Itoa(fp.pos.line)
}

// splitKey turns "mounts[0].source" into the index path parts mounts, #0, source.
func splitKey(key string) []string {
	var parts []string
	for part := range strings.SplitSeq(key, ".") {
		name, idx, hasIdx := strings.Cut(part, "[")
		parts = append(parts, name)
		for hasIdx {
			var i string
			i, idx, _ = strings.Cut(idx, "]")
			parts = append(parts, "#"+i)
			_, idx, hasIdx = strings.Cut(idx, "[")
		}
	}
	return parts
}

// fullKey renders an index path as the dotted key a user reads:
// sandboxes.providers.docker.mounts[0].source.
func (t ProviderTable) fullKey(path []string) string {
	var b strings.Builder
	b.WriteString(t.tableName() + "." + t.Name)
	for _, p := range path {
		if i, ok := strings.CutPrefix(p, "#"); ok {
			b.WriteString("[" + i + "]")
			continue
		}
		b.WriteString("." + p)
	}
	return b.String()
}

// errAt makes an *Error at path's value (or key) position, falling back to the header.
func (t ProviderTable) errAt(path []string, atKey bool, msg string) *Error {
	fp, ok := t.pos[joinPath(path)]
	p := fp.val
	if atKey || p.line == 0 {
		p = fp.pos
	}
	if !ok || p.line == 0 {
		fp, p = t.header, t.header.pos
	}
	if fp.file == nil {
		// A table built in a test, or by hand, has no file to point at.
		return &Error{Source: "[" + t.tableName() + "." + t.Name + "]", Key: t.fullKey(path), Msg: msg}
	}
	return fp.file.errAt(p, t.fullKey(path), msg, nil)
}

// Errorf returns an *Error at the value of key (dotted, relative to the table, as for
// Source), for a provider's own validation: tbl.Errorf("memory", "must be at least %s",
// min) reads "file:line:col: sandboxes.providers.docker.memory: must be at least 6MiB".
func (t ProviderTable) Errorf(key, format string, args ...any) *Error {
	var path []string
	if key != "" {
		path = splitKey(key)
	}
	return t.errAt(path, false, t.fullKey(path)+": "+fmt.Sprintf(format, args...))
}

// Decode stores the provider-specific keys in the struct v points to, strictly: a key
// with no matching field, or a value of the wrong type, is an *Error at its file:line.
// Fields match their `toml:"name"` tag, else their lower-cased name; a tag "-" skips the
// field. Supported field types: string, bool, integers, floats, time.Duration (from a
// string like "90s"), time.Time, encoding.TextUnmarshaler (from a string), slices, maps
// with string keys, structs and pointers to these, and any.
//
// A top-level field the project's own config file may set must be tagged `trust:"safe"`
// (a literal that only changes the inside of an isolating sandbox); setting an untagged
// one from the project file is an *Error unless a trusted layer set trust_project_config.
func (t ProviderTable) Decode(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: decode provider %s options: want a non-nil pointer to a struct, got %T", t.Name, v)
	}
	return t.decodeStruct(rv.Elem(), t.Values, nil)
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	timeType     = reflect.TypeFor[time.Time]()
	textType     = reflect.TypeFor[encoding.TextUnmarshaler]()
)

type structField struct {
	name  string
	index []int
	safe  bool // tagged trust:"safe": the project file may set it
}

func structFields(typ reflect.Type, prefix []int) []structField {
	var out []structField
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "-" {
			continue
		}
		index := append(slices.Clone(prefix), i)
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, structFields(f.Type, index)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		out = append(out, structField{name: tag, index: index, safe: f.Tag.Get("trust") == safeTag})
	}
	return out
}

func (t ProviderTable) decodeStruct(dst reflect.Value, m map[string]any, path []string) error {
	fields := structFields(dst.Type(), nil)
	names := keysInFileOrder(m, func(name string) pos { return t.pos[joinPath(append(slices.Clone(path), name))].pos })
	for _, name := range names {
		p := append(slices.Clone(path), name)
		i := slices.IndexFunc(fields, func(f structField) bool { return f.name == name })
		if i < 0 {
			e := t.errAt(p, true, fmt.Sprintf("unknown key %q", t.fullKey(p)))
			e.ValidWhat = "keys"
			for _, f := range fields {
				e.Valid = append(e.Valid, f.name)
			}
			return e
		}
		if len(path) == 0 && !fields[i].safe && t.projectUntrusted(p) {
			return t.trustError(p)
		}
		if err := t.decodeValue(dst.FieldByIndex(fields[i].index), m[name], p); err != nil {
			return err
		}
	}
	return nil
}

// decodeValue decodes one TOML value into dst: the types with their own text form first
// (durations, times, text unmarshalers), then plain scalars, then arrays and tables.
func (t ProviderTable) decodeValue(dst reflect.Value, src any, path []string) error {
	typ := dst.Type()
	if typ.Kind() == reflect.Pointer {
		if dst.IsNil() {
			dst.Set(reflect.New(typ.Elem()))
		}
		return t.decodeValue(dst.Elem(), src, path)
	}
	if done, err := t.decodeText(dst, src, path); done {
		return err
	}
	switch typ.Kind() {
	case reflect.String, reflect.Bool:
		return t.decodeBasic(dst, src, path)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return t.decodeNumber(dst, src, path)
	case reflect.Slice:
		return t.decodeSlice(dst, src, path)
	case reflect.Map:
		return t.decodeMap(dst, src, path)
	case reflect.Struct:
		m, ok := src.(map[string]any)
		if !ok {
			return t.want(path, "a table", src)
		}
		return t.decodeStruct(dst, m, path)
	case reflect.Interface:
		if typ.NumMethod() == 0 {
			dst.Set(reflect.ValueOf(src))
			return nil
		}
	}
	return fmt.Errorf("config: decode %s: unsupported field type %s", t.fullKey(path), typ)
}

// want is the error for a value of the wrong TOML type.
func (t ProviderTable) want(path []string, what string, src any) error {
	return t.errAt(path, false, fmt.Sprintf("%s: want %s, got %s", t.fullKey(path), what, describe(src)))
}

// decodeText decodes the types written as strings with a meaning of their own; done is
// false when dst is none of them.
func (t ProviderTable) decodeText(dst reflect.Value, src any, path []string) (done bool, err error) {
	typ := dst.Type()
	switch {
	case typ == durationType:
		s, ok := src.(string)
		if !ok {
			return true, t.want(path, `a duration string like "90s"`, src)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return true, t.errAt(path, false, fmt.Sprintf("%s: invalid duration %q: want a number with a unit, like \"90s\" or \"5m\"", t.fullKey(path), s))
		}
		dst.SetInt(int64(d))
		return true, nil
	case typ == timeType:
		tv, ok := src.(time.Time)
		if !ok {
			return true, t.want(path, "a date-time", src)
		}
		dst.Set(reflect.ValueOf(tv))
		return true, nil
	case reflect.PointerTo(typ).Implements(textType) && dst.CanAddr():
		s, ok := src.(string)
		if !ok {
			return true, t.want(path, "a string", src)
		}
		if err := dst.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			return true, t.errAt(path, false, fmt.Sprintf("%s: %v", t.fullKey(path), err))
		}
		return true, nil
	}
	return false, nil
}

// decodeBasic decodes a string or a boolean.
func (t ProviderTable) decodeBasic(dst reflect.Value, src any, path []string) error {
	if dst.Kind() == reflect.Bool {
		b, ok := src.(bool)
		if !ok {
			return t.want(path, "a boolean", src)
		}
		dst.SetBool(b)
		return nil
	}
	s, ok := src.(string)
	if !ok {
		return t.want(path, "a string", src)
	}
	dst.SetString(s)
	return nil
}

// decodeNumber decodes an integer or a float, refusing values the field cannot hold.
func (t ProviderTable) decodeNumber(dst reflect.Value, src any, path []string) error {
	outOfRange := func(v any) error {
		return t.errAt(path, false, fmt.Sprintf("%s: %v is out of range", t.fullKey(path), v))
	}
	switch dst.Kind() {
	case reflect.Float32, reflect.Float64:
		var f float64
		switch n := src.(type) {
		case float64:
			f = n
		case int64:
			f = float64(n)
		default:
			return t.want(path, "a number", src)
		}
		if dst.OverflowFloat(f) {
			return outOfRange(f)
		}
		dst.SetFloat(f)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := src.(int64)
		if !ok {
			return t.want(path, "a non-negative integer", src)
		}
		if n < 0 || dst.OverflowUint(uint64(n)) {
			return outOfRange(n)
		}
		dst.SetUint(uint64(n))
	default:
		n, ok := src.(int64)
		if !ok {
			return t.want(path, "an integer", src)
		}
		if dst.OverflowInt(n) {
			return outOfRange(n)
		}
		dst.SetInt(n)
	}
	return nil
}

// decodeSlice decodes an array element by element; errors name the element (KEY#N).
func (t ProviderTable) decodeSlice(dst reflect.Value, src any, path []string) error {
	arr, ok := src.([]any)
	if !ok {
		return t.want(path, "an array", src)
	}
	s := reflect.MakeSlice(dst.Type(), len(arr), len(arr))
	for i, e := range arr {
		if err := t.decodeValue(s.Index(i), e, append(slices.Clone(path), "#"+strconv.Itoa(i))); err != nil {
			return err
		}
	}
	dst.Set(s)
	return nil
}

// decodeMap decodes a table with string keys into a map, in key order so the first error
// is always the same.
func (t ProviderTable) decodeMap(dst reflect.Value, src any, path []string) error {
	typ := dst.Type()
	m, ok := src.(map[string]any)
	if !ok || typ.Key().Kind() != reflect.String {
		return t.want(path, "a table", src)
	}
	mv := reflect.MakeMapWithSize(typ, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ev := reflect.New(typ.Elem()).Elem()
		if err := t.decodeValue(ev, m[k], append(slices.Clone(path), k)); err != nil {
			return err
		}
		mv.SetMapIndex(reflect.ValueOf(k).Convert(typ.Key()), ev)
	}
	dst.Set(mv)
	return nil
}

// secretName matches key names whose values must not be shown: tokens, passwords, keys.
var secretName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)(key|token|secret|passw|credential|auth|private|cert|cookie|session|signature|dsn)`)
})

// values lists the table's keys for Config.Values, values of secret-looking keys redacted.
func (t ProviderTable) values() []result.ConfigValue {
	prefix := t.tableName() + "." + t.Name + "."
	var out []result.ConfigValue
	if t.WorkingDir != "" {
		out = append(out, result.ConfigValue{Key: prefix + workingDirKey, Value: t.WorkingDir, Source: t.Source(workingDirKey)})
	}
	for _, name := range slices.Sorted(maps.Keys(t.Values)) {
		v := t.Values[name]
		text := redacted
		if !secretName().MatchString(name) {
			if s, ok := v.(string); ok {
				text = s
			} else {
				text = inline(v)
			}
		}
		out = append(out, result.ConfigValue{Key: prefix + name, Value: text, Source: t.Source(name)})
	}
	return out
}

// inline renders a decoded TOML value in TOML's inline syntax, redacting secret-looking
// keys of nested tables.
func inline(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = inline(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		parts := make([]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			val := redacted
			if !secretName().MatchString(k) {
				val = inline(v[k])
			}
			parts = append(parts, tomlKey(k)+" = "+val)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

var bareKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

// tomlKey writes a key bare when TOML allows it, else quoted.
func tomlKey(k string) string {
	if bareKey().MatchString(k) {
		return k
	}
	return strconv.Quote(k)
}
