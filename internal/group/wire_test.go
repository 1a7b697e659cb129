package group

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/segmentio/kafka-go/protocol"
	kgheartbeat "github.com/segmentio/kafka-go/protocol/heartbeat"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Why the member frames Heartbeat with kmsg: kafka-go's heartbeat.Response
// reads a v1+ answer's ThrottleTimeMs as its ErrorCode, so
// REBALANCE_IN_PROGRESS decodes as no error. If this starts failing,
// kafka-go fixed it and the member could send Heartbeat through it.
func TestKafkaGoHeartbeatResponseMisreadsErrors(t *testing.T) {
	resp := kmsg.NewPtrHeartbeatResponse()
	resp.Version, resp.ErrorCode = 4, 27 // REBALANCE_IN_PROGRESS
	body := resp.AppendTo(nil)
	frame := binary.BigEndian.AppendUint32(nil, 7) // correlation id
	frame = append(frame, 0)                       // flexible response header: no tags
	frame = append(frame, body...)
	wire := binary.BigEndian.AppendUint32(nil, uint32(len(frame)))
	wire = append(wire, frame...)

	_, msg, err := protocol.ReadResponse(bytes.NewReader(wire), protocol.Heartbeat, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.(*kgheartbeat.Response).ErrorCode; got != 0 {
		t.Fatalf("kafka-go decoded error code %d; it was 0 (misread) when the member chose kmsg", got)
	}
	var again kmsg.HeartbeatResponse
	again.Version = 4
	if err := again.ReadFrom(body); err != nil || again.ErrorCode != 27 {
		t.Fatalf("kmsg decoded %d, %v; want 27", again.ErrorCode, err)
	}
}
