// Package inputs resolves everything a Stack feeds the engine besides its program: stack
// config (inline, from ConfigMaps, secret), environment variables (envRefs and PKO's
// deprecated envs, envSecrets and accessTokenSecret), the backend URL and the secrets
// passphrase default. The Stack controller resolves them to fingerprint the desired state
// and to report missing references; the runner resolves them again to run.
//
// The fingerprint covers the identity and resourceVersion of every referenced ConfigMap and
// Secret rather than their content: a content change always bumps the resourceVersion, and
// no hash of secret material is ever stored where a weak secret could be guessed from it.
package inputs
