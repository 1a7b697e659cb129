// Package events generates the shop events of the pipeline benchmarks and
// checks a pipeline's output against what the generator implies.
//
// Event i of a run is a pure function of i: the loader writes events
// 0..n-1 to the input topic, and the expected output (one record per
// purchase, reshaped and keyed by user) is computed from the same
// function, so no copy of the input is kept.
package events

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Kept is the event type the pipelines keep. In every run of four
// consecutive events exactly one has this type.
const Kept = "purchase"

var (
	others     = [3]string{"view", "cart", "search"}
	categories = [...]string{"books", "music", "games", "garden", "kitchen", "toys", "sports", "beauty"}
	currencies = [...]string{"EUR", "USD", "GBP", "SEK"}
	countries  = [...]string{"DE", "FR", "US", "GB", "SE", "NL", "ES", "IT", "PL"}
	devices    = [...]string{"mobile", "desktop", "tablet", "app"}
)

// Users is how many distinct users the events belong to.
const Users = 2000

// Event is one input record's value.
type Event struct {
	ID       int64   `json:"id"`
	TS       int64   `json:"ts"` // Unix microseconds when it was produced
	Type     string  `json:"type"`
	User     string  `json:"user"`
	Session  string  `json:"session"`
	Product  string  `json:"product"`
	Category string  `json:"category"`
	Price    float64 `json:"price"`
	Qty      int     `json:"qty"`
	Currency string  `json:"currency"`
	Country  string  `json:"country"`
	Device   string  `json:"device"`
}

// mix is splitmix64's finalizer: a well-spread hash of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Make returns event i with timestamp ts (Unix microseconds). Which of
// the four events i&^3..i|3 is the purchase is chosen by a hash of the
// group, so purchases are exactly a quarter of any multiple of four
// events but do not follow a fixed stride.
func Make(i int64, ts int64) Event {
	h := mix(uint64(i))
	group := mix(uint64(i/4) ^ 0x5eed)
	pos := int64(group % 4)
	typ := Kept
	if d := i % 4; d != pos {
		// The three other slots take the three other types, in an
		// order also chosen by the group's hash.
		k := (d - pos + 4) % 4 // 1..3
		typ = others[(int64(group>>8)+k)%3]
	}
	user := int64(h % Users)
	return Event{
		ID:       i,
		TS:       ts,
		Type:     typ,
		User:     "u" + strconv.FormatInt(user, 10),
		Session:  fmt.Sprintf("s-%08x", uint32(mix(uint64(user)<<20|uint64(i/64)))),
		Product:  "sku-" + strconv.FormatUint(h>>20%50000, 10),
		Category: categories[(h>>8)%uint64(len(categories))],
		Price:    float64(99+(h>>36)%20000) / 100,
		Qty:      1 + int((h>>52)%5),
		Currency: currencies[(h>>12)%uint64(len(currencies))],
		Country:  countries[(h>>16)%uint64(len(countries))],
		Device:   devices[(h>>24)%uint64(len(devices))],
	}
}

// Value is an event's JSON encoding, the record value the loader writes.
func Value(e Event) []byte {
	b, err := json.Marshal(e)
	if err != nil { // a struct of strings and numbers always encodes
		panic(err)
	}
	return b
}

// Key is the input record's key: the event's user.
func Key(e Event) []byte { return []byte(e.User) }
