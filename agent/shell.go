package agent

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// This file reads shell commands for the --smart approval policy and the deny patterns,
// with a real shell parser (mvdan.cc/sh, Bash grammar). It turns a command line into every
// simple command it would run: inside pipelines, lists, compound commands, functions and
// substitutions, and inside code handed to eval, sh -c, source, alias, trap or a shell's stdin. Each word
// is expanded the way the shell would: quotes removed, braces and tildes expanded, variables
// replaced by the values the command line itself assigns. What is only known when the
// command runs (a variable from the environment, a substitution's output) stays a marked
// placeholder, so rules can tell literal text from generated text. A command the parser
// cannot read is an error, and --smart denies what it cannot read.

const (
	// maxNesting bounds code-in-code (eval "sh -c '…'"), which an attacker controls.
	maxNesting = 4
	// maxVariants bounds how many values of one variable are tried; a variable assigned
	// more often than this is treated as unknown.
	maxVariants = 8
	// maxCommands bounds the work of one reading (variants times nesting multiply).
	maxCommands = 4096
	// mark brackets a placeholder for text only known at run time. It is a private-use
	// rune, so it never reaches a decision or a message as such.
	mark = '\uE000'
)

var errUnreadable = errors.New("cannot read the command")

// word is one field of a command after expansion.
type word struct {
	text    string // with placeholders shown as $NAME or $(…)
	dynamic bool   // holds a placeholder
	pattern string // text with each placeholder as *, for matching paths
	// dir is the working directory of the command the word belongs to (see placeCommands).
	dir string
}

// simpleCmd is one command the shell would run.
type simpleCmd struct {
	args     []word   // program and arguments (assignments excluded)
	assigns  []string // NAME=value prefixes, as written
	source   string   // the command as written
	stdinDoc *word    // a here-document or here-string on its stdin
	pipedIn  bool     // its stdin comes from an earlier stage of a pipeline
	pipedOut bool     // its stdout goes to a later stage of a pipeline
	// fetchedIn: an earlier stage of its pipeline downloads something.
	fetchedIn bool
	// subFetch / procSubFetch: a $(…) / <(…) in its words runs a downloader.
	subFetch, procSubFetch bool
	// unreadable is set when code handed to it (eval, sh -c) cannot be parsed.
	unreadable error
	// assignWords are its NAME=value prefixes, expanded.
	assignWords []word
	// hiddenCode says why code an option value or variable carries cannot be checked.
	hiddenCode string
	// home is $HOME where it runs, where a bare cd goes (the command line may set HOME).
	home word

	call *syntax.CallExpr
}

// script is everything a command line would run, with each variable value tried.
type script struct {
	cmds   []*simpleCmd
	redirs []word // every redirection target
	// hdocSubst: a here-document body runs $(…) or `…`, whose output becomes file
	// content nobody reviewed.
	hdocSubst bool
	forkBomb  bool
}

// readShell parses and expands a command line.
func readShell(src string) (*script, error) {
	budget := maxCommands
	return analyze(src, 0, nil, &budget)
}

func analyze(src string, depth int, inherited map[string]string, budget *int) (*script, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("%w: code nested too deeply", errUnreadable)
	}
	if strings.ContainsRune(src, mark) {
		return nil, fmt.Errorf("%w: it contains the character U+E000", errUnreadable)
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreadable, err)
	}
	a := &analysis{src: src, depth: depth, budget: budget, out: &script{}, pipes: map[*syntax.CallExpr][]stage{}}
	values := a.assignedValues(file, inherited)
	a.structure(file)
	n := 1
	for _, vs := range values {
		n = max(n, len(vs))
	}
	for k := range n {
		env := make(map[string]string, len(inherited)+len(values))
		for name, v := range inherited {
			env[name] = v
		}
		for name, vs := range values {
			env[name] = vs[min(k, len(vs)-1)]
		}
		a.env = env
		if err := a.expandAll(file); err != nil {
			return nil, err
		}
	}
	a.markFetchedPipes()
	return a.out, nil
}

type stage struct {
	pipeline *syntax.BinaryCmd
	index    int
	count    int // how many stages the pipeline has
}

type analysis struct {
	src   string
	depth int
	env   map[string]string // the variant being expanded
	out   *script
	// budget is how many more commands this reading may expand.
	budget *int
	// pipes records, for each command inside a pipeline, which stage it is in.
	pipes map[*syntax.CallExpr][]stage
}

func (a *analysis) text(n syntax.Node) string {
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(a.src) || s > e {
		return ""
	}
	return a.src[s:e]
}

func placeholder(s string) string { return string(mark) + s + string(mark) }

// config expands words against the variant's known values.
func (a *analysis) config() *expand.Config {
	return &expand.Config{
		Env: knownEnv(a.env),
		CmdSubst: func(w io.Writer, _ *syntax.CmdSubst) error {
			_, err := io.WriteString(w, placeholder("$(…)"))
			return err
		},
		ProcSubst: func(*syntax.ProcSubst) (string, error) { return placeholder("<(…)"), nil },
	}
}

// knownEnv answers with the command line's own values, and a placeholder for the rest.
type knownEnv map[string]string

func (e knownEnv) Get(name string) expand.Variable {
	if v, ok := e[name]; ok {
		return expand.Variable{Set: true, Kind: expand.String, Str: v}
	}
	switch {
	case name == "IFS":
		return expand.Variable{} // the default separators
	case strings.HasPrefix(name, "HOME "): // ~user
		return expand.Variable{Set: true, Kind: expand.String, Str: placeholder("~" + strings.TrimPrefix(name, "HOME "))}
	}
	return expand.Variable{Set: true, Kind: expand.String, Str: placeholder("$" + name)}
}

func (e knownEnv) Each(func(string, expand.Variable) bool) {}

// rawFields expands one shell word into fields that keep their placeholders marked; a word
// the expander cannot evaluate (arithmetic on an unknown value, say) is kept as written and
// counts as generated.
func (a *analysis) rawFields(w *syntax.Word) []string {
	fs, err := expand.Fields(a.config(), w)
	if err != nil {
		return []string{placeholder(a.text(w))}
	}
	return fs
}

func (a *analysis) fields(w *syntax.Word) []word {
	raw := a.rawFields(w)
	out := make([]word, len(raw))
	for i, f := range raw {
		out[i] = newWord(f)
	}
	return out
}

func (a *analysis) literal(w *syntax.Word) word {
	s, err := expand.Literal(a.config(), w)
	if err != nil {
		return word{text: a.text(w), dynamic: true, pattern: "*"}
	}
	return newWord(s)
}

func newWord(s string) word {
	if !strings.ContainsRune(s, mark) {
		return word{text: s, pattern: s}
	}
	var text, pattern strings.Builder
	for i, part := range strings.Split(s, string(mark)) {
		text.WriteString(part)
		if i%2 == 1 {
			pattern.WriteString("*")
		} else {
			pattern.WriteString(part)
		}
	}
	return word{text: text.String(), dynamic: true, pattern: pattern.String()}
}

// assignedValues collects, in order, the values the command line gives each variable
// (NAME=…, export NAME=…, for NAME in …), expanding each with the values known so far.
func (a *analysis) assignedValues(file *syntax.File, inherited map[string]string) map[string][]string {
	values := map[string][]string{}
	latest := map[string]string{}
	for k, v := range inherited {
		latest[k] = v
	}
	add := func(name string, v string) {
		for _, have := range values[name] {
			if have == v {
				return
			}
		}
		values[name] = append(values[name], v)
		latest[name] = v
	}
	a.env = latest
	assign := func(as *syntax.Assign) {
		if as.Name == nil || as.Array != nil || as.Index != nil || as.Naked {
			return
		}
		v := ""
		if as.Value != nil {
			v = a.literalRaw(as.Value)
		}
		if as.Append {
			v = latest[as.Name.Value] + v
		}
		add(as.Name.Value, v)
	}
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			for _, as := range n.Assigns {
				assign(as)
			}
		case *syntax.DeclClause:
			for _, as := range n.Args {
				assign(as)
			}
		case *syntax.WordIter:
			for _, item := range n.Items {
				for _, f := range a.rawFields(item) {
					add(n.Name.Value, f)
				}
			}
		}
		return true
	})
	for name, vs := range values {
		if len(vs) > maxVariants {
			delete(values, name)
		}
	}
	return values
}

// literalRaw expands a word and keeps its placeholders marked, so a value that holds one
// stays generated wherever it is used.
func (a *analysis) literalRaw(w *syntax.Word) string {
	s, err := expand.Literal(a.config(), w)
	if err != nil {
		return placeholder(a.text(w))
	}
	return s
}

// structure finds what does not depend on values: pipelines, fork bombs and here-documents
// that run commands.
func (a *analysis) structure(file *syntax.File) {
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.BinaryCmd:
			if n.Op == syntax.Pipe || n.Op == syntax.PipeAll {
				stages := pipelineStages(n)
				for i, st := range stages {
					syntax.Walk(st, func(m syntax.Node) bool {
						if c, ok := m.(*syntax.CallExpr); ok {
							a.pipes[c] = append(a.pipes[c], stage{n, i, len(stages)})
						}
						return true
					})
				}
			}
		case *syntax.FuncDecl:
			if n.Name != nil && callsItselfConcurrently(n.Name.Value, n.Body) {
				a.out.forkBomb = true
			}
		case *syntax.Redirect:
			if n.Hdoc != nil && runsCommands(n.Hdoc) {
				a.out.hdocSubst = true
			}
		}
		return true
	})
}

// pipelineStages flattens a | b | c into its stages.
func pipelineStages(b *syntax.BinaryCmd) []*syntax.Stmt {
	var out []*syntax.Stmt
	for _, s := range []*syntax.Stmt{b.X, b.Y} {
		if inner, ok := s.Cmd.(*syntax.BinaryCmd); ok && (inner.Op == syntax.Pipe || inner.Op == syntax.PipeAll) && !s.Negated && len(s.Redirs) == 0 {
			out = append(out, pipelineStages(inner)...)
			continue
		}
		out = append(out, s)
	}
	return out
}

// callsItselfConcurrently spots :(){ :|:& };: — a function that starts itself in a
// pipeline or in the background.
func callsItselfConcurrently(name string, body *syntax.Stmt) bool {
	found := false
	var visit func(n syntax.Node, concurrent bool) bool
	visit = func(n syntax.Node, concurrent bool) bool {
		syntax.Walk(n, func(m syntax.Node) bool {
			switch m := m.(type) {
			case *syntax.Stmt:
				if m.Background && m != n {
					visit(m.Cmd, true)
					return false
				}
			case *syntax.BinaryCmd:
				if m.Op == syntax.Pipe || m.Op == syntax.PipeAll {
					visit(m.X, true)
					visit(m.Y, true)
					return false
				}
			case *syntax.CallExpr:
				if concurrent && len(m.Args) > 0 && m.Args[0].Lit() == name {
					found = true
				}
			}
			return !found
		})
		return found
	}
	if body.Background {
		return visit(body.Cmd, true)
	}
	return visit(body, false)
}

func runsCommands(w *syntax.Word) bool {
	found := false
	syntax.Walk(w, func(n syntax.Node) bool {
		if _, ok := n.(*syntax.CmdSubst); ok {
			found = true
		}
		return !found
	})
	return found
}

// expandAll expands every command and redirection for the current variant.
func (a *analysis) expandAll(file *syntax.File) error {
	var err error
	syntax.Walk(file, func(n syntax.Node) bool {
		if err != nil {
			return false
		}
		stmt, ok := n.(*syntax.Stmt)
		if !ok {
			return true
		}
		var doc *word
		for _, r := range stmt.Redirs {
			switch {
			case r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc:
				if r.Hdoc != nil {
					d := a.document(r.Hdoc)
					doc = &d
				}
			case r.Op == syntax.WordHdoc:
				d := a.literal(r.Word)
				doc = &d
			case r.Word != nil:
				a.out.redirs = append(a.out.redirs, a.literal(r.Word))
			}
		}
		switch c := stmt.Cmd.(type) {
		case *syntax.CallExpr:
			err = a.addCall(c, doc)
		case *syntax.DeclClause:
			err = a.addDecl(c)
		}
		return true
	})
	return err
}

func (a *analysis) document(w *syntax.Word) word {
	s, err := expand.Document(a.config(), w)
	if err != nil {
		return word{text: a.text(w), dynamic: true, pattern: "*"}
	}
	return newWord(s)
}

func (a *analysis) addCall(c *syntax.CallExpr, doc *word) error {
	if *a.budget--; *a.budget < 0 {
		return fmt.Errorf("%w: it expands to more than %d commands", errUnreadable, maxCommands)
	}
	sc := &simpleCmd{source: a.text(c), stdinDoc: doc, call: c, home: newWord(knownEnv(a.env).Get("HOME").Str)}
	for _, as := range c.Assigns {
		sc.assigns = append(sc.assigns, a.text(as))
		sc.assignWords = append(sc.assignWords, a.assignWord(as))
	}
	for _, w := range c.Args {
		sc.args = append(sc.args, a.fields(w)...)
		syntax.Walk(w, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.CmdSubst:
				sc.subFetch = sc.subFetch || a.downloads(n)
			case *syntax.ProcSubst:
				sc.procSubFetch = sc.procSubFetch || a.downloads(n)
			}
			return true
		})
	}
	sc.pipedIn = slices.ContainsFunc(a.pipes[c], func(s stage) bool { return s.index > 0 })
	sc.pipedOut = slices.ContainsFunc(a.pipes[c], func(s stage) bool { return s.index < s.count-1 })
	a.out.cmds = append(a.out.cmds, sc)
	return a.addNested(sc)
}

// downloads reports whether a substitution runs a downloader.
func (a *analysis) downloads(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(m syntax.Node) bool {
		if c, ok := m.(*syntax.CallExpr); ok {
			var args []word
			for _, w := range c.Args {
				args = append(args, a.fields(w)...)
			}
			if name, _, _ := program(args); fetchers[name] {
				found = true
			}
		}
		return !found
	})
	return found
}

func (a *analysis) addDecl(d *syntax.DeclClause) error {
	sc := &simpleCmd{source: a.text(d), args: []word{{text: d.Variant.Value, pattern: d.Variant.Value}}}
	for _, as := range d.Args {
		switch {
		case as.Naked && as.Value != nil:
			sc.args = append(sc.args, a.fields(as.Value)...)
		case as.Naked && as.Name != nil:
			sc.args = append(sc.args, word{text: as.Name.Value, pattern: as.Name.Value})
		default:
			sc.args = append(sc.args, a.assignWord(as))
		}
	}
	a.out.cmds = append(a.out.cmds, sc)
	// export GIT_SSH_COMMAND=… carries a command like a NAME=value prefix does.
	reason, codes := carriedByAssignments(sc.args)
	return a.readAllCarried(sc, reason, codes)
}

// assignWord is NAME=value with the value expanded.
func (a *analysis) assignWord(as *syntax.Assign) word {
	if as.Name == nil || as.Array != nil || as.Index != nil {
		return newWord(a.text(as))
	}
	v := word{}
	if as.Value != nil {
		v = a.literal(as.Value)
	}
	prefix := as.Name.Value + "="
	if as.Append {
		prefix = as.Name.Value + "+="
	}
	return word{text: prefix + v.text, pattern: prefix + v.pattern, dynamic: v.dynamic}
}

// addNested reads the code a command hands to a shell (eval, sh -c, a script on a shell's
// stdin, find -exec) and adds the commands it would run.
func (a *analysis) addNested(sc *simpleCmd) error {
	if err := a.addCarried(sc); err != nil {
		return err
	}
	name, args, _ := program(sc.args)
	var code *word
	switch {
	case name == "eval":
		w := joinFields(args)
		code = &w
	case isShell(name):
		if c, ok := dashC(args); ok {
			code = &c
		} else if sc.stdinDoc != nil && !readsScriptFile(args) {
			code = sc.stdinDoc
		}
	case name == "source" || name == ".":
		if len(args) > 0 && (args[0].text == "/dev/stdin" || args[0].text == "-") && sc.stdinDoc != nil {
			code = sc.stdinDoc
		}
	case execActions[name] != nil:
		for _, cmd := range findExec(execActions[name], args) {
			a.out.cmds = append(a.out.cmds, cmd)
			if err := a.addNested(cmd); err != nil {
				return err
			}
		}
	case name == "trap":
		// trap's action runs later, on the signal or at exit: code like eval's.
		if len(args) > 0 && !strings.HasPrefix(args[0].text, "-") {
			code = &args[0]
		}
	case name == "alias":
		// An alias body runs wherever the alias is used (dash always expands aliases,
		// bash after shopt -s expand_aliases), so it is read as code of its own.
		for _, arg := range args {
			if _, body, ok := strings.Cut(arg.text, "="); ok && !arg.dynamic {
				if err := a.readNested(sc, body); err != nil {
					return err
				}
			}
		}
	}
	if code == nil || code.dynamic {
		return nil // generated code is judged by the rules; there is nothing to read
	}
	return a.readNested(sc, code.text)
}

// readNested reads code that sc hands to a shell and adds the commands it would run; code
// that cannot be read makes sc unreadable.
func (a *analysis) readNested(sc *simpleCmd, code string) error {
	nested, err := analyze(code, a.depth+1, a.env, a.budget)
	if err != nil {
		if errors.Is(err, errUnreadable) {
			sc.unreadable = err
			return nil
		}
		return err
	}
	a.out.cmds = append(a.out.cmds, nested.cmds...)
	a.out.redirs = append(a.out.redirs, nested.redirs...)
	a.out.hdocSubst = a.out.hdocSubst || nested.hdocSubst
	a.out.forkBomb = a.out.forkBomb || nested.forkBomb
	return nil
}

// execActions are the options of file finders that run the words after them, up to ;
// or + (or the end), once per file found.
var execActions = map[string][]string{
	"find":   {"-exec", "-execdir", "-ok", "-okdir"},
	"fd":     {"-x", "--exec", "-X", "--exec-batch"},
	"fdfind": {"-x", "--exec", "-X", "--exec-batch"},
}

// findExec returns the commands find -exec/-execdir/-ok/-okdir (or fd -x) would run.
func findExec(actions []string, args []word) []*simpleCmd {
	var out []*simpleCmd
	for i := 0; i < len(args); i++ {
		if slices.Contains(actions, args[i].text) {
			j := i + 1
			for j < len(args) && args[j].text != ";" && args[j].text != "+" {
				j++
			}
			if j > i+1 {
				cmd := &simpleCmd{args: args[i+1 : j]}
				cmd.source = joinFields(cmd.args).text
				out = append(out, cmd)
			}
			i = j
		}
	}
	return out
}

// addCarried reads the command lines that sc's option values and variables carry
// (rsync -e CMD, git -c core.pager=CMD, GIT_SSH_COMMAND=CMD) as code sc hands to a shell,
// for each program on its way to the command it runs (sudo ssh -o ProxyCommand=CMD).
func (a *analysis) addCarried(sc *simpleCmd) error {
	reason, codes := carriedByAssignments(sc.assignWords)
	for _, step := range programChain(sc.args) {
		if reason != "" {
			break
		}
		var more []word
		more, reason = carriedCommands(step.name, step.args, step.assigns)
		codes = append(codes, more...)
	}
	return a.readAllCarried(sc, reason, codes)
}

// readAllCarried reads the command lines sc carries, or marks sc as hiding code when
// reason says they cannot be read.
func (a *analysis) readAllCarried(sc *simpleCmd, reason string, codes []word) error {
	if reason != "" {
		sc.hiddenCode = reason
		return nil
	}
	for _, code := range codes {
		if err := a.readCarried(sc, code); err != nil {
			return err
		}
	}
	return nil
}

// readCarried reads one carried command line; generated text cannot be read.
func (a *analysis) readCarried(sc *simpleCmd, code word) error {
	if code.dynamic {
		sc.hiddenCode = "the command " + code.text + " it carries is generated code, which cannot be checked"
		return nil
	}
	return a.readNested(sc, code.text)
}

func carriedByAssignments(ws []word) (reason string, codes []word) {
	codes, reason = carriedCommands("", nil, ws)
	return reason, codes
}

func joinFields(ws []word) word {
	parts := make([]string, len(ws))
	pats := make([]string, len(ws))
	dynamic := false
	for i, w := range ws {
		parts[i], pats[i] = w.text, w.pattern
		dynamic = dynamic || w.dynamic
	}
	return word{text: strings.Join(parts, " "), pattern: strings.Join(pats, " "), dynamic: dynamic}
}

// dashC returns the program of sh -c PROGRAM (options such as -e, -o pipefail and --norc
// may come first).
func dashC(args []word) (word, bool) {
	for i := 0; i < len(args); i++ {
		t := args[i].text
		switch {
		case t == "-o" || t == "+o" || t == "-O" || t == "+O":
			i++ // the option's value
		case strings.HasPrefix(t, "--"):
		case (strings.HasPrefix(t, "-") || strings.HasPrefix(t, "+")) && len(t) > 1:
			if strings.Contains(t, "c") {
				if i+1 < len(args) {
					return args[i+1], true
				}
				return word{}, false
			}
		default:
			return word{}, false // a script file
		}
	}
	return word{}, false
}

// markFetchedPipes marks the commands fed by a stage that downloads.
func (a *analysis) markFetchedPipes() {
	fetching := map[stage]bool{}
	for _, c := range a.out.cmds {
		if c.call == nil {
			continue
		}
		if name, _, _ := program(c.args); fetchers[name] {
			for _, s := range a.pipes[c.call] {
				fetching[s] = true
			}
		}
	}
	for _, c := range a.out.cmds {
		if c.call == nil {
			continue
		}
		for _, s := range a.pipes[c.call] {
			for i := 0; i < s.index; i++ {
				if fetching[stage{s.pipeline, i, s.count}] {
					c.fetchedIn = true
				}
			}
		}
	}
}

// xargsReplace returns the replace string xargs options set (-I R, -IR, -i, -iR,
// --replace, --replace=R), or "".
func xargsReplace(opts []word) string {
	repl := ""
	for i := 0; i < len(opts) && strings.HasPrefix(opts[i].text, "-") && opts[i].text != "-"; i++ {
		t := opts[i].text
		switch {
		case t == "--":
			return repl
		case t == "-I" && i+1 < len(opts):
			repl = opts[i+1].text
			i++
		case strings.HasPrefix(t, "-I"):
			repl = t[2:]
		case t == "-i" || t == "--replace":
			repl = "{}"
		case strings.HasPrefix(t, "-i"):
			repl = t[2:]
		case strings.HasPrefix(t, "--replace="):
			repl = strings.TrimPrefix(t, "--replace=")
		case len(t) == 2 && strings.Contains("nPdLsaE", t[1:]):
			i++ // the option's value
		}
	}
	return repl
}

// fromInput returns ws with every repl replaced by a placeholder for xargs' input.
func fromInput(ws []word, repl string) []word {
	out := make([]word, len(ws))
	for i, w := range ws {
		if strings.Contains(w.text, repl) {
			w = newWord(strings.ReplaceAll(w.text, repl, placeholder("{input}")))
		}
		out[i] = w
	}
	return out
}
