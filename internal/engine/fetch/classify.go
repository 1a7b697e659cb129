package fetch

import "github.com/fencepost-dev/fencepost/internal/kafkawire"

// outcomes maps the shared classification (kafkawire.Classify, the same
// the resolve step uses) to a fetch Outcome.
var outcomes = [...]Outcome{
	kafkawire.OK:            OK,
	kafkawire.OutOfRange:    OffsetOutOfRange,
	kafkawire.StaleMetadata: NotLeader,
	kafkawire.Retriable:     Retriable,
	kafkawire.Fatal:         Fatal,
}

func outcomeOf(c kafkawire.Class) Outcome {
	if int(c) < len(outcomes) {
		return outcomes[c]
	}
	return Retriable
}

// classify maps a partition's error code to an Outcome.
func classify(code int16) Outcome { return outcomeOf(kafkawire.ClassifyCode(code)) }

// classifyRequestError maps an error of a whole request (transport,
// routing, a top-level error code) to an Outcome for every partition in
// it.
func classifyRequestError(err error) Outcome { return outcomeOf(kafkawire.Classify(err)) }
