package agent

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// This file is a small, conservative reader of POSIX shell commands for the --smart
// approval policy. It splits a command line into simple commands (across ; && || | & and
// newlines, and into $( ), ` `, <( ) and >( ) substitutions), removes quotes, and finds each
// command's program behind wrappers such as sudo, env, timeout and xargs. Anything it
// cannot read with confidence (unbalanced quotes, a substitution inside a here-document) is
// an error, and the policy denies what it cannot read.

type shWord struct {
	text string
	// dynamic: the word contains an unquoted or double-quoted expansion ($x, $(..)).
	dynamic bool
}

type shCmd struct {
	words    []shWord
	redirs   []shWord // redirection targets (files, fds, here-doc delimiters)
	pipedIn  bool     // stdin comes from a pipe
	pipedOut bool     // stdout goes to a pipe
	// subs are the substitutions inside this command's words, parsed.
	subs [][]shCmd
	// procSubs are the <( ) / >( ) substitutions among the words.
	procSubs [][]shCmd
}

var errUnreadable = errors.New("cannot read the command")

type shParser struct {
	s   string
	i   int
	out []shCmd
	cur shCmd
	w   strings.Builder
	// inWord: a word is being built (even if empty, as in "").
	inWord   bool
	dynamic  bool
	redirect bool     // the next word is a redirection target
	heredocs []string // pending here-doc delimiters ("'" prefix = quoted)
	depth    int
}

func parseShell(s string) ([]shCmd, error) {
	return parseShellDepth(s, 0)
}

func parseShellDepth(s string, depth int) ([]shCmd, error) {
	if depth > 8 {
		return nil, fmt.Errorf("%w: substitutions nested too deeply", errUnreadable)
	}
	p := &shParser{s: s, depth: depth}
	if err := p.run(); err != nil {
		return nil, err
	}
	return p.out, nil
}

func (p *shParser) endWord() {
	if !p.inWord {
		return
	}
	w := shWord{text: p.w.String(), dynamic: p.dynamic}
	if p.redirect {
		p.cur.redirs = append(p.cur.redirs, w)
		p.redirect = false
	} else {
		p.cur.words = append(p.cur.words, w)
	}
	p.w.Reset()
	p.inWord, p.dynamic = false, false
}

func (p *shParser) endCmd(pipe bool) {
	p.endWord()
	c := p.cur
	if len(c.words) > 0 || len(c.redirs) > 0 || len(c.subs) > 0 || len(c.procSubs) > 0 {
		c.pipedOut = pipe
		p.out = append(p.out, c)
	}
	p.cur = shCmd{pipedIn: pipe}
}

// matching returns the index after the substitution body that starts at s[i] (just after
// the opening "(" or "`"), honouring quotes and nesting.
func matching(s string, i int, closer byte) (int, error) {
	depth := 1
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\':
			i += 2
			continue
		case c == '\'' && closer != '`':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return 0, fmt.Errorf("%w: unterminated single quote", errUnreadable)
			}
			i += j + 2
			continue
		case c == '"':
			j := i + 1
			for j < len(s) && s[j] != '"' {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return 0, fmt.Errorf("%w: unterminated double quote", errUnreadable)
			}
			i = j + 1
			continue
		case closer == '`' && c == '`':
			return i + 1, nil
		case closer == ')' && c == '(':
			depth++
		case closer == ')' && c == ')':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
		i++
	}
	return 0, fmt.Errorf("%w: unterminated substitution", errUnreadable)
}

func (p *shParser) substitution(start int, closer byte, proc bool) error {
	end, err := matching(p.s, start, closer)
	if err != nil {
		return err
	}
	inner := p.s[start : end-1]
	cmds, err := parseShellDepth(inner, p.depth+1)
	if err != nil {
		return err
	}
	if proc {
		p.cur.procSubs = append(p.cur.procSubs, cmds)
	} else {
		p.cur.subs = append(p.cur.subs, cmds)
	}
	p.w.WriteString("$(" + inner + ")")
	p.inWord, p.dynamic = true, true
	p.i = end
	return nil
}

func (p *shParser) run() error {
	s := p.s
	for p.i < len(s) {
		c := s[p.i]
		switch {
		case c == '\\':
			if p.i+1 < len(s) {
				if s[p.i+1] != '\n' {
					p.w.WriteByte(s[p.i+1])
					p.inWord = true
				}
				p.i += 2
			} else {
				p.i++
			}
		case c == '\'':
			j := strings.IndexByte(s[p.i+1:], '\'')
			if j < 0 {
				return fmt.Errorf("%w: unterminated single quote", errUnreadable)
			}
			p.w.WriteString(s[p.i+1 : p.i+1+j])
			p.inWord = true
			p.i += j + 2
		case c == '"':
			if err := p.doubleQuoted(); err != nil {
				return err
			}
		case c == '`':
			if err := p.substitution(p.i+1, '`', false); err != nil {
				return err
			}
		case c == '$' && strings.HasPrefix(s[p.i:], "$(("):
			end, err := matching(s, p.i+3, ')')
			if err != nil {
				return err
			}
			p.i = end
			if p.i < len(s) && s[p.i] == ')' {
				p.i++
			}
			p.w.WriteString("$((…))")
			p.inWord, p.dynamic = true, true
		case c == '$' && strings.HasPrefix(s[p.i:], "$("):
			if err := p.substitution(p.i+2, ')', false); err != nil {
				return err
			}
		case c == '$':
			p.w.WriteByte(c)
			p.inWord, p.dynamic = true, true
			p.i++
		case (c == '<' || c == '>') && p.i+1 < len(s) && s[p.i+1] == '(':
			p.endWord()
			if err := p.substitution(p.i+2, ')', true); err != nil {
				return err
			}
			p.endWord()
		case c == '#' && !p.inWord:
			j := strings.IndexByte(s[p.i:], '\n')
			if j < 0 {
				p.i = len(s)
			} else {
				p.i += j
			}
		case c == ' ' || c == '\t':
			p.endWord()
			p.i++
		case c == '\n':
			p.endCmd(false)
			p.i++
			if err := p.skipHeredocs(); err != nil {
				return err
			}
		case c == ';' || c == '(' || c == ')':
			p.endCmd(false)
			p.i++
		case c == '&':
			if strings.HasPrefix(s[p.i:], "&>") {
				p.endWord()
				p.i += 2
				if p.i < len(s) && s[p.i] == '>' {
					p.i++
				}
				p.redirect = true
				continue
			}
			p.endCmd(false)
			p.i++
			if p.i < len(s) && s[p.i] == '&' {
				p.i++
			}
		case c == '|':
			if strings.HasPrefix(s[p.i:], "||") {
				p.endCmd(false)
				p.i += 2
				continue
			}
			p.endCmd(true)
			p.i++
			if p.i < len(s) && s[p.i] == '&' {
				p.i++
			}
		case c == '<' || c == '>':
			// An fd number right before the operator belongs to it ("2>").
			if p.inWord && isDigits(p.w.String()) && !p.dynamic {
				p.w.Reset()
				p.inWord = false
			}
			p.endWord()
			op := s[p.i:]
			switch {
			case strings.HasPrefix(op, "<<<"):
				p.i += 3
			case strings.HasPrefix(op, "<<"):
				p.i += 2
				dash := p.i < len(s) && s[p.i] == '-'
				if dash {
					p.i++
				}
				delim, quoted, err := p.heredocDelim()
				if err != nil {
					return err
				}
				if quoted {
					delim = "'" + delim
				}
				p.heredocs = append(p.heredocs, delim)
				p.cur.redirs = append(p.cur.redirs, shWord{text: strings.TrimPrefix(delim, "'")})
				continue
			case strings.HasPrefix(op, ">>"), strings.HasPrefix(op, ">&"), strings.HasPrefix(op, "<&"), strings.HasPrefix(op, ">|"), strings.HasPrefix(op, "<>"):
				p.i += 2
			default:
				p.i++
			}
			p.redirect = true
		default:
			p.w.WriteByte(c)
			p.inWord = true
			p.i++
		}
	}
	p.endCmd(false)
	if len(p.heredocs) > 0 {
		return fmt.Errorf("%w: here-document without its body", errUnreadable)
	}
	return nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func (p *shParser) doubleQuoted() error {
	s := p.s
	p.i++
	p.inWord = true
	for p.i < len(s) {
		c := s[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c == '\\' && p.i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[p.i+1]) >= 0:
			if s[p.i+1] != '\n' {
				p.w.WriteByte(s[p.i+1])
			}
			p.i += 2
		case c == '`':
			if err := p.substitution(p.i+1, '`', false); err != nil {
				return err
			}
		case c == '$' && strings.HasPrefix(s[p.i:], "$(("):
			end, err := matching(s, p.i+3, ')')
			if err != nil {
				return err
			}
			p.i = end
			if p.i < len(s) && s[p.i] == ')' {
				p.i++
			}
			p.dynamic = true
		case c == '$' && strings.HasPrefix(s[p.i:], "$("):
			if err := p.substitution(p.i+2, ')', false); err != nil {
				return err
			}
		default:
			if c == '$' {
				p.dynamic = true
			}
			p.w.WriteByte(c)
			p.i++
		}
	}
	return fmt.Errorf("%w: unterminated double quote", errUnreadable)
}

// heredocDelim reads the word after << and reports whether it was quoted.
func (p *shParser) heredocDelim() (string, bool, error) {
	s := p.s
	for p.i < len(s) && (s[p.i] == ' ' || s[p.i] == '\t') {
		p.i++
	}
	var b strings.Builder
	quoted := false
	for p.i < len(s) {
		c := s[p.i]
		if c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '|' || c == '&' || c == '<' || c == '>' || c == ')' {
			break
		}
		if c == '\'' || c == '"' {
			quoted = true
			j := strings.IndexByte(s[p.i+1:], c)
			if j < 0 {
				return "", false, fmt.Errorf("%w: unterminated quote in a here-document delimiter", errUnreadable)
			}
			b.WriteString(s[p.i+1 : p.i+1+j])
			p.i += j + 2
			continue
		}
		if c == '\\' {
			quoted = true
			p.i++
			continue
		}
		b.WriteByte(c)
		p.i++
	}
	if b.Len() == 0 {
		return "", false, fmt.Errorf("%w: here-document without a delimiter", errUnreadable)
	}
	return b.String(), quoted, nil
}

// skipHeredocs consumes the bodies of pending here-documents after a newline. An unquoted
// body with a command substitution is refused: it would run code the policy cannot see.
func (p *shParser) skipHeredocs() error {
	for len(p.heredocs) > 0 {
		delim := p.heredocs[0]
		p.heredocs = p.heredocs[1:]
		quoted := strings.HasPrefix(delim, "'")
		delim = strings.TrimPrefix(delim, "'")
		for {
			if p.i >= len(p.s) {
				return fmt.Errorf("%w: here-document %q is not terminated", errUnreadable, delim)
			}
			j := strings.IndexByte(p.s[p.i:], '\n')
			line := p.s[p.i:]
			if j >= 0 {
				line = p.s[p.i : p.i+j]
				p.i += j + 1
			} else {
				p.i = len(p.s)
			}
			if strings.TrimLeft(line, "\t") == delim {
				break
			}
			if !quoted && (strings.Contains(line, "$(") || strings.Contains(line, "`")) {
				return fmt.Errorf("%w: command substitution inside a here-document", errUnreadable)
			}
		}
	}
	return nil
}

// flatten returns every simple command, substitutions included.
func flatten(cmds []shCmd) []shCmd {
	var out []shCmd
	for _, c := range cmds {
		out = append(out, c)
		for _, s := range c.subs {
			out = append(out, flatten(s)...)
		}
		for _, s := range c.procSubs {
			out = append(out, flatten(s)...)
		}
	}
	return out
}

var assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// shellKeywords start compound commands; the command follows them.
var shellKeywords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"while": true, "until": true, "!": true, "{": true, "}": true, "esac": true, "function": true,
}

// program finds the program a simple command runs, behind assignments and wrappers. It
// returns "" for a command that runs nothing (only assignments, "for x in ...").
func program(c shCmd) (name string, args []shWord, nameDynamic bool) {
	w := c.words
	i := 0
	skipOpts := func(withValue string) {
		for i < len(w) && strings.HasPrefix(w[i].text, "-") && w[i].text != "-" {
			opt := w[i].text
			i++
			if opt == "--" {
				return
			}
			if len(opt) == 2 && strings.Contains(withValue, opt[1:]) && i < len(w) {
				i++ // the option's value
			}
		}
	}
	for i < len(w) {
		t := w[i].text
		switch {
		case shellKeywords[t]:
			i++
			continue
		case t == "for" || t == "case" || t == "select" || t == "in":
			return "", nil, false
		case assignment.MatchString(t):
			i++
			continue
		}
		base := path.Base(t)
		switch base {
		case "sudo", "doas":
			i++
			skipOpts("ugCDhprtU")
			continue
		case "env":
			i++
			for i < len(w) && (strings.HasPrefix(w[i].text, "-") || assignment.MatchString(w[i].text)) {
				opt := w[i].text
				i++
				if (opt == "-u" || opt == "-C" || opt == "-S") && i < len(w) {
					i++
				}
			}
			if i >= len(w) {
				return "env", nil, false
			}
			continue
		case "command", "builtin", "exec", "nohup", "time", "nice", "ionice", "stdbuf", "setsid", "chronic", "unbuffer", "busybox":
			if base == "command" && i+1 < len(w) && (w[i+1].text == "-v" || w[i+1].text == "-V") {
				return "command", w[i+1:], false
			}
			i++
			skipOpts("nco")
			continue
		case "timeout":
			i++
			skipOpts("sk")
			if i < len(w) {
				i++ // the duration
			}
			continue
		case "xargs":
			i++
			skipOpts("InPdLsaE")
			if i >= len(w) {
				return "echo", nil, false
			}
			continue
		}
		return base, w[i+1:], w[i].dynamic && strings.HasPrefix(t, "$")
	}
	return "", nil, false
}
