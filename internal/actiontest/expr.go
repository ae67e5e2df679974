package actiontest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// The subset of the GitHub Actions expression language that composite actions use:
// literals ('string', numbers, true, false, null), context paths (inputs.x,
// steps.id.outputs.y, runner.os, github.action_path, env.NAME), the operators ! == != &&
// || and parentheses, and the status functions success(), failure(), cancelled() and
// always(). Anything else is an error, so a test never silently evaluates something the
// real runner would read differently.

// value is an expression value: nil (null), bool, float64 or string.
type value any

// lookup resolves a context path such as "inputs.rubric"; ok is false for an unknown
// context (an error), and a nil value for a known context without that key (null).
type lookup func(path []string) (v value, ok bool)

// status is what the status functions see.
type status struct {
	failed, cancelled bool
}

type evaluator struct {
	toks   []token
	pos    int
	lookup lookup
	status status
}

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokIdent
	tokString
	tokNumber
	tokOp
)

type token struct {
	kind tokenKind
	text string
}

func tokenize(src string) ([]token, error) {
	var toks []token
	for i := 0; i < len(src); {
		c := src[i]
		var tok token
		n := 1
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '\'':
			text, used, err := scanString(src[i:])
			if err != nil {
				return nil, fmt.Errorf("%w in %q", err, src)
			}
			tok, n = token{tokString, text}, used
		case isTwoCharOp(src[i:]):
			tok, n = token{tokOp, src[i : i+2]}, 2
		case c == '!' || c == '(' || c == ')' || c == '.':
			tok = token{tokOp, string(c)}
		case isDigit(c) || c == '-' && i+1 < len(src) && isDigit(src[i+1]):
			n = 1 + scanWhile(src[i+1:], func(b byte) bool { return isDigit(b) || b == '.' })
			tok = token{tokNumber, src[i : i+n]}
		case c == '_' || unicode.IsLetter(rune(c)):
			n = 1 + scanWhile(src[i+1:], func(b byte) bool {
				return b == '_' || b == '-' || isDigit(b) || unicode.IsLetter(rune(b))
			})
			tok = token{tokIdent, src[i : i+n]}
		default:
			return nil, fmt.Errorf("unsupported character %q in expression %q", c, src)
		}
		toks = append(toks, tok)
		i += n
	}
	return append(toks, token{kind: tokEOF}), nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func isTwoCharOp(s string) bool {
	for _, op := range []string{"==", "!=", "&&", "||"} {
		if strings.HasPrefix(s, op) {
			return true
		}
	}
	return false
}

// scanWhile counts the leading bytes of s for which ok holds.
func scanWhile(s string, ok func(byte) bool) int {
	n := 0
	for n < len(s) && ok(s[n]) {
		n++
	}
	return n
}

// scanString reads a '...' literal at the start of s (” is a quote) and returns its
// text and the bytes it used.
func scanString(s string) (string, int, error) {
	var b strings.Builder
	for j := 1; j < len(s); j++ {
		if s[j] != '\'' {
			b.WriteByte(s[j])
			continue
		}
		if j+1 < len(s) && s[j+1] == '\'' {
			b.WriteByte('\'')
			j++
			continue
		}
		return b.String(), j + 1, nil
	}
	return "", 0, errors.New("unterminated string")
}

// eval evaluates one expression (without the ${{ }} delimiters).
func eval(src string, lk lookup, st status) (value, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	e := &evaluator{toks: toks, lookup: lk, status: st}
	v, err := e.or()
	if err != nil {
		return nil, fmt.Errorf("expression %q: %w", src, err)
	}
	if e.peek().kind != tokEOF {
		return nil, fmt.Errorf("expression %q: unexpected %q", src, e.peek().text)
	}
	return v, nil
}

func (e *evaluator) peek() token { return e.toks[e.pos] }
func (e *evaluator) next() token { t := e.toks[e.pos]; e.pos++; return t }

func (e *evaluator) isOp(s string) bool {
	t := e.peek()
	return t.kind == tokOp && t.text == s
}

func (e *evaluator) or() (value, error) {
	l, err := e.and()
	if err != nil {
		return nil, err
	}
	for e.isOp("||") {
		e.next()
		r, err := e.and()
		if err != nil {
			return nil, err
		}
		if !truthy(l) {
			l = r
		}
	}
	return l, nil
}

func (e *evaluator) and() (value, error) {
	l, err := e.cmp()
	if err != nil {
		return nil, err
	}
	for e.isOp("&&") {
		e.next()
		r, err := e.cmp()
		if err != nil {
			return nil, err
		}
		if truthy(l) {
			l = r
		}
	}
	return l, nil
}

func (e *evaluator) cmp() (value, error) {
	l, err := e.unary()
	if err != nil {
		return nil, err
	}
	for e.isOp("==") || e.isOp("!=") {
		op := e.next().text
		r, err := e.unary()
		if err != nil {
			return nil, err
		}
		eq := equal(l, r)
		if op == "!=" {
			eq = !eq
		}
		l = eq
	}
	return l, nil
}

func (e *evaluator) unary() (value, error) {
	if e.isOp("!") {
		e.next()
		v, err := e.unary()
		if err != nil {
			return nil, err
		}
		return !truthy(v), nil
	}
	return e.primary()
}

func (e *evaluator) primary() (value, error) {
	t := e.next()
	switch t.kind {
	case tokString:
		return t.text, nil
	case tokNumber:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", t.text)
		}
		return f, nil
	case tokOp:
		if t.text == "(" {
			v, err := e.or()
			if err != nil {
				return nil, err
			}
			if !e.isOp(")") {
				return nil, fmt.Errorf("missing )")
			}
			e.next()
			return v, nil
		}
		return nil, fmt.Errorf("unexpected %q", t.text)
	case tokIdent:
		switch t.text {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "null":
			return nil, nil
		}
		if e.isOp("(") {
			e.next()
			if !e.isOp(")") {
				return nil, fmt.Errorf("%s(): arguments are not supported", t.text)
			}
			e.next()
			switch t.text {
			case "success":
				return !e.status.failed && !e.status.cancelled, nil
			case "failure":
				return e.status.failed && !e.status.cancelled, nil
			case "cancelled":
				return e.status.cancelled, nil
			case "always":
				return true, nil
			}
			return nil, fmt.Errorf("unsupported function %s()", t.text)
		}
		path := []string{t.text}
		for e.isOp(".") {
			e.next()
			p := e.next()
			if p.kind != tokIdent {
				return nil, fmt.Errorf("bad property after %s", strings.Join(path, "."))
			}
			path = append(path, p.text)
		}
		v, ok := e.lookup(path)
		if !ok {
			return nil, fmt.Errorf("unsupported context %s", strings.Join(path, "."))
		}
		return v, nil
	}
	return nil, fmt.Errorf("unexpected end of expression")
}

// truthy follows GitHub: false, 0, "", null and NaN are false; every other value,
// the string "false" included, is true.
func truthy(v value) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && x == x
	case string:
		return x != ""
	}
	return true
}

// equal compares like GitHub: strings case-insensitively; mixed types through numbers.
func equal(a, b value) bool {
	as, aok := a.(string)
	bs, bok := b.(string)
	if aok && bok {
		return strings.EqualFold(as, bs)
	}
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return number(a) == number(b)
}

func number(v value) float64 {
	switch x := v.(type) {
	case bool:
		if x {
			return 1
		}
		return 0
	case float64:
		return x
	case string:
		if strings.TrimSpace(x) == "" {
			return 0
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		if err != nil {
			return -1e308 // NaN-like: equal to nothing we compare with
		}
		return f
	}
	return 0
}

// str renders a value the way GitHub interpolates it into a string.
func str(v value) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// interpolate replaces every ${{ expr }} in s.
func interpolate(s string, lk lookup, st status) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${{")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			return "", fmt.Errorf("unterminated ${{ in %q", s)
		}
		v, err := eval(s[i+3:i+j], lk, st)
		if err != nil {
			return "", err
		}
		b.WriteString(s[:i])
		b.WriteString(str(v))
		s = s[i+j+2:]
	}
}

// condition evaluates a step's if:, which may or may not be wrapped in ${{ }}.
func condition(s string, lk lookup, st status) (bool, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = "success()"
	}
	if strings.HasPrefix(s, "${{") && strings.HasSuffix(s, "}}") && strings.Count(s, "${{") == 1 {
		s = s[3 : len(s)-2]
	}
	// GitHub adds success() && to a condition that calls no status function.
	if !strings.Contains(s, "success()") && !strings.Contains(s, "failure()") &&
		!strings.Contains(s, "cancelled()") && !strings.Contains(s, "always()") {
		s = "success() && (" + s + ")"
	}
	v, err := eval(s, lk, st)
	if err != nil {
		return false, err
	}
	return truthy(v), nil
}
