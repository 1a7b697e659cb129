package stages_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/fencepost-dev/fencepost"

// enginePackage reports whether path is one of the engine's packages:
// what a plugin must not depend on, since it may change at any time.
func enginePackage(path string) bool {
	return strings.HasPrefix(path, module+"/internal/engine/") || path == module+"/pipeline"
}

// TestPluginPackagesImportNoEngine keeps the plugin surface apart from the
// engine: a stage author's packages (stages, the built-in stages) must
// not depend, even indirectly, on the engine's steps, its offset model or
// the pipeline that wires them.
func TestPluginPackagesImportNoEngine(t *testing.T) {
	for _, pkg := range []string{module + "/stages", module + "/stages/builtin"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, pkg) {
			t.Fatalf("go list -deps %s did not list the package itself: %q", pkg, deps)
		}
		for _, d := range deps {
			if enginePackage(d) {
				t.Errorf("%s depends on the engine package %s: the plugin API must not", pkg, d)
			}
		}
	}
}

// TestStagetestAPIShowsNoEngineType allows stagetest to run the engine's
// process step (that is its job) but not to show an engine type in its
// exported API: a plugin author's tests must keep compiling when the
// engine changes.
func TestStagetestAPIShowsNoEngineType(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("stagetest", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stagetest sources found (%v)", err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		engine := map[string]bool{} // local names of engine imports
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !enginePackage(path) {
				continue
			}
			name := filepath.Base(path)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			engine[name] = true
		}
		for _, where := range exportedTypeExprs(file) {
			checked++
			ast.Inspect(where.expr, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && engine[x.Name] {
						t.Errorf("%s: exported %s shows the engine type %s.%s", fset.Position(sel.Pos()), where.name, x.Name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
	if checked == 0 {
		t.Fatal("found no exported declaration in stagetest: the check checked nothing")
	}
}

type typeExpr struct {
	name string
	expr ast.Expr
}

// exportedTypeExprs returns the type expressions an importer of the file
// sees: exported functions' and methods' signatures, exported types
// (exported fields and methods of structs and interfaces), and the types
// of exported variables and constants.
func exportedTypeExprs(f *ast.File) []typeExpr {
	var out []typeExpr
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
				continue
			}
			out = append(out, typeExpr{d.Name.Name, d.Type})
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, exportedParts(s.Name.Name, s.Type)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Type != nil {
							out = append(out, typeExpr{n.Name, s.Type})
						}
					}
				}
			}
		}
	}
	return out
}

func exportedReceiver(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// exportedParts returns the parts of a type declaration an importer sees:
// the exported fields of a struct (and embedded ones), the exported
// methods of an interface, or the whole type otherwise.
func exportedParts(name string, t ast.Expr) []typeExpr {
	var fields *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return []typeExpr{{name, t}}
	}
	var out []typeExpr
	for _, f := range fields.List {
		if len(f.Names) == 0 {
			out = append(out, typeExpr{name + " (embedded)", f.Type})
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, typeExpr{name + "." + n.Name, f.Type})
			}
		}
	}
	return out
}
