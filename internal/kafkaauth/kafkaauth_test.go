package kafkaauth

import (
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	for _, m := range []string{"plain", "SCRAM-SHA-256", "scram-sha-512"} {
		a, err := New(m, "u", "p")
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		kg, err := a.KafkaGo()
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if kg.Name() != strings.ToUpper(m) || a.Franz().Name() != strings.ToUpper(m) {
			t.Errorf("%s: kafka-go %s, franz-go %s", m, kg.Name(), a.Franz().Name())
		}
	}
	_, err := New("GSSAPI", "u", "secret")
	if err == nil || !strings.Contains(err.Error(), `kafka.sasl.mechanism: "GSSAPI" is not PLAIN, SCRAM-SHA-256, SCRAM-SHA-512`) || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v", err)
	}
}
