package offsets

import (
	"fmt"
	"strconv"

	"github.com/fencepost-dev/fencepost/offsetstore"
)

// Position is where a partition is: an absolute, non-negative offset (the
// next offset to fetch), with the epoch and generation it belongs to.
//
// A Position cannot be missing or logical: the only ways to get one are
// [NewPosition], which rejects negative offsets, and [Position.Advance].
// The zero Position is offset 0 of epoch 0, an epoch no partition ever
// has, so a zero Position is always stale.
type Position struct {
	offset int64
	epoch  offsetstore.Epoch
	gen    Generation
}

// NewPosition returns the position at offset in the given epoch and
// generation. It fails with [offsetstore.ErrNegativeOffset] if offset < 0: logical
// offsets such as -1 (latest) or -2 (earliest) are [offsetstore.StartRequest]s, not
// positions.
func NewPosition(offset int64, epoch offsetstore.Epoch, gen Generation) (Position, error) {
	if offset < 0 {
		return Position{}, fmt.Errorf("%w: %d", offsetstore.ErrNegativeOffset, offset)
	}
	return Position{offset: offset, epoch: epoch, gen: gen}, nil
}

// Offset is the next offset to fetch, always >= 0.
func (p Position) Offset() int64 { return p.offset }

// Epoch is the partition epoch this position belongs to.
func (p Position) Epoch() offsetstore.Epoch { return p.epoch }

// Generation is the group generation this position belongs to.
func (p Position) Generation() Generation { return p.gen }

// Advance returns the position moved forward to offset, in the same epoch
// and generation. Positions never move backwards within an epoch: an
// offset below the current one fails with [ErrBackwards] and returns p
// unchanged.
func (p Position) Advance(offset int64) (Position, error) {
	if offset < p.offset {
		return p, fmt.Errorf("%w: %d -> %d", ErrBackwards, p.offset, offset)
	}
	p.offset = offset
	return p, nil
}

// String formats the position for logs, for example "40@e3/g7".
func (p Position) String() string {
	return strconv.FormatInt(p.offset, 10) + "@e" + strconv.FormatUint(uint64(p.epoch), 10) +
		"/g" + strconv.FormatInt(int64(p.gen), 10)
}
