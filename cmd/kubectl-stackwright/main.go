package main

import (
	"fmt"
	"os"

	"github.com/stackwright/stackwright/internal/console"
	"github.com/stackwright/stackwright/internal/kubectlplugin"
	"github.com/stackwright/stackwright/internal/scheme"
)

func main() {
	s, err := scheme.New()
	if err == nil {
		err = kubectlplugin.NewCommand(s, os.Stdout, nil, console.Command).Execute()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
