package config

import (
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/fencepost-dev/fencepost/internal/limits"
	"github.com/fencepost-dev/fencepost/internal/logging"
	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// DefaultHTTPAddress is where /metrics and /healthz are served when the
// file does not set http.address.
const DefaultHTTPAddress = "127.0.0.1:9464"

// Config is a loaded, validated configuration file.
type Config struct {
	// File is the name the configuration was loaded from.
	File string
	// Pipeline is the pipeline's configuration as written (pipeline.New
	// applies the defaults). With Embedded set, Kafka.Brokers is empty
	// until the embedded broker has started.
	Pipeline pipeline.Config
	// Embedded, if set, asks for an in-process broker.
	Embedded *Embedded
	// Stages are the pipeline's stages, in order.
	Stages []Stage
	HTTP   HTTP
	Log    Log
	// warnings are the remarks found while decoding (see Warnings).
	warnings []Warning
	// Redactor hides the secrets the file was loaded with: the values
	// of secret fields (kafka.sasl.password), of the variables used in
	// them, and of every variable named like a secret (KAFKA_PASSWORD,
	// API_TOKEN: see configs/README.md), wherever used. Loading hides
	// them in its errors; run hides them in its logs and errors. Nil if
	// there are none.
	Redactor *logging.Redactor
}

// HTTP configures the endpoint serving /metrics and /healthz.
type HTTP struct {
	// Address is host:port to listen on; empty means disabled.
	Address string
	// Debug also serves Go's profiles (net/http/pprof) under
	// /debug/pprof/ on Address. Off by default: a profile shows the
	// process's memory, which may hold record data, so turn it on only
	// where the address is not reachable by others.
	Debug bool
}

// Log configures logging.
type Log struct {
	// Level is debug, info (the default), warn or error.
	Level string `yaml:"level"`
	// Format is console (the default, for people) or json (for log
	// collectors).
	Format string `yaml:"format"`
}

// fileSchema is the file's layout. The pipeline's sections are the
// pipeline package's own structs: their yaml tags are the keys.
type fileSchema struct {
	Kafka              kafkaSection              `yaml:"kafka"`
	Consumer           pipeline.ConsumerConfig   `yaml:"consumer"`
	Pipeline           stageNodes                `yaml:"pipeline"`
	DeadLetter         pipeline.DeadLetterConfig `yaml:"dead_letter"`
	State              pipeline.StateConfig      `yaml:"state"`
	HTTP               httpSection               `yaml:"http"`
	Log                Log                       `yaml:"log"`
	ShutdownTimeout    time.Duration             `yaml:"shutdown_timeout"`
	Guarantee          pipeline.Guarantee        `yaml:"guarantee"`
	TransactionTimeout time.Duration             `yaml:"transaction_timeout"`
}

type kafkaSection struct {
	pipeline.KafkaConfig `yaml:",inline"`
	Embedded             *Embedded `yaml:"embedded"`
}

type httpSection struct {
	Address *string `yaml:"address"`
	Debug   bool    `yaml:"debug"`
}

// Loader loads configuration files. The zero value resolves stages in
// stages.Default and reads the process environment.
type Loader struct {
	// Registry resolves stage names; nil means stages.Default.
	Registry *stages.Registry
	// LookupEnv reads variables for ${VAR}; nil means os.LookupEnv.
	LookupEnv LookupFunc
}

// Load reads and checks the file at path with stages from reg (nil:
// stages.Default). See Loader.Parse.
func Load(path string, reg *stages.Registry) (*Config, error) {
	return Loader{Registry: reg}.Load(path)
}

// Load reads the file at path and checks it; see Parse. A file larger
// than 1MiB is refused without reading it whole.
func (l Loader) Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, limits.MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return l.Parse(path, src)
}

// Parse checks the configuration src, read from file (the name errors
// carry). It returns a complete, validated Config, or Errors listing
// every problem found: unset variables, YAML syntax, unknown keys, wrong
// types, unknown stages, bad stage options (each stage is built once,
// without a cluster, so that a bad expression is found here), what
// pipeline.Config.Validate rejects, and what run would otherwise change
// silently (a 0 that would mean a default). Unset variables, a YAML
// syntax error, and a file beyond the limits (1MiB, nesting 64 deep)
// stop the checks there: the rest would be guesswork.
func (l Loader) Parse(file string, src []byte) (*Config, error) {
	reg, lookup := l.Registry, l.LookupEnv
	if reg == nil {
		reg = stages.Default
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	probs := &problems{file: file}
	if len(src) > limits.MaxFileBytes {
		probs.add(Position{1, 1}, "", fmt.Sprintf("the file is larger than %v", pipeline.ByteSize(limits.MaxFileBytes)),
			"a configuration is a few kilobytes: check that this is the right file")
		return nil, probs.result()
	}
	text, refs, ok := protect(lineEndings.Replace(strings.TrimPrefix(string(src), "\ufeff")), probs)
	if !ok {
		return nil, probs.result()
	}
	d := &decoder{probs: probs, keys: map[string]Position{}, anchors: map[string]ast.Node{}, empty: map[string]bool{}}
	body := d.parse(text, refs, lookup)
	if body == nil || len(probs.errs) > 0 {
		return nil, probs.result()
	}
	if _, ok := mappingValues(body); !ok {
		d.add(body, "", "the file must be a mapping of sections (kafka:, consumer:, pipeline: ...)", "start from configs/quickstart.yaml")
		return nil, probs.result()
	}
	d.collectAnchors(body)
	var fs fileSchema
	d.decode("", body, reflect.ValueOf(&fs).Elem())
	cfg := &Config{
		File: file,
		Pipeline: pipeline.Config{
			Kafka: fs.Kafka.KafkaConfig, Consumer: fs.Consumer, DeadLetter: fs.DeadLetter, State: fs.State,
			ShutdownTimeout: fs.ShutdownTimeout, Guarantee: fs.Guarantee, TransactionTimeout: fs.TransactionTimeout,
		},
		Embedded: fs.Kafka.Embedded,
		Log:      fs.Log,
	}
	cfg.HTTP = d.http(fs.HTTP)
	d.checkLog(&cfg.Log)
	d.checkEmbedded(cfg)
	d.checkZeros(cfg.Pipeline)
	d.checkReadCommitted(cfg.Pipeline)
	d.checkTLS(cfg.Pipeline.Kafka.TLS)
	d.consumed = cfg.Pipeline.Consumer.Topics
	cfg.Stages = d.stages(reg, fs.Pipeline)
	d.checkState(cfg)
	d.validate(cfg)
	cfg.warnings = d.warnings
	cfg.Redactor = logging.NewRedactor(d.secrets...)
	if len(probs.errs) > 0 {
		probs.scrub(cfg.Redactor)
		return nil, probs.result()
	}
	return cfg, nil
}

// lineEndings turns the line breaks YAML knows (CRLF, CR) into LF, so
// that lines are counted alike everywhere.
var lineEndings = strings.NewReplacer("\r\n", "\n", "\r", "\n")

func (p *problems) result() error {
	p.errs.sort()
	return p.errs
}

// scrub hides the secrets in every key, message and hint, in case one
// was written where a message quotes the value (see logging.Redactor).
// A message about a value that shows part of a secret hides the whole
// value first: the rest of it may hold the secret in pieces too short
// for the redactor to hide on their own.
func (p *problems) scrub(r *logging.Redactor) {
	if r == nil {
		return
	}
	for _, e := range p.errs {
		if e.value != "" && r.Leaks(e.value) {
			e.Msg = strings.ReplaceAll(e.Msg, strconv.Quote(e.value), strconv.Quote(logging.Redacted))
		}
		// A key is never a value, but hiding it too keeps the rule
		// simple: no output shows a part of a secret.
		e.Key, e.Msg, e.Hint = r.Redact(e.Key), r.Redact(e.Msg), r.Redact(e.Hint)
	}
}

func (d *decoder) http(h httpSection) HTTP {
	if h.Address == nil {
		return HTTP{Address: DefaultHTTPAddress, Debug: h.Debug}
	}
	a := strings.TrimSpace(*h.Address)
	if a == "" || strings.EqualFold(a, "off") {
		if h.Debug {
			d.probs.addValue(d.keys["http.debug"], "http.debug", "true", "the profiles are served on http.address, which is off",
				"set http.address (e.g. 127.0.0.1:9464), or remove http.debug")
		}
		return HTTP{}
	}
	_, port, err := net.SplitHostPort(a)
	n, perr := strconv.Atoi(port)
	switch {
	case err != nil || port == "":
		d.probs.addValue(d.keys["http.address"], "http.address", a, fmt.Sprintf("%q is not host:port", a),
			"write e.g. 127.0.0.1:9464 (or :9464 for every interface), or off to disable")
	case perr != nil || n < 0 || n > 65535:
		d.probs.addValue(d.keys["http.address"], "http.address", a, fmt.Sprintf("%q: the port must be a number from 0 to 65535", a),
			"write e.g. 127.0.0.1:9464 (0 picks a free port), or off to disable")
	}
	return HTTP{Address: a, Debug: h.Debug}
}

func (d *decoder) checkLog(l *Log) {
	check := func(key string, v *string, def string, allowed ...string) {
		if *v == "" {
			*v = def
			return
		}
		for _, a := range allowed {
			if strings.EqualFold(*v, a) {
				*v = a
				return
			}
		}
		d.probs.addValue(d.keys[key], key, *v, fmt.Sprintf("%q is not one of %s", *v, strings.Join(allowed, ", ")), "use one of the values listed")
	}
	check("log.level", &l.Level, "info", "debug", "info", "warn", "error")
	check("log.format", &l.Format, "console", "console", "json")
}
