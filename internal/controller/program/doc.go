// Package program is the Program controller: it renders each Program into a Pulumi YAML
// project, stores the tarball in the content-addressed artifact store and publishes the
// digest and revision in the Program's status, where the Stack controller picks them up.
// Programs carry no finalizer: artifacts outlive them in the store, and a Stack destroys
// with the last digest it recorded even after its Program is gone.
package program
