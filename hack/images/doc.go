// Command images writes Stackwright's container images as OCI image-layout tar archives
// (`ctr -n k8s.io images import FILE`) from the static binaries in --bin; `make images`
// builds those first. No Docker daemon or registry is involved.
package main
