package pipeline

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"

	"github.com/fencepost-dev/fencepost/internal/kafkaauth"
	"github.com/fencepost-dev/fencepost/internal/kafkawire"
	"github.com/fencepost-dev/fencepost/internal/partitioner"
)

// connection is what every client of a pipeline shares: TLS, SASL,
// client id; for kafka-go's Transport (lookups, metadata, producing) and
// for the connections the engine frames requests on itself (the fetch
// path, the group member); and where its producers put keyed records.
type connection struct {
	brokers   []string
	clientID  string
	tls       *tls.Config
	sasl      sasl.Mechanism      // kafka-go's
	fetchSASL franzsasl.Mechanism // the fetch path's
	timeout   time.Duration
	// place puts the keyed records of the producers on this connection
	// (kafka.partitioner)
	place partitioner.Func
}

func newConnection(c KafkaConfig) (*connection, error) {
	if err := c.Partitioner.Validate(); err != nil {
		return nil, fmt.Errorf("kafka.partitioner: %w", err)
	}
	conn := &connection{brokers: c.Brokers, clientID: c.ClientID, timeout: c.DialTimeout, place: c.Partitioner.place()}
	if c.TLS != nil {
		t, err := c.TLS.Config()
		if err != nil {
			return nil, err
		}
		conn.tls = t
	}
	if c.SASL != nil {
		a, err := kafkaauth.New(c.SASL.Mechanism, c.SASL.Username, string(c.SASL.Password))
		if err != nil {
			return nil, err
		}
		if conn.sasl, err = a.KafkaGo(); err != nil {
			return nil, err
		}
		conn.fetchSASL = a.Franz()
	}
	return conn, nil
}

// fetchDialer is how the fetch path connects to brokers.
func (c *connection) fetchDialer() *kafkawire.Dialer {
	return &kafkawire.Dialer{ClientID: c.clientID, Timeout: c.timeout, TLS: c.tls, SASL: c.fetchSASL}
}

// Config returns the crypto/tls configuration these settings describe,
// for other clients of the same cluster. It reads the certificate files.
func (c *TLS) Config() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // opt-in for tests
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka.tls.ca_file: %s holds no PEM certificate", c.CAFile)
		}
		t.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafka.tls.cert_file/key_file: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// transport returns a new Transport (each has its own metadata cache and
// connection pool).
func (c *connection) transport(metadataTTL time.Duration, topics []string) *kafka.Transport {
	return &kafka.Transport{
		Dial:           (&net.Dialer{Timeout: c.timeout}).DialContext,
		DialTimeout:    c.timeout,
		IdleTimeout:    time.Minute,
		MetadataTTL:    metadataTTL,
		MetadataTopics: topics,
		ClientID:       c.clientID,
		TLS:            c.tls,
		SASL:           c.sasl,
	}
}

func (c *connection) addr() net.Addr { return kafka.TCP(c.brokers...) }

// connectHint names the settings to check after connecting to the brokers
// failed with err: the TLS trust settings for a certificate the client
// does not trust, the SASL settings for refused credentials, and all of
// them otherwise (an EOF or a time-out can be TLS against a plaintext
// listener, or a broker hanging up on bad credentials).
func connectHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknown), errors.As(err, &invalid):
		return "check kafka.tls.ca_file: it must hold the CA that signed the brokers' certificates (empty: the system's CAs)"
	case errors.As(err, &host):
		return "check kafka.tls.server_name and kafka.brokers: the brokers' certificate does not name the address dialled"
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return "check kafka.sasl.username, kafka.sasl.password and kafka.sasl.mechanism: the brokers refused them"
	case errors.Is(err, kafka.UnsupportedSASLMechanism), errors.Is(err, kafka.IllegalSASLState):
		return "check kafka.sasl.mechanism: the brokers' listener does not accept it"
	}
	return "check kafka.brokers, kafka.tls and kafka.sasl, and that the brokers are up; " +
		"a time-out or EOF can mean TLS to a plaintext listener or the reverse"
}
