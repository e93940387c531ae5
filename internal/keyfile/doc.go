// Package keyfile keeps the manager's HMAC keys in its data directory: one random key per
// file, created on first use. An HMAC under such a key names secret material (git
// credentials, the content of a Stack's Secrets) without letting anyone who sees the name
// confirm a guess of it.
package keyfile
