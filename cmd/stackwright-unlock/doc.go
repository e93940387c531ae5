// Command stackwright-unlock deletes the lock objects of a self-managed Pulumi backend
// (s3://, gs://, azblob://) that a lock conflict listed, through the blob library the
// pulumi CLI uses (gocloud.dev), with its URL parameters and credential chains, read from
// its own environment. The engine runs it, with a run's environment, only for a stack that
// does not exist (`pulumi cancel` cannot act on it) and only after proving every holder of
// the locks gone; it is not meant to be run by hand.
//
// It is a module of its own so that the cloud SDKs it needs stay out of the operator's.
package main
