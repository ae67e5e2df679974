package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/talkops/talkops/internal/editdist"
)

// Error is a configuration mistake the user can fix: a bad key, value or type in a config
// file, a bad environment variable or flag value, or a combination of settings that does
// not make sense. Callers map it to the usage exit code (2): nothing has been provisioned.
//
// A file error carries File and Line (and usually Column); an environment or flag error
// carries Source ("env TALKOPS_TIMEOUT", "flag --sandbox") instead.
type Error struct {
	// File is the config file as shown to the user: relative to the working directory
	// when it lies below it, "~/.talkops/config.toml" for the user file, else absolute.
	File string
	// Line and Column are 1-based positions in File; 0 when unknown.
	Line, Column int
	// Source names where a value that is not from a file came from: "env X", "flag --y".
	Source string
	// Key is the dotted config key concerned ("sandboxes.default"), if any.
	Key string
	// Msg says what is wrong, without the location and without the choices.
	Msg string
	// Valid lists the accepted choices when there is a fixed set; ValidWhat names them
	// ("keys", "values", "providers", "sections").
	Valid     []string
	ValidWhat string
	// Err is the underlying error, if any (a *toml.DecodeError, an *fs.PathError, ...).
	Err error
}

// Error renders the error as "file:line:col: msg (valid keys: a, b)" or
// "env TALKOPS_X: msg (valid values: a, b)".
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "":
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
			if e.Column > 0 {
				b.WriteString(":" + strconv.Itoa(e.Column))
			}
		}
		b.WriteString(": ")
	case e.Source != "":
		b.WriteString(e.Source + ": ")
	}
	b.WriteString(e.Msg)
	if len(e.Valid) > 0 {
		what := e.ValidWhat
		if what == "" {
			what = "values"
		}
		b.WriteString(" (valid " + what + ": " + strings.Join(e.Valid, ", ") + ")")
	}
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// valueError is what a value parser reports; the caller adds the location.
type valueError struct {
	msg       string
	valid     []string
	validWhat string
}

func (e *valueError) Error() string { return e.msg }

func badValue(valid []string, validWhat, format string, args ...any) *valueError {
	return &valueError{msg: fmt.Sprintf(format, args...), valid: valid, validWhat: validWhat}
}

// Suggest returns the entry of valid closest to name when it is a likely typo of it (at
// most two edits, and fewer edits than half the name), or "".
func Suggest(name string, valid []string) string {
	best, bestDist := "", 3
	for _, v := range valid {
		if d := editdist.Distance(strings.ToLower(name), v); d < bestDist && 2*d < len(v) {
			best, bestDist = v, d
		}
	}
	return best
}
