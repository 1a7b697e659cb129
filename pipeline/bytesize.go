package pipeline

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a number of bytes. In configuration files it is written as a
// number with an optional unit: 512, 64KiB, 1MiB, 2GiB (or KB, MB, GB,
// which mean the same powers of 1024 here).
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

// UnmarshalText parses "64MiB", "512KB", "1048576".
func (b *ByteSize) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') {
		i--
	}
	num, unit := s[:i], strings.ToLower(strings.TrimSpace(s[i:]))
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a size (examples: 512, 64KiB, 1MiB, 2GiB)", s)
	}
	mult := ByteSize(1)
	switch unit {
	case "", "b":
	case "k", "kb", "kib":
		mult = KiB
	case "m", "mb", "mib":
		mult = MiB
	case "g", "gb", "gib":
		mult = GiB
	default:
		return fmt.Errorf("%q: unknown unit %q (use B, KiB, MiB or GiB)", s, unit)
	}
	*b = ByteSize(n) * mult
	return nil
}
