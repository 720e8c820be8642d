// Package layout checks the rules of the repository's structure that a reader
// relies on (issue 25): the wiring reads as named steps, a backend lives in its
// own places, and hack/cluster.sh stays a wrapper of the Go program.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/metricscale/metricscale/hack/backends"
)

// root is the repository's top, from this package's folder.
const root = "../.."

// maxFuncLines bounds the wiring's functions, so that it reads as named steps
// rather than one long function.
const maxFuncLines = 80

func TestWiringFunctionsShort(t *testing.T) {
	t.Parallel()
	for _, pkg := range []string{"adapter/app", "autoscaler/app"} {
		t.Run(pkg, func(t *testing.T) {
			t.Parallel()
			files, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			longest, longestLines, funcs := "", 0, 0
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
					name := filepath.Base(file) + ": " + fd.Name.Name
					lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
					if lines > longestLines {
						longest, longestLines = name, lines
					}
					if lines > maxFuncLines {
						t.Errorf("%s is %d lines, more than %d: split it into named steps", name, lines, maxFuncLines)
					}
				}
			}
			if funcs == 0 {
				t.Fatal("no function found: the check read nothing")
			}
			t.Logf("longest of %d functions: %s, %d lines", funcs, longest, longestLines)
		})
	}
}

// TestBackendPlaces: outside providers/NAME, the non-test Go and shell files that
// name a queue backend (package doc comments aside) sit in its development
// backend, its convert trigger and the catalog only.
func TestBackendPlaces(t *testing.T) {
	t.Parallel()
	allowed := []string{"hack/backends", "autoscaler/convert", "providers/catalog"}
	var files []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." && rel != ".ci" || d.Name() == "_output" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go") || strings.HasSuffix(rel, ".sh") || rel == ".ci/run" {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := backends.Names()
	if len(names) == 0 {
		t.Fatal("no development backend registered: the check reads nothing")
	}
	for _, name := range names {
		word := regexp.MustCompile(`(?i)\b` + name + `\b`)
		places := map[string]bool{}
		for _, rel := range files {
			if strings.HasPrefix(rel, "providers/"+name+"/") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(root, rel))
			if err != nil {
				t.Fatal(err)
			}
			if word.Match(withoutPackageDoc(rel, data)) {
				places[filepath.Dir(rel)] = true
			}
		}
		for dir := range places {
			if !slices.Contains(allowed, dir) {
				t.Errorf("%s is named in %s: outside providers/%s it belongs only in %s", name, dir, name, strings.Join(allowed, ", "))
			}
		}
	}
}

// withoutPackageDoc drops a Go file's package doc comment, which may say what
// the package serves.
func withoutPackageDoc(rel string, data []byte) []byte {
	if !strings.HasSuffix(rel, ".go") {
		return data
	}
	f, err := parser.ParseFile(token.NewFileSet(), rel, data, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		return data
	}
	return data[f.Package-1:]
}

func TestClusterScriptIsAWrapper(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, "hack/cluster.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > 60 {
		t.Errorf("hack/cluster.sh is %d lines: it is a wrapper of hack/cluster/cmd/cluster, at most 60", n)
	}
	scripts, err := filepath.Glob(filepath.Join(root, "hack/backends/*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) > 0 {
		t.Errorf("hack/backends has shell scripts %v: the development backends are Go", scripts)
	}
}
