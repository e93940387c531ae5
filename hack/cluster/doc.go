// Command stackwright-cluster starts and stops the one-node cluster of `make cluster`
// (internal/testing/cluster).
//
//	stackwright-cluster up [--image FILE]...   start in the background, wait for Ready
//	stackwright-cluster load FILE...           import image archives into the node
//	stackwright-cluster down [--keep-state]    stop and clean up
//	stackwright-cluster kubeconfig             print the admin kubeconfig path
package main
