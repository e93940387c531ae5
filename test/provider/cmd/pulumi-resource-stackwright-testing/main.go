package main

import (
	"context"
	"fmt"
	"os"

	"github.com/stackwright/stackwright/test/provider"
)

func main() {
	prov, err := provider.New()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
	if err := prov.Run(context.Background(), provider.Name, provider.Version); err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
