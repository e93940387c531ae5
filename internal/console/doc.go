// Package console is `kubectl stackwright ui`: a web console that the plugin serves on the
// loopback interface to the person who runs it. Every read and every write goes to the API
// server with that person's kubeconfig credentials (kubectlplugin.Env), so the API server's
// RBAC and admission (the template approval policy among it) apply unchanged: the console
// holds no credentials of its own and runs nothing in the cluster.
//
// Pages (hash-routed, in the embedded assets/): the fleet of Stacks, a Stack with its
// conditions, masked outputs and Update timeline, an Update's runner logs, a preview's plan
// with Approve and Reject, StackRollouts with their waves, and StackTemplates with their
// revisions and instances. They stay live through one Server-Sent Events stream fed by
// metadata-only watches: it says which object changed, never what it holds, and the page
// reads the view again.
//
// What is served is built from views of the objects (views.go), never the objects
// themselves: a Stack's spec may hold clear-text secrets (spec.secrets), so only its
// summary leaves, and outputs come from status.outputs, where the controller has replaced
// secret values by "[secret]". Secrets are never read.
//
// Security (server.go): the listener is a loopback address; every request must carry the
// random token, from the URL the command prints (which sets an HttpOnly, SameSite=Strict
// cookie and redirects to a token-less URL) or that cookie; a Host header other than the
// served address is refused (DNS rebinding); a POST also needs the page's custom header
// and a same-origin Origin (CSRF).
package console
