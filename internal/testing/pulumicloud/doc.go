// Package pulumicloud is a fake of the few Pulumi Cloud REST endpoints the real pulumi CLI
// calls, with PULUMI_BACKEND_URL pointing at it and an access token, to open the Pulumi
// ESC environments a stack imports and to preview and update that stack. It lets tests
// show what only Pulumi Cloud can: that the environments named in a stack settings file
// reach the stack's configuration.
//
// It answers, for one organization and one access token:
//
//   - GET /api/user, GET /api/user/organizations/default and GET /api/capabilities (no
//     capabilities: the CLI falls back to whole checkpoints and single encryptions), which
//     the CLI asks when it logs in;
//   - POST /api/stacks/{org}/{project} (stack init), GET /api/stacks/{org}/{project}/{stack}
//     and GET .../export (the stack's state, for `stack output`);
//   - the update protocol of preview, up, refresh and destroy: POST .../{kind} to create
//     an update, POST .../update/{id} to start it (with an update token and no journaling),
//     then .../update/{id}/events/batch, checkpoint, renew_lease and complete;
//   - POST .../encrypt, .../decrypt and .../batch-decrypt, the service secrets provider,
//     whose "ciphertext" is the plaintext behind a marker: it protects nothing; and
//     .../decrypt/log-decryption and .../decrypt/log-batch-decryption, the audit log of
//     what `stack output --show-secrets` decrypted, which it drops;
//   - POST /api/esc/environments/{org}/yaml/open, which opens the anonymous environment the
//     CLI builds from a stack settings file's list of imports (as JSON: {"imports": [...]};
//     an inline YAML definition is refused), and GET .../yaml/open/{id}, which returns its
//     values. An import "project/env" names an environment set with
//     SetEnvironment; a bare "env" is ESC's project "default". The imports are merged in
//     order, a later one's values winning, objects merged key by key, as ESC merges imports.
//
// It records every import list it was asked to open (Opened) and every request it did not
// answer (Unanswered), so that a test fails on a request a new CLI version makes rather than
// on the CLI's retries and vague errors.
//
// It does not stand in for the rest of Pulumi Cloud or ESC: environments are plain
// values, with no fn:: functions, interpolation, secrets, providers, environmentVariables
// or files, no revisions, tags or access control; an unknown import is answered with one
// diagnostic whose wording is the fake's, not ESC's. Stacks have no history, tags, teams,
// policies, deployments or webhooks; locking is not enforced (an update never conflicts);
// checkpoints are kept whole and only the latest one; the update events are accepted and
// dropped. Tokens never expire. Nothing is persisted beyond the test.
package pulumicloud
