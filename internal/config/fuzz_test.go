package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/pipeline"
	_ "github.com/fencepost-dev/fencepost/stages/builtin" // the real stages, expressions compiled
)

// fuzzEnv answers every variable whose name starts with V with value,
// and no other.
func fuzzEnv(value string) config.LookupFunc {
	return func(name string) (string, bool) {
		if strings.HasPrefix(name, "V") {
			return value, true
		}
		return "", false
	}
}

// load parses src with value in the environment and checks what every
// outcome must satisfy: no panic; an accepted configuration validates
// again; every error is within the file, with a message and a hint, and
// shows no character the loader keeps for itself.
func load(t *testing.T, src []byte, value string) (*config.Config, config.Errors) {
	cfg, err := config.Loader{LookupEnv: fuzzEnv(value)}.Parse("fuzz.yaml", src)
	if err == nil {
		pc := cfg.Pipeline
		if cfg.Embedded != nil {
			pc.Kafka.Brokers = []string{"127.0.0.1:9092"}
		}
		if err := pc.Validate(); err != nil {
			t.Fatalf("accepted a configuration that does not validate: %v", err)
		}
		names := map[string]bool{}
		for _, s := range cfg.Stages {
			if names[s.Name] || s.Name == "" {
				t.Fatalf("stage name %q empty or used twice", s.Name)
			}
			names[s.Name] = true
		}
		return cfg, nil
	}
	var es config.Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse returned %T %v, want config.Errors", err, err)
	}
	if len(es) == 0 {
		t.Fatal("Parse failed with no errors")
	}
	text := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(strings.TrimPrefix(string(src), "\ufeff"))
	lines := strings.Split(text, "\n")
	for _, e := range es {
		if e.Line < 1 || e.Line > len(lines) || e.Col < 1 || e.Col > utf8.RuneCountInString(lines[e.Line-1])+1 {
			t.Fatalf("error at %d:%d, outside the file (%d lines): %v", e.Line, e.Col, len(lines), e)
		}
		if e.Msg == "" || e.Hint == "" {
			t.Fatalf("error without a message or a hint: %#v", e)
		}
		if !strings.ContainsFunc(value, private) && strings.ContainsFunc(e.Msg+e.Hint+e.Key, private) {
			t.Fatalf("error shows a placeholder: %q", e.Error())
		}
	}
	return nil, es
}

func private(r rune) bool { return r >= '\U000F0000' }

// FuzzLoad loads arbitrary files, with interpolation: see load.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("kafka:\n  brokers: [${V_HOST:-localhost}:9092, 'b:1']\nconsumer:\n  group: ${V}\n  topics: [orders]\n"+
		"pipeline:\n  - stage: filter\n    if: json?.amount > 100\n  - stage: map\n    value: '{\"id\": json.id}'\n"), "g\nauto_offset_reset: none")
	f.Add([]byte("kafka:\n  sasl: {mechanism: PLAIN, username: u, password: \"${V}\"}\n  brokers: [\"${V}\"]\nconsumer: {group: g, topics: [t]}\npipeline: []\n"), `p"w`)
	f.Add([]byte("kafka:\n  embedded: {topics: [a], demo_producer: {topic: a}}\nconsumer: {group: g, topics: [a], commit_interval: ${V}}\npipeline: []\n"), "0")
	f.Add([]byte("\ufeffconsumer:\n\tgroup: g\n"), "")
	f.Add([]byte("a: &x [1, *x]\nb: ${V\nc: $${V} # ${V}\n${V}: 1\n"), "v")
	f.Add([]byte("consumer:\n  buffer_bytes: 64MB\n  session_timeout: 1000000h\npipeline:\n  - stage: stdout\n    every: 0\n    format: x\n"), "")
	f.Fuzz(func(t *testing.T, src []byte, value string) {
		load(t, src, value)
	})
}

// FuzzDuration parses arbitrary text as a duration of the file: no
// panic; an accepted one is positive and reads back as itself.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"30s", "0", "0s", "1.5h", "-1s", "1000000h", "9999999999h", "500us", "1h2m3.5s", "+5m", ".5s", "1e3s", "${V}"} {
		f.Add(s, "15s")
	}
	const base = "kafka:\n  brokers: [localhost:9092]\nconsumer:\n  group: g\n  topics: [t]\npipeline: []\nshutdown_timeout: "
	f.Fuzz(func(t *testing.T, text, value string) {
		for _, quoted := range []string{text, `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(text) + `"`} {
			cfg, _ := load(t, []byte(base+quoted+"\n"), value)
			if cfg == nil {
				continue
			}
			d := cfg.Pipeline.ShutdownTimeout
			if d < 0 {
				t.Fatalf("%q: accepted %v", text, d)
			}
			if back, err := time.ParseDuration(d.String()); d != 0 && (err != nil || back != d) {
				t.Fatalf("%q: %v reads back as %v, %v", text, d, back, err)
			}
		}
	})
}

// FuzzByteSize parses arbitrary text as a size, alone and as the file's
// buffer_bytes: no panic; an accepted size is not negative and its String
// reads back as itself; a refused one leaves the value as it was.
func FuzzByteSize(f *testing.F) {
	for _, s := range []string{"512", "64KiB", "1MiB", "2 GiB", "0", "17179869184GiB", "8589934591GiB", "64MB", "1mib",
		"-1", "+5KiB", "1.5MiB", " 7 B ", "9223372036854775807", "9223372036854775808", "KiB", ""} {
		f.Add(s)
	}
	const base = "kafka:\n  brokers: [localhost:9092]\nconsumer:\n  group: g\n  topics: [t]\n  buffer_bytes: "
	f.Fuzz(func(t *testing.T, text string) {
		b := pipeline.ByteSize(-7)
		if err := b.UnmarshalText([]byte(text)); err != nil {
			if b != -7 || err.Error() == "" {
				t.Fatalf("%q: refused (%v) but changed the value to %v", text, err, b)
			}
		} else {
			if b < 0 {
				t.Fatalf("%q: accepted as %d", text, b)
			}
			var back pipeline.ByteSize
			if err := back.UnmarshalText([]byte(b.String())); err != nil || back != b {
				t.Fatalf("%q = %d formats as %q, which reads back as %d (%v)", text, b, b.String(), back, err)
			}
		}
		if cfg, _ := load(t, []byte(base+text+"\npipeline: []\n"), ""); cfg != nil && cfg.Pipeline.Consumer.BufferBytes < 0 {
			t.Fatalf("%q: buffer_bytes %v", text, cfg.Pipeline.Consumer.BufferBytes)
		}
	})
}
