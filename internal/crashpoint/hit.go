//go:build !chaos

package crashpoint

// Hit does nothing: the binary was built without the chaos tag.
func Hit(string) {}
