// Package sbom describes what a release image ships as a CycloneDX bill of materials, read
// from the Go build info every binary carries: the binary (its main module, version, Go
// version, platform, SHA-256) and each module linked into it. Nothing is scanned or guessed:
// a binary without build info is refused, so the list cannot silently miss one.
//
// The output is reproducible: the timestamp is the release's SOURCE_DATE_EPOCH and the
// serial number is derived from the subject, so the same inputs give the same document.
package sbom
