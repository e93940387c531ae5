// Command gen writes the asset archives Gitea's bindata build embeds into a copy of its
// module, as upstream's `make generate-go` does (build/generate-bindata.go): its options
// (locales, licences, .gitignore and label templates), templates, public files and
// migration schemas. The module proxy's zip of Gitea lacks them (they are generated).
//
// Usage: go run ./gen <writable copy of the gitea.dev module>
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"gitea.dev/modules/assetfs"
)

// archives are the packages that embed a bindata.dat (relative to the module) and the
// directory each archives, as their go:generate lines say.
var archives = []struct{ pkg, dir string }{
	{"modules/options", "options"},
	{"modules/templates", "templates"},
	{"modules/public", "public"},
	{"modules/migration", "modules/migration/schemas"},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen <writable copy of the gitea.dev module>")
		os.Exit(2)
	}
	for _, a := range archives {
		src, dat := filepath.Join(os.Args[1], a.dir), filepath.Join(os.Args[1], a.pkg, "bindata.dat")
		if err := assetfs.GenerateEmbedBindata(src, dat); err != nil {
			fmt.Fprintf(os.Stderr, "gen: failed to archive %s: %v\n", src, err)
			os.Exit(1)
		}
	}
}
