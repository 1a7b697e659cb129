package app

import (
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/kafkaauth"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// newAdmin returns an admin client to the cluster k describes, for the
// lag the processor reports (high watermarks, committed offsets). It
// connects lazily; close it with Close on its client.
func newAdmin(k pipeline.KafkaConfig) (*kadm.Client, error) {
	opts, err := clientOptions(k, "-monitor")
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
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
