package builtin_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/fencepost-dev/fencepost/stages"
)

// TestSpecs pins the stage names and options: configuration files, lint
// and the stage listing are generated from them, so a change here is a
// change of the configuration format.
func TestSpecs(t *testing.T) {
	type opt struct {
		name     string
		typ      stages.OptionType
		required bool
		def      any
		enum     []string
	}
	logOpts := []opt{
		{"format", stages.TypeString, false, "text", []string{"text", "json", "value"}},
		{"every", stages.TypeInt, false, 1, nil},
	}
	want := map[string][]opt{
		"filter": {{"if", stages.TypeExpr, true, nil, nil}},
		"map": {
			{"value", stages.TypeExpr, false, nil, nil},
			{"key", stages.TypeExpr, false, nil, nil},
			{"headers", stages.TypeStringMap, false, nil, nil},
		},
		"json": {{"require", stages.TypeStringList, false, nil, nil}},
		"produce": {
			{"topic", stages.TypeString, true, nil, nil},
			{"key", stages.TypeExpr, false, nil, nil},
			{"value", stages.TypeExpr, false, nil, nil},
			{"headers", stages.TypeStringMap, false, nil, nil},
		},
		"log":    logOpts,
		"stdout": logOpts,
		"join": {
			{"table", stages.TypeString, true, nil, nil},
			{"key", stages.TypeExpr, false, nil, nil},
			{"repartition", stages.TypeBool, false, true, nil},
			{"as", stages.TypeString, false, "table", nil},
			{"type", stages.TypeString, false, "left", []string{"left", "inner"}},
			{"global", stages.TypeBool, false, false, nil},
		},
		"repartition": {
			{"key", stages.TypeExpr, true, nil, nil},
			{"topic", stages.TypeString, false, "repartition", nil},
		},
		"aggregate": {
			{"key", stages.TypeExpr, false, nil, nil},
			{"repartition", stages.TypeBool, false, true, nil},
			{"window", stages.TypeStringMap, false, nil, nil},
			{"time", stages.TypeExpr, false, nil, nil},
			{"fields", stages.TypeStringMap, true, nil, nil},
			{"emit", stages.TypeString, false, nil, []string{"on_update", "on_close"}},
			{"late", stages.TypeString, false, "drop", []string{"drop", "dead_letter"}},
			{"max_future", stages.TypeDuration, false, 24 * time.Hour, nil},
			{"store", stages.TypeString, false, "aggregate", nil},
		},
		"dedupe": {
			{"key", stages.TypeExpr, false, nil, nil},
			{"repartition", stages.TypeBool, false, true, nil},
			{"within", stages.TypeDuration, true, nil, nil},
			{"time", stages.TypeExpr, false, nil, nil},
			{"store", stages.TypeString, false, "dedupe", nil},
		},
	}
	specs := stages.Default.Specs()
	if len(specs) != len(want) {
		t.Errorf("%d stages registered, want %d", len(specs), len(want))
	}
	for _, s := range specs {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected stage %q", s.Name)
			continue
		}
		if s.Summary == "" || s.New == nil {
			t.Errorf("%s: missing Summary or New", s.Name)
		}
		var got []opt
		for _, o := range s.Options {
			if o.Doc == "" {
				t.Errorf("%s: option %s has no Doc", s.Name, o.Name)
			}
			got = append(got, opt{o.Name, o.Type, o.Required, o.Default, o.Enum})
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s options:\n got %+v\nwant %+v", s.Name, got, w)
		}
	}
}

// TestExactlyOnceFlags pins which built-in stages take part in
// exactly-once (stages.Spec.ExactlyOnce): those whose only effects are
// the records they return and write through Env.Producer. log and stdout
// print, which no transaction can take back. A new built-in stage must
// be added here, with its decision.
func TestExactlyOnceFlags(t *testing.T) {
	want := map[string]bool{
		"filter":  true,  // drops records: its output only
		"map":     true,  // rewrites records: its output only
		"json":    true,  // fails records: its output only
		"produce": true,  // writes through Env.Producer only
		"log":     false, // prints to standard output
		"stdout":  false, // the same stage as log
		// re-keys records; the pipeline writes them in the transaction
		"repartition": true,
		// reads a table, returns records: its output only
		"join": true,
		// state in their store only (its changes are in the transaction),
		// output the records they return
		"aggregate": true,
		"dedupe":    true,
	}
	specs := stages.Default.Specs()
	if len(specs) != len(want) {
		t.Errorf("%d stages registered, want %d: decide the flag of every new one here", len(specs), len(want))
	}
	for _, s := range specs {
		w, ok := want[s.Name]
		if !ok {
			t.Errorf("stage %q has no decision in this table", s.Name)
			continue
		}
		if s.ExactlyOnce != w {
			t.Errorf("%s: ExactlyOnce = %v, want %v", s.Name, s.ExactlyOnce, w)
		}
	}
}
