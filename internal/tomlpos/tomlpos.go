// Package tomlpos records where every key and value of a TOML document is written, so
// that the config and rubric decoders can name file:line:col in their errors. go-toml's
// decoder validates the document into plain maps; this walks go-toml's parser output over
// the same bytes.
package tomlpos

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// Sep joins key parts in a path; TOML keys may contain dots, so a dot cannot be the
// separator.
const Sep = "\x1f"

// Pos is a 1-based position in a document; the zero Pos means unknown.
type Pos struct {
	Line, Col int
}

// Join builds the path of a key from its parts (an array element's part is Elem(i)).
func Join(parts ...string) string { return strings.Join(parts, Sep) }

// Elem is the path part of element i of an array or array of tables.
func Elem(i int) string { return "#" + strconv.Itoa(i) }

// Parent returns the path one part up, and false for a top-level path.
func Parent(path string) (string, bool) {
	i := strings.LastIndex(path, Sep)
	if i < 0 {
		return "", false
	}
	return path[:i], true
}

// Index holds the positions of one document, by path. Each map keeps the first position
// recorded for a path.
type Index struct {
	// Key is where the path's own key part is written: its part of a table header or
	// dotted key; for an array element, its value.
	Key map[string]Pos
	// Start is where the table header or dotted key naming the path begins (for a dotted
	// key a.b.c, all three paths start at "a"). Array elements have none.
	Start map[string]Pos
	// Value is where the value begins: the parser's range, or for an array (which the
	// parser gives no range) the first byte after "=". An element without a range of its
	// own takes its array's position.
	Value map[string]Pos
	// Raw is the value's position where the parser gives it a range, and nothing else.
	Raw map[string]Pos
}

// Build indexes data, which go-toml has already decoded without error.
func Build(data []byte) (*Index, error) {
	x := &indexer{data: data, starts: lineStarts(data), ix: &Index{
		Key: map[string]Pos{}, Start: map[string]Pos{}, Value: map[string]Pos{}, Raw: map[string]Pos{},
	}}
	var p unstable.Parser
	p.Reset(data)
	var table []string
	arrays := map[string]int{} // array-of-tables path → elements so far
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = x.header(e, arrays)
		case unstable.KeyValue:
			x.keyValue(table, e)
		}
	}
	if err := p.Error(); err != nil {
		// Unreachable after a successful Unmarshal of the same bytes; kept so a parser
		// difference surfaces as an error instead of missing positions.
		return x.ix, fmt.Errorf("index positions: %w", err)
	}
	return x.ix, nil
}

// lineStarts returns the offset of each line's first byte.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, b := range data {
		if b == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

type indexer struct {
	data   []byte
	starts []int // offset of each line's first byte
	ix     *Index
}

func (x *indexer) at(r unstable.Range) Pos {
	off := int(r.Offset)
	line := sort.Search(len(x.starts), func(i int) bool { return x.starts[i] > off })
	return Pos{Line: line, Col: off - x.starts[line-1] + 1}
}

func set(m map[string]Pos, path string, p Pos) {
	if _, ok := m[path]; !ok {
		m[path] = p
	}
}

// keyPart is one part of a table header or dotted key.
type keyPart struct {
	name string
	at   Pos
	end  int // offset just past it
}

func (x *indexer) keyParts(it unstable.Iterator) []keyPart {
	var parts []keyPart
	for it.Next() {
		n := it.Node()
		parts = append(parts, keyPart{name: string(n.Data), at: x.at(n.Raw), end: int(n.Raw.Offset + n.Raw.Length)})
	}
	return parts
}

// header records a [table] or [[array]] header and returns the table's resolved path:
// a part naming an array of tables descends into its last element (TOML's rule for
// [a.b] after [[a]]). Each part is recorded at its own position, so an error about
// [sandboxes.providers.vercel] can point at "vercel".
func (x *indexer) header(e *unstable.Node, arrays map[string]int) []string {
	parts := x.keyParts(e.Key())
	if len(parts) == 0 {
		return nil
	}
	var resolved []string
	for i, part := range parts {
		resolved = append(resolved, part.name)
		path := Join(resolved...)
		switch {
		case i == len(parts)-1 && e.Kind == unstable.ArrayTable:
			set(x.ix.Key, path, part.at)
			set(x.ix.Start, path, parts[0].at)
			resolved = append(resolved, Elem(arrays[path]))
			arrays[path]++
		case arrays[path] > 0:
			resolved = append(resolved, Elem(arrays[path]-1))
		}
		set(x.ix.Key, Join(resolved...), part.at)
	}
	set(x.ix.Start, Join(resolved...), parts[0].at)
	return resolved
}

func (x *indexer) keyValue(table []string, kv *unstable.Node) {
	path := slices.Clone(table)
	parts := x.keyParts(kv.Key())
	end := 0
	for _, part := range parts {
		path = append(path, part.name)
		set(x.ix.Key, Join(path...), part.at)
		set(x.ix.Start, Join(path...), parts[0].at)
		end = part.end
	}
	// The value starts after the last key part, the '=' and the blanks around it. The
	// parser gives arrays no range, so this is the one reliable place to find it.
	valAt := end
	for valAt < len(x.data) && (x.data[valAt] == ' ' || x.data[valAt] == '\t' || x.data[valAt] == '=') {
		valAt++
	}
	x.value(path, kv.Value(), x.at(unstable.Range{Offset: uint32(valAt)}))
}

// value records v's position: its own range when the parser gives one, else where.
func (x *indexer) value(path []string, v *unstable.Node, where Pos) {
	p := where
	if v.Raw.Length > 0 {
		set(x.ix.Raw, Join(path...), x.at(v.Raw))
		if v.Kind != unstable.Array {
			p = x.at(v.Raw)
		}
	}
	set(x.ix.Value, Join(path...), p)
	switch v.Kind {
	case unstable.Array:
		i := 0
		for it := v.Children(); it.Next(); {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			elem := append(slices.Clone(path), Elem(i))
			x.value(elem, c, p)
			set(x.ix.Key, Join(elem...), x.ix.Value[Join(elem...)])
			i++
		}
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				x.keyValue(path, c)
			}
		}
	}
}
