// Package shopevents makes the shop events of the benchmarks: the shape
// of bench/compare's (bench/compare/internal/events), one event type in
// four a purchase, so that the stage and pipeline benchmarks of this
// module measure the record path on the data the comparison uses.
package shopevents

import (
	"encoding/json"
	"fmt"
)

// Event is one shop event, as its JSON value is written.
type Event struct {
	ID       int64   `json:"id"`
	TS       int64   `json:"ts"`
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

// Make returns event i, a pure function of i; events whose i%4 == 2 are
// purchases.
func Make(i int64) Event {
	h := uint64(i) * 0x9e3779b97f4a7c15
	return Event{
		ID: i, TS: 1764558000000000 + i*37, Type: [...]string{"view", "cart", "purchase", "search"}[i%4],
		User: fmt.Sprintf("u%d", h%2000), Session: fmt.Sprintf("s-%08x", uint32(h>>7)),
		Product: fmt.Sprintf("sku-%d", h>>20%50000), Category: [...]string{"books", "music", "games"}[i%3],
		Price: float64(99+(h>>36)%20000) / 100, Qty: 1 + int((h>>52)%5),
		Currency: [...]string{"EUR", "USD", "GBP", "SEK"}[i%4], Country: "DE", Device: "mobile",
	}
}

// Value is event i's JSON encoding (about 230 bytes).
func Value(i int64) []byte {
	v, err := json.Marshal(Make(i))
	if err != nil {
		panic(err) // a struct of strings and numbers always encodes
	}
	return v
}
