package rubric

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/talkops/talkops/result"
)

// Check-output formats a check may declare with parse = "...".
const (
	FormatSARIF            = "sarif"              // SARIF 2.1.0 (golangci-lint, tfsec, trivy, checkov, semgrep, ...)
	FormatRDJSON           = "rdjson"             // reviewdog DiagnosticResult
	FormatRDJSONL          = "rdjsonl"            // reviewdog Diagnostic, one per line
	FormatJUnit            = "junit"              // JUnit XML (go-junit-report, pytest, surefire, ...)
	FormatCheckstyle       = "checkstyle"         // checkstyle XML (tflint, eslint, ...)
	FormatTofuValidateJSON = "tofu-validate-json" // `tofu validate -json` / `terraform validate -json`
)

// Formats lists the valid values of a check's parse key.
var Formats = []string{FormatSARIF, FormatRDJSON, FormatRDJSONL, FormatJUnit, FormatCheckstyle, FormatTofuValidateJSON}

// Caps on what one check's output can put into result.json.
const (
	// MaxFindings is the number of findings kept per check; the rest are counted, not kept.
	MaxFindings = 5000
	// MaxMessageBytes caps a finding's message.
	MaxMessageBytes = 4096
)

// FindingContext says where parsed findings come from.
type FindingContext struct {
	// Rubric and Check name the rubric and check; they go into Source and Fingerprint.
	Rubric string
	Check  string
	// WorkDir is the absolute directory the tool ran in (the sandbox working directory).
	// Absolute paths below it become relative; paths outside the workspace are dropped
	// from the location and kept in the message.
	WorkDir string
}

// ParseFindings parses a tool's output in the given format into findings with
// workspace-relative paths, 1-based lines, severities error|warning|notice, Source
// "check:<id>" and a line-independent fingerprint. At most MaxFindings are returned.
func ParseFindings(format string, data []byte, fc FindingContext) ([]result.Finding, error) {
	found, _, err := parseFindings(format, data, fc)
	return found, err
}

// parseFindings also returns the number of findings before the MaxFindings cap.
func parseFindings(format string, data []byte, fc FindingContext) ([]result.Finding, int, error) {
	var raws []rawFinding
	var err error
	switch format {
	case FormatSARIF:
		raws, err = parseSARIF(data)
	case FormatRDJSON:
		raws, err = parseRDJSON(data)
	case FormatRDJSONL:
		raws, err = parseRDJSONL(data)
	case FormatJUnit:
		raws, err = parseJUnit(data)
	case FormatCheckstyle:
		raws, err = parseCheckstyle(data)
	case FormatTofuValidateJSON:
		raws, err = parseTofuValidate(data)
	default:
		return nil, 0, fmt.Errorf("unknown format %q; valid formats are %s", format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return nil, 0, fmt.Errorf("parse %s output: %w", format, err)
	}
	total := len(raws)
	if len(raws) > MaxFindings {
		raws = raws[:MaxFindings]
	}
	return finalize(raws, fc), total, nil
}

// rawFinding is what a format parser extracts, before normalisation.
type rawFinding struct {
	path                       string
	line, endLine, col, endCol int
	severity                   string
	rule, title                string
	message                    string
	// key, when set, replaces the message in the fingerprint (for formats whose message
	// carries volatile text such as timings). endCol is inclusive.
	key string
}

func finalize(raws []rawFinding, fc FindingContext) []result.Finding {
	out := make([]result.Finding, 0, len(raws))
	for _, r := range raws {
		msg := cleanText(r.message, MaxMessageBytes)
		if strings.TrimSpace(msg) == "" {
			msg = cmpOr(cleanText(r.title, 512), cleanText(r.rule, 512), "(no message)")
		}
		f := result.Finding{
			Severity: r.severity,
			Rule:     cleanText(r.rule, 512),
			Title:    cleanText(r.title, 512),
			Message:  msg,
			Source:   "check:" + fc.Check,
		}
		if p, ok := normPath(r.path, fc.WorkDir); ok {
			f.Path = p
			if p != "" && r.line > 0 {
				f.StartLine = r.line
				if r.endLine > r.line {
					f.EndLine = r.endLine
				}
				if r.col > 0 {
					f.StartColumn = r.col
					if f.EndLine == 0 && r.endCol >= r.col {
						f.EndColumn = r.endCol
					}
				}
			}
		} else {
			where := cleanText(r.path, 512)
			if r.line > 0 {
				where += ":" + strconv.Itoa(r.line)
			}
			f.Message = cleanText(where+": "+msg, MaxMessageBytes)
		}
		key := r.key
		if key == "" {
			key = f.Message
		}
		f.Fingerprint = Fingerprint(fc.Rubric, fc.Check, f.Rule, f.Path, key)
		out = append(out, f)
	}
	return out
}

// lineRefs matches line references inside messages ("line 12", ":12:5"), which the
// fingerprint leaves out.
var lineRefs = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)\b(?:line|ln)\s*\d+(?:\s*[-:,]\s*\d+)*|:\d+(?::\d+)?\b`)
})

// Fingerprint identifies a finding across runs: sha256 over the rubric name, the item id,
// the rule, the path and the message (whitespace normalised, line references removed),
// without the line number, so a finding keeps its fingerprint when lines shift. Identical
// findings on different lines share it; reporters number them apart.
func Fingerprint(rubricName, itemID, rule, path, message string) string {
	h := sha256.New()
	for _, s := range []string{rubricName, itemID, rule, path, normalizeSpace(lineRefs().ReplaceAllString(message, ""))} {
		_, _ = io.WriteString(h, s) // a hash.Hash's Write never returns an error
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// cleanText makes tool-supplied text safe to store: valid UTF-8, no NUL bytes, at most max
// bytes (cut at a character boundary, marked with an ellipsis).
func cleanText(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func cmpOr(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// normPath turns a tool's path into a slash-separated path relative to the workspace.
// ok is false when the path points outside the workspace (or is not a file path).
func normPath(p, workDir string) (string, bool) {
	if p == "" {
		return "", true
	}
	if strings.Contains(p, "://") || strings.ContainsRune(p, 0) {
		return "", false
	}
	if path.IsAbs(p) {
		wd := path.Clean(workDir)
		switch {
		case workDir == "" || !path.IsAbs(wd):
			return "", false
		case path.Clean(p) == wd:
			return "", true
		case wd == "/":
			p = strings.TrimPrefix(path.Clean(p), "/")
		case strings.HasPrefix(path.Clean(p), wd+"/"):
			p = strings.TrimPrefix(path.Clean(p), wd+"/")
		default:
			return "", false
		}
	}
	p = path.Clean(p)
	switch {
	case p == ".":
		return "", true
	case p == ".." || strings.HasPrefix(p, "../"):
		return "", false
	}
	return p, true
}

// uriToPath converts a SARIF artifact URI to a file path.
func uriToPath(u string) string {
	if strings.HasPrefix(u, "file:") {
		if pu, err := url.Parse(u); err == nil {
			if pu.Path != "" {
				return pu.Path
			}
			return pu.Opaque
		}
		return u
	}
	if strings.Contains(u, "://") {
		return u
	}
	if strings.Contains(u, "%") {
		if s, err := url.PathUnescape(u); err == nil {
			return s
		}
	}
	return u
}

// jsonError adds a line and column to a JSON syntax error.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return err
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	// Offset counts the bytes read, including the offending one.
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := max(int(off)-bytes.LastIndexByte(data[:off], '\n')-1, 1)
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

func decodeJSON(data []byte, v any) error {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the output is empty")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(data, err)
	}
	return nil
}

// --- SARIF ---------------------------------------------------------------------------

type sarifLog struct {
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool struct {
		Driver sarifComponent `json:"driver"`
	} `json:"tool"`
	OriginalURIBaseIDs map[string]sarifArtifactLocation `json:"originalUriBaseIds"`
	Results            []sarifResult                    `json:"results"`
}

type sarifComponent struct {
	Name  string      `json:"name"`
	Rules []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID                   string                  `json:"id"`
	Name                 string                  `json:"name"`
	ShortDescription     *sarifMessage           `json:"shortDescription"`
	MessageStrings       map[string]sarifMessage `json:"messageStrings"`
	DefaultConfiguration *struct {
		Level string `json:"level"`
	} `json:"defaultConfiguration"`
}

type sarifMessage struct {
	Text      string   `json:"text"`
	Markdown  string   `json:"markdown"`
	ID        string   `json:"id"`
	Arguments []string `json:"arguments"`
}

type sarifResult struct {
	RuleID    string `json:"ruleId"`
	RuleIndex *int   `json:"ruleIndex"`
	Rule      *struct {
		ID    string `json:"id"`
		Index *int   `json:"index"`
	} `json:"rule"`
	Kind         string          `json:"kind"`
	Level        string          `json:"level"`
	Message      sarifMessage    `json:"message"`
	Locations    []sarifLocation `json:"locations"`
	Suppressions []struct {
		Status string `json:"status"`
	} `json:"suppressions"`
}

type sarifLocation struct {
	PhysicalLocation *struct {
		ArtifactLocation *sarifArtifactLocation `json:"artifactLocation"`
		Region           *struct {
			StartLine   int `json:"startLine"`
			StartColumn int `json:"startColumn"`
			EndLine     int `json:"endLine"`
			EndColumn   int `json:"endColumn"`
		} `json:"region"`
	} `json:"physicalLocation"`
}

type sarifArtifactLocation struct {
	URI       string `json:"uri"`
	URIBaseID string `json:"uriBaseId"`
}

func parseSARIF(data []byte) ([]rawFinding, error) {
	var log sarifLog
	if err := decodeJSON(data, &log); err != nil {
		return nil, err
	}
	if log.Runs == nil {
		return nil, errors.New(`not a SARIF log: no "runs" array`)
	}
	if log.Version != "" && !strings.HasPrefix(log.Version, "2.") {
		return nil, fmt.Errorf("SARIF version %q is not supported; want 2.1.0", log.Version)
	}
	var out []rawFinding
	for _, run := range log.Runs {
		rules := run.Tool.Driver.Rules
		byID := make(map[string]*sarifRule, len(rules))
		for i := range rules {
			if _, dup := byID[rules[i].ID]; !dup {
				byID[rules[i].ID] = &rules[i]
			}
		}
		for _, res := range run.Results {
			if suppressed(res) || res.Kind == "pass" || res.Kind == "notApplicable" {
				continue
			}
			rule := sarifRuleOf(res, rules, byID)
			f := rawFinding{rule: res.RuleID, severity: sarifSeverity(res, rule)}
			if f.rule == "" && res.Rule != nil {
				f.rule = res.Rule.ID
			}
			if rule != nil {
				f.rule = cmpOr(f.rule, rule.ID)
				f.title = rule.Name
				if f.title == "" && rule.ShortDescription != nil {
					f.title = rule.ShortDescription.Text
				}
			}
			f.message = sarifText(res.Message, rule)
			if len(res.Locations) > 0 && res.Locations[0].PhysicalLocation != nil {
				pl := res.Locations[0].PhysicalLocation
				if pl.ArtifactLocation != nil {
					f.path = sarifPath(*pl.ArtifactLocation, run.OriginalURIBaseIDs)
				}
				if pl.Region != nil {
					rg := pl.Region
					f.line, f.col, f.endLine = rg.StartLine, rg.StartColumn, rg.EndLine
					if rg.EndColumn > 1 && (rg.EndLine == 0 || rg.EndLine == rg.StartLine) {
						f.endCol = rg.EndColumn - 1 // SARIF's endColumn is exclusive
					}
				}
			}
			out = append(out, f)
		}
	}
	return out, nil
}

func suppressed(res sarifResult) bool {
	for _, s := range res.Suppressions {
		if s.Status == "" || s.Status == "accepted" {
			return true
		}
	}
	return false
}

func sarifRuleOf(res sarifResult, rules []sarifRule, byID map[string]*sarifRule) *sarifRule {
	idx := res.RuleIndex
	if idx == nil && res.Rule != nil {
		idx = res.Rule.Index
	}
	if idx != nil && *idx >= 0 && *idx < len(rules) {
		return &rules[*idx]
	}
	id := res.RuleID
	if id == "" && res.Rule != nil {
		id = res.Rule.ID
	}
	if r, ok := byID[id]; ok && id != "" {
		return r
	}
	return nil
}

// sarifSeverity applies SARIF §3.27.10: the result's level, else "none" for non-failure
// kinds, else the rule's default level, else "warning".
func sarifSeverity(res sarifResult, rule *sarifRule) string {
	level := res.Level
	if level == "" && res.Kind != "" && res.Kind != "fail" {
		level = "none"
	}
	if level == "" && rule != nil && rule.DefaultConfiguration != nil {
		level = rule.DefaultConfiguration.Level
	}
	switch level {
	case "error":
		return result.SeverityError
	case "note", "none":
		return result.SeverityNotice
	default:
		return result.SeverityWarning
	}
}

func sarifText(m sarifMessage, rule *sarifRule) string {
	text := cmpOr(m.Text, m.Markdown)
	if text == "" && m.ID != "" && rule != nil {
		if ms, ok := rule.MessageStrings[m.ID]; ok {
			text = cmpOr(ms.Text, ms.Markdown)
		}
	}
	if text == "" && rule != nil && rule.ShortDescription != nil {
		text = rule.ShortDescription.Text
	}
	for i, a := range m.Arguments {
		text = strings.ReplaceAll(text, "{"+strconv.Itoa(i)+"}", a)
	}
	return text
}

func sarifPath(al sarifArtifactLocation, bases map[string]sarifArtifactLocation) string {
	p := uriToPath(al.URI)
	if al.URIBaseID == "" || path.IsAbs(p) {
		return p
	}
	base, ok := bases[al.URIBaseID]
	if !ok || base.URI == "" {
		return p // an undefined base (%SRCROOT%) is the analysis root: the working directory
	}
	return path.Join(uriToPath(base.URI), p)
}

// --- reviewdog rdjson / rdjsonl --------------------------------------------------------

type rdPosition struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

type rdDiagnostic struct {
	Message  string `json:"message"`
	Location *struct {
		Path  string `json:"path"`
		Range *struct {
			Start *rdPosition `json:"start"`
			End   *rdPosition `json:"end"`
		} `json:"range"`
	} `json:"location"`
	Severity json.RawMessage `json:"severity"`
	Source   *struct {
		Name string `json:"name"`
	} `json:"source"`
	Code *struct {
		Value string `json:"value"`
	} `json:"code"`
}

type rdResult struct {
	Source *struct {
		Name string `json:"name"`
	} `json:"source"`
	Severity    json.RawMessage `json:"severity"`
	Diagnostics []rdDiagnostic  `json:"diagnostics"`
}

func parseRDJSON(data []byte) ([]rawFinding, error) {
	var res rdResult
	if err := decodeJSON(data, &res); err != nil {
		return nil, err
	}
	def, err := rdSeverity(res.Severity, result.SeverityError)
	if err != nil {
		return nil, err
	}
	out := make([]rawFinding, 0, len(res.Diagnostics))
	for i, d := range res.Diagnostics {
		f, err := rdFinding(d, def)
		if err != nil {
			return nil, fmt.Errorf("diagnostic %d: %w", i+1, err)
		}
		if f.title == "" && res.Source != nil {
			f.title = res.Source.Name
		}
		out = append(out, f)
	}
	return out, nil
}

func parseRDJSONL(data []byte) ([]rawFinding, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var out []rawFinding
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var d rdDiagnostic
		if err := json.Unmarshal(line, &d); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		f, err := rdFinding(d, result.SeverityError)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func rdFinding(d rdDiagnostic, def string) (rawFinding, error) {
	sev, err := rdSeverity(d.Severity, def)
	if err != nil {
		return rawFinding{}, err
	}
	f := rawFinding{message: d.Message, severity: sev}
	if d.Code != nil {
		f.rule = d.Code.Value
	}
	if d.Source != nil {
		f.title = d.Source.Name
	}
	if d.Location != nil {
		f.path = d.Location.Path
		if rg := d.Location.Range; rg != nil && rg.Start != nil {
			f.line, f.col = rg.Start.Line, rg.Start.Column
			if rg.End != nil && rg.End.Line > 0 {
				// RDFormat ends are exclusive: an end at column 1 stops before that line.
				f.endLine = rg.End.Line
				if rg.End.Column == 1 && rg.End.Line > rg.Start.Line {
					f.endLine--
				}
				if rg.End.Line == rg.Start.Line && rg.End.Column > 1 {
					f.endCol = rg.End.Column - 1
				}
			}
		}
	}
	return f, nil
}

// rdSeverity reads an RDFormat severity, written as a name or (protojson) a number.
func rdSeverity(raw json.RawMessage, def string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return def, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		var n int
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("severity %s is neither a name nor a number", raw)
		}
		name = map[int]string{1: "ERROR", 2: "WARNING", 3: "INFO"}[n]
	}
	switch strings.ToUpper(name) {
	case "ERROR":
		return result.SeverityError, nil
	case "WARNING":
		return result.SeverityWarning, nil
	case "INFO":
		return result.SeverityNotice, nil
	default:
		return def, nil
	}
}

// --- XML: JUnit and checkstyle ---------------------------------------------------------

func newXMLDecoder(data []byte) *xml.Decoder {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		switch strings.ToLower(label) {
		case "utf-8", "utf8", "us-ascii", "ascii":
			return in, nil
		case "iso-8859-1", "latin1", "latin-1":
			b, err := io.ReadAll(in)
			if err != nil {
				return nil, err
			}
			runes := make([]rune, len(b))
			for i, c := range b {
				runes[i] = rune(c)
			}
			return strings.NewReader(string(runes)), nil
		}
		return nil, fmt.Errorf("unsupported XML encoding %q (use UTF-8)", label)
	}
	return dec
}

func decodeXML(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errors.New("the output is empty")
	}
	dec := newXMLDecoder(data)
	if err := dec.Decode(v); err != nil {
		line, _ := dec.InputPos()
		var se *xml.SyntaxError
		if errors.As(err, &se) {
			line = se.Line
		}
		return fmt.Errorf("line %d: %w", line, err)
	}
	return nil
}

type junitSuite struct {
	XMLName xml.Name
	Name    string       `xml:"name,attr"`
	File    string       `xml:"file,attr"`
	Suites  []junitSuite `xml:"testsuite"`
	Cases   []junitCase  `xml:"testcase"`
}

type junitCase struct {
	Name      string         `xml:"name,attr"`
	Classname string         `xml:"classname,attr"`
	File      string         `xml:"file,attr"`
	Line      string         `xml:"line,attr"`
	Failures  []junitProblem `xml:"failure"`
	Errors    []junitProblem `xml:"error"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func parseJUnit(data []byte) ([]rawFinding, error) {
	var root junitSuite
	if err := decodeXML(data, &root); err != nil {
		return nil, err
	}
	if n := root.XMLName.Local; n != "testsuites" && n != "testsuite" {
		return nil, fmt.Errorf("root element is <%s>, want <testsuites> or <testsuite>", n)
	}
	var out []rawFinding
	var walk func(s junitSuite, file string, depth int)
	walk = func(s junitSuite, file string, depth int) {
		if depth > 32 {
			return
		}
		file = cmpOr(s.File, file)
		for _, c := range s.Cases {
			for _, p := range c.Failures {
				out = append(out, junitFinding(c, p, file, "failed"))
			}
			for _, p := range c.Errors {
				out = append(out, junitFinding(c, p, file, "errored"))
			}
		}
		for _, sub := range s.Suites {
			walk(sub, file, depth+1)
		}
	}
	walk(root, "", 0)
	return out, nil
}

func junitFinding(c junitCase, p junitProblem, file, verb string) rawFinding {
	rule := c.Name
	if c.Classname != "" {
		rule = c.Classname + "." + c.Name
	}
	head := cmpOr(p.Message, p.Type, "test "+verb)
	msg := head
	if text := strings.TrimSpace(p.Text); text != "" && text != head {
		msg = head + "\n\n" + text
	}
	line, _ := strconv.Atoi(strings.TrimSpace(c.Line))
	return rawFinding{
		path:     cmpOr(c.File, file),
		line:     line,
		severity: result.SeverityError,
		rule:     rule,
		title:    c.Name,
		message:  msg,
		key:      verb + ": " + p.Type + ": " + p.Message,
	}
}

type checkstyleDoc struct {
	XMLName xml.Name
	Files   []struct {
		Name   string `xml:"name,attr"`
		Errors []struct {
			Line     string `xml:"line,attr"`
			Column   string `xml:"column,attr"`
			Severity string `xml:"severity,attr"`
			Message  string `xml:"message,attr"`
			Source   string `xml:"source,attr"`
			Rule     string `xml:"rule,attr"`
		} `xml:"error"`
	} `xml:"file"`
}

func parseCheckstyle(data []byte) ([]rawFinding, error) {
	var doc checkstyleDoc
	if err := decodeXML(data, &doc); err != nil {
		return nil, err
	}
	if doc.XMLName.Local != "checkstyle" {
		return nil, fmt.Errorf("root element is <%s>, want <checkstyle>", doc.XMLName.Local)
	}
	var out []rawFinding
	for _, f := range doc.Files {
		name := f.Name
		if strings.HasPrefix(name, "(") && strings.HasSuffix(name, ")") {
			name = "" // tflint reports tool errors under "(application)"
		}
		for _, e := range f.Errors {
			var sev string
			switch strings.ToLower(e.Severity) {
			case "ignore":
				continue
			case "warning":
				sev = result.SeverityWarning
			case "info":
				sev = result.SeverityNotice
			default:
				sev = result.SeverityError
			}
			line, _ := strconv.Atoi(strings.TrimSpace(e.Line))
			col, _ := strconv.Atoi(strings.TrimSpace(e.Column))
			out = append(out, rawFinding{
				path: name, line: line, col: col, severity: sev,
				rule: cmpOr(e.Rule, e.Source), message: e.Message,
			})
		}
	}
	return out, nil
}

// --- tofu / terraform validate -json ---------------------------------------------------

type tofuValidate struct {
	FormatVersion string `json:"format_version"`
	Valid         *bool  `json:"valid"`
	Diagnostics   []struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
		Range    *struct {
			Filename string `json:"filename"`
			Start    struct {
				Line   int `json:"line"`
				Column int `json:"column"`
			} `json:"start"`
			End struct {
				Line   int `json:"line"`
				Column int `json:"column"`
			} `json:"end"`
		} `json:"range"`
	} `json:"diagnostics"`
}

func parseTofuValidate(data []byte) ([]rawFinding, error) {
	var v tofuValidate
	if err := decodeJSON(data, &v); err != nil {
		return nil, err
	}
	if v.Valid == nil && v.FormatVersion == "" {
		return nil, errors.New(`not "tofu validate -json" output: no "valid" or "format_version" key`)
	}
	out := make([]rawFinding, 0, len(v.Diagnostics))
	for _, d := range v.Diagnostics {
		f := rawFinding{severity: result.SeverityError, rule: d.Summary, title: d.Summary, message: d.Summary}
		if d.Severity == "warning" {
			f.severity = result.SeverityWarning
		}
		if d.Detail != "" {
			f.message = d.Summary + ": " + d.Detail
		}
		if d.Range != nil {
			rg := d.Range
			f.path, f.line, f.col, f.endLine = rg.Filename, rg.Start.Line, rg.Start.Column, rg.End.Line
			if rg.End.Line == rg.Start.Line && rg.End.Column > 1 {
				f.endCol = rg.End.Column - 1 // HCL range ends are exclusive
			}
		}
		out = append(out, f)
	}
	return out, nil
}
