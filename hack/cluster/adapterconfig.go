package cluster

import (
	"strings"
)

// clusterDirMark stands for the cluster's state folder in hack/adapter-config.yaml and
// in the backends' fragments (the files they name, such as tokens and passwords, live
// there).
const clusterDirMark = "@CLUSTER_DIR@"

// AdapterConfig is the local adapter's config: base merged with the fragments
// (MergeAdapterConfig), with the state folder dir written for each @CLUSTER_DIR@.
func AdapterConfig(dir string, base []byte, fragments ...[]byte) []byte {
	return []byte(strings.ReplaceAll(string(MergeAdapterConfig(base, fragments...)), clusterDirMark, dir))
}

// MergeAdapterConfig merges adapter config fragments into base, line by line so that
// comments stay: base's top-level settings and providers, then each fragment's providers;
// each fragment's routes before base's (first match wins, and base ends with the memory
// provider's '*' catch-all). A fragment's settings other than providers and routes, and
// the comments before base's first key, are left out.
func MergeAdapterConfig(base []byte, fragments ...[]byte) []byte {
	files := append([][]byte{base}, fragments...)
	var other strings.Builder
	providers := make([]strings.Builder, len(files))
	routes := make([]strings.Builder, len(files))
	for i, f := range files {
		section := ""
		for _, line := range splitLines(string(f)) {
			switch {
			case strings.HasPrefix(line, "providers:"):
				section = "providers"
				continue
			case strings.HasPrefix(line, "routes:"):
				section = "routes"
				continue
			case line != "" && !strings.ContainsRune(" #-", rune(line[0])):
				section = "other"
			}
			switch section {
			case "other":
				if i == 0 {
					other.WriteString(line + "\n")
				}
			case "providers":
				providers[i].WriteString(line + "\n")
			case "routes":
				routes[i].WriteString(line + "\n")
			}
		}
	}
	var out strings.Builder
	out.WriteString(other.String())
	out.WriteString("providers:\n")
	for i := range files {
		out.WriteString(providers[i].String())
	}
	out.WriteString("routes:\n")
	for i := 1; i < len(files); i++ {
		out.WriteString(routes[i].String())
	}
	out.WriteString(routes[0].String())
	return []byte(out.String())
}

// splitLines splits text into lines without their newlines (no empty last line).
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
