package group

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/offsetstore"
)

// The member authenticates its connections with SASL (through its dial
// function, as the pipeline does); a wrong
// password keeps it out, with a log that names SASL and not the secret.
func TestSASL(t *testing.T) {
	c := kafkatest.NewWithClient(t, 1, []kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: "s3cret-pw"}.AsMechanism())},
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "s3cret-pw"))
	c.CreateTopic(t, "t", 2)

	l := newLedger()
	cfg := testConfig(c, "g", "t")
	cfg.Dial = (&kafkawire.Dialer{Timeout: 5 * time.Second, SASL: plain.Auth{User: "admin", Pass: "s3cret-pw"}.AsMechanism()}).DialNet
	startMember(t, l, "a", cfg, memberOpts{})
	l.waitFor(t, 10*time.Second, "a owns both", func(o map[string][]offsetstore.TopicPartition) bool { return len(o["a"]) == 2 })

	core, logs := observer.New(zap.DebugLevel)
	bad := testConfig(c, "g2", "t")
	bad.Dial = (&kafkawire.Dialer{Timeout: 5 * time.Second, SASL: plain.Auth{User: "admin", Pass: "wrong-pw-123"}.AsMechanism()}).DialNet
	bad.Logger = zap.New(core)
	m, err := New(bad)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	go func() {
		for ev := range m.Events() {
			t.Errorf("a member with a wrong password got %T", ev)
		}
	}()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var saw bool
	for _, e := range logs.All() {
		for _, f := range e.Context {
			s := f.String
			if f.Interface != nil {
				if err, ok := f.Interface.(error); ok {
					s = err.Error()
				}
			}
			if strings.Contains(s, "wrong-pw-123") {
				t.Fatalf("the password is in a log: %s", s)
			}
			saw = saw || strings.Contains(s, "SASL PLAIN")
		}
	}
	if !saw {
		t.Fatalf("no log names the SASL failure: %v", logs.All())
	}
}
