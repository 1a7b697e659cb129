package pipeline

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSize is a number of bytes. In configuration files it is written as a
// number with an optional unit, B, KiB, MiB or GiB, spelt exactly so: 512,
// 64KiB, 1MiB, 2GiB. KB, MB and GB are refused, as they mean powers of
// 1000 to some and of 1024 to others.
type ByteSize int64

// Byte size units.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

// String formats the size with the largest unit that divides it.
func (b ByteSize) String() string {
	switch {
	case b != 0 && b%GiB == 0:
		return strconv.FormatInt(int64(b/GiB), 10) + "GiB"
	case b != 0 && b%MiB == 0:
		return strconv.FormatInt(int64(b/MiB), 10) + "MiB"
	case b != 0 && b%KiB == 0:
		return strconv.FormatInt(int64(b/KiB), 10) + "KiB"
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalText implements encoding.TextMarshaler.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

var units = map[string]ByteSize{"": 1, "B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB}

// UnmarshalText parses "64MiB", "512KiB", "1048576" (see ByteSize). On
// error b is left as it was.
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:])
	mult, ok := units[unit]
	if !ok {
		return unitError(s, unit)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(num, "-") || err == nil && n > math.MaxInt64/int64(mult) {
		return fmt.Errorf("%q is more than 8EiB", s)
	}
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a size (examples: 512, 64KiB, 1MiB, 2GiB)", s)
	}
	*b = ByteSize(n) * mult
	return nil
}

func unitError(s, unit string) error {
	for u := range units {
		if u != "" && strings.EqualFold(u, unit) {
			return fmt.Errorf("%q: unit %q is written %s", s, unit, u)
		}
	}
	switch strings.ToLower(unit) {
	case "k", "kb":
		return fmt.Errorf("%q: %q is ambiguous (10^3 or 2^10 bytes): write KiB", s, unit)
	case "m", "mb":
		return fmt.Errorf("%q: %q is ambiguous (10^6 or 2^20 bytes): write MiB", s, unit)
	case "g", "gb":
		return fmt.Errorf("%q: %q is ambiguous (10^9 or 2^30 bytes): write GiB", s, unit)
	}
	return fmt.Errorf("%q: unknown unit %q (use B, KiB, MiB or GiB)", s, unit)
}
