package main

import "github.com/fencepost-dev/fencepost/bench/compare/internal/pipebench"

// The search spaces: which knobs each engine's search varies, from which
// starting point, and why (bench/README.md, "Tuning the peers", has the
// results and what its experts' documentation says of each knob). The
// commit interval is 100 ms everywhere it is not itself the knob: a run
// ends when the group has committed the end of the input, and the
// interval bounds what a crash repeats, so every engine pays alike.

// benthosSpace searches Benthos v4.27.0's kafka_franz input, pipeline
// and kafka_franz output (configs/benthos-search.yaml reads every knob
// from the environment, with Benthos's own defaults). It starts from
// small input batches on 2 threads (Base), about twice as fast as the
// "former tuned" trial, and sweeps each knob around it.
func benthosSpace() space {
	batch := func(name, count, period string) trial {
		return trial{Name: name + " " + count + "/" + period, Knob: name,
			Set: map[string]string{name + ".count": count, name + ".period": period}}
	}
	sp := space{Engine: pipebench.Benthos, Config: "benthos-search.yaml",
		Knobs: []knob{
			{Name: "checkpoint_limit", Env: "BENTHOS_CHECKPOINT_LIMIT"},
			{Name: "batching.count", Env: "BENTHOS_BATCH_COUNT"},
			{Name: "batching.period", Env: "BENTHOS_BATCH_PERIOD"},
			{Name: "pipeline.threads", Env: "BENTHOS_THREADS"},
			{Name: "output.max_in_flight", Env: "BENTHOS_MAX_IN_FLIGHT"},
			{Name: "output.batching.count", Env: "BENTHOS_OUT_BATCH_COUNT"},
			{Name: "output.batching.period", Env: "BENTHOS_OUT_BATCH_PERIOD"},
			{Name: "output.compression", Env: "BENTHOS_COMPRESSION"},
			{Name: "output.idempotent_write", Env: "BENTHOS_IDEMPOTENT_WRITE"},
			{Name: "GOGC", Env: "GOGC"},
		},
		Base: trial{Name: "base: small batches, 2 threads", Set: map[string]string{
			"checkpoint_limit": "100000", "batching.count": "250", "batching.period": "2ms",
			"pipeline.threads": "2", "output.max_in_flight": "64"},
			Notes: "checkpoint_limit 100000, input batches of 250 or 2 ms, 2 threads, 64 output batches in flight"},
	}
	sp.Trials = []trial{
		{Name: "defaults", Set: map[string]string{"checkpoint_limit": "1024", "batching.count": "0", "batching.period": "",
			"pipeline.threads": "-1", "output.max_in_flight": "10"}, Notes: "every knob at Benthos's default"},
		{Name: "former tuned", Set: map[string]string{"checkpoint_limit": "20000", "batching.count": "1000", "batching.period": "5ms",
			"pipeline.threads": "-1"}, Notes: "the report's tuned configuration before this search"},
	}
	sp.Trials = append(sp.Trials, sweep("checkpoint_limit", "1024", "10000", "20000", "50000", "500000")...)
	sp.Trials = append(sp.Trials, trial{Name: "batching none", Knob: "batching",
		Set: map[string]string{"batching.count": "0", "batching.period": ""}})
	for _, b := range [][2]string{{"50", "1ms"}, {"100", "2ms"}, {"250", "1ms"}, {"250", "10ms"}, {"500", "2ms"}, {"1000", "5ms"}} {
		sp.Trials = append(sp.Trials, batch("batching", b[0], b[1]))
	}
	sp.Trials = append(sp.Trials, sweep("pipeline.threads", "1", "4")...)
	sp.Trials = append(sp.Trials, sweep("output.max_in_flight", "10", "256")...)
	for _, b := range [][2]string{{"250", "2ms"}, {"1000", "5ms"}} {
		sp.Trials = append(sp.Trials, batch("output.batching", b[0], b[1]))
	}
	sp.Trials = append(sp.Trials, sweep("output.compression", "none", "lz4")...)
	sp.Trials = append(sp.Trials, sweep("output.idempotent_write", "false")...)
	sp.Trials = append(sp.Trials, sweep("GOGC", "200", "400")...)
	return sp
}

// fencepostSpace searches the processor's consumer settings from its
// defaults (configs/fencepost-search.yaml is the defaults' pipeline; a
// trial adds its keys to the consumer section).
func fencepostSpace() space {
	sp := space{Engine: pipebench.Fencepost, Config: "fencepost-search.yaml",
		Knobs: []knob{
			{Name: "concurrency", Consumer: "concurrency"},
			{Name: "fetch_concurrency", Consumer: "fetch_concurrency"},
			{Name: "max_partition_fetch_bytes", Consumer: "max_partition_fetch_bytes"},
			{Name: "buffer_bytes", Consumer: "buffer_bytes"},
			{Name: "commit_interval", Consumer: "commit_interval"},
			{Name: "ordering", Consumer: "ordering"},
			{Name: "GOGC", Env: "GOGC"},
		},
		Base: trial{Name: "base: defaults", Set: map[string]string{}, Notes: "every setting at its default"},
	}
	sp.Trials = append(sp.Trials, sweep("concurrency", "1", "4", "8", "32")...)
	sp.Trials = append(sp.Trials, sweep("fetch_concurrency", "1", "4")...)
	sp.Trials = append(sp.Trials, sweep("max_partition_fetch_bytes", "256KiB", "4MiB")...)
	sp.Trials = append(sp.Trials, sweep("buffer_bytes", "32MiB", "64MiB", "256MiB")...)
	sp.Trials = append(sp.Trials, sweep("commit_interval", "1s")...)
	sp.Trials = append(sp.Trials, sweep("ordering", "key")...)
	sp.Trials = append(sp.Trials, sweep("GOGC", "200", "400")...)
	return sp
}

// streamsSpace searches Kafka Streams 4.1.1 (the app of
// bench/compare/streams) at one guarantee: its throughput knobs and
// the JVM's heap and collector, from the configs/streams-*.properties
// settings (Kafka Streams' defaults but for commit.interval.ms=100) and
// pipebench.DefaultJVM. The exactly_once_v2 search is the shorter one:
// the knobs that moved at_least_once, and the transaction's own.
func streamsSpace(exactlyOnce bool) space {
	sp := space{Engine: pipebench.KafkaStreams, Config: "streams-at-least-once.properties", ExactlyOnce: exactlyOnce, Variant: "at_least_once",
		Knobs: []knob{
			{Name: "num.stream.threads", Prop: "num.stream.threads"},
			{Name: "commit.interval.ms", Prop: "commit.interval.ms"},
			{Name: "producer.linger.ms", Prop: "producer.linger.ms"},
			{Name: "producer.batch.size", Prop: "producer.batch.size"},
			{Name: "statestore.cache.max.bytes", Prop: "statestore.cache.max.bytes"},
			{Name: "consumer.max.poll.records", Prop: "consumer.max.poll.records"},
			{Name: "heap", JVM: "-Xmx"},
			{Name: "gc", JVM: "gc"},
		},
		Base: trial{Name: "base: defaults", Set: map[string]string{}, Notes: "Kafka Streams' defaults, commit.interval.ms=100, " +
			"-Xmx512m -XX:+UseG1GC"},
	}
	if exactlyOnce {
		sp.Config = "streams-exactly-once-v2.properties"
		sp.Variant = "exactly_once_v2"
		sp.Trials = append(sp.Trials, sweep("num.stream.threads", "2", "4")...)
		sp.Trials = append(sp.Trials, sweep("commit.interval.ms", "1000")...)
		sp.Trials = append(sp.Trials, sweep("producer.batch.size", "262144")...)
		sp.Trials = append(sp.Trials, sweep("gc", "Parallel")...)
		sp.Trials = append(sp.Trials, sweep("heap", "1g")...)
		return sp
	}
	sp.Trials = append(sp.Trials, sweep("num.stream.threads", "2", "4")...)
	sp.Trials = append(sp.Trials, sweep("commit.interval.ms", "1000")...)
	sp.Trials = append(sp.Trials, sweep("producer.linger.ms", "5", "20")...)
	sp.Trials = append(sp.Trials, sweep("producer.batch.size", "65536", "262144")...)
	sp.Trials = append(sp.Trials, sweep("statestore.cache.max.bytes", "0")...)
	sp.Trials = append(sp.Trials, sweep("consumer.max.poll.records", "5000")...)
	sp.Trials = append(sp.Trials, sweep("heap", "256m", "1g")...)
	sp.Trials = append(sp.Trials, sweep("gc", "Parallel", "Serial")...)
	return sp
}

// streamsTuned are the settings of the Kafka Streams "tuned" variants,
// the search's result (bench/README.md, "Tuning the peers"): the
// exactly_once_v2 search's best of each, whose three parts also each
// ranked high at at_least_once; streamsTunedALOS, at at_least_once, the
// best of streamsCombosSpace's combinations around it.
var (
	streamsTuned     = map[string]string{"gc": "Parallel", "num.stream.threads": "2", "producer.batch.size": "262144"}
	streamsTunedALOS = map[string]string{"gc": "Serial", "num.stream.threads": "2", "producer.batch.size": "65536"}
)

// streamsCombosSpace is a second at_least_once search: one run of each
// sweep trial left the order of the best knobs within the noise, so
// this one measures their combinations, from streamsTuned.
func streamsCombosSpace() space {
	sp := streamsSpace(false)
	sp.Variant = "at_least_once, combinations"
	sp.Base = trial{Name: "base: tuned (gc Parallel, 2 threads, batch.size 262144)", Set: streamsTuned}
	with := func(name string, extra map[string]string) trial {
		return trial{Name: name, Set: merged(streamsTuned, extra)}
	}
	sp.Trials = []trial{
		{Name: "defaults", Set: map[string]string{"gc": "G1", "num.stream.threads": "1", "producer.batch.size": "16384"}},
		with("+ linger.ms 5", map[string]string{"producer.linger.ms": "5"}),
		with("gc Serial", map[string]string{"gc": "Serial"}),
		with("gc Serial, batch.size 65536", map[string]string{"gc": "Serial", "producer.batch.size": "65536"}),
		with("1 thread", map[string]string{"num.stream.threads": "1"}),
		with("+ max.poll.records 5000", map[string]string{"consumer.max.poll.records": "5000"}),
	}
	return sp
}

// benthosTunedEnv is the environment of "Benthos, tuned" beyond its
// configuration file (configs/benthos-tuned.yaml says why).
var benthosTunedEnv = []string{"GOGC=200"}
