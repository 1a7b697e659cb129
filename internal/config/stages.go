package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"

	"github.com/fencepost-dev/fencepost/stages"
)

// Stage is one configured stage of the pipeline.
type Stage struct {
	// Name is the stage's display name, unique in the pipeline: the
	// entry's name, else the stage name (a stage used more than once
	// needs names).
	Name string
	// Spec is the registered stage.
	Spec stages.Spec
	// Options are the checked options, with defaults applied.
	Options stages.Options
	// Pos is where the entry starts in the file.
	Pos Position
	// Key is the entry's key path, such as "pipeline[2]", as errors and
	// warnings about it name it.
	Key string
	// AllowLoop is the entry's allow_loop: it may write to a topic the
	// pipeline consumes.
	AllowLoop bool
	// Outputs are the topics the stage asked a producer for when it was
	// built at load time (stages.Env.Producer): where it writes.
	Outputs []string
	// Stores are the stores the stage declared (stages.Stateful) when it
	// was built at load time: each keeps its state under state.dir and in
	// the changelog topic <group>-<store>-changelog.
	Stores []string
}

// Build builds the stage in env. The options were checked when the file
// was loaded, so an error here comes from env (a producer that cannot be
// created, say).
func (s Stage) Build(env stages.Env) (stages.Stage, error) {
	st, err := newStage(s.Spec, s.Options, env)
	if err != nil {
		return nil, fmt.Errorf("stage %s (line %d): %w", s.Name, s.Pos.Line, err)
	}
	return st, nil
}

// newStage calls the spec's New, turning a panic into an error wrapping
// errPanic.
func newStage(spec stages.Spec, opts stages.Options, env stages.Env) (st stages.Stage, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, err = nil, fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return spec.Build(opts, env)
}

// stageNodes holds the pipeline list's nodes until the stages are
// resolved.
type stageNodes struct {
	present bool
	items   []ast.Node
}

func (s *stageNodes) decodeNode(d *decoder, path string, n ast.Node) {
	seq, ok := n.(*ast.SequenceNode)
	if !ok {
		d.add(n, path, fmt.Sprintf("want a list of stages, found %s", kindOf(n)), "write one \"- stage: <name>\" entry per stage")
		return
	}
	s.present = true
	if d.within(n, path, len(seq.Values)) {
		s.items = seq.Values
	}
}

// reserved are the keys of a pipeline entry that are not stage options.
var reserved = []string{"stage", "name", "allow_loop"}

// entry is one pipeline entry as written.
type entry struct {
	path      string
	node      ast.Node
	stageNode ast.Node
	name      string
	nameNode  ast.Node
	allowLoop bool
	opts      map[string][2]ast.Node // key and value nodes
	optOrder  []string
	failed    map[string]bool // options whose alias could not be followed (reported)
}

func (d *decoder) stages(reg *stages.Registry, sn stageNodes) []Stage {
	if !sn.present {
		d.probs.add(Position{1, 1}, "pipeline", "no pipeline: list the stages records go through",
			"add pipeline: with \"- stage: <name>\" entries (see the stages command), or pipeline: [] to consume and commit only")
		return nil
	}
	var out []Stage
	names := map[string]Position{}
	for i, item := range sn.items {
		e := d.entry(fmt.Sprintf("pipeline[%d]", i), item)
		if e == nil {
			continue
		}
		st, ok := d.stage(reg, e)
		if !ok {
			continue
		}
		st.Name, st.Key = e.name, e.path
		if st.Name == "" {
			st.Name = st.Spec.Name
		}
		if first, dup := names[st.Name]; dup {
			at := e.node
			if e.nameNode != nil {
				at = e.nameNode
			}
			d.add(at, e.path+".name", fmt.Sprintf("stage name %q is already used (line %d)", st.Name, first.Line),
				"give each entry its own name: ..., as errors, logs and dead letters call it")
			continue
		}
		names[st.Name] = st.Pos
		out = append(out, st)
	}
	return out
}

// entry splits a pipeline entry into stage, name and options.
func (d *decoder) entry(path string, item ast.Node) *entry {
	item = d.resolve(path, item)
	if isNull(item) {
		return nil
	}
	e := &entry{path: path, node: item, opts: map[string][2]ast.Node{}, failed: map[string]bool{}}
	ok := d.forEachKey(path, item, func(key string, kn, vn ast.Node) {
		raw := vn
		if vn = d.resolve(path+"."+key, vn); vn == nil && !isNull(raw) {
			e.failed[key] = true
			return
		}
		switch key {
		case "stage":
			e.stageNode = vn
		case "name":
			s, ok := scalarText(vn)
			if !ok || strings.TrimSpace(s) == "" {
				d.add(kn, path+".name", "want a non-empty name", "name the entry, as errors, logs and dead letters call it; or leave name out")
				return
			}
			e.name, e.nameNode = s, vn
		case "allow_loop":
			b, ok := vn.(*ast.BoolNode)
			if !ok {
				d.add(vn, path+".allow_loop", fmt.Sprintf("want true or false, found %s", kindOf(vn)),
					"write allow_loop: true to let the stage write to a consumed topic")
				return
			}
			e.allowLoop = b.Value
		default:
			e.opts[key] = [2]ast.Node{kn, vn}
			e.optOrder = append(e.optOrder, key)
		}
	})
	if !ok {
		d.add(item, path, fmt.Sprintf("want a stage entry (a mapping), found %s", kindOf(item)), "write \"- stage: <name>\" followed by the stage's options")
		return nil
	}
	if e.failed["stage"] {
		return nil // its alias was reported
	}
	if e.stageNode == nil || isNull(e.stageNode) {
		d.add(item, path+".stage", "the entry has no stage key", "add stage: <name> (the stages command lists them)")
		return nil
	}
	return e
}

// stage resolves an entry against the registry and checks its options.
func (d *decoder) stage(reg *stages.Registry, e *entry) (Stage, bool) {
	name, ok := scalarText(e.stageNode)
	if _, isStr := e.stageNode.(*ast.StringNode); !ok || !isStr {
		d.add(e.stageNode, e.path+".stage", fmt.Sprintf("want a stage name, found %s", kindOf(e.stageNode)), "write stage: <name> (the stages command lists them)")
		return Stage{}, false
	}
	spec, found := reg.Lookup(name)
	if !found {
		var known []string
		for _, s := range reg.Specs() {
			known = append(known, s.Name)
		}
		hint := "no stages are registered in this binary: import the packages that register them"
		if len(known) > 0 {
			hint = didYouMean(name, known) + "registered stages: " + strings.Join(known, ", ")
		}
		d.add(e.stageNode, e.path+".stage", fmt.Sprintf("unknown stage %q", name), hint)
		return Stage{}, false
	}
	before := len(d.probs.errs)
	opts, bad := d.options(spec, e)
	st := Stage{Spec: spec, Options: opts, Pos: d.pos(e.node), AllowLoop: e.allowLoop}
	if len(bad) == 0 {
		st.Outputs, st.Stores = d.lintBuild(st, e, nil)
		d.checkLoop(st, e)
		return st, len(d.probs.errs) == before
	}
	// Build it anyway, with the bad options at their defaults, so that
	// what only the factory checks about the others is reported too.
	if subst, ok := substitute(spec, opts, bad); ok {
		d.lintBuild(Stage{Spec: spec, Options: subst}, e, bad)
	}
	return st, false
}

// substitute returns opts with the options in bad set to their defaults,
// or left out; ok is false if a bad option is required and has no
// default (the stage cannot be built without it).
func substitute(spec stages.Spec, opts stages.Options, bad map[string]bool) (stages.Options, bool) {
	out := maps.Clone(opts)
	for _, o := range spec.Options {
		switch {
		case !bad[o.Name]:
		case o.Default != nil:
			out[o.Name] = o.Default
		case o.Required:
			return nil, false
		default:
			delete(out, o.Name)
		}
	}
	return out, true
}

// options decodes an entry's options to their Go types (reporting each
// decoding error at its value), then checks them against the spec with
// stages.Spec.Check, the rules every caller of a stage factory applies,
// and reports each problem at the option it concerns. bad names the
// options with a problem.
func (d *decoder) options(spec stages.Spec, e *entry) (opts stages.Options, bad map[string]bool) {
	var valid []string
	for _, o := range spec.Options {
		valid = append(valid, o.Name)
	}
	given := stages.Options{}
	undecoded := maps.Clone(e.failed)
	for _, key := range e.optOrder {
		kn, vn := e.opts[key][0], e.opts[key][1]
		i := slices.IndexFunc(spec.Options, func(o stages.OptionSpec) bool { return o.Name == key })
		if i < 0 || slices.Contains(reserved, key) {
			given[key] = nil // reported as unknown by Check
			continue
		}
		if v, ok := d.option(e.path+"."+key, spec.Options[i], kn, vn); ok {
			given[key] = v
		} else {
			undecoded[key] = true
		}
	}
	opts, probs := spec.Check(given)
	bad = maps.Clone(undecoded)
	for _, p := range probs {
		bad[p.Option] = true
		path := e.path + "." + p.Option
		node := e.stageNode
		if nodes, ok := e.opts[p.Option]; ok {
			node = nodes[1]
		}
		switch {
		case undecoded[p.Option]:
			// already reported where its value failed to decode
		case errors.Is(p, stages.ErrUnknownOption):
			hint := fmt.Sprintf("stage %s takes no options", spec.Name)
			if len(valid) > 0 {
				hint = didYouMean(p.Option, valid) + fmt.Sprintf("options of %s: %s", spec.Name, strings.Join(valid, ", "))
			}
			d.add(e.opts[p.Option][0], path, fmt.Sprintf("stage %s has no option %q", spec.Name, p.Option), hint)
		case errors.Is(p, stages.ErrMissingOption):
			o := spec.Options[slices.IndexFunc(spec.Options, func(o stages.OptionSpec) bool { return o.Name == p.Option })]
			d.add(e.stageNode, e.path, fmt.Sprintf("stage %s needs option %q (%s)", spec.Name, o.Name, o.Type), optionHint(o))
		case errors.Is(p, stages.ErrOptionNotInEnum):
			o := spec.Options[slices.IndexFunc(spec.Options, func(o stages.OptionSpec) bool { return o.Name == p.Option })]
			d.add(node, path, strings.TrimPrefix(p.Err.Error(), stages.ErrOptionNotInEnum.Error()+": "), optionHint(o))
		default:
			d.add(node, path, fmt.Sprintf("stage %s: %v", spec.Name, p), "this is a bug in the stage's spec: tell its authors")
		}
	}
	return opts, bad
}

// option converts one option value to its Go type.
func (d *decoder) option(path string, o stages.OptionSpec, kn, n ast.Node) (any, bool) {
	if isNull(n) {
		d.add(kn, path, "the option has no value", optionHint(o))
		return nil, false
	}
	t := o.Type.GoType()
	if t == nil {
		d.add(n, path, fmt.Sprintf("the stage declares option type %q, which configuration files cannot express", o.Type), "this is a bug in the stage's spec")
		return nil, false
	}
	before := len(d.probs.errs)
	v := reflect.New(t).Elem()
	d.decode(path, n, v)
	if len(d.probs.errs) > before {
		return nil, false
	}
	return v.Interface(), true
}

var errPanic = errors.New("its New function panicked")

// lintEnv is the environment stages are built in at load time: no
// cluster and no output. Its Producer appends the topic to outputs and
// returns a producer that refuses every write (the stage is closed
// without processing anything): so the file knows where each stage
// writes.
func lintEnv(outputs *[]string) stages.Env {
	return stages.Env{Log: stages.NopLogger, Stdout: io.Discard, Producer: func(topic string) (stages.Producer, error) {
		*outputs = append(*outputs, topic)
		return lintProducer{}, nil
	}}
}

// lintProducer is the producer stages get at load time.
type lintProducer struct{}

func (lintProducer) Produce(context.Context, []stages.Record) error {
	return errors.New("no cluster: the configuration is being checked, not run")
}

// checkLoop reports each topic st writes to that the pipeline consumes,
// unless the entry allows it (allow_loop: true): every record written
// there would be read again, and again (5 records became 10,564 in 3 s).
func (d *decoder) checkLoop(st Stage, e *entry) {
	if st.AllowLoop {
		return
	}
	for _, topic := range st.Outputs {
		i := slices.Index(d.consumed, topic)
		if i < 0 {
			continue
		}
		node, path := e.stageNode, e.path
		for _, key := range e.optOrder { // the option naming the topic
			if s, ok := scalarText(e.opts[key][1]); ok && s == topic {
				node, path = e.opts[key][1], e.path+"."+key
				break
			}
		}
		d.probs.addValue(d.pos(node), path, topic,
			fmt.Sprintf("stage %s writes to %q, which the pipeline consumes (consumer.topics[%d]): every record written would be read again, without end", st.Spec.Name, topic, i),
			"write to another topic; if the pipeline ends the loop itself (a filter before this stage drops what it wrote), add allow_loop: true to this entry")
	}
}

// lintBuild builds the stage once so that what only its factory checks
// (an expression that does not compile) is reported now, at the
// option's position when the factory says which option. Errors about
// the options in skip, and errors naming no option when skip is set, are
// left out: they were reported, or may come from a substituted value.
// It returns the topics the stage asked a producer for and the stores it
// declares.
func (d *decoder) lintBuild(st Stage, e *entry, skip map[string]bool) (outputs, stores []string) {
	s, err := newStage(st.Spec, st.Options, lintEnv(&outputs))
	if errors.Is(err, stages.ErrNoProducer) {
		// A stage that needs more of a cluster than a producer: the
		// options were checked first.
		return outputs, nil
	}
	if err != nil {
		var oe *stages.OptionError
		isOption := errors.As(err, &oe)
		if skip != nil && (!isOption || skip[oe.Option]) {
			return outputs, nil
		}
		if isOption {
			node := e.stageNode
			path := e.path
			if given, ok := e.opts[oe.Option]; ok {
				node, path = given[1], e.path+"."+oe.Option
			}
			d.add(node, path, fmt.Sprintf("stage %s: option %q: %v", st.Spec.Name, oe.Option, oe.Err), optionDoc(st.Spec, oe.Option))
			return outputs, nil
		}
		hint := "check the stage's options (the stages command documents them)"
		if errors.Is(err, errPanic) {
			hint = "this is a bug in the stage: tell its authors"
		}
		d.add(e.stageNode, e.path, fmt.Sprintf("stage %s: %v", st.Spec.Name, err), hint)
		return outputs, nil
	}
	if sf, ok := s.(stages.Stateful); ok {
		stores = slices.Clone(sf.Stores())
	}
	if c, ok := s.(stages.Closer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	}
	return outputs, stores
}

func optionDoc(spec stages.Spec, name string) string {
	for _, o := range spec.Options {
		if o.Name == name {
			return optionHint(o)
		}
	}
	return "the stages command documents the stage's options"
}

// optionHint is an option's documentation, or where to find it.
func optionHint(o stages.OptionSpec) string {
	if doc := strings.Join(strings.Fields(o.Doc), " "); doc != "" {
		return doc
	}
	return fmt.Sprintf("the stages command documents option %q", o.Name)
}
