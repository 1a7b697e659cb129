package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

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
}

// HTTP configures the endpoint serving /metrics and /healthz.
type HTTP struct {
	// Address is host:port to listen on; empty means disabled.
	Address string
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
	Kafka           kafkaSection              `yaml:"kafka"`
	Consumer        pipeline.ConsumerConfig   `yaml:"consumer"`
	Pipeline        stageNodes                `yaml:"pipeline"`
	DeadLetter      pipeline.DeadLetterConfig `yaml:"dead_letter"`
	HTTP            httpSection               `yaml:"http"`
	Log             Log                       `yaml:"log"`
	ShutdownTimeout time.Duration             `yaml:"shutdown_timeout"`
}

type kafkaSection struct {
	pipeline.KafkaConfig `yaml:",inline"`
	Embedded             *Embedded `yaml:"embedded"`
}

type httpSection struct {
	Address *string `yaml:"address"`
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

// Load reads the file at path and checks it; see Parse.
func (l Loader) Load(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	return l.Parse(path, src)
}

// Parse checks the configuration src, read from file (the name errors
// carry). It returns a complete, validated Config, or Errors listing
// every problem found: unset variables, YAML syntax, unknown keys, wrong
// types, unknown stages, bad stage options (each stage is built once,
// without a cluster, so that a bad expression is found here), and what
// pipeline.Config.Validate rejects. Unset variables, and a YAML syntax
// error, stop the checks there: the rest would be guesswork.
func (l Loader) Parse(file string, src []byte) (*Config, error) {
	reg, lookup := l.Registry, l.LookupEnv
	if reg == nil {
		reg = stages.Default
	}
	if lookup == nil {
		lookup = os.LookupEnv
	}
	probs := &problems{file: file}
	text, pm := interpolate(src, lookup, probs)
	if len(probs.errs) > 0 {
		return nil, probs.result()
	}
	d := &decoder{probs: probs, pm: pm, keys: map[string]Position{}, anchors: map[string]ast.Node{}}
	body := d.parse(text)
	if body == nil {
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
			Kafka: fs.Kafka.KafkaConfig, Consumer: fs.Consumer, DeadLetter: fs.DeadLetter,
			ShutdownTimeout: fs.ShutdownTimeout,
		},
		Embedded: fs.Kafka.Embedded,
		Log:      fs.Log,
	}
	cfg.HTTP = d.http(fs.HTTP)
	d.checkLog(&cfg.Log)
	d.checkEmbedded(cfg)
	cfg.Stages = d.stages(reg, fs.Pipeline)
	d.validate(cfg)
	if len(probs.errs) > 0 {
		probs.scrub(d.secrets)
		return nil, probs.result()
	}
	return cfg, nil
}

func (p *problems) result() error {
	p.errs.sort()
	return p.errs
}

// scrub replaces the values of secrets in every message and hint, in
// case one was also written where a message quotes the value.
func (p *problems) scrub(secrets []string) {
	for _, e := range p.errs {
		for _, s := range secrets {
			e.Msg = strings.ReplaceAll(e.Msg, s, "[redacted]")
			e.Hint = strings.ReplaceAll(e.Hint, s, "[redacted]")
		}
	}
}

// parse parses the interpolated text into one document's body; nil after
// reporting why not.
func (d *decoder) parse(text string) ast.Node {
	f, err := parser.ParseBytes([]byte(text), 0, parser.AllowDuplicateMapKey())
	if err != nil {
		var ye yaml.Error
		pos, msg := Position{1, 1}, err.Error()
		if errors.As(err, &ye) {
			msg = ye.GetMessage()
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				pos = d.pm.source(Position{tk.Position.Line, tk.Position.Column})
			}
		}
		d.probs.add(pos, "", "YAML syntax: "+msg, "check the indentation and quoting around here")
		return nil
	}
	var docs []ast.Node
	for _, doc := range f.Docs {
		if doc.Body != nil {
			docs = append(docs, doc.Body)
		}
	}
	switch {
	case len(docs) == 0:
		d.probs.add(Position{1, 1}, "", "the file is empty", "start from configs/quickstart.yaml")
		return nil
	case len(docs) > 1:
		d.probs.add(d.pos(docs[1]), "", "more than one YAML document (---) in the file", "keep one configuration per file")
		return nil
	}
	return docs[0]
}

func (d *decoder) http(h httpSection) HTTP {
	if h.Address == nil {
		return HTTP{Address: DefaultHTTPAddress}
	}
	a := strings.TrimSpace(*h.Address)
	if a == "" || strings.EqualFold(a, "off") {
		return HTTP{}
	}
	if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
		d.probs.add(d.keys["http.address"], "http.address", fmt.Sprintf("%q is not host:port", a),
			"write e.g. 127.0.0.1:9464 (or :9464 for every interface), or off to disable")
	}
	return HTTP{Address: a}
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
		d.probs.add(d.keys[key], key, fmt.Sprintf("%q is not one of %s", *v, strings.Join(allowed, ", ")), "use one of the values listed")
	}
	check("log.level", &l.Level, "info", "debug", "info", "warn", "error")
	check("log.format", &l.Format, "console", "console", "json")
}
