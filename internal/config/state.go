package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/fencepost-dev/fencepost/pipeline"
	"github.com/fencepost-dev/fencepost/stages"
)

// Stores returns the stores the pipeline's stages declare, in pipeline
// order: each is kept per input partition under state.dir and in the
// changelog topic <group>-<store>-changelog.
func (c *Config) Stores() []string {
	var out []string
	for _, s := range c.Stages {
		out = append(out, s.Stores...)
	}
	return out
}

// checkState checks the state section and what stages with state need,
// as pipeline.New would refuse it: valid store names, each declared by
// one stage, one consumed topic, ordering: partition. It warns about a
// state section no stage uses, and about state.dir with store: memory.
func (d *decoder) checkState(cfg *Config) {
	st := cfg.Pipeline.State
	if st.Dir != "" {
		d.checkStateDir(st.Dir)
		if st.Store == pipeline.StoreMemory {
			d.warn("state.dir", "state.store: memory keeps nothing on disk: state.dir is not used",
				"remove state.dir, or use store: disk to keep the stores across restarts")
		}
	}
	var stores []string
	owner := map[string]Stage{}
	for _, s := range cfg.Stages {
		for _, n := range s.Stores {
			if err := stages.ValidStoreName(n); err != nil {
				d.probs.add(s.Pos, s.Key, fmt.Sprintf("stage %s: %v", s.Name, err),
					"if the stage takes the store's name as an option, change it; else tell the stage's authors")
				continue
			}
			if first, dup := owner[n]; dup {
				d.probs.add(s.Pos, s.Key, fmt.Sprintf("stage %s declares store %q, as stage %s does (line %d): each store belongs to one stage",
					s.Name, n, first.Name, first.Pos.Line), "give one of them another store name, if its options allow")
				continue
			}
			owner[n] = s
			stores = append(stores, n)
		}
	}
	if len(stores) == 0 {
		if _, written := d.keys["state"]; written {
			d.warn("state", "no stage declares a store: the state section has no effect",
				"remove it, or add the stage with state it is for")
		}
		return
	}
	list := strings.Join(stores, ", ")
	c := cfg.Pipeline.Consumer
	if c.Ordering == pipeline.OrderByKey && !d.reported("consumer.ordering") {
		d.probs.add(d.keyPos("consumer.ordering"), "consumer.ordering",
			fmt.Sprintf("key: stages with state (stores %s) need ordering: partition, as a partition's store is used by one batch at a time", list),
			"remove ordering (partition is the default)")
	}
	if len(c.Topics) > 1 && !d.reported("consumer.topics") {
		d.probs.add(d.keyPos("consumer.topics"), "consumer.topics",
			fmt.Sprintf("stages with state (stores %s) read one topic, as a store's changelog partition is its input partition; found %d", list, len(c.Topics)),
			"run one pipeline per topic, each with its own consumer.group")
	}
}

// checkStateDir reports a state.dir the processor could not use: one
// that is, or is under, something other than a directory.
func (d *decoder) checkStateDir(dir string) {
	const key = "state.dir"
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil && !fi.IsDir() {
			d.probs.add(d.keys[key], key, fmt.Sprintf("%s is not a directory", p),
				"name a directory the processor can write, or one to create, or leave dir out for the default")
			return
		}
		if err == nil || filepath.Dir(p) == p {
			return
		}
	}
}
