package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// HostCABundle is where Debian-family build hosts keep the CA bundle the base layer copies.
// Go's crypto/x509 looks for this path first on Linux.
const HostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// The accounts are what a static binary needs: os/user and libraries that log the user
// name resolve it from these files, and tools like ssh refuse to run for a uid with no
// passwd entry. Login shells point nowhere because there is no shell in the image.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group = "root:x:0:\n" +
		"nonroot:x:65532:\n"
	// Go already reads /etc/hosts before DNS without this file, but glibc-style resolvers
	// default to DNS first; saying so keeps pod hostAliases authoritative for any of them.
	nsswitch = "hosts: files dns\n"
)

// baseEntries lists the base layer: a distroless-like skeleton for static binaries. The CA
// bundle is copied from caBundle when that file exists; an empty caBundle skips it.
func baseEntries(caBundle string) ([]entry, error) {
	entries := []entry{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte(nsswitch)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/nonroot", dir: true, mode: 0o755, uid: NonrootUID, gid: NonrootGID},
		{name: "root", dir: true, mode: 0o700},
		{name: "tmp", dir: true, mode: fs.ModeSticky | 0o777},
	}
	if caBundle == "" {
		return entries, nil
	}
	// Read rather than streamed: the bundle is small and its bytes must be part of the
	// layer cache key, so a host whose bundle changed gets a new layer.
	certs, err := os.ReadFile(caBundle)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return entries, nil
	case err != nil:
		return nil, fmt.Errorf("failed to read CA bundle: %w", err)
	}
	return append(entries,
		entry{name: "etc/ssl", dir: true, mode: 0o755},
		entry{name: "etc/ssl/certs", dir: true, mode: 0o755},
		entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
	), nil
}
