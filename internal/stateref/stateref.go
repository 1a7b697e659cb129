// Package stateref carries a Process call's stores in its context, from
// the process step (which knows the call's partition) to stages.StoreFor
// (which knows the stage's store name), without either importing the
// other's packages.
package stateref

import (
	"context"
	"errors"
)

// Lookup finds a store by name for one call; it returns a stages.Store.
type Lookup func(name string) (any, error)

type key struct{}

// ErrNoState: the call's context carries no stores (the pipeline runs
// without state, or the stage is called outside a pipeline).
var ErrNoState = errors.New("the pipeline has no state for this call")

// With returns ctx carrying the call's store lookup.
func With(ctx context.Context, l Lookup) context.Context {
	return context.WithValue(ctx, key{}, l)
}

// Find returns the store named name of the call whose context is ctx.
func Find(ctx context.Context, name string) (any, error) {
	l, _ := ctx.Value(key{}).(Lookup)
	if l == nil {
		return nil, ErrNoState
	}
	return l(name)
}

// Journal lets the process chain take back what a failed stage call
// wrote: the chain calls Begin before a stage call, then Rollback when
// the call failed (its records are retried or dead-lettered one by one,
// and must not count twice) or Keep when it succeeded.
type Journal interface {
	Begin()
	Rollback()
	Keep()
}

type journalKey struct{}

// WithJournal returns ctx carrying the call's journal.
func WithJournal(ctx context.Context, j Journal) context.Context {
	return context.WithValue(ctx, journalKey{}, j)
}

// JournalOf returns the journal of the call whose context is ctx, or nil.
func JournalOf(ctx context.Context) Journal {
	j, _ := ctx.Value(journalKey{}).(Journal)
	return j
}
