package tomlpos

import (
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestBuild(t *testing.T) {
	t.Parallel()
	doc := `top = 1
a.b = "x"
list = [ "p",
  [2] ]
inline = { k = true }

[[item]]
id = "one"
[[item]]
id = "two"
[item.sub]
deep = 3
`
	var decoded map[string]any
	if err := toml.Unmarshal([]byte(doc), &decoded); err != nil {
		t.Fatal(err)
	}
	ix, err := Build([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		m    map[string]Pos
		path string
		want Pos
		ok   bool
	}{
		{"key", ix.Key, Join("top"), Pos{1, 1}, true},
		{"value", ix.Value, Join("top"), Pos{1, 7}, true},
		{"dotted key's own part", ix.Key, Join("a", "b"), Pos{2, 3}, true},
		{"dotted key's start", ix.Start, Join("a", "b"), Pos{2, 1}, true},
		{"dotted key's prefix starts there too", ix.Start, Join("a"), Pos{2, 1}, true},
		{"array value after =", ix.Value, Join("list"), Pos{3, 8}, true},
		{"array has no range", ix.Raw, Join("list"), Pos{}, false},
		{"array element", ix.Value, Join("list", Elem(0)), Pos{3, 10}, true},
		{"array element as key", ix.Key, Join("list", Elem(0)), Pos{3, 10}, true},
		{"nested array element without a range takes its array's", ix.Value, Join("list", Elem(1)), Pos{3, 8}, true},
		{"inline table key", ix.Key, Join("inline", "k"), Pos{5, 12}, true},
		{"inline table value", ix.Raw, Join("inline", "k"), Pos{5, 16}, true},
		{"array of tables", ix.Key, Join("item"), Pos{7, 3}, true},
		{"second element", ix.Key, Join("item", Elem(1)), Pos{9, 3}, true},
		{"second element's key", ix.Key, Join("item", Elem(1), "id"), Pos{10, 1}, true},
		{"header after [[item]] descends into the last element", ix.Key, Join("item", Elem(1), "sub"), Pos{11, 7}, true},
		{"header start", ix.Start, Join("item", Elem(1), "sub"), Pos{11, 2}, true},
		{"key below it", ix.Value, Join("item", Elem(1), "sub", "deep"), Pos{12, 8}, true},
		{"no such path", ix.Key, Join("nope"), Pos{}, false},
	}
	for _, tt := range tests {
		got, ok := tt.m[tt.path]
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %q = %v, %v; want %v, %v", tt.name, tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParent(t *testing.T) {
	t.Parallel()
	p, ok := Parent(Join("a", Elem(0), "b"))
	if p != Join("a", Elem(0)) || !ok {
		t.Errorf("Parent = %q, %v", p, ok)
	}
	if _, ok := Parent("a"); ok {
		t.Error("Parent(top-level) reported a parent")
	}
}
