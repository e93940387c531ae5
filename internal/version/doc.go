// Package version reports the build's version, stamped by the linker.
package version
