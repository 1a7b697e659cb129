package builtin_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/fencepost-dev/fencepost/stages"
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestFilterMapModel runs random records (arbitrary bytes, random
// headers, several partitions) through filter and map and compares the
// outcome with a model written in plain Go.
func TestFilterMapModel(t *testing.T) {
	env := stagetest.Env(nil, nil)
	f := build(t, "filter", stages.Options{"if": `offset % 3 != 0 || headers["keep"] == "y"`}, env)
	m := build(t, "map", stages.Options{
		"value":   `upper(value)`,
		"key":     `topic + "-" + string(partition)`,
		"headers": map[string]string{"o": `offset * 2`, "keep": `nil`},
	}, env)
	rapid.Check(t, func(t *rapid.T) {
		var in []stages.Record
		next := map[int32]int64{}
		n := rapid.IntRange(0, 40).Draw(t, "n")
		for range n {
			p := rapid.Int32Range(0, 2).Draw(t, "partition")
			next[p] += rapid.Int64Range(1, 3).Draw(t, "gap")
			r := stages.Record{Topic: "t", Partition: p, Offset: next[p], Value: rapid.SliceOf(rapid.Byte()).Draw(t, "value")}
			for _, h := range rapid.SliceOfN(rapid.SampledFrom([]string{"keep", "x"}), 0, 3).Draw(t, "headers") {
				r.Headers = append(r.Headers, stages.Header{Key: h, Value: []byte(rapid.SampledFrom([]string{"y", "n"}).Draw(t, "hv"))})
			}
			in = append(in, r)
		}

		res := stagetest.Run(t, in, stagetest.NamedStage{Name: "filter", Stage: f}, stagetest.NamedStage{Name: "map", Stage: m})

		// model: partitions in order, records in offset order
		var want []string
		marks := map[stagetest.Partition]int64{}
		for p := int32(0); p <= 2; p++ {
			for _, r := range in {
				if r.Partition != p {
					continue
				}
				marks[stagetest.Partition{Topic: "t", Partition: p}] = r.Offset + 1
				keep := r.Offset%3 != 0
				if v, ok := r.Header("keep"); ok && string(v) == "y" {
					keep = true
				}
				if !keep {
					continue
				}
				var hs []string
				for _, h := range r.Headers {
					if h.Key != "keep" {
						hs = append(hs, h.Key+"="+string(h.Value))
					}
				}
				hs = append(hs, "keep=<nil>", "o="+strconv.FormatInt(2*r.Offset, 10))
				want = append(want, strings.Join([]string{"t-" + strconv.Itoa(int(p)),
					strings.ToUpper(string(r.Value)), strconv.FormatInt(r.Offset, 10), strings.Join(hs, ",")}, "|"))
			}
		}
		var got []string
		for _, r := range res.Outputs {
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+str(h.Value))
			}
			got = append(got, strings.Join([]string{string(r.Key), string(r.Value), strconv.FormatInt(r.Offset, 10), strings.Join(hs, ",")}, "|"))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("outputs\n%q\nwant\n%q", got, want)
		}
		if len(res.DeadLetters) != 0 || len(res.Stopped) != 0 || len(res.Mutated) != 0 {
			t.Fatalf("dead letters %v, stopped %v, mutated %v", res.DeadLetters, res.Stopped, res.Mutated)
		}
		if len(res.Marks) != len(marks) {
			t.Fatalf("marks %v, want %v", res.Marks, marks)
		}
		for tp, o := range marks {
			if res.Marks[tp] != o {
				t.Fatalf("marks %v, want %v", res.Marks, marks)
			}
		}
	})
}
