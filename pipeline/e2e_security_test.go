package pipeline_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fencepost-dev/fencepost/internal/kafkatest"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// secureCluster is a cluster with a SASL_SSL listener.
type secureCluster struct {
	// k administers the cluster (creates topics, produces, reads commits).
	k *kafkatest.Kafka
	// secure are the SASL_SSL bootstrap addresses; plaintext a listener
	// without TLS.
	secure, plaintext []string
	// ca signed the brokers' certificate.
	ca *kafkatest.CA
	// users by mechanism: SCRAM-SHA-512 and PLAIN.
	users map[string][2]string
}

// TestSASLOverTLS runs the SASL/TLS scenarios against kfake with SASL and
// TLS enabled.
func TestSASLOverTLS(t *testing.T) {
	ca := kafkatest.NewCA(t)
	users := map[string][2]string{
		"SCRAM-SHA-512": {"scram-user", "scram-Secret-3141"},
		"PLAIN":         {"plain-user", "plain-Secret-2718"},
	}
	c := kafkatest.NewWithClient(t, 1,
		[]kgo.Opt{kgo.DialTLSConfig(ca.ClientTLS()), kgo.SASL(scram.Auth{User: users["SCRAM-SHA-512"][0], Pass: users["SCRAM-SHA-512"][1]}.AsSha512Mechanism())},
		kfake.TLS(ca.ServerTLS()), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", users["SCRAM-SHA-512"][0], users["SCRAM-SHA-512"][1]),
		kfake.Superuser("PLAIN", users["PLAIN"][0], users["PLAIN"][1]))
	plain := kafkatest.New(t, 1)
	saslOverTLS(t, secureCluster{k: c.Kafka, secure: c.Addrs, plaintext: plain.Addrs, ca: ca, users: users})
}

// saslOverTLS: a pipeline authenticates with SCRAM-SHA-512 and with PLAIN
// over TLS, consumes and commits. A wrong password, a CA that did not sign
// the broker's certificate, and TLS to a plaintext listener each make Run
// fail within a bounded time, with an error naming the setting to check,
// and no password appears in the error or the logs.
func saslOverTLS(t *testing.T, sc secureCluster) {
	other := kafkatest.NewCA(t)
	const dial = 3 * time.Second
	tests := []struct {
		name      string
		mechanism string
		password  string // "" is the user's
		caFile    string // "" is sc.ca's
		plaintext bool
		want      string // "" is success; else what the error must name
	}{
		{name: "SCRAM-SHA-512", mechanism: "SCRAM-SHA-512"},
		{name: "PLAIN", mechanism: "PLAIN"},
		{name: "wrong SCRAM password", mechanism: "SCRAM-SHA-512", password: "Wrong-Pass-5772", want: "kafka.sasl"},
		{name: "wrong PLAIN password", mechanism: "PLAIN", password: "Wrong-Pass-1414", want: "kafka.sasl"},
		{name: "unknown CA", mechanism: "SCRAM-SHA-512", caFile: other.CAFile, want: "kafka.tls.ca_file"},
		{name: "TLS to a plaintext port", mechanism: "SCRAM-SHA-512", plaintext: true, want: "kafka.tls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sc.k.Named(sc.k.Name(strings.ReplaceAll(tt.name, " ", "-") + "."))
			topic, group := c.Name("secured"), c.Name("g-secured")
			user, password := sc.users[tt.mechanism][0], sc.users[tt.mechanism][1]
			if tt.password != "" {
				password = tt.password
			}
			caFile := sc.ca.CAFile
			if tt.caFile != "" {
				caFile = tt.caFile
			}
			brokers := sc.secure
			if tt.plaintext {
				brokers = sc.plaintext
			}
			c.CreateTopic(t, topic, 2)
			for p := int32(0); p < 2; p++ {
				c.Produce(t, topic, p, 10, values("x"))
			}
			cfg := fastConfig(c, group, topic)
			cfg.Kafka.Brokers = brokers
			cfg.Kafka.DialTimeout = dial
			cfg.Kafka.TLS = &pipeline.TLS{CAFile: caFile}
			cfg.Kafka.SASL = &pipeline.SASL{Mechanism: tt.mechanism, Username: user, Password: pipeline.Secret(password)}
			logs := &logSink{}
			rec := newRecorder()
			began := time.Now()
			r := start(t, cfg, pipeline.WithStage("record", rec), pipeline.WithLogger(logging.ForStage(logs.logger())))
			if tt.want == "" {
				waitFor(t, 20*time.Second, "commits of 10 and 10", func() bool {
					got := c.Committed(t, group, topic)
					return got[0] == 10 && got[1] == 10
				})
				if err := r.shutdown(t); err != nil {
					t.Fatalf("Run: %v", err)
				}
				if rec.total() != 20 {
					t.Fatalf("processed %d records, want 20", rec.total())
				}
			} else {
				var err error
				select {
				case err = <-r.done:
					r.done <- err
				case <-time.After(4 * dial):
					t.Fatalf("Run still running after %v: a %s must fail within a bounded time", 4*dial, tt.name)
				}
				took := time.Since(began)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Run returned %v after %v; want an error naming %s", err, took, tt.want)
				}
				t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
				if rec.total() != 0 {
					t.Fatalf("processed %d records", rec.total())
				}
				if strings.Contains(err.Error(), password) {
					t.Fatalf("the error shows the password: %v", err)
				}
			}
			for _, secret := range []string{password, sc.users[tt.mechanism][1]} {
				if logs.contains(secret) {
					t.Fatalf("the logs show a password")
				}
			}
		})
	}
}

// logSink keeps every log line, fields included, as text.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(l), zapcore.DebugLevel))
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

func (l *logSink) contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}
