// Command gitea is the Gitea forge, built from its published Go module. Upstream's main
// package is the module's root (gitea.dev), which `go build` would name gitea.dev: this
// package is the same few lines around its command line (upstream's main.go, MIT), so the
// binary is bin/gitea and its version is linked into main.Version.
package main

import (
	"os"
	"runtime"
	"strings"
	"time"

	"gitea.dev/cmd"
	"gitea.dev/modules/log"
	"gitea.dev/modules/setting"

	// The document renderers upstream's main registers.
	_ "gitea.dev/modules/markup/console"
	_ "gitea.dev/modules/markup/csv"
	_ "gitea.dev/modules/markup/jupyter"
	_ "gitea.dev/modules/markup/markdown"
	_ "gitea.dev/modules/markup/orgmode"

	"github.com/urfave/cli/v3"
)

// Set by the link flags (hack/tools.sh).
var (
	Version = "development"
	Tags    = ""
)

func init() {
	setting.AppVer = Version
	setting.AppBuiltWith = builtWith()
	setting.AppStartTime = time.Now().UTC()
}

func main() {
	cli.OsExiter = func(code int) {
		log.GetManager().Close()
		os.Exit(code)
	}
	app := cmd.NewMainApp(cmd.AppVersion{Version: Version, Extra: builtWith()})
	_ = cmd.RunMainApp(app, os.Args...) // RunMainApp reports its errors itself
	// Flush the queued logs before exiting, or they are lost.
	log.GetManager().Close()
}

func builtWith() string {
	if Tags == "" {
		return " built with " + runtime.Version()
	}
	return " built with " + runtime.Version() + " : " + strings.ReplaceAll(Tags, " ", ", ")
}
