package version

// Version is set with -ldflags "-X github.com/stackwright/stackwright/internal/version.Version=...".
var Version = "dev"
