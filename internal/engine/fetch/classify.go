package fetch

import "github.com/fencepost-dev/fencepost/internal/kafkawire"

// outcomes maps the shared classification (kafkawire.Classify, the same
// the resolve step, the producer and the group member use) to a fetch
// Outcome. A corrupt record (kafkawire.Permanent: the only records a
// fetch can be refused) is Fatal. The classes of other requests'
// answers (coordinators, fencing, the group member's, the producer's
// sequence) never answer a fetch: should one, it is retried and logged
// like an unexpected code.
var outcomes = [...]Outcome{
	kafkawire.OK:             OK,
	kafkawire.OutOfRange:     OffsetOutOfRange,
	kafkawire.StaleMetadata:  NotLeader,
	kafkawire.NotCoordinator: Retriable,
	kafkawire.Retriable:      Retriable,
	kafkawire.Permanent:      Fatal,
	kafkawire.Fencing:        Retriable,
	kafkawire.StaleMember:    Retriable,
	kafkawire.ProducerState:  Retriable,
	kafkawire.Fatal:          Fatal,
	kafkawire.Unexpected:     Retriable,
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
