package rubric

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/talkops/talkops/internal/editdist"
	"github.com/talkops/talkops/internal/tomlpos"
)

// TOML rubrics are decoded in three steps: go-toml checks the syntax and TOML's own rules
// (duplicate keys, redefined tables) and decodes into generic values; a walk over go-toml's
// AST records the line and column of every key and value; then the generic values are
// checked against the rubric schema here, so that every error names its position and says
// what would be valid.

// Keys of each table, in the order the canonical form writes them.
var (
	topKeys       = []string{"schema", "name", "description", "pass_threshold", "protect_paths", "judge", "check", "criterion"}
	checkKeys     = []string{"id", "title", "run", "expect_exit", "timeout", "required", "weight", "parse", "parse_file"}
	criterionKeys = []string{"id", "title", "question", "evidence", "required", "weight", "pass_examples", "fail_examples"}
	judgeKeys     = []string{"model", "votes", "max_evidence_bytes"}
)

const maxErrors = 20

type position struct{ line, col int }

// tomlDoc holds one document being decoded and the problems found so far. Paths are
// tomlpos paths: key parts joined with tomlpos.Sep, an array element as tomlpos.Elem(i).
type tomlDoc struct {
	file string
	ix   *tomlpos.Index
	errs []*Error
}

func parseTOML(data []byte, file string) (*Rubric, error) {
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			line, col := de.Position()
			return nil, &Error{File: file, Line: line, Col: col,
				Msg: "invalid TOML: " + strings.TrimPrefix(de.Error(), "toml: "), Detail: de.String()}
		}
		return nil, &Error{File: file, Msg: "invalid TOML", Err: err}
	}
	ix, err := tomlpos.Build(data)
	if err != nil {
		return nil, &Error{File: file, Msg: "invalid TOML", Err: err}
	}
	d := &tomlDoc{file: file, ix: ix}
	r := d.decode(raw)
	if len(d.errs) > 0 {
		return nil, d.err()
	}
	return r, nil
}

// err returns the collected problems sorted by position: one *Error or several joined.
func (d *tomlDoc) err() error {
	slices.SortStableFunc(d.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	if len(d.errs) == 1 {
		return d.errs[0]
	}
	errs := make([]error, len(d.errs))
	for i, e := range d.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// --- positions -------------------------------------------------------------------------

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + tomlpos.Sep + key
}

func indexPath(path string, i int) string { return path + tomlpos.Sep + tomlpos.Elem(i) }

// at finds the best position for path: where its key (or table header) starts, or its
// value, else its nearest ancestor's. A value the parser gives no range (an array, an
// inline table) is placed at its key; an array element without one, at its array.
func (d *tomlDoc) at(path string, preferKey bool) position {
	for p := path; ; {
		start, hasStart := d.ix.Start[p]
		raw, hasRaw := d.ix.Raw[p]
		switch {
		case preferKey && hasStart:
			return position{line: start.Line, col: start.Col}
		case hasRaw:
			return position{line: raw.Line, col: raw.Col}
		case hasStart:
			return position{line: start.Line, col: start.Col}
		}
		parent, ok := tomlpos.Parent(p)
		if !ok {
			return position{}
		}
		p = parent
	}
}

// --- errors --------------------------------------------------------------------------

func (d *tomlDoc) addErr(pos position, where, format string, args ...any) {
	if len(d.errs) >= maxErrors {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if where != "" {
		msg = where + ": " + msg
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: pos.line, Col: pos.col, Msg: msg})
}

// valueErr reports a problem with the value at path.
func (d *tomlDoc) valueErr(path, where, format string, args ...any) {
	d.addErr(d.at(path, false), where, format, args...)
}

// keyErr reports a problem with the key at path (unknown or misplaced).
func (d *tomlDoc) keyErr(path, where, format string, args ...any) {
	d.addErr(d.at(path, true), where, format, args...)
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	default:
		return "a date/time"
	}
}

// unknownKeys reports keys of m that are not in valid, sorted by position.
func (d *tomlDoc) unknownKeys(path, where string, m map[string]any, valid []string) {
	for k := range m {
		if slices.Contains(valid, k) {
			continue
		}
		msg := fmt.Sprintf("unknown key %q", k)
		if s := suggest(k, valid); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		d.keyErr(joinPath(path, k), where, "%s; valid keys are %s", msg, strings.Join(valid, ", "))
	}
}

// suggest returns the valid key closest to k when it is a plausible typo.
func suggest(k string, valid []string) string {
	best, bestDist := "", 3
	for _, v := range valid {
		if dist := editdist.Distance(strings.ToLower(k), v); dist < bestDist {
			best, bestDist = v, dist
		}
	}
	return best
}

// --- typed getters -------------------------------------------------------------------

func (d *tomlDoc) str(m map[string]any, path, where, key string) (string, bool) {
	v, ok := m[key]
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		d.valueErr(joinPath(path, key), where, "%s must be a string, got %s", key, typeName(v))
		return "", false
	}
	return s, true
}

func (d *tomlDoc) boolean(m map[string]any, path, where, key string, def bool) bool {
	v, ok := m[key]
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		d.valueErr(joinPath(path, key), where, "%s must be true or false, got %s", key, typeName(v))
		return def
	}
	return b
}

func (d *tomlDoc) integer(m map[string]any, path, where, key string, def int64, lo, hi int64, what string) int64 {
	v, ok := m[key]
	if !ok {
		return def
	}
	i, ok := v.(int64)
	if !ok {
		d.valueErr(joinPath(path, key), where, "%s must be %s, got %s", key, what, typeName(v))
		return def
	}
	if i < lo || i > hi {
		d.valueErr(joinPath(path, key), where, "%s must be %s, got %d", key, what, i)
		return def
	}
	return i
}

func (d *tomlDoc) number(m map[string]any, path, where, key string, def, lo, hi float64, what string) float64 {
	v, ok := m[key]
	if !ok {
		return def
	}
	var f float64
	switch n := v.(type) {
	case int64:
		f = float64(n)
	case float64:
		f = n
	default:
		d.valueErr(joinPath(path, key), where, "%s must be %s, got %s", key, what, typeName(v))
		return def
	}
	if math.IsNaN(f) || f < lo || f > hi {
		d.valueErr(joinPath(path, key), where, "%s must be %s, got %s", key, what, formatFloat(f))
		return def
	}
	return f
}

// strList decodes an array of strings; each element is checked by elem (nil = any).
func (d *tomlDoc) strList(m map[string]any, path, where, key string) []string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		d.valueErr(joinPath(path, key), where, "%s must be an array of strings, got %s", key, typeName(v))
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			d.valueErr(indexPath(joinPath(path, key), i), where, "%s[%d] must be a string, got %s", key, i, typeName(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

// tables decodes an array of tables ([[key]]).
func (d *tomlDoc) tables(raw map[string]any, key string) []map[string]any {
	v, ok := raw[key]
	if !ok {
		return nil
	}
	arr, ok := v.([]any)
	if !ok {
		d.valueErr(key, "", "%s must be an array of tables: write each one as [[%s]], got %s", key, key, typeName(v))
		return nil
	}
	out := make([]map[string]any, 0, len(arr))
	for i, e := range arr {
		t, ok := e.(map[string]any)
		if !ok {
			d.valueErr(indexPath(key, i), "", "%s entry %d must be a table ([[%s]]), got %s", key, i+1, key, typeName(e))
			out = append(out, nil)
			continue
		}
		out = append(out, t)
	}
	return out
}

// --- schema --------------------------------------------------------------------------

func (d *tomlDoc) decode(raw map[string]any) *Rubric {
	r := &Rubric{Format: FormatTOML}
	d.unknownKeys("", "", raw, topKeys)

	if s, ok := d.str(raw, "", "", "schema"); ok && s != SchemaVersion {
		d.valueErr("schema", "", "schema must be %q (or left out), got %q", SchemaVersion, s)
	}
	if s, ok := d.str(raw, "", "", "name"); ok {
		if !validID(s) {
			d.valueErr("name", "", "name %q is not valid: use %s", s, idRule)
		}
		r.Name = s
	}
	if s, ok := d.str(raw, "", "", "description"); ok {
		r.Description = s
	}
	r.PassThreshold = d.number(raw, "", "", "pass_threshold", 1, 0, 1, "a number from 0 to 1 (the weighted score needed to pass)")
	for i, g := range d.strList(raw, "", "", "protect_paths") {
		if err := validGlob(g); err != nil {
			d.valueErr(indexPath("protect_paths", i), "", "protect_paths[%d] %q: %v", i, g, err)
			continue
		}
		r.ProtectPaths = append(r.ProtectPaths, g)
	}
	r.Judge = d.judge(raw)

	ids := map[string]string{} // id → path of its first use
	checkIDs := map[string]bool{}
	for i, t := range d.tables(raw, "check") {
		if t == nil {
			continue
		}
		c, ok := d.check(t, indexPath("check", i), i)
		if ok && d.uniqueID(ids, c.ID, indexPath("check", i)) {
			checkIDs[c.ID] = true
		}
		if ok {
			r.Checks = append(r.Checks, c)
		}
	}
	for i, t := range d.tables(raw, "criterion") {
		if t == nil {
			continue
		}
		c, ok := d.criterion(t, indexPath("criterion", i), i, checkIDs)
		if ok {
			d.uniqueID(ids, c.ID, indexPath("criterion", i))
			r.Criteria = append(r.Criteria, c)
		}
	}
	if len(d.errs) == 0 && len(r.Checks) == 0 && len(r.Criteria) == 0 {
		d.addErr(position{line: 1, col: 1}, "", "the rubric has no items: add at least one [[check]] (a command whose exit code decides) or [[criterion]] (a question for the judge)")
	}
	return r
}

func (d *tomlDoc) uniqueID(ids map[string]string, id, path string) bool {
	if id == "" {
		return false
	}
	if first, dup := ids[id]; dup {
		p := d.at(joinPath(first, "id"), false)
		d.valueErr(joinPath(path, "id"), "", "duplicate id %q (first used on line %d); every check and criterion needs its own id", id, p.line)
		return false
	}
	ids[id] = path
	return true
}

func (d *tomlDoc) judge(raw map[string]any) JudgeConfig {
	j := JudgeConfig{Votes: 1, MaxEvidenceBytes: DefaultMaxEvidenceBytes}
	v, ok := raw["judge"]
	if !ok {
		return j
	}
	t, ok := v.(map[string]any)
	if !ok {
		d.valueErr("judge", "", "judge must be a table ([judge]), got %s", typeName(v))
		return j
	}
	const where = "[judge]"
	d.unknownKeys("judge", where, t, judgeKeys)
	if s, ok := d.str(t, "judge", where, "model"); ok {
		if strings.TrimSpace(s) == "" || strings.ContainsAny(s, " \t\r\n") {
			d.valueErr(joinPath("judge", "model"), where, "model must be a model name without spaces, as in \"anthropic:claude-sonnet-4-5\"; leave it out to use the agent's model")
		}
		j.Model = s
	}
	votes := d.integer(t, "judge", where, "votes", 1, 1, 9, "an odd number from 1 to 9")
	if votes%2 == 0 {
		d.valueErr(joinPath("judge", "votes"), where, "votes must be odd so that a majority exists (1, 3, 5, 7 or 9), got %d", votes)
	}
	j.Votes = int(votes)
	j.MaxEvidenceBytes = int(d.integer(t, "judge", where, "max_evidence_bytes", DefaultMaxEvidenceBytes, 1000, 10_000_000, "an integer from 1000 to 10000000"))
	return j
}

func itemWhere(kind string, i int, id string) string {
	if id != "" {
		return fmt.Sprintf("[[%s]] %q", kind, id)
	}
	return fmt.Sprintf("[[%s]] #%d", kind, i+1)
}

// id decodes and checks the id of a [[check]] or [[criterion]].
func (d *tomlDoc) id(t map[string]any, path, kind string, i int) string {
	where := itemWhere(kind, i, "")
	s, ok := d.str(t, path, where, "id")
	if !ok {
		if _, present := t["id"]; !present {
			d.keyErr(path, where, "id is missing; give every %s an id such as id = \"validate\" (%s)", kind, idRule)
		}
		return ""
	}
	if !validID(s) {
		d.valueErr(joinPath(path, "id"), where, "id %q is not valid: use %s", s, idRule)
		return ""
	}
	if s == KindIntegrity {
		d.valueErr(joinPath(path, "id"), where, "id %q is reserved for the protected-path item; choose another", s)
		return ""
	}
	return s
}

func (d *tomlDoc) check(t map[string]any, path string, i int) (Check, bool) {
	before := len(d.errs)
	c := Check{ID: d.id(t, path, "check", i), ExpectExit: 0, Timeout: DefaultTimeout, Required: true, Weight: 1}
	where := itemWhere("check", i, c.ID)
	d.unknownKeys(path, where, t, checkKeys)
	if s, ok := d.str(t, path, where, "title"); ok {
		c.Title = s
	}

	switch run := t["run"].(type) {
	case nil:
		d.keyErr(path, where, `run is missing; give an argv array such as run = ["tofu", "validate", "-json"] or a shell string such as run = "make lint"`)
	case string:
		if strings.TrimSpace(run) == "" {
			d.valueErr(joinPath(path, "run"), where, "run is an empty shell string; give a command such as run = \"make lint\"")
		} else if strings.ContainsRune(run, 0) {
			d.valueErr(joinPath(path, "run"), where, "run must not contain NUL bytes")
		}
		c.Script = run
		c.Argv = []string{"/bin/sh", "-c", run}
	case []any:
		if len(run) == 0 {
			d.valueErr(joinPath(path, "run"), where, `run is an empty array; give the program and its arguments, as in run = ["tofu", "validate"]`)
		}
		for j, e := range run {
			s, ok := e.(string)
			switch {
			case !ok:
				d.valueErr(indexPath(joinPath(path, "run"), j), where, "run[%d] must be a string, got %s (quote numbers: \"8080\")", j, typeName(e))
			case j == 0 && strings.TrimSpace(s) == "":
				d.valueErr(indexPath(joinPath(path, "run"), j), where, "run[0] is the program to run and must not be empty")
			case strings.ContainsRune(s, 0):
				d.valueErr(indexPath(joinPath(path, "run"), j), where, "run[%d] must not contain NUL bytes", j)
			}
			c.Argv = append(c.Argv, s)
		}
	default:
		d.valueErr(joinPath(path, "run"), where, "run must be an argv array of strings or a shell string, got %s", typeName(run))
	}

	c.ExpectExit = int(d.integer(t, path, where, "expect_exit", 0, 0, 255, "an exit code from 0 to 255"))
	if s, ok := d.str(t, path, where, "timeout"); ok {
		dur, err := time.ParseDuration(s)
		switch {
		case err != nil:
			d.valueErr(joinPath(path, "timeout"), where, "timeout %q is not a duration; write it like \"90s\", \"5m\" or \"1h30m\"", s)
		case dur <= 0 || dur > MaxTimeout:
			d.valueErr(joinPath(path, "timeout"), where, "timeout must be more than 0 and at most %s, got %s", MaxTimeout, s)
		default:
			c.Timeout = dur
		}
	}
	c.Required = d.boolean(t, path, where, "required", true)
	c.Weight = d.number(t, path, where, "weight", 1, 0, 1e6, "a number from 0 to 1000000 (0 = reported but not scored)")
	if s, ok := d.str(t, path, where, "parse"); ok {
		if !slices.Contains(Formats, s) {
			d.valueErr(joinPath(path, "parse"), where, "parse %q is not a known format; valid formats are %s", s, strings.Join(Formats, ", "))
		}
		c.Parse = s
	}
	if s, ok := d.str(t, path, where, "parse_file"); ok {
		switch {
		case c.Parse == "":
			d.keyErr(joinPath(path, "parse_file"), where, "parse_file needs parse (the file's format), as in parse = \"sarif\"")
		case !validRelPath(s):
			d.valueErr(joinPath(path, "parse_file"), where, "parse_file %q must be a relative path inside the sandbox working directory, as in \"reports/lint.sarif\"", s)
		}
		c.ParseFile = s
	}
	return c, len(d.errs) == before
}

func (d *tomlDoc) criterion(t map[string]any, path string, i int, checkIDs map[string]bool) (Criterion, bool) {
	before := len(d.errs)
	c := Criterion{ID: d.id(t, path, "criterion", i), Required: true, Weight: 1}
	where := itemWhere("criterion", i, c.ID)
	d.unknownKeys(path, where, t, criterionKeys)
	if s, ok := d.str(t, path, where, "title"); ok {
		c.Title = s
	}
	if s, ok := d.str(t, path, where, "question"); ok {
		if strings.TrimSpace(s) == "" {
			d.valueErr(joinPath(path, "question"), where, "question is empty; ask one yes/no question the judge can answer from the evidence")
		}
		c.Question = s
	} else if _, present := t["question"]; !present {
		d.keyErr(path, where, "question is missing; ask one yes/no question the judge can answer from the evidence, as in question = \"Does the diff avoid ingress from 0.0.0.0/0?\"")
	}
	for j, s := range d.strList(t, path, where, "evidence") {
		sel, err := parseSelector(s, checkIDs)
		if err != nil {
			d.valueErr(indexPath(joinPath(path, "evidence"), j), where, "evidence[%d] %q: %v", j, s, err)
			continue
		}
		c.Evidence = append(c.Evidence, sel)
	}
	c.Required = d.boolean(t, path, where, "required", true)
	c.Weight = d.number(t, path, where, "weight", 1, 0, 1e6, "a number from 0 to 1000000 (0 = reported but not scored)")
	c.PassExamples = d.strList(t, path, where, "pass_examples")
	c.FailExamples = d.strList(t, path, where, "fail_examples")
	return c, len(d.errs) == before
}

const selectorForms = `"commands", "diff", "final_message", "check:<id>" or "file:<glob>"`

func parseSelector(s string, checkIDs map[string]bool) (Selector, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	switch kind {
	case SelectCommands, SelectDiff, SelectFinalMessage:
		if hasArg {
			return Selector{}, fmt.Errorf("%q takes no argument; valid selectors are %s", kind, selectorForms)
		}
		return Selector{Kind: kind}, nil
	case SelectCheck:
		if !checkIDs[arg] {
			return Selector{}, fmt.Errorf("no [[check]] has id %q (criteria can cite only checks defined in this rubric)", arg)
		}
		return Selector{Kind: kind, Arg: arg}, nil
	case SelectFile:
		if err := validGlob(arg); err != nil {
			return Selector{}, err
		}
		return Selector{Kind: kind, Arg: arg}, nil
	}
	return Selector{}, fmt.Errorf("unknown evidence selector; valid selectors are %s", selectorForms)
}

// validRelPath reports whether p is a clean relative path that stays inside its root.
func validRelPath(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// --- canonical form ------------------------------------------------------------------

// canonical renders r as a TOML rubric with every default written out. It is what the
// sha256 covers and what result.json records; parsing it yields r again.
func canonical(r *Rubric) string {
	var b strings.Builder
	kv := func(k, v string) { b.WriteString(k + " = " + v + "\n") }
	kv("schema", tomlString(SchemaVersion))
	kv("name", tomlString(r.Name))
	if r.Description != "" {
		kv("description", tomlString(r.Description))
	}
	kv("pass_threshold", formatFloat(r.PassThreshold))
	if len(r.ProtectPaths) > 0 {
		kv("protect_paths", tomlStrings(r.ProtectPaths))
	}
	if r.Judge != (JudgeConfig{Votes: 1, MaxEvidenceBytes: DefaultMaxEvidenceBytes}) {
		b.WriteString("\n[judge]\n")
		if r.Judge.Model != "" {
			kv("model", tomlString(r.Judge.Model))
		}
		kv("votes", strconv.Itoa(r.Judge.Votes))
		kv("max_evidence_bytes", strconv.Itoa(r.Judge.MaxEvidenceBytes))
	}
	for _, c := range r.Checks {
		b.WriteString("\n[[check]]\n")
		kv("id", tomlString(c.ID))
		if c.Title != "" {
			kv("title", tomlString(c.Title))
		}
		if c.Script != "" {
			kv("run", tomlString(c.Script))
		} else {
			kv("run", tomlStrings(c.Argv))
		}
		kv("expect_exit", strconv.Itoa(c.ExpectExit))
		kv("timeout", tomlString(c.Timeout.String()))
		kv("required", strconv.FormatBool(c.Required))
		kv("weight", formatFloat(c.Weight))
		if c.Parse != "" {
			kv("parse", tomlString(c.Parse))
		}
		if c.ParseFile != "" {
			kv("parse_file", tomlString(c.ParseFile))
		}
	}
	for _, c := range r.Criteria {
		b.WriteString("\n[[criterion]]\n")
		kv("id", tomlString(c.ID))
		if c.Title != "" {
			kv("title", tomlString(c.Title))
		}
		kv("question", tomlString(c.Question))
		if len(c.Evidence) > 0 {
			sels := make([]string, len(c.Evidence))
			for i, s := range c.Evidence {
				sels[i] = s.String()
			}
			kv("evidence", tomlStrings(sels))
		}
		kv("required", strconv.FormatBool(c.Required))
		kv("weight", formatFloat(c.Weight))
		if len(c.PassExamples) > 0 {
			kv("pass_examples", tomlStrings(c.PassExamples))
		}
		if len(c.FailExamples) > 0 {
			kv("fail_examples", tomlStrings(c.FailExamples))
		}
	}
	return b.String()
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlStrings(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = tomlString(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// formatFloat writes f so that TOML reads it back as the same number.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") { // "n": NaN and Inf never reach here, but stay valid
		s += ".0"
	}
	return s
}
