// Package clip shortens text for the places that bound it: condition, event and violation
// messages, table cells. One rule everywhere: the result is at most the bound in bytes (the
// API server counts bytes), cut at a rune boundary, and the cut is marked with "…".
package clip
