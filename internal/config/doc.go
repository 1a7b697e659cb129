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
//	  sasl: {mechanism: SCRAM-SHA-512, username: app, password: "${KAFKA_PASSWORD}"}
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
//	http:                  # /metrics and /healthz
//	  address: 127.0.0.1:9464   # the default; "" or off disables
//	log:
//	  level: info          # debug, info, warn or error
//	  format: console      # console or json
//	shutdown_timeout: 30s
//
// A section written with no value ("tls:", "embedded:") is enabled with
// its defaults. Unknown keys are errors, not ignored: a misspelt key
// would otherwise silently fall back to a default.
//
// A pipeline entry's keys besides stage and name are the stage's options
// (see the "stages" command); stage and name are therefore reserved.
// "pipeline: []" consumes and commits without processing.
//
// kafka.embedded starts an in-process Kafka-protocol broker instead of
// connecting to one (for development and the quickstart); kafka.brokers
// must then be empty, and is filled in when the broker starts. See
// Embedded.
//
// Interpolation runs over the raw text before it is parsed: ${VAR} is the
// environment variable VAR and ${VAR:-default} falls back to default when
// VAR is unset or empty. $${ stands for a literal ${. References in
// comments are left alone. Every unset variable without a default is
// reported, at once. Values are inserted as they are, so quote a
// reference whose value may hold YAML syntax ("${KAFKA_PASSWORD}").
package config
