// Package workspace resolves PKO v2's custom source: a Stack with no projectRepo,
// fluxSource or programRef whose workspaceTemplate names an image and a local.dir, the
// program being baked into that image. Nothing is fetched or stored: the runner Pod runs
// the image and copies the program out of it, so only the Job executor can run it.
package workspace
