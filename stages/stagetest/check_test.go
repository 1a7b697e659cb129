package stagetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/fencepost-dev/fencepost/stages"
)

// The checker is the harness's own oracle: these tests feed it the calls
// a broken pipeline would make and check it reports them.
func TestCheckerFindsBrokenPromises(t *testing.T) {
	tp := Partition{Topic: "t"}
	rec := func(off int64, key string) stages.Record {
		return stages.Record{Topic: "t", Offset: off, Key: []byte(key)}
	}
	two := []NamedStage{{Name: "first"}, {Name: "second"}}
	tests := []struct {
		name string
		run  func(c *checker)
		want string // a substring of the first violation; "" for none
	}{
		{name: "a mark passes records the second stage never got", run: func(c *checker) {
			// the first stage passes 0 and 1 and fails 2; the second
			// stage never sees 0 and 1, yet the mark is 2
			c.called(1, []stages.Record{rec(0, ""), rec(1, ""), rec(2, "")}, nil, errors.New("batch failed"))
			c.called(1, []stages.Record{rec(0, "")}, []stages.Record{rec(0, "")}, nil)
			c.called(1, []stages.Record{rec(1, "")}, []stages.Record{rec(1, "")}, nil)
			c.checkMark(tp, 2)
		}, want: `passes the record at offset 0, but stage "second" finished 0`},
		{name: "every record before the mark finished", run: func(c *checker) {
			c.called(1, []stages.Record{rec(0, ""), rec(1, "")}, []stages.Record{rec(0, ""), rec(1, "")}, nil)
			c.called(2, []stages.Record{rec(0, ""), rec(1, "")}, nil, nil)
			c.checkMark(tp, 2)
		}},
		{name: "a record emitted twice must be finished twice", run: func(c *checker) {
			c.called(1, []stages.Record{rec(0, "")}, []stages.Record{rec(0, ""), rec(0, "")}, nil)
			c.called(2, []stages.Record{rec(0, "")}, []stages.Record{rec(0, "")}, nil)
			c.checkMark(tp, 1)
		}, want: `finished 1 of the 2 record(s) it was handed for it, and the record was not dead-lettered`},
		{name: "one dead letter of the source stands for every derived record that failed", run: func(c *checker) {
			c.called(1, []stages.Record{rec(0, "")}, []stages.Record{rec(0, ""), rec(0, "")}, nil)
			dl := rec(0, "")
			dl.Headers = []stages.Header{{Key: stages.HeaderErrorStage, Value: []byte("second")}, {Key: stages.HeaderSourceOffset, Value: []byte("0")}}
			c.deadLettered(tp, dl)
			c.checkMark(tp, 1)
		}},
		{name: "a dead letter finishes a record", run: func(c *checker) {
			c.called(1, []stages.Record{rec(0, "")}, []stages.Record{rec(0, "")}, nil)
			dl := rec(0, "")
			dl.Headers = []stages.Header{{Key: stages.HeaderErrorStage, Value: []byte("second")}, {Key: stages.HeaderSourceOffset, Value: []byte("0")}}
			c.deadLettered(tp, dl)
			c.checkMark(tp, 1)
		}},
		{name: "a filtered record is finished", run: func(c *checker) {
			c.called(1, []stages.Record{rec(0, ""), rec(1, "")}, []stages.Record{rec(1, "")}, nil)
			c.called(2, []stages.Record{rec(1, "")}, nil, nil)
			c.checkMark(tp, 2)
		}},
		{name: "record errors: only the records not failed are finished", run: func(c *checker) {
			var re stages.RecordErrors
			re.Emit(0, rec(0, ""))
			re.Fail(1, errors.New("bad"))
			c.called(1, []stages.Record{rec(0, ""), rec(1, "")}, nil, &re)
			c.called(2, []stages.Record{rec(0, "")}, nil, nil)
			c.checkMark(tp, 2)
		}, want: `passes the record at offset 1, but stage "first" finished 0`},
		{name: "one key in two calls at once", run: func(c *checker) {
			held := c.enter([]stages.Record{rec(0, "a"), rec(1, "b")})
			c.enter([]stages.Record{rec(2, "b")})
			c.leave(held)
		}, want: `key "b" of t/0 were in two stage calls at once`},
		{name: "one key in two calls one after the other", run: func(c *checker) {
			c.leave(c.enter([]stages.Record{rec(0, "a")}))
			c.leave(c.enter([]stages.Record{rec(1, "a")}))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChecker(two)
			c.inputs(tp, []stages.Record{rec(0, ""), rec(1, ""), rec(2, "")})
			tt.run(c)
			switch {
			case tt.want == "" && len(c.violations) > 0:
				t.Fatalf("violations %q, want none", c.violations)
			case tt.want != "" && (len(c.violations) == 0 || !strings.Contains(c.violations[0], tt.want)):
				t.Fatalf("violations %q, want the first to contain %q", c.violations, tt.want)
			}
		})
	}
}
