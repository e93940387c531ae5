package main

import (
	"os"

	"github.com/stackwright/stackwright/internal/reaper"
)

func main() {
	os.Exit(reaper.Main(os.Args[1:]))
}
