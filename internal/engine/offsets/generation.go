package offsets

// Generation is a consumer-group generation as the group coordinator
// numbers it. Offsets are committed under the generation that processed
// them; a commit from an old generation is never sent.
type Generation int32

// NoGeneration is the generation of partitions that are not managed by a
// consumer group (for example in tests and the stage harness).
const NoGeneration Generation = -1
