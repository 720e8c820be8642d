package autoscaler_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/metricscale/metricscale"

// TestNoAdapterImport keeps the autoscaler and the adapter peer programs: no
// package of the autoscaler depends, directly or through another package of
// this module, on a package of the adapter. What both need (the change
// feed's wire format) lives in providers/changefeed. Test files are left
// out, as in `go list -deps`.
func TestNoAdapterImport(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var start []string
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			pkg := module + "/autoscaler"
			if path != "." {
				pkg += "/" + filepath.ToSlash(path)
			}
			start = append(start, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// via records, for each package reached, the package that imported it,
	// so that a failure shows the chain.
	via := map[string]string{}
	for _, p := range start {
		via[p] = ""
	}
	queue := append([]string(nil), start...)
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		imports, err := moduleImports(root, pkg)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range imports {
			if _, seen := via[imp]; seen {
				continue
			}
			via[imp] = pkg
			queue = append(queue, imp)
		}
	}
	var bad []string
	for p := range via {
		if p == module+"/adapter" || strings.HasPrefix(p, module+"/adapter/") {
			bad = append(bad, p)
		}
	}
	sort.Strings(bad)
	for _, p := range bad {
		chain := []string{p}
		for q := via[p]; q != ""; q = via[q] {
			chain = append(chain, q)
		}
		t.Errorf("the autoscaler depends on %s: %s", p, strings.Join(chain, " ← "))
	}
	if len(via) <= len(start) {
		t.Fatalf("walked %d packages from %d: the import walk found nothing", len(via), len(start))
	}
}

// moduleImports returns the imports of this module made by pkg's non-test Go
// files (all of them, whatever their build constraints).
func moduleImports(root, pkg string) ([]string, error) {
	dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(pkg, module)))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, s := range f.Imports {
			imp, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return nil, err
			}
			if imp == module || strings.HasPrefix(imp, module+"/") {
				out = append(out, imp)
			}
		}
	}
	return out, nil
}
