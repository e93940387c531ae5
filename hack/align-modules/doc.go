// Command align-modules raises every module that two of the repository's aligned Go
// modules (repo.AlignedModules: its own, the Kubernetes, pulumi and YAML language host
// tools, the test provider, stackwright-unlock) both require to the newest version any of
// them requires, and tidies them, until they agree. Run it after bumping a dependency of
// any of them:
//
//	go run ./hack/align-modules
//
// TestModules_BuiltTogether_RequireOneVersion (internal/testing/repo) fails while they
// disagree.
package main
