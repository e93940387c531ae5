package engine

import (
	"fmt"
	"os"
	"testing"

	"github.com/stackwright/stackwright/internal/testing/reapertest"
)

// TestMain has the engine's runs here use a reaper, as the stackwright binary's do.
func TestMain(m *testing.M) {
	done, err := reapertest.Install()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	done()
	os.Exit(code)
}
