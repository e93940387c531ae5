package engine

import (
	"os"
	"testing"

	"github.com/stackwright/stackwright/internal/reaper"
)

// TestMain lets the engine's runs here use reapers, as the stackwright binary does.
func TestMain(m *testing.M) {
	reaper.Init()
	os.Exit(m.Run())
}
