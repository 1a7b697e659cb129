package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/fencepost-dev/fencepost/internal/limits"
	"github.com/fencepost-dev/fencepost/pipeline"
)

// zeroMeansSomething are the numeric keys where a written 0 is a value of
// its own, documented as such, rather than the default in disguise.
var zeroMeansSomething = map[string]bool{
	"consumer.concurrency":       true, // one per CPU
	"consumer.fetch_concurrency": true, // chosen from the partitions per broker
}

// checkZeros reports every number written as 0 that the pipeline would
// replace by its default: "commit_interval: 0" reads as "commit at once"
// and "retries: 0" as "no retries", but both would silently mean the
// default. Leaving the key out says "the default"; writing 0 is refused.
func (d *decoder) checkZeros(pc pipeline.Config) {
	d.zeros("", reflect.ValueOf(pc), reflect.ValueOf(pc.WithDefaults()))
}

func (d *decoder) zeros(path string, v, def reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		idx, names := fields(v.Type())
		for _, name := range names {
			d.zeros(join(path, name), v.FieldByIndex(idx[name]), def.FieldByIndex(idx[name]))
		}
	case reflect.Pointer:
		if !v.IsNil() && !def.IsNil() {
			d.zeros(path, v.Elem(), def.Elem())
		}
	case reflect.Int, reflect.Int64:
		if zeroMeansSomething[path] || !d.zeroMeansDefault(path, v.Int(), def.Int()) {
			return
		}
		hint := "leave the key out for the default, or write the value you mean"
		if path == "dead_letter.retries" {
			hint = "leave the key out for the default, or write -1 for no retries"
		}
		d.probs.add(d.keys[path], path, fmt.Sprintf("0 would mean the default, %v", def.Interface()), hint)
	}
}

// zeroMeansDefault reports whether path was written as 0 (not left
// empty) where 0 would silently mean its non-zero default def, and
// nothing was reported at path yet: a problem to report.
func (d *decoder) zeroMeansDefault(path string, v, def int64) bool {
	_, written := d.keys[path]
	return written && !d.empty[path] && v == 0 && def != 0 && !d.reported(path)
}

// checkReadCommitted refuses consumer.read_committed: false with
// guarantee: exactly_once, which reads read_committed whatever the file
// says: run would otherwise change the value silently.
func (d *decoder) checkReadCommitted(pc pipeline.Config) {
	const key = "consumer.read_committed"
	pos, written := d.keys[key]
	if !written || d.empty[key] || pc.Consumer.ReadCommitted || pc.Guarantee != pipeline.ExactlyOnce || d.reported(key) {
		return
	}
	d.probs.add(pos, key, "false contradicts guarantee: exactly_once, which reads only committed records",
		"remove read_committed (exactly_once turns it on), or use guarantee: at_least_once")
}

// checkTLS reads the files kafka.tls names, as run will: a missing or
// unreadable file is reported here rather than when connecting.
func (d *decoder) checkTLS(t *pipeline.TLS) {
	if t == nil || (t.CertFile == "") != (t.KeyFile == "") {
		return // nothing to read, or Validate reports the pair
	}
	ok := true
	for _, f := range []struct{ key, path string }{
		{"kafka.tls.ca_file", t.CAFile}, {"kafka.tls.cert_file", t.CertFile}, {"kafka.tls.key_file", t.KeyFile},
	} {
		if fi, err := os.Stat(f.path); f.path != "" && err == nil && (!fi.Mode().IsRegular() || fi.Size() > limits.MaxFileBytes) {
			d.probs.add(d.keyPos(f.key), f.key, fmt.Sprintf("%s is not a regular file of at most %v", f.path, pipeline.ByteSize(limits.MaxFileBytes)),
				"name a PEM file")
			ok = false
		}
	}
	if !ok {
		return // not read: a device could be endless
	}
	_, err := t.Config()
	if err == nil {
		return
	}
	key, msg, ok := strings.Cut(err.Error(), ": ")
	if !ok {
		key, msg = "kafka.tls", err.Error()
	}
	key, _, _ = strings.Cut(key, "/") // kafka.tls.cert_file/key_file
	d.probs.add(d.keyPos(key), key, msg, "the file must exist, be readable by the processor, and hold PEM")
}
