// Package reapertest builds stackwright-reaper for a test binary and has the engine use it,
// as the stackwright binary uses the one installed next to it.
package reapertest
