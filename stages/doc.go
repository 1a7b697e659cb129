// Package stages is the stage-plugin API: the [Record] that flows through a
// pipeline, the [Stage] interface every processing step implements, and
// the registry that lets a configuration file name stages.
//
// The pipeline's own steps live in sub-packages named after the shape of
// the pipeline: resolve (start requests to offsets), fetch (multi-partition
// fetches per broker), process (runs the configured stages), commit (the
// fenced commit of the processed watermark). The built-in processing
// stages (filter, map, json, produce, log) are in package builtin.
package stages
