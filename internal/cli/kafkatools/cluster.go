package kafkatools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencepost-dev/fencepost/internal/cli/clibase"
	"github.com/fencepost-dev/fencepost/internal/cli/kafkaclient"
	"github.com/fencepost-dev/fencepost/internal/config"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// clusterFlags say how the helper commands (offsets, consume, produce)
// reach the cluster: the kafka: section of a configuration file (-c),
// or flags, which override the file's brokers, TLS and SASL settings.
type clusterFlags struct {
	config      string
	brokers     []string
	tls         bool
	tlsCA       string
	tlsCert     string
	tlsKey      string
	tlsInsecure bool
	mechanism   string
	username    string
	passwordEnv string
	timeout     time.Duration
	// records: the command's standard output is record data (consume),
	// which hiding the file's secrets must not change.
	records bool
	// sasl is the SASL mechanism settings chose ("": none), for the hint
	// of an error.
	sasl string
	// loaded is the configuration file, once read (file).
	loaded *config.Config
}

func (f *clusterFlags) add(fs *pflag.FlagSet) {
	fs.StringVarP(&f.config, "config", "c", "", "read the cluster settings (kafka:) from this configuration `FILE`")
	fs.StringSliceVar(&f.brokers, "brokers", nil, "bootstrap `HOST:PORT` list (overrides the file's)")
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (the system's CAs unless --tls-ca)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM `FILE` of CAs to trust (implies --tls)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "client certificate PEM `FILE` (mutual TLS)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "client key PEM `FILE` (mutual TLS)")
	fs.BoolVar(&f.tlsInsecure, "tls-insecure", false, "do not check the broker certificate (tests only)")
	fs.StringVar(&f.mechanism, "sasl-mechanism", "", "SASL `MECHANISM`: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
	fs.StringVar(&f.username, "sasl-username", "", "SASL user `NAME`")
	fs.StringVar(&f.passwordEnv, "sasl-password-env", "KAFKA_PASSWORD", "environment `VARIABLE` holding the SASL password (never a flag: flags show in ps)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the cluster's answers (produce: for the next acknowledgement while records wait)")
}

// errEmbedded: a file with kafka.embedded names no cluster another
// process can reach.
var errEmbedded = errors.New("uses the embedded broker (kafka.embedded), which lives only while 'processor run' does: " +
	"give --brokers (the run logs the embedded broker's address as \"embedded broker started\")")

// settings returns the cluster settings and, if a file was read, its
// configuration (for defaults such as consumer.group).
func (f *clusterFlags) settings(c *cli) (pipeline.KafkaConfig, *config.Config, error) {
	var (
		k   pipeline.KafkaConfig
		cfg *config.Config
	)
	if f.config != "" {
		var err error
		if cfg, err = f.file(c, "or give the cluster with --brokers"); err != nil {
			return k, nil, err
		}
		k = cfg.Pipeline.Kafka
		if cfg.Embedded != nil && len(f.brokers) == 0 {
			return k, nil, clibase.Failure("%s %v", f.config, errEmbedded)
		}
	}
	if len(f.brokers) > 0 {
		k.Brokers = f.brokers
	}
	if len(k.Brokers) == 0 {
		return k, nil, clibase.Failure("name the cluster: -c FILE (its kafka: section) or --brokers HOST:PORT")
	}
	if f.tls || f.tlsCA != "" || f.tlsCert != "" || f.tlsInsecure {
		k.TLS = &pipeline.TLS{CAFile: f.tlsCA, CertFile: f.tlsCert, KeyFile: f.tlsKey, InsecureSkipVerify: f.tlsInsecure}
	}
	if f.mechanism != "" {
		pw, ok := os.LookupEnv(f.passwordEnv)
		if !ok {
			return k, nil, clibase.Failure("--sasl-mechanism: set the password in $%s (or name another variable with --sasl-password-env)", f.passwordEnv)
		}
		k.SASL = &pipeline.SASL{Mechanism: f.mechanism, Username: f.username, Password: pipeline.Secret(pw)}
	}
	if f.timeout > 0 {
		k.DialTimeout = f.timeout
	}
	if k.SASL != nil {
		f.sasl = k.SASL.Mechanism
	}
	return k, cfg, nil
}

// file returns the configuration file -c names (nil without -c), read
// once: from then on the command's output hides its secrets. A file with
// problems is a failure, after they were printed; what to do else is its
// hint.
func (f *clusterFlags) file(c *cli, orElse string) (*config.Config, error) {
	if f.config == "" || f.loaded != nil {
		return f.loaded, nil
	}
	cfg, err := config.Load(f.config, c.Registry)
	if err != nil {
		clibase.PrintConfigError(c.Stderr, err)
		return nil, clibase.Failure("%s: fix the problems above, %s", f.config, orElse)
	}
	c.HideSecrets(cfg.Redactor, f.records)
	f.loaded = cfg
	return cfg, nil
}

// client returns a franz-go client to the cluster the flags name, with
// the extra options; the caller closes it.
func (f *clusterFlags) client(c *cli, suffix string, extra ...kgo.Opt) (*kgo.Client, *config.Config, error) {
	k, cfg, err := f.settings(c)
	if err != nil {
		return nil, nil, err
	}
	cl, err := kafkaclient.NewClient(k, suffix, extra...)
	if err != nil {
		return nil, nil, clibase.Failure("%v", err)
	}
	return cl, cfg, nil
}

// withAdmin runs fn with an admin client to the cluster and a context
// bounded by --timeout; cfg is the configuration file read, if any.
func (f *clusterFlags) withAdmin(ctx context.Context, c *cli, fn func(ctx context.Context, adm *kadm.Client, cfg *config.Config) error) error {
	k, cfg, err := f.settings(c)
	if err != nil {
		return err
	}
	return f.withAdminTo(ctx, k, func(ctx context.Context, adm *kadm.Client) error { return fn(ctx, adm, cfg) })
}

// withAdminTo is withAdmin for settings already read.
func (f *clusterFlags) withAdminTo(ctx context.Context, k pipeline.KafkaConfig, fn func(ctx context.Context, adm *kadm.Client) error) error {
	cl, err := kafkaclient.NewClient(k, "-offsets")
	if err != nil {
		return clibase.Failure("%v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := f.reach(ctx, cl); err != nil {
		return err
	}
	return fn(ctx, kadm.NewClient(cl))
}

// reach checks that the cluster answers cl within --timeout: a client
// that cannot reach it (nothing listens, the listener never answers or
// refuses the SASL handshake) retries its requests until killed.
func (f *clusterFlags) reach(ctx context.Context, cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if err := cl.Ping(ctx); err != nil { // one try a broker: the error is the cause, not the deadline
		return f.unreachable(err)
	}
	return nil
}

// unreachable wraps an error talking to the cluster with what to check.
func (f *clusterFlags) unreachable(err error) error {
	if errors.As(err, new(clibase.Failed)) {
		return err // says what to check already
	}
	if f.sasl != "" && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)) {
		return clibase.Failure("%v: the broker closed the connection at SASL %s authentication "+
			"(check that its listener takes SASL, and the mechanism; without SASL leave out --sasl-mechanism and kafka.sasl)", err, f.sasl)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within --timeout %v", f.timeout)
	}
	return clibase.Failure("%v (check --brokers or the file's kafka: settings, and that the cluster is up; --timeout is %v)", err, f.timeout)
}
