package builtin

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/fencepost-dev/fencepost/internal/recordjson"
	"github.com/fencepost-dev/fencepost/internal/unsafeconv"
	"github.com/fencepost-dev/fencepost/stages"
)

var logOptions = []stages.OptionSpec{
	{Name: "format", Type: stages.TypeString, Default: "text", Enum: []string{"text", "json", "value"},
		Doc: "text: topic/partition@offset, time, quoted key, value and headers; " +
			"json: one JSON object per record, as processor consume -o json prints it (so produce -i json reads it back); value: the raw value"},
	{Name: "every", Type: stages.TypeInt, Default: 1,
		Doc: "print one record in every N (counted over all partitions); 1 prints every record"},
}

func init() {
	for _, name := range []string{"log", "stdout"} {
		stages.Register(stages.Spec{
			Name:    name,
			Summary: "print records to standard output, one line each, and pass them on",
			Options: logOptions,
			New:     newLog,
			// Not exactly-once: a printed line cannot be taken back, so
			// the records of an aborted transaction (or those processed
			// since the last commit before a crash) print again.
			ExactlyOnce: false,
		})
	}
}

// logStage prints records: one Write per record, of a whole line, to
// Env.Stdout, which serializes writes (so lines of concurrent partitions
// never interleave).
type logStage struct {
	format string
	every  uint64
	n      atomic.Uint64 // records seen
	w      io.Writer
}

func newLog(opts stages.Options, env stages.Env) (stages.Stage, error) {
	format, err := opts.String("format")
	if err != nil {
		return nil, err
	}
	every, err := opts.Int("every")
	if err != nil {
		return nil, err
	}
	s := &logStage{format: format, w: env.Stdout}
	switch s.format {
	case "text", "json", "value":
	default:
		return nil, &stages.OptionError{Option: "format", Err: errors.New("must be text, json or value")}
	}
	if every < 1 {
		return nil, &stages.OptionError{Option: "every", Err: errors.New("must be at least 1")}
	}
	s.every = uint64(every)
	if s.w == nil {
		s.w = io.Discard
	}
	return s, nil
}

// Process prints the sampled records and returns in itself. A failed
// write fails that record (in a *stages.RecordErrors). Once ctx has ended
// it returns ctx.Err() (checked before each record; a Write that blocks
// is not interrupted).
func (s *logStage) Process(ctx context.Context, in []stages.Record) ([]stages.Record, error) {
	var line bytes.Buffer
	return eachRecord(ctx, in, func(r *stages.Record, _ *stages.Record) (outcome, error) {
		if (s.n.Add(1)-1)%s.every == 0 {
			line.Reset()
			s.format1(&line, r)
			line.WriteByte('\n')
			_, err := s.w.Write(line.Bytes())
			if err != nil {
				return failed, err
			}
		}
		return passed, nil
	})
}

func (s *logStage) format1(b *bytes.Buffer, r *stages.Record) {
	switch s.format {
	case "value":
		b.Write(r.Value)
	case "json":
		jr := recordjson.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: recordjson.Timestamp(r.Timestamp)}
		jr.Key, jr.KeyBase64 = recordjson.EncodeBytes(r.Key)
		jr.Value, jr.ValueBase64 = recordjson.EncodeBytes(r.Value)
		if len(r.Headers) > 0 {
			jr.Headers = make([]recordjson.Header, len(r.Headers))
			for i, h := range r.Headers {
				jr.Headers[i].Key = h.Key
				jr.Headers[i].Value, jr.Headers[i].ValueBase64 = recordjson.EncodeBytes(h.Value)
			}
		}
		j, err := appendJSON(b.AvailableBuffer(), jr)
		if err != nil { // not possible for these field types; print why instead of the record
			j = strconv.AppendQuote(b.AvailableBuffer(), err.Error())
		}
		b.Write(j)
	default:
		b.WriteString(r.Topic)
		b.WriteByte('/')
		b.WriteString(strconv.FormatInt(int64(r.Partition), 10))
		b.WriteByte('@')
		b.WriteString(strconv.FormatInt(r.Offset, 10))
		if !r.Timestamp.IsZero() {
			b.WriteByte(' ')
			b.WriteString(r.Timestamp.UTC().Format(time.RFC3339Nano))
		}
		b.WriteString(" key=")
		b.Write(quote(r.Key))
		b.WriteString(" value=")
		b.Write(quote(r.Value))
		for _, h := range r.Headers {
			b.WriteByte(' ')
			b.WriteString(strconv.Quote(h.Key))
			b.WriteByte('=')
			b.Write(quote(h.Value))
		}
	}
}

// quote is b as a Go-quoted string, or null for nil: one line whatever
// the bytes.
func quote(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return strconv.AppendQuote(nil, unsafeconv.String(b))
}
