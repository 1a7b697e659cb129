package events

import (
	"encoding/json"
	"fmt"
	"testing"
)

func TestMakeKeepsOneInFour(t *testing.T) {
	for _, start := range []int64{0, 4, 1000, 999_996} {
		kept := 0
		types := map[string]int{}
		for i := start; i < start+4; i++ {
			e := Make(i, 0)
			types[e.Type]++
			if e.Type == Kept {
				kept++
			}
		}
		if kept != 1 || len(types) != 4 {
			t.Errorf("events %d..%d: types %v, want each of four types once", start, start+3, types)
		}
	}
}

func TestValueSizeAndDeterminism(t *testing.T) {
	minSize, maxSize := 1<<30, 0
	positions := map[int64]int{}
	for i := int64(0); i < 10_000; i++ {
		v := Value(Make(i, 1_764_547_200_000_000))
		minSize, maxSize = min(minSize, len(v)), max(maxSize, len(v))
		if string(v) != string(Value(Make(i, 1_764_547_200_000_000))) {
			t.Fatalf("event %d differs between two calls", i)
		}
		var e Event
		if err := json.Unmarshal(v, &e); err != nil || e.ID != i {
			t.Fatalf("event %d does not decode to itself: %v %+v", i, err, e)
		}
		if e.Type == Kept {
			positions[i%4]++
		}
	}
	if minSize < 150 || maxSize > 250 {
		t.Errorf("values are %d to %d bytes, want 150..250", minSize, maxSize)
	}
	for p := int64(0); p < 4; p++ {
		if positions[p] < 525 || positions[p] > 725 { // 625 expected
			t.Errorf("purchase at position %d of its group %d times in 2500 groups: not spread", p, positions[p])
		}
	}
}

// output is the reshaped record a correct pipeline writes for event i.
func output(t *testing.T, i int64) (key, value []byte) {
	t.Helper()
	o, ok := Expected(Make(i, 0))
	if !ok {
		t.Fatalf("event %d is not kept", i)
	}
	v, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(o.User), v
}

func keptIDs(n int64) []int64 {
	var ids []int64
	for i := int64(0); i < n; i++ {
		if Make(i, 0).Type == Kept {
			ids = append(ids, i)
		}
	}
	return ids
}

func TestChecker(t *testing.T) {
	const n = 400
	kept := keptIDs(n)
	if len(kept) != n/4 {
		t.Fatalf("%d of %d events kept", len(kept), n)
	}
	var dropped int64 // an event the filter must drop
	for Make(dropped, 0).Type == Kept {
		dropped++
	}
	tests := []struct {
		name  string
		write func(t *testing.T, add func(key, value []byte))
		want  Correctness
	}{
		{"exact", func(t *testing.T, add func(k, v []byte)) {
			for _, id := range kept {
				add(output(t, id))
			}
		}, Correctness{Expected: 100, Records: 100, Unique: 100}},
		{"a duplicate and three missing", func(t *testing.T, add func(k, v []byte)) {
			for _, id := range kept[3:] {
				add(output(t, id))
			}
			add(output(t, kept[50]))
			add(output(t, kept[50]))
		}, Correctness{Expected: 100, Records: 99, Unique: 97, Duplicates: 2, Missing: 3}},
		{"wrong key, dropped type, garbage", func(t *testing.T, add func(k, v []byte)) {
			for _, id := range kept[1:] {
				add(output(t, id))
			}
			_, v := output(t, kept[0])
			add([]byte("someone-else"), v)
			add([]byte("u1"), fmt.Appendf(nil, `{"order":%d}`, dropped))
			add(nil, []byte("not json"))
			add(nil, []byte(`{"order":123456789}`))
		}, Correctness{Expected: 100, Records: 103, Unique: 99, Missing: 1, Wrong: 4}},
		{"amount off", func(t *testing.T, add func(k, v []byte)) {
			o, _ := Expected(Make(kept[0], 0))
			o.Amount += 0.01
			v, _ := json.Marshal(o)
			add([]byte(o.User), v)
		}, Correctness{Expected: 100, Records: 1, Missing: 100, Wrong: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecker(n)
			tc.write(t, c.Add)
			got := c.Result()
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			if got.Exact() != (tc.name == "exact") {
				t.Errorf("Exact() = %v", got.Exact())
			}
		})
	}
}
