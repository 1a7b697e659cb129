package events

// Correctness is an output topic checked against the expected outputs of
// the input events.
type Correctness struct {
	Expected   int // outputs the input implies
	Records    int // records in the output topic
	Unique     int // distinct expected orders among them
	Duplicates int // records of an order seen before (Records - Unique - Wrong)
	Missing    int // expected orders not in the output
	Wrong      int // records that are not an expected output: undecodable, an order not kept, a wrong key or field
}

// Exact reports whether the output holds each expected record once and
// nothing else.
func (c Correctness) Exact() bool {
	return c.Records == c.Expected && c.Unique == c.Expected && c.Duplicates == 0 && c.Missing == 0 && c.Wrong == 0
}

// Checker counts output records against the outputs events 0..n-1
// imply. Add each output record once; Result summarises.
type Checker struct {
	n     int64
	want  int
	seen  []uint8 // per event id: 0 not seen, 1 seen
	wrong int
	total int
}

// NewChecker returns a checker for the outputs of events 0..n-1.
func NewChecker(n int64) *Checker {
	c := &Checker{n: n, seen: make([]uint8, n)}
	for i := int64(0); i < n; i++ {
		if _, ok := Expected(Make(i, 0)); ok {
			c.want++
		}
	}
	return c
}

// Add checks one output record (its key and value).
func (c *Checker) Add(key, value []byte) {
	c.total++
	o, err := ParseOutput(value)
	if err != nil || o.Order < 0 || o.Order >= c.n {
		c.wrong++
		return
	}
	want, ok := Expected(Make(o.Order, 0))
	if !ok || !sameOutput(o, want) || string(key) != want.User {
		c.wrong++
		return
	}
	if c.seen[o.Order] < 255 {
		c.seen[o.Order]++
	}
}

// Result is the count so far.
func (c *Checker) Result() Correctness {
	r := Correctness{Expected: c.want, Records: c.total, Wrong: c.wrong}
	for i := int64(0); i < c.n; i++ {
		if c.seen[i] > 0 {
			r.Unique++
		}
	}
	r.Duplicates = r.Records - r.Unique - r.Wrong
	r.Missing = r.Expected - r.Unique
	return r
}
