// Package config loads the processor's configuration file: YAML with
// ${VAR} interpolation, checked against pipeline.Config and the option
// specs of the registered stages. Loading reports every problem at once,
// each at its file:line:col with a hint, and returns either a complete,
// validated Config or those problems as Errors: nothing starts
// half-configured.
//
// The file has these top-level keys (all but consumer and pipeline are
// optional):
//
//	kafka:                 # pipeline.KafkaConfig, plus embedded
//	  brokers: [localhost:9092]
//	  sasl: {mechanism: SCRAM-SHA-512, username: app, password: ${KAFKA_PASSWORD}}
//	consumer:              # pipeline.ConsumerConfig
//	  group: enricher
//	  topics: [orders]
//	pipeline:              # the stages, in the order records flow through them
//	  - stage: json        # the registered stage name
//	  - stage: filter
//	    name: big_orders   # optional display name, unique; default: the stage name
//	    if: json.amount > 100   # every other key is an option of the stage
//	dead_letter:           # pipeline.DeadLetterConfig
//	  topic: orders.dlq
//	state:                 # pipeline.StateConfig: where stages with state keep their stores
//	  dir: /var/lib/fencepost/state   # default: fencepost/<group> under $XDG_STATE_HOME or ~/.local/state
//	  store: disk          # or memory
//	  cache_bytes: 64MiB
//	  write_buffer_bytes: 16MiB
//	http:                  # /metrics and /healthz
//	  address: 127.0.0.1:9464   # the default; "" or off disables
//	log:
//	  level: info          # debug, info, warn or error
//	  format: console      # console or json
//	shutdown_timeout: 30s
//	guarantee: at_least_once   # or exactly_once (turns consumer.read_committed on)
//	transaction_timeout: 10s   # exactly_once only; at most 15m, at least 4 × commit_interval
//
// A section written with no value ("tls:", "embedded:") is enabled with
// its defaults. Unknown keys are errors, not ignored: a misspelt key
// would otherwise silently fall back to a default.
//
// A pipeline entry's keys besides stage and name are the stage's options
// (see the "stages" command); stage and name are therefore reserved.
// "pipeline: []" consumes and commits without processing. Each stage is
// built once while the file is checked: the stores a stage declares
// (stages.Stateful) are known then (Stage.Stores), and what pipeline.New
// would refuse about them (a bad or shared store name, ordering: key,
// more than one topic) is reported at the key concerned.
//
// kafka.embedded starts an in-process Kafka-protocol broker instead of
// connecting to one (for development and the quickstart); kafka.brokers
// must then be empty, and is filled in when the broker starts. See
// Embedded.
//
// Interpolation runs on the parsed document, in values only: ${VAR} is the
// environment variable VAR and ${VAR:-default} falls back to default when
// VAR is unset or empty; $${ stands for a literal ${. A value from the
// environment is only ever the value of the key it is written in, taken
// as it is (newlines, quotes and YAML syntax included); in an unquoted
// value the result is typed as YAML types a plain value (so "retries:
// ${N}" is a number). References in comments are left alone; one in a
// key is an error. Every unset variable without a default is reported,
// at once, at its position in the file as written.
//
// Writing 0 where the pipeline would replace it by its default is an
// error (leaving the key out gives the default), except where 0 is a
// documented value (consumer.concurrency). The bounds of values are
// Validate's and internal/limits'; the file itself is bounded too (1MiB,
// 10,000 entries per list, nesting 64 deep, aliases expanding to 100,000
// values), so that a hostile file is refused quickly.
package config
