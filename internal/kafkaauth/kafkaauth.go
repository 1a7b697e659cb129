// Package kafkaauth turns the SASL settings of a configuration into the
// mechanisms of both Kafka clients the processor uses: kafka-go (the
// pipeline) and franz-go (the admin client of the binary), so the
// mechanism names, and what is wrong with one, are decided in one place.
package kafkaauth

import (
	"fmt"
	"strings"

	kgosasl "github.com/segmentio/kafka-go/sasl"
	kgoplain "github.com/segmentio/kafka-go/sasl/plain"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	franzplain "github.com/twmb/franz-go/pkg/sasl/plain"
	franzscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

// mechanisms are the SASL mechanisms a configuration can name.
var mechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// Auth is one set of SASL credentials, for either client.
type Auth struct {
	mechanism string // upper case, one of mechanisms
	user      string
	password  string
}

// New checks the mechanism name (case-insensitive) and returns the
// credentials. The error names the configuration key and the choices.
func New(mechanism, user, password string) (Auth, error) {
	m := strings.ToUpper(mechanism)
	for _, ok := range mechanisms {
		if m == ok {
			return Auth{mechanism: m, user: user, password: password}, nil
		}
	}
	return Auth{}, fmt.Errorf("kafka.sasl.mechanism: %q is not %s", mechanism, strings.Join(mechanisms, ", "))
}

// KafkaGo returns the mechanism for kafka-go's Transport and Dialer.
func (a Auth) KafkaGo() (kgosasl.Mechanism, error) {
	switch a.mechanism {
	case "PLAIN":
		return kgoplain.Mechanism{Username: a.user, Password: a.password}, nil
	case "SCRAM-SHA-256":
		return wrap(kgoscram.Mechanism(kgoscram.SHA256, a.user, a.password))
	}
	return wrap(kgoscram.Mechanism(kgoscram.SHA512, a.user, a.password))
}

func wrap(m kgosasl.Mechanism, err error) (kgosasl.Mechanism, error) {
	if err != nil {
		return nil, fmt.Errorf("kafka.sasl: %w", err)
	}
	return m, nil
}

// Franz returns the mechanism for a franz-go client.
func (a Auth) Franz() franzsasl.Mechanism {
	switch a.mechanism {
	case "PLAIN":
		return franzplain.Auth{User: a.user, Pass: a.password}.AsMechanism()
	case "SCRAM-SHA-256":
		return franzscram.Auth{User: a.user, Pass: a.password}.AsSha256Mechanism()
	}
	return franzscram.Auth{User: a.user, Pass: a.password}.AsSha512Mechanism()
}
