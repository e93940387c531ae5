package engine

import (
	"os"
	"testing"

	"github.com/stackwright/stackwright/internal/testing/reapertest"
)

// TestMain has the engine's runs here use a reaper, as the stackwright binary's do.
func TestMain(m *testing.M) { os.Exit(reapertest.Run(m)) }
