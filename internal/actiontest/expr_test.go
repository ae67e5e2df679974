package actiontest

import (
	"testing"
)

func TestCondition(t *testing.T) {
	t.Parallel()
	ctx := map[string]value{
		"inputs.sandbox":  "bwrap",
		"inputs.empty":    "",
		"inputs.advisory": "false",
		"runner.os":       "Linux",
	}
	lk := func(path []string) (value, bool) {
		key := path[0]
		for _, p := range path[1:] {
			key += "." + p
		}
		v, ok := ctx[key]
		return v, ok
	}
	tests := []struct {
		expr string
		st   status
		want bool
	}{
		{"", status{}, true},
		{"", status{failed: true}, false},
		{"", status{cancelled: true}, false},
		{"always()", status{cancelled: true}, true},
		{"${{ always() }}", status{failed: true}, true},
		{"failure()", status{failed: true}, true},
		{"failure()", status{failed: true, cancelled: true}, false},
		{"cancelled()", status{cancelled: true}, true},
		{"!cancelled()", status{failed: true}, true},
		{"inputs.sandbox == 'bwrap' && runner.os == 'Linux'", status{}, true},
		{"inputs.sandbox == 'BWRAP'", status{}, true}, // strings compare case-insensitively
		{"inputs.sandbox == 'bwrap' && runner.os == 'Linux'", status{failed: true}, false},
		{"inputs.sandbox != 'bwrap'", status{}, false},
		{"inputs.empty", status{}, false},
		{"inputs.advisory", status{}, true}, // the string "false" is truthy, as on GitHub
		{"inputs.empty == ''", status{}, true},
		{"!(inputs.sandbox == 'local') || inputs.empty", status{}, true},
		{"'it''s' == 'IT''S'", status{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			got, err := condition(tt.expr, lk, tt.st)
			if err != nil {
				t.Fatalf("condition(%q) error: %v", tt.expr, err)
			}
			if got != tt.want {
				t.Errorf("condition(%q, %+v) = %v, want %v", tt.expr, tt.st, got, tt.want)
			}
		})
	}
}

func TestExpressionErrors(t *testing.T) {
	t.Parallel()
	lk := func(path []string) (value, bool) { return nil, path[0] == "inputs" }
	for _, expr := range []string{
		"secrets.token",           // unknown context
		"contains(inputs.x, 'a')", // unsupported function
		"inputs.x == ",
		"'unterminated",
		"(inputs.x",
		"inputs.x > 1",
	} {
		t.Run(expr, func(t *testing.T) {
			t.Parallel()
			if v, err := eval(expr, lk, status{}); err == nil {
				t.Errorf("eval(%q) = %v, want an error", expr, v)
			}
		})
	}
}

func TestInterpolate(t *testing.T) {
	t.Parallel()
	lk := func(path []string) (value, bool) {
		if path[0] == "inputs" && path[1] == "n" {
			return "3", true
		}
		return nil, path[0] == "steps"
	}
	got, err := interpolate("a ${{ inputs.n }} b ${{ steps.x.outputs.y }}c ${{ inputs.n == 3 }}", lk, status{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "a 3 b c true"; got != want {
		t.Errorf("interpolate = %q, want %q", got, want)
	}
}
