package fakekit

// Ledger is a fake's record of the sandboxes it created and deleted.
type Ledger struct {
	Created, Deleted int
	// Alive lists the ids of sandboxes not deleted, in creation order.
	Alive []string
}

// Boxes holds a fake's sandboxes by id, in creation order, and counts creations and
// deletions for its Ledger. It is not safe for concurrent use: the fake's own lock
// guards it together with the rest of its state. The zero value is ready.
type Boxes[B any] struct {
	byID    map[string]B
	order   []string
	deleted int
}

// Add records a new sandbox.
func (bs *Boxes[B]) Add(id string, b B) {
	if bs.byID == nil {
		bs.byID = map[string]B{}
	}
	bs.byID[id] = b
	bs.order = append(bs.order, id)
}

// Get returns the live sandbox id.
func (bs *Boxes[B]) Get(id string) (B, bool) {
	b, ok := bs.byID[id]
	return b, ok
}

// Delete forgets the live sandbox id and counts the deletion; it reports whether there
// was one.
func (bs *Boxes[B]) Delete(id string) bool {
	if _, ok := bs.byID[id]; !ok {
		return false
	}
	delete(bs.byID, id)
	bs.deleted++
	return true
}

// Live returns the sandboxes not deleted, in creation order.
func (bs *Boxes[B]) Live() []B {
	var out []B
	for _, id := range bs.order {
		if b, ok := bs.byID[id]; ok {
			out = append(out, b)
		}
	}
	return out
}

// Ledger returns the counts and the ids still alive.
func (bs *Boxes[B]) Ledger() Ledger {
	l := Ledger{Created: len(bs.order), Deleted: bs.deleted}
	for _, id := range bs.order {
		if _, ok := bs.byID[id]; ok {
			l.Alive = append(l.Alive, id)
		}
	}
	return l
}
