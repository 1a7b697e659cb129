package kafkatools

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // the log stage
	"github.com/fencepost-dev/fencepost/stages/stagetest"
)

// TestLogStageLinesFeedProduce: what the log stage prints with format
// json is what consume -o json prints, so produce -i json writes it back:
// binary keys and values, headers in order with a repeated key and a null
// value, null keys, timestamps.
func TestLogStageLinesFeedProduce(t *testing.T) {
	addr := testCluster(t, 1, "logged")
	spec, ok := stages.Default.Lookup("log")
	if !ok {
		t.Fatal("no log stage")
	}
	var printed stagetest.Buffer
	st, err := spec.New(stages.Options{"format": "json", "every": 1}, stagetest.Env(&printed, nil))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 1, 12, 0, 1, 5e6, time.UTC)
	in := []stages.Record{
		{Topic: "src", Partition: 0, Offset: 7, Key: []byte("k"), Value: []byte(`{"a":1}`), Timestamp: at,
			Headers: []stages.Header{{Key: "h", Value: []byte("1")}, {Key: "h", Value: []byte("2")}, {Key: "none"}}},
		{Topic: "src", Partition: 0, Offset: 8, Value: []byte{0, 0xff, 0x80}, Timestamp: at.Add(time.Second)},
		{Topic: "src", Partition: 0, Offset: 9, Key: []byte{0xc3}, Timestamp: at.Add(2 * time.Second)},
	}
	if _, err := st.Process(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if code, _, errOut := runCLIInput(ctx, nil, printed.String(), "produce", "--brokers", addr, "--topic", "logged", "-i", "json"); code != ExitOK {
		t.Fatalf("produce -i json of the log stage's lines: exit %d: %s\nlines:\n%s", code, errOut, printed.String())
	}
	code, out, errOut := runCLI(ctx, nil, "consume", "--brokers", addr, "--topic", "logged", "-o", "json")
	if code != ExitOK {
		t.Fatalf("consume: exit %d: %s", code, errOut)
	}
	got := jsonLines(t, out)
	if len(got) != len(in) {
		t.Fatalf("%d records written back, want %d", len(got), len(in))
	}
	logged := jsonLines(t, printed.String())
	for i := range in {
		if !reflect.DeepEqual(content(got[i]), content(logged[i])) {
			t.Errorf("record %d: logged\n%s\nconsumed\n%+v", i, strings.Split(printed.String(), "\n")[i], got[i])
		}
		if logged[i].Topic != "src" || logged[i].Offset != in[i].Offset {
			t.Errorf("record %d: logged at %s@%d, want src@%d", i, logged[i].Topic, logged[i].Offset, in[i].Offset)
		}
	}
}
