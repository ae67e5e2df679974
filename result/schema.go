package result

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/talkops/talkops/report/schema"
)

// MaxSize is the largest result.json Decode accepts. A real result is a few hundred KiB
// (transcripts live in their own file); the cap keeps a hostile artifact from exhausting
// memory in the privileged publishing job.
const MaxSize = 32 << 20

// ErrInvalid is wrapped by every error that says a result.json does not follow the schema.
var ErrInvalid = errors.New("invalid result.json")

// maxReported bounds how many schema violations an error lists.
const maxReported = 8

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.ResultJSON))
	if err != nil {
		return nil, fmt.Errorf("parse embedded result schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(schema.ResultURL, doc); err != nil {
		return nil, fmt.Errorf("load embedded result schema: %w", err)
	}
	s, err := c.Compile(schema.ResultURL)
	if err != nil {
		return nil, fmt.Errorf("compile embedded result schema: %w", err)
	}
	return s, nil
})

// Validate checks data against the embedded JSON Schema of result.json. The error wraps
// ErrInvalid and names each offending location as a JSON pointer with what would be valid,
// e.g. `/rubric/items/2/status: value must be one of "pass", "fail", "error", "skipped"`.
func Validate(data []byte) error {
	if len(data) > MaxSize {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalid, len(data), MaxSize)
	}
	s, err := compiled()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: not JSON: %w", ErrInvalid, err)
	}
	if obj, ok := inst.(map[string]any); ok {
		if v, ok := obj["schema"].(string); ok && v != Schema {
			return fmt.Errorf("%w: schema %q, want %q (written by another talkops version?)", ErrInvalid, v, Schema)
		}
	}
	err = s.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return fmt.Errorf("%w: %s", ErrInvalid, describe(ve))
}

// describe flattens a validation error into "pointer: message" pairs, one per leaf cause
// (the wrappers around them, such as "$ref failed", say less).
func describe(ve *jsonschema.ValidationError) string {
	var msgs []string
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		loc := "/" + strings.Join(e.InstanceLocation, "/")
		line := loc + ": " + e.ErrorKind.LocalizedString(printer)
		if !seen[line] {
			seen[line] = true
			msgs = append(msgs, line)
		}
	}
	walk(ve)
	extra := ""
	if len(msgs) > maxReported {
		extra = fmt.Sprintf("; and %d more", len(msgs)-maxReported)
		msgs = msgs[:maxReported]
	}
	return strings.Join(msgs, "; ") + extra
}

var printer = message.NewPrinter(language.English)

// Decode validates data as result.json and decodes it.
func Decode(data []byte) (*Result, error) {
	if err := Validate(data); err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &r, nil
}
