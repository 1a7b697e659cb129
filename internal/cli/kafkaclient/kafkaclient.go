// Package kafkaclient makes the franz-go clients the processor's commands
// use (run for the lag it reports, the Kafka tools for everything) from a
// configuration's kafka: settings, and reads what they share: the log
// bounds of topics and the offsets at a time.
package kafkaclient

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkaauth"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// NewClient returns a franz-go client to the cluster k describes, its
// client id k's with idSuffix, with the extra options. It connects
// lazily; the caller closes it.
func NewClient(k pipeline.KafkaConfig, idSuffix string, extra ...kgo.Opt) (*kgo.Client, error) {
	opts, err := clientOptions(k, idSuffix)
	if err != nil {
		return nil, fmt.Errorf("kafka settings: %w", err)
	}
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	return cl, nil
}

// NewAdmin returns an admin client to the cluster k describes (NewClient);
// close it with Close.
func NewAdmin(k pipeline.KafkaConfig, idSuffix string) (*kadm.Client, error) {
	cl, err := NewClient(k, idSuffix)
	if err != nil {
		return nil, err
	}
	return kadm.NewClient(cl), nil
}

// clientOptions are franz-go options for the brokers, TLS and SASL of k.
func clientOptions(k pipeline.KafkaConfig, idSuffix string) ([]kgo.Opt, error) {
	id := k.ClientID
	if id == "" {
		id = "fencepost"
	}
	dial := k.DialTimeout
	if dial <= 0 {
		dial = 10 * time.Second
	}
	opts := []kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.ClientID(id + idSuffix), kgo.DialTimeout(dial)}
	if t := k.TLS; t != nil {
		tc, err := t.Config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if s := k.SASL; s != nil {
		a, err := kafkaauth.New(s.Mechanism, s.Username, string(s.Password))
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(a.Franz()))
	}
	return opts, nil
}
