package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds the functions of this package, so that the wiring
// reads as named steps rather than one long function.
const maxFuncLines = 80

// TestFunctionsShort fails on a function of this package (tests aside)
// longer than maxFuncLines, from its func line to its closing brace.
func TestFunctionsShort(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	longest, funcs := "", 0
	longestLines := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			funcs++
			lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if lines > longestLines {
				longest, longestLines = file+": "+fd.Name.Name, lines
			}
			if lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d: split it into named steps", file, fd.Name.Name, lines, maxFuncLines)
			}
		}
	}
	if funcs == 0 {
		t.Fatal("no function found: the check read nothing")
	}
	t.Logf("longest of %d functions: %s, %d lines", funcs, longest, longestLines)
}
