package events

import (
	"encoding/json"
	"fmt"
	"math"
)

// Output is the reshaped value both pipelines write for a purchase; its
// key is the user. Amount is price times quantity.
type Output struct {
	Order    int64   `json:"order"`
	User     string  `json:"user"`
	Product  string  `json:"product"`
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	TS       int64   `json:"ts"`
}

// Expected is what the pipeline must write for event e, and whether it
// must write anything.
func Expected(e Event) (Output, bool) {
	if e.Type != Kept {
		return Output{}, false
	}
	return Output{Order: e.ID, User: e.User, Product: e.Product, Amount: e.Price * float64(e.Qty),
		Currency: e.Currency, TS: e.TS}, true
}

// ParseOutput decodes an output record's value.
func ParseOutput(value []byte) (Output, error) {
	var o Output
	if err := json.Unmarshal(value, &o); err != nil {
		return Output{}, fmt.Errorf("output value %.80q: %w", value, err)
	}
	return o, nil
}

// sameOutput compares two outputs; amounts may differ in the last bits of
// the float's text (the pipelines format numbers their own way), and the
// timestamp is not compared (a latency run writes its own).
func sameOutput(a, b Output) bool {
	return a.Order == b.Order && a.User == b.User && a.Product == b.Product && a.Currency == b.Currency &&
		math.Abs(a.Amount-b.Amount) <= 1e-9*math.Max(1, math.Abs(a.Amount))
}
