package builtin

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/expr-lang/expr/ast"
	exprbuiltin "github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/conf"
	"github.com/expr-lang/expr/vm/runtime"

	"github.com/fencepost-dev/fencepost/internal/fastjson"
)

// An expression runs with expr's memory budget: a million units, a byte
// of a string or an element of an array or map. expr's VM counts ranges,
// array and map literals, sorts and repeat(), and fails the run with
// "memory budget exceeded" past the budget; it does not count what the
// other operators and builtins build (+ on strings, replace, join,
// upper, split, string, toJSON, ...), so reduce(1..33, #acc + #acc, "x")
// built an 8 GiB string and killed the process.
//
// budgetPatch routes each of those through a function of its own that
// expr runs as a "safe" builtin, as it runs repeat(): it refuses, before
// building it, a result that would be larger than the whole budget on
// its own (estimate), and reports the size of what it built, which the
// VM adds to the run's count. So no operator builds more than the budget
// at once, and a run builds at most about twice the budget in all.

// budget is the expression memory budget (expr's default, which the
// evaluators' VMs use).
var budget = int(conf.DefaultMemoryBudget)

// budgetPrefix starts the names of the budgeted functions: a name with
// a dot, which no expression can write.
const budgetPrefix = "fencepost.budget."

// budgetAdd is the budgeted + (of strings, or of values whose type is
// not known when compiling).
const budgetAdd = budgetPrefix + "+"

// budgetedBuiltins are expr's builtins that build a string, array or
// map (budgetPatch renames their calls to budgeted copies), with, for
// those whose result can be much larger than their arguments, the
// estimate of its size.
var budgetedBuiltins = map[string]func(args []any) int{
	"string": deepArgs, "join": deepArgs, "concat": deepArgs, "flatten": deepArgs,
	"replace": replaceSize,
	"trim":    nil, "trimPrefix": nil, "trimSuffix": nil, "upper": nil, "lower": nil,
	"split": nil, "splitAfter": nil, "toBase64": nil, "fromBase64": nil,
	"keys": nil, "values": nil, "toPairs": nil, "fromPairs": nil,
	"reverse": nil, "uniq": nil, "sort": nil, "take": nil,
}

// budgetedFuncs are this package's functions of the language that
// build a string or value: budgetPatch turns their calls into calls of
// budgeted copies.
var budgetedFuncs = map[string]*exprbuiltin.Function{
	"toJSON":   {Func: toJSON, Types: []reflect.Type{reflect.TypeOf(toJSONTypes).Elem()}},
	"fromJSON": {Func: fromJSON, Types: []reflect.Type{reflect.TypeOf(fromJSONTypes).Elem()}},
}

func init() {
	register := func(f *exprbuiltin.Function) {
		exprbuiltin.Index[f.Name] = len(exprbuiltin.Builtins)
		exprbuiltin.Builtins = append(exprbuiltin.Builtins, f)
	}
	register(&exprbuiltin.Function{Name: budgetAdd, Safe: add, Validate: addType})
	for name, estimate := range budgetedBuiltins {
		orig := exprbuiltin.Builtins[exprbuiltin.Index[name]]
		register(budgeted(name, orig, estimate))
	}
	for name, f := range budgetedFuncs {
		register(budgeted(name, f, deepArgs))
	}
}

// budgeted is a copy of f, named for budgetPatch, that runs as a safe
// builtin: it refuses a call whose estimate (if any) is over the budget,
// and reports the size of its result.
func budgeted(name string, f *exprbuiltin.Function, estimate func([]any) int) *exprbuiltin.Function {
	safe := f.Safe // counts what it builds already
	if safe == nil {
		call := f.Func
		if fast := f.Fast; call == nil {
			call = func(args ...any) (any, error) { return fast(args[0]), nil }
		}
		safe = func(args ...any) (any, uint, error) {
			out, err := call(args...)
			if err != nil {
				return nil, 0, err
			}
			return out, uint(shallowSize(out)), nil
		}
	}
	return &exprbuiltin.Function{
		Name: budgetPrefix + name, Types: f.Types, Validate: f.Validate, Deref: f.Deref,
		Safe: func(args ...any) (any, uint, error) {
			if estimate != nil {
				if n := estimate(args); n > budget {
					return nil, 0, overBudget(name, n)
				}
			}
			return safe(args...)
		},
	}
}

// overBudget is the error of a call whose result would be n units.
func overBudget(what string, n int) error {
	return fmt.Errorf("memory budget exceeded: %s would build more than %d bytes or elements, the most an expression may use", what, min(n, budget))
}

var (
	anyReflect    = reflect.TypeFor[any]()
	stringReflect = reflect.TypeFor[string]()
)

// addType is the type of a budgeted a + b: a string of strings, else not
// known (budgetPatch wraps only + whose operands may be strings).
func addType(args []reflect.Type) (reflect.Type, error) {
	if len(args) == 2 && args[0].Kind() == reflect.String && args[1].Kind() == reflect.String {
		return stringReflect, nil
	}
	return anyReflect, nil
}

// add is a + b, counting a string it builds.
func add(args ...any) (any, uint, error) {
	a, aok := args[0].(string)
	b, bok := args[1].(string)
	if !aok || !bok {
		return runtime.Add(args[0], args[1]), 0, nil
	}
	n := len(a) + len(b)
	if n > budget {
		return nil, 0, overBudget("+", n)
	}
	return a + b, uint(n), nil
}

// replaceSize is the length of replace(s, old, new[, n])'s result.
func replaceSize(args []any) int {
	s, _ := args[0].(string)
	old, _ := args[1].(string)
	repl, _ := args[2].(string)
	count := strings.Count(s, old)
	if len(args) == 4 {
		if n, ok := args[3].(int); ok && n >= 0 {
			count = min(count, n)
		}
	}
	return len(s) + count*(len(repl)-len(old))
}

// deepArgs is the size of everything args hold (deepSize), at most a
// little over the budget.
func deepArgs(args []any) int {
	n := 0
	for _, a := range args {
		n += deepSize(a, budget-n)
		if n > budget {
			break
		}
	}
	return n
}

// deepSize is the size of v in budget units, strings and containers
// counted with all they hold (an array holding one string 100 times
// counts it 100 times: so would its JSON or its string form), plus one
// per value so that the walk ends soon. It stops once over limit.
func deepSize(v any, limit int) int {
	n := 0
	var walk func(v any)
	walk = func(v any) {
		n++
		switch x := v.(type) {
		case string:
			n += len(x)
		case []any:
			n += len(x)
			for _, e := range x {
				if n > limit {
					return
				}
				walk(e)
			}
		case map[string]any:
			n += len(x)
			for k, e := range x {
				if n > limit {
					return
				}
				n += len(k)
				walk(e)
			}
		default:
			if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array || rv.Kind() == reflect.Map {
				n += rv.Len()
				if rv.Kind() != reflect.Map && rv.Type().Elem().Kind() == reflect.String {
					for i := 0; i < rv.Len() && n <= limit; i++ {
						n += rv.Index(i).Len()
					}
				}
			}
		}
	}
	walk(v)
	return n
}

// appendJSON appends v's compact JSON to dst (fastjson.Append: as
// encoding/json writes it, map keys sorted, without HTML escaping: a
// record value is not HTML), refusing a value larger than the budget
// before writing it: an array may hold one long string many times.
// Scalars are written at once, without measuring them.
func appendJSON(dst []byte, v any) ([]byte, error) {
	if b, ok := fastjson.AppendScalar(dst, v); ok {
		return b, nil
	}
	if n := deepSize(v, budget); n > budget {
		return dst, overBudget("JSON encoding", n)
	}
	return fastjson.Append(dst, v)
}

// shallowSize is what a result adds to the count: the bytes of a
// string, the elements of an array or map (what they hold is counted
// where it was built).
func shallowSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []any:
		return len(x)
	case map[string]any:
		return len(x)
	case nil, int, float64, bool:
		return 0
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map || rv.Kind() == reflect.String {
		return rv.Len()
	}
	return 0
}

// budgetPatch routes the operators and calls that build strings, arrays
// or maps through their budgeted copies (see above).
type budgetPatch struct{}

// Visit implements ast.Visitor.
func (budgetPatch) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		if n.Operator == "+" && mayBeString(n.Left) && mayBeString(n.Right) && !(isConst(n.Left) && isConst(n.Right)) {
			ast.Patch(node, &ast.BuiltinNode{Name: budgetAdd, Arguments: []ast.Node{n.Left, n.Right}})
		}
	case *ast.BuiltinNode:
		if _, ok := budgetedBuiltins[n.Name]; ok {
			ast.Patch(node, &ast.BuiltinNode{Name: budgetPrefix + n.Name, Arguments: n.Arguments, Throws: n.Throws})
		}
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && budgetedFuncs[id.Value] != nil {
			ast.Patch(node, &ast.BuiltinNode{Name: budgetPrefix + id.Value, Arguments: n.Arguments})
		}
	}
}

// isConst reports whether n is a string literal: + of two is folded
// when compiling (and no larger than the source).
func isConst(n ast.Node) bool {
	_, ok := n.(*ast.StringNode)
	return ok
}

// mayBeString reports whether n's value may be a string: its type is
// string, or not known when compiling.
func mayBeString(n ast.Node) bool {
	t := n.Type()
	return t == nil || t.Kind() == reflect.String || t.Kind() == reflect.Interface
}

// isToJSONCall reports whether n is a call toJSON(x) of one argument,
// as written or as budgetPatch renamed it.
func isToJSONCall(n ast.Node) bool {
	switch c := n.(type) {
	case *ast.CallNode:
		id, ok := c.Callee.(*ast.IdentifierNode)
		return ok && id.Value == "toJSON" && len(c.Arguments) == 1
	case *ast.BuiltinNode:
		return c.Name == budgetPrefix+"toJSON" && len(c.Arguments) == 1
	}
	return false
}
