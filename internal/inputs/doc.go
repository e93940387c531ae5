// Package inputs resolves everything a Stack feeds the engine besides its program: stack
// config (inline, from ConfigMaps, secret), environment variables (envRefs and PKO's
// deprecated envs, envSecrets and accessTokenSecret), the backend URL and the secrets
// passphrase default (one generated passphrase per namespace). For engines that run in the
// manager's process it also refuses what would reach past the Stack's namespace there:
// environment variables that steer the engine (ReservedEnv) and file:// backends outside the
// namespace's state directory. The Stack controller resolves them to fingerprint the desired state
// and to report missing references; the runner resolves them again to run.
//
// The fingerprint covers the identity and content of every referenced ConfigMap and Secret,
// not their metadata: a label or a finalizer (input protection adds one) changes nothing
// the engine sees. It is an HMAC under a key only the manager holds (Options.FingerprintKey,
// kept in its data directory), so a stored fingerprint confirms no guess of a weak secret.
package inputs
